/* Convolution cases for tests/test-window.c and tests/test-cuda.c: the
 * shapes and attributes, the window they make, the pads and output size
 * ONNX gives them, and ONNX Conv computed directly in double. */
#ifndef SMELT_WINDOW_CASES_H
#define SMELT_WINDOW_CASES_H
#include <string.h>

#include "common.h"

typedef struct ccase {
    int rank;             /* 3 or 4 */
    int64_t N, C, H, W, O, KH, KW;
    int64_t sh, sw, dh, dw, groups;
    int64_t pads[4];
    int auto_pad;
} ccase;

static const ccase conv_cases[] = {
    {4, 2, 3, 7, 9, 4, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, 0},
    {4, 1, 4, 8, 8, 6, 3, 3, 2, 2, 1, 1, 1, {1, 1, 1, 1}, 0},
    {4, 2, 4, 9, 10, 4, 3, 2, 2, 3, 1, 1, 2, {0, 1, 2, 0}, 0},
    {4, 1, 6, 10, 9, 6, 3, 3, 1, 1, 2, 2, 6, {2, 2, 2, 2}, 0},   /* depthwise, dilated */
    {4, 2, 3, 6, 7, 5, 1, 1, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 0},    /* 1x1 */
    {4, 1, 2, 7, 8, 3, 3, 3, 2, 2, 1, 1, 1, {0, 0, 0, 0}, 1},    /* SAME_UPPER */
    {4, 1, 2, 7, 8, 3, 4, 4, 2, 3, 1, 1, 1, {0, 0, 0, 0}, 2},    /* SAME_LOWER */
    {4, 2, 2, 5, 6, 2, 2, 3, 1, 1, 1, 1, 1, {0, 0, 0, 0}, 3},    /* VALID */
    {4, 1, 8, 12, 11, 8, 3, 3, 3, 2, 2, 1, 4, {3, 0, 1, 2}, 0},
    {3, 2, 4, 1, 20, 6, 1, 5, 1, 1, 1, 1, 1, {0, 2, 0, 2}, 0},   /* 1-D */
    {3, 1, 4, 1, 17, 4, 1, 3, 1, 2, 1, 3, 2, {0, 1, 0, 3}, 0},   /* 1-D strided, dilated, grouped */
    {4, 3, 4, 6, 7, 6, 3, 3, 1, 1, 1, 1, 2, {1, 1, 1, 1}, 0},    /* more images than groups */
    {4, 3, 5, 6, 6, 5, 3, 3, 1, 1, 1, 1, 5, {0, 0, 0, 0}, 3},    /* depthwise over images, VALID */
};

/* x's and w's shapes (rank c->rank) */
static inline void conv_shapes(const ccase *c, int64_t *xs, int64_t *ws)
{
    const int64_t x[4] = {c->N, c->C, c->H, c->W}, w[4] = {c->O, c->C / c->groups, c->KH, c->KW};
    memcpy(xs, x, sizeof x), memcpy(ws, w, sizeof w);
    if (c->rank == 3)
        xs[2] = c->W, ws[2] = c->KW;
}

static inline void conv_window(const ccase *c, smelt_window *win)
{
    smelt_window_init(win);
    win->strides[0] = c->sh, win->strides[1] = c->sw, win->dilations[0] = c->dh, win->dilations[1] = c->dw;
    win->groups = c->groups, win->auto_pad = c->auto_pad;
    memcpy(win->pads, c->pads, sizeof win->pads);
}

static inline void same_pads(int mode, int64_t n, int64_t k, int64_t s, int64_t d, int64_t *lo, int64_t *hi)
{
    int64_t o = (n + s - 1) / s, total = (o - 1) * s + (k - 1) * d + 1 - n;
    total = total < 0 ? 0 : total;
    *lo = mode == SMELT_PAD_SAME_UPPER ? total / 2 : total - total / 2;
    *hi = total - *lo;
}

/* ONNX's pads lo[2], hi[2] and the output's size OH x OW */
static inline void conv_geometry(const ccase *c, int64_t *lo, int64_t *hi, int64_t *OH, int64_t *OW)
{
    for (int i = 0; i < 2; i++) {
        int64_t n = i ? c->W : c->H, kk = i ? c->KW : c->KH, s = i ? c->sw : c->sh, d = i ? c->dw : c->dh;
        if (c->auto_pad == SMELT_PAD_SAME_UPPER || c->auto_pad == SMELT_PAD_SAME_LOWER)
            same_pads(c->auto_pad, n, kk, s, d, &lo[i], &hi[i]);
        else if (c->auto_pad == SMELT_PAD_VALID)
            lo[i] = hi[i] = 0;
        else
            lo[i] = c->pads[i], hi[i] = c->pads[2 + i];
    }
    *OH = (c->H + lo[0] + hi[0] - (c->KH - 1) * c->dh - 1) / c->sh + 1;
    *OW = (c->W + lo[1] + hi[1] - (c->KW - 1) * c->dw - 1) / c->sw + 1;
}

/* The graph the conv suites run for case c in dt: outs[0] = conv(x, w),
 * outs[1] = relu(conv(x, w, b)), and random inputs x, w, b in in[3] */
static inline smelt_graph *conv_relu_graph(smelt_ctx *ctx, trng *r, const ccase *c, smelt_dtype dt,
                                           smelt_node **outs, smelt_tensor **in)
{
    int64_t xs[4], ws[4];
    conv_shapes(c, xs, ws);
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", dt, c->rank, xs), *w = smelt_input(g, "w", dt, c->rank, ws);
    smelt_node *b = smelt_input(g, "b", dt, 1, (int64_t[]){c->O});
    smelt_window win;
    conv_window(c, &win);
    outs[0] = smelt_conv(g, x, w, NULL, &win);
    outs[1] = smelt_unary(g, SMELT_OP_RELU, smelt_conv(g, x, w, b, &win));
    T_OK(ctx, smelt_graph_status(g));
    in[0] = t_rand(ctx, r, dt, c->rank, xs), in[1] = t_rand(ctx, r, dt, c->rank, ws);
    in[2] = t_rand(ctx, r, dt, 1, (int64_t[]){c->O});
    return g;
}

/* ONNX Conv in double: out [N, O, OH, OW] */
static inline void naive_conv(const ccase *c, const smelt_tensor *x, const smelt_tensor *w, const smelt_tensor *b,
                       const int64_t *lo, int64_t OH, int64_t OW, double *out)
{
    int64_t Cg = c->C / c->groups, Og = c->O / c->groups;
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t o = 0; o < c->O; o++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double acc = b ? smelt_tensor_get(b, o) : 0;
                    for (int64_t ci = 0; ci < Cg; ci++)
                        for (int64_t kh = 0; kh < c->KH; kh++)
                            for (int64_t kw = 0; kw < c->KW; kw++) {
                                int64_t ih = oh * c->sh + kh * c->dh - lo[0], iw = ow * c->sw + kw * c->dw - lo[1];
                                if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W)
                                    continue;
                                int64_t chn = o / Og * Cg + ci;
                                acc += smelt_tensor_get(x, ((n * c->C + chn) * c->H + ih) * c->W + iw) *
                                       smelt_tensor_get(w, ((o * Cg + ci) * c->KH + kh) * c->KW + kw);
                            }
                    out[((n * c->O + o) * OH + oh) * OW + ow] = acc;
                }
}

#endif
