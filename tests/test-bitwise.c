/* Results are a function of the graph and the input values only
 * (docs/numerics.md): for every elementwise operator and every dtype it
 * takes, on special values and random values of many magnitudes, the same
 * bits from the TinyCC tier and the CC tier, unfused (opt_level 0) and fused
 * (opt_level 3), on 1 thread and on several, with the CC tier compiled for
 * x86-64-v2, -v3 and -v4 and the block primitives of every instruction-set
 * level; constant folding gives the kernels' bits; and an AUTO plan's tier
 * switch changes no result.  (The CUDA source on tests/fakecuda.c:
 * test-cuda.c, cuda_fake::same_bits_as_cpu.)  NaN results must be NaN on
 * both sides; their payloads are not compared. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"
#include "runtime.h" /* smelt__x86_level */

#define N 4099 /* no multiple of a vector width, a group or a thread's share */
#define N_TRIPS 10 /* the round trips through integers below */
#define MAXOUT (T_ALL_OPS_MAX + N_TRIPS)

/* Every operator on dt (t_all_ops_graph) and, for a float dt, casts through
 * the integers and back: float(int(x)) and the like, which gcc under
 * -fno-trapping-math would fold to trunc(x) (keeping x's -0.0, where the
 * integer 0 converts to +0.0); 1 / sin(...) turns such a zero into an
 * infinity of its sign.  *ntrips: how many of the outputs, at the end, are
 * round trips (their zeros must be +0.0). */
static int graph_of(smelt_graph *g, smelt_dtype dt, smelt_node **outs, int *ntrips)
{
    int n = t_all_ops_graph(g, dt, N, outs), m = n;
    *ntrips = 0;
    if (!t_is_float(dt))
        return n;
    smelt_node *x = smelt_graph_input(g, 0), *y = smelt_graph_input(g, 1);
    const smelt_dtype ints[] = {SMELT_I32, SMELT_I64, SMELT_U8};
    for (int i = 0; i < NELEMS(ints); i++)
        outs[m++] = smelt_cast(g, smelt_cast(g, x, ints[i]), dt);
    for (int i = 0; i < 2; i++) {
        outs[m++] = smelt_div(g, smelt_const(g, 1, dt), smelt_unary(g, SMELT_OP_SIN, smelt_cast(g, smelt_cast(g, x, ints[i]), dt)));
        outs[m++] = smelt_cast(g, smelt_cast(g, smelt_unary(g, SMELT_OP_ROUND, x), ints[i]), dt);
        outs[m++] = smelt_cast(g, smelt_cast(g, smelt_op_apply(g, SMELT_OP_FLOOR_DIV, 2, (smelt_node *[]){x, y}), ints[i]), dt);
    }
    outs[m++] = smelt_cast(g, smelt_cast(g, smelt_cast(g, x, SMELT_I64), SMELT_I32), dt);
    *ntrips = m - n;
    return m;
}

typedef struct run {
    const char *backend;
    int opt_level, threads;
    const char *env, *val; /* a variable set around the plan (NULL: none) */
} run;

/* every operator on dt, all outputs of one plan */
static int run_all(const run *rc, smelt_dtype dt, smelt_tensor **in, smelt_tensor **out)
{
    if (rc->env)
        setenv(rc->env, rc->val, 1);
    smelt_ctx *ctx = t_ctx();
    T_OK(ctx, smelt_ctx_set_threads(ctx, rc->threads));
    smelt_graph *g = t_graph(ctx);
    smelt_node *outs[MAXOUT];
    int ntrips, n = graph_of(g, dt, outs, &ntrips);
    T_OK(ctx, smelt_graph_status(g));
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    o.backend = rc->backend;
    o.opt_level = rc->opt_level;
    smelt_plan *p = NULL;
    T_OK(ctx, smelt_plan_new(ctx, g, n, outs, &o, &p));
    for (int i = 0; i < n; i++)
        out[i] = NULL;
    t_run(p, 3, in, n, out);
    cr_assert_str_eq(t_stats(p).backend, rc->backend);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
    if (rc->env)
        unsetenv(rc->env);
    return n;
}

static void same_everywhere(smelt_dtype dt, const run *runs, int nruns)
{
    trng r;
    trng_init(&r, 0xb175 + (uint64_t)dt);
    smelt_ctx *ctx = t_ctx();
    smelt_tensor *in[3];
    for (int k = 0; k < 3; k++)
        in[k] = t_tensor(ctx, dt, SHP(N));
    t_mixed_inputs(&r, in, 3);
    /* the yardstick: TinyCC, unfused, one thread */
    static const run base = {"TCC", 0, 1, NULL, NULL};
    smelt_tensor *want[MAXOUT], *got[MAXOUT];
    int n = run_all(&base, dt, in, want);
    smelt_graph *g = t_graph(ctx);
    smelt_node *outs[MAXOUT];
    int ntrips;
    graph_of(g, dt, outs, &ntrips); /* for the operators' names */
    for (int o = n - ntrips; o < n; o++) /* the round trips give +0.0, never -0.0 */
        for (int64_t i = 0; i < N; i++)
            cr_assert(!(smelt_tensor_get(want[o], i) == 0 && signbit(smelt_tensor_get(want[o], i))),
                      "round trip %d through an integer on %s: -0.0 at [%lld]", o - (n - ntrips),
                      smelt_dtype_name(dt), (long long)i);
    for (int k = 0; k < nruns; k++) {
        cr_assert_eq(run_all(&runs[k], dt, in, got), n);
        for (int o = 0; o < n; o++) {
            int64_t at;
            if (!t_same_results(want[o], got[o], &at)) {
                double a[3];
                for (int j = 0; j < 3; j++)
                    a[j] = smelt_tensor_get(in[j], at);
                cr_assert_fail("%s on %s: %s opt_level %d, %d threads%s%s%s differs from TCC opt_level 0 "
                               "at [%lld] (inputs %a %a %a): %a vs %a",
                               smelt_op_name(smelt_node_op(outs[o])), smelt_dtype_name(dt), runs[k].backend,
                               runs[k].opt_level, runs[k].threads, runs[k].env ? ", " : "",
                               runs[k].env ? runs[k].env : "", runs[k].env ? runs[k].val : "", (long long)at,
                               a[0], a[1], a[2], smelt_tensor_get(got[o], at), smelt_tensor_get(want[o], at));
            }
        }
        t_free_all(got, n);
    }
    t_free_all(want, n);
    t_free_all(in, 3);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* TCC fused and on 4 threads, CC both ways: every dtype */
static const run tiers[] = {{"TCC", 3, 4, NULL, NULL}, {"CC", 3, 4, NULL, NULL}, {"CC", 0, 1, NULL, NULL}};
/* integers and bool are exact arithmetic everywhere: fused CC is enough */
static const run tiers_int[] = {{"TCC", 3, 4, NULL, NULL}, {"CC", 3, 4, NULL, NULL}};

Test(bitwise, f32, .timeout = 240) { same_everywhere(SMELT_F32, tiers, NELEMS(tiers)); }
Test(bitwise, f64, .timeout = 240) { same_everywhere(SMELT_F64, tiers, NELEMS(tiers)); }
/* f16 and bf16 compute in f32 (the f32 kernels above) and round: fused is enough */
Test(bitwise, f16, .timeout = 240) { same_everywhere(SMELT_F16, tiers_int, NELEMS(tiers_int)); }
Test(bitwise, bf16, .timeout = 240) { same_everywhere(SMELT_BF16, tiers_int, NELEMS(tiers_int)); }
Test(bitwise, i32, .timeout = 240) { same_everywhere(SMELT_I32, tiers_int, NELEMS(tiers_int)); }
Test(bitwise, i64, .timeout = 240) { same_everywhere(SMELT_I64, tiers_int, NELEMS(tiers_int)); }
Test(bitwise, u8, .timeout = 240) { same_everywhere(SMELT_U8, tiers_int, NELEMS(tiers_int)); }
Test(bitwise, bool, .timeout = 240) { same_everywhere(SMELT_BOOL, tiers_int, NELEMS(tiers_int)); }

#if defined(__x86_64__)
/* The CC tier compiled for other x86-64 levels (vector widths: SSE, AVX2,
 * AVX-512) and the block primitives of each level: the same bits.  A level
 * this CPU cannot run is left out (and said so). */
static void levels(smelt_dtype dt)
{
    run rs[6];
    int n = 0;
    rs[n++] = (run){"CC", 3, 2, "SMELT_CC_MARCH", "x86-64-v2"};
    rs[n++] = (run){"TCC", 3, 2, "SMELT_BLOCKS_ISA", "x86-64"};
    if (smelt__x86_level() >= 3) {
        rs[n++] = (run){"CC", 3, 2, "SMELT_CC_MARCH", "x86-64-v3"};
        rs[n++] = (run){"TCC", 3, 2, "SMELT_BLOCKS_ISA", "x86-64-v3"};
    }
    if (smelt__x86_level() >= 4) {
        rs[n++] = (run){"CC", 3, 2, "SMELT_CC_MARCH", "x86-64-v4"};
        rs[n++] = (run){"TCC", 3, 2, "SMELT_BLOCKS_ISA", "x86-64-v4"};
    } else
        cr_log_info("this CPU has no AVX-512: x86-64-v4 not tested");
    same_everywhere(dt, rs, n);
}
Test(bitwise_levels, f32, .timeout = 240) { levels(SMELT_F32); }
Test(bitwise_levels, f64, .timeout = 240) { levels(SMELT_F64); }
#endif

/* Constant folding (opt_level >= 1) computes an operator of constants with
 * the kernels' own code: f(c) folded == f(c) computed by a kernel. */
Test(bitwise, folding_equals_kernels, .timeout = 120)
{
    const smelt_dtype dts[] = {SMELT_F32, SMELT_F64, SMELT_F16};
    const double cs[] = {0.3, -2.5, 7.0, 1e-3, 40.0, -0.0, 100.0, 0.999};
    for (int t = 0; t < NELEMS(dts); t++) {
        smelt_ctx *ctx = t_ctx();
        smelt_graph *g = t_graph(ctx);
        smelt_node *x = smelt_input(g, NULL, dts[t], SHP(1));
        smelt_node *outs[MAXOUT * NELEMS(cs)];
        int n = 0;
        for (int op = 0; op < SMELT_OP_COUNT; op++) {
            if (strcmp(test_ops[op].cls, "ELEMWISE") || strcmp(test_ops[op].rule, "FLOAT") ||
                !t_op_supports((smelt_op)op, dts[t]))
                continue;
            for (int c = 0; c < NELEMS(cs); c++) {
                smelt_node *a[3] = {smelt_const(g, cs[c], dts[t]), smelt_const(g, cs[(c + 1) % NELEMS(cs)], dts[t]),
                                    x};
                /* x * 0 + f(c): the kernel has an input, the constant part folds at opt_level 3 */
                outs[n++] = smelt_add(g, smelt_mul(g, x, smelt_const(g, 0, dts[t])),
                                      smelt_op_apply(g, (smelt_op)op, test_ops[op].arity, a));
            }
        }
        T_OK(ctx, smelt_graph_status(g));
        smelt_tensor *in = t_tensor(ctx, dts[t], SHP(1)), *o0[MAXOUT * NELEMS(cs)] = {0},
                     *o3[MAXOUT * NELEMS(cs)] = {0};
        t_set(in, 0, 1.0);
        smelt_plan *p0 = t_plan(ctx, g, n, outs, 0), *p3 = t_plan(ctx, g, n, outs, 3);
        cr_assert_gt(t_stats(p3).folded, 0, "nothing folded");
        t_run(p0, 1, &in, n, o0);
        t_run(p3, 1, &in, n, o3);
        for (int i = 0; i < n; i++) {
            int64_t at;
            cr_assert(t_same_results(o0[i], o3[i], &at), "%s: output %d: folded %a, computed %a",
                      smelt_dtype_name(dts[t]), i, smelt_tensor_get(o3[i], 0), smelt_tensor_get(o0[i], 0));
        }
        t_free_all(o0, n), t_free_all(o3, n);
        smelt_tensor_free(in);
        smelt_plan_free(p0), smelt_plan_free(p3);
        smelt_graph_free(g);
        smelt_ctx_free(ctx);
    }
}
