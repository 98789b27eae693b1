/* Indexed reads: take and take_along_axis (NumPy's semantics spelled out
 * by hand and the float64 reference), every value dtype x index dtype x
 * rank, alone and fused; no copy kernel for a gather; an index out of
 * range is SMELT_ERR_INDEX naming the operator and the index, on TCC and
 * CC, never a read outside the array; TCC == CC bitwise; one_hot, tril,
 * triu; the gradient (a scatter-add) against sums written out here. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static const smelt_dtype vdts[] = {SMELT_F32, SMELT_F64, SMELT_I32, SMELT_I64};
static const smelt_dtype idts[] = {SMELT_I32, SMELT_I64};

static smelt_plan *plan_on(smelt_ctx *ctx, smelt_graph *g, int n, smelt_node *const *outs, const char *be)
{
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    o.backend = be;
    smelt_plan *p = NULL;
    T_OK(ctx, smelt_plan_new(ctx, g, n, outs, &o, &p));
    return p;
}

/* np.take(a, x, axis) at flat index i of the result */
static double take_at(const smelt_tensor *a, const smelt_tensor *x, int ax, int64_t i)
{
    int an = smelt_tensor_ndim(a), xn = smelt_tensor_ndim(x), rn = an - 1 + xn;
    const int64_t *as = smelt_tensor_shape(a), *xs = smelt_tensor_shape(x);
    int64_t rs[8], c[8], t = i;
    for (int d = 0, k = 0; d < an; d++)
        if (d == ax)
            for (int e = 0; e < xn; e++)
                rs[k++] = xs[e];
        else
            rs[k++] = as[d];
    for (int d = rn - 1; d >= 0; d--)
        c[d] = t % rs[d], t /= rs[d];
    int64_t xo = 0;
    for (int e = 0; e < xn; e++)
        xo = xo * xs[e] + c[ax + e];
    int64_t j = (int64_t)smelt_tensor_get(x, xo);
    if (j < 0)
        j += as[ax];
    int64_t ao = 0;
    for (int d = 0; d < an; d++)
        ao = ao * as[d] + (d < ax ? c[d] : d == ax ? j : c[d + xn - 1]);
    return smelt_tensor_get(a, ao);
}

Test(gather, take_every_dtype_and_rank)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 1);
    for (int t = 0; t < NELEMS(vdts); t++)
        for (int u = 0; u < NELEMS(idts); u++)
            for (int rank = 1; rank <= 3; rank++)
                for (int xr = 0; xr <= 2; xr++) {
                    int64_t as[3], xs[2];
                    for (int d = 0; d < rank; d++)
                        as[d] = trng_range(&r, 1, 6);
                    for (int d = 0; d < xr; d++)
                        xs[d] = trng_range(&r, 1, 5);
                    int ax = (int)trng_range(&r, 0, rank - 1);
                    smelt_graph *g = t_graph(ctx);
                    smelt_node *a = smelt_input(g, "a", vdts[t], rank, as);
                    smelt_node *x = smelt_input(g, "x", idts[u], xr, xs);
                    smelt_node *y = smelt_take(g, a, x, ax - (trng_range(&r, 0, 1) ? rank : 0));
                    smelt_node *outs[] = {y, smelt_add(g, smelt_mul(g, y, smelt_scalar(g, 3)), smelt_scalar(g, 1))};
                    T_OK(ctx, smelt_graph_status(g));
                    smelt_tensor *in[2] = {t_rand(ctx, &r, vdts[t], rank, as), t_tensor(ctx, idts[u], xr, xs)};
                    int64_t nx = 1;
                    for (int d = 0; d < xr; d++)
                        nx *= xs[d];
                    for (int64_t i = 0; i < nx; i++)
                        t_set_i64(in[1], i, trng_range(&r, -as[ax], as[ax] - 1)); /* negatives too */
                    char label[96];
                    snprintf(label, sizeof label, "take %s[%d] by %s[%d] axis %d", smelt_dtype_name(vdts[t]), rank,
                             smelt_dtype_name(idts[u]), xr, ax);
                    smelt_plan_stats st = t_check_plan(label, ctx, g, 2, outs, 3, 2, in,
                                                       vdts[t] == SMELT_F32 ? t_chain_tol(SMELT_F32) : T_EXACT);
                    cr_assert_eq(st.kernels, 1, "%s: %d kernels (the gather is read inside the one kernel)", label,
                                 st.kernels);
                    smelt_plan *p = t_plan(ctx, g, 1, outs, 3);
                    smelt_tensor *out = NULL;
                    t_run(p, 2, in, 1, &out);
                    int64_t n = smelt_tensor_numel(out);
                    for (int64_t i = 0; i < n; i++)
                        cr_assert_eq(smelt_tensor_get(out, i), take_at(in[0], in[1], ax, i), "%s: element %lld",
                                     label, (long long)i);
                    smelt_tensor_free(out);
                    smelt_plan_free(p);
                    t_free_all(in, 2);
                    smelt_graph_free(g);
                }
    smelt_ctx_free(ctx);
}

Test(gather, take_along_axis_every_dtype_and_rank)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 2);
    for (int t = 0; t < NELEMS(vdts); t++)
        for (int u = 0; u < NELEMS(idts); u++)
            for (int rank = 1; rank <= 4; rank++) {
                int64_t as[4], xs[4];
                int ax = (int)trng_range(&r, 0, rank - 1);
                for (int d = 0; d < rank; d++) {
                    as[d] = trng_range(&r, 1, 5);
                    xs[d] = d == ax ? trng_range(&r, 1, 6) : trng_range(&r, 0, 2) ? as[d] : 1; /* broadcast too */
                }
                smelt_graph *g = t_graph(ctx);
                smelt_node *a = smelt_input(g, "a", vdts[t], rank, as);
                smelt_node *x = smelt_input(g, "x", idts[u], rank, xs);
                smelt_node *y = smelt_take_along_axis(g, a, x, ax);
                smelt_node *outs[] = {smelt_sub(g, y, smelt_scalar(g, 2))};
                T_OK(ctx, smelt_graph_status(g));
                smelt_tensor *in[2] = {t_rand(ctx, &r, vdts[t], rank, as), t_tensor(ctx, idts[u], rank, xs)};
                for (int64_t i = 0; i < smelt_tensor_numel(in[1]); i++)
                    t_set_i64(in[1], i, trng_range(&r, -as[ax], as[ax] - 1));
                char label[96];
                snprintf(label, sizeof label, "take_along_axis %s[%d] by %s axis %d", smelt_dtype_name(vdts[t]), rank,
                         smelt_dtype_name(idts[u]), ax);
                smelt_plan_stats st = t_check_plan(label, ctx, g, 1, outs, 3, 2, in, T_EXACT);
                cr_assert_eq(st.kernels, 1, "%s: %d kernels", label, st.kernels);
                /* NumPy's rule by hand: out[c] = a[c with c[ax] = x[c]] - 2 */
                smelt_plan *p = t_plan(ctx, g, 1, outs, 3);
                smelt_tensor *out = NULL;
                t_run(p, 2, in, 1, &out);
                const int64_t *os = smelt_tensor_shape(out);
                for (int64_t i = 0; i < smelt_tensor_numel(out); i++) {
                    int64_t c[4], tt = i, xo = 0, ao = 0;
                    for (int d = rank - 1; d >= 0; d--)
                        c[d] = tt % os[d], tt /= os[d];
                    for (int d = 0; d < rank; d++)
                        xo = xo * xs[d] + (xs[d] == 1 ? 0 : c[d]);
                    int64_t j = (int64_t)smelt_tensor_get(in[1], xo);
                    j += j < 0 ? as[ax] : 0;
                    for (int d = 0; d < rank; d++)
                        ao = ao * as[d] + (d == ax ? j : as[d] == 1 ? 0 : c[d]);
                    double want = smelt_tensor_get(in[0], ao) - 2;
                    want = vdts[t] == SMELT_F32 ? (double)(float)want : want;
                    cr_assert_eq(smelt_tensor_get(out, i), want, "%s: element %lld", label, (long long)i);
                }
                smelt_tensor_free(out);
                smelt_plan_free(p);
                t_free_all(in, 2);
                smelt_graph_free(g);
            }
    smelt_ctx_free(ctx);
}

/* W[ids] + P, then a layer norm: the embedding's rows read where they lie;
 * rows of 40 (CC: a stage's whole groups of 32 in its own loop, the last 8
 * through the piece, src/codegen/emit-rows.c) and of 64 (the loop alone
 * reads the index, and reports the bad one) */
static void embedding_then_layernorm_of(int64_t D)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 3 + (uint64_t)D);
    const int64_t V = 50, B = 3, T = 7;
    smelt_graph *g = t_graph(ctx);
    smelt_node *W = smelt_input(g, "W", SMELT_F32, SHP(V, D)), *ids = smelt_input(g, "ids", SMELT_I64, SHP(B, T));
    smelt_node *P = smelt_input(g, "P", SMELT_F32, SHP(T, D));
    smelt_node *x = smelt_add(g, smelt_take(g, W, ids, 0), P);
    int ax = 2;
    smelt_node *mu = smelt_reduce(g, SMELT_OP_MEAN, x, 1, &ax, true), *c = smelt_sub(g, x, mu);
    smelt_node *var = smelt_reduce(g, SMELT_OP_MEAN, smelt_mul(g, c, c), 1, &ax, true);
    smelt_node *y = smelt_mul(g, c, smelt_unary(g, SMELT_OP_RSQRT, smelt_add(g, var, smelt_scalar(g, 1e-5))));
    T_OK(ctx, smelt_graph_status(g));
    smelt_tensor *in[3] = {t_rand(ctx, &r, SMELT_F32, SHP(V, D)), t_tensor(ctx, SMELT_I64, SHP(B, T)),
                           t_rand(ctx, &r, SMELT_F32, SHP(T, D))};
    for (int64_t i = 0; i < B * T; i++)
        t_set_i64(in[1], i, trng_range(&r, -V, V - 1));
    smelt_plan_stats st = t_check_plan("embed_ln", ctx, g, 1, &y, 3, 3, in, t_chain_tol(SMELT_F32));
    cr_assert_eq(st.kernels, 1, "layernorm(W[ids] + P) is one row program: %d kernels", st.kernels);
    /* CC: the same kernel, the same bits as TinyCC's */
    smelt_tensor *o[2] = {NULL, NULL};
    smelt_plan *p1 = plan_on(ctx, g, 1, &y, "TCC"), *p2 = plan_on(ctx, g, 1, &y, "CC");
    t_run(p1, 3, in, 1, &o[0]);
    t_run(p2, 3, in, 1, &o[1]);
    cr_assert_eq(t_stats(p2).kernels, 1);
    cr_assert(t_bitwise_equal(o[0], o[1]), "rows of %lld: TCC and CC differ at %lld", (long long)D,
              (long long)t_first_difference(o[0], o[1]));
    t_set_i64(in[1], 5, V);
    T_ERR(ctx, smelt_plan_run(p2, 3, in, 1, &o[1]), SMELT_ERR_INDEX, "take: index 50 is out of range");
    T_ERR(ctx, smelt_plan_run(p1, 3, in, 1, &o[0]), SMELT_ERR_INDEX, "take: index 50 is out of range");
    t_free_all(o, 2);
    smelt_plan_free(p1), smelt_plan_free(p2);
    t_free_all(in, 3);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(gather, embedding_then_layernorm)
{
    embedding_then_layernorm_of(40);
    embedding_then_layernorm_of(64);
}

/* One reduction over gathered rows (sum(W[ids], -1), max(W[ids] * 2, -1)):
 * a row program, one kernel, no fallback (a reduction's own kernel reads
 * no index); a sum across the gathered rows (the index changing along the
 * reduced axis) stays two kernels, named in explain; every one against the
 * reference, TCC == CC, a bad index an error */
Test(gather, one_reduction_over_gathered_rows)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 12);
    const int64_t V = 37, D = 45, B = 4, T = 9;
    for (int k = 0; k < 3; k++) {
        smelt_graph *g = t_graph(ctx);
        smelt_node *W = smelt_input(g, "W", SMELT_F32, SHP(V, D)), *ids = smelt_input(g, "ids", SMELT_I64, SHP(B, T));
        smelt_node *x = smelt_take(g, W, ids, 0);
        int ax = k == 2 ? 1 : 2;
        smelt_node *y = k == 0 ? smelt_reduce(g, SMELT_OP_SUM, x, 1, &ax, false)
                        : k == 1 ? smelt_reduce(g, SMELT_OP_MAX, smelt_mul(g, x, smelt_scalar(g, 2)), 1, &ax, true)
                                 : smelt_reduce(g, SMELT_OP_SUM, x, 1, &ax, false);
        T_OK(ctx, smelt_graph_status(g));
        smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F32, SHP(V, D)), t_tensor(ctx, SMELT_I64, SHP(B, T))};
        for (int64_t i = 0; i < B * T; i++)
            t_set_i64(in[1], i, trng_range(&r, -V, V - 1));
        smelt_plan_stats st = t_check_plan("sum of gathered rows", ctx, g, 1, &y, 3, 2, in, t_chain_tol(SMELT_F32));
        cr_assert_eq(st.kernels, k == 2 ? 2 : 1, "case %d: %d kernels", k, st.kernels);
        cr_assert_eq(st.fallbacks, 0, "case %d: a fused kernel failed to compile", k);
        smelt_tensor *o[2] = {NULL, NULL};
        smelt_plan *p1 = plan_on(ctx, g, 1, &y, "TCC"), *p2 = plan_on(ctx, g, 1, &y, "CC");
        t_run(p1, 2, in, 1, &o[0]);
        t_run(p2, 2, in, 1, &o[1]);
        cr_assert_eq(t_stats(p2).fallbacks, 0);
        cr_assert(t_bitwise_equal(o[0], o[1]), "case %d: TCC and CC differ", k);
        t_set_i64(in[1], 3, -V - 1);
        T_ERR(ctx, smelt_plan_run(p1, 2, in, 1, &o[0]), SMELT_ERR_INDEX, "take: index -38 is out of range");
        T_ERR(ctx, smelt_plan_run(p2, 2, in, 1, &o[1]), SMELT_ERR_INDEX, "take: index -38 is out of range");
        t_free_all(o, 2);
        smelt_plan_free(p1), smelt_plan_free(p2);
        t_free_all(in, 2);
        smelt_graph_free(g);
    }
    smelt_ctx_free(ctx);
}

/* a bad index: SMELT_ERR_INDEX naming the operator and the index, after the
 * kernel ran without reading outside the array; the plan runs again with
 * good indices */
static void bad_index_on(const char *be, smelt_dtype it, bool along)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 4);
    const int64_t V = 1000, D = 64, N = 3000;
    smelt_graph *g = t_graph(ctx);
    smelt_node *W = smelt_input(g, "W", SMELT_F32, SHP(V, D));
    smelt_node *x = along ? smelt_input(g, "x", it, SHP(N, D)) : smelt_input(g, "x", it, SHP(N));
    smelt_node *y = along ? smelt_take_along_axis(g, W, x, 0) : smelt_take(g, W, x, 0);
    y = smelt_add(g, y, smelt_scalar(g, 1));
    T_OK(ctx, smelt_graph_status(g));
    smelt_plan *p = plan_on(ctx, g, 1, &y, be);
    smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F32, SHP(V, D)),
                           along ? t_tensor(ctx, it, SHP(N, D)) : t_tensor(ctx, it, SHP(N))};
    int64_t nx = smelt_tensor_numel(in[1]);
    const int64_t bad[] = {V, -V - 1, it == SMELT_I32 ? INT32_MAX : INT64_MAX, it == SMELT_I32 ? INT32_MIN : INT64_MIN};
    for (int b = 0; b < NELEMS(bad); b++) {
        for (int64_t i = 0; i < nx; i++)
            t_set_i64(in[1], i, trng_range(&r, -V, V - 1));
        int64_t at = trng_range(&r, 0, nx - 1);
        t_set_i64(in[1], at, bad[b]);
        smelt_tensor *out = NULL;
        char want[64];
        snprintf(want, sizeof want, "index %lld is out of range", (long long)bad[b]);
        T_ERR(ctx, smelt_plan_run(p, 2, in, 1, &out), SMELT_ERR_INDEX, want);
        cr_assert(t_contains(smelt_errmsg(ctx), along ? "take_along_axis" : "take"));
        smelt_tensor_free(out);
        t_set_i64(in[1], at, V - 1); /* good again: it runs */
        out = NULL;
        t_run(p, 2, in, 1, &out);
        smelt_tensor_free(out);
    }
    smelt_plan_free(p);
    t_free_all(in, 2);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(gather, bad_index_tcc) { for (int u = 0; u < 2; u++) bad_index_on("TCC", idts[u], u); }
Test(gather, bad_index_cc) { for (int u = 0; u < 2; u++) bad_index_on("CC", idts[u], !u); }
Test(gather, bad_index_reference)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_F64, SHP(4)), *x = smelt_input(g, "x", SMELT_I64, SHP(2));
    smelt_node *y = smelt_take(g, a, x, 0);
    smelt_tensor *in[2] = {t_tensor(ctx, SMELT_F64, SHP(4)), t_tensor(ctx, SMELT_I64, SHP(2))};
    t_set_i64(in[1], 0, 1), t_set_i64(in[1], 1, 4);
    smelt_tensor *ref = NULL;
    T_ERR(ctx, smelt_reference_eval(ctx, g, 1, &y, 2, in, &ref), SMELT_ERR_INDEX, "index 4");
    t_free_all(in, 2);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* The edges of the index range on TCC and CC, i32 and i64: -n and n - 1
 * read the first and the last element; -n - 1, n, INT_MIN and INT_MAX of
 * the index dtype, as tensor constants (the plan is made, the run says
 * which index), are SMELT_ERR_INDEX; an empty index array reads nothing
 * and succeeds; a gather from an axis of size 0, where no index is in
 * range, is refused when the graph is built (SMELT_ERR_SHAPE). */
static void index_edges_on(const char *be, smelt_dtype it)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 45);
    const int64_t n = 5, lo = it == SMELT_I32 ? INT32_MIN : INT64_MIN, hi = it == SMELT_I32 ? INT32_MAX : INT64_MAX;
    smelt_tensor *a = t_rand(ctx, &r, SMELT_F64, SHP(n, 3));
    /* in range: the edges, along both operators */
    {
        smelt_graph *g = t_graph(ctx);
        smelt_node *A = smelt_input(g, "a", SMELT_F64, SHP(n, 3)), *x = smelt_input(g, "x", it, SHP(4));
        smelt_node *s = smelt_input(g, "s", it, SHP(2, 3));
        smelt_node *y[2] = {smelt_take(g, A, x, 0), smelt_take_along_axis(g, A, s, 0)};
        T_OK(ctx, smelt_graph_status(g));
        smelt_tensor *in[3] = {a, t_tensor(ctx, it, SHP(4)), t_tensor(ctx, it, SHP(2, 3))}, *out[2] = {NULL, NULL};
        const int64_t xv[4] = {-n, n - 1, 0, -1}, sv[6] = {-n, n - 1, -1, 0, -n, n - 1};
        for (int i = 0; i < 4; i++)
            t_set_i64(in[1], i, xv[i]);
        for (int i = 0; i < 6; i++)
            t_set_i64(in[2], i, sv[i]);
        smelt_plan *p = plan_on(ctx, g, 2, y, be);
        t_run(p, 3, in, 2, out);
        for (int i = 0; i < 4; i++)
            for (int c = 0; c < 3; c++)
                cr_assert_eq(smelt_tensor_get(out[0], i * 3 + c), smelt_tensor_get(a, ((xv[i] + n) % n) * 3 + c),
                             "%s %s: take of index %lld", be, smelt_dtype_name(it), (long long)xv[i]);
        for (int i = 0; i < 6; i++)
            cr_assert_eq(smelt_tensor_get(out[1], i), smelt_tensor_get(a, ((sv[i] + n) % n) * 3 + i % 3),
                         "%s %s: take_along_axis of index %lld", be, smelt_dtype_name(it), (long long)sv[i]);
        smelt_plan_free(p);
        smelt_tensor_free(in[1]), smelt_tensor_free(in[2]), t_free_all(out, 2);
        smelt_graph_free(g);
    }
    /* out of range, as constants the plan holds: an error of the run */
    const int64_t bad[] = {-n - 1, n, lo, hi};
    for (int b = 0; b < NELEMS(bad); b++)
        for (int along = 0; along < 2; along++) {
            smelt_graph *g = t_graph(ctx);
            smelt_tensor *xi = along ? t_tensor(ctx, it, SHP(2, 3)) : t_tensor(ctx, it, SHP(3));
            for (int64_t i = 0; i < smelt_tensor_numel(xi); i++)
                t_set_i64(xi, i, i == 1 ? bad[b] : 0);
            smelt_node *A = smelt_input(g, "a", SMELT_F64, SHP(n, 3)), *x = smelt_constant(g, xi);
            smelt_node *y = along ? smelt_take_along_axis(g, A, x, 0) : smelt_take(g, A, x, 0);
            y = smelt_unary(g, SMELT_OP_NEG, y);
            T_OK(ctx, smelt_graph_status(g));
            smelt_plan *p = plan_on(ctx, g, 1, &y, be);
            smelt_tensor *out = NULL;
            char want[64];
            snprintf(want, sizeof want, "index %lld is out of range", (long long)bad[b]);
            T_ERR(ctx, smelt_plan_run(p, 1, &a, 1, &out), SMELT_ERR_INDEX, want);
            smelt_tensor_free(out);
            smelt_plan_free(p);
            smelt_tensor_free(xi);
            smelt_graph_free(g);
        }
    /* empty index arrays */
    {
        smelt_graph *g = t_graph(ctx);
        smelt_node *A = smelt_input(g, "a", SMELT_F64, SHP(n, 3)), *e0 = smelt_input(g, "e0", it, SHP(0));
        smelt_node *e1 = smelt_input(g, "e1", it, SHP(2, 0)), *e2 = smelt_input(g, "e2", it, SHP(n, 0));
        smelt_node *y[3] = {smelt_take(g, A, e0, 0), smelt_take(g, A, e1, 1), smelt_take_along_axis(g, A, e2, 1)};
        T_OK(ctx, smelt_graph_status(g));
        const int64_t shapes[3][3] = {{0, 3}, {n, 2, 0}, {n, 0}};
        for (int k = 0; k < 3; k++)
            cr_assert(smelt_node_ndim(y[k]) == (k == 1 ? 3 : 2) &&
                      !memcmp(smelt_node_shape(y[k]), shapes[k], sizeof(int64_t) * (size_t)smelt_node_ndim(y[k])),
                      "%s: empty read %d: shape", be, k);
        smelt_tensor *in[4] = {a, t_tensor(ctx, it, SHP(0)), t_tensor(ctx, it, SHP(2, 0)), t_tensor(ctx, it, SHP(n, 0))};
        smelt_plan *p = plan_on(ctx, g, 3, y, be);
        smelt_tensor *out[3] = {NULL, NULL, NULL};
        t_run(p, 4, in, 3, out);
        for (int k = 0; k < 3; k++)
            cr_assert_eq(smelt_tensor_numel(out[k]), 0, "%s: empty read %d", be, k);
        t_free_all(out, 3);
        smelt_plan_free(p);
        t_free_all(in + 1, 3);
        smelt_graph_free(g);
    }
    { /* an axis of size 0: refused when built */
        smelt_graph *g = t_graph(ctx);
        smelt_node *Z = smelt_input(g, "z", SMELT_F64, SHP(0, 3)), *j = smelt_input(g, "j", it, SHP(2));
        cr_assert_null(smelt_take(g, Z, j, 0));
        T_ERR(ctx, smelt_graph_status(g), SMELT_ERR_SHAPE, "axis 0 has size 0");
        smelt_graph_free(g);
    }
    smelt_tensor_free(a);
    smelt_ctx_free(ctx);
}

Test(gather, index_edges_tcc) { for (int u = 0; u < 2; u++) index_edges_on("TCC", idts[u]); }
Test(gather, index_edges_cc) { for (int u = 0; u < 2; u++) index_edges_on("CC", idts[u]); }

/* the same bits from TCC and CC: an embedding and a gather along the rows */
Test(gather, tcc_equals_cc)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 5);
    smelt_node *outs[3];
    smelt_tensor *in[3];
    smelt_graph *g = t_gather_case(ctx, &r, outs, in);
    smelt_tensor *o1[3] = {NULL, NULL, NULL}, *o2[3] = {NULL, NULL, NULL};
    smelt_plan *p1 = plan_on(ctx, g, 3, outs, "TCC"), *p2 = plan_on(ctx, g, 3, outs, "CC");
    t_run(p1, 3, in, 3, o1);
    t_run(p2, 3, in, 3, o2);
    for (int k = 0; k < 3; k++)
        cr_assert(t_bitwise_equal(o1[k], o2[k]), "output %d: TCC and CC differ at %lld", k,
                  (long long)t_first_difference(o1[k], o2[k]));
    smelt_tensor *ref[3];
    t_reference(ctx, g, 3, outs, 3, in, ref);
    for (int k = 0; k < 3; k++)
        t_expect_match("tcc_equals_cc", o1[k], ref[k], k ? T_EXACT : t_chain_tol(SMELT_F32));
    t_free_all(ref, 3), t_free_all(o1, 3), t_free_all(o2, 3), t_free_all(in, 3);
    smelt_plan_free(p1), smelt_plan_free(p2);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(gather, one_hot_tril_triu)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 6);
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_I64, SHP(4, 5)), *a = smelt_input(g, "a", SMELT_F32, SHP(2, 6, 7));
    smelt_node *outs[] = {smelt_one_hot(g, x, 6, SMELT_F32), smelt_tril(g, a, 0), smelt_triu(g, a, 1),
                          smelt_tril(g, a, -2)};
    T_OK(ctx, smelt_graph_status(g));
    smelt_tensor *in[2] = {t_tensor(ctx, SMELT_I64, SHP(4, 5)), t_rand(ctx, &r, SMELT_F32, SHP(2, 6, 7))};
    for (int64_t i = 0; i < 20; i++)
        t_set_i64(in[0], i, trng_range(&r, -6, 7)); /* (6 and 7: a row of zeros) */
    t_check_plan("one_hot_tril_triu", ctx, g, 4, outs, 3, 2, in, T_EXACT);
    smelt_plan *p = t_plan(ctx, g, 4, outs, 3);
    smelt_tensor *o[4] = {NULL, NULL, NULL, NULL};
    t_run(p, 2, in, 4, o);
    for (int64_t i = 0; i < 20 * 6; i++) {
        int64_t v = (int64_t)smelt_tensor_get(in[0], i / 6);
        cr_assert_eq(smelt_tensor_get(o[0], i), (double)(v == i % 6 || v + 6 == i % 6));
    }
    for (int64_t i = 0; i < 2 * 6 * 7; i++) {
        int64_t row = i / 7 % 6, col = i % 7;
        double av = smelt_tensor_get(in[1], i);
        cr_assert_eq(smelt_tensor_get(o[1], i), col - row <= 0 ? av : 0);
        cr_assert_eq(smelt_tensor_get(o[2], i), col - row >= 1 ? av : 0);
        cr_assert_eq(smelt_tensor_get(o[3], i), col - row <= -2 ? av : 0);
    }
    cr_assert_eq(t_stats(p).kernels, 2, "one kernel for one_hot, one for tril and triu: %d", t_stats(p).kernels);
    t_free_all(o, 4), t_free_all(in, 2);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* d/dW sum(take(W, ids) * C) = the scatter-add of C's rows by ids (repeats
 * add up), written out here */
Test(gather, grad_is_a_scatter_add)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 7);
    const int64_t V = 9, D = 5, N = 13;
    for (int along = 0; along < 2; along++) {
        smelt_graph *g = t_graph(ctx);
        smelt_node *W = smelt_input(g, "W", SMELT_F64, SHP(V, D));
        smelt_node *ids = along ? smelt_input(g, "ids", SMELT_I64, SHP(N, D)) : smelt_input(g, "ids", SMELT_I64, SHP(N));
        smelt_node *C = smelt_input(g, "C", SMELT_F64, SHP(N, D));
        smelt_node *y = along ? smelt_take_along_axis(g, W, ids, 0) : smelt_take(g, W, ids, 0);
        smelt_node *loss = smelt_reduce(g, SMELT_OP_SUM, smelt_mul(g, y, C), 0, NULL, false);
        smelt_node *dW = NULL;
        T_OK(ctx, smelt_grad(g, loss, 1, &W, &dW));
        smelt_tensor *in[3] = {t_rand(ctx, &r, SMELT_F64, SHP(V, D)),
                               along ? t_tensor(ctx, SMELT_I64, SHP(N, D)) : t_tensor(ctx, SMELT_I64, SHP(N)),
                               t_rand(ctx, &r, SMELT_F64, SHP(N, D))};
        for (int64_t i = 0; i < smelt_tensor_numel(in[1]); i++)
            t_set_i64(in[1], i, trng_range(&r, -V, V - 1));
        smelt_plan *p = t_plan(ctx, g, 1, &dW, 3);
        smelt_tensor *out = NULL;
        t_run(p, 3, in, 1, &out);
        double want[9 * 5] = {0};
        for (int64_t n = 0; n < N; n++) /* in order: the sums a reduction forms in order */
            for (int64_t d = 0; d < D; d++) {
                int64_t j = (int64_t)smelt_tensor_get(in[1], along ? n * D + d : n);
                j += j < 0 ? V : 0;
                want[j * D + d] += smelt_tensor_get(in[2], n * D + d);
            }
        for (int64_t i = 0; i < V * D; i++)
            cr_assert(fabs(smelt_tensor_get(out, i) - want[i]) <= 1e-12 * (1 + fabs(want[i])), "dW[%lld] %g, want %g",
                      (long long)i, smelt_tensor_get(out, i), want[i]);
        smelt_tensor_free(out);
        t_free_all(in, 3);
        smelt_plan_free(p);
        smelt_graph_free(g);
    }
    smelt_ctx_free(ctx);
}

/* an array read in pieces (a concat, a pad): the index goes anywhere along
 * the axis, so the array is read from a copy; the same answer as NumPy's */
Test(gather, of_a_concat_and_a_pad)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 8);
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_F32, SHP(3, 5)), *b = smelt_input(g, "b", SMELT_F32, SHP(2, 5));
    smelt_node *x = smelt_input(g, "x", SMELT_I64, SHP(7));
    const int64_t w[] = {1, 0, 2, 1};
    smelt_node *outs[] = {smelt_take(g, smelt_concat(g, 2, (smelt_node *[]){a, b}, 0), x, 0),
                          smelt_take_along_axis(g, smelt_pad(g, a, w, 1.5), smelt_reshape(g, x, 2, (int64_t[]){1, 7}), 1)};
    T_OK(ctx, smelt_graph_status(g));
    smelt_tensor *in[3] = {t_rand(ctx, &r, SMELT_F32, SHP(3, 5)), t_rand(ctx, &r, SMELT_F32, SHP(2, 5)),
                           t_tensor(ctx, SMELT_I64, SHP(7))};
    for (int64_t i = 0; i < 7; i++)
        t_set_i64(in[2], i, trng_range(&r, -5, 4));
    t_check_plan("of_a_concat_and_a_pad", ctx, g, 2, outs, 3, 3, in, T_EXACT);
    t_check_plan("of_a_concat_and_a_pad, unfused", ctx, g, 2, outs, 0, 3, in, T_EXACT);
    t_free_all(in, 3);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* A gather from a constant of a shape (a - a, which the simplifier makes a
 * constant 0, plus 3): the constant is one element with strides 0, the
 * gather's stride too.  Taken as a buffer of its shape, the gather read
 * memory nobody wrote (take_along_axis(a - a, ...) gave 6 and 1952543859
 * instead of 0, 2026-11-29, scripts/fuzz-layout). */
Test(gather, of_a_constant)
{
    smelt_ctx *ctx = t_ctx();
    bool cc = smelt_backend_check(ctx, "CC") == SMELT_OK;
    trng r;
    trng_init(&r, 9);
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_I32, SHP(5, 7)), *x = smelt_input(g, "x", SMELT_I64, SHP(6));
    smelt_node *c = smelt_add(g, smelt_sub(g, a, a), smelt_const(g, 3, SMELT_I32));
    smelt_node *outs[] = {smelt_take(g, c, x, 1), smelt_take_along_axis(g, smelt_sub(g, a, a),
                                                                        smelt_reshape(g, x, 2, (int64_t[]){1, 6}), 1),
                          smelt_add(g, smelt_take(g, c, x, 0), smelt_const(g, 1, SMELT_I32))};
    T_OK(ctx, smelt_graph_status(g));
    smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_I32, SHP(5, 7)), t_tensor(ctx, SMELT_I64, SHP(6))};
    for (int64_t i = 0; i < 6; i++)
        t_set_i64(in[1], i, trng_range(&r, -5, 4));
    for (int b = 0; b < 2; b++) {
        if (b && !cc)
            continue;
        T_OK(ctx, smelt_ctx_set_backend(ctx, b ? "CC" : "TCC"));
        for (int opt = 0; opt <= 3; opt += 3)
            t_check_plan(b ? "of_a_constant, CC" : "of_a_constant, TCC", ctx, g, 3, outs, opt, 2, in, T_EXACT);
    }
    t_free_all(in, 2);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}
