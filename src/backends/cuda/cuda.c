/* CUDA backend: NVRTC compiles the generated CUDA source to CUBIN for the
 * GPU's compute capability (PTX for the driver to finish when NVRTC does not
 * know the arch); the driver API loads and launches it on one stream per
 * context.  libcuda.so.1 and libnvrtc are loaded with dlopen, never linked:
 * smelt builds and runs everywhere, and a machine without a driver, with
 * the toolkit's stub driver or without a device reports "no GPU" and why.
 *
 * The matrix product (class LIBRARY) goes to cuBLAS, loaded the same way
 * when a plan first multiplies matrices (libcublas.so.13, .12, .11, or
 * SMELT_CUBLAS_LIB).
 *
 * The prototypes below are our own; when the CUDA headers are found at
 * build time (meson option cuda) they are checked against them. */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends.h"

#ifdef SMELT_HAVE_CUDA_H
#include <cuda.h>
#include <nvrtc.h>
#else
typedef int CUresult;
typedef int CUdevice;
typedef int CUdevice_attribute;
typedef int CUfunction_attribute;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUevent_st *CUevent;
typedef size_t (*CUoccupancyB2DSize)(int block_size);
typedef int nvrtcResult;
typedef struct _nvrtcProgram *nvrtcProgram;
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR 75
#define CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR 76
#define CU_STREAM_NON_BLOCKING 1
#define CU_EVENT_DISABLE_TIMING 2
#define CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK 0
#define CUDA_SUCCESS 0
#endif

_Static_assert(sizeof(void *) == 8 && sizeof(CUdeviceptr) == 8, "CUDA needs a 64-bit host");

/* member, exported symbol, parameters; every one returns CUresult */
#define SMELT_CU_FNS(X)                                                                        \
    X(Init, "cuInit", (unsigned int))                                                          \
    X(DriverGetVersion, "cuDriverGetVersion", (int *))                                         \
    X(GetErrorName, "cuGetErrorName", (CUresult, const char **))                               \
    X(DeviceGetCount, "cuDeviceGetCount", (int *))                                             \
    X(DeviceGet, "cuDeviceGet", (CUdevice *, int))                                             \
    X(DeviceGetAttribute, "cuDeviceGetAttribute", (int *, CUdevice_attribute, CUdevice))       \
    X(DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain", (CUcontext *, CUdevice))             \
    X(DevicePrimaryCtxRelease, "cuDevicePrimaryCtxRelease_v2", (CUdevice))                     \
    X(CtxPushCurrent, "cuCtxPushCurrent_v2", (CUcontext))                                      \
    X(CtxPopCurrent, "cuCtxPopCurrent_v2", (CUcontext *))                                      \
    X(StreamCreate, "cuStreamCreate", (CUstream *, unsigned int))                              \
    X(StreamDestroy, "cuStreamDestroy_v2", (CUstream))                                         \
    X(StreamSynchronize, "cuStreamSynchronize", (CUstream))                                    \
    X(ModuleLoadData, "cuModuleLoadData", (CUmodule *, const void *))                          \
    X(ModuleUnload, "cuModuleUnload", (CUmodule))                                              \
    X(ModuleGetFunction, "cuModuleGetFunction", (CUfunction *, CUmodule, const char *))        \
    X(FuncGetAttribute, "cuFuncGetAttribute", (int *, CUfunction_attribute, CUfunction))       \
    X(OccupancyMaxPotentialBlockSize, "cuOccupancyMaxPotentialBlockSize",                      \
      (int *, int *, CUfunction, CUoccupancyB2DSize, size_t, int))                             \
    X(LaunchKernel, "cuLaunchKernel",                                                          \
      (CUfunction, unsigned int, unsigned int, unsigned int, unsigned int, unsigned int,       \
       unsigned int, unsigned int, CUstream, void **, void **))                                \
    X(MemAlloc, "cuMemAlloc_v2", (CUdeviceptr *, size_t))                                      \
    X(MemFree, "cuMemFree_v2", (CUdeviceptr))                                                  \
    X(MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2", (CUdeviceptr, const void *, size_t, CUstream)) \
    X(MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2", (void *, CUdeviceptr, size_t, CUstream))       \
    X(MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2", (CUdeviceptr, CUdeviceptr, size_t, CUstream))     \
    X(MemAllocHost, "cuMemAllocHost_v2", (void **, size_t))                                    \
    X(MemFreeHost, "cuMemFreeHost", (void *))                                                  \
    X(EventCreate, "cuEventCreate", (CUevent *, unsigned int))                                 \
    X(EventRecord, "cuEventRecord", (CUevent, CUstream))                                       \
    X(EventSynchronize, "cuEventSynchronize", (CUevent))                                       \
    X(EventDestroy, "cuEventDestroy_v2", (CUevent))

/* member, parameters; every one returns nvrtcResult (nvrtcGetErrorString apart) */
#define SMELT_NVRTC_FNS(X)                                                                     \
    X(Version, (int *, int *))                                                                 \
    X(GetNumSupportedArchs, (int *))                                                           \
    X(GetSupportedArchs, (int *))                                                              \
    X(CreateProgram, (nvrtcProgram *, const char *, const char *, int, const char *const *,    \
                      const char *const *))                                                    \
    X(DestroyProgram, (nvrtcProgram *))                                                        \
    X(CompileProgram, (nvrtcProgram, int, const char *const *))                                \
    X(GetProgramLogSize, (nvrtcProgram, size_t *))                                             \
    X(GetProgramLog, (nvrtcProgram, char *))                                                   \
    X(GetPTXSize, (nvrtcProgram, size_t *))                                                    \
    X(GetPTX, (nvrtcProgram, char *))                                                          \
    X(GetCUBINSize, (nvrtcProgram, size_t *))                                                  \
    X(GetCUBIN, (nvrtcProgram, char *))

/* cuBLAS: member, exported symbol, parameters; every one returns blas_status */
typedef int blas_status;
typedef struct cublasContext *blas_handle;
enum { CUBLAS_OP_N_ = 0, CUBLAS_OP_T_ = 1, CUDA_R_16F_ = 2, CUDA_R_16BF_ = 14, CUBLAS_COMPUTE_32F_ = 68,
       CUBLAS_GEMM_DEFAULT_ = -1 };
#define SMELT_CUBLAS_FNS(X)                                                                           \
    X(Create, "cublasCreate_v2", (blas_handle *))                                                  \
    X(Destroy, "cublasDestroy_v2", (blas_handle))                                                  \
    X(SetStream, "cublasSetStream_v2", (blas_handle, CUstream))                                    \
    X(SgemmStridedBatched, "cublasSgemmStridedBatched",                                               \
      (blas_handle, int, int, int, int, int, const float *, const float *, int, long long int,     \
       const float *, int, long long int, const float *, float *, int, long long int, int))          \
    X(DgemmStridedBatched, "cublasDgemmStridedBatched",                                               \
      (blas_handle, int, int, int, int, int, const double *, const double *, int, long long int,   \
       const double *, int, long long int, const double *, double *, int, long long int, int))       \
    X(GemmStridedBatchedEx, "cublasGemmStridedBatchedEx",                                             \
      (blas_handle, int, int, int, int, int, const void *, const void *, int, int, long long int,  \
       const void *, int, int, long long int, const void *, void *, int, int, long long int, int, int, \
       int))                                                                                       \
    X(SgemmBatched, "cublasSgemmBatched",                                                             \
      (blas_handle, int, int, int, int, int, const float *, const float *const *, int,             \
       const float *const *, int, const float *, float *const *, int, int))                        \
    X(DgemmBatched, "cublasDgemmBatched",                                                             \
      (blas_handle, int, int, int, int, int, const double *, const double *const *, int,           \
       const double *const *, int, const double *, double *const *, int, int))                     \
    X(GemmBatchedEx, "cublasGemmBatchedEx",                                                           \
      (blas_handle, int, int, int, int, int, const void *, const void *const *, int, int,          \
       const void *const *, int, int, const void *, void *const *, int, int, int, int, int))

#ifdef SMELT_HAVE_CUDA_H /* our prototypes must be the headers' */
#define SMELT_CHECK_CU(m, sym, args)                                                          \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&cu##m), CUresult(*) args), sym);
#define SMELT_CHECK_NVRTC(m, args)                                                            \
    _Static_assert(__builtin_types_compatible_p(__typeof__(&nvrtc##m), nvrtcResult(*) args), \
                   "nvrtc" #m);
SMELT_CU_FNS(SMELT_CHECK_CU)
SMELT_NVRTC_FNS(SMELT_CHECK_NVRTC)
#if __has_include(<cublas_v2.h>) /* our cuBLAS constants must be the header's */
#include <cublas_v2.h>
_Static_assert((int)CUBLAS_OP_N == CUBLAS_OP_N_ && (int)CUBLAS_OP_T == CUBLAS_OP_T_ && (int)CUDA_R_16F == CUDA_R_16F_ &&
                   (int)CUDA_R_16BF == CUDA_R_16BF_ && (int)CUBLAS_COMPUTE_32F == CUBLAS_COMPUTE_32F_ &&
                   (int)CUBLAS_GEMM_DEFAULT == CUBLAS_GEMM_DEFAULT_ && (int)CUBLAS_STATUS_ALLOC_FAILED == 3,
               "cuBLAS constants");
#endif
_Static_assert(__builtin_types_compatible_p(__typeof__(&nvrtcGetErrorString),
                                            const char *(*)(nvrtcResult)),
               "nvrtcGetErrorString");
#endif

/* Process-wide: the libraries, their entry points and what probing found. */
static struct {
    pthread_once_t nvrtc_once, driver_once;
    void *nvrtc_lib, *cuda_lib;
#define SMELT_CU_MEMBER(m, sym, args) CUresult (*m) args;
    SMELT_CU_FNS(SMELT_CU_MEMBER)
#define SMELT_NVRTC_MEMBER(m, args) nvrtcResult (*nv##m) args;
    SMELT_NVRTC_FNS(SMELT_NVRTC_MEMBER)
    const char *(*nvGetErrorString)(nvrtcResult);
    int nvrtc_major, nvrtc_minor;
    int *archs, narchs; /* NVRTC's supported sm_XY as XY, ascending */
    char nvrtc_why[512];
    bool gpu;           /* driver initialised, at least one device */
    int driver_version;
    char gpu_why[512];
    pthread_once_t cublas_once;
    void *cublas_lib;
#define SMELT_CUBLAS_MEMBER(m, sym, args) blas_status (*blas##m) args;
    SMELT_CUBLAS_FNS(SMELT_CUBLAS_MEMBER)
    char cublas_why[512]; /* empty: loaded */
} g = {.nvrtc_once = PTHREAD_ONCE_INIT, .driver_once = PTHREAD_ONCE_INIT, .cublas_once = PTHREAD_ONCE_INIT};

static bool sym(void *lib, const char *name, void *fnptr, char *why, size_t n, const char *libname)
{
    void *p = dlsym(lib, name);
    if (!p) {
        snprintf(why, n, "%s has no %s (too old?)", libname, name);
        return false;
    }
    memcpy(fnptr, &p, sizeof p); /* object to function pointer, as dlsym needs */
    return true;
}

static void load_driver(void);

static void load_nvrtc(void)
{
    /* NVRTC of the driver's CUDA major version first: a newer one's CUBIN
     * and PTX may not load on an older driver */
    pthread_once(&g.driver_once, load_driver);
    char mine[32] = "";
    if (g.driver_version >= 11000)
        snprintf(mine, sizeof mine, "libnvrtc.so.%d", g.driver_version / 1000);
    const char *names[] = {mine, "libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
    /* "": through the loader's search path; then in the toolkit's folders */
    const smelt__settings *cfg = smelt__settings_read(); /* (loaded once a process) */
    const char *dirs[] = {"", cfg->raw[SMELT__S_CUDA_PATH], cfg->raw[SMELT__S_CUDA_HOME], "/usr/local/cuda"};
    char first[256] = "";
    const char *lib = cfg->raw[SMELT__S_SMELT_NVRTC_LIB]; /* an explicit library, and nothing else */
    if (lib && *lib && !(g.nvrtc_lib = dlopen(lib, RTLD_NOW | RTLD_LOCAL))) {
        snprintf(g.nvrtc_why, sizeof g.nvrtc_why, "NVRTC (SMELT_NVRTC_LIB=%s) cannot be loaded: %s",
                 lib, dlerror());
        return;
    }
    for (size_t d = 0; !g.nvrtc_lib && d < sizeof dirs / sizeof *dirs; d++)
        for (size_t i = 0; !g.nvrtc_lib && i < sizeof names / sizeof *names; i++) {
            if (!*names[i] || !dirs[d] || (d && !*dirs[d]))
                continue;
            char path[1024];
            snprintf(path, sizeof path, "%s%s%s", dirs[d], d ? "/lib64/" : "", names[i]);
            if (!(g.nvrtc_lib = dlopen(path, RTLD_NOW | RTLD_LOCAL)) && !first[0])
                snprintf(first, sizeof first, "%s", dlerror()); /* the first bare name's */
        }
    if (!g.nvrtc_lib) {
        snprintf(g.nvrtc_why, sizeof g.nvrtc_why,
                 "NVRTC not found (libnvrtc.so.13, .12 or libnvrtc.so: %s)", first);
        return;
    }
    char *why = g.nvrtc_why;
    size_t n = sizeof g.nvrtc_why;
    bool ok = sym(g.nvrtc_lib, "nvrtcGetErrorString", &g.nvGetErrorString, why, n, "libnvrtc");
#define SMELT_NVRTC_LOAD(m, args) ok = ok && sym(g.nvrtc_lib, "nvrtc" #m, &g.nv##m, why, n, "libnvrtc");
    SMELT_NVRTC_FNS(SMELT_NVRTC_LOAD)
    if (ok && (g.nvVersion(&g.nvrtc_major, &g.nvrtc_minor) || g.nvGetNumSupportedArchs(&g.narchs) ||
               g.narchs <= 0 || !(g.archs = malloc(sizeof(int) * (size_t)g.narchs)) ||
               g.nvGetSupportedArchs(g.archs))) {
        snprintf(why, n, "libnvrtc does not answer nvrtcVersion / nvrtcGetSupportedArchs");
        ok = false;
    }
    if (!ok) {
        free(g.archs);
        g.archs = NULL;
        dlclose(g.nvrtc_lib);
        g.nvrtc_lib = NULL;
    }
}

/* Whether NVRTC is loaded; if not, why (may be NULL) says why not. */
static bool nvrtc_ready(smelt__sb *why)
{
    pthread_once(&g.nvrtc_once, load_nvrtc);
    if (!g.nvrtc_lib && why)
        smelt__sb_puts(why, g.nvrtc_why);
    return g.nvrtc_lib != NULL;
}

/* The CUDA error's name, even from a stub driver that cannot tell it. */
static const char *cu_name(CUresult r)
{
    const char *s = NULL;
    if (g.GetErrorName && g.GetErrorName(r, &s) == 0 && s)
        return s;
    switch ((int)r) {
    case 1: return "CUDA_ERROR_INVALID_VALUE";
    case 2: return "CUDA_ERROR_OUT_OF_MEMORY";
    case 3: return "CUDA_ERROR_NOT_INITIALIZED";
    case 34: return "CUDA_ERROR_STUB_LIBRARY";
    case 35: return "CUDA_ERROR_INSUFFICIENT_DRIVER";
    case 100: return "CUDA_ERROR_NO_DEVICE";
    case 999: return "CUDA_ERROR_UNKNOWN";
    default: return "CUDA error";
    }
}

static void load_driver(void)
{
    char *why = g.gpu_why;
    size_t n = sizeof g.gpu_why;
    const char *path = smelt__settings_read()->raw[SMELT__S_SMELT_CUDA_DRIVER_LIB]; /* (once a process) */
    if (!path || !*path)
        path = "libcuda.so.1";
    g.cuda_lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!g.cuda_lib) {
        snprintf(why, n, "no GPU: the CUDA driver (%s) cannot be loaded: %s", path, dlerror());
        return;
    }
    bool ok = true;
#define SMELT_CU_LOAD(m, s, args) ok = ok && sym(g.cuda_lib, s, &g.m, why, n, path);
    SMELT_CU_FNS(SMELT_CU_LOAD)
    if (!ok)
        return;
    CUresult r = g.Init(0);
    int count = 0;
    if (r == 34)
        snprintf(why, n, "no GPU: %s is the CUDA toolkit's stub driver (cuInit: "
                         "CUDA_ERROR_STUB_LIBRARY); no NVIDIA driver is installed", path);
    else if (r)
        snprintf(why, n, "no GPU: cuInit failed: %s (%d)", cu_name(r), (int)r);
    else if ((r = g.DeviceGetCount(&count)) || count <= 0)
        snprintf(why, n, "no GPU: the CUDA driver sees no device%s%s", r ? ": " : "",
                 r ? cu_name(r) : "");
    else
        g.gpu = true;
    g.DriverGetVersion(&g.driver_version);
}

int smelt__cuda_present(smelt__sb *why)
{
    pthread_once(&g.driver_once, load_driver);
    const char *w = !g.gpu ? g.gpu_why : !nvrtc_ready(NULL) ? g.nvrtc_why : NULL;
    if (w && why)
        smelt__sb_puts(why, w);
    return !w;
}

/* ---- NVRTC ----------------------------------------------------------- */

int smelt__nvrtc_compile(const char *source, const char *name, const char *arch, char **image,
                         size_t *size, smelt__sb *log)
{
    *image = NULL;
    *size = 0;
    if (!nvrtc_ready(log))
        return SMELT_ERR_BACKEND;
    bool cubin = !strncmp(arch, "sm_", 3);
    char file[64], archopt[64];
    snprintf(file, sizeof file, "%s.cu", name);
    snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", arch);
    /* no contraction of a * b + c: fused and unfused kernels (and the CPU
     * backends) round every operation the same way */
    const char *opts[] = {archopt, "--std=c++17", "--fmad=false"};
    nvrtcProgram prog = NULL;
    nvrtcResult r = g.nvCreateProgram(&prog, source, file, 0, NULL, NULL);
    if (r) {
        smelt__sb_printf(log, "nvrtcCreateProgram: %s\n", g.nvGetErrorString(r));
        return SMELT_ERR_COMPILE;
    }
    int st = SMELT_OK;
    r = g.nvCompileProgram(prog, (int)(sizeof opts / sizeof opts[0]), opts);
    if (r) {
        size_t n = 0;
        smelt__sb_printf(log, "NVRTC %d.%d (%s): %s\n", g.nvrtc_major, g.nvrtc_minor, arch,
                         g.nvGetErrorString(r));
        if (!g.nvGetProgramLogSize(prog, &n) && n > 1) {
            char *text = malloc(n);
            if (text && !g.nvGetProgramLog(prog, text))
                smelt__sb_puts(log, text);
            free(text);
        }
        st = SMELT_ERR_COMPILE;
    } else {
        size_t n = 0;
        r = cubin ? g.nvGetCUBINSize(prog, &n) : g.nvGetPTXSize(prog, &n);
        char *out = r || !n ? NULL : malloc(n);
        if (out)
            r = cubin ? g.nvGetCUBIN(prog, out) : g.nvGetPTX(prog, out);
        if (!out || r) {
            smelt__sb_printf(log, "NVRTC produced no %s for %s\n", cubin ? "CUBIN" : "PTX", arch);
            free(out);
            st = SMELT_ERR_COMPILE;
        } else {
            *image = out;
            *size = n;
        }
    }
    g.nvDestroyProgram(&prog);
    return st;
}

/* The target for compute capability cc (e.g. 90): CUBIN when NVRTC knows the
 * arch, else PTX of the newest arch below it (the driver compiles it). */
static int pick_arch(int cc, char *arch, size_t n, smelt__sb *why)
{
    int best = -1;
    for (int i = 0; i < g.narchs; i++) {
        if (g.archs[i] == cc) {
            snprintf(arch, n, "sm_%d", cc);
            return 1;
        }
        if (g.archs[i] < cc && g.archs[i] > best)
            best = g.archs[i];
    }
    if (best < 0) {
        smelt__sb_printf(why, "NVRTC %d.%d cannot compile for sm_%d (its oldest arch is sm_%d)",
                         g.nvrtc_major, g.nvrtc_minor, cc, g.narchs ? g.archs[0] : 0);
        return 0;
    }
    snprintf(arch, n, "compute_%d", best);
    return 1;
}

/* ---- the backend ------------------------------------------------------- */

typedef struct compile_rec { /* compile-only backends keep a record of each compile */
    char name[40];
    char *source, *log;
    bool ok;
    size_t bytes;
    double ms;
} compile_rec;

enum { ARCH_MAX = 32 };

/* the backend's own kernels (lib_kernel): a scan of each dtype, a strided copy of each element size */
enum { LIB_SCAN_F32, LIB_SCAN_F64, LIB_SCAN_F16, LIB_SCAN_BF16, LIB_SCAN_I64, LIB_COPY_2, LIB_COPY_4, LIB_COPY_8,
       LIB_COUNT };

typedef struct cuda_be {
    char arch[ARCH_MAX]; /* "sm_90" (CUBIN) or "compute_90" (PTX) */
    bool compile_only;
    CUdevice dev;
    CUcontext cu; /* the device's primary context, retained */
    CUstream stream;
    CUdeviceptr pbuf; /* parameter blocks over SMELT_KPARAM_MAX (the largest block's size) */
    blas_handle blas; /* made on the first matrix product, bound to stream */
    CUdeviceptr mptrs; /* a batched product's matrix addresses (smelt__gemm.ptrs) */
    size_t mptrs_cap;  /* its bytes */
    void *stage;       /* pinned host memory the copies to pbuf and mptrs go through (stage_copy) */
    size_t stage_cap;
    CUevent staged; /* recorded after the last copy from stage (NULL: none yet) */
    compile_rec *recs;
    int nrecs;
    struct cuda_kernel *lib[LIB_COUNT]; /* the backend's own kernels, compiled on first use (lib_kernel) */
    pthread_mutex_t lib_mu;
} cuda_be;

/* A grid-stride kernel's grid: enough blocks for SMELT_CUDA_STEPS loop
 * steps per thread, but at least one wave (the blocks the GPU holds at once)
 * and at most SMELT_CUDA_WAVES waves.  One wave keeps every warp in the same
 * phase (all load, then all compute); more blocks than fit let the loads of
 * new blocks overlap the arithmetic of old ones, while a thread that takes
 * a step or two does not pay for its block's start.  Measured on an H100
 * (bench/RESULTS.md): 64M f32, 1 -> 8 waves: gelu_tanh 0.289 -> 0.275 ms,
 * swish 0.215 -> 0.190, a*1.5+0.5 0.199 -> 0.190, no gain at 16 or 32; but
 * layers100 (4M elements, 200 kernels) 2.28 -> 2.50 ms with 8 waves of
 * one-step threads. */
#define SMELT_CUDA_STEPS 8
#define SMELT_CUDA_WAVES 8
/* A launch that names its steps (a row program: the rows a block or warp
 * runs in turn, SMELT_CUDA_ROWS_STEPS, 1 by default) gets the blocks over
 * them, with no bound in waves.  A grid of whole rows a block held 8 rows
 * each in 2048 blocks for 16384 rows, 2.6 waves of 792: the last wave ran
 * 60 % full.  A block a row (16384 blocks) leaves the scheduler a tail of
 * one row; measured on an H200 (bench/RESULTS.md), 16384 x 4096 f32:
 * softmax 0.179 -> 0.160 ms, layernorm 0.182 -> 0.168, rmsnorm 0.162 ->
 * 0.144, log_softmax 0.189 -> 0.176. */

typedef struct cuda_kernel {
    CUmodule mod;
    CUfunction fn;
    int block, wave; /* the occupancy API's block size and its grid for one full wave */
    int most;        /* the most threads a block of it may have (its __launch_bounds__) */
} cuda_kernel;

/* Record a failed call on the smelt context, with the CUDA error's name. */
static int cu_fail(smelt__backend *be, CUresult r, const char *what, const char *detail)
{
    return smelt__err(be->ctx, r == 2 ? SMELT_ERR_NOMEM : SMELT_ERR_RUNTIME,
                      "CUDA: %s%s%s failed: %s (%d)", what, detail ? " " : "", detail ? detail : "",
                      cu_name(r), (int)r);
}

static CUresult enter(cuda_be *c) { return g.CtxPushCurrent(c->cu); }
static void leave(void)
{
    CUcontext dummy;
    g.CtxPopCurrent(&dummy);
}

static int cuda_available(smelt__backend *be, smelt__sb *why)
{
    cuda_be *c = be->context;
    if (c->compile_only)
        return nvrtc_ready(why);
    if (!smelt__cuda_present(why))
        return 0;
    CUresult r;
    int major = 0, minor = 0;
    if ((r = g.DeviceGet(&c->dev, 0)) ||
        (r = g.DeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, c->dev)) ||
        (r = g.DeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, c->dev))) {
        smelt__sb_printf(why, "cannot query CUDA device 0: %s", cu_name(r));
        return 0;
    }
    if (!pick_arch(major * 10 + minor, c->arch, sizeof c->arch, why))
        return 0;
    const char *what = "cuDevicePrimaryCtxRetain";
    if ((r = g.DevicePrimaryCtxRetain(&c->cu, c->dev))) {
        c->cu = NULL;
    } else if ((r = enter(c))) {
        what = "cuCtxPushCurrent";
    } else {
        what = "cuStreamCreate";
        if ((r = g.StreamCreate(&c->stream, CU_STREAM_NON_BLOCKING)))
            c->stream = NULL;
        leave();
    }
    if (r)
        smelt__sb_printf(why, "%s: %s", what, cu_name(r));
    return !r;
}

static void record(cuda_be *c, const char *name, const char *source, const smelt__sb *log, bool ok,
                   size_t bytes, double ms)
{
    compile_rec *v = realloc(c->recs, sizeof *v * (size_t)(c->nrecs + 1));
    if (!v)
        return;
    c->recs = v;
    compile_rec *r = &v[c->nrecs++];
    *r = (compile_rec){.source = smelt__strdup(source), .log = smelt__strdup(log->s ? log->s : ""),
                       .ok = ok, .bytes = bytes, .ms = ms};
    snprintf(r->name, sizeof r->name, "%s", name);
}

static int cuda_compile(smelt__backend *be, const char *source, const char *fn_name, void **fn,
                        void **handle, smelt__sb *log)
{
    cuda_be *c = be->context;
    *fn = *handle = NULL;
    char *image = NULL;
    size_t size = 0;
    double t0 = smelt__now_ms();
    /* the persistent cache (src/runtime/diskcache.c): key = the source, the arch,
     * NVRTC's version and smelt's, never the compiler's output */
    char key[40] = "";
    if (!c->compile_only && nvrtc_ready(NULL)) {
        smelt__sb k;
        smelt__sb_init(&k);
        smelt__sb_printf(&k, "smelt %s\nnvrtc %d.%d\narch %s\n", SMELT_VERSION, g.nvrtc_major,
                         g.nvrtc_minor, c->arch);
        smelt__sb_puts(&k, source);
        const char *t = smelt__sb_str(&k);
        snprintf(key, sizeof key, "cu%015llx%016llx",
                 (unsigned long long)(smelt__hash(t, strlen(t), 3) >> 4),
                 (unsigned long long)smelt__hash(t, strlen(t), 4));
        smelt__sb_free(&k);
    }
    int st = SMELT_OK;
    if (!key[0] || smelt__dcache_load(key, &image, &size)) {
        st = smelt__nvrtc_compile(source, fn_name, c->arch, &image, &size, log);
        if (st == SMELT_OK && key[0])
            smelt__dcache_store(key, image, size);
    }
    if (c->compile_only)
        record(c, fn_name, source, log, st == SMELT_OK, size, smelt__now_ms() - t0);
    if (st)
        return st == SMELT_ERR_BACKEND ? SMELT_ERR_COMPILE : st;
    cuda_kernel *k = calloc(1, sizeof *k);
    if (!k) {
        smelt__sb_puts(log, "out of memory");
    } else if (!c->compile_only) {
        CUresult r = enter(c);
        const char *what = "cuCtxPushCurrent";
        if (!r) {
            int min_grid = 0, most = 0;
            if ((r = g.ModuleLoadData(&k->mod, image))) {
                what = "cuModuleLoadData";
                k->mod = NULL;
            } else if ((r = g.ModuleGetFunction(&k->fn, k->mod, fn_name))) {
                what = "cuModuleGetFunction";
            } else if ((r = g.OccupancyMaxPotentialBlockSize(&min_grid, &k->block, k->fn, NULL, 0, 0))) {
                what = "cuOccupancyMaxPotentialBlockSize";
            } else if ((r = g.FuncGetAttribute(&most, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, k->fn))) {
                what = "cuFuncGetAttribute";
            } else if (k->block > most) { /* a kernel's __launch_bounds__ (a held row program: one warp) */
                k->block = most;
            }
            k->most = most;
            k->wave = min_grid > 0 ? min_grid : 1;
            if (r && k->mod)
                g.ModuleUnload(k->mod);
            leave();
        }
        if (r) {
            smelt__sb_printf(log, "%s (%s, %s): %s (%d)\n", what, fn_name, c->arch, cu_name(r), (int)r);
            free(k);
            k = NULL;
        }
    }
    free(image);
    *fn = *handle = k;
    return k ? SMELT_OK : SMELT_ERR_COMPILE;
}

static void cuda_release(smelt__backend *be, void *handle)
{
    cuda_be *c = be->context;
    cuda_kernel *k = handle;
    if (k && k->mod && !enter(c)) {
        g.ModuleUnload(k->mod);
        leave();
    }
    free(k);
}

static void *cuda_alloc(smelt__backend *be, size_t bytes)
{
    cuda_be *c = be->context;
    CUdeviceptr p = 0;
    CUresult r = c->compile_only ? 3 : enter(c);
    if (!r) {
        r = g.MemAlloc(&p, bytes ? bytes : 1);
        leave();
    }
    if (r) {
        char what[64];
        snprintf(what, sizeof what, "(%zu bytes)", bytes);
        cu_fail(be, r, "cuMemAlloc", what);
        return NULL;
    }
    return (void *)(uintptr_t)p;
}

static void cuda_free(smelt__backend *be, void *ptr)
{
    cuda_be *c = be->context;
    if (ptr && !c->compile_only && !enter(c)) {
        g.MemFree((CUdeviceptr)(uintptr_t)ptr);
        leave();
    }
}

static int cuda_sync(smelt__backend *be)
{
    cuda_be *c = be->context;
    if (c->compile_only)
        return SMELT_OK;
    CUresult r = enter(c);
    if (r)
        return cu_fail(be, r, "cuCtxPushCurrent", NULL);
    r = g.StreamSynchronize(c->stream);
    leave();
    return r ? cu_fail(be, r, "cuStreamSynchronize", "(an earlier kernel or copy)") : SMELT_OK;
}

static int cuda_copy(smelt__backend *be, void *dst, const void *src, size_t bytes, int dir)
{
    cuda_be *c = be->context;
    if (c->compile_only)
        return smelt__err(be->ctx, SMELT_ERR_BACKEND, "a compile-only NVRTC backend has no device");
    if (!bytes)
        return SMELT_OK;
    CUresult r = enter(c);
    if (r)
        return cu_fail(be, r, "cuCtxPushCurrent", NULL);
    const char *what = dir == SMELT_COPY_H2D ? "cuMemcpyHtoDAsync"
                       : dir == SMELT_COPY_D2H ? "cuMemcpyDtoHAsync" : "cuMemcpyDtoDAsync";
    CUdeviceptr d = (CUdeviceptr)(uintptr_t)dst, s = (CUdeviceptr)(uintptr_t)src;
    if (dir == SMELT_COPY_H2D)
        r = g.MemcpyHtoDAsync(d, src, bytes, c->stream);
    else if (dir == SMELT_COPY_D2H)
        r = g.MemcpyDtoHAsync(dst, s, bytes, c->stream);
    else
        r = g.MemcpyDtoDAsync(d, s, bytes, c->stream);
    if (!r) {
        what = "cuStreamSynchronize";
        r = g.StreamSynchronize(c->stream);
    }
    leave();
    char detail[64];
    snprintf(detail, sizeof detail, "(%zu bytes)", bytes);
    return r ? cu_fail(be, r, what, detail) : SMELT_OK;
}

/* Host bytes to device memory dst in stream order (a parameter block over
 * the limit, a batched product's matrix addresses): through pinned memory
 * the backend keeps, which the copy reads when the stream reaches it, so
 * src may be reused at once (a copy from pageable memory is not promised
 * to have read it on return); the next stage_copy waits for the last copy
 * out of it first (c->staged).  *what: the call that failed. */
/* A buffer's new capacity for bytes: a power of 2, 4 KB at least */
static size_t buffer_cap(size_t bytes)
{
    size_t cap = 4096;
    while (cap < bytes)
        cap *= 2;
    return cap;
}

static CUresult stage_copy(cuda_be *c, CUdeviceptr dst, const void *src, size_t bytes, const char **what)
{
    CUresult r = CUDA_SUCCESS;
    if (c->staged && (r = g.EventSynchronize(c->staged)))
        return *what = "cuEventSynchronize", r;
    if (bytes > c->stage_cap) {
        size_t cap = buffer_cap(bytes);
        if (c->stage)
            g.MemFreeHost(c->stage);
        c->stage = NULL, c->stage_cap = 0;
        if ((r = g.MemAllocHost(&c->stage, cap)))
            return c->stage = NULL, *what = "cuMemAllocHost", r;
        c->stage_cap = cap;
    }
    if (!c->staged && (r = g.EventCreate(&c->staged, CU_EVENT_DISABLE_TIMING))) /* (before any copy) */
        return c->staged = NULL, *what = "cuEventCreate", r;
    memcpy(c->stage, src, bytes);
    if ((r = g.MemcpyHtoDAsync(dst, c->stage, bytes, c->stream)))
        return *what = "cuMemcpyHtoDAsync", r;
    if ((r = g.EventRecord(c->staged, c->stream))) { /* the event marks no copy: wait for this one here */
        *what = "cuEventRecord";
        g.StreamSynchronize(c->stream);
    }
    return r;
}

/* Pack the parameter block (see smelt__kparam_bytes) into buf. */
static size_t pack_params(unsigned char *buf, const smelt__devlaunch *l)
{
    size_t off = 0;
    for (int k = 0; k < l->nops; k++, off += 8)
        memcpy(buf + off, &l->ptrs[k], 8);
    int nidx = 1 + l->rank + l->nops * l->rank;
    for (int i = 0; i < nidx; i++) {
        int64_t v = i == 0 ? l->n : i <= l->rank ? l->shape[i - 1] : l->strides[i - 1 - l->rank];
        if (l->idx32) {
            uint32_t u = (uint32_t)v;
            memcpy(buf + off, &u, 4);
            off += 4;
        } else {
            memcpy(buf + off, &v, 8);
            off += 8;
        }
    }
    while (off % 8)
        buf[off++] = 0;
    return off;
}

static int cuda_launch(smelt__backend *be, const smelt__kernel *kk, const smelt__devlaunch *l)
{
    cuda_be *c = be->context;
    const cuda_kernel *k = kk->handle;
    if (c->compile_only || !k || !k->fn)
        return smelt__err(be->ctx, SMELT_ERR_BACKEND,
                          "NVRTC backend for %s is compile-only: it cannot launch %s", c->arch,
                          kk->name);
    unsigned char buf[8 * (SMELT_MAX_KERNEL_OPERANDS + 1) + /* (+ 1: an indexed read's gather block) */
                      8 * (1 + SMELT_MAX_DIMS + (SMELT_MAX_KERNEL_OPERANDS + 1) * SMELT_MAX_DIMS)];
    size_t size = pack_params(buf, l);
    if (size != smelt__kparam_bytes(l->nops, l->rank, l->idx32))
        return smelt__err(be->ctx, SMELT_ERR_RUNTIME, "CUDA: parameter block of %s is %zu bytes",
                          kk->name, size);
    if (l->block > k->most)
        return smelt__err(be->ctx, SMELT_ERR_RUNTIME, "CUDA: %s needs blocks of %d threads; it allows %d",
                          kk->name, l->block, k->most);
    CUresult r = enter(c);
    if (r)
        return cu_fail(be, r, "cuCtxPushCurrent", NULL);
    void *arg = buf;
    const char *what = "cuLaunchKernel";
    /* over the limit: through device memory, written in stream order */
    if (size > SMELT_KPARAM_MAX) {
        if (!c->pbuf && (r = g.MemAlloc(&c->pbuf, sizeof buf))) {
            what = "cuMemAlloc";
            c->pbuf = 0;
        }
        if (!r)
            r = stage_copy(c, c->pbuf, buf, size, &what);
        arg = &c->pbuf;
    }
    if (!r) {
        int block = l->block ? l->block : k->block;
        int64_t threads = (l->n + kk->step - 1) / kk->step;
        int64_t blocks = (threads + block - 1) / block;
        int64_t want = l->steps > 0 ? (blocks + l->steps - 1) / l->steps
                                    : SMELT_MIN(SMELT_MAX(threads / ((int64_t)block * SMELT_CUDA_STEPS), (int64_t)k->wave),
                                                (int64_t)k->wave * SMELT_CUDA_WAVES);
        /* (a grid's x dimension holds 2^31 - 1 blocks; the grid-stride loop takes the rest) */
        unsigned grid = (unsigned)SMELT_MAX(1, SMELT_MIN(SMELT_MIN(blocks, want), (int64_t)INT32_MAX));
        /* every kernel gets the reduction's scratch as a second parameter;
         * the driver reads only the parameters a kernel declares */
        struct {
            CUdeviceptr part, cnt;
        } scr = {(CUdeviceptr)(uintptr_t)l->red_part, (CUdeviceptr)(uintptr_t)l->red_cnt};
        void *params[] = {arg, &scr};
        r = g.LaunchKernel(k->fn, grid, 1, 1, (unsigned)block, 1, 1, 0, c->stream, params, NULL);
    }
    leave();
    return r ? cu_fail(be, r, what, kk->name) : SMELT_OK;
}

static void cuda_destroy(smelt__backend *be)
{
    cuda_be *c = be->context;
    if (c->cu) {
        if (!enter(c)) {
            if (c->stream) {
                g.StreamSynchronize(c->stream);
                g.StreamDestroy(c->stream);
            }
            if (c->pbuf)
                g.MemFree(c->pbuf);
            if (c->mptrs)
                g.MemFree(c->mptrs);
            if (c->stage)
                g.MemFreeHost(c->stage);
            if (c->staged)
                g.EventDestroy(c->staged);
            if (c->blas)
                g.blasDestroy(c->blas);
            for (int i = 0; i < LIB_COUNT; i++)
                if (c->lib[i] && c->lib[i]->mod)
                    g.ModuleUnload(c->lib[i]->mod);
            leave();
        }
        g.DevicePrimaryCtxRelease(c->dev);
    }
    for (int i = 0; i < LIB_COUNT; i++)
        free(c->lib[i]);
    pthread_mutex_destroy(&c->lib_mu);
    for (int i = 0; i < c->nrecs; i++)
        free(c->recs[i].source), free(c->recs[i].log);
    free(c->recs);
    free(c);
    free(be);
}

static void load_cublas(void)
{
    const char *env = smelt__settings_read()->raw[SMELT__S_SMELT_CUBLAS_LIB]; /* (once a process) */
    static const char *const names[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11", "libcublas.so"};
    const char *path = env && *env ? env : names[0];
    for (int i = 0; !g.cublas_lib && i < (env && *env ? 1 : 4); i++)
        g.cublas_lib = dlopen(path = env && *env ? env : names[i], RTLD_NOW | RTLD_LOCAL);
    if (!g.cublas_lib) {
        snprintf(g.cublas_why, sizeof g.cublas_why, "matmul on the GPU needs cuBLAS: %s cannot be loaded (%s); "
                 "install the CUDA toolkit's cuBLAS, or name it in SMELT_CUBLAS_LIB",
                 env && *env ? env : "libcublas.so.13 (or .12, .11)", dlerror());
        return;
    }
    bool ok = true;
#define SMELT_CUBLAS_LOAD(m, s, args) ok = ok && sym(g.cublas_lib, s, &g.blas##m, g.cublas_why, sizeof g.cublas_why, path);
    SMELT_CUBLAS_FNS(SMELT_CUBLAS_LOAD)
    if (ok)
        g.cublas_why[0] = 0;
}

/* A batched product's matrix addresses (m->ptrs) into c->mptrs, in stream
 * order (stage_copy); the buffer grows once the products queued before
 * have run.  *what: the call that failed. */
static CUresult put_ptrs(cuda_be *c, const smelt__gemm *m, const char **what)
{
    size_t bytes = 3 * sizeof(void *) * (size_t)m->batch;
    CUresult r = CUDA_SUCCESS;
    if (bytes > c->mptrs_cap) {
        size_t cap = buffer_cap(bytes);
        if (c->mptrs && (r = g.StreamSynchronize(c->stream)))
            return *what = "cuStreamSynchronize", r;
        if (c->mptrs)
            g.MemFree(c->mptrs);
        c->mptrs = 0, c->mptrs_cap = 0;
        if ((r = g.MemAlloc(&c->mptrs, cap)))
            return c->mptrs = 0, *what = "cuMemAlloc", r;
        c->mptrs_cap = cap;
    }
    return stage_copy(c, c->mptrs, m->ptrs, bytes, what);
}

/* C = A @ B, row-major (smelt__gemm): cuBLAS is column-major, so it computes
 * C^T = B^T A^T, the row-major matrices read as their transposes. */
static int cuda_gemm(smelt__backend *be, const smelt__gemm *m)
{
    cuda_be *c = be->context;
    if (c->compile_only)
        return smelt__err(be->ctx, SMELT_ERR_BACKEND, "NVRTC backend for %s is compile-only: it cannot multiply "
                          "matrices", c->arch);
    pthread_once(&g.cublas_once, load_cublas);
    if (g.cublas_why[0])
        return smelt__err(be->ctx, SMELT_ERR_BACKEND, "%s", g.cublas_why);
    const int64_t lim = 2147483647;
    if (m->M > lim || m->N > lim || m->K > lim || m->lda > lim || m->ldb > lim || m->ldc > lim || m->batch > lim)
        return smelt__err(be->ctx, SMELT_ERR_UNSUPPORTED, "matmul on the GPU: a dimension over 2^31 - 1 (cuBLAS "
                          "takes int sizes)");
    CUresult r = enter(c);
    if (r)
        return cu_fail(be, r, "cuCtxPushCurrent", NULL);
    blas_status s = 0;
    const char *what = "cublasCreate";
    if (!c->blas && !(s = g.blasCreate(&c->blas)) && (what = "cublasSetStream") && (s = g.blasSetStream(c->blas, c->stream))) {
        g.blasDestroy(c->blas);
        c->blas = NULL;
    }
    const char *cwhat = "";
    r = s || !m->ptrs ? CUDA_SUCCESS : put_ptrs(c, m, &cwhat);
    if (r) {
        leave();
        return cu_fail(be, r, cwhat, "(a batched product's matrix addresses)");
    }
    int opa = m->ta ? CUBLAS_OP_T_ : CUBLAS_OP_N_, opb = m->tb ? CUBLAS_OP_T_ : CUBLAS_OP_N_;
    int M = (int)m->M, N = (int)m->N, K = (int)m->K, bc = (int)m->batch;
    int t = m->dt == SMELT_F16 ? CUDA_R_16F_ : CUDA_R_16BF_; /* f16, bf16: accumulated in f32 */
    const float one = 1, beta = (float)m->beta; /* beta 1: the product added to C (a convolution's taps) */
    const double one64 = 1, beta64 = m->beta;
    if (!s && m->ptrs) { /* the addresses, in device memory: A's, B's, C's */
        const void *const *pa = (const void *const *)(uintptr_t)c->mptrs, *const *pb = pa + bc;
        void *const *pc = (void *const *)(pa + 2 * (size_t)bc);
        what = "cublasGemmBatched";
        if (m->dt == SMELT_F32)
            s = g.blasSgemmBatched(c->blas, opb, opa, N, M, K, &one, (const float *const *)pb, (int)m->ldb,
                                   (const float *const *)pa, (int)m->lda, &beta, (float *const *)pc, (int)m->ldc, bc);
        else if (m->dt == SMELT_F64)
            s = g.blasDgemmBatched(c->blas, opb, opa, N, M, K, &one64, (const double *const *)pb, (int)m->ldb,
                                   (const double *const *)pa, (int)m->lda, &beta64, (double *const *)pc,
                                   (int)m->ldc, bc);
        else
            s = g.blasGemmBatchedEx(c->blas, opb, opa, N, M, K, &one, pb, t, (int)m->ldb, pa, t, (int)m->lda, &beta,
                                    pc, t, (int)m->ldc, bc, CUBLAS_COMPUTE_32F_, CUBLAS_GEMM_DEFAULT_);
    } else if (!s) {
        what = "cublasGemmStridedBatched";
        if (m->dt == SMELT_F32)
            s = g.blasSgemmStridedBatched(c->blas, opb, opa, N, M, K, &one, m->B, (int)m->ldb, m->sb, m->A, (int)m->lda,
                                          m->sa, &beta, m->C, (int)m->ldc, m->sc, bc);
        else if (m->dt == SMELT_F64)
            s = g.blasDgemmStridedBatched(c->blas, opb, opa, N, M, K, &one64, m->B, (int)m->ldb, m->sb, m->A,
                                          (int)m->lda, m->sa, &beta64, m->C, (int)m->ldc, m->sc, bc);
        else
            s = g.blasGemmStridedBatchedEx(c->blas, opb, opa, N, M, K, &one, m->B, t, (int)m->ldb, m->sb, m->A, t,
                                           (int)m->lda, m->sa, &beta, m->C, t, (int)m->ldc, m->sc, bc,
                                           CUBLAS_COMPUTE_32F_, CUBLAS_GEMM_DEFAULT_);
    }
    leave();
    if (s)
        return smelt__err(be->ctx, s == 3 ? SMELT_ERR_NOMEM : SMELT_ERR_RUNTIME, "cuBLAS: %s failed: status %d",
                          what, s);
    return SMELT_OK;
}

/* ---- the backend's own kernels: scans and strided copies ----------------
 * Templates of the CUDA dialect (templates/cuda/kernel_scan.cu.in,
 * kernel_copy.cu.in), rendered by the emitter with the kernels' prelude,
 * compiled by NVRTC on first use (through the persistent cache, as every
 * kernel) and kept by the backend; each takes a parameter block of its own
 * by value. */
static const smelt_dtype lib_scan_dt[] = {SMELT_F32, SMELT_F64, SMELT_F16, SMELT_BF16, SMELT_I64};

typedef struct scan_args { /* kernel_scan.cu.in's smelt_args */
    const void *in;
    void *out;
    long long lines, n, si, so;
    long long shape[7], ist[7], ost[7];
    int rank, prod, excl, rev;
} scan_args;
typedef struct copy_args { /* kernel_copy.cu.in's smelt_args */
    const void *src;
    void *dst;
    long long n;
    long long shape[8], ss[8], ds[8];
    int rank, unused;
} copy_args;
_Static_assert(sizeof(scan_args) == 232 && sizeof(copy_args) == 224 && SMELT_MAX_DIMS == 8,
               "the templates' parameter blocks");

int smelt__cuda_scan_source(smelt_dtype dt, smelt__sb *src, char *name, smelt__sb *err)
{
    const char *stype, *atype, *load = "", *store = "", *round = "";
    switch (dt) {
    case SMELT_F32: stype = atype = "float"; break;
    case SMELT_F64: stype = atype = "double"; break;
    case SMELT_F16:
        stype = "uint16_t", atype = "float", load = "smelt_h2f_f16", store = "smelt_f2h_f16", round = "smelt_rnd_f16";
        break;
    case SMELT_BF16:
        stype = "uint16_t", atype = "float", load = "smelt_h2f_bf16", store = "smelt_f2h_bf16",
        round = "smelt_rnd_bf16";
        break;
    case SMELT_I64: stype = "int64_t", atype = "uint64_t", load = "(uint64_t)", store = "(int64_t)"; break;
    default:
        smelt__sb_printf(err, "a scan of %s (f32, f64, f16, bf16 or i64)", smelt__dtypes[dt].name);
        return SMELT_ERR_UNSUPPORTED;
    }
    const char *kv[] = {"WHAT", smelt__dtypes[dt].name, "STYPE", stype, "ATYPE", atype,
                        "LOAD", load, "STORE", store, "ROUND", round};
    return smelt__emit_library(&smelt__dialect_cuda, "kernel_scan", "smelt_scan", kv, 6, src, name, err);
}

int smelt__cuda_copy_source(int es, smelt__sb *src, char *name, smelt__sb *err)
{
    if (es != 2 && es != 4 && es != 8) {
        smelt__sb_printf(err, "a strided copy of %d-byte elements (2, 4 or 8)", es);
        return SMELT_ERR_UNSUPPORTED;
    }
    const char *kv[] = {"BYTES", es == 2 ? "2" : es == 4 ? "4" : "8",
                        "T", es == 2 ? "unsigned short" : es == 4 ? "unsigned int" : "unsigned long long"};
    return smelt__emit_library(&smelt__dialect_cuda, "kernel_copy", "smelt_copy", kv, 2, src, name, err);
}

/* Library kernel kind of c, compiled now if it is not yet */
static int lib_kernel(smelt__backend *be, int kind, const cuda_kernel **out)
{
    cuda_be *c = be->context;
    int st = SMELT_OK;
    pthread_mutex_lock(&c->lib_mu);
    if (!c->lib[kind]) {
        smelt__sb src, log;
        smelt__sb_init(&src), smelt__sb_init(&log);
        char name[40];
        void *fn, *handle = NULL;
        st = kind <= LIB_SCAN_I64 ? smelt__cuda_scan_source(lib_scan_dt[kind], &src, name, &log)
                                  : smelt__cuda_copy_source(2 << (kind - LIB_COPY_2), &src, name, &log);
        if (!st)
            st = cuda_compile(be, smelt__sb_str(&src), name, &fn, &handle, &log);
        if (st)
            smelt__err(be->ctx, st, "CUDA: the backend's %s kernel: %s", kind <= LIB_SCAN_I64 ? "scan" : "copy",
                       smelt__sb_str(&log));
        else
            c->lib[kind] = handle;
        smelt__sb_free(&src), smelt__sb_free(&log);
    }
    *out = c->lib[kind];
    pthread_mutex_unlock(&c->lib_mu);
    return st;
}

/* Launch library kernel k on the stream with its parameter block args over
 * threads threads: one each (every) or a grid-stride loop's grid */
static int lib_launch(smelt__backend *be, const cuda_kernel *k, const char *what, void *args, int64_t threads,
                      bool every)
{
    cuda_be *c = be->context;
    int64_t blocks = (threads + k->block - 1) / k->block;
    int64_t want = every ? blocks
                         : SMELT_MIN(SMELT_MAX(threads / ((int64_t)k->block * SMELT_CUDA_STEPS), (int64_t)k->wave),
                                     (int64_t)k->wave * SMELT_CUDA_WAVES);
    unsigned grid = (unsigned)SMELT_MAX(1, SMELT_MIN(SMELT_MIN(blocks, want), (int64_t)INT32_MAX));
    CUresult r = enter(c);
    if (r)
        return cu_fail(be, r, "cuCtxPushCurrent", NULL);
    void *params[] = {args};
    r = g.LaunchKernel(k->fn, grid, 1, 1, (unsigned)k->block, 1, 1, 0, c->stream, params, NULL);
    leave();
    return r ? cu_fail(be, r, "cuLaunchKernel", what) : SMELT_OK;
}

static int cuda_scan(smelt__backend *be, const smelt__devscan *s)
{
    cuda_be *c = be->context;
    if (c->compile_only)
        return smelt__err(be->ctx, SMELT_ERR_BACKEND, "NVRTC backend for %s is compile-only: it cannot run a scan",
                          c->arch);
    int kind = -1;
    for (int i = 0; i <= LIB_SCAN_I64; i++)
        kind = lib_scan_dt[i] == s->dt ? i : kind;
    if (kind < 0 || s->rank > 7)
        return smelt__err(be->ctx, SMELT_ERR_UNSUPPORTED, "a scan of %s over %d other dimensions on the GPU (f32, "
                          "f64, f16, bf16, i64; at most 7)", smelt__dtypes[s->dt].name, s->rank);
    scan_args a = {.in = s->in, .out = s->out, .lines = 1, .n = s->n, .si = s->si, .so = s->so, .rank = s->rank,
                   .prod = s->prod, .excl = s->excl, .rev = s->rev};
    for (int d = 0; d < s->rank; d++)
        a.shape[d] = s->shape[d], a.ist[d] = s->ist[d], a.ost[d] = s->ost[d], a.lines *= s->shape[d];
    if (!a.lines || !a.n)
        return SMELT_OK;
    const cuda_kernel *k;
    int st = lib_kernel(be, kind, &k);
    return st ? st : lib_launch(be, k, "(a scan)", &a, a.lines, true);
}

static int cuda_copy_strided(smelt__backend *be, const smelt__devcopy *cp)
{
    cuda_be *c = be->context;
    if (c->compile_only)
        return smelt__err(be->ctx, SMELT_ERR_BACKEND, "NVRTC backend for %s is compile-only: it cannot copy",
                          c->arch);
    if ((cp->es != 2 && cp->es != 4 && cp->es != 8) || cp->rank < 1 || cp->rank > 8)
        return smelt__err(be->ctx, SMELT_ERR_UNSUPPORTED, "a strided copy of rank %d, %d-byte elements on the GPU",
                          cp->rank, cp->es);
    copy_args a = {.src = cp->src, .dst = cp->dst, .n = 1, .rank = cp->rank};
    for (int d = 0; d < cp->rank; d++)
        a.shape[d] = cp->shape[d], a.ss[d] = cp->ss[d], a.ds[d] = cp->ds[d], a.n *= cp->shape[d];
    if (!a.n)
        return SMELT_OK;
    const cuda_kernel *k;
    int st = lib_kernel(be, cp->es == 2 ? LIB_COPY_2 : cp->es == 4 ? LIB_COPY_4 : LIB_COPY_8, &k);
    return st ? st : lib_launch(be, k, "(a strided copy)", &a, a.n, false);
}

/* What a compile-only backend compiled (smelt_plan_emit_only's report). */
static int cuda_report(smelt__backend *be, smelt__sb *b, smelt__sb *fail)
{
    cuda_be *c = be->context;
    const char *target = c->arch, *form = strncmp(target, "sm_", 3) ? "PTX" : "CUBIN";
    int rejected = 0;
    for (int i = 0; i < c->nrecs; i++)
        rejected += !c->recs[i].ok;
    if (!c->nrecs)
        return 0;
    smelt__sb_printf(b, "NVRTC %d.%d, %s (%s): %d kernel%s compiled, %d rejected\n", g.nvrtc_major,
                     g.nvrtc_minor, target, form, c->nrecs - rejected,
                     smelt__plural(c->nrecs - rejected), rejected);
    for (int i = 0; i < c->nrecs; i++) {
        const compile_rec *r = &c->recs[i];
        if (r->ok)
            smelt__sb_printf(b, "\n==== %s: accepted, %zu bytes of %s in %.1f ms\n", r->name,
                             r->bytes, form, r->ms);
        else
            smelt__sb_printf(b, "\n==== %s: rejected\n%s", r->name, r->log ? r->log : "");
        smelt__sb_puts(b, r->source ? r->source : "(out of memory)\n");
    }
    if (rejected)
        smelt__sb_printf(fail, "NVRTC rejected %d of %d kernels for %s", rejected, c->nrecs, target);
    return rejected;
}

static const smelt__devtarget cuda_device = {.warp = 32, .shared_bytes = 48 * 1024, .max_grid = INT32_MAX};

static const smelt__backend_i cuda_iface = {
    .name = "NVRTC",
    .target = {.dialect = &smelt__dialect_cuda, .device = &cuda_device},
    .available = cuda_available,
    .compile = cuda_compile,
    .release = cuda_release,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .destroy = cuda_destroy,
    .report = cuda_report,
    .launch = cuda_launch,
    .copy = cuda_copy,
    .sync = cuda_sync,
    .gemm = cuda_gemm,
    .scan = cuda_scan,
    .copy_strided = cuda_copy_strided,
};

int smelt__backend_cuda_new(smelt_ctx *ctx, const char *target, smelt__backend **out)
{
    *out = NULL;
    if (target && *target &&
        ((strncmp(target, "sm_", 3) && strncmp(target, "compute_", 8)) || strlen(target) >= ARCH_MAX))
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG,
                          "smelt_plan_emit_only: arch '%s': expected sm_XY (CUBIN) or "
                          "compute_XY (PTX)", target);
    smelt__backend *gpu = NULL;
    if (target && !*target && smelt__cuda_present(NULL)) { /* this machine's GPU */
        int st = smelt__backend_get(ctx, smelt__backend_find("NVRTC"), &gpu);
        if (st)
            return st;
    }
    int st = smelt__backend_new(ctx, &cuda_iface, sizeof(cuda_be), out);
    if (st)
        return st;
    cuda_be *c = (*out)->context;
    pthread_mutex_init(&c->lib_mu, NULL);
    if (!target)
        return SMELT_OK;
    c->compile_only = true;
    /* the arch asked for, else this machine's GPU's, else a default */
    snprintf(c->arch, sizeof c->arch, "%s",
             *target ? target : gpu ? ((cuda_be *)gpu->context)->arch : "sm_80");
    return SMELT_OK;
}
