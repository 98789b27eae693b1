/* A stand-in for libcuda.so.1 and libnvrtc, for running the CUDA backend
 * on machines without a GPU (tests/test-cuda.c, suite cuda_fake; loaded
 * through SMELT_CUDA_DRIVER_LIB and SMELT_NVRTC_LIB), and for cuBLAS
 * (SMELT_CUBLAS_LIB): the matrix product in plain loops.
 *
 * "Device memory" is host memory.  "NVRTC" compiles the generated CUDA
 * source with the host C++ compiler behind a small emulation prelude
 * (__global__, blockIdx, ...) and returns the shared object, behind a header
 * giving its size, as its "CUBIN"; cuModuleLoadData opens it (from a temporary
 * file); cuLaunchKernel runs every
 * (block, thread) of the grid in turn on the calling thread, passing the
 * parameter block exactly as the driver would.  A kernel that exchanges
 * values between the threads of a warp (__shfl_down_sync: the reduction
 * kernels) runs each warp's 32 threads as coroutines (ucontext) that take
 * turns at every shuffle, as a warp does in lockstep; one that synchronises
 * its block (__syncthreads: a row program over several warps) runs the
 * block's threads so, each warp's shuffles among its own lanes.  So the emitted
 * kernels, the parameter packing, the grid-stride loops, the index variants,
 * the warp shuffles and the executor's device path all run here, checked
 * against the reference. */
#include <dlfcn.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* ---- driver ------------------------------------------------------------- */

EXPORT int cuInit(unsigned flags) { return flags ? 1 : 0; }
EXPORT int cuDriverGetVersion(int *v) { *v = 13000; return 0; }
EXPORT int cuGetErrorName(int r, const char **s)
{
    *s = r == 0 ? "CUDA_SUCCESS" : r == 2 ? "CUDA_ERROR_OUT_OF_MEMORY" : "CUDA_ERROR_FAKE";
    return 0;
}
EXPORT int cuDeviceGetCount(int *n) { *n = 1; return 0; }
EXPORT int cuDeviceGet(int *d, int i) { *d = i; return i == 0 ? 0 : 101; }
EXPORT int cuDeviceGetAttribute(int *v, int attr, int dev)
{
    (void)dev;
    *v = attr == 75 ? 8 : attr == 76 ? 0 : 0; /* compute capability 8.0 */
    return 0;
}
static int ctx_token, depth;
EXPORT int cuDevicePrimaryCtxRetain(void **ctx, int dev)
{
    (void)dev;
    *ctx = &ctx_token;
    return 0;
}
EXPORT int cuDevicePrimaryCtxRelease_v2(int dev) { (void)dev; return 0; }
EXPORT int cuCtxPushCurrent_v2(void *ctx) { depth++; return ctx == &ctx_token ? 0 : 201; }
EXPORT int cuCtxPopCurrent_v2(void **ctx)
{
    *ctx = &ctx_token;
    return depth-- > 0 ? 0 : 201;
}
static int stream_token;
EXPORT int cuStreamCreate(void **s, unsigned flags) { (void)flags; *s = &stream_token; return 0; }
EXPORT int cuStreamDestroy_v2(void *s) { return s == &stream_token ? 0 : 400; }
/* also CU_STREAM_LEGACY and CU_STREAM_PER_THREAD (what python/smelt waits on for a DLPack producer) */
EXPORT int cuStreamSynchronize(void *s) { return s == &stream_token || s == (void *)1 || s == (void *)2 ? 0 : 400; }

/* Under AddressSanitizer (scripts/sanitize) device memory is exactly the
 * bytes asked for and the kernels are compiled with it too, so a kernel
 * that reads or writes past an allocation is reported; else, as a driver
 * does, whole 256-byte units. */
#ifdef __SANITIZE_ADDRESS__
#define EMU_ASAN " -fsanitize=address"
#else
#define EMU_ASAN ""
#endif
/* A GPU faults on a load or store misaligned for its width (a 16-byte
 * vector at an address that is not a multiple of 16); the kernels are
 * compiled to trap on one too (a misaligned access to an alignas type:
 * UBSan's alignment check, trapping without its run-time library). */
#define EMU_ALIGN " -fsanitize=alignment -fsanitize-undefined-trap-on-error"
/* The live allocations, so that cuBLAS's batched products can tell device
 * memory from host memory (a GPU faults on an array of pointers in host
 * memory). */
static struct { char *p; size_t n; } live[16384];
static int nlive;
static pthread_mutex_t live_mu = PTHREAD_MUTEX_INITIALIZER;
static bool is_device(const void *p, size_t n)
{
    bool in = false;
    pthread_mutex_lock(&live_mu);
    for (int i = 0; i < nlive && !in; i++)
        in = (const char *)p >= live[i].p && (const char *)p + n <= live[i].p + live[i].n;
    pthread_mutex_unlock(&live_mu);
    return in;
}
EXPORT int cuMemAlloc_v2(unsigned long long *p, size_t n)
{
    void *m = NULL;
    if (posix_memalign(&m, 256, *EMU_ASAN ? (n ? n : 1) : (n + 255) / 256 * 256))
        return 2;
    memset(m, 0xA5, n); /* not zero: kernels must write every element */
    pthread_mutex_lock(&live_mu);
    bool room = nlive < (int)(sizeof live / sizeof live[0]);
    if (room)
        live[nlive].p = m, live[nlive++].n = n;
    pthread_mutex_unlock(&live_mu);
    if (!room) { /* (the registry full: out of memory) */
        free(m);
        return 2;
    }
    *p = (unsigned long long)(size_t)m;
    return 0;
}
EXPORT int cuMemFree_v2(unsigned long long p)
{
    pthread_mutex_lock(&live_mu);
    for (int i = 0; i < nlive; i++)
        if (live[i].p == (char *)(size_t)p) {
            live[i] = live[--nlive];
            break;
        }
    pthread_mutex_unlock(&live_mu);
    free((void *)(size_t)p);
    return 0;
}
/* pinned host memory; events (the stream runs each call as it comes) */
EXPORT int cuMemAllocHost_v2(void **p, size_t n) { return (*p = malloc(n ? n : 1)) ? 0 : 2; }
EXPORT int cuMemFreeHost(void *p) { free(p); return 0; }
static int event_token;
EXPORT int cuEventCreate(void **e, unsigned flags) { *e = &event_token; return flags == 2 ? 0 : 1; }
EXPORT int cuEventRecord(void *e, void *st) { return e == &event_token && st == &stream_token ? 0 : 400; }
EXPORT int cuEventSynchronize(void *e) { return e == &event_token ? 0 : 400; }
EXPORT int cuEventDestroy_v2(void *e) { return e == &event_token ? 0 : 400; }
EXPORT int cuMemcpyHtoDAsync_v2(unsigned long long d, const void *s, size_t n, void *st)
{
    memcpy((void *)(size_t)d, s, n);
    return st == &stream_token ? 0 : 400;
}
EXPORT int cuMemcpyDtoHAsync_v2(void *d, unsigned long long s, size_t n, void *st)
{
    memcpy(d, (const void *)(size_t)s, n);
    return st == &stream_token ? 0 : 400;
}
EXPORT int cuMemcpyDtoDAsync_v2(unsigned long long d, unsigned long long s, size_t n, void *st)
{
    memmove((void *)(size_t)d, (const void *)(size_t)s, n);
    return st == &stream_token ? 0 : 400;
}

/* An "image": this magic, the size of the shared object, the shared object. */
static const char magic[8] = {'S', 'M', 'E', 'L', 'T', 'E', 'M', 'U'};

static int temp_path(char *path, size_t n, const char *suffix)
{
    const char *tmp = getenv("TMPDIR");
    snprintf(path, n, "%s/smelt-fakecuda-XXXXXX%s", tmp && *tmp ? tmp : "/tmp", suffix);
    int fd = mkstemps(path, (int)strlen(suffix));
    if (fd >= 0)
        close(fd);
    return fd < 0 ? -1 : 0;
}

EXPORT int cuModuleLoadData(void **mod, const void *image)
{
    char path[300];
    unsigned long long size;
    memcpy(&size, (const char *)image + 8, 8);
    if (memcmp(image, magic, 8) || temp_path(path, sizeof path, ".so"))
        return 200; /* CUDA_ERROR_INVALID_IMAGE */
    FILE *f = fopen(path, "wb");
    size_t w = f ? fwrite((const char *)image + 16, 1, size, f) : 0;
    if (f)
        fclose(f);
    *mod = w == size ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    unlink(path);
    return *mod ? 0 : 200;
}
/* ---- warps: 32 threads as coroutines ------------------------------------ */
typedef void (*emu_launch)(void *arg, unsigned grid, unsigned block);
typedef void (*emu_thread)(void *arg, unsigned grid, unsigned block, unsigned b, unsigned t);
typedef struct emu_fn { /* a CUfunction */
    void *mod;
    emu_launch launch;
    emu_thread thread; /* set when the kernel shuffles: it runs warp by warp */
    void (*set_arg2)(void *); /* an image that passes a second parameter */
    int bound;                /* the most threads a block may have (__launch_bounds__) */
    bool block_sync;          /* it calls __syncthreads: a block's threads run together */
    struct emu_fn *next;
} emu_fn;
static emu_fn *fns;

#define LANE_STACK (256 * 1024)
#define MAX_LANES 1024 /* a block's threads */
static ucontext_t sched_ctx, lane_ctx[MAX_LANES];
static char *lane_stack[MAX_LANES];
static bool lane_done[MAX_LANES];
static int cur_lane, n_lanes;
static unsigned sync_count, sync_gen; /* __syncthreads: arrivals, and rounds completed */
static struct {
    const emu_fn *f;
    void *arg;
    unsigned grid, block, b, t0;
} job;


/* from lane me to the next lane that has not finished (or, when every lane
 * has, back to the launch) */
static void next_lane(int me)
{
    for (int k = 1; k <= n_lanes; k++) {
        int n = (me + k) % n_lanes;
        if (!lane_done[n]) {
            if (n != me) {
                cur_lane = n;
                swapcontext(&lane_ctx[me], &lane_ctx[n]);
            }
            return;
        }
    }
    swapcontext(&lane_ctx[me], &sched_ctx);
}

/* every live lane runs to its next barrier in turn: a warp's lockstep at
 * each shuffle (the kernels shuffle in warp-uniform code) */
static void emu_barrier(void) { next_lane(cur_lane); }
/* __syncthreads: the round is complete when every live thread of the
 * block has arrived (one that has returned no longer counts: it cannot
 * leave the others waiting forever); the others take turns until then */
static void emu_sync(void)
{
    unsigned gen = sync_gen;
    sync_count++;
    while (sync_gen == gen) {
        int live = 0;
        for (int l = 0; l < n_lanes; l++)
            live += !lane_done[l];
        if (sync_count >= (unsigned)live) {
            sync_count = 0;
            sync_gen++;
            return;
        }
        next_lane(cur_lane);
    }
}
static const struct emu_rt {
    void (*barrier)(void);
    void (*sync)(void);
} rt = {emu_barrier, emu_sync};

static void lane_main(void)
{
    int me = cur_lane;
    job.f->thread(job.arg, job.grid, job.block, job.b, job.t0 + (unsigned)me);
    lane_done[me] = true;
    next_lane(me);
}

/* lane l's context, to start at lane_main (in a function of its own: the
 * caller's loop would otherwise hold a variable across getcontext, which
 * returns like setjmp) */
static void __attribute__((noinline)) lane_init(int l)
{
    lane_done[l] = false;
    getcontext(&lane_ctx[l]);
    lane_ctx[l].uc_stack.ss_sp = lane_stack[l];
    lane_ctx[l].uc_stack.ss_size = LANE_STACK;
    lane_ctx[l].uc_link = &sched_ctx;
    makecontext(&lane_ctx[l], lane_main, 0);
}

static int run_warps(const emu_fn *f, void *arg, unsigned grid, unsigned block)
{
    unsigned group = f->block_sync ? block : 32; /* threads run together: a warp, or the block */
    for (unsigned l = 0; l < group && l < MAX_LANES; l++)
        if (!lane_stack[l] && !(lane_stack[l] = malloc(LANE_STACK)))
            return 2;
    /* the loop's state in statics: swapcontext returns like setjmp */
    job.f = f, job.arg = arg, job.grid = grid, job.block = block;
    sync_count = 0;
    for (job.b = 0; job.b < job.grid; job.b++)
        for (job.t0 = 0; job.t0 < job.block; job.t0 += group) {
            n_lanes = job.block - job.t0 < group ? (int)(job.block - job.t0) : (int)group;
            for (int l = 0; l < n_lanes; l++)
                lane_init(l);
            cur_lane = 0;
            swapcontext(&sched_ctx, &lane_ctx[0]);
        }
    return 0;
}

EXPORT int cuModuleUnload(void *mod)
{
    for (emu_fn **pp = &fns; *pp;)
        if ((*pp)->mod == mod) {
            emu_fn *f = *pp;
            *pp = f->next;
            free(f);
        } else {
            pp = &(*pp)->next;
        }
    return dlclose(mod) ? 400 : 0;
}

EXPORT int cuModuleGetFunction(void **fn, void *mod, const char *name)
{
    if (!dlsym(mod, name)) /* the kernel must exist under its own name */
        return 500;
    emu_fn *f = calloc(1, sizeof *f);
    void *launch = dlsym(mod, "smelt_emu_launch"), *thread = NULL, *setter = NULL;
    bool warps = dlsym(mod, "smelt_emu_warps") != NULL; /* else an image may predate warps */
    if (warps) {
        thread = dlsym(mod, "smelt_emu_thread");
        setter = dlsym(mod, "smelt_emu_set_rt");
    }
    if (!f || !launch || (warps && (!thread || !setter))) {
        free(f);
        return 500;
    }
    memcpy(&f->launch, &launch, sizeof f->launch);
    void *arg2 = dlsym(mod, "smelt_emu_set_arg2");
    if (arg2)
        memcpy(&f->set_arg2, &arg2, sizeof f->set_arg2);
    if (warps) {
        void (*set_rt)(const struct emu_rt *);
        memcpy(&set_rt, &setter, sizeof set_rt);
        set_rt(&rt);
        memcpy(&f->thread, &thread, sizeof f->thread);
    }
    f->block_sync = dlsym(mod, "smelt_emu_block_sync") != NULL;
    const int *bound = dlsym(mod, "smelt_emu_bound");
    f->bound = bound ? *bound : 1024;
    f->mod = mod;
    f->next = fns;
    fns = f;
    *fn = f;
    return 0;
}
EXPORT int cuOccupancyMaxPotentialBlockSize(int *min_grid, int *block, void *fn, void *b2d,
                                            size_t smem, int limit)
{
    (void)b2d, (void)smem, (void)limit;
    *min_grid = 3; /* a small grid: the grid-stride loops go round many times */
    *block = 64 < ((const emu_fn *)fn)->bound ? 64 : ((const emu_fn *)fn)->bound;
    return 0;
}
EXPORT int cuFuncGetAttribute(int *v, int attr, void *fn)
{
    if (attr != 0) /* CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK alone */
        return 1;
    *v = ((const emu_fn *)fn)->bound;
    return 0;
}
/* the last launch's grid and block (for tests of the executor's launches:
 * tests/test-cuda.c finds it with dlsym) */
EXPORT unsigned smelt_fake_last_launch[2];
EXPORT int cuLaunchKernel(void *fn, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                          unsigned by, unsigned bz, unsigned smem, void *st, void **params,
                          void **extra)
{
    const emu_fn *f = fn;
    if (gy != 1 || gz != 1 || by != 1 || bz != 1 || smem || extra || st != &stream_token ||
        !gx || !bx || bx > (unsigned)f->bound)
        return 1;
    smelt_fake_last_launch[0] = gx, smelt_fake_last_launch[1] = bx;
    if (f->set_arg2)
        f->set_arg2(params[1]);
    if (f->thread)
        return run_warps(f, params[0], gx, bx);
    f->launch(params[0], gx, bx);
    return 0;
}

/* ---- NVRTC --------------------------------------------------------------- */

typedef struct prog {
    char *src, name[128], *log, *bin;
    size_t binsize;
} prog;

EXPORT const char *nvrtcGetErrorString(int r) { return r ? "NVRTC_ERROR_COMPILATION" : "NVRTC_SUCCESS"; }
EXPORT int nvrtcVersion(int *major, int *minor)
{
    *major = 13;
    *minor = 0;
    return 0;
}
EXPORT int nvrtcGetNumSupportedArchs(int *n) { *n = 2; return 0; }
EXPORT int nvrtcGetSupportedArchs(int *a)
{
    a[0] = 80;
    a[1] = 90;
    return 0;
}
EXPORT int nvrtcCreateProgram(prog **p, const char *src, const char *name, int nh,
                              const char *const *h, const char *const *hn)
{
    (void)h, (void)hn;
    if (nh)
        return 3;
    *p = calloc(1, sizeof **p);
    if (!*p || !((*p)->src = strdup(src)))
        return 1;
    snprintf((*p)->name, sizeof (*p)->name, "%.*s", (int)(strlen(name) - 3), name); /* "x.cu" */
    return 0;
}
EXPORT int nvrtcDestroyProgram(prog **p)
{
    free((*p)->src);
    free((*p)->log);
    free((*p)->bin);
    free(*p);
    *p = NULL;
    return 0;
}

static const char *const emu_prelude =
    "#define __global__\n#define __device__\n#define __forceinline__ inline\n"
    "#define __noinline__ __attribute__((noinline))\n"
    "#define __restrict__ __restrict\n"
    /* a block's shared memory: a static, as warps run one after another
     * (run_warps); a kernel's largest block, recorded (smelt_emu_bound) */
    "#define __shared__ static\n#define __align__(n) __attribute__((aligned(n)))\n"
    "#define __launch_bounds__(n)\n"
    "struct smelt_emu_dim3 { unsigned x, y, z; };\n"
    "static smelt_emu_dim3 blockIdx, threadIdx, blockDim, gridDim;\n"
    "static inline float __uint_as_float(unsigned u) { float f; __builtin_memcpy(&f, &u, 4); return f; }\n"
    "static inline double __longlong_as_double(long long u) { double f; __builtin_memcpy(&f, &u, 8); return f; }\n"
    "static inline unsigned __float_as_uint(float f) { unsigned u; __builtin_memcpy(&u, &f, 4); return u; }\n"
    "static inline long long __double_as_longlong(double f) { long long u; __builtin_memcpy(&u, &f, 8); return u; }\n"
    /* one thread at a time: memory is coherent, an atomic a plain add */
    "static inline void __threadfence(void) {}\n"
    "static inline unsigned atomicAdd(unsigned *p, unsigned v) { unsigned o = *p; *p = o + v; return o; }\n"
    "template <typename T> static inline T __ldcg(const T *p) { return *p; }\n"
    "template <typename T> static inline T __ldg(const T *p) { return *p; }\n"
    /* a warp's shuffle: every lane leaves its value and waits for the others
     * (the launch runs the lanes as coroutines), takes lane + d's, waits
     * again; a lane's block and thread index are its own again after */
    "struct smelt_emu_rt { void (*barrier)(void); void (*sync)(void); };\n"
    "static const smelt_emu_rt *smelt_emu_rtp;\n"
    "static unsigned long long smelt_emu_slots[32][32];\n"

    "template <typename T> static T __shfl_down_sync(unsigned mask, T v, unsigned d)\n{\n"
    "    (void)mask;\n    const smelt_emu_dim3 b = blockIdx, t = threadIdx;\n    const unsigned lane = t.x & 31u;\n"
    "    __builtin_memcpy(&smelt_emu_slots[t.x >> 5 & 31u][lane], &v, sizeof v);\n    smelt_emu_rtp->barrier();\n"
    "    T r = v;\n    if (lane + d < 32)\n        __builtin_memcpy(&r, &smelt_emu_slots[t.x >> 5 & 31u][lane + d], sizeof r);\n"
    "    smelt_emu_rtp->barrier();\n    blockIdx = b, threadIdx = t;\n    return r;\n}\n"
    /* a warp's barrier: every lane to here, the same way */
    "static void __syncwarp(unsigned mask = 0xffffffffu)\n{\n"
    "    (void)mask;\n    const smelt_emu_dim3 b = blockIdx, t = threadIdx;\n"
    "    smelt_emu_rtp->barrier();\n    blockIdx = b, threadIdx = t;\n}\n"
    /* the block's barrier: every thread of the block to here */
    "static void __syncthreads(void)\n{\n"
    "    const smelt_emu_dim3 b = blockIdx, t = threadIdx;\n"
    "    smelt_emu_rtp->sync();\n    blockIdx = b, threadIdx = t;\n}\n"
    /* lane src's value on every lane, the same way */
    "template <typename T> static T __shfl_sync(unsigned mask, T v, int src)\n{\n"
    "    (void)mask;\n    const smelt_emu_dim3 b = blockIdx, t = threadIdx;\n    const unsigned lane = t.x & 31u;\n"
    "    __builtin_memcpy(&smelt_emu_slots[t.x >> 5 & 31u][lane], &v, sizeof v);\n    smelt_emu_rtp->barrier();\n"
    "    T r;\n    __builtin_memcpy(&r, &smelt_emu_slots[t.x >> 5 & 31u][src & 31], sizeof r);\n"
    "    smelt_emu_rtp->barrier();\n    blockIdx = b, threadIdx = t;\n    return r;\n}\n";
static const char *const mathfns[][2] = { /* the libm functions kernels may call */
#define SMELT_MATHFN(fn, n) {#fn, #n},
#include "../src/ir/mathfns.def"
#undef SMELT_MATHFN
};
static const char *const emu_launcher =
    "\nstatic void smelt_emu_call(void (*f)(smelt_args), void *arg) { f(*(const smelt_args *)arg); }\n"
    "static void smelt_emu_call(void (*f)(const smelt_args *), void *arg)\n"
    "{ f(*(const smelt_args *const *)arg); }\n"
    /* a kernel's second parameter (a reduction's scratch): cuLaunchKernel's
     * params[1], set before the launch */
    "static void *smelt_emu_arg2;\n"

    "extern \"C\" void smelt_emu_set_arg2(void *p) { smelt_emu_arg2 = p; }\n"
    "template <typename S> static void smelt_emu_call(void (*f)(smelt_args, S), void *arg)\n"
    "{ f(*(const smelt_args *)arg, *(const S *)smelt_emu_arg2); }\n"
    "template <typename S> static void smelt_emu_call(void (*f)(const smelt_args *, S), void *arg)\n"
    "{ f(*(const smelt_args *const *)arg, *(const S *)smelt_emu_arg2); }\n"
    "extern \"C\" void smelt_emu_launch(void *arg, unsigned grid, unsigned block)\n{\n"
    "    gridDim = {grid, 1, 1};\n    blockDim = {block, 1, 1};\n"
    "    for (unsigned b = 0; b < grid; b++)\n        for (unsigned t = 0; t < block; t++) {\n"
    "            blockIdx = {b, 0, 0};\n            threadIdx = {t, 0, 0};\n"
    "            smelt_emu_call(%s, arg);\n        }\n}\n"
    "extern \"C\" void smelt_emu_set_rt(const smelt_emu_rt *r) { smelt_emu_rtp = r; }\n"
    "extern \"C\" void smelt_emu_thread(void *arg, unsigned grid, unsigned block, unsigned b, unsigned t)\n{\n"
    "    gridDim = {grid, 1, 1};\n    blockDim = {block, 1, 1};\n    blockIdx = {b, 0, 0};\n    threadIdx = {t, 0, 0};\n"
    "    smelt_emu_call(%s, arg);\n}\n";

EXPORT int nvrtcCompileProgram(prog *p, int nopt, const char *const *opts)
{
    (void)nopt, (void)opts;
    char so[300], cpp[300], logf[300], cmd[1024];
    if (temp_path(so, sizeof so, ".so") || temp_path(cpp, sizeof cpp, ".cpp") ||
        temp_path(logf, sizeof logf, ".log"))
        return 1;
    FILE *f = fopen(cpp, "w");
    if (!f)
        return 1;
    fputs(emu_prelude, f);
    fputs("extern \"C\" {\n", f);
    for (size_t i = 0; i < sizeof mathfns / sizeof *mathfns; i++) {
        int n = mathfns[i][1][0] - '0';
        fprintf(f, "double %s(double%s%s);\nfloat %sf(float%s%s);\n", mathfns[i][0],
                n > 1 ? ", double" : "", n > 2 ? ", double" : "", mathfns[i][0],
                n > 1 ? ", float" : "", n > 2 ? ", float" : "");
    }
    fputs("}\n", f);
    fputs(p->src, f);
    fprintf(f, emu_launcher, p->name, p->name);
    if (strstr(p->src, "__shfl") || strstr(p->src, "__syncthreads")) /* run warp by warp (cuLaunchKernel) */
        fputs("extern \"C\" const int smelt_emu_warps = 1;\n", f);
    if (strstr(p->src, "__syncthreads")) /* ... or block by block */
        fputs("extern \"C\" const int smelt_emu_block_sync = 1;\n", f);
    const char *lb = strstr(p->src, "__launch_bounds__(");
    if (lb) /* the most threads a block of it may have (cuFuncGetAttribute) */
        fprintf(f, "extern \"C\" const int smelt_emu_bound = %d;\n", atoi(lb + strlen("__launch_bounds__(")));
    fclose(f);
    snprintf(cmd, sizeof cmd, "c++ -std=c++17 -shared -fPIC -O1 -ffp-contract=off -w" EMU_ASAN EMU_ALIGN " -o %s %s > %s 2>&1", so,
             cpp, logf);
    int rc = system(cmd);
    unlink(cpp);
    if ((f = fopen(logf, "r"))) {
        size_t cap = 1 << 16;
        if ((p->log = calloc(1, cap)) && fread(p->log, 1, cap - 1, f) == 0)
            p->log[0] = 0;
        fclose(f);
    }
    unlink(logf);
    if (!rc && (f = fopen(so, "rb"))) { /* the image: header, then the shared object */
        fseek(f, 0, SEEK_END);
        unsigned long long size = (unsigned long long)ftell(f);
        fseek(f, 0, SEEK_SET);
        if ((p->bin = malloc(16 + size))) {
            memcpy(p->bin, magic, 8);
            memcpy(p->bin + 8, &size, 8);
            p->binsize = 16 + size;
            if (fread(p->bin + 16, 1, size, f) != size)
                rc = 1;
        }
        fclose(f);
    }
    unlink(so);
    return rc || !p->bin ? 6 : 0; /* NVRTC_ERROR_COMPILATION */
}
EXPORT int nvrtcGetProgramLogSize(prog *p, size_t *n) { *n = p->log ? strlen(p->log) + 1 : 1; return 0; }
EXPORT int nvrtcGetProgramLog(prog *p, char *log) { strcpy(log, p->log ? p->log : ""); return 0; }
EXPORT int nvrtcGetCUBINSize(prog *p, size_t *n) { *n = p->binsize; return 0; }
EXPORT int nvrtcGetCUBIN(prog *p, char *out)
{
    memcpy(out, p->bin, p->binsize);
    return 0;
}
EXPORT int nvrtcGetPTXSize(prog *p, size_t *n) { return nvrtcGetCUBINSize(p, n); }
EXPORT int nvrtcGetPTX(prog *p, char *out) { return nvrtcGetCUBIN(p, out); }

/* ---- cuBLAS (SMELT_CUBLAS_LIB) -----------------------------------------
 * Column-major, as cuBLAS: C = alpha op(A) op(B) + beta C, each sum in k
 * order in the compute type (f32; f64 for D), then times alpha, plus beta
 * times C; with beta 0, C is not read (it may hold anything, NaN
 * included), as cuBLAS promises.  smelt asks alpha 1 and beta 0 (a matmul)
 * or 1 (a convolution's taps after the first, accumulated in place). */
static int handle_token;
EXPORT int cublasCreate_v2(void **h) { *h = &handle_token; return 0; }
EXPORT int cublasDestroy_v2(void *h) { return h == &handle_token ? 0 : 1; }
EXPORT int cublasSetStream_v2(void *h, void *s) { return h == &handle_token && s == &stream_token ? 0 : 7; }

static float half_load(const void *p, int bf)
{
    unsigned short u;
    memcpy(&u, p, 2);
    if (bf) {
        unsigned int w = (unsigned int)u << 16;
        float f;
        memcpy(&f, &w, 4);
        return f;
    }
    __extension__ _Float16 h;
    memcpy(&h, &u, 2);
    return (float)h;
}

static void half_store(void *p, float f, int bf)
{
    unsigned short u;
    if (bf) { /* round to nearest even (NaN kept a NaN) */
        unsigned int w;
        memcpy(&w, &f, 4);
        u = (w & 0x7fffffff) > 0x7f800000 ? (unsigned short)((w >> 16) | 0x40)
                                            : (unsigned short)((w + 0x7fff + ((w >> 16) & 1)) >> 16);
    } else {
        __extension__ _Float16 h = f;
        memcpy(&u, &h, 2);
    }
    memcpy(p, &u, 2);
}

/* element (r, c) of op(X), X column-major with leading dimension ld */
#define IX(t, r, c, ld) ((t) ? (long long)(r) * (ld) + (c) : (long long)(c) * (ld) + (r))
#define AT(X, t, r, c, ld) ((X)[IX(t, r, c, ld)])

static int gemm_args(void *h, int ta, int tb, int m, int n, int k, int lda, int ldb, int ldc)
{
    if (h != &handle_token)
        return 1;
    if ((ta != 0 && ta != 1) || (tb != 0 && tb != 1) || m < 0 || n < 0 || k < 0 || ldc < (m > 1 ? m : 1) ||
        lda < ((ta ? k : m) > 1 ? (ta ? k : m) : 1) || ldb < ((tb ? n : k) > 1 ? (tb ? n : k) : 1))
        return 7; /* CUBLAS_STATUS_INVALID_VALUE */
    return 0;
}

/* the calls of each kind since the library was loaded: strided batches,
 * batches of pointer arrays (tests/test-cuda.c finds it with dlsym) */
EXPORT unsigned smelt_fake_gemm_calls[2];

/* cublas<T>gemmStridedBatched: type T, accumulated in T */
#define FAKE_GEMM_ONE(T, A, B, C)                                                                                 \
    for (int j = 0; j < n; j++)                                                                                   \
        for (int i = 0; i < m; i++) {                                                                             \
            T acc = 0, *c = &(C)[(long long)j * ldc + i];                                                         \
            for (int q = 0; q < k; q++)                                                                           \
                acc += AT(A, ta, i, q, lda) * AT(B, tb, q, j, ldb);                                               \
            *c = *beta == 0 ? *alpha * acc : *alpha * acc + *beta * *c;                                           \
        }
#define FAKE_GEMM(name, T)                                                                                        \
    EXPORT int name(void *h, int ta, int tb, int m, int n, int k, const T *alpha, const T *A, int lda, long long sa, \
                    const T *B, int ldb, long long sb, const T *beta, T *C, int ldc, long long sc, int batch)       \
    {                                                                                                             \
        int st = gemm_args(h, ta, tb, m, n, k, lda, ldb, ldc);                                                    \
        if (st)                                                                                                   \
            return st;                                                                                            \
        smelt_fake_gemm_calls[0]++;                                                                               \
        for (int b = 0; b < batch; b++) {                                                                         \
            FAKE_GEMM_ONE(T, A + b * sa, B + b * sb, C + b * sc)                                                  \
        }                                                                                                         \
        return 0;                                                                                                 \
    }
FAKE_GEMM(cublasSgemmStridedBatched, float)
FAKE_GEMM(cublasDgemmStridedBatched, double)

/* Whether the batch's address lists lie in device memory, and each of
 * their matrices (column-major, rows x cols of op(X) from ld, es-byte
 * elements) within one allocation */
static bool batch_in_device(const void *const *Ap, const void *const *Bp, void *const *Cp, int batch, int ta, int tb,
                            int m, int n, int k, int lda, int ldb, int ldc, size_t es)
{
    size_t bytes = sizeof(void *) * (size_t)(batch > 0 ? batch : 0);
    if (batch < 0 || !is_device(Ap, bytes) || !is_device(Bp, bytes) || !is_device(Cp, bytes))
        return false;
    /* a stored matrix of r rows and c columns (column-major) spans (c - 1) ld + r elements */
    size_t sa = m && k ? ((size_t)((ta ? m : k) - 1) * (size_t)lda + (size_t)(ta ? k : m)) * es : 0;
    size_t sb = k && n ? ((size_t)((tb ? k : n) - 1) * (size_t)ldb + (size_t)(tb ? n : k)) * es : 0;
    size_t sc = m && n ? ((size_t)(n - 1) * (size_t)ldc + (size_t)m) * es : 0;
    for (int b = 0; b < batch; b++)
        if ((sa && !is_device(Ap[b], sa)) || (sb && !is_device(Bp[b], sb)) || (sc && !is_device(Cp[b], sc)))
            return false;
    return true;
}

/* cublas<T>gemmBatched: the matrices' addresses in arrays in device memory */
#define FAKE_GEMM_PTRS(name, T)                                                                                   \
    EXPORT int name(void *h, int ta, int tb, int m, int n, int k, const T *alpha, const T *const *Ap, int lda,     \
                    const T *const *Bp, int ldb, const T *beta, T *const *Cp, int ldc, int batch)                 \
    {                                                                                                             \
        int st = gemm_args(h, ta, tb, m, n, k, lda, ldb, ldc);                                                    \
        if (st ||                                                                                                 \
            !batch_in_device((const void *const *)Ap, (const void *const *)Bp, (void *const *)Cp, batch, ta, tb,  \
                             m, n, k, lda, ldb, ldc, sizeof(T)))                                                  \
            return st ? st : 7;                                                                                   \
        smelt_fake_gemm_calls[1]++;                                                                               \
        for (int b = 0; b < batch; b++) {                                                                         \
            FAKE_GEMM_ONE(T, Ap[b], Bp[b], Cp[b])                                                                 \
        }                                                                                                         \
        return 0;                                                                                                 \
    }
FAKE_GEMM_PTRS(cublasSgemmBatched, float)
FAKE_GEMM_PTRS(cublasDgemmBatched, double)

/* f16 (CUDA_R_16F, 2) and bf16 (CUDA_R_16BF, 14) with CUBLAS_COMPUTE_32F (68) */
static int half_args(void *h, int ta, int tb, int m, int n, int k, int at, int lda, int bt, int ldb, int ct, int ldc,
                     int compute, int algo)
{
    int st = gemm_args(h, ta, tb, m, n, k, lda, ldb, ldc);
    if (st || at != bt || at != ct || (at != 2 && at != 14) || compute != 68 || algo != -1)
        return st ? st : 7;
    return 0;
}
/* alpha and beta are f32 (the compute type's) */
static void half_gemm(int ta, int tb, int m, int n, int k, const float *alpha, const unsigned short *a, int lda,
                      const unsigned short *b, int ldb, const float *beta, unsigned short *c, int ldc, int bf)
{
    for (int j = 0; j < n; j++)
        for (int i = 0; i < m; i++) {
            float acc = 0;
            unsigned short *o = &c[(long long)j * ldc + i];
            for (int q = 0; q < k; q++)
                acc += half_load(a + IX(ta, i, q, lda), bf) * half_load(b + IX(tb, q, j, ldb), bf);
            half_store(o, *beta == 0 ? *alpha * acc : *alpha * acc + *beta * half_load(o, bf), bf);
        }
}
EXPORT int cublasGemmStridedBatchedEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha,
                                      const void *A, int at, int lda, long long sa, const void *B, int bt, int ldb,
                                      long long sb, const void *beta, void *C, int ct, int ldc, long long sc,
                                      int batch, int compute, int algo)
{
    int st = half_args(h, ta, tb, m, n, k, at, lda, bt, ldb, ct, ldc, compute, algo);
    if (st)
        return st;
    smelt_fake_gemm_calls[0]++;
    for (int b = 0; b < batch; b++)
        half_gemm(ta, tb, m, n, k, alpha, (const unsigned short *)A + b * sa, lda, (const unsigned short *)B + b * sb,
                  ldb, beta, (unsigned short *)C + b * sc, ldc, at == 14);
    return 0;
}
EXPORT int cublasGemmBatchedEx(void *h, int ta, int tb, int m, int n, int k, const void *alpha,
                               const void *const *Ap, int at, int lda, const void *const *Bp, int bt, int ldb,
                               const void *beta, void *const *Cp, int ct, int ldc, int batch, int compute, int algo)
{
    int st = half_args(h, ta, tb, m, n, k, at, lda, bt, ldb, ct, ldc, compute, algo);
    if (st || !batch_in_device(Ap, Bp, Cp, batch, ta, tb, m, n, k, lda, ldb, ldc, 2))
        return st ? st : 7;
    smelt_fake_gemm_calls[1]++;
    for (int b = 0; b < batch; b++)
        half_gemm(ta, tb, m, n, k, alpha, Ap[b], lda, Bp[b], ldb, beta, Cp[b], ldc, at == 14);
    return 0;
}
