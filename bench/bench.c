/* smelt-bench: fused against unfused, side by side in one run.
 *
 * Every workload is built once with the builder API (as a traced function
 * would record it), planned at opt_level 0 (one kernel per operator: the
 * unfused path, compiled by the same backend) and at opt_level 3 (fused), and
 * timed on the same inputs, as the peers time theirs: each plan's --runs
 * timed calls back to back after two untimed ones, the median.  The
 * machine's copy bandwidth is measured in the same run.  With --peers,
 * bench/peers/peers.py times numpy and numexpr on the same workloads, and
 * bench/peers/jax_peers.py JAX jit on the CPU (with the python of
 * BUILD/jax-venv, which scripts/bench --peers installs from PyPI).
 *
 * --device cuda runs the same workloads on the GPU (backend NVRTC, device
 * tensors; see the GPU section below and docs/cuda.md); with --peers,
 * bench/peers/gpu_peers.py times PyTorch, torch.compile, CuPy and JAX.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <math.h>
#include <pthread.h>
#include <smelt.h>
#include <smelt_cuda.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#if defined(__SSE2__)
#include <immintrin.h>
#endif

#define MAXIO 8

/* ---- allocations --------------------------------------------------------
 * alloc_per_call: the allocations the library made during a timed run, as
 * the plan's statistics count them (smelt_plan_stats.run_allocs). */
static long allocs(const smelt_plan *p)
{
    smelt_plan_stats s;
    return smelt_plan_get_stats(p, &s) ? 0 : (long)s.run_allocs;
}

typedef struct wl {
    const char *name;
    int n_in, n_out;
    /* build outputs from inputs; n = elements of the main operand */
    void (*build)(smelt_graph *g, smelt_node **in, smelt_node **out);
    /* input shapes for n elements */
    void (*shapes)(int64_t n, int *ndim, int64_t (*shape)[4]);
    int64_t n_default; /* 0: the global --n; else at most this on the GPU (the CPU runs --n) */
    double bytes_per_elem; /* bytes that must move per element (f32) */
    const int *donate;     /* output k is an update of input donate[k] (the donated run) */
} wl;

/* ---- workloads ---------------------------------------------------------- */
static smelt_node *S(smelt_graph *g, double v) { return smelt_scalar(g, v); }

static void b_add(smelt_graph *g, smelt_node **in, smelt_node **out) { out[0] = smelt_add(g, in[0], in[1]); }

static void b_chain8(smelt_graph *g, smelt_node **in, smelt_node **out)
{
    smelt_node *a = in[0], *b = in[1], *c = in[2];
    smelt_node *x = smelt_add(g, smelt_mul(g, a, b), c);
    x = smelt_sub(g, smelt_mul(g, x, a), b);
    x = smelt_add(g, smelt_mul(g, x, c), a);
    out[0] = smelt_sub(g, smelt_mul(g, x, b), c);
}

/* 0.5*x*(1+tanh(sqrt(2/pi)*(x+0.044715*x^3))), written out as a user would */
static void b_gelu_tanh(smelt_graph *g, smelt_node **in, smelt_node **out)
{
    smelt_node *x = in[0];
    smelt_node *x3 = smelt_mul(g, smelt_mul(g, x, x), x);
    smelt_node *inner = smelt_mul(g, S(g, 0.7978845608028654), smelt_add(g, x, smelt_mul(g, S(g, 0.044715), x3)));
    smelt_node *t = smelt_unary(g, SMELT_OP_TANH, inner);
    out[0] = smelt_mul(g, smelt_mul(g, S(g, 0.5), x), smelt_add(g, S(g, 1.0), t));
}

/* 0.5*x*(1+erf(x/sqrt(2))), the exact GELU (BERT's; PyTorch's default), written out */
static void b_gelu(smelt_graph *g, smelt_node **in, smelt_node **out)
{
    smelt_node *x = in[0];
    smelt_node *e = smelt_unary(g, SMELT_OP_ERF, smelt_mul(g, x, S(g, 0.7071067811865476)));
    out[0] = smelt_mul(g, smelt_mul(g, S(g, 0.5), x), smelt_add(g, S(g, 1.0), e));
}

/* x * sigmoid(x) = x / (1 + exp(-x)) */
static void b_swish(smelt_graph *g, smelt_node **in, smelt_node **out)
{
    smelt_node *x = in[0];
    smelt_node *e = smelt_unary(g, SMELT_OP_EXP, smelt_unary(g, SMELT_OP_NEG, x));
    out[0] = smelt_div(g, x, smelt_add(g, S(g, 1.0), e));
}

/* where(a > 0, a * b, exp(c)) + 1, the README's example: inputs read in a
 * branch, an exp in one */
static void b_where_exp(smelt_graph *g, smelt_node **in, smelt_node **out)
{
    smelt_node *a = in[0], *b = in[1], *c = in[2];
    smelt_node *w = smelt_where(g, smelt_binary(g, SMELT_OP_GT, a, S(g, 0.0)), smelt_mul(g, a, b),
                                smelt_unary(g, SMELT_OP_EXP, c));
    out[0] = smelt_add(g, w, S(g, 1.0));
}

/* one Adam step (t = 10): param, grad, m, v -> param', m', v' */
static void b_adam(smelt_graph *g, smelt_node **in, smelt_node **out)
{
    const double lr = 1e-3, b1 = 0.9, b2 = 0.999, eps = 1e-8, t = 10;
    smelt_node *p = in[0], *gr = in[1], *m = in[2], *v = in[3];
    smelt_node *m2 = smelt_add(g, smelt_mul(g, S(g, b1), m), smelt_mul(g, S(g, 1 - b1), gr));
    smelt_node *v2 = smelt_add(g, smelt_mul(g, S(g, b2), v),
                               smelt_mul(g, S(g, 1 - b2), smelt_mul(g, gr, gr)));
    smelt_node *mh = smelt_div(g, m2, S(g, 1 - pow(b1, t)));
    smelt_node *vh = smelt_div(g, v2, S(g, 1 - pow(b2, t)));
    smelt_node *den = smelt_add(g, smelt_unary(g, SMELT_OP_SQRT, vh), S(g, eps));
    out[0] = smelt_sub(g, p, smelt_mul(g, S(g, lr), smelt_div(g, mh, den)));
    out[1] = m2;
    out[2] = v2;
}

/* relu(matrix + bias row) */
static void b_bias_relu(smelt_graph *g, smelt_node **in, smelt_node **out)
{
    out[0] = smelt_unary(g, SMELT_OP_RELU, smelt_add(g, in[0], in[1]));
}

/* 100 identical layers  x = relu(x*w + b)*0.5 + x*0.5  (6 operators), each
 * followed by a barrier: the non-fusible operator (a matrix product in a
 * real network) that makes every layer its own cluster. */
static void b_layers100(smelt_graph *g, smelt_node **in, smelt_node **out)
{
    smelt_node *x = in[0], *w = in[1], *b = in[2];
    for (int l = 0; l < 100; l++) {
        smelt_node *y = smelt_unary(g, SMELT_OP_RELU, smelt_add(g, smelt_mul(g, x, w), b));
        x = smelt_add(g, smelt_mul(g, y, S(g, 0.5)), smelt_mul(g, x, S(g, 0.5)));
        x = smelt_unary(g, SMELT_OP_BARRIER, x);
    }
    out[0] = x;
}

/* softmax over the rows: exp(x - max) / sum(exp(x - max)), as a user writes it */
static void b_softmax(smelt_graph *g, smelt_node **in, smelt_node **out)
{
    const int last[] = {-1};
    smelt_node *x = in[0];
    smelt_node *e = smelt_unary(g, SMELT_OP_EXP, smelt_sub(g, x, smelt_reduce(g, SMELT_OP_MAX, x, 1, last, 1)));
    out[0] = smelt_div(g, e, smelt_reduce(g, SMELT_OP_SUM, e, 1, last, 1));
}

/* layer normalisation of the rows of y with weight and bias: the row program */
static smelt_node *layernorm_rows(smelt_graph *g, smelt_node *y, smelt_node *w, smelt_node *b)
{
    const int last[] = {-1};
    smelt_node *d = smelt_sub(g, y, smelt_reduce(g, SMELT_OP_MEAN, y, 1, last, 1));
    smelt_node *var = smelt_reduce(g, SMELT_OP_MEAN, smelt_mul(g, d, d), 1, last, 1);
    smelt_node *r = smelt_unary(g, SMELT_OP_RSQRT, smelt_add(g, var, S(g, 1e-5)));
    return smelt_add(g, smelt_mul(g, smelt_mul(g, d, r), w), b);
}

/* layer normalisation over the rows, with weight and bias rows:
 * (x - mean) / sqrt(mean((x - mean)^2) + 1e-5) * w + b */
static void b_layernorm(smelt_graph *g, smelt_node **in, smelt_node **out)
{
    out[0] = layernorm_rows(g, in[0], in[1], in[2]);
}

/* an embedding: layernorm(W[ids] + P), W [30522, 384] (BERT's vocabulary),
 * ids [B, 128] i64, P [128, 384]: W's rows read by index inside the row
 * program (one kernel, no gathered copy) */
static void b_embed_ln(smelt_graph *g, smelt_node **in, smelt_node **out)
{
    const int last[] = {-1};
    smelt_node *x = smelt_add(g, smelt_take(g, in[0], in[1], 0), in[2]);
    smelt_node *d = smelt_sub(g, x, smelt_reduce(g, SMELT_OP_MEAN, x, 1, last, 1));
    smelt_node *var = smelt_reduce(g, SMELT_OP_MEAN, smelt_mul(g, d, d), 1, last, 1);
    out[0] = smelt_mul(g, d, smelt_unary(g, SMELT_OP_RSQRT, smelt_add(g, var, S(g, 1e-5))));
}

/* log-softmax over the rows: x - max - log(sum(exp(x - max))) */
static void b_log_softmax(smelt_graph *g, smelt_node **in, smelt_node **out)
{
    const int last[] = {-1};
    smelt_node *x = in[0];
    smelt_node *d = smelt_sub(g, x, smelt_reduce(g, SMELT_OP_MAX, x, 1, last, 1));
    smelt_node *s = smelt_reduce(g, SMELT_OP_SUM, smelt_unary(g, SMELT_OP_EXP, d), 1, last, 1);
    out[0] = smelt_sub(g, d, smelt_unary(g, SMELT_OP_LOG, s));
}

/* RMS normalisation over the rows, with a weight vector:
 * x / sqrt(mean(x*x) + 1e-6) * w */
static void b_rmsnorm(smelt_graph *g, smelt_node **in, smelt_node **out)
{
    const int last[] = {-1};
    smelt_node *x = in[0];
    smelt_node *ms = smelt_reduce(g, SMELT_OP_MEAN, smelt_mul(g, x, x), 1, last, 1);
    smelt_node *rms = smelt_unary(g, SMELT_OP_SQRT, smelt_add(g, ms, S(g, 1e-6)));
    out[0] = smelt_mul(g, smelt_div(g, x, rms), in[1]);
}

/* mean squared error, as users write it: mean((a - b) ** 2), one scalar (the
 * power is a square: src/passes/simplify.c).  The unfused plan (opt_level 0)
 * runs no pass: its pow kernel is the general power, which the CC tier's
 * compiler reduces to a product for the constant exponent and TCC computes
 * in full, so TCC's speedup here is mostly the rewrite's */
static void b_mse(smelt_graph *g, smelt_node **in, smelt_node **out)
{
    smelt_node *d = smelt_sub(g, in[0], in[1]);
    out[0] = smelt_reduce(g, SMELT_OP_MEAN, smelt_binary(g, SMELT_OP_POW, d, S(g, 2)), 0, NULL, 0);
}

/* sums of the rows and of the columns: sum(x, axis=-1), sum(x, axis=0) */
static void b_sum_rows(smelt_graph *g, smelt_node **in, smelt_node **out)
{
    const int last[] = {-1};
    out[0] = smelt_reduce(g, SMELT_OP_SUM, in[0], 1, last, 0);
}

static void b_sum_cols(smelt_graph *g, smelt_node **in, smelt_node **out)
{
    const int first[] = {0};
    out[0] = smelt_reduce(g, SMELT_OP_SUM, in[0], 1, first, 0);
}

/* mean cross-entropy of logits x [rows, cols] and integer targets t [rows, 1]:
 * mean(logsumexp(x) - x[t]), the target's logit picked by
 * take_along_axis(x, t, -1), as every peer picks it (until 2026-11-29 by a
 * one-hot max(where(arange(cols) == t, x, -inf)): a third pass over the row) */
static void b_xent(smelt_graph *g, smelt_node **in, smelt_node **out)
{
    const int last[] = {-1};
    smelt_node *x = in[0], *t = in[1];
    smelt_node *m = smelt_reduce(g, SMELT_OP_MAX, x, 1, last, 1);
    smelt_node *s = smelt_reduce(g, SMELT_OP_SUM, smelt_unary(g, SMELT_OP_EXP, smelt_sub(g, x, m)), 1, last, 1);
    smelt_node *pick = smelt_take_along_axis(g, x, t, 1);
    smelt_node *loss = smelt_sub(g, smelt_add(g, smelt_unary(g, SMELT_OP_LOG, s), m), pick);
    out[0] = smelt_reduce(g, SMELT_OP_MEAN, loss, 0, NULL, 0);
}

/* a transposed operand added to a matrix: a.T + b, a [rows, cols], b [cols, rows] */
static void b_transpose_add(smelt_graph *g, smelt_node **in, smelt_node **out)
{
    out[0] = smelt_add(g, smelt_transpose(g, in[0], NULL), in[1]);
}

/* relu of four [rows, cols / 4] matrices side by side: concat((a, b, c, d), axis=1),
 * each part read where it lies (the kernel runs once per part) */
static void b_concat_relu(smelt_graph *g, smelt_node **in, smelt_node **out)
{
    out[0] = smelt_unary(g, SMELT_OP_RELU, smelt_concat(g, 4, in, 1));
}

/* a transformer MLP block: layernorm(gelu_tanh(x @ w1 + b1) @ w2 + b2 + x) * lw + lb,
 * x [rows, 1024], w1 [1024, 4096], w2 [4096, 1024] */
static void b_mlp(smelt_graph *g, smelt_node **in, smelt_node **out)
{
    smelt_node *x = in[0];
    smelt_node *h = smelt_unary(g, SMELT_OP_GELU_TANH, smelt_add(g, smelt_matmul(g, x, in[1]), in[2]));
    smelt_node *y = smelt_add(g, smelt_add(g, smelt_matmul(g, h, in[3]), in[4]), x);
    out[0] = layernorm_rows(g, y, in[5], in[6]);
}

/* one head-batched attention: softmax(q @ k^T / 8) @ v over q, k, v [batch, 16 heads,
 * 512, 64], then the heads merged: [batch, 512, 1024] */
static void b_attention(smelt_graph *g, smelt_node **in, smelt_node **out)
{
    const int last[] = {-1};
    smelt_node *kt = smelt_transpose(g, in[1], (const int[]){0, 1, 3, 2});
    smelt_node *s = smelt_div(g, smelt_matmul(g, in[0], kt), S(g, 8.0));
    smelt_node *e = smelt_unary(g, SMELT_OP_EXP, smelt_sub(g, s, smelt_reduce(g, SMELT_OP_MAX, s, 1, last, 1)));
    smelt_node *o = smelt_matmul(g, smelt_div(g, e, smelt_reduce(g, SMELT_OP_SUM, e, 1, last, 1)), in[2]);
    const int64_t *q = smelt_node_shape(in[0]);
    out[0] = smelt_reshape(g, smelt_transpose(g, o, (const int[]){0, 2, 1, 3}), 3,
                           (const int64_t[]){q[0], q[2], q[1] * q[3]});
}

/* a ResNet layer: relu(batchnorm(conv3x3(x, w, pad 1))), x [8, 64, 56, 56], w [64, 64, 3, 3],
 * the batch-norm's scale, shift, mean and variance inputs [64] (a product per tap, one epilogue) */
static void b_conv_bn_relu(smelt_graph *g, smelt_node **in, smelt_node **out)
{
    smelt_window win;
    smelt_window_init(&win);
    win.pads[0] = win.pads[1] = win.pads[2] = win.pads[3] = 1;
    smelt_node *c = smelt_conv(g, in[0], in[1], NULL, &win), *r[4];
    for (int i = 0; i < 4; i++)
        r[i] = smelt_reshape(g, in[2 + i], 3, (const int64_t[]){-1, 1, 1});
    smelt_node *inv = smelt_div(g, r[0], smelt_unary(g, SMELT_OP_SQRT, smelt_add(g, r[3], S(g, 1e-5))));
    out[0] = smelt_unary(g, SMELT_OP_RELU, smelt_add(g, smelt_mul(g, smelt_sub(g, c, r[2]), inv), r[1]));
}

/* max over time of gelu(conv1d(x, w, pad 2, 2 groups) + b), x [16, 512, 256] (NCW),
 * w [256, 256, 5]: a product per tap, one epilogue and reduction */
static void b_conv1d_gelu(smelt_graph *g, smelt_node **in, smelt_node **out)
{
    smelt_window win;
    smelt_window_init(&win);
    win.pads[1] = win.pads[3] = 2;
    win.groups = 2;
    out[0] = smelt_global_max_pool(g, smelt_unary(g, SMELT_OP_GELU, smelt_conv(g, in[0], in[1], in[2], &win)));
}

static void sh_conv_bn_relu(int64_t n, int *nd, int64_t (*s)[4])
{
    (void)n;
    const int64_t shp[6][4] = {{8, 64, 56, 56}, {64, 64, 3, 3}, {64}, {64}, {64}, {64}};
    for (int i = 0; i < 6; i++) {
        nd[i] = i < 2 ? 4 : 1;
        memcpy(s[i], shp[i], sizeof shp[i]);
    }
}

static void sh_conv1d_gelu(int64_t n, int *nd, int64_t (*s)[4])
{
    (void)n;
    const int64_t shp[3][4] = {{16, 512, 256}, {256, 256, 5}, {256}};
    for (int i = 0; i < 3; i++) {
        nd[i] = i < 2 ? 3 : 1;
        memcpy(s[i], shp[i], sizeof shp[i]);
    }
}

static void sh_flat(int64_t n, int *nd, int64_t (*s)[4])
{
    for (int i = 0; i < MAXIO; i++) {
        nd[i] = 1;
        s[i][0] = n;
    }
}

static int64_t side(int64_t n)
{
    int64_t c = (int64_t)sqrt((double)n);
    while (n % c)
        c--;
    return c;
}

/* --cols C: the reductions' rows C long (SMELT_BENCH_COLS for the peers) */
static int64_t cols_given;

/* the reductions' rows: the largest divisor of n up to 4096 (4096 x 4096
 * at 16M, the GPU's 16384 x 4096 at 64M: the shapes), or --cols */
static int64_t row_side(int64_t n)
{
    if (cols_given)
        return cols_given;
    int64_t c = side(n) < 4096 ? side(n) : 4096;
    while (n % c)
        c--;
    return c;
}

/* a (rows, c) matrix, then (1, c) rows */
static void sh_rows_of(int64_t n, int64_t c, int *nd, int64_t (*s)[4])
{
    for (int i = 0; i < MAXIO; i++) {
        nd[i] = 2;
        s[i][0] = i == 0 ? n / c : 1;
        s[i][1] = c;
    }
}

/* a (rows, cols) matrix, then (1, cols) rows: cols sqrt(n) */
static void sh_rows(int64_t n, int *nd, int64_t (*s)[4]) { sh_rows_of(n, side(n), nd, s); }
/* the same, rows of at most 4096 */
static void sh_red(int64_t n, int *nd, int64_t (*s)[4]) { sh_rows_of(n, row_side(n), nd, s); }

/* a (rows, cols) matrix, then (cols) vectors: rows of at most 4096 */
static void sh_red_vec(int64_t n, int *nd, int64_t (*s)[4])
{
    sh_red(n, nd, s);
    for (int i = 1; i < MAXIO; i++) {
        nd[i] = 1;
        s[i][0] = s[i][1];
    }
}

/* logits [rows, 2 cols] (4096 x 8192 at 16M: 2n elements), then targets [rows, 1] */
static void sh_xent(int64_t n, int *nd, int64_t (*s)[4])
{
    int64_t c = row_side(n);
    nd[0] = nd[1] = 2;
    s[0][0] = s[1][0] = n / c;
    s[0][1] = 2 * c;
    s[1][1] = 1;
}

/* a (rows, cols) matrix and a (cols, rows) one */
static void sh_transposed(int64_t n, int *nd, int64_t (*s)[4])
{
    sh_rows(n, nd, s);
    s[1][0] = s[0][1];
    s[1][1] = s[0][0];
}

/* concat_relu: four (rows, cols / 4) matrices, n elements in all */
static void sh_quarters(int64_t n, int *nd, int64_t (*s)[4])
{
    sh_rows(n, nd, s);
    for (int i = 0; i < 4; i++)
        s[i][0] = n / side(n), s[i][1] = side(n) / 4 > 0 ? side(n) / 4 : 1;
}

/* mlp: x [n / 8192, 1024] (2048 rows at 16M), w1, b1, w2, b2, the layernorm's weight and bias */
static void sh_mlp(int64_t n, int *nd, int64_t (*s)[4])
{
    const int64_t D = 1024, H = 4096, R = n / (8 * D) > 0 ? n / (8 * D) : 1;
    const int64_t shp[7][2] = {{R, D}, {D, H}, {H, 0}, {H, D}, {D, 0}, {D, 0}, {D, 0}};
    for (int i = 0; i < 7; i++) {
        nd[i] = shp[i][1] ? 2 : 1;
        s[i][0] = shp[i][0];
        s[i][1] = shp[i][1];
    }
}

/* embed_ln: W [30522, 384], ids [n / 49152, 128] (64 at n = 3145728), P [128, 384] */
static void sh_embed(int64_t n, int *nd, int64_t (*s)[4])
{
    nd[0] = nd[1] = nd[2] = 2;
    s[0][0] = 30522, s[0][1] = 384;
    s[1][0] = n / (128 * 384) > 0 ? n / (128 * 384) : 1, s[1][1] = 128;
    s[2][0] = 128, s[2][1] = 384;
}

/* attention: q, k, v [n / 2M, 16, 512, 64] (8 at 16M) */
static void sh_attention(int64_t n, int *nd, int64_t (*s)[4])
{
    for (int i = 0; i < 3; i++) {
        nd[i] = 4;
        s[i][0] = n >> 21 > 0 ? n >> 21 : 1;
        s[i][1] = 16, s[i][2] = 512, s[i][3] = 64;
    }
}

static const int adam_donate[] = {0, 2, 3}; /* param' m' v' over param m v */
static const wl workloads[] = {
    {"add", 2, 1, b_add, sh_flat, 0, 12, NULL},
    {"chain8", 3, 1, b_chain8, sh_flat, 0, 16, NULL},
    {"gelu_tanh", 1, 1, b_gelu_tanh, sh_flat, 0, 8, NULL},
    {"gelu", 1, 1, b_gelu, sh_flat, 0, 8, NULL},
    {"swish", 1, 1, b_swish, sh_flat, 0, 8, NULL},
    {"where_exp", 3, 1, b_where_exp, sh_flat, 0, 16, NULL},
    {"adam", 4, 3, b_adam, sh_flat, 0, 28, adam_donate},
    {"bias_relu", 2, 1, b_bias_relu, sh_rows, 0, 8, NULL},
    /* 100 x (layer + barrier), 700 values: on the CPU its unfused plan
     * shares an arena when one buffer each would not fit (unfused_opt_for) */
    {"layers100", 3, 1, b_layers100, sh_rows, 1 << 22, 100 * 16, NULL},
    /* rows of 4096 (at 16M and up; sqrt(n) below): one read and one write is the least */
    {"softmax", 1, 1, b_softmax, sh_red, 0, 8, NULL},
    {"layernorm", 3, 1, b_layernorm, sh_red, 0, 8, NULL},
    {"log_softmax", 1, 1, b_log_softmax, sh_red, 0, 8, NULL},
    {"rmsnorm", 2, 1, b_rmsnorm, sh_red_vec, 0, 8, NULL},
    /* a read of the matrix; the results (a row or a column) are small */
    {"sum_rows", 1, 1, b_sum_rows, sh_red, 0, 4, NULL},
    {"sum_cols", 1, 1, b_sum_cols, sh_red, 0, 4, NULL},
    /* two reads, one scalar */
    {"mse", 2, 1, b_mse, sh_flat, 0, 8, NULL},
    /* the logits (2n elements) read once; the targets: a value per row */
    {"xent", 2, 1, b_xent, sh_xent, 0, 8, NULL},
    /* a view: the transpose is read in place (two reads and a write) */
    {"transpose_add", 2, 1, b_transpose_add, sh_transposed, 0, 12, NULL},
    /* a concat: the parts read where they lie, no copy (a read and a write) */
    {"concat_relu", 4, 1, b_concat_relu, sh_quarters, 0, 8, NULL},
    /* matrix products (BLAS) with fused epilogues and normalisations: the time is the
     * figure (bytes per element: the main operand read and the result written) */
    {"mlp", 7, 1, b_mlp, sh_mlp, 0, 8, NULL},
    {"attention", 3, 1, b_attention, sh_attention, 0, 8, NULL},
    /* convolutions: a BLAS product per tap accumulated, the epilogue fused (fixed shapes) */
    {"conv_bn_relu", 6, 1, b_conv_bn_relu, sh_conv_bn_relu, 0, 8, NULL},
    {"conv1d_gelu", 3, 1, b_conv1d_gelu, sh_conv1d_gelu, 0, 4, NULL},
    /* n: the result's elements (64 x 128 x 384 at 3145728); what must move: each a gathered
     * row's element read and the result's written, 8 bytes (ids and P, 0.26 MB, aside) */
    {"embed_ln", 3, 1, b_embed_ln, sh_embed, 3145728, 8, NULL},
};
#define NWL (int)(sizeof workloads / sizeof workloads[0])

/* ---- helpers ------------------------------------------------------------ */
static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_d);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* Progress on a terminal (stderr): one line, rewritten in place; cleared
 * before a table row is printed.  Nothing when stderr is not a terminal. */
static int progress_on = -1;

static void progress(const char *fmt, ...)
{
    if (progress_on < 0)
        progress_on = isatty(2);
    if (!progress_on)
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("\r\033[K", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    fflush(stderr);
}

static void progress_clear(void)
{
    if (progress_on > 0) {
        fputs("\r\033[K", stderr);
        fflush(stderr);
    }
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static double urand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

#define CHECK(x)                                                                          \
    do {                                                                                  \
        int st_ = (x);                                                                    \
        if (st_) {                                                                        \
            fprintf(stderr, "smelt-bench: %s: %s (%s)\n", #x, smelt_strerror(st_),        \
                    smelt_errmsg(ctx));                                                   \
            exit(1);                                                                      \
        }                                                                                 \
    } while (0)

typedef struct copyjob {
    char *dst;
    const char *src;
    size_t bytes;
    int nt;
} copyjob;

/* A copy with non-temporal (streaming) stores: the destination's lines are
 * written without being read into the cache first, as wide as the CPU
 * allows (64-byte stores copy about 8 % faster than 16-byte ones on an AMD
 * EPYC; the CC tier's kernels use the widest their -march gives). */
#if defined(__SSE2__)
#if defined(__GNUC__)
__attribute__((target("avx512f"))) static size_t nt_copy64(char *dst, const char *src, size_t n)
{
    size_t i = 0;
    for (; i + 64 <= n; i += 64)
        _mm512_stream_si512((void *)(dst + i), _mm512_loadu_si512((const void *)(src + i)));
    return i;
}
#define NT_COPY64 1
#endif
static size_t nt_copy16(char *dst, const char *src, size_t n)
{
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m128i a = _mm_loadu_si128((const __m128i *)(const void *)(src + i));
        __m128i b = _mm_loadu_si128((const __m128i *)(const void *)(src + i + 16));
        __m128i c = _mm_loadu_si128((const __m128i *)(const void *)(src + i + 32));
        __m128i d = _mm_loadu_si128((const __m128i *)(const void *)(src + i + 48));
        _mm_stream_si128((__m128i *)(void *)(dst + i), a);
        _mm_stream_si128((__m128i *)(void *)(dst + i + 16), b);
        _mm_stream_si128((__m128i *)(void *)(dst + i + 32), c);
        _mm_stream_si128((__m128i *)(void *)(dst + i + 48), d);
    }
    return i;
}
#endif
static void nt_copy(char *dst, const char *src, size_t n)
{
#if defined(__SSE2__)
    size_t i = 0;
    while (i < n && ((uintptr_t)(dst + i) & 63))
        dst[i] = src[i], i++;
#if defined(NT_COPY64)
    if (__builtin_cpu_supports("avx512f"))
        i += nt_copy64(dst + i, src + i, n - i);
    else
#endif
        i += nt_copy16(dst + i, src + i, n - i);
    _mm_sfence();
    memcpy(dst + i, src + i, n - i);
#else
    memcpy(dst, src, n);
#endif
}

static void *copy_thread(void *a)
{
    copyjob *j = a;
    if (j->nt)
        nt_copy(j->dst, j->src, j->bytes);
    else
        memcpy(j->dst, j->src, j->bytes);
    return NULL;
}

/* A copy of bytes split over threads (memcpy, or streaming stores when nt);
 * returns ms */
static double timed_copy(char *dst, const char *src, size_t bytes, int threads, int nt)
{
    pthread_t th[64];
    copyjob jobs[64];
    if (threads > 64)
        threads = 64;
    size_t per = (bytes / (size_t)threads + 63) & ~(size_t)63;
    double t0 = now_ms();
    for (int i = 0; i < threads; i++) {
        size_t off = per * (size_t)i;
        jobs[i] = (copyjob){dst + off, src + off, off < bytes ? (bytes - off < per ? bytes - off : per) : 0, nt};
        if (i)
            pthread_create(&th[i], NULL, copy_thread, &jobs[i]);
    }
    copy_thread(&jobs[0]);
    for (int i = 1; i < threads; i++)
        pthread_join(th[i], NULL);
    return now_ms() - t0;
}

typedef struct setup {
    smelt_graph *g;
    smelt_node *in[MAXIO], *out[MAXIO];
    smelt_tensor *tin[MAXIO];
} setup;

static void make(smelt_ctx *ctx, const wl *w, int64_t n, setup *s)
{
    int nd[MAXIO];
    int64_t sh[MAXIO][4];
    w->shapes(n, nd, sh);
    CHECK(smelt_graph_new(ctx, &s->g));
    for (int i = 0; i < w->n_in; i++) {
        bool targets = (w->build == b_xent || w->build == b_embed_ln) && i == 1; /* i64 indices 0 .. cols - 1 */
        smelt_dtype dt = targets ? SMELT_I64 : SMELT_F32;
        s->in[i] = smelt_input(s->g, NULL, dt, nd[i], sh[i]);
        CHECK(smelt_tensor_new(ctx, dt, nd[i], sh[i], &s->tin[i]));
        float *d = smelt_tensor_data(s->tin[i]);
        int64_t *di = smelt_tensor_data(s->tin[i]), cnt = smelt_tensor_numel(s->tin[i]);
        for (int64_t k = 0; k < cnt; k++) { /* positive for v (adam) and a variance, mixed otherwise */
            if (targets)
                di[k] = (int64_t)(urand() * (double)sh[0][w->build == b_embed_ln ? 0 : 1]) % sh[0][w->build == b_embed_ln ? 0 : 1];
            else
                d[k] = (float)((w->build == b_adam && i == 3) || (w->build == b_conv_bn_relu && i == 5)
                                   ? urand() + 0.01 /* adam's v, the batch-norm's variance */
                                   : 2.0 * urand() - 1.0);
        }
    }
    w->build(s->g, s->in, s->out);
    CHECK(smelt_graph_status(s->g));
}

static void unmake(setup *s, int n_in)
{
    for (int i = 0; i < n_in; i++)
        smelt_tensor_free(s->tin[i]);
    smelt_graph_free(s->g);
}

/* ‖fused − ref‖∞ / ‖ref‖∞ over all outputs, on a small instance */
static double check_error(const wl *w, const char *backend)
{
    smelt_ctx *ctx;
    smelt_ctx_new(&ctx);
    setup s;
    make(ctx, w, 65536, &s);
    smelt_plan *p;
    smelt_plan_opts po;
    smelt_plan_opts_init(&po);
    po.backend = backend;
    CHECK(smelt_plan_new(ctx, s.g, w->n_out, s.out, &po, &p));
    smelt_tensor *o[MAXIO] = {0}, *r[MAXIO] = {0};
    CHECK(smelt_plan_run(p, w->n_in, s.tin, w->n_out, o));
    CHECK(smelt_reference_eval(ctx, s.g, w->n_out, s.out, w->n_in, s.tin, r));
    double worst = 0;
    for (int k = 0; k < w->n_out; k++) {
        double num = 0, den = 0;
        int64_t cnt = smelt_tensor_numel(r[k]);
        for (int64_t i = 0; i < cnt; i++) {
            double f = smelt_tensor_get(o[k], i), e = smelt_tensor_get(r[k], i);
            num = fmax(num, isnan(f) != isnan(e) ? INFINITY : fabs(f - e));
            den = fmax(den, fabs(e));
        }
        worst = fmax(worst, num / (den > 0 ? den : 1));
        smelt_tensor_free(o[k]);
        smelt_tensor_free(r[k]);
    }
    smelt_plan_free(p);
    unmake(&s, w->n_in);
    smelt_ctx_free(ctx);
    return worst;
}

/* What CPU and GPU rows share beside the times, per plan (unfused, fused):
 * the intermediates' memory (smelt_plan_stats.mem_bytes), the memory held
 * during a call (intermediates + outputs), the allocations a call makes */
typedef struct memrow {
    int uopt; /* the unfused plan's opt_level */
    double mem_mb[2], peak_mb[2], alloc_per_call[2];
    double lower_mb[2]; /* the largest live set of intermediates, + outputs: no peak is lower */
} memrow;

/* ---- the CPU peers -------------------------------------------------------
 * One script per line of this table (several peers may share one), run once
 * per workload by the python of BUILD/<venv> (this binary's build folder),
 * else Debian's /usr/bin/python3.  A script prints one JSON line with, per
 * peer, KEY_ms (the ordinary call: it allocates its outputs), KEY_out_ms
 * (the outputs preallocated and written in place, as far as the peer allows),
 * KEY_first_call_ms (a compiling peer's first call), KEY_version, KEY_threads
 * and KEY_note; a key it does not print is a workload the peer cannot
 * express ("-" in the table). */
typedef struct peer {
    const char *key, *label, *script, *venv;
} peer;
static const peer cpu_peers[] = {
    {"numpy", "numpy", "peers.py", NULL},
    {"numexpr", "numexpr", "peers.py", NULL},
    {"numba", "numba", "numba_peers.py", NULL},
    {"jax", "JAX", "jax_peers.py", "jax-venv"},
    {"ort", "onnxrt", "ort_peers.py", "ort-venv"},
    {"torch_eager", "torch", "torch_peers.py", "torch-venv"},
    {"torch_compile", "t.compile", "torch_peers.py", "torch-venv"},
};
#define NPEERS (int)(sizeof cpu_peers / sizeof cpu_peers[0])

typedef struct row {
    const wl *w;
    int64_t n;
    double unfused_ms, fused_ms, compile_ms, max_rel_err, first_call_ms;
    double memcpy_gbps, nt_gbps, copy_gbps; /* copy_gbps: the better of the two */
    int compiles, k_unf, k_fus, c_fus, threads;
    memrow m;
    double donated_ms, donated_alloc_per_call; /* w->donate: fused, outputs over donated inputs */
    int donated_inplace;
    const char *backend;
    double fused_alloc_ms; /* the fused plan allocating its outputs on every call (freed in the timing) */
    double peer_ms[NPEERS][2], peer_first_ms[NPEERS]; /* --peers: [allocating, outputs given]; NAN: none */
    char label[96]; /* progress: "[i/n] workload backend" */
} row;

/* A new process's first call: context, plan (kernels from the persistent
 * cache where the backend has one) and one run on a small instance. */
static int first_call(const wl *w, const char *backend)
{
    double t0 = now_ms();
    smelt_ctx *ctx;
    smelt_ctx_new(&ctx);
    setup s;
    make(ctx, w, 4096, &s);
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    o.backend = backend;
    smelt_plan *p;
    double t1 = now_ms(); /* input set-up excluded */
    CHECK(smelt_plan_new(ctx, s.g, w->n_out, s.out, &o, &p));
    smelt_tensor *outs[MAXIO] = {0};
    CHECK(smelt_plan_run(p, w->n_in, s.tin, w->n_out, outs));
    double t2 = now_ms();
    printf("first_call_ms %.3f\n", (t2 - t1) + 0 * t0);
    return 0;
}

static double spawn_first_call(const wl *w, const char *backend)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "/proc/%d/exe --first-call %s --backend %s", (int)getpid(), w->name,
             backend);
    FILE *f = popen(cmd, "r");
    double ms = NAN;
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "first_call_ms ", 14))
            ms = atof(line + 14);
    if (f)
        pclose(f);
    return ms;
}

static int unfused_opt = -1; /* --unfused-opt: the "unfused" plan's opt_level; -1: unfused_opt_for */

/* Without --unfused-opt: 0 (one buffer per intermediate), unless those
 * buffers would take more than half of this machine's memory (layers100
 * at 16M: 700 x 64 MB); then 2 (unfused, its intermediates in one arena). */
static int unfused_opt_for(const smelt_plan_stats *s0)
{
    if (unfused_opt >= 0)
        return unfused_opt;
    double phys = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    return phys > 0 && (double)s0->mem_naive_bytes > 0.5 * phys ? 2 : 0;
}

static void run_workload(const wl *w, int64_t n, int runs, int threads, const char *backend, row *r)
{
    smelt_ctx *ctx;
    smelt_ctx_new(&ctx);
    if (threads)
        CHECK(smelt_ctx_set_threads(ctx, threads));
    setup s;
    progress("%s: inputs", r->label);
    make(ctx, w, n, &s);
    smelt_plan_opts o0, o3;
    smelt_plan_opts_init(&o0);
    smelt_plan_opts_init(&o3);
    o0.opt_level = unfused_opt < 0 ? 0 : unfused_opt;
    o0.backend = o3.backend = backend;
    smelt_plan *pu, *pf;
    progress("%s: compiling the unfused and fused plans", r->label);
    CHECK(smelt_plan_new(ctx, s.g, w->n_out, s.out, &o0, &pu));
    smelt_plan_stats s0;
    smelt_plan_get_stats(pu, &s0);
    if ((r->m.uopt = unfused_opt_for(&s0)) != o0.opt_level) {
        smelt_plan_free(pu);
        o0.opt_level = r->m.uopt;
        CHECK(smelt_plan_new(ctx, s.g, w->n_out, s.out, &o0, &pu));
    }
    /* the fused plan in a context of its own: its compile is cold */
    smelt_ctx *ctx3;
    smelt_ctx_new(&ctx3);
    if (threads)
        smelt_ctx_set_threads(ctx3, threads);
    {
        smelt_ctx *tmp = ctx;
        ctx = ctx3;
        CHECK(smelt_plan_new(ctx3, s.g, w->n_out, s.out, &o3, &pf));
        ctx = tmp;
    }
    smelt_plan_stats su, sf;
    smelt_plan_get_stats(pu, &su);
    smelt_plan_get_stats(pf, &sf);
    r->k_unf = su.kernels;
    r->k_fus = sf.kernels;
    r->c_fus = sf.copies;
    r->compiles = sf.compiles + sf.disk_hits;
    r->backend = sf.backend;
    r->threads = smelt_ctx_threads(ctx);

    /* cold compile time: median over fresh contexts, persistent cache off */
    double cms[7];
    int ncold = strcmp(backend, "TCC") ? 3 : 7;
    const char *cache_env = getenv("SMELT_CACHE");
    char *saved = cache_env ? strdup(cache_env) : NULL;
    setenv("SMELT_CACHE", "0", 1);
    for (int i = 0; i < ncold; i++) {
        progress("%s: cold compile %d of %d", r->label, i + 1, ncold);
        smelt_ctx *c2;
        smelt_ctx_new(&c2);
        smelt_plan *p2;
        smelt_ctx *tmp = ctx;
        ctx = c2;
        CHECK(smelt_plan_new(c2, s.g, w->n_out, s.out, &o3, &p2));
        ctx = tmp;
        smelt_plan_stats st2;
        smelt_plan_get_stats(p2, &st2);
        cms[i] = st2.compile_ms;
        smelt_plan_free(p2);
        smelt_ctx_free(c2);
    }
    if (saved) {
        setenv("SMELT_CACHE", saved, 1);
        free(saved);
    } else {
        unsetenv("SMELT_CACHE");
    }
    r->compile_ms = median(cms, ncold);
    progress("%s: first call in a new process", r->label);
    r->first_call_ms = spawn_first_call(w, backend);

    /* outputs preallocated (both paths write into the same tensors) */
    smelt_tensor *outs[MAXIO] = {0};
    CHECK(smelt_plan_run(pf, w->n_in, s.tin, w->n_out, outs));
    size_t bytes = (size_t)n * 4;
    char *src = malloc(bytes), *dst = malloc(bytes);
    if (!src || !dst) {
        fprintf(stderr, "smelt-bench: cannot allocate 2 x %zu bytes for the copy measurement (--n "
                        "smaller?)\n", bytes);
        exit(1);
    }
    memset(src, 1, bytes);
    memset(dst, 2, bytes);
    for (int i = 0; i < 2; i++) { /* warm-up */
        CHECK(smelt_plan_run(pu, w->n_in, s.tin, w->n_out, outs));
        CHECK(smelt_plan_run(pf, w->n_in, s.tin, w->n_out, outs));
        timed_copy(dst, src, bytes, r->threads, 0);
        timed_copy(dst, src, bytes, r->threads, 1);
    }
    /* w->donate: the fused plan once more, its outputs given as the
     * donated inputs they update (copies of the inputs: they change) */
    smelt_plan *pd = NULL;
    smelt_tensor *dtin[MAXIO] = {0}, *dout[MAXIO] = {0};
    if (w->donate) {
        smelt_plan_opts od = o3;
        od.donate = w->donate;
        od.n_donate = w->n_out;
        CHECK(smelt_plan_new(ctx3, s.g, w->n_out, s.out, &od, &pd));
        for (int k = 0; k < w->n_in; k++) {
            const smelt_tensor *h = s.tin[k];
            CHECK(smelt_tensor_new(ctx, smelt_tensor_dtype(h), smelt_tensor_ndim(h), smelt_tensor_shape(h), &dtin[k]));
            CHECK(smelt_tensor_copy(dtin[k], s.tin[k]));
        }
        for (int k = 0; k < w->n_out; k++)
            dout[k] = dtin[w->donate[k]];
        for (int i = 0; i < 2; i++)
            CHECK(smelt_plan_run(pd, w->n_in, dtin, w->n_out, dout));
    }
    double *tu = malloc(sizeof(double) * (size_t)runs), *tf = malloc(sizeof(double) * (size_t)runs),
           *tc = malloc(sizeof(double) * (size_t)runs), *tn = malloc(sizeof(double) * (size_t)runs),
           *td = malloc(sizeof(double) * (size_t)runs), *ta = malloc(sizeof(double) * (size_t)runs);
    long au = 0, af = 0, ad = 0;
    /* Each mode is timed as the peers time theirs (bench/peers/peers.py,
     * timeit): two untimed calls, then the timed ones back to back, one
     * mode after the other, allocating before outputs given, as there.
     * Until 2026-11-29 the modes took turns, the copy and the other plan
     * between two runs of one, and a plan paid for what they left in the
     * cache: sum_rows' kernel (4096 x 4096 f32, 2 threads, Intel Xeon VM,
     * 4267ce0) read its 64 MB in 2.72, 2.65, 2.03, 1.58 and 1.45 ms, the
     * first to fifth call after a 64 MB copy (the host's last-level cache
     * keeps more of an input read again and again), while the peers, timed
     * back to back, had the later calls' cache. */
    for (int i = 0; i < 2 + runs; i++) {
        progress("%s: timing unfused, run %d of %d", r->label, i + 1, runs + 2);
        double t0 = now_ms();
        CHECK(smelt_plan_run(pu, w->n_in, s.tin, w->n_out, outs));
        if (i >= 2)
            tu[i - 2] = now_ms() - t0, au += allocs(pu);
    }
    /* the fused plan allocating its outputs, as smelt_trace_call and the
     * Python front end call it: new tensors each call, freed in the timing
     * (as the peers' results are dropped in theirs) */
    for (int i = 0; i < 2 + runs; i++) {
        progress("%s: timing fused, outputs allocated, run %d of %d", r->label, i + 1, runs + 2);
        smelt_tensor *fresh[MAXIO] = {0};
        double t0 = now_ms();
        CHECK(smelt_plan_run(pf, w->n_in, s.tin, w->n_out, fresh));
        for (int k = 0; k < w->n_out; k++)
            smelt_tensor_free(fresh[k]);
        if (i >= 2)
            ta[i - 2] = now_ms() - t0;
    }
    for (int i = 0; i < 2 + runs; i++) {
        progress("%s: timing fused, run %d of %d", r->label, i + 1, runs + 2);
        double t0 = now_ms();
        CHECK(smelt_plan_run(pf, w->n_in, s.tin, w->n_out, outs));
        if (i >= 2)
            tf[i - 2] = now_ms() - t0, af += allocs(pf);
    }
    for (int i = 0; pd && i < 2 + runs; i++) {
        double t0 = now_ms();
        CHECK(smelt_plan_run(pd, w->n_in, dtin, w->n_out, dout));
        if (i >= 2)
            td[i - 2] = now_ms() - t0, ad += allocs(pd);
    }
    for (int i = 0; i < runs; i++)
        tc[i] = timed_copy(dst, src, bytes, r->threads, 0);
    for (int i = 0; i < runs; i++)
        tn[i] = timed_copy(dst, src, bytes, r->threads, 1);
    r->unfused_ms = median(tu, runs);
    r->fused_ms = median(tf, runs);
    r->fused_alloc_ms = median(ta, runs);
    free(ta);
    r->m.alloc_per_call[0] = (double)au / runs;
    r->m.alloc_per_call[1] = (double)af / runs;
    r->donated_ms = pd ? median(td, runs) : NAN;
    r->donated_alloc_per_call = pd ? (double)ad / runs : NAN;
    r->donated_inplace = 0;
    if (pd) {
        smelt_plan_stats sd;
        smelt_plan_get_stats(pd, &sd);
        r->donated_inplace = sd.donated_inplace;
        smelt_plan_free(pd);
    }
    for (int k = 0; k < w->n_in; k++)
        smelt_tensor_free(dtin[k]);
    free(td);
    /* what each plan holds during a call: its intermediates and the outputs */
    double out_mb = 0;
    for (int k = 0; k < w->n_out; k++)
        out_mb += (double)smelt_tensor_numel(outs[k]) * 4 / 1048576;
    smelt_plan_get_stats(pu, &su);
    smelt_plan_get_stats(pf, &sf);
    r->m.mem_mb[0] = (double)su.mem_bytes / 1048576;
    r->m.mem_mb[1] = (double)sf.mem_bytes / 1048576;
    r->m.peak_mb[0] = r->m.mem_mb[0] + out_mb;
    r->m.peak_mb[1] = r->m.mem_mb[1] + out_mb;
    r->m.lower_mb[0] = (double)su.mem_lower_bytes / 1048576 + out_mb;
    r->m.lower_mb[1] = (double)sf.mem_lower_bytes / 1048576 + out_mb;
    r->memcpy_gbps = 2.0 * (double)bytes / (median(tc, runs) * 1e6);
    r->nt_gbps = 2.0 * (double)bytes / (median(tn, runs) * 1e6);
    r->copy_gbps = fmax(r->memcpy_gbps, r->nt_gbps);
    r->n = n;
    r->w = w;
    free(tu), free(tf), free(tc), free(tn), free(src), free(dst);
    for (int k = 0; k < w->n_out; k++)
        smelt_tensor_free(outs[k]);
    smelt_plan_free(pu);
    smelt_plan_free(pf);
    unmake(&s, w->n_in);
    smelt_ctx_free(ctx3);
    smelt_ctx_free(ctx);
    progress("%s: error against the float64 reference", r->label);
    r->max_rel_err = check_error(w, backend);
}

/* the number after "key": in a JSON line; NAN when absent or null */
static double json_num(const char *line, const char *key)
{
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\":", key);
    const char *p = strstr(line, pat);
    if (!p)
        return NAN;
    p += strlen(pat);
    while (*p == ' ')
        p++;
    char *end;
    double v = strtod(p, &end);
    return end == p ? NAN : v;
}

/* The string after "key": in a JSON line (simple strings: no escapes), or "" */
static void json_str(const char *line, const char *key, char *out, size_t n)
{
    char pat[128];
    snprintf(pat, sizeof pat, "\"%s\": \"", key);
    const char *p = strstr(line, pat);
    out[0] = 0;
    if (!p)
        return;
    p += strlen(pat);
    size_t k = 0;
    while (p[k] && p[k] != '"' && p[k] != '\\' && k + 1 < n)
        k++;
    memcpy(out, p, k);
    out[k] = 0;
}

/* The python of a peer's virtual environment, BUILD/<venv>/bin/python in
 * this binary's build folder (BUILD/bench/smelt-bench), where scripts/bench
 * --peers installs it; "" when there is none (the peer is absent). */
static void venv_python(const char *venv, char *path, size_t n)
{
    path[0] = 0;
    char exe[4096];
    ssize_t k = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (k <= 0)
        return;
    exe[k] = 0;
    for (int up = 0; up < 2; up++) { /* .../BUILD/bench/smelt-bench -> .../BUILD */
        char *slash = strrchr(exe, '/');
        if (!slash)
            return;
        *slash = 0;
    }
    snprintf(path, n, "%s/%s/bin/python", exe, venv);
    if (access(path, X_OK))
        path[0] = 0;
}

/* what the peers' scripts said once: version, threads, a note; present: 1 when
 * its python is there, 0 when absent (said once on stderr) */
static struct {
    int present;
    char version[64], threads[16], note[160];
} peer_info[NPEERS];

/* SMELT_BENCH_PEERS: the peers' keys to run, comma-separated (default: all) */
static int peer_chosen(const char *key)
{
    const char *want = getenv("SMELT_BENCH_PEERS");
    if (!want || !*want)
        return 1;
    size_t n = strlen(key);
    for (const char *p = want; (p = strstr(p, key)); p += n)
        if ((p == want || p[-1] == ',') && (p[n] == ',' || !p[n]))
            return 1;
    return 0;
}

static void peers_find(void)
{
    for (int k = 0; k < NPEERS; k++) {
        const peer *p = &cpu_peers[k];
        if (!peer_chosen(p->key))
            continue;
        char py[4200] = "/usr/bin/python3";
        if (p->venv)
            venv_python(p->venv, py, sizeof py);
        peer_info[k].present = *py != 0;
        if (!*py && (k == 0 || !peer_chosen(cpu_peers[k - 1].key) ||
                     strcmp(p->venv, cpu_peers[k - 1].venv ? cpu_peers[k - 1].venv : "")))
            fprintf(stderr, "smelt-bench: peer %s absent: no BUILD/%s (scripts/bench --peers%s installs it)\n",
                    p->label, p->venv, !strcmp(p->venv, "torch-venv") ? "=torch" : "");
    }
}

/* Each peer script once for this workload (rows[0 .. nrows): its backends'
 * rows, which share the peers' figures), with smelt's thread count */
static void run_peers(row *rows, int nrows, int runs, int threads)
{
    for (int i = 0; i < nrows; i++)
        for (int k = 0; k < NPEERS; k++)
            rows[i].peer_ms[k][0] = rows[i].peer_ms[k][1] = rows[i].peer_first_ms[k] = NAN;
    row *r = &rows[0];
    for (int k = 0; k < NPEERS; k++) {
        const peer *p = &cpu_peers[k];
        int first = 1; /* the first present peer of this script runs it */
        for (int j = 0; j < k; j++)
            first &= !peer_info[j].present || strcmp(cpu_peers[j].script, p->script) != 0;
        if (!first || !peer_info[k].present)
            continue;
        char py[4200] = "/usr/bin/python3";
        if (p->venv)
            venv_python(p->venv, py, sizeof py);
        char cmd[8192];
        snprintf(cmd, sizeof cmd, "'%s' '%s/bench/peers/%s' --workload %s --n %lld --runs %d --threads %d 2>&1",
                 py, SMELT_SOURCE_DIR, p->script, r->w->name, (long long)r->n, runs, threads);
        FILE *f = popen(cmd, "r");
        if (!f)
            continue;
        char line[16384];
        int got = 0;
        while (fgets(line, sizeof line, f)) {
            if (line[0] != '{' || !strstr(line, "\"workload\":")) {
                if (strstr(line, "rror"))
                    fprintf(stderr, "peer %s: %s", p->script, line);
                continue;
            }
            got = 1;
            for (int q = k; q < NPEERS; q++) {
                if (strcmp(cpu_peers[q].script, p->script) || !peer_info[q].present)
                    continue;
                char key[96];
                const char *c = cpu_peers[q].key;
                snprintf(key, sizeof key, "%s_ms", c);
                r->peer_ms[q][0] = json_num(line, key);
                snprintf(key, sizeof key, "%s_out_ms", c);
                r->peer_ms[q][1] = json_num(line, key);
                snprintf(key, sizeof key, "%s_first_call_ms", c);
                r->peer_first_ms[q] = json_num(line, key);
                snprintf(key, sizeof key, "%s_version", c);
                json_str(line, key, peer_info[q].version, sizeof peer_info[q].version);
                snprintf(key, sizeof key, "%s_threads", c);
                double t = json_num(line, key);
                if (!isnan(t))
                    snprintf(peer_info[q].threads, sizeof peer_info[q].threads, "%d", (int)t);
                char note[160];
                snprintf(key, sizeof key, "%s_note", c);
                json_str(line, key, note, sizeof note);
                if (*note && strcmp(note, peer_info[q].note)) {
                    snprintf(peer_info[q].note, sizeof peer_info[q].note, "%s", note);
                    fprintf(stderr, "peer %s: %s\n", cpu_peers[q].label, note);
                }
            }
        }
        if (pclose(f) != 0 || !got)
            fprintf(stderr, "peer %s: %s: bench/peers/%s gave no result\n", p->label, r->w->name, p->script);
    }
    for (int i = 1; i < nrows; i++) {
        memcpy(rows[i].peer_ms, r->peer_ms, sizeof r->peer_ms);
        memcpy(rows[i].peer_first_ms, r->peer_first_ms, sizeof r->peer_first_ms);
    }
}

/* ---- the BLAS that ran ---------------------------------------------------
 * smelt loads OpenBLAS with dlopen (RTLD_LOCAL) at its first matrix product,
 * after choosing its kernels (OPENBLAS_CORETYPE: src/runtime/blas.c); once it
 * is in the process, its openblas_get_config and openblas_get_corename say
 * which build and which kernels run. */
static char blas_config[256], blas_core[64];

static int blas_find(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size, (void)data;
    const char *name = info->dlpi_name;
    if (!name || !strstr(name, "blas"))
        return 0;
    void *h = dlopen(name, RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return 0;
    void *cfg = dlsym(h, "openblas_get_config"), *core = dlsym(h, "openblas_get_corename");
    char *(*fc)(void) = NULL, *(*fk)(void) = NULL;
    memcpy(&fc, &cfg, sizeof cfg);
    memcpy(&fk, &core, sizeof core);
    if (fc && !blas_config[0])
        snprintf(blas_config, sizeof blas_config, "%s", fc());
    if (fk && !blas_core[0])
        snprintf(blas_core, sizeof blas_core, "%s", fk());
    if (!fc && !blas_config[0])
        snprintf(blas_config, sizeof blas_config, "%s (not OpenBLAS)", name);
    dlclose(h);
    return blas_config[0] != 0;
}

/* the BLAS in this process, once one is loaded: 1, blas_config and blas_core set */
static int blas_loaded(void)
{
    if (!blas_config[0])
        dl_iterate_phdr(blas_find, NULL);
    return blas_config[0] != 0;
}

static void usage(void)
{
    printf("usage: smelt-bench [--workload NAME] [--backend TCC|CC|NVRTC|AUTO|all] [--peers] [--json]\n"
           "                   [--n N] [--runs R] [--threads T] [--device cpu|cuda]\n"
           "\n"
           "Fused (opt_level 3) against unfused (opt_level 0, one kernel per operator) on the\n"
           "same backend, side by side in one run; one row per workload and backend, printed\n"
           "as it completes (progress on stderr when it is a terminal).\n"
           "\n"
           "  --workload NAME  one workload:");
    for (int i = 0, col = 31; i < NWL; i++) {
        int len = (int)strlen(workloads[i].name) + 1;
        if (col + len > 90)
            printf("\n                  "), col = 18;
        printf(" %s", workloads[i].name);
        col += len;
    }
    printf("\n"
           "  --backend NAME   the backend to time; default: SMELT_JIT_BACKEND, else\n"
           "                   MGB_JIT_BACKEND, else all (TCC and CC).  AUTO: NVRTC with a GPU,\n"
           "                   else TCC and CC.  NVRTC runs the GPU benchmark (--device cuda)\n"
           "  --peers          the CPU peers on the same workloads, each in two modes (allocating its\n"
           "                   outputs, as users call it; outputs preallocated): numpy, numexpr and numba\n"
           "                   (Debian's), JAX jit, onnxruntime (mlp, attention, conv_bn_relu,\n"
           "                   conv1d_gelu, embed_ln) and PyTorch eager and\n"
           "                   torch.compile, each from the python of BUILD/<name>-venv (jax-venv,\n"
           "                   ort-venv, torch-venv: scripts/bench --peers installs the first two,\n"
           "                   --peers=torch the last); an absent one is named on stderr.  A table of\n"
           "                   both modes follows the main one.  SMELT_BENCH_PEERS=numpy,jax,... (keys\n"
           "                   below) runs only those.  GPU: PyTorch, CuPy, JAX\n"
           "  --json           one JSON object per row\n"
           "  --json-file F    also write the rows as JSON lines to F (the table still prints)\n"
           "  --n N            elements (default 16M; 64M on the GPU)   --runs R (default 9)\n"
           "  --cols C         the row workloads' rows C long (C divides N; default: the largest\n"
           "                   divisor of N up to 4096), for the peers too\n"
           "  --threads T      worker threads (default: all cores)\n"
           "  --unfused-opt N  opt_level of the unfused plan: 0 (one buffer per intermediate) or 2\n"
           "                   (unfused, intermediates in one arena, in place where possible); default:\n"
           "                   0, or 2 where one buffer each would take over half of the memory\n"
           "                   (layers100 at 16M: 700 x 64 MB)\n"
           "  --device cuda    the workloads on the GPU, backend NVRTC (docs/cuda.md)\n"
           "\n");
    printf("columns:\n"
           "  unfused_ms  median run time at opt_level 0 (every operator its own kernel)\n"
           "  fused_ms    median run time at opt_level 3 (fused kernels), outputs given (written in\n"
           "              place, no allocation); speedup = unfused/fused\n"
           "  alloc_ms    the fused plan allocating its outputs on each call (JSON: fused_alloc_ms), as\n"
           "              smelt_trace_call and the Python front end run it; the new tensors are freed\n"
           "              inside the timing, as the peers' results are dropped in theirs\n"
           "  fused_GBs   bytes the workload must move (inputs read, outputs written) / fused_ms\n"
           "  copy_GBs    the copy limit: the better of memcpy and a streaming-store copy of n\n"
           "              f32 (read + write), measured in the same loop; %%copy = fused_GBs / copy_GBs\n"
           "  compile_ms  cold compile of the fused plan: fresh context, persistent cache off, median\n"
           "  1st_call    a new process: context, plan (kernels from the persistent cache where\n"
           "              the backend has one) and the first run of a 4096-element instance, ms\n"
           "  compiles    kernels the fused plan compiled or loaded from the persistent cache\n"
           "  kern u/f    kernel launches per run, unfused / fused (JSON: copies_fused, the fused\n"
           "              plan's copy kernels: a layout strides cannot express)\n"
           "  max_rel_err max |fused - ref| / max |ref| over the outputs of a 65536-element\n"
           "              instance, ref = smelt's float64 reference interpreter\n"
           "  JSON only: unfused_mem_mb, fused_mem_mb, the memory the unfused (opt_level 0: one\n"
           "              buffer each) and fused (opt_level 3: one arena) plans keep for intermediates;\n"
           "              unfused_peak_mb, peak_mb: that + the outputs, what a call holds besides\n"
           "              its inputs; unfused_peak_lower_mb, peak_lower_mb: the largest live set\n"
           "              of intermediates + outputs (no plan holds less);\n"
           "              unfused_alloc_per_call, alloc_per_call: the library's allocations per timed run\n"
           "              (outputs given; host allocations on the GPU); peak_rss_mb: the process's;\n"
           "              adam: donated_ms, donated_alloc_per_call, donated_inplace: the fused plan\n"
           "              with param, m and v donated and given back as its outputs (in place)\n"
           "  JSON, --peers: KEY_ms (the peer's ordinary call, allocating) and KEY_out_ms (outputs\n"
           "              preallocated) for KEY numpy, numexpr, numba, jax, ort, torch_eager, torch_compile;\n"
           "              KEY_first_call_ms (numba, JAX, torch.compile: compile included); \"peers\": each\n"
           "              one's version and threads.  Medians after warm-up, timed as smelt's runs are\n"
           "  blas, blas_core (JSON, once smelt has loaded a BLAS): openblas_get_config() and\n"
           "              openblas_get_corename(), the kernels OpenBLAS runs (OPENBLAS_CORETYPE: docs/env.md)\n");
}

/* One line under the table: what the columns are (--help has more). */
static void legend(int gpu)
{
    printf("legend: medians of timed runs; speedup = unfused_ms / fused_ms (outputs given); "
           "alloc_ms = fused, outputs allocated per call; %s; "
           "compile_ms = cold fused compile; %s1st_call = new process, plan + first run (ms); "
           "compiles = kernels compiled or loaded from disk; kern u/f = kernels per run unfused/fused; "
           "max_rel_err against smelt's float64 reference (smelt-bench --help)\n",
           gpu ? "copy_GBs = a device-to-device copy (same run)"
               : "copy_GBs = best of memcpy and a streaming-store copy (same run), %copy = fused_GBs / "
                 "copy_GBs",
           gpu ? "2nd_ctx_ms = the same in a new context after another one filled the persistent cache "
               "(as configured: SMELT_CACHE=0 makes it a cold compile); cached_ms = "
                 "plan again in the same context; " : "");
}

/* ---- the GPU: --device cuda ----------------------------------------------
 * The same workloads on device tensors: inputs copied to the device once,
 * outputs preallocated there; backend NVRTC, fused (opt_level 3) against
 * unfused (opt_level 0).  Each run is timed with the host clock around
 * smelt_plan_run, which returns when the device has finished.  The copy
 * bandwidth is that of smelt_tensor_copy between two device tensors of n
 * f32 (cuMemcpyDtoDAsync), measured in the same loop. */
#define GPU_N_DEFAULT ((int64_t)64 << 20)
#define NPEER 4
static const char *const gpu_peer_keys[NPEER] = {"torch_eager_ms", "torch_compile_ms", "cupy_ms",
                                                 "jax_ms"};

typedef struct gpu_row {
    const wl *w;
    int64_t n;
    double unfused_ms, fused_ms, copy_gbps, max_rel_err;
    double fused_alloc_ms;  /* the fused plan allocating its device outputs on every call */
    double compile_ms;      /* cold: fresh context, SMELT_CACHE=0, median of 3 */
    double warm_compile_ms; /* a fresh context after another filled the persistent cache */
    int warm_compiles;      /* NVRTC compiles in it (0: every kernel came from a cache) */
    double cached_plan_ms;  /* smelt_plan_new again in the fused plan's context (memory cache) */
    double first_call_ms;   /* a new process: CUDA start-up, plan, one small run */
    int compiles, k_unf, k_fus, c_fus;
    memrow m;
    double peer[NPEER];
} gpu_row;

/* The GPU's name from the driver (smelt does not expose it), else "cuda". */
static void gpu_name(char *buf, size_t n)
{
    snprintf(buf, n, "cuda");
    const char *lib = getenv("SMELT_CUDA_DRIVER_LIB");
    void *h = dlopen(lib && *lib ? lib : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h)
        return;
    int (*init)(unsigned) = NULL, (*get)(int *, int) = NULL, (*name)(char *, int, int) = NULL;
    void *p;
    if ((p = dlsym(h, "cuInit")))
        memcpy(&init, &p, sizeof p);
    if ((p = dlsym(h, "cuDeviceGet")))
        memcpy(&get, &p, sizeof p);
    if ((p = dlsym(h, "cuDeviceGetName")))
        memcpy(&name, &p, sizeof p);
    char tmp[256] = "";
    int dev = 0;
    if (init && get && name && !init(0) && !get(&dev, 0) && !name(tmp, (int)sizeof tmp - 1, dev) &&
        tmp[0]) {
        for (char *c = tmp; *c; c++) /* keep the JSON string simple */
            if (*c == '"' || *c == '\\' || (unsigned char)*c < 32)
                *c = ' ';
        snprintf(buf, n, "%s", tmp);
    }
    dlclose(h);
}

/* SMELT_OK, or exit status 1 with one line saying why there is no GPU. */
static int gpu_check(void)
{
    smelt_ctx *ctx;
    if (smelt_ctx_new(&ctx)) {
        fprintf(stderr, "smelt-bench: --device cuda: cannot create a smelt context\n");
        return 1;
    }
    int st = smelt_backend_check(ctx, "NVRTC");
    if (st)
        fprintf(stderr, "smelt-bench: --device cuda: %s\n",
                *smelt_errmsg(ctx) ? smelt_errmsg(ctx) : smelt_strerror(st));
    smelt_ctx_free(ctx);
    return st ? 1 : 0;
}

/* make() on the host, then device copies of the inputs (host copies freed) */
static void gpu_make(smelt_ctx *ctx, const wl *w, int64_t n, setup *s, smelt_tensor **din)
{
    make(ctx, w, n, s);
    for (int i = 0; i < w->n_in; i++) {
        smelt_tensor *h = s->tin[i];
        CHECK(smelt_tensor_new_device(ctx, smelt_tensor_dtype(h), smelt_tensor_ndim(h), smelt_tensor_shape(h),
                                      &din[i]));
        CHECK(smelt_tensor_copy_from_host(din[i], h));
        smelt_tensor_free(h);
        s->tin[i] = NULL;
    }
}

static void gpu_free(smelt_tensor **t, int n)
{
    for (int i = 0; i < n; i++) {
        smelt_tensor_free(t[i]);
        t[i] = NULL;
    }
}

/* max_rel_err of the fused plan on the device, on a small instance */
static double gpu_check_error(const wl *w)
{
    smelt_ctx *ctx;
    smelt_ctx_new(&ctx);
    setup s;
    make(ctx, w, 65536, &s);
    smelt_tensor *din[MAXIO] = {0}, *dout[MAXIO] = {0}, *r[MAXIO] = {0};
    for (int i = 0; i < w->n_in; i++) {
        smelt_tensor *h = s.tin[i];
        CHECK(smelt_tensor_new_device(ctx, smelt_tensor_dtype(h), smelt_tensor_ndim(h), smelt_tensor_shape(h),
                                      &din[i]));
        CHECK(smelt_tensor_copy_from_host(din[i], h));
    }
    smelt_plan_opts po;
    smelt_plan_opts_init(&po);
    po.backend = "NVRTC";
    smelt_plan *p;
    CHECK(smelt_plan_new(ctx, s.g, w->n_out, s.out, &po, &p));
    CHECK(smelt_plan_run(p, w->n_in, din, w->n_out, dout));
    CHECK(smelt_reference_eval(ctx, s.g, w->n_out, s.out, w->n_in, s.tin, r));
    double worst = 0;
    for (int k = 0; k < w->n_out; k++) {
        smelt_tensor *o;
        CHECK(smelt_tensor_new(ctx, smelt_tensor_dtype(dout[k]), smelt_tensor_ndim(dout[k]),
                               smelt_tensor_shape(dout[k]), &o));
        CHECK(smelt_tensor_copy_to_host(o, dout[k]));
        const float *f = smelt_tensor_data(o);
        const double *e = smelt_tensor_data(r[k]);
        double num = 0, den = 0;
        for (int64_t i = 0, cnt = smelt_tensor_numel(r[k]); i < cnt; i++) {
            num = fmax(num, isnan(f[i]) != isnan(e[i]) ? INFINITY : fabs(f[i] - e[i]));
            den = fmax(den, fabs(e[i]));
        }
        worst = fmax(worst, num / (den > 0 ? den : 1));
        smelt_tensor_free(o);
        smelt_tensor_free(r[k]);
    }
    smelt_plan_free(p);
    gpu_free(dout, w->n_out);
    gpu_free(din, w->n_in);
    unmake(&s, w->n_in);
    smelt_ctx_free(ctx);
    return worst;
}

/* a fused plan in a fresh context: its compile time and NVRTC compiles */
static double gpu_fresh_compile(setup *s, const wl *w, const smelt_plan_opts *o3, int *compiles)
{
    smelt_ctx *ctx;
    smelt_ctx_new(&ctx);
    smelt_plan *p;
    CHECK(smelt_plan_new(ctx, s->g, w->n_out, s->out, o3, &p));
    smelt_plan_stats st;
    smelt_plan_get_stats(p, &st);
    *compiles = st.compiles;
    smelt_plan_free(p);
    smelt_ctx_free(ctx);
    return st.compile_ms;
}

static void gpu_run_workload(const wl *w, int64_t n, int runs, gpu_row *r)
{
    smelt_ctx *ctx;
    smelt_ctx_new(&ctx);
    setup s;
    smelt_tensor *din[MAXIO] = {0}, *dout[MAXIO] = {0}, *csrc = NULL, *cdst = NULL;
    gpu_make(ctx, w, n, &s, din);
    smelt_plan_opts o0, o3;
    smelt_plan_opts_init(&o0);
    smelt_plan_opts_init(&o3);
    o0.opt_level = unfused_opt < 0 ? 0 : unfused_opt;
    o0.backend = o3.backend = "NVRTC";

    /* cold compile: fresh contexts, persistent cache off, median of 3 */
    double cms[3];
    const char *cache_env = getenv("SMELT_CACHE");
    char *saved = cache_env ? strdup(cache_env) : NULL;
    setenv("SMELT_CACHE", "0", 1);
    for (int i = 0; i < 3; i++)
        cms[i] = gpu_fresh_compile(&s, w, &o3, &r->compiles);
    if (saved) {
        setenv("SMELT_CACHE", saved, 1);
        free(saved);
    } else {
        unsetenv("SMELT_CACHE");
    }
    r->compile_ms = median(cms, 3);
    /* warm: the persistent cache as configured, filled by one fresh context
     * (its CUBINs stored), then timed in another that loads them */
    int filled;
    gpu_fresh_compile(&s, w, &o3, &filled);
    r->warm_compile_ms = gpu_fresh_compile(&s, w, &o3, &r->warm_compiles);

    smelt_plan *pu, *pf, *again;
    CHECK(smelt_plan_new(ctx, s.g, w->n_out, s.out, &o0, &pu));
    CHECK(smelt_plan_new(ctx, s.g, w->n_out, s.out, &o3, &pf));
    double t0 = now_ms();
    CHECK(smelt_plan_new(ctx, s.g, w->n_out, s.out, &o3, &again)); /* in-memory cache */
    r->cached_plan_ms = now_ms() - t0;
    smelt_plan_free(again);
    smelt_plan_stats su, sf;
    smelt_plan_get_stats(pu, &su);
    smelt_plan_get_stats(pf, &sf);
    r->k_unf = su.kernels;
    r->k_fus = sf.kernels;
    r->c_fus = sf.copies;
    r->m.uopt = o0.opt_level;
    r->m.mem_mb[0] = (double)su.mem_bytes / 1048576;
    r->m.mem_mb[1] = (double)sf.mem_bytes / 1048576;
    r->first_call_ms = spawn_first_call(w, "NVRTC");

    /* outputs on the device (both plans write into the same tensors) */
    CHECK(smelt_plan_run(pf, w->n_in, din, w->n_out, dout));
    int64_t flat[1] = {n};
    CHECK(smelt_tensor_new_device(ctx, SMELT_F32, 1, flat, &csrc));
    CHECK(smelt_tensor_new_device(ctx, SMELT_F32, 1, flat, &cdst));
    for (int i = 0; i < 2; i++) { /* warm-up */
        CHECK(smelt_plan_run(pu, w->n_in, din, w->n_out, dout));
        CHECK(smelt_plan_run(pf, w->n_in, din, w->n_out, dout));
        CHECK(smelt_tensor_copy(cdst, csrc));
    }
    double *tu = malloc(sizeof(double) * (size_t)runs), *tf = malloc(sizeof(double) * (size_t)runs),
           *tc = malloc(sizeof(double) * (size_t)runs), *ta = malloc(sizeof(double) * (size_t)runs);
    long au = 0, af = 0;
    /* each mode's timed runs back to back after two untimed ones, as on the
     * CPU (and as bench/peers/gpu_peers.py times the peers) */
    for (int i = 0; i < 2 + runs; i++) {
        double a = now_ms();
        CHECK(smelt_plan_run(pu, w->n_in, din, w->n_out, dout));
        if (i >= 2)
            tu[i - 2] = now_ms() - a, au += allocs(pu);
    }
    for (int i = 0; i < 2 + runs; i++) { /* new device outputs each call, freed in the timing */
        smelt_tensor *fresh[MAXIO] = {0};
        double a = now_ms();
        CHECK(smelt_plan_run(pf, w->n_in, din, w->n_out, fresh));
        gpu_free(fresh, w->n_out);
        if (i >= 2)
            ta[i - 2] = now_ms() - a;
    }
    for (int i = 0; i < 2 + runs; i++) {
        double a = now_ms();
        CHECK(smelt_plan_run(pf, w->n_in, din, w->n_out, dout));
        if (i >= 2)
            tf[i - 2] = now_ms() - a, af += allocs(pf);
    }
    for (int i = 0; i < runs; i++) {
        double a = now_ms();
        CHECK(smelt_tensor_copy(cdst, csrc));
        tc[i] = now_ms() - a;
    }
    r->fused_alloc_ms = median(ta, runs);
    free(ta);
    r->unfused_ms = median(tu, runs);
    r->fused_ms = median(tf, runs);
    r->copy_gbps = 2.0 * (double)n * 4 / (median(tc, runs) * 1e6);
    r->m.alloc_per_call[0] = (double)au / runs; /* host allocations */
    r->m.alloc_per_call[1] = (double)af / runs;
    double out_mb = 0;
    for (int k = 0; k < w->n_out; k++)
        out_mb += (double)smelt_tensor_numel(dout[k]) * 4 / 1048576;
    r->m.peak_mb[0] = r->m.mem_mb[0] + out_mb;
    r->m.peak_mb[1] = r->m.mem_mb[1] + out_mb;
    r->m.lower_mb[0] = (double)su.mem_lower_bytes / 1048576 + out_mb;
    r->m.lower_mb[1] = (double)sf.mem_lower_bytes / 1048576 + out_mb;
    r->n = n;
    r->w = w;
    free(tu), free(tf), free(tc);
    smelt_tensor_free(csrc);
    smelt_tensor_free(cdst);
    gpu_free(dout, w->n_out);
    gpu_free(din, w->n_in);
    smelt_plan_free(pu);
    smelt_plan_free(pf);
    unmake(&s, w->n_in);
    smelt_ctx_free(ctx);
    r->max_rel_err = gpu_check_error(w);
}

/* PyTorch, torch.compile, CuPy, JAX through bench/peers/gpu_peers.py, with
 * the python3 of PATH (where those packages are installed) */
static void gpu_run_peers(gpu_row *rows, int nrows, int runs)
{
    for (int i = 0; i < nrows; i++) {
        for (int k = 0; k < NPEER; k++)
            rows[i].peer[k] = NAN;
        char cmd[1024];
        snprintf(cmd, sizeof cmd,
                 "python3 '%s/bench/peers/gpu_peers.py' --workload %s --n %lld --runs %d 2>&1",
                 SMELT_SOURCE_DIR, rows[i].w->name, (long long)rows[i].n, runs);
        FILE *f = popen(cmd, "r");
        if (!f)
            continue;
        char line[16384];
        int got = 0;
        while (fgets(line, sizeof line, f)) {
            if (strstr(line, "\"torch_eager_ms\":")) {
                got = 1;
                int missing = 0;
                for (int k = 0; k < NPEER; k++)
                    missing |= isnan(rows[i].peer[k] = json_num(line, gpu_peer_keys[k]));
                if (missing) /* the notes say why */
                    fprintf(stderr, "gpu peers: %s", line);
            } else if (strstr(line, "rror")) {
                fprintf(stderr, "gpu peers: %s", line);
            }
        }
        if (pclose(f) != 0 || !got)
            fprintf(stderr, "gpu peers: %s: bench/peers/gpu_peers.py gave no result\n",
                    rows[i].w->name);
    }
}

/* , "key": v  (null when v is not finite: JSON has no nan or inf) */
static FILE *json_fp;      /* where jnum and the JSON writers print */
static FILE *json_file;    /* --json-file: every row as JSON here too */

static void jnum(const char *key, const char *fmt, double v)
{
    FILE *f = json_fp;
    fprintf(f, ", \"%s\": ", key);
    if (isfinite(v))
        fprintf(f, fmt, v);
    else
        fputs("null", f);
}

/* A JSON row's first fields (to json_fp), the ones CPU and GPU rows share */
static void jrow_start(const wl *w, int64_t n, const char *backend, double unfused_ms, double fused_ms,
                       double copy_gbps, const memrow *m)
{
    fprintf(json_fp, "{\"workload\": \"%s\", \"n\": %lld, \"dtype\": \"f32\", \"backend\": \"%s\"",
            w->name, (long long)n, backend);
    int nd[MAXIO];
    int64_t sh[MAXIO][4];
    w->shapes(n, nd, sh);
    fputs(", \"shape\": [", json_fp); /* the first input's */
    for (int d = 0; d < nd[0]; d++)
        fprintf(json_fp, "%s%lld", d ? ", " : "", (long long)sh[0][d]);
    fputs("]", json_fp);
    jnum("unfused_ms", "%.3f", unfused_ms);
    jnum("fused_ms", "%.3f", fused_ms);
    jnum("speedup", "%.2f", unfused_ms / fused_ms);
    jnum("fused_gbps", "%.1f", w->bytes_per_elem * (double)n / (fused_ms * 1e6));
    jnum("copy_gbps", "%.1f", copy_gbps);
    fprintf(json_fp, ", \"unfused_opt_level\": %d", m->uopt);
    jnum("unfused_mem_mb", "%.3f", m->mem_mb[0]); /* the plans' intermediates */
    jnum("fused_mem_mb", "%.3f", m->mem_mb[1]);
    jnum("unfused_peak_mb", "%.3f", m->peak_mb[0]); /* intermediates + outputs */
    jnum("peak_mb", "%.3f", m->peak_mb[1]);
    jnum("unfused_peak_lower_mb", "%.3f", m->lower_mb[0]);
    jnum("peak_lower_mb", "%.3f", m->lower_mb[1]);
    jnum("unfused_alloc_per_call", "%.2f", m->alloc_per_call[0]);
    jnum("alloc_per_call", "%.2f", m->alloc_per_call[1]);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru); /* the process's high-water mark so far */
    jnum("peak_rss_mb", "%.1f", (double)ru.ru_maxrss / 1024);
}

static void gpu_header(const char *dev, int json, int peers)
{
    if (!json)
        printf("device: %s\n%-11s %9s %10s %10s %10s %8s %9s %9s %10s %10s %9s %9s %8s %9s %12s%s\n", dev,
               "workload", "n", "unfused_ms", "fused_ms", "alloc_ms", "speedup", "fused_GBs", "copy_GBs",
               "compile_ms", "2nd_ctx_ms", "cached_ms", "1st_call", "compiles", "kern u/f",
               "max_rel_err", peers ? "   eager_ms compile_ms    cupy_ms     jax_ms" : "");
}

static void gpu_print(const gpu_row *r, const char *dev, int json, int peers)
{
    double gbps = r->w->bytes_per_elem * (double)r->n / (r->fused_ms * 1e6);
    progress_clear();
    for (int pass = 0; pass < 2; pass++) {
        if (!(json_fp = pass ? json_file : json ? stdout : NULL))
            continue;
        jrow_start(r->w, r->n, "NVRTC", r->unfused_ms, r->fused_ms, r->copy_gbps, &r->m);
        fprintf(json_fp, ", \"device\": \"%s\"", dev);
        jnum("fused_alloc_ms", "%.3f", r->fused_alloc_ms);
        jnum("compile_ms", "%.3f", r->compile_ms);
        fprintf(json_fp, ", \"compiles\": %d", r->compiles);
        jnum("warm_compile_ms", "%.3f", r->warm_compile_ms);
        fprintf(json_fp, ", \"warm_compiles\": %d, \"warm_compile\": \"%s\"", r->warm_compiles,
               r->warm_compiles ? "cold NVRTC" : "persistent cache");
        jnum("cached_plan_ms", "%.3f", r->cached_plan_ms);
        jnum("first_call_ms", "%.3f", r->first_call_ms);
        fprintf(json_fp, ", \"kernels_unfused\": %d, \"kernels_fused\": %d, \"copies_fused\": %d", r->k_unf,
                r->k_fus, r->c_fus);
        jnum("max_rel_err", "%.3g", r->max_rel_err);
        for (int k = 0; peers && k < NPEER; k++)
            jnum(gpu_peer_keys[k], "%.3f", r->peer[k]);
        fprintf(json_fp, "}\n");
    }
    if (!json) {
        printf("%-11s %9lld %10.3f %10.3f %10.3f %7.2fx %9.1f %9.1f %10.3f %10.3f %9.3f %9.1f %8d "
               "%4d/%-4d %12.2e",
               r->w->name, (long long)r->n, r->unfused_ms, r->fused_ms, r->fused_alloc_ms,
               r->unfused_ms / r->fused_ms,
               gbps, r->copy_gbps, r->compile_ms, r->warm_compile_ms, r->cached_plan_ms,
               r->first_call_ms, r->compiles, r->k_unf, r->k_fus, r->max_rel_err);
        for (int k = 0; peers && k < NPEER; k++)
            isnan(r->peer[k]) ? printf(" %10s", "-") : printf(" %10.3f", r->peer[k]);
        printf("\n");
    }
    fflush(stdout);
    if (json_file)
        fflush(json_file);
}

/* --device cuda: every workload (or one) on the GPU */
static int gpu_main(const char *only, int64_t n, int runs, int json, int peers)
{
    if (gpu_check())
        return 1;
    char dev[256];
    gpu_name(dev, sizeof dev);
    gpu_header(dev, json, peers);
    int total = only ? 1 : NWL, done = 0;
    for (int i = 0; i < NWL; i++) {
        if (only && strcmp(only, workloads[i].name))
            continue;
        int64_t wn = workloads[i].n_default && workloads[i].n_default < n ? workloads[i].n_default : n;
        gpu_row r;
        progress("[%d/%d] %s NVRTC: compiling, timing", ++done, total, workloads[i].name);
        gpu_run_workload(&workloads[i], wn, runs, &r);
        if (peers) {
            progress("[%d/%d] %s: peers (PyTorch, torch.compile, CuPy, JAX)", done, total,
                     workloads[i].name);
            gpu_run_peers(&r, 1, runs);
        }
        gpu_print(&r, dev, json, peers);
    }
    if (!json)
        legend(1);
    return 0;
}

static void cpu_print(const row *r, int json, int peers)
{
    double gbps = r->w->bytes_per_elem * (double)r->n / (r->fused_ms * 1e6);
    progress_clear();
    for (int pass = 0; pass < 2; pass++) {
        if (!(json_fp = pass ? json_file : json ? stdout : NULL))
            continue;
        jrow_start(r->w, r->n, r->backend, r->unfused_ms, r->fused_ms, r->copy_gbps, &r->m);
        jnum("fused_alloc_ms", "%.3f", r->fused_alloc_ms);
        if (r->w->donate) {
            jnum("donated_ms", "%.3f", r->donated_ms);
            jnum("donated_alloc_per_call", "%.2f", r->donated_alloc_per_call);
            fprintf(json_fp, ", \"donated_inplace\": %d", r->donated_inplace);
        }
        fprintf(json_fp, ", \"threads\": %d", r->threads);
        jnum("memcpy_gbps", "%.1f", r->memcpy_gbps);
        jnum("nt_copy_gbps", "%.1f", r->nt_gbps);
        jnum("fraction_of_copy", "%.3f", gbps / r->copy_gbps);
        jnum("compile_ms", "%.3f", r->compile_ms);
        fprintf(json_fp, ", \"compiles\": %d, \"kernels_unfused\": %d, \"kernels_fused\": %d, "
                "\"copies_fused\": %d", r->compiles, r->k_unf, r->k_fus, r->c_fus);
        jnum("max_rel_err", "%.3g", r->max_rel_err);
        fprintf(json_fp, ", \"tier\": \"%s\"", r->backend);
        jnum("warm_first_call_ms", "%.3f", r->first_call_ms);
        if (blas_loaded()) /* once smelt has loaded a BLAS (the first matrix product) */
            fprintf(json_fp, ", \"blas\": \"%s\", \"blas_core\": \"%s\", \"openblas_coretype\": \"%s\"",
                    blas_config, blas_core, getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "");
        if (peers) { /* null: absent, or a workload the peer cannot express */
            for (int k = 0; k < NPEERS; k++) {
                char key[96];
                snprintf(key, sizeof key, "%s_ms", cpu_peers[k].key);
                jnum(key, "%.3f", r->peer_ms[k][0]);
                snprintf(key, sizeof key, "%s_out_ms", cpu_peers[k].key);
                jnum(key, "%.3f", r->peer_ms[k][1]);
                if (isfinite(r->peer_first_ms[k])) {
                    snprintf(key, sizeof key, "%s_first_call_ms", cpu_peers[k].key);
                    jnum(key, "%.3f", r->peer_first_ms[k]);
                }
            }
            fputs(", \"peers\": {", json_fp);
            for (int k = 0; k < NPEERS; k++)
                fprintf(json_fp, "%s\"%s\": {\"present\": %s, \"version\": \"%s\", \"threads\": %s}", k ? ", " : "",
                        cpu_peers[k].key, peer_info[k].present ? "true" : "false", peer_info[k].version,
                        *peer_info[k].threads ? peer_info[k].threads : "null");
            fputs("}", json_fp);
        }
        fprintf(json_fp, "}\n");
    }
    if (!json)
        printf("%-11s %9lld %7s %10.2f %10.2f %10.2f %7.2fx %9.1f %9.1f %5.0f%% %10.3f %9.3f %8d %4d/%-4d "
               "%12.2e\n",
               r->w->name, (long long)r->n, r->backend, r->unfused_ms, r->fused_ms, r->fused_alloc_ms,
               r->unfused_ms / r->fused_ms, gbps, r->copy_gbps, 100 * gbps / r->copy_gbps,
               r->compile_ms, r->first_call_ms, r->compiles, r->k_unf, r->k_fus, r->max_rel_err);
    fflush(stdout);
    if (json_file)
        fflush(json_file);
}

/* The peers' table, after the main one: per workload, one line per mode,
 * smelt's fused plan (the last backend timed: CC when both) and each present
 * peer in that mode, with the peer's time over smelt's (above 1: smelt is
 * faster).  Ratios only within a mode. */
static void peers_table(const row *rows, int nrows, int nb)
{
    printf("\npeers (ms; peer / smelt in the same mode, above 1x: smelt faster)\n"
           "  alloc: each call allocates its outputs (smelt: fused plan, new tensors; peers: their ordinary call)\n"
           "  out:   outputs preallocated, written in place (smelt: outputs given; numpy, numexpr, torch: out=;\n"
           "         numba: an out argument; JAX: a donated buffer; onnxruntime: IO binding; torch.compile:\n"
           "         out.copy_(f(...)))\n");
    printf("%-11s %-5s %9s", "workload", "mode", "smelt");
    for (int k = 0; k < NPEERS; k++)
        if (peer_info[k].present)
            printf(" %16s", cpu_peers[k].label);
    printf("\n");
    for (int i = nb - 1; i < nrows; i += nb) {
        const row *r = &rows[i];
        for (int mode = 0; mode < 2; mode++) {
            double s = mode ? r->fused_ms : r->fused_alloc_ms;
            printf("%-11s %-5s %9.2f", mode ? "" : r->w->name, mode ? "out" : "alloc", s);
            for (int k = 0; k < NPEERS; k++) {
                if (!peer_info[k].present)
                    continue;
                double ms = r->peer_ms[k][mode];
                if (isnan(ms))
                    printf(" %16s", "-");
                else
                    printf(" %9.2f %5.2fx", ms, ms / s);
            }
            printf("\n");
        }
    }
    printf("smelt: the %s backend, %d threads; threads of the peers:", rows[nb - 1].backend, rows[nb - 1].threads);
    for (int k = 0; k < NPEERS; k++)
        if (peer_info[k].present)
            printf(" %s %s", cpu_peers[k].label, *peer_info[k].threads ? peer_info[k].threads : "?");
    printf("\nversions:");
    for (int k = 0; k < NPEERS; k++)
        if (peer_info[k].present && *peer_info[k].version)
            printf(" %s %s", cpu_peers[k].label, peer_info[k].version);
    printf("\n");
    for (int k = 0; k < NPEERS; k++) { /* the compiling peers' first calls, compile included */
        int any = 0;
        for (int i = nb - 1; i < nrows; i += nb) {
            if (!isfinite(rows[i].peer_first_ms[k]))
                continue;
            if (!any++)
                printf("first calls of %s (compile included), ms:", cpu_peers[k].label);
            printf(" %s %.0f", rows[i].w->name, rows[i].peer_first_ms[k]);
        }
        if (any)
            printf("\n");
    }
}

/* the BLAS line: which library and kernels smelt's matrix products ran */
static void blas_line(void)
{
    if (!blas_loaded())
        return;
    const char *ct = getenv("OPENBLAS_CORETYPE");
    printf("blas: %s; kernels: %s (OPENBLAS_CORETYPE=%s; docs/env.md)\n", blas_config,
           *blas_core ? blas_core : "?", ct ? ct : "unset");
}

/* The backends to time: --backend, else SMELT_JIT_BACKEND, else
 * MGB_JIT_BACKEND (the library's own resolution and error messages), else
 * both CPU tiers.  Returns 0, or an exit status after saying why. */
static int choose_backends(const char *opt, const char **names, int *nb, int *gpu)
{
    *gpu = 0;
    const char *env = getenv("SMELT_JIT_BACKEND");
    if (!env || !*env)
        env = getenv("MGB_JIT_BACKEND");
    if ((opt && !strcmp(opt, "all")) || (!opt && (!env || !*env))) {
        names[0] = "TCC", names[1] = "CC";
        *nb = 2;
        return 0;
    }
    smelt_ctx *ctx;
    if (smelt_ctx_new(&ctx)) {
        fprintf(stderr, "smelt-bench: cannot create a smelt context\n");
        return 1;
    }
    /* NULL: the name in force (SMELT_JIT_BACKEND / MGB_JIT_BACKEND) */
    int st = smelt_backend_check(ctx, opt);
    if (st) {
        const char *msg = *smelt_errmsg(ctx) ? smelt_errmsg(ctx) : smelt_strerror(st);
        if (opt && !strncmp(msg, "backend option: ", 16))
            msg += 16;
        fprintf(stderr, "smelt-bench: %s%s\n", opt ? "--backend: " : "", msg);
        smelt_ctx_free(ctx);
        return st == SMELT_ERR_INVALID_ARG ? 2 : 1;
    }
    const char *name = opt ? opt : env;
    if (!strcasecmp(name, "AUTO")) {
        if (smelt_backend_check(ctx, "NVRTC") == SMELT_OK) {
            *gpu = 1;
        } else {
            names[0] = "TCC", names[1] = "CC";
            *nb = 2;
        }
    } else if (!strcasecmp(name, "NVRTC")) {
        *gpu = 1;
    } else {
        names[0] = !strcasecmp(name, "TCC") ? "TCC" : "CC";
        *nb = 1;
    }
    smelt_ctx_free(ctx);
    return 0;
}

/* the value of option argv[*i] (its next argument), or NULL after saying
 * it is missing */
static const char *opt_value(int argc, char **argv, int *i, const char *what)
{
    if (*i + 1 >= argc || !strncmp(argv[*i + 1], "--", 2)) {
        fprintf(stderr, "smelt-bench: %s needs %s (smelt-bench --help)\n", argv[*i], what);
        return NULL;
    }
    return argv[++*i];
}

static int parse_count(const char *opt, const char *v, long long lo, long long *out)
{
    char *end;
    long long x = strtoll(v, &end, 10);
    if (!*v || *end || x < lo) {
        fprintf(stderr, "smelt-bench: %s needs a whole number >= %lld, got '%s'\n", opt, lo, v);
        return 2;
    }
    *out = x;
    return 0;
}

int main(int argc, char **argv)
{
    int json = 0, peers = 0, runs = 9, threads = 0;
    int64_t n = 16 << 20;
    int n_given = 0;
    const char *only = NULL, *backend = NULL, *first = NULL, *device = "cpu";
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
        long long x = 0;
        if (!strcmp(a, "--json")) {
            json = 1;
        } else if (!strcmp(a, "--peers")) {
            peers = 1;
        } else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage();
            return 0;
        } else if (!strcmp(a, "--workload") || !strcmp(a, "--first-call")) {
            if (!(v = opt_value(argc, argv, &i, "a workload name")))
                return 2;
            *(a[2] == 'w' ? &only : &first) = v;
        } else if (!strcmp(a, "--backend")) {
            if (!(backend = opt_value(argc, argv, &i, "a backend name (TCC, CC, NVRTC, AUTO, all)")))
                return 2;
        } else if (!strcmp(a, "--json-file")) {
            if (!(v = opt_value(argc, argv, &i, "a file name")))
                return 2;
            if (!(json_file = fopen(v, "w"))) {
                fprintf(stderr, "smelt-bench: --json-file: cannot open '%s' for writing: %s\n", v,
                        strerror(errno));
                return 1;
            }
        } else if (!strcmp(a, "--device")) {
            if (!(device = opt_value(argc, argv, &i, "cpu or cuda")))
                return 2;
        } else if (!strcmp(a, "--unfused-opt")) {
            if (!(v = opt_value(argc, argv, &i, "an opt_level, 0 or 2")) || parse_count(a, v, 0, &x))
                return 2;
            if (x != 0 && x != 2) {
                fprintf(stderr, "smelt-bench: --unfused-opt: 0 (one buffer per intermediate) or 2 (an arena), not %s\n", v);
                return 2;
            }
            unfused_opt = (int)x;
        } else if (!strcmp(a, "--cols")) {
            if (!(v = opt_value(argc, argv, &i, "a row length")) || parse_count(a, v, 1, &x))
                return 2;
            cols_given = x;
        } else if (!strcmp(a, "--n") || !strcmp(a, "--runs") || !strcmp(a, "--threads")) {
            if (!(v = opt_value(argc, argv, &i, "a number")))
                return 2;
            long long lo = a[2] == 'n' ? 1024 : a[2] == 'r' ? 1 : 0;
            if (parse_count(a, v, lo, &x))
                return 2;
            if (a[2] == 'n')
                n = x, n_given = 1;
            else if (a[2] == 'r')
                runs = (int)(x < 100000 ? x : 100000);
            else
                threads = (int)(x < 4096 ? x : 4096);
        } else {
            fprintf(stderr, "smelt-bench: unknown argument '%s' (smelt-bench --help)\n", a);
            return 2;
        }
    }
    if (only) {
        int found = 0;
        for (int i = 0; i < NWL; i++)
            found |= !strcmp(only, workloads[i].name);
        if (!found) {
            fprintf(stderr, "smelt-bench: no workload named '%s'; the workloads are", only);
            for (int i = 0; i < NWL; i++)
                fprintf(stderr, " %s", workloads[i].name);
            fprintf(stderr, "\n");
            return 2;
        }
    }
    if (first) {
        for (int i = 0; i < NWL; i++)
            if (!strcmp(first, workloads[i].name))
                return first_call(&workloads[i], backend ? backend : "TCC");
        return 2;
    }
    const char *bks[2];
    int nb = 0, gpu = 0;
    if (!strcmp(device, "cuda")) {
        if (backend && strcmp(backend, "all") && strcasecmp(backend, "NVRTC") &&
            strcasecmp(backend, "AUTO")) {
            fprintf(stderr, "smelt-bench: --device cuda runs the NVRTC backend, not %s\n", backend);
            return 2;
        }
        gpu = 1;
    } else if (strcmp(device, "cpu")) {
        fprintf(stderr, "smelt-bench: --device: cpu or cuda, not '%s'\n", device);
        return 2;
    } else {
        int rc = choose_backends(backend, bks, &nb, &gpu);
        if (rc)
            return rc;
    }
    if (gpu && !n_given)
        n = GPU_N_DEFAULT;
    if (cols_given) {
        if (n % cols_given) {
            fprintf(stderr, "smelt-bench: --cols %lld does not divide the %lld elements (--n)\n",
                    (long long)cols_given, (long long)n);
            return 2;
        }
        char v[32];
        snprintf(v, sizeof v, "%lld", (long long)cols_given);
        setenv("SMELT_BENCH_COLS", v, 1); /* bench/peers/peers.py's row_side */
    }
    if (gpu)
        return gpu_main(only, n, runs, json, peers);

    if (peers)
        peers_find();
    if (!json) {
        printf("%-11s %9s %7s %10s %10s %10s %8s %9s %9s %6s %10s %9s %8s %9s %12s\n", "workload", "n",
               "backend", "unfused_ms", "fused_ms", "alloc_ms", "speedup", "fused_GBs", "copy_GBs", "%copy",
               "compile_ms", "1st_call", "compiles", "kern u/f", "max_rel_err");
        fflush(stdout);
    }
    static row all[2 * NWL];
    int nall = 0;
    int total = (only ? 1 : NWL) * nb, done = 0;
    for (int i = 0; i < NWL; i++) {
        if (only && strcmp(only, workloads[i].name))
            continue;
        int64_t wn = n; /* layers100 too: its unfused plan shares an arena where it must (unfused_opt_for) */
        row rows[2];
        for (int b = 0; b < nb; b++) {
            snprintf(rows[b].label, sizeof rows[b].label, "[%d/%d] %s %s", ++done, total,
                     workloads[i].name, bks[b]);
            run_workload(&workloads[i], wn, runs, threads, bks[b], &rows[b]);
        }
        if (peers) {
            progress("[%d/%d] %s: the peers", done, total, workloads[i].name);
            run_peers(rows, nb, runs, rows[0].threads);
        }
        for (int b = 0; b < nb; b++) {
            cpu_print(&rows[b], json, peers);
            all[nall++] = rows[b];
        }
    }
    if (!json) {
        legend(0);
        blas_line();
        if (peers)
            peers_table(all, nall, nb);
    }
    return 0;
}
