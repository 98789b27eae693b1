/* Constant folding: an operator whose operands are all constants becomes a
 * constant, computed by the kernels' own code (the operator's block
 * primitive on one element), so a folded value is the bits a kernel would
 * compute (docs/numerics.md); operators without a primitive with the
 * reference semantics, rounded to the dtype.
 * Integers are folded only while exact in double (below 2^53); larger ones
 * are left to the kernel's exact integer arithmetic.  An output that folds
 * is written by the copy kernel smelt__prog_finalize gives it.
 *
 * A reduction of a constant (n equal elements) folds by following the
 * kernels' one order of combination (src/ir/ir.h) in the accumulator's
 * dtype, up to FOLD_RED_MAX elements; a larger one is left to its kernel,
 * which reads the constant as an operand of strides 0.  A view of a
 * constant is the constant at the view's shape.  Operators over tensor
 * constants, and their views, fold into new tensor constants (fold_tensor). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

/* op(a...) by the kernels' block primitive for the operand dtype in_dt */
static bool fold_by_kernel(const smelt__prog *p, const smelt__inst *in, smelt_dtype in_dt, const double *a,
                           double *y)
{
    char name[SMELT_BLK_NAME_MAX], arg[3][8] = {{0}}, out[8] = {0};
    smelt__blk_name(name, in->op, in_dt, in->dtype);
    smelt__blk_prim f = smelt__blk_find(name, p->blk_isa);
    if (!f)
        return false;
    for (int j = 0; j < in->nin; j++)
        smelt__elem_store(p->v[in->in[j]].dtype, arg[j], a[j]);
    f(1, out, arg[0], arg[1], arg[2]);
    *y = smelt__elem_load(in->dtype, out);
    return true;
}

#define FOLD_RED_MAX ((int64_t)1 << 24) /* (folding costs ~n / 16384 + 1000 steps) */

/* a op b (sum, mean: +; prod: *) rounded to the accumulator's dtype */
static double red_step(smelt_op op, smelt_dtype acc, double a, double b)
{
    double r = op == SMELT_OP_PROD ? a * b : a + b; /* double, then float: one rounding (53 >= 2 * 24 + 2) */
    return acc == SMELT_F32 ? (double)(float)r : r;
}

/* Reduction in of n copies of the constant s, as its kernel combines
 * them, into in (a constant then); false when it is not folded. */
static bool fold_reduce(smelt__inst *in, const smelt__inst *s)
{
    smelt_op op = in->op;
    int rule = smelt__ops[op].rule;
    smelt_dtype dt = s->dtype, acc = smelt__red_acc(op, dt);
    int64_t n = smelt__red_count(s->ndim, s->shape, in->axes), iv = s->ival;
    double v = smelt__is_float(dt) ? s->fval : (double)s->ival, y = 0;
    if (n > FOLD_RED_MAX || (n == 0 && (rule == SMELT_RULE_SAME || rule == SMELT_RULE_ARG)))
        return false;
    if (rule == SMELT_RULE_ARG || rule == SMELT_RULE_BOOL) {
        iv = rule == SMELT_RULE_ARG ? 0 : n ? v != 0 : op == SMELT_OP_ALL;
        y = (double)iv;
    } else if (rule == SMELT_RULE_SAME) { /* max, min: the element, every bit of it */
        y = v;
    } else if (!smelt__is_float(acc)) { /* an i64 sum or product, wrapping: the order does not matter */
        uint64_t u = op == SMELT_OP_PROD, x = (uint64_t)iv;
        for (int64_t e = n; op == SMELT_OP_PROD && e; e >>= 1, x *= x)
            u = (e & 1) ? u * x : u;
        iv = (int64_t)(op == SMELT_OP_PROD ? u : x * (uint64_t)n);
        y = (double)iv;
    } else {
        /* a chunk: its lanes (each a run of copies from the identity), then
         * their tree; full chunks are all alike */
        double id = smelt__red_identity(op, acc), tot = id, full = id;
        for (int64_t c = 0; c * SMELT_RED_CHUNK < n; c++) {
            int64_t len = SMELT_MIN(SMELT_RED_CHUNK, n - c * SMELT_RED_CHUNK);
            double part;
            if (len == SMELT_RED_CHUNK && c > 0) {
                part = full;
            } else {
                double lane[SMELT_RED_LANES], run = id;
                int64_t q = len / SMELT_RED_LANES, rem = len % SMELT_RED_LANES;
                for (int64_t k = 0; k < q; k++)
                    run = red_step(op, acc, run, v);
                for (int l = SMELT_RED_LANES - 1; l >= 0; l--)
                    lane[l] = l < rem ? red_step(op, acc, run, v) : run;
                for (int d = SMELT_RED_LANES / 2; d >= 1; d >>= 1)
                    for (int l = 0; l < d; l++)
                        lane[l] = red_step(op, acc, lane[l], lane[l + d]);
                part = lane[0];
                if (len == SMELT_RED_CHUNK)
                    full = part;
            }
            tot = red_step(op, acc, tot, part);
        }
        if (op == SMELT_OP_MEAN)
            tot = acc == SMELT_F32 ? (double)(float)(tot / (double)n) : tot / (double)n;
        y = smelt__dtype_round_result(in->dtype, tot); /* f16/bf16: from the f32 accumulator */
    }
    in->op = SMELT_OP_CONST;
    in->nin = 0;
    in->fval = smelt__is_float(in->dtype) ? y : (double)iv;
    in->ival = smelt__is_float(in->dtype) ? 0 : iv;
    return true;
}

/* Tensor constants: an operator over constants (one a tensor at least) of
 * at most FOLD_TENSOR_MAX results, or a view of a tensor constant, becomes
 * a tensor constant, element by element as above (the kernels' primitive,
 * the view's strides).  Integers beyond 2^53 are left to the kernels. */
#define FOLD_TENSOR_MAX 65536
static bool fold_tensor(smelt__prog *p, smelt__inst *in)
{
    bool any = false;
    for (int j = 0; j < in->nin; j++) {
        int op = p->v[in->in[j]].op;
        if (op != SMELT_OP_CONST && op != SMELT_OP_TENSOR)
            return false;
        any = any || op == SMELT_OP_TENSOR;
    }
    int64_t cnt = smelt__numel(in->ndim, in->shape);
    if (!(any || (smelt__is_piece(in->op) && in->nin)) || cnt > FOLD_TENSOR_MAX || smelt__is_reduce(in->op))
        return false;
    size_t es = smelt__dtypes[in->dtype].size;
    smelt__blob *b = malloc(sizeof *b + (size_t)cnt * es + 1);
    smelt__blob **bl = realloc(p->blobs, sizeof *bl * (size_t)(p->nblobs + 1));
    if (bl)
        p->blobs = bl;
    if (!b || !bl) {
        free(b);
        return false; /* (folding is an optimisation) */
    }
    int64_t st[3][SMELT_MAX_DIMS], off = 0;
    bool ok = true;
    for (int64_t i = 0; smelt__is_piece(in->op) && i < cnt; i++) { /* a concat's or a pad's: by index */
        int ax = (int)in->vp[0];
        int64_t from = in->op == SMELT_OP_PAD ? in->vp[1] : 0, len = p->v[in->in[0]].shape[ax], idx[SMELT_MAX_DIMS];
        for (int64_t d = in->ndim - 1, rem = i; d >= 0; d--) {
            idx[d] = rem % in->shape[d];
            rem /= in->shape[d];
        }
        bool inside = idx[ax] >= from && idx[ax] < from + len;
        idx[ax] -= inside ? from : len;
        int j = !inside; /* the operand read (a pad's outside: its value) */
        const smelt__inst *a = &p->v[in->in[j < in->nin ? j : 0]];
        char cell[8] = {0};
        const char *src = (const char *)&in->vp[3];
        if (j < in->nin && a->op == SMELT_OP_TENSOR) {
            int64_t cs[SMELT_MAX_DIMS], o = 0;
            smelt__contig_strides(a->ndim, a->shape, cs);
            for (int d = 0; d < in->ndim; d++)
                o += idx[d] * cs[d];
            src = p->blobs[a->ival]->data + (size_t)o * es;
        } else if (j < in->nin) { /* a constant: its value's bits (every bit of an integer) */
            if (smelt__is_float(a->dtype))
                smelt__elem_store(a->dtype, cell, a->fval);
            else
                memcpy(cell, &a->ival, es);
            src = cell;
        }
        memcpy(b->data + (size_t)i * es, src, es);
    }
    for (int j = 0; j < in->nin && !smelt__is_piece(in->op); j++) { /* each operand's strides over the result's shape */
        const smelt__inst *a = &p->v[in->in[j]];
        int64_t cs[SMELT_MAX_DIMS];
        smelt__contig_strides(a->ndim, a->shape, cs);
        if (smelt__is_view(in->op)) {
            ok = smelt__view_strides(in->op, in->vp, in->ndim, in->shape, a->ndim, a->shape, cs, &off, st[j]);
            continue;
        }
        for (int d = 0; d < in->ndim; d++) {
            int ad = d - (in->ndim - a->ndim);
            st[j][d] = a->op == SMELT_OP_CONST || ad < 0 || a->shape[ad] == 1 ? 0 : cs[ad];
        }
    }
    const double exact = 9007199254740992.0; /* 2^53 */
    smelt_dtype in_dt = p->v[in->in[in->op == SMELT_OP_WHERE ? 1 : 0]].dtype;
    for (int64_t i = 0; ok && !smelt__is_piece(in->op) && i < cnt; i++) {
        double v[3] = {0, 0, 0};
        int64_t rem = i, o[3] = {off, 0, 0};
        for (int d = in->ndim - 1; d >= 0; d--) {
            int64_t idx = rem % in->shape[d];
            rem /= in->shape[d];
            for (int j = 0; j < in->nin; j++)
                o[j] += idx * st[j][d];
        }
        for (int j = 0; j < in->nin; j++) {
            const smelt__inst *a = &p->v[in->in[j]];
            v[j] = a->op == SMELT_OP_CONST ? (smelt__is_float(a->dtype) ? a->fval : (double)a->ival)
                                           : smelt__elem_load(a->dtype, p->blobs[a->ival]->data +
                                                                            (size_t)o[j] * smelt__dtypes[a->dtype].size);
            ok = ok && (smelt__is_float(a->dtype) || fabs(v[j]) < exact);
        }
        double y = v[0];
        if (!smelt__is_view(in->op) && ok && !fold_by_kernel(p, in, in_dt, v, &y))
            y = smelt__eval_scalar(in->op, in_dt, in->dtype, v);
        ok = ok && (smelt__is_float(in->dtype) || fabs(y) < exact);
        if (ok)
            smelt__elem_store(in->dtype, b->data + (size_t)i * es,
                              smelt__is_view(in->op) ? y : smelt__dtype_round_result(in->dtype, y));
    }
    if (!ok) {
        free(b);
        return false;
    }
    b->refs = 1;
    b->bytes = (size_t)cnt * es;
    b->hash = 0;
    in->op = SMELT_OP_TENSOR;
    in->nin = 0;
    in->ival = p->nblobs;
    p->blobs[p->nblobs++] = b;
    return true;
}

int smelt__pass_fold(smelt__prog *p)
{
    int folded = 0;
    smelt__prog_uses(p);
    for (int i = 0; i < p->n; i++) {
        smelt__inst *in = &p->v[i];
        if (smelt__ops[in->op].cls == SMELT_CLASS_SOURCE || smelt__ops[in->op].cls == SMELT_CLASS_LIBRARY ||
            smelt__ops[in->op].cls == SMELT_CLASS_GATHER)
            continue; /* (a library operator's operands are arrays, an indexed read's too) */
        if (smelt__is_reduce(in->op)) {
            folded += p->v[in->in[0]].op == SMELT_OP_CONST && fold_reduce(in, &p->v[in->in[0]]);
            continue;
        }
        if (smelt__is_view(in->op) && !smelt__is_piece(in->op) && p->v[in->in[0]].op == SMELT_OP_CONST) {
            /* every element the same */
            in->op = SMELT_OP_CONST;
            in->nin = 0;
            in->fval = p->v[in->in[0]].fval;
            in->ival = p->v[in->in[0]].ival;
            folded++;
            continue;
        }
        if (fold_tensor(p, in)) {
            folded++;
            continue;
        }
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
