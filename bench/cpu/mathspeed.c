/* bench/cpu/mathspeed: ns per element of smelt's f32 functions
 * (templates/common/math.h.in, through tests/mathlib.h: the code every tier
 * compiles) against SLEEF's vector functions of their accuracy class (u10:
 * within 1.0 ULP; erfc u15), one thread, an array of 4096 f32 in L1.  The
 * smelt loops are plain C loops that gcc vectorises as it does the CC tier's
 * kernels (this file is compiled with the CC tier's flags, -march=native);
 * SLEEF's are its AVX-512 (16 lanes) or AVX2 (8 lanes) functions over the
 * same array.  The composites (sigmoid, silu, gelu, gelu_tanh, softplus) are
 * written for SLEEF as a user would, from its exp, log1p, erf and tanh.
 *
 *   mathspeed [ROUNDS]     (default 5)
 *
 * Each function is timed in turn, ROUNDS times around the list; a time is
 * the fastest of 400 passes over the array (a shared machine's other work
 * only slows a pass down), and the table gives each function's fastest
 * round.  Without SLEEF (compiled without -DSMELT_SLEEF) only smelt's column. */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "../../tests/mathlib.h"

#ifdef SMELT_SLEEF
#include <immintrin.h>
#include <sleef.h>
#if defined(__AVX512F__)
#define VL 16
typedef __m512 vf;
#define VLOAD _mm512_loadu_ps
#define VSTORE _mm512_storeu_ps
#define VSET _mm512_set1_ps
#define VADD _mm512_add_ps
#define VSUB _mm512_sub_ps
#define VMUL _mm512_mul_ps
#define VDIV _mm512_div_ps
#define VMAX _mm512_max_ps
#define VABS _mm512_abs_ps
#define SL(f, u) Sleef_##f##f16_##u
#elif defined(__AVX2__)
#define VL 8
typedef __m256 vf;
#define VLOAD _mm256_loadu_ps
#define VSTORE _mm256_storeu_ps
#define VSET _mm256_set1_ps
#define VADD _mm256_add_ps
#define VSUB _mm256_sub_ps
#define VMUL _mm256_mul_ps
#define VDIV _mm256_div_ps
#define VMAX _mm256_max_ps
#define VABS(x) _mm256_andnot_ps(_mm256_set1_ps(-0.0f), (x))
#define SL(f, u) Sleef_##f##f8_##u
#else
#error "SLEEF's vector functions need AVX2 or AVX-512"
#endif
#endif

#define N 4096
static float xa[N], xb[N], y[N];

/* the argument ranges: standard normal, or uniform over an interval */
enum { NORMAL, LOGS, UNIT, ACOSH, POW };
static void fill(int kind)
{
    static unsigned long long s = 88172645463325252ull;
    for (int i = 0; i < N; i++) {
        double u[2];
        for (int k = 0; k < 2; k++) {
            s ^= s << 13, s ^= s >> 7, s ^= s << 17;
            u[k] = ((double)(s >> 11) + 0.5) / 9007199254740992.0;
        }
        double g = sqrt(-2.0 * log(u[0])) * cos(6.283185307179586 * u[1]);
        xa[i] = kind == NORMAL ? (float)g
              : kind == LOGS   ? (float)(0.001 + 0.999 * u[0])
              : kind == UNIT   ? (float)(1.98 * u[0] - 0.99)
              : kind == ACOSH  ? (float)(1.0 + fabs(g))
                               : (float)(0.001 + 0.999 * u[0]); /* pow: x in (0, 1], y normal */
        xb[i] = (float)g;
    }
}

#define S1(fn, expr)                                                                      \
    static __attribute__((noinline)) void s_##fn(void)                                    \
    {                                                                                     \
        for (int i = 0; i < N; i++) {                                                     \
            float x = xa[i];                                                              \
            y[i] = expr;                                                                  \
        }                                                                                 \
    }
/* the functions with a small-range form (exp, sin, cos, tan), as the CC
 * tier's groups compute them (SMELT_GROUPS, tests/mathlib.h) */
#define S1W(fn)                                                                           \
    static __attribute__((noinline)) void s_##fn(void) { SMELT_GROUPS(fn, xa, y, N) }
S1W(exp)
S1(expm1, smelt_expm1_f32(x))
S1(exp2, smelt_exp2_f32(x))
S1(log, smelt_log_f32(x))
S1(log2, smelt_log2_f32(x))
S1(log10, smelt_log10_f32(x))
S1(log1p, smelt_log1p_f32(x))
S1W(sin)
S1W(cos)
S1W(tan)
S1(asin, smelt_asin_f32(x))
S1(acos, smelt_acos_f32(x))
S1(atan, smelt_atan_f32(x))
S1(sinh, smelt_sinh_f32(x))
S1(cosh, smelt_cosh_f32(x))
S1(tanh, smelt_tanh_f32(x))
S1(asinh, smelt_asinh_f32(x))
S1(acosh, smelt_acosh_f32(x))
S1(atanh, smelt_atanh_f32(x))
S1(erf, smelt_erf_f32(x))
S1(erfc, smelt_erfc_f32(x))
S1(sigmoid, smelt_sigmoid_f32(x))
S1(silu, smelt_silu_f32(x))
S1(gelu, smelt_gelu_f32(x))
S1(gelu_tanh, smelt_gelu_tanh_f32(x))
S1(softplus, smelt_softplus_f32(x))
S1(pow, smelt_pow_f32(x, xb[i]))
S1(atan2, smelt_atan2_f32(xb[i], x))

#ifdef SMELT_SLEEF
#define V1(fn, expr)                                                                      \
    static __attribute__((noinline)) void v_##fn(void)                                    \
    {                                                                                     \
        for (int i = 0; i < N; i += VL) {                                                 \
            vf x = VLOAD(xa + i);                                                         \
            VSTORE(y + i, expr);                                                          \
        }                                                                                 \
    }
V1(exp, SL(exp, u10)(x))
V1(expm1, SL(expm1, u10)(x))
V1(exp2, SL(exp2, u10)(x))
V1(log, SL(log, u10)(x))
V1(log2, SL(log2, u10)(x))
V1(log10, SL(log10, u10)(x))
V1(log1p, SL(log1p, u10)(x))
V1(sin, SL(sin, u10)(x))
V1(cos, SL(cos, u10)(x))
V1(tan, SL(tan, u10)(x))
V1(asin, SL(asin, u10)(x))
V1(acos, SL(acos, u10)(x))
V1(atan, SL(atan, u10)(x))
V1(sinh, SL(sinh, u10)(x))
V1(cosh, SL(cosh, u10)(x))
V1(tanh, SL(tanh, u10)(x))
V1(asinh, SL(asinh, u10)(x))
V1(acosh, SL(acosh, u10)(x))
V1(atanh, SL(atanh, u10)(x))
V1(erf, SL(erf, u10)(x))
V1(erfc, SL(erfc, u15)(x))
V1(sigmoid, VDIV(VSET(1.0f), VADD(VSET(1.0f), SL(exp, u10)(VSUB(VSET(0.0f), x)))))
V1(silu, VDIV(x, VADD(VSET(1.0f), SL(exp, u10)(VSUB(VSET(0.0f), x)))))
V1(gelu, VMUL(VMUL(VSET(0.5f), x), VADD(VSET(1.0f), SL(erf, u10)(VMUL(x, VSET(0.70710678f))))))
V1(gelu_tanh, VMUL(VMUL(VSET(0.5f), x),
                   VADD(VSET(1.0f), SL(tanh, u10)(VMUL(VSET(0.7978845608f),
                                                       VADD(x, VMUL(VSET(0.044715f), VMUL(x, VMUL(x, x)))))))))
V1(softplus, VADD(VMAX(x, VSET(0.0f)), SL(log1p, u10)(SL(exp, u10)(VSUB(VSET(0.0f), VABS(x))))))
V1(pow, SL(pow, u10)(x, VLOAD(xb + i)))
V1(atan2, SL(atan2, u10)(VLOAD(xb + i), x))
#define VF(fn) v_##fn
#else
#define VF(fn) NULL
#endif

typedef struct {
    const char *name, *args, *sleef;
    int kind;
    void (*s)(void), (*v)(void);
    double ts, tv;
} fn_t;
#define F(fn, kind, args, cls) {#fn, args, cls, kind, s_##fn, VF(fn), 1e30, 1e30}
static fn_t fns[] = {
    F(exp, NORMAL, "N(0,1)", "u10"),       F(expm1, NORMAL, "N(0,1)", "u10"),
    F(exp2, NORMAL, "N(0,1)", "u10"),      F(log, LOGS, "(0.001,1]", "u10"),
    F(log2, LOGS, "(0.001,1]", "u10"),     F(log10, LOGS, "(0.001,1]", "u10"),
    F(log1p, LOGS, "(0.001,1]", "u10"),    F(sin, NORMAL, "N(0,1)", "u10"),
    F(cos, NORMAL, "N(0,1)", "u10"),       F(tan, NORMAL, "N(0,1)", "u10"),
    F(asin, UNIT, "(-0.99,0.99)", "u10"),  F(acos, UNIT, "(-0.99,0.99)", "u10"),
    F(atan, NORMAL, "N(0,1)", "u10"),      F(sinh, NORMAL, "N(0,1)", "u10"),
    F(cosh, NORMAL, "N(0,1)", "u10"),      F(tanh, NORMAL, "N(0,1)", "u10"),
    F(asinh, NORMAL, "N(0,1)", "u10"),     F(acosh, ACOSH, "1 + abs N(0,1)", "u10"),
    F(atanh, UNIT, "(-0.99,0.99)", "u10"), F(erf, NORMAL, "N(0,1)", "u10"),
    F(erfc, NORMAL, "N(0,1)", "u15"),      F(sigmoid, NORMAL, "N(0,1)", "u10 exp"),
    F(silu, NORMAL, "N(0,1)", "u10 exp"),  F(gelu, NORMAL, "N(0,1)", "u10 erf"),
    F(gelu_tanh, NORMAL, "N(0,1)", "u10 tanh"), F(softplus, NORMAL, "N(0,1)", "u10 exp, log1p"),
    F(pow, POW, "(0.001,1], N(0,1)", "u10"), F(atan2, NORMAL, "N(0,1), N(0,1)", "u10"),
};
#define NFN ((int)(sizeof fns / sizeof fns[0]))

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}
/* the fastest of 400 passes, in ns per element */
static double best(void (*f)(void))
{
    double b = 1e30;
    for (int r = 0; r < 400; r++) {
        double t0 = now();
        f();
        /* y escapes here: without it gcc proves the static array is never
         * read and drops smelt's loops (SLEEF's intrinsic stores kept it) */
        __asm__ volatile("" : : "r"(y) : "memory");
        double t = (now() - t0) / N * 1e9;
        b = t < b ? t : b;
    }
    return b;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 5;
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < NFN; i++) {
            fill(fns[i].kind);
            double t = best(fns[i].s);
            fns[i].ts = t < fns[i].ts ? t : fns[i].ts;
            if (fns[i].v) {
                t = best(fns[i].v);
                fns[i].tv = t < fns[i].tv ? t : fns[i].tv;
            }
        }
    printf("| function | arguments | smelt (ns) | SLEEF (ns) | SLEEF's class | smelt / SLEEF |\n");
    printf("|---|---|---:|---:|---|---:|\n");
    for (int i = 0; i < NFN; i++) {
        if (fns[i].v)
            printf("| %s | %s | %.3f | %.3f | %s | %.2f |\n", fns[i].name, fns[i].args, fns[i].ts, fns[i].tv,
                   fns[i].sleef, fns[i].ts / fns[i].tv);
        else
            printf("| %s | %s | %.3f | | | |\n", fns[i].name, fns[i].args, fns[i].ts);
    }
    return 0;
}
