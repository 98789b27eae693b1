/* Scalar semantics in double precision (from ops.def's ref column), the
 * float64 reference interpreter, and the evaluator constant folding uses. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

static double ref_sign(double a) { return a > 0 ? 1.0 : (a < 0 ? -1.0 : (a == 0 ? 0.0 : a)); }
static double ref_softplus(double a) { return fmax(a, 0.0) + log1p(exp(-fabs(a))); }
/* the composites in forms without cancellation or overflow in their tails;
 * at -inf silu, gelu and gelu_tanh give their limit, -0 */
static double ref_sigmoid(double a) { return a < -40.0 ? exp(a) : 1.0 / (1.0 + exp(-a)); }
static double ref_silu(double a) { return a < -800.0 ? -0.0 : a < -40.0 ? a * exp(a) : a / (1.0 + exp(-a)); }
static double ref_gelu(double a) { return a < -60.0 ? -0.0 : 0.5 * a * erfc(-a * 0.70710678118654752440); }
static double ref_gelu_tanh(double a)
{
    double z2 = 1.5957691216057307 * (a + 0.044715 * a * a * a); /* 2 sqrt(2/pi) (...) */
    return a < -60.0 ? -0.0 : a < -10.0 ? a * exp(z2) : a / (1.0 + exp(-z2));
}
/* NaN propagates; equal operands (0.0 and -0.0) give the second, or the
 * first where NumPy's float16 loop does (tie_first) */
static double ref_maximum(double a, double b, bool tie_first)
{
    return (a > b || isnan(a) || (tie_first && a == b)) ? a : b;
}
static double ref_minimum(double a, double b, bool tie_first)
{
    return (a < b || isnan(a) || (tie_first && a == b)) ? a : b;
}

/* the reductions' max and min: NaN propagates, and a tie of zeros gives
 * +0.0 (max) and -0.0 (min) whatever the order (ops.def) */
static double ref_redmax(double a, double b)
{
    return (a > b || isnan(a)) ? a : (a == b && a == 0) ? a + b : b;
}
static double ref_redmin(double a, double b)
{
    return (a < b || isnan(a)) ? a : (a == b && a == 0) ? -(-a - b) : b;
}

/* C's fmod (the sign of the dividend); integer division by zero gives 0 */
static double ref_fmod(double a, double b, bool isint)
{
    return isint && b == 0 ? 0 : fmod(a, b);
}

/* NumPy's floor_divide / remainder (npy_divmod for floats; integer division
 * by zero gives 0). */
static double ref_floordiv(double a, double b, bool isint)
{
    if (isint)
        return b == 0 ? 0 : floor(a / b);
    if (b == 0)
        return a / b;
    double mod = fmod(a, b), div = (a - mod) / b;
    if (mod != 0 && ((b < 0) != (mod < 0)))
        div -= 1.0;
    if (div != 0) {
        double fd = floor(div);
        if (div - fd > 0.5)
            fd += 1.0;
        return fd;
    }
    return copysign(0.0, a / b);
}

static double ref_mod(double a, double b, bool isint)
{
    if (isint)
        return b == 0 ? 0 : a - floor(a / b) * b;
    double mod = fmod(a, b); /* NaN when b is 0 */
    if (mod == 0)
        return copysign(0.0, b);
    return (b < 0) != (mod < 0) ? mod + b : mod;
}

static double ref_pow(double a, double b, bool isint)
{
    if (isint && b < 0)
        return a == 1 ? 1 : (a == -1 ? (fmod(b, 2) != 0 ? -1 : 1) : 0);
    return pow(a, b);
}

/* float -> integer conversion as the kernels do it: truncation; NaN and
 * out-of-range values give the most negative value (x86 behaviour, as in
 * NumPy on x86); u8 goes through i32 and keeps the low 8 bits (as NumPy on
 * x86: values beyond i32's range give 0). */
static double to_int(smelt_dtype dt, double v, smelt_dtype from)
{
    if (smelt__is_float(from)) {
        if (dt == SMELT_I32)
            return (v > -2147483649.0 && v < 2147483648.0) ? trunc(v) : -2147483648.0;
        if (dt == SMELT_U8)
            return smelt__dtype_round(SMELT_U8, to_int(SMELT_I32, v, from));
        bool in64 = v >= -9223372036854775808.0 && v < 9223372036854775808.0;
        return in64 ? trunc(v) : -9223372036854775808.0;
    }
    return smelt__dtype_round(dt, v);
}

double smelt__eval_scalar(smelt_op op, smelt_dtype in_dt, smelt_dtype out_dt, const double *v)
{
    double a = v[0], b = v[1], c = v[2];
    bool isint = !smelt__is_float(in_dt);
    SMELT_UNUSED(a), SMELT_UNUSED(b), SMELT_UNUSED(c), SMELT_UNUSED(isint);
    if (op == SMELT_OP_CAST) {
        if (out_dt == SMELT_BOOL)
            return a != 0;
        if (smelt__is_float(out_dt))
            return smelt__dtype_round(out_dt, a);
        return to_int(out_dt, a, in_dt);
    }
    switch (op) {
#define SMELT_OP(ID, nm, n, cls, rule, dts, cf, ci, ref) \
    case SMELT_OP_##ID:                                  \
        return (double)(ref);
#include "ops.def"
#undef SMELT_OP
    default:
        return 0;
    }
}

/* ---- the interpreter ------------------------------------------------- */

typedef struct rval {
    int ndim;
    int64_t shape[SMELT_MAX_DIMS];
    int64_t strides[SMELT_MAX_DIMS];
    double *data; /* owned unless borrowed */
    bool own;
} rval;

static int64_t bcast_offset(const rval *v, int ndim, const int64_t *shape, int64_t i)
{
    int64_t off = 0;
    for (int d = ndim - 1; d >= 0; d--) {
        int64_t idx = i % shape[d];
        i /= shape[d];
        int vd = d - (ndim - v->ndim);
        if (vd >= 0 && v->shape[vd] != 1)
            off += idx * v->strides[vd];
    }
    return off;
}

/* The reference combine of reduction op (ops.def's ref column): a
 * combined with b, or for ARG whether b beats a. */
static double red_combine(smelt_op op, double a, double b)
{
    double v[3] = {a, b, 0};
    return smelt__eval_scalar(op, SMELT_F64, SMELT_F64, v);
}

/* One result of reduction op over the n values x[0..n) (in order) of an
 * operand of dtype dt: float sums with Neumaier's compensation (the error
 * of the double result stays near one rounding), integer sums and
 * products wrapping in 64 bits as kernels do, the others in their order
 * (max and min do not depend on it).  st: SMELT_ERR_SHAPE for an empty
 * max, min, argmax or argmin. */
static double ref_reduce1(smelt_op op, smelt_dtype dt, const double *x, int64_t n, int *st)
{
    int rule = smelt__ops[op].rule;
    smelt_dtype acc = smelt__red_acc(op, dt);
    if (n == 0 && (rule == SMELT_RULE_SAME || rule == SMELT_RULE_ARG)) {
        *st = SMELT_ERR_SHAPE;
        return 0;
    }
    if (rule == SMELT_RULE_ARG) {
        int64_t best = 0;
        for (int64_t i = 1; i < n; i++)
            if (red_combine(op, x[best], x[i]) != 0)
                best = i;
        return (double)best;
    }
    if (!smelt__is_float(acc) && acc != SMELT_BOOL && rule == SMELT_RULE_SUM) {
        uint64_t u = op == SMELT_OP_PROD ? 1 : 0;
        for (int64_t i = 0; i < n; i++) {
            uint64_t v = (uint64_t)(int64_t)x[i];
            u = op == SMELT_OP_PROD ? u * v : u + v;
        }
        return (double)(int64_t)u;
    }
    if (op == SMELT_OP_SUM || op == SMELT_OP_MEAN) {
        double s = 0, c = 0;
        for (int64_t i = 0; i < n; i++) {
            double t = s + x[i];
            c += fabs(s) >= fabs(x[i]) ? (s - t) + x[i] : (x[i] - t) + s;
            s = t;
        }
        s = isfinite(s) ? s + c : s; /* inf and NaN as plain sums give them */
        return op == SMELT_OP_MEAN ? s / (double)n : s;
    }
    double a = smelt__red_identity(op, acc);
    for (int64_t i = 0; i < n; i++)
        a = red_combine(op, a, rule == SMELT_RULE_BOOL ? x[i] != 0 : x[i]);
    return a;
}

/* Reduction node n of operand s into r (its shape): for each result, the
 * reduced elements in row-major order of the reduced axes. */
static int ref_reduce(smelt_ctx *ctx, const smelt_node *n, const rval *s, rval *r)
{
    const smelt_node *a = n->in[0];
    int kd[SMELT_MAX_DIMS], rd[SMELT_MAX_DIMS], nk = 0, nr = 0;
    for (int d = 0; d < a->ndim; d++) {
        if (n->axes >> d & 1u)
            rd[nr++] = d;
        else
            kd[nk++] = d;
    }
    int64_t nred = smelt__red_count(a->ndim, a->shape, n->axes);
    int64_t nout = smelt__numel(n->ndim, n->shape);
    double *x = malloc(sizeof(double) * (size_t)(nred ? nred : 1));
    if (!x)
        return smelt__err(ctx, SMELT_ERR_NOMEM, "out of memory");
    int st = SMELT_OK;
    for (int64_t o = 0; o < nout && !st; o++) {
        int64_t base = 0, t = o;
        for (int k = nk - 1; k >= 0; k--) {
            int64_t sz = a->shape[kd[k]];
            base += (t % sz) * s->strides[kd[k]];
            t /= sz;
        }
        for (int64_t i = 0; i < nred; i++) {
            int64_t off = base;
            t = i;
            for (int k = nr - 1; k >= 0; k--) {
                int64_t sz = a->shape[rd[k]];
                off += (t % sz) * s->strides[rd[k]];
                t /= sz;
            }
            x[i] = s->data[off];
        }
        double y = ref_reduce1(n->op, a->dtype, x, nred, &st);
        r->data[o] = smelt__is_half(n->dtype) ? smelt__dtype_round_result(n->dtype, y) : y;
    }
    free(x);
    if (st)
        return smelt__err(ctx, st, "reference: %s of an empty axis (it has no identity)", smelt__ops[n->op].name);
    return SMELT_OK;
}

/* conv_taps (ops.def): each output element's taps and channels in order */
static void ref_conv_taps(const smelt_node *n, const rval *vals, rval *r, int64_t cnt)
{
    const rval *X = &vals[n->in[0]->id], *W = &vals[n->in[1]->id];
    int64_t sh = n->vp[0], sw = n->vp[1], dh = n->vp[2], dw = n->vp[3], G = n->vp[4], Wq = n->vp[7];
    int64_t O = n->shape[1], OH = n->shape[2], Cg = W->shape[1], KH = W->shape[2], KW = W->shape[3];
    int64_t L = X->shape[3], Og = O / G;
    for (int64_t i = 0; i < cnt; i++) {
        int64_t col = i % Wq, oh = i / Wq % OH, o = i / (Wq * OH) % O, b = i / (Wq * OH * O), gi = o / Og;
        double acc = 0;
        for (int64_t kh = 0; kh < KH; kh++)
            for (int64_t kw = 0; kw < KW; kw++) {
                int64_t ph = kh * dh % sh, pw = kw * dw % sw;
                int64_t at = (oh + kh * dh / sh) * Wq + col + kw * dw / sw;
                for (int64_t c = 0; c < Cg && at < L; c++)
                    acc += W->data[o * W->strides[0] + c * W->strides[1] + kh * W->strides[2] +
                                   kw * W->strides[3]] *
                           X->data[b * X->strides[0] + (ph * sw + pw) * X->strides[1] +
                                   (gi * Cg + c) * X->strides[2] + at * X->strides[3]];
            }
        r->data[i] = acc;
    }
}

/* cumsum, cumprod: in double (i64: wrapping) */
static void ref_scan(const smelt_node *n, const rval *vals, rval *r, int64_t cnt)
{
    const rval *A = &vals[n->in[0]->id];
    int ax = (int)n->vp[0];
    bool prod = n->op == SMELT_OP_CUMPROD, excl = n->vp[1], rev = n->vp[2], isint = !smelt__is_float(n->dtype);
    int64_t len = n->shape[ax];
    for (int64_t i = 0; i < cnt; i++) {
        int64_t t = i, base = 0, pos = 0;
        for (int d = n->ndim - 1; d >= 0; d--) {
            int64_t idx = t % n->shape[d];
            t /= n->shape[d];
            if (d == ax)
                pos = idx;
            else
                base += idx * A->strides[d];
        }
        double acc = prod ? 1 : 0;
        uint64_t iacc = prod ? 1 : 0;
        for (int64_t k = 0; k < len; k++) {
            int64_t e = rev ? len - 1 - k : k;
            if (excl ? (rev ? e <= pos : e >= pos) : (rev ? e < pos : e > pos))
                continue;
            double v = A->data[base + e * A->strides[ax]];
            acc = prod ? acc * v : acc + v;
            iacc = prod ? iacc * (uint64_t)(int64_t)v : iacc + (uint64_t)(int64_t)v;
        }
        r->data[i] = isint ? (double)(int64_t)iacc : smelt__dtype_round_result(n->dtype, acc);
    }
}

/* matmul: in double, each dot product in order */
static void ref_matmul(const smelt_node *n, const rval *vals, rval *r, int64_t cnt)
{
    const rval *A = &vals[n->in[0]->id], *B = &vals[n->in[1]->id];
    int nb = n->ndim - 2;
    int64_t M = n->shape[nb], N = n->shape[nb + 1], K = A->shape[A->ndim - 1];
    for (int64_t i = 0; i < cnt; i++) {
        int64_t t = i / (M * N), oa = 0, ob = 0, row = i / N % M, col = i % N;
        for (int d = nb - 1; d >= 0; d--) {
            int64_t idx = t % n->shape[d];
            t /= n->shape[d];
            int da = d - (nb - (A->ndim - 2)), db = d - (nb - (B->ndim - 2));
            oa += da >= 0 && A->shape[da] != 1 ? idx * A->strides[da] : 0;
            ob += db >= 0 && B->shape[db] != 1 ? idx * B->strides[db] : 0;
        }
        double acc = 0;
        for (int64_t q = 0; q < K; q++)
            acc += A->data[oa + row * A->strides[A->ndim - 2] + q * A->strides[A->ndim - 1]] *
                   B->data[ob + q * B->strides[B->ndim - 2] + col * B->strides[B->ndim - 1]];
        r->data[i] = smelt__is_half(n->dtype) ? smelt__dtype_round_result(n->dtype, acc) : acc;
    }
}

/* concat, pad: a concat's parts, a pad's operand and value, by index */
static void ref_piece(const smelt_node *n, const rval *vals, rval *r, int64_t cnt)
{
    int ax = (int)n->vp[0];
    const rval *A = &vals[n->in[0]->id], *B = n->op == SMELT_OP_CONCAT ? &vals[n->in[1]->id] : NULL;
    int64_t from = n->op == SMELT_OP_PAD ? n->vp[1] : 0, len = n->in[0]->shape[ax];
    double pv = n->op == SMELT_OP_PAD ? smelt__elem_load(n->dtype, (const char *)&n->vp[3]) : 0;
    for (int64_t i = 0; i < cnt; i++) {
        int64_t oa = 0, ob = 0, t = i;
        bool in_a = true;
        for (int d = n->ndim - 1; d >= 0; d--) {
            int64_t idx = t % n->shape[d];
            t /= n->shape[d];
            if (d == ax) {
                in_a = idx >= from && idx < from + len;
                oa += in_a ? (idx - from) * A->strides[d] : 0;
                ob += B && !in_a ? (idx - len) * B->strides[d] : 0;
            } else {
                oa += idx * A->strides[d];
                ob += B ? idx * B->strides[d] : 0;
            }
        }
        r->data[i] = in_a ? A->data[oa] : B ? B->data[ob] : pv;
    }
}

/* take, take_along_axis: by index (an index out of range: SMELT_ERR_INDEX) */
static int ref_gather(smelt_ctx *ctx, const smelt_node *n, const rval *vals, rval *r, int64_t cnt)
{
    const rval *A = &vals[n->in[0]->id], *X = &vals[n->in[1]->id];
    int ax = (int)n->vp[0], an = n->in[0]->ndim, k = n->op == SMELT_OP_TAKE ? n->in[1]->ndim : 1;
    int64_t len = n->in[0]->shape[ax];
    for (int64_t i = 0; i < cnt; i++) {
        int64_t c[SMELT_MAX_DIMS], t = i, ox = 0, oa = 0;
        for (int d = n->ndim - 1; d >= 0; d--) {
            c[d] = t % n->shape[d];
            t /= n->shape[d];
        }
        if (n->op == SMELT_OP_TAKE) {
            for (int d = 0; d < k; d++)
                ox += c[ax + d] * X->strides[d];
        } else {
            for (int d = 0; d < an; d++)
                ox += X->shape[d] == 1 ? 0 : c[d] * X->strides[d];
        }
        double v = X->data[ox];
        int64_t j = (int64_t)v < 0 ? (int64_t)v + len : (int64_t)v;
        if (j < 0 || j >= len) {
            return smelt__err(ctx, SMELT_ERR_INDEX, "%s: index %lld is out of range for axis %d of size %lld",
                              smelt__ops[n->op].name, (long long)v, ax, (long long)len);
        }
        for (int d = 0; d < an; d++) {
            int64_t cd = d < ax ? c[d] : d == ax ? j : c[d + (n->op == SMELT_OP_TAKE ? k - 1 : 0)];
            oa += A->shape[d] == 1 && d != ax ? 0 : cd * A->strides[d];
        }
        r->data[i] = A->data[oa];
    }
    return SMELT_OK;
}

/* a view: its operand's elements, read through the view's strides */
static int ref_view(smelt_ctx *ctx, const smelt_node *n, const rval *vals, rval *r, int64_t cnt)
{
    const smelt_node *a = n->in[0];
    const rval *s = &vals[a->id];
    int64_t off = 0, vst[SMELT_MAX_DIMS];
    if (!smelt__view_strides(n->op, n->vp, n->ndim, n->shape, a->ndim, a->shape, s->strides, &off, vst)) {
        return smelt__err(ctx, SMELT_ERR_RUNTIME, "reference: %s of a contiguous value failed",
                          smelt__ops[n->op].name);
    }
    for (int64_t i = 0; i < cnt; i++) {
        int64_t o = off, t = i;
        for (int d = n->ndim - 1; d >= 0; d--) {
            o += (t % n->shape[d]) * vst[d];
            t /= n->shape[d];
        }
        r->data[i] = s->data[o];
    }
    return SMELT_OK;
}

/* an elementwise operator, its operands broadcast */
static void ref_elementwise(const smelt_node *n, const rval *vals, rval *r, int64_t cnt)
{
    smelt_dtype in_dt = n->in[n->op == SMELT_OP_WHERE ? 1 : 0]->dtype;
    for (int64_t i = 0; i < cnt; i++) {
        double a[3] = {0, 0, 0};
        for (int j = 0; j < n->nin; j++) {
            const rval *s = &vals[n->in[j]->id];
            a[j] = s->data[bcast_offset(s, n->ndim, n->shape, i)];
        }
        double y = smelt__eval_scalar(n->op, in_dt, n->dtype, a);
        /* integers wrap as in kernels; f32 and f64 keep double precision;
         * f16 and bf16 results are rounded as kernels round them (through
         * f32, their compute type): they are storage types */
        r->data[i] = smelt__is_half(n->dtype)    ? smelt__dtype_round_result(n->dtype, y)
                     : smelt__is_float(n->dtype) ? y
                                                 : smelt__dtype_round(n->dtype, y);
    }
}

/* Node n's value into r (its shape set, its data allocated: cnt elements) */
static int ref_node(smelt_ctx *ctx, const smelt_node *n, smelt_tensor *const *inputs, const rval *vals, rval *r,
                    int64_t cnt)
{
    if (n->op == SMELT_OP_INPUT) {
        for (int64_t i = 0; i < cnt; i++)
            r->data[i] = smelt_tensor_get(inputs[n->input_index], i);
    } else if (n->op == SMELT_OP_CONST) {
        r->data[0] = smelt__is_float(n->dtype) ? n->fval : (double)n->ival;
    } else if (n->op == SMELT_OP_TENSOR) {
        for (int64_t i = 0; i < cnt; i++)
            r->data[i] = smelt__elem_load(n->dtype, n->blob->data + (size_t)i * smelt__dtypes[n->dtype].size);
    } else if (n->op == SMELT_OP_ARANGE) {
        for (int64_t i = 0; i < cnt; i++)
            r->data[i] = smelt__dtype_round(n->dtype, (double)i);
    } else if (smelt__is_reduce(n->op)) {
        return ref_reduce(ctx, n, &vals[n->in[0]->id], r);
    } else if (n->op == SMELT_OP_CONV_TAPS) {
        ref_conv_taps(n, vals, r, cnt);
    } else if (n->op == SMELT_OP_CUMSUM || n->op == SMELT_OP_CUMPROD) {
        ref_scan(n, vals, r, cnt);
    } else if (n->op == SMELT_OP_MATMUL) {
        ref_matmul(n, vals, r, cnt);
    } else if (smelt__is_piece(n->op)) {
        ref_piece(n, vals, r, cnt);
    } else if (smelt__ops[n->op].cls == SMELT_CLASS_GATHER) {
        return ref_gather(ctx, n, vals, r, cnt);
    } else if (smelt__is_view(n->op)) {
        return ref_view(ctx, n, vals, r, cnt);
    } else {
        ref_elementwise(n, vals, r, cnt);
    }
    return SMELT_OK;
}

int smelt_reference_eval(smelt_ctx *ctx, smelt_graph *g, int n_out, smelt_node *const *outputs,
                         int n_in, smelt_tensor *const *inputs, smelt_tensor **results)
{
    if (!ctx || !g || (n_out && (!outputs || !results)) || (n_in && !inputs))
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "smelt_reference_eval: NULL argument");
    if (g->status)
        return smelt__err(ctx, g->status, "%s", smelt__sb_str(&g->err));
    if (n_in != g->nin)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "reference: graph has %d inputs, got %d",
                          g->nin, n_in);
    for (int i = 0; i < n_out; i++) {
        results[i] = NULL;
        if (!outputs[i] || outputs[i]->g != g)
            return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "reference: output %d is not a node of this graph", i);
    }
    for (int i = 0; i < n_in; i++) {
        smelt_node *in = g->inputs[i];
        if (!inputs[i] || inputs[i]->dtype != in->dtype || inputs[i]->ndim != in->ndim ||
            memcmp(inputs[i]->shape, in->shape, sizeof(int64_t) * (size_t)in->ndim))
            return smelt__err(ctx, SMELT_ERR_SHAPE,
                              "reference: input %d does not match the graph's dtype and shape", i);
    }
    int st = SMELT_OK;
    rval *vals = calloc((size_t)g->n, sizeof *vals);
    if (!vals)
        return smelt__err(ctx, SMELT_ERR_NOMEM, "out of memory");
    for (int k = 0; k < g->n && !st; k++) {
        smelt_node *n = g->nodes[k];
        rval *r = &vals[k];
        r->ndim = n->ndim;
        memcpy(r->shape, n->shape, sizeof r->shape);
        smelt__contig_strides(n->ndim, n->shape, r->strides);
        int64_t cnt = smelt__numel(n->ndim, n->shape);
        r->data = malloc(sizeof(double) * (size_t)(cnt ? cnt : 1));
        r->own = true;
        if (!r->data) {
            st = smelt__err(ctx, SMELT_ERR_NOMEM, "out of memory");
            break;
        }
        st = ref_node(ctx, n, inputs, vals, r, cnt);
    }
    for (int i = 0; i < n_out && !st; i++) {
        smelt_node *n = outputs[i];
        st = smelt_tensor_new(ctx, SMELT_F64, n->ndim, n->shape, &results[i]);
        if (st)
            break;
        int64_t cnt = smelt__numel(n->ndim, n->shape);
        memcpy(results[i]->data, vals[n->id].data, sizeof(double) * (size_t)cnt);
    }
    if (st)
        for (int i = 0; i < n_out; i++) {
            smelt_tensor_free(results[i]);
            results[i] = NULL;
        }
    for (int k = 0; k < g->n; k++)
        free(vals[k].data);
    free(vals);
    return st;
}
