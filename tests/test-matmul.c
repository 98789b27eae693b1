/* The matrix product (matmul, a @ b) through BLAS: NumPy's shape rules
 * (1-D operands, batches, broadcast batches, empty sizes) against the
 * float64 reference, transposed and sliced operands read as they lie,
 * elementwise epilogues fused into the kernel after it, the bits of the
 * unfused plan, errors. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

/* |error| allowed: K products of values below 2 summed in another order
 * (and rounded to the dtype) */
#include "matmul-cases.h"

Test(matmul, shapes_and_dtypes_against_the_reference)
{
    smelt_ctx *ctx = t_ctx();
    const smelt_dtype dts[] = {SMELT_F32, SMELT_F64, SMELT_F16, SMELT_BF16};
    trng r;
    trng_init(&r, 41);
    for (int t = 0; t < NELEMS(dts); t++)
        for (int c = 0; c < NELEMS(cases); c++) {
            const mcase *m = &cases[c];
            smelt_graph *g = t_graph(ctx);
            smelt_node *v[2] = {smelt_input(g, "a", dts[t], m->na, m->as), smelt_input(g, "b", dts[t], m->nb, m->bs)};
            smelt_node *y = smelt_expr(g, m->expr, (const char *[]){"a", "b"}, v, 2);
            T_OK(ctx, smelt_graph_status(g));
            cr_assert_eq(smelt_node_dtype(y), dts[t]);
            smelt_tensor *in[2] = {t_rand(ctx, &r, dts[t], m->na, m->as), t_rand(ctx, &r, dts[t], m->nb, m->bs)};
            smelt_tensor *ref, *got0 = NULL, *got3 = NULL;
            t_reference(ctx, g, 1, &y, 2, in, &ref);
            smelt_plan *p0 = t_plan(ctx, g, 1, &y, 0), *p3 = t_plan(ctx, g, 1, &y, 3);
            t_run(p0, 2, in, 1, &got0);
            t_run(p3, 2, in, 1, &got3);
            char what[96];
            snprintf(what, sizeof what, "%s, case %d (%s)", smelt_dtype_name(dts[t]), c, m->expr);
            int64_t k = m->as[m->na - 1];
            t_expect_match(what, got3, ref, mm_tol(dts[t], k));
            cr_assert(t_bitwise_equal(got0, got3), "%s: fused and unfused differ", what);
            /* no copy (a 1-D operand's product is written through the view that drops the axis) */
            cr_assert_eq(t_stats(p3).copies, 0, "%s: %s", what, smelt_plan_describe(p3));
            smelt_tensor_free(ref), smelt_tensor_free(got0), smelt_tensor_free(got3), t_free_all(in, 2);
            smelt_plan_free(p0), smelt_plan_free(p3);
            smelt_graph_free(g);
        }
    smelt_ctx_free(ctx);
}

/* A product cut into tiles of rows and columns (a BLAS call each): the
 * same bits on 1, 2, 3 and 4 threads, fused and unfused, against the
 * reference.  OpenBLAS's Haswell kernels (x86-64 with AVX2), whose bits
 * change with the rows of a call, so that tiles that followed the thread
 * count would show (this test's own process: BLAS loads at its first
 * product). */
Test(matmul, tiles_same_bits_at_any_thread_count, .timeout = 120)
{
#if defined(__x86_64__)
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        setenv("OPENBLAS_CORETYPE", "Haswell", 1);
#endif
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    trng r;
    trng_init(&r, 43);
    smelt_node *v[2] = {smelt_input(g, "a", SMELT_F32, SHP(2100, 64)), smelt_input(g, "b", SMELT_F32, SHP(700, 64))};
    smelt_node *y = smelt_expr(g, "tanh(a @ b.T)", (const char *[]){"a", "b"}, v, 2);
    T_OK(ctx, smelt_graph_status(g));
    smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F32, SHP(2100, 64)), t_rand(ctx, &r, SMELT_F32, SHP(700, 64))};
    smelt_tensor *ref, *base = NULL;
    t_reference(ctx, g, 1, &y, 2, in, &ref);
    T_OK(ctx, smelt_ctx_set_threads(ctx, 1));
    smelt_plan *p0 = t_plan(ctx, g, 1, &y, 0);
    t_run(p0, 2, in, 1, &base);
    t_expect_match("tiles", base, ref, mm_tol(SMELT_F32, 64));
    for (int th = 1; th <= 4; th++) {
        T_OK(ctx, smelt_ctx_set_threads(ctx, th));
        smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
        smelt_tensor *got = NULL;
        t_run(p, 2, in, 1, &got);
        cr_assert(t_bitwise_equal(base, got), "%d threads: not the bits of 1 thread unfused", th);
        smelt_tensor_free(got);
        smelt_plan_free(p);
    }
    T_OK(ctx, smelt_ctx_set_threads(ctx, 0));
    smelt_tensor_free(ref), smelt_tensor_free(base), t_free_all(in, 2);
    smelt_plan_free(p0);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* An MLP block: matmul, then bias and gelu_tanh in one kernel, matmul, then
 * bias and the residual add in one kernel; the bits of the unfused plan at
 * 1 and 4 threads, on TCC and CC. */
Test(matmul, epilogues_fuse_after_the_product, .timeout = 120)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    trng r;
    trng_init(&r, 42);
    smelt_tensor *in[5];
    smelt_node *y = mm_mlp(ctx, g, &r, in);
    smelt_tensor *ref, *base = NULL;
    t_reference(ctx, g, 1, &y, 5, in, &ref);
    smelt_plan *p0 = t_plan(ctx, g, 1, &y, 0);
    t_run(p0, 5, in, 1, &base);
    t_expect_match("mlp", base, ref, (t_tol){.ulps = 64, .atol = 2e-4});
    const char *backends[] = {"TCC", "TCC", "CC"};
    for (int be = 0; be < 3; be++) {
        T_OK(ctx, smelt_ctx_set_threads(ctx, be == 1 ? 4 : 1));
        smelt_plan_opts o;
        smelt_plan_opts_init(&o);
        o.backend = backends[be];
        smelt_plan *p = NULL;
        T_OK(ctx, smelt_plan_new(ctx, g, 1, &y, &o, &p));
        cr_assert_eq(t_stats(p).kernels, 4, "%s", smelt_plan_describe(p));
        cr_assert(t_contains(smelt_plan_describe(p), "a matrix product runs in BLAS"), "%s", smelt_plan_describe(p));
        smelt_tensor *got = NULL;
        t_run(p, 5, in, 1, &got);
        cr_assert(t_bitwise_equal(base, got), "%s: fused differs from unfused", backends[be]);
        smelt_tensor_free(got);
        smelt_plan_free(p);
    }
    T_OK(ctx, smelt_ctx_set_threads(ctx, 0));
    smelt_tensor_free(ref), smelt_tensor_free(base), t_free_all(in, 5);
    smelt_plan_free(p0);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(matmul, errors_and_graph_files)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_F32, SHP(3, 4)), *i = smelt_input(g, "i", SMELT_I32, SHP(4, 2));
    cr_assert_null(smelt_matmul(g, a, a));
    cr_assert(t_contains(smelt_graph_errmsg(g), "matmul: (3, 4) @ (3, 4): the inner dimensions differ (4 and 3)"),
              "%s", smelt_graph_errmsg(g));
    smelt_graph_free(g);
    g = t_graph(ctx);
    a = smelt_input(g, "a", SMELT_F32, SHP(3, 4));
    i = smelt_input(g, "i", SMELT_I32, SHP(4, 2));
    cr_assert_null(smelt_matmul(g, a, i));
    cr_assert(t_contains(smelt_graph_errmsg(g), "matmul does not support dtype i32"), "%s", smelt_graph_errmsg(g));
    smelt_graph_free(g);
    g = t_graph(ctx);
    a = smelt_input(g, "a", SMELT_F32, SHP(3, 4));
    cr_assert_null(smelt_matmul(g, a, smelt_scalar(g, 2)));
    cr_assert(t_contains(smelt_graph_errmsg(g), "is a scalar"), "%s", smelt_graph_errmsg(g));
    smelt_graph_free(g);
    /* at run time: other inner sizes */
    g = t_graph(ctx);
    a = smelt_input(g, "a", SMELT_F64, SHP(3, 4));
    smelt_node *b = smelt_input(g, "b", SMELT_F64, SHP(4, 2));
    smelt_node *y = smelt_expr(g, "a @ b", (const char *[]){"a", "b"}, (smelt_node *[]){a, b}, 2);
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    smelt_tensor *in[] = {t_tensor(ctx, SMELT_F64, SHP(3, 5)), t_tensor(ctx, SMELT_F64, SHP(4, 2))}, *o = NULL;
    T_ERR(ctx, smelt_plan_run(p, 2, in, 1, &o), SMELT_ERR_SHAPE,
          "matmul: at the run-time shapes, (3, 5) @ (4, 2): the inner dimensions differ (5 and 4)");
    t_free_all(in, 2);
    smelt_plan_free(p);
    /* graph files: the product and the views of a 1-D operand */
    smelt_node *v = smelt_input(g, "v", SMELT_F64, SHP(4));
    smelt_node *z = smelt_matmul(g, v, b);
    char *text = NULL;
    T_OK(ctx, smelt_graph_to_text(g, 1, &z, &text));
    cr_assert(t_contains(text, "= matmul %"), "%s", text);
    smelt_graph *g2 = NULL;
    int n_out;
    smelt_node **outs = NULL;
    T_OK(ctx, smelt_graph_from_text(ctx, text, &g2, &n_out, &outs));
    cr_assert_eq(smelt_node_ndim(outs[0]), 1);
    cr_assert_eq(smelt_node_shape(outs[0])[0], 2);
    smelt_free(text), smelt_free(outs);
    smelt_graph_free(g2);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* Attention with the heads merged: softmax(q @ k^T / 8) @ v, transposed
 * and reshaped to [batch, seq, heads * dim]: three kernels and no copy (the
 * second product writes its matrices into the output through the views,
 * BLAS's leading dimension the merged row); given output tensors:
 * contiguous (written in place) and strided (through a temporary). */
Test(matmul, attention_writes_the_merged_heads_in_place)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    const char *names[] = {"q", "k", "v"};
    smelt_node *in[3];
    for (int i = 0; i < 3; i++)
        in[i] = smelt_input(g, names[i], SMELT_F32, SHP(2, 4, 32, 16));
    smelt_node *y = smelt_expr(g,
                               MM_ATTENTION,
                               names, in, 3);
    T_OK(ctx, smelt_graph_status(g));
    trng r;
    trng_init(&r, 43);
    smelt_tensor *t[3], *ref, *base = NULL, *got = NULL;
    for (int i = 0; i < 3; i++)
        t[i] = t_rand(ctx, &r, SMELT_F32, SHP(2, 4, 32, 16));
    t_reference(ctx, g, 1, &y, 3, t, &ref);
    smelt_plan *p0 = t_plan(ctx, g, 1, &y, 0), *p3 = t_plan(ctx, g, 1, &y, 3);
    cr_assert_eq(t_stats(p3).kernels, 3, "%s", smelt_plan_describe(p3));
    cr_assert_eq(t_stats(p3).copies, 0, "%s", smelt_plan_describe(p3));
    t_run(p0, 3, t, 1, &base);
    t_run(p3, 3, t, 1, &got);
    t_expect_match("attention", got, ref, (t_tol){.ulps = 16, .atol = 2e-6});
    cr_assert(t_bitwise_equal(base, got), "fused and unfused differ");
    /* a given contiguous output, then a transposed view as the output */
    smelt_tensor *dense = t_tensor(ctx, SMELT_F32, SHP(2, 32, 64)), *wide = t_tensor(ctx, SMELT_F32, SHP(2, 64, 32));
    smelt_tensor *strided = NULL;
    T_OK(ctx, smelt_tensor_transpose(wide, (int[]){0, 2, 1}, &strided));
    smelt_tensor *outs[] = {dense, strided};
    for (int k = 0; k < 2; k++) {
        T_OK(ctx, smelt_plan_run(p3, 3, t, 1, &outs[k]));
        cr_assert(t_bitwise_equal(base, outs[k]) || k == 1, "a given contiguous output");
        for (int64_t e = 0; k == 1 && e < smelt_tensor_numel(base); e++)
            cr_assert_eq(smelt_tensor_get(strided, e), smelt_tensor_get(base, e), "a strided output at [%lld]",
                         (long long)e);
    }
    smelt_tensor_free(dense), smelt_tensor_free(wide), smelt_tensor_free(strided);
    smelt_tensor_free(ref), smelt_tensor_free(base), smelt_tensor_free(got), t_free_all(t, 3);
    smelt_plan_free(p0), smelt_plan_free(p3);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}
