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
} smelt__devlaunch;

enum { SMELT_COPY_H2D, SMELT_COPY_D2H, SMELT_COPY_D2D };
struct smelt__kernel;

typedef struct smelt__backend_i {
    const char *name;
    const smelt__dialect *dialect;
    bool blocks;   /* kernels call the library's vectorised block primitives */
    /* 1 if usable here; otherwise 0 with the reason in why. */
    int (*available)(smelt__backend *be, smelt__sb *why);
    /* Compile source; look up fn_name; *fn the entry point, *handle what
     * release() frees.  On failure SMELT_ERR_COMPILE with the log in log. */
    int (*compile)(smelt__backend *be, const char *source, const char *fn_name, void **fn,
                   void **handle, smelt__sb *log);
    void (*release)(smelt__backend *be, void *handle);
    /* Memory for tensors the executor owns (host backends: aligned malloc). */
    void *(*alloc)(smelt__backend *be, size_t bytes);
    void (*free)(smelt__backend *be, void *ptr);
    void (*destroy)(smelt__backend *be);
    /* Device backends only (NULL for host backends, whose kernels the
     * executor calls directly on its thread pool).  Each returns a status and
     * records the error on be->ctx.  launch() queues kernel k (compiled by
     * this backend) on the backend's stream; copy() and sync() wait. */
    int (*launch)(smelt__backend *be, const struct smelt__kernel *k, const smelt__devlaunch *l);
    int (*copy)(smelt__backend *be, void *dst, const void *src, size_t bytes, int dir);
    int (*sync)(smelt__backend *be);
} smelt__backend_i;

struct smelt__backend {
    const smelt__backend_i *iface;
    void *context;
    smelt_ctx *ctx;
    int kind; /* SMELT_BK_* */
};

smelt__backend *smelt__backend_tcc_new(smelt_ctx *ctx);
/* The system C compiler (src/backend-cc.c). */
smelt__backend *smelt__backend_cc_new(smelt_ctx *ctx);
const char *smelt__cc_flags(void); /* the optimisation flags it compiles with */
/* CUDA through the driver API and NVRTC, both loaded with dlopen
 * (src/backend-cuda.c).  target NULL: the GPU of this machine; otherwise a
 * compile-only backend for that arch ("sm_90" CUBIN, "compute_90" PTX) that
 * needs libnvrtc but no GPU, and cannot launch. */
smelt__backend *smelt__backend_cuda_new(smelt_ctx *ctx, const char *target);
/* 1 if a usable CUDA GPU and libnvrtc are present (probed once per process);
 * otherwise 0 with the reason in why (may be NULL). */
int smelt__cuda_present(smelt__sb *why);
/* NVRTC alone: compile source for arch; *image is CUBIN ("sm_*") or PTX
 * ("compute_*"), freed by the caller.  SMELT_ERR_BACKEND if libnvrtc cannot
 * be loaded, SMELT_ERR_COMPILE with the log otherwise. */
int smelt__nvrtc_compile(const char *source, const char *name, const char *arch, char **image,
                         size_t *size, smelt__sb *log);
/* The backend of the given kind for ctx (created once per context). */
int smelt__backend_get(smelt_ctx *ctx, int kind, smelt__backend **out);
void *smelt__host_alloc(smelt__backend *be, size_t bytes);
void smelt__host_free(smelt__backend *be, void *ptr);

#endif
