/* Row programs (multi-reduction kernels) for tests/test-reduce.c and
 * tests/test-cuda.c: each case is one kernel at opt_level 3 and gives the
 * bits of its unfused plan (cross-entropy: two kernels).  Inputs: x (dt,
 * shape), w and b (dt, the last dimension of x), t (targets); extra: the graph's extra outputs at the results' shape
 * (a reduction of the expression's value, after it, and a value computed
 * from that, read outside). */
#ifndef SMELT_ROWS_CASES_H
#define SMELT_ROWS_CASES_H
#include "common.h"

typedef struct rows_case {
    const char *what, *expr;
    smelt_dtype dt;
    int ndim;
    int64_t shape[3];
    bool extra;
    int kernels;  /* at opt_level 3 */
    bool targets; /* a fourth input t: i64 indices into the last axis, shape x's with it 1 */
} rows_case;
/* Inputs: x, w, b and (targets) t. */
#define ROWS_MAX_IN 4
/* Mean cross-entropy of logits x [.., C] and targets t: the row program
 * (logsumexp and the target's logit picked by arange(C) == t) and the mean. */
#define ROWS_XENT(C) \
    "mean(log(sum(exp(x - max(x, axis=-1, keepdims=True)), axis=-1, keepdims=True)) + max(x, axis=-1, " \
    "keepdims=True) - max(where(arange(" C ") == t, x, -inf), axis=-1, keepdims=True))"

#define ROWS_SOFTMAX(ax) \
    "exp(x - max(x, axis=" ax ", keepdims=True)) / sum(exp(x - max(x, axis=" ax ", keepdims=True)), axis=" ax \
    ", keepdims=True)"
/* x * 0 and the row's max (or, for x > 0, min) of zeros: the max's sign
 * where x < 0, the min's where x > 0 (-0 - min) */
#define ROWS_ZEROS \
    "where(x < 0, x * 0 + max(where(x < 1.999, -abs(x), x) * 0, axis=-1, keepdims=True), " \
    "-(x * 0) - min(where(x > -1.999, abs(x), x) * 0, axis=-1, keepdims=True))"
static const rows_case rows_cases[] = {
    {"softmax", ROWS_SOFTMAX("-1"), SMELT_F32, 2, {37, 500}, false, 1, false},
    {"softmax f16", ROWS_SOFTMAX("-1"), SMELT_F16, 2, {20, 300}, false, 1, false},
    {"softmax over two axes", ROWS_SOFTMAX("(1, 2)"), SMELT_F32, 3, {6, 20, 30}, false, 1, false},
    {"log_softmax",
     "x - max(x, axis=-1, keepdims=True) - log(sum(exp(x - max(x, axis=-1, keepdims=True)), axis=-1, keepdims=True))",
     SMELT_F64, 2, {30, 257}, false, 1, false},
    {"layernorm", "(x - mean(x, axis=-1, keepdims=True)) / sqrt(var(x, axis=-1, keepdims=True) + 1e-5) * w + b",
     SMELT_F32, 3, {4, 10, 333}, true, 1, false},
    {"layernorm f64", "(x - mean(x, axis=-1, keepdims=True)) / sqrt(var(x, axis=-1, keepdims=True) + 1e-5) * w + b",
     SMELT_F64, 2, {16, 100}, false, 1, false},
    {"rmsnorm", "x / sqrt(mean(x * x, axis=-1, keepdims=True) + 1e-6) * w", SMELT_F32, 2, {33, 1000}, true, 1, false},
    /* rows of several runs: the last pass of a row deferred into the next
     * row's pass, some calls a time (src/codegen/emit-rows.c, SMELT_ROWS_DEFER),
     * runs that start inside a row of the reduced axes */
    {"rmsnorm, long rows", "x / sqrt(mean(x * x, axis=-1, keepdims=True) + 1e-6) * w", SMELT_F32, 2, {6, 5000},
     false, 1, false},
    {"a kept operand, long rows", "x * x / sum(x * x, axis=-1, keepdims=True) + w", SMELT_F32, 2, {7, 4100}, false, 1,
     false},
    {"layernorm over two long axes",
     "(x - mean(x, axis=(1, 2), keepdims=True)) / sqrt(var(x, axis=(1, 2), keepdims=True) + 1e-5) * w + b",
     SMELT_F32, 3, {5, 30, 170}, false, 1, false},
    /* the device's held form: w, first read by the second pass, must not
     * take x's place in shared memory while that pass still reads x */
    {"inputs held in turn",
     "(x - max(x, axis=-1, keepdims=True)) * w / sum((x - max(x, axis=-1, keepdims=True)) * w, axis=-1, keepdims=True) + w",
     SMELT_F32, 2, {9, 300}, false, 1, false},
    {"argmax and sum", "where(argmax(x, axis=-1, keepdims=True) > 3, x, -x) / sum(abs(x), axis=-1, keepdims=True)",
     SMELT_F32, 2, {25, 70}, false, 1, false},
    /* rows over several warps on the device (SMELT_CUDA_ROWS_WARPS) */
    {"argmax and sum, long rows",
     "where(argmax(x, axis=-1, keepdims=True) > 3, x, -x) / sum(abs(x), axis=-1, keepdims=True)", SMELT_F32, 2,
     {3, 2100}, false, 1, false},
    {"softmax f16, long rows", ROWS_SOFTMAX("-1"), SMELT_F16, 2, {4, 1500}, false, 1, false},
    /* (f32 sums accumulate in f64, exactly over a lane's elements here: f64
     * rows show an order that is not the lanes') */
    {"layernorm f64, long rows",
     "(x - mean(x, axis=-1, keepdims=True)) / sqrt(var(x, axis=-1, keepdims=True) + 1e-5) * w + b", SMELT_F64, 2,
     {3, 1300}, false, 1, false},
    /* rows of exactly a block's elements (no test against the row's end;
     * 8 rows: the inputs' inf and NaN leave rows 0 and 3 to 7 finite);
     * max, min and argmin fold in every warp at once (their bits in any
     * grouping): zeros of both signs, where max's +0 (x >= 1.999) and
     * min's -0 (x <= -1.999) come from a few elements of some rows, in any
     * warp, and a negative x's zero shows the result's sign */
    {"layernorm f64, exact long rows",
     "(x - mean(x, axis=-1, keepdims=True)) / sqrt(var(x, axis=-1, keepdims=True) + 1e-5) * w + b", SMELT_F64, 2,
     {8, 2048}, false, 1, false},
    {"signed zeros and argmin, exact long rows",
     "where(argmin(x, axis=-1, keepdims=True) > 1000, " ROWS_ZEROS ", -(" ROWS_ZEROS "))", SMELT_F32, 2, {8, 2048},
     false, 1, false},
    /* rows that fill blocks of warps of a number of elements a lane that is
     * no power of 2: 4 warps of 10 (on the CPU: long rows) */
    {"softmax, exact long rows of 1280", ROWS_SOFTMAX("-1"), SMELT_F32, 2, {5, 1280}, false, 1, false},
    {"softmax over the first axis", ROWS_SOFTMAX("0"), SMELT_F32, 2, {300, 37}, false, 1, false},
    {"softmax over a middle axis", ROWS_SOFTMAX("1"), SMELT_F64, 3, {5, 40, 7}, false, 1, false},
    {"softmax over the outer axes", ROWS_SOFTMAX("(0, 1)"), SMELT_F32, 3, {9, 4, 20}, false, 1, false},
    {"layernorm over the first axis",
     "(x - mean(x, axis=0, keepdims=True)) / sqrt(var(x, axis=0, keepdims=True) + 1e-5) * w + b", SMELT_F32, 2,
     {64, 50}, false, 1, false},
    {"logsumexp without keepdims", "logsumexp(x, axis=-1)", SMELT_F32, 2, {40, 129}, false, 1, false},
    {"mean and var without keepdims", "mean(x, axis=1) * 3 + var(x, axis=1)", SMELT_F64, 3, {4, 60, 9},
     false, 1, false},
    {"cross-entropy", ROWS_XENT("300"), SMELT_F32, 2, {41, 300}, false, 2, true},
    {"cross-entropy f64", ROWS_XENT("77"), SMELT_F64, 3, {3, 5, 77}, false, 2, true},
    {"integers", "x * 3 - sum(x, axis=-1, keepdims=True) // 7 + max(x * w, axis=-1, keepdims=True)", SMELT_I32, 2,
     {19, 90}, true, 1, false},
    {"integers, long rows", "x * 3 - sum(x, axis=-1, keepdims=True) // 7 + max(x * w, axis=-1, keepdims=True)",
     SMELT_I32, 2, {3, 1100}, true, 1, false},
};

/* The graph of case c (outputs: the expression's value y, then with extra
 * max(y, keepdims) and its square); returns the number of outputs. */
static inline int rows_graph(smelt_graph *g, const rows_case *c, smelt_node **outs)
{
    int64_t last = c->shape[c->ndim - 1], tshape[3];
    memcpy(tshape, c->shape, sizeof tshape);
    tshape[c->ndim - 1] = 1;
    smelt_node *in[ROWS_MAX_IN] = {smelt_input(g, "x", c->dt, c->ndim, c->shape),
                                   smelt_input(g, "w", c->dt, 1, &last), smelt_input(g, "b", c->dt, 1, &last),
                                   c->targets ? smelt_input(g, "t", SMELT_I64, c->ndim, tshape) : NULL};
    outs[0] = smelt_expr(g, c->expr, (const char *[]){"x", "w", "b", "t"}, in, c->targets ? 4 : 3);
    if (!c->extra)
        return 1;
    int ax = -1;
    outs[1] = smelt_reduce(g, SMELT_OP_MAX, outs[0], 1, &ax, 1);
    outs[2] = smelt_mul(g, outs[1], outs[1]);
    return 3;
}

/* Random inputs with special values in x (floats: -0.0, inf and NaN in
 * three rows; targets: the first and the last index among them); returns
 * their number. */
static inline int rows_inputs(smelt_ctx *ctx, const rows_case *c, trng *r, smelt_tensor **in)
{
    int64_t last = c->shape[c->ndim - 1];
    in[0] = t_rand(ctx, r, c->dt, c->ndim, c->shape);
    in[1] = t_rand(ctx, r, c->dt, 1, &last);
    in[2] = t_rand(ctx, r, c->dt, 1, &last);
    in[3] = NULL;
    if (c->targets) {
        int64_t tshape[3];
        memcpy(tshape, c->shape, sizeof tshape);
        tshape[c->ndim - 1] = 1;
        in[3] = t_tensor(ctx, SMELT_I64, c->ndim, tshape);
        int64_t rows = smelt_tensor_numel(in[3]);
        for (int64_t i = 0; i < rows; i++)
            t_set_i64(in[3], i, i == 1 ? 0 : i == 2 ? last - 1 : (int64_t)(trng_u64(r) % (uint64_t)last));
    }
    if (c->dt == SMELT_F32 || c->dt == SMELT_F64 || c->dt == SMELT_F16) {
        t_set(in[0], 3, -0.0);
        t_set(in[0], last + 5, INFINITY);
        t_set(in[0], 2 * last + 1, NAN);
    }
    return c->targets ? 4 : 3;
}
/* Case c's graph (*n_out outputs in outs) and its inputs, from a seed of
 * its own. */
static inline smelt_graph *rows_setup(smelt_ctx *ctx, int c, smelt_node **outs, int *n_out, smelt_tensor **in,
                                      int *n_in)
{
    smelt_graph *g = t_graph(ctx);
    *n_out = rows_graph(g, &rows_cases[c], outs);
    T_OK(ctx, smelt_graph_status(g));
    trng r;
    trng_init(&r, 40 + (uint64_t)c);
    *n_in = rows_inputs(ctx, &rows_cases[c], &r, in);
    return g;
}
/* Case c's kernels at opt_level 3. */
static inline int rows_kernels(int c) { return rows_cases[c].kernels; }
#endif
