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

