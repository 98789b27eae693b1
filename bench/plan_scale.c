/* Planning time against graph size: smelt_plan_new (TCC backend) of graphs
 * of 10^3 .. 10^6 nodes, one row per shape and size:
 *
 *   shared     a chain of adds that all read one input (y = y + a, as
 *              residual streams do)
 *   mixed      a mixed chain (mul, add, neg)
 *   barriers   the mixed chain with a barrier (a fusion boundary) every 10
 *              operators
 *   unfused    opt_level 2 (unfused: every node an intermediate of the
 *              memory plan), each node adding a value drawn from the 64
 *              before it, so values are read late and many are live at once
 *   fanout     wide fan-out: one value h read by 10^4 consumers h + z_k (z a
 *              chain of its own), their results summed by a balanced tree
 *              of adds, the sum the next block's h
 *   ladder     a residual ladder: y = y + tanh(y * b) + a per rung, and
 *              every 8 rungs a skip connection from 8 rungs back
 *   layers     repeated identical layers on 16 x 64: a layer norm (two
 *              means over the rows), a matrix product (BLAS), gelu and the
 *              residual add, 14 operators a layer
 *   norm       repeated rows centred (y - mean(y) over the rows of 16 x 64)
 *              then 60 multiply-adds (y * b + a): row programs of 256
 *              operators, every one reading a and b
 *   random     a random DAG: add, mul, sub, tanh, neg of operands drawn
 *              half from the 64 values before, half from all of them
 *
 * All at opt_level 3 but unfused.  Prints seconds and microseconds per
 * node: a flat column is a planner that scales.  The first plan of a
 * context compiles its kernels (a few at 10^3 nodes weigh on its column);
 * again_us is a second plan of the same graph, its kernels from the
 * in-memory cache: planning alone.  buffers and mem_ms: the memory plan's
 * intermediates and the time it took (smelt_plan_stats.mem_plan_ms),
 * mem_ms_per_1k per 1,000 of them.  Exits 1 if a plan fails.
 *
 *   smelt-plan-scale [MAX_NODES [SHAPE,SHAPE,...]]   (default 1000000, all)
 *
 * Sizes 10^3, 10^4, ... up to MAX_NODES, and MAX_NODES itself. */
#include <smelt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

enum { SHARED, MIXED, BARRIERS, UNFUSED, FANOUT, LADDER, LAYERS, NORM, RANDOM, NKINDS };
static const char *const names[NKINDS] = {"shared", "mixed", "barriers", "unfused",
                                          "fanout", "ladder", "layers", "norm",    "random"};
static const char *const labels[NKINDS] = {"shared-input chain", "mixed chain", "mixed + barriers",
                                           "unfused, read late", "wide fan-out",   "residual ladder",
                                           "repeated layers",    "norm + long chain", "random DAG"};

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_rand(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return rng >> 33;
}

/* Graph kind of about n operator nodes; its result. */
static smelt_node *build(smelt_graph *g, int kind, long n)
{
    int64_t shp[1] = {1000};
    rng = 0x9e3779b97f4a7c15ull; /* (each graph the same whatever ran before) */
    smelt_node *a = smelt_input(g, "a", SMELT_F32, 1, shp), *b = smelt_input(g, "b", SMELT_F32, 1, shp);
    smelt_node *y = a;
    if (kind == FANOUT) {
        long fan = n / 3 < 10000 ? n / 3 : 10000;
        for (long done = 0; done + 3 * fan <= n;) {
            smelt_node *h = smelt_unary(g, SMELT_OP_NEG, y), *z = b, *stack[64];
            int level[64], sp = 0;
            done++;
            for (long k = 0; k < fan; k++) {
                z = smelt_mul(g, z, b);
                smelt_node *t = smelt_add(g, h, z);
                done += 2;
                stack[sp] = t, level[sp++] = 0;
                while (sp >= 2 && level[sp - 1] == level[sp - 2]) { /* a balanced tree of adds */
                    stack[sp - 2] = smelt_add(g, stack[sp - 2], stack[sp - 1]);
                    level[sp - 2]++, sp--, done++;
                }
            }
            while (sp >= 2) {
                stack[sp - 2] = smelt_add(g, stack[sp - 2], stack[sp - 1]);
                sp--, done++;
            }
            y = stack[0];
        }
    } else if (kind == LADDER) {
        smelt_node *skip = y;
        for (long k = 0; k * 4 < n; k++) {
            smelt_node *t = smelt_unary(g, SMELT_OP_TANH, smelt_mul(g, y, b));
            y = smelt_add(g, y, smelt_add(g, t, a));
            if (k % 8 == 7)
                y = smelt_add(g, y, skip), skip = y;
        }
    } else if (kind == LAYERS) {
        int64_t s2[2] = {16, 64}, sw[2] = {64, 64}, sv[1] = {64};
        int ax = 1;
        smelt_node *x = smelt_input(g, "x", SMELT_F32, 2, s2), *w = smelt_input(g, "w", SMELT_F32, 1, sv),
                   *bias = smelt_input(g, "bias", SMELT_F32, 1, sv), *W = smelt_input(g, "W", SMELT_F32, 2, sw);
        y = x;
        for (long k = 0; k * 14 < n; k++) {
            smelt_node *m = smelt_reduce(g, SMELT_OP_MEAN, y, 1, &ax, 1), *d = smelt_sub(g, y, m);
            smelt_node *v = smelt_reduce(g, SMELT_OP_MEAN, smelt_mul(g, d, d), 1, &ax, 1);
            smelt_node *r = smelt_unary(g, SMELT_OP_RSQRT, smelt_add(g, v, smelt_scalar(g, 1e-5)));
            smelt_node *ln = smelt_add(g, smelt_mul(g, smelt_mul(g, d, r), w), bias);
            y = smelt_add(g, y, smelt_unary(g, SMELT_OP_GELU, smelt_matmul(g, ln, W)));
        }
    } else if (kind == NORM) {
        int64_t s2[2] = {16, 64}, sv[1] = {64};
        int ax = 1;
        smelt_node *w = smelt_input(g, "w", SMELT_F32, 1, sv), *c = smelt_input(g, "c", SMELT_F32, 1, sv);
        y = smelt_input(g, "x", SMELT_F32, 2, s2);
        for (long k = 0; k < n;) {
            y = smelt_sub(g, y, smelt_reduce(g, SMELT_OP_MEAN, y, 1, &ax, 1));
            for (int j = 0; j < 60; j++, k += 2)
                y = smelt_add(g, smelt_mul(g, y, w), c);
            k += 2;
        }
    } else if (kind == RANDOM) {
        smelt_node **all = malloc(sizeof *all * (size_t)(n + 2));
        if (!all)
            return NULL;
        all[0] = a, all[1] = b;
        for (long k = 0; k < n; k++) {
            long have = k + 2;
#define PICK() all[next_rand() % 2 ? have - 1 - (long)(next_rand() % (have < 64 ? (uint64_t)have : 64)) \
                                   : (long)(next_rand() % (uint64_t)have)]
            smelt_node *u = PICK(), *v = PICK();
            switch (next_rand() % 5) {
            case 0: y = smelt_add(g, u, v); break;
            case 1: y = smelt_mul(g, u, v); break;
            case 2: y = smelt_sub(g, u, v); break;
            case 3: y = smelt_unary(g, SMELT_OP_TANH, u); break;
            default: y = smelt_unary(g, SMELT_OP_NEG, u); break;
            }
#undef PICK
            all[have] = y;
        }
        /* every value a result: the sum of the last 64 (the others dead) */
        for (long k = n + 2 - 64; k < n + 1 && k > 1; k++)
            y = smelt_add(g, y, all[k]);
        free(all);
    } else {
        smelt_node *recent[64];
        for (int k = 0; k < 64; k++)
            recent[k] = a;
        for (long k = 0; k < n; k++) {
            if (kind == UNFUSED) {
                y = smelt_add(g, y, recent[next_rand() % 64]);
                recent[k % 64] = y;
            } else if (kind == BARRIERS && k % 10 == 9)
                y = smelt_unary(g, SMELT_OP_BARRIER, y);
            else if (kind == SHARED || k % 3 == 1)
                y = smelt_add(g, y, a);
            else
                y = k % 3 == 0 ? smelt_mul(g, y, b) : smelt_unary(g, SMELT_OP_NEG, y);
        }
    }
    return y;
}

int main(int argc, char **argv)
{
    long max = argc > 1 ? atol(argv[1]) : 1000000;
    bool want[NKINDS];
    for (int k = 0; k < NKINDS; k++) {
        const char *list = argc > 2 ? argv[2] : NULL, *at = list ? strstr(list, names[k]) : NULL;
        size_t len = strlen(names[k]);
        want[k] = !list || (at && (at == list || at[-1] == ',') && (at[len] == ',' || !at[len]));
    }
    printf("%-18s %9s %9s %10s %10s %9s %9s %9s %13s\n", "graph", "nodes", "plan_s", "us/node", "again_us", "kernels",
           "buffers", "mem_ms", "mem_ms_per_1k");
    int status = 0;
    for (long n = 1000; n <= max; n = n * 10 > max && n < max ? max : n * 10)
        for (int kind = 0; kind < NKINDS; kind++) {
            if (!want[kind])
                continue;
            smelt_ctx *ctx = NULL;
            smelt_graph *g = NULL;
            if (smelt_ctx_new(&ctx) || smelt_graph_new(ctx, &g)) {
                fprintf(stderr, "smelt-plan-scale: %s\n", ctx ? smelt_errmsg(ctx) : "no context");
                return 1;
            }
            smelt_node *y = build(g, kind, n);
            smelt_plan_opts o;
            smelt_plan_opts_init(&o);
            o.backend = "TCC";
            o.opt_level = kind == UNFUSED ? 2 : 3;
            smelt_plan *p = NULL;
            double t = now();
            int st = y ? smelt_plan_new(ctx, g, 1, &y, &o, &p) : SMELT_ERR_NOMEM;
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
            if (st) {
                fprintf(stderr, "smelt-plan-scale: %s, %ld nodes: %s\n", labels[kind], n, smelt_errmsg(ctx));
                status = 1;
            }
            printf("%-18s %9ld %9.3f %10.2f %10.2f %9d %9d %9.3f %13.3f\n", labels[kind], n, t, t / (double)n * 1e6,
                   t2 / (double)n * 1e6, s.kernels, s.mem_buffers, s.mem_plan_ms,
                   s.mem_buffers ? s.mem_plan_ms / s.mem_buffers * 1000 : 0.0);
            smelt_plan_free(p2);
            fflush(stdout);
            smelt_graph_free(g);
            smelt_ctx_free(ctx);
        }
    return status;
}
