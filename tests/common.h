/* Helpers shared by the Criterion suites: a seeded-per-test PRNG, tensor
 * construction and filling, running plans, comparing with the float64
 * reference interpreter (smelt_reference_eval) with ULP / relative-error
 * tolerances, and the operator table read from src/ir/ops.def.
 *
 * Every helper named t_* that can fail asserts (the test stops with the
 * status, its text and smelt_errmsg). */
#ifndef SMELT_TESTS_COMMON_H
#define SMELT_TESTS_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <criterion/criterion.h>

#include "smelt.h"

/* "ndim, shape" for a literal shape: smelt_input(g, NULL, SMELT_F32, SHP(3, 4)). */
#define SHP(...)                                                        \
    (int)(sizeof((const int64_t[]){__VA_ARGS__}) / sizeof(int64_t)),    \
        (const int64_t[]) { __VA_ARGS__ }
#define NELEMS(a) ((int)(sizeof(a) / sizeof((a)[0])))

/* Assert a call returns SMELT_OK, showing the status and the context's message. */
#define T_OK(ctx, expr)                                                                  \
    do {                                                                                 \
        int t_st_ = (expr);                                                              \
        cr_assert_eq(t_st_, SMELT_OK, "%s returned %d (%s): %s", #expr, t_st_,           \
                     smelt_strerror(t_st_), smelt_errmsg(ctx));                          \
    } while (0)

/* Assert a call fails with status code and that smelt_errmsg(ctx) contains text. */
#define T_ERR(ctx, expr, code, text)                                                     \
    do {                                                                                 \
        int t_st_ = (expr);                                                              \
        cr_assert_eq(t_st_, (code), "%s returned %d (%s), expected %d (%s); message: %s", \
                     #expr, t_st_, smelt_strerror(t_st_), (int)(code),                   \
                     smelt_strerror(code), smelt_errmsg(ctx));                           \
        cr_assert(t_contains(smelt_errmsg(ctx), (text)),                                 \
                  "%s: message \"%s\" does not mention \"%s\"", #expr, smelt_errmsg(ctx), \
                  (text));                                                               \
    } while (0)

bool t_contains(const char *haystack, const char *needle); /* NULL-safe strstr */

/* ---- the operator table, from src/ir/ops.def ------------------------------ */
typedef struct test_op {
    const char *name;
    int arity;
    const char *cls;    /* "SOURCE", "ELEMWISE", "LAYOUT", "CAST" */
    const char *rule;   /* "SAME", "FLOAT", "TRUEDIV", "CMP", "WHERE", "NONE" */
    const char *dtypes; /* letters of F I U B */
} test_op;
extern const test_op test_ops[SMELT_OP_COUNT];

/* The operator the builder makes of op on operands of dtype dt (bitwise
 * ones on bool are logical), the compute dtype it uses, whether the table
 * says it supports it, and the result dtype. */
smelt_op t_builder_op(smelt_op op, smelt_dtype dt);
smelt_dtype t_compute_dtype(smelt_op op, smelt_dtype dt);
bool t_op_supports(smelt_op op, smelt_dtype dt);
smelt_dtype t_result_dtype(smelt_op op, smelt_dtype dt);
bool t_is_float(smelt_dtype dt); /* f32 f64 f16 bf16 */
bool t_is_half(smelt_dtype dt);  /* f16 bf16 */

/* f16 / bf16 computed independently of the library: v rounded to dt (to
 * nearest even; overflow to infinity), its bit pattern, a pattern's value,
 * the largest finite value. */
double t_round_half(smelt_dtype dt, double v);
uint16_t t_half_bits(smelt_dtype dt, double v);
double t_half_value(smelt_dtype dt, uint16_t h);
double t_half_max(smelt_dtype dt);

/* ---- PRNG (splitmix64), seeded per test ---------------------------------
 * The seed mixes the suite and test name, a salt (e.g. a parameter index)
 * and SMELT_TEST_SEED from the environment (default 0), so every test gets
 * its own reproducible stream and a different SMELT_TEST_SEED gives fresh
 * data.  Failure messages print the seed. */
typedef struct trng {
    uint64_t s;
    uint64_t seed;
} trng;
void trng_init(trng *r, uint64_t salt);
uint64_t trng_u64(trng *r);
double trng_unit(trng *r);                            /* [0, 1) */
double trng_uniform(trng *r, double lo, double hi);   /* [lo, hi) */
int64_t trng_range(trng *r, int64_t lo, int64_t hi);  /* [lo, hi], inclusive */
/* Random sign (or positive only) and log-uniform magnitude in [lo, hi]. */
double trng_logmag(trng *r, double lo, double hi, bool positive);

/* ---- tensors ------------------------------------------------------------ */
/* A context pinned to the TCC backend: deterministic (AUTO may switch a
 * plan to an optimising tier between runs, or pick a GPU) and fast to
 * compile.  t_ctx_raw: the environment's / default choice. */
smelt_ctx *t_ctx(void);
smelt_ctx *t_ctx_raw(void);
smelt_graph *t_graph(smelt_ctx *ctx);
smelt_tensor *t_tensor(smelt_ctx *ctx, smelt_dtype dt, int ndim, const int64_t *shape);
/* Address of logical (row-major) element i of any view. */
void *t_elem(const smelt_tensor *t, int64_t i);
/* Store v converted to t's dtype (integers: clamped to the dtype's range;
 * bool: v != 0). */
void t_set(smelt_tensor *t, int64_t i, double v);
void t_set_i64(smelt_tensor *t, int64_t i, int64_t v);
/* Floats: uniform in [lo, hi); integers: uniform in [lo, hi] clamped to the
 * dtype; bool: random 0/1. */
void t_fill_uniform(smelt_tensor *t, trng *r, double lo, double hi);
/* A new tensor with the default domain: floats with random sign and
 * magnitude in [0.25, 2) (never zero), integers in [-50, 50] (u8 [1, 255]),
 * bool random. */
smelt_tensor *t_rand(smelt_ctx *ctx, trng *r, smelt_dtype dt, int ndim, const int64_t *shape);
void t_free_all(smelt_tensor **t, int n);

/* ---- plans --------------------------------------------------------------- */
smelt_plan *t_plan(smelt_ctx *ctx, smelt_graph *g, int n_out, smelt_node *const *outs,
                   int opt_level);
void t_run(smelt_plan *p, int n_in, smelt_tensor *const *in, int n_out, smelt_tensor **out);
smelt_plan_stats t_stats(const smelt_plan *p);
/* Float64 reference results (new tensors). */
void t_reference(smelt_ctx *ctx, smelt_graph *g, int n_out, smelt_node *const *outs, int n_in,
                 smelt_tensor *const *in, smelt_tensor **ref);

/* ---- comparison -----------------------------------------------------------
 * A result of dtype dt is compared with the reference value rounded to dt.
 * Integers and bool must be exact.  Floats: NaN must match NaN; otherwise
 * equal, or at most ulps units in the last place of dt apart, or within
 * atol + rtol * |ref| (+ an extra absolute slack given per element).
 * zero_sign: 0.0 and -0.0 differ. */
typedef struct t_tol {
    double ulps, atol, rtol;
    bool zero_sign;
} t_tol;
#define T_EXACT ((t_tol){0, 0, 0, false})
/* Several operators in a row: each rounds to dt where the reference keeps
 * double precision, and subtractions cancel: 16 ulps, or 64 eps of dt
 * absolute (f32: 7.6e-6, f64: 1.4e-14) for values of magnitude ~1. */
t_tol t_chain_tol(smelt_dtype dt);
#define T_CHAIN ((t_tol){16, 64 * 1.1920928955078125e-07, 0, false}) /* t_chain_tol(SMELT_F32) */

/* Distance in units in the last place of dt (any float dtype) between a and b
 * (both rounded to dt); 0 for 0.0 vs -0.0; INT64_MAX when one is NaN. */
int64_t t_ulp_distance(double a, double b, smelt_dtype dt);
/* |got - ref| / |ref| (|got - ref| when ref is 0). */
double t_rel_error(double got, double ref);
/* Machine epsilon of a float dtype. */
double t_eps(smelt_dtype dt);
bool t_close(double got, double ref, smelt_dtype dt, const t_tol *tol, double extra_atol);
/* Assert that every element of got (any dtype, any strides) matches ref
 * (f64, same shape).  label names the case in the failure message. */
void t_expect_match(const char *label, const smelt_tensor *got, const smelt_tensor *ref,
                    t_tol tol);
/* Build a plan at opt_level, run it on in, and compare every output with the
 * reference.  Returns the plan's stats. */
smelt_plan_stats t_check_plan(const char *label, smelt_ctx *ctx, smelt_graph *g, int n_out,
                              smelt_node *const *outs, int opt_level, int n_in,
                              smelt_tensor *const *in, t_tol tol);
/* Same dtype, shape and bytes of every element. */
bool t_bitwise_equal(const smelt_tensor *a, const smelt_tensor *b);
/* ---- results as a function of the graph and the inputs only -----------------
 * (tests/test-bitwise.c, test-cuda.c): every elementwise operator that takes
 * dt, applied to three inputs x0 x1 x2 of dt and shape (n), one output each,
 * and for a float dt pow(x0, c) with T_ALL_OPS_POWS constant exponents c
 * (which a compiler specialises); at most T_ALL_OPS_MAX outputs, their number
 * returned.  t_mixed_inputs fills the inputs with special values (+-0, +-inf,
 * NaN, subnormals, extremes, thresholds of the math functions) and random
 * values over many magnitudes. */
#define T_ALL_OPS_POWS 6
#define T_ALL_OPS_MAX (SMELT_OP_COUNT + T_ALL_OPS_POWS)
int t_all_ops_graph(smelt_graph *g, smelt_dtype dt, int64_t n, smelt_node **outs);
/* The indexed reads every backend's tests share: W [300, 97] f32, ids
 * [5, 61] i32, sel [300, 33] i64 (indices in [-97, 96], negative ones
 * too) into in[0..2]; outs: tanh(take(W, ids, 0)), take_along_axis(W,
 * sel, 1) * 0.5, take(W, ids, 1).  Returns the graph (status checked). */
smelt_graph *t_gather_case(smelt_ctx *ctx, trng *r, smelt_node *outs[3], smelt_tensor *in[3]);
void t_mixed_inputs(trng *r, smelt_tensor **in, int n_in);
/* The same bits (NaN: any NaN, its payload aside), else the first index that
 * differs through *where */
bool t_same_results(const smelt_tensor *a, const smelt_tensor *b, int64_t *where);
/* Index of the first element whose bytes differ (same dtype and shape
 * assumed), or -1. */
int64_t t_first_difference(const smelt_tensor *a, const smelt_tensor *b);

/* ---- templates that fail to compile fused kernels ------------------------
 * Points SMELT_TEMPLATE_DIR at tests/templates (from SMELT_TEST_TEMPLATES,
 * set by tests/meson.build), whose kernel templates contain
 * `#error injected failure for fused kernels` when {{NOPS}} > 1. */
const char *t_use_failing_templates(void);
/* Read a whole file (asserts). Caller frees. */
char *t_read_file(const char *path);
char *t_read_file_n(const char *path, size_t *len); /* and its size */
void t_write_file(const char *path, const char *text);

#endif
