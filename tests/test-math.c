/* smelt's own math library (templates/common/math.h.in), tested as the very
 * code the kernels and constant folding compile (included here through
 * tests/mathlib.h):
 *
 *   - accuracy: every function, f64 and f32, within its bound in ULP of the
 *     correctly rounded value (long double libm, 11 extra bits for f64, as
 *     the reference), on deterministic points drawn over the whole domain:
 *     random bit patterns (every exponent, so the huge-argument reduction of
 *     sin/cos/tan too), uniform over the interesting range, values near 0
 *     (subnormals included) and next to thresholds, poles and branch points;
 *   - special values (C99 Annex F, what NumPy returns): ±0, ±inf, NaN and the
 *     domain edges, bitwise equal to glibc's double and float functions (a
 *     NaN only has to be a NaN); pow's and atan2's whole tables; the
 *     composites' limits (silu, gelu, gelu_tanh of -inf are -0).
 *
 * Compiled with -DSMELT_MATHCHECK this file is instead scripts/mathcheck: the
 * same measurement on more points (--points N), printed as a table
 * (docs/numerics.md quotes it). */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mathlib.h"

/* the asserted bounds, in ULP (measured: docs/numerics.md): f64 2; f32 1
 * for the functions computed in double and rounded once and for exp,
 * expm1, erf and the logarithms (log, log2, log10, log1p), 2 for those
 * computed in f32 with two roundings (tanh, sigmoid,
 * silu, gelu_tanh: scripts/mathcheck-f32 measures them on every f32) */
#define BOUND_F64 2.0
#define BOUND_F32 1.0
#define BOUND_F32_TWO_ROUNDINGS 2.0
#define TEST_POINTS 100000

/* ---- references in long double --------------------------------------- */
typedef long double (*ref1)(long double);
typedef long double (*ref2)(long double, long double);

static long double r_sigmoid(long double x) { return 1.0L / (1.0L + expl(-x)); }
static long double r_silu(long double x) { return isinf(x) && x < 0 ? -0.0L : x / (1.0L + expl(-x)); }
static long double r_softplus(long double x) { return (x > 0 ? x : 0) + log1pl(expl(-fabsl(x))); }
/* 0.5 x erfc(-x / sqrt(2)): the argument as hi + lo, first-order corrected
 * (its rounding alone would cost up to ~0.4 ULP of f64 in the tail) */
static long double r_gelu(long double x)
{
    const long double rh = 0xb504f333f9de6484p-64L, rl = 0xb2fb1366ea957d3ep-129L; /* 1/sqrt(2) */
    const long double k = 0x906eba8214db688dp-63L;                                   /* 2/sqrt(pi) */
    if (isinf(x))
        return x > 0 ? x : -0.0L;
    long double th = -x * rh, tl = fmal(-x, rh, -th) - x * rl;
    return 0.5L * x * (erfcl(th) - tl * k * expl(-th * th));
}
/* x / (1 + e^-2z), z = sqrt(2/pi) (x + c x^3), c the double nearest 0.044715:
 * 2z as hi + lo (fma residuals), as the definition's double-double */
static long double r_gelu_tanh(long double x)
{
    const long double kh = 0xcc42299ea1b28468p-63L, kl = 0xfcb3c500bab8e2ffp-128L; /* 2 sqrt(2/pi) */
    const long double c = 0.044715;
    if (isinf(x))
        return x > 0 ? x : -0.0L;
    long double p = x * x, pe = fmal(x, x, -p);
    long double q = p * x, qe = fmal(p, x, -q) + pe * x;
    long double t = c * q, te = fmal(c, q, -t) + c * qe;
    long double s = x + t, sb = s - x, se = (x - (s - sb)) + (t - sb) + te; /* Knuth's two-sum */
    long double u = s * kh, ue = fmal(s, kh, -u) + s * kl + se * kh;
    return x / (1.0L + expl(-u) * (1.0L - ue));
}

/* ---- the functions ----------------------------------------------------- */
/* Each function: f64 and f32 versions, the reference, the range a uniform
 * draw covers and the points next to which the edge draw lands (f64 and f32:
 * overflow and underflow thresholds, poles, branch points of the code). */
#define NEDGE 8
struct fn {
    const char *name;
    double (*d)(double);
    float (*f)(float);
    ref1 ref;
    double lo, hi;
    double e64[NEDGE], e32[NEDGE]; /* 0 ends a list (0 itself: the tiny draw) */
    double (*d2)(double, double);
    float (*f2)(float, float);
    ref2 ref2;
};
#define F1(n, a, b, ...) {#n, smelt_##n##_f64, smelt_##n##_f32, n##l, a, b, __VA_ARGS__, NULL, NULL, NULL}
#define C1(n, a, b, ...) {#n, smelt_##n##_f64, smelt_##n##_f32, r_##n, a, b, __VA_ARGS__, NULL, NULL, NULL}
#define F2(n) {#n, NULL, NULL, NULL, 0, 0, {0}, {0}, smelt_##n##_f64, smelt_##n##_f32, n##l}
#define E(...) {__VA_ARGS__}
#define PIO2 0x1.921fb54442d18p+0
static const struct fn fns[] = {
    F1(exp, -750, 710, E(0x1.62e42fefa39efp+9, -0x1.74385446d71c3p+9, -0x1.6232bdd7abcd2p+9, 1),
       E(0x1.62e43p+6, -0x1.9fe368p+6, -0x1.5d589ep+6, 1)),
    F1(exp2, -1080, 1025, E(1024, -1074, -1022, -1075, 1), E(128, -149, -126, -150, 1)),
    F1(expm1, -40, 710, E(0x1.62e42fefa39efp+9, -37.5, 0x1.62e42fefa39efp-2, 1), E(0x1.62e43p+6, -17, 0.34657359f)),
    F1(log, 0, 1e300, E(1, 0x1p-1022, DBL_MAX, 0x1.6a09e667f3bcdp-1, 2),
       E(1, 0x1p-126, FLT_MAX, 0x1.6a09e6p-1, 2, 0x1.6a09e6p+0, 1e-40f, 0x1.665692p+0)),
    F1(log2, 0, 1e300, E(1, 0x1p-1022, DBL_MAX, 0x1.6a09e667f3bcdp-1, 2),
       E(1, 0x1p-126, FLT_MAX, 0x1.6a09e6p-1, 2, 0x1.6a09e6p+0, 1e-40f, 0x1.661e7ap+0)),
    F1(log10, 0, 1e300, E(1, 0x1p-1022, DBL_MAX, 10, 0.1),
       E(1, 0x1p-126, FLT_MAX, 10, 0.1f, 0x1.6a09e6p+0, 1e-40f, 0x1.5200b4p+0)),
    F1(log1p, -1, 1e300, E(-1, 0x1.6a09e667f3bcdp-2, -0x1.2bec333018867p-2, 1, DBL_MAX),
       E(-1, 0.41421357f, -0.29289323f, 1, -0.5f, 0x1p24f, FLT_MAX, -0x1.34882ap-2f)),
    F1(sin, -1e6, 1e6, E(PIO2, 2 * PIO2, 3 * PIO2, 0x1p20, 1e22, 0x1.6ac5b262ca1ffp+849, DBL_MAX, 0x1.6c6cbc45dc8dep+27),
       E(0x1.921fb6p+0, 0x1.921fb6p+1, 0x1.2d97c8p+2, 0x1p20f, 1e22f, FLT_MAX, 0x1.47ae14p+2)),
    F1(cos, -1e6, 1e6, E(PIO2, 2 * PIO2, 3 * PIO2, 0x1p20, 1e22, 0x1.6ac5b262ca1ffp+849, DBL_MAX, 0x1.6c6cbc45dc8dep+27),
       E(0x1.921fb6p+0, 0x1.921fb6p+1, 0x1.2d97c8p+2, 0x1p20f, 1e22f, FLT_MAX, 0x1.47ae14p+2)),
    F1(tan, -1e6, 1e6, E(PIO2, 2 * PIO2, 3 * PIO2, 0x1p20, 1e22, 0x1.6ac5b262ca1ffp+849, DBL_MAX, 0x1.6c6cbc45dc8dep+27),
       E(0x1.921fb6p+0, 0x1.921fb6p+1, 0x1.2d97c8p+2, 0x1p20f, 1e22f, FLT_MAX, 0x1.47ae14p+2)),
    F1(asin, -1, 1, E(1, -1, 0.5, -0.5, 0.975, -0.975), E(1, -1, 0.5, -0.5, 0.975f)),
    F1(acos, -1, 1, E(1, -1, 0.5, -0.5, 0.975, -0.975), E(1, -1, 0.5, -0.5, 0.975f)),
    F1(atan, -1e3, 1e3, E(0.4375, 0.6875, 1.1875, 2.4375, 0x1p66, -1), E(0.4375, 0.6875, 1.1875, 2.4375, -1)),
    F1(sinh, -711, 711, E(0x1.633ce8fb9f87dp+9, -0x1.633ce8fb9f87dp+9, 22, 0x1p-28), E(0x1.65a9fap+6, -0x1.65a9fap+6, 9, 22)),
    F1(cosh, -711, 711, E(0x1.633ce8fb9f87dp+9, -0x1.633ce8fb9f87dp+9, 22, 0x1.62e42fefa39efp-2), E(0x1.65a9fap+6, 9, 22, 0.5)),
    F1(tanh, -25, 25, E(22, -22, 1, -1, 0.55), E(9, 20, 1, -1, 0.55f)),
    F1(asinh, -1e10, 1e10, E(2, -2, 0x1p28, 0x1p-28, DBL_MAX), E(2, -2, 0x1p28f, 0x1p-28f, FLT_MAX)),
    F1(acosh, 1, 1e10, E(1, 2, 0x1p28, DBL_MAX), E(1, 2, 0x1p28f, FLT_MAX)),
    F1(atanh, -1, 1, E(1, -1, 0.5, -0.5), E(1, -1, 0.5, -0.5)),
    F1(erf, -7, 7, E(0.84375, -0.84375, 1.6, 2.6, 4, 6, 6.5, -6), E(0.75f, -0.75f, 2, -2, 0x1.f5a88ap+1f, -0x1.f5a88ap+1f, 1.2f, 2.77f)),
    F1(erfc, -7, 28, E(0.84375, -0.84375, 0.25, 1.6, 2.6, 4, 6.5, 27.25), E(0.25, 10.1f, 10.05f, -3.9f, 4, 6.5, 0.84375, -0.84375)),
    C1(sigmoid, -750, 750, E(-40, 40, -0x1.74385446d71c3p+9, 37), E(-40, 17, -0x1.9fe368p+6, -0x1.5d589ep+6)),
    C1(silu, -750, 750, E(-40, -0x1.74385446d71c3p+9, -800, 37), E(-40, -0x1.9fe368p+6, -200, 17)),
    C1(gelu, -40, 40, E(-38.5, 60, -60, 1.1932427, -1.1932427, -0x1.2p+5), E(-14.4f, -14, -13, 10, 1.1932427f, -1.1932427f, 5.5f)),
    C1(gelu_tanh, -30, 30, E(-60, 40, -20, -10, 1e100), E(-100, 10, -7, -5.418f)),
    C1(softplus, -750, 750, E(-0x1.74385446d71c3p+9, 36, 700, -36), E(-0x1.9fe368p+6, 17, -17, 88)),
    F2(pow),
    F2(atan2),
};
#define NFN ((int)(sizeof fns / sizeof fns[0]))
static double bound(const struct fn *f, int p)
{
    static const char *const two[] = {"tanh", "sigmoid", "silu", "gelu_tanh"};
    if (!p)
        return BOUND_F64;
    for (size_t i = 0; i < sizeof two / sizeof two[0]; i++)
        if (!strcmp(f->name, two[i]))
            return BOUND_F32_TWO_ROUNDINGS;
    return BOUND_F32;
}

/* ---- deterministic points --------------------------------------------- */
typedef struct {
    uint64_t s;
} rng;
static uint64_t next(rng *r) /* xorshift64* */
{
    r->s ^= r->s >> 12;
    r->s ^= r->s << 25;
    r->s ^= r->s >> 27;
    return r->s * 0x2545f4914f6cdd1dull;
}
static double unif(rng *r, double a, double b) { return a + (b - a) * ((double)(next(r) >> 11) * 0x1p-53); }
static int irange(rng *r, int a, int b) { return a + (int)(next(r) % (uint64_t)(b - a + 1)); }
static double sgn(rng *r) { return next(r) >> 63 ? -1.0 : 1.0; }
static double any64(rng *r) /* every finite double alike, bit pattern uniform */
{
    double d;
    do
        d = smelt_f64_bits(next(r));
    while (!isfinite(d));
    return d;
}
static double any32(rng *r)
{
    float f;
    do {
        uint32_t u = (uint32_t)(next(r) >> 32);
        memcpy(&f, &u, sizeof f);
    } while (!isfinite(f));
    return f;
}
/* m 2^e, m in [1, 2), e uniform in [emin, emax]: subnormals where e < -1022 */
static double tiny(rng *r, int emin, int emax) { return sgn(r) * ldexp(unif(r, 1, 2), irange(r, emin, emax)); }
/* next to c: c (1 + d), |d| = 2^-k u, k up to 60, or c itself */
static double near(rng *r, double c)
{
    if (next(r) % 16 == 0)
        return c;
    return c * (1.0 + sgn(r) * ldexp(unif(r, 0, 1), -irange(r, 1, 60)));
}

/* point number k of function f in precision p (0 f64, 1 f32) */
static double point(const struct fn *f, int p, rng *r, long k)
{
    const double *e = p ? f->e32 : f->e64;
    int ne = 0;
    while (ne < NEDGE && e[ne] != 0)
        ne++;
    switch (k % 4) {
    case 0:
        return p ? any32(r) : any64(r);
    case 1:
        return unif(r, f->lo, f->hi);
    case 2:
        return p ? tiny(r, -150, 0) : tiny(r, -1080, 0);
    default:
        return ne ? near(r, e[next(r) % (uint64_t)ne]) : unif(r, f->lo, f->hi);
    }
}
/* pow's points: x^y over the whole table, y log x next to the overflow and
 * underflow thresholds, negative bases with integer exponents, any base with
 * a small integer exponent, x near 1 */
static void point_pow(int p, rng *r, long k, double *x, double *y)
{
    double lim = p ? 88.72 : 709.78, ulim = p ? -103.97 : -745.13;
    switch (k % 7) {
    case 0:
        *x = p ? any32(r) : any64(r);
        *y = p ? any32(r) : any64(r);
        return;
    case 6: /* any base, a small integer exponent (f32: by repeated squaring) */
        *x = p ? any32(r) : any64(r);
        *y = irange(r, -16, 16);
        return;
    case 1:
        *x = unif(r, 0, 10);
        *y = unif(r, -50, 50);
        return;
    case 2: { /* y log x next to the thresholds */
        *x = fabs(p ? any32(r) : any64(r));
        double l = log(*x), t = near(r, next(r) & 1 ? lim : ulim);
        *y = l == 0 || !isfinite(l) ? 1.0 : t / l;
        return;
    }
    case 3: /* negative base, integer exponent */
        *x = -unif(r, 0, 40);
        *y = irange(r, p ? -30 : -200, p ? 30 : 200);
        return;
    case 4: { /* x = 1 + d, y = t / d */
        double d = sgn(r) * ldexp(unif(r, 1, 2), -irange(r, 1, p ? 23 : 52));
        *x = 1 + d;
        *y = unif(r, -700, 700) / d;
        return;
    }
    default:
        *x = tiny(r, p ? -150 : -1080, 0);
        *y = unif(r, -2, 2);
        return;
    }
}
static void point_atan2(int p, rng *r, long k, double *y, double *x)
{
    switch (k % 4) {
    case 0:
        *y = p ? any32(r) : any64(r);
        *x = p ? any32(r) : any64(r);
        return;
    case 1:
        *y = unif(r, -10, 10);
        *x = unif(r, -10, 10);
        return;
    case 2: /* |y/x| next to the reduction's breakpoints, either sign of x */
        *x = sgn(r) * ldexp(unif(r, 1, 2), irange(r, p ? -100 : -900, p ? 100 : 900));
        *y = sgn(r) * fabs(*x) * near(r, (const double[]){0.4375, 0.6875, 1.1875, 2.4375, 1}[next(r) % 5]);
        return;
    default:
        *y = p ? tiny(r, -150, 0) : tiny(r, -1080, 0);
        *x = unif(r, -2, 2);
        return;
    }
}

/* ---- error in ULP ----------------------------------------------------- */
/* |y - r| in units of the last place of r rounded to the format (p = 53 or
 * 24 bits, subnormal spacing at the bottom; infinity as 2^emax+1 against a
 * finite value); a NaN where the other is not is infinitely wrong */
static double ulp_error(long double r, long double y, int p)
{
    if (isnan(r) || isnan(y))
        return isnan(r) && isnan(y) ? 0 : INFINITY;
    long double big = p == 53 ? 0x1p1024L : 0x1p128L;
    long double rt = p == 53 ? (long double)(double)r : (long double)(float)r;
    if (isinf(y) && isinf(rt) && (y > 0) == (rt > 0))
        return 0;
    y = isinf(y) ? copysignl(big, y) : y;
    r = isinf(r) ? copysignl(big, r) : r;
    rt = isinf(rt) ? copysignl(big / 2, rt) : rt;
    int emin = p == 53 ? -1074 : -149;
    int e = rt == 0 ? emin : ilogbl(rt) - p + 1;
    return (double)(fabsl(y - r) / ldexpl(1.0L, e < emin ? emin : e));
}

struct worst {
    long points;
    double err, x, y; /* the largest error and its input */
};
/* the largest error of function i in precision p on n points */
static struct worst measure(int i, int p, long n)
{
    const struct fn *f = &fns[i];
    rng r = {0x9e3779b97f4a7c15ull * (uint64_t)(2 * i + p + 1)};
    struct worst w = {0, -1, 0, 0};
    for (long k = 0; k < n; k++) {
        double x, y = 0, e;
        if (f->d2) {
            (f->d2 == smelt_pow_f64 ? point_pow : point_atan2)(p, &r, k, &x, &y);
            if (p) {
                float xf = (float)x, yf = (float)y;
                x = xf, y = yf;
                e = ulp_error(f->ref2(xf, yf), f->f2(xf, yf), 24);
            } else
                e = ulp_error(f->ref2(x, y), f->d2(x, y), 53);
        } else {
            x = point(f, p, &r, k);
            if (p) {
                float xf = (float)x;
                x = xf;
                e = ulp_error(f->ref(xf), f->f(xf), 24);
            } else
                e = ulp_error(f->ref(x), f->d(x), 53);
        }
        w.points++;
        if (!(e <= w.err)) {
            w.err = e;
            w.x = x;
            w.y = y;
        }
    }
    return w;
}

#ifdef SMELT_MATHCHECK
/* ---- scripts/mathcheck ------------------------------------------------ */
int main(int argc, char **argv)
{
    long n = 1000000;
    const char *only = NULL;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--points") && a + 1 < argc)
            n = atol(argv[++a]);
        else if (!strcmp(argv[a], "--only") && a + 1 < argc)
            only = argv[++a];
        else {
            fprintf(stderr, "usage: mathcheck [--points N] [--only FUNCTION]\n");
            return 2;
        }
    }
    int bad = 0;
    printf("%-10s %-4s %9s %8s  %s\n", "function", "prec", "points", "max ULP", "worst input");
    for (int i = 0; i < NFN; i++) {
        if (only && strcmp(only, fns[i].name))
            continue;
        for (int p = 0; p < 2; p++) {
            struct worst w = measure(i, p, n);
            bad |= !(w.err <= bound(&fns[i], p));
            if (fns[i].d2)
                printf("%-10s %-4s %9ld %8.3f  (%a, %a)\n", fns[i].name, p ? "f32" : "f64", w.points, w.err, w.x, w.y);
            else
                printf("%-10s %-4s %9ld %8.3f  %a\n", fns[i].name, p ? "f32" : "f64", w.points, w.err, w.x);
        }
        fflush(stdout);
    }
    printf("bounds: %.0f ULP (f64), %.0f ULP (f32; %.0f for tanh, sigmoid, silu, gelu_tanh): %s\n", BOUND_F64,
           BOUND_F32, BOUND_F32_TWO_ROUNDINGS, bad ? "EXCEEDED" : "met");
    return bad;
}
#else
/* ---- the Criterion suite ---------------------------------------------- */
#include <criterion/criterion.h>
#include <criterion/parameterized.h>

ParameterizedTestParameters(math, within_bound)
{
    static int idx[NFN];
    for (int i = 0; i < NFN; i++)
        idx[i] = i;
    return cr_make_param_array(int, idx, NFN);
}
ParameterizedTest(int *i, math, within_bound)
{
    for (int p = 0; p < 2; p++) {
        struct worst w = measure(*i, p, TEST_POINTS);
        double b = bound(&fns[*i], p);
        cr_assert_eq(w.points, TEST_POINTS);
        cr_expect(w.err >= 0 && w.err <= b, "%s %s: %.3f ULP at x = %a (y = %a), bound %.0f", fns[*i].name,
                  p ? "f32" : "f64", w.err, w.x, w.y, b);
    }
}

/* the error measure itself: a value 1 ULP off is 1 ULP off, in every
 * binade, subnormals and the overflow threshold included */
Test(math, ulp_measure)
{
    cr_assert_eq(ulp_error(1.0L, 1.0L, 53), 0);
    cr_assert_eq(ulp_error(1.0L, nextafter(1.0, 2.0), 53), 1);
    cr_assert_eq(ulp_error(1.0L, nextafter(1.0, 0.0), 53), 0.5);
    cr_assert_eq(ulp_error(0x1p-1074L, 0x1p-1073L, 53), 1);
    cr_assert_eq(ulp_error(0.0L, 0x1p-149L, 24), 1);
    cr_assert_eq(ulp_error(DBL_MAX, INFINITY, 53), 1);
    cr_assert_eq(ulp_error(1.5L, 1.5L + 0x1p-22L, 24), 2);
    cr_assert_eq(ulp_error(NAN, 1.0L, 53), INFINITY);
    cr_assert_eq(ulp_error(NAN, NAN, 24), 0);
}

/* ---- special values ----------------------------------------------------- */
static int same64(double a, double b) { return (isnan(a) && isnan(b)) || smelt_bits_f64(a) == smelt_bits_f64(b); }
static int same32(float a, float b) { return (isnan(a) && isnan(b)) || (isnan(a) == isnan(b) && !memcmp(&a, &b, sizeof a)); }

static int nfail;
static void check64(const char *fn, double x, double y, double got, double want)
{
    if (same64(got, want))
        return;
    nfail++;
    cr_log_error("%s f64 (%a, %a): got %a (%016llx), C99/glibc %a (%016llx)", fn, x, y, got,
                 (unsigned long long)smelt_bits_f64(got), want, (unsigned long long)smelt_bits_f64(want));
}
static void check32(const char *fn, float x, float y, float got, float want)
{
    if (same32(got, want))
        return;
    nfail++;
    cr_log_error("%s f32 (%a, %a): got %a, C99/glibc %a", fn, (double)x, (double)y, (double)got, (double)want);
}

/* the libm functions: smelt_<fn>_f64/f32 against glibc's <fn> and <fn>f */
#define G1(n) {#n, smelt_##n##_f64, smelt_##n##_f32, n, n##f}
static const struct {
    const char *name;
    double (*d)(double);
    float (*f)(float);
    double (*gd)(double);
    float (*gf)(float);
} libm1[] = {
    G1(exp), G1(exp2), G1(expm1), G1(log), G1(log2), G1(log10), G1(log1p), G1(sin), G1(cos), G1(tan), G1(asin),
    G1(acos), G1(atan), G1(sinh), G1(cosh), G1(tanh), G1(asinh), G1(acosh), G1(atanh), G1(erf), G1(erfc),
};

/* inputs whose results C99 (or exact rounding of a constant) fixes: zeros,
 * infinities, NaNs, domain edges, overflow and underflow, tiny arguments
 * where f(x) rounds to x or to 1 */
static const double specials[] = {
    0.0, -0.0, INFINITY, -INFINITY, NAN, -NAN, 1, -1, 2, -2, 0.5, -0.5, 10, 100, 1000, -1000, 30, -30,
    6, -6, 710, -746, 1024, -1074, -1076, 2000, -2000, 1e-300, -1e-300, 1e-40, -1e-40, 0x1p-1074, -0x1p-1074,
    1e300, -1e300, 0x1p1023, 0x1p-1022,
};
/* which of them each function's result is exact (or a C99 constant) for */
static int exact_for(const char *fn, double x)
{
    double ax = fabs(x);
    if (isnan(x) || isinf(x) || x == 0)
        return 1;
    if (ax <= 1e-40) { /* rounds to x, 1 or pi/2, or a C99 pole or NaN; erf(x) = 2x/sqrt(pi) is not exact */
        if (!strncmp(fn, "log", 3) && strcmp(fn, "log1p"))
            return x < 0;
        return strcmp(fn, "erf") != 0;
    }
    if (!strcmp(fn, "exp"))
        return ax >= 710;
    if (!strcmp(fn, "exp2"))
        return x == (double)(long)x && ax <= 2000;
    if (!strcmp(fn, "expm1"))
        return x <= -40 || x >= 710;
    if (!strcmp(fn, "log"))
        return x < 0 || x == 1;
    if (!strcmp(fn, "log2"))
        return x < 0 || frexp(x, &(int){0}) == 0.5;
    if (!strcmp(fn, "log10"))
        return x < 0 || x == 1 || x == 10 || x == 100 || x == 1000;
    if (!strcmp(fn, "log1p"))
        return x <= -1;
    if (!strcmp(fn, "asin") || !strcmp(fn, "acos") || !strcmp(fn, "atanh"))
        return ax >= 1;
    if (!strcmp(fn, "atan"))
        return ax >= 1e300 || ax == 1;
    if (!strcmp(fn, "sinh") || !strcmp(fn, "cosh"))
        return ax >= 1000;
    if (!strcmp(fn, "tanh"))
        return ax >= 30;
    if (!strcmp(fn, "acosh"))
        return x <= 1;
    if (!strcmp(fn, "erf"))
        return ax >= 6;
    if (!strcmp(fn, "erfc"))
        return x >= 30 || x <= -6;
    return 0;
}

Test(math, special_values_libm)
{
    int checks = 0;
    nfail = 0;
    for (size_t i = 0; i < sizeof libm1 / sizeof libm1[0]; i++)
        for (size_t j = 0; j < sizeof specials / sizeof specials[0]; j++) {
            double x = specials[j];
            if (!exact_for(libm1[i].name, x))
                continue;
            check64(libm1[i].name, x, 0, libm1[i].d(x), libm1[i].gd(x));
            float xf = (float)x;
            check32(libm1[i].name, xf, 0, libm1[i].f(xf), libm1[i].gf(xf));
            checks += 2;
        }
    cr_assert_gt(checks, 400);
    cr_assert_eq(nfail, 0, "%d special values differ from C99 (glibc), listed above", nfail);
}

/* the spelled-out C99 values the issue names, independent of glibc */
Test(math, special_values_c99)
{
    cr_assert(same64(smelt_exp_f64(-0.0), 1.0));
    cr_assert(same64(smelt_expm1_f64(-0.0), -0.0));
    cr_assert(same64(smelt_log1p_f64(-0.0), -0.0));
    cr_assert(same64(smelt_sin_f64(-0.0), -0.0));
    cr_assert(same64(smelt_tan_f64(-0.0), -0.0));
    cr_assert(same64(smelt_log_f64(0.0), -INFINITY));
    cr_assert(same64(smelt_log_f64(-0.0), -INFINITY));
    cr_assert(isnan(smelt_log_f64(-1.0)));
    /* the f32 logarithms (in f32 arithmetic, templates/common/math.h.in) */
    cr_assert(same32(smelt_log_f32(0.0f), -INFINITY));
    cr_assert(same32(smelt_log2_f32(-0.0f), -INFINITY));
    cr_assert(same32(smelt_log10_f32(0x1p-149f), -0x1.66d3e8p+5f));
    cr_assert(isnan(smelt_log_f32(-0x1p-149f)) && isnan(smelt_log10_f32(-INFINITY)));
    cr_assert(same32(smelt_log1p_f32(-0.0f), -0.0f) && same32(smelt_log1p_f32(-1.0f), -INFINITY));
    cr_assert(same32(smelt_log1p_f32(-0x1p-149f), -0x1p-149f) && same32(smelt_log1p_f32(0x1p-30f), 0x1p-30f));
    cr_assert(isnan(smelt_log1p_f32(-1.0000001f)) && same32(smelt_log1p_f32(INFINITY), INFINITY));
    for (int k = -149; k <= 127; k++) /* k exactly */
        cr_assert(same32(smelt_log2_f32(ldexpf(1.0f, k)), (float)k), "log2(2^%d)", k);
    float p = 1.0f, q = 1.0f;
    /* n exactly: 10^n is a float up to 10^10; q is 10^-n within a few ulp,
     * whose log10 still rounds to -n */
    for (int n = 0; n <= 10; n++, p *= 10.0f, q /= 10.0f)
        cr_assert(same32(smelt_log10_f32(p), (float)n) && same32(smelt_log10_f32(q), (float)-n), "log10(1e%d)", n);
    cr_assert(same64(smelt_erfc_f64(-INFINITY), 2.0));
    cr_assert(same64(smelt_tanh_f64(-INFINITY), -1.0));
    cr_assert(isnan(smelt_acosh_f64(0.5)));
    cr_assert(same64(smelt_atanh_f64(-1.0), -INFINITY));
    cr_assert(same64(smelt_pow_f64(NAN, -0.0), 1.0));
    cr_assert(same64(smelt_pow_f64(1.0, NAN), 1.0));
    cr_assert(same64(smelt_pow_f64(-1.0, -INFINITY), 1.0));
    cr_assert(same64(smelt_pow_f64(-0.0, -3.0), -INFINITY));
    cr_assert(isnan(smelt_pow_f64(-2.0, 0.5)));
    cr_assert(same32(smelt_pow_f32(-0.0f, -3.0f), -INFINITY));
    /* 2^-150 is the tie between 0 and the least subnormal: even, so +0 (or
     * -0), which a computed 2^-150 (1 + 1e-16) would miss; 2^-149 exact */
    cr_assert(same32(smelt_exp2_f32(-150.0f), 0.0f));
    cr_assert(same32(smelt_exp2_f32(-149.0f), 0x1p-149f));
    cr_assert(same32(smelt_pow_f32(2.0f, -150.0f), 0.0f));
    cr_assert(same32(smelt_pow_f32(0.5f, 150.0f), 0.0f));
    cr_assert(same32(smelt_pow_f32(8.0f, -50.0f), 0.0f));
    cr_assert(same32(smelt_pow_f32(0x1p-100f, 1.5f), 0.0f));
    cr_assert(same32(smelt_pow_f32(-0x1p-50f, 3.0f), -0.0f));
    cr_assert(same32(smelt_pow_f32(-0.5f, 149.0f), -0x1p-149f));
    cr_assert(same32(smelt_pow_f32(4.0f, 63.5f), 0x1p127f));
    cr_assert(same32(smelt_atanh_f32(1.0f), INFINITY));
    cr_assert(same32(smelt_expm1_f32(-0.0f), -0.0f));
}

/* pow's and atan2's whole tables: every pair of these, against glibc (the
 * finite results chosen exact: powers of 2 and 4, half-integer exponents of 4) */
static const double pow_x[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1, -1, 4, -4, 0.25, -0.25, 0x1p-1074, -0x1p-1074, 2, -2};
static const double pow_y[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1, -1, 2, -2, 3, -3, 0.5, -0.5, 1.5, -1.5, 2.5,
                               9007199254740991.0, -9007199254740991.0, 1e300, -1e300, 1024, -1075, 0x1p-1074};
static int pow_exact(double x, double y)
{
    return !(x == 2 && isfinite(y) && y != floor(y)); /* 2^(k/2) is not exact */
}
/* every pair (a[i], b[j]) that keep() accepts, smelt against glibc in f64
 * and f32; returns the number of checks */
static int table2(const char *fn, const double *a, size_t na, const double *b, size_t nb, double (*d)(double, double),
                  float (*f)(float, float), double (*gd)(double, double), float (*gf)(float, float),
                  int (*keep)(double, double))
{
    int checks = 0;
    for (size_t i = 0; i < na; i++)
        for (size_t j = 0; j < nb; j++) {
            double x = a[i], y = b[j];
            float xf = (float)x, yf = (float)y;
            if (keep && !keep(x, y))
                continue;
            check64(fn, x, y, d(x, y), gd(x, y));
            check32(fn, xf, yf, f(xf, yf), gf(xf, yf));
            checks += 2;
        }
    return checks;
}
Test(math, special_values_pow)
{
    nfail = 0;
    int checks = table2("pow", pow_x, sizeof pow_x / sizeof pow_x[0], pow_y, sizeof pow_y / sizeof pow_y[0],
                        smelt_pow_f64, smelt_pow_f32, pow, powf, pow_exact);
    cr_assert_gt(checks, 500);
    cr_assert_eq(nfail, 0, "%d pow values differ from C99 (glibc), listed above", nfail);
}
Test(math, special_values_atan2)
{
    static const double v[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1, -1, 0x1p-1074, -0x1p-1074, DBL_MAX, -DBL_MAX};
    nfail = 0;
    int checks = table2("atan2", v, sizeof v / sizeof v[0], v, sizeof v / sizeof v[0], smelt_atan2_f64,
                        smelt_atan2_f32, atan2, atan2f, NULL);
    cr_assert_eq(checks, 242);
    cr_assert_eq(nfail, 0, "%d atan2 values differ from C99 (glibc), listed above", nfail);
}

/* the exponents NumPy computes as square, reciprocal, sqrt and a copy: pow
 * gives exactly their bits (the graph pass rewrites x ** 2 and x ** -1 on
 * that promise), on random doubles of every binade, on doubles of 27
 * significant bits (x^2 a midpoint between doubles: a pow rounded from a
 * wider value may round it the other way) and on the special values */
static int pow_cheap_ok64(double x)
{
    double r = x == -INFINITY ? INFINITY : sqrt(x) + 0.0;
    return same64(smelt_pow_f64(x, 2.0), x * x) && same64(smelt_pow_f64(x, -1.0), 1.0 / x) &&
           same64(smelt_pow_f64(x, 0.5), r) && same64(smelt_pow_f64(x, 1.0), x);
}
static int pow_cheap_ok32(float x)
{
    float r = x == -INFINITY ? INFINITY : sqrtf(x) + 0.0f;
    return same32(smelt_pow_f32(x, 2.0f), x * x) && same32(smelt_pow_f32(x, -1.0f), 1.0f / x) &&
           same32(smelt_pow_f32(x, 0.5f), r) && same32(smelt_pow_f32(x, 1.0f), x);
}
Test(math, pow_of_two_minus_one_half_and_one)
{
    static const double spec[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1, -1, 0x1p-1074, -0x1p-1074, DBL_MAX,
                                  -DBL_MAX, 0x1p-1022, 3, -3, 0x1p511, 0x1p-538};
    rng r = {0x9e3779b97f4a7c15ull};
    int bad64 = 0, bad32 = 0;
    for (size_t i = 0; i < sizeof spec / sizeof *spec; i++)
        bad64 += !pow_cheap_ok64(spec[i]), bad32 += !pow_cheap_ok32((float)spec[i]);
    for (int i = 0; i < 200000; i++) {
        uint64_t u = next(&r);
        double x = smelt_f64_bits(u);
        if (i & 1) /* 27 significant bits, exponent within +-100 */
            x = ldexp((double)((u >> 37) | 1u << 26), (int)(u % 201) - 126) * (u >> 63 ? -1 : 1);
        bad64 += !pow_cheap_ok64(x);
        bad32 += !pow_cheap_ok32(smelt_f32_bits((uint32_t)(u >> 17)));
    }
    cr_assert_eq(bad64, 0, "f64: %d arguments where pow(x, 2 | -1 | 0.5 | 1) is not x*x, 1/x, sqrt(x), x", bad64);
    cr_assert_eq(bad32, 0, "f32: %d arguments where pow(x, 2 | -1 | 0.5 | 1) is not x*x, 1/x, sqrt(x), x", bad32);
}

/* smelt__fmaf is a * b + c rounded once: built here for baseline x86-64
 * (no FMA instruction), so its emulation in double is what runs, checked
 * bitwise against glibc's fmaf (correctly rounded, in hardware or not) on
 * special values, random operands, sums that cancel to a product's
 * rounding error, and sums a hair from a midpoint between two floats
 * (where rounding twice, to double and then to float, goes wrong) */
static int fmaf_bad(float a, float b, float c)
{
    float got = smelt__fmaf(a, b, c), want = fmaf(a, b, c);
    if (isnan(want) ? !isnan(got) : !same32(got, want)) {
        if (nfail++ < 10)
            fprintf(stderr, "fmaf(%a, %a, %a): %a, correctly rounded %a\n", a, b, c, got, want);
        return 1;
    }
    return 0;
}
Test(math, fmaf_correctly_rounded)
{
    static const float spec[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 1, -1, 0x1p-149f, -0x1p-149f, FLT_MAX,
                                 -FLT_MAX, 0x1p-126f, 3, 0x1.fffffep-1f, 0x1p64f, 0x1p-75f};
    const int ns = (int)(sizeof spec / sizeof *spec);
    rng r = {0x243f6a8885a308d3ull};
    int bad = 0;
    nfail = 0;
    for (int i = 0; i < ns * ns * ns; i++)
        bad += fmaf_bad(spec[i % ns], spec[i / ns % ns], spec[i / (ns * ns)]);
    for (int i = 0; i < 1000000; i++) {
        float a = (float)any32(&r), b = (float)any32(&r), c = (float)any32(&r);
        if (i % 4 == 1) /* a product of moderate size and an addend near it */
            a = (float)unif(&r, -4, 4), b = (float)tiny(&r, -60, 60), c = (float)tiny(&r, -62, 62);
        else if (i % 4 == 2) /* the product's rounding error, or that plus a few ulp */
            c = -(a * b) * (float)(1 + irange(&r, -2, 2) * 0x1p-23);
        else if (i % 4 == 3) { /* c + a*b a hair from a midpoint between two floats, closer than
                                  * double's precision: a*b = +-h (1 - j^2 2^-46), h = c's half ulp */
            int j = irange(&r, 1, 100), e = irange(&r, -100, 100), s = irange(&r, -20, 20);
            c = (float)(sgn(&r) * ldexp(unif(&r, 1, 2), e));
            a = ldexpf(1 + (float)j * 0x1p-23f, s);
            b = (float)(sgn(&r) * ldexp(1 - j * 0x1p-23, e - 24 - s));
        }
        bad += fmaf_bad(a, b, c);
    }
    cr_assert_eq(bad, 0, "%d of %d fused multiply-adds rounded wrongly, listed above", bad, ns * ns * ns + 1000000);
}

/* smelt_divr_f32, a device row program's division by the row's scalar
 * through its reciprocal: wherever it says it holds, the division's bits.
 * Every dividend significand (2^23, a random sign and exponent each) over
 * divisors with the significands nearest 1 and 2 and random ones, at random
 * exponents; the range's edges; the values it must leave to the division. */
static float f32_of(uint32_t u) { return smelt_f32_bits(u); }
Test(math, division_through_the_reciprocal)
{
    rng r = {0x9e3779b97f4a7c15ull};
    const uint32_t sig[] = {0, 1, 2, 0x7fffff, 0x7ffffe, 0x400000, 0x2aaaab, 0x555555};
    long checked = 0, bad = 0;
    for (int t = 0; t < 12; t++) {
        uint32_t bm = t < 8 ? sig[t] : (uint32_t)(next(&r) & 0x7fffff);
        int eb = irange(&r, -100, 99);
        float b = f32_of((uint32_t)(eb + 127) << 23 | bm) * (float)sgn(&r);
        cr_assert(smelt_divr_ok(b), "%a", b);
        for (uint32_t am = 0; am < 0x800000u; am++) {
            int ea = eb + irange(&r, -90, 90);
            ea = ea < -100 ? -100 : ea > 126 ? 126 : ea;
            float a = f32_of((uint32_t)(ea + 127) << 23 | am) * (float)sgn(&r), want = a / b;
            int ok = 1;
            float got = smelt_divr_f32(a, b, &ok);
            checked += ok;
            if (ok && memcmp(&got, &want, sizeof got) && bad++ < 10)
                cr_log_error("%a / %a: %a, the division %a", a, b, got, want);
        }
    }
    cr_assert_eq(bad, 0, "%ld of %ld quotients differ from the division", bad, checked);
    cr_assert_gt(checked, 12L * 0x800000 * 9 / 10, "the fast path took only %ld", checked);
    /* the range: |b| in [2^-100, 2^100]; |a| in [max(2^-100, |b| 2^-98), min(2^126, |b| 2^98)] */
    const float out_b[] = {0x1p-101f, 0x1.fffffep-101f, 0x1.000002p100f, 0x1p-149f, 0.0f, -0.0f, INFINITY, NAN};
    for (size_t i = 0; i < sizeof out_b / sizeof *out_b; i++)
        cr_assert(!smelt_divr_ok(out_b[i]) && !smelt_divr_ok(-out_b[i]), "%a", out_b[i]);
    cr_assert(smelt_divr_ok(0x1p-100f) && smelt_divr_ok(-0x1p100f));
    const struct {
        float b, a;
        int ok;
    } edge[] = {{1.0f, 0x1p-98f, 1}, {1.0f, 0x1.fffffep-99f, 0}, {1.0f, 0x1p98f, 1}, {1.0f, 0x1.000002p98f, 0},
                {0x1p-100f, 0x1p-100f, 1}, {0x1p-100f, 0x1.fffffep-101f, 0}, {0x1p-100f, 0x1p-2f, 1},
                {0x1p-100f, 0x1.000002p-2f, 0}, {0x1p100f, 0x1p126f, 1}, {0x1p100f, 0x1.000002p126f, 0},
                {0x1p100f, 0x1p2f, 1}, {0x1p100f, 0x1.fffffep1f, 0}, {3.0f, 0.0f, 2}, {0x1p-100f, 0.0f, 2},
                {3.0f, 0x1p-149f, 0}, {3.0f, INFINITY, 0}, {3.0f, -INFINITY, 0}, {3.0f, NAN, 0}};
    for (size_t i = 0; i < sizeof edge / sizeof *edge; i++)
        for (int sg = 0; sg < 4; sg++) {
            float a = sg & 1 ? -edge[i].a : edge[i].a, b = sg & 2 ? -edge[i].b : edge[i].b, want = a / b;
            int ok = 1;
            float got = smelt_divr_f32(a, b, &ok);
            /* 2: a zero, +0 taken (its quotient's sign is z's), -0 not (q + r z would give +0) */
            cr_assert_eq(ok, edge[i].ok == 2 ? !(sg & 1) : edge[i].ok, "%a / %a: ok %d", a, b, ok);
            cr_assert(!ok || !memcmp(&got, &want, sizeof got), "%a / %a: %a, the division %a", a, b, got, want);
            ok = 0; /* stays 0 */
            smelt_divr_f32(a, b, &ok);
            cr_assert_eq(ok, 0);
        }
}

/* smelt_exp_f32_w, the C loop form's exp where k = rint(x / ln 2) lies in
 * [-126, 127]: there smelt_exp_f32's bits, and the range kept in *w (at
 * most SMELT_W_MAX inside, more outside).  Every 251st f32 of [-90, 90]
 * with both signs' ends and the binades' edges (about 9 million): each in
 * [-87, 88] in the range, none outside [-87.7, 88.4], every one in the
 * range with smelt_exp_f32's bits; then the special values.
 * scripts/mathcheck-f32 --only exp_ok checks all 2^32 as groups do. */
Test(math, exp_in_range_same_bits)
{
    long checked = 0, bad = 0;
    float lo = 0, hi = 0; /* the range seen */
    for (int side = 0; side < 2; side++) { /* [-90, -0] and [+0, 90], by bit patterns */
        uint32_t top = smelt_bits_f32(90.0f);
        for (uint32_t u = 0; u <= top; u += u < 4096 || top - u < 64 || (u & 0x7fffff) < 64 ? 1 : 251) {
            float x = f32_of(u | (side ? 0u : 0x80000000u)), want = smelt_exp_f32(x);
            uint32_t w = 0;
            float got = smelt_exp_f32_w(x, &w);
            if (w > SMELT_W_MAX) {
                cr_assert(x < -87.0f || x > 88.0f, "%a: left the range", x);
                continue;
            }
            cr_assert(x >= -87.7f && x <= 88.4f, "%a: taken as in the range", x);
            lo = x < lo ? x : lo, hi = x > hi ? x : hi;
            checked++;
            if (memcmp(&got, &want, sizeof got) && bad++ < 10)
                cr_log_error("exp(%a): %a, smelt_exp_f32 %a", x, got, want);
        }
    }
    cr_assert_eq(bad, 0, "%ld of %ld results differ from smelt_exp_f32", bad, checked);
    cr_assert_gt(checked, 8000000L);
    cr_log_info("smelt_exp_f32_w's range: [%a, %a] (%g, %g)", lo, hi, lo, hi);
    const float out[] = {-87.75f, 88.5f, 89.0f, -104.0f, -1e30f, 1e30f, INFINITY, -INFINITY, NAN, -NAN};
    for (size_t i = 0; i < sizeof out / sizeof *out; i++) {
        uint32_t w = 0;
        smelt_exp_f32_w(out[i], &w);
        cr_assert_gt(w, SMELT_W_MAX, "%a: taken as in the range", out[i]);
        w = 0xffffffffu;
        smelt_exp_f32_w(-1.0f, &w); /* stays */
        cr_assert_eq(w, 0xffffffffu);
    }
}

/* the composites (no C99 entry): their limits, from the definitions */
Test(math, special_values_composites)
{
    static const double x[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1000, -1000, DBL_MAX};
#define LN2 0x1.62e42fefa39efp-1
    static const struct {
        const char *name;
        double (*d)(double);
        float (*f)(float);
        double want[8];
    } t[] = {
        {"sigmoid", smelt_sigmoid_f64, smelt_sigmoid_f32, {0.5, 0.5, 1, 0.0, NAN, 1, 0.0, 1}},
        {"silu", smelt_silu_f64, smelt_silu_f32, {0.0, -0.0, INFINITY, -0.0, NAN, 1000, -0.0, DBL_MAX}},
        {"gelu", smelt_gelu_f64, smelt_gelu_f32, {0.0, -0.0, INFINITY, -0.0, NAN, 1000, -0.0, DBL_MAX}},
        {"gelu_tanh", smelt_gelu_tanh_f64, smelt_gelu_tanh_f32, {0.0, -0.0, INFINITY, -0.0, NAN, 1000, -0.0, DBL_MAX}},
        {"softplus", smelt_softplus_f64, smelt_softplus_f32, {LN2, LN2, INFINITY, 0.0, NAN, 1000, 0.0, DBL_MAX}},
    };
    nfail = 0;
    for (size_t i = 0; i < sizeof t / sizeof t[0]; i++)
        for (size_t j = 0; j < sizeof x / sizeof x[0]; j++) {
            check64(t[i].name, x[j], 0, t[i].d(x[j]), t[i].want[j]);
            /* f32: DBL_MAX becomes inf, as its result does; log 2 rounds once */
            check32(t[i].name, (float)x[j], 0, t[i].f((float)x[j]), (float)t[i].want[j]);
        }
    cr_assert_eq(nfail, 0, "%d composite limits wrong, listed above", nfail);
}
#endif
