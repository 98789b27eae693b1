/* scripts/mathcheck-f32: smelt's f32 functions (templates/common/math.h.in,
 * through tests/mathlib.h) on every one of the 2^32 f32 bit patterns:
 *
 *   - the largest error in ULP of the correctly rounded result (subnormal
 *     spacing below the normal range, as tests/test-math.c measures it;
 *     "normal": where the result is not below 2^-126)
 *     against the f64 function of the same (exact) argument, itself within
 *     2 ULP of f64 (tests/test-math.c): 2^-28 ULP of f32, nothing here;
 *   - a NaN where the reference is a NaN and nowhere else, and the sign of
 *     every zero result (exp(-inf) = +0, silu(-0) = -0, ...);
 *   - how many results are more than 1 ULP off, and how many are not
 *     correctly rounded (more than 1/2 ULP off: the reference's own error,
 *     2^-28 ULP, can count a result within that of a midpoint either way);
 *   - a hash of all 2^32 results (every NaN as one: which NaN is not
 *     specified), so that two builds (the FMA instruction and its emulation
 *     in double, scripts/mathcheck-f32 compares them) can be checked for
 *     the same bits.
 *
 *   mathcheck-f32 [--threads N] [--only FUNCTION] [--hash-only]
 *
 * Every one-argument f32 function: each has code of its own, in f32 (exp,
 * expm1, tanh, sigmoid, silu, gelu_tanh, erf, log, log2, log10, log1p) or
 * in double; --only one of them.
 * exp_ok, sin_ok, cos_ok and tan_ok are exp, sin, cos and tan as a C
 * loop-form group computes them (src/codegen/emit-loop.c, c_group):
 * smelt_exp_f32_w ... over 128 arguments, then smelt_exp_f32 ... over them
 * again where one was outside the small range; each hash must be its
 * function's (checked when both run: --only exp_ok runs exp as well; the
 * line that says so starts with a capital, which scripts/mathcheck-f32
 * reads past). */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mathlib.h"

#define BOUND_F32 2.0
#define BLOCK 65536

/* each function's block loops, the calls inlined so that gcc vectorises
 * them as it does in kernels */
#define FNS(X)                                                                                                \
    X(exp) X(expm1) X(tanh) X(sigmoid) X(silu) X(gelu_tanh) X(exp2) X(log) X(log2) X(log10) X(log1p)          \
    X(sin) X(cos) X(tan) X(asin) X(acos) X(atan) X(sinh) X(cosh) X(asinh) X(acosh) X(atanh) X(erf)            \
    X(erfc) X(gelu) X(softplus)
#define LOOPS(n)                                                                                              \
    static void f32_##n(const float *restrict x, float *restrict y)                                           \
    {                                                                                                         \
        for (int i = 0; i < BLOCK; i++)                                                                       \
            y[i] = smelt_##n##_f32(x[i]);                                                                     \
    }                                                                                                         \
    static void f64_##n(const float *restrict x, double *restrict r)                                          \
    {                                                                                                         \
        for (int i = 0; i < BLOCK; i++)                                                                       \
            r[i] = smelt_##n##_f64((double)x[i]);                                                             \
    }
FNS(LOOPS)
#define OKS(X) X(exp) X(sin) X(cos) X(tan)
#define GROUPS(n)                                                                                             \
    static void f32_##n##_ok(const float *restrict x, float *restrict y) { SMELT_GROUPS(n, x, y, BLOCK) }
OKS(GROUPS)
typedef struct {
    const char *name;
    void (*f)(const float *restrict, float *restrict);
    void (*d)(const float *restrict, double *restrict);
} fn_t;
#define ENTRY(n) {#n, f32_##n, f64_##n},
#define OK_ENTRY(n) {#n "_ok", f32_##n##_ok, f64_##n},
static const fn_t fns[] = {FNS(ENTRY) OKS(OK_ENTRY)};
#define NFN ((int)(sizeof fns / sizeof fns[0]))
/* the function a group form checks (its name without "_ok"), or -1 */
static int ok_of(int f)
{
    size_t n = strlen(fns[f].name);
    for (int g = 0; g < NFN && n > 3 && !strcmp(fns[f].name + n - 3, "_ok"); g++)
        if (strlen(fns[g].name) == n - 3 && !strncmp(fns[g].name, fns[f].name, n - 3))
            return g;
    return -1;
}

/* |y - r| in ULP of r rounded to f32; a NaN where the other is not, or a
 * zero of the wrong sign, is infinitely wrong */
static double ulp_error(double r, float y)
{
    if (isnan(r) || isnan(y))
        return isnan(r) && isnan(y) ? 0 : INFINITY;
    float rt = (float)r;
    if (y == 0 && rt == 0)
        return !signbit(y) == !signbit(r) ? 0 : INFINITY;
    if (isinf(y) && y == rt)
        return 0;
    double yy = isinf(y) ? copysign(0x1p128, y) : y;
    double rr = isinf(r) ? copysign(0x1p128, r) : r;
    uint32_t eb;
    memcpy(&eb, &rt, sizeof eb);
    eb = (eb >> 23) & 0xff; /* the binade of rt (255: infinity, as 2^128, in the ulp of 2^127) */
    uint64_t ulp = (uint64_t)(1023 - 150 + (eb == 0 ? 1 : eb == 255 ? 254 : eb)) << 52;
    double u;
    memcpy(&u, &ulp, sizeof u);
    return fabs(yy - rr) / u;
}

typedef struct {
    const fn_t *fn;
    int id, nthreads, hash_only;
    double err, errn;      /* the largest error; where the result is normal (not below 2^-126) */
    uint32_t worst;        /* its argument's bits */
    unsigned long long n1; /* results more than 1 ULP off */
    unsigned long long nh; /* not correctly rounded: more than 1/2 ULP off */
    uint64_t hash;         /* of the results, in order of the blocks this thread did */
} job;

static void *run(void *p)
{
    job *j = p;
    float *x = malloc(BLOCK * sizeof *x), *y = malloc(BLOCK * sizeof *y);
    double *r = malloc(BLOCK * sizeof *r);
    j->err = j->errn = 0;
    j->hash = 0xcbf29ce484222325ull;
    for (uint64_t b = (uint64_t)j->id; b < (1ull << 32) / BLOCK; b += (uint64_t)j->nthreads) {
        for (uint32_t i = 0; i < BLOCK; i++) {
            uint32_t u = (uint32_t)(b * BLOCK + i);
            memcpy(&x[i], &u, sizeof u);
        }
        j->fn->f(x, y);
        for (int i = 0; i < BLOCK; i++) {
            uint32_t u = 0x7fc00000u; /* any NaN: which one is not specified (docs/numerics.md) */
            if (y[i] == y[i])
                memcpy(&u, &y[i], sizeof u);
            j->hash = (j->hash ^ u) * 0x100000001b3ull;
        }
        if (j->hash_only)
            continue;
        j->fn->d(x, r);
        for (int i = 0; i < BLOCK; i++) {
            double e = ulp_error(r[i], y[i]);
            j->n1 += e > 1.0;
            j->nh += e > 0.5;
            if (fabs(r[i]) >= 0x1p-126 && !(e <= j->errn))
                j->errn = e;
            if (!(e <= j->err)) {
                j->err = e;
                memcpy(&j->worst, &x[i], sizeof j->worst);
            }
        }
    }
    free(x);
    free(y);
    free(r);
    return NULL;
}

int main(int argc, char **argv)
{
    int nthreads = 2, hash_only = 0;
    const char *only = NULL;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--threads") && a + 1 < argc)
            nthreads = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--only") && a + 1 < argc)
            only = argv[++a];
        else if (!strcmp(argv[a], "--hash-only"))
            hash_only = 1;
        else {
            fprintf(stderr, "usage: mathcheck-f32 [--threads N] [--only FUNCTION] [--hash-only]\n");
            return 2;
        }
    }
    if (nthreads < 1 || nthreads > 64)
        nthreads = 2;
    int bad = 0, any = 0;
    uint64_t hashes[NFN] = {0};
    if (hash_only)
        printf("%-10s %16s\n", "function", "hash of results");
    else
        printf("%-10s %8s %-16s %8s %12s %12s %16s\n", "function", "max ULP", "worst input", "normal", ">1 ULP",
               ">1/2 ULP", "hash of results");
    for (int f = 0; f < NFN; f++) {
        int chosen = !only || !strcmp(only, fns[f].name);
        for (int g = 0; g < NFN && !chosen; g++) /* --only sin_ok runs sin too */
            chosen = ok_of(g) == f && !strcmp(only, fns[g].name);
        if (!chosen)
            continue;
        any = 1;
        job j[64];
        pthread_t t[64];
        for (int i = 0; i < nthreads; i++) {
            j[i] = (job){.fn = &fns[f], .id = i, .nthreads = nthreads, .hash_only = hash_only};
            pthread_create(&t[i], NULL, run, &j[i]);
        }
        double err = 0, errn = 0;
        uint32_t worst = 0;
        unsigned long long n1 = 0, nh = 0;
        uint64_t hash = 0;
        for (int i = 0; i < nthreads; i++) {
            pthread_join(t[i], NULL);
            if (j[i].err > err || (j[i].err == err && j[i].worst < worst))
                err = j[i].err, worst = j[i].worst;
            n1 += j[i].n1;
            nh += j[i].nh;
            errn = j[i].errn > errn ? j[i].errn : errn;
            hash = hash * 31 + j[i].hash;
        }
        hashes[f] = hash;
        if (hash_only) {
            printf("%-10s %016llx\n", fns[f].name, (unsigned long long)hash);
        } else {
            float wx;
            memcpy(&wx, &worst, sizeof wx);
            bad |= !(err <= BOUND_F32);
            printf("%-10s %8.3f %-16a %8.3f %12llu %12llu %016llx\n", fns[f].name, err, (double)wx, errn, n1, nh,
                   (unsigned long long)hash);
        }
        fflush(stdout);
    }
    if (!any) {
        fprintf(stderr, "mathcheck-f32: no function %s\n", only ? only : "");
        return 2;
    }
    for (int f = 0; f < NFN; f++) { /* exp and exp_ok ... */
        int g = ok_of(f);
        if (g < 0 || !hashes[f] || !hashes[g])
            continue;
        bad |= hashes[f] != hashes[g];
        printf("Groups of %s against %s: %s\n", fns[f].name, fns[g].name,
               hashes[f] == hashes[g] ? "the same bits on all 2^32 arguments" : "DIFFERENT bits");
    }
    if (!hash_only)
        printf("bound: %.0f ULP on all 2^32 arguments: %s\n", BOUND_F32, bad ? "EXCEEDED" : "met");
    return bad;
}
