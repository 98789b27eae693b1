/* concat and pad: read in pieces (a kernel run once per region of its
 * iteration space), every dtype and rank against NumPy's semantics spelled
 * out by hand and the float64 reference; more parts than one value reads;
 * run-time shapes; strided parts; no write in place over a part; errors. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

/* np.concatenate((a, b, c), axis) at flat index i of the result (shape s). */
static double concat_at(smelt_tensor *const *parts, int np, int ax, int rank, const int64_t *s, int64_t i)
{
    int64_t idx[4], rem = i;
    for (int d = rank - 1; d >= 0; d--)
        idx[d] = rem % s[d], rem /= s[d];
    int k = 0;
    while (idx[ax] >= smelt_tensor_shape(parts[k])[ax])
        idx[ax] -= smelt_tensor_shape(parts[k++])[ax];
    const int64_t *ps = smelt_tensor_shape(parts[k]);
    int64_t o = 0;
    for (int d = 0; d < rank; d++)
        o = o * ps[d] + idx[d];
    cr_assert_lt(k, np);
    return smelt_tensor_get(parts[k], o);
}

/* np.pad(a, w, constant_values=v) at flat index i of the result (shape s). */
static double pad_at(const smelt_tensor *a, const int64_t *w, double v, int rank, const int64_t *s, int64_t i)
{
    int64_t rem = i, o = 0;
    const int64_t *as = smelt_tensor_shape(a);
    for (int d = rank - 1, m = 1; d >= 0; m *= (int)as[d], d--) {
        int64_t idx = rem % s[d] - w[2 * d];
        rem /= s[d];
        if (idx < 0 || idx >= as[d])
            return v;
        o += idx * m;
    }
    return smelt_tensor_get(a, o);
}

Test(concat, every_dtype_and_rank)
{
    smelt_ctx *ctx = t_ctx();
    const smelt_dtype dts[] = {SMELT_F32, SMELT_F64, SMELT_F16, SMELT_BF16, SMELT_I32, SMELT_I64, SMELT_U8, SMELT_BOOL};
    trng r;
    trng_init(&r, 31);
    for (int t = 0; t < NELEMS(dts); t++)
        for (int rank = 1; rank <= 4; rank++) {
            int ax = (int)trng_range(&r, 0, rank - 1);
            int64_t sh[3][4], w[8], cs[4], ps[4];
            for (int d = 0; d < rank; d++)
                sh[0][d] = sh[1][d] = sh[2][d] = trng_range(&r, 1, 5);
            for (int k = 0; k < 3; k++) /* (a part of size 0 now and then) */
                sh[k][ax] = trng_range(&r, k == 1 ? 0 : 1, 4);
            for (int d = 0; d < 2 * rank; d++)
                w[d] = trng_range(&r, 0, 2);
            double v = dts[t] == SMELT_BOOL ? 1 : dts[t] == SMELT_U8 ? 7 : t_is_float(dts[t]) ? -0.75 : -3;
            smelt_graph *g = t_graph(ctx);
            smelt_node *x[3];
            for (int k = 0; k < 3; k++)
                x[k] = smelt_input(g, NULL, dts[t], rank, sh[k]);
            smelt_node *c = smelt_concat(g, 3, x, ax - rank), *pd = smelt_pad(g, x[0], w, v);
            smelt_node *outs[] = {c, pd, smelt_mul(g, c, c), smelt_flip(g, smelt_pad(g, c, w, v), ax),
                                  smelt_transpose(g, smelt_concat(g, 2, (smelt_node *[]){pd, pd}, 0), NULL)};
            int n = NELEMS(outs);
            T_OK(ctx, smelt_graph_status(g));
            memcpy(cs, smelt_node_shape(c), sizeof cs);
            memcpy(ps, smelt_node_shape(pd), sizeof ps);
            smelt_tensor *in[3], *ref[NELEMS(outs)];
            for (int k = 0; k < 3; k++)
                in[k] = t_rand(ctx, &r, dts[t], rank, sh[k]);
            t_reference(ctx, g, n, outs, 3, in, ref);
            for (int opt = 0; opt <= 3; opt += 3) {
                smelt_tensor *got[NELEMS(outs)] = {0};
                smelt_plan *p = t_plan(ctx, g, n, outs, opt);
                t_run(p, 3, in, n, got);
                for (int o = 0; o < n; o++)
                    t_expect_match(o ? "pad and views" : "concat", got[o], ref[o], T_EXACT);
                for (int64_t i = 0; i < smelt_tensor_numel(got[0]); i++)
                    cr_assert_eq(smelt_tensor_get(got[0], i), concat_at(in, 3, ax, rank, cs, i),
                                 "%s rank %d axis %d: concat at %lld", smelt_dtype_name(dts[t]), rank, ax,
                                 (long long)i);
                for (int64_t i = 0; i < smelt_tensor_numel(got[1]); i++)
                    cr_assert_eq(smelt_tensor_get(got[1], i), pad_at(in[0], w, v, rank, ps, i),
                                 "%s rank %d: pad at %lld", smelt_dtype_name(dts[t]), rank, (long long)i);
                if (opt == 3)
                    cr_assert_eq(t_stats(p).kernels, n, "one kernel per output:\n%s", smelt_plan_describe(p));
                t_free_all(got, n);
                smelt_plan_free(p);
            }
            t_free_all(ref, n), t_free_all(in, 3);
            smelt_graph_free(g);
        }
    smelt_ctx_free(ctx);
}

/* More than SMELT_MAX_PARTS parts: the first ones are copied into one
 * array; the values are NumPy's. */
Test(concat, many_parts)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x[11];
    smelt_tensor *in[11];
    trng r;
    trng_init(&r, 32);
    for (int k = 0; k < 11; k++) {
        x[k] = smelt_input(g, NULL, SMELT_I64, SHP(3, k % 3 + 1));
        in[k] = t_rand(ctx, &r, SMELT_I64, SHP(3, k % 3 + 1));
    }
    smelt_node *c = smelt_concat(g, 11, x, 1), *y = smelt_add(g, c, smelt_scalar(g, 1));
    T_OK(ctx, smelt_graph_status(g));
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    smelt_tensor *got = NULL;
    t_run(p, 11, in, 1, &got);
    cr_assert_eq(smelt_tensor_shape(got)[1], 21);
    for (int64_t i = 0; i < 63; i++)
        cr_assert_eq(smelt_tensor_get(got, i), concat_at(in, 11, 1, 2, (int64_t[]){3, 21}, i) + 1, "at %lld",
                     (long long)i);
    smelt_plan_stats s = t_stats(p);
    cr_assert_eq(s.copies, 1, "%s", smelt_plan_describe(p));
    cr_assert_eq(s.kernels, 2, "%s", smelt_plan_describe(p));
    smelt_tensor_free(got), t_free_all(in, 11);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* Sizes follow the inputs at run time; parts that no longer fit are an
 * error that names them. */
Test(concat, run_time_shapes)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(3, 4)), *y = smelt_input(g, "y", SMELT_F32, SHP(2, 4));
    smelt_node *outs[] = {smelt_add(g, smelt_concat(g, 2, (smelt_node *[]){x, y}, 0), smelt_scalar(g, 1)),
                          smelt_mul(g, smelt_pad(g, x, (int64_t[]){1, 0, 0, 2}, 5), smelt_scalar(g, 2))};
    smelt_plan *p = t_plan(ctx, g, 2, outs, 3);
    trng r;
    trng_init(&r, 33);
    smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F32, SHP(5, 4)), t_rand(ctx, &r, SMELT_F32, SHP(3, 4))}, *got[2] = {0};
    t_run(p, 2, in, 2, got);
    cr_assert_eq(smelt_tensor_shape(got[0])[0], 8);
    cr_assert_eq(smelt_tensor_shape(got[1])[0], 6);
    cr_assert_eq(smelt_tensor_shape(got[1])[1], 6);
    for (int64_t i = 0; i < 32; i++)
        cr_assert_eq(smelt_tensor_get(got[0], i), (double)((float)concat_at(in, 2, 0, 2, (int64_t[]){8, 4}, i) + 1.0f));
    for (int64_t i = 0; i < 36; i++)
        cr_assert_eq(smelt_tensor_get(got[1], i),
                     (double)((float)pad_at(in[0], (int64_t[]){1, 0, 0, 2}, 5, 2, (int64_t[]){6, 6}, i) * 2.0f));
    t_free_all(got, 2), t_free_all(in, 2);
    in[0] = t_rand(ctx, &r, SMELT_F32, SHP(3, 4));
    in[1] = t_rand(ctx, &r, SMELT_F32, SHP(2, 5));
    T_ERR(ctx, smelt_plan_run(p, 2, in, 2, got), SMELT_ERR_SHAPE,
          "concat: at the run-time shapes, cannot concatenate (3, 4) and (2, 5) along axis 0");
    t_free_all(in, 2);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* A part that is a strided input (transposed, stepped) is read where it
 * lies, in its piece. */
Test(concat, strided_parts)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F64, SHP(6, 4)), *y = smelt_input(g, "y", SMELT_F64, SHP(2, 4));
    smelt_node *out = smelt_sub(g, smelt_concat(g, 2, (smelt_node *[]){smelt_pad(g, x, (int64_t[]){0, 0, 1, 1}, 0),
                                                                       smelt_pad(g, y, (int64_t[]){0, 0, 1, 1}, 2)},
                                                0),
                                smelt_scalar(g, 0.5));
    trng r;
    trng_init(&r, 34);
    smelt_tensor *base = t_rand(ctx, &r, SMELT_F64, SHP(4, 12)), *v = NULL, *tr = NULL, *dense = NULL;
    T_OK(ctx, smelt_tensor_slice(base, 1, 0, 12, 2, &v)); /* (4, 6), stepped */
    T_OK(ctx, smelt_tensor_transpose(v, (int[]){1, 0}, &tr)); /* (6, 4), strided both ways */
    T_OK(ctx, smelt_tensor_contiguous(tr, &dense));
    smelt_tensor *yin = t_rand(ctx, &r, SMELT_F64, SHP(2, 4)), *ref, *got = NULL;
    t_reference(ctx, g, 1, &out, 2, (smelt_tensor *[]){dense, yin}, &ref);
    for (int opt = 0; opt <= 3; opt += 3) {
        smelt_plan *p = t_plan(ctx, g, 1, &out, opt);
        t_run(p, 2, (smelt_tensor *[]){tr, yin}, 1, &got);
        t_expect_match("strided part", got, ref, T_EXACT);
        smelt_tensor_free(got);
        got = NULL;
        smelt_plan_free(p);
    }
    smelt_tensor_free(ref), smelt_tensor_free(yin);
    smelt_tensor_free(base), smelt_tensor_free(v), smelt_tensor_free(tr), smelt_tensor_free(dense);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* A kernel that reads a value and a concat of its halves, swapped, never
 * writes over the value in place (memory plans at opt_level 2 and 3). */
Test(concat, no_in_place_over_a_part)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(64, 32));
    smelt_node *e = smelt_unary(g, SMELT_OP_BARRIER, smelt_unary(g, SMELT_OP_EXP, x));
    smelt_node *sw = smelt_concat(g, 2, (smelt_node *[]){smelt_slice(g, e, 0, 32, SMELT_NONE, 1),
                                                         smelt_slice(g, e, 0, 0, 32, 1)}, 0);
    smelt_node *y = smelt_unary(g, SMELT_OP_TANH, smelt_sub(g, sw, e));
    trng r;
    trng_init(&r, 35);
    smelt_tensor *in = t_rand(ctx, &r, SMELT_F32, SHP(64, 32)), *ref, *got = NULL;
    t_reference(ctx, g, 1, &y, 1, &in, &ref);
    for (int opt = 2; opt <= 3; opt++) {
        smelt_plan *p = t_plan(ctx, g, 1, &y, opt);
        t_run(p, 1, &in, 1, &got);
        t_expect_match("concat of swapped halves", got, ref, (t_tol){.ulps = 8, .atol = 1e-6});
        smelt_tensor_free(got);
        got = NULL;
        smelt_plan_free(p);
    }
    smelt_tensor_free(in), smelt_tensor_free(ref);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* Tensor constants concatenated and padded fold into one constant. */
Test(concat, folds_constants)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    trng r;
    trng_init(&r, 36);
    smelt_tensor *a = t_rand(ctx, &r, SMELT_I32, SHP(2, 3)), *b = t_rand(ctx, &r, SMELT_I32, SHP(2, 2));
    smelt_node *x = smelt_input(g, "x", SMELT_I32, SHP(2, 7));
    smelt_node *c = smelt_pad(g, smelt_concat(g, 2, (smelt_node *[]){smelt_constant(g, a), smelt_constant(g, b)}, 1),
                              (int64_t[]){0, 0, 1, 1}, -4);
    smelt_node *y = smelt_add(g, x, c);
    smelt_tensor *in = t_rand(ctx, &r, SMELT_I32, SHP(2, 7)), *got = NULL, *ref;
    t_reference(ctx, g, 1, &y, 1, &in, &ref);
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    t_run(p, 1, &in, 1, &got);
    t_expect_match("x + pad(concat(constants))", got, ref, T_EXACT);
    cr_assert_geq(t_stats(p).folded, 2, "%s", smelt_plan_describe(p));
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 7; j++) {
            double cv = j == 0 || j == 6 ? -4 : j <= 3 ? smelt_tensor_get(a, i * 3 + j - 1) : smelt_tensor_get(b, i * 2 + j - 4);
            cr_assert_eq(smelt_tensor_get(got, i * 7 + j), (double)(int32_t)((int64_t)smelt_tensor_get(in, i * 7 + j) + (int64_t)cv));
        }
    smelt_tensor_free(got), smelt_tensor_free(ref), smelt_tensor_free(in), smelt_tensor_free(a), smelt_tensor_free(b);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* Bad parts, axes, widths and values are sticky errors that name the fault. */
Test(concat, builder_errors)
{
    smelt_ctx *ctx = t_ctx();
    struct {
        int kind;
        int status;
        const char *msg;
    } cases[] = {
        {0, SMELT_ERR_INVALID_ARG, "concat: no arrays to concatenate"},
        {1, SMELT_ERR_INVALID_ARG, "concat: parts is NULL"},
        {2, SMELT_ERR_SHAPE, "concat: part 1: cannot concatenate (2, 3) and (3,) along axis 0"},
        {3, SMELT_ERR_SHAPE, "concat: part 1: cannot concatenate (2, 3) and (2, 4) along axis 0"},
        {4, SMELT_ERR_INVALID_ARG, "concat: axis 2 is out of bounds for an array of rank 2"},
        {5, SMELT_ERR_SHAPE, "concat: zero-dimensional arrays cannot be concatenated"},
        {6, SMELT_ERR_INVALID_ARG, "concat: operand 1 is NULL"},
        {7, SMELT_ERR_INVALID_ARG, "pad: axis 1: the widths (0, -2) must be 0 or more"},
        {8, SMELT_ERR_INVALID_ARG, "pad: the value 300 does not fit in u8"},
        {9, SMELT_ERR_INVALID_ARG, "pad: the value nan does not fit in i64"},
        {10, SMELT_ERR_INVALID_ARG, "pad: widths is NULL"},
    };
    for (int c = 0; c < NELEMS(cases); c++) {
        smelt_graph *g = t_graph(ctx);
        smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(2, 3)), *y = NULL;
        smelt_node *u = smelt_input(g, "u", SMELT_U8, SHP(2, 3)), *i = smelt_input(g, "i", SMELT_I64, SHP(2));
        switch (cases[c].kind) {
        case 0: y = smelt_concat(g, 0, &x, 0); break;
        case 1: y = smelt_concat(g, 2, NULL, 0); break;
        case 2: y = smelt_concat(g, 2, (smelt_node *[]){x, smelt_input(g, NULL, SMELT_F32, SHP(3))}, 0); break;
        case 3: y = smelt_concat(g, 2, (smelt_node *[]){x, smelt_input(g, NULL, SMELT_F32, SHP(2, 4))}, 0); break;
        case 4: y = smelt_concat(g, 2, (smelt_node *[]){x, x}, 2); break;
        case 5: y = smelt_concat(g, 2, (smelt_node *[]){smelt_scalar(g, 1), smelt_scalar(g, 2)}, 0); break;
        case 6: y = smelt_concat(g, 2, (smelt_node *[]){x, NULL}, 0); break;
        case 7: y = smelt_pad(g, x, (int64_t[]){1, 1, 0, -2}, 0); break;
        case 8: y = smelt_pad(g, u, (int64_t[]){1, 1, 0, 0}, 300); break;
        case 9: y = smelt_pad(g, i, (int64_t[]){1, 1}, NAN); break;
        default: y = smelt_pad(g, x, NULL, 0); break;
        }
        cr_assert_null(y, "case %d accepted", c);
        cr_assert_eq(smelt_graph_status(g), cases[c].status, "case %d: status %d: %s", c, smelt_graph_status(g),
                     smelt_graph_errmsg(g));
        cr_assert(t_contains(smelt_graph_errmsg(g), cases[c].msg), "case %d: '%s' lacks '%s'", c,
                  smelt_graph_errmsg(g), cases[c].msg);
        smelt_graph_free(g);
    }
    /* a concat of one array is that array; a pad of width 0 too; promotion as NumPy's */
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(2, 3)), *i = smelt_input(g, "i", SMELT_I32, SHP(1, 3));
    cr_assert_eq(smelt_concat(g, 1, &x, -1), x);
    cr_assert_eq(smelt_pad(g, x, (int64_t[]){0, 0, 0, 0}, 1), x);
    cr_assert_eq(smelt_node_dtype(smelt_concat(g, 2, (smelt_node *[]){x, i}, 0)), SMELT_F64);
    cr_assert_eq(smelt_node_dtype(smelt_concat(g, 2, (smelt_node *[]){i, i}, 0)), SMELT_I32);
    smelt_graph_free(g);
    cr_assert_null(smelt_concat(NULL, 1, NULL, 0));
    cr_assert_null(smelt_pad(NULL, NULL, NULL, 0));
    smelt_ctx_free(ctx);
}
