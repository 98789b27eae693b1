/* The runtime: contexts, configuration, the thread pool, the compile
 * service (kernel cache, disk cache, tiers), plans and the executor, and
 * the interface every backend implements (backend.h). */
#ifndef SMELT_RUNTIME_H
#define SMELT_RUNTIME_H
#include <pthread.h>

#include "codegen.h"

/* ---- context --------------------------------------------------------- */
typedef struct smelt__pool smelt__pool;
typedef struct smelt__backend smelt__backend;
typedef struct smelt__kcache smelt__kcache;
typedef struct smelt__settings smelt__settings;
#include "backend.h"

struct smelt_ctx {
    smelt__ctx_err base; /* first: the error slot every layer writes (ir.h) */
    char *backend_override; /* from smelt_ctx_set_backend */
    int threads;            /* requested; 0 = all cores */
    smelt__pool *pool;      /* created on first parallel run */
    smelt__backend *backends[SMELT__MAX_BACKENDS]; /* by kind, created on demand */
    smelt__kcache *kcache;
    pthread_mutex_t lock;
    struct smelt__bg *bg; /* background compiler (src/runtime/tier.c), started on demand */
    const smelt__settings *settings; /* the environment when the last plan was made (smelt__ctx_settings) */
};
void smelt__bg_free(struct smelt__bg *bg);

/* ---- persistent kernel cache (src/runtime/diskcache.c) ----------------------- */
/* 0 when the cache is usable, 1 when SMELT_CACHE=0 turns it off, -1 (and
 * the reason in why) when its folder cannot be used. */
int smelt__dcache_check(smelt__sb *why);
/* 0 and a malloc'd payload on a hit; -1 on a miss (a bad entry is deleted). */
int smelt__dcache_load(const char *key, char **data, size_t *size);
/* Entries smelt__dcache_load has returned on the calling thread so far (a
 * compile that loaded its object from disk is told apart by it). */
unsigned long smelt__dcache_thread_hits(void);
int smelt__dcache_store(const char *key, const char *data, size_t size);
/* A "warning: ..." line when the last store into the usable cache failed
 * (a read-only folder or file system, a full disk). */
void smelt__dcache_store_warning(smelt__sb *warn);
/* Delete an entry (one that loaded but does not hold what its key says;
 * that load no longer counts in smelt__dcache_thread_hits). */
void smelt__dcache_remove(const char *key);

/* ---- config ---------------------------------------------------------- */
/* Resolve the backend name in force (explicit > ctx > SMELT_JIT_BACKEND >
 * MGB_JIT_BACKEND > AUTO) to a concrete kind (an index in the registry).
 * Errors name the valid values. */
int smelt__resolve_backend(smelt_ctx *ctx, const char *explicit_name, int *kind);
/* Whether the name in force is AUTO (tiered compilation on a CPU). */
bool smelt__backend_is_auto(smelt_ctx *ctx, const char *explicit_name);

/* ---- settings: every environment variable, read in one place ---------- */
/* The variables of settings.def by index: SMELT__S_SMELT_CACHE, ... */
enum {
#define SMELT_SETTING(name, kind, words, expect, keeps) SMELT__S_##name,
#define SMELT_SYSTEM(name) SMELT__S_##name,
#include "settings.def"
#undef SMELT_SETTING
#undef SMELT_SYSTEM
    SMELT__S_COUNT
};
extern const char *const smelt__settings_names[];
/* What the environment said when it was read (config.c, the only file that
 * calls getenv).  Lower layers get the values they need from the runtime,
 * never from the environment. */
struct smelt__settings {
    const char *raw[SMELT__S_COUNT]; /* each variable's value as read (NULL: unset) */
    /* parsed; a value the variable does not accept gives the default */
    const char *backend, *backend_source; /* SMELT_JIT_BACKEND, else MGB_JIT_BACKEND, not empty; or NULL */
    const char *cc_march;                 /* SMELT_CC_MARCH, "native" by default */
    int blocks_isa;                       /* SMELT_BLOCKS_ISA: 1, 3, 4 (x86-64 level) or 0 (the default) */
    double cc_timeout;                    /* SMELT_CC_TIMEOUT, seconds */
    bool cache_on;                        /* SMELT_CACHE */
    int stream_stores;                    /* SMELT_STREAM_STORES: -1 auto, 0 never, 1 always */
    int batch_chains;                     /* SMELT_BATCH_CHAINS: -1 auto, 0 never, 1 always (chain.c) */
    int rows_held, rows_shared, rows_warps, rows_steps; /* SMELT_CUDA_ROWS_*: plan.h says what each is */
    struct smelt__settings *next;        /* (config.c's list of snapshots) */
};
/* Read the environment now.  The snapshot is immutable and lives until the
 * last context is freed; a read that finds what an earlier one found
 * returns it. */
const smelt__settings *smelt__settings_read(void);
/* A context made (d = 1) or freed (-1): when none is left, the snapshots go. */
void smelt__settings_hold(int d);
/* The context's settings, read again now (a plan being made reads them:
 * what the environment says then holds for that plan and what the context
 * compiles until the next). */
const smelt__settings *smelt__ctx_settings(smelt_ctx *ctx);
/* The settings the context last read (those of now when ctx is NULL). */
const smelt__settings *smelt__settings_of(smelt_ctx *ctx);
/* The number above 0 and below 1e12 (whole if asked) in variable id, else
 * def and, for a value that is not one, a line in warn (may be NULL):
 * "warning: name='...' is not ...: ignored, <keeps> <def> <unit>". */
double smelt__bound(const smelt__settings *cfg, int id, double def, bool whole, const char *unit,
                    const char *keeps, smelt__sb *warn);
/* Whether variable id is set to a value it accepts. */
bool smelt__setting_valid(const smelt__settings *cfg, int id);
/* A "warning: NAME='v' is not ...: ignored, ..." line in warn for each
 * variable set to a value it does not accept. */
void smelt__settings_warnings(const smelt__settings *cfg, smelt__sb *warn);
/* The i-th name docs/env.md lists (NULL past the end). */
const char *smelt__setting_name(int i);
/* Whether SMELT_BLAS_LIB is set and is the BLAS library loaded (blas.c). */
bool smelt__blas_from_env(void);

/* ---- thread pool ----------------------------------------------------- */
typedef void (*smelt__task_fn)(void *arg, int64_t chunk);
smelt__pool *smelt__pool_new(int threads);
void smelt__pool_free(smelt__pool *p);
/* Run fn(arg, 0..nchunks-1) on the pool, the caller helping; returns when all
 * are done. */
void smelt__pool_run(smelt__pool *p, smelt__task_fn fn, void *arg, int64_t nchunks);
int smelt__ncpus(void);
/* Scratch memory of at least bytes for each thread of pool p (64-byte
 * aligned, kept by the pool until it is freed or a larger size is asked
 * for; call it before smelt__pool_run, not from a task): the thread
 * running a task owns bytes at base + smelt__pool_slot() * *stride.
 * NULL when out of memory. */
char *smelt__pool_scratch(smelt__pool *p, size_t bytes, size_t *stride);
/* The calling task's thread slot: 0 .. workers (the caller of pool_run). */
int smelt__pool_slot(void);
/* Set *flag under mu and wake every thread waiting on cv (a worker's stop). */
void smelt__raise_flag(pthread_mutex_t *mu, pthread_cond_t *cv, bool *flag);

/* ---- kernel cache (per context) -------------------------------------- */
typedef struct smelt__kernel {
    char name[40];
    char *source;
    smelt__kfn fn;
    void *handle; /* backend's */
    smelt__backend *backend;
    int n_operands;
    int rank;
    int step;        /* elements per device thread and loop step (smelt__emit_step) */
    char *desc;      /* the description it was emitted from (serialised) ... */
    size_t desc_len; /* ... so that a repeat finds it without emitting again */
    bool from_disk;  /* the backend loaded it from the persistent cache */
    /* the cache's bookkeeping (src/runtime/cache.c) */
    int refs;                       /* the cache's and each holder's (atomic) */
    size_t src_len, bytes;          /* bytes: what it holds, estimated */
    uint64_t hash[2];               /* of (backend, desc), (backend, source) */
    struct smelt__kernel *next[2];  /* in the hash chains of each */
    struct smelt__kernel *newer, *older; /* in the LRU list */
} smelt__kernel;

/* Find or compile.  *compiled tells whether this call compiled it (or,
 * with (*out)->from_disk, loaded it from the persistent cache); ms the
 * time that took.  Fails with SMELT_ERR_COMPILE and the log in err (or
 * SMELT_ERR_UNSUPPORTED when the backend's supports() declines d).
 * *out comes with a reference the caller owns: whatever keeps the pointer
 * (a plan's variant, a tier job, an upgrade) holds one and drops it with
 * smelt__kernel_unref, so a kernel the cache evicts lives while it is used. */
int smelt__kcache_get(smelt_ctx *ctx, smelt__backend *be, const smelt__kdesc *d,
                      smelt__kernel **out, bool *compiled, double *ms, smelt__sb *err);
void smelt__kernel_ref(smelt__kernel *k);
void smelt__kernel_unref(smelt__kernel *k); /* the last one releases it */
void smelt__kcache_free(smelt__kcache *c);
/* Release and drop every cached kernel of be (before be is destroyed; no
 * plan may hold one). */
void smelt__kcache_forget(smelt_ctx *ctx, smelt__backend *be);
/* Kernels in the context's cache and their estimated bytes. */
int smelt__kcache_count(smelt_ctx *ctx, size_t *bytes);
/* A "warning: ..." line for each SMELT_MEM_CACHE_MAX_KERNELS /
 * SMELT_MEM_CACHE_MAX_MB value that is ignored. */

/* ---- device tensors (src/runtime/tensor-device.c) ------------------------------ */
/* A new contiguous tensor in be's device memory. */
int smelt__tensor_new_on(smelt_ctx *ctx, smelt__backend *be, smelt_dtype dt, int ndim,
                         const int64_t *shape, smelt_tensor **out);
/* For plans of a device backend: *din / *dout are the tensors the kernels
 * use, host tensors replaced by device copies (inputs copied in).  unstage
 * copies the device results of host outputs back (status OK only), frees the
 * copies and returns status or the first error of its own.  An array whose
 * tensors are all on the device is not copied: *din or *dout is NULL (the
 * caller's array serves), and a run with device tensors only allocates
 * nothing on the host. */
int smelt__device_stage(smelt__backend *be, int n_in, smelt_tensor *const *inputs, int n_out,
                        smelt_tensor **outputs, smelt_tensor ***din, smelt_tensor ***dout);
int smelt__device_unstage(smelt__backend *be, int n_in, smelt_tensor *const *inputs,
                          smelt_tensor **din, int n_out, smelt_tensor **outputs,
                          smelt_tensor **dout, int status);

#endif
