/* Planning time against graph size: smelt_plan_new (TCC backend, opt_level
 * 3) of elementwise graphs of 10^3 .. 10^6 nodes, three shapes: a chain of
 * adds (y = y + a), a mixed chain (mul, add, neg), and the mixed chain with
 * a barrier (a fusion boundary) every 10 operators; and a fourth at
 * opt_level 2 (unfused: every node an intermediate of the memory plan),
 * each node adding a value drawn from the 64 before it, so values are read
 * late and many are live at once.  Prints seconds and microseconds per
 * node: a flat column is a partitioner that scales.  The first plan of a
 * context compiles its kernels (a few at 10^3 nodes weigh on its column);
 * again_us is a second plan of the same graph, its kernels from the
 * in-memory cache: planning alone.  buffers and mem_ms: the memory plan's
 * intermediates and the time it took (smelt_plan_stats.mem_plan_ms),
 * mem_ms_per_1k per 1,000 of them.
 *
 *   smelt-plan-scale [MAX_NODES]     (default 1000000) */
#include <smelt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

int main(int argc, char **argv)
{
    long max = argc > 1 ? atol(argv[1]) : 1000000;
    const char *kinds[] = {"add chain", "mixed chain", "mixed + barriers", "unfused, read late"};
    printf("%-18s %9s %9s %10s %10s %9s %9s %9s %13s\n", "graph", "nodes", "plan_s", "us/node", "again_us", "kernels",
           "buffers", "mem_ms", "mem_ms_per_1k");
    uint64_t rng = 0x9e3779b97f4a7c15ull;
    for (long n = 1000; n <= max; n *= 10)
        for (int kind = 0; kind < 4; kind++) {
            smelt_ctx *ctx = NULL;
            smelt_graph *g = NULL;
            if (smelt_ctx_new(&ctx) || smelt_graph_new(ctx, &g)) {
                fprintf(stderr, "smelt-plan-scale: %s\n", ctx ? smelt_errmsg(ctx) : "no context");
                return 1;
            }
            int64_t shp[1] = {1000};
            smelt_node *a = smelt_input(g, "a", SMELT_F32, 1, shp), *b = smelt_input(g, "b", SMELT_F32, 1, shp);
            smelt_node *y = a, *recent[64];
            for (int k = 0; k < 64; k++)
                recent[k] = a;
            for (long k = 0; k < n; k++) {
                if (kind == 3) {
                    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                    y = smelt_add(g, y, recent[(rng >> 33) % 64]);
                    recent[k % 64] = y;
                } else if (kind == 2 && k % 10 == 9)
                    y = smelt_unary(g, SMELT_OP_BARRIER, y);
                else if (kind == 0 || k % 3 == 1)
                    y = smelt_add(g, y, a);
                else
                    y = k % 3 == 0 ? smelt_mul(g, y, b) : smelt_unary(g, SMELT_OP_NEG, y);
            }
            smelt_plan_opts o;
            smelt_plan_opts_init(&o);
            o.backend = "TCC";
            o.opt_level = kind == 3 ? 2 : 3;
            smelt_plan *p = NULL;
            double t = now();
            int st = smelt_plan_new(ctx, g, 1, &y, &o, &p);
            t = now() - t;
            smelt_plan_stats s = {0};
            if (st == SMELT_OK)
                smelt_plan_get_stats(p, &s);
            smelt_plan_free(p);
            smelt_plan *p2 = NULL;
            double t2 = now();
            if (st == SMELT_OK)
                st = smelt_plan_new(ctx, g, 1, &y, &o, &p2);
            t2 = now() - t2;
            if (st)
                fprintf(stderr, "smelt-plan-scale: %s\n", smelt_errmsg(ctx));
            printf("%-18s %9ld %9.3f %10.2f %10.2f %9d %9d %9.3f %13.3f\n", kinds[kind], n, t, t / (double)n * 1e6,
                   t2 / (double)n * 1e6, s.kernels, s.mem_buffers, s.mem_plan_ms,
                   s.mem_buffers ? s.mem_plan_ms / s.mem_buffers * 1000 : 0.0);
            smelt_plan_free(p2);
            fflush(stdout);
            smelt_graph_free(g);
            smelt_ctx_free(ctx);
        }
    return 0;
}
