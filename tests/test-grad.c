/* Gradients (smelt_grad, smelt_grad_ct; src/ir/grad.c, src/ir/grad.def):
 * every rule against central finite differences in float64 through smelt
 * plans, at random points (away from kinks, which random points miss);
 * second order (the gradient of a gradient); the fused plan (opt_level 3)
 * gives the unfused one's bits (opt_level 0), in f64 and f32; JAX's tie
 * conventions; zero gradients through integer values; errors; a 2-layer
 * MLP trained with Adam, its parameters and state donated and updated in
 * place, to the same loss bits on TCC and CC, on 1 and 2 threads. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#define MAXIN 4

typedef struct gcase gcase;
typedef smelt_node *(*build_fn)(smelt_graph *g, smelt_node *const *x, const gcase *c);
struct gcase {
    const char *label;
    build_fn fn;
    int nin;
    int ndim[MAXIN];
    int64_t shape[MAXIN][SMELT_MAX_DIMS];
    double lo[MAXIN], hi[MAXIN]; /* uniform in [lo, hi); both 0: random sign, magnitude in [0.25, 2) */
    smelt_op op;                 /* for the builders generic over an operator */
    int64_t arg[8];              /* their parameters (axes, bounds, ...) */
    bool fixed_dt;               /* the inputs' dtypes are in_dt, not the run's */
    smelt_dtype in_dt[MAXIN];
    double tol;                  /* finite differences: |grad - fd| <= tol (1 + |fd|); 0: 1e-6 */
    double h;                    /* their step, relative to max(1, |x|); 0: 1e-5 (f64), 2^-8 (f32) */
    bool no_f32;                 /* no f32 run (f64 only) */
    double ref_scale;            /* f32 against the reference: the absolute tolerance's scale (0: 1) */
    bool no_copies;              /* the fused plan lays out no value anew (views' transposes are views) */
};

static double draw(trng *r, const gcase *c, int i)
{
    if (c->lo[i] == 0 && c->hi[i] == 0) {
        double m = trng_uniform(r, 0.25, 2.0);
        return (trng_u64(r) & 1) ? -m : m;
    }
    return trng_uniform(r, c->lo[i], c->hi[i]);
}

/* sum(w * y), y and w of one shape */
static double dot(const smelt_tensor *y, const smelt_tensor *w)
{
    double s = 0;
    for (int64_t i = 0; i < smelt_tensor_numel(y); i++)
        s += smelt_tensor_get(y, i) * smelt_tensor_get(w, i);
    return s;
}

/* Build c's function on inputs of dtype dt, y = f(x), the gradient of
 * sum(w * y) with respect to each input (w a random cotangent input), and
 * check: opt_level 3 gives the bits of opt_level 0; with fd, each element
 * of each gradient against the central difference of sum(w * f) (a plan of
 * the forward alone, run on the input with that element moved by +-h). */
static void run_case(const gcase *c, smelt_dtype dt, bool fd, uint64_t salt)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x[MAXIN];
    for (int i = 0; i < c->nin; i++) {
        char name[8];
        snprintf(name, sizeof name, "x%d", i);
        x[i] = smelt_input(g, name, c->fixed_dt ? c->in_dt[i] : dt, c->ndim[i], c->shape[i]);
    }
    smelt_node *y = c->fn(g, x, c);
    cr_assert_eq(smelt_graph_status(g), SMELT_OK, "%s: %s", c->label, smelt_graph_errmsg(g));
    smelt_node *w = smelt_input(g, "w", smelt_node_dtype(y), smelt_node_ndim(y), smelt_node_shape(y));
    smelt_node *outs[1 + MAXIN];
    outs[0] = y;
    int st = smelt_grad_ct(g, 1, &y, &w, c->nin, x, outs + 1);
    cr_assert_eq(st, SMELT_OK, "%s: smelt_grad_ct: %s", c->label, smelt_errmsg(ctx));
    for (int i = 0; i < c->nin; i++) {
        cr_assert_eq(smelt_node_dtype(outs[1 + i]), smelt_node_dtype(x[i]), "%s: gradient %d's dtype", c->label, i);
        cr_assert_eq(smelt_node_ndim(outs[1 + i]), smelt_node_ndim(x[i]), "%s: gradient %d's rank", c->label, i);
        cr_assert(!memcmp(smelt_node_shape(outs[1 + i]), smelt_node_shape(x[i]),
                          sizeof(int64_t) * (size_t)smelt_node_ndim(x[i])), "%s: gradient %d's shape", c->label, i);
    }
    trng r;
    trng_init(&r, salt);
    smelt_tensor *in[MAXIN + 1];
    for (int i = 0; i < c->nin; i++) {
        in[i] = t_tensor(ctx, smelt_node_dtype(x[i]), c->ndim[i], c->shape[i]);
        for (int64_t j = 0; j < smelt_tensor_numel(in[i]); j++)
            t_set(in[i], j, draw(&r, c, i));
    }
    in[c->nin] = t_rand(ctx, &r, smelt_node_dtype(w), smelt_node_ndim(y), smelt_node_shape(y));
    int nin = c->nin + 1, nout = c->nin + 1;

    smelt_plan *p3 = t_plan(ctx, g, nout, outs, 3), *p0 = t_plan(ctx, g, nout, outs, 0);
    smelt_tensor *got[1 + MAXIN] = {NULL}, *un[1 + MAXIN] = {NULL};
    t_run(p3, nin, in, nout, got);
    if (c->no_copies)
        cr_assert_eq(t_stats(p3).copies, 0, "%s: %d copies\n%s", c->label, t_stats(p3).copies, smelt_plan_describe(p3));
    t_run(p0, nin, in, nout, un);
    for (int k = 0; k < nout; k++) {
        int64_t at;
        cr_assert(t_same_results(got[k], un[k], &at), "%s (%s): output %d: fused %a, unfused %a at [%lld] (seed %llu)\n%s",
                  c->label, smelt_dtype_name(dt), k, smelt_tensor_get(got[k], at), smelt_tensor_get(un[k], at),
                  (long long)at, (unsigned long long)r.seed, smelt_plan_describe(p3));
    }
    /* and against the float64 reference interpreter on the same graph: in
     * f64, rounding apart; in f32, each operator rounding to f32 where the
     * reference keeps double precision (also where a case mixes in f32) */
    smelt_tensor *ref[1 + MAXIN] = {NULL};
    t_reference(ctx, g, nout, outs, nin, in, ref);
    for (int k = 0; k < nout; k++) {
        char what[96];
        snprintf(what, sizeof what, "%s (%s): output %d against the reference", c->label, smelt_dtype_name(dt), k);
        t_expect_match(what, got[k], ref[k], dt == SMELT_F64 && !c->fixed_dt ? (t_tol){64, 1e-13, 1e-12, false}
                                                             : (t_tol){64, 2e-5 * (c->ref_scale ? c->ref_scale : 1), 2e-5, false});
    }
    t_free_all(ref, nout);
    if (fd) {
        smelt_plan *pf = t_plan(ctx, g, 1, &y, 3);
        double tol = c->tol ? c->tol : 1e-6;
        for (int i = 0; i < c->nin; i++) {
            bool single = smelt_node_dtype(x[i]) != SMELT_F64;
            for (int64_t j = 0; j < smelt_tensor_numel(in[i]); j++) {
                double x0 = smelt_tensor_get(in[i], j), h = (c->h ? c->h : single ? 1.0 / 256 : 1e-5) * fmax(1.0, fabs(x0)), l[2], xs[2];
                for (int s = 0; s < 2; s++) {
                    t_set(in[i], j, s ? x0 - h : x0 + h);
                    xs[s] = smelt_tensor_get(in[i], j); /* the value the plan reads */
                    smelt_tensor *yo = NULL;
                    t_run(pf, nin, in, 1, &yo);
                    l[s] = dot(yo, in[c->nin]);
                    smelt_tensor_free(yo);
                }
                t_set(in[i], j, x0);
                double want = (l[0] - l[1]) / (xs[0] - xs[1]), have = smelt_tensor_get(got[1 + i], j);
                cr_assert(fabs(have - want) <= tol * (1 + fabs(want)),
                          "%s: d/dx%d[%lld] at x = %.17g: the gradient is %.17g, finite differences %.17g (seed %llu)",
                          c->label, i, (long long)j, x0, have, want, (unsigned long long)r.seed);
            }
        }
        smelt_plan_free(pf);
    }
    t_free_all(got, nout);
    t_free_all(un, nout);
    t_free_all(in, nin);
    smelt_plan_free(p3);
    smelt_plan_free(p0);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

static void check(const gcase *c, uint64_t salt)
{
    run_case(c, SMELT_F64, true, salt);
    if (!c->no_f32 && !c->fixed_dt)
        run_case(c, SMELT_F32, false, salt + 1);
}

/* a float result as it is, another as the first input's dtype */
static smelt_node *as_float(smelt_graph *g, smelt_node *y, smelt_node *like)
{
    smelt_dtype dt = smelt_node_dtype(y);
    return (dt == SMELT_F32 || dt == SMELT_F64) ? y : smelt_cast(g, y, smelt_node_dtype(like));
}

/* ---- every elementwise operator ------------------------------------------ */

static smelt_node *f_elem(smelt_graph *g, smelt_node *const *x, const gcase *c)
{
    smelt_node *args[3] = {x[0], c->nin > 1 ? x[1] : NULL, c->nin > 2 ? x[2] : NULL};
    if (c->op == SMELT_OP_WHERE) /* the condition from the first input */
        args[0] = smelt_binary(g, SMELT_OP_GT, x[0], smelt_scalar(g, 0));
    return as_float(g, smelt_op_apply(g, c->op, c->nin, args), x[0]);
}

/* the domain of op's operands (both 0: the default) */
static void domain(smelt_op op, int i, double *lo, double *hi)
{
    const char *n = smelt_op_name(op);
    static const struct {
        const char *name;
        double lo[3], hi[3];
    } d[] = {
        {"sqrt", {0.25}, {2}},   {"rsqrt", {0.25}, {2}},  {"log", {0.25}, {2}},        {"log2", {0.25}, {2}},
        {"log10", {0.25}, {2}},  {"log1p", {-0.5}, {2}},  {"asin", {-0.8}, {0.8}},     {"acos", {-0.8}, {0.8}},
        {"atanh", {-0.8}, {0.8}}, {"acosh", {1.2}, {3}},  {"tan", {-1.2}, {1.2}},      {"pow", {0.5, -2}, {2, 2}},
        {"hardswish", {-4}, {4}}, {"clamp", {-2, -1, 0.2}, {2, -0.2, 1}},
    };
    *lo = *hi = 0;
    for (int k = 0; k < NELEMS(d); k++)
        if (!strcmp(d[k].name, n)) {
            *lo = d[k].lo[i];
            *hi = d[k].hi[i];
        }
}

/* every elementwise operator with a float form, on operands broadcast
 * against each other (so that the shares are summed back to their shapes) */
Test(rules, elementwise)
{
    int tested = 0;
    for (int op = 0; op < SMELT_OP_COUNT; op++) {
        if (strcmp(test_ops[op].cls, "ELEMWISE") || !strchr(test_ops[op].dtypes, 'F') || op == SMELT_OP_BARRIER)
            continue;
        int n = test_ops[op].arity;
        static const int64_t shapes[2][3][2] = {{{3, 4}, {1, 4}, {3, 1}}, {{1, 4}, {3, 1}, {3, 4}}};
        for (int v = 0; v < (n > 1 ? 2 : 1); v++) {
            char label[64];
            snprintf(label, sizeof label, "%s (variant %d)", smelt_op_name((smelt_op)op), v);
            gcase c = {.label = label, .fn = f_elem, .nin = n, .op = (smelt_op)op};
            for (int i = 0; i < n; i++) {
                c.ndim[i] = 2;
                memcpy(c.shape[i], shapes[v][i], sizeof shapes[v][i]);
                domain((smelt_op)op, i, &c.lo[i], &c.hi[i]);
            }
            if (n == 1)
                c.shape[0][0] = 3;
            check(&c, (uint64_t)op * 4 + (uint64_t)v);
            tested++;
        }
    }
    cr_assert_gt(tested, 70, "%d cases", tested);
}

/* the opaque identity (a fusion boundary) passes the cotangent through */
static smelt_node *f_barrier(smelt_graph *g, smelt_node *const *x, const gcase *c)
{
    (void)c;
    return smelt_mul(g, smelt_unary(g, SMELT_OP_BARRIER, smelt_unary(g, SMELT_OP_SIN, x[0])), x[0]);
}

Test(rules, barrier)
{
    gcase c = {.label = "barrier", .fn = f_barrier, .nin = 1, .ndim = {2}, .shape = {{3, 5}}};
    check(&c, 1);
}

/* ---- casts ------------------------------------------------------------------ */

static smelt_node *f_cast_up(smelt_graph *g, smelt_node *const *x, const gcase *c)
{
    (void)c;
    return smelt_unary(g, SMELT_OP_SIN, smelt_mul(g, smelt_cast(g, x[0], SMELT_F64), x[1]));
}

static smelt_node *f_cast_down(smelt_graph *g, smelt_node *const *x, const gcase *c)
{
    (void)c;
    return smelt_unary(g, SMELT_OP_EXP, smelt_cast(g, smelt_mul(g, x[0], x[0]), SMELT_F32));
}

/* an integer value carries no gradient: x * cast(x > 0, f64) + cast(i32(x), f64) */
static smelt_node *f_cast_int(smelt_graph *g, smelt_node *const *x, const gcase *c)
{
    (void)c;
    smelt_node *pos = smelt_cast(g, smelt_binary(g, SMELT_OP_GT, x[0], smelt_scalar(g, 0)), SMELT_F64);
    smelt_node *trunc = smelt_cast(g, smelt_cast(g, smelt_mul(g, x[0], smelt_scalar(g, 3)), SMELT_I32), SMELT_F64);
    smelt_node *am = smelt_cast(g, smelt_reduce(g, SMELT_OP_ARGMAX, x[0], 1, (int[]){1}, 1), SMELT_F64);
    return smelt_add(g, smelt_add(g, smelt_mul(g, x[0], pos), trunc), am);
}

Test(rules, casts)
{
    gcase up = {.label = "f32 -> f64", .fn = f_cast_up, .nin = 2, .ndim = {2, 2}, .shape = {{3, 4}, {3, 4}},
                .fixed_dt = true, .in_dt = {SMELT_F32, SMELT_F64}, .tol = 1e-4};
    check(&up, 1);
    gcase down = {.label = "f64 -> f32", .fn = f_cast_down, .nin = 1, .ndim = {2}, .shape = {{3, 4}},
                  .fixed_dt = true, .in_dt = {SMELT_F64}, .lo = {-1}, .hi = {1}, .tol = 1e-3, .h = 1e-2};
    check(&down, 2);
    gcase ints = {.label = "through integers", .fn = f_cast_int, .nin = 1, .ndim = {2}, .shape = {{3, 4}}};
    check(&ints, 3);
}

/* ---- views, concat, pad ------------------------------------------------------- */

/* sin of the view, so that the result is not the view of an input */
static smelt_node *nl(smelt_graph *g, smelt_node *v) { return smelt_unary(g, SMELT_OP_SIN, v); }

static smelt_node *f_broadcast(smelt_graph *g, smelt_node *const *x, const gcase *c)
{
    (void)c;
    return nl(g, smelt_broadcast_to(g, x[0], 3, (int64_t[]){2, 3, 4}));
}
static smelt_node *f_reshape(smelt_graph *g, smelt_node *const *x, const gcase *c)
{
    return nl(g, smelt_reshape(g, x[0], (int)c->arg[0], c->arg + 1));
}
static smelt_node *f_reshape_t(smelt_graph *g, smelt_node *const *x, const gcase *c)
{
    (void)c; /* of a transposed value: the reshape reads a copy */
    return nl(g, smelt_reshape(g, smelt_transpose(g, x[0], NULL), 2, (int64_t[]){2, 6}));
}
static smelt_node *f_dims(smelt_graph *g, smelt_node *const *x, const gcase *c)
{
    (void)c;
    smelt_node *e = smelt_expand_dims(g, x[0], 1); /* (3, 1, 4) */
    smelt_node *q = smelt_squeeze(g, e, 1);        /* (3, 4) */
    return smelt_mul(g, nl(g, e), smelt_unary(g, SMELT_OP_EXP, q)); /* (3, 3, 4) */
}
static smelt_node *f_transpose(smelt_graph *g, smelt_node *const *x, const gcase *c)
{
    (void)c;
    return nl(g, smelt_transpose(g, x[0], (int[]){2, 0, 1}));
}
static smelt_node *f_slice(smelt_graph *g, smelt_node *const *x, const gcase *c)
{
    return nl(g, smelt_slice(g, x[0], (int)c->arg[0], c->arg[1], c->arg[2], c->arg[3]));
}
static smelt_node *f_flip(smelt_graph *g, smelt_node *const *x, const gcase *c)
{
    (void)c;
    return smelt_mul(g, nl(g, smelt_flip(g, x[0], 1)), x[0]);
}
static smelt_node *f_concat(smelt_graph *g, smelt_node *const *x, const gcase *c)
{
    (void)c;
    return nl(g, smelt_concat(g, 3, (smelt_node *[]){x[0], x[1], x[2]}, 1));
}
static smelt_node *f_concat10(smelt_graph *g, smelt_node *const *x, const gcase *c)
{
    (void)c; /* ten columns in reverse order: more parts than one value reads (the first ones are copied) */
    smelt_node *parts[10];
    for (int k = 0; k < 10; k++)
        parts[k] = smelt_slice(g, x[0], 1, 9 - k, 10 - k, 1);
    return smelt_mul(g, nl(g, smelt_concat(g, 10, parts, 1)), x[0]);
}
static smelt_node *f_pad(smelt_graph *g, smelt_node *const *x, const gcase *c)
{
    (void)c;
    return smelt_unary(g, SMELT_OP_EXP, smelt_pad(g, x[0], (int64_t[]){1, 2, 0, 3}, 0.5));
}
static smelt_node *f_pieces(smelt_graph *g, smelt_node *const *x, const gcase *c)
{
    (void)c; /* x * sin(concat(x[3:], x[:3]) + pad(x[1:4], 1, 1)): slices, a concat and a pad back into x's gradient */
    smelt_node *k = smelt_concat(g, 2, (smelt_node *[]){smelt_slice(g, x[0], 0, 3, SMELT_NONE, 1),
                                                        smelt_slice(g, x[0], 0, 0, 3, 1)}, 0);
    smelt_node *p = smelt_pad(g, smelt_slice(g, x[0], 0, 1, 4, 1), (int64_t[]){1, 1, 0, 0}, 0.0);
    return smelt_mul(g, x[0], nl(g, smelt_add(g, k, p)));
}
static smelt_node *f_view_chain(smelt_graph *g, smelt_node *const *x, const gcase *c)
{
    (void)c; /* a slice of a transpose of a pad of a broadcast, against a concat */
    smelt_node *b = smelt_broadcast_to(g, x[0], 2, (int64_t[]){4, 3});
    smelt_node *p = smelt_pad(g, b, (int64_t[]){0, 1, 2, 0}, 0.0); /* (5, 5) */
    smelt_node *t = smelt_slice(g, smelt_transpose(g, p, NULL), 0, 1, SMELT_NONE, 1); /* (4, 5) */
    smelt_node *k = smelt_concat(g, 2, (smelt_node *[]){x[1], smelt_slice(g, x[1], 1, 0, 2, 1)}, 1); /* (4, 5) */
    return smelt_mul(g, nl(g, t), k);
}

Test(rules, views)
{
    const gcase cs[] = {
        {.label = "broadcast_to", .fn = f_broadcast, .nin = 1, .ndim = {2}, .shape = {{3, 1}}, .no_copies = true},
        {.label = "reshape", .fn = f_reshape, .nin = 1, .ndim = {2}, .shape = {{3, 4}}, .arg = {3, 2, -1, 3}, .no_copies = true},
        {.label = "reshape to a vector", .fn = f_reshape, .nin = 1, .ndim = {3}, .shape = {{2, 1, 3}}, .arg = {1, 6}},
        {.label = "reshape of a transpose", .fn = f_reshape_t, .nin = 1, .ndim = {2}, .shape = {{3, 4}}},
        {.label = "expand_dims, squeeze", .fn = f_dims, .nin = 1, .ndim = {2}, .shape = {{3, 4}}, .no_copies = true},
        {.label = "transpose", .fn = f_transpose, .nin = 1, .ndim = {3}, .shape = {{2, 3, 4}}, .no_copies = true},
        {.label = "slice 1:5", .fn = f_slice, .nin = 1, .ndim = {2}, .shape = {{7, 3}}, .arg = {0, 1, 5, 1}},
        {.label = "slice -5:-1", .fn = f_slice, .nin = 1, .ndim = {2}, .shape = {{3, 7}}, .arg = {1, -5, -1, 1}},
        {.label = "slice ::2", .fn = f_slice, .nin = 1, .ndim = {2}, .shape = {{7, 3}}, .arg = {0, SMELT_NONE, SMELT_NONE, 2}},
        {.label = "slice 1:6:3", .fn = f_slice, .nin = 1, .ndim = {2}, .shape = {{3, 8}}, .arg = {1, 1, 6, 3}},
        {.label = "slice 5:1:-1", .fn = f_slice, .nin = 1, .ndim = {2}, .shape = {{7, 3}}, .arg = {0, 5, 1, -1}},
        {.label = "slice ::-2", .fn = f_slice, .nin = 1, .ndim = {2}, .shape = {{3, 8}}, .arg = {1, SMELT_NONE, SMELT_NONE, -2}},
        {.label = "slice 4:4 (empty)", .fn = f_slice, .nin = 1, .ndim = {2}, .shape = {{7, 3}}, .arg = {0, 4, 4, 1}},
        {.label = "flip", .fn = f_flip, .nin = 1, .ndim = {2}, .shape = {{3, 4}}, .no_copies = true},
        {.label = "concat", .fn = f_concat, .nin = 3, .ndim = {2, 2, 2}, .shape = {{3, 2}, {3, 1}, {3, 3}}},
        {.label = "concat of 10", .fn = f_concat10, .nin = 1, .ndim = {2}, .shape = {{3, 10}}},
        {.label = "pad", .fn = f_pad, .nin = 1, .ndim = {2}, .shape = {{3, 4}}, .lo = {-1}, .hi = {1}, .no_copies = true},
        {.label = "view chain", .fn = f_view_chain, .nin = 2, .ndim = {1, 2}, .shape = {{3}, {4, 3}}, .no_copies = true},
        {.label = "pieces back into the gradient", .fn = f_pieces, .nin = 1, .ndim = {2}, .shape = {{5, 3}}, .no_copies = true},
    };
    for (int k = 0; k < NELEMS(cs); k++)
        check(&cs[k], (uint64_t)k);
}

/* ---- matmul ---------------------------------------------------------------------- */

static smelt_node *f_matmul(smelt_graph *g, smelt_node *const *x, const gcase *c)
{
    (void)c;
    smelt_node *a = c->arg[0] ? smelt_transpose(g, x[0], NULL) : x[0];
    return smelt_matmul(g, a, x[1]);
}

Test(rules, matmul)
{
    const gcase cs[] = {
        {.label = "(3,4) @ (4,5)", .fn = f_matmul, .nin = 2, .ndim = {2, 2}, .shape = {{3, 4}, {4, 5}}},
        {.label = "(4,3).T @ (4,5)", .fn = f_matmul, .nin = 2, .ndim = {2, 2}, .shape = {{4, 3}, {4, 5}}, .arg = {1}},
        {.label = "(2,3,4) @ (4,5)", .fn = f_matmul, .nin = 2, .ndim = {3, 2}, .shape = {{2, 3, 4}, {4, 5}}},
        {.label = "(2,1,3,4) @ (3,4,2)", .fn = f_matmul, .nin = 2, .ndim = {4, 3}, .shape = {{2, 1, 3, 4}, {3, 4, 2}}},
        {.label = "(4) @ (4,5)", .fn = f_matmul, .nin = 2, .ndim = {1, 2}, .shape = {{4}, {4, 5}}},
        {.label = "(3,4) @ (4)", .fn = f_matmul, .nin = 2, .ndim = {2, 1}, .shape = {{3, 4}, {4}}},
        {.label = "(4) @ (4)", .fn = f_matmul, .nin = 2, .ndim = {1, 1}, .shape = {{4}, {4}}},
    };
    for (int k = 0; k < NELEMS(cs); k++)
        check(&cs[k], (uint64_t)k);
}

/* ---- reductions ------------------------------------------------------------------- */

static smelt_node *f_reduce(smelt_graph *g, smelt_node *const *x, const gcase *c)
{
    int axes[4];
    for (int k = 0; k < (int)c->arg[0]; k++)
        axes[k] = (int)c->arg[2 + k];
    return nl(g, smelt_reduce(g, c->op, smelt_mul(g, x[0], x[0]), (int)c->arg[0], axes, (int)c->arg[1]));
}

Test(rules, reductions)
{
    static const smelt_op ops[] = {SMELT_OP_SUM, SMELT_OP_MEAN, SMELT_OP_PROD, SMELT_OP_MAX, SMELT_OP_MIN};
    static const int64_t sets[][5] = {{1, 0, 1}, {1, 1, -1}, {2, 0, 0, 2}, {2, 1, 2, 0}, {0, 0}, {0, 1}};
    for (int o = 0; o < NELEMS(ops); o++)
        for (int s = 0; s < NELEMS(sets); s++) {
            char label[64];
            snprintf(label, sizeof label, "%s over set %d", smelt_op_name(ops[o]), s);
            gcase c = {.label = label, .fn = f_reduce, .nin = 1, .ndim = {3}, .shape = {{2, 3, 4}}, .op = ops[o]};
            memcpy(c.arg, sets[s], sizeof sets[s]);
            if (ops[o] == SMELT_OP_PROD) /* squares near 1 */
                c.lo[0] = 0.8, c.hi[0] = 1.2;
            check(&c, (uint64_t)o * 16 + (uint64_t)s);
        }
}

/* prod's gradient where elements are 0: the product of the others (one
 * zero in a row), or 0 (two); prod is smooth there, so finite differences
 * hold */
static smelt_node *f_prod(smelt_graph *g, smelt_node *const *x, const gcase *c)
{
    (void)c;
    return smelt_reduce(g, SMELT_OP_PROD, x[0], 1, (int[]){1}, 0);
}

Test(rules, prod_with_zeros)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F64, SHP(3, 4)), *gr = NULL;
    smelt_node *y = smelt_reduce(g, SMELT_OP_SUM, f_prod(g, &x, NULL), 0, NULL, 0);
    T_OK(ctx, smelt_grad(g, y, 1, &x, &gr));
    const double v[12] = {2, 0, 3, 0.5, /* one zero */ 0, 1.5, 0, 2, /* two */ 1.5, -2, 0.25, 3};
    const double want[12] = {0, 3, 0, 0, 0, 0, 0, 0, -1.5, 1.125, -9, -0.75};
    smelt_tensor *in = t_tensor(ctx, SMELT_F64, SHP(3, 4)), *out = NULL;
    for (int i = 0; i < 12; i++)
        t_set(in, i, v[i]);
    smelt_plan *p = t_plan(ctx, g, 1, &gr, 3);
    t_run(p, 1, &in, 1, &out);
    for (int i = 0; i < 12; i++)
        cr_assert_eq(smelt_tensor_get(out, i), want[i], "[%d]: %g, want %g", i, smelt_tensor_get(out, i), want[i]);
    smelt_tensor_free(in), smelt_tensor_free(out), smelt_plan_free(p), smelt_graph_free(g), smelt_ctx_free(ctx);
}

/* ---- composites ---------------------------------------------------------------------- */

/* the mean softmax cross-entropy of logits x0 (4, 5) against one-hot
 * targets, and a layer norm of x1 */
static smelt_node *f_xent(smelt_graph *g, smelt_node *const *x, const gcase *c)
{
    (void)c;
    smelt_node *m = smelt_reduce(g, SMELT_OP_MAX, x[0], 1, (int[]){1}, 1);
    smelt_node *e = smelt_unary(g, SMELT_OP_EXP, smelt_sub(g, x[0], m));
    smelt_node *lse = smelt_add(g, smelt_unary(g, SMELT_OP_LOG, smelt_reduce(g, SMELT_OP_SUM, e, 1, (int[]){1}, 1)), m);
    smelt_node *hot = smelt_binary(g, SMELT_OP_EQ, smelt_arange(g, 5, SMELT_I64),
                                   smelt_reshape(g, smelt_arange(g, 4, SMELT_I64), 2, (int64_t[]){4, 1}));
    smelt_node *pick = smelt_reduce(g, SMELT_OP_SUM, smelt_where(g, hot, x[0], smelt_scalar(g, 0)), 1, (int[]){1}, 1);
    return smelt_reduce(g, SMELT_OP_MEAN, smelt_sub(g, lse, pick), 0, NULL, 0);
}

static smelt_node *f_layernorm(smelt_graph *g, smelt_node *const *x, const gcase *c)
{
    (void)c;
    smelt_node *mu = smelt_reduce(g, SMELT_OP_MEAN, x[0], 1, (int[]){-1}, 1);
    smelt_node *d = smelt_sub(g, x[0], mu);
    smelt_node *var = smelt_reduce(g, SMELT_OP_MEAN, smelt_mul(g, d, d), 1, (int[]){-1}, 1);
    smelt_node *n = smelt_mul(g, d, smelt_unary(g, SMELT_OP_RSQRT, smelt_add(g, var, smelt_scalar(g, 1e-5))));
    return smelt_add(g, smelt_mul(g, n, x[1]), x[2]);
}

Test(rules, composites)
{
    const gcase cs[] = {
        {.label = "softmax cross-entropy", .fn = f_xent, .nin = 1, .ndim = {2}, .shape = {{4, 5}}},
        {.label = "layer norm", .fn = f_layernorm, .nin = 3, .ndim = {2, 1, 1}, .shape = {{3, 6}, {6}, {6}}},
    };
    for (int k = 0; k < NELEMS(cs); k++)
        check(&cs[k], (uint64_t)k);
}

/* ---- second order: the gradient of a gradient --------------------------------------- */

static smelt_node *g_tanh(smelt_graph *g, smelt_node *const *x, const gcase *c)
{
    (void)c; /* d/dx sum(tanh(x) x) */
    smelt_node *l = smelt_reduce(g, SMELT_OP_SUM, smelt_mul(g, smelt_unary(g, SMELT_OP_TANH, x[0]), x[0]), 0, NULL, 0);
    smelt_node *d = NULL;
    return smelt_grad(g, l, 1, &x[0], &d) ? NULL : d;
}
static smelt_node *g_matmul(smelt_graph *g, smelt_node *const *x, const gcase *c)
{
    (void)c; /* d/da sum(exp(a) @ b)^2 */
    smelt_node *m = smelt_matmul(g, smelt_unary(g, SMELT_OP_EXP, x[0]), x[1]);
    smelt_node *l = smelt_reduce(g, SMELT_OP_SUM, smelt_mul(g, m, m), 0, NULL, 0);
    smelt_node *d = NULL;
    return smelt_grad(g, l, 1, &x[0], &d) ? NULL : d;
}
static smelt_node *g_mixed(smelt_graph *g, smelt_node *const *x, const gcase *c)
{
    (void)c; /* d/dx of sum(sqrt(x^2 + 1) / (x + 3) + softplus(x) sigmoid(x)) + logsumexp(x) */
    smelt_node *a = smelt_div(g, smelt_unary(g, SMELT_OP_SQRT, smelt_add(g, smelt_mul(g, x[0], x[0]), smelt_scalar(g, 1))),
                              smelt_add(g, x[0], smelt_scalar(g, 3)));
    smelt_node *b = smelt_mul(g, smelt_unary(g, SMELT_OP_SOFTPLUS, x[0]), smelt_unary(g, SMELT_OP_SIGMOID, x[0]));
    smelt_node *m = smelt_reduce(g, SMELT_OP_MAX, x[0], 0, NULL, 1);
    smelt_node *lse = smelt_add(g, smelt_unary(g, SMELT_OP_LOG, smelt_reduce(g, SMELT_OP_SUM,
                                smelt_unary(g, SMELT_OP_EXP, smelt_sub(g, x[0], m)), 0, NULL, 0)), smelt_reshape(g, m, 0, NULL));
    smelt_node *l = smelt_add(g, smelt_reduce(g, SMELT_OP_SUM, smelt_add(g, a, b), 0, NULL, 0), lse);
    smelt_node *d = NULL;
    return smelt_grad(g, l, 1, &x[0], &d) ? NULL : d;
}
static smelt_node *g_gelu(smelt_graph *g, smelt_node *const *x, const gcase *c)
{
    (void)c; /* d/dx sum(gelu(x) gelu_tanh(x) silu(x)) */
    smelt_node *p = smelt_mul(g, smelt_unary(g, SMELT_OP_GELU, x[0]), smelt_unary(g, SMELT_OP_GELU_TANH, x[0]));
    smelt_node *l = smelt_reduce(g, SMELT_OP_SUM, smelt_mul(g, p, smelt_unary(g, SMELT_OP_SILU, x[0])), 0, NULL, 0);
    smelt_node *d = NULL;
    return smelt_grad(g, l, 1, &x[0], &d) ? NULL : d;
}

Test(second_order, hessian_vector_products)
{
    const gcase cs[] = {
        {.label = "d2 sum(tanh(x) x)", .fn = g_tanh, .nin = 1, .ndim = {2}, .shape = {{3, 4}}},
        {.label = "d2 sum((exp(a) @ b)^2)", .fn = g_matmul, .nin = 2, .ndim = {2, 2}, .shape = {{3, 4}, {4, 2}},
         .lo = {-1, -1}, .hi = {1, 1}},
        {.label = "d2 mixed", .fn = g_mixed, .nin = 1, .ndim = {1}, .shape = {{6}}},
        {.label = "d2 gelu", .fn = g_gelu, .nin = 1, .ndim = {1}, .shape = {{6}}},
    };
    for (int k = 0; k < NELEMS(cs); k++)
        check(&cs[k], (uint64_t)k);
}

/* ---- ties (JAX's conventions) and exact values ----------------------------------------- */

/* gradients of sum(f(inputs)) at given values */
static void expect_grads(const char *label, int nin, const int64_t *n, smelt_node *(*f)(smelt_graph *, smelt_node *const *),
                         const double *const *vals, const double *const *want)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x[MAXIN], *gr[MAXIN];
    smelt_tensor *in[MAXIN], *out[MAXIN] = {NULL};
    for (int i = 0; i < nin; i++) {
        x[i] = n[i] ? smelt_input(g, NULL, SMELT_F64, 1, &n[i]) : smelt_input(g, NULL, SMELT_F64, 0, NULL);
        in[i] = t_tensor(ctx, SMELT_F64, n[i] ? 1 : 0, &n[i]);
        for (int64_t j = 0; j < (n[i] ? n[i] : 1); j++)
            t_set(in[i], j, vals[i][j]);
    }
    smelt_node *l = smelt_reduce(g, SMELT_OP_SUM, f(g, x), 0, NULL, 0);
    T_OK(ctx, smelt_grad(g, l, nin, x, gr));
    for (int opt = 0; opt <= 3; opt += 3) {
        smelt_plan *p = t_plan(ctx, g, nin, gr, opt);
        t_run(p, nin, in, nin, out);
        for (int i = 0; i < nin; i++) {
            for (int64_t j = 0; j < (n[i] ? n[i] : 1); j++)
                cr_assert_eq(smelt_tensor_get(out[i], j), want[i][j], "%s: d/dx%d[%lld] is %g, want %g", label, i,
                             (long long)j, smelt_tensor_get(out[i], j), want[i][j]);
            smelt_tensor_free(out[i]);
            out[i] = NULL;
        }
        smelt_plan_free(p);
    }
    t_free_all(in, nin);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

static smelt_node *t_max(smelt_graph *g, smelt_node *const *x) { return smelt_binary(g, SMELT_OP_MAXIMUM, x[0], x[1]); }
static smelt_node *t_min(smelt_graph *g, smelt_node *const *x) { return smelt_binary(g, SMELT_OP_MINIMUM, x[0], x[1]); }
static smelt_node *t_clamp(smelt_graph *g, smelt_node *const *x) { return smelt_ternary(g, SMELT_OP_CLAMP, x[0], x[1], x[2]); }
static smelt_node *t_rmax(smelt_graph *g, smelt_node *const *x)
{
    return smelt_reduce(g, SMELT_OP_MAX, smelt_reshape(g, x[0], 2, (int64_t[]){2, 4}), 1, (int[]){1}, 0);
}
static smelt_node *t_rmin(smelt_graph *g, smelt_node *const *x)
{
    return smelt_reduce(g, SMELT_OP_MIN, smelt_reshape(g, x[0], 2, (int64_t[]){2, 4}), 1, (int[]){1}, 0);
}
static smelt_node *t_kinks(smelt_graph *g, smelt_node *const *x)
{
    smelt_node *r = smelt_unary(g, SMELT_OP_RELU, x[0]), *a = smelt_unary(g, SMELT_OP_ABS, x[0]);
    return smelt_add(g, smelt_add(g, r, smelt_mul(g, a, smelt_scalar(g, 10))),
                     smelt_mul(g, smelt_unary(g, SMELT_OP_FLOOR, x[0]), smelt_scalar(g, 100)));
}

Test(ties, as_jax)
{
    /* maximum and minimum: a tie gives each operand half */
    expect_grads("maximum", 2, (int64_t[]){3, 3}, t_max, (const double *[]){(double[]){1, 2, 3}, (double[]){1, 5, 0}},
                 (const double *[]){(double[]){0.5, 0, 1}, (double[]){0.5, 1, 0}});
    expect_grads("minimum", 2, (int64_t[]){3, 3}, t_min, (const double *[]){(double[]){1, 2, 3}, (double[]){1, 5, 0}},
                 (const double *[]){(double[]){0.5, 1, 0}, (double[]){0.5, 0, 1}});
    /* clamp as minimum(maximum(x, lo), hi); lo and hi scalars (summed back to rank 0) */
    expect_grads("clamp", 3, (int64_t[]){5, 0, 0}, t_clamp,
                 (const double *[]){(double[]){0, 1, 2, -1, 3}, (double[]){0}, (double[]){2}},
                 (const double *[]){(double[]){0.5, 1, 0.5, 0, 0}, (double[]){1.5}, (double[]){1.5}});
    /* max and min reductions: shared equally among the elements equal to the result */
    expect_grads("max", 1, (int64_t[]){8}, t_rmax, (const double *[]){(double[]){1, 3, 3, 2, 4, 4, 4, 4}},
                 (const double *[]){(double[]){0, 0.5, 0.5, 0, 0.25, 0.25, 0.25, 0.25}});
    expect_grads("min", 1, (int64_t[]){8}, t_rmin, (const double *[]){(double[]){2, 1, 1, 5, -1, 0, 7, 8}},
                 (const double *[]){(double[]){0, 0.5, 0.5, 0, 1, 0, 0, 0}});
    /* relu'(0) = 0, abs'(0) = 1 (JAX), floor' = 0 */
    expect_grads("relu, abs, floor", 1, (int64_t[]){4}, t_kinks, (const double *[]){(double[]){0, -0.0, 1.5, -2}},
                 (const double *[]){(double[]){10, 10, 11, -10}});
}

/* ---- what gets zeros, and the errors -------------------------------------------------------- */

Test(api, zeros_and_intermediates)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F64, SHP(2, 3)), *u = smelt_input(g, "u", SMELT_F32, SHP(4));
    smelt_node *y = smelt_unary(g, SMELT_OP_SIN, x);
    smelt_node *l = smelt_reduce(g, SMELT_OP_SUM, smelt_mul(g, y, y), 0, NULL, 0);
    /* only through argmax: no gradient */
    smelt_node *am = smelt_cast(g, smelt_reduce(g, SMELT_OP_ARGMAX, x, 0, NULL, 0), SMELT_F64);
    smelt_node *gr[3], *ga = NULL;
    T_OK(ctx, smelt_grad(g, l, 3, (smelt_node *[]){x, u, y}, gr));
    T_OK(ctx, smelt_grad(g, am, 1, &x, &ga));
    cr_assert_eq(smelt_node_dtype(gr[1]), SMELT_F32);
    cr_assert_eq(smelt_node_ndim(gr[1]), 1);
    smelt_node *outs[4] = {gr[0], gr[1], gr[2], ga};
    trng r;
    trng_init(&r, 0);
    smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F64, SHP(2, 3)), t_rand(ctx, &r, SMELT_F32, SHP(4))}, *out[4] = {NULL};
    smelt_plan *p = t_plan(ctx, g, 4, outs, 3);
    t_run(p, 2, in, 4, out);
    for (int i = 0; i < 6; i++) {
        double v = smelt_tensor_get(in[0], i);
        cr_assert_float_eq(smelt_tensor_get(out[0], i), 2 * sin(v) * cos(v), 1e-15);
        cr_assert_float_eq(smelt_tensor_get(out[2], i), 2 * sin(v), 1e-15); /* with respect to an intermediate */
        cr_assert_eq(smelt_tensor_get(out[3], i), 0.0);
    }
    for (int i = 0; i < 4; i++)
        cr_assert_eq(smelt_tensor_get(out[1], i), 0.0);
    t_free_all(out, 4), t_free_all(in, 2), smelt_plan_free(p), smelt_graph_free(g), smelt_ctx_free(ctx);
}

/* several outputs with their cotangents; an output given twice counts twice */
Test(api, several_outputs)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F64, SHP(5)), *w = smelt_input(g, "w", SMELT_F64, SHP(5));
    smelt_node *s = smelt_unary(g, SMELT_OP_SIN, x), *c = smelt_unary(g, SMELT_OP_COS, x), *d = NULL;
    smelt_node *two = smelt_const(g, 2.0, SMELT_F32); /* cast to the output's dtype, broadcast */
    T_OK(ctx, smelt_grad_ct(g, 3, (smelt_node *[]){s, c, s}, (smelt_node *[]){w, two, w}, 1, &x, &d));
    trng r;
    trng_init(&r, 0);
    smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F64, SHP(5)), t_rand(ctx, &r, SMELT_F64, SHP(5))}, *out = NULL;
    smelt_plan *p = t_plan(ctx, g, 1, &d, 3);
    t_run(p, 2, in, 1, &out);
    for (int i = 0; i < 5; i++) {
        double v = smelt_tensor_get(in[0], i), wv = smelt_tensor_get(in[1], i);
        cr_assert_float_eq(smelt_tensor_get(out, i), 2 * wv * cos(v) - 2 * sin(v), 1e-14);
    }
    smelt_tensor_free(out), t_free_all(in, 2), smelt_plan_free(p), smelt_graph_free(g), smelt_ctx_free(ctx);
}

/* f16 and bf16 values have gradients of their dtype */
Test(api, half_dtypes)
{
    const smelt_dtype dts[] = {SMELT_F16, SMELT_BF16};
    for (int k = 0; k < 2; k++) {
        smelt_ctx *ctx = t_ctx();
        smelt_graph *g = t_graph(ctx);
        smelt_node *x = smelt_input(g, "x", dts[k], SHP(3, 4)), *d = NULL;
        smelt_node *l = smelt_reduce(g, SMELT_OP_SUM, smelt_mul(g, x, smelt_scalar(g, 3)), 0, NULL, 0);
        l = smelt_add(g, l, smelt_reduce(g, SMELT_OP_SUM, smelt_mul(g, x, x), 0, NULL, 0));
        T_OK(ctx, smelt_grad(g, l, 1, &x, &d));
        cr_assert_eq(smelt_node_dtype(d), dts[k]);
        trng r;
        trng_init(&r, (uint64_t)k);
        smelt_tensor *in = t_rand(ctx, &r, dts[k], SHP(3, 4)), *out = NULL;
        smelt_plan *p = t_plan(ctx, g, 1, &d, 3);
        t_run(p, 1, &in, 1, &out);
        for (int i = 0; i < 12; i++) /* 2x + 3, rounded once (2x is exact) */
            cr_assert_eq(smelt_tensor_get(out, i), t_round_half(dts[k], 2 * smelt_tensor_get(in, i) + 3));
        smelt_tensor_free(out), smelt_tensor_free(in), smelt_plan_free(p), smelt_graph_free(g), smelt_ctx_free(ctx);
    }
}

Test(api, errors)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx), *h = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(3)), *i = smelt_input(g, "i", SMELT_I32, SHP(3));
    smelt_node *other = smelt_input(h, "o", SMELT_F32, SHP(3));
    smelt_node *v = smelt_unary(g, SMELT_OP_EXP, x), *l = smelt_reduce(g, SMELT_OP_SUM, v, 0, NULL, 0);
    smelt_node *li = smelt_reduce(g, SMELT_OP_SUM, i, 0, NULL, 0), *d = NULL;
    T_ERR(ctx, smelt_grad(g, l, 1, &i, &d), SMELT_ERR_DTYPE, "wrt[0] is i32 (only floating-point values have gradients");
    T_ERR(ctx, smelt_grad(g, v, 1, &x, &d), SMELT_ERR_SHAPE, "the loss has shape (3,); it must hold one element");
    T_ERR(ctx, smelt_grad(g, li, 1, &x, &d), SMELT_ERR_DTYPE, "the loss is i64");
    T_ERR(ctx, smelt_grad(g, l, 1, &other, &d), SMELT_ERR_INVALID_ARG, "wrt[0] belongs to another graph");
    T_ERR(ctx, smelt_grad(g, NULL, 1, &x, &d), SMELT_ERR_INVALID_ARG, "loss[0] is NULL");
    T_ERR(ctx, smelt_grad(g, l, 1, NULL, &d), SMELT_ERR_INVALID_ARG, "an array argument is NULL");
    T_ERR(ctx, smelt_grad_ct(g, 1, &v, (smelt_node *[]){smelt_input(g, "w", SMELT_F32, SHP(2))}, 1, &x, &d),
          SMELT_ERR_SHAPE, "the cotangent of output 0, of shape (2,), does not broadcast to the output's shape (3,)");
    T_ERR(ctx, smelt_grad_ct(g, 0, &v, &v, 1, &x, &d), SMELT_ERR_INVALID_ARG, "no outputs to differentiate");
    cr_assert_eq(smelt_grad(NULL, l, 1, &x, &d), SMELT_ERR_INVALID_ARG);
    /* argument errors leave the graph usable */
    T_OK(ctx, smelt_graph_status(g));
    T_OK(ctx, smelt_grad(g, l, 1, &x, &d));
    cr_assert_not_null(d);
    /* a graph with a sticky error: that error */
    cr_assert_null(smelt_add(g, x, smelt_input(g, NULL, SMELT_F32, SHP(4))));
    T_ERR(ctx, smelt_grad(g, l, 1, &x, &d), SMELT_ERR_SHAPE, "not broadcastable");
    smelt_graph_free(g), smelt_graph_free(h), smelt_ctx_free(ctx);
}

/* ---- a training step as one plan: a 2-layer MLP with Adam ------------------------------------ */

enum { MLP_N = 512, MLP_D = 32, MLP_H = 96, MLP_C = 3, MLP_STEPS = 200 };

typedef struct mlp {
    smelt_graph *g;
    smelt_node *outs[13];
} mlp;

/* inputs: x (N, D), labels (N, 1) i64, the step size (scalar), then the
 * parameters W1 b1 W2 b2, their first moments, their second moments;
 * outputs: the loss, then the parameters, moments and second moments
 * updated (Adam; the step size carries the bias corrections) */
static void mlp_build(smelt_ctx *ctx, mlp *m)
{
    smelt_graph *g = m->g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(MLP_N, MLP_D));
    smelt_node *t = smelt_input(g, "labels", SMELT_I64, SHP(MLP_N, 1));
    smelt_node *lr = smelt_input(g, "lr", SMELT_F32, 0, NULL);
    static const int64_t shapes[4][2] = {{MLP_D, MLP_H}, {MLP_H}, {MLP_H, MLP_C}, {MLP_C}};
    smelt_node *p[4], *mo[4], *v[4], *d[4];
    for (int k = 0; k < 12; k++) {
        smelt_node **slot = k < 4 ? &p[k] : k < 8 ? &mo[k - 4] : &v[k - 8];
        *slot = smelt_input(g, NULL, SMELT_F32, (k & 1) ? 1 : 2, shapes[k & 3]);
    }
    smelt_node *h = smelt_unary(g, SMELT_OP_RELU, smelt_add(g, smelt_matmul(g, x, p[0]), p[1]));
    smelt_node *logits = smelt_add(g, smelt_matmul(g, h, p[2]), p[3]);
    smelt_node *mx = smelt_reduce(g, SMELT_OP_MAX, logits, 1, (int[]){1}, 1);
    smelt_node *e = smelt_unary(g, SMELT_OP_EXP, smelt_sub(g, logits, mx));
    smelt_node *lse = smelt_add(g, smelt_unary(g, SMELT_OP_LOG, smelt_reduce(g, SMELT_OP_SUM, e, 1, (int[]){1}, 1)), mx);
    smelt_node *hot = smelt_binary(g, SMELT_OP_EQ, smelt_arange(g, MLP_C, SMELT_I64), t);
    smelt_node *pick = smelt_reduce(g, SMELT_OP_SUM, smelt_where(g, hot, logits, smelt_scalar(g, 0)), 1, (int[]){1}, 1);
    smelt_node *loss = smelt_reduce(g, SMELT_OP_MEAN, smelt_sub(g, lse, pick), 0, NULL, 0);
    T_OK(ctx, smelt_grad(g, loss, 4, p, d));
    m->outs[0] = loss;
    for (int k = 0; k < 4; k++) {
        smelt_node *m1 = smelt_add(g, smelt_mul(g, mo[k], smelt_scalar(g, 0.9)), smelt_mul(g, d[k], smelt_scalar(g, 0.1)));
        smelt_node *v1 = smelt_add(g, smelt_mul(g, v[k], smelt_scalar(g, 0.999)),
                                   smelt_mul(g, smelt_mul(g, d[k], d[k]), smelt_scalar(g, 0.001)));
        smelt_node *step = smelt_div(g, smelt_mul(g, lr, m1),
                                     smelt_add(g, smelt_unary(g, SMELT_OP_SQRT, v1), smelt_scalar(g, 1e-8)));
        m->outs[1 + k] = smelt_sub(g, p[k], step);
        m->outs[5 + k] = m1;
        m->outs[9 + k] = v1;
    }
    T_OK(ctx, smelt_graph_status(g));
}

/* Train from the same start; the loss of every step (as bits) in losses,
 * the final parameters in params[0..3] (new tensors). */
static void mlp_train(smelt_ctx *ctx, mlp *m, int opt_level, uint32_t *losses, smelt_tensor **params)
{
    trng r;
    trng_init(&r, 42);
    smelt_tensor *in[15];
    in[0] = t_tensor(ctx, SMELT_F32, SHP(MLP_N, MLP_D));
    in[1] = t_tensor(ctx, SMELT_I64, SHP(MLP_N, 1));
    in[2] = t_tensor(ctx, SMELT_F32, 0, NULL);
    double wt[MLP_D][MLP_C];
    for (int i = 0; i < MLP_D; i++)
        for (int j = 0; j < MLP_C; j++)
            wt[i][j] = trng_uniform(&r, -1, 1);
    for (int n = 0; n < MLP_N; n++) { /* labels: the class a linear map picks (separable) */
        double s[MLP_C] = {0};
        for (int i = 0; i < MLP_D; i++) {
            double v = trng_uniform(&r, -1, 1);
            t_set(in[0], n * MLP_D + i, v);
            for (int j = 0; j < MLP_C; j++)
                s[j] += (double)(float)v * wt[i][j];
        }
        int best = 0;
        for (int j = 1; j < MLP_C; j++)
            best = s[j] > s[best] ? j : best;
        t_set_i64(in[1], n, best);
    }
    for (int k = 0; k < 12; k++) {
        smelt_node *x = smelt_graph_input(m->g, 3 + k);
        in[3 + k] = t_tensor(ctx, SMELT_F32, smelt_node_ndim(x), smelt_node_shape(x));
        double scale = k >= 4 ? 0 : (k & 1) ? 0.1 : 1 / sqrt((double)smelt_node_shape(x)[0]);
        for (int64_t i = 0; i < smelt_tensor_numel(in[3 + k]); i++)
            t_set(in[3 + k], i, k < 4 ? trng_uniform(&r, -scale, scale) : 0.0);
    }
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    o.opt_level = opt_level;
    int donate[12];
    for (int k = 0; k < 12; k++)
        donate[k] = 3 + k;
    o.donate = donate;
    o.n_donate = 12;
    smelt_plan *p = NULL;
    T_OK(ctx, smelt_plan_new(ctx, m->g, 13, m->outs, &o, &p));
    smelt_tensor *out[13];
    out[0] = t_tensor(ctx, SMELT_F32, 0, NULL);
    for (int k = 0; k < 12; k++)
        out[1 + k] = in[3 + k];
    for (int s = 0; s < MLP_STEPS; s++) {
        double t = s + 1;
        t_set(in[2], 0, 0.01 * sqrt(1 - pow(0.999, t)) / (1 - pow(0.9, t)));
        t_run(p, 15, in, 13, out);
        float l = (float)smelt_tensor_get(out[0], 0);
        memcpy(&losses[s], &l, sizeof l);
    }
    smelt_plan_stats st = t_stats(p);
    cr_assert_eq(st.donated_inplace, 12, "%d of 12 updates in place\n%s", st.donated_inplace, smelt_plan_describe(p));
    if (opt_level >= 2) /* the arena within 1.2x of the largest live set */
        cr_assert_leq((double)st.mem_bytes, 1.2 * (double)st.mem_lower_bytes, "arena %lld bytes, live set %lld",
                      (long long)st.mem_bytes, (long long)st.mem_lower_bytes);
    for (int k = 0; k < 4; k++)
        T_OK(ctx, smelt_tensor_contiguous(in[3 + k], &params[k]));
    smelt_tensor_free(out[0]);
    t_free_all(in, 15);
    smelt_plan_free(p);
}

static double bits_f32(uint32_t b)
{
    float f;
    memcpy(&f, &b, sizeof f);
    return f;
}

Test(training, mlp_same_bits_everywhere, .timeout = 240)
{
    const struct {
        const char *backend;
        int threads, opt_level;
    } vs[] = {{"TCC", 1, 3}, {"TCC", 2, 3}, {"CC", 1, 3}, {"CC", 2, 3}, {"TCC", 2, 0}};
    smelt_ctx *ctx = t_ctx();
    bool cc = smelt_backend_check(ctx, "CC") == SMELT_OK;
    mlp m;
    mlp_build(ctx, &m);
    static uint32_t losses[NELEMS(vs)][MLP_STEPS];
    smelt_tensor *params[NELEMS(vs)][4];
    for (int v = 0; v < NELEMS(vs); v++) {
        if (!strcmp(vs[v].backend, "CC") && !cc)
            continue;
        T_OK(ctx, smelt_ctx_set_backend(ctx, vs[v].backend));
        T_OK(ctx, smelt_ctx_set_threads(ctx, vs[v].threads));
        mlp_train(ctx, &m, vs[v].opt_level, losses[v], params[v]);
        double first = bits_f32(losses[v][0]), last = bits_f32(losses[v][MLP_STEPS - 1]);
        cr_assert(last < 0.2 * first && last < 0.25, "%s, %d threads: the loss went from %g to %g", vs[v].backend,
                  vs[v].threads, first, last);
        if (v == 0)
            continue;
        for (int s = 0; s < MLP_STEPS; s++)
            cr_assert_eq(losses[v][s], losses[0][s], "%s, %d threads, opt_level %d: step %d's loss is %a, TCC on 1 "
                         "thread %a", vs[v].backend, vs[v].threads, vs[v].opt_level, s, bits_f32(losses[v][s]),
                         bits_f32(losses[0][s]));
        for (int k = 0; k < 4; k++) {
            cr_assert(t_bitwise_equal(params[v][k], params[0][k]), "%s, %d threads: parameter %d differs",
                      vs[v].backend, vs[v].threads, k);
            smelt_tensor_free(params[v][k]);
        }
    }
    for (int k = 0; k < 4; k++)
        smelt_tensor_free(params[0][k]);
    smelt_graph_free(m.g);
    smelt_ctx_free(ctx);
}

/* ---- inside a traced function ------------------------------------------------------------------ */

/* loss = sum((x @ w)^2), and its gradient with respect to w: 2 x^T (x @ w) */
static int traced_step(smelt_graph *g, int n_in, smelt_node *const *in, int n_out, smelt_node **out, void *user)
{
    (void)n_in, (void)n_out, (void)user;
    smelt_node *y = smelt_matmul(g, in[0], in[1]);
    out[0] = smelt_reduce(g, SMELT_OP_SUM, smelt_mul(g, y, y), 0, NULL, 0);
    return smelt_grad(g, out[0], 1, &in[1], &out[1]);
}

Test(api, traced)
{
    smelt_ctx *ctx = t_ctx();
    smelt_trace *tr = NULL;
    T_OK(ctx, smelt_trace_new(ctx, traced_step, NULL, 2, 2, NULL, &tr));
    trng r;
    trng_init(&r, 0);
    for (int call = 0; call < 3; call++) {
        smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F64, SHP(5, 3)), t_rand(ctx, &r, SMELT_F64, SHP(3, 2))}, *out[2] = {NULL};
        T_OK(ctx, smelt_trace_call(tr, 2, in, 2, out));
        double y[5][2], loss = 0;
        for (int i = 0; i < 5; i++)
            for (int j = 0; j < 2; j++) {
                y[i][j] = 0;
                for (int k = 0; k < 3; k++)
                    y[i][j] += smelt_tensor_get(in[0], i * 3 + k) * smelt_tensor_get(in[1], k * 2 + j);
                loss += y[i][j] * y[i][j];
            }
        cr_assert_float_eq(smelt_tensor_get(out[0], 0), loss, 1e-12 * loss);
        for (int k = 0; k < 3; k++)
            for (int j = 0; j < 2; j++) {
                double want = 0;
                for (int i = 0; i < 5; i++)
                    want += 2 * smelt_tensor_get(in[0], i * 3 + k) * y[i][j];
                cr_assert_float_eq(smelt_tensor_get(out[1], k * 2 + j), want, 1e-12 * (1 + fabs(want)));
            }
        t_free_all(in, 2), t_free_all(out, 2);
    }
    cr_assert_eq(smelt_trace_num_plans(tr), 1);
    smelt_trace_free(tr);
    smelt_ctx_free(ctx);
}

/* Only the gradients planned, at every opt_level: the forward's loss (a
 * reduction) and a matrix product are then dead, which opt_level 0 still
 * computes; and the graph with its gradients saved as text and loaded
 * gives the same bits. */
Test(api, gradients_alone_and_saved)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(4, 3)), *w = smelt_input(g, "w", SMELT_F32, SHP(3, 5));
    smelt_node *h = smelt_unary(g, SMELT_OP_TANH, smelt_matmul(g, x, w));
    smelt_node *l = smelt_reduce(g, SMELT_OP_MEAN, smelt_pad(g, smelt_slice(g, h, 1, 1, SMELT_NONE, 2), (int64_t[]){0, 1, 1, 0}, 0), 0, NULL, 0);
    smelt_node *gr[2];
    T_OK(ctx, smelt_grad(g, l, 2, (smelt_node *[]){x, w}, gr));
    trng r;
    trng_init(&r, 0);
    smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F32, SHP(4, 3)), t_rand(ctx, &r, SMELT_F32, SHP(3, 5))}, *first[2] = {NULL};
    for (int opt = 0; opt <= 3; opt++) {
        smelt_plan *p = t_plan(ctx, g, 2, gr, opt);
        smelt_tensor *out[2] = {NULL};
        t_run(p, 2, in, 2, out);
        for (int k = 0; k < 2 && opt; k++)
            cr_assert(t_bitwise_equal(out[k], first[k]), "opt_level %d, gradient %d", opt, k);
        if (!opt)
            memcpy(first, out, sizeof out);
        else
            t_free_all(out, 2);
        smelt_plan_free(p);
    }
    char *text = NULL;
    T_OK(ctx, smelt_graph_to_text(g, 2, gr, &text));
    smelt_graph *g2 = NULL;
    smelt_node **outs = NULL;
    int n_out = 0;
    T_OK(ctx, smelt_graph_from_text(ctx, text, &g2, &n_out, &outs));
    cr_assert_eq(n_out, 2);
    smelt_plan *p = t_plan(ctx, g2, 2, outs, 3);
    smelt_tensor *out[2] = {NULL};
    t_run(p, 2, in, 2, out);
    for (int k = 0; k < 2; k++)
        cr_assert(t_bitwise_equal(out[k], first[k]), "loaded graph, gradient %d", k);
    t_free_all(out, 2), t_free_all(first, 2), t_free_all(in, 2);
    smelt_plan_free(p), smelt_free(outs), smelt_free(text), smelt_graph_free(g2), smelt_graph_free(g), smelt_ctx_free(ctx);
}
