/* Memory planning (opt_level >= 2, src/runtime/memplan.c): the plan's
 * intermediates share one arena.  Results must be the bits of the
 * unplanned plan (opt_level 1, one buffer per intermediate), on graphs
 * whose values are read long after they are written; the arena stays near
 * the largest live set and never below it. */
#include <stdio.h>
#include <string.h>

#include "common.h"

/* Runs p and q on the same inputs; every output the same bits. */
static void same_bits(const char *what, smelt_plan *p, smelt_plan *q, int n_in, smelt_tensor **in, int n_out)
{
    smelt_tensor *a[16] = {0}, *b[16] = {0};
    cr_assert_leq(n_out, 16);
    t_run(p, n_in, in, n_out, a);
    t_run(q, n_in, in, n_out, b);
    for (int i = 0; i < n_out; i++)
        cr_assert(t_bitwise_equal(a[i], b[i]), "%s: output %d differs from the unplanned plan's at element %lld",
                  what, i, (long long)t_first_difference(a[i], b[i]));
    t_free_all(a, n_out);
    t_free_all(b, n_out);
}

/* A chain of 50 unfused operators: 49 intermediates, each kernel the last
 * reader of its input, so all but the first are written in place: one
 * buffer. */
Test(memplan, chain_takes_one_buffer)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(1000));
    smelt_node *y = x;
    for (int i = 0; i < 50; i++)
        y = i % 2 ? smelt_unary(g, SMELT_OP_TANH, y) : smelt_add(g, y, x);
    smelt_plan *p2 = t_plan(ctx, g, 1, &y, 2), *p1 = t_plan(ctx, g, 1, &y, 1);
    smelt_plan_stats s = t_stats(p2), s1 = t_stats(p1);
    cr_assert_eq(s.mem_buffers, 49);
    cr_assert_eq(s.mem_inplace, 48);
    cr_assert_eq(s.mem_lower_bytes, 4032, "one f32[1000] buffer, 64-byte aligned: %lld",
                 (long long)s.mem_lower_bytes);
    cr_assert_eq(s.mem_bytes, s.mem_lower_bytes, "the arena is %lld bytes", (long long)s.mem_bytes);
    cr_assert_eq(s.mem_naive_bytes, 49 * 4032);
    cr_assert_eq(s1.mem_bytes, s1.mem_naive_bytes, "opt_level 1 keeps one buffer each");
    cr_assert_eq(s1.mem_inplace, 0, "opt_level 1 writes nothing in place");
    cr_assert(strstr(smelt_plan_describe(p2), "memory: 49 intermediates (48 in place) in an arena of 4032 bytes"),
              "%s", smelt_plan_describe(p2));
    cr_assert(strstr(smelt_plan_describe(p2), "outputs [%3@0 (in place of %2)]"), "%s", smelt_plan_describe(p2));
    trng r;
    trng_init(&r, 3);
    smelt_tensor *in = t_rand(ctx, &r, SMELT_F32, SHP(1000));
    same_bits("chain", p2, p1, 1, &in, 1);
    smelt_tensor_free(in);
    smelt_plan_free(p1);
    smelt_plan_free(p2);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* The library counts the allocations a run makes (smelt_plan_stats.run_allocs,
 * which bench/bench.c reports): a run that makes its output tensor makes
 * some, a run into a given output of a plan whose intermediates live in its
 * arena makes fewer. */
Test(memplan, run_counts_its_allocations)
{
    smelt_ctx *ctx = t_ctx();
    smelt_ctx_set_threads(ctx, 1);
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(1000));
    smelt_node *y = smelt_unary(g, SMELT_OP_TANH, smelt_add(g, smelt_reduce(g, SMELT_OP_SUM, x, 1, (int[]){0}, 1), x));
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    cr_assert_eq(t_stats(p).run_allocs, 0, "no run yet");
    trng r;
    trng_init(&r, 4);
    smelt_tensor *in = t_rand(ctx, &r, SMELT_F32, SHP(1000)), *out = NULL;
    t_run(p, 1, &in, 1, &out);
    int64_t made = t_stats(p).run_allocs;
    cr_assert_geq(made, 1, "a run that makes its output tensor allocates: %lld", (long long)made);
    t_run(p, 1, &in, 1, &out);
    int64_t given = t_stats(p).run_allocs;
    cr_assert_lt(given, made, "into a given output: %lld allocations, making it: %lld", (long long)given,
                 (long long)made);
    smelt_tensor_free(in), smelt_tensor_free(out);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* Random graphs: operands drawn from anywhere before (values read late),
 * broadcasting shapes, several outputs.  Planned (opt_level 2, and 3 with
 * fusion) against unplanned (opt_level 1) bit for bit on backend be; the
 * arena between the largest live set and 1.10 times it.  Values read late
 * are what writing in place must not overwrite; the graphs give it many
 * chances (counted: at least one per graph on average). */
static void random_graphs(const char *be, uint64_t seed, int graphs)
{
    smelt_ctx *ctx = t_ctx();
    T_OK(ctx, smelt_ctx_set_backend(ctx, be));
    trng r;
    trng_init(&r, seed);
    double worst = 1;
    int inplace = 0;
    for (int gi = 0; gi < graphs; gi++) {
        int64_t R = 1 + (int64_t)(trng_u64(&r) % 40), C = 1 + (int64_t)(trng_u64(&r) % 70);
        int64_t shapes[3][2] = {{R, C}, {1, C}, {R, 1}};
        smelt_graph *g = t_graph(ctx);
        smelt_node *v[80];
        smelt_tensor *in[3], *keep[3];
        int n = 0;
        for (int i = 0; i < 3; i++) {
            v[n++] = smelt_input(g, NULL, SMELT_F32, 2, shapes[i]);
            in[i] = t_rand(ctx, &r, SMELT_F32, 2, shapes[i]);
            keep[i] = t_tensor(ctx, SMELT_F32, 2, shapes[i]);
            T_OK(ctx, smelt_tensor_copy(keep[i], in[i]));
        }
        int nodes = 10 + (int)(trng_u64(&r) % 60);
        while (n < nodes) {
            smelt_node *a = v[trng_u64(&r) % (uint64_t)n], *b = v[trng_u64(&r) % (uint64_t)n];
            switch (trng_u64(&r) % 5) {
            case 0: v[n++] = smelt_add(g, a, b); break;
            case 1: v[n++] = smelt_mul(g, a, smelt_scalar(g, 0.75)); break;
            case 2: v[n++] = smelt_binary(g, SMELT_OP_MAXIMUM, a, b); break;
            case 3: v[n++] = smelt_unary(g, SMELT_OP_TANH, a); break;
            default: v[n++] = smelt_unary(g, SMELT_OP_BARRIER, smelt_sub(g, a, b)); break;
            }
        }
        smelt_node *outs[4] = {v[n - 1]};
        int n_out = 1 + (int)(trng_u64(&r) % 4);
        for (int i = 1; i < n_out; i++)
            outs[i] = v[3 + trng_u64(&r) % (uint64_t)(n - 3)];
        T_OK(ctx, smelt_graph_status(g));
        smelt_plan *p1 = t_plan(ctx, g, n_out, outs, 1);
        for (int level = 2; level <= 3; level++) {
            smelt_plan *p = t_plan(ctx, g, n_out, outs, level);
            char what[96];
            snprintf(what, sizeof what, "%s: graph %d (%d nodes), opt_level %d", be, gi, n, level);
            same_bits(what, p, p1, 3, in, n_out);
            smelt_plan_stats s = t_stats(p);
            inplace += s.mem_inplace;
            cr_assert(s.mem_bytes >= s.mem_lower_bytes && s.mem_bytes <= s.mem_naive_bytes,
                      "%s: arena %lld, lower bound %lld, one buffer each %lld", what, (long long)s.mem_bytes,
                      (long long)s.mem_lower_bytes, (long long)s.mem_naive_bytes);
            if (s.mem_lower_bytes) {
                double ratio = (double)s.mem_bytes / (double)s.mem_lower_bytes;
                cr_assert_leq(ratio, 1.10, "%s: arena %lld is %.3f times the largest live set %lld", what,
                              (long long)s.mem_bytes, ratio, (long long)s.mem_lower_bytes);
                worst = ratio > worst ? ratio : worst;
            }
            smelt_plan_free(p);
        }
        smelt_plan_free(p1);
        for (int i = 0; i < 3; i++) /* not donated: never written */
            cr_assert(t_bitwise_equal(in[i], keep[i]), "%s: graph %d wrote its input %d", be, gi, i);
        t_free_all(in, 3);
        t_free_all(keep, 3);
        smelt_graph_free(g);
    }
    cr_assert_geq(inplace, graphs, "%s: only %d intermediates written in place over %d graphs", be, inplace, graphs);
    cr_log_info("%s: %d random graphs: the arena at most %.3f times the largest live set; %d intermediates in place",
                be, graphs, worst, inplace);
    smelt_ctx_free(ctx);
}

Test(memplan, random_graphs, .timeout = 120) { random_graphs("TCC", 0x3e3, 300); }
/* the loop form (gcc's vectorised code) on a few of them */
Test(memplan, random_graphs_cc, .timeout = 300) { random_graphs("CC", 0x51c, 6); }

/* Many values live at once (over 64): first and best fit keep the live
 * buffers in treaps (lifetime_fit_fast in src/runtime/memplan.c); a
 * placement that overlapped two live buffers would change the results.
 * Unfused graphs (opt_level 2: every value a buffer): a random chain of
 * 300-450 values (more than greedy by size takes), each also read, in a random order, by a second chain
 * that follows it (so all are live where the first ends) and some by the
 * first chain again; against the unplanned plan, bit for bit. */
Test(memplan, many_live_buffers, .timeout = 120)
{
    smelt_ctx *ctx = t_ctx();
    T_OK(ctx, smelt_ctx_set_backend(ctx, "TCC"));
    trng r;
    trng_init(&r, 0x7a11);
    for (int gi = 0; gi < 4; gi++) {
        int64_t shp[1] = {16 + (int64_t)(trng_u64(&r) % 48)};
        smelt_graph *g = t_graph(ctx);
        smelt_node *v[460], *acc;
        smelt_tensor *in[2];
        int n = 0, len = 300 + 50 * gi, perm[460];
        for (int i = 0; i < 2; i++) {
            v[n++] = smelt_input(g, NULL, SMELT_F32, 1, shp);
            in[i] = t_rand(ctx, &r, SMELT_F32, 1, shp);
        }
        for (int k = 0; k < len; k++) {
            smelt_node *a = v[n - 1], *b = v[trng_u64(&r) % 3 ? trng_u64(&r) % 2 : trng_u64(&r) % (uint64_t)n];
            switch (trng_u64(&r) % 4) {
            case 0: v[n++] = smelt_add(g, a, b); break;
            case 1: v[n++] = smelt_mul(g, a, smelt_scalar(g, 0.75)); break;
            case 2: v[n++] = smelt_binary(g, SMELT_OP_MAXIMUM, a, b); break;
            default: v[n++] = smelt_unary(g, SMELT_OP_TANH, a); break;
            }
        }
        for (int k = 0; k < len; k++) /* the second chain's order */
            perm[k] = k;
        for (int k = len - 1; k > 0; k--) {
            int j = (int)(trng_u64(&r) % (uint64_t)(k + 1)), t = perm[k];
            perm[k] = perm[j], perm[j] = t;
        }
        acc = v[n - 1];
        for (int k = 0; k < len; k++)
            acc = trng_u64(&r) % 2 ? smelt_add(g, acc, v[2 + perm[k]])
                                   : smelt_binary(g, SMELT_OP_MAXIMUM, smelt_unary(g, SMELT_OP_TANH, acc), v[2 + perm[k]]);
        smelt_node *outs[3] = {acc, v[n / 2], v[2 + trng_u64(&r) % (uint64_t)(n - 2)]};
        T_OK(ctx, smelt_graph_status(g));
        smelt_plan *p1 = t_plan(ctx, g, 3, outs, 1), *p = t_plan(ctx, g, 3, outs, 2);
        char what[96];
        snprintf(what, sizeof what, "graph %d (%d values in the first chain)", gi, len);
        same_bits(what, p, p1, 2, in, 3);
        smelt_plan_stats s = t_stats(p);
        int64_t each = s.mem_buffers ? s.mem_naive_bytes / s.mem_buffers : 1; /* (all one size) */
        cr_assert_gt(s.mem_lower_bytes / each, 64, "%s: at most %lld buffers live at once", what,
                     (long long)(s.mem_lower_bytes / each));
        cr_assert(s.mem_bytes >= s.mem_lower_bytes && s.mem_bytes <= s.mem_naive_bytes,
                  "%s: arena %lld, lower bound %lld, one buffer each %lld", what, (long long)s.mem_bytes,
                  (long long)s.mem_lower_bytes, (long long)s.mem_naive_bytes);
        smelt_plan_free(p);
        smelt_plan_free(p1);
        t_free_all(in, 2);
        smelt_graph_free(g);
    }
    smelt_ctx_free(ctx);
}

/* In place inside a fused kernel: t's last reader writes a (read later)
 * before c, which reads t again; a over t would feed c a's values (the
 * block form writes a's block before computing c's), so only c may be in
 * place of t. */
Test(memplan, inplace_waits_for_the_last_reader_in_a_kernel)
{
    const char *bes[] = {"TCC", "CC"};
    for (int bi = 0; bi < 2; bi++) {
        smelt_ctx *ctx = t_ctx();
        T_OK(ctx, smelt_ctx_set_backend(ctx, bes[bi]));
        smelt_graph *g = t_graph(ctx);
        smelt_node *x = smelt_input(g, "x", SMELT_F64, SHP(3000));
        smelt_node *t = smelt_unary(g, SMELT_OP_BARRIER, smelt_mul(g, x, smelt_scalar(g, 2)));
        smelt_node *a = smelt_add(g, t, smelt_scalar(g, 1)), *c = smelt_mul(g, a, t);
        smelt_node *y = smelt_add(g, c, smelt_unary(g, SMELT_OP_BARRIER, a));
        smelt_plan *p3 = t_plan(ctx, g, 1, &y, 3), *p1 = t_plan(ctx, g, 1, &y, 1);
        const char *d = smelt_plan_describe(p3);
        cr_assert(strstr(d, "2 operators [add mul]"), "%s", d);
        /* "outputs [%5@A %6@B (in place of %3)]": c (%6) over t (%3), a (%5) not */
        const char *k = strstr(d, "2 operators [add mul]"), *e = k ? strchr(k, '\n') : NULL;
        const char *o = k ? strstr(k, "outputs [%5@") : NULL, *ip = o ? strstr(o, "(in place") : NULL;
        cr_assert(e && o && ip && ip < e, "%s", d);
        cr_assert(!strncmp(ip, "(in place of %3)]", 17) && strstr(o, "%6@") < ip, "only c is in place there:\n%s", d);
        cr_assert_eq(t_stats(p3).mem_inplace, 3, "t over x*2, c over t, barrier(a) over a:\n%s", d);
        trng r;
        trng_init(&r, 5);
        smelt_tensor *in = t_rand(ctx, &r, SMELT_F64, SHP(3000));
        same_bits(bes[bi], p3, p1, 1, &in, 1);
        smelt_tensor_free(in);
        smelt_plan_free(p1);
        smelt_plan_free(p3);
        smelt_graph_free(g);
        smelt_ctx_free(ctx);
    }
}

/* Each run plans for its own shapes: a larger run grows the arena, a
 * smaller one reuses it; results stay the unplanned plan's. */
Test(memplan, shapes_change_between_runs)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_F64, SHP(16, 8)), *b = smelt_input(g, "b", SMELT_F64, SHP(8));
    smelt_node *y = smelt_unary(g, SMELT_OP_EXP, smelt_mul(g, a, b));
    y = smelt_add(g, smelt_unary(g, SMELT_OP_NEG, y), smelt_mul(g, y, a));
    smelt_plan *p2 = t_plan(ctx, g, 1, &y, 2), *p1 = t_plan(ctx, g, 1, &y, 1);
    int64_t first = t_stats(p2).mem_bytes;
    trng r;
    trng_init(&r, 11);
    const int64_t rows[] = {16, 300, 5, 300};
    for (int i = 0; i < 4; i++) {
        smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F64, SHP(rows[i], 8)), t_rand(ctx, &r, SMELT_F64, SHP(8))};
        same_bits("run", p2, p1, 2, in, 1);
        smelt_plan_stats s = t_stats(p2);
        int64_t row = (rows[i] * 8 * 8 + 63) / 64 * 64; /* exp over the product, then the product by a over exp */
        cr_assert_eq(s.mem_inplace, 2);
        cr_assert_eq(s.mem_lower_bytes, 2 * row, "%lld rows: lower bound %lld", (long long)rows[i],
                     (long long)s.mem_lower_bytes);
        t_free_all(in, 2);
    }
    cr_assert_eq(first, 2 * 16 * 8 * 8, "planned for the graph's shapes at first: %lld", (long long)first);
    smelt_plan_free(p1);
    smelt_plan_free(p2);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* One Adam step with param, m and v donated and given back as the outputs:
 * written in place (no temporary), the bits of a run into separate
 * outputs; without donation the same call goes through temporaries. */
Test(memplan, donated_adam_updates_in_place)
{
    for (int level = 0; level <= 3; level++) {
        smelt_ctx *ctx = t_ctx();
        smelt_graph *g = t_graph(ctx);
        smelt_node *in[4];
        for (int i = 0; i < 4; i++)
            in[i] = smelt_input(g, NULL, SMELT_F32, SHP(5000));
        smelt_node *m2 = smelt_add(g, smelt_mul(g, smelt_scalar(g, 0.9), in[2]), smelt_mul(g, smelt_scalar(g, 0.1), in[1]));
        smelt_node *v2 = smelt_add(g, smelt_mul(g, smelt_scalar(g, 0.999), in[3]),
                                   smelt_mul(g, smelt_scalar(g, 0.001), smelt_mul(g, in[1], in[1])));
        smelt_node *den = smelt_add(g, smelt_unary(g, SMELT_OP_SQRT, v2), smelt_scalar(g, 1e-8));
        smelt_node *outs[3] = {smelt_sub(g, in[0], smelt_mul(g, smelt_scalar(g, 1e-3), smelt_div(g, m2, den))), m2, v2};
        smelt_plan_opts o;
        smelt_plan_opts_init(&o);
        o.opt_level = level;
        const int donate[] = {0, 2, 3, 0};
        o.donate = donate;
        o.n_donate = 4;
        smelt_plan *pd, *pn = t_plan(ctx, g, 3, outs, level);
        T_OK(ctx, smelt_plan_new(ctx, g, 3, outs, &o, &pd));
        trng r;
        trng_init(&r, 40 + (uint64_t)level);
        smelt_tensor *x[4], *y[4], *sep[3] = {0};
        for (int i = 0; i < 4; i++) {
            x[i] = t_rand(ctx, &r, SMELT_F32, SHP(5000));
            if (i == 3)
                t_fill_uniform(x[i], &r, 0.01, 1);
            y[i] = t_tensor(ctx, SMELT_F32, SHP(5000));
            T_OK(ctx, smelt_tensor_copy(y[i], x[i]));
        }
        for (int step = 0; step < 3; step++) { /* three steps: each reads what the last wrote */
            t_run(pn, 4, x, 3, sep);
            smelt_tensor *alias[3] = {x[0], x[2], x[3]}, *alias2[3] = {y[0], y[2], y[3]};
            t_run(pd, 4, x, 3, alias);
            cr_assert_eq(t_stats(pd).donated_inplace, 3, "opt_level %d: %d outputs in place", level,
                         t_stats(pd).donated_inplace);
            t_run(pn, 4, y, 3, alias2); /* not donated: through temporaries */
            cr_assert_eq(t_stats(pn).donated_inplace, 0);
            for (int i = 0; i < 3; i++) {
                cr_assert(t_bitwise_equal(alias[i], sep[i]), "opt_level %d step %d: output %d in place differs at %lld",
                          level, step, i, (long long)t_first_difference(alias[i], sep[i]));
                cr_assert(t_bitwise_equal(alias2[i], sep[i]), "opt_level %d step %d: output %d staged differs", level,
                          step, i);
            }
            t_free_all(sep, 3);
        }
        t_free_all(x, 4);
        t_free_all(y, 4);
        smelt_plan_free(pd);
        smelt_plan_free(pn);
        smelt_graph_free(g);
        smelt_ctx_free(ctx);
    }
}

/* Donated, but the kernel that writes the output is not the input's last
 * reader (y0 = x + 1 is written before y1 = 2x reads x, in one kernel or
 * two): the output goes through a temporary, and the results are as if x
 * had been read first.  Inputs not donated are never written. */
Test(memplan, donated_input_still_needed_is_not_overwritten)
{
    for (int level = 0; level <= 3; level += 3) {
        smelt_ctx *ctx = t_ctx();
        smelt_graph *g = t_graph(ctx);
        smelt_node *x = smelt_input(g, "x", SMELT_F64, SHP(4, 300)), *z = smelt_input(g, "z", SMELT_F64, SHP(300));
        smelt_node *outs[2] = {smelt_add(g, x, smelt_scalar(g, 1)), smelt_mul(g, smelt_mul(g, x, smelt_scalar(g, 2)), z)};
        smelt_plan_opts o;
        smelt_plan_opts_init(&o);
        o.opt_level = level;
        const int donate[] = {0};
        o.donate = donate;
        o.n_donate = 1;
        smelt_plan *p;
        T_OK(ctx, smelt_plan_new(ctx, g, 2, outs, &o, &p));
        trng r;
        trng_init(&r, 9);
        smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F64, SHP(4, 300)), t_rand(ctx, &r, SMELT_F64, SHP(300))};
        smelt_tensor *ref[2], *zcopy = t_tensor(ctx, SMELT_F64, SHP(300));
        T_OK(ctx, smelt_tensor_copy(zcopy, in[1]));
        t_reference(ctx, g, 2, outs, 2, in, ref);
        smelt_tensor *res[2] = {in[0], NULL};
        t_run(p, 2, in, 2, res);
        cr_assert_eq(t_stats(p).donated_inplace, 0);
        const double *a = smelt_tensor_data(res[0]), *b = smelt_tensor_data(res[1]);
        const double *ra = smelt_tensor_data(ref[0]), *rb = smelt_tensor_data(ref[1]);
        for (int i = 0; i < 1200; i++)
            cr_assert(a[i] == ra[i] && b[i] == rb[i], "opt_level %d: element %d: %g %g, expected %g %g", level, i,
                      a[i], b[i], ra[i], rb[i]);
        cr_assert(t_bitwise_equal(in[1], zcopy), "an input not donated was written");
        smelt_tensor_free(res[1]);
        t_free_all(ref, 2);
        t_free_all(in, 2);
        smelt_tensor_free(zcopy);
        smelt_plan_free(p);
        smelt_graph_free(g);
        smelt_ctx_free(ctx);
    }
}

Test(memplan, donate_names_an_input)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(8)), *y = smelt_unary(g, SMELT_OP_NEG, x);
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    const int bad[] = {0, 1};
    o.donate = bad;
    o.n_donate = 2;
    smelt_plan *p = NULL;
    cr_assert_eq(smelt_plan_new(ctx, g, 1, &y, &o, &p), SMELT_ERR_INVALID_ARG);
    cr_assert(p == NULL && strstr(smelt_errmsg(ctx), "donate[1] is 1, not an input of the graph (it has 1: 0..0)"),
              "%s", smelt_errmsg(ctx));
    o.donate = NULL;
    cr_assert_eq(smelt_plan_new(ctx, g, 1, &y, &o, &p), SMELT_ERR_INVALID_ARG);
    cr_assert(strstr(smelt_errmsg(ctx), "n_donate is 2 and donate NULL"), "%s", smelt_errmsg(ctx));
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}
