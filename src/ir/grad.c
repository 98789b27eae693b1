/* Reverse-mode differentiation as a graph-to-graph pass (smelt_grad,
 * smelt_grad_ct): the backward graph is built with the builder's own calls
 * into the same graph, before lowering, so the passes, fusion, memory
 * planning and every backend treat it as any other part of the graph.
 *
 * The walk: the nodes that need a gradient are those of a float dtype that
 * depend on a node of wrt (a forward sweep in creation order, which is
 * topological); then, from the outputs back in reverse creation order,
 * each node with a cotangent gives each operand that needs one its share
 * (the rule of its operator, grad.def), summed over the axes the operand
 * was broadcast along and cast to its dtype, and the shares a node
 * receives are added up in the order they arrive.  Nodes created by the
 * walk come after every node it visits, so it never sees them. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

/* the kinds of grad.def's rows */
enum { GRAD_RULE, GRAD_ZERO, GRAD_NONE, GRAD_LEAF };

/* every operator of ops.def has one row: as many rows as operators, and
 * (below) no two with the same operator, or the switch would not compile */
enum {
    GRAD_ROWS = 0
#define SMELT_GRAD(ID, kind, d0, d1, d2) +1
#include "grad.def"
#undef SMELT_GRAD
};
_Static_assert((int)GRAD_ROWS == (int)SMELT_OP_COUNT, "src/ir/grad.def needs one row for each operator of src/ir/ops.def");

/* What a rule sees. */
typedef struct grad_rule_ctx {
    smelt_graph *G;
    smelt_node *y, *g; /* the node and its cotangent */
    smelt_node *m, *gm; /* clamp: maximum(a, lo) and its share, made once */
} grad_rule_ctx;

/* ---- shorthands the rules are written in ------------------------------ */
#define S(v) smelt_scalar(G, (v)) /* weak: takes the other operand's dtype */
#define ADD(x, z) smelt_add(G, (x), (z))
#define SUB(x, z) smelt_sub(G, (x), (z))
#define MUL(x, z) smelt_mul(G, (x), (z))
#define DIV(x, z) smelt_div(G, (x), (z))
#define U(op, x) smelt_unary(G, SMELT_OP_##op, (x))
#define BIN(op, x, z) smelt_binary(G, SMELT_OP_##op, (x), (z))
#define NEG(x) U(NEG, x)
#define SQ(x) U(SQUARE, x)
#define GT(x, z) BIN(GT, x, z)
#define LT(x, z) BIN(LT, x, z)
#define EQ(x, z) BIN(EQ, x, z)
#define WHERE(k, x, z) smelt_where(G, (k), (x), (z))
#define MT(x) mat_t(G, (x))
#define KEEP(x) keep(R, (x))

/* x with its last two axes swapped (a matrix transposed, as a view) */
static smelt_node *mat_t(smelt_graph *G, smelt_node *x)
{
    if (!x)
        return NULL;
    int perm[SMELT_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++)
        perm[d] = d;
    perm[x->ndim - 2] = x->ndim - 1;
    perm[x->ndim - 1] = x->ndim - 2;
    return smelt_transpose(G, x, perm);
}

/* the axes reduction y reduces, as a list */
static int red_axes(const smelt_node *y, int *axes)
{
    int n = 0;
    for (int d = 0; d < y->in[0]->ndim; d++)
        if (y->axes >> d & 1u)
            axes[n++] = d;
    return n;
}

/* v (of reduction y's shape) with the reduced axes back, of size 1: the
 * shape of y with keepdims (a view; the other axes keep v's sizes) */
static smelt_node *keep(grad_rule_ctx *R, smelt_node *v)
{
    const smelt_node *y = R->y, *a = y->in[0];
    if (!v || y->keepdims || y->ndim == a->ndim)
        return v;
    int64_t vp[SMELT_MAX_DIMS];
    for (int d = 0, k = 0; d < a->ndim; d++)
        vp[d] = (y->axes >> d & 1u) ? 1 : -2 - k++;
    return smelt__view_node(R->G, SMELT_OP_RESHAPE, v, a->ndim, vp);
}

/* g where the operand won (gt), half of it where it tied (eq), else 0 */
static smelt_node *tie(grad_rule_ctx *R, smelt_node *g, smelt_node *gt, smelt_node *eq)
{
    smelt_graph *G = R->G;
    return WHERE(gt, g, WHERE(eq, MUL(g, S(0.5)), S(0)));
}

smelt_node *smelt__graph_fail(smelt_graph *g, int status, const char *msg);

/* conv_taps (src/ir/window.c): x is the padded input as [N, phases, C,
 * flat phase grid L], w [O, C / G, KH, KW], y [N, O, OH, Wq] (columns from
 * OW on are never read: smelt_conv slices them off, so their cotangent is
 * 0).  Tap (kh, kw) reads phase (kh dh % sh, kw dw % sw) from offset
 * (kh dh / sh) Wq + kw dw / sw, as src/runtime/window.c does.
 *   d/dx: the transposed convolution, as a convolution of stride 1 (the
 *     cotangent spread out by the strides, zeros between; the weights of
 *     each group transposed and flipped; full padding), cut to the padded
 *     image and split into its phases as smelt_conv does;
 *   d/dw: per tap, the group's cotangent rows times the tap's shifted view
 *     of the input (a batched product), summed over the images. */
static smelt_node *vjp_conv(grad_rule_ctx *R, int which)
{
    smelt_graph *G = R->G;
    smelt_node *y = R->y, *x = y->in[0], *w = y->in[1], *g = R->g;
    int64_t sh = y->vp[0], sw = y->vp[1], dh = y->vp[2], dw = y->vp[3], Gr = y->vp[4], OH = y->vp[5],
            OW = y->vp[6], Wq = y->vp[7];
    int64_t N = x->shape[0], C = x->shape[2], L = x->shape[3], O = w->shape[0], Cg = w->shape[1], KH = w->shape[2],
            KW = w->shape[3], Og = O / Gr, Q0 = L / Wq, M = (OH - 1) * Wq + OW;
    if (which == 0) {
        smelt_node *gy = OW < Wq ? smelt_slice(G, g, 3, 0, OW, 1) : g;
        if (sh > 1 || sw > 1) {
            gy = smelt_reshape(G, gy, 6, (const int64_t[]){N, O, OH, 1, OW, 1});
            gy = smelt_pad(G, gy, (const int64_t[]){0, 0, 0, 0, 0, 0, 0, sh - 1, 0, 0, 0, sw - 1}, 0);
            gy = smelt_reshape(G, gy, 4, (const int64_t[]){N, O, OH * sh, OW * sw});
        }
        smelt_node *wt = smelt_reshape(G, w, 5, (const int64_t[]){Gr, Og, Cg, KH, KW});
        wt = smelt_transpose(G, wt, (const int[]){0, 2, 1, 3, 4});
        wt = smelt_reshape(G, wt, 4, (const int64_t[]){C, Og, KH, KW});
        wt = smelt_flip(G, smelt_flip(G, wt, 2), 3);
        smelt_window win;
        smelt_window_init(&win);
        win.pads[0] = win.pads[2] = (KH - 1) * dh, win.pads[1] = win.pads[3] = (KW - 1) * dw;
        win.dilations[0] = dh, win.dilations[1] = dw, win.groups = Gr;
        smelt_node *d = smelt_conv(G, gy, wt, NULL, &win); /* [N, C, OH sh + (KH - 1) dh, OW sw + ...] */
        d = smelt_slice(G, smelt_slice(G, d, 2, 0, sh * Q0, 1), 3, 0, sw * Wq, 1);
        if (sh > 1 || sw > 1) {
            d = smelt_reshape(G, d, 6, (const int64_t[]){N, C, Q0, sh, Wq, sw});
            d = smelt_transpose(G, d, (const int[]){0, 3, 5, 1, 2, 4});
        }
        return smelt_reshape(G, d, 4, (const int64_t[]){N, sh * sw, C, L});
    }
    int64_t T = KH * KW;
    smelt_node **taps = calloc((size_t)T, sizeof *taps);
    if (!taps)
        return smelt__graph_fail(G, SMELT_ERR_NOMEM, "grad: out of memory");
    smelt_node *gf = smelt_slice(G, smelt_reshape(G, g, 3, (const int64_t[]){N, O, OH * Wq}), 2, 0, M, 1);
    gf = smelt_reshape(G, gf, 4, (const int64_t[]){N, Gr, Og, M});
    const int first[] = {0};
    for (int64_t t = 0; t < T; t++) {
        int64_t kh = t / KW, kw = t % KW, ph = kh * dh % sh * sw + kw * dw % sw;
        int64_t off = kh * dh / sh * Wq + kw * dw / sw;
        smelt_node *xs = smelt_reshape(G, smelt_slice(G, x, 1, ph, ph + 1, 1), 4, (const int64_t[]){N, Gr, Cg, L});
        xs = smelt_slice(G, xs, 3, off, off + M, 1);
        smelt_node *p = smelt_matmul(G, gf, smelt_transpose(G, xs, (const int[]){0, 1, 3, 2})); /* [N, G, Og, Cg] */
        taps[t] = smelt_reshape(G, smelt_reduce(G, SMELT_OP_SUM, p, 1, first, 0), 3, (const int64_t[]){O, Cg, 1});
    }
    smelt_node *r = T == 1 ? taps[0] : smelt_concat(G, (int)T, taps, 2);
    free(taps);
    return smelt_reshape(G, r, 4, (const int64_t[]){O, Cg, KH, KW});
}

/* cumprod without dividing by the operand (exact where it is 0): the
 * axis moved last, B[..., i, k] = 1 at k = i and a_k elsewhere, so that
 * the same scan of B's rows gives C[..., i, j] = the product y_j without
 * a_i; then d a_i = sum over the j whose product takes a_i (j >= i; > i
 * exclusive; mirrored reverse) of g_j C[i, j].  n x n per line. */
static smelt_node *vjp_cumprod(grad_rule_ctx *R)
{
    smelt_graph *G = R->G;
    smelt_node *y = R->y, *a = y->in[0];
    int ax = (int)y->vp[0], ex = (int)y->vp[1], rev = (int)y->vp[2], nd = a->ndim, perm[SMELT_MAX_DIMS],
        inv[SMELT_MAX_DIMS];
    for (int d = 0, k = 0; d < nd; d++)
        if (d != ax)
            perm[k++] = d;
    perm[nd - 1] = ax;
    for (int d = 0; d < nd; d++)
        inv[perm[d]] = d;
    int64_t n = a->shape[ax];
    smelt_node *at = smelt_transpose(G, a, perm), *gt = smelt_transpose(G, R->g, perm);
    smelt_node *j = smelt_arange(G, n, SMELT_I64), *i = smelt_reshape(G, j, 2, (const int64_t[]){n, 1});
    smelt_node *B = WHERE(EQ(i, j), S(1), smelt_expand_dims(G, at, nd - 1));
    smelt_node *Cm = smelt_cumprod(G, B, -1, ex, rev);
    smelt_node *takes = rev ? BIN(LE, j, i) : BIN(GE, j, i);
    if (ex)
        takes = smelt_binary(G, SMELT_OP_LOGICAL_AND, takes, BIN(NE, j, i));
    smelt_node *share = WHERE(takes, MUL(smelt_expand_dims(G, gt, nd - 1), Cm), S(0));
    const int last[] = {nd};
    return smelt_transpose(G, smelt_reduce(G, SMELT_OP_SUM, share, 1, last, 0), inv);
}

/* ---- views -------------------------------------------------------------- */
static smelt_node *vjp_reshape(grad_rule_ctx *R)
{
    const smelt_node *y = R->y, *a = y->in[0];
    int64_t vp[SMELT_MAX_DIMS];
    for (int j = 0; j < a->ndim; j++)
        vp[j] = a->shape[j];
    for (int d = 0; d < y->ndim; d++) /* a dimension the reshape kept (expand_dims, squeeze) */
        if (y->vp[d] <= -2)
            vp[-2 - y->vp[d]] = -2 - d;
    return smelt__view_node(R->G, SMELT_OP_RESHAPE, R->g, a->ndim, vp);
}

static smelt_node *vjp_permute(grad_rule_ctx *R)
{
    int inv[SMELT_MAX_DIMS];
    for (int d = 0; d < R->y->ndim; d++)
        inv[R->y->vp[d]] = d;
    return smelt_transpose(R->G, R->g, inv);
}

/* The slice's elements back where they came from, zeros between them: a
 * pad (a step of -1 flips first; a longer step spreads the elements out
 * with a pad along a new axis, then merges the two axes) */
/* take and take_along_axis: a deterministic scatter-add, a sum by index
 * in a fixed order (never atomics): the cotangent's element goes to the
 * array's element its index names, summed over the indices' axes
 * (take_along_axis: the axis) where the (wrapped) index equals the array's
 * coordinate: sum(where(idx == arange(n), g, 0)) with one more axis of n,
 * which the reduction's kernel computes without the mask in memory. */
static smelt_node *vjp_take(grad_rule_ctx *R)
{
    smelt_graph *G = R->G;
    smelt_node *y = R->y, *a = y->in[0], *ix = y->in[1];
    int ax = (int)y->vp[0], k = y->op == SMELT_OP_TAKE ? ix->ndim : 1, an = a->ndim;
    int64_t n = a->shape[ax];
    if (y->ndim + 1 > SMELT_MAX_DIMS)
        return smelt_reshape(G, NULL, 0, NULL); /* (an error: rank too large for the mask's axis) */
    smelt_dtype it = ix->dtype == SMELT_U8 ? SMELT_I32 : ix->dtype;
    smelt_node *i = ix->dtype == it ? ix : smelt_cast(G, ix, it);
    i = WHERE(LT(i, S(0)), ADD(i, smelt_const(G, (double)n, it)), i);
    /* the result's axes: [pre (ax), the indices' (k), post]; the mask's and
     * the share's: [pre, indices', n, post] */
    int64_t gs[SMELT_MAX_DIMS], is[SMELT_MAX_DIMS], rs[SMELT_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < y->ndim; d++) {
        gs[nd++] = y->shape[d];
        if (d == ax + k - 1)
            gs[nd++] = 1;
    }
    smelt_node *g2 = smelt_reshape(G, R->g, nd, gs);
    int ni = 0;
    if (y->op == SMELT_OP_TAKE) { /* the indices' axes, then n, then post's */
        for (int d = 0; d < ix->ndim; d++)
            is[ni++] = ix->shape[d];
        is[ni++] = 1;
        for (int d = ax + 1; d < an; d++)
            is[ni++] = 1;
    } else {
        for (int d = 0; d < an; d++) {
            is[ni++] = ix->shape[d];
            if (d == ax)
                is[ni++] = 1;
        }
    }
    smelt_node *i2 = smelt_reshape(G, i, ni, is);
    int nr = 0;
    rs[nr++] = n;
    for (int d = ax + 1; d < an; d++)
        rs[nr++] = 1;
    smelt_node *ar = smelt_reshape(G, smelt_arange(G, n, it), nr, rs);
    smelt_node *share = WHERE(EQ(i2, ar), g2, smelt_const(G, 0, R->g->dtype));
    int axes[SMELT_MAX_DIMS];
    for (int d = 0; d < k; d++)
        axes[d] = ax + d;
    return smelt_reduce(G, SMELT_OP_SUM, share, k, axes, false);
}

static smelt_node *vjp_slice(grad_rule_ctx *R)
{
    smelt_graph *G = R->G;
    const smelt_node *y = R->y, *a = y->in[0];
    int axis = (int)y->vp[0], r = a->ndim;
    int64_t n = a->shape[axis], step = y->vp[3], first, count;
    smelt__slice_range(n, y->vp[1], y->vp[2], step, &first, &count);
    if (count == 0)
        return NULL; /* no element: a zero gradient */
    int64_t s = step < 0 ? -step : step, lo = step > 0 ? first : first + (count - 1) * step;
    int64_t span = (count - 1) * s + 1;
    smelt_node *v = R->g;
    if (step < 0)
        v = smelt_flip(G, v, axis);
    if (s > 1) {
        int64_t w[2 * SMELT_MAX_DIMS] = {0}, shape[SMELT_MAX_DIMS];
        v = smelt_expand_dims(G, v, axis + 1);
        w[2 * (axis + 1) + 1] = s - 1;
        v = smelt_pad(G, v, w, 0.0);
        memcpy(shape, y->shape, sizeof shape);
        shape[axis] = count * s;
        v = smelt_reshape(G, v, r, shape);
        v = smelt_slice(G, v, axis, 0, span, 1);
    }
    int64_t w[2 * SMELT_MAX_DIMS] = {0};
    w[2 * axis] = lo;
    w[2 * axis + 1] = n - lo - span;
    return smelt_pad(G, v, w, 0.0);
}

static smelt_node *vjp_concat(grad_rule_ctx *R, int k)
{
    int axis = (int)R->y->vp[0];
    int64_t na = R->y->in[0]->shape[axis];
    return k == 0 ? smelt_slice(R->G, R->g, axis, 0, na, 1) : smelt_slice(R->G, R->g, axis, na, SMELT_NONE, 1);
}

static smelt_node *vjp_pad(grad_rule_ctx *R)
{
    const int64_t *vp = R->y->vp;
    return smelt_slice(R->G, R->g, (int)vp[0], vp[1], vp[2] ? -vp[2] : SMELT_NONE, 1);
}

/* ---- reductions --------------------------------------------------------- */
static smelt_node *vjp_mean_scale(grad_rule_ctx *R)
{
    smelt_graph *G = R->G;
    const smelt_node *a = R->y->in[0];
    int64_t count = smelt__red_count(a->ndim, a->shape, R->y->axes);
    /* f16 holds integers only up to 2048 and overflows at 65520: scale */
    return smelt__is_half(R->g->dtype) ? MUL(R->g, S(1.0 / (double)count)) : DIV(R->g, S((double)count));
}

/* max and min: g shared equally among the elements equal to the result */
static smelt_node *vjp_pick(grad_rule_ctx *R)
{
    smelt_graph *G = R->G;
    smelt_node *a = R->y->in[0];
    int axes[SMELT_MAX_DIMS], n = red_axes(R->y, axes);
    smelt_node *hit = smelt_cast(G, EQ(a, KEEP(R->y)), a->dtype);
    smelt_node *count = smelt_reduce(G, SMELT_OP_SUM, hit, n, axes, 1);
    return MUL(hit, DIV(KEEP(R->g), count));
}

/* prod: y / a where a != 0; where a == 0 the product of the others, which
 * is that of the nonzero elements when a is the only zero, else 0 */
static smelt_node *vjp_prod(grad_rule_ctx *R)
{
    smelt_graph *G = R->G;
    smelt_node *a = R->y->in[0];
    int axes[SMELT_MAX_DIMS], n = red_axes(R->y, axes);
    smelt_node *zero = EQ(a, S(0));
    smelt_node *zeros = smelt_reduce(G, SMELT_OP_SUM, zero, n, axes, 1);
    smelt_node *others = smelt_reduce(G, SMELT_OP_PROD, WHERE(zero, S(1), a), n, axes, 1);
    smelt_node *d = WHERE(zero, WHERE(EQ(zeros, S(1)), others, S(0)), DIV(KEEP(R->y), a));
    return MUL(KEEP(R->g), d);
}

/* ---- composites ---------------------------------------------------------- */
static smelt_node *vjp_clamp(grad_rule_ctx *R, int k)
{
    smelt_graph *G = R->G;
    smelt_node *a = R->y->in[0], *b = R->y->in[1], *c = R->y->in[2], *g = R->g;
    if (!R->m) { /* minimum(m, hi) of m = maximum(a, lo) */
        R->m = BIN(MAXIMUM, a, b);
        R->gm = tie(R, g, LT(R->m, c), EQ(R->m, c));
    }
    if (k == 2)
        return tie(R, g, LT(c, R->m), EQ(R->m, c));
    return k == 0 ? tie(R, R->gm, GT(a, b), EQ(a, b)) : tie(R, R->gm, GT(b, a), EQ(a, b));
}

static smelt_node *d_silu(grad_rule_ctx *R)
{
    smelt_graph *G = R->G;
    smelt_node *a = R->y->in[0], *s = U(SIGMOID, a);
    return MUL(s, ADD(S(1), MUL(a, SUB(S(1), s))));
}

static smelt_node *d_gelu(grad_rule_ctx *R)
{
    smelt_graph *G = R->G;
    smelt_node *a = R->y->in[0];
    smelt_node *cdf = MUL(S(0.5), U(ERFC, MUL(a, S(-M_SQRT1_2))));
    return ADD(cdf, MUL(a, MUL(S(0.5 * M_2_SQRTPI * M_SQRT1_2), U(EXP, MUL(S(-0.5), SQ(a))))));
}

/* y = a (1 + tanh(u)) / 2, u = k (a + 0.044715 a^3), k = sqrt(2/pi) */
static smelt_node *d_gelu_tanh(grad_rule_ctx *R)
{
    smelt_graph *G = R->G;
    smelt_node *a = R->y->in[0], *a2 = SQ(a);
    const double k = M_2_SQRTPI * M_SQRT1_2;
    smelt_node *t = U(TANH, MUL(S(k), ADD(a, MUL(S(0.044715), MUL(a, a2)))));
    smelt_node *du = MUL(S(k), ADD(S(1), MUL(S(3 * 0.044715), a2)));
    return ADD(MUL(S(0.5), ADD(S(1), t)), MUL(MUL(S(0.5), a), MUL(SUB(S(1), SQ(t)), du)));
}

/* The shares of y's operands that need one (need[i]) into d[i] (NULL: none). */
static void apply_rule(grad_rule_ctx *R, const bool *need, smelt_node **d)
{
    smelt_graph *G = R->G;
    smelt_node *y = R->y, *g = R->g;
    smelt_node *a = y->nin > 0 ? y->in[0] : NULL, *b = y->nin > 1 ? y->in[1] : NULL, *c = y->nin > 2 ? y->in[2] : NULL;
    switch (y->op) {
#define SMELT_GRAD(ID, kind, d0, d1, d2)                                                                       \
    case SMELT_OP_##ID:                                                                                        \
        d[0] = need[0] ? (d0) : NULL;                                                                          \
        d[1] = need[1] ? (d1) : NULL;                                                                          \
        d[2] = need[2] ? (d2) : NULL;                                                                          \
        break;
#include "grad.def"
#undef SMELT_GRAD
    default: break;
    }
    SMELT_UNUSED(a), SMELT_UNUSED(b), SMELT_UNUSED(c), SMELT_UNUSED(g), SMELT_UNUSED(G);
}

/* ---- the walk ------------------------------------------------------------- */

/* v, a share for node x: cast to x's dtype, summed over the axes along
 * which x was broadcast (NumPy's rules: leading axes, and size-1 axes of x
 * where v's are larger), and broadcast where v is smaller. */
static smelt_node *fit(smelt_graph *G, smelt_node *v, const smelt_node *x)
{
    if (!v)
        return NULL;
    if (v->dtype != x->dtype)
        v = smelt_cast(G, v, x->dtype);
    if (!v)
        return NULL;
    int r = v->ndim - x->ndim, axes[SMELT_MAX_DIMS], n = 0;
    for (int d = 0; r >= 0 && d < v->ndim; d++)
        if (d < r || (x->shape[d - r] == 1 && v->shape[d] != 1))
            axes[n++] = d;
    if (n)
        v = smelt_reduce(G, SMELT_OP_SUM, v, n, axes, 1);
    for (int i = 0; i < r && v; i++)
        v = smelt_squeeze(G, v, 0);
    if (v && (v->ndim != x->ndim || memcmp(v->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim)))
        v = smelt_broadcast_to(G, v, x->ndim, x->shape);
    return v;
}

static bool has_gradient(smelt_dtype dt) { return smelt__is_float(dt); }

static int check_node(smelt_graph *g, const smelt_node *n, const char *what, int i)
{
    if (!n)
        return smelt__err(g->ctx, SMELT_ERR_INVALID_ARG, "grad: %s[%d] is NULL", what, i);
    if (n->g != g)
        return smelt__err(g->ctx, SMELT_ERR_INVALID_ARG, "grad: %s[%d] belongs to another graph", what, i);
    return SMELT_OK;
}

int smelt_grad_ct(smelt_graph *g, int n_out, smelt_node *const *outs, smelt_node *const *cotangents, int n_wrt,
                  smelt_node *const *wrt, smelt_node **grads)
{
    if (!g)
        return SMELT_ERR_INVALID_ARG;
    smelt_ctx *ctx = g->ctx;
    if (g->status)
        return smelt__err(ctx, g->status, "%s", smelt_graph_errmsg(g));
    if (n_out < 1 || !outs || !cotangents || n_wrt < 0 || (n_wrt && (!wrt || !grads)))
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "grad: %s", n_out < 1 ? "no outputs to differentiate"
                          : n_wrt < 0 ? "n_wrt is negative" : "an array argument is NULL");
    for (int i = 0; i < n_wrt; i++)
        grads[i] = NULL;
    int st;
    for (int i = 0; i < n_out; i++) {
        if ((st = check_node(g, outs[i], "outputs", i)) || (st = check_node(g, cotangents[i], "cotangents", i)))
            return st;
        char x[SMELT_SHAPE_STR_MAX], y[SMELT_SHAPE_STR_MAX];
        int nd;
        int64_t out[SMELT_MAX_DIMS];
        if (!has_gradient(outs[i]->dtype))
            return smelt__err(ctx, SMELT_ERR_DTYPE, "grad: output %d is %s (only floating-point values have "
                              "gradients)", i, smelt__dtypes[outs[i]->dtype].name);
        if (smelt__broadcast_shapes(outs[i]->ndim, outs[i]->shape, cotangents[i]->ndim, cotangents[i]->shape, &nd,
                                    out) || nd != outs[i]->ndim || memcmp(out, outs[i]->shape, sizeof(int64_t) * (size_t)nd))
            return smelt__err(ctx, SMELT_ERR_SHAPE, "grad: the cotangent of output %d, of shape %s, does not "
                              "broadcast to the output's shape %s", i,
                              smelt__shape_fmt(x, cotangents[i]->ndim, cotangents[i]->shape),
                              smelt__shape_fmt(y, outs[i]->ndim, outs[i]->shape));
    }
    for (int i = 0; i < n_wrt; i++) {
        if ((st = check_node(g, wrt[i], "wrt", i)))
            return st;
        if (!has_gradient(wrt[i]->dtype))
            return smelt__err(ctx, SMELT_ERR_DTYPE, "grad: wrt[%d] is %s (only floating-point values have "
                              "gradients; cast it to a float dtype before using it, and differentiate with "
                              "respect to that)", i, smelt__dtypes[wrt[i]->dtype].name);
    }

    int n0 = g->n; /* the nodes the walk visits: those there now */
    bool *need = calloc((size_t)n0 + 1, sizeof *need);
    smelt_node **ct = calloc((size_t)n0 + 1, sizeof *ct);
    if (!need || !ct) {
        free(need), free(ct);
        return smelt__err(ctx, SMELT_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < n_wrt; i++)
        need[wrt[i]->id] = true;
    for (int k = 0; k < n0; k++) {
        const smelt_node *n = g->nodes[k];
        for (int j = 0; j < n->nin && !need[k]; j++)
            need[k] = need[n->in[j]->id];
        need[k] = need[k] && has_gradient(n->dtype);
    }
    /* the seeds */
    for (int i = 0; i < n_out && !g->status; i++) {
        smelt_node *o = outs[i], *v = fit(g, cotangents[i], o);
        if (need[o->id] && v)
            ct[o->id] = ct[o->id] ? smelt_add(g, ct[o->id], v) : v;
    }
    for (int k = n0 - 1; k >= 0 && !g->status; k--) {
        smelt_node *y = g->nodes[k];
        if (!ct[k] || y->nin == 0)
            continue;
        grad_rule_ctx R = {.G = g, .y = y, .g = ct[k]};
        bool nd[3] = {false, false, false};
        smelt_node *d[3] = {NULL, NULL, NULL};
        for (int j = 0; j < y->nin; j++)
            nd[j] = need[y->in[j]->id];
        apply_rule(&R, nd, d);
        for (int j = 0; j < y->nin && !g->status; j++) {
            smelt_node *x = y->in[j], *v = fit(g, d[j], x);
            if (v)
                ct[x->id] = ct[x->id] ? smelt_add(g, ct[x->id], v) : v;
        }
    }
    for (int i = 0; i < n_wrt && !g->status; i++) {
        smelt_node *v = ct[wrt[i]->id];
        if (!v) /* nothing flows to it: zeros */
            v = smelt_broadcast_to(g, smelt_const(g, 0.0, wrt[i]->dtype), wrt[i]->ndim, wrt[i]->shape);
        grads[i] = v;
    }
    free(need);
    free(ct);
    if (g->status) {
        for (int i = 0; i < n_wrt; i++)
            grads[i] = NULL;
        return smelt__err(ctx, g->status, "grad: %s", smelt_graph_errmsg(g));
    }
    return SMELT_OK;
}

int smelt_grad(smelt_graph *g, smelt_node *loss, int n_wrt, smelt_node *const *wrt, smelt_node **grads)
{
    if (!g)
        return SMELT_ERR_INVALID_ARG;
    if (g->status)
        return smelt__err(g->ctx, g->status, "%s", smelt_graph_errmsg(g));
    int st = check_node(g, loss, "loss", 0);
    if (st)
        return st;
    if (smelt__numel(loss->ndim, loss->shape) != 1) {
        char x[SMELT_SHAPE_STR_MAX];
        return smelt__err(g->ctx, SMELT_ERR_SHAPE, "grad: the loss has shape %s; it must hold one element (for "
                          "other outputs, give a cotangent: smelt_grad_ct)", smelt__shape_fmt(x, loss->ndim, loss->shape));
    }
    if (!has_gradient(loss->dtype))
        return smelt__err(g->ctx, SMELT_ERR_DTYPE, "grad: the loss is %s (only floating-point values have gradients)",
                          smelt__dtypes[loss->dtype].name);
    smelt_node *one = smelt_const(g, 1.0, loss->dtype);
    if (!one)
        return smelt__err(g->ctx, g->status, "grad: %s", smelt_graph_errmsg(g));
    return smelt_grad_ct(g, 1, &loss, &one, n_wrt, wrt, grads);
}
