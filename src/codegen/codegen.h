/* The code generator: kernel descriptions to source text, in a dialect
 * (C or CUDA), from templates. */
#ifndef SMELT_CODEGEN_H
#define SMELT_CODEGEN_H
#include "devlaunch.h"
#include "fusion.h"

/* Device kernels (CUDA dialect) take one parameter block, defined once in
 * templates/cuda/args.cu.in (which every CUDA template includes):
 *   struct { char *ptrs[nops]; idx n; idx shape[rank]; idx strides[nops * rank]; }
 * idx is 4 bytes for 32-bit index variants, else 8; its size is this, and
 * src/backends/cuda/cuda.c packs it (pack_params).  It is passed by value
 * when it fits in SMELT_KPARAM_MAX bytes (the classic kernel-parameter limit),
 * otherwise through a buffer in device memory. */
#define SMELT_KPARAM_MAX 4096
static inline size_t smelt__kparam_bytes(int nops, int rank, bool idx32)
{
    size_t isz = idx32 ? 4 : 8, n = (size_t)nops, r = (size_t)rank;
    return (8 * n + isz * (1 + r + n * r) + 7) & ~(size_t)7;
}
/* Whether the block goes by value, with extra bytes of other parameters
 * (a spread reduction's scratch pointers: 16). */
static inline bool smelt__kparam_by_value(int nops, int rank, bool idx32, size_t extra)
{
    return smelt__kparam_bytes(nops, rank, idx32) + extra <= SMELT_KPARAM_MAX;
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
/* What a backend asks the emitter for: the language and the kernel's form.
 * The kernel description says what to compute; the target, how. */
typedef struct smelt__target {
    const smelt__dialect *dialect;
    bool blocks; /* block form: calls to the library's smelt_blk_* primitives */
    const smelt__devtarget *device; /* a device dialect's processor (its warp width); NULL on the host */
} smelt__target;
/* Emit source for d.  The function is named "smelt_ew_<hash of the source>"
 * ("smelt_red_<hash>" for a reduction),
 * written to *name (at least 32 bytes).  Returns 0 or a status with err set. */
/* A row program's row cache on the CPU (C forms): bytes per element of a
 * row that each call of its kernel needs in ptrs[operands] (one row's
 * worth per call; shape[rank] gives the rows per call); 0 for none. */
int smelt__rows_cache_bytes(const smelt__kdesc *d);
/* A device row program's held form (smelt__kdesc.spread >=
 * SMELT_SPREAD_HELD): the most bytes per element of a row that its lanes
 * hold at once between two passes (the inputs two passes read, the values
 * one pass computes and a later one reads); -1 on failure.  *math: whether
 * a full-size operator is a transcendental function (exp, tanh, ...);
 * *shared: the bytes per element of a row its lanes keep in shared memory
 * (the elements past those in registers; values no later pass reads give
 * their place to others). */
int smelt__rows_held_bytes(const smelt__kdesc *d, bool *math, int *shared);
int smelt__emit(const smelt__target *t, const smelt__kdesc *d, smelt__sb *src, char *name,
                smelt__sb *err);
/* A device backend's library kernel (src/backends/cuda/cuda.c: a scan, a
 * strided copy): the dialect's template <base> rendered with the prelude in
 * {{PRELUDE}}, {{NAME}} "<prefix>_<hash of the source>" (written to *name,
 * at least 32 bytes) and the n (key, value) pairs of kv as slots (at most
 * 8).  Returns 0 or a status with err set. */
int smelt__emit_library(const smelt__dialect *dl, const char *base, const char *prefix, const char *const *kv, int n,
                        smelt__sb *src, char *name, smelt__sb *err);
/* Elements one thread of a device kernel for d takes per step of its
 * grid-stride loop: the vector width of flat kernels, else 1 (a launch needs
 * ceil(n / this) threads at most). */
int smelt__emit_step(const smelt__target *t, const smelt__kdesc *d);
/* The C source of every block primitive and of their table (smelt_blocks.c,
 * which src/codegen/gen-blocks.c writes at build time). */
int smelt__emit_blk_library(smelt__sb *out, smelt__sb *err);
/* Templates embedded at build time, overridable from SMELT_TEMPLATE_DIR. */
const char *smelt__template_builtin(const char *name);
/* The template name: from the folder smelt__templates_from set on this
 * thread, else built in.  The caller frees it. */
char *smelt__template_load(const char *name, smelt__sb *err);
/* Templates on the calling thread come first from folder dir (NULL or "":
 * the built-in ones only) until the next call; returns the folder before. */
const char *smelt__templates_from(const char *dir);

struct smelt__dialect {
    const char *dir;                       /* template folder: "c" */
    const char *ext;                       /* template file extension: "c" */
    const char *type[SMELT_DTYPE_COUNT];   /* compute type (values in the kernel body) */
    const char *stype[SMELT_DTYPE_COUNT];  /* storage type (memory); differs for f16/bf16,
                                            * which are bit patterns converted by the
                                            * prelude's smelt_h2f_* / smelt_f2h_* */
    const char *utype[SMELT_DTYPE_COUNT];  /* unsigned counterpart (wrapping arithmetic) */
    const char *fn_suffix[SMELT_DTYPE_COUNT]; /* math functions: expf vs exp */
    const char *restrict_kw;
    /* qualifiers in the prelude (templates/common/prelude.h.in): of its
     * helpers, of smelt's math functions, of their out-of-line slow paths
     * and of their tables */
    const char *helper_kw, *math_kw, *math_slow_kw, *table_kw;
    /* The libm functions kernels may call declared in the prelude (false:
     * the compiler declares its own) */
    bool libm_decls;
    /* Device dialect (CUDA): kernels read one parameter block `a` (see
     * smelt__kparam_bytes), run one element per thread in a grid-stride loop,
     * come in 32- and 64-bit index variants and use vector loads when every
     * operand is contiguous.  The templates hold the rest of the spelling;
     * the emitter's own device text spells these (NULL in a host dialect): */
    bool device;
    const char *args;          /* the parameter block's fields: "a." (host kernels: their own parameters) */
    const char *thread_idx, *block_idx, *block_dim, *grid_dim; /* a thread's and block's index, their counts */
    const char *barrier;       /* a block's threads wait for each other: a statement */
    const char *shared_kw;     /* a block's shared memory */
    const char *align16;       /* a declaration aligned to 16 bytes */
    const char *launch_bounds; /* a kernel's qualifier: the most threads a block has, launch_bounds(N) */
    const char *ro_load;       /* a load through the read-only cache: ro_load(&x) */
};
/* C's type and math-function names: storage (stype), compute (type), the
 * unsigned type of wrapping integer arithmetic, expf vs exp.  CUDA shares them. */
#define SMELT_C_NAMES \
    .type = {[SMELT_F32] = "float", [SMELT_F64] = "double", [SMELT_I32] = "int32_t", \
             [SMELT_I64] = "int64_t", [SMELT_U8] = "uint8_t", [SMELT_BOOL] = "uint8_t", \
             [SMELT_F16] = "float", [SMELT_BF16] = "float"}, \
    .stype = {[SMELT_F32] = "float", [SMELT_F64] = "double", [SMELT_I32] = "int32_t", \
              [SMELT_I64] = "int64_t", [SMELT_U8] = "uint8_t", [SMELT_BOOL] = "uint8_t", \
              [SMELT_F16] = "uint16_t", [SMELT_BF16] = "uint16_t"}, \
    .utype = {[SMELT_F32] = "float", [SMELT_F64] = "double", [SMELT_I32] = "uint32_t", \
              [SMELT_I64] = "uint64_t", [SMELT_U8] = "uint8_t", [SMELT_BOOL] = "uint8_t", \
              [SMELT_F16] = "float", [SMELT_BF16] = "float"}, \
    .fn_suffix = {[SMELT_F32] = "f", [SMELT_F64] = "", [SMELT_I32] = "", [SMELT_I64] = "", \
                  [SMELT_U8] = "", [SMELT_BOOL] = "", [SMELT_F16] = "f", [SMELT_BF16] = "f"}

#endif
