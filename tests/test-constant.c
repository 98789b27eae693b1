/* Tensor constants (smelt_constant: weights held by the graph): read by
 * fused kernels and through views, every dtype, against the reference;
 * equal constants stored once; graph files carry them inline or in .npy
 * files beside the graph, bit for bit. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

static smelt_op op_for(smelt_dtype dt) { return dt == SMELT_BOOL ? SMELT_OP_BITWISE_XOR : SMELT_OP_ADD; }

Test(constant, read_by_fused_kernels_every_dtype)
{
    smelt_ctx *ctx = t_ctx();
    const smelt_dtype dts[] = {SMELT_F32, SMELT_F64, SMELT_F16, SMELT_BF16, SMELT_I32, SMELT_I64, SMELT_U8, SMELT_BOOL};
    const char *backends[] = {"TCC", "CC"};
    trng r;
    trng_init(&r, 31);
    for (int t = 0; t < NELEMS(dts); t++) {
        smelt_graph *g = t_graph(ctx);
        smelt_node *x = smelt_input(g, "x", dts[t], SHP(40, 33));
        smelt_tensor *wt = t_rand(ctx, &r, dts[t], SHP(33, 40)), *wv = NULL, *b = t_rand(ctx, &r, dts[t], SHP(33));
        T_OK(ctx, smelt_tensor_transpose(wt, (int[]){1, 0}, &wv)); /* a strided source: copied in order */
        smelt_node *w = smelt_constant(g, wv), *bc = smelt_constant(g, b);
        smelt_tensor_free(wv), smelt_tensor_free(wt), smelt_tensor_free(b); /* the graph keeps its own copies */
        smelt_node *y = smelt_binary(g, op_for(dts[t]), smelt_binary(g, op_for(dts[t]), x, w), bc);
        smelt_node *z = smelt_binary(g, op_for(dts[t]), smelt_transpose(g, w, NULL), smelt_transpose(g, x, NULL));
        smelt_node *outs[] = {y, z};
        T_OK(ctx, smelt_graph_status(g));
        smelt_tensor *in = t_rand(ctx, &r, dts[t], SHP(40, 33)), *ref[2], *base[2] = {0};
        t_reference(ctx, g, 2, outs, 1, &in, ref);
        smelt_plan *p0 = t_plan(ctx, g, 2, outs, 0);
        t_run(p0, 1, &in, 2, base);
        for (int k = 0; k < 2; k++)
            t_expect_match(smelt_dtype_name(dts[t]), base[k], ref[k], t_is_float(dts[t]) ? t_chain_tol(dts[t]) : T_EXACT);
        for (int be = 0; be < 2; be++) {
            smelt_plan_opts o;
            smelt_plan_opts_init(&o);
            o.backend = backends[be];
            smelt_plan *p = NULL;
            T_OK(ctx, smelt_plan_new(ctx, g, 2, outs, &o, &p));
            cr_assert_eq(t_stats(p).kernels, 2, "%s", smelt_plan_describe(p));
            cr_assert_eq(t_stats(p).copies, 0, "%s", smelt_plan_describe(p));
            smelt_tensor *got[2] = {0};
            t_run(p, 1, &in, 2, got);
            t_run(p, 1, &in, 2, got); /* again: the constants stay laid out */
            for (int k = 0; k < 2; k++)
                cr_assert(t_bitwise_equal(got[k], base[k]), "%s on %s: fused differs from unfused",
                          smelt_dtype_name(dts[t]), backends[be]);
            t_free_all(got, 2);
            smelt_plan_free(p);
        }
        t_free_all(base, 2), t_free_all(ref, 2);
        smelt_tensor_free(in);
        smelt_plan_free(p0);
        smelt_graph_free(g);
    }
    smelt_ctx_free(ctx);
}

Test(constant, equal_constants_stored_once)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    trng r;
    trng_init(&r, 32);
    smelt_tensor *a = t_rand(ctx, &r, SMELT_F32, SHP(4, 6)), *b = NULL, *c = NULL, *d = NULL;
    T_OK(ctx, smelt_tensor_contiguous(a, &b)); /* the same values, other memory */
    T_OK(ctx, smelt_tensor_contiguous(a, &c));
    t_set(c, 5, smelt_tensor_get(c, 5) + 1); /* one value differs */
    T_OK(ctx, smelt_tensor_wrap(ctx, SMELT_F32, SHP(6, 4), NULL, smelt_tensor_data(a), &d)); /* same bytes, other shape */
    smelt_node *na = smelt_constant(g, a), *nb = smelt_constant(g, b), *nc = smelt_constant(g, c),
               *nd = smelt_constant(g, d);
    cr_assert(na && na == nb, "equal constants are one node");
    cr_assert(nc != na && nd != na && nd != nc, "different values or shapes are other nodes");
    smelt_tensor_free(a), smelt_tensor_free(b), smelt_tensor_free(c), smelt_tensor_free(d);
    /* errors */
    cr_assert_null(smelt_constant(g, NULL));
    cr_assert(t_contains(smelt_graph_errmsg(g), "constant: the tensor is NULL"), "%s", smelt_graph_errmsg(g));
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* Graph files: small constants inline, large ones in .npy files beside the
 * graph (bf16 inline: NumPy has no bf16); special values bit for bit. */
Test(constant, graph_files_carry_the_values)
{
    smelt_ctx *ctx = t_ctx();
    char dir[] = "/tmp/smelt-const-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[256];
    snprintf(path, sizeof path, "%s/g.smelt", dir);
    const smelt_dtype dts[] = {SMELT_F32, SMELT_F64, SMELT_BF16, SMELT_I64, SMELT_U8, SMELT_BOOL, SMELT_F16};
    trng r;
    trng_init(&r, 33);
    for (int t = 0; t < NELEMS(dts); t++)
        for (int big = 0; big < 2; big++) {
            int64_t n = big ? 1000 : 7;
            smelt_graph *g = t_graph(ctx);
            smelt_node *x = smelt_input(g, "x", dts[t], 1, &n);
            smelt_tensor *w = t_rand(ctx, &r, dts[t], 1, &n);
            if (t_is_float(dts[t])) {
                t_set(w, 0, -0.0), t_set(w, 1, INFINITY), t_set(w, 2, NAN), t_set(w, 3, -INFINITY);
                if (dts[t] == SMELT_F64)
                    t_set(w, 4, 4.9406564584124654e-324); /* a subnormal */
            }
            if (dts[t] == SMELT_I64)
                t_set_i64(w, 0, INT64_MIN), t_set_i64(w, 1, INT64_MAX);
            smelt_node *y = smelt_binary(g, op_for(dts[t]), x, smelt_constant(g, w));
            smelt_node *outs[] = {y};
            T_OK(ctx, smelt_graph_save(g, 1, outs, path));
            char npy[300];
            snprintf(npy, sizeof npy, "%s.c1.npy", path);
            bool beside = big && dts[t] != SMELT_BF16;
            cr_assert_eq(access(npy, F_OK) == 0, beside, "%s, %lld elements: the .npy file %s",
                         smelt_dtype_name(dts[t]), (long long)n, beside ? "is missing" : "should not exist");
            char *text = NULL;
            T_OK(ctx, smelt_graph_to_text(g, 1, outs, &text));
            smelt_graph *g2 = NULL, *g3 = NULL;
            int n_out = 0, n_out3 = 0;
            smelt_node **o2 = NULL, **o3 = NULL;
            T_OK(ctx, smelt_graph_load(ctx, path, &g2, &n_out, &o2));
            T_OK(ctx, smelt_graph_from_text(ctx, text, &g3, &n_out3, &o3)); /* (inline values, whatever the size) */
            smelt_tensor *in = t_rand(ctx, &r, dts[t], 1, &n), *a = NULL, *b = NULL, *c = NULL;
            smelt_plan *p = t_plan(ctx, g, 1, outs, 3), *p2 = t_plan(ctx, g2, 1, o2, 3), *p3 = t_plan(ctx, g3, 1, o3, 3);
            t_run(p, 1, &in, 1, &a), t_run(p2, 1, &in, 1, &b), t_run(p3, 1, &in, 1, &c);
            cr_assert(t_bitwise_equal(a, b) && t_bitwise_equal(a, c), "%s, %lld elements: the loaded graph differs",
                      smelt_dtype_name(dts[t]), (long long)n);
            smelt_free(text), smelt_free(o2), smelt_free(o3);
            smelt_tensor_free(a), smelt_tensor_free(b), smelt_tensor_free(c), smelt_tensor_free(in), smelt_tensor_free(w);
            smelt_plan_free(p), smelt_plan_free(p2), smelt_plan_free(p3);
            smelt_graph_free(g), smelt_graph_free(g2), smelt_graph_free(g3);
            unlink(npy);
        }
    /* a missing .npy file, too few values: errors naming the line */
    smelt_graph *g = NULL;
    int n_out;
    smelt_node **o = NULL;
    t_write_file(path, "smelt-graph 1\n%0 = constant f32 [3] \"nowhere.npy\"\noutput %0\n");
    T_ERR(ctx, smelt_graph_load(ctx, path, &g, &n_out, &o), SMELT_ERR_IO, ":2: constant: ");
    T_ERR(ctx, smelt_graph_from_text(ctx, "smelt-graph 1\n%0 = constant f32 [3] [1, 2]\noutput %0\n", &g, &n_out, &o),
          SMELT_ERR_PARSE, "constant: 2 values, the shape holds 3");
    T_ERR(ctx, smelt_graph_from_text(ctx, "smelt-graph 1\n%0 = constant i32 [2] [1, 2, 3]\noutput %0\n", &g, &n_out, &o),
          SMELT_ERR_PARSE, "constant: more values than the shape's 2");
    unlink(path);
    rmdir(dir);
    smelt_ctx_free(ctx);
}

/* Constant folding of tensor constants (opt_level >= 1): operators over
 * constants only and views of them become constants, computed as the
 * kernels compute them (the bits of the unfused plan), up to 65536
 * elements; larger ones are left to the kernels. */
Test(constant, folding_through_operators_and_views)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 37);
    for (int big = 0; big < 2; big++) {
        int64_t n = big ? 300 : 30; /* 300 x 300 = 90000 results: beyond the limit */
        smelt_graph *g = t_graph(ctx);
        smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(n, n));
        smelt_tensor *wt = t_rand(ctx, &r, SMELT_F32, SHP(n, n)), *bt = t_rand(ctx, &r, SMELT_F32, SHP(n));
        smelt_node *w = smelt_constant(g, wt), *b = smelt_constant(g, bt);
        /* tanh(w.T * 2 + b)[::-1] folds; x + it is the only kernel */
        smelt_node *c = smelt_flip(g, smelt_unary(g, SMELT_OP_TANH, smelt_add(g, smelt_mul(g, smelt_transpose(g, w, NULL),
                                                                                         smelt_scalar(g, 2)), b)), 0);
        smelt_node *y = smelt_add(g, x, c);
        smelt_tensor *in = t_rand(ctx, &r, SMELT_F32, SHP(n, n)), *a = NULL, *z = NULL;
        smelt_plan *p0 = t_plan(ctx, g, 1, &y, 0), *p3 = t_plan(ctx, g, 1, &y, 3);
        t_run(p0, 1, &in, 1, &a);
        t_run(p3, 1, &in, 1, &z);
        cr_assert(t_bitwise_equal(a, z), "folded (%d) or not, the same bits", big);
        smelt_plan_stats s = t_stats(p3);
        /* one kernel either way: folded, x + a constant; not, the views moved onto w and b */
        cr_assert_eq(s.kernels, 1, "%s", smelt_plan_describe(p3));
        if (big)
            cr_assert_eq(s.folded, 0, "%s", smelt_plan_describe(p3));
        else
            cr_assert_geq(s.folded, 4, "%s", smelt_plan_describe(p3));
        smelt_tensor_free(a), smelt_tensor_free(z), smelt_tensor_free(in), smelt_tensor_free(wt), smelt_tensor_free(bt);
        smelt_plan_free(p0), smelt_plan_free(p3);
        smelt_graph_free(g);
    }
    smelt_ctx_free(ctx);
}
