/* The backend interface.  A backend is an {iface, context} pair; the plan
 * builder and the executor only ever call through the iface. */
#ifndef SMELT_BACKEND_H
#define SMELT_BACKEND_H

/* One launch of a device kernel: what the executor hands to launch(). */
typedef struct smelt__devlaunch {
    int64_t n;              /* elements of the iteration space */
    int nops, rank;         /* operands (inputs, then outputs); merged rank */
    bool idx32;             /* the kernel is the 32-bit index variant */
    char *const *ptrs;      /* device pointers, nops */
    const int64_t *shape;   /* rank */
    const int64_t *strides; /* nops * rank, elements */
    /* a reduction's chunks spread over the warps (kernel_reduce.cu.in's
     * smelt_red_scratch, its second parameter): device memory for the
     * chunks' results and a zeroed counter per result; NULL otherwise */
    void *red_part, *red_cnt;
    /* the threads a block must have (a row program whose rows span several
     * warps, each row a block's); 0: the backend's choice */
    int block;
    /* the grid-stride loop's steps a thread takes (the rows a block or warp
     * of a row program runs in turn): the grid is the blocks over them,
     * rounded up; 0: the backend's choice */
    int steps;
} smelt__devlaunch;

enum { SMELT_COPY_H2D, SMELT_COPY_D2H, SMELT_COPY_D2D };

/* One batched matrix product on a device, row-major: C = A @ B (+ C when
 * beta is 1: a convolution's taps accumulated in place) for each of batch
 * matrices.  A is M x K: element (i, k) at i * lda + k, or at
 * k * lda + i when ta (stored transposed); B (K x N) likewise with ldb, tb;
 * C (M x N) at i * ldc + j.  The next matrix of each lies sa, sb, sc
 * elements on (0: the same one, broadcast); or, where ptrs is set, the
 * matrices lie anywhere: ptrs holds 3 * batch host addresses of device
 * memory, A's, then B's, then C's (a batch of several dimensions that no
 * one stride walks; the backend copies them to the device, so the array
 * may be reused once gemm returns).  f16 and bf16 accumulate in f32. */
typedef struct smelt__gemm {
    smelt_dtype dt;
    int64_t M, N, K, batch;
    const void *A, *B;
    void *C;
    bool ta, tb;
    int64_t lda, ldb, ldc, sa, sb, sc;
    const void *const *ptrs;
    double beta; /* 0: C is only written; 1: the product is added to C */
} smelt__gemm;

/* A scan on a device (cumsum, cumprod: src/runtime/exec.c's run_window): a
 * thread a line, each line combined in order from its first element (the
 * last with rev), in dt (f16 and bf16 through f32, rounded each step; i64
 * wrapping), as src/runtime/window.c does on the host.  The lines are the
 * other dimensions' elements: rank of them (0 to 7), shape and the
 * operand's and result's strides (elements) in ist, ost; each line n
 * elements at strides si and so from there. */
typedef struct smelt__devscan {
    smelt_dtype dt;
    bool prod, excl, rev; /* cumprod; exclusive; from the end */
    int rank;
    int64_t n, si, so;
    int64_t shape[SMELT_MAX_DIMS], ist[SMELT_MAX_DIMS], ost[SMELT_MAX_DIMS];
    const void *in;
    void *out;
} smelt__devscan;

/* A strided copy on a device: dst[i] = src[i] for every index i of shape
 * (rank 1 to SMELT_MAX_DIMS; strides in elements of es bytes: 2, 4 or 8) */
typedef struct smelt__devcopy {
    int rank;
    int es;
    int64_t shape[SMELT_MAX_DIMS], ss[SMELT_MAX_DIMS], ds[SMELT_MAX_DIMS];
    const void *src;
    void *dst;
} smelt__devcopy;
struct smelt__kernel;

typedef struct smelt__backend_i {
    const char *name;
    smelt__target target; /* the dialect and form of its kernels; a device's processor
                           * (target.device: src/codegen/devlaunch.h) */
    /* 1 if usable here; otherwise 0 with the reason in why. */
    int (*available)(smelt__backend *be, smelt__sb *why);
    /* Compile source; look up fn_name; *fn the entry point, *handle what
     * release() frees.  On failure SMELT_ERR_COMPILE with the log in log. */
    int (*compile)(smelt__backend *be, const char *source, const char *fn_name, void **fn,
                   void **handle, smelt__sb *log);
    void (*release)(smelt__backend *be, void *handle);
    /* Memory for tensors the executor owns (NULL: 64-byte aligned host
     * memory; smelt__be_alloc). */
    void *(*alloc)(smelt__backend *be, size_t bytes);
    void (*free)(smelt__backend *be, void *ptr);
    void (*destroy)(smelt__backend *be);
    /* Whether this backend can compile kernel d (NULL: every kernel); if
     * not, 0 with the reason in why, and the plan runs d's operators as
     * separate kernels. */
    int (*supports)(smelt__backend *be, const smelt__kdesc *d, smelt__sb *why);
    /* Compile-only backends: what they compiled, for smelt_plan_emit_only.
     * Writes the report to out; returns the number of kernels rejected,
     * with a sentence saying so in fail. */
    int (*report)(smelt__backend *be, smelt__sb *out, smelt__sb *fail);
    /* Device backends only (NULL for host backends, whose kernels the
     * executor calls directly on its thread pool).  Each returns a status and
     * records the error on be->ctx.  launch() queues kernel k (compiled by
     * this backend) on the backend's stream; copy() and sync() wait. */
    int (*launch)(smelt__backend *be, const struct smelt__kernel *k, const smelt__devlaunch *l);
    int (*copy)(smelt__backend *be, void *dst, const void *src, size_t bytes, int dir);
    int (*sync)(smelt__backend *be);
    /* Device backends: a matrix product (NULL: none; the plan refuses a
     * matmul).  Queued on the backend's stream. */
    int (*gemm)(smelt__backend *be, const smelt__gemm *g);
    /* Device backends: a scan and a strided copy by kernels of the
     * backend's own (NULL: none; a plan with a scan or a convolution then
     * fails when it runs).  Queued on the backend's stream. */
    int (*scan)(smelt__backend *be, const smelt__devscan *s);
    int (*copy_strided)(smelt__backend *be, const smelt__devcopy *c);
} smelt__backend_i;

struct smelt__backend {
    const smelt__backend_i *iface;
    void *context;
    smelt_ctx *ctx;
    int kind; /* index in smelt__backend_table */
};

/* ---- the registry (src/backends/registry.c) ----------------------------
 * One entry per backend; the names the API, SMELT_JIT_BACKEND and the CLI
 * accept, AUTO's choice and its optimising tier all come from this table.
 * A backend's kind is its index. */
typedef struct smelt__backend_info {
    const char *name;  /* "TCC" (matched case-insensitively) */
    const char *about; /* one line for `smelt info` */
    /* A new backend for ctx in *out, or a status recorded on ctx.  target
     * NULL: for this machine; otherwise (compile_only backends) one that
     * compiles for that target and cannot run ("": this machine's target or
     * a default). */
    int (*create)(smelt_ctx *ctx, const char *target, smelt__backend **out);
    /* Whether one can work here at all, probed cheaply once per process
     * (NULL: always); AUTO asks before creating one. */
    int (*present)(smelt__sb *why);
    int auto_pref;       /* AUTO takes the present one with the highest; 0: never */
    const char *tier_up; /* under AUTO, this backend recompiles the kernels in the background */
    bool device;         /* tensors and kernels live in device memory */
    bool disk_cache;     /* keeps compiled kernels in the persistent cache */
    bool compile_only;   /* create() takes a target (smelt_plan_emit_only) */
} smelt__backend_info;
extern const smelt__backend_info smelt__backend_table[];
extern const int smelt__backend_count;
#define SMELT__MAX_BACKENDS 8
/* The kind of a backend name (case-insensitive), or -1. */
int smelt__backend_find(const char *name);

/* The backend of the given kind for ctx (created once per context). */
int smelt__backend_get(smelt_ctx *ctx, int kind, smelt__backend **out);
/* The first registered device backend that works here (device tensors). */
int smelt__backend_device(smelt_ctx *ctx, smelt__backend **out);
/* A new backend of iface for ctx with a zeroed context of context_bytes
 * (0: none), or a status recorded on ctx (the constructors' common part). */
int smelt__backend_new(smelt_ctx *ctx, const smelt__backend_i *iface, size_t context_bytes,
                       smelt__backend **out);
/* Memory for tensors the executor owns: the backend's alloc/free, or
 * 64-byte aligned host memory when it has none. */
void *smelt__be_alloc(smelt__backend *be, size_t bytes);
void smelt__be_free(smelt__backend *be, void *ptr);

#endif
