/* Broadcasting (scalar, row, column, outer, 4-D, 8-D patterns), run-time
 * shapes that keep the graph's broadcast pattern, non-contiguous views
 * (transpose, stepped slice, broadcast_to) as inputs, and user-provided
 * strided outputs.  Every result is checked against the float64 reference. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common.h"

typedef smelt_node *(*build_fn)(smelt_graph *g, smelt_node *const *in);

typedef struct shape {
    int ndim;
    int64_t d[SMELT_MAX_DIMS];
} shape;

static smelt_graph *make_graph(smelt_ctx *ctx, int n, const smelt_dtype *dt, const shape *s,
                               build_fn fn, smelt_node **out)
{
    smelt_graph *g = t_graph(ctx);
    smelt_node *in[8];
    for (int i = 0; i < n; i++)
        in[i] = smelt_input(g, NULL, dt[i], s[i].ndim, s[i].d);
    *out = fn(g, in);
    cr_assert_not_null(*out, "building the graph: %s", smelt_graph_errmsg(g));
    return g;
}

/* Build fn over inputs of the given dtypes and shapes, run it at opt 0 and 3
 * on random inputs and compare with the reference; returns the opt-3 stats. */
enum { CHAIN, EXACT };

static smelt_plan_stats check(const char *label, int n, const smelt_dtype *dt, const shape *s,
                              build_fn fn, int exact)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_node *y;
    smelt_graph *g = make_graph(ctx, n, dt, s, fn, &y);
    t_tol tol = exact == EXACT ? T_EXACT : t_chain_tol(smelt_node_dtype(y));
    smelt_tensor *in[8];
    for (int i = 0; i < n; i++)
        in[i] = t_rand(ctx, &r, dt[i], s[i].ndim, s[i].d);
    t_check_plan(label, ctx, g, 1, &y, 0, n, in, tol);
    smelt_plan_stats st = t_check_plan(label, ctx, g, 1, &y, 3, n, in, tol);
    t_free_all(in, n);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
    return st;
}


/* a * b + sin(a) - b / 3 */
static smelt_node *mix2(smelt_graph *g, smelt_node *const *in)
{
    smelt_node *a = in[0], *b = in[1];
    smelt_node *t = smelt_add(g, smelt_mul(g, a, b), smelt_unary(g, SMELT_OP_SIN, a));
    return smelt_sub(g, t, smelt_div(g, b, smelt_scalar(g, 3)));
}

Test(broadcast, scalar_patterns)
{
    smelt_dtype f2[] = {SMELT_F32, SMELT_F32};
    shape s1[] = {{2, {5, 7}}, {0, {0}}};
    check("(5,7) with rank 0", 2, f2, s1, mix2, CHAIN);
    shape s2[] = {{2, {5, 7}}, {2, {1, 1}}};
    check("(5,7) with (1,1)", 2, f2, s2, mix2, CHAIN);
    shape s3[] = {{0, {0}}, {3, {2, 3, 4}}};
    check("rank 0 with (2,3,4)", 2, f2, s3, mix2, CHAIN);
}

static smelt_node *times_const(smelt_graph *g, smelt_node *const *in)
{
    smelt_node *k = smelt_const(g, -1.75, SMELT_F64);
    return smelt_add(g, smelt_mul(g, in[0], k), smelt_scalar(g, 2));
}

Test(broadcast, constants)
{
    smelt_dtype dt[] = {SMELT_F64};
    shape s[] = {{3, {4, 1, 6}}};
    check("x * const + scalar", 1, dt, s, times_const, EXACT);
    smelt_dtype di[] = {SMELT_I32};
    check("i32 * f64 const", 1, di, s, times_const, EXACT);
}

Test(broadcast, row_column_outer)
{
    smelt_dtype f2[] = {SMELT_F32, SMELT_F32}, d2[] = {SMELT_F64, SMELT_I32};
    shape row[] = {{2, {5, 7}}, {1, {7}}};
    shape row1[] = {{2, {5, 7}}, {2, {1, 7}}};
    shape col[] = {{2, {5, 7}}, {2, {5, 1}}};
    shape outer[] = {{2, {5, 1}}, {2, {1, 7}}};
    shape outer3[] = {{3, {1, 33, 1}}, {3, {65, 1, 7}}};
    check("row (7,)", 2, f2, row, mix2, CHAIN);
    check("row (1,7)", 2, f2, row1, mix2, CHAIN);
    check("column (5,1)", 2, f2, col, mix2, CHAIN);
    check("outer (5,1) x (1,7)", 2, f2, outer, mix2, CHAIN);
    check("outer (1,33,1) x (65,1,7)", 2, d2, outer3, mix2, CHAIN);
    check("column, f64 with i32", 2, d2, col, mix2, CHAIN);
}

/* where(a > c, a * b, exp(c) - d) over 4-D operands */
static smelt_node *mix4(smelt_graph *g, smelt_node *const *in)
{
    smelt_node *a = in[0], *b = in[1], *c = in[2], *d = in[3];
    smelt_node *t = smelt_sub(g, smelt_unary(g, SMELT_OP_EXP, c), d);
    return smelt_where(g, smelt_binary(g, SMELT_OP_GT, a, c), smelt_mul(g, a, b), t);
}

Test(broadcast, four_d)
{
    smelt_dtype f4[] = {SMELT_F32, SMELT_F32, SMELT_F32, SMELT_F32};
    shape s[] = {{4, {2, 3, 4, 5}}, {3, {3, 1, 5}}, {4, {2, 1, 4, 1}}, {1, {5}}};
    smelt_plan_stats st = check("4-D", 4, f4, s, mix4, CHAIN);
    cr_assert_geq(st.kernels, 2, "exp(c) - d has another shape than the result");
    shape s2[] = {{4, {1, 3, 1, 5}}, {4, {2, 1, 4, 1}}, {4, {2, 3, 4, 5}}, {2, {4, 5}}};
    check("4-D, the big operand last", 4, f4, s2, mix4, CHAIN);
    smelt_dtype mixed[] = {SMELT_I64, SMELT_U8, SMELT_F64, SMELT_BOOL};
    check("4-D, mixed dtypes", 4, mixed, s, mix4, CHAIN);
}

Test(broadcast, eight_d)
{
    smelt_dtype f2[] = {SMELT_F64, SMELT_F64};
    shape s[] = {{8, {2, 1, 3, 2, 1, 2, 3, 2}}, {8, {1, 2, 3, 1, 2, 2, 1, 2}}};
    check("8-D", 2, f2, s, mix2, CHAIN);
    shape s2[] = {{8, {2, 2, 2, 2, 2, 2, 2, 2}}, {3, {2, 1, 2}}};
    check("8-D with 3-D", 2, f2, s2, mix2, CHAIN);
}

static smelt_node *col_first(smelt_graph *g, smelt_node *const *in)
{
    /* exp(col) is computed at (5,1) and broadcast into the (5,7) cluster */
    smelt_node *e = smelt_unary(g, SMELT_OP_EXP, in[1]);
    return smelt_mul(g, in[0], e);
}

Test(broadcast, small_intermediate)
{
    smelt_dtype f2[] = {SMELT_F32, SMELT_F32};
    shape s[] = {{2, {5, 7}}, {2, {5, 1}}};
    smelt_plan_stats st = check("exp(col) * x", 2, f2, s, col_first, CHAIN);
    cr_assert_eq(st.kernels, 2, "one kernel per iteration shape, got %d", st.kernels);
}

static smelt_node *explicit_bcast(smelt_graph *g, smelt_node *const *in)
{
    smelt_node *b = smelt_broadcast_to(g, in[1], SHP(5, 7));
    return smelt_add(g, smelt_unary(g, SMELT_OP_NEG, b), in[0]);
}

Test(broadcast, broadcast_to_node)
{
    smelt_dtype f2[] = {SMELT_F32, SMELT_F32};
    shape s[] = {{2, {5, 7}}, {1, {7}}};
    check("broadcast_to node", 2, f2, s, explicit_bcast, EXACT);
    shape s1[] = {{1, {7}}, {2, {1, 7}}};
    check("broadcast_to node wider than the other operand", 2, f2, s1, explicit_bcast, EXACT);
}

Test(broadcast, zero_size)
{
    smelt_dtype f2[] = {SMELT_F32, SMELT_F32};
    shape s[] = {{2, {0, 7}}, {2, {1, 7}}};
    check("(0,7) with (1,7)", 2, f2, s, mix2, CHAIN);
}

/* ---- run-time shapes with the graph's broadcast pattern ------------------------------- */

Test(broadcast, new_sizes_same_pattern)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_dtype dt[] = {SMELT_F32, SMELT_F32};
    shape s[] = {{2, {5, 7}}, {2, {5, 1}}};
    smelt_node *y;
    smelt_graph *g = make_graph(ctx, 2, dt, s, mix2, &y);
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    int compiles = t_stats(p).compiles;
    static const shape sizes[][2] = {
        {{2, {9, 3}}, {2, {9, 1}}},
        {{2, {1000, 33}}, {2, {1000, 1}}},
        {{2, {2, 2}}, {2, {2, 1}}},
    };
    for (int k = 0; k < NELEMS(sizes); k++) {
        smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F32, sizes[k][0].ndim, sizes[k][0].d),
                               t_rand(ctx, &r, SMELT_F32, sizes[k][1].ndim, sizes[k][1].d)};
        smelt_tensor *got = NULL, *ref = NULL;
        t_run(p, 2, in, 1, &got);
        cr_assert_eq(smelt_tensor_shape(got)[0], sizes[k][0].d[0]);
        cr_assert_eq(smelt_tensor_shape(got)[1], sizes[k][0].d[1]);
        /* the reference needs a graph of exactly these shapes */
        smelt_node *y2;
        smelt_graph *g2 = make_graph(ctx, 2, dt, sizes[k], mix2, &y2);
        t_reference(ctx, g2, 1, &y2, 2, in, &ref);
        t_expect_match("new sizes", got, ref, t_chain_tol(SMELT_F32));
        smelt_tensor_free(got);
        smelt_tensor_free(ref);
        t_free_all(in, 2);
        smelt_graph_free(g2);
    }
    cr_assert_eq(t_stats(p).compiles, compiles, "new sizes with the same layout recompiled");
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* ---- non-contiguous inputs -------------------------------------------------------------- */

static smelt_node *three(smelt_graph *g, smelt_node *const *in)
{
    smelt_node *t = smelt_ternary(g, SMELT_OP_FMA, in[0], in[1], in[2]);
    return smelt_add(g, smelt_unary(g, SMELT_OP_TANH, t), in[0]);
}

Test(broadcast, view_inputs)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_dtype dt[] = {SMELT_F64, SMELT_F64, SMELT_F64};
    shape s[] = {{2, {6, 9}}, {2, {6, 9}}, {2, {6, 9}}};
    smelt_node *y;
    smelt_graph *g = make_graph(ctx, 3, dt, s, three, &y);
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);

    /* transpose of (9, 6); every other column of (6, 18); a (9,) row broadcast
     * to (6, 9) with stride 0; and a transposed slice of a transpose */
    smelt_tensor *base_t = t_rand(ctx, &r, SMELT_F64, SHP(9, 6));
    smelt_tensor *base_s = t_rand(ctx, &r, SMELT_F64, SHP(6, 18));
    smelt_tensor *base_b = t_rand(ctx, &r, SMELT_F64, SHP(9));
    smelt_tensor *base_n = t_rand(ctx, &r, SMELT_F64, SHP(20, 7));
    smelt_tensor *tr = NULL, *sl = NULL, *bc = NULL, *n1 = NULL, *n2 = NULL, *n3 = NULL;
    T_OK(ctx, smelt_tensor_transpose(base_t, (const int[]){1, 0}, &tr));
    T_OK(ctx, smelt_tensor_slice(base_s, 1, 0, 18, 2, &sl));
    T_OK(ctx, smelt_tensor_broadcast_to(base_b, SHP(6, 9), &bc));
    T_OK(ctx, smelt_tensor_transpose(base_n, (const int[]){1, 0}, &n1)); /* (7, 20) */
    T_OK(ctx, smelt_tensor_slice(n1, 1, 1, 19, 2, &n2));                  /* (7, 9) */
    T_OK(ctx, smelt_tensor_slice(n2, 0, 1, 7, 1, &n3));                   /* (6, 9) */
    smelt_tensor *views[] = {tr, sl, bc, n3};
    for (int k = 0; k < 4; k++) {
        cr_assert_eq(smelt_tensor_shape(views[k])[0], 6);
        cr_assert_eq(smelt_tensor_shape(views[k])[1], 9);
        cr_assert_not(smelt_tensor_is_contiguous(views[k]));
    }
    static const int combos[][3] = {{0, 1, 2}, {2, 0, 1}, {1, 2, 3}, {3, 3, 0}, {2, 2, 2}};
    for (int c = 0; c < NELEMS(combos); c++) {
        smelt_tensor *in[3] = {views[combos[c][0]], views[combos[c][1]], views[combos[c][2]]};
        smelt_tensor *got = NULL, *ref = NULL, *cin[3] = {0}, *got_c = NULL;
        t_run(p, 3, in, 1, &got);
        t_reference(ctx, g, 1, &y, 3, in, &ref);
        char label[64];
        snprintf(label, sizeof label, "view inputs %d %d %d", combos[c][0], combos[c][1], combos[c][2]);
        t_expect_match(label, got, ref, t_chain_tol(SMELT_F64));
        /* the same values as contiguous copies: the same results (up to the
         * last bit: block kernels may vectorise contiguous runs differently) */
        for (int k = 0; k < 3; k++)
            T_OK(ctx, smelt_tensor_contiguous(in[k], &cin[k]));
        t_run(p, 3, cin, 1, &got_c);
        t_expect_match(label, got_c, ref, t_chain_tol(SMELT_F64));
        smelt_tensor_free(got);
        smelt_tensor_free(got_c);
        smelt_tensor_free(ref);
        t_free_all(cin, 3);
    }
    smelt_tensor *all[] = {base_t, base_s, base_b, base_n, tr, sl, bc, n1, n2, n3};
    t_free_all(all, NELEMS(all));
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(broadcast, broadcast_view_into_a_broadcast_input)
{
    /* a graph input of shape (6, 1) fed with a (6, 1) slice of a (6, 5) tensor
     * (stride 5 on the first axis) */
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_dtype dt[] = {SMELT_F32, SMELT_F32};
    shape s[] = {{2, {6, 4}}, {2, {6, 1}}};
    smelt_node *y;
    smelt_graph *g = make_graph(ctx, 2, dt, s, mix2, &y);
    smelt_tensor *a = t_rand(ctx, &r, SMELT_F32, SHP(6, 4));
    smelt_tensor *base = t_rand(ctx, &r, SMELT_F32, SHP(6, 5)), *col = NULL;
    T_OK(ctx, smelt_tensor_slice(base, 1, 3, 4, 1, &col));
    smelt_tensor *in[2] = {a, col};
    t_check_plan("column slice", ctx, g, 1, &y, 3, 2, in, t_chain_tol(SMELT_F32));
    t_check_plan("column slice", ctx, g, 1, &y, 0, 2, in, t_chain_tol(SMELT_F32));
    smelt_tensor *all[] = {a, base, col};
    t_free_all(all, 3);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* ---- user-provided (strided) outputs ---------------------------------------------------- */

static smelt_node *two_outputs(smelt_graph *g, smelt_node *const *in)
{
    return smelt_mul(g, smelt_add(g, in[0], in[1]), in[1]);
}

Test(broadcast, strided_outputs)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_dtype dt[] = {SMELT_F32, SMELT_F32};
    shape s[] = {{2, {5, 7}}, {1, {7}}};
    smelt_node *y;
    smelt_graph *g = make_graph(ctx, 2, dt, s, two_outputs, &y);
    smelt_node *e = smelt_unary(g, SMELT_OP_EXP, y);
    smelt_node *outs[] = {y, e};
    smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F32, SHP(5, 7)), t_rand(ctx, &r, SMELT_F32, SHP(7))};
    smelt_tensor *ref[2] = {0};
    t_reference(ctx, g, 2, outs, 2, in, ref);

    for (int opt = 0; opt <= 3; opt += 3) {
        smelt_plan *p = t_plan(ctx, g, 2, outs, opt);
        /* out 0: a transposed (7, 5) buffer; out 1: every other column of (5, 14) */
        smelt_tensor *b0 = t_tensor(ctx, SMELT_F32, SHP(7, 5)), *b1 = t_tensor(ctx, SMELT_F32, SHP(5, 14));
        for (int i = 0; i < 35; i++)
            t_set(b0, i, -12345.0);
        for (int i = 0; i < 70; i++)
            t_set(b1, i, -12345.0);
        smelt_tensor *o[2] = {NULL, NULL};
        T_OK(ctx, smelt_tensor_transpose(b0, (const int[]){1, 0}, &o[0]));
        T_OK(ctx, smelt_tensor_slice(b1, 1, 1, 14, 2, &o[1]));
        smelt_tensor *keep[2] = {o[0], o[1]};
        t_run(p, 2, in, 2, o);
        cr_assert_eq(o[0], keep[0], "a given output tensor is written in place, not replaced");
        cr_assert_eq(o[1], keep[1]);
        t_expect_match("transposed output", o[0], ref[0], t_chain_tol(SMELT_F32));
        t_expect_match("stepped-slice output", o[1], ref[1], t_chain_tol(SMELT_F32));
        for (int i = 0; i < 70; i += 2) /* the columns between were not touched */
            cr_assert_eq(smelt_tensor_get(b1, i), -12345.0, "element %d of the base written", i);
        /* one given output, one allocated */
        smelt_tensor *o2[2] = {keep[0], NULL};
        t_run(p, 2, in, 2, o2);
        cr_assert(smelt_tensor_is_contiguous(o2[1]));
        t_expect_match("allocated output", o2[1], ref[1], t_chain_tol(SMELT_F32));
        smelt_tensor_free(o2[1]);
        smelt_tensor *all[] = {b0, b1, o[0], o[1]};
        t_free_all(all, 4);
        smelt_plan_free(p);
    }
    t_free_all(ref, 2);
    t_free_all(in, 2);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(broadcast, wrapped_strided_output)
{
    /* caller-owned memory with its own strides as an output */
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, NULL, SMELT_I32, SHP(4, 3));
    smelt_node *y = smelt_mul(g, smelt_add(g, x, smelt_scalar(g, 1)), x);
    smelt_tensor *in = t_rand(ctx, &r, SMELT_I32, SHP(4, 3));
    int32_t mem[4 * 10];
    for (int i = 0; i < 40; i++)
        mem[i] = 777;
    smelt_tensor *out = NULL;
    T_OK(ctx, smelt_tensor_wrap(ctx, SMELT_I32, SHP(4, 3), (const int64_t[]){10, 3}, mem, &out));
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    t_run(p, 1, &in, 1, &out);
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 10; j++) {
            int32_t e = 777;
            if (j % 3 == 0 && j < 9) {
                int32_t v = ((int32_t *)smelt_tensor_data(in))[i * 3 + j / 3];
                e = (v + 1) * v;
            }
            cr_assert_eq(mem[i * 10 + j], e, "mem[%d][%d] = %d, expected %d", i, j, mem[i * 10 + j], e);
        }
    smelt_tensor_free(out);
    smelt_tensor_free(in);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}
