/* Layout operators (views) inside fused work, for tests/test-layout.c and
 * tests/test-cuda.c: each case is an expression over x and y with the
 * kernels and copies its plan has at opt_level 3 (no copy where strides
 * suffice), and gives the bits of its unfused plan. */
#ifndef SMELT_LAYOUT_CASES_H
#define SMELT_LAYOUT_CASES_H
#include "common.h"

typedef struct layout_case {
    const char *what, *expr;
    smelt_dtype dt;
    int nx, ny;
    int64_t xs[4], ys[4];
    int kernels, copies; /* at opt_level 3 */
} layout_case;

static const layout_case layout_cases[] = {
    {"transpose_add", "x.T + y", SMELT_F32, 2, 2, {48, 40}, {40, 48}, 1, 0},
    {"a view of an elementwise value", "exp(x).T * y", SMELT_F32, 2, 2, {33, 20}, {20, 33}, 1, 0},
    {"permute and stepped slices", "transpose(x, (2, 0, 1))[1:, ::-2] + 1", SMELT_F64, 3, 1, {6, 5, 4}, {1}, 1, 0},
    {"flip", "-flip(x, 0) + y", SMELT_I64, 2, 1, {9, 7}, {7}, 1, 0},
    {"reshape that splits an axis", "reshape(x, (6, 4, 5)) * y", SMELT_I32, 2, 1, {6, 20}, {5}, 1, 0},
    {"reshape of a transposed value (a copy)", "exp(reshape(x.T, (-1,))) + y", SMELT_F32, 2, 1, {6, 8}, {48}, 2, 1},
    {"expand_dims and squeeze", "squeeze(expand_dims(x, 1), 1) - x[:, None, :][:, 0]", SMELT_F32, 2, 1, {7, 5},
     {1}, 1, 0},
    {"broadcast_to then transpose", "broadcast_to(x, (5, 6)).T + y", SMELT_F16, 2, 2, {1, 6}, {6, 5}, 1, 0},
    {"softmax of a transposed input",
     "exp(x.T - max(x.T, axis=-1, keepdims=True)) / sum(exp(x.T - max(x.T, axis=-1, keepdims=True)), axis=-1, "
     "keepdims=True)",
     SMELT_F32, 2, 1, {24, 16}, {1}, 1, 0},
    {"a reduction of a slice", "sum(x[::2, 1:] * 2, axis=0)", SMELT_F32, 2, 1, {10, 12}, {1}, 1, 0},
    {"an output that is a view of computed values", "(x + y).T", SMELT_BF16, 2, 1, {5, 4}, {4}, 1, 0},
    {"a reshaped output", "reshape(exp(x), (-1,))", SMELT_F64, 2, 1, {4, 6}, {1}, 1, 0},
    {"a view of a reduction's result", "x - transpose(sum(x, axis=1, keepdims=True))", SMELT_F32, 2, 1, {8, 8},
     {1}, 2, 0},
    {"integer index", "x[2] * 3 + x[-1]", SMELT_U8, 2, 1, {8, 6}, {1}, 1, 0},
    {"arange reshaped", "reshape(arange(12), (3, 4)) * x", SMELT_I64, 2, 1, {3, 4}, {1}, 1, 0},
    {"a view of an input as the output", "x[::-1, 1:3]", SMELT_BOOL, 2, 1, {5, 4}, {1}, 1, 1},
    {"a value and its transpose", "exp(x) + exp(x).T", SMELT_F32, 2, 1, {12, 12}, {1}, 2, 0},
    /* views moved below operators that change the dtype (found by scripts/fuzz-layout) */
    {"a cast under a view", "float64(x)[::-1].T * 2", SMELT_I32, 2, 1, {6, 5}, {1}, 1, 0},
    {"a comparison under a view", "where((x > 0).T, x.T, -y)", SMELT_F32, 2, 2, {7, 9}, {9, 7}, 1, 0},
    {"integer division under a view", "(x / 2)[1:]", SMELT_I64, 2, 1, {4, 3}, {1}, 1, 0},
    /* outputs written through their views (a transpose back, a reshape back) */
    {"a reduction written through a transposed output", "transpose(sum(x, axis=1, keepdims=True))", SMELT_F64, 2, 1,
     {9, 7}, {1}, 1, 0},
    {"a row program written through a reshaped output", "reshape(exp(x - max(x, axis=-1, keepdims=True)), (-1,))",
     SMELT_F32, 2, 1, {6, 40}, {1}, 1, 0},
    /* a reshape after a transpose cannot be undone by strides: a copy (found by scripts/fuzz-layout) */
    {"an output reshaped after a transpose", "transpose(reshape(x - max(x, axis=0, keepdims=True), (6, 2)), (1, 0))[None]",
     SMELT_F32, 2, 1, {3, 4}, {1}, 2, 1},
    /* concat and pad: a kernel run once per piece */
    {"concat_relu", "maximum(concat((x, y, x), axis=1), 0)", SMELT_F32, 2, 2, {24, 16}, {24, 8}, 1, 0},
    {"a concat of computed values", "concat((exp(x), y)) * 2", SMELT_F64, 2, 2, {5, 7}, {3, 7}, 2, 0},
    {"pad", "pad(x, ((1, 2), (3, 0)), constant_values=-1.5) * y", SMELT_F32, 2, 1, {5, 6}, {9}, 1, 0},
    {"a stepped, transposed view of a concat", "concat((x, y))[::-2].T + 1", SMELT_F64, 2, 2, {6, 5}, {3, 5}, 1, 0},
    {"a padded part of a concat", "concat((pad(x, 1), y)) - 1", SMELT_I32, 2, 2, {3, 4}, {2, 6}, 1, 0},
    {"a broadcast concat", "broadcast_to(concat((x, y)), (3, 7, 4)) + expand_dims(x[:1], 0)", SMELT_F32, 2, 2,
     {3, 4}, {4, 4}, 1, 0},
    {"a concat as the output", "concat((x, y), axis=-1)", SMELT_U8, 2, 2, {4, 3}, {4, 5}, 1, 1},
    {"a reduction of a concat (a copy)", "sum(concat((x, y), axis=1), axis=1)", SMELT_F32, 2, 2, {6, 9}, {6, 3}, 2,
     1},
    {"a softmax of a padded row (the reduction reads a copy)",
     "exp(pad(x, (0, 3)) - max(pad(x, (0, 3)), axis=-1, keepdims=True))", SMELT_F32, 2, 1, {12, 29}, {1}, 3, 1},
    /* a reduction that reads pieces cut along its kept axes: one region of
     * whole rows per piece, no copy */
    {"a row sum of a concat of rows", "sum(concat((x, y)), axis=1)", SMELT_F32, 2, 2, {6, 9}, {4, 9}, 1, 0},
    {"a column sum of a concat of columns", "sum(concat((x, y), axis=1), axis=0)", SMELT_F32, 2, 2, {9, 6}, {9, 3},
     1, 0},
    {"a softmax of rows padded along the kept axis",
     "exp(pad(x, ((1, 2), (0, 0))) - max(pad(x, ((1, 2), (0, 0))), axis=-1, keepdims=True))", SMELT_F32, 2, 1,
     {12, 29}, {1}, 1, 0},
    {"centred rows of a concat", "concat((x, y)) - mean(concat((x, y)), axis=-1, keepdims=True)", SMELT_F64, 2, 2,
     {5, 33}, {3, 33}, 1, 0},
    {"argmax over a transposed concat", "argmax(relu(concat((x, y), axis=1).T), axis=1)", SMELT_I32, 2, 2, {7, 5},
     {7, 3}, 1, 0},
    {"pad of f16", "pad(x, (2, 1), constant_values=0.1) * 3", SMELT_F16, 2, 1, {3, 5}, {1}, 1, 0},
    {"pad of bool", "pad(x, 1, constant_values=True) & y", SMELT_BOOL, 2, 1, {3, 5}, {7}, 1, 0},
};

/* Case c's graph (one output in *out) and its inputs x, y (random, from a
 * seed of the case's own). */
static inline smelt_graph *layout_setup(smelt_ctx *ctx, int c, smelt_node **out, smelt_tensor **in)
{
    const layout_case *k = &layout_cases[c];
    smelt_graph *g = t_graph(ctx);
    smelt_node *v[2] = {smelt_input(g, "x", k->dt, k->nx, k->xs), smelt_input(g, "y", k->dt, k->ny, k->ys)};
    *out = smelt_expr(g, k->expr, (const char *[]){"x", "y"}, v, 2);
    T_OK(ctx, smelt_graph_status(g));
    trng r;
    trng_init(&r, 70 + (uint64_t)c);
    in[0] = t_rand(ctx, &r, k->dt, k->nx, k->xs);
    in[1] = t_rand(ctx, &r, k->dt, k->ny, k->ys);
    return g;
}
#endif
