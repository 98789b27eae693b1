/* Private declarations shared by the library's files.  Cross-file private
 * functions are named smelt__*. */
#ifndef SMELT_INTERNAL_H
#define SMELT_INTERNAL_H

#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "smelt.h"

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
/* A whole file (NUL-terminated; *len its size), or NULL with errno set
 * (EFBIG when it is larger than max). */
char *smelt__read_file(const char *path, size_t max, size_t *len);
int smelt__mkdir_p(const char *path, unsigned mode); /* mkdir -p (new folders get mode); 0 or -1 */
char *smelt__strdup(const char *s);
void *smelt__aligned_alloc(size_t bytes); /* 64-byte aligned, freed with free() */

/* ---- op and dtype tables --------------------------------------------- */
enum { SMELT_CLASS_SOURCE, SMELT_CLASS_ELEMWISE, SMELT_CLASS_LAYOUT, SMELT_CLASS_CAST, SMELT_CLASS_OPAQUE };
enum { SMELT_RULE_NONE, SMELT_RULE_SAME, SMELT_RULE_FLOAT, SMELT_RULE_TRUEDIV, SMELT_RULE_CMP, SMELT_RULE_WHERE };
enum { SMELT_DT_F = 1, SMELT_DT_I = 2, SMELT_DT_U = 4, SMELT_DT_B = 8 };

typedef struct smelt__opinfo {
    const char *name;
    int arity, cls, rule, dtypes;
    const char *c_float, *c_int;
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

/* ---- context --------------------------------------------------------- */
typedef struct smelt__pool smelt__pool;
typedef struct smelt__backend smelt__backend;
typedef struct smelt__kcache smelt__kcache;

struct smelt_ctx {
    smelt__sb err;
    char *backend_override; /* from smelt_ctx_set_backend */
    int threads;            /* requested; 0 = all cores */
    smelt__pool *pool;      /* created on first parallel run */
    smelt__backend *backends[4];
    smelt__kcache *kcache;
    pthread_mutex_t lock;
    struct smelt__bg *bg; /* background compiler (src/tier.c), started on demand */
};
void smelt__bg_free(struct smelt__bg *bg);
/* Record an error on ctx (if not NULL) and return status. */
int smelt__err(smelt_ctx *ctx, int status, const char *fmt, ...) SMELT_PRINTF(3, 4);
void smelt__clear_err(smelt_ctx *ctx);

/* ---- tensors --------------------------------------------------------- */
typedef struct smelt__buffer {
    int refs;
    void *mem;  /* owned allocation, or NULL when wrapped */
    size_t bytes;
    smelt__backend *dev; /* device memory of this backend (NULL: host memory) */
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
 * status and a message naming the shape in why. */
#define SMELT_MAX_ELEMS ((int64_t)1 << 59)
int smelt__shape_check(int ndim, const int64_t *shape, smelt__sb *why);
void smelt__contig_strides(int ndim, const int64_t *shape, int64_t *strides);
/* Broadcast shapes (NumPy rules): 0 or SMELT_ERR_SHAPE. */
int smelt__broadcast_shapes(int na, const int64_t *a, int nb, const int64_t *b, int *nout,
                            int64_t *out);
void smelt__shape_str(smelt__sb *b, int ndim, const int64_t *shape);

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
};

struct smelt_graph {
    smelt_ctx *ctx;
    smelt_node **nodes;
    int n, cap;
    smelt_node **inputs;
    int nin, incap;
    int status;
    smelt__sb err;
};

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
    bool copy;       /* a copy made for an output: its shape follows its operand */
    int uses;        /* filled by smelt__prog_uses */
    bool is_output;
} smelt__inst;

typedef struct smelt__prog {
    smelt__inst *v;
    int n, cap;
    int *outputs;
    int nout;
    int ninputs; /* graph inputs, all of them */
    smelt_dtype *in_dtypes;
    int *in_ndim;
    int64_t (*in_shape)[SMELT_MAX_DIMS];
} smelt__prog;

int smelt__prog_from_graph(smelt_graph *g, int n_out, smelt_node *const *outs, smelt__prog *p,
                           smelt__sb *err);
void smelt__prog_free(smelt__prog *p);
void smelt__prog_uses(smelt__prog *p);
/* Give every output its own non-source instruction (copies where needed). */
int smelt__prog_finalize(smelt__prog *p);
/* Passes; each returns the number of instructions it removed or replaced. */
int smelt__pass_fold(smelt__prog *p);
int smelt__pass_cse(smelt__prog *p);
int smelt__pass_dce(smelt__prog *p);

/* Scalar semantics shared by the reference interpreter and constant
 * folding: op applied to already-rounded operand values of dtype in_dt,
 * result rounded to out_dt. */
double smelt__eval_scalar(smelt_op op, smelt_dtype in_dt, smelt_dtype out_dt, const double *a);
/* A block primitive by name (smelt_blk_<op>_<dtype>, ...): the TinyCC tier's
 * kernels call them, constant folding runs them on one element (src/blocks.c). */
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
smelt__blk_prim smelt__blk_find(const char *name);
/* The name of op's block primitive on compute dtype dt: smelt_blk_<op>_<dt>,
 * a cast's smelt_blk_cast_<dt>_<to> (src/dtype.c; the emitter writes the
 * primitives: smelt__emit_blk_library). */
#define SMELT_BLK_NAME_MAX 64
void smelt__blk_name(char *name, smelt_op op, smelt_dtype dt, smelt_dtype to);
/* one element of dtype dt as a double, and back (v exact in dt) */
double smelt__elem_load(smelt_dtype dt, const char *p);
void smelt__elem_store(smelt_dtype dt, char *p, double v);

/* ---- kernels ---------------------------------------------------------- */
enum { SMELT_MODE_CONTIG = 0, SMELT_MODE_BCAST = 1, SMELT_MODE_STRIDED = 2 };

/* A kernel description: what the emitter turns into source. Values are
 * numbered: 0..n_in-1 are the kernel inputs, n_in + k is body op k. */
typedef struct smelt__kop {
    smelt_op op;
    smelt_dtype dtype;
    int nin;
    int in[3];
    double fval;
    int64_t ival;
} smelt__kop;

typedef struct smelt__kdesc {
    int n_in, n_out, n_ops;
    smelt_dtype in_dt[SMELT_MAX_KERNEL_OPERANDS];
    smelt__kop *ops;
    int out_val[SMELT_MAX_KERNEL_OPERANDS]; /* value index of each output */
    /* layout variant */
    int rank;                              /* merged rank; 1 and all CONTIG = flat */
    uint8_t mode[SMELT_MAX_KERNEL_OPERANDS]; /* inputs then outputs */
    bool blocks;                           /* block form: calls to smelt_blk_* (backend's) */
    bool idx32; /* iteration space and every operand offset fit in 31 bits: device
                 * dialects index with 32-bit arithmetic (C kernels ignore it) */
} smelt__kdesc;

/* Device kernels (CUDA dialect) take one parameter block:
 *   struct { char *ptrs[nops]; idx n; idx shape[rank]; idx strides[nops * rank]; }
 * idx is 4 bytes for 32-bit index variants, else 8.  It is passed by value
 * when it fits in SMELT_KPARAM_MAX bytes (the classic kernel-parameter limit),
 * otherwise through a buffer in device memory. */
#define SMELT_KPARAM_MAX 4096
static inline size_t smelt__kparam_bytes(int nops, int rank, bool idx32)
{
    size_t isz = idx32 ? 4 : 8, n = (size_t)nops, r = (size_t)rank;
    return (8 * n + isz * (1 + r + n * r) + 7) & ~(size_t)7;
}

/* The generated kernel's C signature (C dialect):
 *   void name(int64_t start, int64_t end, char *const *ptrs,
 *             const int64_t *shape, const int64_t *strides)
 * It computes linear elements [start, end) of the iteration space; shape has
 * rank entries, strides rank entries per operand (inputs, then outputs). */
typedef void (*smelt__kfn)(int64_t start, int64_t end, char *const *ptrs, const int64_t *shape,
                           const int64_t *strides);

typedef struct smelt__dialect smelt__dialect;
extern const smelt__dialect smelt__dialect_c;
extern const smelt__dialect smelt__dialect_cuda;
/* Emit source for d.  The function is named "smelt_ew_<hash of the source>",
 * written to *name (at least 32 bytes).  Returns 0 or a status with err set. */
int smelt__emit(const smelt__dialect *dl, const smelt__kdesc *d, smelt__sb *src, char *name,
                smelt__sb *err);
/* The C source of every block primitive and of their table (smelt_blocks.c,
 * which src/codegen/gen-blocks.c writes at build time). */
int smelt__emit_blk_library(smelt__sb *out, smelt__sb *err);
/* Templates embedded at build time, overridable from SMELT_TEMPLATE_DIR. */
const char *smelt__template_builtin(const char *name);
char *smelt__template_load(const char *name, smelt__sb *err); /* caller frees */

/* ---- partition (fusion/partition.c) ----------------------------------- */
typedef struct smelt__cluster {
    int *members; /* instruction indices, ascending (topological) */
    int nmem;
    int *inputs; /* values read from outside (no constants) */
    int nin;
    int *outputs; /* members read outside the cluster or requested */
    int nout;
} smelt__cluster;

typedef struct smelt__partition {
    smelt__cluster *c; /* in an order that respects dependencies */
    int n;
} smelt__partition;

/* Operators in one cluster at most (a larger fusible group splits). */
#define SMELT_MAX_CLUSTER_OPS 256
/* fuse=false: one cluster per operator (the unfused path). */
int smelt__partition_build(const smelt__prog *p, bool fuse, smelt__partition *out);
/* One cluster per member of c (the fallback when c fails to compile). */
int smelt__partition_split(const smelt__prog *p, const smelt__cluster *c, smelt__partition *out);
void smelt__partition_free(smelt__partition *pt);
/* The kernel description of a cluster (layout fields left for the caller). */
int smelt__cluster_kdesc(const smelt__prog *p, const smelt__cluster *c, smelt__kdesc *d);
void smelt__kdesc_free(smelt__kdesc *d);

/* ---- backends -------------------------------------------------------- */
#include "backend.h"

/* ---- persistent kernel cache (src/diskcache.c) ----------------------- */
/* The cache folder (created 0700) in buf and an open descriptor of it, once
 * checked: owned by this user, not writable by group or others.  -1 when
 * the cache is off or unusable (why, if not NULL, says why). */
int smelt__dcache_open(char *buf, size_t n, smelt__sb *why);
/* 0 when the cache is usable, 1 when SMELT_CACHE=0 turns it off, -1 (and
 * the reason in why) when its folder cannot be used. */
int smelt__dcache_check(smelt__sb *why);
/* A "warning: ..." line for each SMELT_CACHE / SMELT_CACHE_MAX_MB value
 * that is ignored (not a valid setting). */
void smelt__dcache_config_warnings(smelt__sb *warn);
/* The same for SMELT_DUMP_DIR when it names no folder that can be written
 * (src/cache.c, which creates it when it is missing). */
void smelt__dump_dir_warning(smelt__sb *warn);
/* 0 and a malloc'd payload on a hit; -1 on a miss (a bad entry is deleted). */
int smelt__dcache_load(const char *key, char **data, size_t *size);
/* Entries smelt__dcache_load has returned on the calling thread so far (a
 * compile that loaded its object from disk is told apart by it). */
unsigned long smelt__dcache_thread_hits(void);
int smelt__dcache_store(const char *key, const char *data, size_t size);
/* Delete an entry (one that loaded but does not hold what its key says). */
void smelt__dcache_remove(const char *key);

/* ---- config ---------------------------------------------------------- */
enum { SMELT_BK_AUTO = 0, SMELT_BK_TCC, SMELT_BK_CC, SMELT_BK_NVRTC, SMELT_BK_COUNT };
/* Resolve the backend name in force (explicit > ctx > SMELT_JIT_BACKEND >
 * MGB_JIT_BACKEND > AUTO) to a concrete kind.  Errors name the valid values. */
int smelt__resolve_backend(smelt_ctx *ctx, const char *explicit_name, int *kind);
/* Whether the name in force is AUTO (tiered compilation on a CPU). */
bool smelt__backend_is_auto(smelt_ctx *ctx, const char *explicit_name);
const char *smelt__backend_kind_name(int kind);

/* ---- thread pool ----------------------------------------------------- */
typedef void (*smelt__task_fn)(void *arg, int64_t chunk);
smelt__pool *smelt__pool_new(int threads);
void smelt__pool_free(smelt__pool *p);
int smelt__pool_size(const smelt__pool *p);
/* Run fn(arg, 0..nchunks-1) on the pool, the caller helping; returns when all
 * are done. */
void smelt__pool_run(smelt__pool *p, smelt__task_fn fn, void *arg, int64_t nchunks);
int smelt__ncpus(void);

/* ---- kernel cache (per context) -------------------------------------- */
typedef struct smelt__kernel {
    char name[40];
    char *source;
    smelt__kfn fn;
    void *handle; /* backend's */
    smelt__backend *backend;
    int n_operands;
    int rank;
    char *desc;      /* the description it was emitted from (serialised) ... */
    size_t desc_len; /* ... so that a repeat finds it without emitting again */
    bool from_disk;  /* the backend loaded it from the persistent cache */
} smelt__kernel;

/* Find or compile.  *compiled tells whether this call compiled it (or,
 * with (*out)->from_disk, loaded it from the persistent cache); ms the
 * time that took.  Fails with SMELT_ERR_COMPILE and the log in err. */
int smelt__kcache_get(smelt_ctx *ctx, smelt__backend *be, const smelt__kdesc *d,
                      smelt__kernel **out, bool *compiled, double *ms, smelt__sb *err);
void smelt__kcache_free(smelt__kcache *c);
/* Release and drop every cached kernel of be (before be is destroyed). */
void smelt__kcache_forget(smelt_ctx *ctx, smelt__backend *be);

/* ---- device tensors (src/tensor-device.c) ------------------------------ */
static inline bool smelt__is_device(const smelt_tensor *t) { return t && t->buf && t->buf->dev; }
/* A new contiguous tensor in be's device memory. */
int smelt__tensor_new_on(smelt_ctx *ctx, smelt__backend *be, smelt_dtype dt, int ndim,
                         const int64_t *shape, smelt_tensor **out);
/* For plans of a device backend: *din / *dout are the tensors the kernels
 * use, host tensors replaced by device copies (inputs copied in).  unstage
 * copies the device results of host outputs back (status OK only), frees the
 * copies and returns status or the first error of its own. */
int smelt__device_stage(smelt__backend *be, int n_in, smelt_tensor *const *inputs, int n_out,
                        smelt_tensor **outputs, smelt_tensor ***din, smelt_tensor ***dout);
int smelt__device_unstage(smelt__backend *be, int n_in, smelt_tensor *const *inputs,
                          smelt_tensor **din, int n_out, smelt_tensor **outputs,
                          smelt_tensor **dout, int status);

/* ---- text helpers (src/expr.c) -------------------------------------- */
/* strtod in the "C" locale, whatever LC_NUMERIC says. */
double smelt__strtod(const char *s, char **end);
/* The expression language's alias table: entry i (NULL past the end). */
const char *smelt__expr_alias(int i, const char **op);

#endif
