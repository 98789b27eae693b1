/* BLAS for the matrix product (class LIBRARY operators): the CBLAS
 * interface of OpenBLAS (Debian's libopenblas0), loaded at run time with
 * dlopen so that smelt builds and runs without it until a plan multiplies
 * matrices; SMELT_BLAS_LIB names another library with the same interface
 * (the reference libblas.so.3 has it too, slower). */
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#if defined(__x86_64__) && defined(__SSE__)
#include <xmmintrin.h>
#endif
#include <string.h>

#include "plan.h"

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 }; /* CBLAS's enums */
typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *, int, float,
                         float *, int);
typedef void (*dgemm_fn)(int, int, int, int, int, int, double, const double *, int, const double *, int, double,
                         double *, int);

static struct {
    pthread_once_t once;
    void *lib;
    sgemm_fn sgemm;
    dgemm_fn dgemm;
    void (*set_threads)(int);
    char name[160];
    char why[512];
    bool from_env; /* SMELT_BLAS_LIB's library was loaded */
} blas = {.once = PTHREAD_ONCE_INIT};

static void blas_load(void)
{
    /* OpenBLAS picks its kernels by CPU (DYNAMIC_ARCH; 0.3.21 takes a Zen 5
     * for a Haswell, AVX2 only), and other kernels sum in another order: one
     * choice per x86-64 level, AMD and Intel alike, unless the user chose
     * (docs/env.md): AVX-512's kernels (twice AVX2's speed on a Zen 5), else
     * AVX2's */
    int level = smelt__x86_level();
    const smelt__settings *cfg = smelt__settings_read(); /* (loaded once a process) */
    if (!cfg->raw[SMELT__S_OPENBLAS_CORETYPE] && level >= 3)
        setenv("OPENBLAS_CORETYPE", level >= 4 ? "SkylakeX" : "Haswell", 0);
    const char *env = cfg->raw[SMELT__S_SMELT_BLAS_LIB];
    const char *cands[] = {env && *env ? env : NULL, "libopenblas.so.0", "libopenblas.so", "libblas.so.3",
                           "libcblas.so.3"};
    for (size_t i = 0; i < sizeof cands / sizeof cands[0] && !blas.sgemm; i++) {
        if (!cands[i] || !(blas.lib = dlopen(cands[i], RTLD_NOW | RTLD_LOCAL)))
            continue;
        blas.sgemm = (sgemm_fn)(uintptr_t)dlsym(blas.lib, "cblas_sgemm");
        blas.dgemm = (dgemm_fn)(uintptr_t)dlsym(blas.lib, "cblas_dgemm");
        if (!blas.sgemm || !blas.dgemm) {
            blas.sgemm = NULL;
            dlclose(blas.lib);
            blas.lib = NULL;
            continue;
        }
        blas.set_threads = (void (*)(int))(uintptr_t)dlsym(blas.lib, "openblas_set_num_threads");
        char *(*config)(void) = (char *(*)(void))(uintptr_t)dlsym(blas.lib, "openblas_get_config");
        snprintf(blas.name, sizeof blas.name, "%s", config ? config() : cands[i]);
        blas.from_env = i == 0;
    }
    if (!blas.sgemm)
        snprintf(blas.why, sizeof blas.why, "no BLAS library with cblas_sgemm and cblas_dgemm could be loaded "
                 "(tried SMELT_BLAS_LIB, libopenblas.so.0, libblas.so.3; install one: apt-get install "
                 "libopenblas0)");
}

bool smelt__blas_from_env(void)
{
    pthread_once(&blas.once, blas_load);
    return blas.from_env;
}

const char *smelt__blas_name(void)
{
    pthread_once(&blas.once, blas_load);
    return blas.sgemm ? blas.name : NULL;
}

int smelt__blas_check(smelt_ctx *ctx)
{
    pthread_once(&blas.once, blas_load);
    return blas.sgemm ? SMELT_OK : smelt__err(ctx, SMELT_ERR_UNSUPPORTED, "matmul: %s", blas.why);
}

void smelt__blas_single_threaded(void)
{
    pthread_once(&blas.once, blas_load);
    if (blas.set_threads)
        blas.set_threads(1);
}

int smelt__blas_gemm(smelt_ctx *ctx, smelt_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                     const void *a, int64_t lda, const void *b, int64_t ldb, void *c, int64_t ldc)
{
    return smelt__blas_gemm_beta(ctx, dt, ta, tb, m, n, k, a, lda, b, ldb, 0, c, ldc);
}

unsigned smelt__daz_on(void)
{
#if defined(__x86_64__) && defined(__SSE__)
    const unsigned csr = _mm_getcsr();
    _mm_setcsr(csr | 0x40u);
    return csr;
#else
    return 0;
#endif
}

void smelt__daz_restore(unsigned csr)
{
#if defined(__x86_64__) && defined(__SSE__)
    _mm_setcsr(csr);
#else
    (void)csr;
#endif
}

int smelt__blas_gemm_beta(smelt_ctx *ctx, smelt_dtype dt, bool ta, bool tb, int64_t m, int64_t n, int64_t k,
                          const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc)
{
    int st = smelt__blas_check(ctx);
    if (st)
        return st;
    const int64_t lim = 0x7fffffff;
    if (m > lim || n > lim || k > lim || lda > lim || ldb > lim || ldc > lim)
        return smelt__err(ctx, SMELT_ERR_UNSUPPORTED, "matmul: a matrix of more than 2^31 - 1 rows, columns or "
                          "elements per row (BLAS's 32-bit sizes)");
    /* subnormal operands read as zero (x86's DAZ, for this call only, as
     * XLA's CPU backend flushes them): each one costs the CPU a microcode
     * assist per product (GELU's tail before a product made OpenBLAS 6.6x
     * slower, 1880 against 284 ms for 2048 x 4096 by 4096 x 1024 with 1.6 %
     * of A subnormal, 2026-11-28).  A sum loses at most 2^-126 times the
     * other operand's element per subnormal (docs/numerics.md) */
    unsigned csr = smelt__daz_on();
    if (dt == SMELT_F64)
        blas.dgemm(ROW_MAJOR, ta ? TRANS : NO_TRANS, tb ? TRANS : NO_TRANS, (int)m, (int)n, (int)k, 1.0, a, (int)lda,
                   b, (int)ldb, beta, c, (int)ldc);
    else
        blas.sgemm(ROW_MAJOR, ta ? TRANS : NO_TRANS, tb ? TRANS : NO_TRANS, (int)m, (int)n, (int)k, 1.0f, a,
                   (int)lda, b, (int)ldb, (float)beta, c, (int)ldc);
    smelt__daz_restore(csr);
    return SMELT_OK;
}
