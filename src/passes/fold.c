/* Constant folding: an operator whose operands are all constants becomes a
 * constant (computed with the reference semantics, rounded to its dtype).
 * An output that folds is written by the copy kernel smelt__prog_finalize
 * gives it. */
#include "../internal.h"

int smelt__pass_fold(smelt__prog *p)
{
    int folded = 0;
    smelt__prog_uses(p);
    for (int i = 0; i < p->n; i++) {
        smelt__inst *in = &p->v[i];
        if (smelt__ops[in->op].cls == SMELT_CLASS_SOURCE)
            continue;
        double a[3] = {0, 0, 0};
        bool all_const = true;
        for (int j = 0; j < in->nin; j++) {
            const smelt__inst *s = &p->v[in->in[j]];
            all_const = all_const && s->op == SMELT_OP_CONST;
            a[j] = smelt__is_float(s->dtype) ? s->fval : (double)s->ival;
        }
        if (!all_const)
            continue;
        smelt_dtype in_dt = p->v[in->in[in->op == SMELT_OP_WHERE ? 1 : 0]].dtype;
        double y = smelt__dtype_round(in->dtype, smelt__eval_scalar(in->op, in_dt, in->dtype, a));
        in->op = SMELT_OP_CONST;
        in->nin = 0;
        in->fval = y;
        in->ival = smelt__is_float(in->dtype) ? 0 : (int64_t)y;
        folded++;
    }
    return folded;
}
