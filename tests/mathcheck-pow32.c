/* scripts/mathcheck-pow32: smelt's f32 pow (templates/common/math.h.in,
 * through tests/mathlib.h) on random argument pairs of several kinds, and
 * on every f32 x for the exponents with a rule of their own:
 *
 *   - per kind of pair, the largest error in ULP against glibc's pow in
 *     double (within 1 ULP of double: 2^-29 ULP of f32), or for an integer
 *     exponent against x^n in __float128 (113 bits, at most 15 roundings),
 *     how many results are more than 1 ULP off and how many not correctly
 *     rounded (more than 1/2 ULP + 2^-20 off), a NaN where the reference is
 *     a NaN and nowhere else, the sign of zeros and infinities;
 *   - on all 2^32 x: pow(x, 2) = x * x, pow(x, -1) = 1 / x, pow(x, 0.5) =
 *     sqrt(x) (+0 for -0, +inf for -inf), pow(x, 1) = x, pow(x, +-0) = 1,
 *     bit for bit; the ties x^n = a midpoint between floats (x = a 2^e, a
 *     odd, a^n of 25 bits, n = 2..15, every such a) rounded to even;
 *   - a hash of every result (every NaN as one), so that two builds (the
 *     FMA instruction and its emulation in double, scripts/mathcheck-pow32
 *     compares them) can be checked for the same bits.
 *
 *   mathcheck-pow32 [--threads N] [--millions M] [--hash-only]
 *
 * M million pairs of each kind (default 16).  Exit status 1 when a result is
 * more than 1 ULP off, a rule or a tie is broken, or a NaN or a sign is
 * wrong. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mathlib.h"

#define BLOCK 65536
enum { ANY, UNIT, THRESH, NEGINT, NEAR1, TINY, SMALLINT, SMALLINT_RANGE, BENCH, NKIND };
static const char *kind_name[NKIND] = {"any bits", "(0,10) x (-50,50)", "y log x near limits", "-(0,40) ^ int",
                                       "1+d ^ t/d", "tiny ^ (-2,2)", "any ^ -15..15", "in range ^ -15..15",
                                       "(0.001,1] ^ N(0,1)"};

typedef struct {
    uint64_t s;
} rng;
static uint64_t next(rng *r)
{
    r->s ^= r->s << 13, r->s ^= r->s >> 7, r->s ^= r->s << 17;
    return r->s * 0x2545f4914f6cdd1dull;
}
static double unif(rng *r, double a, double b) { return a + (b - a) * (double)(next(r) >> 11) * 0x1p-53; }
static float bits32(rng *r) { return smelt_f32_bits((uint32_t)(next(r) >> 32)); }
static int irange(rng *r, int a, int b) { return a + (int)(next(r) % (uint64_t)(b - a + 1)); }
static double gauss(rng *r)
{
    double u = unif(r, 0x1p-53, 1), v = unif(r, 0, 1);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

static void pair(int kind, rng *r, float *x, float *y)
{
    switch (kind) {
    case ANY:
        *x = bits32(r), *y = bits32(r);
        return;
    case UNIT:
        *x = (float)unif(r, 0, 10), *y = (float)unif(r, -50, 50);
        return;
    case THRESH: { /* y log2|x| next to 128, -126, -149, -150 */
        static const double t[] = {128, -126, -149, -150, -149.5, 127.99};
        float a = fabsf(bits32(r));
        a = a == 0 || !isfinite(a) || a == 1 ? 3.0f : a;
        *x = next(r) & 1 ? -a : a;
        *y = (float)((t[next(r) % 6] + unif(r, -1e-4, 1e-4)) / log2(a));
        return;
    }
    case NEGINT:
        *x = -(float)unif(r, 0, 40), *y = (float)irange(r, -30, 30);
        return;
    case NEAR1: {
        double d = (next(r) & 1 ? 1 : -1) * ldexp(unif(r, 1, 2), -irange(r, 1, 23));
        *x = (float)(1 + d), *y = (float)(unif(r, -120, 120) / d);
        return;
    }
    case TINY:
        *x = (float)ldexp(unif(r, 1, 2), -irange(r, 1, 150)), *y = (float)unif(r, -2, 2);
        return;
    case SMALLINT:
        *x = bits32(r), *y = (float)irange(r, -15, 15);
        return;
    case SMALLINT_RANGE: { /* |x|^n within the float range */
        int n = irange(r, -15, 15), m = n < 0 ? -n : n;
        *x = (float)((next(r) & 1 ? -1 : 1) * exp2(unif(r, -149.0, 128.0) / (m ? m : 1)));
        *y = (float)n;
        return;
    }
    default:
        *x = (float)unif(r, 0.001, 1), *y = (float)gauss(r);
        return;
    }
}

/* |y - r| in ULP of r rounded to f32 (subnormal spacing below 2^-126,
 * infinity as 2^128); a NaN where the other is not, or a zero or infinity
 * of the wrong sign, is infinitely wrong */
static double ulp_error(double r, float y)
{
    if (isnan(r) || isnan(y))
        return isnan(r) && isnan(y) ? 0 : INFINITY;
    float rt = (float)r;
    if ((y == 0 && rt == 0) || (isinf(y) && isinf(rt)))
        return !signbit(y) == !signbit(r) ? 0 : INFINITY;
    double yy = isinf(y) ? copysign(0x1p128, y) : y, rr = isinf(r) ? copysign(0x1p128, r) : r;
    int e = rt == 0 ? -149 : ilogbf(fabsf(rt)) - 23;
    e = isinf(rt) ? 127 - 23 : e < -149 ? -149 : e;
    return fabs(yy - rr) / ldexp(1.0, e);
}
/* x^n for an integer |n| <= 30 in __float128 (113 bits, at most 15
 * roundings), rounded to double: the reference for integer exponents */
static double ref_int(float x, int n)
{
    __float128 b = n < 0 ? 1 / (__float128)x : (__float128)x, p = 1;
    for (int m = n < 0 ? -n : n; m; m >>= 1, b *= b)
        if (m & 1)
            p *= b;
    return (double)p;
}

typedef struct {
    int kind, id, nthreads, hash_only;
    long blocks;
    double err;
    float wx, wy;
    unsigned long long n1, nh, nan_bad;
    uint64_t hash;
} job;

static void pow_block(const float *restrict x, const float *restrict y, float *restrict z)
{
    for (int i = 0; i < BLOCK; i++)
        z[i] = smelt_pow_f32(x[i], y[i]);
}
static uint64_t hash_add(uint64_t h, float v)
{
    uint32_t u = 0x7fc00000u;
    if (v == v)
        memcpy(&u, &v, sizeof u);
    return (h ^ u) * 0x100000001b3ull;
}

static void *run(void *p)
{
    job *j = p;
    float *x = malloc(BLOCK * sizeof *x), *y = malloc(BLOCK * sizeof *y), *z = malloc(BLOCK * sizeof *z);
    j->hash = 0xcbf29ce484222325ull;
    for (long b = j->id; b < j->blocks; b += j->nthreads) {
        rng r = {0x9e3779b97f4a7c15ull * (uint64_t)(b * NKIND + j->kind + 1) | 1};
        for (int i = 0; i < BLOCK; i++)
            pair(j->kind, &r, &x[i], &y[i]);
        pow_block(x, y, z);
        for (int i = 0; i < BLOCK; i++)
            j->hash = hash_add(j->hash, z[i]);
        if (j->hash_only)
            continue;
        for (int i = 0; i < BLOCK; i++) {
            double e, ref;
            int n = fabsf(y[i]) <= 30 ? (int)y[i] : 99;
            if (y[i] == (float)n && isfinite(x[i]) && x[i] != 0)
                ref = ref_int(x[i], n);
            else
                ref = pow((double)x[i], (double)y[i]);
            e = ulp_error(ref, z[i]);
            j->nan_bad += isnan(ref) != isnan(z[i]) || e == INFINITY;
            j->n1 += e > 1.0;
            /* not correctly rounded: off by more than half an ULP, beyond the reference's own error */
            j->nh += e > 0.5 + 0x1p-20;
            if (!(e <= j->err))
                j->err = e, j->wx = x[i], j->wy = y[i];
        }
    }
    free(x), free(y), free(z);
    return NULL;
}

/* every f32 x: the exponents with rules of their own */
typedef struct {
    int id, nthreads;
    unsigned long long bad[5];
    uint64_t hash;
} rjob;
static void *run_rules(void *p)
{
    rjob *j = p;
    float *x = malloc(BLOCK * sizeof *x), *y = malloc(BLOCK * sizeof *y), *z = malloc(BLOCK * sizeof *z);
    static const float ys[5] = {2.0f, -1.0f, 0.5f, 1.0f, 0.0f};
    j->hash = 0xcbf29ce484222325ull;
    for (uint64_t b = (uint64_t)j->id; b < (1ull << 32) / BLOCK; b += (uint64_t)j->nthreads)
        for (int k = 0; k < 5; k++) {
            for (uint32_t i = 0; i < BLOCK; i++)
                x[i] = smelt_f32_bits((uint32_t)(b * BLOCK + i)), y[i] = (k == 4 && (i & 1)) ? -0.0f : ys[k];
            pow_block(x, y, z);
            for (int i = 0; i < BLOCK; i++) {
                float v = x[i], w = k == 0 ? v * v : k == 1 ? 1.0f / v : k == 2 ? (v == -INFINITY ? INFINITY : sqrtf(v) + 0.0f)
                                                   : k == 3 ? v : 1.0f;
                j->bad[k] += isnan(w) ? !isnan(z[i]) : memcmp(&w, &z[i], sizeof w) != 0;
                j->hash = hash_add(j->hash, z[i]);
            }
        }
    free(x), free(y), free(z);
    return NULL;
}

/* x^n a midpoint between floats: a odd, a^n of 25 bits (every such a for
 * n = 2..15), times 2^e (e random, the result normal) and either sign */
static unsigned long long ties(uint64_t *hash, unsigned long long *count)
{
    unsigned long long bad = 0;
    rng r = {0x243f6a8885a308d3ull};
    for (int n = 2; n <= 15; n++)
        for (uint64_t a = 3;; a += 2) {
            unsigned __int128 v = 1;
            for (int i = 0; i < n; i++)
                v *= a;
            if (v >= (unsigned __int128)1 << 25)
                break;
            if (v < (unsigned __int128)1 << 24)
                continue;
            int lo = (int)ceil((-126.0 - 24.0) / n), hi = (int)floor((127.0 - 24.0) / n);
            for (int t = 0; t < 8; t++) {
                int e = irange(&r, lo, hi);
                float x = ldexpf((float)a, e) * (t & 1 ? -1.0f : 1.0f), got = smelt_pow_f32(x, (float)n);
                /* the tie rounded to even: v's two neighbours, v - 1 and v + 1, one has a 0 last bit of 24 */
                uint64_t even = (uint64_t)v + (((uint64_t)v >> 1) & 1 ? 1 : -1);
                float want = ldexpf((float)even, e * n) * ((t & 1) && (n & 1) ? -1.0f : 1.0f);
                bad += memcmp(&got, &want, sizeof got) != 0;
                if (memcmp(&got, &want, sizeof got) && bad <= 5)
                    printf("tie: pow(%a, %d) = %a, want %a\n", x, n, got, want);
                *hash = hash_add(*hash, got);
                ++*count;
            }
        }
    return bad;
}

int main(int argc, char **argv)
{
    int nthreads = 2, hash_only = 0;
    long millions = 16;
    for (int a = 1; a < argc; a++) {
        if (!strcmp(argv[a], "--threads") && a + 1 < argc)
            nthreads = atoi(argv[++a]);
        else if (!strcmp(argv[a], "--millions") && a + 1 < argc)
            millions = atol(argv[++a]);
        else if (!strcmp(argv[a], "--hash-only"))
            hash_only = 1;
        else {
            fprintf(stderr, "usage: mathcheck-pow32 [--threads N] [--millions M] [--hash-only]\n");
            return 2;
        }
    }
    nthreads = nthreads < 1 || nthreads > 64 ? 2 : nthreads;
    long blocks = (millions * 1000000 + BLOCK - 1) / BLOCK;
    int bad = 0;
    if (!hash_only)
        printf("%-22s %10s %8s %-30s %10s %10s %16s\n", "pairs", "points", "max ULP", "worst (x, y)", ">1 ULP",
               ">1/2 ULP", "hash of results");
    for (int k = 0; k < NKIND; k++) {
        job j[64];
        pthread_t t[64];
        for (int i = 0; i < nthreads; i++) {
            j[i] = (job){.kind = k, .id = i, .nthreads = nthreads, .hash_only = hash_only, .blocks = blocks};
            pthread_create(&t[i], NULL, run, &j[i]);
        }
        job s = {0};
        for (int i = 0; i < nthreads; i++) {
            pthread_join(t[i], NULL);
            if (j[i].err > s.err)
                s.err = j[i].err, s.wx = j[i].wx, s.wy = j[i].wy;
            s.n1 += j[i].n1, s.nh += j[i].nh, s.nan_bad += j[i].nan_bad;
            s.hash = s.hash * 31 + j[i].hash;
        }
        if (hash_only)
            printf("%-22s %016llx\n", kind_name[k], (unsigned long long)s.hash);
        else {
            char w[64];
            snprintf(w, sizeof w, "(%a, %a)", s.wx, s.wy);
            printf("%-22s %10ld %8.6f %-30s %10llu %10llu %016llx\n", kind_name[k], blocks * BLOCK, s.err, w, s.n1,
                   s.nh, (unsigned long long)s.hash);
            bad |= s.n1 > 0 || s.nan_bad > 0;
        }
    }
    uint64_t th = 0xcbf29ce484222325ull;
    unsigned long long nt = 0, tb = ties(&th, &nt);
    if (hash_only) { /* the rules' results come from f32 selects and the products, no FMA */
        printf("%-22s %016llx\n", "ties", (unsigned long long)th);
        return 0;
    }
    rjob rj[64];
    pthread_t t[64];
    for (int i = 0; i < nthreads; i++) {
        rj[i] = (rjob){.id = i, .nthreads = nthreads};
        pthread_create(&t[i], NULL, run_rules, &rj[i]);
    }
    unsigned long long rb[5] = {0};
    uint64_t rh = 0;
    for (int i = 0; i < nthreads; i++) {
        pthread_join(t[i], NULL);
        for (int k = 0; k < 5; k++)
            rb[k] += rj[i].bad[k];
        rh = rh * 31 + rj[i].hash;
    }
    {
        printf("every f32 x, results other than the rule's: y = 2: %llu, -1: %llu, 0.5: %llu, 1: %llu, +-0: %llu "
               "(hash %016llx)\n",
               rb[0], rb[1], rb[2], rb[3], rb[4], (unsigned long long)rh);
        printf("ties x^n (n = 2..15) not rounded to even: %llu of %llu (hash %016llx)\n", tb, nt,
               (unsigned long long)th);
        bad |= rb[0] || rb[1] || rb[2] || rb[3] || rb[4] || tb;
    }
    return bad;
}
