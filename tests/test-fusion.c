/* Fusion: kernel counts (smelt_plan_get_stats), multi-output kernels, the
 * operand limit, the kernel cache across clusters, plans and shapes and its
 * bound, the passes (constant folding, CSE, DCE), fused == unfused bitwise,
 * and threading. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common.h"
#include "runtime.h" /* SMELT_MAX_CLUSTER_OPS, smelt__kcache_count */

/* The describe line of kernel k ("kernel <k> ...\n"), copied into buf. */
static const char *describe_line(smelt_plan *p, int k, char *buf, size_t n)
{
    char key[32];
    snprintf(key, sizeof key, "kernel %d ", k);
    const char *d = smelt_plan_describe(p), *s = strstr(d, key);
    buf[0] = 0;
    if (s) {
        size_t len = strcspn(s, "\n");
        if (len >= n)
            len = n - 1;
        memcpy(buf, s, len);
        buf[len] = 0;
    }
    return buf;
}

/* ---- kernel counts ------------------------------------------------------------------ */

/* 8 elementwise operators in a chain: x -> ... -> y, reading x and w */
static smelt_node *chain8(smelt_graph *g, smelt_node *x, smelt_node *w)
{
    smelt_node *v = smelt_mul(g, x, w);                  /* 1 */
    v = smelt_unary(g, SMELT_OP_SIN, v);                 /* 2 */
    v = smelt_add(g, v, x);                              /* 3 */
    v = smelt_unary(g, SMELT_OP_EXP, v);                 /* 4 */
    v = smelt_sub(g, v, w);                              /* 5 */
    v = smelt_unary(g, SMELT_OP_TANH, v);                /* 6 */
    v = smelt_binary(g, SMELT_OP_MAXIMUM, v, x);         /* 7 */
    return smelt_mul(g, v, smelt_scalar(g, 0.5));        /* 8 */
}

Test(fusion, chain_of_eight_is_one_kernel)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(40, 50));
    smelt_node *w = smelt_input(g, "w", SMELT_F32, SHP(40, 50));
    smelt_node *y = chain8(g, x, w);
    smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F32, SHP(40, 50)), t_rand(ctx, &r, SMELT_F32, SHP(40, 50))};
    smelt_plan_stats s3 = t_check_plan("chain8", ctx, g, 1, &y, 3, 2, in, T_CHAIN);
    smelt_plan_stats s0 = t_check_plan("chain8", ctx, g, 1, &y, 0, 2, in, T_CHAIN);
    cr_assert_eq(s3.kernels, 1, "opt_level 3: %d kernels", s3.kernels);
    cr_assert_eq(s3.ops, 8, "opt_level 3: %d operators", s3.ops);
    cr_assert_eq(s0.kernels, 8, "opt_level 0: %d kernels", s0.kernels);
    cr_assert_eq(s0.ops, 8);
    for (int opt = 1; opt <= 2; opt++) {
        smelt_plan_stats s = t_check_plan("chain8", ctx, g, 1, &y, opt, 2, in, T_CHAIN);
        cr_assert_eq(s.kernels, 8, "opt_level %d does not fuse: %d kernels", opt, s.kernels);
    }

    /* the description names the kernels */
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    const char *d = smelt_plan_describe(p);
    cr_assert(t_contains(d, "kernel 0"), "%s", d);
    cr_assert(t_contains(d, "smelt_ew_"), "%s", d);
    cr_assert(t_contains(d, "1 kernels") || t_contains(d, "1 kernel"), "%s", d);
    cr_assert_eq(smelt_plan_num_kernels(p), 1);
    cr_assert(t_contains(d, smelt_plan_kernel_name(p, 0)), "%s", d);
    cr_assert_null(smelt_plan_kernel_name(p, 1));
    const char *src = smelt_plan_kernel_source(p, 0);
    cr_assert(t_contains(src, smelt_plan_kernel_name(p, 0)), "the source defines the kernel");
    smelt_plan_free(p);
    p = t_plan(ctx, g, 1, &y, 0);
    d = smelt_plan_describe(p);
    cr_assert(t_contains(d, "kernel 7"), "%s", d);
    cr_assert_not(t_contains(d, "kernel 8"), "%s", d);
    smelt_plan_free(p);

    t_free_all(in, 2);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(fusion, value_used_outside_its_chain_is_an_extra_output)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, NULL, SMELT_F64, SHP(1000));
    smelt_node *t = smelt_unary(g, SMELT_OP_EXP, smelt_unary(g, SMELT_OP_NEG, x));
    smelt_node *y = smelt_add(g, smelt_mul(g, t, x), smelt_scalar(g, 1));
    smelt_node *outs[] = {y, t}; /* t is used inside the chain and requested */
    smelt_tensor *in = t_rand(ctx, &r, SMELT_F64, SHP(1000));
    smelt_plan_stats s = t_check_plan("extra output", ctx, g, 2, outs, 3, 1, &in, t_chain_tol(SMELT_F64));
    cr_assert_eq(s.kernels, 1, "a 2-output kernel, not %d kernels", s.kernels);
    cr_assert_eq(s.ops, 4);
    smelt_plan *p = t_plan(ctx, g, 2, outs, 3);
    char line[512];
    describe_line(p, 0, line, sizeof line);
    cr_assert(t_contains(line, "out0") && t_contains(line, "out1"), "kernel 0 writes both outputs: %s",
              smelt_plan_describe(p));
    smelt_plan_free(p);

    /* also when the inner value feeds two consumers but is not requested */
    smelt_node *z = smelt_add(g, smelt_unary(g, SMELT_OP_SIN, t), smelt_unary(g, SMELT_OP_COS, t));
    s = t_check_plan("shared inner value", ctx, g, 1, &z, 3, 1, &in, t_chain_tol(SMELT_F64));
    cr_assert_eq(s.kernels, 1);
    smelt_tensor_free(in);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(fusion, sum_of_120_inputs_splits_at_the_operand_limit)
{
    enum { N = 120 };
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_graph *g = t_graph(ctx);
    smelt_node *x[N];
    smelt_tensor *in[N];
    for (int i = 0; i < N; i++) {
        x[i] = smelt_input(g, NULL, SMELT_I32, SHP(33));
        in[i] = t_rand(ctx, &r, SMELT_I32, SHP(33));
    }
    smelt_node *s = x[0];
    for (int i = 1; i < N; i++)
        s = smelt_add(g, s, x[i]);
    smelt_plan_stats st = t_check_plan("120 inputs", ctx, g, 1, &s, 3, N, in, T_EXACT);
    cr_assert_geq(st.kernels, 2, "120 inputs cannot be one kernel (at most %d operands)",
                  SMELT_MAX_KERNEL_OPERANDS);
    cr_assert_leq(st.kernels, 3, "but it should not fall apart either: %d kernels", st.kernels);
    cr_assert_eq(st.ops, N - 1);
    /* the answer by hand too */
    smelt_plan *p = t_plan(ctx, g, 1, &s, 3);
    smelt_tensor *got = NULL;
    t_run(p, N, in, 1, &got);
    for (int j = 0; j < 33; j++) {
        int64_t e = 0;
        for (int i = 0; i < N; i++)
            e += ((int32_t *)smelt_tensor_data(in[i]))[j];
        cr_assert_eq(((int32_t *)smelt_tensor_data(got))[j], e);
    }
    smelt_tensor_free(got);
    smelt_plan_free(p);

    /* the same with a balanced tree and f64 */
    smelt_graph *g2 = t_graph(ctx);
    smelt_node *v[N];
    smelt_tensor *in2[N];
    for (int i = 0; i < N; i++) {
        v[i] = smelt_input(g2, NULL, SMELT_F64, SHP(17));
        in2[i] = t_rand(ctx, &r, SMELT_F64, SHP(17));
    }
    int n = N;
    while (n > 1) {
        int m = 0;
        for (int i = 0; i + 1 < n; i += 2)
            v[m++] = smelt_add(g2, v[i], v[i + 1]);
        if (n % 2)
            v[m++] = v[n - 1];
        n = m;
    }
    st = t_check_plan("120 inputs, tree", ctx, g2, 1, &v[0], 3, N, in2, t_chain_tol(SMELT_F64));
    cr_assert_geq(st.kernels, 2);
    t_free_all(in, N);
    t_free_all(in2, N);
    smelt_graph_free(g);
    smelt_graph_free(g2);
    smelt_ctx_free(ctx);
}

Test(fusion, diamond_near_the_operand_limit_stays_acyclic)
{
    /* a = sum of 60 inputs (one big cluster); b = a * w1 + w2 ... (may not fit
     * with a); c = a + b: merging c into a's cluster through its first operand
     * would need b inside too -- a cycle if b is elsewhere. */
    enum { N = 60 };
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_graph *g = t_graph(ctx);
    smelt_node *x[N + 8];
    smelt_tensor *in[N + 8];
    for (int i = 0; i < N + 8; i++) {
        x[i] = smelt_input(g, NULL, SMELT_I64, SHP(8));
        in[i] = t_rand(ctx, &r, SMELT_I64, SHP(8));
    }
    smelt_node *a = x[0];
    for (int i = 1; i < N; i++)
        a = smelt_add(g, a, x[i]);
    smelt_node *b = a;
    for (int i = N; i < N + 8; i++)
        b = smelt_add(g, smelt_mul(g, b, x[i]), x[i]);
    smelt_node *c = smelt_sub(g, a, b);
    smelt_node *outs[] = {c, a};
    smelt_plan_stats st = t_check_plan("diamond", ctx, g, 2, outs, 3, N + 8, in, T_EXACT);
    cr_assert_geq(st.kernels, 2);
    t_free_all(in, N + 8);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* ---- why kernels are not fused (smelt_plan_describe) ----------------------------------- */

/* The description of y's plan has the line part why, or (why NULL) no "not fused" line. */
static void check_why(smelt_ctx *ctx, smelt_graph *g, smelt_node *y, int opt, const char *why)
{
    smelt_plan *p = t_plan(ctx, g, 1, &y, opt);
    const char *d = smelt_plan_describe(p);
    if (why)
        cr_assert(t_contains(d, why), "no \"%s\" in:\n%s", why, d);
    else
        cr_assert_not(t_contains(d, "not fused"), "%s", d);
    smelt_plan_free(p);
}

Test(fusion, describe_says_why_kernels_are_not_fused)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(40, 50));
    smelt_node *w = smelt_input(g, "w", SMELT_F32, SHP(40, 50));
    check_why(ctx, g, chain8(g, x, w), 3, NULL);
    check_why(ctx, g, chain8(g, x, w), 0, ": opt_level < 3 (fusion off)\n");
    smelt_node *b = smelt_unary(g, SMELT_OP_BARRIER, smelt_unary(g, SMELT_OP_SIN, x));
    check_why(ctx, g, smelt_unary(g, SMELT_OP_COS, b), 3,
              "\n  not fused with kernel 1: an opaque operator (barrier) is a fusion boundary\n");
    smelt_node *row = smelt_unary(g, SMELT_OP_EXP, smelt_input(g, "row", SMELT_F32, SHP(50)));
    check_why(ctx, g, smelt_add(g, x, row), 3, "\n  not fused with kernel 0: different iteration shapes\n");
    /* e + barrier(e): e cannot join the add, which reads the barrier, which reads e */
    smelt_node *e = smelt_unary(g, SMELT_OP_EXP, x);
    check_why(ctx, g, smelt_add(g, e, smelt_unary(g, SMELT_OP_BARRIER, e)), 3,
              "\n  not fused with kernel 0: would create a cycle\n");
    /* the limits: a chain of 300 operators, a sum of 100 inputs */
    char why[128];
    smelt_node *y = x;
    for (int i = 0; i < 300; i++)
        y = smelt_unary(g, i % 2 ? SMELT_OP_SIN : SMELT_OP_COS, y);
    snprintf(why, sizeof why, ": the kernel would exceed %d operators\n", SMELT_MAX_CLUSTER_OPS);
    check_why(ctx, g, y, 3, why);
    for (int i = 0; i < 100; i++)
        y = smelt_add(g, y, smelt_input(g, NULL, SMELT_F32, SHP(40, 50)));
    snprintf(why, sizeof why, ": the kernel would exceed %d operands\n", SMELT_MAX_KERNEL_OPERANDS);
    check_why(ctx, g, y, 3, why);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* A fused kernel that fails to compile runs as one kernel per operator: its
 * edges say so, and an edge into it keeps its own reason. */
Test(fusion, describe_says_a_failed_fused_kernel_was_split)
{
    t_use_failing_templates();
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, NULL, SMELT_F32, SHP(30, 20));
    smelt_node *v = smelt_unary(g, SMELT_OP_BARRIER, smelt_unary(g, SMELT_OP_NEG, x));
    check_why(ctx, g, chain8(g, v, x), 3, "\n  not fused with kernel 2: the fused kernel failed to compile\n");
    check_why(ctx, g, chain8(g, v, x), 3,
              "\n  not fused with kernel 1: an opaque operator (barrier) is a fusion boundary\n");
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* Two siblings of one cluster need no path between them: P = {p1, p2} and
 * Q = {q1, q2, q3} with p1 -> barrier -> q1 and q2 -> barrier -> p2 would be
 * a cycle of kernels (P before Q before P) although no path leaves Q and
 * comes back to it.  Merging q2 into Q must be refused as a cycle. */
Test(fusion, no_cycle_through_a_sibling_of_a_cluster)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(7, 9));
    smelt_node *p1 = smelt_unary(g, SMELT_OP_NEG, x);
    smelt_node *q1 = smelt_unary(g, SMELT_OP_TANH, smelt_unary(g, SMELT_OP_BARRIER, p1));
    smelt_node *q2 = smelt_unary(g, SMELT_OP_EXP, x);
    smelt_node *p2 = smelt_add(g, p1, smelt_unary(g, SMELT_OP_BARRIER, q2));
    smelt_node *q3 = smelt_add(g, q1, q2);
    smelt_node *outs[] = {p2, q3};
    trng r;
    trng_init(&r, 0xc1c);
    smelt_tensor *in = t_rand(ctx, &r, SMELT_F32, SHP(7, 9));
    t_check_plan("sibling cycle", ctx, g, 2, outs, 3, 1, &in, T_CHAIN);
    smelt_plan *p = t_plan(ctx, g, 2, outs, 3);
    cr_assert(t_contains(smelt_plan_describe(p), ": would create a cycle\n"), "%s", smelt_plan_describe(p));
    smelt_plan_free(p);
    smelt_tensor_free(in);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* ---- the kernel cache ----------------------------------------------------------------- */

/* A 6-operator layer. */
static smelt_node *layer(smelt_graph *g, smelt_node *x)
{
    smelt_node *v = smelt_add(g, smelt_mul(g, x, smelt_scalar(g, 1.5)), smelt_scalar(g, 0.25));
    v = smelt_unary(g, SMELT_OP_TANH, v);
    v = smelt_mul(g, v, x);
    v = smelt_unary(g, SMELT_OP_RELU, v);
    return smelt_sub(g, v, smelt_scalar(g, 0.125));
}

Test(fusion, identical_clusters_compile_once)
{
    enum { L = 100 };
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_graph *g = t_graph(ctx);
    smelt_node *outs[L];
    smelt_tensor *in[L];
    for (int i = 0; i < L; i++) {
        outs[i] = layer(g, smelt_input(g, NULL, SMELT_F32, SHP(64)));
        in[i] = t_rand(ctx, &r, SMELT_F32, SHP(64));
    }
    smelt_plan_stats st = t_check_plan("100 layers", ctx, g, L, outs, 3, L, in, T_CHAIN);
    cr_assert_eq(st.kernels, L, "one kernel per independent layer, got %d", st.kernels);
    cr_assert_eq(st.ops, 6 * L);
    cr_assert_eq(st.compiles, 1, "the same layer compiled %d times", st.compiles);
    cr_assert_eq(st.cache_hits, L - 1);
    /* a second plan in the same context compiles nothing */
    smelt_plan_stats st2 = t_check_plan("100 layers again", ctx, g, L, outs, 3, L, in, T_CHAIN);
    cr_assert_eq(st2.compiles, 0);
    cr_assert_eq(st2.cache_hits, L);
    /* and a new context starts empty */
    smelt_ctx *ctx2 = t_ctx();
    smelt_graph *g2 = t_graph(ctx2);
    smelt_node *y = layer(g2, smelt_input(g2, NULL, SMELT_F32, SHP(64)));
    smelt_plan *p = t_plan(ctx2, g2, 1, &y, 3);
    cr_assert_eq(t_stats(p).compiles, 1);
    smelt_plan_free(p);
    smelt_graph_free(g2);
    smelt_ctx_free(ctx2);
    t_free_all(in, L);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(fusion, three_hundred_outputs)
{
    /* more outputs than the executor's fixed-size bookkeeping */
    enum { L = 300 };
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_graph *g = t_graph(ctx);
    smelt_node *outs[L];
    smelt_tensor *in[L];
    for (int i = 0; i < L; i++) {
        smelt_node *x = smelt_input(g, NULL, SMELT_I64, SHP(3));
        outs[i] = smelt_sub(g, smelt_unary(g, SMELT_OP_NEG, x), smelt_scalar(g, i % 2));
        in[i] = t_rand(ctx, &r, SMELT_I64, SHP(3));
    }
    smelt_plan_stats st = t_check_plan("300 outputs", ctx, g, L, outs, 3, L, in, T_EXACT);
    cr_assert_eq(st.kernels, L);
    cr_assert_eq(st.compiles, 2, "two distinct layers: %d compiles", st.compiles);
    t_free_all(in, L);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

static smelt_graph *bcast_graph(smelt_ctx *ctx, int64_t rows, int64_t cols, smelt_node **y)
{
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, NULL, SMELT_F32, SHP(rows, cols));
    smelt_node *b = smelt_input(g, NULL, SMELT_F32, SHP(rows, 1));
    smelt_node *c = smelt_input(g, NULL, SMELT_F32, SHP(cols));
    *y = smelt_add(g, smelt_unary(g, SMELT_OP_EXP, smelt_mul(g, a, b)), c);
    return g;
}

Test(fusion, new_shape_same_pattern_does_not_recompile)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_node *y1, *y2;
    smelt_graph *g1 = bcast_graph(ctx, 64, 32, &y1);
    smelt_graph *g2 = bcast_graph(ctx, 100, 7, &y2);
    smelt_tensor *in1[] = {t_rand(ctx, &r, SMELT_F32, SHP(64, 32)), t_rand(ctx, &r, SMELT_F32, SHP(64, 1)),
                           t_rand(ctx, &r, SMELT_F32, SHP(32))};
    smelt_tensor *in2[] = {t_rand(ctx, &r, SMELT_F32, SHP(100, 7)), t_rand(ctx, &r, SMELT_F32, SHP(100, 1)),
                           t_rand(ctx, &r, SMELT_F32, SHP(7))};
    smelt_plan_stats s1 = t_check_plan("64x32", ctx, g1, 1, &y1, 3, 3, in1, T_CHAIN);
    cr_assert_geq(s1.compiles, 1);
    smelt_plan_stats s2 = t_check_plan("100x7", ctx, g2, 1, &y2, 3, 3, in2, T_CHAIN);
    cr_assert_eq(s2.compiles, 0, "a new shape with the same pattern compiled %d kernels", s2.compiles);
    cr_assert_eq(s2.cache_hits, s2.kernels);
    /* contiguous 1-D of any length: one flat kernel */
    smelt_graph *g3 = t_graph(ctx), *g4 = t_graph(ctx);
    smelt_node *y3 = smelt_unary(g3, SMELT_OP_SQRT, smelt_input(g3, NULL, SMELT_F64, SHP(1000)));
    smelt_node *y4 = smelt_unary(g4, SMELT_OP_SQRT, smelt_input(g4, NULL, SMELT_F64, SHP(3, 5, 7)));
    smelt_plan *p3 = t_plan(ctx, g3, 1, &y3, 3), *p4 = t_plan(ctx, g4, 1, &y4, 3);
    cr_assert_eq(t_stats(p3).compiles, 1);
    cr_assert_eq(t_stats(p4).compiles, 0, "contiguous 3-D merges to the same flat kernel");
    smelt_plan_free(p3);
    smelt_plan_free(p4);
    smelt_graph_free(g3);
    smelt_graph_free(g4);
    t_free_all(in1, 3);
    t_free_all(in2, 3);
    smelt_graph_free(g1);
    smelt_graph_free(g2);
    smelt_ctx_free(ctx);
}

Test(fusion, run_with_new_layout_compiles_a_variant_once)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, NULL, SMELT_F32, SHP(16, 24));
    smelt_node *y = smelt_unary(g, SMELT_OP_EXP, smelt_unary(g, SMELT_OP_NEG, x));
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    int c0 = t_stats(p).compiles;
    smelt_tensor *base = t_rand(ctx, &r, SMELT_F32, SHP(24, 16)), *tr = NULL;
    T_OK(ctx, smelt_tensor_transpose(base, (const int[]){1, 0}, &tr));
    for (int k = 0; k < 3; k++) {
        smelt_tensor *got = NULL, *ref = NULL;
        t_run(p, 1, &tr, 1, &got);
        t_reference(ctx, g, 1, &y, 1, &tr, &ref);
        t_expect_match("transposed input", got, ref, T_CHAIN);
        smelt_tensor_free(got);
        smelt_tensor_free(ref);
    }
    cr_assert_eq(t_stats(p).compiles, c0 + 1, "the strided variant is compiled once, at its first run");
    smelt_tensor_free(tr);
    smelt_tensor_free(base);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* ---- the kernel cache's bound -------------------------------------------------------- */

/* A one-kernel plan of (a * c + 1) * a: a new kernel for each c. */
static smelt_plan *scaled(smelt_ctx *ctx, smelt_graph **g, smelt_node **y, double c)
{
    *g = t_graph(ctx);
    smelt_node *a = smelt_input(*g, NULL, SMELT_F32, SHP(300));
    *y = smelt_mul(*g, smelt_add(*g, smelt_mul(*g, a, smelt_scalar(*g, c)), smelt_scalar(*g, 1)), a);
    return t_plan(ctx, *g, 1, y, 3);
}

/* Run p on fresh random data and compare with the float64 reference. */
static void check_run(const char *label, smelt_ctx *ctx, smelt_plan *p, smelt_graph *g,
                      smelt_node *y, trng *r)
{
    smelt_tensor *in = t_rand(ctx, r, SMELT_F32, SHP(300)), *got = NULL, *ref = NULL;
    t_run(p, 1, &in, 1, &got);
    t_reference(ctx, g, 1, &y, 1, &in, &ref);
    t_expect_match(label, got, ref, T_CHAIN);
    smelt_tensor_free(in), smelt_tensor_free(got), smelt_tensor_free(ref);
}

/* Past SMELT_MEM_CACHE_MAX_KERNELS distinct kernels the least recently used
 * leave: the cache stays within its bound, a recent kernel still hits, the
 * first compiles again. */
Test(fusion, kernel_cache_keeps_its_bound)
{
    setenv("SMELT_MEM_CACHE_MAX_KERNELS", "8", 1);
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g;
    smelt_node *y;
    for (int i = 0; i < 40; i++) {
        smelt_plan *p = scaled(ctx, &g, &y, 1.5 + i);
        cr_assert_eq(t_stats(p).compiles, 1, "kernel %d: %d compiles", i, t_stats(p).compiles);
        int n = smelt__kcache_count(ctx, NULL);
        cr_assert(n >= 1 && n <= 8, "%d kernels in a cache bounded at 8", n);
        smelt_plan_free(p), smelt_graph_free(g);
    }
    smelt_plan *p = scaled(ctx, &g, &y, 1.5 + 39);
    smelt_plan_stats s = t_stats(p);
    cr_assert(s.compiles == 0 && s.cache_hits == 1, "the newest: %d compiles, %d hits", s.compiles,
              s.cache_hits);
    smelt_plan_free(p), smelt_graph_free(g);
    p = scaled(ctx, &g, &y, 1.5);
    cr_assert_eq(t_stats(p).compiles, 1, "the oldest was not evicted");
    smelt_plan_free(p), smelt_graph_free(g);
    smelt_ctx_free(ctx);
    unsetenv("SMELT_MEM_CACHE_MAX_KERNELS");

    setenv("SMELT_MEM_CACHE_MAX_MB", "0.1", 1); /* some 8 kernels of this size */
    ctx = t_ctx();
    for (int i = 0; i < 30; i++) {
        p = scaled(ctx, &g, &y, 0.25 + i);
        size_t bytes;
        int n = smelt__kcache_count(ctx, &bytes);
        cr_assert(n >= 1 && n < 30 && bytes <= 104858, "%d kernels, %zu bytes", n, bytes);
        smelt_plan_free(p), smelt_graph_free(g);
    }
    smelt_ctx_free(ctx);
    unsetenv("SMELT_MEM_CACHE_MAX_MB");
}

/* A bound that is not a number above 0 is ignored with a warning. */
Test(fusion, kernel_cache_bad_bound_keeps_the_default_with_a_warning)
{
    static const char *const bad[] = {"abc", "0", "-1", "2.5", "8k"};
    for (int i = 0; i < NELEMS(bad); i++)
        for (int mb = 0; mb < 2; mb++) {
            const char *var = mb ? "SMELT_MEM_CACHE_MAX_MB" : "SMELT_MEM_CACHE_MAX_KERNELS";
            if (mb && !strcmp(bad[i], "2.5"))
                continue; /* a size in MiB */
            setenv(var, bad[i], 1);
            smelt_ctx *ctx = t_ctx();
            smelt_graph *g;
            smelt_node *y;
            smelt_plan *p = scaled(ctx, &g, &y, 2.5);
            char want[80];
            snprintf(want, sizeof want, "warning: %s='%s'", var, bad[i]);
            const char *d = smelt_plan_describe(p);
            cr_assert(t_contains(d, want) && t_contains(d, mb ? "256 MiB" : "4096 kernels"), "%s", d);
            smelt_plan_free(p), smelt_graph_free(g);
            smelt_ctx_free(ctx);
            unsetenv(var);
        }
}

/* An evicted kernel that a live plan still holds keeps working; the cache
 * itself holds no more than its bound. */
Test(fusion, evicted_kernel_runs_while_a_plan_holds_it)
{
    setenv("SMELT_MEM_CACHE_MAX_KERNELS", "2", 1);
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_graph *g0, *g;
    smelt_node *y0, *y;
    smelt_plan *p0 = scaled(ctx, &g0, &y0, 0.75);
    check_run("before eviction", ctx, p0, g0, y0, &r);
    for (int i = 0; i < 10; i++) {
        smelt_plan *p = scaled(ctx, &g, &y, 3.5 + i);
        check_run("another kernel", ctx, p, g, y, &r);
        smelt_plan_free(p), smelt_graph_free(g);
    }
    cr_assert_leq(smelt__kcache_count(ctx, NULL), 2);
    smelt_plan *again = scaled(ctx, &g, &y, 0.75);
    cr_assert_eq(t_stats(again).compiles, 1, "p0's kernel was not evicted");
    check_run("after eviction", ctx, p0, g0, y0, &r);
    smelt_plan_free(again), smelt_graph_free(g);
    check_run("after eviction, alone", ctx, p0, g0, y0, &r);
    smelt_plan_free(p0), smelt_graph_free(g0);
    smelt_ctx_free(ctx);
    unsetenv("SMELT_MEM_CACHE_MAX_KERNELS");
}

/* ---- passes --------------------------------------------------------------------------- */

Test(passes, constant_folding)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, NULL, SMELT_F32, SHP(100));
    smelt_node *k1 = smelt_mul(g, smelt_const(g, 3, SMELT_F32), smelt_const(g, 0.5, SMELT_F32));
    smelt_node *k2 = smelt_unary(g, SMELT_OP_SQRT, smelt_const(g, 2.25, SMELT_F32));
    smelt_node *k3 = smelt_sub(g, k1, k2); /* 1.5 - 1.5 = 0 */
    smelt_node *k4 = smelt_add(g, smelt_scalar(g, 2), smelt_scalar(g, 3)); /* weak: 5 */
    smelt_node *y = smelt_add(g, smelt_mul(g, x, k1), smelt_add(g, k3, k4));
    smelt_tensor *in = t_rand(ctx, &r, SMELT_F32, SHP(100));
    smelt_plan_stats s0 = t_check_plan("fold", ctx, g, 1, &y, 0, 1, &in, T_CHAIN);
    smelt_plan_stats s1 = t_check_plan("fold", ctx, g, 1, &y, 1, 1, &in, T_CHAIN);
    smelt_plan_stats s3 = t_check_plan("fold", ctx, g, 1, &y, 3, 1, &in, T_CHAIN);
    cr_assert_eq(s0.folded, 0, "opt_level 0 runs no passes");
    cr_assert_geq(s1.folded, 5, "mul, sqrt, sub, add and the two adds of constants: %d folded", s1.folded);
    cr_assert_eq(s3.folded, s1.folded);
    cr_assert_eq(s3.ops, 2, "x * 1.5 + 5: %d operators left", s3.ops);
    cr_assert_eq(s3.kernels, 1);
    /* the folded value is the f32 value */
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    smelt_tensor *got = NULL;
    t_run(p, 1, &in, 1, &got);
    for (int i = 0; i < 100; i++) {
        volatile float m = ((float *)smelt_tensor_data(in))[i] * 1.5f;
        cr_assert_eq(((float *)smelt_tensor_data(got))[i], m + 5.0f, "[%d]", i);
    }
    smelt_tensor_free(got);
    smelt_plan_free(p);
    /* a graph of constants only */
    smelt_node *c = smelt_unary(g, SMELT_OP_EXP, smelt_const(g, 1, SMELT_F64));
    smelt_plan_stats sc = t_check_plan("constant output", ctx, g, 1, &c, 3, 1, &in, (t_tol){4, 0, 0, false});
    cr_assert_leq(sc.kernels, 1);
    smelt_tensor_free(in);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(passes, common_subexpressions)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, NULL, SMELT_F64, SHP(3, 100));
    smelt_node *b = smelt_input(g, NULL, SMELT_F64, SHP(100));
    smelt_node *e1 = smelt_unary(g, SMELT_OP_EXP, smelt_add(g, x, b));
    smelt_node *e2 = smelt_unary(g, SMELT_OP_EXP, smelt_add(g, x, b)); /* the same */
    smelt_node *e3 = smelt_unary(g, SMELT_OP_EXP, smelt_add(g, b, x)); /* not the same order */
    smelt_node *y = smelt_add(g, smelt_mul(g, e1, e2), e3);
    smelt_tensor *in[] = {t_rand(ctx, &r, SMELT_F64, SHP(3, 100)), t_rand(ctx, &r, SMELT_F64, SHP(100))};
    smelt_plan_stats s0 = t_check_plan("cse", ctx, g, 1, &y, 0, 2, in, t_chain_tol(SMELT_F64));
    smelt_plan_stats s3 = t_check_plan("cse", ctx, g, 1, &y, 3, 2, in, t_chain_tol(SMELT_F64));
    cr_assert_eq(s0.cse, 0);
    cr_assert_geq(s3.cse, 2, "add and exp computed twice: cse %d", s3.cse);
    cr_assert_eq(s0.ops, 8);
    cr_assert_eq(s3.ops, 6, "%d operators after CSE", s3.ops);
    /* CSE keeps distinct outputs distinct */
    smelt_node *outs[] = {e1, e2};
    smelt_plan *p = t_plan(ctx, g, 2, outs, 3);
    smelt_tensor *got[2] = {0};
    t_run(p, 2, in, 2, got);
    cr_assert_neq(smelt_tensor_data(got[0]), smelt_tensor_data(got[1]));
    cr_assert(t_bitwise_equal(got[0], got[1]));
    t_free_all(got, 2);
    smelt_plan_free(p);
    t_free_all(in, 2);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(passes, dead_code)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, NULL, SMELT_F32, SHP(50));
    smelt_node *unused_in = smelt_input(g, NULL, SMELT_F32, SHP(7));
    smelt_node *dead = smelt_unary(g, SMELT_OP_SIN, smelt_unary(g, SMELT_OP_LOG, x));
    smelt_node *dead2 = smelt_mul(g, unused_in, unused_in);
    smelt_node *y = smelt_unary(g, SMELT_OP_COS, x);
    cr_assert(dead && dead2);
    smelt_tensor *in[] = {t_rand(ctx, &r, SMELT_F32, SHP(50)), t_rand(ctx, &r, SMELT_F32, SHP(7))};
    smelt_plan_stats s0 = t_check_plan("dce", ctx, g, 1, &y, 0, 2, in, (t_tol){4, 0, 0, false});
    smelt_plan_stats s1 = t_check_plan("dce", ctx, g, 1, &y, 1, 2, in, (t_tol){4, 0, 0, false});
    cr_assert_eq(s0.dce, 0);
    cr_assert_eq(s0.ops, 4, "opt_level 0 runs every node: %d", s0.ops);
    cr_assert_geq(s1.dce, 3, "log, sin, mul are dead: dce %d", s1.dce);
    cr_assert_eq(s1.ops, 1);
    cr_assert_eq(s1.kernels, 1);
    /* inputs stay numbered even when dead: the plan still takes two */
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    smelt_tensor *got = NULL;
    T_ERR(ctx, smelt_plan_run(p, 1, in, 1, &got), SMELT_ERR_INVALID_ARG, "2 inputs");
    smelt_plan_free(p);
    t_free_all(in, 2);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* ---- fused == unfused, bitwise -------------------------------------------------------- */

typedef smelt_node *(*graph_fn)(smelt_graph *g, smelt_node *const *x);

static smelt_node *gelu_like(smelt_graph *g, smelt_node *const *x)
{
    smelt_node *a = x[0], *b = x[1];
    smelt_node *t = smelt_unary(g, SMELT_OP_TANH, smelt_mul(g, a, b));
    smelt_node *u = smelt_add(g, smelt_mul(g, a, t), smelt_unary(g, SMELT_OP_SIGMOID, b));
    smelt_node *d = smelt_add(g, smelt_unary(g, SMELT_OP_EXP, a), smelt_mul(g, b, b)); /* > 0 */
    smelt_node *v = smelt_div(g, u, d);
    return smelt_sub(g, smelt_unary(g, SMELT_OP_LOG1P, smelt_unary(g, SMELT_OP_ABS, v)), a);
}

static smelt_node *trig_mix(smelt_graph *g, smelt_node *const *x)
{
    smelt_node *a = x[0], *b = x[1];
    smelt_node *s = smelt_unary(g, SMELT_OP_SIN, a), *c = smelt_unary(g, SMELT_OP_COS, b);
    smelt_node *h = smelt_ternary(g, SMELT_OP_FMA, s, c, smelt_unary(g, SMELT_OP_SQRT, smelt_unary(g, SMELT_OP_ABS, a)));
    smelt_node *w = smelt_where(g, smelt_binary(g, SMELT_OP_GT, h, b), h, smelt_unary(g, SMELT_OP_ERF, b));
    smelt_node *p = smelt_binary(g, SMELT_OP_POW, smelt_unary(g, SMELT_OP_ABS, w), b);
    return smelt_binary(g, SMELT_OP_ATAN2, p, smelt_ternary(g, SMELT_OP_CLAMP, a, b, smelt_unary(g, SMELT_OP_ABS, b)));
}

static smelt_node *int_mix(smelt_graph *g, smelt_node *const *x)
{
    smelt_node *a = x[0], *b = x[1];
    smelt_node *q = smelt_binary(g, SMELT_OP_FLOOR_DIV, smelt_mul(g, a, b), smelt_add(g, b, smelt_scalar(g, 3)));
    smelt_node *m = smelt_binary(g, SMELT_OP_MOD, q, b);
    smelt_node *f = smelt_unary(g, SMELT_OP_SQRT, smelt_unary(g, SMELT_OP_ABS, m)); /* f64 */
    return smelt_add(g, f, smelt_cast(g, smelt_binary(g, SMELT_OP_MAXIMUM, a, m), SMELT_F32));
}

static void fused_equals_unfused(const char *label, smelt_dtype dt, graph_fn fn)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, (uint64_t)dt);
    smelt_graph *g = t_graph(ctx);
    smelt_node *x[2] = {smelt_input(g, NULL, dt, SHP(37, 41)), smelt_input(g, NULL, dt, SHP(41))};
    smelt_node *y = fn(g, x);
    cr_assert_not_null(y, "%s", smelt_graph_errmsg(g));
    smelt_tensor *in[2] = {t_rand(ctx, &r, dt, SHP(37, 41)), t_rand(ctx, &r, dt, SHP(41))};
    smelt_tensor *got[4] = {0};
    int kernels[4];
    for (int opt = 0; opt <= 3; opt++) {
        smelt_plan *p = t_plan(ctx, g, 1, &y, opt);
        kernels[opt] = t_stats(p).kernels;
        t_run(p, 2, in, 1, &got[opt]);
        smelt_plan_free(p);
    }
    cr_assert_lt(kernels[3], kernels[0], "%s: nothing was fused (%d kernels)", label, kernels[3]);
    for (int opt = 1; opt <= 3; opt++) {
        int64_t at = t_first_difference(got[0], got[opt]);
        cr_expect_eq(at, -1, "%s: opt_level %d differs from unfused at [%lld]: %a vs %a", label, opt,
                     (long long)at, smelt_tensor_get(got[opt], at), smelt_tensor_get(got[0], at));
    }
    /* and both are right */
    smelt_tensor *ref = NULL;
    t_reference(ctx, g, 1, &y, 2, in, &ref);
    smelt_dtype od = smelt_node_dtype(y);
    t_tol tol = t_chain_tol(od);
    tol.rtol = 64 * t_eps(od); /* pow, exp and atan2 of rounded values */
    t_expect_match(label, got[3], ref, tol);
    smelt_tensor_free(ref);
    t_free_all(got, 4);
    t_free_all(in, 2);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(fusion, fused_equals_unfused_bitwise)
{
    fused_equals_unfused("gelu-like f32", SMELT_F32, gelu_like);
    fused_equals_unfused("gelu-like f64", SMELT_F64, gelu_like);
    fused_equals_unfused("trig f32", SMELT_F32, trig_mix);
    fused_equals_unfused("trig f64", SMELT_F64, trig_mix);
    fused_equals_unfused("integers i32", SMELT_I32, int_mix);
    fused_equals_unfused("integers u8", SMELT_U8, int_mix);
}

Test(fusion, fused_equals_unfused_on_views)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_graph *g = t_graph(ctx);
    smelt_node *x[2] = {smelt_input(g, NULL, SMELT_F32, SHP(20, 30)), smelt_input(g, NULL, SMELT_F32, SHP(30))};
    smelt_node *y = gelu_like(g, x);
    smelt_tensor *base = t_rand(ctx, &r, SMELT_F32, SHP(30, 40)), *tr = NULL, *v = NULL;
    T_OK(ctx, smelt_tensor_transpose(base, (const int[]){1, 0}, &tr)); /* (40, 30) */
    T_OK(ctx, smelt_tensor_slice(tr, 0, 0, 40, 2, &v));                  /* (20, 30) */
    smelt_tensor *b = t_rand(ctx, &r, SMELT_F32, SHP(30));
    smelt_tensor *in[2] = {v, b};
    smelt_tensor *got[2] = {0};
    for (int k = 0; k < 2; k++) {
        smelt_plan *p = t_plan(ctx, g, 1, &y, k ? 3 : 0);
        t_run(p, 2, in, 1, &got[k]);
        smelt_plan_free(p);
    }
    cr_assert(t_bitwise_equal(got[0], got[1]), "fused and unfused differ on strided inputs");
    t_free_all(got, 2);
    smelt_tensor *all[] = {base, tr, v, b};
    t_free_all(all, 4);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* ---- threads -------------------------------------------------------------------------- */

Test(threads, one_and_two_threads_agree)
{
    enum { N = 1 << 20 };
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, NULL, SMELT_F32, SHP(N));
    smelt_node *w = smelt_input(g, NULL, SMELT_F32, SHP(N));
    smelt_node *y = chain8(g, x, w);
    smelt_node *z = smelt_binary(g, SMELT_OP_LT, x, w);
    smelt_node *outs[] = {y, z};
    smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F32, SHP(N)), t_rand(ctx, &r, SMELT_F32, SHP(N))};
    smelt_tensor *got[3][2] = {{0}};
    static const int threads[] = {1, 2, 0};
    for (int k = 0; k < 3; k++) {
        T_OK(ctx, smelt_ctx_set_threads(ctx, threads[k]));
        if (threads[k])
            cr_assert_eq(smelt_ctx_threads(ctx), threads[k]);
        else
            cr_assert_geq(smelt_ctx_threads(ctx), 1, "0 means all cores");
        smelt_plan *p = t_plan(ctx, g, 2, outs, 3);
        t_run(p, 2, in, 2, got[k]);
        smelt_plan_free(p);
    }
    for (int k = 1; k < 3; k++)
        for (int o = 0; o < 2; o++) {
            int64_t at = t_first_difference(got[0][o], got[k][o]);
            cr_assert_eq(at, -1, "%d threads differ from 1 at [%lld] of output %d", threads[k],
                         (long long)at, o);
        }
    /* spot-check against the reference */
    smelt_tensor *ref[2] = {0};
    t_reference(ctx, g, 2, outs, 2, in, ref);
    t_expect_match("1M elements, 2 threads", got[1][0], ref[0], T_CHAIN);
    t_expect_match("1M elements, 2 threads", got[1][1], ref[1], T_EXACT);
    t_free_all(ref, 2);
    for (int k = 0; k < 3; k++)
        t_free_all(got[k], 2);
    t_free_all(in, 2);
    T_ERR(ctx, smelt_ctx_set_threads(ctx, -1), SMELT_ERR_INVALID_ARG, "threads");
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(threads, broadcast_and_strided_large)
{
    /* the nd kernels split rows across threads too */
    smelt_ctx *ctx = t_ctx();
    T_OK(ctx, smelt_ctx_set_threads(ctx, 2));
    trng r;
    trng_init(&r, 0);
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, NULL, SMELT_F64, SHP(1023, 257));
    smelt_node *b = smelt_input(g, NULL, SMELT_F64, SHP(1023, 1));
    smelt_node *y = smelt_add(g, smelt_unary(g, SMELT_OP_SIN, a), b);
    smelt_tensor *base = t_rand(ctx, &r, SMELT_F64, SHP(257, 1023)), *at = NULL;
    T_OK(ctx, smelt_tensor_transpose(base, (const int[]){1, 0}, &at));
    smelt_tensor *in[] = {at, t_rand(ctx, &r, SMELT_F64, SHP(1023, 1))};
    smelt_tensor *got2 = NULL, *got1 = NULL;
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    t_run(p, 2, in, 1, &got2);
    T_OK(ctx, smelt_ctx_set_threads(ctx, 1));
    t_run(p, 2, in, 1, &got1);
    cr_assert(t_bitwise_equal(got1, got2));
    smelt_tensor *ref = NULL;
    t_reference(ctx, g, 1, &y, 2, in, &ref);
    t_expect_match("strided, 2 threads", got2, ref, t_chain_tol(SMELT_F64));
    smelt_tensor *all[] = {got1, got2, ref, base, at, in[1]};
    t_free_all(all, 6);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* Thousands of distinct constants (the block form gave each one a 4 KiB
 * block on the kernel's stack: a stack overflow), and a fusible group far
 * larger than one kernel should hold: it splits, the answer is exact. */
Test(fusion, thousands_of_constants_split_and_cost_no_stack)
{
    enum { N = 2100, W = 150 };
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 5);
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_F32, SHP(700));
    float c[N];
    smelt_node *s = NULL;
    for (int i = 0; i < N; i++) {
        c[i] = (float)trng_uniform(&r, -2, 2);
        smelt_node *term = smelt_mul(g, a, smelt_const(g, c[i], SMELT_F32));
        s = s ? smelt_add(g, s, term) : term;
    }
    /* W values all live at once, then summed */
    smelt_node *t[W];
    for (int i = 0; i < W; i++)
        t[i] = smelt_sub(g, a, smelt_const(g, c[i], SMELT_F32));
    smelt_node *w = t[W - 1];
    for (int i = W - 2; i >= 0; i--)
        w = smelt_add(g, w, t[i]);
    smelt_node *outs[2] = {s, w};
    smelt_tensor *in = t_rand(ctx, &r, SMELT_F32, SHP(700)), *out[2] = {0};
    smelt_plan *p = t_plan(ctx, g, 2, outs, 3);
    t_run(p, 1, &in, 2, out);
    smelt_plan_stats st = t_stats(p);
    cr_assert_geq(st.kernels, N * 2 / SMELT_MAX_CLUSTER_OPS, "%d kernels for %d operators", st.kernels, st.ops);
    for (int j = 0; j < 700; j++) {
        float x = ((const float *)smelt_tensor_data(in))[j], e = x * c[0], f = x - c[W - 1];
        for (int i = 1; i < N; i++)
            e = e + x * c[i];
        for (int i = W - 2; i >= 0; i--)
            f = f + (x - c[i]);
        cr_assert_eq(((const float *)smelt_tensor_data(out[0]))[j], e, "element %d", j);
        cr_assert_eq(((const float *)smelt_tensor_data(out[1]))[j], f, "element %d", j);
    }
    t_free_all(out, 2);
    smelt_tensor_free(in);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* Every registered backend that works here (smelt_backend_name; NVRTC only
 * with a GPU) runs the same fused graph in one kernel, to the same bits,
 * within tolerance of float64.  A new backend in the registry is tested
 * here without a new test. */
Test(backends, every_registered_backend_gives_the_same_bits)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0x5eed);
    int64_t shp[2] = {37, 129};
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_F32, 2, shp);
    smelt_node *b = smelt_input(g, "b", SMELT_F32, 1, shp + 1);
    smelt_node *y = smelt_unary(g, SMELT_OP_TANH,
                                smelt_add(g, smelt_mul(g, a, b), smelt_unary(g, SMELT_OP_EXP, a)));
    smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F32, 2, shp), t_rand(ctx, &r, SMELT_F32, 1, shp + 1)};
    smelt_tensor *ref;
    t_reference(ctx, g, 1, &y, 2, in, &ref);
    smelt_tensor *first = NULL;
    const char *name, *first_name = NULL;
    int ran = 0;
    for (int i = 0; (name = smelt_backend_name(i, NULL)); i++) {
        if (smelt_backend_check(ctx, name) != SMELT_OK)
            continue;
        smelt_plan_opts o;
        smelt_plan_opts_init(&o);
        o.backend = name;
        smelt_plan *p;
        T_OK(ctx, smelt_plan_new(ctx, g, 1, &y, &o, &p));
        smelt_tensor *out = NULL;
        T_OK(ctx, smelt_plan_run(p, 2, in, 1, &out));
        cr_assert_eq(t_stats(p).kernels, 1, "%s: %d kernels", name, t_stats(p).kernels);
        t_expect_match(name, out, ref, T_CHAIN);
        if (!first) {
            first = out;
            first_name = name;
        } else {
            cr_assert(t_bitwise_equal(first, out), "%s and %s differ at element %lld", first_name,
                      name, (long long)t_first_difference(first, out));
            smelt_tensor_free(out);
        }
        smelt_plan_free(p);
        ran++;
    }
    cr_assert_geq(ran, 2, "TCC and CC at least should run here, %d did", ran);
    smelt_tensor_free(first);
    smelt_tensor_free(ref);
    t_free_all(in, 2);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* A backend's supports() hook declines a kernel before anything is
 * emitted: here TinyCC with a hook that takes one operator per kernel.  The
 * planner runs a declined fused cluster as its operators' own kernels, says
 * why in the plan's warnings, and the results stay the reference's. */
static int one_operator_only(smelt__backend *be, const smelt__kdesc *d, smelt__sb *why)
{
    SMELT_UNUSED(be);
    int ops = 0;
    for (int j = 0; j < d->n_ops; j++)
        ops += d->ops[j].op != SMELT_OP_CONST;
    if (ops <= 1)
        return 1;
    smelt__sb_printf(why, "this backend takes one operator per kernel, not %d", ops);
    return 0;
}

Test(backends, supports_hook_declines_a_kernel)
{
    smelt_ctx *ctx = t_ctx();
    smelt__backend *be;
    T_OK(ctx, smelt__backend_get(ctx, smelt__backend_find("TCC"), &be));
    const smelt__backend_i *tcc = be->iface;
    smelt__backend_i iface = *tcc;
    iface.supports = one_operator_only;
    be->iface = &iface;
    trng r;
    trng_init(&r, 0x5097);
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_F32, SHP(333));
    smelt_node *y = smelt_unary(g, SMELT_OP_TANH, smelt_add(g, smelt_mul(g, a, a), smelt_scalar(g, 0.5)));
    smelt_tensor *in = t_rand(ctx, &r, SMELT_F32, SHP(333));
    smelt_plan_stats st = t_check_plan("declined", ctx, g, 1, &y, 3, 1, &in, T_CHAIN);
    cr_assert_eq(st.kernels, 3, "mul, add and tanh as kernels of their own, got %d", st.kernels);
    cr_assert_eq(st.fallbacks, 1, "one declined cluster, %d fallbacks", st.fallbacks);
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    o.backend = "TCC";
    smelt_plan *p;
    T_OK(ctx, smelt_plan_new(ctx, g, 1, &y, &o, &p));
    const char *d = smelt_plan_describe(p);
    cr_assert(strstr(d, "(this backend takes one operator per kernel, not 3); running them unfused"),
              "the warning quotes the hook's reason: %s", d);
    smelt_plan_free(p);
    be->iface = tcc; /* before the context destroys its backend */
    smelt_tensor_free(in);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* Algebraic identities and dead branches (src/passes/simplify.c): each
 * rewrite counted, and opt_level 1 (simplified) gives the bits of opt_level 0
 * on special values (+-0, +-inf, NaN, subnormals) and random ones; rules
 * that would change a bit are not applied (x + 0.0 on -0.0, x - x of
 * floats on inf, a broadcast operand). */
Test(passes, algebraic_identities_and_dead_branches)
{
    static const struct {
        const char *expr;
        int simplified, branches;
    } cases[] = {
        {"x * 1", 1, 0},           {"1 * x", 1, 0},
        {"x / 1", 1, 0},           {"x + -0.0", 1, 0},
        {"-0.0 + x", 1, 0},        {"x + 0.0", 0, 0},
        {"x - 0", 1, 0},           {"x - -0.0", 0, 0},
        {"x - x", 0, 0},           {"i - i", 1, 0},
        {"i ^ i", 1, 0},           {"i + 0", 1, 0},
        {"i | 0", 1, 0},           {"-(-x)", 1, 0},
        {"-(-i)", 1, 0},           {"~~i", 1, 0},
        {"not (not c)", 1, 0},     {"c & c", 1, 0},
        {"c | False", 1, 0},       {"c & True", 1, 0},
        {"abs(abs(x))", 1, 0},     {"floor(floor(x))", 1, 0},
        {"relu(relu(x))", 1, 0},   {"maximum(x, x)", 1, 0},
        {"minimum(x, x)", 1, 0},   {"(x * 1) * 1", 2, 0},
        {"b * 1 + x", 1, 0},       {"float32(x)", 0, 0},
        {"where(c, x, x)", 0, 1},  {"where(1 > 2, x, i)", 0, 1},
        {"where(2 > 1, x, x * 3) + 1", 0, 1},
        {"where(1 > 0, b, x)", 0, 0}, /* b is broadcast: not the result */
        {"x * 2", 0, 0},           {"i * 1 - i", 2, 0}, /* i * 1 is i, then i - i is 0 */
        {"x ** 2", 1, 0},          {"x ** -1", 1, 0}, /* square, reciprocal */
        {"x ** 1", 1, 0},          {"i ** 2", 1, 0},
        {"i ** 1", 1, 0},          {"x ** 0.5", 0, 0},
        {"x ** 3", 0, 0},          {"i ** -1", 0, 0},
        {"b ** 2 + x", 1, 0},      {"x ** b", 0, 0},
    };
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 12);
    int64_t n = 64 * 3;
    smelt_tensor *xs = t_tensor(ctx, SMELT_F32, SHP(4, 64 * 3)), *is = t_tensor(ctx, SMELT_I32, SHP(4, 64 * 3));
    t_mixed_inputs(&r, &xs, 1);
    t_mixed_inputs(&r, &is, 1);
    smelt_tensor *in[] = {xs, is, t_rand(ctx, &r, SMELT_BOOL, SHP(4, 64 * 3)), t_rand(ctx, &r, SMELT_F32, SHP(64 * 3))};
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        smelt_graph *g = t_graph(ctx);
        smelt_input(g, "x", SMELT_F32, SHP(4, n));
        smelt_input(g, "i", SMELT_I32, SHP(4, n));
        smelt_input(g, "c", SMELT_BOOL, SHP(4, n));
        smelt_input(g, "b", SMELT_F32, SHP(n));
        smelt_node *y = smelt_expr(g, cases[k].expr, NULL, NULL, 0);
        T_OK(ctx, smelt_graph_status(g));
        smelt_plan *p0 = t_plan(ctx, g, 1, &y, 0), *p1 = t_plan(ctx, g, 1, &y, 1);
        smelt_plan_stats s1 = t_stats(p1);
        cr_assert(s1.simplified == cases[k].simplified && s1.dead_branches == cases[k].branches,
                  "%s: simplified %d, dead branches %d; expected %d, %d\n%s", cases[k].expr, s1.simplified,
                  s1.dead_branches, cases[k].simplified, cases[k].branches, smelt_plan_describe(p1));
        cr_assert_eq(t_stats(p0).simplified + t_stats(p0).dead_branches, 0, "opt_level 0 runs no pass");
        smelt_tensor *a = NULL, *b = NULL;
        t_run(p0, 4, in, 1, &a);
        t_run(p1, 4, in, 1, &b);
        cr_assert(t_bitwise_equal(a, b), "%s: simplified differs at element %lld", cases[k].expr,
                  (long long)t_first_difference(a, b));
        smelt_tensor_free(a), smelt_tensor_free(b);
        smelt_plan_free(p0), smelt_plan_free(p1);
        smelt_graph_free(g);
    }
    t_free_all(in, 4);
    smelt_ctx_free(ctx);
}
