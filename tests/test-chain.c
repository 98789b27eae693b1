/* Batch chains (src/runtime/chain.c): a matrix product, the row program
 * that alone reads it and the product that alone reads that, run one
 * matrix of the batch at a time with the intermediates in a thread's
 * scratch.  Every case: the chain taken where its form and the setting
 * say so (smelt_plan_stats.batch_chains) and not elsewhere; results equal
 * to the float64 reference within the chain's tolerance and bitwise equal
 * to the kernels run one after the other (SMELT_BATCH_CHAINS=0), on TCC
 * and CC, with 1 and 2 threads. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

enum { PLAIN, MASKED, SHARED_K, SCORES_OUT, P_RIGHT, PER_ROW, NCASES };
static const char *const case_name[] = {"plain", "masked", "shared_k", "scores_out", "p_right", "per_row"};

static void inputs(smelt_graph *g, int c, int64_t B, int64_t H, int64_t L, int64_t D)
{
    smelt_input(g, "q", SMELT_F32, 4, (int64_t[]){B, H, L, D});
    smelt_input(g, "k", SMELT_F32, 4, (int64_t[]){B, H, L, D});
    smelt_input(g, "v", SMELT_F32, 4, (int64_t[]){B, H, c == P_RIGHT ? D : L, c == P_RIGHT ? L : D});
    smelt_input(g, "mask", SMELT_F32, 2, (int64_t[]){L, L});
    smelt_input(g, "scale", SMELT_F32, 4, (int64_t[]){B, H, L, 1});
}

/* attention-like graphs over q, k, v [B, H, L, D] (+ a mask [L, L], a
 * per-row scale [B, H, L, 1]); *nout outputs */
static int build(smelt_graph *g, int c, smelt_node **outs, int64_t B, int64_t H, int64_t L, int64_t D)
{
    const int last[] = {-1};
    smelt_node *q = smelt_graph_input(g, 0), *k = smelt_graph_input(g, 1), *v = smelt_graph_input(g, 2);
    smelt_node *m = smelt_graph_input(g, 3), *sc = smelt_graph_input(g, 4);
    (void)B, (void)H, (void)L, (void)D;
    if (c == SHARED_K) /* one k for every head: a broadcast batch dimension */
        k = smelt_reduce(g, SMELT_OP_MEAN, k, 1, (const int[]){1}, 1);
    smelt_node *s = smelt_matmul(g, q, smelt_transpose(g, k, (const int[]){0, 1, 3, 2}));
    smelt_node *t = smelt_mul(g, s, smelt_const(g, 0.125, SMELT_F32));
    if (c == MASKED)
        t = smelt_add(g, t, m);
    if (c == PER_ROW)
        t = smelt_mul(g, t, sc);
    smelt_node *e = smelt_unary(g, SMELT_OP_EXP, smelt_sub(g, t, smelt_reduce(g, SMELT_OP_MAX, t, 1, last, 1)));
    smelt_node *p = smelt_div(g, e, smelt_reduce(g, SMELT_OP_SUM, e, 1, last, 1));
    int n = 0;
    if (c == P_RIGHT) /* the probabilities as the right operand: v [B, H, D, L] times p */
        outs[n++] = smelt_matmul(g, v, p);
    else
        outs[n++] = smelt_matmul(g, p, v);
    if (c == SCORES_OUT) /* the scores read elsewhere too: no chain */
        outs[n++] = s;
    return n;
}

static int run_case(int c, const char *backend, int threads, const char *chains, smelt_tensor **in,
                    smelt_tensor **out, int64_t *dims, int *taken)
{
    setenv("SMELT_BATCH_CHAINS", chains, 1);
    smelt_ctx *ctx = t_ctx();
    T_OK(ctx, smelt_ctx_set_threads(ctx, threads));
    smelt_graph *g = t_graph(ctx);
    int64_t B = dims[0], H = dims[1], L = dims[2], D = dims[3];
    inputs(g, c, B, H, L, D);
    smelt_node *outs[2];
    int n = build(g, c, outs, B, H, L, D);
    T_OK(ctx, smelt_graph_status(g));
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    o.backend = backend;
    o.opt_level = 3;
    smelt_plan *p = NULL;
    T_OK(ctx, smelt_plan_new(ctx, g, n, outs, &o, &p));
    for (int i = 0; i < n; i++)
        out[i] = NULL;
    t_run(p, 5, in, n, out);
    *taken = t_stats(p).batch_chains;
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
    unsetenv("SMELT_BATCH_CHAINS");
    return n;
}

static void check_case(int c, int64_t B, int64_t H, int64_t L, int64_t D)
{
    trng r;
    trng_init(&r, 0xc4a1 + (uint64_t)c * 131 + (uint64_t)L);
    smelt_ctx *ctx = t_ctx();
    int64_t dims[4] = {B, H, L, D};
    smelt_tensor *in[5];
    in[0] = t_tensor(ctx, SMELT_F32, 4, (int64_t[]){B, H, L, D});
    in[1] = t_tensor(ctx, SMELT_F32, 4, (int64_t[]){B, H, L, D});
    in[2] = t_tensor(ctx, SMELT_F32, 4, (int64_t[]){B, H, c == P_RIGHT ? D : L, c == P_RIGHT ? L : D});
    in[3] = t_tensor(ctx, SMELT_F32, 2, (int64_t[]){L, L});
    in[4] = t_tensor(ctx, SMELT_F32, 4, (int64_t[]){B, H, L, 1});
    for (int i = 0; i < 3; i++)
        t_fill_uniform(in[i], &r, -2, 2);
    t_fill_uniform(in[3], &r, -8, 0);
    t_fill_uniform(in[4], &r, 0.5, 1.5);
    /* the yardstick: TCC, one thread, no chain; against the float64 reference */
    smelt_tensor *want[3] = {0}, *got[3] = {0}, *ref[2];
    int taken;
    int n = run_case(c, "TCC", 1, "0", in, want, dims, &taken);
    cr_assert_eq(taken, 0, "%s: a chain taken with SMELT_BATCH_CHAINS=0", case_name[c]);
    smelt_graph *g = t_graph(ctx);
    inputs(g, c, B, H, L, D);
    smelt_node *outs[2];
    build(g, c, outs, B, H, L, D);
    t_reference(ctx, g, n, outs, 5, in, ref);
    for (int i = 0; i < n; i++) {
        char label[96];
        snprintf(label, sizeof label, "%s [%lld, %lld, %lld, %lld] output %d", case_name[c], (long long)B,
                 (long long)H, (long long)L, (long long)D, i);
        t_expect_match(label, want[i], ref[i], (t_tol){64, 1e-5, 1e-5, false});
    }
    static const struct { const char *backend; int threads; } runs[] = {{"TCC", 1}, {"TCC", 2}, {"CC", 2}, {"CC", 1}};
    for (int k = 0; k < NELEMS(runs); k++) {
        cr_assert_eq(run_case(c, runs[k].backend, runs[k].threads, "1", in, got, dims, &taken), n);
        int expect = c == SCORES_OUT ? 0 : 1;
        cr_assert_eq(taken, expect, "%s on %s, %d threads: %d batch chains, expected %d", case_name[c],
                     runs[k].backend, runs[k].threads, taken, expect);
        for (int i = 0; i < n; i++) {
            int64_t at;
            cr_assert(t_same_results(want[i], got[i], &at),
                      "%s on %s, %d threads, chained: output %d differs from the kernels one after the other "
                      "at [%lld]: %a vs %a", case_name[c], runs[k].backend, runs[k].threads, i, (long long)at,
                      smelt_tensor_get(got[i], at), smelt_tensor_get(want[i], at));
        }
        t_free_all(got, n);
    }
    t_free_all(want, n);
    t_free_all(ref, n);
    t_free_all(in, 5);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(chain, attention_forms)
{
    for (int c = 0; c < NCASES; c++)
        check_case(c, 2, 3, 37, 8); /* rows of no vector width's multiple */
}

Test(chain, tiled_products)
{
    /* matrices of more than one BLAS tile (tiles of 256 at most 8 tiles in all) */
    check_case(PLAIN, 1, 2, 300, 16);
    check_case(MASKED, 2, 1, 260, 4);
}

Test(chain, auto_takes_large_batches_only)
{
    /* auto: a chain where a matrix fits a thread's cache and the batch has
     * several a thread; not for one matrix */
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0xa070);
    for (int big = 0; big < 2; big++) {
        int64_t B = big ? 4 : 1, H = big ? 4 : 1, L = 64, D = 8;
        int64_t dims[4] = {B, H, L, D};
        smelt_tensor *in[5] = {t_rand(ctx, &r, SMELT_F32, 4, (int64_t[]){B, H, L, D}),
                               t_rand(ctx, &r, SMELT_F32, 4, (int64_t[]){B, H, L, D}),
                               t_rand(ctx, &r, SMELT_F32, 4, (int64_t[]){B, H, L, D}),
                               t_rand(ctx, &r, SMELT_F32, 2, (int64_t[]){L, L}),
                               t_rand(ctx, &r, SMELT_F32, 4, (int64_t[]){B, H, L, 1})};
        smelt_tensor *out[3] = {0};
        int taken;
        int n = run_case(PLAIN, "TCC", 2, "auto", in, out, dims, &taken);
        cr_assert_eq(taken, big, "auto with a batch of %lld: %d chains", (long long)(B * H), taken);
        t_free_all(out, n);
        t_free_all(in, 5);
    }
    smelt_ctx_free(ctx);
}
