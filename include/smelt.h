/* smelt: fuse tensor operations into kernels generated and compiled at run time.
 *
 * The whole public API.  Handles are opaque; every function that can fail
 * returns an int status (SMELT_OK or a negative SMELT_ERR_* code) and leaves
 * the detail in smelt_errmsg(ctx).  Builder functions return a node and record
 * the first error on the graph ("sticky"); a NULL operand yields NULL without
 * hiding the first error.  *_free(NULL) is a no-op.  The library never prints,
 * aborts or exits.
 *
 * A context is used by one thread at a time; separate contexts may be used
 * from separate threads.
 */
#ifndef SMELT_H
#define SMELT_H

#include <stddef.h>
#include <stdint.h>

#include "smelt_ops.h" /* enum smelt_op, generated from src/ir/ops.def */

#ifdef __cplusplus
extern "C" {
#endif

#define SMELT_VERSION "0.1.0"
#define SMELT_MAX_DIMS 8
/* At most this many operands (inputs + outputs) per generated kernel. */
#define SMELT_MAX_KERNEL_OPERANDS 64

/* ---- status codes ------------------------------------------------------ */
#define SMELT_STATUS_LIST(X)                                                  \
    X(OK, 0, "success")                                                       \
    X(ERR_INVALID_ARG, -1, "invalid argument")                                \
    X(ERR_NOMEM, -2, "out of memory")                                         \
    X(ERR_SHAPE, -3, "incompatible shapes")                                   \
    X(ERR_DTYPE, -4, "unsupported or mismatched dtype")                       \
    X(ERR_BACKEND, -5, "backend not available")                               \
    X(ERR_COMPILE, -6, "kernel compilation failed")                           \
    X(ERR_RUNTIME, -7, "kernel execution failed")                             \
    X(ERR_IO, -8, "input/output error")                                       \
    X(ERR_PARSE, -9, "parse error")                                           \
    X(ERR_UNSUPPORTED, -10, "not supported")                                  \
    X(ERR_INDEX, -11, "index out of range")

enum {
#define SMELT_X_(name, val, text) SMELT_##name = val,
    SMELT_STATUS_LIST(SMELT_X_)
#undef SMELT_X_
};

/* Static text for a status code ("unknown status" for others). */
const char *smelt_strerror(int status);

/* ---- dtypes ------------------------------------------------------------ */
typedef enum smelt_dtype {
    SMELT_F32 = 0,
    SMELT_F64,
    SMELT_I32,
    SMELT_I64,
    SMELT_U8,
    SMELT_BOOL, /* one byte, 0 or 1 */
    SMELT_F16,  /* IEEE binary16, computed in f32 (each result rounded to f16) */
    SMELT_BF16, /* bfloat16 (8-bit exponent, 7-bit mantissa), computed in f32 likewise */
    SMELT_DTYPE_COUNT
} smelt_dtype;

const char *smelt_dtype_name(smelt_dtype dt);      /* "f32", ... ; NULL if invalid */
int smelt_dtype_from_name(const char *name);       /* dtype or SMELT_ERR_DTYPE */
size_t smelt_dtype_size(smelt_dtype dt);           /* bytes; 0 if invalid */
/* NumPy promotion of two dtypes (bool < u8 < i32 < i64; f16 < f32 < f64;
 * i32/i64 with any float but f64 -> f64, u8/bool keep the float type;
 * f16 with bf16 -> f32, as PyTorch; bf16 promotes like f16). */
smelt_dtype smelt_dtype_promote(smelt_dtype a, smelt_dtype b);
int smelt_dtype_is_float(smelt_dtype dt);          /* f16, bf16, f32, f64 */
/* v as dtype dt holds it: integers wrap, floats round to nearest even. */
double smelt_dtype_round(smelt_dtype dt, double v);
/* One element of dtype dt at p, as a double (f16/bf16 bit patterns are
 * converted), and back (v rounded as smelt_dtype_round does). */
double smelt_elem_load(smelt_dtype dt, const void *p);
void smelt_elem_store(smelt_dtype dt, void *p, double v);

/* ---- operators --------------------------------------------------------- */
const char *smelt_op_name(smelt_op op);            /* "add", ... ; NULL if invalid */
int smelt_op_from_name(const char *name);          /* op or SMELT_ERR_INVALID_ARG */
int smelt_op_arity(smelt_op op);                   /* operand count; -1 if invalid */
/* The NumPy / numexpr spellings of operators (the expression language's
 * aliases: "negative" -> "neg", "arcsin" -> "asin", "clip" -> "clamp", ...),
 * i = 0, 1, ...: the alias, and in *op (may be NULL) the operator's name;
 * NULL past the last.  With smelt_op_name, the one list a binding maps
 * NumPy's function names through. */
const char *smelt_op_alias(int i, const char **op);

/* ---- handles ----------------------------------------------------------- */
typedef struct smelt_ctx smelt_ctx;
typedef struct smelt_graph smelt_graph;
typedef struct smelt_node smelt_node;
typedef struct smelt_plan smelt_plan;
typedef struct smelt_tensor smelt_tensor;
typedef struct smelt_trace smelt_trace;

/* ---- context ----------------------------------------------------------- */
int smelt_ctx_new(smelt_ctx **out);
void smelt_ctx_free(smelt_ctx *ctx);
/* Detail of the last error reported through this context ("" if none). */
const char *smelt_errmsg(const smelt_ctx *ctx);
/* Backend for plans of this context: "TCC", "CC", "NVRTC" or "AUTO"
 * (case-insensitive).  Overrides SMELT_JIT_BACKEND / MGB_JIT_BACKEND.
 * NULL returns to the environment's choice. */
int smelt_ctx_set_backend(smelt_ctx *ctx, const char *name);
/* SMELT_OK if the named backend ("TCC", "CC", "NVRTC", "AUTO") can be used
 * on this machine; otherwise an error status whose smelt_errmsg says why
 * (an unknown name: SMELT_ERR_INVALID_ARG, listing the valid ones).  NULL
 * checks the backend in force: smelt_ctx_set_backend's, else
 * SMELT_JIT_BACKEND's, else MGB_JIT_BACKEND's, else AUTO. */
int smelt_backend_check(smelt_ctx *ctx, const char *name);
/* The registered backends, i = 0, 1, ...: the name ("TCC", ...) and, in
 * *about (may be NULL), one line saying what it is; NULL past the last. */
const char *smelt_backend_name(int i, const char **about);
/* The value of environment variable name as smelt reads it now (one of
 * docs/env.md's; smelt reads the environment in one place): NULL when it is
 * unset or not one of them.  The string stays valid until the last
 * context is freed. */
const char *smelt_env(const char *name);
/* Worker threads for kernels (0 = all cores, the default). */
int smelt_ctx_set_threads(smelt_ctx *ctx, int threads);
int smelt_ctx_threads(const smelt_ctx *ctx);

/* ---- host tensors -------------------------------------------------------
 * A tensor is a dtype, a shape, element strides and a data pointer into a
 * reference-counted buffer.  Views (transpose, slice, broadcast) share the
 * buffer and are read by kernels without a copy. */
int smelt_tensor_new(smelt_ctx *ctx, smelt_dtype dt, int ndim, const int64_t *shape,
                     smelt_tensor **out);
/* Wrap caller-owned memory (not freed by smelt).  strides in elements; NULL
 * means C-contiguous. */
int smelt_tensor_wrap(smelt_ctx *ctx, smelt_dtype dt, int ndim, const int64_t *shape,
                      const int64_t *strides, void *data, smelt_tensor **out);
void smelt_tensor_free(smelt_tensor *t);
smelt_dtype smelt_tensor_dtype(const smelt_tensor *t);
int smelt_tensor_ndim(const smelt_tensor *t);
const int64_t *smelt_tensor_shape(const smelt_tensor *t);
const int64_t *smelt_tensor_strides(const smelt_tensor *t); /* in elements */
int64_t smelt_tensor_numel(const smelt_tensor *t);
void *smelt_tensor_data(const smelt_tensor *t);              /* first element */
int smelt_tensor_is_contiguous(const smelt_tensor *t);
/* Views. perm has ndim entries. */
int smelt_tensor_transpose(const smelt_tensor *t, const int *perm, smelt_tensor **out);
int smelt_tensor_slice(const smelt_tensor *t, int dim, int64_t start, int64_t stop,
                       int64_t step, smelt_tensor **out);
int smelt_tensor_broadcast_to(const smelt_tensor *t, int ndim, const int64_t *shape,
                              smelt_tensor **out);
/* Point a tensor made by smelt_tensor_wrap at other caller-owned memory of
 * the same dtype, shape and strides (data: its first element), so that a
 * plan run again and again on new buffers of one layout reuses its
 * tensors.  SMELT_ERR_INVALID_ARG for a tensor that owns its memory (or a
 * view of one), for a device tensor and for data not aligned to the
 * dtype's size (the tensor is left as it was). */
int smelt_tensor_rebind(smelt_tensor *t, void *data);
/* A C-contiguous copy. */
int smelt_tensor_contiguous(const smelt_tensor *t, smelt_tensor **out);
/* Element i (row-major index into the logical shape) as a double (f16 and
 * bf16 converted exactly). */
double smelt_tensor_get(const smelt_tensor *t, int64_t i);

/* ---- graph builder ----------------------------------------------------- */
int smelt_graph_new(smelt_ctx *ctx, smelt_graph **out);
void smelt_graph_free(smelt_graph *g);
/* First error recorded by a builder call (SMELT_OK if none); its message is
 * smelt_graph_errmsg(g) (and smelt_errmsg of the context). */
int smelt_graph_status(const smelt_graph *g);
const char *smelt_graph_errmsg(const smelt_graph *g);
int smelt_graph_num_inputs(const smelt_graph *g);

/* A graph input.  name may be NULL ("in0", ...).  Inputs are numbered in
 * creation order; a plan takes its input tensors in that order. */
smelt_node *smelt_input(smelt_graph *g, const char *name, smelt_dtype dt, int ndim,
                        const int64_t *shape);
/* A scalar constant of a fixed dtype. */
smelt_node *smelt_const(smelt_graph *g, double value, smelt_dtype dt);
/* A weakly typed scalar (NumPy 2 / NEP 50 "Python scalar"): it takes the
 * other operand's dtype, e.g. f32 * 2.5 stays f32; an integer value is i64
 * and a non-integer value f64 where nothing decides. */
smelt_node *smelt_scalar(smelt_graph *g, double value);
/* Any operator of the table; n must equal its arity.  Operands are promoted
 * as in NumPy and broadcast against each other. */
smelt_node *smelt_op_apply(smelt_graph *g, smelt_op op, int n, smelt_node *const *args);
smelt_node *smelt_unary(smelt_graph *g, smelt_op op, smelt_node *a);
smelt_node *smelt_binary(smelt_graph *g, smelt_op op, smelt_node *a, smelt_node *b);
smelt_node *smelt_ternary(smelt_graph *g, smelt_op op, smelt_node *a, smelt_node *b,
                          smelt_node *c);
smelt_node *smelt_cast(smelt_graph *g, smelt_node *a, smelt_dtype dt);
smelt_node *smelt_broadcast_to(smelt_graph *g, smelt_node *a, int ndim, const int64_t *shape);
/* Layout operators, as NumPy's: views of a's elements.  A kernel that reads
 * one reads a's elements where they lie (no copy kernel); a reshape that
 * strides cannot express (of a transposed value, say) reads a copy of its
 * operand (smelt_plan_stats.copies).  Sizes follow a's at run time: a reshape's -1
 * (one at most) is inferred then; expand_dims and squeeze keep a's other
 * dimensions, whatever their run-time sizes.  Bad axes, a reshape to
 * another element count and a squeeze of an axis not of size 1 are
 * sticky errors. */
#define SMELT_NONE INT64_MIN /* an absent slice bound (Python's None) */
smelt_node *smelt_reshape(smelt_graph *g, smelt_node *a, int ndim, const int64_t *shape);
/* perm[d]: the axis of a that becomes axis d; NULL: the axes reversed (a.T) */
smelt_node *smelt_transpose(smelt_graph *g, smelt_node *a, const int *perm);
/* a[..., start:stop:step, ...] along axis (negative: from the end), with
 * Python's rules: negative bounds count from the end, out-of-range ones
 * clamp, SMELT_NONE is an absent bound, step != 0 (negative: backwards) */
smelt_node *smelt_slice(smelt_graph *g, smelt_node *a, int axis, int64_t start, int64_t stop, int64_t step);
smelt_node *smelt_flip(smelt_graph *g, smelt_node *a, int axis);       /* a[..., ::-1, ...] */
smelt_node *smelt_expand_dims(smelt_graph *g, smelt_node *a, int axis); /* a new axis of size 1 */
smelt_node *smelt_squeeze(smelt_graph *g, smelt_node *a, int axis);     /* drop an axis of size 1 */
/* NumPy's concatenate((parts[0], ..., parts[n-1]), axis): arrays of one
 * rank whose other dimensions are equal, promoted to one dtype.  Kernels
 * read the parts where they lie, a kernel run once per part (no copy
 * kernel); a matrix product reads a copy, as does a reduction over the
 * concat's axis (over other axes, it runs once per part).  More than
 * SMELT_MAX_PARTS (8) parts in all (counting those of concatenated
 * concats): the first ones are copied into one array, then concatenated. */
smelt_node *smelt_concat(smelt_graph *g, int n, smelt_node *const *parts, int axis);
/* NumPy's pad(a, widths, constant_values=value): widths[2d] elements
 * before axis d and widths[2d + 1] after it (0 or more), of value in a's
 * dtype (an integer dtype truncates it; one it does not fit is an error).
 * Read as a concat is: a kernel runs once on a's elements and once on
 * each padded region. */
smelt_node *smelt_pad(smelt_graph *g, smelt_node *a, const int64_t *widths, double value);
/* 0, 1, ..., n - 1 in dtype dt (a number type, not bool), shape [n], as
 * NumPy's arange(n): no memory of the graph's, the executor lays it out
 * once per plan.  `arange(C) == t` with t of shape [N, 1] (integer
 * targets as a column) is the one-hot mask a cross-entropy picks with. */
smelt_node *smelt_arange(smelt_graph *g, int64_t n, smelt_dtype dt);
/* Indexed reads.  NumPy's take(a, indices, axis) (ONNX Gather): the
 * result's shape is a's with axis replaced by indices' shape, element
 * [..i.., j.., ..k..] = a[..i.., indices[j..], ..k..].
 * take_along_axis(a, indices, axis) (NumPy's; ONNX GatherElements): indices
 * of a's rank, broadcast against a outside axis; element [i] = a[i with
 * its axis coordinate replaced by indices[i]].  Indices are an integer
 * dtype; -n <= i < n for an axis of size n (a negative one counts from the
 * end); any other is found while the kernel runs, which then reads no
 * element outside a: smelt_plan_run returns SMELT_ERR_INDEX and
 * smelt_errmsg names the operator and the index.  No copy is made: the
 * kernel that reads the result loads a's elements where the indices point
 * (docs/fusion.md, Indexed reads). */
smelt_node *smelt_take(smelt_graph *g, smelt_node *a, smelt_node *indices, int axis);
smelt_node *smelt_take_along_axis(smelt_graph *g, smelt_node *a, smelt_node *indices, int axis);
/* one_hot(indices, depth, dt): indices[..., None] == arange(depth) in dtype
 * dt (a negative index counts from the end, as ONNX OneHot; one outside
 * [-depth, depth) gives a row of zeros); tril/triu(a, k): a's matrices
 * (its last two axes) with the elements above (tril) or below (triu)
 * diagonal k set to 0, NumPy's tril and triu.  Compositions of other
 * operators: they fuse into the kernels that read them. */
smelt_node *smelt_one_hot(smelt_graph *g, smelt_node *indices, int64_t depth, smelt_dtype dt);
smelt_node *smelt_tril(smelt_graph *g, smelt_node *a, int64_t k);
smelt_node *smelt_triu(smelt_graph *g, smelt_node *a, int64_t k);
/* The matrix product, NumPy's matmul (a @ b): the last two axes are the
 * matrices, the others batch dimensions broadcast against each other; a
 * 1-D a is a row (its axis then dropped), a 1-D b a column.  Float dtypes
 * (f32, f64; f16 and bf16 accumulate in f32, as NumPy), promoted.  BLAS
 * computes it (OpenBLAS, loaded at run time) in a kernel of its own;
 * elementwise work after it fuses into one kernel after it.  Transposed
 * and sliced operands are passed to BLAS as they lie (a transpose flag, a
 * leading dimension), not copied. */
smelt_node *smelt_matmul(smelt_graph *g, smelt_node *a, smelt_node *b);
/* A tensor constant (weights): t's values (a host tensor, any strides),
 * copied into the graph; t may be freed after.  Kernels read it as an
 * input (a plan lays it out once, in device memory for a device plan).  A
 * constant equal to one the graph has (dtype, shape and every byte) is
 * that node: equal weights are stored once.  Graph files carry the values
 * (docs/formats.md). */
smelt_node *smelt_constant(smelt_graph *g, const smelt_tensor *t);
/* A reduction (SMELT_OP_SUM, _PROD, _MEAN, _MAX, _MIN, _ARGMAX, _ARGMIN,
 * _ANY, _ALL) of a over the n_axes axes given (negative ones count from the
 * end, as in NumPy; n_axes == 0: every axis; argmax and argmin take one
 * axis or all).  keepdims: the reduced axes stay, of size 1.  Result dtypes
 * are NumPy's (sum and prod of integers and bool: i64; mean of integers and
 * bool: f64; argmax, argmin: i64; any, all: bool; docs/numerics.md).
 * Duplicate or out-of-range axes, and max, min, argmax or argmin over an
 * axis of size 0, are sticky errors. */
smelt_node *smelt_reduce(smelt_graph *g, smelt_op op, smelt_node *a, int n_axes, const int *axes,
                         int keepdims);

/* ---- windows: convolution and pooling; scans (docs/fusion.md) ---------
 * Over NCW (rank 3) and NCHW (rank 4) arrays, as ONNX's Conv, MaxPool and
 * AveragePool.  A window's parameters, per spatial axis (h, w; a rank-3
 * array uses the w entries): */
enum { SMELT_PAD_NOTSET, SMELT_PAD_SAME_UPPER, SMELT_PAD_SAME_LOWER, SMELT_PAD_VALID };
typedef struct smelt_window {
    int64_t kernel[2];    /* pooling: the window's shape (a conv's is its weights') */
    int64_t strides[2];   /* >= 1 (default 1) */
    int64_t pads[4];      /* elements added before h, before w, after h, after w (>= 0; default 0) */
    int64_t dilations[2]; /* >= 1 (default 1): taps dilations[d] apart */
    int auto_pad;         /* SMELT_PAD_*: SAME_* pad so that out = ceil(in / stride) (the odd
                             element after: UPPER, before: LOWER), VALID none; NOTSET: pads */
    int ceil_mode;        /* pooling: the output size rounds up (a last window that starts in
                             the right padding is dropped, as ONNX and PyTorch) */
    int count_include_pad; /* avg_pool: the padding counts in the divisor */
    int64_t groups;       /* conv: channels in groups (C and O multiples of it; C: depthwise) */
} smelt_window;
void smelt_window_init(smelt_window *w); /* the defaults above */
/* The convolution of x [N, C, (H,) W] with weights w [O, C / groups, (KH,)
 * KW] (ONNX's Conv, a cross-correlation), plus bias b [O] (NULL: none):
 * [N, O, (OH,) OW].  Float dtypes, promoted (f16, bf16: computed in f32).
 * Computed as the sum over the kernel's taps of the weights' [O, C] matrix
 * times a shifted view of the (padded) input: f32 on a CPU with AVX-512 by
 * smelt's own kernel, otherwise one BLAS product per tap summed in BLAS
 * (beta = 1); no im2col copy (docs/numerics.md: the bits).  Elementwise work after it (bias,
 * batch-norm, activation, residual) fuses into one kernel after it.  Bad
 * attributes (strides or dilations < 1, a kernel larger than the padded
 * input, channels that do not match, groups that do not divide them) are
 * sticky errors.  The plan runs at the graph's spatial sizes. */
smelt_node *smelt_conv(smelt_graph *g, smelt_node *x, smelt_node *w, smelt_node *b, const smelt_window *win);
/* The max and the mean of each window (kernel, strides, pads, dilations,
 * ceil_mode; avg_pool: count_include_pad) of x [N, C, (H,) W]: elementwise
 * max / adds over the window's shifted strided views of x (padding with
 * -inf, or the dtype's lowest, and 0), one fused kernel with what
 * surrounds it.  max_pool: any number dtype; avg_pool: float dtypes. */
smelt_node *smelt_max_pool(smelt_graph *g, smelt_node *x, const smelt_window *win);
smelt_node *smelt_avg_pool(smelt_graph *g, smelt_node *x, const smelt_window *win);
/* ONNX's GlobalMaxPool / GlobalAveragePool: max / mean over the spatial
 * axes, kept (size 1): a reduction. */
smelt_node *smelt_global_max_pool(smelt_graph *g, smelt_node *x);
smelt_node *smelt_global_avg_pool(smelt_graph *g, smelt_node *x);
/* NumPy's cumsum and cumprod along axis (negative: from the end; the
 * dtype as sum's and prod's: integers and bool i64, floats their own),
 * with ONNX CumSum's exclusive (element i combines the elements before
 * it, the first is 0 / 1) and reverse (from the end).  Elements are
 * combined one after the other in the dtype, from the first: one order,
 * the bits the same on every backend and thread count. */
smelt_node *smelt_cumsum(smelt_graph *g, smelt_node *a, int axis, int exclusive, int reverse);
smelt_node *smelt_cumprod(smelt_graph *g, smelt_node *a, int axis, int exclusive, int reverse);

/* Shorthands. */
#define smelt_add(g, a, b) smelt_binary((g), SMELT_OP_ADD, (a), (b))
#define smelt_sub(g, a, b) smelt_binary((g), SMELT_OP_SUB, (a), (b))
#define smelt_mul(g, a, b) smelt_binary((g), SMELT_OP_MUL, (a), (b))
#define smelt_div(g, a, b) smelt_binary((g), SMELT_OP_DIV, (a), (b))
#define smelt_where(g, c, a, b) smelt_ternary((g), SMELT_OP_WHERE, (c), (a), (b))

smelt_dtype smelt_node_dtype(const smelt_node *n);
int smelt_node_ndim(const smelt_node *n);
const int64_t *smelt_node_shape(const smelt_node *n);
smelt_op smelt_node_op(const smelt_node *n);

/* ---- gradients (reverse mode; docs/grad.md) -----------------------------
 * smelt_grad adds to g the nodes that compute the gradient of loss (a
 * float value of one element, any rank) with respect to each node wrt[i]
 * (inputs, or any other float node of g), and stores them in grads[i]
 * (wrt[i]'s shape and dtype).  They are ordinary nodes of g: give them to
 * smelt_plan_new with the loss, the parameters' updates, ..., and the
 * forward and backward fuse as one graph.  A node of wrt that the loss
 * does not depend on gets zeros.  Gradients stop at integer and bool
 * values (comparisons, argmax, casts to integers) and piecewise constant
 * operators (floor, round, sign, ...) give zero; a wrt or a loss that is
 * not a float is SMELT_ERR_DTYPE.  The backward nodes are built for the
 * graph's shapes (broadcasts, a mean's count, a slice's padding): run a
 * plan that holds them on inputs of those shapes.  Errors: a status and
 * smelt_errmsg; a builder error met while building is sticky on g, as
 * any builder error; argument errors leave g as it was.
 *
 * smelt_grad_ct: the same for n_out outputs of any shape, each with its
 * cotangent (a node whose shape broadcasts to the output's, e.g. a graph
 * input, cast to the output's dtype): the gradient of
 * sum_i sum(outs[i] * cotangents[i]) (a vector-Jacobian product). */
int smelt_grad(smelt_graph *g, smelt_node *loss, int n_wrt, smelt_node *const *wrt, smelt_node **grads);
int smelt_grad_ct(smelt_graph *g, int n_out, smelt_node *const *outs, smelt_node *const *cotangents,
                  int n_wrt, smelt_node *const *wrt, smelt_node **grads);

/* ---- plans -------------------------------------------------------------
 * opt_level 0: no passes, one kernel per operator (the unfused path).
 *           1: constant folding, common-subexpression elimination,
 *              algebraic simplification and dead branches (bit-exact
 *              identities only: src/passes/simplify.c), dead-code
 *              elimination.
 *           2: as 1, and the intermediates share one arena: each lives from
 *              the kernel that writes it to the last that reads it, and
 *              memory is reused after; a kernel's output takes the memory
 *              of an input it is the last to read, in place, when each
 *              element is read before it is written (smelt_plan_stats.mem_*,
 *              smelt_plan_describe shows offsets and what runs in place).
 *           3: as 2 plus fusion of elementwise clusters. */
typedef struct smelt_plan_opts {
    int opt_level;       /* default 3 */
    const char *backend; /* NULL: the context's / environment's choice */
    /* Donated inputs (JAX's donate_argnums): the indices of graph inputs
     * whose memory the caller gives up for each run, so that an output
     * given as the same tensor (same memory, shape and strides: x = f(x),
     * Adam's param, m and v) is written in place, with no temporary and no
     * copy, when the kernel that writes it is the last to read the input
     * and reads each element before writing it (smelt_plan_stats.
     * donated_inplace counts them).  Otherwise such an output goes through a
     * temporary as without donation.  A donated input's contents after a
     * run are unspecified unless it is an output's memory.  The array is
     * copied; default none. */
    const int *donate;
    int n_donate;
    /* Traces (MegEngine's trace(capture_as_const=True)): tensors the traced
     * function captures (smelt_trace_capture) become constants of the
     * recorded graph, their values at recording, so smelt_trace_save writes
     * a self-contained graph; otherwise (0, the default) each is an extra
     * input that every call reads anew.  Plans ignore it. */
    int capture_as_const;
} smelt_plan_opts;
void smelt_plan_opts_init(smelt_plan_opts *opts);

int smelt_plan_new(smelt_ctx *ctx, smelt_graph *g, int n_out, smelt_node *const *outputs,
                   const smelt_plan_opts *opts, smelt_plan **out);
void smelt_plan_free(smelt_plan *p);
/* Run.  inputs: one tensor per graph input, in creation order, with the
 * dtypes of the graph and shapes of the same rank and the same broadcast
 * (size-1) pattern as the graph's inputs.  outputs[i] == NULL: the plan
 * allocates the output and stores it there (the caller frees it); otherwise
 * the tensor must have the output's dtype and shape and is written in place.
 * Overlap: an output may share memory with inputs (x = f(x) in place, or a
 * transposed view of an input): such an output is computed into a
 * temporary and copied at the end, so the result is as if the inputs had
 * been read first (on a GPU, device tensors that overlap are an error),
 * except where the input is donated (smelt_plan_opts.donate) and the
 * output can be written over it directly.  Outputs whose memory ranges intersect each other
 * (interleaved views included) and outputs with a zero stride on an axis
 * of size > 1 are SMELT_ERR_INVALID_ARG.  Memory: intermediates are kept by
 * the plan (in one arena at opt_level >= 2) and reused, so a run with the
 * outputs given and the shapes of an earlier run allocates nothing (CPU
 * backends); a NULL output is a new tensor every run. */
int smelt_plan_run(smelt_plan *p, int n_in, smelt_tensor *const *inputs, int n_out,
                   smelt_tensor **outputs);

/* smelt_plan_run after pointing inputs[i] at data[i] and outputs[j] at
 * data[n_in + j] (smelt_tensor_rebind; a NULL entry keeps a tensor's
 * memory): one call where a binding runs a plan on new buffers each time.
 * Every output is given (none is NULL).  The tensors are checked before
 * any is changed: an error from a check leaves all of them as they were. */
int smelt_plan_run_rebind(smelt_plan *p, int n_in, smelt_tensor *const *inputs, int n_out,
                          smelt_tensor *const *outputs, void *const *data);

typedef struct smelt_plan_stats {
    int kernels;        /* kernel launches per run */
    int ops;            /* operators executed by those kernels */
    int compiles;       /* kernels this plan compiled (a compiler ran) */
    int cache_hits;     /* kernels this plan found compiled in the context's memory */
    int fallbacks;      /* clusters that fell back to unfused kernels */
    double compile_ms;  /* time spent compiling for this plan */
    int folded;         /* nodes removed by constant folding */
    int cse;            /* nodes removed by common-subexpression elimination */
    int dce;            /* nodes removed as dead */
    int simplified;     /* nodes replaced by an algebraic identity (x * 1, neg(neg(x)), x - x of ints ...) */
    int dead_branches;  /* where(c, a, b) with a constant c, or a == b: replaced by the branch taken */
    const char *backend;
    /* tiered compilation (AUTO on a CPU: TCC first, CC in the background) */
    const char *tier_backend; /* the optimising tier, NULL if none */
    int kernels_fast;         /* kernels now running the optimising tier's code */
    int tier_pending;         /* background compiles not finished */
    double tier_compile_ms;   /* background compile time so far */
    int disk_hits;      /* kernels this plan loaded from the persistent (disk) cache, no
                           compiler run (the CC and NVRTC backends) */
    /* intermediates (kernel outputs that are not plan outputs), for the
     * shapes of the last run (before any: the graph's), in bytes */
    int mem_buffers;         /* how many */
    int mem_inplace;         /* of them, written in place of an input of their kernel (opt_level >= 2) */
    int donated_inplace;     /* outputs the last run wrote over donated inputs directly */
    int64_t mem_bytes;       /* what they take: one arena at opt_level >= 2, one buffer each below */
    int64_t mem_lower_bytes; /* the largest set of them live at once (no arena is smaller) */
    int64_t mem_naive_bytes; /* one buffer each */
    double mem_plan_ms;      /* the time that memory plan took */
    /* layout operators (views) */
    int copies;      /* values the kernels lay out anew (copy operators, alone or fused with
                        what computes them): the operand of a reshape strides cannot express,
                        an output that is a view, an input or a constant */
    int views_moved; /* views moved from a value computed elementwise to its operands
                        (view(f(a, b)) = f(view(a), view(b)): the kernel reads through them) */
    int64_t run_allocs; /* memory allocations (malloc, calloc, realloc, aligned) the library made on
                           the calling thread during the last run: 0 where a run allocates nothing */
    int conv_folded; /* convolutions with constant weights whose per-channel scale and shift after them
                        (batch-norm in inference, the bias) were folded into the weights and one add */
    int batch_chains; /* batch chains the last run took: a matrix product, the row program that alone
                         reads it and the product that alone reads that, run one matrix of the batch at
                         a time, the intermediates in a thread's cache (docs/fusion.md) */
} smelt_plan_stats;
int smelt_plan_get_stats(const smelt_plan *p, smelt_plan_stats *out);
/* Tiered plans (AUTO on a CPU) queue their kernels for the optimising tier
 * when they are run a second time; this blocks until those background
 * compiles are done (the next run uses their kernels).  SMELT_OK at once for
 * untiered plans or when nothing is queued. */
int smelt_plan_wait(smelt_plan *p);
/* Text: passes, clusters, their operators, inputs, outputs, kernel names;
 * warnings (e.g. fallbacks).  Owned by the plan. */
const char *smelt_plan_describe(smelt_plan *p);

/* ---- float64 reference interpreter --------------------------------------
 * Evaluates outputs of g on inputs (one per graph input) in double precision
 * (integer dtypes wrap as they do in kernels; explicit casts round; f16 and
 * bf16 results are rounded as kernels round them, through f32).  Each
 * result is a new contiguous f64 tensor. */
int smelt_reference_eval(smelt_ctx *ctx, smelt_graph *g, int n_out,
                         smelt_node *const *outputs, int n_in, smelt_tensor *const *inputs,
                         smelt_tensor **results);

/* ---- traced functions --------------------------------------------------
 * fn builds outputs from input nodes with the builder API and returns
 * SMELT_OK (or an error status).  The first call with a given input
 * signature (dtypes, ranks, broadcast pattern) records the graph, optimises
 * it at opts->opt_level and compiles it; later calls run the compiled plan. */
typedef int (*smelt_trace_fn)(smelt_graph *g, int n_in, smelt_node *const *inputs,
                              int n_out, smelt_node **outputs, void *user);
int smelt_trace_new(smelt_ctx *ctx, smelt_trace_fn fn, void *user, int n_in, int n_out,
                    const smelt_plan_opts *opts, smelt_trace **out);
void smelt_trace_free(smelt_trace *t);
int smelt_trace_call(smelt_trace *t, int n_in, smelt_tensor *const *inputs, int n_out,
                     smelt_tensor **outputs);
/* A tensor the traced function reads that is not one of its inputs (a
 * weight), as a node of the graph being recorded: a constant with its
 * values now when the trace was made with capture_as_const, else an extra
 * input that each call passes t to (t must then outlive the trace; its
 * values may change between calls, its shape may not).  The same tensor
 * captured twice is one node.  Outside a trace: smelt_constant(g, t). */
smelt_node *smelt_trace_capture(smelt_graph *g, const smelt_tensor *t);
/* The plan used by the last call (NULL before the first), owned by the trace. */
smelt_plan *smelt_trace_last_plan(smelt_trace *t);
int smelt_trace_num_plans(const smelt_trace *t); /* distinct signatures seen */

/* ---- expressions, .npy files, graph files, plan introspection ---------
 * (src/frontends/expr.c, src/frontends/npy.c, src/frontends/graphio.c; the `smelt` command-line tool is
 * built on these.  See docs/expressions.md and docs/formats.md.) */

/* Free memory that smelt allocated for the caller (text, output arrays). */
void smelt_free(void *ptr);

/* An expression in numexpr / NumPy syntax over nodes of g, e.g.
 * "where(a > 0, a*b, exp(c)) + 1" (docs/expressions.md).  A name is looked
 * up in names[0..n-1] (bound to nodes[i]), then among the graph's inputs by
 * name.  Number literals are weak scalars (NEP 50): a * 2.5 stays f32 when a
 * is f32.  Errors (syntax, unknown names, argument counts, dtypes, shapes)
 * are sticky on the graph; the message says what and where ("unexpected '*'
 * at column 5") and is followed by the expression and a caret line. */
smelt_node *smelt_expr(smelt_graph *g, const char *expr, const char *const *names,
                       smelt_node *const *nodes, int n);
/* Evaluate an expression on tensors (names[i] names tensors[i]) with the
 * context's backend at opt_level 3.  *out is a new tensor the caller frees. */
int smelt_eval(smelt_ctx *ctx, const char *expr, const char *const *names,
               smelt_tensor *const *tensors, int n, smelt_tensor **out);

/* .npy files (format versions 1.0, 2.0, 3.0; dtypes <f2 <f4 <f8 <i4 <i8 |u1 |b1;
 * big-endian data is byte-swapped; Fortran-order data loads as a strided
 * view).  Truncated, oversized or inconsistent files are SMELT_ERR_IO errors
 * that say what is wrong; unsupported dtypes are SMELT_ERR_DTYPE. */
int smelt_npy_load(smelt_ctx *ctx, const char *path, smelt_tensor **out);
/* The same from a whole .npy file in memory. */
int smelt_npy_read(smelt_ctx *ctx, const void *data, size_t size, smelt_tensor **out);
/* Only the header: dtype, rank and shape (SMELT_MAX_DIMS entries). */
int smelt_npy_info(smelt_ctx *ctx, const char *path, smelt_dtype *dtype, int *ndim,
                   int64_t *shape);
/* Write t (any strides; a device tensor through a host copy) as a C-order
 * .npy file, version 1.0.  bf16 has no NumPy dtype: SMELT_ERR_DTYPE (cast
 * it to f32 first). */
int smelt_npy_save(smelt_ctx *ctx, const char *path, const smelt_tensor *t);

/* Graph files: a versioned text format (docs/formats.md) holding every
 * node of g and the outputs given; constants round-trip bit-exactly. */
int smelt_graph_save(smelt_graph *g, int n_out, smelt_node *const *outputs, const char *path);
/* The same text in memory; *text is freed with smelt_free. */
int smelt_graph_to_text(smelt_graph *g, int n_out, smelt_node *const *outputs, char **text);
/* Read a graph file into a new graph.  *outputs (n_out nodes) is freed with
 * smelt_free; the nodes belong to *g. */
int smelt_graph_load(smelt_ctx *ctx, const char *path, smelt_graph **g, int *n_out,
                     smelt_node ***outputs);
int smelt_graph_from_text(smelt_ctx *ctx, const char *text, smelt_graph **g, int *n_out,
                          smelt_node ***outputs);
/* Graph input i (creation order; NULL if out of range) and a node's name
 * (inputs; NULL for other nodes). */
smelt_node *smelt_graph_input(const smelt_graph *g, int i);
const char *smelt_node_name(const smelt_node *n);
/* Save the graph recorded for the signature of the trace's last call, with
 * its outputs (SMELT_ERR_INVALID_ARG before the first call). */
int smelt_trace_save(smelt_trace *t, const char *path);

/* The kernels of a plan, in launch order: name and generated source (of the
 * layout compiled when the plan was built).  NULL if i is out of range. */
int smelt_plan_num_kernels(const smelt_plan *p);
const char *smelt_plan_kernel_name(const smelt_plan *p, int i);
const char *smelt_plan_kernel_source(const smelt_plan *p, int i);

/* The persistent kernel cache's folder (SMELT_CACHE_DIR, else
 * $XDG_CACHE_HOME/smelt, else ~/.cache/smelt; created) in buf.  An error
 * status, with the reason in smelt_errmsg(ctx), when the cache is off
 * (SMELT_CACHE=0) or no folder can be used. */
int smelt_cache_dir(smelt_ctx *ctx, char *buf, size_t n);

/* Copy all elements of src into dst (same dtype and shape; they must not
 * overlap).  Two host tensors: any strides.  With device tensors (two of
 * one context: a device-to-device copy, both contiguous; one device and one
 * host tensor: as smelt_tensor_copy_from_host / _to_host), see smelt_cuda.h. */
int smelt_tensor_copy(smelt_tensor *dst, const smelt_tensor *src);

/* CUDA (device tensors, emitting kernels without a GPU): smelt_cuda.h. */

#ifdef __cplusplus
}
#endif
#endif /* SMELT_H */
