/* Fault injection: fail the Nth allocation of a small plan's whole life
 * (context, graph, plan with TinyCC kernels, run, free), for every N it
 * makes; then fail every allocation from the Nth on (memory that stays
 * exhausted: the error paths' own allocations fail too), for every N.  Every run must end with a correct result, or with a clean error
 * that has a message; never an exit, a crash, a hang or a leak.
 *
 * The test program replaces malloc, calloc, realloc, posix_memalign and
 * free for the whole process (glibc lets the main program do so), so
 * allocations of libc and of libtcc count too.  Each N runs in a child
 * process.  Then, with no failure injected: a plan run again (opt_level 0
 * to 3, 1 and 2 threads, outputs given, or the input donated and given as
 * the output) allocates nothing.  Prints "test-faults: N runs, F failed".
 * Three scenarios: an elementwise plan, a reduction checked against the
 * reference, and where(a > 0, a*2, exp(a)) - b, its result saved to a .npy
 * file and loaded back.
 *
 *   test-faults [MAX_N]      (SMELT_FAULT_N=N runs one N in this process,
 *                             of scenario SMELT_FAULT_SCENARIO, 0, 1 or 2;
 *                             SMELT_FAULT_FROM=1: every allocation from the
 *                             Nth on fails) */
#include <errno.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "smelt.h"

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void *__libc_memalign(size_t, size_t);
extern void __libc_free(void *);

static long fail_at = -1, count; /* the fail_at-th allocation fails */
static bool from;                /* and every one after it */
static long live;                /* allocations not yet freed */
static bool armed;

static bool inject(void)
{
    if (!armed)
        return false;
    ++count;
    return from ? fail_at > 0 && count >= fail_at : count == fail_at;
}

void *malloc(size_t n)
{
    if (inject())
        return NULL;
    void *p = __libc_malloc(n);
    live += p != NULL;
    return p;
}

void *calloc(size_t n, size_t s)
{
    if (inject())
        return NULL;
    void *p = __libc_calloc(n, s);
    live += p != NULL;
    return p;
}

void *realloc(void *q, size_t n)
{
    if (inject())
        return NULL;
    void *p = __libc_realloc(q, n);
    live += (q == NULL && p != NULL) - (q != NULL && n == 0);
    return p;
}

int posix_memalign(void **out, size_t align, size_t n)
{
    if (inject())
        return ENOMEM;
    void *p = __libc_memalign(align, n);
    if (!p)
        return ENOMEM;
    live++;
    *out = p;
    return 0;
}

void free(void *p)
{
    live -= p != NULL;
    __libc_free(p);
}

enum { N = 300 };

/* An error's message says what went wrong: out of memory says so. */
static bool says_why(int st, const char *msg)
{
    if (!msg[0] || (st == SMELT_ERR_NOMEM && !strstr(msg, "memory") && !strstr(msg, "allocate"))) {
        fprintf(stderr, "status %d (%s), message '%s'\n", st, smelt_strerror(st), msg);
        return false;
    }
    return true;
}

/* The scenario; 0 when it ended well (a correct result, or an error with a
 * message), else what went wrong on stderr. */
static int scenario(void)
{
    const char *where = "ctx_new";
    char msg[512] = "";
    smelt_ctx *ctx = NULL;
    smelt_graph *g = NULL;
    smelt_plan *p = NULL;
    smelt_tensor *in[2] = {0}, *out = NULL;
    int st = smelt_ctx_new(&ctx);
    if (st)
        goto done; /* no context: no message to check */
    where = "ctx_set_threads";
    if ((st = smelt_ctx_set_threads(ctx, 1)))
        goto done;
    where = "graph";
    if ((st = smelt_graph_new(ctx, &g)))
        goto done;
    int64_t n = N;
    smelt_node *a = smelt_input(g, "a", SMELT_F32, 1, &n), *b = smelt_input(g, "b", SMELT_F32, 1, &n);
    smelt_node *y = smelt_add(g, smelt_mul(g, a, b), smelt_unary(g, SMELT_OP_EXP, smelt_scalar(g, 0.5)));
    y = smelt_mul(g, y, smelt_sub(g, a, smelt_scalar(g, 1.25)));
    if ((st = smelt_graph_status(g))) {
        snprintf(msg, sizeof msg, "%s", smelt_graph_errmsg(g));
        goto done;
    }
    where = "plan_new";
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    o.backend = "TCC";
    if ((st = smelt_plan_new(ctx, g, 1, &y, &o, &p)))
        goto done;
    where = "tensor_new";
    for (int i = 0; i < 2; i++)
        if ((st = smelt_tensor_new(ctx, SMELT_F32, 1, &n, &in[i])))
            goto done;
    float *x0 = smelt_tensor_data(in[0]), *x1 = smelt_tensor_data(in[1]);
    for (int i = 0; i < N; i++)
        x0[i] = 0.01f * (float)(i % 97) - 0.3f, x1[i] = 0.5f + 0.003f * (float)i;
    where = "plan_run";
    if ((st = smelt_plan_run(p, 2, in, 1, &out)))
        goto done;
    const float *r = smelt_tensor_data(out), e = (float)exp(0.5);
    for (int i = 0; i < N; i++) {
        float want = (x0[i] * x1[i] + e) * (x0[i] - 1.25f);
        if (!(r[i] == want || (r[i] - want) * (r[i] - want) <= 1e-10f * want * want)) {
            fprintf(stderr, "wrong result at %d: %g, expected %g\n", i, (double)r[i], (double)want);
            st = 1;
            break;
        }
    }
done:
    if (st < 0 && ctx && !msg[0])
        snprintf(msg, sizeof msg, "%s", smelt_errmsg(ctx));
    smelt_tensor_free(out);
    smelt_tensor_free(in[0]);
    smelt_tensor_free(in[1]);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
    if (st > 0)
        return 1;
    if (st < 0 && ctx && !says_why(st, msg)) {
        fprintf(stderr, "%s failed with status %d (%s) and no message\n", where, st, smelt_strerror(st));
        return 1;
    }
    return 0;
}

/* The same for a reduction: the reference and the kernel, one TinyCC
 * compile (libtcc 0.9.27 may crash when an allocation fails in a process's
 * second compile, whatever the kernel: a scenario compiles one). */
static int scenario_reduce(void)
{
    smelt_ctx *ctx = NULL;
    smelt_graph *g = NULL;
    smelt_plan *p = NULL;
    smelt_tensor *in = NULL, *out = NULL, *ref = NULL;
    int64_t shape[2] = {3, N};
    int st = smelt_ctx_new(&ctx);
    if (st)
        return 0;
    if ((st = smelt_ctx_set_threads(ctx, 1)) || (st = smelt_graph_new(ctx, &g)))
        goto done;
    int axis = 1;
    smelt_node *a = smelt_input(g, "a", SMELT_F32, 2, shape);
    smelt_node *y = smelt_reduce(g, SMELT_OP_MEAN, a, 1, &axis, 0);
    if ((st = smelt_graph_status(g)))
        goto done;
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    o.backend = "TCC";
    if ((st = smelt_plan_new(ctx, g, 1, &y, &o, &p)) || (st = smelt_tensor_new(ctx, SMELT_F32, 2, shape, &in)))
        goto done;
    float *x = smelt_tensor_data(in);
    for (int i = 0; i < 3 * N; i++)
        x[i] = 0.01f * (float)(i % 97) - 0.3f;
    if ((st = smelt_plan_run(p, 1, &in, 1, &out)) || (st = smelt_reference_eval(ctx, g, 1, &y, 1, &in, &ref)))
        goto done;
    for (int i = 0; i < 3; i++) {
        double got = smelt_tensor_get(out, i), want = smelt_tensor_get(ref, i);
        if (!(fabs(got - want) <= 1e-6 * fabs(want) + 1e-7)) {
            fprintf(stderr, "wrong mean at %d: %g, expected %g\n", i, got, want);
            st = 1;
            break;
        }
    }
done:;
    bool no_msg = st < 0 && !says_why(st, smelt_errmsg(ctx));
    smelt_tensor_free(in), smelt_tensor_free(out), smelt_tensor_free(ref);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
    if (no_msg)
        fprintf(stderr, "a reduction failed with status %d (%s) and no message\n", st, smelt_strerror(st));
    return st > 0 || no_msg;
}

/* where(a > 0, a*2, exp(a)) - b on TinyCC, checked against the
 * reference (a fused kernel whose compile fails falls back to unfused
 * kernels: the split must cope with memory that stays exhausted). */
static int scenario_where(void)
{
    smelt_ctx *ctx = NULL;
    smelt_graph *g = NULL;
    smelt_plan *p = NULL;
    smelt_tensor *in[2] = {0}, *out = NULL, *ref = NULL, *back = NULL;
    char path[64] = "";
    int64_t n = N;
    int st = smelt_ctx_new(&ctx);
    if (st)
        return 0;
    if ((st = smelt_ctx_set_threads(ctx, 1)) || (st = smelt_graph_new(ctx, &g)))
        goto done;
    smelt_node *a = smelt_input(g, "a", SMELT_F32, 1, &n), *b = smelt_input(g, "b", SMELT_F32, 1, &n);
    smelt_node *y = smelt_sub(g, smelt_where(g, smelt_binary(g, SMELT_OP_GT, a, smelt_scalar(g, 0)), smelt_mul(g, a, smelt_scalar(g, 2)),
                                             smelt_unary(g, SMELT_OP_EXP, a)),
                              b);
    if ((st = smelt_graph_status(g)))
        goto done;
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    o.backend = "TCC";
    if ((st = smelt_plan_new(ctx, g, 1, &y, &o, &p)) || (st = smelt_tensor_new(ctx, SMELT_F32, 1, &n, &in[0])) ||
        (st = smelt_tensor_new(ctx, SMELT_F32, 1, &n, &in[1])))
        goto done;
    float *x0 = smelt_tensor_data(in[0]), *x1 = smelt_tensor_data(in[1]);
    for (int i = 0; i < N; i++)
        x0[i] = 0.02f * (float)(i % 89) - 0.9f, x1[i] = 0.25f - 0.001f * (float)i;
    if ((st = smelt_plan_run(p, 2, in, 1, &out)) || (st = smelt_reference_eval(ctx, g, 1, &y, 2, in, &ref)))
        goto done;
    for (int i = 0; i < N; i++) {
        double got = smelt_tensor_get(out, i), want = smelt_tensor_get(ref, i);
        if (!(fabs(got - want) <= 1e-6 * fabs(want) + 1e-7)) {
            fprintf(stderr, "wrong where at %d: %g, expected %g\n", i, got, want);
            st = 1;
            goto done;
        }
    }
    /* the result through a .npy file (its header padding once hung when
     * its string builder ran out of memory) */
    snprintf(path, sizeof path, "/tmp/smelt-faults-%ld.npy", (long)getpid());
    if ((st = smelt_npy_save(ctx, path, out)) || (st = smelt_npy_load(ctx, path, &back)))
        goto done;
    if (memcmp(smelt_tensor_data(back), smelt_tensor_data(out), sizeof(float) * N)) {
        fprintf(stderr, "the .npy file does not hold the result\n");
        st = 1;
    }
done:;
    if (path[0])
        unlink(path);
    bool no_msg = st < 0 && !says_why(st, smelt_errmsg(ctx));
    smelt_tensor_free(in[0]), smelt_tensor_free(in[1]), smelt_tensor_free(out), smelt_tensor_free(ref);
    smelt_tensor_free(back);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
    if (no_msg)
        fprintf(stderr, "where failed with status %d (%s) and no message\n", st, smelt_strerror(st));
    return st > 0 || no_msg;
}

static int which; /* the scenario: 0 elementwise, 1 a reduction, 2 where */

/* One run with the n-th allocation failing; 0 if all was well, and in
 * *reached whether the run made n allocations at all. */
static int one(long n, bool *reached)
{
    fail_at = n;
    count = 0;
    live = 0;
    armed = true;
    int bad = which == 2 ? scenario_where() : which ? scenario_reduce() : scenario();
    armed = false;
    *reached = count >= n;
    if (!bad && live != 0) {
        fprintf(stderr, "%ld allocation%s not freed\n", live, live == 1 ? "" : "s");
        bad = 1;
    }
    return bad;
}

/* Allocations a run makes once the plan has run: none when the caller
 * gives the outputs (the intermediates live in the plan's arena at
 * opt_level >= 2, or in buffers kept from the first run below that), and
 * none when the output is the input's own tensor and the input is donated
 * (written in place, no temporary).  1 if some were made, with what on
 * stderr. */
static int allocations_per_run(int opt_level, int threads, bool donate)
{
    smelt_ctx *ctx = NULL;
    smelt_graph *g = NULL;
    smelt_plan *p = NULL;
    smelt_tensor *in = NULL, *zin = NULL, *out[3] = {0};
    const int64_t zs[2] = {64, 100};
    int64_t n = 100000;
    long made = -1;
    if (smelt_ctx_new(&ctx) || smelt_ctx_set_threads(ctx, threads) || smelt_graph_new(ctx, &g))
        goto done;
    smelt_node *x = smelt_input(g, "x", SMELT_F32, 1, &n), *y = x;
    for (int i = 0; i < 12; i++) /* intermediates at every level: barriers stop fusion */
        y = smelt_unary(g, i % 3 == 2 ? SMELT_OP_BARRIER : SMELT_OP_TANH, smelt_add(g, y, x));
    /* and a reduction of one long row (on 2 threads: its chunks in parallel),
     * and a softmax of z over rows (a row program with its row cache) */
    smelt_node *z = smelt_input(g, "z", SMELT_F32, 2, zs), *mz = smelt_reduce(g, SMELT_OP_MAX, z, 1, (int[]){1}, 1);
    smelt_node *ez = smelt_unary(g, SMELT_OP_EXP, smelt_sub(g, z, mz));
    smelt_node *ys[3] = {y, smelt_reduce(g, SMELT_OP_SUM, y, 0, NULL, 0),
                         smelt_div(g, ez, smelt_reduce(g, SMELT_OP_SUM, ez, 1, (int[]){1}, 1))};
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    o.backend = "TCC";
    o.opt_level = opt_level;
    const int donated[] = {0};
    o.donate = donate ? donated : NULL;
    o.n_donate = donate;
    if (smelt_plan_new(ctx, g, 3, ys, &o, &p) || smelt_tensor_new(ctx, SMELT_F32, 1, &n, &in) ||
        smelt_tensor_new(ctx, SMELT_F32, 2, zs, &zin) ||
        (!donate && smelt_tensor_new(ctx, SMELT_F32, 1, &n, &out[0])) ||
        smelt_tensor_new(ctx, SMELT_F32, 0, NULL, &out[1]) || smelt_tensor_new(ctx, SMELT_F32, 2, zs, &out[2]))
        goto done;
    smelt_tensor *dst[3] = {donate ? in : out[0], out[1], out[2]}, *ins[2] = {in, zin};
    float *d = smelt_tensor_data(in), *dz = smelt_tensor_data(zin);
    for (int64_t i = 0; i < n; i++)
        d[i] = 0.001f * (float)(i % 1999) - 1;
    for (int64_t i = 0; i < zs[0] * zs[1]; i++)
        dz[i] = 0.01f * (float)(i % 397) - 2;
    if (smelt_plan_run(p, 2, ins, 3, dst))
        goto done;
    fail_at = -1;
    count = 0;
    armed = true;
    for (int r = 0; r < 5; r++)
        if (smelt_plan_run(p, 2, ins, 3, dst))
            break;
    armed = false;
    made = count;
    smelt_plan_stats s;
    if (donate && (smelt_plan_get_stats(p, &s) || s.donated_inplace != 1)) {
        fprintf(stderr, "allocations per run: the donated input was not written in place at opt_level %d\n",
                opt_level);
        made = made ? made : 1;
    }
done:
    if (made < 0)
        fprintf(stderr, "allocations per run: the scenario failed: %s\n", ctx ? smelt_errmsg(ctx) : "no context");
    else if (made)
        fprintf(stderr, "allocations per run: %ld allocations in 5 runs at opt_level %d, %d thread%s%s\n", made,
                opt_level, threads, threads == 1 ? "" : "s", donate ? ", the input donated and written in place" : "");
    smelt_tensor_free(in);
    smelt_tensor_free(out[0]);
    smelt_tensor_free(out[1]);
    smelt_tensor_free(out[2]);
    smelt_tensor_free(zin);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
    return made != 0;
}

int main(int argc, char **argv)
{
    setenv("SMELT_CACHE", "0", 1);
    const char *only = getenv("SMELT_FAULT_N"), *sc = getenv("SMELT_FAULT_SCENARIO"), *fr = getenv("SMELT_FAULT_FROM");
    which = sc ? atoi(sc) : 0;
    from = fr && !strcmp(fr, "1");
    if (only) {
        bool reached;
        return one(atol(only), &reached);
    }
    long max = argc > 1 ? atol(argv[1]) : 100000;
    int runs = 0, failed = 0;
    for (int mode = 0; mode < 2; mode++)
    for (which = 0; which < 3; which++)
    for (long n = 1; n <= max; n++) {
        from = mode == 1;
        int fds[2];
        if (pipe(fds))
            return 2;
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            alarm(30);
            bool reached;
            int bad = one(n, &reached);
            char c = reached ? 'r' : 'n';
            if (write(fds[1], &c, 1) != 1)
                _exit(3);
            _exit(bad ? 1 : 42);
        }
        close(fds[1]);
        char c = 0;
        ssize_t got = read(fds[0], &c, 1);
        close(fds[0]);
        int ws;
        waitpid(pid, &ws, 0);
        runs++;
        if (!WIFEXITED(ws) || WEXITSTATUS(ws) != 42) {
            failed++;
            if (WIFSIGNALED(ws))
                fprintf(stderr, "allocation %ld failed: killed by signal %d (%s)\n", n, WTERMSIG(ws),
                        strsignal(WTERMSIG(ws)));
            else
                fprintf(stderr, "allocation %ld failed: exit status %d%s\n", n, WEXITSTATUS(ws),
                        WEXITSTATUS(ws) == 1 && got != 1 ? " (the process exited)" : "");
            fprintf(stderr, "  repeat it: SMELT_FAULT_SCENARIO=%d SMELT_FAULT_FROM=%d SMELT_FAULT_N=%ld %s\n", which,
                    from, n, argv[0]);
        }
        if (got == 1 && c == 'n') /* the run made fewer than n allocations: all covered */
            break;
    }
    /* after the forks: these leave TinyCC's state behind in this process */
    from = false;
    int per_run = 0;
    for (int level = 0; level <= 3; level++)
        per_run += allocations_per_run(level, 1, false) + allocations_per_run(level, 2, false) +
                   allocations_per_run(level, 2, true);
    printf("test-faults: %d runs, %d failed\n", runs + 12, failed + per_run);
    return failed || per_run ? 1 : 0;
}
