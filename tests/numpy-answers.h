/* NumPy 2's answers to expressions on special values (included by the
 * suites that run them). */
#ifndef SMELT_TEST_NUMPY_ANSWERS_H
#define SMELT_TEST_NUMPY_ANSWERS_H
#include <math.h>

#include "common.h"

/* Expressions whose results NumPy 2 (2.4, on x86-64) computed from these
 * inputs, written out here: NaN, infinities and the sign of zero included,
 * and NumPy's result dtype.  t_check_np_case runs one on ctx's backend,
 * unfused (opt_level 0) and fused (3), and through the reference: all must
 * give these bits (tests/test-ops.c: TCC and CC; tests/test-cuda.c: the
 * CUDA kernels, on tests/fakecuda.c or a GPU). */
typedef struct np_case {
    const char *expr; /* over x, y, z */
    smelt_dtype dt, out;
    int n;
    double x[8], y[8], z[8], want[8];
} np_case;

static const np_case np_cases[] = {
    {"maximum(x, y)", SMELT_F16, SMELT_F16, 6, {0.0, -0.0, 1.0, NAN, -0.0, 2.0}, {-0.0, 0.0, NAN, 1.0, -0.0, -3.0}, {0}, {0.0, -0.0, NAN, NAN, -0.0, 2.0}},
    {"minimum(x, y)", SMELT_F16, SMELT_F16, 6, {0.0, -0.0, 1.0, NAN, -0.0, 2.0}, {-0.0, 0.0, NAN, 1.0, -0.0, -3.0}, {0}, {0.0, -0.0, NAN, NAN, -0.0, -3.0}},
    {"maximum(x, y)", SMELT_F32, SMELT_F32, 6, {0.0, -0.0, 1.0, NAN, -0.0, 2.0}, {-0.0, 0.0, NAN, 1.0, -0.0, -3.0}, {0}, {-0.0, 0.0, NAN, NAN, -0.0, 2.0}},
    {"minimum(x, y)", SMELT_F32, SMELT_F32, 6, {0.0, -0.0, 1.0, NAN, -0.0, 2.0}, {-0.0, 0.0, NAN, 1.0, -0.0, -3.0}, {0}, {-0.0, 0.0, NAN, NAN, -0.0, -3.0}},
    {"maximum(x, y)", SMELT_F64, SMELT_F64, 6, {0.0, -0.0, 1.0, NAN, -0.0, 2.0}, {-0.0, 0.0, NAN, 1.0, -0.0, -3.0}, {0}, {-0.0, 0.0, NAN, NAN, -0.0, 2.0}},
    {"minimum(x, y)", SMELT_F64, SMELT_F64, 6, {0.0, -0.0, 1.0, NAN, -0.0, 2.0}, {-0.0, 0.0, NAN, 1.0, -0.0, -3.0}, {0}, {-0.0, 0.0, NAN, NAN, -0.0, -3.0}},
    {"clip(x, y, z)", SMELT_F16, SMELT_F16, 7, {0.5, 0.5, 0.5, NAN, 5.0, -1.0, 0.25}, {3.0, NAN, 0.0, 0.0, 0.0, 0.0, 0.0}, {1.0, 1.0, NAN, 1.0, 1.0, 1.0, 1.0}, {1.0, NAN, NAN, NAN, 1.0, 0.0, 0.25}},
    {"clip(x, y, z)", SMELT_F32, SMELT_F32, 7, {0.5, 0.5, 0.5, NAN, 5.0, -1.0, 0.25}, {3.0, NAN, 0.0, 0.0, 0.0, 0.0, 0.0}, {1.0, 1.0, NAN, 1.0, 1.0, 1.0, 1.0}, {1.0, NAN, NAN, NAN, 1.0, 0.0, 0.25}},
    {"clip(x, y, z)", SMELT_F64, SMELT_F64, 7, {0.5, 0.5, 0.5, NAN, 5.0, -1.0, 0.25}, {3.0, NAN, 0.0, 0.0, 0.0, 0.0, 0.0}, {1.0, 1.0, NAN, 1.0, 1.0, 1.0, 1.0}, {1.0, NAN, NAN, NAN, 1.0, 0.0, 0.25}},
    {"clip(x, y, z)", SMELT_F32, SMELT_F32, 4, {-0.0, 0.0, -0.0, 0.0}, {0.0, -0.0, -0.0, 0.0}, {1.0, -0.0, -0.0, 0.0}, {0.0, -0.0, -0.0, 0.0}},
    {"clip(x, y, z)", SMELT_F64, SMELT_F64, 4, {-0.0, 0.0, -0.0, 0.0}, {0.0, -0.0, -0.0, 0.0}, {1.0, -0.0, -0.0, 0.0}, {0.0, -0.0, -0.0, 0.0}},
    {"clip(x, y, z)", SMELT_I32, SMELT_I32, 4, {5.0, 0.0, 2.0, -7.0}, {3.0, 3.0, 1.0, -9.0}, {1.0, 1.0, 4.0, -8.0}, {1.0, 1.0, 2.0, -8.0}},
    {"uint8(x)", SMELT_F64, SMELT_U8, 8, {2147483648.0, 2147483653.0, 1099511627779.0, 4.611686018427388e+18, -1.0, -3.7, 255.9, 256.5}, {0}, {0}, {0.0, 0.0, 0.0, 0.0, 255.0, 253.0, 255.0, 0.0}},
    {"uint8(x)", SMELT_F64, SMELT_U8, 8, {NAN, INFINITY, -INFINITY, 2147483647.0, -2147483648.0, -2147483649.0, 4000000000.0, -1e+19}, {0}, {0}, {0.0, 0.0, 0.0, 255.0, 0.0, 0.0, 0.0, 0.0}},
    {"uint8(x)", SMELT_F32, SMELT_U8, 8, {3000000000.0, -1.0, 300.5, 2147483648.0, -2147483648.0, 65535.0, -3000000000.0, 1.0000000200408773e+20}, {0}, {0}, {0.0, 255.0, 44.0, 0.0, 0.0, 255.0, 0.0, 0.0}},
    {"uint8(x)", SMELT_F16, SMELT_U8, 6, {65504.0, -65504.0, 300.0, -3.5, NAN, INFINITY}, {0}, {0}, {224.0, 32.0, 44.0, 253.0, 0.0, 0.0}},
    {"x < 300", SMELT_U8, SMELT_BOOL, 3, {0.0, 100.0, 255.0}, {0}, {0}, {1.0, 1.0, 1.0}},
    {"x >= -1", SMELT_U8, SMELT_BOOL, 3, {0.0, 100.0, 255.0}, {0}, {0}, {1.0, 1.0, 1.0}},
    {"x != 256", SMELT_U8, SMELT_BOOL, 3, {0.0, 100.0, 255.0}, {0}, {0}, {1.0, 1.0, 1.0}},
    {"x == 2147483648", SMELT_I32, SMELT_BOOL, 3, {0.0, 2147483647.0, -2147483648.0}, {0}, {0}, {0.0, 0.0, 0.0}},
    {"x > -2147483649", SMELT_I32, SMELT_BOOL, 3, {0.0, 2147483647.0, -2147483648.0}, {0}, {0}, {1.0, 1.0, 1.0}},
    {"-4294967296 < x", SMELT_I32, SMELT_BOOL, 3, {0.0, 2147483647.0, -2147483648.0}, {0}, {0}, {1.0, 1.0, 1.0}},
    {"x * (abs(-3) + 0.5)", SMELT_F32, SMELT_F64, 3, {0.10000000149011612, -2.5, 3.0}, {0}, {0}, {0.3500000052154064, -8.75, 10.5}},
    {"x * sqrt(2)", SMELT_F32, SMELT_F64, 3, {0.10000000149011612, -2.5, 3.0}, {0}, {0}, {0.14142135834465194, -3.5355339059327378, 4.242640687119286}},
    {"x * (3 + 0.5)", SMELT_F32, SMELT_F32, 3, {0.10000000149011612, -2.5, 3.0}, {0}, {0}, {0.3499999940395355, -8.75, 10.5}},
    {"x + maximum(2, 3)", SMELT_I32, SMELT_I64, 3, {1.0, -2.0, 2147483647.0}, {0}, {0}, {4.0, 1.0, 2147483650.0}},
    {"bitwise_and(x, y)", SMELT_BOOL, SMELT_BOOL, 4, {1.0, 1.0, 0.0, 0.0}, {1.0, 0.0, 1.0, 0.0}, {0}, {1.0, 0.0, 0.0, 0.0}},
    {"bitwise_or(x, y)", SMELT_BOOL, SMELT_BOOL, 4, {1.0, 1.0, 0.0, 0.0}, {1.0, 0.0, 1.0, 0.0}, {0}, {1.0, 1.0, 1.0, 0.0}},
    {"bitwise_xor(x, y)", SMELT_BOOL, SMELT_BOOL, 4, {1.0, 1.0, 0.0, 0.0}, {1.0, 0.0, 1.0, 0.0}, {0}, {0.0, 1.0, 1.0, 0.0}},
    {"invert(x)", SMELT_BOOL, SMELT_BOOL, 4, {1.0, 1.0, 0.0, 0.0}, {0}, {0}, {0.0, 0.0, 1.0, 1.0}},
    {"bitwise_not(x)", SMELT_BOOL, SMELT_BOOL, 4, {1.0, 1.0, 0.0, 0.0}, {0}, {0}, {0.0, 0.0, 1.0, 1.0}},
    {"round(x)", SMELT_BOOL, SMELT_F16, 2, {1.0, 0.0}, {0}, {0}, {1.0, 0.0}},
    {"rint(x)", SMELT_BOOL, SMELT_F16, 2, {1.0, 0.0}, {0}, {0}, {1.0, 0.0}},
    {"rint(x)", SMELT_I32, SMELT_F64, 3, {3.0, -7.0, 2147483647.0}, {0}, {0}, {3.0, -7.0, 2147483647.0}},
    {"round(x)", SMELT_I32, SMELT_I32, 3, {3.0, -7.0, 2147483647.0}, {0}, {0}, {3.0, -7.0, 2147483647.0}},
    {"reciprocal(x)", SMELT_I32, SMELT_I32, 7, {1.0, 2.0, 0.0, -1.0, -3.0, 2147483647.0, -2147483648.0}, {0}, {0}, {1.0, 0.0, -2147483648.0, -1.0, 0.0, 0.0, 0.0}},
    {"reciprocal(x)", SMELT_U8, SMELT_U8, 4, {0.0, 1.0, 2.0, 255.0}, {0}, {0}, {0.0, 1.0, 0.0, 0.0}},
    {"reciprocal(x)", SMELT_I64, SMELT_I64, 4, {0.0, 1.0, -1.0, 7.0}, {0}, {0}, {-9.223372036854776e+18, 1.0, -1.0, 0.0}},
    {"fmod(x, y)", SMELT_I32, SMELT_I32, 6, {7.0, -7.0, 7.0, -7.0, 5.0, -2147483648.0}, {3.0, 3.0, -3.0, 0.0, -1.0, -1.0}, {0}, {1.0, -1.0, 1.0, 0.0, 0.0, 0.0}},
    {"fmod(x, y)", SMELT_U8, SMELT_U8, 3, {200.0, 7.0, 9.0}, {0.0, 255.0, 4.0}, {0}, {0.0, 7.0, 1.0}},
    {"fmod(x, y)", SMELT_F64, SMELT_F64, 6, {7.5, -7.5, -0.0, INFINITY, 1.0, 5.0}, {2.0, 2.0, 1.0, 1.0, 0.0, INFINITY}, {0}, {1.5, -1.5, -0.0, NAN, NAN, 5.0}},
    {"fmod(x, y)", SMELT_F32, SMELT_F32, 6, {7.5, -7.5, -0.0, INFINITY, 1.0, 5.0}, {2.0, 2.0, 1.0, 1.0, 0.0, INFINITY}, {0}, {1.5, -1.5, -0.0, NAN, NAN, 5.0}},
    {"copy(x) + conj(x)", SMELT_F32, SMELT_F32, 3, {1.5, -0.0, NAN}, {0}, {0}, {3.0, -0.0, NAN}},
    {"ones_like(x)", SMELT_F32, SMELT_F32, 3, {1.5, -0.0, NAN}, {0}, {0}, {1.0, 1.0, 1.0}},
    {"ones_like(x)", SMELT_BOOL, SMELT_BOOL, 2, {1.0, 0.0}, {0}, {0}, {1.0, 1.0}},
    {"ones_like(x)", SMELT_U8, SMELT_U8, 2, {0.0, 7.0}, {0}, {0}, {1.0, 1.0}},
    /* bf16, which NumPy lacks: ml_dtypes' bfloat16 ties as float32 does */
    {"maximum(x, y)", SMELT_BF16, SMELT_BF16, 6, {0.0, -0.0, 1.0, NAN, -0.0, 2.0}, {-0.0, 0.0, NAN, 1.0, -0.0, -3.0}, {0}, {-0.0, 0.0, NAN, NAN, -0.0, 2.0}},
    {"minimum(x, y)", SMELT_BF16, SMELT_BF16, 6, {0.0, -0.0, 1.0, NAN, -0.0, 2.0}, {-0.0, 0.0, NAN, 1.0, -0.0, -3.0}, {0}, {-0.0, 0.0, NAN, NAN, -0.0, -3.0}},
};

static void t_check_np_case(smelt_ctx *ctx, const char *backend, const np_case *c)
{
    smelt_graph *g = t_graph(ctx);
    const char *names[] = {"x", "y", "z"};
    smelt_node *in[3];
    smelt_tensor *t[3];
    const double *vals[] = {c->x, c->y, c->z};
    for (int k = 0; k < 3; k++) {
        in[k] = smelt_input(g, names[k], c->dt, SHP(c->n));
        t[k] = t_tensor(ctx, c->dt, SHP(c->n));
        for (int i = 0; i < c->n; i++)
            t_set(t[k], i, vals[k][i]);
    }
    smelt_node *y = smelt_expr(g, c->expr, names, in, 3);
    cr_expect_not_null(y, "%s on %s: %s", c->expr, smelt_dtype_name(c->dt), smelt_graph_errmsg(g));
    cr_expect(!y || smelt_node_dtype(y) == c->out, "%s on %s gives %s, NumPy %s", c->expr,
              smelt_dtype_name(c->dt), smelt_dtype_name(smelt_node_dtype(y)), smelt_dtype_name(c->out));
    if (!y || smelt_node_dtype(y) != c->out) { /* the next case */
        t_free_all(t, 3);
        smelt_graph_free(g);
        return;
    }
    smelt_tensor *got[3] = {0};
    t_reference(ctx, g, 1, &y, 3, t, &got[2]);
    for (int opt = 0; opt < 2; opt++) {
        smelt_plan *p = t_plan(ctx, g, 1, &y, opt * 3);
        t_run(p, 3, t, 1, &got[opt]);
        smelt_plan_free(p);
    }
    static const char *const how[] = {"unfused", "fused", "reference"};
    bool fl = t_is_float(c->out);
    for (int k = 0; k < 3; k++)
        for (int i = 0; i < c->n; i++) {
            double v = smelt_tensor_get(got[k], i), w = c->want[i];
            if (k == 2 && c->out == SMELT_F32) /* the reference keeps f32 results in double */
                v = (double)(float)v;
            cr_expect((isnan(v) && isnan(w)) || (v == w && (!fl || signbit(v) == signbit(w))),
                      "%s, %s: %s with x=%g y=%g z=%g (%s) = %g, NumPy %g", backend, how[k], c->expr,
                      c->x[i], c->y[i], c->z[i], smelt_dtype_name(c->dt), v, w);
        }
    cr_expect(t_bitwise_equal(got[0], got[1]), "%s: %s: fused and unfused differ", backend, c->expr);
    t_free_all(got, 3);
    t_free_all(t, 3);
    smelt_graph_free(g);
}

#endif
