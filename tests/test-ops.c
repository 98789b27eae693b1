/* Every operator of src/ir/ops.def, for every dtype it supports, against the
 * float64 reference interpreter (smelt_reference_eval) on fresh random
 * inputs plus every combination of special values; casts between all dtype
 * pairs; and hand-checked NumPy semantics the reference itself must follow.
 *
 * The operator list is not written here: the tests iterate the table
 * (SMELT_OP_COUNT, smelt_op_name, smelt_op_arity and ops.def's dtypes/rule
 * columns).  What is per operator is the input domain (so that results are
 * meaningful) and the tolerance class:
 *
 *   exact      the kernel and the reference both round once (the reference
 *              computes in double, which rounds to f32 exactly like an f32
 *              operation: + - * / sqrt and the exact operators): 0 ulps, and
 *              the sign of zero must match.
 *   two roundings  rsqrt (1 / sqrt) and fma (the f64 reference rounds before
 *              the f32 rounding): 1 ulp; mod in f32 (the npy_divmod steps
 *              round in f32): 1 ulp; floor_div in f32: 4 ulps (the quotient
 *              can be off by one beyond 2^21, as in NumPy's float32); both
 *              exact in f64.
 *   libm       transcendental functions: smelt's own math (f64 within 2
 *              ulp; f32 computed in double and rounded once, or in f32:
 *              exp within 1 ulp, expm1 and tanh within 2), the reference
 *              glibc's f64 libm: 1 ulp in f32 (2 for expm1 and tanh), 4 in
 *              f64 (the accuracy itself: tests/test-math.c).
 *   formula    activations computed in the kernel's precision (sigmoid,
 *              silu, gelu, gelu_tanh, softplus, hardswish): 4 ulps, plus
 *              2 eps * (1 + |x|) absolute for the cancellation in 1 + erf(x)
 *              and 1 + tanh(x) near zero results.
 *   integers and bool results are exact; NaN must match NaN.
 *
 * f16 and bf16 compute in f32 and round every result to the storage type;
 * the reference rounds its double result the same way (through f32).  The
 * exact class stays exact (an f32 + - * / sqrt of f16 values rounds like
 * the double one, then both round to f16); every other class may differ by
 * 1 ulp of the storage type (its half an ulp of rounding, plus the f32
 * operator's error, lands on the other side of a rounding boundary), plus
 * the formula class's absolute slack in f32 units (cancellation in f32).
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common.h" /* criterion.h first: parameterized.h alone leaves Test() undefined */

#include <criterion/parameterized.h>

#include "numpy-answers.h"

#define NRAND 1024
#define I52 4503599627370496LL /* 2^52: the reference reads i64 through double */

static bool in_list(const char *name, const char *list)
{
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ' ') && (p[n] == ' ' || p[n] == 0))
            return true;
    return false;
}

/* ---- domains ------------------------------------------------------------------- */
typedef struct dom {
    double flo[3], fhi[3]; /* floats: uniform part of each operand */
    bool wide;             /* a quarter of the float draws log-uniform in 1e-20..1e20 */
    bool ranged[3];        /* integer range given; else the dtype's (i64: +-2^52) */
    int64_t ilo[3], ihi[3];
    bool int_min; /* i64: INT64_MIN is a special value too (exact unary ops) */
} dom;

static void frange(dom *d, int k, double lo, double hi)
{
    for (int j = 0; j < 3; j++)
        if (k < 0 || k == j) {
            d->flo[j] = lo;
            d->fhi[j] = hi;
        }
}

static void irange(dom *d, int k, int64_t lo, int64_t hi)
{
    for (int j = 0; j < 3; j++)
        if (k < 0 || k == j) {
            d->ranged[j] = true;
            d->ilo[j] = lo;
            d->ihi[j] = hi;
        }
}

static dom domain_of(const char *nm)
{
    dom d;
    memset(&d, 0, sizeof d);
    d.wide = true;
    frange(&d, -1, -4, 4);
    if (in_list(nm, "sqrt rsqrt log log2 log10")) {
        frange(&d, -1, 0, 10); /* positive (the specials add zero, negatives, inf, NaN) */
    } else if (in_list(nm, "log1p")) {
        frange(&d, -1, -1, 10);
    } else if (in_list(nm, "acosh")) {
        frange(&d, -1, 1, 50);
    } else if (in_list(nm, "asin acos atanh")) {
        frange(&d, -1, -1, 1);
        d.wide = false;
    } else if (in_list(nm, "exp exp2 expm1 sinh cosh")) {
        frange(&d, -1, -80, 80);
        d.wide = false;
    } else if (in_list(nm, "pow")) {
        frange(&d, 0, 0, 10);
        frange(&d, 1, -6, 6);
        d.wide = false;
        irange(&d, 0, -100, 100); /* |a^b| < 2^53: the reference is exact */
        irange(&d, 1, -2, 5);
    } else if (in_list(nm, "mul square fma")) {
        irange(&d, -1, -70000, 70000); /* products exact in double, still wrap i32 */
    } else if (in_list(nm, "floor_div mod")) {
        irange(&d, 1, -20, 20); /* small divisors, zero included */
    }
    d.int_min = in_list(nm, "neg abs sign relu round logical_not isnan isinf isfinite");
    return d;
}

static void int_bounds(smelt_dtype dt, int64_t *lo, int64_t *hi)
{
    switch (dt) {
    case SMELT_I32: *lo = INT32_MIN, *hi = INT32_MAX; break;
    case SMELT_I64: *lo = -I52, *hi = I52; break;
    case SMELT_U8: *lo = 0, *hi = 255; break;
    default: *lo = 0, *hi = 1; break;
    }
}

/* Integer range of operand k of op for dtype dt. */
static void arg_int_range(smelt_op op, const dom *d, int k, smelt_dtype dt, int64_t *lo, int64_t *hi)
{
    int64_t blo, bhi;
    int_bounds(dt, &blo, &bhi);
    *lo = blo, *hi = bhi;
    if (!strcmp(test_ops[op].rule, "FLOAT") || !strcmp(test_ops[op].rule, "TRUEDIV")) {
        /* the float domain, truncated */
        *lo = (int64_t)ceil(d->flo[k]);
        *hi = (int64_t)floor(d->fhi[k]);
    } else if (d->ranged[k]) {
        *lo = d->ilo[k];
        *hi = d->ihi[k];
    }
    if (*lo < blo)
        *lo = blo;
    if (*hi > bhi)
        *hi = bhi;
}

static const double spec_f32[] = {
    NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0,
    FLT_MAX, -FLT_MAX, FLT_MIN, 0x1p-149, -0x1p-149, 1e30, -1e-30,
};
static const double spec_f16[] = { /* overflow at 65520, subnormals below 2^-14 */
    NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0,
    65504.0, -65504.0, 0x1p-14, 0x1p-24, -0x1p-24, 60000.0, -1e-3,
};
static const double spec_bf16[] = {
    NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0,
    0x1.fep127, -0x1.fep127, 0x1p-126, 0x1p-133, -0x1p-133, 1e30, -1e-30,
};
static const double spec_f64[] = {
    NAN, INFINITY, -INFINITY, 0.0, -0.0, 1.0, -1.0, 0.5, -2.5, 3.0,
    DBL_MAX, -DBL_MAX, DBL_MIN, 0x1p-1074, -0x1p-1074, 1e300, -1e-300,
};

static const double *float_specials(smelt_dtype dt)
{
    return dt == SMELT_F32 ? spec_f32 : dt == SMELT_F16 ? spec_f16 : dt == SMELT_BF16 ? spec_bf16 : spec_f64;
}

/* Special values of operand k (integers: those inside its range). */
static int specials(smelt_op op, const dom *d, int k, smelt_dtype dt, double *out)
{
    if (t_is_float(dt)) {
        const double *s = float_specials(dt);
        for (int i = 0; i < NELEMS(spec_f32); i++)
            out[i] = s[i];
        return NELEMS(spec_f32);
    }
    static const double ints[] = {-2147483648.0, 2147483647.0, -(double)I52, (double)I52, -100,
                                  -7, -1, 0, 1, 2, 7, 100, 127, 128, 255};
    int64_t lo, hi;
    arg_int_range(op, d, k, dt, &lo, &hi);
    int n = 0;
    for (int i = 0; i < NELEMS(ints); i++)
        if (ints[i] >= (double)lo && ints[i] <= (double)hi)
            out[n++] = ints[i];
    if (dt == SMELT_I64 && d->int_min)
        out[n++] = -9223372036854775808.0;
    return n;
}

static double draw(trng *r, smelt_op op, const dom *d, int k, smelt_dtype dt)
{
    if (t_is_float(dt)) {
        if (!strcmp(test_ops[op].name, "pow")) {
            double v = trng_uniform(r, d->flo[k], d->fhi[k]);
            if (k == 0 && trng_unit(r) < 0.25)
                return -(double)trng_range(r, 1, 10); /* negative base, integer exponent below */
            if (k == 1 && trng_unit(r) < 0.5)
                return round(v);
            return v;
        }
        if (d->wide && trng_unit(r) < 0.25) /* f16: its own range, subnormals to overflow */
            return dt == SMELT_F16 ? trng_logmag(r, 1e-8, 7e4, d->flo[k] >= 0)
                                   : trng_logmag(r, 1e-20, 1e20, d->flo[k] >= 0);
        return trng_uniform(r, d->flo[k], d->fhi[k]);
    }
    int64_t lo, hi;
    arg_int_range(op, d, k, dt, &lo, &hi);
    return (double)trng_range(r, lo, hi);
}

/* ---- tolerances ------------------------------------------------------------------ */
typedef struct optol {
    double ulps32, ulps64, absk;
    bool zero_sign;
    double f32_limit; /* f32 inputs beyond this magnitude are not compared (0: none) */
} optol;

static optol tol_of(const char *nm)
{
    if (in_list(nm, "neg abs sign sqrt reciprocal square floor ceil round trunc relu add sub mul "
                    "div maximum minimum clamp where"))
        return (optol){0, 0, 0, true, 0};
    if (in_list(nm, "rsqrt fma"))
        return (optol){1, 1, 0, false, 0};
    if (in_list(nm, "mod"))
        return (optol){1, 0, 0, false, 0};
    /* f32 floor_div rounds (a - mod) / b in f32: for quotients beyond 2^21
     * the result can be off by one (as NumPy's float32 floor_divide) */
    if (in_list(nm, "floor_div"))
        return (optol){4, 0, 0, false, 0};
    /* hardswish computes x * 6 before dividing by 6 (docs/numerics.md): in
     * f32 that overflows for |x| > FLT_MAX / 6 where the f64 reference does
     * not, so those inputs are left out. */
    if (in_list(nm, "hardswish"))
        return (optol){4, 4, 2, false, FLT_MAX / 6};
    if (in_list(nm, "sigmoid silu gelu gelu_tanh softplus"))
        return (optol){4, 4, 2, false, 0};
    if (in_list(nm, "expm1 tanh")) /* computed in f32, two roundings (docs/numerics.md) */
        return (optol){2, 4, 0, false, 0};
    return (optol){1, 4, 0, false, 0}; /* libm */
}

/* ---- one operator on one dtype ------------------------------------------------- */

static void fill_inputs(trng *r, smelt_op op, const dom *d, smelt_dtype dt, int arity,
                        smelt_tensor **in, int64_t n, int64_t block, const int *nspec,
                        double (*spec)[32])
{
    for (int64_t i = 0; i < n; i++) {
        int64_t rest = i;
        for (int k = 0; k < arity; k++) {
            double v;
            if (i < block) {
                v = spec[k][rest % nspec[k]];
                rest /= nspec[k];
            } else {
                v = draw(r, op, d, k, dt);
            }
            if (dt == SMELT_I64)
                t_set_i64(in[k], i, (int64_t)v);
            else
                t_set(in[k], i, v);
        }
    }
}

static int check_results(const char *label, const trng *r, smelt_op op, smelt_dtype dt, int arity,
                         smelt_tensor *const *in, const smelt_tensor *got,
                         const smelt_tensor *ref)
{
    optol ot = tol_of(test_ops[op].name);
    smelt_dtype odt = smelt_tensor_dtype(got);
    bool half = t_is_half(odt); /* computed in f32, one rounding to the storage type */
    t_tol tol = {half ? (ot.ulps32 > 0) : odt == SMELT_F32 ? ot.ulps32 : ot.ulps64, 0, 0, ot.zero_sign};
    int64_t n = smelt_tensor_numel(got), bad = 0;
    char msg[1200] = "";
    size_t len = 0;
    for (int64_t i = 0; i < n; i++) {
        double g = smelt_tensor_get(got, i), rv = smelt_tensor_get(ref, i), mag = 0;
        double a[3] = {0, 0, 0};
        for (int k = 0; k < arity; k++) {
            a[k] = smelt_tensor_get(in[k], i);
            if (isfinite(a[k]) && fabs(a[k]) > mag)
                mag = fabs(a[k]);
        }
        if (ot.f32_limit > 0 && (odt == SMELT_F32 || half) && mag > ot.f32_limit)
            continue;
        double slack = t_is_float(odt) ? ot.absk * t_eps(half ? SMELT_F32 : odt) * (1 + mag) : 0;
        bool ok = t_close(g, rv, odt, &tol, slack);
        if (odt == SMELT_BOOL)
            ok = ok && *(const uint8_t *)t_elem(got, i) <= 1;
        if (ok)
            continue;
        if (bad++ < 5 && len < sizeof msg - 240)
            len += (size_t)snprintf(msg + len, sizeof msg - len,
                                    "\n  %s(%.9g, %.9g, %.9g) = %.17g, reference %.17g (ulps %lld)",
                                    test_ops[op].name, a[0], a[1], a[2], g, rv,
                                    (long long)(t_is_float(odt) ? t_ulp_distance(g, rv, odt) : 0));
    }
    cr_expect_eq(bad, 0, "%s on %s: %lld of %lld results wrong (%s; seed %#llx):%s",
                 test_ops[op].name, smelt_dtype_name(dt), (long long)bad, (long long)n, label,
                 (unsigned long long)r->seed, msg);
    return bad != 0;
}

static void check_op_dtype(smelt_ctx *ctx, smelt_op op, smelt_dtype dt)
{
    const test_op *to = &test_ops[op];
    dom d = domain_of(to->name);
    trng r;
    trng_init(&r, (uint64_t)op * 16 + (uint64_t)dt);

    /* the input block: every combination of special values, then random draws */
    static double spec[3][32];
    int nspec[3] = {1, 1, 1};
    int64_t block = 1;
    for (int k = 0; k < to->arity; k++) {
        nspec[k] = specials(op, &d, k, dt, spec[k]);
        cr_assert_gt(nspec[k], 0);
        block *= nspec[k];
    }
    int64_t n = block + NRAND;

    smelt_graph *g = t_graph(ctx);
    smelt_node *args[3];
    for (int k = 0; k < to->arity; k++)
        args[k] = smelt_input(g, NULL, dt, SHP(n));
    smelt_node *y = smelt_op_apply(g, op, to->arity, args);
    if (!t_op_supports(op, dt)) {
        cr_assert_null(y, "%s accepted %s", to->name, smelt_dtype_name(dt));
        cr_assert_eq(smelt_graph_status(g), SMELT_ERR_DTYPE);
        smelt_graph_free(g);
        return;
    }
    cr_assert_not_null(y, "%s on %s: %s", to->name, smelt_dtype_name(dt), smelt_graph_errmsg(g));
    cr_assert_eq(smelt_node_dtype(y), t_result_dtype(op, dt));

    smelt_tensor *in[3] = {0}, *strided[3] = {0}, *base[3] = {0};
    for (int k = 0; k < to->arity; k++) {
        in[k] = t_tensor(ctx, dt, SHP(n));
        /* the same values at every other element of a buffer twice as long */
        base[k] = t_tensor(ctx, dt, SHP(2 * n));
        T_OK(ctx, smelt_tensor_slice(base[k], 0, 1, 2 * n, 2, &strided[k]));
    }
    fill_inputs(&r, op, &d, dt, to->arity, in, n, block, nspec, spec);
    for (int k = 0; k < to->arity; k++)
        for (int64_t i = 0; i < n; i++)
            memcpy(t_elem(strided[k], i), t_elem(in[k], i), smelt_dtype_size(dt));

    smelt_tensor *ref = NULL;
    t_reference(ctx, g, 1, &y, to->arity, in, &ref);
    for (int opt = 0; opt <= 3; opt += 3) {
        smelt_plan *p = t_plan(ctx, g, 1, &y, opt);
        smelt_tensor *got = NULL, *got2 = NULL;
        t_run(p, to->arity, in, 1, &got);
        char label[64];
        snprintf(label, sizeof label, "contiguous, opt_level %d", opt);
        check_results(label, &r, op, dt, to->arity, in, got, ref);
        t_run(p, to->arity, strided, 1, &got2);
        snprintf(label, sizeof label, "strided inputs, opt_level %d", opt);
        check_results(label, &r, op, dt, to->arity, in, got2, ref);
        int64_t diff = t_first_difference(got, got2);
        cr_expect_eq(diff, -1, "%s on %s: strided and contiguous inputs differ at [%lld]: %.17g vs %.17g",
                     to->name, smelt_dtype_name(dt), (long long)diff,
                     smelt_tensor_get(got, diff), smelt_tensor_get(got2, diff));
        smelt_tensor_free(got);
        smelt_tensor_free(got2);
        smelt_plan_free(p);
    }
    smelt_tensor_free(ref);
    t_free_all(in, 3);
    t_free_all(strided, 3);
    t_free_all(base, 3);
    smelt_graph_free(g);
}

static int elementwise_ops[SMELT_OP_COUNT];

ParameterizedTestParameters(ops, against_reference)
{
    int n = 0;
    for (int op = 0; op < SMELT_OP_COUNT; op++)
        if (!strcmp(test_ops[op].cls, "ELEMWISE"))
            elementwise_ops[n++] = op;
    return cr_make_param_array(int, elementwise_ops, (size_t)n);
}

ParameterizedTest(int *op, ops, against_reference)
{
    cr_assert(*op >= 0 && *op < SMELT_OP_COUNT);
    smelt_ctx *ctx = t_ctx();
    for (int dt = 0; dt < SMELT_DTYPE_COUNT; dt++)
        check_op_dtype(ctx, (smelt_op)*op, (smelt_dtype)dt);
    smelt_ctx_free(ctx);
}

Test(ops, table_has_the_expected_families)
{
    /* The parameterized test above covers whatever ops.def lists; make sure
     * the table was actually read (a broken X-macro would test nothing). */
    int elementwise = 0, by_arity[4] = {0};
    for (int op = 0; op < SMELT_OP_COUNT; op++)
        if (!strcmp(test_ops[op].cls, "ELEMWISE")) {
            elementwise++;
            by_arity[test_ops[op].arity]++;
        }
    cr_assert_geq(elementwise, 60);
    cr_assert_geq(by_arity[1], 40);
    cr_assert_geq(by_arity[2], 15);
    cr_assert_geq(by_arity[3], 2);
    cr_assert_eq(by_arity[0], 0);
}

/* ---- every operator in one fused plan, on every CPU backend -------------------------
 * All operators a dtype supports, applied to the same three inputs, summed
 * into one value so that they fuse into a few many-output kernels; run on
 * each CPU backend this machine has (TCC always, CC with a C compiler) and
 * compared with the reference.  The inputs share one domain: random values
 * with special values sprinkled in (floats), small integers (so that a ** b
 * and a * b stay exact in the double reference). */
typedef struct backend_case {
    int backend; /* index of a registered backend (smelt_backend_name; parameters
                  * are copied: no pointers) */
    int dtype;
} backend_case;

#define MAX_BACKENDS 8
static backend_case backend_cases[MAX_BACKENDS * SMELT_DTYPE_COUNT];

/* A context on backend, or the test skipped where this machine lacks it. */
static smelt_ctx *backend_ctx(const char *backend)
{
    smelt_ctx *ctx = t_ctx_raw();
    if (smelt_backend_check(ctx, backend) != SMELT_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", smelt_errmsg(ctx));
        smelt_ctx_free(ctx);
        cr_skip_test("backend %s: %s", backend, why);
    }
    T_OK(ctx, smelt_ctx_set_backend(ctx, backend));
    return ctx;
}

ParameterizedTestParameters(ops, fused_on_each_backend)
{
    /* every registered backend (those this machine lacks skip): the first
     * (TCC) on every dtype; the others (seconds of gcc -O3 or NVRTC per
     * dtype) on f32, i32 and f16 */
    int n = 0;
    for (int b = 0; b < MAX_BACKENDS && smelt_backend_name(b, NULL); b++)
        for (int d = 0; d < SMELT_DTYPE_COUNT; d++)
            if (b == 0 || d == SMELT_F32 || d == SMELT_I32 || d == SMELT_F16)
                backend_cases[n++] = (backend_case){b, d};
    return cr_make_param_array(backend_case, backend_cases, (size_t)n);
}

static void fill_shared(trng *r, smelt_tensor *t, int k)
{
    smelt_dtype dt = smelt_tensor_dtype(t);
    const double *spec = float_specials(dt);
    for (int64_t i = 0, n = smelt_tensor_numel(t); i < n; i++) {
        double v;
        if (t_is_float(dt)) {
            double u = trng_unit(r);
            if (u < 0.1)
                v = spec[trng_range(r, 0, NELEMS(spec_f32) - 1)];
            else if (u < 0.3)
                v = trng_logmag(r, 1e-20, 1e20, false);
            else if (k == 1 && u < 0.5) /* integer exponents for pow, and 0.5 (pow's sqrt) */
                v = u < 0.35 ? 0.5 : (double)trng_range(r, -6, 6);
            else
                v = trng_uniform(r, -4, 4);
        } else if (dt == SMELT_BOOL) {
            v = (double)(trng_u64(r) & 1);
        } else if (k == 1) {
            v = (double)trng_range(r, dt == SMELT_U8 ? 0 : -3, 5); /* exponents, divisors */
        } else {
            v = (double)trng_range(r, dt == SMELT_U8 ? 0 : -100, 100);
        }
        t_set(t, i, v);
    }
}

ParameterizedTest(backend_case *bc, ops, fused_on_each_backend)
{
    enum { N = 1500 };
    setenv("SMELT_CACHE", "0", 1);
    smelt_dtype dt = (smelt_dtype)bc->dtype;
    const char *backend = smelt_backend_name(bc->backend, NULL);
    smelt_ctx *ctx = backend_ctx(backend);
    trng r;
    trng_init(&r, (uint64_t)bc->dtype);
    smelt_graph *g = t_graph(ctx);
    smelt_node *x[3];
    smelt_tensor *in[3];
    for (int k = 0; k < 3; k++) {
        x[k] = smelt_input(g, NULL, dt, SHP(N));
        in[k] = t_tensor(ctx, dt, SHP(N));
        fill_shared(&r, in[k], k);
    }
    smelt_node *outs[SMELT_OP_COUNT + 1];
    smelt_op which[SMELT_OP_COUNT];
    int n = 0;
    smelt_node *sum = NULL;
    for (int op = 0; op < SMELT_OP_COUNT; op++) {
        if (strcmp(test_ops[op].cls, "ELEMWISE") || !t_op_supports((smelt_op)op, dt))
            continue;
        smelt_node *y = smelt_op_apply(g, (smelt_op)op, test_ops[op].arity, x);
        cr_assert_not_null(y, "%s: %s", test_ops[op].name, smelt_graph_errmsg(g));
        which[n] = (smelt_op)op;
        outs[n++] = y;
        smelt_node *y64 = smelt_cast(g, y, SMELT_F64);
        sum = sum ? smelt_add(g, sum, y64) : y64;
    }
    cr_assert_geq(n, 20);
    outs[n] = sum; /* makes the operators one connected cluster (not checked) */
    smelt_plan *p = t_plan(ctx, g, n + 1, outs, 3);
    smelt_plan_stats st = t_stats(p);
    cr_assert_str_eq(st.backend, backend);
    cr_assert_leq(st.kernels, 6, "%d operators in %d kernels", n, st.kernels);
    smelt_tensor *got[SMELT_OP_COUNT + 1] = {0}, *ref[SMELT_OP_COUNT + 1] = {0};
    t_run(p, 3, in, n + 1, got);
    smelt_plan_wait(p);
    t_reference(ctx, g, n, outs, 3, in, ref);
    char label[64];
    snprintf(label, sizeof label, "fused, backend %s", backend);
    for (int i = 0; i < n; i++)
        check_results(label, &r, which[i], dt, test_ops[which[i]].arity, in, got[i], ref[i]);
    t_free_all(got, n + 1);
    t_free_all(ref, n);
    t_free_all(in, 3);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* ---- casts between all dtype pairs ------------------------------------------------ */
typedef struct cast_case {
    int from, to;
} cast_case;

static cast_case cast_cases[SMELT_DTYPE_COUNT * SMELT_DTYPE_COUNT];

ParameterizedTestParameters(ops, cast)
{
    int n = 0;
    for (int a = 0; a < SMELT_DTYPE_COUNT; a++)
        for (int b = 0; b < SMELT_DTYPE_COUNT; b++)
            cast_cases[n++] = (cast_case){a, b};
    return cr_make_param_array(cast_case, cast_cases, (size_t)n);
}

static const double cast_specials[] = {
    NAN, INFINITY, -INFINITY, 0.0, -0.0, 0.5, -0.5, 0.99, -0.99, 1.5, -1.5, 2.5, 127.5,
    128.0, 255.0, 255.9, 256.0, 256.5, 300.7, -1.2, -129.0, -255.5, 65537.25,
    2147483520.0, 2147483647.0, 2147483647.5, 2147483648.0, -2147483648.0, -2147483648.9,
    -2147483649.0, -2147483904.0, 3e9, -3e9, 4294967301.0, 9.2e18, 9223372036854775808.0,
    -9223372036854775808.0, -9.3e18, 1e19, 1e30, -1e30, FLT_MAX, DBL_MAX, -DBL_MAX,
    0x1p-149, 1e-300,
};

ParameterizedTest(cast_case *c, ops, cast)
{
    smelt_dtype from = (smelt_dtype)c->from, to = (smelt_dtype)c->to;
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, (uint64_t)(c->from * 8 + c->to));
    int64_t n = NELEMS(cast_specials) + 2048;
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, NULL, from, SHP(n));
    smelt_node *y = smelt_cast(g, x, to);
    cr_assert_not_null(y, "%s", smelt_graph_errmsg(g));
    cr_assert_eq(smelt_node_dtype(y), to);
    smelt_tensor *in = t_tensor(ctx, from, SHP(n));
    for (int64_t i = 0; i < n; i++) {
        if (t_is_float(from)) {
            double v;
            if (i < NELEMS(cast_specials))
                v = cast_specials[i];
            else if (i % 3 == 0)
                v = trng_uniform(&r, -300, 300);
            else if (i % 3 == 1)
                v = trng_uniform(&r, -5e9, 5e9);
            else
                v = trng_logmag(&r, 1e-3, 1e20, false);
            t_set(in, i, v);
        } else if (from == SMELT_I64) {
            /* exact in double: |v| <= 2^52, or a multiple of 2^10 up to 2^62 */
            int64_t v = i == 0 ? INT64_MIN : trng_range(&r, -I52, I52);
            if (i % 2)
                v *= 1024;
            t_set_i64(in, i, v);
        } else if (from == SMELT_I32) {
            static const int64_t sp[] = {INT32_MIN, INT32_MAX, -1, 0, 1, 255, 256, -256};
            t_set_i64(in, i, i < NELEMS(sp) ? sp[i] : trng_range(&r, INT32_MIN, INT32_MAX));
        } else if (from == SMELT_U8) {
            t_set_i64(in, i, i < 256 ? i : trng_range(&r, 0, 255));
        } else {
            t_set_i64(in, i, i < 2 ? i : (int64_t)(trng_u64(&r) & 1));
        }
    }
    char label[64];
    snprintf(label, sizeof label, "cast %s -> %s (seed %#llx)", smelt_dtype_name(from),
             smelt_dtype_name(to), (unsigned long long)r.seed);
    t_tol exact = {0, 0, 0, true};
    t_check_plan(label, ctx, g, 1, &y, 3, 1, &in, exact);
    t_check_plan(label, ctx, g, 1, &y, 0, 1, &in, exact);
    smelt_tensor_free(in);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* float -> integer conversion rules, by hand (x86 / NumPy-on-x86 behaviour):
 * truncation; NaN and out-of-range give the most negative value; u8 goes
 * through i64 and wraps. */
Test(ops, float_to_int_rules)
{
    smelt_ctx *ctx = t_ctx();
    static const double xs[] = {NAN, INFINITY, -INFINITY, 2.9, -2.9, 3e9, -3e9, 300.5, -1.5, 1e19};
    static const double e32[] = {-2147483648.0, -2147483648.0, -2147483648.0, 2, -2,
                                 -2147483648.0, -2147483648.0, 300, -1, -2147483648.0};
    static const double e64[] = {-9223372036854775808.0, -9223372036854775808.0,
                                 -9223372036854775808.0, 2, -2, 3e9, -3e9, 300, -1,
                                 -9223372036854775808.0};
    static const double eu8[] = {0, 0, 0, 2, 254, 0, 0, 44, 255, 0}; /* 3e9 = 11718750 * 256 */
    static const double eb[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, NULL, SMELT_F64, SHP(NELEMS(xs)));
    smelt_node *outs[] = {smelt_cast(g, x, SMELT_I32), smelt_cast(g, x, SMELT_I64),
                          smelt_cast(g, x, SMELT_U8), smelt_cast(g, x, SMELT_BOOL)};
    smelt_tensor *in = t_tensor(ctx, SMELT_F64, SHP(NELEMS(xs)));
    memcpy(smelt_tensor_data(in), xs, sizeof xs);
    smelt_plan *p = t_plan(ctx, g, 4, outs, 3);
    smelt_tensor *got[4] = {0};
    t_run(p, 1, &in, 4, got);
    for (int i = 0; i < NELEMS(xs); i++) {
        cr_expect_eq(smelt_tensor_get(got[0], i), e32[i], "i32(%g) = %g", xs[i], smelt_tensor_get(got[0], i));
        cr_expect_eq(smelt_tensor_get(got[1], i), e64[i], "i64(%g) = %g", xs[i], smelt_tensor_get(got[1], i));
        cr_expect_eq(smelt_tensor_get(got[2], i), eu8[i], "u8(%g) = %g", xs[i], smelt_tensor_get(got[2], i));
        cr_expect_eq(*(uint8_t *)t_elem(got[3], i), eb[i], "bool(%g)", xs[i]);
    }
    t_free_all(got, 4);
    smelt_plan_free(p);
    smelt_tensor_free(in);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* ---- NumPy 2's answers, bit for bit (tests/numpy-answers.h), on every backend -------- */
ParameterizedTestParameters(numpy, answers)
{
    static int backends[MAX_BACKENDS];
    int n = 0;
    while (n < MAX_BACKENDS && smelt_backend_name(n, NULL))
        backends[n] = n, n++;
    return cr_make_param_array(int, backends, (size_t)n);
}

ParameterizedTest(int *b, numpy, answers)
{
    const char *backend = smelt_backend_name(*b, NULL);
    smelt_ctx *ctx = backend_ctx(backend);
    for (int i = 0; i < NELEMS(np_cases); i++)
        t_check_np_case(ctx, backend, &np_cases[i]);
    smelt_ctx_free(ctx);
}

/* ---- hand-checked semantics (NumPy's) -------------------------------------------- */

/* Run a binary op on two small f64 or i32 vectors and compare with expected. */
static void check_binary(smelt_op op, smelt_dtype dt, int n, const double *a, const double *b,
                         const double *expect)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, NULL, dt, SHP(n)), *y = smelt_input(g, NULL, dt, SHP(n));
    smelt_node *z = smelt_binary(g, op, x, y);
    smelt_tensor *in[2] = {t_tensor(ctx, dt, SHP(n)), t_tensor(ctx, dt, SHP(n))};
    for (int i = 0; i < n; i++) {
        t_set(in[0], i, a[i]);
        t_set(in[1], i, b[i]);
    }
    smelt_tensor *ref = NULL;
    t_reference(ctx, g, 1, &z, 2, in, &ref);
    for (int opt = 0; opt <= 3; opt += 3) {
        smelt_plan *p = t_plan(ctx, g, 1, &z, opt);
        smelt_tensor *got = NULL;
        t_run(p, 2, in, 1, &got);
        for (int i = 0; i < n; i++) {
            double v = smelt_tensor_get(got, i), rv = smelt_tensor_get(ref, i);
            bool same = (isnan(v) && isnan(expect[i])) ||
                        (v == expect[i] && signbit(v) == signbit(expect[i]));
            bool rsame = (isnan(rv) && isnan(expect[i])) ||
                         (rv == expect[i] && signbit(rv) == signbit(expect[i]));
            cr_expect(same, "%s(%g, %g) on %s = %g, expected %g", smelt_op_name(op), a[i], b[i],
                      smelt_dtype_name(dt), v, expect[i]);
            cr_expect(rsame, "reference %s(%g, %g) on %s = %g, expected %g", smelt_op_name(op),
                      a[i], b[i], smelt_dtype_name(dt), rv, expect[i]);
        }
        smelt_tensor_free(got);
        smelt_plan_free(p);
    }
    smelt_tensor_free(ref);
    t_free_all(in, 2);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(semantics, float_floor_div_and_mod)
{
    static const double a[] = {-7.5, 7.5, 7.5, -7.5, 1.0, -1.0, 1.0, -0.0, 0.0, 6.0, INFINITY};
    static const double b[] = {2.0, -2.0, 2.0, -2.0, 0.0, 0.0, INFINITY, 1.0, -1.0, 3.0, 2.0};
    static const double fd[] = {-4, -4, 3, 3, INFINITY, -INFINITY, 0.0, -0.0, -0.0, 2, NAN};
    static const double md[] = {0.5, -0.5, 1.5, -1.5, NAN, NAN, 1.0, 0.0, -0.0, 0.0, NAN};
    for (int dt = SMELT_F32; dt <= SMELT_F64; dt++) {
        check_binary(SMELT_OP_FLOOR_DIV, (smelt_dtype)dt, NELEMS(a), a, b, fd);
        check_binary(SMELT_OP_MOD, (smelt_dtype)dt, NELEMS(a), a, b, md);
    }
}

Test(semantics, int_floor_div_mod_pow)
{
    static const double a[] = {-7, 7, 7, -7, 5, -5, -2147483648.0, -2147483648.0, 2, -1, 3, 1};
    static const double b[] = {2, -2, 2, -2, 0, 0, -1, 1, -1, -3, 4, -5};
    static const double fd[] = {-4, -4, 3, 3, 0, 0, -2147483648.0, -2147483648.0, -2, 0, 0, -1};
    static const double md[] = {1, -1, 1, -1, 0, 0, 0, 0, 0, -1, 3, -4};
    static const double pw[] = {49, 0, 49, 0, 1, 1, 0, -2147483648.0, 0, -1, 81, 1};
    check_binary(SMELT_OP_FLOOR_DIV, SMELT_I32, NELEMS(a), a, b, fd);
    check_binary(SMELT_OP_MOD, SMELT_I32, NELEMS(a), a, b, md);
    check_binary(SMELT_OP_POW, SMELT_I32, NELEMS(a), a, b, pw);
}

Test(semantics, nan_propagation_and_comparisons)
{
    static const double a[] = {NAN, 1.0, NAN, -1.0, 0.0, 2.0, -0.0};
    static const double b[] = {1.0, NAN, NAN, -1.0, 5.0, 3.0, 0.0};
    static const double mx[] = {NAN, NAN, NAN, -1.0, 5.0, 3.0, 0.0};
    static const double mn[] = {NAN, NAN, NAN, -1.0, 0.0, 2.0, 0.0};
    static const double eq[] = {0, 0, 0, 1, 0, 0, 1};
    static const double ne[] = {1, 1, 1, 0, 1, 1, 0};
    static const double lt[] = {0, 0, 0, 0, 1, 1, 0};
    static const double land[] = {1, 1, 1, 1, 0, 1, 0};
    for (int dt = SMELT_F32; dt <= SMELT_F64; dt++) {
        check_binary(SMELT_OP_MAXIMUM, (smelt_dtype)dt, NELEMS(a), a, b, mx);
        check_binary(SMELT_OP_MINIMUM, (smelt_dtype)dt, NELEMS(a), a, b, mn);
        check_binary(SMELT_OP_EQ, (smelt_dtype)dt, NELEMS(a), a, b, eq);
        check_binary(SMELT_OP_NE, (smelt_dtype)dt, NELEMS(a), a, b, ne);
        check_binary(SMELT_OP_LT, (smelt_dtype)dt, NELEMS(a), a, b, lt);
        check_binary(SMELT_OP_LOGICAL_AND, (smelt_dtype)dt, NELEMS(a), a, b, land);
    }
}

Test(semantics, integer_wraparound)
{
    static const double a[] = {2147483647.0, -2147483648.0, 65536, 70000};
    static const double b[] = {1, -1, 65536, -70000};
    static const double add[] = {-2147483648.0, 2147483647.0, 131072, 0};
    static const double mul[] = {2147483647.0, -2147483648.0, 0, -605032704.0};
    check_binary(SMELT_OP_ADD, SMELT_I32, NELEMS(a), a, b, add);
    check_binary(SMELT_OP_MUL, SMELT_I32, NELEMS(a), a, b, mul);
    static const double ua[] = {250, 3, 16, 0};
    static const double ub[] = {10, 5, 16, 1};
    static const double uadd[] = {4, 8, 32, 1};
    static const double usub[] = {240, 254, 0, 255};
    static const double umul[] = {196, 15, 0, 0};
    check_binary(SMELT_OP_ADD, SMELT_U8, NELEMS(ua), ua, ub, uadd);
    check_binary(SMELT_OP_SUB, SMELT_U8, NELEMS(ua), ua, ub, usub);
    check_binary(SMELT_OP_MUL, SMELT_U8, NELEMS(ua), ua, ub, umul);
}

Test(semantics, i64_negative_values_and_constants)
{
    /* negative i64 values and constants survive the reference and folding */
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, NULL, SMELT_I64, SHP(4));
    smelt_node *k = smelt_add(g, smelt_scalar(g, -3), smelt_const(g, -5, SMELT_I64)); /* folded */
    smelt_node *y = smelt_add(g, smelt_mul(g, x, smelt_scalar(g, -2)), k);
    smelt_tensor *in = t_tensor(ctx, SMELT_I64, SHP(4));
    static const int64_t xv[] = {-4, 0, 5, -1000000007};
    memcpy(smelt_tensor_data(in), xv, sizeof xv);
    smelt_tensor *ref = NULL;
    t_reference(ctx, g, 1, &y, 1, &in, &ref);
    for (int opt = 0; opt <= 3; opt++) {
        smelt_plan *p = t_plan(ctx, g, 1, &y, opt);
        smelt_tensor *got = NULL;
        t_run(p, 1, &in, 1, &got);
        for (int i = 0; i < 4; i++) {
            int64_t e = xv[i] * -2 - 8;
            cr_expect_eq(((int64_t *)smelt_tensor_data(got))[i], e, "opt %d [%d]: %lld", opt, i,
                         (long long)((int64_t *)smelt_tensor_data(got))[i]);
            cr_expect_eq(smelt_tensor_get(ref, i), (double)e, "reference [%d]: %g", i,
                         smelt_tensor_get(ref, i));
        }
        smelt_tensor_free(got);
        smelt_plan_free(p);
    }
    smelt_tensor_free(ref);
    smelt_tensor_free(in);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(semantics, weak_scalars_keep_f32)
{
    /* x * 2.5 + 1 in f32 is the f32 computation (no hidden f64) */
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, NULL, SMELT_F32, SHP(257));
    smelt_node *y = smelt_add(g, smelt_mul(g, x, smelt_scalar(g, 2.5)), smelt_scalar(g, 0.1));
    cr_assert_eq(smelt_node_dtype(y), SMELT_F32);
    smelt_tensor *in = t_rand(ctx, &r, SMELT_F32, SHP(257));
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    smelt_tensor *got = NULL;
    t_run(p, 1, &in, 1, &got);
    for (int i = 0; i < 257; i++) {
        float xv = ((float *)smelt_tensor_data(in))[i];
        volatile float m = xv * 2.5f;
        float e = m + 0.1f;
        cr_expect_eq(((float *)smelt_tensor_data(got))[i], e, "[%d]", i);
    }
    smelt_tensor_free(got);
    smelt_plan_free(p);
    smelt_tensor_free(in);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(semantics, where_with_bool_and_numeric_conditions)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_graph *g = t_graph(ctx);
    smelt_node *c = smelt_input(g, NULL, SMELT_BOOL, SHP(300));
    smelt_node *f = smelt_input(g, NULL, SMELT_F32, SHP(300));
    smelt_node *i = smelt_input(g, NULL, SMELT_I32, SHP(300));
    smelt_node *w1 = smelt_where(g, c, f, i);                   /* f32 with i32 -> f64 */
    smelt_node *w2 = smelt_where(g, f, i, smelt_scalar(g, -1)); /* numeric condition */
    smelt_node *w3 = smelt_where(g, smelt_binary(g, SMELT_OP_GT, f, smelt_scalar(g, 0)), c,
                                 smelt_const(g, 1, SMELT_BOOL));
    cr_assert_eq(smelt_node_dtype(w1), SMELT_F64);
    cr_assert_eq(smelt_node_dtype(w2), SMELT_I32);
    cr_assert_eq(smelt_node_dtype(w3), SMELT_BOOL);
    smelt_tensor *in[] = {t_rand(ctx, &r, SMELT_BOOL, SHP(300)), t_rand(ctx, &r, SMELT_F32, SHP(300)),
                          t_rand(ctx, &r, SMELT_I32, SHP(300))};
    for (int k = 0; k < 300; k += 7)
        t_set(in[1], k, k % 2 ? 0.0 : NAN); /* zero is false, NaN is true */
    smelt_node *outs[] = {w1, w2, w3};
    t_check_plan("where", ctx, g, 3, outs, 3, 3, in, T_EXACT);
    t_check_plan("where", ctx, g, 3, outs, 0, 3, in, T_EXACT);
    t_free_all(in, 3);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}
