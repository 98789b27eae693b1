/* Windows and scans in the graph builder: convolution (a conv_taps node
 * over a laid-out view of the padded input, docs/fusion.md), pooling
 * (elementwise max / adds over shifted strided views), global pooling (a
 * reduction) and the scans cumsum and cumprod (nodes of their own). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

smelt_node *smelt__new_node(smelt_graph *g, smelt_op op, smelt_dtype dt, int ndim, const int64_t *shape, int nin,
                            smelt_node *const *in);
smelt_node *smelt__graph_fail(smelt_graph *g, int status, const char *msg);

static smelt_node *wfail(smelt_graph *g, int status, const char *fmt, ...) SMELT_PRINTF(3, 4);
static smelt_node *wfail(smelt_graph *g, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return smelt__graph_fail(g, status, msg);
}

void smelt_window_init(smelt_window *w)
{
    if (!w)
        return;
    memset(w, 0, sizeof *w);
    w->strides[0] = w->strides[1] = 1;
    w->dilations[0] = w->dilations[1] = 1;
    w->groups = 1;
}

/* One spatial axis of a window: the input's size n, the kernel's k, its
 * stride s, dilation d, pads lo and hi; the output's size.  ceil: pooling's
 * ceil_mode.  -1 with a message in why when it has no element. */
static int64_t out_size(const char *what, const char *axis, int64_t n, int64_t k, int64_t s, int64_t d, int64_t lo,
                        int64_t hi, bool ceil, char *why, size_t nwhy)
{
    int64_t span = (k - 1) * d + 1, room = n + lo + hi - span;
    if (k < 1 || room < 0) {
        snprintf(why, nwhy, "%s: axis %s: the kernel (%lld taps, dilation %lld: %lld elements) is larger than the "
                 "padded input (%lld + %lld + %lld)", what, axis, (long long)k, (long long)d, (long long)span,
                 (long long)n, (long long)lo, (long long)hi);
        return -1;
    }
    int64_t o = (ceil ? (room + s - 1) / s : room / s) + 1;
    if (ceil && (o - 1) * s >= n + lo) /* the last window must start inside the input or its left padding */
        o--;
    return o;
}

/* The window's pads for axis i (0: h, 1: w) of input size n, kernel k. */
static void window_pads(const smelt_window *win, int i, int64_t n, int64_t k, int64_t *lo, int64_t *hi)
{
    int64_t s = win->strides[i], d = win->dilations[i];
    if (win->auto_pad == SMELT_PAD_SAME_UPPER || win->auto_pad == SMELT_PAD_SAME_LOWER) {
        int64_t o = (n + s - 1) / s, total = SMELT_MAX(0, (o - 1) * s + (k - 1) * d + 1 - n);
        *lo = win->auto_pad == SMELT_PAD_SAME_UPPER ? total / 2 : total - total / 2;
        *hi = total - *lo;
    } else if (win->auto_pad == SMELT_PAD_VALID) {
        *lo = *hi = 0;
    } else {
        *lo = win->pads[i], *hi = win->pads[2 + i];
    }
}

static bool check_window(smelt_graph *g, const char *what, smelt_node *x, const smelt_window *win, bool pool)
{
    if (!win)
        return wfail(g, SMELT_ERR_INVALID_ARG, "%s: the window is NULL", what), false;
    if (x->ndim != 3 && x->ndim != 4)
        return wfail(g, SMELT_ERR_SHAPE, "%s: x has rank %d (NCW, rank 3, or NCHW, rank 4)", what, x->ndim), false;
    if (win->auto_pad < SMELT_PAD_NOTSET || win->auto_pad > SMELT_PAD_VALID)
        return wfail(g, SMELT_ERR_INVALID_ARG, "%s: auto_pad %d is not a SMELT_PAD_*", what, win->auto_pad), false;
    for (int i = x->ndim == 3 ? 1 : 0; i < 2; i++) {
        const char *ax = i ? "w" : "h";
        if (win->strides[i] < 1)
            return wfail(g, SMELT_ERR_INVALID_ARG, "%s: axis %s: stride %lld (1 or more)", what, ax,
                         (long long)win->strides[i]), false;
        if (win->dilations[i] < 1)
            return wfail(g, SMELT_ERR_INVALID_ARG, "%s: axis %s: dilation %lld (1 or more)", what, ax,
                         (long long)win->dilations[i]), false;
        if (win->pads[i] < 0 || win->pads[2 + i] < 0)
            return wfail(g, SMELT_ERR_INVALID_ARG, "%s: axis %s: pads %lld, %lld (0 or more)", what, ax,
                         (long long)win->pads[i], (long long)win->pads[2 + i]), false;
        if (pool && win->kernel[i] < 1)
            return wfail(g, SMELT_ERR_INVALID_ARG, "%s: axis %s: kernel size %lld (1 or more)", what, ax,
                         (long long)win->kernel[i]), false;
        if (pool && (win->pads[i] >= (win->kernel[i] - 1) * win->dilations[i] + 1 ||
                     win->pads[2 + i] >= (win->kernel[i] - 1) * win->dilations[i] + 1) &&
            win->auto_pad == SMELT_PAD_NOTSET)
            return wfail(g, SMELT_ERR_INVALID_ARG, "%s: axis %s: pads %lld, %lld must be smaller than the window "
                         "(%lld)", what, ax, (long long)win->pads[i], (long long)win->pads[2 + i],
                         (long long)((win->kernel[i] - 1) * win->dilations[i] + 1)), false;
    }
    return true;
}

/* x (rank 4) cut or padded with value along axis to [-lo, -lo + len) of
 * its elements */
static smelt_node *fit_axis(smelt_graph *g, smelt_node *x, int axis, int64_t lo, int64_t len, double value)
{
    int64_t n = x->shape[axis], hi = len - lo - n;
    int64_t w[8] = {0};
    if (lo > 0 || hi > 0) {
        w[2 * axis] = lo, w[2 * axis + 1] = SMELT_MAX(hi, 0);
        x = smelt_pad(g, x, w, value);
    }
    if (x && hi < 0)
        x = smelt_slice(g, x, axis, 0, len, 1);
    return x;
}

static smelt_node *as_rank4(smelt_graph *g, smelt_node *x)
{
    return x && x->ndim == 3 ? smelt_expand_dims(g, x, 2) : x;
}

smelt_node *smelt_conv(smelt_graph *g, smelt_node *x, smelt_node *w, smelt_node *b, const smelt_window *win)
{
    if (!g || g->status)
        return NULL;
    if (!x || !w || x->g != g || w->g != g || (b && b->g != g))
        return wfail(g, SMELT_ERR_INVALID_ARG, "conv: an operand is NULL or of another graph");
    if (!check_window(g, "conv", x, win, false))
        return NULL;
    smelt_node *ops[3] = {x, w, b};
    for (int k = 0; k < 3; k++)
        if (ops[k] && !smelt__is_float(ops[k]->dtype))
            return wfail(g, SMELT_ERR_DTYPE, "conv does not support dtype %s (f32, f64, f16, bf16: cast integers "
                         "first)", smelt__dtypes[ops[k]->dtype].name);
    if (w->ndim != x->ndim)
        return wfail(g, SMELT_ERR_SHAPE, "conv: the weights have rank %d, x rank %d (weights [O, C / groups, "
                     "(KH,) KW])", w->ndim, x->ndim);
    int64_t N = x->shape[0], C = x->shape[1], O = w->shape[0], Cg = w->shape[1], G = win->groups;
    if (G < 1 || C % G || O % G)
        return wfail(g, SMELT_ERR_INVALID_ARG, "conv: groups %lld must be 1 or more and divide the input channels "
                     "(%lld) and the output channels (%lld)", (long long)G, (long long)C, (long long)O);
    if (Cg * G != C)
        return wfail(g, SMELT_ERR_SHAPE, "conv: x has %lld channels, the weights take %lld x %lld groups",
                     (long long)C, (long long)Cg, (long long)G);
    if (b && (b->ndim != 1 || b->shape[0] != O))
        return wfail(g, SMELT_ERR_SHAPE, "conv: the bias must have shape [%lld]", (long long)O);
    smelt_dtype dt = smelt_dtype_promote(x->dtype, w->dtype);
    if (b)
        dt = smelt_dtype_promote(dt, b->dtype);
    smelt_dtype ct = smelt__is_half(dt) ? SMELT_F32 : dt;
    smelt_node *xr = as_rank4(g, x->dtype == ct ? x : smelt_cast(g, x, ct));
    smelt_node *wr = as_rank4(g, w->dtype == ct ? w : smelt_cast(g, w, ct));
    if (g->status)
        return NULL;
    int64_t K[2] = {wr->shape[2], wr->shape[3]}, S[2], D[2], Q[2], out[2], lo[2], hi[2];
    char why[400];
    for (int i = 0; i < 2; i++) {
        bool flat = x->ndim == 3 && i == 0;
        S[i] = flat ? 1 : win->strides[i], D[i] = flat ? 1 : win->dilations[i];
        if (flat)
            lo[i] = hi[i] = 0;
        else
            window_pads(win, i, xr->shape[2 + i], K[i], &lo[i], &hi[i]);
        if ((out[i] = out_size("conv", i ? "w" : "h", xr->shape[2 + i], K[i], S[i], D[i], lo[i], hi[i], false, why,
                               sizeof why)) < 0)
            return wfail(g, SMELT_ERR_SHAPE, "%s", why);
        Q[i] = out[i] + (K[i] - 1) * D[i] / S[i]; /* a phase's rows (columns) that the taps read */
    }
    /* the padded input, exactly sh * Hq rows and sw * Wq columns; its
     * phases; each phase's grid flattened */
    smelt_node *xp = fit_axis(g, xr, 2, lo[0], S[0] * Q[0], 0);
    xp = fit_axis(g, xp, 3, lo[1], S[1] * Q[1], 0);
    if (xp && (S[0] > 1 || S[1] > 1)) {
        xp = smelt_reshape(g, xp, 6, (int64_t[]){N, C, Q[0], S[0], Q[1], S[1]});
        xp = smelt_transpose(g, xp, (int[]){0, 3, 5, 1, 2, 4});
    }
    xp = smelt_reshape(g, xp, 4, (int64_t[]){N, S[0] * S[1], C, Q[0] * Q[1]});
    if (!xp)
        return NULL;
    int64_t yshape[4] = {N, O, out[0], Q[1]};
    smelt_node *y = smelt__new_node(g, SMELT_OP_CONV_TAPS, ct, 4, yshape, 2, (smelt_node *[]){xp, wr});
    if (!y)
        return NULL;
    int64_t vp[8] = {S[0], S[1], D[0], D[1], G, out[0], out[1], Q[1]};
    memcpy(y->vp, vp, sizeof vp);
    if (out[1] < Q[1])
        y = smelt_slice(g, y, 3, 0, out[1], 1);
    if (x->ndim == 3)
        y = smelt_squeeze(g, y, 2);
    if (b && y)
        y = smelt_add(g, y, smelt_reshape(g, b->dtype == ct ? b : smelt_cast(g, b, ct), x->ndim - 1,
                                          (int64_t[]){O, 1, 1}));
    return y && dt != ct ? smelt_cast(g, y, dt) : y;
}

/* A pooling window over x's spatial axes (1 or 2): the max or the mean of
 * the views of x (padded) that the window's taps read. */
static smelt_node *pool(smelt_graph *g, smelt_node *x, const smelt_window *win, bool max)
{
    const char *what = max ? "max_pool" : "avg_pool";
    if (!g || g->status)
        return NULL;
    if (!x || x->g != g)
        return wfail(g, SMELT_ERR_INVALID_ARG, "%s: x is NULL or of another graph", what);
    if (!check_window(g, what, x, win, true))
        return NULL;
    smelt_dtype dt = x->dtype;
    if (!max && !smelt__is_float(dt))
        return wfail(g, SMELT_ERR_DTYPE, "avg_pool does not support dtype %s (float dtypes)", smelt__dtypes[dt].name);
    if (max && dt == SMELT_BOOL)
        return wfail(g, SMELT_ERR_DTYPE, "max_pool does not support dtype bool");
    int ns = x->ndim - 2, i0 = 2 - ns; /* spatial axes; the window's first entry they use */
    int64_t K[2] = {1, 1}, S[2], D[2], out[2], lo[2], hi[2], H[2];
    char why[400];
    for (int i = 0; i < ns; i++) {
        int wi = i0 + i;
        H[i] = x->shape[2 + i];
        K[i] = win->kernel[wi], S[i] = win->strides[wi], D[i] = max ? win->dilations[wi] : 1;
        window_pads(win, wi, H[i], K[i], &lo[i], &hi[i]);
        if ((out[i] = out_size(what, wi ? "w" : "h", H[i], K[i], S[i], D[i], lo[i], hi[i], win->ceil_mode, why,
                               sizeof why)) < 0)
            return wfail(g, SMELT_ERR_SHAPE, "%s", why);
    }
    double fill = 0;
    if (max)
        fill = smelt__is_float(dt) ? -INFINITY : dt == SMELT_U8 ? 0 : dt == SMELT_I32 ? -2147483648.0
                                                                                 : -9223372036854775808.0;
    smelt_node *xp = x;
    for (int i = 0; i < ns && xp; i++)
        xp = fit_axis(g, xp, 2 + i, lo[i], (out[i] - 1) * S[i] + (K[i] - 1) * D[i] + 1, fill);
    smelt_node *acc = NULL;
    int64_t taps = ns == 2 ? K[0] * K[1] : K[0];
    for (int64_t t = 0; t < taps && xp; t++) {
        int64_t k[2] = {ns == 2 ? t / K[1] : t, ns == 2 ? t % K[1] : 0};
        smelt_node *v = xp;
        for (int i = 0; i < ns; i++)
            v = smelt_slice(g, v, 2 + i, k[i] * D[i], k[i] * D[i] + (out[i] - 1) * S[i] + 1, S[i]);
        acc = !acc ? v : smelt_binary(g, max ? SMELT_OP_MAXIMUM : SMELT_OP_ADD, acc, v);
    }
    if (!acc || max)
        return acc;
    /* the divisor of each window: its taps inside the padded input (inside
     * x without count_include_pad; ceil_mode's extra windows end at the
     * padding) */
    int64_t n = ns == 2 ? out[0] * out[1] : out[0];
    smelt_tensor *t;
    if (smelt_tensor_new(g->ctx, dt == SMELT_F64 ? SMELT_F64 : SMELT_F32, ns, out, &t))
        return wfail(g, SMELT_ERR_NOMEM, "avg_pool: out of memory");
    bool uniform = true;
    double first = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t cnt = 1, pos[2] = {ns == 2 ? i / out[1] : i, ns == 2 ? i % out[1] : 0};
        for (int a = 0; a < ns; a++) {
            int64_t s0 = pos[a] * S[a] - lo[a], e0 = s0 + K[a];
            int64_t s1 = SMELT_MAX(s0, win->count_include_pad ? -lo[a] : 0);
            int64_t e1 = SMELT_MIN(e0, win->count_include_pad ? H[a] + hi[a] : H[a]);
            cnt *= SMELT_MAX(e1 - s1, 0);
        }
        double c = cnt ? (double)cnt : NAN;
        smelt_elem_store(t->dtype, (char *)smelt_tensor_data(t) + (size_t)i * smelt__dtypes[t->dtype].size, c);
        first = i ? first : c;
        uniform = uniform && c == first;
    }
    smelt_node *div = uniform ? smelt_scalar(g, first) : smelt_constant(g, t);
    smelt_tensor_free(t);
    acc = smelt_div(g, acc, div);
    return acc && acc->dtype != dt ? smelt_cast(g, acc, dt) : acc;
}

smelt_node *smelt_max_pool(smelt_graph *g, smelt_node *x, const smelt_window *win) { return pool(g, x, win, true); }
smelt_node *smelt_avg_pool(smelt_graph *g, smelt_node *x, const smelt_window *win) { return pool(g, x, win, false); }

static smelt_node *global_pool(smelt_graph *g, smelt_node *x, smelt_op op, const char *what)
{
    if (!g || g->status)
        return NULL;
    if (!x || x->g != g)
        return wfail(g, SMELT_ERR_INVALID_ARG, "%s: x is NULL or of another graph", what);
    if (x->ndim < 3)
        return wfail(g, SMELT_ERR_SHAPE, "%s: x has rank %d ([N, C, spatial...], rank 3 or more)", what, x->ndim);
    int axes[SMELT_MAX_DIMS];
    for (int d = 2; d < x->ndim; d++)
        axes[d - 2] = d;
    return smelt_reduce(g, op, x, x->ndim - 2, axes, 1);
}

smelt_node *smelt_global_max_pool(smelt_graph *g, smelt_node *x)
{
    return global_pool(g, x, SMELT_OP_MAX, "global_max_pool");
}

smelt_node *smelt_global_avg_pool(smelt_graph *g, smelt_node *x)
{
    if (g && !g->status && x && !smelt__is_float(x->dtype))
        return wfail(g, SMELT_ERR_DTYPE, "global_avg_pool does not support dtype %s (float dtypes)",
                     smelt__dtypes[x->dtype].name);
    return global_pool(g, x, SMELT_OP_MEAN, "global_avg_pool");
}

static smelt_node *scan(smelt_graph *g, smelt_op op, smelt_node *a, int axis, int exclusive, int reverse)
{
    const char *what = smelt__ops[op].name;
    if (!g || g->status)
        return NULL;
    if (!a || a->g != g)
        return wfail(g, SMELT_ERR_INVALID_ARG, "%s: the operand is NULL or of another graph", what);
    smelt_node *x = a;
    if (a->ndim == 0) /* NumPy: a scalar scans as a 1-element array */
        x = smelt_reshape(g, a, 1, (int64_t[]){1});
    if (!x)
        return NULL;
    if (axis < -x->ndim || axis >= x->ndim)
        return wfail(g, SMELT_ERR_INVALID_ARG, "%s: axis %d is out of bounds for an array of rank %d", what, axis,
                     x->ndim);
    axis = axis < 0 ? axis + x->ndim : axis;
    smelt_dtype dt = smelt__is_float(x->dtype) ? x->dtype : SMELT_I64;
    if (x->dtype != dt)
        x = smelt_cast(g, x, dt);
    smelt_node *y = x ? smelt__new_node(g, op, dt, x->ndim, x->shape, 1, &x) : NULL;
    if (!y)
        return NULL;
    y->vp[0] = axis, y->vp[1] = exclusive != 0, y->vp[2] = reverse != 0;
    return y;
}

smelt_node *smelt_cumsum(smelt_graph *g, smelt_node *a, int axis, int exclusive, int reverse)
{
    return scan(g, SMELT_OP_CUMSUM, a, axis, exclusive, reverse);
}

smelt_node *smelt_cumprod(smelt_graph *g, smelt_node *a, int axis, int exclusive, int reverse)
{
    return scan(g, SMELT_OP_CUMPROD, a, axis, exclusive, reverse);
}

smelt_node *smelt__window_node(smelt_graph *g, smelt_op op, smelt_node *const *in, int n, const int64_t *vp)
{
    const char *name = smelt__ops[op].name;
    if (!g || g->status)
        return NULL;
    if (n != smelt__window_nvp(op))
        return wfail(g, SMELT_ERR_INVALID_ARG, "%s takes %d parameters, got %d", name, smelt__window_nvp(op), n);
    if (op != SMELT_OP_CONV_TAPS) {
        if (vp[0] < 0 || vp[0] >= in[0]->ndim || (vp[1] != 0 && vp[1] != 1) || (vp[2] != 0 && vp[2] != 1))
            return wfail(g, SMELT_ERR_INVALID_ARG, "%s: parameters [axis, exclusive, reverse]: an axis of the "
                         "operand, 0 or 1, 0 or 1", name);
        return scan(g, op, in[0], (int)vp[0], (int)vp[1], (int)vp[2]);
    }
    smelt_node *x = in[0], *w = in[1];
    if (x->ndim != 4 || w->ndim != 4 || x->dtype != w->dtype || (x->dtype != SMELT_F32 && x->dtype != SMELT_F64))
        return wfail(g, SMELT_ERR_INVALID_ARG, "conv_taps: operands [N, P, C, L] and [O, Cg, KH, KW] of one dtype, "
                     "f32 or f64");
    for (int k = 0; k < 8; k++)
        if (vp[k] < 1 || vp[k] > ((int64_t)1 << 40))
            return wfail(g, SMELT_ERR_INVALID_ARG, "conv_taps: parameter %d is %lld (1 or more)", k, (long long)vp[k]);
    int64_t sh = vp[0], sw = vp[1], dh = vp[2], dw = vp[3], G = vp[4], OH = vp[5], OW = vp[6], Wq = vp[7];
    int64_t KH = w->shape[2], KW = w->shape[3];
    if (x->shape[1] != sh * sw || x->shape[2] != w->shape[1] * G || w->shape[0] % G || OW > Wq ||
        (KH - 1) * dh / sh * Wq + (KW - 1) * dw / sw + (OH - 1) * Wq + OW > x->shape[3])
        return wfail(g, SMELT_ERR_SHAPE, "conv_taps: the parameters do not fit the operands' shapes");
    smelt_node *y = smelt__new_node(g, op, x->dtype, 4, (int64_t[]){x->shape[0], w->shape[0], OH, Wq}, 2, in);
    if (y)
        memcpy(y->vp, vp, sizeof(int64_t) * 8);
    return y;
}
