/* Matrix product cases for tests/test-matmul.c and tests/test-cuda.c: an
 * expression over a and b with their shapes, and the tolerance against the
 * float64 reference (k: the inner dimension). */
#ifndef SMELT_MATMUL_CASES_H
#define SMELT_MATMUL_CASES_H
#include "common.h"

static t_tol mm_tol(smelt_dtype dt, int64_t k) { return (t_tol){.ulps = 4, .atol = 8.0 * (double)(k + 1) * t_eps(dt)}; }

typedef struct mcase {
    const char *expr; /* over a, b */
    int na, nb;
    int64_t as[4], bs[4];
    bool packed; /* an operand BLAS cannot read as it lies: packed on the CPU, refused on a device */
} mcase;

static const mcase cases[] = {
    {"a @ b", 2, 2, {3, 4}, {4, 5}, false},
    {"a @ b", 1, 2, {4}, {4, 5}, false},
    {"a @ b", 2, 1, {3, 4}, {4}, false},
    {"a @ b", 1, 1, {7}, {7}, false},
    {"a @ b", 3, 3, {2, 3, 4}, {2, 4, 5}, false},
    {"a @ b", 4, 3, {2, 1, 3, 4}, {5, 4, 6}, false},
    {"a @ b", 2, 3, {3, 4}, {2, 4, 5}, false},
    {"a.T @ b", 2, 2, {40, 30}, {40, 20}, false},                 /* transposed: a BLAS flag */
    {"a @ b.T", 2, 2, {30, 40}, {20, 40}, false},
    {"a.T @ b.T", 2, 2, {33, 17}, {9, 33}, false},
    {"a[:, ::2] @ b[1:]", 2, 2, {6, 10}, {6, 4}, true},          /* stepped: packed */
    {"flip(a, 0) @ b", 2, 2, {5, 3}, {3, 4}, true},              /* negative strides: packed */
    {"transpose(a, (0, 2, 1)) @ b", 3, 2, {3, 5, 4}, {5, 6}, false},
    {"a @ b", 2, 2, {0, 4}, {4, 5}, false},
    {"a @ b", 2, 2, {3, 0}, {0, 5}, false},                       /* an empty sum: zeros */
    {"a @ b", 2, 2, {3, 4}, {4, 0}, false},
    {"broadcast_to(a, (3, 4)) @ b", 2, 2, {1, 4}, {4, 2}, true}, /* stride 0: packed */
    /* tiles (the CPU's BLAS calls, src/runtime/exec.c): of columns, of rows and columns (b transposed) */
    {"a @ b", 2, 2, {5, 30}, {30, 700}, false},
    {"a @ b.T", 2, 2, {1100, 8}, {300, 8}, false},
};

/* An MLP block over x [64, 48]: gelu_tanh(x @ w1 + b1) @ w2 + b2 + x (two
 * products, their epilogues); its five inputs random in in. */
static inline smelt_node *mm_mlp(smelt_ctx *ctx, smelt_graph *g, trng *r, smelt_tensor **in)
{
    smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(64, 48)), *w1 = smelt_input(g, "w1", SMELT_F32, SHP(48, 96));
    smelt_node *b1 = smelt_input(g, "b1", SMELT_F32, SHP(96)), *w2 = smelt_input(g, "w2", SMELT_F32, SHP(96, 48));
    smelt_node *b2 = smelt_input(g, "b2", SMELT_F32, SHP(48));
    smelt_node *h = smelt_unary(g, SMELT_OP_GELU_TANH, smelt_add(g, smelt_matmul(g, x, w1), b1));
    const int64_t shapes[5][2] = {{64, 48}, {48, 96}, {96, 0}, {96, 48}, {48, 0}};
    for (int i = 0; i < 5; i++)
        in[i] = t_rand(ctx, r, SMELT_F32, shapes[i][1] ? 2 : 1, shapes[i]);
    return smelt_add(g, smelt_add(g, smelt_matmul(g, h, w2), b2), x);
}

/* one head-batched attention over q, k, v [B, H, 32, 16], the heads merged
 * into MERGED, "(B, 32, H * 16)" */
#define MM_ATTENTION_OF(merged)                                                                               \
    "reshape(transpose((exp(q @ transpose(k, (0, 1, 3, 2)) / 8 - max(q @ transpose(k, (0, 1, 3, 2)) / 8, "  \
    "axis=-1, keepdims=True)) / sum(exp(q @ transpose(k, (0, 1, 3, 2)) / 8 - max(q @ transpose(k, (0, 1, 3, "  \
    "2)) / 8, axis=-1, keepdims=True)), axis=-1, keepdims=True)) @ v, (0, 2, 1, 3)), " merged ")"
/* ... over [2, 4, 32, 16]: [2, 32, 64] */
#define MM_ATTENTION MM_ATTENTION_OF("(2, 32, 64)")

#endif
