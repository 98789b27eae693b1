/* Plans: shared by plan.c (building) and exec.c (running), which call
 * each other never: both ask variant.c for a kernel's variant and launch.c
 * for its layout and launch form. */
#ifndef SMELT_PLAN_H
#define SMELT_PLAN_H
#include "runtime.h"

typedef struct smelt__variant {
    int rank;
    bool idx32; /* the 32-bit index variant (device dialects) */
    uint8_t rmask; /* reductions: the merged dimensions reduced (smelt__kdesc) */
    uint16_t spread; /* device reductions: spread over the warps (smelt__kdesc) */
    uint8_t mode[SMELT_MAX_KERNEL_OPERANDS];
    smelt__kernel *k;    /* what runs now (a reference held) */
    smelt__kernel *base; /* the first tier's kernel (upgrades are keyed by it; held) */
    uint8_t origin;      /* of base: SMELT__COMPILED, SMELT__FROM_MEMORY, SMELT__FROM_DISK */
} smelt__variant;

enum { SMELT__COMPILED, SMELT__FROM_MEMORY, SMELT__FROM_DISK };

/* An optimising-tier kernel compiled in the background for base (both held). */
typedef struct smelt__upgrade {
    smelt__kernel *base, *fast;
} smelt__upgrade;

typedef struct smelt__pkernel {
    smelt__cluster cl;  /* prog values it reads and writes */
    smelt__kdesc desc;  /* operators; layout fields per variant */
    smelt__variant *var;
    int nvar;
    bool fused;         /* more than one operator */
    bool library;       /* a library call (class LIBRARY: matmul through BLAS), no generated code */
    char *scratch;      /* a reduction's chunk results, kept for the next run (exec.c) */
    size_t scratch_bytes;
    char *dscratch;     /* the same on a device (exec.c), from dscratch_be */
    size_t dscratch_bytes, dscratch_part; /* (its counters' bytes, then the results') */
    smelt__backend *dscratch_be;
    int rows_cache;     /* a row program's row cache, bytes per element of a row (CPU) */
    int rows_held;      /* a row program's held form, bytes per element a lane holds (device;
                         * smelt__rows_held_bytes, -1: none) */
    bool rows_math;     /* ... whether a full-size operator of it is transcendental */
    int rows_shared;    /* ... and its bytes per element in shared memory */
    int rows_stages;    /* ... and its reductions */
    int64_t *gx;        /* its indexed reads' gather block (SMELT_GX_*; exec.c), host memory */
    void *dgx;          /* ... a device's copy, from dgx_be */
    smelt__backend *dgx_be;
    uint64_t rn_operands; /* a row program's operands at its results' shape without keepdims
                           * (bit o: operand o, inputs then outputs; smelt__kernel_strides) */
    int8_t chain;         /* a matmul: whether it starts a batch chain (chain.c): 0 not known yet,
                           * 1 yes, -1 no */
    int chain_v[3];       /* ... its product, the row program's result, the operand of the
                           * second product that reads it */
} smelt__pkernel;

/* A host kernel with indexed reads (smelt__kdesc.gidx) at merged rank
 * rank: one element a row where an index changes along the innermost
 * dimension (a dimension of size 1 after it); the new rank, -1 when there
 * is no room for it (src/runtime/exec.c). */
int smelt__gather_rows(const smelt__pkernel *k, int rank, int64_t *S, int n, int64_t (*st)[SMELT_MAX_DIMS],
                       uint8_t *mode);

typedef struct smelt__rshape {
    int ndim;
    int64_t shape[SMELT_MAX_DIMS];
} smelt__rshape;

/* BLAS (src/runtime/blas.c): the library's description (NULL when none
 * loads), SMELT_OK or an error saying none loads, its own threads off (smelt
 * runs its calls on its threads), and C = A B of row-major matrices (ta, tb:
 * A, B given transposed; f32 or f64). */
const char *smelt__blas_name(void);
int smelt__blas_check(smelt_ctx *ctx);
void smelt__blas_single_threaded(void);
int smelt__blas_gemm(smelt_ctx *ctx, smelt_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                     const void *a, int64_t lda, const void *b, int64_t ldb, void *c, int64_t ldc);
/* Subnormal operands read as zero (x86's DAZ) on this thread until
 * smelt__daz_restore(the value returned): BLAS's products and the conv's
 * own kernel (elsewhere a no-op) */
unsigned smelt__daz_on(void);
void smelt__daz_restore(unsigned csr);
/* C = A B + beta C (beta 0: C is not read) */
int smelt__blas_gemm_beta(smelt_ctx *ctx, smelt_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                          const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc);
/* Windows and scans (src/runtime/window.c): instruction x of p over its
 * operands' views in[] and its result's out, on the host. */
struct smelt__view;
int smelt__run_conv_taps(smelt_plan *p, const smelt__inst *x, const struct smelt__view *in, const struct smelt__view *out);
int smelt__run_scan(smelt_plan *p, const smelt__inst *x, const struct smelt__view *in, const struct smelt__view *out);
/* Whether a conv_taps of dtype dt runs smelt's own kernel on the host (f32
 * on a CPU with AVX-512: src/runtime/convk.c), else BLAS's products; on,
 * the f32 products are BLAS's everywhere (a test's switch, process-wide). */
bool smelt__conv_own_kernel(smelt_dtype dt);
void smelt__conv_force_blas(bool on);
/* ... on a device plan: through the backend's product (gemm), strided copy
 * and scan (backend.h); k's dscratch holds a convolution's weights laid
 * out by tap. */
int smelt__run_conv_taps_device(smelt_plan *p, smelt__pkernel *k, const smelt__inst *x, const struct smelt__view *in,
                                const struct smelt__view *out);
int smelt__run_scan_device(smelt_plan *p, const smelt__inst *x, const struct smelt__view *in,
                           const struct smelt__view *out);

/* What a memory plan gives (src/runtime/memplan.c), in bytes. */
typedef struct smelt__memplan {
    int buffers;   /* intermediates */
    int inplace;   /* of them, written in place of an input of their kernel */
    int64_t arena; /* the arena holding them all */
    int64_t lower; /* the largest set of their buffers live at once: no arena is smaller */
    int64_t naive; /* one buffer each */
    double ms;     /* how long planning took */
} smelt__memplan;

/* smelt_plan_run's work (exec.c); smelt_plan_run (bind.c) counts what it allocates. */
int smelt__plan_run(smelt_plan *p, int n_in, smelt_tensor *const *inputs, int n_out, smelt_tensor **outputs);

struct smelt_plan {
    smelt_ctx *ctx;
    const smelt__settings *settings; /* the environment when the plan was made */
    smelt__backend *be;
    int opt_level;
    smelt__prog prog;
    smelt__pkernel *kern;
    int nkern, kcap;
    smelt_plan_stats stats;
    smelt__sb log;  /* warnings */
    int rows_held_max;   /* SMELT_CUDA_ROWS_HELD: bytes a lane of a device row program holds in registers */
    int rows_shared;     /* SMELT_CUDA_ROWS_SHARED: and the rest in shared memory: -1 auto, 0 never, 1 always */
    int rows_warps;      /* SMELT_CUDA_ROWS_WARPS: the most warps a row of a held row program spans (1: one;
                          * 0: auto, SMELT_BLOCK_WARPS_AUTO for rows that fill the blocks or
                          * programs of one reduction, else one) */
    int rows_steps;      /* SMELT_CUDA_ROWS_STEPS: the rows a block (a warp) of a device row program runs in
                          * turn; 1, the default: a block a row, the GPU's scheduler balancing the blocks */
    smelt__sb desc; /* smelt_plan_describe */
    int *out_slot;  /* prog value -> output index, or -1 */
    bool *donated;  /* per graph input: smelt_plan_opts.donate named it */
    /* tiered compilation (AUTO on a CPU): TCC kernels run at once while the
     * CC backend compiles in the background; finished kernels are switched
     * in together at the start of a run. */
    smelt__backend *up_be;
    pthread_mutex_t up_mu;
    pthread_cond_t up_cv;
    int pending;            /* background compiles not finished */
    int runs;               /* runs started: the tier-up begins with the second */
    smelt__upgrade *ups;    /* finished ones */
    int nups, napplied;
    /* run state */
    smelt__rshape *rs; /* runtime shape of each value */
    void **buf;        /* intermediate storage per value (unplanned ones) */
    size_t *bufsize;
    /* memory plan (opt_level >= 2): intermediates at offsets of one arena,
     * planned again when the run-time shapes or the kernels change */
    smelt__memplan mem; /* for the last run's shapes (before any: the graph's) */
    int64_t *moff;      /* per value: its offset in the arena, -1: not in it */
    char *arena;        /* allocated by the first run that needs it */
    int64_t arena_size;
    uint64_t msig;      /* what moff was planned for (smelt__mem_sig; 0: nothing yet) */
};

/* Background compiler of a context (src/runtime/tier.c).
 * Queue variant vi of kernel ki (a warning in the plan's log if that fails). */
void smelt__tier_submit_variant(smelt_plan *p, int ki, int vi);
void smelt__tier_cancel(smelt_plan *p); /* drop queued jobs, wait for a running one */
void smelt__tier_apply(smelt_plan *p);  /* switch in finished upgrades */
void smelt__tier_start(smelt_plan *p);  /* count a run; queue the kernels on the second */

/* Plan the intermediates of p's kernels for the shapes rs: off[v] is value
 * v's offset in an arena (multiples of align), -1 for values not in it
 * (inputs, outputs, constants, values no kernel writes).  place false: the
 * counts and bounds only (arena = naive, offsets all -1). */
static inline int64_t smelt__mem_align(const smelt_plan *p)
{
    return p->be->iface->target.dialect->device ? 256 : 64;
}
/* What a memory plan depends on: the shapes in p->rs and the kernel list
 * (never 0).  Computed on every run: a word at a time over the dimensions
 * in use (hashing all of p->rs byte by byte, SMELT_MAX_DIMS dimensions and
 * padding each, was most of a small plan's run). */
static inline uint64_t smelt__mem_sig(const smelt_plan *p)
{
    uint64_t h = 0x9e3779b97f4a7c15ULL ^ (uint64_t)p->nkern;
    for (int v = 0; v < p->prog.n; v++) {
        const smelt__rshape *r = &p->rs[v];
        h = (h ^ (uint64_t)r->ndim) * 0xbf58476d1ce4e5b9ULL;
        h ^= h >> 31;
        for (int d = 0; d < r->ndim && d < SMELT_MAX_DIMS; d++) {
            h = (h ^ (uint64_t)r->shape[d]) * 0x94d049bb133111ebULL;
            h ^= h >> 29;
        }
    }
    return h | 1;
}
int smelt__mem_plan(const smelt_plan *p, const smelt__rshape *rs, int64_t align, bool place, int64_t *off,
                    smelt__memplan *out);
/* Whether cluster c may write its output v over its input u (shapes rs):
 * same element size and count (u is not broadcast), and no member of c
 * after v's writer reads u.  Every kernel form reads an element of u
 * before writing that element of v (the C loop and CUDA forms load each
 * element at its first use, the block form runs c's members in order, a
 * split kernel runs them as kernels in that order), so the result is the
 * same as with separate memory; whether u is still needed after c is the
 * caller's question. */
bool smelt__inplace_ok(const smelt_plan *p, const smelt__cluster *c, const smelt__rshape *rs, int u, int v);

/* An operand of a launch: its first element, shape and strides (elements). */
typedef struct smelt__view {
    char *data;
    int ndim;
    const int64_t *shape;
    const int64_t *strides;
} smelt__view;
/* Kernel ki's iteration shape S (the rank is returned) and each operand's
 * strides over it, for the shapes in p->rs and the operands w (inputs, then
 * outputs): an elementwise kernel iterates over its members' shape, a
 * reduction over its operand's (results and epilogue inputs with strides 0
 * along the reduced axes); broadcast operands have strides 0.  A run passes
 * its views; the plan, contiguous ones for the layout it compiles first
 * (src/runtime/launch.c).  *mask: the iteration's reduced dimensions (a row
 * program iterates over its kept axes, then its reduced ones). */
int smelt__kernel_strides(const smelt_plan *p, int ki, const smelt__view *w, int64_t *S,
                          int64_t (*st)[SMELT_MAX_DIMS], unsigned *mask);
/* The same for an elementwise kernel over a box of its members' shape
 * (its sizes: the regions of a kernel that reads a concat or a pad). */
int smelt__kernel_strides_box(const smelt_plan *p, int ki, const smelt__view *w, const int64_t *box, int64_t *S,
                              int64_t (*st)[SMELT_MAX_DIMS], unsigned *mask);

/* ---- kernels and their variants (src/runtime/variant.c) ---- */
/* Insert the clusters of pt as kernels at position at, replacing nrep there. */
int smelt__plan_put_kernels(smelt_plan *p, int at, int nrep, smelt__partition *pt);
/* Release what kernel k holds (its variants, its scratch memory). */
void smelt__pkernel_free(smelt__pkernel *k);
/* Compile the variant of kernel ki for a layout (rmask: a reduction's
 * reduced dimensions, 0 for other kernels; spread: smelt__red_spread's
 * answer, false for other kernels); on failure of a fused kernel, replace
 * it by its unfused kernels (logged) and report *split. */
int smelt__plan_variant(smelt_plan *p, int ki, int rank, const uint8_t *mode, bool idx32, uint8_t rmask,
                        uint16_t spread, smelt__kernel **out, bool *split);
/* How reduction kernel ki of nout results of nred elements each, merged to
 * rank dimensions of which rmask's are reduced, spreads over a device's
 * warps (smelt__kdesc.spread; 0 on the CPU) (launch.c). */
uint16_t smelt__red_spread(const smelt_plan *p, int ki, int64_t nout, int64_t nred, int rank, uint8_t rmask);
/* A device elementwise kernel's tiles over merged shape S with operand
 * strides st (smelt__kdesc.spread, SMELT_SPREAD_TILE; 0: none) (launch.c). */
uint16_t smelt__device_tile(const smelt__pkernel *k, int rank, const int64_t *S, int64_t (*st)[SMELT_MAX_DIMS],
                            const uint8_t *mode);
/* A device reduction's grid in dl (n, block, steps) and the scratch its
 * form needs (launch.c, smelt__red_grid). */
void smelt__red_grid(const smelt_plan *p, int ki, uint16_t spread, int64_t nout, int64_t nred, smelt__devlaunch *dl,
                     size_t *part, int64_t *ncnt);
/* Whether an input with strides sto (elements of es bytes) is read
 * transposed along dimension q before the innermost pd (launch.c). */
bool smelt__read_transposed(const int64_t *sto, int q, int pd, size_t es);
#endif
