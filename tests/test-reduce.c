/* Reductions (sum, prod, mean, max, min, argmax, argmin, any, all): the
 * builder's dtypes, shapes and errors; every reduction on every dtype over
 * axis sets of ranks 0 to 4, with and without keepdims, against the float64
 * reference on fresh random data; special values; empty axes; one result
 * for every tier, thread count, layout and optimisation level (smelt's one
 * reduction order, docs/numerics.md); constant folding and CSE. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h" /* criterion.h first: parameterized.h alone leaves Test() undefined */

#include <criterion/parameterized.h>

static const smelt_op red_ops[] = {SMELT_OP_SUM,    SMELT_OP_PROD,   SMELT_OP_MEAN, SMELT_OP_MAX, SMELT_OP_MIN,
                                   SMELT_OP_ARGMAX, SMELT_OP_ARGMIN, SMELT_OP_ANY,  SMELT_OP_ALL};
static const smelt_dtype all_dts[] = {SMELT_F32, SMELT_F64, SMELT_F16, SMELT_BF16,
                                      SMELT_I32, SMELT_I64, SMELT_U8,  SMELT_BOOL};

static bool is_arg(smelt_op op) { return op == SMELT_OP_ARGMAX || op == SMELT_OP_ARGMIN; }

/* NumPy's result dtypes (NumPy 2 on Linux), smelt's u8 sums: i64 (below) */
static smelt_dtype numpy_result(smelt_op op, smelt_dtype dt)
{
    switch (op) {
    case SMELT_OP_SUM:
    case SMELT_OP_PROD: return t_is_float(dt) ? dt : SMELT_I64;
    case SMELT_OP_MEAN: return t_is_float(dt) ? dt : SMELT_F64;
    case SMELT_OP_ARGMAX:
    case SMELT_OP_ARGMIN: return SMELT_I64;
    case SMELT_OP_ANY:
    case SMELT_OP_ALL: return SMELT_BOOL;
    default: return dt;
    }
}

/* ---- builder ------------------------------------------------------------ */

Test(builder, dtypes_and_shapes)
{
    smelt_ctx *ctx = t_ctx();
    for (int o = 0; o < NELEMS(red_ops); o++)
        for (int t = 0; t < NELEMS(all_dts); t++) {
            smelt_graph *g = t_graph(ctx);
            smelt_node *a = smelt_input(g, "a", all_dts[t], SHP(2, 3, 4, 5));
            int ax = -2, all_axes[] = {0, 2};
            smelt_node *r1 = smelt_reduce(g, red_ops[o], a, 1, &ax, 0);
            smelt_node *r2 = smelt_reduce(g, red_ops[o], a, 1, &ax, 1);
            smelt_node *r3 = smelt_reduce(g, red_ops[o], a, 0, NULL, 0);
            smelt_node *r4 = smelt_reduce(g, red_ops[o], a, 0, NULL, 1);
            smelt_node *r5 = is_arg(red_ops[o]) ? r1 : smelt_reduce(g, red_ops[o], a, 2, all_axes, 0);
            T_OK(ctx, smelt_graph_status(g));
            smelt_dtype want = numpy_result(red_ops[o], all_dts[t]);
            const char *label = smelt_op_name(red_ops[o]);
            cr_assert_eq(smelt_node_dtype(r1), want, "%s of %s gives %s", label, smelt_dtype_name(all_dts[t]),
                         smelt_dtype_name(smelt_node_dtype(r1)));
            cr_assert_eq(smelt_node_op(r1), red_ops[o]);
            cr_assert_eq(smelt_node_ndim(r1), 3);
            cr_assert(!memcmp(smelt_node_shape(r1), (int64_t[]){2, 3, 5}, 3 * sizeof(int64_t)));
            cr_assert_eq(smelt_node_ndim(r2), 4);
            cr_assert(!memcmp(smelt_node_shape(r2), (int64_t[]){2, 3, 1, 5}, 4 * sizeof(int64_t)));
            cr_assert_eq(smelt_node_ndim(r3), 0);
            cr_assert_eq(smelt_node_ndim(r4), 4);
            cr_assert(!memcmp(smelt_node_shape(r4), (int64_t[]){1, 1, 1, 1}, 4 * sizeof(int64_t)));
            if (!is_arg(red_ops[o])) {
                cr_assert_eq(smelt_node_ndim(r5), 2);
                cr_assert(!memcmp(smelt_node_shape(r5), (int64_t[]){3, 5}, 2 * sizeof(int64_t)));
            }
            smelt_graph_free(g);
        }
    smelt_ctx_free(ctx);
}

/* the message says what is wrong */
static void bad(smelt_op op, int ndim, const int64_t *shape, int n_axes, const int *axes, int status,
                const char *text)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_F32, ndim, shape);
    cr_assert_null(smelt_reduce(g, op, a, n_axes, axes, 0), "%s accepted", text);
    cr_assert_eq(smelt_graph_status(g), status, "%s: status %d: %s", text, smelt_graph_status(g),
                 smelt_graph_errmsg(g));
    cr_assert(t_contains(smelt_graph_errmsg(g), text), "message '%s' lacks '%s'", smelt_graph_errmsg(g), text);
    cr_assert(t_contains(smelt_errmsg(ctx), text));
    /* sticky: the next call changes nothing */
    cr_assert_null(smelt_reduce(g, SMELT_OP_SUM, a, 0, NULL, 0));
    cr_assert(t_contains(smelt_graph_errmsg(g), text));
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(builder, bad_axes)
{
    bad(SMELT_OP_SUM, SHP(3, 4), 1, (int[]){2}, SMELT_ERR_INVALID_ARG, "axis 2 is out of bounds for an array of rank 2");
    bad(SMELT_OP_SUM, SHP(3, 4), 1, (int[]){-3}, SMELT_ERR_INVALID_ARG, "axis -3 is out of bounds");
    bad(SMELT_OP_MEAN, SHP(3, 4), 2, (int[]){1, -1}, SMELT_ERR_INVALID_ARG, "duplicate value in 'axis'");
    bad(SMELT_OP_ARGMAX, SHP(3, 4), 2, (int[]){0, 1}, SMELT_ERR_INVALID_ARG, "argmax takes one axis or all of them");
    bad(SMELT_OP_SUM, SHP(3, 4), -1, NULL, SMELT_ERR_INVALID_ARG, "n_axes is negative");
    bad(SMELT_OP_SUM, SHP(3, 4), 1, NULL, SMELT_ERR_INVALID_ARG, "axes is NULL");
    bad(SMELT_OP_ADD, SHP(3, 4), 0, NULL, SMELT_ERR_INVALID_ARG, "add is not a reduction");
    bad(SMELT_OP_SUM, 0, NULL, 1, (int[]){0}, SMELT_ERR_INVALID_ARG, "axis 0 is out of bounds for an array of rank 0");
}

/* NumPy: "zero-size array to reduction operation maximum which has no
 * identity" when a reduced axis is empty; sum, prod, mean, any, all have one */
Test(builder, empty_axis_without_identity)
{
    bad(SMELT_OP_MAX, SHP(0, 3), 1, (int[]){0}, SMELT_ERR_SHAPE, "max of an empty array: axis 0 of (0, 3) has size 0");
    bad(SMELT_OP_ARGMIN, SHP(3, 0), 0, NULL, SMELT_ERR_SHAPE, "argmin of an empty array");
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_F32, SHP(0, 3));
    cr_assert_not_null(smelt_reduce(g, SMELT_OP_MAX, a, 1, (int[]){1}, 0)); /* 3 elements each, no results */
    cr_assert_not_null(smelt_reduce(g, SMELT_OP_SUM, a, 1, (int[]){0}, 0));
    T_OK(ctx, smelt_graph_status(g));
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(builder, null_and_foreign_operands)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx), *h = t_graph(ctx);
    cr_assert_null(smelt_reduce(NULL, SMELT_OP_SUM, NULL, 0, NULL, 0));
    smelt_node *b = smelt_input(h, "b", SMELT_F32, SHP(3));
    cr_assert_null(smelt_reduce(g, SMELT_OP_SUM, b, 0, NULL, 0));
    cr_assert(t_contains(smelt_graph_errmsg(g), "belongs to another graph"), "%s", smelt_graph_errmsg(g));
    smelt_graph_free(g);
    g = t_graph(ctx);
    cr_assert_null(smelt_reduce(g, SMELT_OP_SUM, NULL, 0, NULL, 0));
    cr_assert(t_contains(smelt_graph_errmsg(g), "operand 0 is NULL"), "%s", smelt_graph_errmsg(g));
    smelt_graph_free(g);
    smelt_graph_free(h);
    smelt_ctx_free(ctx);
}

/* A reduction of a scalar constant is the constant it gives (one element). */
Test(builder, reduction_of_a_constant_is_a_constant)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *c = smelt_const(g, 3, SMELT_I32), *h = smelt_const(g, 0.1, SMELT_F16);
    smelt_node *s = smelt_reduce(g, SMELT_OP_SUM, c, 0, NULL, 0);
    smelt_node *m = smelt_reduce(g, SMELT_OP_MEAN, c, 0, NULL, 1);
    smelt_node *am = smelt_reduce(g, SMELT_OP_ARGMAX, h, 0, NULL, 0);
    smelt_node *hs = smelt_reduce(g, SMELT_OP_SUM, h, 0, NULL, 0);
    smelt_node *big = smelt_reduce(g, SMELT_OP_MAX, smelt_const(g, -0x1p63, SMELT_I64), 0, NULL, 0);
    T_OK(ctx, smelt_graph_status(g));
    cr_assert_eq(smelt_node_op(s), SMELT_OP_CONST);
    cr_assert_eq(smelt_node_dtype(s), SMELT_I64);
    cr_assert_eq(smelt_node_dtype(m), SMELT_F64);
    cr_assert_eq(smelt_node_dtype(am), SMELT_I64);
    cr_assert_eq(smelt_node_dtype(hs), SMELT_F16);
    smelt_node *outs[] = {s, m, am, hs, big};
    smelt_tensor *ref[5];
    t_reference(ctx, g, 5, outs, 0, NULL, ref);
    cr_assert_eq(smelt_tensor_get(ref[0], 0), 3);
    cr_assert_eq(smelt_tensor_get(ref[1], 0), 3);
    cr_assert_eq(smelt_tensor_get(ref[2], 0), 0);
    cr_assert_eq(smelt_tensor_get(ref[3], 0), 0.0999755859375);
    smelt_tensor *got[5] = {0};
    smelt_plan *p = t_plan(ctx, g, 5, outs, 0);
    t_run(p, 0, NULL, 5, got);
    cr_assert_eq(*(int64_t *)smelt_tensor_data(got[4]), INT64_MIN); /* every bit of an i64 */
    t_free_all(ref, 5), t_free_all(got, 5);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* ---- against the reference --------------------------------------------- */

/* An operand for op: random values of the default domain; for prod, values
 * near 1 (so that a product of hundreds stays finite) and small integers. */
static smelt_tensor *operand(smelt_ctx *ctx, trng *r, smelt_op op, smelt_dtype dt, int ndim, const int64_t *shape)
{
    smelt_tensor *t = t_rand(ctx, r, dt, ndim, shape);
    if (op != SMELT_OP_PROD)
        return t;
    for (int64_t i = 0, n = smelt_tensor_numel(t); i < n; i++)
        if (t_is_float(dt))
            t_set(t, i, trng_uniform(r, 0.8, 1.25) * ((trng_u64(r) & 7) ? 1 : -1));
        else if (dt != SMELT_BOOL)
            t_set_i64(t, i, trng_range(r, dt == SMELT_U8 ? 0 : -3, 3));
    return t;
}

/* got against ref, element by element: integers, bool, max, min, argmax and
 * argmin exactly; float sums and means within one unit of the result's
 * precision plus what the accumulator's roundings can add, (n + 64) eps of
 * the accumulator times the sum of magnitudes (abssum, per result, from the
 * reference); products likewise relative to the product. */
static void expect_reduction(const char *label, smelt_op op, smelt_dtype in_dt, int64_t nred,
                             const smelt_tensor *got, const smelt_tensor *ref, const smelt_tensor *abssum)
{
    smelt_dtype dt = smelt_tensor_dtype(got);
    bool inexact = t_is_float(in_dt) && (op == SMELT_OP_SUM || op == SMELT_OP_MEAN || op == SMELT_OP_PROD);
    if (!inexact && !(op == SMELT_OP_MEAN)) {
        t_expect_match(label, got, ref, T_EXACT);
        return;
    }
    double eacc = t_is_float(in_dt) ? (t_is_half(in_dt) ? 0x1p-24 : 0x1p-53) : 0x1p-53;
    for (int64_t i = 0, n = smelt_tensor_numel(got); i < n; i++) {
        double g = smelt_tensor_get(got, i), r = smelt_tensor_get(ref, i);
        double tol = t_eps(dt) * fabs(r) + 0x1p-1074;
        double spread = (double)(nred + 64) * eacc;
        if (op == SMELT_OP_PROD)
            tol += spread * fabs(r);
        else
            tol += spread * smelt_tensor_get(abssum, i) / (op == SMELT_OP_MEAN && nred ? (double)nred : 1.0);
        cr_assert((isnan(g) && isnan(r)) || fabs(g - r) <= tol || g == r,
                  "%s: [%lld] got %.17g, reference %.17g (tolerance %.3g)", label, (long long)i, g, r, tol);
    }
}

typedef struct axcase {
    int ndim;
    int64_t shape[4];
    int n_axes;
    int axes[4];
} axcase;

static const axcase cases[] = {
    {0, {0}, 0, {0}},
    {1, {37}, 0, {0}},           {1, {37}, 1, {-1}},          {1, {1}, 1, {0}},
    {2, {5, 70}, 1, {1}},        {2, {5, 70}, 1, {0}},        {2, {5, 70}, 2, {0, 1}},
    {2, {1, 9}, 1, {0}},         {2, {70, 1}, 1, {0}},
    {3, {4, 3, 50}, 2, {0, 2}},  {3, {4, 3, 50}, 1, {1}},     {3, {4, 3, 50}, 1, {2}},
    {3, {4, 3, 50}, 2, {0, -2}}, {3, {4, 1, 50}, 1, {1}},
    {4, {2, 3, 4, 20}, 2, {1, 3}}, {4, {2, 3, 4, 20}, 1, {0}}, {4, {2, 3, 4, 20}, 1, {3}},
    {4, {2, 3, 4, 20}, 2, {1, 2}}, {4, {2, 3, 4, 20}, 0, {0}}, {4, {3, 1, 2, 33}, 3, {0, 1, 3}},
};

/* op over the dtypes dts (n of them) and every axis case, keepdims on and
 * off: a plan of each (the context's backend), against the reference */
static void against_reference(smelt_ctx *ctx, smelt_op op, int opt_level, const smelt_dtype *dts, int n)
{
    for (int t = 0; t < n; t++)
        for (int c = 0; c < NELEMS(cases); c++)
            for (int keep = 0; keep < 2; keep++) {
                const axcase *k = &cases[c];
                if (is_arg(op) && k->n_axes > 1)
                    continue;
                smelt_dtype dt = dts[t];
                smelt_graph *g = t_graph(ctx);
                smelt_node *a = smelt_input(g, "a", dt, k->ndim, k->shape);
                smelt_node *y = smelt_reduce(g, op, a, k->n_axes, k->axes, keep);
                /* the sum of magnitudes, for the tolerance */
                smelt_node *abs = smelt_reduce(g, SMELT_OP_SUM, smelt_unary(g, SMELT_OP_ABS, smelt_cast(g, a, SMELT_F64)),
                                               k->n_axes, k->axes, keep);
                T_OK(ctx, smelt_graph_status(g));
                trng r;
                trng_init(&r, (uint64_t)(t * 1000 + c * 2 + keep));
                smelt_tensor *in = operand(ctx, &r, op, dt, k->ndim, k->shape), *got = NULL, *ref[2];
                smelt_plan *p = t_plan(ctx, g, 1, &y, opt_level);
                t_run(p, 1, &in, 1, &got);
                smelt_node *outs[] = {y, abs};
                t_reference(ctx, g, 2, outs, 1, &in, ref);
                char label[160];
                snprintf(label, sizeof label, "%s of %s, case %d, keepdims %d, opt_level %d", smelt_op_name(op),
                         smelt_dtype_name(dt), c, keep, opt_level);
                int64_t nred = 1;
                for (int d = 0; d < k->ndim; d++) {
                    bool red = k->n_axes == 0;
                    for (int j = 0; j < k->n_axes; j++)
                        red = red || (k->axes[j] + k->ndim) % k->ndim == d;
                    nred *= red ? k->shape[d] : 1;
                }
                cr_assert_eq(smelt_tensor_dtype(got), numpy_result(op, dt), "%s", label);
                expect_reduction(label, op, dt, nred, got, ref[0], ref[1]);
                t_free_all(ref, 2);
                smelt_tensor_free(got), smelt_tensor_free(in);
                smelt_plan_free(p);
                smelt_graph_free(g);
            }
}

ParameterizedTestParameters(reference, every_op_dtype_axes)
{
    static int idx[NELEMS(red_ops)];
    for (int i = 0; i < NELEMS(red_ops); i++)
        idx[i] = i;
    return cr_make_param_array(int, idx, NELEMS(red_ops));
}

ParameterizedTest(int *i, reference, every_op_dtype_axes, .timeout = 120)
{
    smelt_ctx *ctx = t_ctx();
    against_reference(ctx, red_ops[*i], 3, all_dts, NELEMS(all_dts));
    smelt_ctx_free(ctx);
}

/* the same on the CC tier (two operators, each dtype once, to bound the
 * compile time: the kernels are the TinyCC tier's but for the lanes) */
Test(reference, cc_tier, .timeout = 300)
{
    smelt_ctx *ctx = t_ctx();
    if (smelt_backend_check(ctx, "CC") != SMELT_OK)
        cr_skip_test("CC: %s", smelt_errmsg(ctx));
    T_OK(ctx, smelt_ctx_set_backend(ctx, "CC"));
    const smelt_dtype mean_dts[] = {SMELT_F32, SMELT_BF16, SMELT_I32, SMELT_BOOL};
    const smelt_dtype argmin_dts[] = {SMELT_F64, SMELT_F16, SMELT_I64, SMELT_U8};
    against_reference(ctx, SMELT_OP_MEAN, 3, mean_dts, NELEMS(mean_dts));
    against_reference(ctx, SMELT_OP_ARGMIN, 3, argmin_dts, NELEMS(argmin_dts));
    smelt_ctx_free(ctx);
}

/* Rows longer than a chunk (16384 elements), on all cores: the chunked
 * paths (over the results; over the chunks, then the results) */
Test(reference, long_rows_and_columns, .timeout = 120)
{
    smelt_ctx *ctx = t_ctx();
    const axcase big[] = {
        {1, {100003}, 0, {0}},
        {2, {3, 40000}, 1, {1}},
        {2, {40000, 3}, 1, {0}},
        {2, {70, 1000}, 1, {1}},
        {3, {2, 20000, 3}, 1, {1}},
    };
    const smelt_op ops[] = {SMELT_OP_SUM, SMELT_OP_MEAN, SMELT_OP_MAX, SMELT_OP_ARGMIN, SMELT_OP_ALL};
    for (int c = 0; c < NELEMS(big); c++)
        for (int o = 0; o < NELEMS(ops); o++)
            for (int t = 0; t < 3; t++) {
                smelt_dtype dt = (smelt_dtype[]){SMELT_F32, SMELT_F16, SMELT_I32}[t];
                const axcase *k = &big[c];
                smelt_graph *g = t_graph(ctx);
                smelt_node *a = smelt_input(g, "a", dt, k->ndim, k->shape);
                smelt_node *y = smelt_reduce(g, ops[o], a, k->n_axes, k->axes, 0);
                smelt_node *abs = smelt_reduce(g, SMELT_OP_SUM, smelt_unary(g, SMELT_OP_ABS, smelt_cast(g, a, SMELT_F64)),
                                               k->n_axes, k->axes, 0);
                trng r;
                trng_init(&r, (uint64_t)(c * 100 + o * 10 + t));
                smelt_tensor *in = operand(ctx, &r, ops[o], dt, k->ndim, k->shape), *got = NULL, *ref[2];
                if (ops[o] == SMELT_OP_ALL) /* mostly true */
                    for (int64_t i = 0; i < smelt_tensor_numel(in); i++)
                        t_set(in, i, trng_unit(&r) < 0.9999 ? 1 : 0);
                smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
                t_run(p, 1, &in, 1, &got);
                smelt_node *outs[] = {y, abs};
                t_reference(ctx, g, 2, outs, 1, &in, ref);
                char label[128];
                snprintf(label, sizeof label, "%s of %s, big case %d", smelt_op_name(ops[o]), smelt_dtype_name(dt), c);
                expect_reduction(label, ops[o], dt, smelt_tensor_numel(in) / smelt_tensor_numel(got), got, ref[0],
                                 ref[1]);
                t_free_all(ref, 2);
                smelt_tensor_free(got), smelt_tensor_free(in);
                smelt_plan_free(p);
                smelt_graph_free(g);
            }
    smelt_ctx_free(ctx);
}

/* 2^24 f32 values in [0, 1): the sum within 1e-6 relative of the exact one
 * (f32 accumulates in f64) */
Test(reference, long_sum_accuracy, .timeout = 120)
{
    smelt_ctx *ctx = t_ctx();
    const int64_t n = (int64_t)1 << 24;
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_F32, SHP(n));
    smelt_node *y = smelt_reduce(g, SMELT_OP_SUM, a, 0, NULL, 0);
    smelt_node *m = smelt_reduce(g, SMELT_OP_MEAN, a, 0, NULL, 0);
    trng r;
    trng_init(&r, 1);
    smelt_tensor *in = t_tensor(ctx, SMELT_F32, SHP(n));
    float *x = smelt_tensor_data(in);
    long double exact = 0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = (float)trng_unit(&r);
        exact += x[i]; /* 64-bit significand: exact here (sums of 24-bit values below 2^24) */
    }
    smelt_node *outs[] = {y, m};
    smelt_tensor *got[2] = {0};
    smelt_plan *p = t_plan(ctx, g, 2, outs, 3);
    t_run(p, 1, &in, 2, got);
    double s = smelt_tensor_get(got[0], 0), mean = smelt_tensor_get(got[1], 0);
    cr_assert_lt(fabs(s - (double)exact) / (double)exact, 1e-6, "sum %.9g, exact %.9Lg", s, exact);
    cr_assert_lt(fabs(s - (double)exact) / (double)exact, 0x1p-23, "one rounding of the f64 sum");
    cr_assert_lt(fabs(mean - (double)(exact / n)) / (double)(exact / n), 0x1p-23);
    t_free_all(got, 2);
    smelt_tensor_free(in);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* ---- special values ------------------------------------------------------ */

/* y = op(values) over one row, on TCC: the result's bits */
static double reduce_row(smelt_op op, smelt_dtype dt, const double *v, int n)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", dt, SHP(n));
    smelt_node *y = smelt_reduce(g, op, a, 0, NULL, 0);
    smelt_tensor *in = t_tensor(ctx, dt, SHP(n)), *got = NULL, *ref = NULL;
    for (int i = 0; i < n; i++)
        t_set(in, i, v[i]);
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    t_run(p, 1, &in, 1, &got);
    t_reference(ctx, g, 1, &y, 1, &in, &ref);
    double r = smelt_tensor_get(got, 0), e = smelt_tensor_get(ref, 0);
    cr_assert((isnan(r) && isnan(e)) || (r == e && signbit(r) == signbit(e)),
              "%s of %s: kernel %a, reference %a", smelt_op_name(op), smelt_dtype_name(dt), r, e);
    smelt_tensor_free(in), smelt_tensor_free(got), smelt_tensor_free(ref);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
    return r;
}

Test(special, nan_inf_and_signed_zeros)
{
    const smelt_dtype fdts[] = {SMELT_F32, SMELT_F64, SMELT_F16, SMELT_BF16};
    for (int t = 0; t < NELEMS(fdts); t++) {
        smelt_dtype dt = fdts[t];
        double with_nan[40], infs[3] = {INFINITY, 1, -INFINITY}, zeros[70], mz[5] = {-0.0, -0.0, -0.0, -0.0, -0.0};
        for (int i = 0; i < 40; i++)
            with_nan[i] = i == 23 || i == 37 ? NAN : i - 20.0;
        cr_assert(isnan(reduce_row(SMELT_OP_MAX, dt, with_nan, 40)));
        cr_assert(isnan(reduce_row(SMELT_OP_MIN, dt, with_nan, 40)));
        cr_assert(isnan(reduce_row(SMELT_OP_SUM, dt, with_nan, 40)));
        cr_assert(isnan(reduce_row(SMELT_OP_MEAN, dt, with_nan, 40)));
        cr_assert_eq(reduce_row(SMELT_OP_ARGMAX, dt, with_nan, 40), 23); /* the first NaN counts as the max */
        cr_assert_eq(reduce_row(SMELT_OP_ARGMIN, dt, with_nan, 40), 23);
        cr_assert_eq(reduce_row(SMELT_OP_ANY, dt, with_nan, 40), 1);
        cr_assert(isnan(reduce_row(SMELT_OP_SUM, dt, infs, 3)));   /* inf + -inf */
        cr_assert_eq(reduce_row(SMELT_OP_MAX, dt, infs, 3), INFINITY);
        cr_assert_eq(reduce_row(SMELT_OP_MIN, dt, infs, 3), -INFINITY);
        cr_assert_eq(reduce_row(SMELT_OP_ARGMIN, dt, infs, 3), 2);
        cr_assert_eq(reduce_row(SMELT_OP_PROD, dt, infs, 2), INFINITY);
        /* a tie of zeros: +0 for max, -0 for min, whatever the positions */
        for (int i = 0; i < 70; i++)
            zeros[i] = (i * 7 % 3) ? 0.0 : -0.0;
        cr_assert(!signbit(reduce_row(SMELT_OP_MAX, dt, zeros, 70)));
        cr_assert(signbit(reduce_row(SMELT_OP_MIN, dt, zeros, 70)));
        cr_assert_eq(reduce_row(SMELT_OP_ARGMAX, dt, zeros, 70), 0); /* equal: the first */
        cr_assert(signbit(reduce_row(SMELT_OP_MAX, dt, mz, 5)));
        cr_assert(!signbit(reduce_row(SMELT_OP_SUM, dt, mz, 5))); /* as NumPy: the sum starts at +0 */
        cr_assert(signbit(reduce_row(SMELT_OP_PROD, dt, mz, 1)));
        cr_assert_eq(reduce_row(SMELT_OP_ANY, dt, mz, 5), 0);
    }
    /* integers: sums and products wrap in 64 bits, as NumPy's int64 */
    double big[3] = {9007199254740991.0, 9007199254740991.0, 3};
    cr_assert_eq(reduce_row(SMELT_OP_SUM, SMELT_I32, (double[]){2147483647.0, 2147483647.0, 2}, 3), 4294967296.0);
    cr_assert_eq(reduce_row(SMELT_OP_ARGMAX, SMELT_I64, big, 3), 0);
    cr_assert_eq(reduce_row(SMELT_OP_MAX, SMELT_U8, (double[]){3, 255, 7}, 3), 255);
    cr_assert_eq(reduce_row(SMELT_OP_SUM, SMELT_U8, (double[]){200, 255, 7}, 3), 462);
    cr_assert_eq(reduce_row(SMELT_OP_SUM, SMELT_BOOL, (double[]){1, 1, 0, 1}, 4), 3);
    cr_assert_eq(reduce_row(SMELT_OP_MEAN, SMELT_BOOL, (double[]){1, 1, 0, 1}, 4), 0.75);
    cr_assert_eq(reduce_row(SMELT_OP_MAX, SMELT_BOOL, (double[]){0, 1, 0}, 3), 1);
    cr_assert_eq(reduce_row(SMELT_OP_ALL, SMELT_I32, (double[]){1, -1, 0}, 3), 0);
}

/* max and min of f32 and f64 in smelt's order (include/smelt.h's lanes
 * and chunks, written out here), with ops.def's fold: a lane's first NaN
 * is its result, +0 beats -0 in max and -0 in min. */
#define LANE_FOLD(T, name)                                                                                   \
    static T name(bool max, T v, T e)                                                                        \
    {                                                                                                         \
        if (max)                                                                                              \
            return (v > e || v != v) ? v : (v == e && v == 0) ? v + e : e;                                    \
        return (v < e || v != v) ? v : (v == e && v == 0) ? -(-v - e) : e;                                   \
    }                                                                                                         \
    static T name##_row(bool max, const T *x, int64_t n)                                                      \
    {                                                                                                         \
        T tot = max ? -INFINITY : INFINITY;                                                                   \
        for (int64_t c = 0; c < n; c += 16384) {                                                              \
            T acc[32];                                                                                        \
            for (int l = 0; l < 32; l++)                                                                      \
                acc[l] = max ? -INFINITY : INFINITY;                                                          \
            for (int64_t i = c; i < n && i < c + 16384; i++)                                                  \
                acc[i & 31] = name(max, acc[i & 31], x[i]);                                                   \
            for (int d = 16; d >= 1; d >>= 1)                                                                 \
                for (int l = 0; l < d; l++)                                                                   \
                    acc[l] = name(max, acc[l], acc[l + d]);                                                   \
            tot = name(max, tot, acc[0]);                                                                     \
        }                                                                                                     \
        return tot;                                                                                           \
    }
LANE_FOLD(float, fold_f32)
LANE_FOLD(double, fold_f64)

/* Long rows (the kernels' vectorised max and min, which watch for NaNs
 * and ties of zeros): random values, signed zeros at the extreme, NaNs of
 * distinct payloads and both signs in some lanes: the bits of the order
 * above, on TCC and CC, 1 and 3 threads. */
Test(special, max_min_long_rows_bits)
{
    smelt_ctx *ctx = t_ctx();
    bool cc = smelt_backend_check(ctx, "CC") == SMELT_OK;
    const int64_t lens[] = {64, 97, 1000, 40000};
    trng r;
    trng_init(&r, 77);
    for (int dd = 0; dd < 2; dd++)
        for (int li = 0; li < NELEMS(lens); li++)
            for (int kind = 0; kind < 4; kind++) {
                smelt_dtype dt = dd ? SMELT_F64 : SMELT_F32;
                int64_t n = lens[li];
                smelt_tensor *in = t_tensor(ctx, dt, SHP(n));
                float *xf = smelt_tensor_data(in);
                double *xd = smelt_tensor_data(in);
                for (int64_t i = 0; i < n; i++) {
                    /* kind 0: random; 1: non-positive with +-0 at the top; 2, 3: NaNs */
                    double v = kind == 1 ? -trng_logmag(&r, 1e-3, 1e3, true) : trng_uniform(&r, -5, 5);
                    if (kind == 1 && trng_range(&r, 0, 9) == 0)
                        v = trng_range(&r, 0, 1) ? 0.0 : -0.0;
                    if (dd)
                        xd[i] = v;
                    else
                        xf[i] = (float)v;
                }
                if (kind == 1 && !dd) /* min's tie too: -0 and +0 at the bottom of a second copy below */
                    xf[n / 2] = INFINITY;
                for (int j = 0; kind >= 2 && j < 1 + (int)(n / 300); j++) {
                    int64_t at = trng_range(&r, 0, n - 1);
                    uint64_t pay = trng_u64(&r);
                    if (dd) {
                        uint64_t b = 0x7ff8000000000000ull | (pay & 0x7ffffffffffffull) | (kind == 3 ? 1ull << 63 : 0);
                        memcpy(&xd[at], &b, 8);
                    } else {
                        uint32_t b = 0x7fc00000u | (uint32_t)(pay & 0x3fffffu) | (kind == 3 ? 1u << 31 : 0);
                        memcpy(&xf[at], &b, 4);
                    }
                }
                for (int op = 0; op < 2; op++) {
                    bool max = op == 0;
                    smelt_graph *g = t_graph(ctx);
                    smelt_node *a = smelt_input(g, "a", dt, SHP(n));
                    smelt_node *y = smelt_reduce(g, max ? SMELT_OP_MAX : SMELT_OP_MIN, a, 0, NULL, 0);
                    uint64_t want = 0;
                    if (dd) {
                        double w = fold_f64_row(max, xd, n);
                        memcpy(&want, &w, 8);
                    } else {
                        float w = fold_f32_row(max, xf, n);
                        uint32_t b;
                        memcpy(&b, &w, 4);
                        want = b;
                    }
                    for (int v = 0; v < 4; v++) {
                        if (v >= 2 && !cc)
                            continue;
                        T_OK(ctx, smelt_ctx_set_backend(ctx, v >= 2 ? "CC" : "TCC"));
                        T_OK(ctx, smelt_ctx_set_threads(ctx, v & 1 ? 3 : 1));
                        smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
                        smelt_tensor *got = NULL;
                        t_run(p, 1, &in, 1, &got);
                        uint64_t have = 0;
                        memcpy(&have, smelt_tensor_data(got), dd ? 8 : 4);
                        cr_assert_eq(have, want, "%s of %lld %s (kind %d) on %s, %d threads: bits %llx, want %llx",
                                     max ? "max" : "min", (long long)n, smelt_dtype_name(dt), kind,
                                     v >= 2 ? "CC" : "TCC", v & 1 ? 3 : 1, (unsigned long long)have,
                                     (unsigned long long)want);
                        smelt_tensor_free(got);
                        smelt_plan_free(p);
                    }
                    smelt_graph_free(g);
                }
                smelt_tensor_free(in);
            }
    smelt_ctx_free(ctx);
}

/* the i64 product wraps: 3^41 mod 2^64 */
Test(special, integer_product_wraps)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_I64, SHP(41));
    smelt_node *y = smelt_reduce(g, SMELT_OP_PROD, a, 0, NULL, 0);
    smelt_tensor *in = t_tensor(ctx, SMELT_I64, SHP(41)), *got = NULL;
    uint64_t want = 1;
    for (int i = 0; i < 41; i++) {
        t_set_i64(in, i, 3);
        want *= 3;
    }
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    t_run(p, 1, &in, 1, &got);
    cr_assert_eq(*(uint64_t *)smelt_tensor_data(got), want);
    smelt_tensor_free(in), smelt_tensor_free(got);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* ---- empty axes ------------------------------------------------------------ */

Test(empty, identities_and_errors)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_F32, SHP(3, 0));
    int ax = 1;
    smelt_node *outs[] = {smelt_reduce(g, SMELT_OP_SUM, a, 1, &ax, 0), smelt_reduce(g, SMELT_OP_PROD, a, 1, &ax, 0),
                          smelt_reduce(g, SMELT_OP_MEAN, a, 1, &ax, 0), smelt_reduce(g, SMELT_OP_ANY, a, 1, &ax, 0),
                          smelt_reduce(g, SMELT_OP_ALL, a, 1, &ax, 1),
                          smelt_reduce(g, SMELT_OP_MAX, a, 1, (int[]){0}, 0)}; /* no results */
    T_OK(ctx, smelt_graph_status(g));
    smelt_tensor *in = t_tensor(ctx, SMELT_F32, SHP(3, 0)), *got[6] = {0};
    smelt_plan *p = t_plan(ctx, g, 6, outs, 3);
    t_run(p, 1, &in, 6, got);
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(smelt_tensor_get(got[0], i), 0);
        cr_assert(!signbit(smelt_tensor_get(got[0], i)));
        cr_assert_eq(smelt_tensor_get(got[1], i), 1);
        cr_assert(isnan(smelt_tensor_get(got[2], i)));
        cr_assert_eq(smelt_tensor_get(got[3], i), 0);
        cr_assert_eq(smelt_tensor_get(got[4], i), 1);
    }
    cr_assert_eq(smelt_tensor_ndim(got[4]), 2);
    cr_assert_eq(smelt_tensor_numel(got[5]), 0);
    t_free_all(got, 6);
    smelt_tensor_free(in);
    smelt_plan_free(p);
    smelt_graph_free(g);

    /* a shape with an empty axis only at run time: an error then */
    g = t_graph(ctx);
    a = smelt_input(g, "a", SMELT_F32, SHP(3, 4));
    smelt_node *y = smelt_reduce(g, SMELT_OP_ARGMAX, a, 1, &ax, 0);
    p = t_plan(ctx, g, 1, &y, 3);
    in = t_tensor(ctx, SMELT_F32, SHP(3, 0));
    smelt_tensor *o = NULL;
    T_ERR(ctx, smelt_plan_run(p, 1, &in, 1, &o), SMELT_ERR_SHAPE,
          "argmax of an empty array: the run-time shape (3, 0) has a reduced axis of size 0");
    cr_assert_null(o);
    smelt_tensor_free(in);
    smelt_plan_free(p);
    smelt_graph_free(g);

    /* a row program over an empty axis among others (found by
     * scripts/fuzz-layout: the partitioner divided by the row length) */
    g = t_graph(ctx);
    a = smelt_input(g, "a", SMELT_I32, SHP(0, 5, 2));
    y = smelt_where(g, smelt_binary(g, SMELT_OP_GT, a, smelt_scalar(g, 0)), smelt_reduce(g, SMELT_OP_SUM, a, 0, NULL, 1),
                    a);
    smelt_node *s = smelt_reduce(g, SMELT_OP_SUM, a, 0, NULL, 1);
    smelt_node *both[] = {y, s};
    p = t_plan(ctx, g, 2, both, 3);
    in = t_tensor(ctx, SMELT_I32, SHP(0, 5, 2));
    smelt_tensor *r2[2] = {0};
    t_run(p, 1, &in, 2, r2);
    cr_assert_eq(smelt_tensor_numel(r2[0]), 0);
    cr_assert_eq(smelt_tensor_get(r2[1], 0), 0);
    t_free_all(r2, 2);
    smelt_tensor_free(in);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* ---- one result whatever runs it ------------------------------------------ */

/* Runs of one graph that must give the same bits. */
typedef struct variant {
    const char *backend;
    int threads, opt_level;
} variant;

static void same_bits(smelt_op op, smelt_dtype dt, int ndim, const int64_t *shape, int n_axes, const int *axes,
                      bool with_cc)
{
    const variant vs[] = {{"TCC", 1, 0}, {"TCC", 4, 3}, {"TCC", 2, 1}, {"CC", 1, 3}, {"CC", 3, 0}};
    smelt_ctx *ctx = t_ctx();
    bool cc = with_cc && smelt_backend_check(ctx, "CC") == SMELT_OK;
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", dt, ndim, shape);
    smelt_node *y = smelt_reduce(g, op, a, n_axes, axes, 0);
    T_OK(ctx, smelt_graph_status(g));
    trng r;
    trng_init(&r, (uint64_t)op * 31 + (uint64_t)dt);
    smelt_tensor *in = t_rand(ctx, &r, dt, ndim, shape), *first = NULL;
    /* a strided copy of the operand: a transposed view of a transposed buffer */
    int perm[8];
    int64_t tshape[8];
    for (int d = 0; d < ndim; d++)
        perm[d] = ndim - 1 - d, tshape[d] = shape[ndim - 1 - d];
    smelt_tensor *tb = t_tensor(ctx, dt, ndim, tshape), *view = NULL;
    T_OK(ctx, smelt_tensor_transpose(tb, perm, &view));
    T_OK(ctx, smelt_tensor_copy(view, in));
    for (int v = 0; v < NELEMS(vs); v++)
        for (int strided = 0; strided < 2; strided++) {
            if (!strcmp(vs[v].backend, "CC") && !cc)
                continue;
            T_OK(ctx, smelt_ctx_set_backend(ctx, vs[v].backend));
            T_OK(ctx, smelt_ctx_set_threads(ctx, vs[v].threads));
            smelt_plan *p = t_plan(ctx, g, 1, &y, vs[v].opt_level);
            smelt_tensor *got = NULL;
            t_run(p, 1, strided ? &view : &in, 1, &got);
            if (!first) {
                first = got;
            } else {
                int64_t at;
                cr_assert(t_same_results(first, got, &at), "%s of %s: %s on %d threads at opt_level %d%s gives %a at [%lld], "
                          "TCC on 1 thread %a", smelt_op_name(op), smelt_dtype_name(dt), vs[v].backend, vs[v].threads,
                          vs[v].opt_level, strided ? " (strided operand)" : "", smelt_tensor_get(got, at), (long long)at,
                          smelt_tensor_get(first, at));
                smelt_tensor_free(got);
            }
            smelt_plan_free(p);
        }
    smelt_tensor_free(first), smelt_tensor_free(in), smelt_tensor_free(view), smelt_tensor_free(tb);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(bitwise, tiers_threads_layouts, .timeout = 300)
{
    /* rows of several chunks (one result: chunks in parallel), many short
     * rows, columns (the column form), a middle axis, everything */
    same_bits(SMELT_OP_SUM, SMELT_F32, SHP(200003), 0, NULL, true);
    same_bits(SMELT_OP_SUM, SMELT_F32, SHP(3, 50000), 1, (int[]){1}, true);
    same_bits(SMELT_OP_MEAN, SMELT_F16, SHP(50000, 3), 1, (int[]){0}, true);
    same_bits(SMELT_OP_PROD, SMELT_F64, SHP(300, 257), 1, (int[]){-1}, true);
    same_bits(SMELT_OP_SUM, SMELT_BF16, SHP(40, 70, 30), 1, (int[]){1}, true);
    same_bits(SMELT_OP_ARGMAX, SMELT_F32, SHP(7, 40001), 1, (int[]){1}, true);
    same_bits(SMELT_OP_MIN, SMELT_F64, SHP(33, 2000), 1, (int[]){0}, false);
    same_bits(SMELT_OP_MEAN, SMELT_I32, SHP(20, 30, 100), 2, (int[]){0, 2}, false);
    same_bits(SMELT_OP_ANY, SMELT_F32, SHP(100, 400), 0, NULL, false);
    same_bits(SMELT_OP_ARGMIN, SMELT_U8, SHP(1000, 70), 1, (int[]){0}, false);
}

/* run-time shapes: a plan built for one shape runs others of the same
 * rank and broadcast pattern */
Test(bitwise, run_time_shapes)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_F32, SHP(4, 100));
    smelt_node *outs[] = {smelt_reduce(g, SMELT_OP_SUM, a, 1, (int[]){1}, 1),
                          smelt_reduce(g, SMELT_OP_MAX, a, 1, (int[]){0}, 0)};
    smelt_plan *p = t_plan(ctx, g, 2, outs, 3);
    const int64_t shapes[][2] = {{4, 100}, {7, 33}, {1000, 3}, {2, 20000}};
    for (int s = 0; s < 4; s++) {
        trng r;
        trng_init(&r, (uint64_t)s);
        smelt_tensor *in = t_rand(ctx, &r, SMELT_F32, 2, shapes[s]), *got[2] = {0}, *ref[2];
        t_run(p, 1, &in, 2, got);
        cr_assert_eq(smelt_tensor_shape(got[0])[0], shapes[s][0]);
        cr_assert_eq(smelt_tensor_shape(got[0])[1], 1);
        cr_assert_eq(smelt_tensor_shape(got[1])[0], shapes[s][1]);
        /* the reference, on a graph of this shape */
        smelt_graph *h = t_graph(ctx);
        smelt_node *b = smelt_input(h, "a", SMELT_F32, 2, shapes[s]);
        smelt_node *houts[] = {smelt_reduce(h, SMELT_OP_SUM, b, 1, (int[]){1}, 1),
                               smelt_reduce(h, SMELT_OP_MAX, b, 1, (int[]){0}, 0)};
        t_reference(ctx, h, 2, houts, 1, &in, ref);
        t_expect_match("sum", got[0], ref[0], (t_tol){.ulps = 1, .atol = 1e-4});
        t_expect_match("max", got[1], ref[1], T_EXACT);
        t_free_all(got, 2), t_free_all(ref, 2);
        smelt_tensor_free(in);
        smelt_graph_free(h);
    }
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* ---- passes and plans --------------------------------------------------------- */

/* A reduction of a broadcast constant folds (opt_level 1) to the bits its
 * kernel computes (opt_level 0); one too large to fold keeps its kernel. */
Test(passes, folding_gives_the_kernel_bits)
{
    smelt_ctx *ctx = t_ctx();
    const smelt_op ops[] = {SMELT_OP_SUM, SMELT_OP_MEAN, SMELT_OP_PROD, SMELT_OP_MAX, SMELT_OP_ARGMIN, SMELT_OP_ALL};
    const smelt_dtype dts[] = {SMELT_F32, SMELT_F16, SMELT_F64, SMELT_I32, SMELT_BF16};
    const double vals[] = {0.1, 1.0001, -3, 0.3};
    for (int o = 0; o < NELEMS(ops); o++)
        for (int t = 0; t < NELEMS(dts); t++)
            for (int v = 0; v < NELEMS(vals); v++) {
                smelt_graph *g = t_graph(ctx);
                smelt_node *c = smelt_const(g, vals[v], dts[t]);
                smelt_node *b = smelt_broadcast_to(g, smelt_unary(g, SMELT_OP_NEG, c), SHP(3, 50001));
                smelt_node *y = smelt_reduce(g, ops[o], b, 1, (int[]){1}, 0);
                smelt_tensor *r0 = NULL, *r1 = NULL;
                smelt_plan *p0 = t_plan(ctx, g, 1, &y, 0), *p1 = t_plan(ctx, g, 1, &y, 1);
                t_run(p0, 0, NULL, 1, &r0);
                t_run(p1, 0, NULL, 1, &r1);
                cr_assert_geq(t_stats(p1).folded, 3, "%s", smelt_plan_describe(p1));
                int64_t at;
                cr_assert(t_same_results(r0, r1, &at), "%s of %s %g: folded %a, kernel %a", smelt_op_name(ops[o]),
                          smelt_dtype_name(dts[t]), vals[v], smelt_tensor_get(r1, at), smelt_tensor_get(r0, at));
                smelt_tensor_free(r0), smelt_tensor_free(r1);
                smelt_plan_free(p0), smelt_plan_free(p1);
                smelt_graph_free(g);
            }
    smelt_ctx_free(ctx);
}

/* More than 2^24 elements: not folded; the kernel reads the folded
 * broadcast constant with strides 0, and gives the bits of the kernel that
 * reads it from memory (opt_level 0) */
Test(passes, reduction_of_a_large_constant, .timeout = 60)
{
    smelt_ctx *ctx = t_ctx();
    const smelt_op ops[] = {SMELT_OP_SUM, SMELT_OP_ARGMAX, SMELT_OP_MEAN};
    for (int o = 0; o < NELEMS(ops); o++) {
        smelt_graph *g = t_graph(ctx);
        smelt_node *c = smelt_const(g, 0.1, SMELT_F32);
        smelt_node *b = smelt_broadcast_to(g, c, SHP(2, (1 << 24) + 1));
        smelt_node *y = smelt_reduce(g, ops[o], b, 0, NULL, 0);
        smelt_plan *p1 = t_plan(ctx, g, 1, &y, 1), *p0 = t_plan(ctx, g, 1, &y, 0);
        cr_assert_eq(t_stats(p1).kernels, 1, "%s", smelt_plan_describe(p1));
        cr_assert_eq(t_stats(p1).folded, 1, "the broadcast only: %s", smelt_plan_describe(p1));
        smelt_tensor *r0 = NULL, *r1 = NULL;
        t_run(p1, 0, NULL, 1, &r1);
        t_run(p0, 0, NULL, 1, &r0);
        int64_t at;
        cr_assert(t_same_results(r0, r1, &at), "%s: %a from the constant, %a from memory", smelt_op_name(ops[o]),
                  smelt_tensor_get(r1, 0), smelt_tensor_get(r0, 0));
        smelt_tensor_free(r0), smelt_tensor_free(r1);
        smelt_plan_free(p0), smelt_plan_free(p1);
        smelt_graph_free(g);
    }
    smelt_ctx_free(ctx);
}

/* CSE merges equal reductions only: the axes and keepdims are part of one */
Test(passes, cse_keys_include_the_axes)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_F32, SHP(4, 4));
    smelt_node *outs[] = {smelt_reduce(g, SMELT_OP_SUM, a, 1, (int[]){0}, 0), smelt_reduce(g, SMELT_OP_SUM, a, 1, (int[]){1}, 0),
                          smelt_reduce(g, SMELT_OP_SUM, a, 1, (int[]){-1}, 0), smelt_reduce(g, SMELT_OP_SUM, a, 1, (int[]){1}, 1)};
    smelt_plan *p = t_plan(ctx, g, 4, outs, 3);
    cr_assert_eq(t_stats(p).cse, 1, "%s", smelt_plan_describe(p));
    trng r;
    trng_init(&r, 3);
    smelt_tensor *in = t_rand(ctx, &r, SMELT_F32, SHP(4, 4)), *got[4] = {0}, *ref[4];
    t_run(p, 1, &in, 4, got);
    t_reference(ctx, g, 4, outs, 1, &in, ref);
    for (int i = 0; i < 4; i++)
        t_expect_match("sum", got[i], ref[i], (t_tol){.ulps = 1});
    t_free_all(got, 4), t_free_all(ref, 4);
    smelt_tensor_free(in);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* The softmax: one row program (its max, then exp(x - max) and its sum,
 * then the division, row by row). */
Test(plans, softmax_kernels)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(8, 300));
    /* the softmax: exp(x - max(x)) / sum(exp(x - max(x))) over the last axis */
    smelt_node *mx = smelt_reduce(g, SMELT_OP_MAX, x, 1, (int[]){-1}, 1);
    smelt_node *e = smelt_unary(g, SMELT_OP_EXP, smelt_sub(g, x, mx));
    smelt_node *y = smelt_div(g, e, smelt_reduce(g, SMELT_OP_SUM, e, 1, (int[]){-1}, 1));
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    const char *d = smelt_plan_describe(p);
    cr_assert_eq(t_stats(p).kernels, 1, "%s", d); /* a row program */
    cr_assert(t_contains(d, "5 operators [max sub exp sum div]"), "%s", d);
    cr_assert(t_contains(d, "smelt_rows_"), "%s", d);
    trng r;
    trng_init(&r, 9);
    smelt_tensor *in = t_rand(ctx, &r, SMELT_F32, SHP(8, 300)), *got = NULL, *ref = NULL;
    t_run(p, 1, &in, 1, &got);
    t_reference(ctx, g, 1, &y, 1, &in, &ref);
    t_expect_match("softmax", got, ref, (t_tol){.ulps = 8, .atol = 1e-7});
    smelt_tensor_free(in), smelt_tensor_free(got), smelt_tensor_free(ref);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* An output given as a strided view, and outputs that need no kernel. */
Test(plans, strided_outputs)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_F64, SHP(6, 5, 4));
    smelt_node *y = smelt_reduce(g, SMELT_OP_SUM, a, 1, (int[]){1}, 0); /* (6, 4) */
    trng r;
    trng_init(&r, 4);
    smelt_tensor *in = t_rand(ctx, &r, SMELT_F64, SHP(6, 5, 4)), *buf = t_tensor(ctx, SMELT_F64, SHP(4, 6)), *view = NULL,
                 *ref = NULL;
    T_OK(ctx, smelt_tensor_transpose(buf, (int[]){1, 0}, &view));
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    t_run(p, 1, &in, 1, &view);
    t_reference(ctx, g, 1, &y, 1, &in, &ref);
    t_expect_match("into a transposed view", view, ref, (t_tol){.ulps = 1, .atol = 1e-14});
    smelt_tensor_free(in), smelt_tensor_free(buf), smelt_tensor_free(view), smelt_tensor_free(ref);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* AUTO: TinyCC kernels first, CC's switched in from the third run; the
 * switch changes no reduction's bits */
Test(bitwise, auto_tier_switch, .timeout = 120)
{
    smelt_ctx *ctx = t_ctx();
    if (smelt_backend_check(ctx, "CC") != SMELT_OK)
        cr_skip_test("CC: %s", smelt_errmsg(ctx));
    T_OK(ctx, smelt_ctx_set_backend(ctx, "AUTO"));
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_F32, SHP(70, 3000));
    smelt_node *outs[] = {smelt_reduce(g, SMELT_OP_SUM, a, 1, (int[]){1}, 0),
                          smelt_reduce(g, SMELT_OP_MEAN, a, 1, (int[]){0}, 1),
                          smelt_reduce(g, SMELT_OP_ARGMIN, a, 0, NULL, 0)};
    trng r;
    trng_init(&r, 12);
    smelt_tensor *in = t_rand(ctx, &r, SMELT_F32, SHP(70, 3000)), *o1[3] = {0}, *o2[3] = {0};
    smelt_plan *p = t_plan(ctx, g, 3, outs, 3);
    if (!t_stats(p).tier_backend)
        cr_skip_test("AUTO has no optimising tier here");
    t_run(p, 1, &in, 3, o1);
    t_free_all(o1, 3);
    t_run(p, 1, &in, 3, o1); /* queues the CC kernels */
    T_OK(ctx, smelt_plan_wait(p));
    t_run(p, 1, &in, 3, o2);
    cr_assert_eq(t_stats(p).kernels_fast, 3, "%s", smelt_plan_describe(p));
    for (int i = 0; i < 3; i++) {
        int64_t at;
        cr_assert(t_same_results(o1[i], o2[i], &at), "output %d: TCC %a, CC %a at [%lld]", i,
                  smelt_tensor_get(o1[i], at), smelt_tensor_get(o2[i], at), (long long)at);
    }
    t_free_all(o1, 3), t_free_all(o2, 3);
    smelt_tensor_free(in);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* a traced function with a reduction: one plan per signature */
static int traced_softmax(smelt_graph *g, int n_in, smelt_node *const *in, int n_out, smelt_node **out, void *user)
{
    (void)n_in, (void)n_out, (void)user;
    out[0] = smelt_expr(g, "exp(x - max(x, axis=-1, keepdims=True)) / "
                           "sum(exp(x - max(x, axis=-1, keepdims=True)), axis=-1, keepdims=True)",
                        (const char *[]){"x"}, in, 1);
    return out[0] ? SMELT_OK : smelt_graph_status(g);
}

Test(plans, traced_softmax)
{
    smelt_ctx *ctx = t_ctx();
    smelt_trace *t = NULL;
    T_OK(ctx, smelt_trace_new(ctx, traced_softmax, NULL, 1, 1, NULL, &t));
    const int64_t shapes[][2] = {{5, 40}, {9, 7}};
    for (int s = 0; s < 2; s++) {
        trng r;
        trng_init(&r, (uint64_t)s);
        smelt_tensor *x = t_rand(ctx, &r, SMELT_F32, 2, shapes[s]), *y = NULL;
        T_OK(ctx, smelt_trace_call(t, 1, &x, 1, &y));
        for (int64_t i = 0; i < shapes[s][0]; i++) { /* each row sums to 1 */
            double sum = 0;
            for (int64_t j = 0; j < shapes[s][1]; j++)
                sum += smelt_tensor_get(y, i * shapes[s][1] + j);
            cr_assert_float_eq(sum, 1.0, 1e-5, "row %lld sums to %g", (long long)i, sum);
        }
        smelt_tensor_free(x), smelt_tensor_free(y);
    }
    cr_assert_eq(smelt_trace_num_plans(t), 1, "the same signature (rank, no size-1 axes)");
    smelt_trace_free(t);
    smelt_ctx_free(ctx);
}

/* The memory plan puts a kernel's output in place of an input it reads for
 * the last time when both have one element size and count: for a
 * reduction, over size-1 axes only, and its kernels read a result's
 * elements before they write it (the row and the column form). */
Test(plans, in_place_over_size_one_axes)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(5000, 1)), *z = smelt_input(g, "z", SMELT_F32, SHP(1, 3000));
    smelt_node *outs[] = {smelt_reduce(g, SMELT_OP_SUM, smelt_unary(g, SMELT_OP_EXP, x), 1, (int[]){1}, 0),
                          smelt_reduce(g, SMELT_OP_MAX, smelt_unary(g, SMELT_OP_SIN, z), 1, (int[]){0}, 1)};
    trng r;
    trng_init(&r, 21);
    smelt_tensor *in[] = {t_rand(ctx, &r, SMELT_F32, SHP(5000, 1)), t_rand(ctx, &r, SMELT_F32, SHP(1, 3000))};
    smelt_plan *p = t_plan(ctx, g, 2, outs, 2);
    cr_assert_eq(t_stats(p).mem_inplace, 0, "outputs are not intermediates: %s", smelt_plan_describe(p));
    smelt_plan_free(p);
    /* as intermediates: y = sum(exp(x), axis=1) + 1 */
    smelt_node *y[] = {smelt_add(g, outs[0], smelt_scalar(g, 1)), smelt_add(g, outs[1], smelt_scalar(g, 1))};
    p = t_plan(ctx, g, 2, y, 2);
    cr_assert_geq(t_stats(p).mem_inplace, 2, "%s", smelt_plan_describe(p));
    smelt_tensor *got[2] = {0}, *ref[2];
    t_run(p, 2, in, 2, got);
    t_reference(ctx, g, 2, y, 2, in, ref);
    for (int i = 0; i < 2; i++)
        t_expect_match("in place", got[i], ref[i], (t_tol){.ulps = 2, .atol = 1e-6});
    t_free_all(got, 2), t_free_all(ref, 2), t_free_all(in, 2);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* Simplification (x - x of integers is 0) leaves a reduction of a constant
 * too large to fold: its kernel reads the constant. */
Test(passes, simplified_to_a_large_constant, .timeout = 60)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_I32, SHP(2, (1 << 24) + 1));
    smelt_node *y = smelt_reduce(g, SMELT_OP_SUM, smelt_sub(g, x, x), 0, NULL, 0);
    smelt_plan *p = t_plan(ctx, g, 1, &y, 1);
    cr_assert_eq(t_stats(p).kernels, 1, "%s", smelt_plan_describe(p));
    smelt_tensor *in = t_tensor(ctx, SMELT_I32, SHP(2, (1 << 24) + 1)), *got = NULL;
    for (int64_t i = 0; i < smelt_tensor_numel(in); i += 4097)
        t_set_i64(in, i, i);
    t_run(p, 1, &in, 1, &got);
    cr_assert_eq(*(const int64_t *)smelt_tensor_data(got), 0);
    smelt_tensor_free(in), smelt_tensor_free(got);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* ---- input fusion: producers inside the reduction's kernel ----------------- */

/* One operand op(a * a - m) (or a > m for the bool operand of bool_op), m
 * broadcast along the last axis: the same bits at opt_level 3 (one kernel)
 * as at opt_level 0 (three), on TinyCC and CC, on 1 and several threads. */
static void fused_same_bits(smelt_op op, smelt_dtype dt, bool cmp, int ndim, const int64_t *shape, int n_axes,
                            const int *axes, bool specials)
{
    const variant vs[] = {{"TCC", 1, 0}, {"TCC", 4, 3}, {"TCC", 1, 3}, {"CC", 1, 3}, {"CC", 3, 3}, {"CC", 2, 0}};
    smelt_ctx *ctx = t_ctx();
    bool cc = smelt_backend_check(ctx, "CC") == SMELT_OK;
    int64_t mshape[8];
    memcpy(mshape, shape, sizeof(int64_t) * (size_t)ndim);
    mshape[ndim - 1] = 1;
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", dt, ndim, shape), *m = smelt_input(g, "m", dt, ndim, mshape);
    smelt_node *x = cmp ? smelt_binary(g, SMELT_OP_GT, a, m) : smelt_sub(g, smelt_mul(g, a, a), m);
    smelt_node *y = smelt_reduce(g, op, x, n_axes, axes, 0);
    T_OK(ctx, smelt_graph_status(g));
    trng r;
    trng_init(&r, (uint64_t)op * 7 + (uint64_t)dt);
    smelt_tensor *in[2] = {t_rand(ctx, &r, dt, ndim, shape), t_rand(ctx, &r, dt, ndim, mshape)}, *first = NULL;
    if (specials && (dt == SMELT_F32 || dt == SMELT_F64 || dt == SMELT_F16)) {
        int64_t n = smelt_tensor_numel(in[0]);
        t_set(in[0], n / 3, NAN), t_set(in[0], n / 2, INFINITY), t_set(in[0], n - 1, -0.0);
        t_set(in[1], 0, -INFINITY), t_set(in[1], smelt_tensor_numel(in[1]) - 1, -0.0);
    }
    if (op == SMELT_OP_PROD) /* products near 1 */
        for (int64_t i = 0; i < smelt_tensor_numel(in[0]); i++)
            t_set(in[0], i, trng_uniform(&r, 0.9, 1.1)), t_set(in[1], i % smelt_tensor_numel(in[1]), 0.2);
    for (int v = 0; v < NELEMS(vs); v++) {
        if (!strcmp(vs[v].backend, "CC") && !cc)
            continue;
        T_OK(ctx, smelt_ctx_set_backend(ctx, vs[v].backend));
        T_OK(ctx, smelt_ctx_set_threads(ctx, vs[v].threads));
        smelt_plan *p = t_plan(ctx, g, 1, &y, vs[v].opt_level);
        if (vs[v].opt_level == 3)
            cr_assert_eq(t_stats(p).kernels, 1, "%s", smelt_plan_describe(p));
        smelt_tensor *got = NULL;
        t_run(p, 2, in, 1, &got);
        if (!first) {
            first = got;
        } else {
            int64_t at;
            cr_assert(t_same_results(first, got, &at), "%s of %s%s: %s on %d threads at opt_level %d gives %a at [%lld], "
                      "TCC unfused %a", smelt_op_name(op), smelt_dtype_name(dt), cmp ? " (a comparison)" : "",
                      vs[v].backend, vs[v].threads, vs[v].opt_level, smelt_tensor_get(got, at), (long long)at,
                      smelt_tensor_get(first, at));
            smelt_tensor_free(got);
        }
        smelt_plan_free(p);
    }
    smelt_tensor_free(first), smelt_tensor_free(in[0]), smelt_tensor_free(in[1]);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(fusion, every_op_and_dtype_same_bits, .timeout = 300)
{
    const smelt_op ops[] = {SMELT_OP_SUM, SMELT_OP_PROD,   SMELT_OP_MEAN,   SMELT_OP_MAX, SMELT_OP_MIN,
                            SMELT_OP_ARGMAX, SMELT_OP_ARGMIN, SMELT_OP_ANY, SMELT_OP_ALL};
    const smelt_dtype dts[] = {SMELT_F32, SMELT_F64, SMELT_F16, SMELT_I32};
    for (int o = 0; o < NELEMS(ops); o++) {
        for (int t = 0; t < NELEMS(dts); t++) {
            fused_same_bits(ops[o], dts[t], false, SHP(37, 300), 1, (int[]){1}, true); /* rows */
            fused_same_bits(ops[o], dts[t], false, SHP(300, 37), 1, (int[]){0}, true); /* columns */
        }
        if (ops[o] != SMELT_OP_PROD && ops[o] != SMELT_OP_MEAN)
            fused_same_bits(ops[o], SMELT_F32, true, SHP(37, 300), 1, (int[]){1}, false); /* a bool operand */
    }
}

Test(fusion, layouts_and_long_rows_same_bits, .timeout = 300)
{
    fused_same_bits(SMELT_OP_SUM, SMELT_F32, false, SHP(3, 70000), 1, (int[]){1}, true); /* chunks in parallel */
    fused_same_bits(SMELT_OP_MAX, SMELT_F32, false, SHP(50003), 0, NULL, true);          /* reduce-all */
    fused_same_bits(SMELT_OP_SUM, SMELT_F64, false, SHP(40, 30, 20), 0, NULL, false);    /* reduce-all, 3-D */
    fused_same_bits(SMELT_OP_MEAN, SMELT_F16, false, SHP(20, 70, 30), 1, (int[]){1}, true); /* a middle axis */
    fused_same_bits(SMELT_OP_MIN, SMELT_F64, false, SHP(20, 30, 40), 2, (int[]){0, 2}, true);
    fused_same_bits(SMELT_OP_SUM, SMELT_I32, false, SHP(5000, 3), 1, (int[]){0}, false); /* short columns */
}

/* Kernel counts at opt_level 3 and the reasons the plan gives. */
Test(fusion, kernel_counts_and_reasons)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(8, 300));
    /* sum(x * x, axis=1): one kernel */
    smelt_node *ss = smelt_reduce(g, SMELT_OP_SUM, smelt_mul(g, x, x), 1, (int[]){1}, 0);
    smelt_plan *p = t_plan(ctx, g, 1, &ss, 3);
    cr_assert_eq(t_stats(p).kernels, 1, "%s", smelt_plan_describe(p));
    smelt_plan_free(p);
    /* softmax's second pass, sum(exp(x - m)), m = max(x, keepdims): one
     * row program (three kernels unfused) */
    smelt_node *mx = smelt_reduce(g, SMELT_OP_MAX, x, 1, (int[]){-1}, 1);
    smelt_node *e = smelt_unary(g, SMELT_OP_EXP, smelt_sub(g, x, mx));
    smelt_node *s = smelt_reduce(g, SMELT_OP_SUM, e, 1, (int[]){-1}, 1);
    p = t_plan(ctx, g, 1, &s, 3);
    const char *d = smelt_plan_describe(p);
    cr_assert_eq(t_stats(p).kernels, 1, "%s", d);
    cr_assert(t_contains(d, "smelt_rows_"), "%s", d);
    smelt_plan_free(p);
    /* the softmax: the division too */
    smelt_node *y = smelt_div(g, e, s);
    p = t_plan(ctx, g, 1, &y, 3);
    d = smelt_plan_describe(p);
    cr_assert_eq(t_stats(p).kernels, 1, "%s", d);
    smelt_plan_free(p);
    /* without keepdims, max(x, axis=1) (8,) broadcasts along the other
     * axis of x: no row program (the single form's rules: 2 kernels) */
    smelt_node *x8 = smelt_input(g, "x8", SMELT_F32, SHP(8, 8));
    smelt_node *m8 = smelt_sub(g, x8, smelt_reduce(g, SMELT_OP_MAX, x8, 1, (int[]){1}, 0));
    p = t_plan(ctx, g, 1, &m8, 3);
    d = smelt_plan_describe(p);
    cr_assert_eq(t_stats(p).kernels, 2, "%s", d);
    cr_assert(t_contains(d, "a row program needs"), "%s", d);
    smelt_plan_free(p);
    /* a softmax over axis 0: one row program while a row's elements are at
     * most 256 bytes apart (64 f32 columns), else 3 kernels (the single
     * form's column reductions, vectorised along the columns) */
    for (int cols = 64; cols <= 128; cols *= 2) {
        smelt_node *xc = smelt_input(g, cols == 64 ? "xc64" : "xc128", SMELT_F32, SHP(500, cols));
        smelt_node *mc = smelt_reduce(g, SMELT_OP_MAX, xc, 1, (int[]){0}, 1);
        smelt_node *ec = smelt_unary(g, SMELT_OP_EXP, smelt_sub(g, xc, mc));
        smelt_node *yc = smelt_div(g, ec, smelt_reduce(g, SMELT_OP_SUM, ec, 1, (int[]){0}, 1));
        p = t_plan(ctx, g, 1, &yc, 3);
        d = smelt_plan_describe(p);
        cr_assert_eq(t_stats(p).kernels, cols == 64 ? 1 : 3, "%d columns: %s", cols, d);
        cr_assert(cols == 64 || t_contains(d, "bytes of kept elements inside a row's elements"), "%s", d);
        smelt_plan_free(p);
    }
    /* epilogues: sqrt(sum(x * x, axis=1) + eps) is one kernel, mean * w
     * and mean * (w * w) too; w * w computed before the reduction (in
     * program order) is not fused yet */
    smelt_node *nrm = smelt_unary(g, SMELT_OP_SQRT, smelt_add(g, ss, smelt_scalar(g, 1e-5)));
    p = t_plan(ctx, g, 1, &nrm, 3);
    cr_assert_eq(t_stats(p).kernels, 1, "%s", smelt_plan_describe(p));
    smelt_plan_free(p);
    smelt_node *w8 = smelt_input(g, "w", SMELT_F32, SHP(8));
    smelt_node *ww = smelt_mul(g, w8, w8), *mn = smelt_reduce(g, SMELT_OP_MEAN, x, 1, (int[]){1}, 0);
    smelt_node *sw = smelt_mul(g, ww, mn), *mw = smelt_mul(g, mn, w8);
    smelt_node *mww = smelt_mul(g, mn, smelt_add(g, w8, w8));
    p = t_plan(ctx, g, 1, &mw, 3);
    cr_assert_eq(t_stats(p).kernels, 1, "%s", smelt_plan_describe(p));
    smelt_plan_free(p);
    p = t_plan(ctx, g, 1, &mww, 3);
    cr_assert_eq(t_stats(p).kernels, 1, "%s", smelt_plan_describe(p));
    smelt_plan_free(p);
    p = t_plan(ctx, g, 1, &sw, 3);
    d = smelt_plan_describe(p);
    cr_assert_eq(t_stats(p).kernels, 2, "%s", d);
    cr_assert(t_contains(d, "an epilogue's operand computed elementwise (not fused yet)"), "%s", d);
    smelt_plan_free(p);
    /* a plan output computed by a reduction's producers: one kernel writes both */
    smelt_node *sq = smelt_mul(g, x, x), *outs[2] = {sq, smelt_reduce(g, SMELT_OP_SUM, sq, 1, (int[]){1}, 0)};
    p = t_plan(ctx, g, 2, outs, 3);
    cr_assert_eq(t_stats(p).kernels, 1, "%s", smelt_plan_describe(p));
    smelt_plan_free(p);
    /* a reduction of a reduction's result: two kernels */
    smelt_node *s2 = smelt_reduce(g, SMELT_OP_SUM, smelt_mul(g, ss, ss), 0, NULL, 0);
    p = t_plan(ctx, g, 1, &s2, 3);
    cr_assert_eq(t_stats(p).kernels, 2, "%s", smelt_plan_describe(p));
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* Full-size outputs of a reduction's kernel (a producer's value read
 * elsewhere): the softmax and a layernorm-like normalisation give the bits
 * of their unfused plans on TinyCC and CC, on 1 and 4 threads, with the
 * in-place memory plan of opt_level 3. */
static void fused_outputs_same_bits(const char *expr, int64_t rows, int64_t cols, int kernels)
{
    const variant vs[] = {{"TCC", 1, 0}, {"TCC", 4, 3}, {"TCC", 1, 3}, {"CC", 1, 3}, {"CC", 4, 3}};
    smelt_ctx *ctx = t_ctx();
    bool cc = smelt_backend_check(ctx, "CC") == SMELT_OK;
    smelt_graph *g = t_graph(ctx);
    smelt_node *in[2] = {smelt_input(g, "x", SMELT_F32, SHP(rows, cols)), smelt_input(g, "w", SMELT_F32, SHP(cols))};
    smelt_node *y = smelt_expr(g, expr, (const char *[]){"x", "w"}, in, 2);
    T_OK(ctx, smelt_graph_status(g));
    trng r;
    trng_init(&r, 5);
    smelt_tensor *xs[2] = {t_rand(ctx, &r, SMELT_F32, SHP(rows, cols)), t_rand(ctx, &r, SMELT_F32, SHP(cols))};
    t_set(xs[0], 3, -0.0), t_set(xs[0], cols + 5, INFINITY), t_set(xs[0], 2 * cols + 1, NAN);
    smelt_tensor *first = NULL;
    for (int v = 0; v < NELEMS(vs); v++) {
        if (!strcmp(vs[v].backend, "CC") && !cc)
            continue;
        T_OK(ctx, smelt_ctx_set_backend(ctx, vs[v].backend));
        T_OK(ctx, smelt_ctx_set_threads(ctx, vs[v].threads));
        smelt_plan *p = t_plan(ctx, g, 1, &y, vs[v].opt_level);
        if (vs[v].opt_level == 3)
            cr_assert_eq(t_stats(p).kernels, kernels, "%s: %s", expr, smelt_plan_describe(p));
        smelt_tensor *got = NULL;
        t_run(p, 2, xs, 1, &got);
        if (!first) {
            first = got;
        } else {
            int64_t at;
            cr_assert(t_same_results(first, got, &at), "%s: %s on %d threads gives %a at [%lld], unfused %a", expr,
                      vs[v].backend, vs[v].threads, smelt_tensor_get(got, at), (long long)at,
                      smelt_tensor_get(first, at));
            smelt_tensor_free(got);
        }
        smelt_plan_free(p);
    }
    smelt_tensor_free(first), smelt_tensor_free(xs[0]), smelt_tensor_free(xs[1]);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(fusion, full_size_outputs_same_bits, .timeout = 300)
{
    const char *softmax = "exp(x - max(x, axis=-1, keepdims=True)) / "
                          "sum(exp(x - max(x, axis=-1, keepdims=True)), axis=-1, keepdims=True)";
    fused_outputs_same_bits(softmax, 40, 3000, 1); /* a row program */
    /* few long rows: no row program (a row in one thread); max; exp(x -
     * max) with its sum, also writing exp(x - max); the division */
    fused_outputs_same_bits(softmax, 3, 70000, 3);
    /* layernorm-like: mean, centred values, their mean square with + 1e-5
     * and sqrt, the scaling: one row program (5 kernels unfused) */
    fused_outputs_same_bits("(x - mean(x, axis=1, keepdims=True)) * w / "
                            "sqrt(mean((x - mean(x, axis=1, keepdims=True)) ** 2, axis=1, keepdims=True) + 1e-5)",
                            50, 700, 1);
    /* an input of the result's size read by every result (m, broadcast
     * along the reduced axis): the result is not written in place of it
     * (+ 0 * w: the sum's epilogue) */
    fused_outputs_same_bits("sum(x - max(x, axis=1, keepdims=True), axis=0) + 0 * w", 300, 300, 2);
    /* a column sum whose operand is also needed */
    fused_outputs_same_bits("x * w / sum(x * w, axis=0)", 700, 50, 2);
}

/* A reduction of one element whose operand's producer is also read
 * elsewhere: the producer's full-size output (one element) is stored.
 * Every dimension of size 1 leaves the launch one dimension, whose
 * stride once gave every operand, that output too, the broadcast mode:
 * CC wrote it to a copy and the add read what the memory held
 * (scripts/fuzz-layout, 2026-11-29).  x - 1.25 for x in [0, 1) and the
 * special values, against the float64 reference (within f32's roundings;
 * before, CC gave 0 or a subnormal). */
Test(fusion, one_element_reductions_store_their_producers, .timeout = 120)
{
    const char *exprs[] = {"(x - 1.25) + min(x - 1.25)", "maximum(x - 1.25, min(x - 1.25, axis=0))",
                           "(x * 3) * sum(x * 3, axis=0, keepdims=True)"};
    const double special[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 0x1p-60};
    const int64_t shapes[3][3] = {{1}, {1, 1}, {1, 1, 1}};
    smelt_ctx *ctx = t_ctx();
    bool cc = smelt_backend_check(ctx, "CC") == SMELT_OK;
    trng r;
    trng_init(&r, 11);
    for (int e = 0; e < NELEMS(exprs); e++)
        for (int nd = 1; nd <= 3; nd++) {
            smelt_graph *g = t_graph(ctx);
            smelt_node *x = smelt_input(g, "x", SMELT_F32, nd, shapes[nd - 1]);
            smelt_node *y = smelt_expr(g, exprs[e], (const char *[]){"x"}, &x, 1);
            T_OK(ctx, smelt_graph_status(g));
            for (int v = 0; v < 1 + NELEMS(special); v++) {
                smelt_tensor *xs = t_rand(ctx, &r, SMELT_F32, nd, shapes[nd - 1]);
                if (v)
                    t_set(xs, 0, special[v - 1]);
                smelt_tensor *ref = NULL;
                T_OK(ctx, smelt_reference_eval(ctx, g, 1, &y, 1, &xs, &ref));
                for (int b = 0; b < 2; b++) {
                    if (b && !cc)
                        continue;
                    T_OK(ctx, smelt_ctx_set_backend(ctx, b ? "CC" : "TCC"));
                    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
                    smelt_tensor *got = NULL;
                    t_run(p, 1, &xs, 1, &got);
                    double want = smelt_tensor_get(ref, 0), have = smelt_tensor_get(got, 0);
                    /* the reference rounds once, f32 at each step: within 2^-22 */
                    bool near = isnan(want) ? isnan(have)
                                : isinf(want) || want == 0 ? have == want && signbit(have) == signbit(want)
                                                           : fabs(have - want) <= 0x1p-22 * fabs(want);
                    cr_assert(near,
                              "%s, rank %d, %s, x = %a: %a, the reference %a", exprs[e], nd, b ? "CC" : "TCC",
                              smelt_tensor_get(xs, 0), have, want);
                    smelt_tensor_free(got);
                    smelt_plan_free(p);
                }
                smelt_tensor_free(ref), smelt_tensor_free(xs);
            }
            smelt_graph_free(g);
        }
    smelt_ctx_free(ctx);
}

/* Epilogues: elementwise consumers at the result's shape fuse after the
 * reduction and run on each result as it is stored.  kind 0: the reduced
 * value alone read by the epilogue; 1: it is also a plan output; 2: an
 * intermediate value of the epilogue is a plan output too; 3: the epilogue
 * reads another input c of the result's shape; 4: and the producers' input
 * m (keepdims row reductions: m has the result's shape).  The bits of the
 * unfused plan on TinyCC and CC, 1 and several threads. */
static smelt_node *epilogue_of(smelt_graph *g, smelt_node *y, smelt_node **mid)
{
    smelt_dtype rt = smelt_node_dtype(y);
    if (rt == SMELT_BOOL) /* any, all: a cast, then arithmetic */
        y = smelt_cast(g, y, SMELT_F32);
    *mid = smelt_mul(g, y, y);
    if (rt == SMELT_I64 || rt == SMELT_I32)
        return smelt_sub(g, smelt_mul(g, *mid, smelt_scalar(g, 3)), y);
    /* sqrt(y*y + eps), 1 / y (y = 0 and -0.0 give infinities), the sum */
    smelt_node *n = smelt_unary(g, SMELT_OP_SQRT, smelt_add(g, *mid, smelt_scalar(g, 1e-5)));
    return smelt_add(g, n, smelt_div(g, smelt_scalar(g, 1), y));
}

static void epilogue_same_bits(smelt_op op, smelt_dtype dt, int ndim, const int64_t *shape, int n_axes,
                               const int *axes, int keepdims, int kind)
{
    const variant vs[] = {{"TCC", 1, 0}, {"TCC", 4, 3}, {"TCC", 1, 3}, {"CC", 1, 3}, {"CC", 3, 3}};
    smelt_ctx *ctx = t_ctx();
    bool cc = smelt_backend_check(ctx, "CC") == SMELT_OK;
    int64_t mshape[8];
    memcpy(mshape, shape, sizeof(int64_t) * (size_t)ndim);
    mshape[ndim - 1] = 1;
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", dt, ndim, shape), *m = smelt_input(g, "m", dt, ndim, mshape);
    smelt_node *y = smelt_reduce(g, op, smelt_sub(g, smelt_mul(g, a, a), m), n_axes, axes, keepdims), *mid;
    smelt_node *z = epilogue_of(g, y, &mid);
    smelt_node *c = kind >= 3 ? smelt_input(g, "c", dt, smelt_node_ndim(y), smelt_node_shape(y)) : NULL;
    if (c)
        z = smelt_mul(g, z, c);
    if (kind == 4)
        z = smelt_add(g, z, m);
    smelt_node *outs[2] = {z, kind == 1 ? y : mid};
    int nout = kind == 1 || kind == 2 ? 2 : 1, nin = c ? 3 : 2;
    T_OK(ctx, smelt_graph_status(g));
    trng r;
    trng_init(&r, (uint64_t)op * 11 + (uint64_t)dt);
    smelt_tensor *in[3] = {t_rand(ctx, &r, dt, ndim, shape), t_rand(ctx, &r, dt, ndim, mshape),
                           c ? t_rand(ctx, &r, dt, smelt_node_ndim(y), smelt_node_shape(y)) : NULL},
                 *first[2] = {0};
    if (dt == SMELT_F32 || dt == SMELT_F64 || dt == SMELT_F16) {
        int64_t n = smelt_tensor_numel(in[0]);
        t_set(in[0], n / 3, NAN), t_set(in[0], n / 2, INFINITY), t_set(in[0], n - 1, -0.0);
        t_set(in[1], smelt_tensor_numel(in[1]) - 1, -0.0);
    }
    if (op == SMELT_OP_PROD) /* products near 1 */
        for (int64_t i = 0; i < smelt_tensor_numel(in[0]); i++)
            t_set(in[0], i, trng_uniform(&r, 0.9, 1.1)), t_set(in[1], i % smelt_tensor_numel(in[1]), 0.2);
    for (int v = 0; v < NELEMS(vs); v++) {
        if (!strcmp(vs[v].backend, "CC") && !cc)
            continue;
        T_OK(ctx, smelt_ctx_set_backend(ctx, vs[v].backend));
        T_OK(ctx, smelt_ctx_set_threads(ctx, vs[v].threads));
        smelt_plan *p = t_plan(ctx, g, nout, outs, vs[v].opt_level);
        if (vs[v].opt_level == 3)
            cr_assert_eq(t_stats(p).kernels, 1, "%s", smelt_plan_describe(p));
        smelt_tensor *got[2] = {0};
        t_run(p, nin, in, nout, got);
        for (int o = 0; o < nout; o++) {
            if (!first[o]) {
                first[o] = got[o];
                continue;
            }
            int64_t at;
            cr_assert(t_same_results(first[o], got[o], &at), "%s of %s (kind %d, output %d): %s on %d threads at "
                      "opt_level %d gives %a at [%lld], TCC unfused %a", smelt_op_name(op), smelt_dtype_name(dt), kind,
                      o, vs[v].backend, vs[v].threads, vs[v].opt_level, smelt_tensor_get(got[o], at), (long long)at,
                      smelt_tensor_get(first[o], at));
            smelt_tensor_free(got[o]);
        }
        smelt_plan_free(p);
    }
    for (int o = 0; o < nout; o++)
        smelt_tensor_free(first[o]);
    smelt_tensor_free(in[0]), smelt_tensor_free(in[1]), smelt_tensor_free(in[2]);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(epilogue, every_op_and_dtype_same_bits, .timeout = 600)
{
    const smelt_op ops[] = {SMELT_OP_SUM, SMELT_OP_PROD,   SMELT_OP_MEAN,   SMELT_OP_MAX, SMELT_OP_MIN,
                            SMELT_OP_ARGMAX, SMELT_OP_ARGMIN, SMELT_OP_ANY, SMELT_OP_ALL};
    const smelt_dtype dts[] = {SMELT_F32, SMELT_F64, SMELT_F16, SMELT_I32};
    for (int o = 0; o < NELEMS(ops); o++)
        for (int t = 0; t < NELEMS(dts); t++) {
            epilogue_same_bits(ops[o], dts[t], SHP(37, 300), 1, (int[]){1}, 0, (o + t) % 4); /* rows */
            epilogue_same_bits(ops[o], dts[t], SHP(37, 300), 1, (int[]){1}, 1, 4);           /* rows, keepdims */
            epilogue_same_bits(ops[o], dts[t], SHP(300, 37), 1, (int[]){0}, 1, (o + t + 1) % 4); /* columns */
        }
}

Test(epilogue, layouts_and_long_rows_same_bits, .timeout = 300)
{
    epilogue_same_bits(SMELT_OP_SUM, SMELT_F32, SHP(3, 70000), 1, (int[]){1}, 1, 1);  /* chunks in parallel */
    epilogue_same_bits(SMELT_OP_MAX, SMELT_F32, SHP(50003), 0, NULL, 0, 2);           /* reduce-all */
    epilogue_same_bits(SMELT_OP_SUM, SMELT_F64, SHP(40, 30, 20), 0, NULL, 1, 0);      /* reduce-all, 3-D */
    epilogue_same_bits(SMELT_OP_MEAN, SMELT_F16, SHP(20, 70, 30), 1, (int[]){1}, 0, 1); /* a middle axis */
    epilogue_same_bits(SMELT_OP_MIN, SMELT_F64, SHP(20, 30, 40), 2, (int[]){0, 2}, 1, 2);
    epilogue_same_bits(SMELT_OP_SUM, SMELT_F32, SHP(5, 700), 1, (int[]){0}, 0, 2);   /* columns: several groups of results */
    epilogue_same_bits(SMELT_OP_SUM, SMELT_I32, SHP(5000, 3), 1, (int[]){0}, 1, 1);  /* short columns */
    epilogue_same_bits(SMELT_OP_SUM, SMELT_F32, SHP(5, 700), 1, (int[]){0}, 0, 3);   /* columns, an input */
    epilogue_same_bits(SMELT_OP_MAX, SMELT_F16, SHP(3, 70000), 1, (int[]){1}, 1, 4); /* long rows, inputs */
    epilogue_same_bits(SMELT_OP_MEAN, SMELT_F32, SHP(20, 70, 30), 2, (int[]){0, 2}, 0, 3);
    epilogue_same_bits(SMELT_OP_SUM, SMELT_F64, SHP(40, 30, 20), 0, NULL, 0, 3);     /* reduce-all, an input */
}

/* A plan with epilogues run at other run-time shapes than the graph's
 * (rows and columns, an epilogue input of the result's shape): the bits
 * of the unfused plan at each. */
Test(epilogue, run_time_shapes)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_F32, SHP(4, 100)), *c = smelt_input(g, "c", SMELT_F32, SHP(4));
    smelt_node *ss = smelt_reduce(g, SMELT_OP_SUM, smelt_mul(g, a, a), 1, (int[]){1}, 0);
    smelt_node *outs[] = {smelt_mul(g, smelt_unary(g, SMELT_OP_SQRT, smelt_add(g, ss, smelt_scalar(g, 1e-5))), c),
                          smelt_add(g, smelt_mul(g, smelt_reduce(g, SMELT_OP_MAX, a, 1, (int[]){0}, 1),
                                                 smelt_scalar(g, 2)), smelt_scalar(g, 1))};
    smelt_plan *p = t_plan(ctx, g, 2, outs, 3), *p0 = t_plan(ctx, g, 2, outs, 0);
    cr_assert_eq(t_stats(p).kernels, 2, "%s", smelt_plan_describe(p));
    const int64_t shapes[][2] = {{4, 100}, {7, 33}, {1000, 3}, {2, 20000}, {3, 700}};
    for (int s = 0; s < NELEMS(shapes); s++) {
        trng r;
        trng_init(&r, 40 + (uint64_t)s);
        smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F32, 2, shapes[s]), t_rand(ctx, &r, SMELT_F32, SHP(shapes[s][0]))};
        t_set(in[0], 1, NAN), t_set(in[0], 2, -0.0);
        smelt_tensor *got[2] = {0}, *ref[2] = {0};
        t_run(p, 2, in, 2, got);
        t_run(p0, 2, in, 2, ref);
        for (int o = 0; o < 2; o++) {
            int64_t at;
            cr_assert(t_same_results(ref[o], got[o], &at), "shape %d, output %d: %a at [%lld], unfused %a", s, o,
                      smelt_tensor_get(got[o], at), (long long)at, smelt_tensor_get(ref[o], at));
        }
        t_free_all(got, 2), t_free_all(ref, 2);
        smelt_tensor_free(in[0]), smelt_tensor_free(in[1]);
    }
    smelt_plan_free(p), smelt_plan_free(p0);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* ---- row programs ----------------------------------------------------------
 * Several reductions over the same rows, with full-size operators reading
 * their results broadcast back (softmax, layernorm, rmsnorm): one kernel,
 * the bits of the unfused plan on TinyCC and CC, 1 and 4 threads; within a
 * few ulps of the float64 reference. */
#include "rows-cases.h"

Test(rows, one_kernel_same_bits, .timeout = 300)
{
    const variant vs[] = {{"TCC", 1, 0}, {"TCC", 1, 3}, {"TCC", 4, 3}, {"CC", 1, 3}, {"CC", 4, 3}, {"CC", 2, 1}};
    smelt_ctx *ctx = t_ctx();
    bool cc = smelt_backend_check(ctx, "CC") == SMELT_OK;
    for (int c = 0; c < NELEMS(rows_cases); c++) {
        const rows_case *rc = &rows_cases[c];
        smelt_node *outs[3];
        smelt_tensor *in[ROWS_MAX_IN], *first[3] = {0}, *ref[3];
        int n_out, n_in;
        smelt_graph *g = rows_setup(ctx, c, outs, &n_out, in, &n_in);
        t_reference(ctx, g, n_out, outs, n_in, in, ref);
        for (int v = 0; v < NELEMS(vs); v++) {
            if (!strcmp(vs[v].backend, "CC") && !cc)
                continue;
            T_OK(ctx, smelt_ctx_set_backend(ctx, vs[v].backend));
            T_OK(ctx, smelt_ctx_set_threads(ctx, vs[v].threads));
            smelt_plan *p = t_plan(ctx, g, n_out, outs, vs[v].opt_level);
            if (vs[v].opt_level == 3)
                cr_assert_eq(t_stats(p).kernels, rows_kernels(c), "%s: %s", rc->what, smelt_plan_describe(p));
            smelt_tensor *got[3] = {0};
            t_run(p, n_in, in, n_out, got);
            for (int o = 0; o < n_out; o++) {
                if (!first[o]) {
                    first[o] = got[o];
                    /* f16: every operator rounds to f16 */
                    t_tol tol = rc->dt == SMELT_F16 ? (t_tol){.ulps = 8, .atol = 2e-3} : t_chain_tol(rc->dt);
                    t_expect_match(rc->what, got[o], ref[o], tol);
                    continue;
                }
                int64_t at;
                cr_assert(t_same_results(first[o], got[o], &at), "%s, output %d: %s, %d threads, opt_level %d gives "
                          "%a at [%lld], unfused %a", rc->what, o, vs[v].backend, vs[v].threads, vs[v].opt_level,
                          smelt_tensor_get(got[o], at), (long long)at, smelt_tensor_get(first[o], at));
                smelt_tensor_free(got[o]);
            }
            smelt_plan_free(p);
        }
        t_free_all(first, n_out), t_free_all(ref, n_out), t_free_all(in, n_in);
        smelt_graph_free(g);
    }
    smelt_ctx_free(ctx);
}

/* A row program's row cache keeps values of 1 and 8 bytes an element (a
 * comparison, a cast to f64) over rows of 4 and 5 elements: each value
 * starts aligned for its dtype (the widest first), so no block primitive
 * stores a double at an odd address (scripts/sanitize reported one, a
 * fuzz input, before); the bits of the unfused plan, TCC and CC. */
Test(rows, row_cache_values_aligned)
{
    smelt_ctx *ctx = t_ctx();
    bool cc = smelt_backend_check(ctx, "CC") == SMELT_OK;
    for (int64_t cols = 4; cols <= 5; cols++) {
        smelt_graph *g = t_graph(ctx);
        smelt_node *v[2] = {smelt_input(g, "a", SMELT_F32, SHP(3, cols)), smelt_input(g, "b", SMELT_F64, SHP(cols))};
        smelt_node *y = smelt_expr(g, "a>7-a>b>7-min((a)-a>7-a>b>a)*a>a>b", (const char *[]){"a", "b"}, v, 2);
        T_OK(ctx, smelt_graph_status(g));
        trng r;
        trng_init(&r, 31 + (uint64_t)cols);
        smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F32, SHP(3, cols)), t_rand(ctx, &r, SMELT_F64, SHP(cols))};
        smelt_tensor *base = NULL;
        T_OK(ctx, smelt_ctx_set_backend(ctx, "TCC"));
        smelt_plan *p0 = t_plan(ctx, g, 1, &y, 0);
        t_run(p0, 2, in, 1, &base);
        for (int be = 0; be < 2; be++) {
            if (be && !cc)
                continue;
            T_OK(ctx, smelt_ctx_set_backend(ctx, be ? "CC" : "TCC"));
            smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
            cr_assert(t_contains(smelt_plan_describe(p), "in rows"), "%s", smelt_plan_describe(p));
            smelt_tensor *got = NULL;
            t_run(p, 2, in, 1, &got);
            cr_assert(t_bitwise_equal(base, got), "%s, rows of %lld: not the unfused bits", be ? "CC" : "TCC",
                      (long long)cols);
            smelt_tensor_free(got);
            smelt_plan_free(p);
        }
        smelt_tensor_free(base), t_free_all(in, 2);
        smelt_plan_free(p0);
        smelt_graph_free(g);
    }
    smelt_ctx_free(ctx);
}

/* Sibling reductions: sum(x), sum(x * x) and max(abs(x)) of one input, no
 * edge between them, share one read as a row program, with keepdims or
 * without; the bits of the unfused plan. */
Test(rows, sibling_reductions_share_a_read)
{
    smelt_ctx *ctx = t_ctx();
    for (int keep = 0; keep < 2; keep++) {
        smelt_graph *g = t_graph(ctx);
        smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(64, 300));
        smelt_node *outs[] = {smelt_reduce(g, SMELT_OP_SUM, x, 1, (int[]){-1}, keep),
                              smelt_reduce(g, SMELT_OP_SUM, smelt_mul(g, x, x), 1, (int[]){-1}, keep),
                              smelt_reduce(g, SMELT_OP_MAX, smelt_unary(g, SMELT_OP_ABS, x), 1, (int[]){-1}, keep)};
        trng r;
        trng_init(&r, 77);
        smelt_tensor *in = t_rand(ctx, &r, SMELT_F32, SHP(64, 300));
        t_set(in, 5, -0.0), t_set(in, 301, NAN), t_set(in, 620, INFINITY);
        smelt_plan_stats st = t_check_plan("siblings", ctx, g, 3, outs, 3, 1, &in, t_chain_tol(SMELT_F32));
        cr_assert_eq(st.kernels, 1, "keepdims %d: %d kernels", keep, st.kernels);
        smelt_plan *p0 = t_plan(ctx, g, 3, outs, 0), *p3 = t_plan(ctx, g, 3, outs, 3);
        smelt_tensor *a[3] = {0}, *b[3] = {0};
        t_run(p0, 1, &in, 3, a);
        t_run(p3, 1, &in, 3, b);
        for (int o = 0; o < 3; o++)
            cr_assert(t_bitwise_equal(a[o], b[o]), "keepdims %d, output %d: fused and unfused differ", keep, o);
        t_free_all(a, 3), t_free_all(b, 3);
        smelt_plan_free(p0), smelt_plan_free(p3);
        smelt_tensor_free(in);
        smelt_graph_free(g);
    }
    /* v (8,) read at the results' shape (sum(x, axis=1) + v) and broadcast
     * along the rows (x * v): one set of strides cannot serve both, so no
     * row program; NumPy's values */
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(8, 8)), *v = smelt_input(g, "v", SMELT_F32, SHP(8));
    smelt_node *outs[] = {smelt_add(g, smelt_reduce(g, SMELT_OP_SUM, x, 1, (int[]){1}, 0), v),
                          smelt_reduce(g, SMELT_OP_SUM, smelt_mul(g, x, v), 1, (int[]){1}, 0)};
    trng r;
    trng_init(&r, 78);
    smelt_tensor *in[] = {t_rand(ctx, &r, SMELT_F32, SHP(8, 8)), t_rand(ctx, &r, SMELT_F32, SHP(8))};
    smelt_plan_stats st = t_check_plan("v read two ways", ctx, g, 2, outs, 3, 2, in, t_chain_tol(SMELT_F32));
    cr_assert_eq(st.kernels, 2, "%d kernels", st.kernels);
    t_free_all(in, 2);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* A kernel's scratch starts on a 64-byte line (smelt__kernel_scratch): a
 * row program's calls each keep a row cache there, a multiple of 64 bytes,
 * and two threads writing neighbouring caches must not share a line (from
 * malloc's 16-byte alignment they did, every row: rows of 384 f32 ran
 * slower on 2 threads than on 1).  A layernorm over rows of 384 and 389,
 * several calls on 2 threads, and a sum over two long rows (the chunks'
 * results in the scratch): each kernel's scratch aligned, and the bits
 * those of 1 thread. */
#include "plan.h"
Test(rows, kernel_scratch_on_a_line)
{
    smelt_ctx *ctx = t_ctx();
    for (int c = 0; c < 3; c++) {
        const int64_t rows = c == 2 ? 2 : 600, cols = c == 0 ? 384 : c == 1 ? 389 : 100003;
        smelt_graph *g = t_graph(ctx);
        smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(rows, cols)), *y;
        const int last[] = {-1};
        if (c < 2) {
            smelt_node *d = smelt_sub(g, x, smelt_reduce(g, SMELT_OP_MEAN, x, 1, last, 1));
            smelt_node *var = smelt_reduce(g, SMELT_OP_MEAN, smelt_mul(g, d, d), 1, last, 1);
            y = smelt_mul(g, d, smelt_unary(g, SMELT_OP_RSQRT, smelt_add(g, var, smelt_scalar(g, 1e-5))));
        } else {
            y = smelt_reduce(g, SMELT_OP_SUM, smelt_mul(g, x, x), 1, last, 0);
        }
        T_OK(ctx, smelt_graph_status(g));
        trng r;
        trng_init(&r, 977 + (uint64_t)c);
        smelt_tensor *in = t_rand(ctx, &r, SMELT_F32, SHP(rows, cols)), *one = NULL, *two = NULL;
        smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
        T_OK(ctx, smelt_ctx_set_threads(ctx, 1));
        t_run(p, 1, &in, 1, &one);
        T_OK(ctx, smelt_ctx_set_threads(ctx, 2));
        t_run(p, 1, &in, 1, &two);
        cr_assert(t_bitwise_equal(one, two), "case %d: 2 threads gave other bits than 1", c);
        int with = 0;
        for (int k = 0; k < p->nkern; k++)
            if (p->kern[k].scratch) {
                with++;
                cr_assert(((uintptr_t)p->kern[k].scratch & 63) == 0, "case %d: kernel %d's scratch %p is not on a 64-byte line",
                          c, k, (void *)p->kern[k].scratch);
            }
        cr_assert(with > 0, "case %d: no kernel used its scratch (%s)", c, smelt_plan_describe(p));
        smelt_tensor_free(one), smelt_tensor_free(two), smelt_tensor_free(in);
        smelt_plan_free(p);
        smelt_graph_free(g);
    }
    smelt_ctx_free(ctx);
}
