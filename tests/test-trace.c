/* Traced functions: recorded and compiled once per input signature (dtypes,
 * ranks, broadcast pattern), reused for new sizes, re-recorded for new
 * dtypes; errors from the traced function are reported clearly. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common.h"

typedef struct calls {
    int n;         /* how many times the function was traced */
    int fail_with; /* return this status */
    bool leave_unset, bad_shapes;
} calls;

/* y = tanh(a * b + 1) - a, z = a > b */
static int fn(smelt_graph *g, int n_in, smelt_node *const *in, int n_out, smelt_node **out, void *user)
{
    calls *c = user;
    c->n++;
    cr_assert_eq(n_in, 2);
    cr_assert_eq(n_out, 2);
    if (c->fail_with)
        return c->fail_with;
    smelt_node *a = in[0], *b = in[1];
    if (c->bad_shapes)
        b = smelt_input(g, "extra", SMELT_F32, SHP(3, 3, 3));
    smelt_node *t = smelt_unary(g, SMELT_OP_TANH, smelt_add(g, smelt_mul(g, a, b), smelt_scalar(g, 1)));
    out[0] = smelt_sub(g, t, a);
    if (!c->leave_unset)
        out[1] = smelt_binary(g, SMELT_OP_GT, a, b);
    return SMELT_OK;
}

/* Call the trace and compare both outputs with the reference of fn on a
 * freshly built graph of the same signature. */
static void call_and_check(smelt_ctx *ctx, smelt_trace *t, smelt_tensor *const *in)
{
    smelt_tensor *out[2] = {NULL, NULL};
    T_OK(ctx, smelt_trace_call(t, 2, in, 2, out));
    smelt_graph *g = t_graph(ctx);
    smelt_node *x[2], *y[2] = {NULL, NULL};
    for (int i = 0; i < 2; i++)
        x[i] = smelt_input(g, NULL, smelt_tensor_dtype(in[i]), smelt_tensor_ndim(in[i]),
                           smelt_tensor_shape(in[i]));
    calls c = {0, 0, false, false};
    cr_assert_eq(fn(g, 2, x, 2, y, &c), SMELT_OK);
    smelt_tensor *ref[2] = {NULL, NULL};
    t_reference(ctx, g, 2, y, 2, in, ref);
    t_expect_match("trace output 0", out[0], ref[0], t_chain_tol(smelt_node_dtype(y[0])));
    t_expect_match("trace output 1", out[1], ref[1], T_EXACT);
    t_free_all(ref, 2);
    t_free_all(out, 2);
    smelt_graph_free(g);
}

Test(trace, records_once_per_signature)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    calls c = {0, 0, false, false};
    smelt_trace *t = NULL;
    T_OK(ctx, smelt_trace_new(ctx, fn, &c, 2, 2, NULL, &t));
    cr_assert_eq(smelt_trace_num_plans(t), 0);
    cr_assert_null(smelt_trace_last_plan(t));

    smelt_tensor *in1[2] = {t_rand(ctx, &r, SMELT_F32, SHP(8, 16)), t_rand(ctx, &r, SMELT_F32, SHP(16))};
    call_and_check(ctx, t, in1);
    cr_assert_eq(c.n, 1);
    cr_assert_eq(smelt_trace_num_plans(t), 1);
    smelt_plan *p1 = smelt_trace_last_plan(t);
    cr_assert_not_null(p1);
    smelt_plan_stats s = t_stats(p1);
    cr_assert_geq(s.compiles, 1, "the first call compiles");
    cr_assert_leq(s.kernels, 2, "opt_level 3 by default: %d kernels for 5 operators", s.kernels);

    /* the same signature: no new recording, the same plan */
    call_and_check(ctx, t, in1);
    cr_assert_eq(c.n, 1);
    cr_assert_eq(smelt_trace_num_plans(t), 1);
    cr_assert_eq(smelt_trace_last_plan(t), p1);

    /* new sizes, same ranks and broadcast pattern: reused */
    smelt_tensor *in2[2] = {t_rand(ctx, &r, SMELT_F32, SHP(3, 5)), t_rand(ctx, &r, SMELT_F32, SHP(5))};
    call_and_check(ctx, t, in2);
    cr_assert_eq(c.n, 1);
    cr_assert_eq(smelt_trace_num_plans(t), 1);
    cr_assert_eq(smelt_trace_last_plan(t), p1);
    cr_assert_eq(t_stats(p1).compiles, s.compiles, "no recompilation for new sizes");

    /* a new dtype: a new plan */
    smelt_tensor *in3[2] = {t_rand(ctx, &r, SMELT_F64, SHP(8, 16)), t_rand(ctx, &r, SMELT_F32, SHP(16))};
    call_and_check(ctx, t, in3);
    cr_assert_eq(c.n, 2);
    cr_assert_eq(smelt_trace_num_plans(t), 2);
    cr_assert_neq(smelt_trace_last_plan(t), p1);

    /* a new broadcast pattern: a new plan */
    smelt_tensor *in4[2] = {t_rand(ctx, &r, SMELT_F32, SHP(8, 16)), t_rand(ctx, &r, SMELT_F32, SHP(1))};
    call_and_check(ctx, t, in4);
    cr_assert_eq(smelt_trace_num_plans(t), 3);
    smelt_tensor *in5[2] = {t_rand(ctx, &r, SMELT_F32, SHP(8, 1)), t_rand(ctx, &r, SMELT_F32, SHP(16))};
    call_and_check(ctx, t, in5);
    cr_assert_eq(smelt_trace_num_plans(t), 4);
    /* a new rank: a new plan */
    smelt_tensor *in6[2] = {t_rand(ctx, &r, SMELT_F32, SHP(2, 8, 16)), t_rand(ctx, &r, SMELT_F32, SHP(16))};
    call_and_check(ctx, t, in6);
    cr_assert_eq(smelt_trace_num_plans(t), 5);
    cr_assert_eq(c.n, 5);

    /* back to the first signature: the first plan again */
    call_and_check(ctx, t, in2);
    cr_assert_eq(smelt_trace_last_plan(t), p1);
    cr_assert_eq(smelt_trace_num_plans(t), 5);
    cr_assert_eq(c.n, 5);

    smelt_tensor **all[] = {in1, in2, in3, in4, in5, in6};
    for (int i = 0; i < 6; i++)
        t_free_all(all[i], 2);
    smelt_trace_free(t);
    smelt_ctx_free(ctx);
}

Test(trace, integer_dtypes_and_given_outputs)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    calls c = {0, 0, false, false};
    smelt_trace *t = NULL;
    T_OK(ctx, smelt_trace_new(ctx, fn, &c, 2, 2, NULL, &t));
    smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_I32, SHP(6, 7)), t_rand(ctx, &r, SMELT_U8, SHP(6, 1))};
    call_and_check(ctx, t, in);
    /* outputs given by the caller are written in place */
    smelt_tensor *out[2] = {t_tensor(ctx, SMELT_F64, SHP(6, 7)), t_tensor(ctx, SMELT_BOOL, SHP(6, 7))};
    smelt_tensor *keep[2] = {out[0], out[1]};
    T_OK(ctx, smelt_trace_call(t, 2, in, 2, out));
    cr_assert_eq(out[0], keep[0]);
    cr_assert_eq(out[1], keep[1]);
    for (int i = 0; i < 42; i++) {
        double a = smelt_tensor_get(in[0], i), b = smelt_tensor_get(in[1], i / 7);
        cr_assert_eq(smelt_tensor_get(out[1], i), a > b, "[%d]", i);
    }
    cr_assert_eq(smelt_trace_num_plans(t), 1);
    /* a wrong output shape is an error from the plan */
    smelt_tensor *bad[2] = {t_tensor(ctx, SMELT_F64, SHP(7, 6)), NULL};
    T_ERR(ctx, smelt_trace_call(t, 2, in, 2, bad), SMELT_ERR_SHAPE, "output 0");
    smelt_tensor_free(bad[0]);
    t_free_all(out, 2);
    t_free_all(in, 2);
    smelt_trace_free(t);
    smelt_ctx_free(ctx);
}

Test(trace, opt_level_and_backend_options)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    calls c = {0, 0, false, false};
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    o.opt_level = 0;
    smelt_trace *t = NULL;
    T_OK(ctx, smelt_trace_new(ctx, fn, &c, 2, 2, &o, &t));
    smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F32, SHP(4, 4)), t_rand(ctx, &r, SMELT_F32, SHP(4, 4))};
    call_and_check(ctx, t, in);
    cr_assert_eq(t_stats(smelt_trace_last_plan(t)).kernels, 5, "opt_level 0: one kernel per operator");
    smelt_trace_free(t);

    o.opt_level = 7;
    T_ERR(ctx, smelt_trace_new(ctx, fn, &c, 2, 2, &o, &t), SMELT_ERR_INVALID_ARG, "opt_level");
    cr_assert_null(t);
    o.opt_level = 3;
    o.backend = "MLIR";
    T_OK(ctx, smelt_trace_new(ctx, fn, &c, 2, 2, &o, &t));
    smelt_tensor *out[2] = {NULL, NULL};
    T_ERR(ctx, smelt_trace_call(t, 2, in, 2, out), SMELT_ERR_BACKEND, "does not have");
    cr_assert_eq(smelt_trace_num_plans(t), 0, "a failed recording is not kept");
    smelt_trace_free(t);
    t_free_all(in, 2);
    smelt_ctx_free(ctx);
}

Test(trace, function_errors_are_clear)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F32, SHP(4, 4)), t_rand(ctx, &r, SMELT_F32, SHP(4))};
    smelt_tensor *out[2] = {NULL, NULL};
    smelt_trace *t = NULL;

    /* the function returns an error */
    calls c = {0, SMELT_ERR_UNSUPPORTED, false, false};
    T_OK(ctx, smelt_trace_new(ctx, fn, &c, 2, 2, NULL, &t));
    T_ERR(ctx, smelt_trace_call(t, 2, in, 2, out), SMELT_ERR_UNSUPPORTED, "traced function");
    cr_assert(t_contains(smelt_errmsg(ctx), smelt_strerror(SMELT_ERR_UNSUPPORTED)), "%s",
              smelt_errmsg(ctx));
    cr_assert_null(out[0]);
    cr_assert_eq(smelt_trace_num_plans(t), 0);
    cr_assert_null(smelt_trace_last_plan(t));
    /* it is traced again next time (and may succeed then) */
    c.fail_with = SMELT_OK;
    T_OK(ctx, smelt_trace_call(t, 2, in, 2, out));
    cr_assert_eq(c.n, 2);
    cr_assert_eq(smelt_trace_num_plans(t), 1);
    t_free_all(out, 2);
    smelt_trace_free(t);

    /* the function leaves an output unset */
    calls c2 = {0, 0, true, false};
    T_OK(ctx, smelt_trace_new(ctx, fn, &c2, 2, 2, NULL, &t));
    T_ERR(ctx, smelt_trace_call(t, 2, in, 2, out), SMELT_ERR_INVALID_ARG, "left output 1 unset");
    cr_assert_null(out[0]);
    cr_assert_null(out[1]);
    cr_assert_eq(smelt_trace_num_plans(t), 0);
    smelt_trace_free(t);

    /* a builder error inside the function (it returns OK regardless) */
    calls c3 = {0, 0, false, true};
    T_OK(ctx, smelt_trace_new(ctx, fn, &c3, 2, 2, NULL, &t));
    T_ERR(ctx, smelt_trace_call(t, 2, in, 2, out), SMELT_ERR_SHAPE, "not broadcastable");
    cr_assert(t_contains(smelt_errmsg(ctx), "traced function"), "%s", smelt_errmsg(ctx));
    cr_assert_eq(smelt_trace_num_plans(t), 0);
    smelt_trace_free(t);

    /* wrong counts at the call */
    calls c4 = {0, 0, false, false};
    T_OK(ctx, smelt_trace_new(ctx, fn, &c4, 2, 2, NULL, &t));
    T_ERR(ctx, smelt_trace_call(t, 1, in, 2, out), SMELT_ERR_INVALID_ARG, "2 inputs and 2 outputs, got 1 and 2");
    T_ERR(ctx, smelt_trace_call(t, 2, in, 1, out), SMELT_ERR_INVALID_ARG, "got 2 and 1");
    cr_assert_eq(c4.n, 0);
    /* a run-time error of a recorded plan (a new size that does not broadcast) */
    T_OK(ctx, smelt_trace_call(t, 2, in, 2, out));
    t_free_all(out, 2);
    smelt_tensor *bad[2] = {t_rand(ctx, &r, SMELT_F32, SHP(4, 5)), in[1]};
    T_ERR(ctx, smelt_trace_call(t, 2, bad, 2, out), SMELT_ERR_SHAPE, "not broadcastable");
    cr_assert_eq(smelt_trace_num_plans(t), 1);
    smelt_tensor_free(bad[0]);
    smelt_trace_free(t);

    T_ERR(ctx, smelt_trace_new(ctx, fn, &c4, 65, 1, NULL, &t), SMELT_ERR_INVALID_ARG, "inputs");
    T_ERR(ctx, smelt_trace_new(ctx, fn, &c4, -1, 1, NULL, &t), SMELT_ERR_INVALID_ARG, "inputs");
    t_free_all(in, 2);
    smelt_ctx_free(ctx);
}

static int no_inputs(smelt_graph *g, int n_in, smelt_node *const *in, int n_out, smelt_node **out,
                     void *user)
{
    (void)n_in, (void)in, (void)n_out, (void)user;
    out[0] = smelt_unary(g, SMELT_OP_EXP, smelt_const(g, 1, SMELT_F64));
    return SMELT_OK;
}

Test(trace, no_inputs)
{
    smelt_ctx *ctx = t_ctx();
    smelt_trace *t = NULL;
    T_OK(ctx, smelt_trace_new(ctx, no_inputs, NULL, 0, 1, NULL, &t));
    for (int k = 0; k < 2; k++) {
        smelt_tensor *out = NULL;
        T_OK(ctx, smelt_trace_call(t, 0, NULL, 1, &out));
        cr_assert_eq(smelt_tensor_ndim(out), 0);
        cr_assert_float_eq(smelt_tensor_get(out, 0), 2.718281828459045, 1e-15);
        smelt_tensor_free(out);
    }
    cr_assert_eq(smelt_trace_num_plans(t), 1);
    smelt_trace_free(t);
    smelt_ctx_free(ctx);
}

/* z = a > b, then y = tanh(a * b + 1) - a: y's operator is the last to read
 * a (in fn, a > b reads it after y is written, so y could not be written
 * over a in place) */
static int fn_last(smelt_graph *g, int n_in, smelt_node *const *in, int n_out, smelt_node **out, void *user)
{
    (void)n_in, (void)n_out, (void)user;
    out[1] = smelt_binary(g, SMELT_OP_GT, in[0], in[1]);
    smelt_node *t = smelt_unary(g, SMELT_OP_TANH, smelt_add(g, smelt_mul(g, in[0], in[1]), smelt_scalar(g, 1)));
    out[0] = smelt_sub(g, t, in[0]);
    return SMELT_OK;
}

/* Donated inputs reach every plan the trace makes: output 0 given as input
 * 0's own tensor is written in place, with the bits of a separate output;
 * a donate index that names no input is an error at smelt_trace_new. */
Test(trace, donated_inputs)
{
    smelt_ctx *ctx = t_ctx();
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    const int bad[] = {2};
    o.donate = bad;
    o.n_donate = 1;
    calls c = {0, 0, false, false};
    smelt_trace *t = NULL;
    cr_assert_eq(smelt_trace_new(ctx, fn, &c, 2, 2, &o, &t), SMELT_ERR_INVALID_ARG);
    cr_assert(!t && strstr(smelt_errmsg(ctx), "donate[0] is 2, not an input of the function (it has 2)"), "%s",
              smelt_errmsg(ctx));
    const int donate[] = {0};
    o.donate = donate;
    T_OK(ctx, smelt_trace_new(ctx, fn_last, NULL, 2, 2, &o, &t));
    trng r;
    trng_init(&r, 77);
    for (int64_t rows = 3; rows <= 300; rows *= 10) { /* two signatures' sizes, one plan */
        smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F32, SHP(rows, 40)), t_rand(ctx, &r, SMELT_F32, SHP(40))};
        smelt_tensor *sep[2] = {NULL, NULL}, *alias[2] = {in[0], NULL};
        T_OK(ctx, smelt_trace_call(t, 2, in, 2, sep));
        T_OK(ctx, smelt_trace_call(t, 2, in, 2, alias));
        smelt_plan_stats s;
        T_OK(ctx, smelt_plan_get_stats(smelt_trace_last_plan(t), &s));
        cr_assert_eq(s.donated_inplace, 1);
        cr_assert(t_bitwise_equal(in[0], sep[0]), "%lld rows: in place differs", (long long)rows);
        cr_assert(t_bitwise_equal(alias[1], sep[1]));
        smelt_tensor_free(alias[1]);
        t_free_all(sep, 2);
        t_free_all(in, 2);
    }
    smelt_trace_free(t);
    smelt_ctx_free(ctx);
}

/* The trace's graph saved to a file and loaded back (its outputs in *outs);
 * the file (and the .npy files of its large constants) removed. */
static smelt_graph *save_and_load(smelt_ctx *ctx, smelt_trace *t, smelt_node ***outs)
{
    char path[] = "/tmp/smelt-trace-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    T_OK(ctx, smelt_trace_save(t, path));
    smelt_graph *g = NULL;
    int n_out;
    T_OK(ctx, smelt_graph_load(ctx, path, &g, &n_out, outs));
    unlink(path);
    for (int i = 0; i < 64; i++) {
        char npy[64];
        snprintf(npy, sizeof npy, "%s.c%d.npy", path, i);
        unlink(npy);
    }
    return g;
}

/* A layer with weights the function captures: y = tanh(x * w + b),
 * w and b read through smelt_trace_capture, w twice (one node). */
typedef struct layer {
    smelt_tensor *w, *b;
} layer;

static int captured_fn(smelt_graph *g, int n_in, smelt_node *const *in, int n_out, smelt_node **out, void *user)
{
    layer *l = user;
    (void)n_in, (void)n_out;
    smelt_node *w = smelt_trace_capture(g, l->w), *w2 = smelt_trace_capture(g, l->w);
    cr_assert_eq(w, w2, "the same tensor captured twice is one node");
    out[0] = smelt_unary(g, SMELT_OP_TANH, smelt_add(g, smelt_mul(g, in[0], w), smelt_trace_capture(g, l->b)));
    return SMELT_OK;
}

/* y for weights w, b on x, by hand (f32, as the kernel: tanhf of the f32 sum) */
static void check_layer(smelt_ctx *ctx, smelt_tensor *y, smelt_tensor *x, const layer *l, const char *what)
{
    smelt_graph *g = t_graph(ctx);
    smelt_node *xn = smelt_input(g, "x", SMELT_F32, SHP(6, 5));
    smelt_node *yn = smelt_unary(g, SMELT_OP_TANH, smelt_add(g, smelt_mul(g, xn, smelt_constant(g, l->w)),
                                                             smelt_constant(g, l->b)));
    smelt_tensor *ref;
    t_reference(ctx, g, 1, &yn, 1, &x, &ref);
    t_expect_match(what, y, ref, (t_tol){.ulps = 4, .atol = 1e-6});
    smelt_tensor_free(ref);
    smelt_graph_free(g);
}

Test(trace, captured_tensors_inputs_or_constants)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 35);
    layer l = {t_rand(ctx, &r, SMELT_F32, SHP(6, 5)), t_rand(ctx, &r, SMELT_F32, SHP(5))};
    smelt_tensor *x = t_rand(ctx, &r, SMELT_F32, SHP(6, 5)), *y = NULL;
    for (int as_const = 0; as_const < 2; as_const++) {
        smelt_plan_opts o;
        smelt_plan_opts_init(&o);
        o.capture_as_const = as_const;
        smelt_trace *t = NULL;
        T_OK(ctx, smelt_trace_new(ctx, captured_fn, &l, 1, 1, &o, &t));
        T_OK(ctx, smelt_trace_call(t, 1, &x, 1, &y));
        check_layer(ctx, y, x, &l, as_const ? "constants" : "captured inputs");
        /* new weight values: an input reads them, a constant keeps the old */
        smelt_tensor *w0 = NULL, *y2 = NULL;
        T_OK(ctx, smelt_tensor_contiguous(l.w, &w0));
        for (int i = 0; i < 30; i++)
            t_set(l.w, i, smelt_tensor_get(l.w, i) * 2 + 1);
        T_OK(ctx, smelt_trace_call(t, 1, &x, 1, &y2));
        cr_assert_eq(smelt_trace_num_plans(t), 1, "no new recording");
        layer old = {w0, l.b};
        check_layer(ctx, y2, x, as_const ? &old : &l, as_const ? "constants after the update" : "inputs after the update");
        /* a self-contained file only with constants: it loads and runs with x alone */
        smelt_node **outs = NULL;
        smelt_graph *g = save_and_load(ctx, t, &outs);
        cr_assert_eq(smelt_graph_num_inputs(g), as_const ? 1 : 3, "inputs of the saved graph");
        smelt_free(outs);
        smelt_graph_free(g);
        for (int i = 0; i < 30; i++) /* the weights back */
            t_set(l.w, i, smelt_tensor_get(w0, i));
        smelt_tensor_free(w0), smelt_tensor_free(y2), smelt_tensor_free(y);
        y = NULL;
        smelt_trace_free(t);
    }
    /* outside a trace: a constant */
    smelt_graph *g = t_graph(ctx);
    cr_assert_eq(smelt_node_op(smelt_trace_capture(g, l.w)), SMELT_OP_TENSOR);
    cr_assert_null(smelt_trace_capture(g, NULL));
    smelt_graph_free(g);
    smelt_tensor_free(l.w), smelt_tensor_free(l.b), smelt_tensor_free(x);
    smelt_ctx_free(ctx);
}

/* A traced MLP block whose weights are captured as constants: saved by the
 * trace as a self-contained graph file, loaded and run again (as `smelt
 * run` does) with the bits of the trace; attention (no weights) likewise. */
typedef struct mlp_w {
    smelt_tensor *w1, *b1, *w2, *b2;
} mlp_w;

static int mlp_fn(smelt_graph *g, int n_in, smelt_node *const *in, int n_out, smelt_node **out, void *user)
{
    mlp_w *m = user;
    (void)n_in, (void)n_out;
    smelt_node *h = smelt_unary(g, SMELT_OP_GELU_TANH, smelt_add(g, smelt_matmul(g, in[0], smelt_trace_capture(g, m->w1)),
                                                                smelt_trace_capture(g, m->b1)));
    smelt_node *y = smelt_add(g, smelt_add(g, smelt_matmul(g, h, smelt_trace_capture(g, m->w2)), smelt_trace_capture(g, m->b2)),
                              in[0]);
    const int last[] = {-1};
    smelt_node *d = smelt_sub(g, y, smelt_reduce(g, SMELT_OP_MEAN, y, 1, last, 1));
    out[0] = smelt_mul(g, d, smelt_unary(g, SMELT_OP_RSQRT, smelt_add(g, smelt_reduce(g, SMELT_OP_MEAN, smelt_mul(g, d, d),
                                                                                     1, last, 1), smelt_scalar(g, 1e-5))));
    return SMELT_OK;
}

static int attention_fn(smelt_graph *g, int n_in, smelt_node *const *in, int n_out, smelt_node **out, void *user)
{
    (void)n_in, (void)n_out, (void)user;
    out[0] = smelt_expr(g, "reshape(transpose((exp(q @ transpose(k, (0, 1, 3, 2)) / 4 - max(q @ transpose(k, (0, 1, 3, 2)) / "
                           "4, axis=-1, keepdims=True)) / sum(exp(q @ transpose(k, (0, 1, 3, 2)) / 4 - max(q @ transpose(k, "
                           "(0, 1, 3, 2)) / 4, axis=-1, keepdims=True)), axis=-1, keepdims=True)) @ v, (0, 2, 1, 3)), "
                           "(2, 24, 64))",
                        (const char *[]){"q", "k", "v"}, in, 3);
    return SMELT_OK;
}

static void saved_and_run_again(smelt_ctx *ctx, smelt_trace *t, int n_in, smelt_tensor **in, int want_inputs)
{
    smelt_tensor *y = NULL, *y2 = NULL;
    T_OK(ctx, smelt_trace_call(t, n_in, in, 1, &y));
    smelt_node **outs = NULL;
    smelt_graph *g = save_and_load(ctx, t, &outs);
    cr_assert_eq(smelt_graph_num_inputs(g), want_inputs, "a self-contained graph: the function's inputs only");
    smelt_plan *p = t_plan(ctx, g, 1, outs, 3);
    t_run(p, n_in, in, 1, &y2);
    cr_assert(t_bitwise_equal(y, y2), "the saved graph gives other bits");
    smelt_tensor *ref;
    t_reference(ctx, g, 1, outs, n_in, in, &ref);
    t_expect_match("the saved graph against the reference", y2, ref, (t_tol){.ulps = 64, .atol = 1e-4});
    smelt_tensor_free(ref), smelt_tensor_free(y), smelt_tensor_free(y2);
    smelt_plan_free(p);
    smelt_free(outs);
    smelt_graph_free(g);
}

Test(trace, mlp_and_attention_saved_self_contained)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 36);
    mlp_w m = {t_rand(ctx, &r, SMELT_F32, SHP(32, 64)), t_rand(ctx, &r, SMELT_F32, SHP(64)),
               t_rand(ctx, &r, SMELT_F32, SHP(64, 32)), t_rand(ctx, &r, SMELT_F32, SHP(32))};
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    o.capture_as_const = 1;
    smelt_trace *t = NULL;
    T_OK(ctx, smelt_trace_new(ctx, mlp_fn, &m, 1, 1, &o, &t));
    smelt_tensor *x = t_rand(ctx, &r, SMELT_F32, SHP(16, 32));
    saved_and_run_again(ctx, t, 1, &x, 1);
    smelt_trace_free(t);
    smelt_tensor_free(x), smelt_tensor_free(m.w1), smelt_tensor_free(m.b1), smelt_tensor_free(m.w2),
        smelt_tensor_free(m.b2);
    T_OK(ctx, smelt_trace_new(ctx, attention_fn, NULL, 3, 1, &o, &t));
    smelt_tensor *qkv[3];
    for (int i = 0; i < 3; i++)
        qkv[i] = t_rand(ctx, &r, SMELT_F32, SHP(2, 4, 24, 16));
    saved_and_run_again(ctx, t, 3, qkv, 3);
    smelt_trace_free(t);
    t_free_all(qkv, 3);
    smelt_ctx_free(ctx);
}

/* smelt_plan_run_rebind: one plan and one set of wrapped tensors run on
 * new buffers each call (what the Python package does); the tensors it can
 * rebind and the errors for the others. */
Test(rebind, runs_on_new_buffers_each_call)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_F32, SHP(5));
    smelt_node *b = smelt_input(g, "b", SMELT_F32, SHP(5));
    smelt_node *y = smelt_add(g, smelt_mul(g, a, b), smelt_scalar(g, 1));
    smelt_plan *p;
    T_OK(ctx, smelt_plan_new(ctx, g, 1, &y, NULL, &p));
    float A[2][5], B[2][5], Y[2][5], dummy[5] = {0};
    trng r;
    trng_init(&r, 41);
    smelt_tensor *in[2], *out;
    T_OK(ctx, smelt_tensor_wrap(ctx, SMELT_F32, SHP(5), NULL, dummy, &in[0]));
    T_OK(ctx, smelt_tensor_wrap(ctx, SMELT_F32, SHP(5), NULL, dummy, &in[1]));
    T_OK(ctx, smelt_tensor_wrap(ctx, SMELT_F32, SHP(5), NULL, dummy, &out));
    for (int k = 0; k < 2; k++) {
        for (int i = 0; i < 5; i++)
            A[k][i] = (float)trng_uniform(&r, -2, 2), B[k][i] = (float)trng_uniform(&r, -2, 2);
        void *data[3] = {A[k], B[k], Y[k]};
        T_OK(ctx, smelt_plan_run_rebind(p, 2, in, 1, &out, data));
        for (int i = 0; i < 5; i++)
            cr_assert_eq(Y[k][i], A[k][i] * B[k][i] + 1.0f, "call %d element %d", k, i);
        cr_assert_eq(smelt_tensor_data(out), (void *)Y[k]);
    }
    /* a NULL entry keeps the tensor's memory */
    void *keep[3] = {NULL, B[0], Y[0]};
    T_OK(ctx, smelt_plan_run_rebind(p, 2, in, 1, &out, keep));
    for (int i = 0; i < 5; i++)
        cr_assert_eq(Y[0][i], A[1][i] * B[0][i] + 1.0f);
    /* a tensor that owns its memory cannot be pointed elsewhere */
    smelt_tensor *own;
    T_OK(ctx, smelt_tensor_new(ctx, SMELT_F32, SHP(5), &own));
    T_ERR(ctx, smelt_tensor_rebind(own, A[0]), SMELT_ERR_INVALID_ARG, "owns its memory");
    smelt_tensor *mixed[2] = {in[0], own};
    T_ERR(ctx, smelt_plan_run_rebind(p, 2, mixed, 1, &out, (void *[]){A[0], B[0], Y[0]}),
          SMELT_ERR_INVALID_ARG, "smelt_tensor_wrap");
    T_ERR(ctx, smelt_tensor_rebind(in[0], NULL), SMELT_ERR_INVALID_ARG, "data is NULL");
    T_ERR(ctx, smelt_tensor_rebind(in[0], (char *)A[0] + 1), SMELT_ERR_INVALID_ARG, "not aligned");
    cr_assert_eq(smelt_tensor_data(in[0]), (void *)A[1]);
    T_ERR(ctx, smelt_plan_run_rebind(p, 2, in, 1, &out, NULL), SMELT_ERR_INVALID_ARG, "NULL");
    cr_assert_eq(smelt_tensor_rebind(NULL, A[0]), SMELT_ERR_INVALID_ARG);
    smelt_tensor_free(own);
    for (int i = 0; i < 2; i++)
        smelt_tensor_free(in[i]);
    smelt_tensor_free(out);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}
