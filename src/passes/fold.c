/* Constant folding: an operator whose operands are all constants becomes a
 * constant, computed by the kernels' own code (the operator's block
 * primitive on one element), so a folded value is the bits a kernel would
 * compute (docs/numerics.md); operators without a primitive with the
 * reference semantics, rounded to the dtype.
 * Integers are folded only while exact in double (below 2^53); larger ones
 * are left to the kernel's exact integer arithmetic.  An output that folds
 * is written by the copy kernel smelt__prog_finalize gives it. */
#include <math.h>

#include "passes.h"

/* op(a...) by the kernels' block primitive for the operand dtype in_dt */
static bool fold_by_kernel(const smelt__prog *p, const smelt__inst *in, smelt_dtype in_dt, const double *a,
                           double *y)
{
    char name[SMELT_BLK_NAME_MAX], arg[3][8] = {{0}}, out[8] = {0};
    smelt__blk_name(name, in->op, in_dt, in->dtype);
    smelt__blk_prim f = smelt__blk_find(name);
    if (!f)
        return false;
    for (int j = 0; j < in->nin; j++)
        smelt__elem_store(p->v[in->in[j]].dtype, arg[j], a[j]);
    f(1, out, arg[0], arg[1], arg[2]);
    *y = smelt__elem_load(in->dtype, out);
    return true;
}

int smelt__pass_fold(smelt__prog *p)
{
    int folded = 0;
    smelt__prog_uses(p);
    for (int i = 0; i < p->n; i++) {
        smelt__inst *in = &p->v[i];
        if (smelt__ops[in->op].cls == SMELT_CLASS_SOURCE)
            continue;
        double a[3] = {0, 0, 0};
        bool ok = true; /* all operands constant, integers exact in double */
        const double exact = 9007199254740992.0; /* 2^53 */
        for (int j = 0; j < in->nin; j++) {
            const smelt__inst *s = &p->v[in->in[j]];
            ok = ok && s->op == SMELT_OP_CONST;
            a[j] = smelt__is_float(s->dtype) ? s->fval : (double)s->ival;
            ok = ok && (smelt__is_float(s->dtype) || fabs(a[j]) < exact);
        }
        if (!ok)
            continue;
        smelt_dtype in_dt = p->v[in->in[in->op == SMELT_OP_WHERE ? 1 : 0]].dtype;
        double y0;
        if (!fold_by_kernel(p, in, in_dt, a, &y0))
            y0 = smelt__eval_scalar(in->op, in_dt, in->dtype, a);
        if (!smelt__is_float(in->dtype) && !(fabs(y0) < exact))
            continue; /* the kernel's integer arithmetic is exact (and wraps) */
        double y = smelt__dtype_round_result(in->dtype, y0); /* f16/bf16: through f32 */
        in->op = SMELT_OP_CONST;
        in->nin = 0;
        in->fval = y;
        in->ival = smelt__is_float(in->dtype) ? 0 : (int64_t)y;
        folded++;
    }
    return folded;
}
