/* Error paths: every failure gives a status code and a message that says
 * what is wrong (smelt_errmsg); sticky builder errors; run-time checks of
 * inputs and outputs; NULL arguments everywhere; backend selection from the
 * environment and the API; kernels that fail to compile (the unfused
 * fallback). */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "runtime.h" /* smelt__setting_name */

/* ---- sticky builder errors ----------------------------------------------------------------- */

Test(errors, non_broadcastable_is_sticky)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_F32, SHP(3, 4));
    smelt_node *b = smelt_input(g, "b", SMELT_F32, SHP(5));
    smelt_node *ok = smelt_unary(g, SMELT_OP_EXP, a);
    cr_assert_not_null(ok);
    cr_assert_null(smelt_add(g, a, b));
    cr_assert_eq(smelt_graph_status(g), SMELT_ERR_SHAPE);
    const char *m = smelt_graph_errmsg(g);
    cr_assert(t_contains(m, "add") && t_contains(m, "(3, 4)") && t_contains(m, "(5,)") &&
                  t_contains(m, "not broadcastable"),
              "message: %s", m);
    cr_assert_str_eq(smelt_errmsg(ctx), m, "the context carries the same message");

    /* later builder calls return NULL and keep the first error */
    cr_assert_null(smelt_unary(g, SMELT_OP_NEG, a));
    cr_assert_null(smelt_input(g, "c", SMELT_F32, SHP(2)));
    cr_assert_null(smelt_const(g, 1, SMELT_F32));
    cr_assert_null(smelt_scalar(g, 1));
    cr_assert_null(smelt_cast(g, a, SMELT_F64));
    cr_assert_null(smelt_broadcast_to(g, a, SHP(2, 3, 4)));
    cr_assert_null(smelt_mul(g, NULL, a));
    cr_assert_eq(smelt_graph_status(g), SMELT_ERR_SHAPE);
    cr_assert_str_eq(smelt_graph_errmsg(g), m);
    cr_assert_eq(smelt_graph_num_inputs(g), 2);

    /* the plan and the reference report it */
    smelt_plan *p = NULL;
    T_ERR(ctx, smelt_plan_new(ctx, g, 1, &ok, NULL, &p), SMELT_ERR_SHAPE, "not broadcastable");
    cr_assert_null(p);
    smelt_tensor *res = NULL, *in[2] = {t_tensor(ctx, SMELT_F32, SHP(3, 4)), t_tensor(ctx, SMELT_F32, SHP(5))};
    T_ERR(ctx, smelt_reference_eval(ctx, g, 1, &ok, 2, in, &res), SMELT_ERR_SHAPE, "not broadcastable");
    cr_assert_null(res);
    t_free_all(in, 2);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(errors, null_operand_keeps_the_first_error)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, NULL, SMELT_F32, SHP(3));
    /* a failed builder call returns NULL; passing it on records one error */
    smelt_node *bad = smelt_unary(g, SMELT_OP_LOGICAL_NOT, smelt_broadcast_to(g, a, SHP(4)));
    cr_assert_null(bad);
    cr_assert_eq(smelt_graph_status(g), SMELT_ERR_SHAPE, "the first error (broadcast_to) wins: %s",
                 smelt_graph_errmsg(g));
    cr_assert(t_contains(smelt_graph_errmsg(g), "broadcast_to"), "%s", smelt_graph_errmsg(g));
    smelt_graph_free(g);

    g = t_graph(ctx);
    a = smelt_input(g, NULL, SMELT_F32, SHP(3));
    cr_assert_null(smelt_add(g, a, NULL));
    cr_assert_eq(smelt_graph_status(g), SMELT_ERR_INVALID_ARG);
    cr_assert(t_contains(smelt_graph_errmsg(g), "operand 1 is NULL"), "%s", smelt_graph_errmsg(g));
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(errors, dtype_errors)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *b = smelt_input(g, NULL, SMELT_BOOL, SHP(3));
    cr_assert_null(smelt_sub(g, b, b));
    cr_assert_eq(smelt_graph_status(g), SMELT_ERR_DTYPE);
    cr_assert(t_contains(smelt_graph_errmsg(g), "sub does not support dtype bool"), "%s",
              smelt_graph_errmsg(g));
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* ---- plan_new and plan_run checks ---------------------------------------------------------- */

Test(errors, plan_new_arguments)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx), *g2 = t_graph(ctx);
    smelt_node *x = smelt_input(g, NULL, SMELT_F32, SHP(3));
    smelt_node *y = smelt_unary(g, SMELT_OP_EXP, x);
    smelt_node *other = smelt_input(g2, NULL, SMELT_F32, SHP(3));
    smelt_plan *p = (smelt_plan *)&p; /* must be reset to NULL on failure */
    T_ERR(ctx, smelt_plan_new(ctx, g, 0, &y, NULL, &p), SMELT_ERR_INVALID_ARG, "no outputs");
    cr_assert_null(p);
    T_ERR(ctx, smelt_plan_new(ctx, g, 1, NULL, NULL, &p), SMELT_ERR_INVALID_ARG, "no outputs");
    smelt_node *nul = NULL;
    T_ERR(ctx, smelt_plan_new(ctx, g, 1, &nul, NULL, &p), SMELT_ERR_INVALID_ARG, "output 0 is NULL");
    smelt_node *mixed[] = {y, other};
    T_ERR(ctx, smelt_plan_new(ctx, g, 2, mixed, NULL, &p), SMELT_ERR_INVALID_ARG, "another graph");
    T_ERR(ctx, smelt_plan_new(ctx, NULL, 1, &y, NULL, &p), SMELT_ERR_INVALID_ARG, "graph is NULL");
    T_ERR(ctx, smelt_plan_new(ctx, g, 1, &y, NULL, NULL), SMELT_ERR_INVALID_ARG, "out is NULL");
    cr_assert_eq(smelt_plan_new(NULL, g, 1, &y, NULL, &p), SMELT_ERR_INVALID_ARG);
    cr_assert_null(p);
    smelt_graph_free(g);
    smelt_graph_free(g2);
    smelt_ctx_free(ctx);
}

Test(errors, run_time_inputs)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, NULL, SMELT_F32, SHP(4, 6));
    smelt_node *b = smelt_input(g, NULL, SMELT_F32, SHP(4, 1));
    smelt_node *y = smelt_add(g, a, b);
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    smelt_tensor *good[2] = {t_rand(ctx, &r, SMELT_F32, SHP(4, 6)), t_rand(ctx, &r, SMELT_F32, SHP(4, 1))};
    smelt_tensor *out = NULL;

    T_ERR(ctx, smelt_plan_run(p, 1, good, 1, &out), SMELT_ERR_INVALID_ARG, "takes 2 inputs, got 1");
    T_ERR(ctx, smelt_plan_run(p, 3, good, 1, &out), SMELT_ERR_INVALID_ARG, "takes 2 inputs, got 3");
    T_ERR(ctx, smelt_plan_run(p, 2, NULL, 1, &out), SMELT_ERR_INVALID_ARG, "inputs is NULL");
    smelt_tensor *with_null[2] = {good[0], NULL};
    T_ERR(ctx, smelt_plan_run(p, 2, with_null, 1, &out), SMELT_ERR_INVALID_ARG, "input 1 is NULL");

    smelt_tensor *f64 = t_rand(ctx, &r, SMELT_F64, SHP(4, 6));
    smelt_tensor *wrong_dt[2] = {f64, good[1]};
    T_ERR(ctx, smelt_plan_run(p, 2, wrong_dt, 1, &out), SMELT_ERR_DTYPE, "input 0: expected dtype f32, got f64");

    smelt_tensor *rank3 = t_rand(ctx, &r, SMELT_F32, SHP(1, 4, 6));
    smelt_tensor *wrong_rank[2] = {rank3, good[1]};
    T_ERR(ctx, smelt_plan_run(p, 2, wrong_rank, 1, &out), SMELT_ERR_SHAPE, "input 0");
    cr_assert(t_contains(smelt_errmsg(ctx), "(1, 4, 6)"), "%s", smelt_errmsg(ctx));

    /* same rank, but the size-1 pattern changed: (4, 6) where (4, 1) was */
    smelt_tensor *full = t_rand(ctx, &r, SMELT_F32, SHP(4, 6));
    smelt_tensor *wrong_pattern[2] = {good[0], full};
    T_ERR(ctx, smelt_plan_run(p, 2, wrong_pattern, 1, &out), SMELT_ERR_SHAPE, "size-1");
    /* new sizes that do not broadcast together */
    smelt_tensor *a5 = t_rand(ctx, &r, SMELT_F32, SHP(5, 6));
    smelt_tensor *mismatch[2] = {a5, good[1]};
    T_ERR(ctx, smelt_plan_run(p, 2, mismatch, 1, &out), SMELT_ERR_SHAPE, "not broadcastable");
    cr_assert_null(out, "no output is left behind by a failed run");

    /* still usable afterwards */
    t_run(p, 2, good, 1, &out);
    smelt_tensor_free(out);
    smelt_tensor *all[] = {good[0], good[1], f64, rank3, full, a5};
    t_free_all(all, NELEMS(all));
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(errors, run_time_outputs)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, NULL, SMELT_I32, SHP(4, 6));
    smelt_node *y = smelt_mul(g, a, a);
    smelt_node *z = smelt_binary(g, SMELT_OP_GT, a, smelt_scalar(g, 0));
    smelt_node *outs[] = {y, z};
    smelt_plan *p = t_plan(ctx, g, 2, outs, 3);
    smelt_tensor *in = t_rand(ctx, &r, SMELT_I32, SHP(4, 6));
    smelt_tensor *o[2] = {NULL, NULL};
    T_ERR(ctx, smelt_plan_run(p, 1, &in, 1, o), SMELT_ERR_INVALID_ARG, "2 outputs, got 1");
    T_ERR(ctx, smelt_plan_run(p, 1, &in, 2, NULL), SMELT_ERR_INVALID_ARG, "outputs is NULL");

    smelt_tensor *wrong_shape = t_tensor(ctx, SMELT_I32, SHP(6, 4));
    o[0] = wrong_shape;
    T_ERR(ctx, smelt_plan_run(p, 1, &in, 2, o), SMELT_ERR_SHAPE, "output 0: expected i32 (4, 6), got i32 (6, 4)");
    cr_assert_eq(o[0], wrong_shape, "a caller's tensor is never freed or replaced");
    cr_assert_null(o[1], "the output allocated before the error is released");
    smelt_tensor *wrong_dt = t_tensor(ctx, SMELT_F32, SHP(4, 6));
    o[0] = NULL;
    o[1] = wrong_dt;
    T_ERR(ctx, smelt_plan_run(p, 1, &in, 2, o), SMELT_ERR_SHAPE, "output 1: expected bool (4, 6), got f32 (4, 6)");
    cr_assert_null(o[0]);
    smelt_tensor *all[] = {in, wrong_shape, wrong_dt};
    t_free_all(all, 3);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* ---- NULL arguments everywhere --------------------------------------------------------------- */

static int traced_add(smelt_graph *g, int n_in, smelt_node *const *in, int n_out, smelt_node **out,
                      void *user)
{
    (void)n_in, (void)n_out, (void)user;
    out[0] = smelt_add(g, in[0], in[0]);
    return SMELT_OK;
}

Test(errors, null_arguments_everywhere)
{
    smelt_ctx *ctx = t_ctx();
    /* contexts */
    cr_assert_eq(smelt_ctx_new(NULL), SMELT_ERR_INVALID_ARG);
    smelt_ctx_free(NULL);
    cr_assert_not_null(smelt_errmsg(NULL));
    cr_assert_eq(smelt_ctx_set_backend(NULL, "TCC"), SMELT_ERR_INVALID_ARG);
    cr_assert_eq(smelt_ctx_set_threads(NULL, 1), SMELT_ERR_INVALID_ARG);
    cr_assert_eq(smelt_ctx_threads(NULL), 0);
    cr_assert_neq(smelt_backend_check(NULL, "TCC"), SMELT_OK);
    T_OK(ctx, smelt_backend_check(ctx, NULL)); /* the one in force: SMELT_JIT_BACKEND=TCC */
    /* tensors */
    smelt_tensor *t = (smelt_tensor *)&t;
    T_ERR(ctx, smelt_tensor_new(ctx, SMELT_F32, 2, NULL, &t), SMELT_ERR_INVALID_ARG, "shape is NULL");
    cr_assert_null(t);
    cr_assert_eq(smelt_tensor_new(ctx, SMELT_F32, SHP(2), NULL), SMELT_ERR_INVALID_ARG);
    cr_assert_eq(smelt_tensor_new(NULL, SMELT_F32, 2, NULL, &t), SMELT_ERR_INVALID_ARG);
    cr_assert_eq(smelt_tensor_wrap(ctx, SMELT_F32, SHP(2), NULL, NULL, &t), SMELT_ERR_INVALID_ARG);
    cr_assert_eq(smelt_tensor_wrap(ctx, SMELT_F32, SHP(2), NULL, ctx, NULL), SMELT_ERR_INVALID_ARG);
    smelt_tensor_free(NULL);
    cr_assert_eq(smelt_tensor_ndim(NULL), 0);
    cr_assert_null(smelt_tensor_shape(NULL));
    cr_assert_null(smelt_tensor_strides(NULL));
    cr_assert_null(smelt_tensor_data(NULL));
    cr_assert_eq(smelt_tensor_numel(NULL), 0);
    cr_assert_eq(smelt_tensor_is_contiguous(NULL), 0);
    cr_assert_eq(smelt_tensor_get(NULL, 0), 0);
    (void)smelt_tensor_dtype(NULL);
    smelt_tensor *real = t_tensor(ctx, SMELT_F32, SHP(2, 3));
    cr_assert_eq(smelt_tensor_transpose(NULL, (const int[]){1, 0}, &t), SMELT_ERR_INVALID_ARG);
    /* each with a message of its own (the last error's text used to show:
     * "tensor_new: shape is NULL") */
    T_ERR(ctx, smelt_tensor_transpose(real, NULL, &t), SMELT_ERR_INVALID_ARG, "smelt_tensor_transpose: perm is NULL");
    T_ERR(ctx, smelt_tensor_transpose(real, (const int[]){1, 0}, NULL), SMELT_ERR_INVALID_ARG,
          "smelt_tensor_transpose: out is NULL");
    cr_assert_eq(smelt_tensor_slice(NULL, 0, 0, 1, 1, &t), SMELT_ERR_INVALID_ARG);
    T_ERR(ctx, smelt_tensor_slice(real, 0, 0, 1, 1, NULL), SMELT_ERR_INVALID_ARG, "smelt_tensor_slice: out is NULL");
    cr_assert_eq(smelt_tensor_broadcast_to(NULL, SHP(2, 3), &t), SMELT_ERR_INVALID_ARG);
    T_ERR(ctx, smelt_tensor_broadcast_to(real, 2, NULL, &t), SMELT_ERR_INVALID_ARG,
          "smelt_tensor_broadcast_to: shape is NULL");
    T_ERR(ctx, smelt_tensor_broadcast_to(real, SHP(2, 3), NULL), SMELT_ERR_INVALID_ARG,
          "smelt_tensor_broadcast_to: out is NULL");
    cr_assert_eq(smelt_tensor_contiguous(NULL, &t), SMELT_ERR_INVALID_ARG);
    T_ERR(ctx, smelt_tensor_contiguous(real, NULL), SMELT_ERR_INVALID_ARG, "smelt_tensor_contiguous: out is NULL");
    /* graphs and nodes */
    smelt_graph *g = (smelt_graph *)&g;
    cr_assert_eq(smelt_graph_new(NULL, &g), SMELT_ERR_INVALID_ARG);
    cr_assert_null(g);
    cr_assert_eq(smelt_graph_new(ctx, NULL), SMELT_ERR_INVALID_ARG);
    smelt_graph_free(NULL);
    cr_assert_neq(smelt_graph_status(NULL), SMELT_OK);
    cr_assert_not_null(smelt_graph_errmsg(NULL));
    cr_assert_eq(smelt_graph_num_inputs(NULL), 0);
    cr_assert_null(smelt_input(NULL, NULL, SMELT_F32, SHP(2)));
    cr_assert_null(smelt_const(NULL, 1, SMELT_F32));
    cr_assert_null(smelt_scalar(NULL, 1));
    cr_assert_null(smelt_op_apply(NULL, SMELT_OP_ADD, 0, NULL));
    cr_assert_null(smelt_unary(NULL, SMELT_OP_NEG, NULL));
    cr_assert_null(smelt_binary(NULL, SMELT_OP_ADD, NULL, NULL));
    cr_assert_null(smelt_ternary(NULL, SMELT_OP_WHERE, NULL, NULL, NULL));
    cr_assert_null(smelt_cast(NULL, NULL, SMELT_F32));
    cr_assert_null(smelt_broadcast_to(NULL, NULL, SHP(2)));
    (void)smelt_node_dtype(NULL);
    (void)smelt_node_op(NULL);
    cr_assert_eq(smelt_node_ndim(NULL), 0);
    cr_assert_null(smelt_node_shape(NULL));
    g = t_graph(ctx);
    cr_assert_null(smelt_op_apply(g, SMELT_OP_ADD, 2, NULL));
    cr_assert_eq(smelt_graph_status(g), SMELT_ERR_INVALID_ARG);
    smelt_graph_free(g);
    g = t_graph(ctx);
    cr_assert_null(smelt_unary(g, SMELT_OP_NEG, NULL));
    smelt_graph_free(g);
    g = t_graph(ctx);
    cr_assert_null(smelt_cast(g, NULL, SMELT_F32));
    cr_assert_eq(smelt_graph_status(g), SMELT_ERR_INVALID_ARG);
    smelt_graph_free(g);
    g = t_graph(ctx);
    cr_assert_null(smelt_broadcast_to(g, NULL, SHP(2)));
    cr_assert_eq(smelt_graph_status(g), SMELT_ERR_INVALID_ARG);
    smelt_graph_free(g);
    /* plans */
    g = t_graph(ctx);
    smelt_node *x = smelt_input(g, NULL, SMELT_F32, SHP(2, 3));
    smelt_node *y = smelt_unary(g, SMELT_OP_NEG, x);
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    smelt_plan_free(NULL);
    smelt_plan_opts_init(NULL);
    smelt_plan_stats st;
    cr_assert_eq(smelt_plan_get_stats(NULL, &st), SMELT_ERR_INVALID_ARG);
    cr_assert_eq(smelt_plan_get_stats(p, NULL), SMELT_ERR_INVALID_ARG);
    cr_assert_not_null(smelt_plan_describe(NULL));
    cr_assert_eq(smelt_plan_run(NULL, 1, &real, 1, &t), SMELT_ERR_INVALID_ARG);
    cr_assert_eq(smelt_plan_num_kernels(NULL), 0);
    cr_assert_null(smelt_plan_kernel_name(NULL, 0));
    cr_assert_null(smelt_plan_kernel_source(NULL, 0));
    cr_assert_null(smelt_plan_kernel_name(p, -1));
    cr_assert_neq(smelt_plan_wait(NULL), SMELT_OK);
    /* reference */
    smelt_tensor *res = NULL;
    cr_assert_eq(smelt_reference_eval(NULL, g, 1, &y, 1, &real, &res), SMELT_ERR_INVALID_ARG);
    T_ERR(ctx, smelt_reference_eval(ctx, NULL, 1, &y, 1, &real, &res), SMELT_ERR_INVALID_ARG, "NULL");
    T_ERR(ctx, smelt_reference_eval(ctx, g, 1, NULL, 1, &real, &res), SMELT_ERR_INVALID_ARG, "NULL");
    T_ERR(ctx, smelt_reference_eval(ctx, g, 1, &y, 1, NULL, &res), SMELT_ERR_INVALID_ARG, "NULL");
    T_ERR(ctx, smelt_reference_eval(ctx, g, 1, &y, 1, &real, NULL), SMELT_ERR_INVALID_ARG, "NULL");
    smelt_node *nul = NULL;
    T_ERR(ctx, smelt_reference_eval(ctx, g, 1, &nul, 1, &real, &res), SMELT_ERR_INVALID_ARG, "output 0");
    /* traces */
    smelt_trace *tr = (smelt_trace *)&tr;
    cr_assert_eq(smelt_trace_new(NULL, traced_add, NULL, 1, 1, NULL, &tr), SMELT_ERR_INVALID_ARG);
    T_ERR(ctx, smelt_trace_new(ctx, NULL, NULL, 1, 1, NULL, &tr), SMELT_ERR_INVALID_ARG, "fn is NULL");
    T_ERR(ctx, smelt_trace_new(ctx, traced_add, NULL, 1, 1, NULL, NULL), SMELT_ERR_INVALID_ARG, "out is NULL");
    T_ERR(ctx, smelt_trace_new(ctx, traced_add, NULL, 1, 0, NULL, &tr), SMELT_ERR_INVALID_ARG, "output");
    smelt_trace_free(NULL);
    cr_assert_eq(smelt_trace_call(NULL, 1, &real, 1, &t), SMELT_ERR_INVALID_ARG);
    cr_assert_null(smelt_trace_last_plan(NULL));
    cr_assert_eq(smelt_trace_num_plans(NULL), 0);
    T_OK(ctx, smelt_trace_new(ctx, traced_add, NULL, 1, 1, NULL, &tr));
    smelt_tensor *out = NULL, *nul_in = NULL;
    T_ERR(ctx, smelt_trace_call(tr, 1, NULL, 1, &out), SMELT_ERR_INVALID_ARG, "trace takes");
    T_ERR(ctx, smelt_trace_call(tr, 1, &nul_in, 1, &out), SMELT_ERR_INVALID_ARG, "input 0 is NULL");
    T_ERR(ctx, smelt_trace_call(tr, 1, &real, 1, NULL), SMELT_ERR_INVALID_ARG, "trace takes");
    cr_assert_null(out);
    smelt_trace_free(tr);
    /* misc */
    smelt_free(NULL);
    cr_assert_null(smelt_dtype_name((smelt_dtype)-3));
    cr_assert_null(smelt_op_name((smelt_op)9999));
    smelt_tensor_free(real);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* ---- backend selection -------------------------------------------------------------------- */

/* A plan of a small graph on a context with no backend override. */
static int try_plan(smelt_ctx *ctx, const char *backend, smelt_plan_stats *stats)
{
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, NULL, SMELT_F32, SHP(10));
    smelt_node *y = smelt_add(g, smelt_mul(g, x, x), smelt_scalar(g, 1));
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    o.backend = backend;
    smelt_plan *p = NULL;
    int st = smelt_plan_new(ctx, g, 1, &y, &o, &p);
    if (st == SMELT_OK) {
        trng r;
        trng_init(&r, 0);
        smelt_tensor *in = t_rand(ctx, &r, SMELT_F32, SHP(10)), *got = NULL, *ref = NULL;
        t_run(p, 1, &in, 1, &got);
        t_reference(ctx, g, 1, &y, 1, &in, &ref);
        t_expect_match(backend ? backend : "environment's backend", got, ref, T_CHAIN);
        if (stats) {
            *stats = t_stats(p);
        }
        smelt_tensor *all[] = {in, got, ref};
        t_free_all(all, 3);
    } else {
        cr_assert_null(p);
    }
    smelt_plan_free(p);
    smelt_graph_free(g);
    return st;
}

static void clean_env(void)
{
    unsetenv("SMELT_JIT_BACKEND");
    unsetenv("MGB_JIT_BACKEND");
    setenv("SMELT_CACHE", "0", 1); /* keep the user's kernel cache out of it */
}

Test(backend, invalid_smelt_jit_backend_lists_the_valid_names)
{
    clean_env();
    setenv("SMELT_JIT_BACKEND", "FOO", 1);
    smelt_ctx *ctx = t_ctx_raw();
    T_ERR(ctx, try_plan(ctx, NULL, NULL), SMELT_ERR_INVALID_ARG, "SMELT_JIT_BACKEND");
    const char *m = smelt_errmsg(ctx);
    cr_assert(t_contains(m, "FOO"), "%s", m);
    static const char *valid[] = {"TCC", "CC", "NVRTC", "AUTO"};
    for (int i = 0; i < 4; i++)
        cr_assert(t_contains(m, valid[i]), "the message lists %s: %s", valid[i], m);
    T_ERR(ctx, smelt_backend_check(ctx, "FOO"), SMELT_ERR_INVALID_ARG, "FOO");
    smelt_ctx_free(ctx);
}

/* smelt_backend_check(ctx, NULL) checks the backend in force (here the
 * environment's), with the library's message */
Test(backend, check_of_the_backend_in_force)
{
    clean_env();
    setenv("SMELT_JIT_BACKEND", "bogus", 1);
    smelt_ctx *ctx = t_ctx_raw();
    T_ERR(ctx, smelt_backend_check(ctx, NULL), SMELT_ERR_INVALID_ARG, "SMELT_JIT_BACKEND");
    cr_assert(t_contains(smelt_errmsg(ctx), "TCC, CC, NVRTC, AUTO"), "%s", smelt_errmsg(ctx));
    setenv("SMELT_JIT_BACKEND", "TCC", 1);
    T_OK(ctx, smelt_backend_check(ctx, NULL));
    cr_assert_neq(smelt_ctx_set_backend(ctx, "bogus"), SMELT_OK);
    smelt_ctx_free(ctx);
}

Test(backend, mgb_jit_backend_when_smelt_jit_backend_is_unset)
{
    clean_env();
    setenv("MGB_JIT_BACKEND", "bogus", 1);
    smelt_ctx *ctx = t_ctx_raw();
    T_ERR(ctx, try_plan(ctx, NULL, NULL), SMELT_ERR_INVALID_ARG, "MGB_JIT_BACKEND");
    cr_assert(t_contains(smelt_errmsg(ctx), "bogus"), "%s", smelt_errmsg(ctx));
    /* a valid MegEngine name works */
    setenv("MGB_JIT_BACKEND", "tcc", 1);
    smelt_plan_stats s;
    T_OK(ctx, try_plan(ctx, NULL, &s));
    cr_assert_str_eq(s.backend, "TCC");
    /* SMELT_JIT_BACKEND wins over it */
    setenv("MGB_JIT_BACKEND", "bogus", 1);
    setenv("SMELT_JIT_BACKEND", "TCC", 1);
    T_OK(ctx, try_plan(ctx, NULL, &s));
    /* an empty SMELT_JIT_BACKEND counts as unset */
    setenv("SMELT_JIT_BACKEND", "", 1);
    T_ERR(ctx, try_plan(ctx, NULL, NULL), SMELT_ERR_INVALID_ARG, "MGB_JIT_BACKEND");
    smelt_ctx_free(ctx);
}

Test(backend, halide_and_mlir_are_not_smelt_backends)
{
    clean_env();
    static const char *names[] = {"HALIDE", "MLIR", "halide"};
    for (int i = 0; i < 3; i++) {
        setenv("MGB_JIT_BACKEND", names[i], 1);
        smelt_ctx *ctx = t_ctx_raw();
        T_ERR(ctx, try_plan(ctx, NULL, NULL), SMELT_ERR_BACKEND, "does not have");
        cr_assert(t_contains(smelt_errmsg(ctx), names[i]), "%s", smelt_errmsg(ctx));
        T_ERR(ctx, smelt_ctx_set_backend(ctx, names[i]), SMELT_ERR_BACKEND, "does not have");
        T_ERR(ctx, try_plan(ctx, names[i], NULL), SMELT_ERR_BACKEND, "does not have");
        smelt_ctx_free(ctx);
    }
}

Test(backend, unavailable_cc_is_a_clear_error)
{
    clean_env();
    setenv("CC", "/nonexistent/smelt-test-cc", 1);
    smelt_ctx *ctx = t_ctx_raw();
    T_ERR(ctx, try_plan(ctx, "CC", NULL), SMELT_ERR_BACKEND, "not available");
    cr_assert(t_contains(smelt_errmsg(ctx), "CC"), "%s", smelt_errmsg(ctx));
    T_ERR(ctx, smelt_backend_check(ctx, "cc"), SMELT_ERR_BACKEND, "not available");
    smelt_ctx_free(ctx);
}

Test(backend, cc_when_available_gives_the_right_answer)
{
    clean_env();
    smelt_ctx *ctx = t_ctx_raw();
    if (smelt_backend_check(ctx, "CC") != SMELT_OK) {
        char why[512];
        snprintf(why, sizeof why, "%s", smelt_errmsg(ctx));
        smelt_ctx_free(ctx);
        cr_assert(t_contains(why, "not available"), "%s", why);
        cr_skip_test("no C compiler: %s", why);
    }
    smelt_plan_stats s;
    T_OK(ctx, try_plan(ctx, "CC", &s));
    cr_assert_str_eq(s.backend, "CC");
    smelt_ctx_free(ctx);
}

Test(backend, nvrtc_without_a_gpu_is_a_clear_error)
{
    clean_env();
    smelt_ctx *ctx = t_ctx_raw();
    int st = try_plan(ctx, "NVRTC", NULL);
    if (st == SMELT_OK) {
        smelt_ctx_free(ctx);
        cr_skip_test("this machine has a usable GPU (NVRTC plans ran and matched the reference)");
    }
    cr_assert_eq(st, SMELT_ERR_BACKEND, "%d: %s", st, smelt_errmsg(ctx));
    cr_assert(t_contains(smelt_errmsg(ctx), "NVRTC"), "%s", smelt_errmsg(ctx));
    cr_assert(t_contains(smelt_errmsg(ctx), "not available"), "%s", smelt_errmsg(ctx));
    T_ERR(ctx, smelt_backend_check(ctx, "NVRTC"), SMELT_ERR_BACKEND, "not available");
    smelt_ctx_free(ctx);
}

Test(backend, set_backend_overrides_the_environment)
{
    clean_env();
    setenv("SMELT_JIT_BACKEND", "FOO", 1);
    smelt_ctx *ctx = t_ctx_raw();
    T_ERR(ctx, try_plan(ctx, NULL, NULL), SMELT_ERR_INVALID_ARG, "FOO");
    T_OK(ctx, smelt_ctx_set_backend(ctx, "tcc"));
    smelt_plan_stats s;
    T_OK(ctx, try_plan(ctx, NULL, &s));
    cr_assert_str_eq(s.backend, "TCC");
    /* an invalid name is refused and leaves the previous choice */
    T_ERR(ctx, smelt_ctx_set_backend(ctx, "BAR"), SMELT_ERR_INVALID_ARG, "BAR");
    T_OK(ctx, try_plan(ctx, NULL, &s));
    /* the plan option overrides the context */
    T_ERR(ctx, try_plan(ctx, "MLIR", NULL), SMELT_ERR_BACKEND, "does not have");
    T_ERR(ctx, try_plan(ctx, "nope", NULL), SMELT_ERR_INVALID_ARG, "nope");
    /* NULL returns to the environment */
    T_OK(ctx, smelt_ctx_set_backend(ctx, NULL));
    T_ERR(ctx, try_plan(ctx, NULL, NULL), SMELT_ERR_INVALID_ARG, "FOO");
    /* and an explicit plan option works whatever the environment says */
    T_OK(ctx, try_plan(ctx, "TCC", &s));
    cr_assert_str_eq(s.backend, "TCC");
    smelt_ctx_free(ctx);
}

Test(backend, default_is_auto)
{
    clean_env();
    smelt_ctx *ctx = t_ctx_raw();
    T_OK(ctx, smelt_backend_check(ctx, "AUTO"));
    T_OK(ctx, smelt_backend_check(ctx, "TCC"));
    smelt_plan_stats s;
    T_OK(ctx, try_plan(ctx, NULL, &s));
    cr_assert_not_null(s.backend);
    smelt_ctx_free(ctx);
}

/* ---- kernels that do not compile ------------------------------------------------------------ */

static smelt_node *chain(smelt_graph *g, smelt_node *x, smelt_node *w)
{
    smelt_node *v = smelt_mul(g, x, w);
    v = smelt_unary(g, SMELT_OP_SIN, v);
    v = smelt_add(g, v, x);
    v = smelt_unary(g, SMELT_OP_EXP, v);
    v = smelt_sub(g, v, w);
    return smelt_unary(g, SMELT_OP_TANH, v);
}

Test(fallback, fused_kernel_that_fails_to_compile_runs_unfused)
{
    t_use_failing_templates();
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, NULL, SMELT_F32, SHP(30, 20));
    smelt_node *w = smelt_input(g, NULL, SMELT_F32, SHP(20));
    smelt_node *y = chain(g, x, w);
    smelt_node *outs[] = {y, smelt_unary(g, SMELT_OP_NEG, x)};
    smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F32, SHP(30, 20)), t_rand(ctx, &r, SMELT_F32, SHP(20))};
    smelt_plan_stats s = t_check_plan("fallback", ctx, g, 2, outs, 3, 2, in, T_CHAIN);
    cr_assert_geq(s.fallbacks, 1, "no fallback recorded");
    cr_assert_eq(s.kernels, 7, "the cluster's 6 operators and neg, one kernel each: %d", s.kernels);
    smelt_plan *p = t_plan(ctx, g, 2, outs, 3);
    const char *d = smelt_plan_describe(p);
    cr_assert(t_contains(d, "warning"), "the description warns about the fallback: %s", d);
    cr_assert(t_contains(d, "unfused"), "%s", d);
    smelt_plan_free(p);
    /* single-operator kernels (opt_level 0) are not affected */
    smelt_plan_stats s0 = t_check_plan("fallback, opt 0", ctx, g, 2, outs, 0, 2, in, T_CHAIN);
    cr_assert_eq(s0.fallbacks, 0);
    t_free_all(in, 2);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* A folder with kernel templates made from the failing test templates:
 * replace "#if {{NOPS}} > 1" by cond (NULL: the original, no failure). */
static char *template_dir(const char *cond_rank1, const char *cond_nd)
{
    const char *src = t_use_failing_templates();
    char *dir = malloc(256);
    snprintf(dir, 256, "/tmp/smelt-test-tpl-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    char path[512];
    snprintf(path, sizeof path, "%s/c", dir);
    cr_assert_eq(mkdir(path, 0755), 0);
    static const char *names[] = {"kernel_flat", "kernel_nd", "kernel_block"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/c/%s.c.in", src, names[i]);
        if (access(path, R_OK))
            continue;
        char *text = t_read_file(path);
        const char *cond = i == 0 ? cond_rank1 : cond_nd;
        char *at = strstr(text, "#if {{NOPS}} > 1\n");
        cr_assert_not_null(at, "%s has no injected #if", path);
        char out[65536];
        snprintf(out, sizeof out, "%.*s#if %s\n%s", (int)(at - text), text,
                 cond ? cond : "0", at + strlen("#if {{NOPS}} > 1\n"));
        snprintf(path, sizeof path, "%s/c/%s.c.in", dir, names[i]);
        t_write_file(path, out);
        free(text);
    }
    setenv("SMELT_TEMPLATE_DIR", dir, 1);
    return dir;
}

static void remove_dir(char *dir)
{
    static const char *names[] = {"kernel_flat", "kernel_nd", "kernel_block"};
    char path[512];
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/c/%s.c.in", dir, names[i]);
        unlink(path);
    }
    snprintf(path, sizeof path, "%s/c", dir);
    rmdir(path);
    rmdir(dir);
    free(dir);
}

Test(fallback, at_run_time_for_a_new_layout)
{
    /* fused kernels compile for rank 1 (contiguous) but not for rank > 1 */
    char *dir = template_dir(NULL, "{{NOPS}} > 1 && {{RANK}} > 1");
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, NULL, SMELT_F64, SHP(12, 9));
    smelt_node *w = smelt_input(g, NULL, SMELT_F64, SHP(12, 9));
    smelt_node *y = chain(g, x, w);
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    smelt_plan_stats s = t_stats(p);
    cr_assert_eq(s.kernels, 1);
    cr_assert_eq(s.fallbacks, 0, "%s", smelt_plan_describe(p));
    /* a transposed input needs the rank-2 variant, which fails: split at run time */
    smelt_tensor *base = t_rand(ctx, &r, SMELT_F64, SHP(9, 12)), *xt = NULL;
    T_OK(ctx, smelt_tensor_transpose(base, (const int[]){1, 0}, &xt));
    smelt_tensor *in[2] = {xt, t_rand(ctx, &r, SMELT_F64, SHP(12, 9))};
    for (int k = 0; k < 2; k++) {
        smelt_tensor *got = NULL, *ref = NULL;
        t_run(p, 2, in, 1, &got);
        t_reference(ctx, g, 1, &y, 2, in, &ref);
        t_expect_match("run-time fallback", got, ref, t_chain_tol(SMELT_F64));
        smelt_tensor_free(got);
        smelt_tensor_free(ref);
    }
    s = t_stats(p);
    cr_assert_eq(s.fallbacks, 1);
    cr_assert_eq(s.kernels, 6);
    cr_assert(t_contains(smelt_plan_describe(p), "warning"), "%s", smelt_plan_describe(p));
    /* contiguous inputs still run (now unfused) */
    smelt_tensor *cin[2] = {NULL, in[1]};
    T_OK(ctx, smelt_tensor_contiguous(xt, &cin[0]));
    smelt_tensor *got = NULL, *ref = NULL;
    t_run(p, 2, cin, 1, &got);
    t_reference(ctx, g, 1, &y, 2, cin, &ref);
    t_expect_match("after the fallback", got, ref, t_chain_tol(SMELT_F64));
    smelt_tensor *all[] = {got, ref, cin[0], base, xt, in[1]};
    t_free_all(all, 6);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
    remove_dir(dir);
}

Test(fallback, single_kernel_that_fails_is_a_compile_error)
{
    char *dir = template_dir("1", "1");
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, NULL, SMELT_F32, SHP(8));
    smelt_node *y = smelt_unary(g, SMELT_OP_EXP, x);
    smelt_plan *p = NULL;
    T_ERR(ctx, smelt_plan_new(ctx, g, 1, &y, NULL, &p), SMELT_ERR_COMPILE, "injected failure");
    cr_assert(t_contains(smelt_errmsg(ctx), "TCC"), "the message names the compiler: %s", smelt_errmsg(ctx));
    cr_assert_null(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
    remove_dir(dir);
}

Test(fallback, test_templates_are_copies_of_the_real_ones)
{
    /* tests/templates/c/X is templates/c/X plus the injected lines after its
     * first line; when a template changes, copy it again and re-insert them. */
    const char *dir = t_use_failing_templates();
    char src_dir[512];
    snprintf(src_dir, sizeof src_dir, "%s/../../templates/c", dir);
    DIR *d = opendir(src_dir);
    cr_assert_not_null(d, "cannot open %s", src_dir);
    int checked = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strncmp(e->d_name, "kernel_", 7) || !strstr(e->d_name, ".c.in"))
            continue;
        char a[768], b[768];
        snprintf(a, sizeof a, "%s/%s", src_dir, e->d_name);
        snprintf(b, sizeof b, "%s/c/%s", dir, e->d_name);
        cr_assert_eq(access(b, R_OK), 0, "tests/templates/c/%s is missing", e->d_name);
        char *orig = t_read_file(a), *copy = t_read_file(b);
        char *block = strstr(copy, "#endif\n");
        const char *nl = strchr(copy, '\n');
        cr_assert(block && nl, "%s has no injected block", b);
        /* remove the injected lines: from after the first line to the #endif */
        char joined[65536];
        snprintf(joined, sizeof joined, "%.*s%s", (int)(nl + 1 - copy), copy, block + strlen("#endif\n"));
        cr_assert(t_contains(copy, "#error injected failure for fused kernels"), "%s", b);
        cr_assert_str_eq(joined, orig, "tests/templates/c/%s is out of date with templates/c/%s",
                         e->d_name, e->d_name);
        free(orig);
        free(copy);
        checked++;
    }
    closedir(d);
    cr_assert_geq(checked, 2);
}

/* NumPy 2 (NEP 50): a Python int the array's dtype cannot hold is an error */
Test(builder_errors, weak_scalar_out_of_range)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *u = smelt_input(g, NULL, SMELT_U8, SHP(4));
    cr_assert_null(smelt_add(g, u, smelt_scalar(g, 300)));
    T_ERR(ctx, smelt_graph_status(g), SMELT_ERR_DTYPE, "300 does not fit in u8");
    smelt_graph_free(g);
    g = t_graph(ctx);
    smelt_node *i = smelt_input(g, NULL, SMELT_I32, SHP(4));
    cr_assert_null(smelt_mul(g, i, smelt_scalar(g, 3e9)));
    cr_assert_eq(smelt_graph_status(g), SMELT_ERR_DTYPE);
    smelt_graph_free(g);
    g = t_graph(ctx); /* in range: fine, and the dtype stays */
    u = smelt_input(g, NULL, SMELT_U8, SHP(4));
    smelt_node *y = smelt_add(g, u, smelt_scalar(g, 255));
    cr_assert_not_null(y);
    cr_assert_eq(smelt_node_dtype(y), SMELT_U8);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* Every shape entering the library is checked in one place
 * (smelt__shape_check): dims >= 0, the element count (a zero dimension
 * counted as 1, so strides fit too) and byte size within int64, rank <= 8. */
Test(shape_checks, hostile_shapes_everywhere)
{
    const int64_t big = (int64_t)1 << 62;
    smelt_ctx *ctx = t_ctx();
    smelt_tensor *t = NULL, *v = NULL;
    const int64_t huge[][3] = {{big, big, 1}, {0, big, big}, {3, -1, 2}, {1, 1, (int64_t)1 << 60}};
    const char *text[] = {"is too large", "shape (0, 4611686018427387904, 4611686018427387904) is too large",
                          "shape (3, -1, 2) has a negative dimension", "is too large"};
    for (int k = 0; k < 4; k++) {
        T_ERR(ctx, smelt_tensor_new(ctx, SMELT_F32, 3, huge[k], &t), SMELT_ERR_SHAPE, text[k]);
        cr_assert_null(t);
        smelt_graph *g = t_graph(ctx);
        cr_assert_null(smelt_input(g, "x", SMELT_F32, 3, huge[k]));
        cr_assert_eq(smelt_graph_status(g), SMELT_ERR_SHAPE);
        cr_assert(t_contains(smelt_graph_errmsg(g), text[k]), "%s", smelt_graph_errmsg(g));
        smelt_graph_free(g);
        g = t_graph(ctx);
        smelt_node *a = smelt_input(g, "a", SMELT_F32, SHP(1));
        cr_assert_null(smelt_broadcast_to(g, a, 3, huge[k]));
        cr_assert_eq(smelt_graph_status(g), SMELT_ERR_SHAPE);
        cr_assert(t_contains(smelt_graph_errmsg(g), text[k]), "%s", smelt_graph_errmsg(g));
        smelt_graph_free(g);
        smelt_tensor *one = t_tensor(ctx, SMELT_F32, SHP(1));
        T_ERR(ctx, smelt_tensor_broadcast_to(one, 3, huge[k], &v), SMELT_ERR_SHAPE, text[k]);
        cr_assert_null(v);
        smelt_tensor_free(one);
    }
    float buf[4];
    const int64_t sh[2] = {2, 2}, bad_strides[][2] = {{INT64_MAX, 1}, {1, INT64_MIN}, {(int64_t)1 << 59, 3}};
    for (int k = 0; k < 3; k++) {
        T_ERR(ctx, smelt_tensor_wrap(ctx, SMELT_F32, 2, sh, bad_strides[k], buf, &t), SMELT_ERR_SHAPE,
              "is too large for its size 2");
        cr_assert_null(t);
    }
    int64_t nine[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    T_ERR(ctx, smelt_tensor_new(ctx, SMELT_F32, 9, nine, &t), SMELT_ERR_SHAPE, "rank 9 is outside 0..8");
    smelt_ctx_free(ctx);
}

/* A step near INT64_MAX: one element, no overflow in the size or stride. */
Test(shape_checks, slice_with_huge_step)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 11);
    smelt_tensor *t = t_rand(ctx, &r, SMELT_F64, SHP(10, 3));
    const int64_t steps[] = {INT64_MAX, INT64_MAX - 1, 9, 4};
    const int64_t want[] = {1, 1, 1, 2};
    for (int k = 0; k < 4; k++) {
        smelt_tensor *v = NULL;
        T_OK(ctx, smelt_tensor_slice(t, 0, 2, 10, steps[k], &v));
        cr_assert_eq(smelt_tensor_shape(v)[0], want[k], "step %lld: %lld rows", (long long)steps[k],
                     (long long)smelt_tensor_shape(v)[0]);
        for (int64_t i = 0; i < smelt_tensor_numel(v); i++)
            cr_assert_eq(smelt_tensor_get(v, i), smelt_tensor_get(t, (2 + (i / 3) * steps[k]) * 3 + i % 3));
        smelt_tensor_free(v);
        T_OK(ctx, smelt_tensor_slice(t, 0, 5, 5, steps[k], &v));
        cr_assert_eq(smelt_tensor_shape(v)[0], 0);
        smelt_tensor_free(v);
    }
    smelt_tensor_free(t);
    smelt_ctx_free(ctx);
}

/* Outputs that overlap inputs are computed correctly (through a
 * temporary): in place, as a transposed view of an input, in fused and in
 * unfused plans.  Outputs that overlap each other or have a zero stride
 * are errors. */
Test(overlap, outputs_that_overlap_inputs_are_correct)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 21);
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_F64, SHP(9, 9)), *b = smelt_input(g, "b", SMELT_F64, SHP(9, 9));
    /* every element of a is read by other elements' results too (b is its transpose) */
    smelt_node *outs[2] = {smelt_add(g, smelt_mul(g, a, b), a), smelt_sub(g, b, smelt_scalar(g, 3))};
    for (int opt = 0; opt <= 3; opt += 3) {
        smelt_plan *p = t_plan(ctx, g, 2, outs, opt);
        for (int mode = 0; mode < 3; mode++) {
            smelt_tensor *x = t_rand(ctx, &r, SMELT_F64, SHP(9, 9)), *xt = NULL, *orig = NULL;
            T_OK(ctx, smelt_tensor_transpose(x, (const int[]){1, 0}, &xt));
            T_OK(ctx, smelt_tensor_contiguous(x, &orig));
            smelt_tensor *in[2] = {x, xt};
            /* 0: output 0 is x itself; 1: output 0 is x's transpose; 2: output 1 is x */
            smelt_tensor *out[2] = {mode == 0 ? x : mode == 1 ? xt : NULL, mode == 2 ? x : NULL};
            t_run(p, 2, in, 2, out);
            for (int i = 0; i < 9; i++)
                for (int j = 0; j < 9; j++) {
                    double va = smelt_tensor_get(orig, i * 9 + j), vb = smelt_tensor_get(orig, j * 9 + i);
                    cr_assert_eq(smelt_tensor_get(out[0], i * 9 + j), va * vb + va, "opt %d mode %d (%d, %d)",
                                 opt, mode, i, j);
                    cr_assert_eq(smelt_tensor_get(out[1], i * 9 + j), vb - 3, "opt %d mode %d (%d, %d)", opt,
                                 mode, i, j);
                }
            for (int o = 0; o < 2; o++)
                if (out[o] != x && out[o] != xt)
                    smelt_tensor_free(out[o]);
            smelt_tensor_free(xt), smelt_tensor_free(x), smelt_tensor_free(orig);
        }
        smelt_plan_free(p);
    }
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(overlap, outputs_written_twice_are_errors)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 22);
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_F32, SHP(4, 6));
    smelt_node *outs[2] = {smelt_mul(g, a, a), smelt_unary(g, SMELT_OP_NEG, a)};
    smelt_plan *p = t_plan(ctx, g, 2, outs, 3);
    smelt_tensor *x = t_rand(ctx, &r, SMELT_F32, SHP(4, 6)), *row = t_rand(ctx, &r, SMELT_F32, SHP(1, 6));
    smelt_tensor *wide = NULL, *y = t_tensor(ctx, SMELT_F32, SHP(4, 6)), *half = NULL;
    T_OK(ctx, smelt_tensor_broadcast_to(row, 2, (const int64_t[]){4, 6}, &wide));
    smelt_tensor *out[2] = {wide, NULL};
    T_ERR(ctx, smelt_plan_run(p, 1, &x, 2, out), SMELT_ERR_INVALID_ARG, "output 0 has stride 0 on axis 0");
    cr_assert_null(out[1], "a failed run left an output allocated");
    out[0] = y, out[1] = y;
    T_ERR(ctx, smelt_plan_run(p, 1, &x, 2, out), SMELT_ERR_INVALID_ARG, "outputs 0 and 1 overlap");
    T_OK(ctx, smelt_tensor_slice(y, 0, 1, 4, 1, &half));
    smelt_tensor *half2 = NULL;
    T_OK(ctx, smelt_tensor_slice(y, 0, 0, 3, 1, &half2));
    smelt_tensor *part[2] = {NULL, NULL};
    smelt_graph *g2 = t_graph(ctx);
    smelt_node *b = smelt_input(g2, "b", SMELT_F32, SHP(3, 6));
    smelt_node *o2[2] = {smelt_mul(g2, b, b), smelt_unary(g2, SMELT_OP_NEG, b)};
    smelt_plan *p2 = t_plan(ctx, g2, 2, o2, 3);
    smelt_tensor *xb = t_rand(ctx, &r, SMELT_F32, SHP(3, 6));
    part[0] = half, part[1] = half2; /* rows 1..3 and 0..2 of y */
    T_ERR(ctx, smelt_plan_run(p2, 1, &xb, 2, part), SMELT_ERR_INVALID_ARG, "outputs 0 and 1 overlap");
    smelt_tensor_free(xb), smelt_tensor_free(half), smelt_tensor_free(half2);
    smelt_tensor_free(wide), smelt_tensor_free(row), smelt_tensor_free(x), smelt_tensor_free(y);
    smelt_plan_free(p), smelt_plan_free(p2);
    smelt_graph_free(g), smelt_graph_free(g2);
    smelt_ctx_free(ctx);
}

/* The element and dtype helpers of the public API: a value stored and
 * loaded back is the value rounded to the dtype; bad arguments are no-ops. */
Test(api, elem_store_load_round_trip_every_dtype)
{
    trng r;
    trng_init(&r, 0xe1e);
    for (int dt = 0; dt < SMELT_DTYPE_COUNT; dt++) {
        _Alignas(8) unsigned char buf[8];
        for (int i = 0; i < 200; i++) {
            double v = i < 4 ? (double[]){0.0, -1.5, 300.7, -70000.25}[i] : trng_uniform(&r, -1e5, 1e5);
            double want = smelt_dtype_round((smelt_dtype)dt, v);
            smelt_elem_store((smelt_dtype)dt, buf, v);
            double got = smelt_elem_load((smelt_dtype)dt, buf);
            cr_assert(got == want, "%s: %.17g stored, %.17g loaded, %.17g expected",
                      smelt_dtype_name((smelt_dtype)dt), v, got, want);
        }
        cr_assert_eq(smelt_dtype_is_float((smelt_dtype)dt), t_is_float((smelt_dtype)dt), "%s",
                     smelt_dtype_name((smelt_dtype)dt));
    }
    cr_assert_eq(smelt_dtype_round(SMELT_U8, 257), 1);
    cr_assert_eq(smelt_dtype_round(SMELT_I32, 2147483648.0), -2147483648.0);
    cr_assert_eq(smelt_elem_load(SMELT_F32, NULL), 0);
    smelt_elem_store(SMELT_F32, NULL, 1); /* no crash */
    cr_assert_eq(smelt_elem_load((smelt_dtype)99, "abcdefgh"), 0);
    cr_assert_eq(smelt_dtype_is_float((smelt_dtype)99), 0);
}

/* The registry's names: TCC, CC and NVRTC, each with a description, then
 * NULL; each name is accepted by smelt_backend_check (available or not). */
Test(api, backend_names_come_from_the_registry)
{
    smelt_ctx *ctx = t_ctx_raw();
    const char *name, *about = NULL;
    int n = 0;
    bool tcc = false;
    for (; (name = smelt_backend_name(n, &about)); n++) {
        cr_assert(about && *about, "%s has no description", name);
        int st = smelt_backend_check(ctx, name);
        cr_assert(st == SMELT_OK || st == SMELT_ERR_BACKEND, "%s: %d %s", name, st, smelt_errmsg(ctx));
        tcc = tcc || !strcmp(name, "TCC");
    }
    cr_assert_geq(n, 3);
    cr_assert(tcc);
    cr_assert_null(smelt_backend_name(-1, NULL));
    cr_assert_null(smelt_backend_name(n, &about));
    smelt_ctx_free(ctx);
}

/* ---- settings: every variable validated in one place ----------------- */

/* A plan's description on TCC with NAME=VALUE set. */
static void describe_with(const char *name, const char *value, char *out, size_t n)
{
    setenv(name, value, 1);
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(5)), *y = smelt_unary(g, SMELT_OP_EXP, x);
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    snprintf(out, n, "%s", smelt_plan_describe(p));
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
    unsetenv(name);
}

/* A value a setting does not accept is named in the plan's description
 * (and so in smelt info); these were ignored in silence. */
Test(settings, bad_values_are_named)
{
    static const char *const bad[][2] = {
        {"SMELT_BLOCKS_ISA", "x86-64-v9"},      {"SMELT_STREAM_STORES", "sometimes"},
        {"SMELT_CC_MARCH", "native -fplugin=/x"}, {"SMELT_TEMPLATE_DIR", "/nonexistent"},
        {"SMELT_BLAS_LIB", "/etc/passwd"},      {"SMELT_CC_TIMEOUT", "abc"},
        {"SMELT_CUDA_ROWS_WARPS", "3"},         {"SMELT_CACHE", "maybe"},
    };
    static const char *const good[][2] = {
        {"SMELT_BLOCKS_ISA", "x86-64"}, {"SMELT_STREAM_STORES", "AUTO"}, {"SMELT_CC_MARCH", "x86-64-v2"},
        {"SMELT_TEMPLATE_DIR", "/tmp"}, {"SMELT_CC_TIMEOUT", "2.5"},     {"SMELT_CUDA_ROWS_WARPS", "8"},
    };
    char d[8192], want[200];
    for (int i = 0; i < NELEMS(bad); i++) {
        describe_with(bad[i][0], bad[i][1], d, sizeof d);
        snprintf(want, sizeof want, "warning: %s='%s' is not ", bad[i][0], bad[i][1]);
        cr_assert(t_contains(d, want) && t_contains(d, ": ignored, "), "%s=%s: %s", bad[i][0], bad[i][1], d);
    }
    for (int i = 0; i < NELEMS(good); i++) {
        describe_with(good[i][0], good[i][1], d, sizeof d);
        cr_assert(!t_contains(d, good[i][0]), "%s=%s: %s", good[i][0], good[i][1], d);
    }
}

/* docs/env.md lists exactly the variables of the settings table. */
Test(settings, env_md_lists_the_table)
{
    const char *tpl = getenv("SMELT_TEST_TEMPLATES"); /* tests/templates */
    cr_assert_not_null(tpl, "SMELT_TEST_TEMPLATES is not set (run through meson test)");
    char path[4096];
    snprintf(path, sizeof path, "%s/../../docs/env.md", tpl);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    char line[8192], documented[64][64];
    int nd = 0;
    while (fgets(line, sizeof line, f)) /* the table's rows: "| `NAME` | ..." */
        if (!strncmp(line, "| `", 3) && nd < 64) {
            size_t l = strcspn(line + 3, "`");
            cr_assert_lt(l, sizeof documented[0]);
            memcpy(documented[nd], line + 3, l);
            documented[nd++][l] = 0;
        }
    fclose(f);
    int nt = 0;
    for (const char *name; (name = smelt__setting_name(nt)); nt++) {
        bool found = false;
        for (int k = 0; k < nd; k++)
            found = found || !strcmp(documented[k], name);
        cr_assert(found, "%s is in the settings table (src/runtime/config.c) but not in docs/env.md", name);
    }
    for (int k = 0; k < nd; k++) {
        bool found = false;
        for (int i = 0; i < nt; i++)
            found = found || !strcmp(smelt__setting_name(i), documented[k]);
        cr_assert(found, "docs/env.md lists %s, which the settings table (src/runtime/config.c) lacks", documented[k]);
    }
    cr_assert_eq(nd, nt);
}

/* An integer constant that is no number of its dtype (NaN, an infinity,
 * out of range) is a sticky error, as an out-of-range weak scalar is; it
 * was 0 with status OK. */
Test(errors, integer_const_out_of_range)
{
    const smelt_dtype dts[] = {SMELT_I32, SMELT_I64, SMELT_U8};
    const double bad[] = {NAN, INFINITY, -INFINITY, 1e300, -1e300};
    smelt_ctx *ctx = t_ctx();
    for (int d = 0; d < NELEMS(dts); d++) {
        for (int i = 0; i < NELEMS(bad); i++) {
            smelt_graph *g = t_graph(ctx);
            cr_assert_null(smelt_const(g, bad[i], dts[d]), "%g as %s", bad[i], smelt_dtype_name(dts[d]));
            cr_assert_eq(smelt_graph_status(g), SMELT_ERR_DTYPE);
            cr_assert(t_contains(smelt_graph_errmsg(g), "does not fit in"), "%s", smelt_graph_errmsg(g));
            smelt_graph_free(g);
        }
        const double edge[][2] = {{-2147483648.0, 2147483647.0}, {-9223372036854775808.0, 9223372036854774784.0},
                                  {0, 255.9}};
        smelt_graph *g = t_graph(ctx);
        for (int k = 0; k < 2; k++)
            cr_assert_not_null(smelt_const(g, edge[d][k], dts[d]), "%.17g as %s", edge[d][k], smelt_dtype_name(dts[d]));
        T_OK(ctx, smelt_graph_status(g));
        smelt_graph_free(g);
        g = t_graph(ctx);
        cr_assert_null(smelt_const(g, d == 2 ? 256.0 : d == 1 ? 2e19 : 2147483648.0, dts[d]));
        smelt_graph_free(g);
    }
    smelt_graph *g = t_graph(ctx);
    cr_assert_not_null(smelt_const(g, NAN, SMELT_BOOL)); /* bool(nan) is True, as NumPy's */
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}
