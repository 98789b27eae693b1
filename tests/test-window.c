/* Windows and scans: convolution (1-D and 2-D, strides, pads, auto_pad,
 * dilations, groups, depthwise, bias), max and average pooling (ceil_mode,
 * count_include_pad, dilations), global pooling, cumsum and cumprod,
 * against a direct computation in double written here (ONNX's and NumPy's
 * definitions) and the float64 reference interpreter; kernel counts (one
 * product kernel, one fused epilogue, no copy for a window); the same bits
 * on TCC and CC and at any thread count; bad attributes as errors. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "plan.h" /* smelt__conv_own_kernel, smelt__conv_force_blas */
#include "window-cases.h"

static void check_close(const char *what, const smelt_tensor *got, const double *want, int64_t n, double tol)
{
    cr_assert_eq(smelt_tensor_numel(got), n, "%s: %lld elements, expected %lld", what,
                 (long long)smelt_tensor_numel(got), (long long)n);
    for (int64_t i = 0; i < n; i++) {
        double g = smelt_tensor_get(got, i);
        cr_assert(fabs(g - want[i]) <= tol * (1 + fabs(want[i])) || (isnan(g) && isnan(want[i])),
                  "%s: element %lld is %.9g, expected %.9g", what, (long long)i, g, want[i]);
    }
}

/* conv + bias + relu against the direct computation and the reference;
 * kernels: the products, the epilogue (+ a copy of the padded / phased
 * input when there is padding or a stride) */
Test(window, conv_against_direct_computation)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 1);
    const smelt_dtype dts[] = {SMELT_F32, SMELT_F64, SMELT_F16};
    for (int t = 0; t < NELEMS(dts); t++)
        for (int k = 0; k < NELEMS(conv_cases); k++) {
            const ccase *c = &conv_cases[k];
            smelt_dtype dt = dts[t];
            smelt_graph *g = t_graph(ctx);
            int64_t xs[4], ws[4];
            conv_shapes(c, xs, ws);
            smelt_node *x = smelt_input(g, "x", dt, c->rank, xs), *w = smelt_input(g, "w", dt, c->rank, ws);
            smelt_node *b = smelt_input(g, "b", dt, 1, (int64_t[]){c->O});
            smelt_window win;
            conv_window(c, &win);
            smelt_node *y = smelt_unary(g, SMELT_OP_RELU, smelt_conv(g, x, w, b, &win));
            T_OK(ctx, smelt_graph_status(g));
            smelt_tensor *in[3] = {t_rand(ctx, &r, dt, c->rank, xs), t_rand(ctx, &r, dt, c->rank, ws),
                                   t_rand(ctx, &r, dt, 1, (int64_t[]){c->O})};
            int64_t lo[2], hi[2], OH, OW;
            conv_geometry(c, lo, hi, &OH, &OW);
            int64_t n = c->N * c->O * OH * OW;
            double *want = malloc(sizeof(double) * (size_t)n);
            naive_conv(c, in[0], in[1], in[2], lo, OH, OW, want);
            for (int64_t i = 0; i < n; i++)
                want[i] = want[i] < 0 ? 0 : want[i];
            char what[96];
            snprintf(what, sizeof what, "%s, conv case %d", smelt_dtype_name(dt), k);
            cr_assert_eq(smelt_node_shape(y)[c->rank - 1], OW, "%s: OW", what);
            smelt_tensor *ref, *got3 = NULL, *got0 = NULL;
            t_reference(ctx, g, 1, &y, 3, in, &ref);
            check_close(what, ref, want, n, dt == SMELT_F64 ? 1e-12 : dt == SMELT_F16 ? 2e-3 : 1e-5);
            smelt_plan *p3 = t_plan(ctx, g, 1, &y, 3), *p0 = t_plan(ctx, g, 1, &y, 0);
            t_run(p3, 3, in, 1, &got3);
            t_run(p0, 3, in, 1, &got0);
            double tol = dt == SMELT_F64 ? 1e-12 : dt == SMELT_F16 ? 2e-2 : 2e-5;
            check_close(what, got3, want, n, tol);
            check_close(what, got0, want, n, tol);
            if (dt == SMELT_F32) { /* one product kernel, one epilogue: bias + relu fused; a copy lays the
                                      padded, phased input out when there is one */
                smelt_plan_stats s = t_stats(p3);
                int laid = (lo[0] || lo[1] || hi[0] || hi[1]) + (c->sh > 1 || c->sw > 1);
                cr_assert_leq(s.kernels, 2 + laid, "%s: %d kernels\n%s", what, s.kernels, smelt_plan_describe(p3));
            }
            free(want);
            smelt_tensor_free(ref), smelt_tensor_free(got3), smelt_tensor_free(got0), t_free_all(in, 3);
            smelt_plan_free(p3), smelt_plan_free(p0);
            smelt_graph_free(g);
        }
    smelt_ctx_free(ctx);
}

/* Geometries for the products' own tests: output channels that are not a
 * multiple of the kernel's block of 6, columns that are not a multiple of
 * its 64 nor of a thread's tile, more channels than a part of the sum
 * holds (the 1-D case of 200), strides, dilations, groups, depthwise,
 * padding, one image and several. */
static const ccase prod_cases[] = {
    {4, 2, 5, 13, 17, 13, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, 0},
    {4, 1, 20, 30, 33, 20, 3, 3, 2, 2, 1, 1, 1, {1, 1, 1, 1}, 0},   /* strided */
    {4, 3, 12, 20, 21, 18, 3, 3, 1, 1, 2, 2, 3, {2, 2, 2, 2}, 0},   /* dilated, grouped */
    {4, 2, 8, 11, 12, 8, 3, 3, 1, 1, 1, 1, 8, {1, 1, 1, 1}, 0},     /* depthwise */
    {4, 1, 16, 40, 40, 24, 3, 3, 1, 1, 1, 1, 1, {1, 1, 1, 1}, 0},   /* tiles of columns over threads */
    {3, 1, 200, 1, 100, 9, 1, 5, 1, 1, 1, 1, 1, {0, 2, 0, 2}, 0},   /* 1-D, channels in parts */
    {3, 2, 12, 1, 300, 10, 1, 3, 1, 2, 1, 2, 2, {0, 1, 0, 1}, 0},   /* 1-D strided, dilated, grouped */
    {3, 3, 70, 1, 150, 7, 1, 5, 1, 1, 1, 1, 1, {0, 2, 0, 2}, 0},    /* 1-D */
};

/* conv(x, w) in double, and the product's bound on each element's error:
 * gamma_k sum |w x| (k the terms of the sum, u the dtype's unit roundoff),
 * any order of the sum */
static void conv_with_bound(smelt_ctx *ctx, const ccase *c, const smelt_tensor *x, const smelt_tensor *w, const int64_t *lo,
                            int64_t OH, int64_t OW, double u, double *out, double *bound)
{
    int64_t Cg = c->C / c->groups, n = c->N * c->O * OH * OW;
    double k = (double)(Cg * c->KH * c->KW), gamma = k * u / (1 - k * u);
    smelt_tensor *ax = t_tensor(ctx, SMELT_F64, smelt_tensor_ndim(x), smelt_tensor_shape(x));
    smelt_tensor *aw = t_tensor(ctx, SMELT_F64, smelt_tensor_ndim(w), smelt_tensor_shape(w));
    for (int64_t i = 0; i < smelt_tensor_numel(x); i++)
        t_set(ax, i, fabs(smelt_tensor_get(x, i)));
    for (int64_t i = 0; i < smelt_tensor_numel(w); i++)
        t_set(aw, i, fabs(smelt_tensor_get(w, i)));
    naive_conv(c, x, w, NULL, lo, OH, OW, out);
    naive_conv(c, ax, aw, NULL, lo, OH, OW, bound);
    for (int64_t i = 0; i < n; i++)
        bound[i] *= gamma;
    smelt_tensor_free(ax), smelt_tensor_free(aw);
}

/* The convolution's products, smelt's own f32 kernel (on CPUs with
 * AVX-512) and BLAS's (forced; and f64's, BLAS's everywhere): each element
 * within the product's bound of the float64 value, on fresh random data
 * (never zero); the same bits fused (an epilogue reads the conv) and
 * unfused, and on 1 and 2 threads; the plan says which computed them. */
Test(window, conv_products_within_their_bound, .timeout = 240)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 3);
    const smelt_dtype dts[] = {SMELT_F32, SMELT_F64};
    for (int blas = 0; blas < 2; blas++)
        for (int t = 0; t < NELEMS(dts); t++)
            for (int k = 0; k < NELEMS(prod_cases) + NELEMS(conv_cases); k++) {
                const ccase *c = k < NELEMS(prod_cases) ? &prod_cases[k] : &conv_cases[k - NELEMS(prod_cases)];
                smelt_dtype dt = dts[t];
                smelt__conv_force_blas(blas);
                T_OK(ctx, smelt_ctx_set_threads(ctx, 1));
                int64_t lo[2], hi[2], OH, OW;
                conv_geometry(c, lo, hi, &OH, &OW);
                smelt_node *outs[2];
                smelt_tensor *in[3];
                smelt_graph *g = conv_relu_graph(ctx, &r, c, dt, outs, in);
                int64_t n = c->N * c->O * OH * OW, plane = OH * OW;
                double *want = malloc(sizeof(double) * (size_t)n), *bound = malloc(sizeof(double) * (size_t)n);
                double u = dt == SMELT_F32 ? 0x1p-24 : 0x1p-53;
                conv_with_bound(ctx, c, in[0], in[1], lo, OH, OW, u, want, bound);
                bool own = smelt__conv_own_kernel(dt);
                cr_assert(!own || (dt == SMELT_F32 && !blas), "own kernel for %s, BLAS forced %d", smelt_dtype_name(dt),
                          blas);
                char what[128];
                snprintf(what, sizeof what, "%s, %s, case %d", smelt_dtype_name(dt), own ? "own kernel" : "BLAS", k);
                smelt_plan *p3 = t_plan(ctx, g, 2, outs, 3), *p0 = t_plan(ctx, g, 2, outs, 0);
                cr_assert(t_contains(smelt_plan_describe(p3), own ? "smelt's AVX-512 kernel]" : "accumulated in BLAS"),
                          "%s\n%s", what, smelt_plan_describe(p3));
                smelt_tensor *got[2] = {NULL, NULL}, *unf[2] = {NULL, NULL}, *two[2] = {NULL, NULL};
                t_run(p3, 3, in, 2, got);
                t_run(p0, 3, in, 2, unf);
                T_OK(ctx, smelt_ctx_set_threads(ctx, 2));
                t_run(p3, 3, in, 2, two);
                for (int64_t i = 0; i < n; i++) {
                    double y = smelt_tensor_get(got[0], i), bi = smelt_tensor_get(in[2], i / plane % c->O);
                    cr_assert(fabs(y - want[i]) <= bound[i], "%s: element %lld is %a, the float64 value %a, bound %g",
                              what, (long long)i, y, want[i], bound[i]);
                    double e = fmax(want[i] + bi, 0), yr = smelt_tensor_get(got[1], i); /* + one rounding */
                    cr_assert(fabs(yr - e) <= bound[i] + 2 * u * (fabs(want[i]) + fabs(bi)), "%s, relu(conv + b): "
                              "element %lld is %a, the float64 value %a", what, (long long)i, yr, e);
                }
                int64_t at;
                for (int o = 0; o < 2; o++) {
                    cr_assert(t_same_results(got[o], unf[o], &at), "%s, output %d: fused %a, unfused %a at [%lld]",
                              what, o, smelt_tensor_get(got[o], at), smelt_tensor_get(unf[o], at), (long long)at);
                    cr_assert(t_same_results(got[o], two[o], &at), "%s, output %d: 1 thread %a, 2 threads %a at "
                              "[%lld]", what, o, smelt_tensor_get(got[o], at), smelt_tensor_get(two[o], at),
                              (long long)at);
                }
                free(want), free(bound);
                t_free_all(got, 2), t_free_all(unf, 2), t_free_all(two, 2), t_free_all(in, 3);
                smelt_plan_free(p3), smelt_plan_free(p0);
                smelt_graph_free(g);
            }
    smelt__conv_force_blas(false);
    smelt_ctx_free(ctx);
}

/* The same bits on 1, 2 and 3 threads, on TCC and CC */
Test(window, conv_bits_at_any_thread_count_and_backend, .timeout = 120)
{
    trng r;
    trng_init(&r, 2);
    smelt_tensor *first = NULL;
    smelt_tensor *in[2] = {NULL, NULL};
    const char *backends[] = {"TCC", "CC"};
    for (int bi = 0; bi < 2; bi++)
        for (int th = 1; th <= 3; th++) {
            smelt_ctx *ctx = t_ctx();
            if (smelt_backend_check(ctx, backends[bi]) != SMELT_OK) {
                smelt_ctx_free(ctx);
                continue;
            }
            T_OK(ctx, smelt_ctx_set_backend(ctx, backends[bi]));
            T_OK(ctx, smelt_ctx_set_threads(ctx, th));
            smelt_graph *g = t_graph(ctx);
            smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(2, 16, 40, 40));
            smelt_node *w = smelt_input(g, "w", SMELT_F32, SHP(24, 16, 3, 3));
            smelt_window win;
            smelt_window_init(&win);
            win.pads[0] = win.pads[1] = win.pads[2] = win.pads[3] = 1;
            smelt_node *y = smelt_expr(g, "tanh(c) * 2 + 1", (const char *[]){"c"},
                                       (smelt_node *[]){smelt_conv(g, x, w, NULL, &win)}, 1);
            T_OK(ctx, smelt_graph_status(g));
            if (!in[0]) {
                in[0] = t_rand(ctx, &r, SMELT_F32, SHP(2, 16, 40, 40));
                in[1] = t_rand(ctx, &r, SMELT_F32, SHP(24, 16, 3, 3));
            }
            smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
            smelt_tensor *got = NULL;
            t_run(p, 2, in, 1, &got);
            if (!first)
                first = got;
            else {
                cr_assert(t_bitwise_equal(first, got), "%s, %d threads: other bits", backends[bi], th);
                smelt_tensor_free(got);
            }
            smelt_plan_free(p);
            smelt_graph_free(g);
            smelt_ctx_free(ctx);
        }
    smelt_tensor_free(first);
    t_free_all(in, 2);
}

Test(window, conv_bad_attributes_are_errors)
{
    smelt_ctx *ctx = t_ctx();
    struct {
        int64_t xs[4], ws[4];
        int64_t stride, pad, groups;
        const char *msg;
    } bad[] = {
        {{1, 4, 8, 8}, {4, 4, 3, 3}, -1, 0, 1, "stride -1"},
        {{1, 4, 8, 8}, {4, 4, 3, 3}, 0, 0, 1, "stride 0"},
        {{1, 4, 2, 2}, {4, 4, 3, 3}, 1, 0, 1, "larger than the padded input"},
        {{1, 4, 8, 8}, {4, 3, 3, 3}, 1, 0, 1, "channels"},
        {{1, 4, 8, 8}, {4, 2, 3, 3}, 1, 0, 3, "groups 3"},
        {{1, 4, 8, 8}, {4, 4, 3, 3}, 1, -2, 1, "pads"},
    };
    for (int k = 0; k < NELEMS(bad); k++) {
        smelt_graph *g = t_graph(ctx);
        smelt_node *x = smelt_input(g, "x", SMELT_F32, 4, bad[k].xs), *w = smelt_input(g, "w", SMELT_F32, 4, bad[k].ws);
        smelt_window win;
        smelt_window_init(&win);
        win.strides[0] = win.strides[1] = bad[k].stride;
        win.pads[0] = bad[k].pad;
        win.groups = bad[k].groups;
        cr_assert_null(smelt_conv(g, x, w, NULL, &win), "case %d", k);
        cr_assert(t_contains(smelt_graph_errmsg(g), bad[k].msg), "case %d: \"%s\"", k, smelt_graph_errmsg(g));
        smelt_graph_free(g);
    }
    smelt_graph *g = t_graph(ctx); /* integers, ranks, NULL window */
    smelt_node *xi = smelt_input(g, "x", SMELT_I32, SHP(1, 2, 4, 4)), *w = smelt_input(g, "w", SMELT_F32, SHP(2, 2, 1, 1));
    cr_assert_null(smelt_conv(g, xi, w, NULL, NULL));
    smelt_graph_free(g);
    g = t_graph(ctx);
    xi = smelt_input(g, "x", SMELT_I32, SHP(1, 2, 4, 4));
    smelt_window win;
    smelt_window_init(&win);
    cr_assert_null(smelt_conv(g, xi, smelt_input(g, "w", SMELT_F32, SHP(2, 2, 1, 1)), NULL, &win));
    cr_assert(t_contains(smelt_graph_errmsg(g), "dtype i32"), "%s", smelt_graph_errmsg(g));
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* ---- pooling ---------------------------------------------------------------- */
typedef struct pcase {
    int rank;
    int64_t N, C, H, W, KH, KW, sh, sw, dh, dw;
    int64_t pads[4];
    int ceil_mode, count_include_pad, auto_pad;
} pcase;

static const pcase pool_cases[] = {
    {4, 2, 3, 8, 8, 2, 2, 2, 2, 1, 1, {0, 0, 0, 0}, 0, 0, 0},
    {4, 1, 2, 7, 9, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 0, 0, 0},
    {4, 1, 2, 7, 9, 3, 3, 2, 2, 1, 1, {1, 1, 1, 1}, 0, 1, 0},
    {4, 1, 2, 7, 8, 3, 2, 2, 3, 1, 1, {1, 0, 0, 1}, 1, 0, 0},
    {4, 1, 2, 7, 8, 3, 2, 2, 3, 1, 1, {1, 0, 0, 1}, 1, 1, 0},
    {4, 1, 3, 9, 9, 2, 3, 1, 2, 2, 2, {0, 1, 1, 0}, 0, 0, 0},   /* dilated (max only) */
    {4, 1, 2, 7, 8, 3, 3, 2, 2, 1, 1, {0, 0, 0, 0}, 0, 0, 1},   /* SAME_UPPER */
    {3, 2, 3, 1, 15, 1, 3, 1, 2, 1, 1, {0, 1, 0, 1}, 1, 0, 0},  /* 1-D */
};

static void naive_pool(const pcase *c, const smelt_tensor *x, bool max, const int64_t *lo, const int64_t *hi,
                       int64_t OH, int64_t OW, double *out)
{
    for (int64_t nc = 0; nc < c->N * c->C; nc++)
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                double acc = max ? -INFINITY : 0;
                int64_t cnt = 0;
                for (int64_t kh = 0; kh < c->KH; kh++)
                    for (int64_t kw = 0; kw < c->KW; kw++) {
                        int64_t ih = oh * c->sh + kh * c->dh - lo[0], iw = ow * c->sw + kw * c->dw - lo[1];
                        bool in_pad = ih >= -lo[0] && ih < c->H + hi[0] && iw >= -lo[1] && iw < c->W + hi[1];
                        if (ih < 0 || ih >= c->H || iw < 0 || iw >= c->W) {
                            cnt += c->count_include_pad && in_pad;
                            continue;
                        }
                        double v = smelt_tensor_get(x, (nc * c->H + ih) * c->W + iw);
                        acc = max ? (v > acc ? v : acc) : acc + v;
                        cnt++;
                    }
                out[(nc * OH + oh) * OW + ow] = max ? acc : acc / (double)cnt;
            }
}

Test(window, pooling_against_direct_computation)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 3);
    const smelt_dtype dts[] = {SMELT_F32, SMELT_F64, SMELT_I32};
    for (int t = 0; t < NELEMS(dts); t++)
        for (int k = 0; k < NELEMS(pool_cases); k++)
            for (int max = 0; max < 2; max++) {
                const pcase *c = &pool_cases[k];
                smelt_dtype dt = dts[t];
                if ((!max && dt == SMELT_I32) || (!max && (c->dh > 1 || c->dw > 1)))
                    continue;
                int64_t xs[4] = {c->N, c->C, c->H, c->W};
                if (c->rank == 3)
                    xs[2] = c->W;
                smelt_graph *g = t_graph(ctx);
                smelt_node *x = smelt_input(g, "x", dt, c->rank, xs);
                smelt_window win;
                smelt_window_init(&win);
                win.kernel[0] = c->KH, win.kernel[1] = c->KW, win.strides[0] = c->sh, win.strides[1] = c->sw;
                win.dilations[0] = c->dh, win.dilations[1] = c->dw;
                memcpy(win.pads, c->pads, sizeof win.pads);
                win.ceil_mode = c->ceil_mode, win.count_include_pad = c->count_include_pad, win.auto_pad = c->auto_pad;
                smelt_node *y = max ? smelt_max_pool(g, x, &win) : smelt_avg_pool(g, x, &win);
                y = smelt_mul(g, y, smelt_scalar(g, 2)); /* fused with what follows */
                T_OK(ctx, smelt_graph_status(g));
                int64_t lo[2], hi[2], out[2];
                for (int i = 0; i < 2; i++) {
                    int64_t n = i ? c->W : c->H, kk = i ? c->KW : c->KH, s = i ? c->sw : c->sh, d = i ? c->dw : c->dh;
                    if (c->auto_pad == SMELT_PAD_SAME_UPPER)
                        same_pads(c->auto_pad, n, kk, s, d, &lo[i], &hi[i]);
                    else
                        lo[i] = c->pads[i], hi[i] = c->pads[2 + i];
                    int64_t room = n + lo[i] + hi[i] - (kk - 1) * d - 1;
                    out[i] = (c->ceil_mode ? (room + s - 1) / s : room / s) + 1;
                    if (c->ceil_mode && (out[i] - 1) * s >= n + lo[i])
                        out[i]--;
                }
                smelt_tensor *in = t_rand(ctx, &r, dt, c->rank, xs);
                int64_t n = c->N * c->C * out[0] * out[1];
                double *want = malloc(sizeof(double) * (size_t)n);
                naive_pool(c, in, max, lo, hi, out[0], out[1], want);
                for (int64_t i = 0; i < n; i++)
                    want[i] *= 2;
                char what[96];
                snprintf(what, sizeof what, "%s, %s case %d", smelt_dtype_name(dt), max ? "max" : "avg", k);
                smelt_tensor *ref, *got = NULL;
                t_reference(ctx, g, 1, &y, 1, &in, &ref);
                check_close(what, ref, want, n, 1e-12);
                smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
                t_run(p, 1, &in, 1, &got);
                check_close(what, got, want, n, dt == SMELT_F32 ? 1e-6 : 1e-12);
                smelt_plan_stats s = t_stats(p);
                cr_assert_eq(s.kernels, 1, "%s: %d kernels\n%s", what, s.kernels, smelt_plan_describe(p));
                cr_assert_eq(s.copies, 0, "%s: a copy\n%s", what, smelt_plan_describe(p));
                free(want);
                smelt_tensor_free(ref), smelt_tensor_free(got), smelt_tensor_free(in);
                smelt_plan_free(p);
                smelt_graph_free(g);
            }
    smelt_ctx_free(ctx);
}

Test(window, pooling_bad_attributes_and_global_pools)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(1, 2, 4, 4));
    smelt_window win;
    smelt_window_init(&win);
    win.kernel[0] = 5, win.kernel[1] = 5;
    cr_assert_null(smelt_max_pool(g, x, &win));
    cr_assert(t_contains(smelt_graph_errmsg(g), "larger than the padded input"), "%s", smelt_graph_errmsg(g));
    smelt_graph_free(g);
    g = t_graph(ctx);
    x = smelt_input(g, "x", SMELT_F32, SHP(1, 2, 4, 4));
    win.kernel[0] = 2, win.kernel[1] = 0;
    cr_assert_null(smelt_avg_pool(g, x, &win));
    cr_assert(t_contains(smelt_graph_errmsg(g), "kernel size 0"), "%s", smelt_graph_errmsg(g));
    smelt_graph_free(g);

    trng r;
    trng_init(&r, 4);
    g = t_graph(ctx);
    x = smelt_input(g, "x", SMELT_F32, SHP(2, 3, 5, 6));
    smelt_node *y[2] = {smelt_global_max_pool(g, x), smelt_global_avg_pool(g, x)};
    T_OK(ctx, smelt_graph_status(g));
    cr_assert_eq(smelt_node_ndim(y[0]), 4);
    cr_assert_eq(smelt_node_shape(y[1])[3], 1);
    smelt_tensor *in = t_rand(ctx, &r, SMELT_F32, SHP(2, 3, 5, 6));
    t_check_plan("global pools", ctx, g, 2, y, 3, 1, &in, T_CHAIN);
    smelt_tensor_free(in);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* ---- scans ------------------------------------------------------------------ */
Test(window, cumsum_cumprod_against_numpy_order)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 5);
    const smelt_dtype dts[] = {SMELT_F32, SMELT_F64, SMELT_F16, SMELT_I32, SMELT_I64, SMELT_U8, SMELT_BOOL};
    const int64_t shapes[][3] = {{37, 0, 0}, {5, 9, 0}, {3, 4, 6}};
    for (int t = 0; t < NELEMS(dts); t++)
        for (int s = 0; s < 3; s++)
            for (int opi = 0; opi < 2; opi++)
                for (int mode = 0; mode < 4; mode++) {
                    int nd = s + 1, axis = (int)trng_range(&r, -nd, nd - 1);
                    smelt_dtype dt = dts[t];
                    smelt_graph *g = t_graph(ctx);
                    smelt_node *x = smelt_input(g, "x", dt, nd, shapes[s]);
                    int excl = mode & 1, rev = mode >> 1 & 1;
                    smelt_node *y = opi ? smelt_cumprod(g, x, axis, excl, rev) : smelt_cumsum(g, x, axis, excl, rev);
                    T_OK(ctx, smelt_graph_status(g));
                    smelt_dtype want_dt = t_is_float(dt) ? dt : SMELT_I64;
                    cr_assert_eq(smelt_node_dtype(y), want_dt);
                    smelt_tensor *in = t_rand(ctx, &r, dt, nd, shapes[s]);
                    if (opi && t_is_float(dt)) /* products of values near 1 */
                        t_fill_uniform(in, &r, 0.5, 1.5);
                    int64_t n = smelt_tensor_numel(in), len = shapes[s][axis < 0 ? axis + nd : axis];
                    int ax = axis < 0 ? axis + nd : axis;
                    int64_t stride = 1;
                    for (int d = ax + 1; d < nd; d++)
                        stride *= shapes[s][d];
                    double *want = malloc(sizeof(double) * (size_t)n);
                    /* NumPy's order, in the dtype (f32: float steps; f16 rounded each step) */
                    for (int64_t i = 0; i < n; i++) {
                        int64_t pos = i / stride % len, base = i - pos * stride;
                        double acc = opi ? 1 : 0;
                        int64_t iacc = opi ? 1 : 0;
                        for (int64_t k = 0; k < len; k++) {
                            int64_t e = rev ? len - 1 - k : k;
                            if (excl ? (rev ? e <= pos : e >= pos) : (rev ? e < pos : e > pos))
                                continue;
                            double v = smelt_tensor_get(in, base + e * stride);
                            if (dt == SMELT_F64)
                                acc = opi ? acc * v : acc + v;
                            else if (t_is_float(dt))
                                acc = (double)(opi ? (float)acc * (float)v : (float)acc + (float)v),
                                acc = dt == SMELT_F16 ? t_round_half(dt, acc) : acc;
                            else
                                iacc = (int64_t)(opi ? (uint64_t)iacc * (uint64_t)(int64_t)v
                                                     : (uint64_t)iacc + (uint64_t)(int64_t)v);
                        }
                        want[i] = t_is_float(dt) ? acc : (double)iacc;
                    }
                    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
                    smelt_tensor *got = NULL;
                    t_run(p, 1, &in, 1, &got);
                    char what[96];
                    snprintf(what, sizeof what, "%s %s, shape %d, axis %d, mode %d", opi ? "cumprod" : "cumsum",
                             smelt_dtype_name(dt), s, axis, mode);
                    for (int64_t i = 0; i < n; i++) {
                        double gv = smelt_tensor_get(got, i);
                        cr_assert(gv == want[i] || (opi && !t_is_float(dt)), "%s: element %lld is %.9g, "
                                  "expected %.9g", what, (long long)i, gv, want[i]);
                    }
                    smelt_tensor *ref;
                    t_reference(ctx, g, 1, &y, 1, &in, &ref);
                    t_expect_match(what, got, ref, (t_tol){64, 1e-5, 1e-5, false});
                    free(want);
                    smelt_tensor_free(ref), smelt_tensor_free(got), smelt_tensor_free(in);
                    smelt_plan_free(p);
                    smelt_graph_free(g);
                }
    smelt_ctx_free(ctx);
}

Test(window, cumsum_gradient_is_a_reverse_cumsum)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 6);
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F64, SHP(4, 7)), *wt = smelt_input(g, "w", SMELT_F64, SHP(4, 7));
    smelt_node *loss = smelt_reduce(g, SMELT_OP_SUM, smelt_mul(g, smelt_cumsum(g, x, 1, 0, 0), wt), 0, NULL, 0);
    smelt_node *dx;
    T_OK(ctx, smelt_grad(g, loss, 1, &x, &dx));
    smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F64, SHP(4, 7)), t_rand(ctx, &r, SMELT_F64, SHP(4, 7))};
    smelt_plan *p = t_plan(ctx, g, 1, &dx, 3);
    smelt_tensor *got = NULL;
    t_run(p, 2, in, 1, &got);
    for (int64_t i = 0; i < 4; i++)
        for (int64_t j = 0; j < 7; j++) {
            double want = 0;
            for (int64_t k = j; k < 7; k++)
                want += smelt_tensor_get(in[1], i * 7 + k);
            cr_assert(fabs(smelt_tensor_get(got, i * 7 + j) - want) < 1e-12);
        }
    smelt_tensor_free(got), t_free_all(in, 2), smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* The gradients got[0..nw-1] (f64) of the scalar loss that plan pl
 * computes from its n inputs, with respect to in[0..nw-1], against
 * one-step differences: the loss is linear in each element, so
 * loss(in + e_i) - loss(in) is exact up to rounding.  what names the case. */
static void check_linear_grads(smelt_plan *pl, int n, smelt_tensor **in, int nw, smelt_tensor *const *got,
                               const char *what)
{
    smelt_tensor *l0 = NULL;
    t_run(pl, n, in, 1, &l0);
    double base = smelt_tensor_get(l0, 0);
    for (int which = 0; which < nw; which++)
        for (int64_t i = 0; i < smelt_tensor_numel(in[which]); i++) {
            double *e = (double *)smelt_tensor_data(in[which]) + i, keep = *e;
            smelt_tensor *l1 = NULL;
            *e = keep + 1;
            t_run(pl, n, in, 1, &l1);
            *e = keep;
            double want = smelt_tensor_get(l1, 0) - base, gv = smelt_tensor_get(got[which], i);
            smelt_tensor_free(l1);
            cr_assert(fabs(gv - want) < 1e-9 * (1 + fabs(base)) && isfinite(gv),
                      "%s: d(input %d)[%lld] = %.12g, expected %.12g", what, which, (long long)i, gv, want);
        }
    smelt_tensor_free(l0);
}

/* d/dx and d/dw of sum(conv(x, w) * r) (f64: linear in each element, so a
 * difference of one step is exact up to rounding) for 2-D and 1-D convs
 * with padding, dilation, strides (an odd and an even kernel against odd
 * and even sizes), groups and a depthwise conv */
Test(window, conv_gradients_against_differences, .timeout = 120)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 8);
    struct {
        int rank;
        int64_t xs[4], ws[4], pads[4], dil[2], str[2], groups;
    } cases[] = {{4, {2, 3, 6, 7}, {4, 3, 3, 2}, {1, 0, 1, 1}, {1, 2}, {1, 1}, 1},
                 {3, {2, 4, 9}, {3, 4, 3}, {0, 2, 0, 1}, {1, 2}, {1, 1}, 1},
                 {4, {2, 2, 7, 8}, {3, 2, 3, 3}, {1, 1, 0, 1}, {1, 1}, {2, 3}, 1},
                 {4, {1, 3, 9, 6}, {2, 3, 2, 3}, {0, 1, 1, 0}, {2, 1}, {2, 2}, 1},
                 {4, {2, 4, 5, 6}, {6, 2, 3, 2}, {1, 0, 1, 1}, {1, 2}, {1, 2}, 2},
                 {4, {1, 3, 6, 6}, {3, 1, 3, 3}, {1, 1, 1, 1}, {1, 1}, {2, 1}, 3},
                 {3, {2, 4, 11}, {4, 2, 4}, {0, 2, 0, 1}, {1, 1}, {1, 3}, 2}};
    for (int k = 0; k < (int)NELEMS(cases); k++) {
        smelt_graph *g = t_graph(ctx);
        int rk = cases[k].rank;
        smelt_node *x = smelt_input(g, "x", SMELT_F64, rk, cases[k].xs), *w = smelt_input(g, "w", SMELT_F64, rk, cases[k].ws);
        smelt_window win;
        smelt_window_init(&win);
        memcpy(win.pads, cases[k].pads, sizeof win.pads);
        win.dilations[0] = cases[k].dil[0], win.dilations[1] = cases[k].dil[1];
        win.strides[0] = cases[k].str[0], win.strides[1] = cases[k].str[1], win.groups = cases[k].groups;
        smelt_node *c = smelt_conv(g, x, w, NULL, &win);
        T_OK(ctx, smelt_graph_status(g));
        smelt_node *rr = smelt_input(g, "r", SMELT_F64, smelt_node_ndim(c), smelt_node_shape(c));
        smelt_node *loss = smelt_reduce(g, SMELT_OP_SUM, smelt_mul(g, c, rr), 0, NULL, 0);
        smelt_node *d[2];
        T_OK(ctx, smelt_grad(g, loss, 2, (smelt_node *[]){x, w}, d));
        smelt_tensor *in[3] = {t_rand(ctx, &r, SMELT_F64, rk, cases[k].xs), t_rand(ctx, &r, SMELT_F64, rk, cases[k].ws),
                               t_rand(ctx, &r, SMELT_F64, smelt_node_ndim(c), smelt_node_shape(c))};
        smelt_plan *pl = t_plan(ctx, g, 1, &loss, 3), *pg = t_plan(ctx, g, 2, d, 3);
        smelt_tensor *got[2] = {NULL, NULL};
        t_run(pg, 3, in, 2, got);
        char what[32];
        snprintf(what, sizeof what, "conv case %d (x, w)", k);
        check_linear_grads(pl, 3, in, 2, got, what);
        t_free_all(got, 2), t_free_all(in, 3);
        smelt_plan_free(pl), smelt_plan_free(pg);
        smelt_graph_free(g);
    }
    smelt_ctx_free(ctx);
}

/* A graph file with a conv, a pool and a scan reads back to the same
 * graph text and the same results (bit for bit); bad parameters in a file
 * are errors, never a read out of bounds */
Test(window, graph_files_and_expressions)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 7);
    smelt_graph *g = t_graph(ctx);
    smelt_node *v[2] = {smelt_input(g, "x", SMELT_F32, SHP(2, 3, 9, 8)), smelt_input(g, "w", SMELT_F32, SHP(4, 3, 3, 3))};
    smelt_node *y[2] = {smelt_expr(g, "relu(conv(x, w, strides=2, pads=(1, 0, 1, 2)))", (const char *[]){"x", "w"}, v, 2),
                        smelt_expr(g, "cumsum(max_pool(x, kernel=(2, 3), strides=2, ceil_mode=True), axis=-1, "
                                      "reverse=1) + avg_pool(x, kernel=2, strides=2, pads=1, ceil_mode=1)[:, :, :1, :1]",
                                   (const char *[]){"x", "w"}, v, 2)};
    T_OK(ctx, smelt_graph_status(g));
    char *text = NULL, *text2 = NULL;
    T_OK(ctx, smelt_graph_to_text(g, 2, y, &text));
    cr_assert(t_contains(text, "conv_taps") && t_contains(text, "cumsum"), "%s", text);
    smelt_graph *g2;
    smelt_node **outs;
    int nout;
    T_OK(ctx, smelt_graph_from_text(ctx, text, &g2, &nout, &outs));
    T_OK(ctx, smelt_graph_to_text(g2, nout, outs, &text2));
    cr_assert_str_eq(text, text2);
    smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F32, SHP(2, 3, 9, 8)), t_rand(ctx, &r, SMELT_F32, SHP(4, 3, 3, 3))};
    smelt_tensor *a[2] = {NULL, NULL}, *b[2] = {NULL, NULL};
    smelt_plan *p1 = t_plan(ctx, g, 2, y, 3), *p2 = t_plan(ctx, g2, 2, outs, 3);
    t_run(p1, 2, in, 2, a);
    t_run(p2, 2, in, 2, b);
    for (int i = 0; i < 2; i++)
        cr_assert(t_bitwise_equal(a[i], b[i]), "output %d", i);
    smelt_tensor *ref[2];
    t_reference(ctx, g, 2, y, 2, in, ref);
    for (int i = 0; i < 2; i++)
        t_expect_match("graph file", a[i], ref[i], (t_tol){64, 1e-5, 1e-5, false});
    t_free_all(a, 2), t_free_all(b, 2), t_free_all(ref, 2), t_free_all(in, 2);
    smelt_plan_free(p1), smelt_plan_free(p2);
    smelt_free(outs), smelt_graph_free(g2);
    /* a conv_taps line whose parameters read past its input */
    const char *bad = "smelt-graph 1\n%0 = input \"x\" f32 [1, 1, 2, 10]\n%1 = input \"w\" f32 [2, 2, 3, 3]\n"
                      "%2 = conv_taps %0 %1 [1, 1, 1, 1, 1, 4, 4, 4] : f32 [1, 2, 4, 4]\noutput %2\n";
    cr_assert_neq(smelt_graph_from_text(ctx, bad, &g2, &nout, &outs), SMELT_OK);
    cr_assert(t_contains(smelt_errmsg(ctx), "conv_taps"), "%s", smelt_errmsg(ctx));
    smelt_free(text), smelt_free(text2);
    smelt_graph_free(g);
    /* expression errors: a missing kernel, an unknown keyword */
    g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(1, 2, 4, 4));
    cr_assert_null(smelt_expr(g, "max_pool(x)", (const char *[]){"x"}, &x, 1));
    cr_assert(t_contains(smelt_graph_errmsg(g), "kernel="), "%s", smelt_graph_errmsg(g));
    smelt_graph_free(g);
    g = t_graph(ctx);
    x = smelt_input(g, "x", SMELT_F32, SHP(1, 2, 4, 4));
    cr_assert_null(smelt_expr(g, "cumsum(x, axis=1, bogus=2)", (const char *[]){"x"}, &x, 1));
    cr_assert(t_contains(smelt_graph_errmsg(g), "bogus"), "%s", smelt_graph_errmsg(g));
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* d/da of sum(cumprod(a) * r) in f64 for every axis, exclusive and
 * reverse, lines with one and with two zeros among the values: cumprod
 * is linear in each element, so a difference of one step is exact up to
 * rounding (a rule that divides by the operand would fail at the zeros) */
Test(window, cumprod_gradients_against_differences)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 9);
    for (int axis = 0; axis < 2; axis++)
        for (int mode = 0; mode < 4; mode++) {
            smelt_graph *g = t_graph(ctx);
            smelt_node *a = smelt_input(g, "a", SMELT_F64, SHP(4, 6)), *rr = smelt_input(g, "r", SMELT_F64, SHP(4, 6));
            smelt_node *y = smelt_cumprod(g, a, axis, mode & 1, mode >> 1), *d;
            smelt_node *loss = smelt_reduce(g, SMELT_OP_SUM, smelt_mul(g, y, rr), 0, NULL, 0);
            T_OK(ctx, smelt_grad(g, loss, 1, &a, &d));
            smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F64, SHP(4, 6)), t_rand(ctx, &r, SMELT_F64, SHP(4, 6))};
            double *av = smelt_tensor_data(in[0]);
            av[1] = 0, av[8] = 0, av[14] = 0, av[20] = 0; /* one zero in some lines, two in others */
            smelt_plan *pl = t_plan(ctx, g, 1, &loss, 3), *pg = t_plan(ctx, g, 1, &d, 3);
            smelt_tensor *got = NULL;
            t_run(pg, 2, in, 1, &got);
            char what[48];
            snprintf(what, sizeof what, "cumprod axis %d, exclusive %d, reverse %d", axis, mode & 1, mode >> 1);
            check_linear_grads(pl, 2, in, 1, &got, what);
            smelt_tensor_free(got), t_free_all(in, 2);
            smelt_plan_free(pl), smelt_plan_free(pg);
            smelt_graph_free(g);
        }
    smelt_ctx_free(ctx);
}

/* Batch-norm after a convolution with constant weights (src/passes/convfold.c):
 * relu(bn(conv(x, W) + bias)) with W, the bias and the batch-norm's
 * parameters constants.  bn is written as the ONNX importer writes it,
 * (y - mean) / sqrt(var + eps) * gamma + beta, or as the bench does,
 * (y - mean) * (gamma / sqrt(var + eps)) + beta.  const_w / const_bn:
 * whether W (and the bias) / the batch-norm's parameters are constants or
 * inputs; also_y: the conv's value is an output too (a second reader). */
typedef struct bncase {
    int rank; /* 4: 3x3, pads 1; 3: 1-D, stride 2, 2 groups (a slice of the product's columns, a squeeze) */
    bool onnx_form, const_w, const_bn, also_y, zero_var;
} bncase;

static smelt_graph *bn_graph(smelt_ctx *ctx, trng *r, const bncase *c, smelt_dtype dt, smelt_node **outs,
                             int *nout, smelt_tensor **in, int *nin, smelt_tensor **consts)
{
    smelt_graph *g = t_graph(ctx);
    int64_t O = 6, C = 4;
    int64_t xs[4] = {2, C, 9, 11}, ws[4] = {O, C, 3, 3};
    smelt_window win;
    smelt_window_init(&win);
    if (c->rank == 4) {
        win.pads[0] = win.pads[1] = win.pads[2] = win.pads[3] = 1;
    } else {
        xs[2] = 23, ws[1] = C / 2, ws[2] = 5;
        win.strides[1] = 2, win.groups = 2, win.pads[1] = 1, win.pads[3] = 2;
    }
    *nin = 0;
    in[(*nin)++] = t_rand(ctx, r, dt, c->rank, xs);
    smelt_node *x = smelt_input(g, "x", dt, c->rank, xs), *p[6];
    const int64_t one[1] = {O};
    /* W, bias, mean, var, gamma, beta: var positive, mean near the conv's values */
    for (int k = 0; k < 6; k++) {
        bool is_w = k < 2;
        smelt_tensor *t = k == 0 ? t_rand(ctx, r, dt, c->rank, ws) : t_rand(ctx, r, dt, 1, one);
        if (k == 3)
            for (int64_t i = 0; i < O; i++)
                t_set(t, i, c->zero_var ? 0 : 0.5 + fabs(smelt_tensor_get(t, i)));
        consts[k] = t;
        if (is_w ? c->const_w : c->const_bn) {
            p[k] = smelt_constant(g, t);
        } else {
            char name[8];
            snprintf(name, sizeof name, "p%d", k);
            p[k] = smelt_input(g, name, dt, k == 0 ? c->rank : 1, k == 0 ? ws : one);
            in[(*nin)++] = t;
            consts[k] = NULL;
        }
    }
    smelt_node *y = smelt_conv(g, x, p[0], p[1], &win), *rs[4];
    for (int k = 0; k < 4; k++)
        rs[k] = smelt_reshape(g, p[2 + k], c->rank - 1, (const int64_t[]){-1, 1, 1});
    smelt_node *sd = smelt_unary(g, SMELT_OP_SQRT, smelt_add(g, rs[1], smelt_scalar(g, c->zero_var ? 0 : 1e-5)));
    smelt_node *bn = c->onnx_form ? smelt_add(g, smelt_mul(g, smelt_div(g, smelt_sub(g, y, rs[0]), sd), rs[2]), rs[3])
                                  : smelt_add(g, smelt_mul(g, smelt_sub(g, y, rs[0]), smelt_div(g, rs[2], sd)), rs[3]);
    *nout = 0;
    outs[(*nout)++] = smelt_unary(g, SMELT_OP_RELU, bn);
    if (c->also_y)
        outs[(*nout)++] = y;
    T_OK(ctx, smelt_graph_status(g));
    return g;
}

Test(window, batch_norm_folds_into_constant_conv_weights)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 44);
    const bncase cases[] = {
        {4, true, true, true, false, false},   {4, false, true, true, false, false},
        {3, true, true, true, false, false},   {3, false, true, true, false, false},
        {4, true, false, true, false, false},  /* W an input: not folded */
        {4, true, true, false, false, false},  /* the batch-norm's parameters inputs: not folded */
        {4, true, true, true, true, false},    /* the conv's value read twice: not folded */
        {4, true, true, true, false, true},    /* var + eps = 0: an infinite scale, not folded */
    };
    const smelt_dtype dts[] = {SMELT_F32, SMELT_F64};
    for (int t = 0; t < NELEMS(dts); t++)
        for (int k = 0; k < NELEMS(cases); k++) {
            const bncase *c = &cases[k];
            smelt_dtype dt = dts[t];
            smelt_node *outs[2];
            smelt_tensor *in[8], *consts[6];
            int nout, nin;
            smelt_graph *g = bn_graph(ctx, &r, c, dt, outs, &nout, in, &nin, consts);
            bool folds = c->const_w && c->const_bn && !c->also_y && !c->zero_var;
            char what[96];
            snprintf(what, sizeof what, "%s, batch-norm case %d", smelt_dtype_name(dt), k);
            smelt_tensor *ref[2], *got[2][2] = {{NULL, NULL}, {NULL, NULL}};
            t_reference(ctx, g, nout, outs, nin, in, ref); /* float64, the graph as written */
            smelt_plan *p[2] = {t_plan(ctx, g, nout, outs, 0), t_plan(ctx, g, nout, outs, 3)};
            /* folding rounds W * scale once more and drops the chain's roundings: a tolerance in the
               conv's magnitude (its values are ~5 here) */
            t_tol tol = dt == SMELT_F32 ? (t_tol){64, 2e-5 * 8, 1e-5, false} : (t_tol){64, 1e-13 * 8, 1e-13, false};
            for (int l = 0; l < 2; l++) {
                t_run(p[l], nin, in, nout, got[l]);
                for (int o = 0; o < nout; o++)
                    t_expect_match(what, got[l][o], ref[o], c->zero_var ? T_EXACT : tol);
            }
            smelt_plan_stats s0 = t_stats(p[0]), s3 = t_stats(p[1]);
            cr_assert_eq(s0.conv_folded, 0, "%s: opt_level 0 folds nothing", what);
            cr_assert_eq(s3.conv_folded, folds, "%s: %d folds\n%s", what, s3.conv_folded, smelt_plan_describe(p[1]));
            for (int64_t i = 0; i < smelt_tensor_numel(got[0][0]); i++) { /* opt_level 0 and 3 agree */
                double a = smelt_tensor_get(got[0][0], i), b = smelt_tensor_get(got[1][0], i);
                cr_assert(t_close(b, a, dt, &tol, 0) || (isinf(a) && a == b) || (isnan(a) && isnan(b)),
                          "%s: element %lld: %.9g at opt_level 3, %.9g at 0", what, (long long)i, b, a);
            }
            if (folds && k < 4) { /* the batch-norm's subtract, divide (or multiply) and multiply are gone
                                     from the epilogue: its operators against the same graph with W an input */
                bncase u = *c;
                u.const_w = false;
                smelt_node *uo[2];
                smelt_tensor *uin[8], *uc[6];
                int unout, unin;
                smelt_graph *ug = bn_graph(ctx, &r, &u, dt, uo, &unout, uin, &unin, uc);
                smelt_plan *up = t_plan(ctx, ug, unout, uo, 3);
                smelt_plan_stats su = t_stats(up);
                cr_assert_eq(su.conv_folded, 0, "%s: unfolded", what);
                cr_assert_eq(s3.kernels, su.kernels, "%s: %d kernels folded, %d not", what, s3.kernels, su.kernels);
                cr_assert_leq(s3.ops + 3, su.ops, "%s: %d operators folded, %d not\n%s\n%s", what, s3.ops, su.ops,
                              smelt_plan_describe(p[1]), smelt_plan_describe(up));
                cr_assert(strstr(smelt_plan_describe(p[1]), "conv scale/shift folded 1"), "%s: described\n%s", what,
                          smelt_plan_describe(p[1]));
                smelt_plan_free(up);
                smelt_graph_free(ug);
                t_free_all(uin, unin);
                for (int j = 0; j < 6; j++)
                    smelt_tensor_free(uc[j]);
            }
            for (int l = 0; l < 2; l++) {
                smelt_plan_free(p[l]);
                for (int o = 0; o < nout; o++)
                    smelt_tensor_free(got[l][o]);
            }
            for (int o = 0; o < nout; o++)
                smelt_tensor_free(ref[o]);
            t_free_all(in, nin);
            for (int j = 0; j < 6; j++)
                smelt_tensor_free(consts[j]);
            smelt_graph_free(g);
        }
    smelt_ctx_free(ctx);
}
