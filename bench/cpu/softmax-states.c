/* The softmax kernel's arithmetic and memory time, in turn with the copy
 * (bench/cpu/softmax-states builds and runs this; bench/RESULTS.md).
 *
 * In one process, many times in turn: a streaming-store copy of 64 MiB
 * (read + write, as smelt-bench's copy limit), the CC tier's softmax
 * kernel on 16 rows per thread again and again (its input, output and row
 * cache in L2: the arithmetic alone, no memory traffic), and the same
 * kernel on all 4096 rows from memory.  Each triple is classed by the
 * copy's speed, so that the two states of a shared machine's memory are
 * told apart, with the arithmetic measured in the same state.
 *
 * K is the row-program kernel (-DK=smelt_rows_...), called as the executor
 * calls it (src/runtime/exec.c: shape[rank] = rows per call * 2 + streaming
 * stores, ptrs[n] = the row caches, one slot per call). */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <immintrin.h>
#include <omp.h>

void K(int64_t start, int64_t end, char *const *ptrs, const int64_t *shape, const int64_t *strides);

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}
static int cmp(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}
static double med(double *v, int n, int q) /* q-th quarter: 1, 2 (median), 3 */
{
    qsort(v, n, sizeof *v, cmp);
    return v[n * q / 4];
}

int main(int argc, char **argv)
{
    enum { R = 4096, C = 4096, PER = 64, HOT = 16 };
    const int n = argc > 1 ? atoi(argv[1]) : 300;
    const double split = argc > 2 ? atof(argv[2]) : 70.0; /* GB/s: the slow and the fast state */
    const size_t el = (size_t)R * C, slot = (size_t)C * 4;
    float *x = aligned_alloc(64, el * 4), *o = aligned_alloc(64, el * 4), *cb = aligned_alloc(64, el * 4);
    char *rc = aligned_alloc(64, (R / PER) * slot), *rc2 = aligned_alloc(64, 2 * slot);
    double *tc = malloc(2 * n * sizeof *tc), *ti = malloc(2 * n * sizeof *ti), *tm = malloc(2 * n * sizeof *tm);
    if (n < 4 || n > 1000000 || !x || !o || !cb || !rc || !rc2 || !tc || !ti || !tm) {
        fprintf(stderr, "softmax-states: usage: softmax-states [TRIPLES >= 4] [SPLIT_GBS] (or out of memory)\n");
        return 2;
    }
    srand(1);
    for (size_t i = 0; i < el; i++)
        x[i] = (float)rand() / (float)RAND_MAX * 8 - 4;
    memset(o, 0, el * 4), memset(cb, 0, el * 4), memset(rc, 0, (R / PER) * slot), memset(rc2, 0, 2 * slot);
    const int64_t strides[4] = {C, 1, C, 1};
    const int64_t sh_mem[3] = {R, C, PER * 2 + 1}, sh_hot[3] = {2 * HOT, C, HOT * 2};
    char *const p_mem[3] = {(char *)x, (char *)o, rc}, *const p_hot[3] = {(char *)x, (char *)o, rc2};
    for (int it = 0; it < n; it++) {
        const double t0 = now_ms();
#pragma omp parallel num_threads(2)
        {
            const size_t h = el / 2, t = (size_t)omp_get_thread_num();
#if defined(__AVX512F__)
            for (size_t i = 0; i < h; i += 16)
                _mm512_stream_ps(cb + t * h + i, _mm512_load_ps(x + t * h + i));
#else
            for (size_t i = 0; i < h; i += 4)
                _mm_stream_ps(cb + t * h + i, _mm_load_ps(x + t * h + i));
#endif
        }
        const double t1 = now_ms();
#pragma omp parallel num_threads(2)
        {
            const int t = omp_get_thread_num();
            for (int k = 0; k < R / (2 * HOT); k++) /* as many elements as the whole array */
                K(t * HOT, t * HOT + HOT, p_hot, sh_hot, strides);
        }
        const double t2 = now_ms();
#pragma omp parallel for schedule(dynamic, 1) num_threads(2)
        for (int64_t c = 0; c < R / PER; c++)
            K(c * PER, c * PER + PER, p_mem, sh_mem, strides);
        const double t3 = now_ms();
        tc[it] = el * 8 / (t1 - t0) / 1e6, ti[it] = t2 - t1, tm[it] = t3 - t2;
    }
    /* the kernel computed the softmax (three rows against double): else the
     * calling convention above no longer matches the executor's */
    double worst = 0;
    for (int r = 0; r < R; r += R / 2 - 1) {
        const float *xr = x + (size_t)r * C, *orow = o + (size_t)r * C;
        double m = xr[0], s = 0;
        for (int j = 0; j < C; j++)
            m = xr[j] > m ? xr[j] : m;
        for (int j = 0; j < C; j++)
            s += exp((double)xr[j] - m);
        for (int j = 0; j < C; j++) {
            const double want = exp((double)xr[j] - m) / s, e = fabs(orow[j] - want) / want;
            worst = e > worst || e != e ? e : worst;
        }
    }
    if (!(worst < 1e-5)) {
        fprintf(stderr, "softmax-states: the kernel's results are off by %g (relative) from double: its calling "
                        "convention (src/runtime/exec.c) has changed, update bench/cpu/softmax-states.c\n", worst);
        return 1;
    }
    printf("softmax-states: %d triples, 4096 x 4096 f32, 2 threads; results within %.1e of double\n", n, worst);
    for (int fast = 0; fast < 2; fast++) {
        double *a[3] = {tc + n, ti + n, tm + n}; /* the second halves */
        int k = 0;
        for (int i = 0; i < n; i++)
            if ((tc[i] >= split) == fast)
                a[0][k] = tc[i], a[1][k] = ti[i], a[2][k] = tm[i], k++;
        if (k < 4) {
            printf("copy %s %.0f GB/s: %d triples (too few)\n", fast ? ">=" : "< ", split, k);
            continue;
        }
        const double cp = med(a[0], k, 2), hot = med(a[1], k, 2), hq1 = a[1][k / 4], hq3 = a[1][3 * k / 4];
        const double mem = med(a[2], k, 2), need = el * 8 / (0.6 * cp) / 1e6;
        printf("copy %s %.0f GB/s: %3d triples, copy %.1f GB/s; softmax in cache %.3f ms (quartiles %.3f-%.3f), "
               "from memory %.3f ms = %.0f %% of the copy (60 %%: %.3f ms)\n",
               fast ? ">=" : "< ", split, k, cp, hot, hq1, hq3, mem, 100.0 * el * 8 / mem / 1e6 / cp, need);
    }
    return 0;
}
