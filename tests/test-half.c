/* f16 (IEEE binary16) and bf16 (bfloat16): storage types computed in f32.
 *
 * Every operator on f16/bf16 against the float64 reference is in
 * tests/test-ops.c (its loops cover every dtype), casts between all dtype
 * pairs too.  Here, checked against this file's own conversions (common.c:
 * t_round_half, t_half_bits, t_half_value, written independently of the
 * library's bit manipulation):
 *
 *   - every f16 and bf16 bit pattern reads as its value and survives a
 *     round trip through f32;
 *   - rounding to f16/bf16 from f32, f64 and the integers: ties to even,
 *     overflow to infinity (f16 at 65520), subnormals, one rounding (never
 *     through f32 first), on both CPU tiers;
 *   - special values through the operators (NaN, +-inf, -0.0, overflow,
 *     subnormal results), kernels and reference alike;
 *   - fused == unfused, bitwise, for chains mixing f16, bf16 and f32;
 *   - the TCC and CC tiers agree bitwise on arithmetic (NaN payloads aside);
 *   - constant folding rounds as the kernels do.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

static const char *const tiers[] = {"TCC", "CC"};

/* A context on backend, or NULL when this machine cannot use it (no C
 * compiler for CC): the check is then left out. */
static smelt_ctx *tier_ctx(const char *backend)
{
    smelt_ctx *ctx = t_ctx_raw();
    if (smelt_backend_check(ctx, backend) != SMELT_OK) {
        smelt_ctx_free(ctx);
        return NULL;
    }
    T_OK(ctx, smelt_ctx_set_backend(ctx, backend));
    return ctx;
}

static uint16_t bits_at(const smelt_tensor *t, int64_t i) { return *(const uint16_t *)t_elem(t, i); }

static bool same_half(uint16_t a, uint16_t b, smelt_dtype dt)
{
    double x = t_half_value(dt, a), y = t_half_value(dt, b);
    return a == b || (isnan(x) && isnan(y));
}

/* ---- bit patterns ------------------------------------------------------------------- */

Test(half, every_bit_pattern)
{
    smelt_ctx *ctx = t_ctx();
    for (int d = SMELT_F16; d <= SMELT_BF16; d++) {
        smelt_dtype dt = (smelt_dtype)d;
        smelt_graph *g = t_graph(ctx);
        smelt_node *x = smelt_input(g, NULL, dt, SHP(65536));
        smelt_node *f = smelt_cast(g, x, SMELT_F32);
        smelt_node *outs[] = {f, smelt_cast(g, f, dt), smelt_cast(g, smelt_cast(g, x, SMELT_F64), dt)};
        smelt_tensor *in = t_tensor(ctx, dt, SHP(65536));
        for (int i = 0; i < 65536; i++)
            ((uint16_t *)smelt_tensor_data(in))[i] = (uint16_t)i;
        smelt_plan *p = t_plan(ctx, g, 3, outs, 3);
        smelt_tensor *got[3] = {0};
        t_run(p, 1, &in, 3, got);
        for (int i = 0; i < 65536; i++) {
            double want = t_half_value(dt, (uint16_t)i), v = smelt_tensor_get(in, i);
            float k = ((const float *)smelt_tensor_data(got[0]))[i];
            bool nan = isnan(want);
            cr_assert(nan ? isnan(v) : (v == want && !signbit(v) == !signbit(want)),
                      "%s %#06x reads as %g, not %g", smelt_dtype_name(dt), i, v, want);
            cr_assert(nan ? isnan(k) : ((double)k == want && !signbit(k) == !signbit(want)),
                      "%s %#06x -> f32 gives %g, not %g", smelt_dtype_name(dt), i, (double)k, want);
            for (int o = 1; o < 3; o++) /* back, through f32 and through f64: the same bits */
                cr_assert(nan ? isnan(smelt_tensor_get(got[o], i)) : bits_at(got[o], i) == i,
                          "%s %#06x round trip %d gives %#06x", smelt_dtype_name(dt), i, o, bits_at(got[o], i));
        }
        t_free_all(got, 3);
        smelt_tensor_free(in);
        smelt_plan_free(p);
        smelt_graph_free(g);
    }
    smelt_ctx_free(ctx);
}

/* ---- rounding into f16 / bf16 ----------------------------------------------------------- */

/* Values around every rounding hazard of dt, then random ones. */
static int64_t hazards(smelt_dtype dt, trng *r, double *v, int64_t n)
{
    int64_t k = 0;
    int p = dt == SMELT_F16 ? 11 : 8, emin = dt == SMELT_F16 ? -14 : -126;
    double max = t_half_max(dt), ulp_max = ldexp(1.0, (dt == SMELT_F16 ? 15 : 127) - (p - 1));
    double tiny = ldexp(1.0, emin - (p - 1)); /* the smallest subnormal */
    double fixed[] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1.0, -1.0, max, -max,
                      max + ulp_max / 2, /* the tie above the largest: infinity */
                      nextafter(max + ulp_max / 2, 0), max + ulp_max / 4, 65519.0, 65520.0, 65536.0,
                      tiny, tiny / 2, nextafter(tiny / 2, 1), tiny * 1.5, tiny * 2.5, -tiny * 0.75,
                      ldexp(1.0, emin), ldexp(1.0, emin) - tiny / 2, ldexp(1.0, emin) - tiny,
                      1e-30, 1e-45, 3e38, 1e300, -1e300, DBL_MIN, 0.1, 1.0 / 3};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++)
        v[k++] = fixed[i];
    /* ties and their neighbours at many exponents: 1 + (2m+1)/2^p */
    for (int e = emin - p - 2; e <= (dt == SMELT_F16 ? 16 : 100); e += (dt == SMELT_F16 ? 1 : 7))
        for (int m = 0; m < 3; m++) {
            double tie = ldexp(1.0 + (2.0 * m + 1) / ldexp(1.0, p), e);
            v[k++] = tie;
            v[k++] = -nextafter(tie, 0);
            v[k++] = nextafter(tie, INFINITY);
            v[k++] = ldexp(1.0 + (2.0 * m) / ldexp(1.0, p - 1), e); /* exact */
        }
    while (k < n) { /* random bits, exponents within and around dt's range */
        int e = (int)trng_range(r, emin - p - 4, dt == SMELT_F16 ? 17 : 128);
        v[k] = ldexp(1.0 + trng_unit(r), e) * ((trng_u64(r) & 1) ? -1 : 1);
        k++;
    }
    return k;
}

/* from -> dt casts of hazard values, on backend, against t_half_bits. */
static void check_rounding(const char *backend, smelt_dtype dt, smelt_dtype from)
{
    smelt_ctx *ctx = tier_ctx(backend);
    if (!ctx)
        return;
    enum { N = 4096 };
    trng r;
    trng_init(&r, (uint64_t)(dt * 16 + from));
    static double v[N];
    hazards(dt, &r, v, N);
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, NULL, from, SHP(N));
    smelt_node *y = smelt_cast(g, x, dt);
    smelt_tensor *in = t_tensor(ctx, from, SHP(N));
    for (int i = 0; i < N; i++) {
        if (from == SMELT_F32)
            v[i] = (double)(float)v[i];
        else if (from == SMELT_I32 || from == SMELT_I64) { /* integers: around 2^k, odd ones too */
            double m = trunc(fabs(v[i]) * (from == SMELT_I32 ? 1 : 1024));
            m = fmin(m, from == SMELT_I32 ? 2147483647.0 : 9007199254740991.0);
            if (!(m == m))
                m = 0;
            v[i] = (i & 1) ? -m : m;
        }
        t_set(in, i, v[i]);
        v[i] = smelt_tensor_get(in, i); /* what is stored (integers: no -0.0) */
    }
    for (int opt = 0; opt <= 3; opt += 3) {
        smelt_plan *p = t_plan(ctx, g, 1, &y, opt);
        smelt_tensor *got = NULL;
        t_run(p, 1, &in, 1, &got);
        int bad = 0;
        for (int i = 0; i < N; i++) {
            uint16_t want = t_half_bits(dt, v[i]), have = bits_at(got, i);
            if (!same_half(want, have, dt) && bad++ < 5)
                cr_expect(false, "%s: %s(%a) as %s = %#06x (%g), expected %#06x (%g)", backend,
                          smelt_dtype_name(dt), v[i], smelt_dtype_name(from), have,
                          t_half_value(dt, have), want, t_half_value(dt, want));
        }
        cr_assert_eq(bad, 0, "%s: %d of %d casts %s -> %s wrong (opt_level %d)", backend, bad, N,
                     smelt_dtype_name(from), smelt_dtype_name(dt), opt);
        smelt_tensor_free(got);
        smelt_plan_free(p);
    }
    smelt_tensor_free(in);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(half, rounding_on_tcc)
{
    smelt_dtype from[] = {SMELT_F32, SMELT_F64, SMELT_I32, SMELT_I64};
    for (int d = SMELT_F16; d <= SMELT_BF16; d++)
        for (int k = 0; k < NELEMS(from); k++)
            check_rounding("TCC", (smelt_dtype)d, from[k]);
}

Test(half, rounding_on_cc, .timeout = 120)
{
    smelt_dtype from[] = {SMELT_F32, SMELT_F64, SMELT_I32};
    for (int d = SMELT_F16; d <= SMELT_BF16; d++)
        for (int k = 0; k < NELEMS(from); k++)
            check_rounding("CC", (smelt_dtype)d, from[k]);
}

/* One rounding from the integers: 2^24 + 2^16 + 1 is above bf16's tie between
 * 2^24 and 2^24 + 2^17; through f32 (2^24 + 2^16, a tie) it would go down. */
Test(half, integers_round_once)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, NULL, SMELT_I32, SHP(2));
    smelt_node *y = smelt_cast(g, x, SMELT_BF16);
    smelt_tensor *in = t_tensor(ctx, SMELT_I32, SHP(2));
    ((int32_t *)smelt_tensor_data(in))[0] = (1 << 24) + (1 << 16) + 1;
    ((int32_t *)smelt_tensor_data(in))[1] = 65519;
    smelt_tensor *ref = NULL;
    t_reference(ctx, g, 1, &y, 1, &in, &ref);
    cr_assert_eq(smelt_tensor_get(ref, 0), (double)((1 << 24) + (1 << 17)));
    for (int opt = 0; opt <= 3; opt += 3) {
        smelt_plan *p = t_plan(ctx, g, 1, &y, opt);
        smelt_tensor *got = NULL;
        t_run(p, 1, &in, 1, &got);
        cr_assert_eq(smelt_tensor_get(got, 0), (double)((1 << 24) + (1 << 17)), "%g",
                     smelt_tensor_get(got, 0));
        cr_assert_eq(smelt_tensor_get(got, 1), 65536.0);
        smelt_tensor_free(got);
        smelt_plan_free(p);
    }
    smelt_tensor_free(ref);
    smelt_tensor_free(in);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* ---- special values through the operators --------------------------------------------- */

typedef struct spec_case {
    smelt_op op;
    double a, b, want;
} spec_case;

static void check_specials(smelt_dtype dt, const spec_case *c, int n)
{
    smelt_ctx *ctx = t_ctx();
    for (int k = 0; k < n; k++) {
        smelt_graph *g = t_graph(ctx);
        int ar = smelt_op_arity(c[k].op);
        smelt_node *x[2] = {smelt_input(g, NULL, dt, SHP(3)), ar > 1 ? smelt_input(g, NULL, dt, SHP(3)) : NULL};
        smelt_node *y = smelt_op_apply(g, c[k].op, ar, x);
        cr_assert_not_null(y, "%s", smelt_graph_errmsg(g));
        smelt_tensor *in[2] = {t_tensor(ctx, dt, SHP(3)), t_tensor(ctx, dt, SHP(3))};
        for (int i = 0; i < 3; i++) { /* the same case thrice: flat, in a padded group */
            t_set(in[0], i, c[k].a);
            t_set(in[1], i, c[k].b);
        }
        smelt_tensor *ref = NULL;
        t_reference(ctx, g, 1, &y, ar, in, &ref);
        for (int opt = -1; opt <= 3; opt += 3) {
            smelt_tensor *got = ref;
            smelt_plan *p = NULL;
            if (opt >= 0) {
                p = t_plan(ctx, g, 1, &y, opt);
                got = NULL;
                t_run(p, ar, in, 1, &got);
            }
            for (int i = 0; i < 3; i++) {
                double v = smelt_tensor_get(got, i), w = c[k].want;
                bool ok = isnan(w) ? isnan(v) : (v == w && !signbit(v) == !signbit(w));
                cr_expect(ok, "%s(%a, %a) on %s = %a, expected %a (%s)", smelt_op_name(c[k].op), c[k].a,
                          c[k].b, smelt_dtype_name(dt), v, w, opt < 0 ? "reference" : opt ? "fused" : "unfused");
            }
            if (p) {
                smelt_tensor_free(got);
                smelt_plan_free(p);
            }
        }
        smelt_tensor_free(ref);
        t_free_all(in, 2);
        smelt_graph_free(g);
    }
    smelt_ctx_free(ctx);
}

Test(half, special_values_f16)
{
    const double tiny = 0x1p-24;
    const spec_case c[] = {
        {SMELT_OP_ADD, 65504, 16, INFINITY}, /* 65520: the tie above 65504 goes to infinity */
        {SMELT_OP_ADD, 65504, 15, 65504},
        {SMELT_OP_MUL, 300, 300, INFINITY},
        {SMELT_OP_MUL, -300, 300, -INFINITY},
        {SMELT_OP_SUB, -65504, 32, -INFINITY},
        {SMELT_OP_ADD, -0.0, -0.0, -0.0},
        {SMELT_OP_MUL, 0.0, -1.0, -0.0},
        {SMELT_OP_NEG, 0.0, 0, -0.0},
        {SMELT_OP_DIV, 1.0, 0.0, INFINITY},
        {SMELT_OP_DIV, -1.0, 0.0, -INFINITY},
        {SMELT_OP_DIV, 0.0, 0.0, NAN},
        {SMELT_OP_SQRT, -1.0, 0, NAN},
        {SMELT_OP_SUB, INFINITY, INFINITY, NAN},
        {SMELT_OP_ADD, NAN, 1.0, NAN},
        {SMELT_OP_MAXIMUM, NAN, 1.0, NAN},
        {SMELT_OP_MINIMUM, 1.0, NAN, NAN},
        {SMELT_OP_EQ, NAN, NAN, 0},
        {SMELT_OP_ISINF, INFINITY, 0, 1},
        {SMELT_OP_MUL, tiny, 0.5, 0.0},          /* 2^-25: the tie goes to even, 0 */
        {SMELT_OP_MUL, tiny, 1.5, 2 * tiny},     /* 1.5 ulps: to even, 2 */
        {SMELT_OP_MUL, tiny, 2.5, 2 * tiny},
        {SMELT_OP_MUL, -tiny, 0.25, -0.0},
        {SMELT_OP_DIV, 0x1p-14, 1024, tiny},     /* normal to subnormal */
        {SMELT_OP_SUB, 0x1p-14, tiny, 0x1p-14 - tiny},
        {SMELT_OP_ADD, 2048, 1, 2048},           /* 2049: a tie, to even */
        {SMELT_OP_ADD, 2048, 3, 2052},           /* 2051: a tie, to even */
        {SMELT_OP_EXP, 12.0, 0, INFINITY},       /* e^12 > 65504 */
        {SMELT_OP_EXP, -20.0, 0, 0x1p-24 * 0},   /* 2.06e-9: below half the smallest */
        {SMELT_OP_EXP, -16.0, 0, 2 * tiny},      /* 1.125e-7 */
        {SMELT_OP_RECIPROCAL, 1e-5, 0, INFINITY}, /* 1e-5 is 1.0014e-5 in f16; 99857 */
        {SMELT_OP_SIGN, -0.0, 0, 0.0},
        {SMELT_OP_FLOOR_DIV, 65504, 0.5, INFINITY},
        {SMELT_OP_MOD, -3, 2, 1},
    };
    check_specials(SMELT_F16, c, NELEMS(c));
}

Test(half, special_values_bf16)
{
    const double max = 0x1.fep127, tiny = 0x1p-133;
    const spec_case c[] = {
        {SMELT_OP_MUL, max, 2, INFINITY},
        {SMELT_OP_ADD, max, 0x1p119, INFINITY}, /* the tie above the largest */
        {SMELT_OP_ADD, max, 0x1p118, max},
        {SMELT_OP_MUL, tiny, 0.5, 0.0},
        {SMELT_OP_MUL, tiny, 3, 3 * tiny},
        {SMELT_OP_MUL, -tiny, 0.5, -0.0},
        {SMELT_OP_ADD, 256, 1, 256},           /* 257: a tie, to even */
        {SMELT_OP_ADD, 256, 3, 260},           /* 259: a tie, to even */
        {SMELT_OP_ADD, 1, 0x1p-8, 1},          /* half an ulp of 1: a tie, to even */
        {SMELT_OP_ADD, 1, 0x1p-7, 1 + 0x1p-7},
        {SMELT_OP_DIV, 1, 3, 0x1.56p-2},       /* 0.333984375 */
        {SMELT_OP_ADD, -0.0, -0.0, -0.0},
        {SMELT_OP_DIV, 0.0, 0.0, NAN},
        {SMELT_OP_SQRT, -4, 0, NAN},
        {SMELT_OP_EXP, 89, 0, INFINITY},       /* 4.5e38 */
        {SMELT_OP_EXP, 88, 0, 0x1.f2p+126},    /* 1.65e38 */
        {SMELT_OP_MAXIMUM, 1.0, NAN, NAN},
        {SMELT_OP_ISNAN, NAN, 0, 1},
    };
    check_specials(SMELT_BF16, c, NELEMS(c));
}

/* ---- fused == unfused ------------------------------------------------------------------------ */

/* A chain over f16 a, bf16 b, f32 c and a broadcast f16 row d: arithmetic,
 * transcendental functions, comparisons, where, casts between the three,
 * weak and strong constants; six outputs of the three float dtypes. */
static int half_chain(smelt_graph *g, int64_t rows, int64_t cols, smelt_node **outs)
{
    smelt_node *a = smelt_input(g, "a", SMELT_F16, SHP(rows, cols));
    smelt_node *b = smelt_input(g, "b", SMELT_BF16, SHP(rows, cols));
    smelt_node *c = smelt_input(g, "c", SMELT_F32, SHP(rows, cols));
    smelt_node *d = smelt_input(g, "d", SMELT_F16, SHP(cols));
    smelt_node *t1 = smelt_add(g, smelt_mul(g, a, d), smelt_scalar(g, 0.1));         /* f16 */
    smelt_node *t2 = smelt_unary(g, SMELT_OP_TANH, smelt_sub(g, t1, smelt_const(g, 1.5, SMELT_F16)));
    smelt_node *t3 = smelt_div(g, smelt_unary(g, SMELT_OP_EXP, b), smelt_scalar(g, 3)); /* bf16 */
    smelt_node *t4 = smelt_add(g, t2, smelt_cast(g, t3, SMELT_F16));                 /* f16 */
    smelt_node *t5 = smelt_mul(g, t4, b);                                             /* f32 */
    smelt_node *t6 = smelt_where(g, smelt_binary(g, SMELT_OP_GT, a, c), t4, smelt_cast(g, c, SMELT_F16));
    smelt_node *t7 = smelt_unary(g, SMELT_OP_SQRT, smelt_unary(g, SMELT_OP_ABS, t6));
    smelt_node *t8 = smelt_ternary(g, SMELT_OP_FMA, t3, t3, smelt_cast(g, t7, SMELT_BF16));
    smelt_node *t9 = smelt_unary(g, SMELT_OP_GELU, smelt_add(g, t8, smelt_cast(g, c, SMELT_BF16)));
    outs[0] = t4;
    outs[1] = t5;
    outs[2] = t7;
    outs[3] = t9;
    outs[4] = smelt_cast(g, t9, SMELT_F16);
    outs[5] = smelt_binary(g, SMELT_OP_FLOOR_DIV, t1, d); /* exact ops only: as the reference */
    return 6;
}

static void check_fused_equals_unfused(const char *backend, int64_t rows, int64_t cols)
{
    smelt_ctx *ctx = tier_ctx(backend);
    if (!ctx)
        return;
    smelt_graph *g = t_graph(ctx);
    smelt_node *outs[8];
    int n = half_chain(g, rows, cols, outs);
    T_OK(ctx, smelt_graph_status(g));
    trng r;
    trng_init(&r, (uint64_t)rows);
    smelt_tensor *in[4];
    smelt_dtype dts[] = {SMELT_F16, SMELT_BF16, SMELT_F32, SMELT_F16};
    for (int k = 0; k < 4; k++) {
        in[k] = k < 3 ? t_tensor(ctx, dts[k], SHP(rows, cols)) : t_tensor(ctx, dts[k], SHP(cols));
        t_fill_uniform(in[k], &r, -3, 3);
    }
    t_set(in[0], 0, NAN), t_set(in[1], 1, INFINITY), t_set(in[2], 2, -0.0), t_set(in[0], 3, 65504);
    smelt_tensor *fused[8] = {0}, *unfused[8] = {0}, *ref[8] = {0};
    smelt_plan *pf = t_plan(ctx, g, n, outs, 3), *pu = t_plan(ctx, g, n, outs, 0);
    cr_assert_lt(t_stats(pf).kernels, t_stats(pu).kernels);
    t_run(pf, 4, in, n, fused);
    t_run(pu, 4, in, n, unfused);
    t_reference(ctx, g, n, outs, 4, in, ref);
    /* a transposed view of a as input (strided operands): the same bits */
    smelt_tensor *base = t_tensor(ctx, SMELT_F16, SHP(cols, rows)), *view = NULL, *strided[8] = {0};
    for (int64_t i = 0; i < rows; i++)
        for (int64_t j = 0; j < cols; j++)
            memcpy(t_elem(base, j * rows + i), t_elem(in[0], i * cols + j), 2);
    T_OK(ctx, smelt_tensor_transpose(base, (const int[]){1, 0}, &view));
    smelt_tensor *vin[4] = {view, in[1], in[2], in[3]};
    t_run(pf, 4, vin, n, strided);
    for (int o = 0; o < n; o++) {
        int64_t at = t_first_difference(fused[o], strided[o]);
        cr_assert_eq(at, -1, "%s: output %d differs with a strided input at [%lld]", backend, o, (long long)at);
    }
    t_free_all(strided, n);
    smelt_tensor_free(view), smelt_tensor_free(base);
    for (int o = 0; o < n; o++) {
        int64_t at = t_first_difference(fused[o], unfused[o]);
        cr_assert_eq(at, -1, "%s: output %d (%s) differs fused and unfused at [%lld]: %a vs %a", backend, o,
                     smelt_dtype_name(smelt_tensor_dtype(fused[o])), (long long)at,
                     smelt_tensor_get(fused[o], at), smelt_tensor_get(unfused[o], at));
        char label[64];
        snprintf(label, sizeof label, "%s: output %d", backend, o);
        t_expect_match(label, fused[o], ref[o], (t_tol){.ulps = 4, .atol = 0.02, .rtol = 4e-3});
    }
    t_free_all(fused, n), t_free_all(unfused, n), t_free_all(ref, n), t_free_all(in, 4);
    smelt_plan_free(pf);
    smelt_plan_free(pu);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(half, fused_equals_unfused_tcc)
{
    check_fused_equals_unfused("TCC", 37, 129);  /* rows of odd length: padded groups */
    check_fused_equals_unfused("TCC", 300, 301); /* 90300 elements: split over threads */
}

Test(half, fused_equals_unfused_cc, .timeout = 120)
{
    check_fused_equals_unfused("CC", 37, 129);
}

/* ---- the CPU tiers agree on arithmetic ------------------------------------------------------ */

Test(half, tiers_agree_on_arithmetic, .timeout = 120)
{
    enum { N = 3001 };
    smelt_tensor *res[2][64] = {{0}};
    int n = 0;
    trng r;
    trng_init(&r, 0);
    smelt_tensor *in[4] = {0};
    for (int t = 0; t < 2; t++) {
        smelt_ctx *ctx = tier_ctx(tiers[t]);
        if (!ctx) {
            t_free_all(res[0], n), t_free_all(in, 4);
            cr_skip_test("backend %s is not available", tiers[t]);
        }
        smelt_graph *g = t_graph(ctx);
        smelt_node *x[2][2], *outs[64];
        n = 0;
        for (int d = 0; d < 2; d++) {
            smelt_dtype dt = d ? SMELT_BF16 : SMELT_F16;
            x[d][0] = smelt_input(g, NULL, dt, SHP(N));
            x[d][1] = smelt_input(g, NULL, dt, SHP(N));
            smelt_node *a = x[d][0], *b = x[d][1];
            smelt_op bin[] = {SMELT_OP_ADD, SMELT_OP_SUB, SMELT_OP_MUL, SMELT_OP_DIV, SMELT_OP_MAXIMUM,
                              SMELT_OP_LT, SMELT_OP_EQ};
            for (int k = 0; k < NELEMS(bin); k++)
                outs[n++] = smelt_binary(g, bin[k], a, b);
            smelt_op un[] = {SMELT_OP_SQRT, SMELT_OP_NEG, SMELT_OP_ABS, SMELT_OP_FLOOR, SMELT_OP_ROUND,
                             SMELT_OP_RECIPROCAL, SMELT_OP_SQUARE, SMELT_OP_RELU, SMELT_OP_ISFINITE};
            for (int k = 0; k < NELEMS(un); k++)
                outs[n++] = smelt_unary(g, un[k], a);
            outs[n++] = smelt_ternary(g, SMELT_OP_FMA, a, b, a);
            outs[n++] = smelt_ternary(g, SMELT_OP_CLAMP, a, b, smelt_scalar(g, 1.5));
            outs[n++] = smelt_where(g, smelt_binary(g, SMELT_OP_GT, a, b), a, smelt_mul(g, b, smelt_scalar(g, 0.1)));
            smelt_dtype to[] = {SMELT_F32, SMELT_F64, SMELT_I32, SMELT_I64, SMELT_U8, SMELT_BOOL,
                                d ? SMELT_F16 : SMELT_BF16};
            for (int k = 0; k < NELEMS(to); k++) /* casts out, and back in */
                outs[n++] = smelt_cast(g, smelt_add(g, smelt_cast(g, a, to[k]), smelt_const(g, 1, to[k])), dt);
        }
        T_OK(ctx, smelt_graph_status(g));
        if (t == 0)
            for (int k = 0; k < 4; k++) {
                in[k] = t_tensor(ctx, k < 2 ? SMELT_F16 : SMELT_BF16, SHP(N));
                for (int64_t i = 0; i < N; i++) { /* any bit pattern: NaN, inf, subnormals */
                    uint16_t h = (uint16_t)trng_u64(&r);
                    if (i % 3 == 0) /* and ordinary values, for the casts to integers */
                        h = t_half_bits(smelt_tensor_dtype(in[k]), trng_uniform(&r, -300, 300));
                    ((uint16_t *)smelt_tensor_data(in[k]))[i] = h;
                }
            }
        smelt_plan *p = t_plan(ctx, g, n, outs, 3);
        cr_assert_str_eq(t_stats(p).backend, tiers[t]);
        t_run(p, 4, in, n, res[t]);
        smelt_plan_free(p);
        smelt_graph_free(g);
        smelt_ctx_free(ctx);
    }
    /* bitwise, but for which NaN comes out of two NaN operands (x86 gives the
     * first one's, and a compiler may swap the operands of a + b) */
    for (int o = 0; o < n; o++) {
        int64_t at = -1, len = smelt_tensor_numel(res[0][o]);
        for (int64_t i = 0; i < len && at < 0; i++) {
            double x = smelt_tensor_get(res[0][o], i), y = smelt_tensor_get(res[1][o], i);
            size_t es = smelt_dtype_size(smelt_tensor_dtype(res[0][o]));
            if (memcmp(t_elem(res[0][o], i), t_elem(res[1][o], i), es) && !(isnan(x) && isnan(y)))
                at = i;
        }
        cr_expect_eq(at, -1, "output %d (%s): TCC and CC differ at [%lld]: %a vs %a", o,
                     smelt_dtype_name(smelt_tensor_dtype(res[0][o])), (long long)at,
                     smelt_tensor_get(res[0][o], at), smelt_tensor_get(res[1][o], at));
    }
    t_free_all(res[0], n), t_free_all(res[1], n), t_free_all(in, 4);
}

/* ---- constants ----------------------------------------------------------------------------- */

/* Folded constants (opt_level 1 and up) are rounded as a kernel rounds
 * them (opt_level 0 computes them in a kernel): f32 arithmetic, then f16. */
Test(half, constant_folding_rounds_like_kernels)
{
    smelt_ctx *ctx = t_ctx();
    for (int d = SMELT_F16; d <= SMELT_BF16; d++) {
        smelt_dtype dt = (smelt_dtype)d;
        smelt_graph *g = t_graph(ctx);
        smelt_node *x = smelt_input(g, NULL, dt, SHP(5));
        static const double cv[][3] = {{1.1, 3.3, 0.7}, {60000, 2, 3}, {0x1p-24, 0.5, 7}, {1e-3, 1e-3, 3},
                                       {2049, 1, 0.1}};
        smelt_node *outs[NELEMS(cv)];
        for (int k = 0; k < NELEMS(cv); k++) {
            smelt_node *c1 = smelt_const(g, cv[k][0], dt), *c2 = smelt_const(g, cv[k][1], dt);
            smelt_node *c3 = smelt_const(g, cv[k][2], dt);
            smelt_node *k1 = smelt_div(g, smelt_add(g, smelt_mul(g, c1, c2), c3), c3);
            smelt_node *k2 = smelt_unary(g, SMELT_OP_SQRT, smelt_sub(g, c1, smelt_scalar(g, 0.25)));
            outs[k] = smelt_add(g, smelt_mul(g, x, k1), k2);
        }
        trng r;
        trng_init(&r, (uint64_t)d);
        smelt_tensor *in = t_rand(ctx, &r, dt, SHP(5));
        smelt_tensor *a[NELEMS(cv)] = {0}, *b[NELEMS(cv)] = {0};
        smelt_plan *p0 = t_plan(ctx, g, NELEMS(cv), outs, 0), *p3 = t_plan(ctx, g, NELEMS(cv), outs, 3);
        cr_assert_gt(t_stats(p3).folded, 0);
        t_run(p0, 1, &in, NELEMS(cv), a);
        t_run(p3, 1, &in, NELEMS(cv), b);
        for (int k = 0; k < NELEMS(cv); k++)
            cr_assert(t_bitwise_equal(a[k], b[k]), "%s: case %d: folded %a, computed %a", smelt_dtype_name(dt), k,
                      smelt_tensor_get(b[k], 0), smelt_tensor_get(a[k], 0));
        t_free_all(a, NELEMS(cv)), t_free_all(b, NELEMS(cv));
        smelt_tensor_free(in);
        smelt_plan_free(p0), smelt_plan_free(p3);
        smelt_graph_free(g);
    }
    smelt_ctx_free(ctx);
}

/* A weak scalar takes the array's dtype and is rounded to it (NEP 50):
 * f16 * 0.1 multiplies by 0.0999755859375; f16 + 1e5 adds infinity. */
Test(half, weak_scalars_are_rounded)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, NULL, SMELT_F16, SHP(2));
    smelt_node *outs[] = {smelt_mul(g, x, smelt_scalar(g, 0.1)), smelt_add(g, x, smelt_scalar(g, 1e5)),
                          smelt_mul(g, smelt_cast(g, x, SMELT_BF16), smelt_scalar(g, 0.1))};
    cr_assert_eq(smelt_node_dtype(outs[0]), SMELT_F16);
    cr_assert_eq(smelt_node_dtype(outs[2]), SMELT_BF16);
    smelt_tensor *in = t_tensor(ctx, SMELT_F16, SHP(2));
    t_set(in, 0, 1.0), t_set(in, 1, -2.0);
    smelt_plan *p = t_plan(ctx, g, 3, outs, 3);
    smelt_tensor *got[3] = {0};
    t_run(p, 1, &in, 3, got);
    cr_assert_eq(smelt_tensor_get(got[0], 0), 0.0999755859375);
    cr_assert_eq(smelt_tensor_get(got[0], 1), -0.199951171875);
    cr_assert(isinf(smelt_tensor_get(got[1], 0)) && smelt_tensor_get(got[1], 1) > 0);
    cr_assert_eq(smelt_tensor_get(got[2], 0), 0.10009765625);
    t_free_all(got, 3);
    smelt_plan_free(p);
    smelt_tensor_free(in);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}
