/* smelt's own math functions (templates/common/math.h.in) compiled into the
 * library: constant folding computes a transcendental operator with the very
 * code every kernel runs, so folded and computed values are the same bits. */
#include <string.h>

#include "internal.h"
#include "mathlib.h"

#define F1(fn) {#fn, smelt_##fn##_f64, smelt_##fn##_f32, NULL, NULL},
#define F2(fn) {#fn, NULL, NULL, smelt_##fn##_f64, smelt_##fn##_f32},
static const struct {
    const char *name;
    double (*d1)(double);
    float (*f1)(float);
    double (*d2)(double, double);
    float (*f2)(float, float);
} fns[] = {
    F1(exp) F1(exp2) F1(expm1) F1(log) F1(log2) F1(log10) F1(log1p) F1(sin) F1(cos) F1(tan)
    F1(asin) F1(acos) F1(atan) F1(sinh) F1(cosh) F1(tanh) F1(asinh) F1(acosh) F1(atanh)
    F1(erf) F1(erfc) F1(sigmoid) F1(silu) F1(gelu) F1(gelu_tanh) F1(softplus) F2(pow) F2(atan2)
};

/* The operator's kernel expression is "smelt_<fn>_%S(...)": compute it in
 * the compute dtype ct (f32 for f16/bf16, whose result the caller rounds). */
bool smelt__math_eval(smelt_op op, smelt_dtype ct, const double *a, double *y)
{
    const char *e = smelt__ops[op].c_float;
    if (!e || strncmp(e, "smelt_", 6) || !(ct == SMELT_F64 || ct == SMELT_F32))
        return false;
    const char *end = strstr(e, "_%S(");
    for (size_t i = 0; end && i < sizeof fns / sizeof fns[0]; i++) {
        if (strlen(fns[i].name) != (size_t)(end - e - 6) || strncmp(fns[i].name, e + 6, (size_t)(end - e - 6)))
            continue;
        if (fns[i].d1)
            *y = ct == SMELT_F64 ? fns[i].d1(a[0]) : fns[i].f1((float)a[0]);
        else
            *y = ct == SMELT_F64 ? fns[i].d2(a[0], a[1]) : fns[i].f2((float)a[0], (float)a[1]);
        return true;
    }
    return false;
}
