/* The in-memory kernel cache against the number of distinct kernels:
 * smelt_eval of N distinct expressions (a * c + i, a new constant each, so
 * a new kernel each) in one context.  Prints the median time per eval over
 * each tenth of the run and the process's peak RSS: a flat column is a
 * cache whose lookups do not grow with its size, and the RSS shows its
 * bound.  The backend is the environment's (SMELT_JIT_BACKEND=TCC for the
 * figures in bench/RESULTS.md).
 *
 *   smelt-kcache-scale [N]     (default 20000) */
#include <smelt.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 20000;
    if (n < 10)
        n = 10;
    smelt_ctx *ctx = NULL;
    smelt_tensor *a = NULL;
    int64_t shp[1] = {1000};
    double *ms = malloc(sizeof *ms * (size_t)n);
    if (!ms || smelt_ctx_new(&ctx) || smelt_tensor_new(ctx, SMELT_F32, 1, shp, &a)) {
        fprintf(stderr, "smelt-kcache-scale: %s\n", ctx ? smelt_errmsg(ctx) : "out of memory");
        return 1;
    }
    const char *names[] = {"a"};
    printf("%8s %12s %10s\n", "evals", "ms/eval", "max_rss_MB");
    for (long i = 0; i < n; i++) {
        char expr[64];
        snprintf(expr, sizeof expr, "a * %ld.5 + 1", i);
        smelt_tensor *y = NULL;
        double t = now_ms();
        if (smelt_eval(ctx, expr, names, &a, 1, &y)) {
            fprintf(stderr, "smelt-kcache-scale: %s: %s\n", expr, smelt_errmsg(ctx));
            return 1;
        }
        ms[i] = now_ms() - t;
        smelt_tensor_free(y);
        if ((i + 1) % (n / 10) == 0) {
            long from = i + 1 - n / 10;
            qsort(ms + from, (size_t)(n / 10), sizeof *ms, cmp);
            struct rusage ru;
            getrusage(RUSAGE_SELF, &ru);
            printf("%8ld %12.3f %10.1f\n", i + 1, ms[from + n / 20], (double)ru.ru_maxrss / 1024.0);
            fflush(stdout);
        }
    }
    smelt_tensor_free(a);
    smelt_ctx_free(ctx);
    free(ms);
    return 0;
}
