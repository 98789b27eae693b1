/* Helpers shared by the Criterion suites (see common.h). */
#include "common.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

bool t_contains(const char *haystack, const char *needle)
{
    return haystack && needle && strstr(haystack, needle) != NULL;
}

/* ---- operator table ------------------------------------------------------ */
const test_op test_ops[SMELT_OP_COUNT] = {
#define SMELT_OP(ID, nm, n, cls, rule, dts, cf, ci, ref) \
    [SMELT_OP_##ID] = {#nm, n, #cls, #rule, #dts},
#include "ops.def"
#undef SMELT_OP
};

bool t_is_float(smelt_dtype dt)
{
    return dt == SMELT_F32 || dt == SMELT_F64 || dt == SMELT_F16 || dt == SMELT_BF16;
}

bool t_is_half(smelt_dtype dt) { return dt == SMELT_F16 || dt == SMELT_BF16; }

static char kind_letter(smelt_dtype dt)
{
    switch (dt) {
    case SMELT_F32:
    case SMELT_F64:
    case SMELT_F16:
    case SMELT_BF16: return 'F';
    case SMELT_I32:
    case SMELT_I64: return 'I';
    case SMELT_U8: return 'U';
    default: return 'B';
    }
}

smelt_op t_builder_op(smelt_op op, smelt_dtype dt)
{
    if (dt != SMELT_BOOL)
        return op;
    switch (op) { /* NumPy's bitwise operators on bool are the logical ones */
    case SMELT_OP_BITWISE_AND: return SMELT_OP_LOGICAL_AND;
    case SMELT_OP_BITWISE_OR: return SMELT_OP_LOGICAL_OR;
    case SMELT_OP_BITWISE_XOR: return SMELT_OP_LOGICAL_XOR;
    case SMELT_OP_BITWISE_NOT: return SMELT_OP_LOGICAL_NOT;
    default: return op;
    }
}

smelt_dtype t_compute_dtype(smelt_op op, smelt_dtype dt)
{
    op = t_builder_op(op, dt);
    if (op == SMELT_OP_ROUND && dt == SMELT_BOOL)
        return SMELT_F16; /* NumPy's round of bool */
    if (!strcmp(test_ops[op].rule, "FLOAT") && !t_is_float(dt))
        return (dt == SMELT_U8 || dt == SMELT_BOOL) ? SMELT_F16 : SMELT_F64; /* as NumPy */
    if (!strcmp(test_ops[op].rule, "TRUEDIV") && !t_is_float(dt))
        return SMELT_F64;
    return dt;
}

bool t_op_supports(smelt_op op, smelt_dtype dt)
{
    return strchr(test_ops[t_builder_op(op, dt)].dtypes, kind_letter(t_compute_dtype(op, dt))) != NULL;
}

smelt_dtype t_result_dtype(smelt_op op, smelt_dtype dt)
{
    if (!strcmp(test_ops[t_builder_op(op, dt)].rule, "CMP"))
        return SMELT_BOOL;
    return t_compute_dtype(op, dt);
}

/* ---- f16 / bf16, written independently of the library ---------------------
 * Rounding by scaling to the format's spacing at v's exponent (exact: a
 * power of two) and nearbyint (to nearest even); the bit patterns from
 * frexp.  The library and the kernels use bit manipulation instead. */
static void half_fmt(smelt_dtype dt, int *p, int *emin, int *ebits)
{
    *p = dt == SMELT_F16 ? 11 : 8; /* significand bits, the implicit one included */
    *emin = dt == SMELT_F16 ? -14 : -126;
    *ebits = dt == SMELT_F16 ? 5 : 8;
}

double t_half_max(smelt_dtype dt) { return dt == SMELT_F16 ? 65504.0 : 0x1.fep127; }

double t_round_half(smelt_dtype dt, double v)
{
    if (isnan(v) || isinf(v) || v == 0)
        return v;
    int p, emin, ebits, e;
    half_fmt(dt, &p, &emin, &ebits);
    frexp(fabs(v), &e); /* |v| in [2^(e-1), 2^e) */
    int E = e - 1 < emin ? emin : e - 1;
    double spacing = ldexp(1.0, E - (p - 1));
    double r = nearbyint(v / spacing) * spacing;
    return fabs(r) > t_half_max(dt) ? copysign(INFINITY, v) : r;
}

uint16_t t_half_bits(smelt_dtype dt, double v)
{
    int p, emin, ebits, e;
    half_fmt(dt, &p, &emin, &ebits);
    double r = t_round_half(dt, v);
    unsigned sign = signbit(r) ? 0x8000u : 0, inf = ((1u << ebits) - 1) << (p - 1);
    if (isnan(r))
        return (uint16_t)(sign | inf | (1u << (p - 2)));
    if (isinf(r))
        return (uint16_t)(sign | inf);
    if (r == 0)
        return (uint16_t)sign;
    frexp(fabs(r), &e);
    int E = e - 1, bias = (1 << (ebits - 1)) - 1;
    if (E < emin) /* subnormal: a multiple of the smallest spacing */
        return (uint16_t)(sign | (unsigned)ldexp(fabs(r), -(emin - (p - 1))));
    unsigned frac = (unsigned)(ldexp(fabs(r), -E) * (1 << (p - 1))) - (1u << (p - 1));
    return (uint16_t)(sign | (unsigned)(E + bias) << (p - 1) | frac);
}

double t_half_value(smelt_dtype dt, uint16_t h)
{
    int p, emin, ebits;
    half_fmt(dt, &p, &emin, &ebits);
    unsigned emask = (1u << ebits) - 1, e = (h >> (p - 1)) & emask, m = h & ((1u << (p - 1)) - 1);
    double v;
    if (e == emask)
        v = m ? NAN : INFINITY;
    else if (e == 0)
        v = ldexp((double)m, emin - (p - 1));
    else
        v = ldexp((double)(m | 1u << (p - 1)), (int)e - ((1 << (ebits - 1)) - 1) - (p - 1));
    return (h & 0x8000u) ? -v : v;
}

/* ---- PRNG ---------------------------------------------------------------- */
static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static uint64_t hash_str(uint64_t h, const char *s)
{
    for (; s && *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    return h;
}

void trng_init(trng *r, uint64_t salt)
{
    uint64_t h = 1469598103934665603ULL;
    if (criterion_current_suite)
        h = hash_str(h, criterion_current_suite->name);
    if (criterion_current_test)
        h = hash_str(h, criterion_current_test->name);
    const char *env = getenv("SMELT_TEST_SEED");
    uint64_t user = env ? strtoull(env, NULL, 0) : 0;
    r->seed = mix64(h ^ mix64(salt + 0x9e3779b97f4a7c15ULL) ^ mix64(user));
    r->s = r->seed;
}

uint64_t trng_u64(trng *r)
{
    r->s += 0x9e3779b97f4a7c15ULL;
    return mix64(r->s);
}

double trng_unit(trng *r) { return (double)(trng_u64(r) >> 11) * 0x1.0p-53; }

double trng_uniform(trng *r, double lo, double hi) { return lo + (hi - lo) * trng_unit(r); }

int64_t trng_range(trng *r, int64_t lo, int64_t hi)
{
    uint64_t span = (uint64_t)hi - (uint64_t)lo + 1;
    uint64_t x = trng_u64(r);
    return span ? (int64_t)((uint64_t)lo + x % span) : (int64_t)x;
}

double trng_logmag(trng *r, double lo, double hi, bool positive)
{
    double m = exp(trng_uniform(r, log(lo), log(hi)));
    return (!positive && (trng_u64(r) & 1)) ? -m : m;
}

/* ---- tensors --------------------------------------------------------------- */
smelt_ctx *t_ctx_raw(void)
{
    smelt_ctx *ctx = NULL;
    int st = smelt_ctx_new(&ctx);
    cr_assert_eq(st, SMELT_OK, "smelt_ctx_new: %d", st);
    cr_assert_not_null(ctx);
    return ctx;
}

smelt_ctx *t_ctx(void)
{
    smelt_ctx *ctx = t_ctx_raw();
    T_OK(ctx, smelt_ctx_set_backend(ctx, "TCC"));
    return ctx;
}

smelt_graph *t_graph(smelt_ctx *ctx)
{
    smelt_graph *g = NULL;
    T_OK(ctx, smelt_graph_new(ctx, &g));
    cr_assert_not_null(g);
    return g;
}

smelt_tensor *t_tensor(smelt_ctx *ctx, smelt_dtype dt, int ndim, const int64_t *shape)
{
    smelt_tensor *t = NULL;
    T_OK(ctx, smelt_tensor_new(ctx, dt, ndim, shape, &t));
    cr_assert_not_null(t);
    return t;
}

void *t_elem(const smelt_tensor *t, int64_t i)
{
    int nd = smelt_tensor_ndim(t);
    const int64_t *shape = smelt_tensor_shape(t), *strides = smelt_tensor_strides(t);
    int64_t off = 0;
    for (int d = nd - 1; d >= 0; d--) {
        off += (i % shape[d]) * strides[d];
        i /= shape[d];
    }
    return (char *)smelt_tensor_data(t) + off * (int64_t)smelt_dtype_size(smelt_tensor_dtype(t));
}

static int64_t clamp_i64(double v, double lo, double hi)
{
    if (isnan(v))
        return 0;
    if (v <= lo)
        return (int64_t)lo;
    if (v >= hi)
        return hi >= 9223372036854775807.0 ? INT64_MAX : (int64_t)hi;
    return (int64_t)v;
}

void t_set(smelt_tensor *t, int64_t i, double v)
{
    void *p = t_elem(t, i);
    switch (smelt_tensor_dtype(t)) {
    case SMELT_F32: *(float *)p = (float)v; break;
    case SMELT_F64: *(double *)p = v; break;
    case SMELT_I32: *(int32_t *)p = (int32_t)clamp_i64(v, INT32_MIN, INT32_MAX); break;
    case SMELT_I64: *(int64_t *)p = clamp_i64(v, -9223372036854775808.0, 9223372036854775807.0); break;
    case SMELT_U8: *(uint8_t *)p = (uint8_t)clamp_i64(v, 0, 255); break;
    case SMELT_F16:
    case SMELT_BF16: *(uint16_t *)p = t_half_bits(smelt_tensor_dtype(t), v); break;
    default: *(uint8_t *)p = v != 0; break;
    }
}

void t_set_i64(smelt_tensor *t, int64_t i, int64_t v)
{
    void *p = t_elem(t, i);
    switch (smelt_tensor_dtype(t)) {
    case SMELT_F32: *(float *)p = (float)v; break;
    case SMELT_F64: *(double *)p = (double)v; break;
    case SMELT_I32: *(int32_t *)p = (int32_t)(v < INT32_MIN ? INT32_MIN : v > INT32_MAX ? INT32_MAX : v); break;
    case SMELT_I64: *(int64_t *)p = v; break;
    case SMELT_U8: *(uint8_t *)p = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v); break;
    case SMELT_F16:
    case SMELT_BF16: *(uint16_t *)p = t_half_bits(smelt_tensor_dtype(t), (double)v); break;
    default: *(uint8_t *)p = v != 0; break;
    }
}

void t_fill_uniform(smelt_tensor *t, trng *r, double lo, double hi)
{
    smelt_dtype dt = smelt_tensor_dtype(t);
    int64_t n = smelt_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        if (t_is_float(dt))
            t_set(t, i, trng_uniform(r, lo, hi));
        else if (dt == SMELT_BOOL)
            t_set(t, i, (double)(trng_u64(r) & 1));
        else
            t_set_i64(t, i, trng_range(r, (int64_t)ceil(lo), (int64_t)floor(hi)));
    }
}

smelt_tensor *t_rand(smelt_ctx *ctx, trng *r, smelt_dtype dt, int ndim, const int64_t *shape)
{
    smelt_tensor *t = t_tensor(ctx, dt, ndim, shape);
    int64_t n = smelt_tensor_numel(t);
    for (int64_t i = 0; i < n; i++) {
        switch (dt) {
        case SMELT_F32:
        case SMELT_F64:
        case SMELT_F16:
        case SMELT_BF16: {
            double m = trng_uniform(r, 0.25, 2.0);
            t_set(t, i, (trng_u64(r) & 1) ? -m : m);
            break;
        }
        case SMELT_U8: t_set_i64(t, i, trng_range(r, 1, 255)); break;
        case SMELT_BOOL: t_set_i64(t, i, (int64_t)(trng_u64(r) & 1)); break;
        default: t_set_i64(t, i, trng_range(r, -50, 50)); break;
        }
    }
    return t;
}

void t_free_all(smelt_tensor **t, int n)
{
    for (int i = 0; i < n; i++) {
        smelt_tensor_free(t[i]);
        t[i] = NULL;
    }
}

/* ---- plans ----------------------------------------------------------------- */
smelt_plan *t_plan(smelt_ctx *ctx, smelt_graph *g, int n_out, smelt_node *const *outs,
                   int opt_level)
{
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    o.opt_level = opt_level;
    smelt_plan *p = NULL;
    T_OK(ctx, smelt_plan_new(ctx, g, n_out, outs, &o, &p));
    cr_assert_not_null(p);
    return p;
}

void t_run(smelt_plan *p, int n_in, smelt_tensor *const *in, int n_out, smelt_tensor **out)
{
    int st = smelt_plan_run(p, n_in, in, n_out, out);
    cr_assert_eq(st, SMELT_OK, "smelt_plan_run returned %d (%s)\n%s", st, smelt_strerror(st),
                 smelt_plan_describe(p));
    for (int i = 0; i < n_out; i++)
        cr_assert_not_null(out[i], "output %d not set", i);
}

smelt_plan_stats t_stats(const smelt_plan *p)
{
    smelt_plan_stats s;
    memset(&s, 0, sizeof s);
    cr_assert_eq(smelt_plan_get_stats(p, &s), SMELT_OK);
    return s;
}

void t_reference(smelt_ctx *ctx, smelt_graph *g, int n_out, smelt_node *const *outs, int n_in,
                 smelt_tensor *const *in, smelt_tensor **ref)
{
    T_OK(ctx, smelt_reference_eval(ctx, g, n_out, outs, n_in, in, ref));
    for (int i = 0; i < n_out; i++) {
        cr_assert_not_null(ref[i]);
        cr_assert_eq(smelt_tensor_dtype(ref[i]), SMELT_F64);
    }
}

/* ---- comparison ------------------------------------------------------------ */
static int64_t ordered_f32(float f)
{
    int32_t i;
    memcpy(&i, &f, 4);
    return i < 0 ? (int64_t)INT32_MIN - i : i;
}

static int64_t ordered_f64(double d)
{
    int64_t i;
    memcpy(&i, &d, 8);
    /* INT64_MIN - i without overflow: negative i maps below zero */
    return i < 0 ? -(i & INT64_MAX) : i;
}

int64_t t_ulp_distance(double a, double b, smelt_dtype dt)
{
    if (isnan(a) || isnan(b))
        return INT64_MAX;
    int64_t x, y;
    if (t_is_half(dt)) {
        uint16_t ha = t_half_bits(dt, a), hb = t_half_bits(dt, b);
        x = (ha & 0x8000) ? -(int64_t)(ha & 0x7fff) : ha;
        y = (hb & 0x8000) ? -(int64_t)(hb & 0x7fff) : hb;
    } else if (dt == SMELT_F32) {
        x = ordered_f32((float)a);
        y = ordered_f32((float)b);
    } else {
        x = ordered_f64(a);
        y = ordered_f64(b);
    }
    if ((x < 0) != (y < 0)) { /* guard the subtraction */
        uint64_t d = (uint64_t)(x < 0 ? -x : x) + (uint64_t)(y < 0 ? -y : y);
        return d > (uint64_t)INT64_MAX ? INT64_MAX : (int64_t)d;
    }
    return x > y ? x - y : y - x;
}

double t_rel_error(double got, double ref)
{
    double d = fabs(got - ref);
    return ref == 0 ? d : d / fabs(ref);
}

double t_eps(smelt_dtype dt)
{
    return dt == SMELT_F32 ? (double)FLT_EPSILON : dt == SMELT_F16 ? 0x1p-10 : dt == SMELT_BF16 ? 0x1p-7 : DBL_EPSILON;
}

t_tol t_chain_tol(smelt_dtype dt) { return (t_tol){16, 64 * t_eps(dt), 0, false}; }

static double round_to(smelt_dtype dt, double v)
{
    return dt == SMELT_F32 ? (double)(float)v : t_is_half(dt) ? t_round_half(dt, v) : v;
}

bool t_close(double got, double ref, smelt_dtype dt, const t_tol *tol, double extra_atol)
{
    if (!t_is_float(dt))
        return got == ref;
    double r = round_to(dt, ref);
    if (isnan(r) || isnan(got))
        return isnan(r) && isnan(got);
    if (got == r)
        return !(tol->zero_sign && got == 0 && signbit(got) != signbit(r));
    if (t_ulp_distance(got, r, dt) <= (int64_t)tol->ulps)
        return true;
    if (isinf(got) || isinf(r))
        return false;
    return fabs(got - r) <= tol->atol + extra_atol + tol->rtol * fabs(r);
}

void t_expect_match(const char *label, const smelt_tensor *got, const smelt_tensor *ref,
                    t_tol tol)
{
    cr_assert_not_null(got, "%s: no result", label);
    cr_assert_not_null(ref, "%s: no reference", label);
    int nd = smelt_tensor_ndim(got);
    cr_assert_eq(nd, smelt_tensor_ndim(ref), "%s: rank %d vs reference %d", label, nd,
                 smelt_tensor_ndim(ref));
    for (int d = 0; d < nd; d++)
        cr_assert_eq(smelt_tensor_shape(got)[d], smelt_tensor_shape(ref)[d],
                     "%s: dimension %d is %lld, reference %lld", label, d,
                     (long long)smelt_tensor_shape(got)[d], (long long)smelt_tensor_shape(ref)[d]);
    smelt_dtype dt = smelt_tensor_dtype(got);
    int64_t n = smelt_tensor_numel(got), bad = 0, first = -1;
    char msg[1024] = "";
    size_t len = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = smelt_tensor_get(got, i), r = smelt_tensor_get(ref, i);
        bool ok = t_close(g, r, dt, &tol, 0);
        if (dt == SMELT_BOOL)
            ok = ok && *(const uint8_t *)t_elem(got, i) <= 1;
        if (ok)
            continue;
        if (bad++ < 4 && len < sizeof msg - 200) {
            if (first < 0)
                first = i;
            len += (size_t)snprintf(msg + len, sizeof msg - len,
                                    "\n  [%lld] got %.17g, reference %.17g (%s), ulps %lld",
                                    (long long)i, g, r, smelt_dtype_name(dt),
                                    (long long)(t_is_float(dt) ? t_ulp_distance(g, round_to(dt, r), dt) : 0));
        }
    }
    cr_assert_eq(bad, 0, "%s: %lld of %lld elements differ from the reference (tolerance %g ulps, "
                         "atol %g, rtol %g):%s",
                 label, (long long)bad, (long long)n, tol.ulps, tol.atol, tol.rtol, msg);
}

smelt_plan_stats t_check_plan(const char *label, smelt_ctx *ctx, smelt_graph *g, int n_out,
                              smelt_node *const *outs, int opt_level, int n_in,
                              smelt_tensor *const *in, t_tol tol)
{
    smelt_plan *p = t_plan(ctx, g, n_out, outs, opt_level);
    smelt_tensor **got = calloc((size_t)n_out, sizeof *got);
    smelt_tensor **ref = calloc((size_t)n_out, sizeof *ref);
    cr_assert(got && ref);
    t_run(p, n_in, in, n_out, got);
    t_reference(ctx, g, n_out, outs, n_in, in, ref);
    for (int i = 0; i < n_out; i++) {
        char lab[256];
        snprintf(lab, sizeof lab, "%s, output %d, opt_level %d", label, i, opt_level);
        t_expect_match(lab, got[i], ref[i], tol);
    }
    smelt_plan_stats s = t_stats(p);
    t_free_all(got, n_out);
    t_free_all(ref, n_out);
    free(got);
    free(ref);
    smelt_plan_free(p);
    s.backend = NULL; /* owned by the plan, which is gone */
    return s;
}

bool t_bitwise_equal(const smelt_tensor *a, const smelt_tensor *b)
{
    if (!a || !b || smelt_tensor_dtype(a) != smelt_tensor_dtype(b) ||
        smelt_tensor_ndim(a) != smelt_tensor_ndim(b))
        return false;
    for (int d = 0; d < smelt_tensor_ndim(a); d++)
        if (smelt_tensor_shape(a)[d] != smelt_tensor_shape(b)[d])
            return false;
    size_t es = smelt_dtype_size(smelt_tensor_dtype(a));
    for (int64_t i = 0, n = smelt_tensor_numel(a); i < n; i++)
        if (memcmp(t_elem(a, i), t_elem(b, i), es))
            return false;
    return true;
}

int64_t t_first_difference(const smelt_tensor *a, const smelt_tensor *b)
{
    size_t es = smelt_dtype_size(smelt_tensor_dtype(a));
    for (int64_t i = 0, n = smelt_tensor_numel(a); i < n; i++)
        if (memcmp(t_elem(a, i), t_elem(b, i), es))
            return i;
    return -1;
}

/* ---- bitwise results ------------------------------------------------------------ */
int t_all_ops_graph(smelt_graph *g, smelt_dtype dt, int64_t n, smelt_node **outs)
{
    smelt_node *x[3];
    for (int k = 0; k < 3; k++)
        x[k] = smelt_input(g, NULL, dt, 1, &n);
    int m = 0;
    for (int op = 0; op < SMELT_OP_COUNT; op++)
        if (!strcmp(test_ops[op].cls, "ELEMWISE") && t_op_supports((smelt_op)op, dt))
            outs[m++] = smelt_op_apply(g, (smelt_op)op, test_ops[op].arity, x);
    /* constant exponents: x ** 3 compiles to products, 2.5 to the general code */
    static const double ys[T_ALL_OPS_POWS] = {3, -3, 7, 15, -16, 2.5};
    for (int k = 0; t_is_float(dt) && k < T_ALL_OPS_POWS; k++)
        outs[m++] = smelt_op_apply(g, SMELT_OP_POW, 2, (smelt_node *[]){x[0], smelt_const(g, ys[k], dt)});
    return m;
}

void t_mixed_inputs(trng *r, smelt_tensor **in, int n_in)
{
    static const double fspec[] = {
        0.0, -0.0, INFINITY, -INFINITY, NAN, 1.0, -1.0, 0.5, -0.5, 2.0, 3.0, -3.0, 1e-310, -4e-320,
        1.5e-39, 6e-8, 65504.0, 1e300, -1e300, DBL_MAX, FLT_MAX, DBL_MIN, FLT_MIN, 0.84375, -0.84375,
        6.5, 27.3, 709.78, 709.79, -745.13, -745.14, 88.72, -103.97, 710.47, 1.5707963267948966,
        3.141592653589793, 1e22, -1e22, 0x1.6a09e667f3bcdp-2, 0.975, -0.999999, 1.0000001, 22.0, -22.0,
        0x1p52 + 1, -0x1p53, 0x1p63, -0x1p31, 255.5, 1e-8, -40.0, -60.0, -200.0, 0.9999999999999999};
    smelt_dtype dt = smelt_tensor_dtype(in[0]);
    int64_t n = smelt_tensor_numel(in[0]), ns = (int64_t)(sizeof fspec / sizeof fspec[0]);
    for (int k = 0; k < n_in; k++)
        for (int64_t i = 0; i < n; i++) {
            int64_t j = (i * (k + 1) * 7 + k) % (3 * ns); /* specials, in other pairs per input */
            double v;
            if (!t_is_float(dt))
                v = j < ns && i < 4 * ns ? fspec[j] : trng_uniform(r, -300, 300);
            else if (i < 4 * ns && j < ns)
                v = fspec[j];
            else if (i % 3 == 0)
                v = trng_logmag(r, 1e-12, 1e12, trng_unit(r) < 0.5);
            else if (i % 3 == 1)
                v = trng_uniform(r, -12, 12);
            else
                v = (double)trng_range(r, -20, 20);
            if (!t_is_float(dt)) /* integers: wrap into the type (t_set reads a double) */
                v = isfinite(v) ? fmod(trunc(v), 1e18) : 7;
            if (dt == SMELT_I64)
                t_set_i64(in[k], i, (int64_t)v);
            else
                t_set(in[k], i, v);
        }
}

bool t_same_results(const smelt_tensor *a, const smelt_tensor *b, int64_t *where)
{
    *where = -1;
    if (!a || !b || smelt_tensor_dtype(a) != smelt_tensor_dtype(b) || smelt_tensor_numel(a) != smelt_tensor_numel(b))
        return false;
    smelt_dtype dt = smelt_tensor_dtype(a);
    size_t es = smelt_dtype_size(dt);
    for (int64_t i = 0, n = smelt_tensor_numel(a); i < n; i++)
        if (memcmp(t_elem(a, i), t_elem(b, i), es) &&
            !(t_is_float(dt) && isnan(smelt_tensor_get(a, i)) && isnan(smelt_tensor_get(b, i)))) {
            *where = i;
            return false;
        }
    return true;
}

/* ---- templates ----------------------------------------------------------------- */
const char *t_use_failing_templates(void)
{
    const char *dir = getenv("SMELT_TEST_TEMPLATES");
    cr_assert(dir && *dir, "SMELT_TEST_TEMPLATES is not set (tests/meson.build sets it to "
                           "tests/templates); run the suites with meson test");
    setenv("SMELT_TEMPLATE_DIR", dir, 1);
    return dir;
}

char *t_read_file(const char *path)
{
    size_t n;
    return t_read_file_n(path, &n);
}

char *t_read_file_n(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    cr_assert_not_null(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    cr_assert(n >= 0);
    char *s = malloc((size_t)n + 1);
    cr_assert_not_null(s);
    size_t got = fread(s, 1, (size_t)n, f);
    fclose(f);
    s[got] = 0;
    *len = got;
    return s;
}

void t_write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f, "cannot create %s", path);
    fputs(text, f);
    fclose(f);
}

smelt_graph *t_gather_case(smelt_ctx *ctx, trng *r, smelt_node *outs[3], smelt_tensor *in[3])
{
    smelt_graph *g = t_graph(ctx);
    smelt_node *W = smelt_input(g, "W", SMELT_F32, SHP(300, 97)), *ids = smelt_input(g, "ids", SMELT_I32, SHP(5, 61));
    smelt_node *sel = smelt_input(g, "sel", SMELT_I64, SHP(300, 33));
    outs[0] = smelt_unary(g, SMELT_OP_TANH, smelt_take(g, W, ids, 0));
    outs[1] = smelt_mul(g, smelt_take_along_axis(g, W, sel, 1), smelt_scalar(g, 0.5));
    outs[2] = smelt_take(g, W, ids, 1);
    T_OK(ctx, smelt_graph_status(g));
    in[0] = t_rand(ctx, r, SMELT_F32, SHP(300, 97));
    in[1] = t_tensor(ctx, SMELT_I32, SHP(5, 61));
    in[2] = t_tensor(ctx, SMELT_I64, SHP(300, 33));
    for (int64_t i = 0; i < 5 * 61; i++)
        t_set_i64(in[1], i, trng_range(r, -97, 96));
    for (int64_t i = 0; i < 300 * 33; i++)
        t_set_i64(in[2], i, trng_range(r, -97, 96));
    return g;
}
