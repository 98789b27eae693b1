/* The bottom layer: what every other layer may use.  Growable strings and
 * small utilities, the operator and dtype tables (ops.def), a context's
 * error slot, host tensors, the graph and its lowered program, the scalar
 * semantics of every operator.  Includes only the public header.
 * Cross-file private functions are named smelt__*. */
#ifndef SMELT_IR_H
#define SMELT_IR_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "smelt.h"

/* ---- allocations ------------------------------------------------------
 * Every malloc, calloc and realloc in the library goes through these (the
 * macros; smelt__aligned_alloc too), which count them on the calling thread:
 * a plan's run reports what it made (smelt_plan_stats.run_allocs), and no
 * program has to replace the C library's to see it. */
void *smelt__malloc(size_t n);
void *smelt__calloc(size_t n, size_t m);
void *smelt__realloc(void *p, size_t n);
int64_t smelt__allocs(void); /* allocations the calling thread has made so far */
#define malloc(n) smelt__malloc(n)
#define calloc(n, m) smelt__calloc(n, m)
#define realloc(p, n) smelt__realloc(p, n)

#define SMELT_UNUSED(x) ((void)(x))
#define SMELT_MIN(a, b) ((a) < (b) ? (a) : (b))
#define SMELT_MAX(a, b) ((a) > (b) ? (a) : (b))

#if defined(__GNUC__)
#define SMELT_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define SMELT_PRINTF(f, a)
#endif

/* ---- growable string ------------------------------------------------- */
typedef struct smelt__sb {
    char *s;
    size_t len, cap;
    bool oom;
} smelt__sb;
void smelt__sb_init(smelt__sb *b);
void smelt__sb_free(smelt__sb *b);
void smelt__sb_putn(smelt__sb *b, const char *s, size_t n);
void smelt__sb_puts(smelt__sb *b, const char *s);
void smelt__sb_printf(smelt__sb *b, const char *fmt, ...) SMELT_PRINTF(2, 3);
void smelt__sb_vprintf(smelt__sb *b, const char *fmt, va_list ap);
const char *smelt__sb_str(smelt__sb *b); /* never NULL */
char *smelt__sb_take(smelt__sb *b);       /* caller frees; NULL on OOM */

uint64_t smelt__hash(const void *data, size_t n, uint64_t seed);
double smelt__now_ms(void);
/* "s" unless n is 1: "%d kernel%s", n, smelt__plural(n) */
static inline const char *smelt__plural(long long n) { return n == 1 ? "" : "s"; }
/* Whether the text at *s (ending at end) begins with c; if so, *s steps
 * past it (a reader's cursor). */
static inline bool smelt__skip_char(const char **s, const char *end, char c)
{
    if (*s >= end || **s != c)
        return false;
    (*s)++;
    return true;
}
/* A whole file (NUL-terminated; *len its size), or NULL with errno set
 * (EFBIG when it is larger than max). */
char *smelt__read_file(const char *path, size_t max, size_t *len);
/* path (relative to dirfd, AT_FDCWD: the working folder) opened for
 * reading without blocking on a FIFO and required to be a regular file:
 * NULL with errno (EISDIR a folder, EINVAL a FIFO, device or socket; its
 * text: smelt__open_strerror).  nofollow: not through a final symlink. */
FILE *smelt__fopen_regular(int dirfd, const char *path, bool nofollow);
const char *smelt__open_strerror(int e);
/* rel, a relative path without "..", opened beneath the folder dir, with no
 * symlink on the way (a graph file's constants): NULL with *why (the rule
 * broken) or errno. */
FILE *smelt__fopen_beneath(const char *dir, const char *rel, const char **why);
/* (src/frontends/npy.c) a .npy file already open (named path in messages),
 * read and closed. */
int smelt__npy_load_file(smelt_ctx *ctx, FILE *f, const char *path, smelt_tensor **out);
/* Write the n pieces data[i], len[i] bytes each, to the file path (made
 * or truncated); on failure the file is removed and the error recorded on
 * ctx: "cannot open '<path>' for writing: ..." or "cannot write ...". */
int smelt__write_file(smelt_ctx *ctx, const char *path, int n, const void *const *data, const size_t *len);
int smelt__mkdir_p(const char *path, unsigned mode); /* mkdir -p (new folders get mode); 0 or -1 */
char *smelt__strdup(const char *s);
/* Room for element n of an array v of *cap elements of elem bytes: v, or
 * v reallocated to twice *cap (first when *cap is 0) with *cap updated;
 * NULL when out of memory (v is then left as it was). */
void *smelt__grow(void *v, int n, int *cap, size_t elem, int first);
void *smelt__aligned_alloc(size_t bytes); /* 64-byte aligned, freed with free() */

/* ---- op and dtype tables --------------------------------------------- */
enum { SMELT_CLASS_SOURCE, SMELT_CLASS_ELEMWISE, SMELT_CLASS_VIEW, SMELT_CLASS_CAST, SMELT_CLASS_OPAQUE,
       SMELT_CLASS_REDUCE, SMELT_CLASS_LIBRARY, SMELT_CLASS_GATHER };
enum { SMELT_RULE_NONE, SMELT_RULE_SAME, SMELT_RULE_FLOAT, SMELT_RULE_TRUEDIV, SMELT_RULE_CMP, SMELT_RULE_WHERE,
       SMELT_RULE_SUM, SMELT_RULE_MEAN, SMELT_RULE_ARG, SMELT_RULE_BOOL };
enum { SMELT_DT_F = 1, SMELT_DT_I = 2, SMELT_DT_U = 4, SMELT_DT_B = 8 };
/* a reduction's identity (ops.def): what its accumulators start from */
enum { SMELT_IDENT_NONE, SMELT_IDENT_ZERO, SMELT_IDENT_ONE, SMELT_IDENT_LOWEST, SMELT_IDENT_HIGHEST };

typedef struct smelt__opinfo {
    const char *name;
    int arity, cls, rule, dtypes;
    const char *c_float, *c_int;
    int ident; /* reductions: SMELT_IDENT_* */
} smelt__opinfo;
extern const smelt__opinfo smelt__ops[SMELT_OP_COUNT];

typedef struct smelt__dtinfo {
    const char *name;
    size_t size;
    int kind; /* SMELT_DT_F / I / U / B */
} smelt__dtinfo;
extern const smelt__dtinfo smelt__dtypes[SMELT_DTYPE_COUNT];
static inline bool smelt__is_float(smelt_dtype d)
{
    return d == SMELT_F32 || d == SMELT_F64 || d == SMELT_F16 || d == SMELT_BF16;
}
/* f16 and bf16 are storage types: kernels load them into f32, compute in
 * f32 and round each result back (docs/numerics.md). */
static inline bool smelt__is_half(smelt_dtype d) { return d == SMELT_F16 || d == SMELT_BF16; }
/* The dtype an operator on operands of dtype d computes in. */
static inline smelt_dtype smelt__compute_dtype(smelt_dtype d) { return smelt__is_half(d) ? SMELT_F32 : d; }
bool smelt__dtype_valid(int d);

/* ---- reductions (class REDUCE) ----------------------------------------
 * The one order every kernel combines in, a function of the shape only
 * (docs/numerics.md): a reduced row of n elements (row-major over the
 * reduced axes) is cut into chunks of SMELT_RED_CHUNK; in a chunk, lane l
 * (of SMELT_RED_LANES) accumulates elements l, l + 32, l + 64, ... in turn
 * from the identity, then lane l takes lane l + d for d = 16, 8, 4, 2, 1
 * (a warp's shuffle-down tree); the chunks' results are combined in order,
 * from the identity. */
#define SMELT_RED_LANES 32
#define SMELT_RED_CHUNK 16384
static inline bool smelt__is_reduce(smelt_op op) { return smelt__ops[op].cls == SMELT_CLASS_REDUCE; }
/* The result dtype of reduction op on an operand of dtype dt, and the
 * dtype it accumulates in (ops.def's rules). */
smelt_dtype smelt__red_result(smelt_op op, smelt_dtype dt);
smelt_dtype smelt__red_acc(smelt_op op, smelt_dtype dt);
/* The identity of op as a value of the accumulator dtype acc (-inf, the
 * integer minimum, ...). */
double smelt__red_identity(smelt_op op, smelt_dtype acc);
/* The shape of a reduction over the axes in mask (bit d: axis d) of a
 * value of shape in (rank ndim): the reduced axes dropped, or kept as 1. */
void smelt__red_shape(int ndim, const int64_t *in, unsigned mask, bool keepdims, int *ondim, int64_t *out);
/* The elements a reduction combines for each of its results: the product
 * of the reduced dimensions. */
int64_t smelt__red_count(int ndim, const int64_t *in, unsigned mask);
/* Round a double to what dtype d can hold (integers wrap, floats round to
 * nearest even; f16/bf16 directly from the double, as a cast does). */
double smelt__dtype_round(smelt_dtype d, double v);
/* Round an operator's result, computed in double, as a kernel would: f16
 * and bf16 through f32 first (the kernel's compute type), other dtypes as
 * smelt__dtype_round. */
double smelt__dtype_round_result(smelt_dtype d, double v);
/* IEEE binary16 and bfloat16 bit patterns: round to nearest even from a
 * double (overflow gives infinity, NaN stays NaN with its sign and top
 * payload bits, quieted), and the exact value of a pattern. */
uint16_t smelt__f16_from_double(double v);
uint16_t smelt__bf16_from_double(double v);
double smelt__f16_to_double(uint16_t h);
double smelt__bf16_to_double(uint16_t h);
/* ---- a context's error slot ------------------------------------------ */
/* struct smelt_ctx (src/runtime/runtime.h) begins with this: every layer
 * records errors through smelt__err without knowing the rest. */
typedef struct smelt__ctx_err {
    smelt__sb err;
} smelt__ctx_err;
/* Record an error on ctx (if not NULL) and return status.  smelt__err_at
 * begins the message with the place in a file it is about, "file:line: "
 * ("file: " when line is 0). */
int smelt__err_at(smelt_ctx *ctx, int status, const char *file, int line, const char *fmt, ...)
    SMELT_PRINTF(5, 6);
#define smelt__err(ctx, status, ...) smelt__err_at(ctx, status, NULL, 0, __VA_ARGS__)
void smelt__clear_err(smelt_ctx *ctx);

/* ---- tensors --------------------------------------------------------- */
struct smelt__backend; /* device memory's owner (src/runtime/backend.h) */
typedef struct smelt__buffer {
    int refs;
    void *mem;  /* owned allocation, or NULL when wrapped */
    size_t bytes;
    struct smelt__backend *dev; /* device memory of this backend (NULL: host memory) */
    /* device memory only: how the tensor layer frees it and reads from it */
    void (*dev_free)(struct smelt__backend *be, void *mem);
    int (*dev_read)(struct smelt__backend *be, void *dst, const void *src, size_t bytes);
} smelt__buffer;

struct smelt_tensor {
    smelt_ctx *ctx;
    smelt_dtype dtype;
    int ndim;
    int64_t shape[SMELT_MAX_DIMS];
    int64_t strides[SMELT_MAX_DIMS]; /* elements */
    char *data;                      /* first element */
    smelt__buffer *buf;
};
int64_t smelt__numel(int ndim, const int64_t *shape);
/* Whether the memory ranges of a's and b's elements intersect (host or
 * device addresses alike; conservative for interleaved views). */
bool smelt__tensors_overlap(const smelt_tensor *a, const smelt_tensor *b);
/* Copy src's elements into dst (host tensors, same dtype and shape). */
void smelt__tensor_copy_into(smelt_tensor *dst, const smelt_tensor *src);
/* Every shape entering the library (tensors, views, graph inputs and
 * broadcasts, .npy and graph files, the CLI) passes here: rank 0..8,
 * dimensions >= 0, and the product of the dimensions (a zero one counted as
 * 1, so strides cannot overflow either) at most SMELT_MAX_ELEMS, so element
 * counts, strides and byte offsets (x 16) fit in int64.  SMELT_OK, or a
 * status recorded on ctx with a message "what: " and the shape's fault. */
#define SMELT_MAX_ELEMS ((int64_t)1 << 59)
int smelt__shape_check(smelt_ctx *ctx, const char *what, int ndim, const int64_t *shape);
void smelt__contig_strides(int ndim, const int64_t *shape, int64_t *strides);
/* Broadcast shapes (NumPy rules): 0 or SMELT_ERR_SHAPE. */
int smelt__broadcast_shapes(int na, const int64_t *a, int nb, const int64_t *b, int *nout,
                            int64_t *out);
void smelt__shape_str(smelt__sb *b, int ndim, const int64_t *shape);
/* The same into buf (SMELT_SHAPE_STR_MAX bytes, enough for any rank up to
 * SMELT_MAX_DIMS), for a message; returns buf. */
#define SMELT_SHAPE_STR_MAX 192
const char *smelt__shape_fmt(char *buf, int ndim, const int64_t *shape);
static inline bool smelt__is_device(const smelt_tensor *t) { return t && t->buf && t->buf->dev; }

/* ---- tensor constants ------------------------------------------------- */
/* A constant tensor's values, C-contiguous, shared (reference-counted) by
 * the graph node and the programs lowered from it. */
typedef struct smelt__blob {
    int refs;
    size_t bytes;
    uint64_t hash; /* of the bytes, dtype and shape: equal constants are stored once */
    char data[];
} smelt__blob;
void smelt__blob_release(smelt__blob *b);

/* ---- graph ----------------------------------------------------------- */
struct smelt_node {
    smelt_graph *g;
    int id;
    smelt_op op;
    smelt_dtype dtype;
    int ndim;
    int64_t shape[SMELT_MAX_DIMS];
    int nin;
    smelt_node *in[3];
    double fval;   /* constants: value (float dtypes / weak) */
    int64_t ival;  /* constants: value (integer dtypes) */
    bool weak;     /* weakly typed scalar */
    int input_index;
    char *name;
    uint8_t axes;  /* reductions: the reduced axes (bit d: axis d) */
    bool keepdims; /* reductions: the reduced axes stay, of size 1 */
    int64_t vp[SMELT_MAX_DIMS]; /* views: their parameters (src/ir/view.c) */
    smelt__blob *blob;          /* constant tensors: their values */
};

struct smelt_graph {
    smelt_ctx *ctx;
    /* while a trace records into it: what smelt_trace_capture does
     * (src/frontends/trace.c) */
    smelt_node *(*capture)(smelt_graph *g, const smelt_tensor *t, void *arg);
    void *capture_arg;
    smelt_node **nodes;
    int n, cap;
    smelt_node **inputs;
    int nin, incap;
    int status;
    smelt__sb err;
};

/* The shape of matmul(a, b), operands of rank >= 2 (batch dimensions
 * broadcast): SMELT_OK, or SMELT_ERR_SHAPE with the reason in why. */
int smelt__matmul_shape(int na, const int64_t *a, int nb, const int64_t *b, int *nout, int64_t *out, smelt__sb *why);

/* ---- views (class VIEW, src/ir/view.c) --------------------------------
 * A view is a new shape and strides over its operand's elements: kernels
 * read it where its operand lies, nothing computes it.  Parameters (vp):
 *   broadcast_to  none: the node's shape is the target (right-aligned)
 *   reshape       the new shape: a dimension, -1 (inferred, one at most), or
 *                 -2 - k: dimension k of the operand (expand_dims and
 *                 squeeze keep the others so, whatever the run-time sizes)
 *   transpose     vp[d]: the operand's axis that becomes axis d
 *   slice         vp[0] the axis, vp[1..3] start, stop, step as Python's
 *                 (SMELT_NONE: absent; negative ones count from the end)
 *   concat        vp[0] the axis along which in[1] follows in[0]
 *   pad           vp[0] the axis, vp[1] and vp[2] the elements before and
 *                 after, vp[3] the bits of their value (one element)
 * Concat and pad are piecewise (smelt__is_piece): no strides read them
 * whole; a kernel that reads one runs once per region of its iteration
 * space that one piece covers (src/runtime/pieces.c), and every other
 * reader (a reduction, a matrix product, a reshape strides cannot map
 * piece by piece) reads a copy (smelt__prog_finalize).
 * Shapes follow at run time from the operand's (sizes may change between
 * runs, as for any plan). */
static inline bool smelt__is_view(smelt_op op) { return smelt__ops[op].cls == SMELT_CLASS_VIEW; }
static inline bool smelt__is_piece(smelt_op op) { return op == SMELT_OP_CONCAT || op == SMELT_OP_PAD; }
/* Parts (the values under views, concats and pads, counted with repeats)
 * one value reads at most: a longer concat is built from copies of
 * concats of this many (smelt_concat). */
#define SMELT_MAX_PARTS 8
/* The shape of a's and b's concat along axis (same rank, the other
 * dimensions equal): SMELT_OK, or SMELT_ERR_SHAPE with the reason in why. */
int smelt__concat_shape(int axis, int na, const int64_t *a, int nb, const int64_t *b, int64_t *out, smelt__sb *why);
/* The shape of view op (parameters vp; gshape: the node's shape in the
 * graph, a broadcast's target) over an operand of shape in (rank ndim),
 * into *ondim, out: SMELT_OK, or SMELT_ERR_SHAPE with the reason in why. */
int smelt__view_shape(smelt_op op, int rank, const int64_t *vp, const int64_t *gshape, int ndim, const int64_t *in,
                      int *ondim, int64_t *out, smelt__sb *why);
/* The strides of that view (of shape out, rank r) over an operand of
 * shape in and strides st (elements), and *off moved to its first
 * element: false when a reshape cannot be had by strides (the operand's
 * elements do not lie as the new shape walks them: it needs a copy). */
bool smelt__view_strides(smelt_op op, const int64_t *vp, int r, const int64_t *out, int ndim, const int64_t *in,
                         const int64_t *st, int64_t *off, int64_t *ost);
/* A view node of op (reshape, transpose, slice) over a with its n
 * parameters vp, checked (a sticky error on g when they are bad). */
smelt_node *smelt__view_node(smelt_graph *g, smelt_op op, smelt_node *a, int n, const int64_t *vp);
/* A window's or a scan's node (conv_taps, cumsum, cumprod: ops.def) over
 * its operands in[] with its n parameters vp, checked (graph files;
 * src/ir/window.c).  The number of parameters each takes: */
smelt_node *smelt__window_node(smelt_graph *g, smelt_op op, smelt_node *const *in, int n, const int64_t *vp);
static inline int smelt__window_nvp(smelt_op op)
{
    return op == SMELT_OP_CONV_TAPS ? 8 : op == SMELT_OP_CUMSUM || op == SMELT_OP_CUMPROD ? 3 : -1;
}
/* A Python slice start:stop:step over n elements: the first index and the
 * count (PySlice_AdjustIndices); step != 0. */
void smelt__slice_range(int64_t n, int64_t start, int64_t stop, int64_t step, int64_t *first, int64_t *count);

/* ---- lowered program (what passes, partitioner and executor see) ----- */
typedef struct smelt__inst {
    smelt_op op;
    smelt_dtype dtype;
    int ndim;
    int64_t shape[SMELT_MAX_DIMS]; /* example shape (the graph's) */
    int nin;
    int in[3];
    double fval;
    int64_t ival;
    int input_index; /* SMELT_OP_INPUT */
    uint8_t axes;    /* reductions: the reduced axes of the operand (bit d: axis d) */
    bool keepdims;   /* reductions: the reduced axes stay, of size 1 */
    int64_t vp[SMELT_MAX_DIMS]; /* views: their parameters (src/ir/view.c) */
                     /* constant tensors: ival indexes the program's blobs */
    int uses;        /* filled by smelt__prog_uses */
    bool is_output;
} smelt__inst;

typedef struct smelt__prog {
    smelt__inst *v;
    int n, cap;
    int *outputs;
    int nout;
    /* (smelt__prog_finalize) the value whose kernel writes output i: outputs[i],
     * or the value outputs[i] views (transposes, reshapes), written through
     * their inverse into the output's memory (exec.c value_view) */
    int *out_base;
    int ninputs; /* graph inputs, all of them */
    smelt_dtype *in_dtypes;
    int *in_ndim;
    int64_t (*in_shape)[SMELT_MAX_DIMS];
    smelt__blob **blobs; /* constant tensors' values (one reference each) */
    int nblobs;
    int blk_isa; /* the level of the block primitives constant folding runs (smelt__blk_find) */
} smelt__prog;

int smelt__prog_from_graph(smelt_graph *g, int n_out, smelt_node *const *outs, smelt__prog *p,
                           smelt__sb *err);
void smelt__prog_free(smelt__prog *p);
void smelt__prog_uses(smelt__prog *p);
/* Give every output its own instruction that computes it (copies of
 * inputs, constants and views), and a reshape that strides cannot express
 * a copy of its operand to read. */
int smelt__prog_finalize(smelt__prog *p);
/* The strides and offset (elements) of value v read through its views from
 * contiguous values, at the graph's shapes (v's own if it is not a view);
 * false when a reshape on the way cannot be had by strides. */
bool smelt__view_chain(const smelt__prog *p, int v, int64_t *off, int64_t *st);
/* Whether a reshape to shape xs of one of shape as only adds or drops axes
 * of size 1 (it maps a concat's or a pad's pieces axis to axis). */
bool smelt__reshape_ones(int xn, const int64_t *xs, int an, const int64_t *as);
/* The values whose elements v reads: v itself when it is not a view, else
 * those under its views, concats and pads (each once; at most
 * SMELT_MAX_PARTS).  Returns how many, in out. */
int smelt__view_bases(const smelt__prog *p, int v, int *out);
/* Whether v is, or views, a concat or a pad (read in pieces). */
bool smelt__has_pieces(const smelt__prog *p, int v);
/* The axes of v (bit d for axis d) along which its pieces are cut: a
 * superset (a slice may leave one piece); 0 when v has no pieces. */
unsigned smelt__pieces_axes(const smelt__prog *p, int v);
/* Whether v reads u's elements (u is among its bases). */
static inline bool smelt__reads_base(const smelt__prog *p, int v, int u)
{
    int b[SMELT_MAX_PARTS], n = smelt__view_bases(p, v, b);
    for (int i = 0; i < n; i++)
        if (b[i] == u)
            return true;
    return false;
}

/* Scalar semantics shared by the reference interpreter and constant
 * folding: op applied to already-rounded operand values of dtype in_dt,
 * result rounded to out_dt. */
double smelt__eval_scalar(smelt_op op, smelt_dtype in_dt, smelt_dtype out_dt, const double *a);
/* A block primitive by name (smelt_blk_<op>_<dtype>, ...): the TinyCC tier's
 * kernels call them, constant folding runs them on one element (src/ir/blocks.c). */
/* The x86-64 level this CPU runs: 4 (AVX-512: F, BW, DQ, VL), 3 (AVX2, FMA,
 * BMI1/2) or 1; from feature names both gcc and clang know (clang 14 has
 * no "x86-64-v3" or "f16c"); 1 on other architectures. */
static inline int smelt__x86_level(void)
{
#if defined(__x86_64__) && defined(__GNUC__)
    bool v3 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
              __builtin_cpu_supports("bmi") && __builtin_cpu_supports("bmi2");
    bool v4 = v3 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
              __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl");
    return v4 ? 4 : v3 ? 3 : 1;
#else
    return 1;
#endif
}
typedef void (*smelt__blk_prim)(int64_t n, char *o, const char *a, const char *b, const char *c);
/* The primitive of that name at x86-64 level isa (1, 3, 4: SMELT_BLOCKS_ISA,
 * where the CPU runs it; 0: the default), or NULL. */
smelt__blk_prim smelt__blk_find(const char *name, int isa);
/* The name of op's block primitive on compute dtype dt: smelt_blk_<op>_<dt>,
 * a cast's smelt_blk_cast_<dt>_<to> (src/ir/dtype.c; the emitter writes the
 * primitives: smelt__emit_blk_library). */
#define SMELT_BLK_NAME_MAX 64
void smelt__blk_name(char *name, smelt_op op, smelt_dtype dt, smelt_dtype to);
/* one element of dtype dt as a double, and back (v exact in dt) */
double smelt__elem_load(smelt_dtype dt, const char *p);
void smelt__elem_store(smelt_dtype dt, char *p, double v);

/* strtod in the "C" locale, whatever LC_NUMERIC says. */
double smelt__strtod(const char *s, char **end);

#endif
