/* The optimising CPU tier: the CC backend (system C compiler), tiered
 * compilation under AUTO, and the persistent kernel cache. */
#include <fcntl.h>
#include <time.h>
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"
#include "backends.h" /* smelt__cc_flags */

/* A fresh cache folder and a compiler wrapper that counts its calls. */
static char dir[256], counter[300], wrapper[300];

static void write_script(const char *path, const char *text)
{
    t_write_file(path, text);
    chmod(path, 0755);
}

static void fresh_cache(void)
{
    snprintf(dir, sizeof dir, "/tmp/smelt-test-cache-XXXXXX");
    cr_assert(mkdtemp(dir));
    snprintf(counter, sizeof counter, "%s/calls", dir);
    snprintf(wrapper, sizeof wrapper, "%s/cc-wrapper", dir);
    char text[1024];
    snprintf(text, sizeof text, "#!/bin/sh\necho x >> '%s'\nexec cc \"$@\"\n", counter);
    write_script(wrapper, text);
    char cache[300];
    snprintf(cache, sizeof cache, "%s/cache", dir);
    setenv("SMELT_CACHE_DIR", cache, 1);
    unsetenv("SMELT_CACHE");
    unsetenv("SMELT_CACHE_MAX_MB");
    setenv("CC", wrapper, 1);
}

static int compiler_calls(void)
{
    FILE *f = fopen(counter, "r");
    int n = 0, c;
    while (f && (c = fgetc(f)) != EOF)
        n += c == '\n';
    if (f)
        fclose(f);
    return n;
}

static int cache_entries(char names[][300], int max)
{
    char cache[300];
    snprintf(cache, sizeof cache, "%s/cache", dir);
    DIR *d = opendir(cache);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (strstr(e->d_name, ".ske")) {
            if (n < max)
                snprintf(names[n], 300, "%.200s/%.90s", cache, e->d_name);
            n++;
        }
    if (d)
        closedir(d);
    return n;
}

static smelt_plan *plan_with(smelt_ctx *ctx, smelt_graph *g, int n_out, smelt_node **outs,
                             const char *backend)
{
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    o.backend = backend;
    smelt_plan *p = NULL;
    T_OK(ctx, smelt_plan_new(ctx, g, n_out, outs, &o, &p));
    return p;
}

/* A CC plan made with SMELT_STREAM_STORES=value (read when a plan is made) */
static smelt_plan *plan_cc_streaming(smelt_ctx *ctx, smelt_graph *g, int n_out, smelt_node **y, const char *value)
{
    setenv("SMELT_STREAM_STORES", value, 1);
    smelt_plan *p = plan_with(ctx, g, n_out, y, "CC");
    unsetenv("SMELT_STREAM_STORES");
    return p;
}

/* ((a*b + c)*a - b) ... in dtype dt: the same C on both tiers */
static smelt_node *chain(smelt_graph *g, smelt_node *a, smelt_node *b, smelt_node *c)
{
    smelt_node *x = smelt_add(g, smelt_mul(g, a, b), c);
    x = smelt_sub(g, smelt_mul(g, x, a), b);
    x = smelt_add(g, smelt_mul(g, x, c), a);
    return smelt_binary(g, SMELT_OP_MAXIMUM, smelt_sub(g, smelt_mul(g, x, b), c), a);
}

/* This suite is about the CPU tiers: AUTO here means TCC then CC.  On a
 * machine with a GPU, AUTO would plan for the GPU instead (docs/cuda.md), so
 * every test hides the GPUs from the CUDA driver before anything loads it
 * (each test is a process of its own; the driver is probed once in it). */
static void hide_gpus(void)
{
    setenv("CUDA_VISIBLE_DEVICES", "", 1);
}
TestSuite(tier, .init = hide_gpus);

Test(tier, cc_equals_tcc_bitwise_on_arithmetic)
{
    fresh_cache();
    const smelt_dtype dts[] = {SMELT_F32, SMELT_F64, SMELT_I32, SMELT_I64};
    for (int k = 0; k < NELEMS(dts); k++) {
        trng r;
        trng_init(&r, (uint64_t)k);
        smelt_ctx *ctx = t_ctx();
        smelt_graph *g = t_graph(ctx);
        smelt_node *a = smelt_input(g, NULL, dts[k], SHP(777, 33));
        smelt_node *b = smelt_input(g, NULL, dts[k], SHP(777, 33));
        smelt_node *c = smelt_input(g, NULL, dts[k], SHP(1, 33));
        smelt_node *y = chain(g, a, b, c);
        smelt_tensor *in[3] = {t_rand(ctx, &r, dts[k], SHP(777, 33)),
                               t_rand(ctx, &r, dts[k], SHP(777, 33)),
                               t_rand(ctx, &r, dts[k], SHP(1, 33))};
        smelt_plan *pt = plan_with(ctx, g, 1, &y, "TCC"), *pc = plan_with(ctx, g, 1, &y, "CC");
        smelt_tensor *ot = NULL, *oc = NULL;
        t_run(pt, 3, in, 1, &ot);
        t_run(pc, 3, in, 1, &oc);
        cr_assert(t_bitwise_equal(ot, oc), "dtype %s: TCC and CC differ at %lld",
                  smelt_dtype_name(dts[k]), (long long)t_first_difference(ot, oc));
        smelt_plan_stats s = t_stats(pc);
        cr_assert_str_eq(s.backend, "CC");
        smelt_tensor_free(ot), smelt_tensor_free(oc);
        t_free_all(in, 3);
        smelt_plan_free(pt), smelt_plan_free(pc);
        smelt_graph_free(g);
        smelt_ctx_free(ctx);
    }
}

/* Streaming stores (SMELT_STREAM_STORES=1 forces them on every flat CC
 * kernel) give the same bits as ordinary stores and TCC: several outputs
 * of several dtypes, a size that is no multiple of the group, chunks over
 * threads, and an output that starts off a cache line (a view at offset 3);
 * the kernels compiled for each x86-64 level this CPU runs, so that every
 * store width is used (16 bytes with SSE, 32 with AVX, 64 with AVX-512). */
Test(tier, streaming_stores_give_the_same_results)
{
    fresh_cache();
    const smelt_dtype dts[] = {SMELT_F32, SMELT_F64, SMELT_F16, SMELT_U8};
#if defined(__x86_64__)
    const char *marches[] = {"x86-64-v2", "x86-64-v3", "x86-64-v4"};
    const int n_march = smelt__x86_level() >= 4 ? 3 : smelt__x86_level() >= 3 ? 2 : 1;
#else
    const char *marches[] = {"native"}; /* (-march=native: SMELT_CC_MARCH left unset) */
    const int n_march = 1;
#endif
    for (int m = 0; m < n_march; m++) {
        if (strcmp(marches[m], "native"))
            setenv("SMELT_CC_MARCH", marches[m], 1);
        for (int k = 0; k < NELEMS(dts); k++) {
            trng r;
            trng_init(&r, 100 + (uint64_t)k);
            smelt_ctx *ctx = t_ctx();
            smelt_ctx_set_threads(ctx, 2);
            const int64_t n = 100003;
            smelt_graph *g = t_graph(ctx);
            smelt_node *a = smelt_input(g, NULL, dts[k], SHP(n));
            smelt_node *b = smelt_input(g, NULL, dts[k], SHP(n));
            smelt_node *y[2] = {chain(g, a, b, a), smelt_mul(g, a, b)};
            smelt_tensor *in[2] = {t_rand(ctx, &r, dts[k], SHP(n)), t_rand(ctx, &r, dts[k], SHP(n))};
            smelt_plan *pt = plan_with(ctx, g, 2, y, "TCC");
            smelt_plan *pc = plan_cc_streaming(ctx, g, 2, y, "1");
            smelt_tensor *ot[2] = {0}, *os[2] = {0}, *big, *off[2];
            t_run(pt, 2, in, 2, ot);
            big = t_tensor(ctx, dts[k], SHP(n + 3));
            T_OK(ctx, smelt_tensor_slice(big, 0, 3, n + 3, 1, &off[0]));
            off[1] = t_tensor(ctx, dts[k], SHP(n));
            t_run(pc, 2, in, 2, os);
            t_run(pc, 2, in, 2, off);
            for (int o = 0; o < 2; o++) {
                cr_assert(t_bitwise_equal(ot[o], os[o]), "%s, %s, output %d: streamed CC differs from TCC at %lld",
                          marches[m], smelt_dtype_name(dts[k]), o, (long long)t_first_difference(ot[o], os[o]));
                cr_assert(t_bitwise_equal(ot[o], off[o]), "%s, %s, output %d at offset 3 differs at %lld",
                          marches[m], smelt_dtype_name(dts[k]), o, (long long)t_first_difference(ot[o], off[o]));
            }
            t_free_all(ot, 2), t_free_all(os, 2), t_free_all(off, 2), t_free_all(in, 2);
            smelt_tensor_free(big);
            smelt_plan_free(pt), smelt_plan_free(pc);
            smelt_graph_free(g);
            smelt_ctx_free(ctx);
        }
    }
    unsetenv("SMELT_CC_MARCH");
}

/* The same in row-by-row (nd) kernels: a row and a column broadcast, a
 * transposed (strided) input; contiguous outputs are streamed. */
Test(tier, streaming_stores_in_nd_kernels)
{
    fresh_cache();
    trng r;
    trng_init(&r, 7);
    smelt_ctx *ctx = t_ctx();
    smelt_ctx_set_threads(ctx, 2);
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, NULL, SMELT_F32, SHP(301, 333));
    smelt_node *b = smelt_input(g, NULL, SMELT_F32, SHP(1, 333));
    smelt_node *c = smelt_input(g, NULL, SMELT_F32, SHP(301, 1));
    smelt_node *y = smelt_unary(g, SMELT_OP_RELU, smelt_add(g, smelt_mul(g, a, b), c));
    smelt_tensor *in[3] = {t_rand(ctx, &r, SMELT_F32, SHP(301, 333)), t_rand(ctx, &r, SMELT_F32, SHP(1, 333)),
                           t_rand(ctx, &r, SMELT_F32, SHP(301, 1))};
    smelt_tensor *at = t_rand(ctx, &r, SMELT_F32, SHP(333, 301)), *tr = NULL;
    const int perm[2] = {1, 0};
    T_OK(ctx, smelt_tensor_transpose(at, perm, &tr));
    smelt_plan *pt = plan_with(ctx, g, 1, &y, "TCC");
    smelt_plan *pc = plan_cc_streaming(ctx, g, 1, &y, "1");
    for (int layout = 0; layout < 2; layout++) {
        smelt_tensor *args[3] = {layout ? tr : in[0], in[1], in[2]}, *ot = NULL, *os = NULL;
        t_run(pt, 3, args, 1, &ot);
        t_run(pc, 3, args, 1, &os);
        cr_assert(t_bitwise_equal(ot, os), "layout %d: streamed CC differs from TCC at %lld", layout,
                  (long long)t_first_difference(ot, os));
        smelt_tensor_free(ot), smelt_tensor_free(os);
    }
    cr_assert(t_contains(smelt_plan_kernel_source(pc, 0), "shape[2] == 1"), "%s",
              smelt_plan_kernel_source(pc, 0));
    t_free_all(in, 3);
    smelt_tensor_free(tr), smelt_tensor_free(at);
    smelt_plan_free(pt), smelt_plan_free(pc);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* The same in a row program (a softmax over rows: its last pass streams),
 * rows split over two threads where the pool gives both a share, each
 * fencing its own stores (src/runtime/exec.c, call_kernel): the bits of TCC
 * and of ordinary stores.  (No test can see a missing fence on x86.) */
Test(tier, streaming_stores_in_row_programs)
{
    fresh_cache();
    trng r;
    trng_init(&r, 11);
    smelt_ctx *ctx = t_ctx();
    smelt_ctx_set_threads(ctx, 2);
    smelt_graph *g = t_graph(ctx);
    const int last[] = {-1};
    smelt_node *x = smelt_input(g, NULL, SMELT_F32, SHP(203, 1000));
    smelt_node *e = smelt_unary(g, SMELT_OP_EXP, smelt_sub(g, x, smelt_reduce(g, SMELT_OP_MAX, x, 1, last, 1)));
    smelt_node *y = smelt_div(g, e, smelt_reduce(g, SMELT_OP_SUM, e, 1, last, 1));
    smelt_tensor *in = t_rand(ctx, &r, SMELT_F32, SHP(203, 1000));
    smelt_plan *pt = plan_with(ctx, g, 1, &y, "TCC");
    smelt_plan *pc = plan_cc_streaming(ctx, g, 1, &y, "1"), *po = plan_cc_streaming(ctx, g, 1, &y, "0");
    smelt_tensor *ot = NULL, *os = NULL, *oo = NULL;
    t_run(pt, 1, &in, 1, &ot);
    t_run(pc, 1, &in, 1, &os);
    t_run(po, 1, &in, 1, &oo);
    cr_assert_eq(smelt_plan_num_kernels(pc), 1);
    cr_assert(t_contains(smelt_plan_kernel_source(pc, 0), "smelt_nt("), "%s", smelt_plan_kernel_source(pc, 0));
    cr_assert(t_bitwise_equal(ot, os), "streamed CC differs from TCC at %lld", (long long)t_first_difference(ot, os));
    cr_assert(t_bitwise_equal(oo, os), "streamed CC differs from stored CC at %lld",
              (long long)t_first_difference(oo, os));
    smelt_tensor_free(ot), smelt_tensor_free(os), smelt_tensor_free(oo), smelt_tensor_free(in);
    smelt_plan_free(pt), smelt_plan_free(pc), smelt_plan_free(po);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* The same in tiled launches (a transposed input: tiles of 64 x 128,
 * src/runtime/exec.c, launch_tiles): a.T + b over 320 x 384 (whole tiles,
 * each tile row 8 aligned lines) and 333 x 301 (tiles, then the edges;
 * rows off the lines), over two threads, each fencing its own stores: the
 * bits of TCC and of ordinary stores. */
Test(tier, streaming_stores_in_tiles)
{
    fresh_cache();
    const int64_t shapes[][2] = {{320, 384}, {333, 301}};
    for (int c = 0; c < NELEMS(shapes); c++) {
        trng r;
        trng_init(&r, 12 + (uint64_t)c);
        smelt_ctx *ctx = t_ctx();
        smelt_ctx_set_threads(ctx, 2);
        smelt_graph *g = t_graph(ctx);
        int64_t rows = shapes[c][0], cols = shapes[c][1];
        smelt_node *a = smelt_input(g, NULL, SMELT_F32, SHP(cols, rows)), *b = smelt_input(g, NULL, SMELT_F32, SHP(rows, cols));
        smelt_node *y = smelt_add(g, smelt_transpose(g, a, NULL), b);
        smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F32, SHP(cols, rows)), t_rand(ctx, &r, SMELT_F32, SHP(rows, cols))};
        smelt_plan *pt = plan_with(ctx, g, 1, &y, "TCC");
        smelt_plan *pc = plan_cc_streaming(ctx, g, 1, &y, "1"), *po = plan_cc_streaming(ctx, g, 1, &y, "0");
        smelt_tensor *ot = NULL, *os = NULL, *oo = NULL;
        t_run(pt, 2, in, 1, &ot);
        t_run(pc, 2, in, 1, &os);
        t_run(po, 2, in, 1, &oo);
        cr_assert(t_bitwise_equal(ot, os), "%lld x %lld: streamed CC differs from TCC at %lld", (long long)rows,
                  (long long)cols, (long long)t_first_difference(ot, os));
        cr_assert(t_bitwise_equal(oo, os), "%lld x %lld: streamed CC differs from stored CC at %lld", (long long)rows,
                  (long long)cols, (long long)t_first_difference(oo, os));
        smelt_tensor_free(ot), smelt_tensor_free(os), smelt_tensor_free(oo), t_free_all(in, 2);
        smelt_plan_free(pt), smelt_plan_free(pc), smelt_plan_free(po);
        smelt_graph_free(g);
        smelt_ctx_free(ctx);
    }
}

/* Outputs that start anywhere in a 64-byte line (NumPy's arrays start 16
 * bytes past one): the kernels store the elements up to the first line
 * boundary plainly and stream the rest, a row's last elements through
 * aligned local arrays (c_stream and c_tail, src/codegen/emit-loop.c), and a
 * row program's deferred last pass ends its runs on the output's lines
 * (emit-rows.c), and a tiled launch starts its tiles on the output's lines
 * (tile_lead, src/runtime/exec.c).  Every offset of an element in a line,
 * f32 and f64, an nd kernel, a softmax and a layernorm over rows (a
 * deferred last pass in runs of 512: rows of 1000 and 1500), a layernorm of
 * rows read by index (rows of 384) and a.T + b (tiles), over two threads:
 * the bits of TCC, and nothing stored outside the output. */
Test(tier, streaming_stores_into_outputs_off_a_line)
{
    fresh_cache();
    const smelt_dtype dts[] = {SMELT_F32, SMELT_F64};
    for (int k = 0; k < NELEMS(dts); k++)
        for (int w = 0; w < 5; w++) {
            const smelt_dtype dt = dts[k];
            const int64_t es = (int64_t)smelt_dtype_size(dt),
                          shapes[5][2] = {{301, 333}, {203, 1000}, {97, 1500}, {96, 384}, {200, 336}};
            const int64_t rows = shapes[w][0], cols = shapes[w][1], n = rows * cols;
            trng r;
            trng_init(&r, 300 + (uint64_t)(4 * k + w));
            smelt_ctx *ctx = t_ctx();
            smelt_ctx_set_threads(ctx, 2);
            smelt_graph *g = t_graph(ctx);
            const int last[] = {-1};
            smelt_node *x = smelt_input(g, NULL, dt, SHP(rows, cols)), *y, *ids = NULL;
            smelt_tensor *in[2] = {t_rand(ctx, &r, dt, SHP(rows, cols)), NULL};
            if (w == 3) { /* rows of x read by index: layernorm(x[ids]) */
                ids = smelt_input(g, NULL, SMELT_I64, SHP(rows));
                in[1] = t_tensor(ctx, SMELT_I64, SHP(rows));
                for (int64_t i = 0; i < rows; i++)
                    t_set_i64(in[1], i, (int64_t)trng_uniform(&r, 0, (double)rows) % rows);
                x = smelt_take(g, x, ids, 0);
            }
            if (w == 4) { /* a.T + b */
                smelt_node *a = smelt_input(g, NULL, dt, SHP(cols, rows));
                in[1] = t_rand(ctx, &r, dt, SHP(cols, rows));
                y = smelt_add(g, x, smelt_transpose(g, a, NULL));
            } else if (w == 0) {
                y = smelt_unary(g, SMELT_OP_RELU, smelt_mul(g, x, smelt_add(g, x, smelt_scalar(g, 0.5))));
            } else if (w == 1) {
                smelt_node *e = smelt_unary(g, SMELT_OP_EXP, smelt_sub(g, x, smelt_reduce(g, SMELT_OP_MAX, x, 1, last, 1)));
                y = smelt_div(g, e, smelt_reduce(g, SMELT_OP_SUM, e, 1, last, 1));
            } else {
                smelt_node *d = smelt_sub(g, x, smelt_reduce(g, SMELT_OP_MEAN, x, 1, last, 1));
                smelt_node *v = smelt_reduce(g, SMELT_OP_MEAN, smelt_mul(g, d, d), 1, last, 1);
                y = smelt_mul(g, d, smelt_unary(g, SMELT_OP_RSQRT, smelt_add(g, v, smelt_scalar(g, 1e-5))));
            }
            smelt_plan *pt = plan_with(ctx, g, 1, &y, "TCC"), *pc = plan_cc_streaming(ctx, g, 1, &y, "1");
            smelt_tensor *ot = NULL;
            t_run(pt, 1 + (w >= 3), in, 1, &ot);
            char *mem = aligned_alloc(64, (size_t)((n + 64) * es + 63) / 64 * 64); /* (a multiple of 64: C11) */
            cr_assert(mem);
            for (int64_t off = 0; off < 64 / es; off++) {
                smelt_tensor *os = NULL;
                memset(mem, 0x5a, (size_t)((n + 64) * es));
                T_OK(ctx, smelt_tensor_wrap(ctx, dt, SHP(rows, cols), NULL, mem + off * es, &os));
                t_run(pc, 1 + (w >= 3), in, 1, &os);
                cr_assert(t_bitwise_equal(ot, os), "%s, workload %d, output at byte %lld of a line: differs from TCC at %lld",
                          smelt_dtype_name(dt), w, (long long)(off * es), (long long)t_first_difference(ot, os));
                for (int64_t b = 0; b < off * es; b++) /* nothing stored before the output */
                    cr_assert_eq((unsigned char)mem[b], 0x5a);
                for (int64_t b = (off + n) * es; b < (n + 64) * es; b++) /* or after it */
                    cr_assert_eq((unsigned char)mem[b], 0x5a);
                smelt_tensor_free(os);
            }
            free(mem);
            smelt_tensor_free(ot), smelt_tensor_free(in[0]), smelt_tensor_free(in[1]);
            smelt_plan_free(pt), smelt_plan_free(pc);
            smelt_graph_free(g);
            smelt_ctx_free(ctx);
        }
}

/* Transcendental functions are smelt's own plain C (templates/common/math.h.in):
 * the tiers give the same bits (docs/numerics.md). */
Test(tier, transcendentals_same_bits_on_both_tiers)
{
    fresh_cache();
    const smelt_op ops[] = {SMELT_OP_EXP,  SMELT_OP_EXPM1, SMELT_OP_LOG,  SMELT_OP_LOG1P,
                            SMELT_OP_SIN,  SMELT_OP_COS,   SMELT_OP_TANH, SMELT_OP_ERF,
                            SMELT_OP_ATAN, SMELT_OP_SIGMOID, SMELT_OP_GELU_TANH, SMELT_OP_SILU};
    smelt_ctx *ctx = t_ctx();
    for (int k = 0; k < NELEMS(ops); k++) {
        trng r;
        trng_init(&r, (uint64_t)k);
        smelt_graph *g = t_graph(ctx);
        int64_t n = 1 << 14;
        smelt_node *x = smelt_input(g, NULL, SMELT_F32, 1, &n);
        smelt_node *y = smelt_unary(g, ops[k], x);
        smelt_tensor *in = t_tensor(ctx, SMELT_F32, 1, &n);
        bool pos = ops[k] == SMELT_OP_LOG || ops[k] == SMELT_OP_LOG1P;
        for (int64_t i = 0; i < n; i++)
            t_set(in, i, trng_logmag(&r, 1e-3, 20, pos));
        smelt_plan *pt = plan_with(ctx, g, 1, &y, "TCC"), *pc = plan_with(ctx, g, 1, &y, "CC");
        smelt_tensor *ot = NULL, *oc = NULL;
        t_run(pt, 1, &in, 1, &ot);
        t_run(pc, 1, &in, 1, &oc);
        int64_t worst = 0;
        for (int64_t i = 0; i < n; i++) {
            int64_t d = t_ulp_distance(smelt_tensor_get(ot, i), smelt_tensor_get(oc, i), SMELT_F32);
            worst = d > worst ? d : worst;
        }
        cr_assert(worst == 0, "%s: CC tier is %lld ULP from TCC", smelt_op_name(ops[k]),
                  (long long)worst);
        smelt_tensor_free(ot), smelt_tensor_free(oc), smelt_tensor_free(in);
        smelt_plan_free(pt), smelt_plan_free(pc);
        smelt_graph_free(g);
    }
    smelt_ctx_free(ctx);
}

/* The CC tier's groups of 128 compute f32 exp, sin, cos and tan through
 * their small-range forms (smelt_exp_f32_w ...) and again through the
 * whole function where an argument lies outside the range (exp: about
 * [-87.7, 88.4]; sin, cos, tan: |x| < 2^30; src/codegen/emit-loop.c,
 * c_group): groups with one such argument each (a different one at a
 * different place, just outside the range among them), groups without, a
 * tail; into a separate output and in place (a donated input, where a group
 * computes the whole function only): TinyCC's bits everywhere, and within
 * 1 ULP of the f64 function (libm's, of the f32 product x * 1.5). */
static void groups_outside_range(smelt_ctx *ctx, smelt_op op, const char *wfn, double (*f64)(double), double lo,
                                 double hi, const float *odd, int nodd)
{
    trng r;
    trng_init(&r, 77);
    int64_t n = 128 * 40 + 77;
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F32, 1, &n);
    smelt_node *y = smelt_unary(g, op, smelt_mul(g, x, smelt_scalar(g, 1.5)));
    smelt_tensor *in = t_tensor(ctx, SMELT_F32, 1, &n), *mine = t_tensor(ctx, SMELT_F32, 1, &n);
    for (int64_t i = 0; i < n; i++)
        t_set(in, i, trng_uniform(&r, lo, hi));
    for (int64_t gi = 0; gi <= n / 128; gi++)
        if (gi % 3 == 1 || gi == n / 128)
            t_set(in, SMELT_MIN(gi * 128 + (gi * 37) % 128, n - 1), odd[gi % nodd]);
    T_OK(ctx, smelt_tensor_copy(mine, in));
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    o.backend = "CC";
    const int donate[] = {0};
    o.donate = donate;
    o.n_donate = 1;
    smelt_plan *pt = plan_with(ctx, g, 1, &y, "TCC"), *pc = plan_with(ctx, g, 1, &y, "CC"), *pd;
    T_OK(ctx, smelt_plan_new(ctx, g, 1, &y, &o, &pd));
    cr_assert(t_contains(smelt_plan_kernel_source(pc, 0), wfn), "%s: the small-range form is not used", wfn);
    smelt_tensor *ot = NULL, *oc = NULL;
    t_run(pt, 1, &in, 1, &ot);
    t_run(pc, 1, &in, 1, &oc);
    t_run(pd, 1, &mine, 1, &mine);
    cr_assert_eq(t_stats(pd).donated_inplace, 1);
    int64_t at = -1;
    cr_assert(t_same_results(ot, oc, &at), "%s: CC differs from TCC at %lld (x = %a)", wfn, (long long)at,
              smelt_tensor_get(in, at));
    cr_assert(t_same_results(ot, mine, &at), "%s in place: CC differs from TCC at %lld (x = %a)", wfn,
              (long long)at, smelt_tensor_get(in, at));
    for (int64_t i = 0; i < n; i++) {
        float a = (float)smelt_tensor_get(in, i) * 1.5f, got = (float)smelt_tensor_get(oc, i);
        double want = f64((double)a);
        float wf = (float)want;
        if (isnan(want) || isinf(wf)) {
            cr_assert(isnan(want) ? isnan(got) : got == wf, "%s(%a): %a, not %a", wfn, (double)a, (double)got, want);
            continue;
        }
        double ulp = fabsf(wf) < 0x1p-126f ? 0x1p-149 : ldexp(1.0, ilogb(wf) - 23);
        cr_assert_leq(fabs((double)got - want), ulp, "%s(%a): %a, not within 1 ULP of %a", wfn, (double)a,
                      (double)got, want);
    }
    smelt_tensor_free(ot), smelt_tensor_free(oc), smelt_tensor_free(in), smelt_tensor_free(mine);
    smelt_plan_free(pt), smelt_plan_free(pc), smelt_plan_free(pd);
    smelt_graph_free(g);
}

Test(tier, trig_groups_outside_the_small_range)
{
    fresh_cache();
    smelt_ctx *ctx = t_ctx();
    /* (the kernel multiplies by 1.5: 0x1.555554p+29 * 1.5 is just below 2^30, 0x1.555556p+29 * 1.5 above) */
    const float odd[] = {0x1.555556p+29f, -1e10f, 0x1.555554p+29f, 3e38f, NAN, INFINITY, -INFINITY, -0x1.555556p+29f,
                         7e8f, -1e20f};
    groups_outside_range(ctx, SMELT_OP_SIN, "smelt_sin_f32_w(", sin, -300, 300, odd, NELEMS(odd));
    groups_outside_range(ctx, SMELT_OP_COS, "smelt_cos_f32_w(", cos, -300, 300, odd, NELEMS(odd));
    groups_outside_range(ctx, SMELT_OP_TAN, "smelt_tan_f32_w(", tan, -300, 300, odd, NELEMS(odd));
    smelt_ctx_free(ctx);
}

Test(tier, exp_groups_outside_the_fast_range)
{
    fresh_cache();
    smelt_ctx *ctx = t_ctx();
    const float odd[] = {-70.0f, 60.0f, -100.0f, 70.0f, NAN, INFINITY, -INFINITY, 59.0f, -58.6f};
    groups_outside_range(ctx, SMELT_OP_EXP, "smelt_exp_f32_w(", exp, -20, 20, odd, NELEMS(odd));
    trng r;
    trng_init(&r, 78);
    int64_t at = -1;

    /* softmax over rows of 1000 in [-5, 5]: rows 3k + 1 hold one -85,
     * rows 3k + 2 a NaN */
    int64_t s[2] = {48, 1000};
    const int ax[] = {1};
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F32, 2, s);
    smelt_node *e = smelt_unary(g, SMELT_OP_EXP, smelt_sub(g, x, smelt_reduce(g, SMELT_OP_MAX, x, 1, ax, true)));
    smelt_node *y = smelt_div(g, e, smelt_reduce(g, SMELT_OP_SUM, e, 1, ax, true));
    smelt_tensor *in = t_tensor(ctx, SMELT_F32, 2, s);
    for (int64_t i = 0; i < s[0] * s[1]; i++)
        t_set(in, i, trng_uniform(&r, -5, 5));
    for (int64_t row = 1; row < s[0]; row += 3) {
        t_set(in, row * s[1] + (row * 131) % s[1], -85.0);
        if (row + 1 < s[0])
            t_set(in, (row + 1) * s[1] + (row * 17) % s[1], NAN);
    }
    smelt_plan *pt = plan_with(ctx, g, 1, &y, "TCC"), *pc = plan_with(ctx, g, 1, &y, "CC");
    cr_assert(t_contains(smelt_plan_kernel_source(pc, 0), "smelt_exp_f32_w("), "the fast form is not used");
    smelt_tensor *ot = NULL, *oc = NULL;
    t_run(pt, 1, &in, 1, &ot);
    t_run(pc, 1, &in, 1, &oc);
    cr_assert(t_same_results(ot, oc, &at), "softmax: CC differs from TCC at %lld", (long long)at);
    cr_assert_gt(smelt_tensor_get(oc, 1 * s[1] + 131 % s[1]), 0.0, "e^-90 relative to the row: a subnormal, not 0");
    smelt_tensor_free(ot), smelt_tensor_free(oc), smelt_tensor_free(in);
    smelt_plan_free(pt), smelt_plan_free(pc);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* Every loop over a group's elements (c_group: "for (int64_t j = 0; j < 128;
 * j++)") in the CC kernel of y, the graph's one kernel, vectorises with the
 * CC flags; name: the dump folder's. */
static void group_loops_vectorise(smelt_ctx *ctx, smelt_graph *g, smelt_node *y, const char *name)
{
    char dump[300];
    snprintf(dump, sizeof dump, "%s/%s", dir, name);
    mkdir(dump, 0755);
    setenv("SMELT_DUMP_DIR", dump, 1);
    smelt_plan *p = plan_with(ctx, g, 1, &y, "CC");
    unsetenv("SMELT_DUMP_DIR");
    cr_assert_eq(t_stats(p).kernels, 1, "%s: one kernel", name);
    DIR *d = opendir(dump);
    struct dirent *e;
    char src[600] = "";
    while ((e = readdir(d)))
        if (strstr(e->d_name, ".c"))
            snprintf(src, sizeof src, "%s/%s", dump, e->d_name);
    closedir(d);
    cr_assert(src[0], "%s: no kernel source was dumped", name);
    int loops[16], nloops = 0, ln = 0;
    char line[1024];
    FILE *f = fopen(src, "r");
    while (f && fgets(line, sizeof line, f)) {
        ln++;
        if (strstr(line, "for (int64_t j = 0; j < 128; j++)") && nloops < 16)
            loops[nloops++] = ln;
    }
    cr_assert(f && fclose(f) == 0 && nloops > 0, "%s: no group loop in %s", name, src);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cc %s -march=native -fopt-info-vec-optimized -o /dev/null '%s' -lm 2>&1",
             smelt__cc_flags(), src);
    f = popen(cmd, "r");
    bool vec[16] = {false};
    while (f && fgets(line, sizeof line, f)) {
        const char *at = strstr(line, ".c:");
        int l = at && strstr(line, "loop vectorized") ? atoi(at + 3) : 0;
        for (int k = 0; k < nloops; k++)
            vec[k] = vec[k] || l == loops[k];
    }
    cr_assert(f && pclose(f) == 0, "%s failed", cmd);
    for (int k = 0; k < nloops; k++)
        cr_assert(vec[k], "%s: the group loop at line %d of %s did not vectorise (%s)", name, loops[k], src, cmd);
    smelt_plan_free(p);
}

/* The group loops of emitted kernels vectorise with the CC flags: plain
 * arithmetic; an exp, a sin (each: its small-range loop and the whole
 * function's); an exp in a
 * branch of where (the README's example: the fast form's running maximum
 * written in a branch kept gcc from vectorising it, 3.6x slower than the
 * unfused plan; src/codegen/emit.c, smelt__branch_values). */
Test(tier, hot_loop_vectorises)
{
    fresh_cache();
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, NULL, SMELT_F32, SHP(4096));
    smelt_node *b = smelt_input(g, NULL, SMELT_F32, SHP(4096));
    smelt_node *c = smelt_input(g, NULL, SMELT_F32, SHP(4096));
    group_loops_vectorise(ctx, g, smelt_unary(g, SMELT_OP_TANH, smelt_add(g, smelt_mul(g, a, b), a)), "tanh");
    group_loops_vectorise(ctx, g, smelt_unary(g, SMELT_OP_EXP, smelt_mul(g, a, b)), "exp");
    group_loops_vectorise(ctx, g, smelt_unary(g, SMELT_OP_SIN, smelt_mul(g, a, b)), "sin");
    smelt_node *w = smelt_where(g, smelt_binary(g, SMELT_OP_GT, a, smelt_scalar(g, 0)), smelt_mul(g, a, b),
                                smelt_unary(g, SMELT_OP_EXP, c));
    group_loops_vectorise(ctx, g, smelt_add(g, w, smelt_scalar(g, 1)), "where_exp");
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(tier, auto_runs_tcc_first_then_switches_to_cc)
{
    fresh_cache();
    setenv("SMELT_JIT_BACKEND", "AUTO", 1);
    trng r;
    trng_init(&r, 7);
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, NULL, SMELT_F32, SHP(300, 70));
    smelt_node *b = smelt_input(g, NULL, SMELT_F32, SHP(300, 70));
    smelt_node *y = smelt_unary(g, SMELT_OP_GELU_TANH, smelt_unary(g, SMELT_OP_EXP, chain(g, a, b, a)));
    smelt_node *outs[2] = {smelt_add(g, y, smelt_unary(g, SMELT_OP_TANH, a)), smelt_add(g, a, b)};
    smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F32, SHP(300, 70)),
                           t_rand(ctx, &r, SMELT_F32, SHP(300, 70))};
    smelt_plan *p = plan_with(ctx, g, 2, outs, "AUTO");
    smelt_tensor *o1[2] = {0}, *o2[2] = {0};
    t_run(p, 2, in, 2, o1);
    smelt_plan_stats s = t_stats(p);
    cr_assert_str_eq(s.backend, "TCC");
    cr_assert(s.tier_backend && !strcmp(s.tier_backend, "CC"), "AUTO has no optimising tier");
    cr_assert_eq(s.tier_pending, 0, "a plan run once queues nothing");
    t_free_all(o1, 2);
    t_run(p, 2, in, 2, o1); /* the second run queues the tier-up */
    s = t_stats(p);
    cr_assert_eq(s.kernels_fast, 0);
    T_OK(ctx, smelt_plan_wait(p));
    s = t_stats(p);
    cr_assert_eq(s.tier_pending, 0);
    t_run(p, 2, in, 2, o2); /* switched in at the start of this run */
    s = t_stats(p);
    cr_assert_eq(s.kernels_fast, s.kernels, "%d of %d kernels on CC after the wait",
                 s.kernels_fast, s.kernels);
    cr_assert(t_contains(smelt_plan_describe(p), "[CC]"));
    /* the switch changes no result */
    cr_assert(t_bitwise_equal(o1[1], o2[1]), "arithmetic differs between tiers");
    cr_assert(t_bitwise_equal(o1[0], o2[0]), "exp differs between tiers at %lld",
              (long long)t_first_difference(o1[0], o2[0]));
    t_free_all(o1, 2), t_free_all(o2, 2), t_free_all(in, 2);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
    unsetenv("SMELT_JIT_BACKEND");
}

/* A kernel cache bounded at one kernel: each CC kernel's arrival evicts the
 * kernel the plan runs; the plan's references keep both alive, the switch
 * still happens and changes no result. */
Test(tier, tier_up_through_a_one_kernel_cache)
{
    fresh_cache();
    setenv("SMELT_JIT_BACKEND", "AUTO", 1);
    setenv("SMELT_MEM_CACHE_MAX_KERNELS", "1", 1);
    trng r;
    trng_init(&r, 11);
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, NULL, SMELT_F32, SHP(500));
    smelt_node *b = smelt_input(g, NULL, SMELT_F32, SHP(500));
    smelt_node *outs[2] = {chain(g, a, b, a),
                           smelt_unary(g, SMELT_OP_NEG, smelt_unary(g, SMELT_OP_BARRIER, smelt_mul(g, a, b)))};
    smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F32, SHP(500)), t_rand(ctx, &r, SMELT_F32, SHP(500))};
    smelt_tensor *ref[2] = {0}, *o1[2] = {0}, *o2[2] = {0};
    t_reference(ctx, g, 2, outs, 2, in, ref);
    smelt_plan *p = plan_with(ctx, g, 2, outs, "AUTO");
    cr_assert_geq(t_stats(p).kernels, 2);
    t_run(p, 2, in, 2, o1);
    t_free_all(o1, 2);
    t_run(p, 2, in, 2, o1); /* queues the tier-up */
    T_OK(ctx, smelt_plan_wait(p));
    cr_assert_eq(smelt__kcache_count(ctx, NULL), 1);
    t_run(p, 2, in, 2, o2);
    smelt_plan_stats s = t_stats(p);
    cr_assert_eq(s.kernels_fast, s.kernels, "%d of %d kernels on CC", s.kernels_fast, s.kernels);
    for (int i = 0; i < 2; i++) {
        cr_assert(t_bitwise_equal(o1[i], o2[i]), "output %d differs between tiers", i);
        t_expect_match("tiered up", o2[i], ref[i], T_CHAIN);
    }
    t_free_all(o1, 2), t_free_all(o2, 2), t_free_all(ref, 2), t_free_all(in, 2);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
    unsetenv("SMELT_MEM_CACHE_MAX_KERNELS");
    unsetenv("SMELT_JIT_BACKEND");
}

/* a plan freed while its background compile is queued or running */
Test(tier, free_while_compiling_is_safe)
{
    fresh_cache();
    setenv("SMELT_JIT_BACKEND", "AUTO", 1);
    smelt_ctx *ctx = t_ctx();
    for (int i = 0; i < 4; i++) {
        smelt_graph *g = t_graph(ctx);
        smelt_node *a = smelt_input(g, NULL, SMELT_F64, SHP(10));
        smelt_node *y = smelt_binary(g, SMELT_OP_ADD, smelt_unary(g, SMELT_OP_SIN, a),
                                     smelt_scalar(g, (double)i));
        smelt_plan *p = plan_with(ctx, g, 1, &y, "AUTO");
        smelt_tensor *in = t_tensor(ctx, SMELT_F64, SHP(10)), *out = NULL;
        for (int k = 0; k < 10; k++)
            t_set(in, k, 0.5 + k);
        for (int run = 0; run < 2; run++) { /* the second run queues the CC compile */
            t_run(p, 1, &in, 1, &out);
            smelt_tensor_free(out);
            out = NULL;
        }
        smelt_tensor_free(in);
        smelt_plan_free(p);
        smelt_graph_free(g);
    }
    smelt_ctx_free(ctx);
    unsetenv("SMELT_JIT_BACKEND");
}

static smelt_plan *one_kernel(smelt_ctx *ctx, smelt_graph **gp, double k)
{
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, NULL, SMELT_F32, SHP(64));
    smelt_node *y = smelt_mul(g, smelt_add(g, a, smelt_scalar(g, k)), a);
    *gp = g;
    return plan_with(ctx, g, 1, &y, "CC");
}

Test(cache, warm_cache_needs_no_compiler)
{
    fresh_cache();
    smelt_graph *g;
    smelt_ctx *c1 = t_ctx();
    smelt_plan *p = one_kernel(c1, &g, 1.5);
    cr_assert_eq(compiler_calls(), 1);
    char names[8][300];
    cr_assert_eq(cache_entries(names, 8), 1, "one entry expected in the cache");
    smelt_plan_free(p), smelt_graph_free(g), smelt_ctx_free(c1);
    smelt_ctx *c2 = t_ctx(); /* as a new process: an empty in-memory cache */
    p = one_kernel(c2, &g, 1.5);
    cr_assert_eq(compiler_calls(), 1, "the compiler ran although the cache was warm");
    smelt_plan_free(p), smelt_graph_free(g), smelt_ctx_free(c2);
}

/* A kernel loaded from the persistent cache is a disk hit, not a compile;
 * the description says where each kernel came from. */
Test(cache, disk_hits_are_counted_apart_from_compiles)
{
    fresh_cache();
    smelt_graph *g, *g2;
    smelt_ctx *c1 = t_ctx();
    smelt_plan *p = one_kernel(c1, &g, 4.5);
    smelt_plan_stats s = t_stats(p);
    cr_assert(s.compiles == 1 && s.disk_hits == 0 && s.cache_hits == 0, "cold: %d %d %d",
              s.compiles, s.disk_hits, s.cache_hits);
    cr_assert(t_contains(smelt_plan_describe(p), "[CC] (compiled)"), "%s", smelt_plan_describe(p));
    smelt_plan *again = one_kernel(c1, &g2, 4.5); /* the same context: its memory */
    s = t_stats(again);
    cr_assert(s.compiles == 0 && s.disk_hits == 0 && s.cache_hits == 1, "memory: %d %d %d",
              s.compiles, s.disk_hits, s.cache_hits);
    cr_assert(t_contains(smelt_plan_describe(again), "[CC] (from memory)"), "%s",
              smelt_plan_describe(again));
    smelt_plan_free(again), smelt_graph_free(g2);
    smelt_plan_free(p), smelt_graph_free(g), smelt_ctx_free(c1);
    smelt_ctx *c2 = t_ctx(); /* as a new process */
    p = one_kernel(c2, &g, 4.5);
    s = t_stats(p);
    cr_assert(s.compiles == 0 && s.disk_hits == 1 && s.cache_hits == 0, "disk: %d %d %d",
              s.compiles, s.disk_hits, s.cache_hits);
    const char *d = smelt_plan_describe(p);
    cr_assert(t_contains(d, "[CC] (from disk)") && t_contains(d, "0 compiled, 0 from memory, 1 from disk"),
              "%s", d);
    cr_assert_eq(compiler_calls(), 1);
    smelt_plan_free(p), smelt_graph_free(g), smelt_ctx_free(c2);
}

/* A size cap that is not a positive number is ignored with a warning: the
 * default holds and the cache keeps its entries. */
Test(cache, bad_size_cap_keeps_the_default_with_a_warning)
{
    static const char *const bad[] = {"abc", "0", "-1", "12MB"};
    for (int i = 0; i < NELEMS(bad); i++) {
        fresh_cache();
        setenv("SMELT_CACHE_MAX_MB", bad[i], 1);
        smelt_ctx *c = t_ctx();
        smelt_graph *g;
        for (int k = 0; k < 3; k++) {
            smelt_plan *p = one_kernel(c, &g, 30.5 + k);
            if (k == 2) {
                const char *d = smelt_plan_describe(p);
                cr_assert(t_contains(d, "warning: SMELT_CACHE_MAX_MB=") && t_contains(d, bad[i]) &&
                              t_contains(d, "512 MiB"),
                          "%s: %s", bad[i], d);
            }
            smelt_plan_free(p), smelt_graph_free(g);
        }
        char names[8][300];
        cr_assert_eq(cache_entries(names, 8), 3, "SMELT_CACHE_MAX_MB=%s emptied the cache", bad[i]);
        smelt_ctx_free(c);
        unsetenv("SMELT_CACHE_MAX_MB");
    }
}

/* SMELT_CACHE=false, no, off turn the cache off as 0 does. */
Test(cache, off_words)
{
    static const char *const off[] = {"false", "no", "off", "OFF", "0"};
    for (int i = 0; i < NELEMS(off); i++) {
        fresh_cache();
        setenv("SMELT_CACHE", off[i], 1);
        smelt_graph *g;
        smelt_ctx *c = t_ctx();
        smelt_plan *p = one_kernel(c, &g, 40.5);
        char names[8][300], buf[512];
        cr_assert_eq(cache_entries(names, 8), 0, "SMELT_CACHE=%s wrote an entry", off[i]);
        cr_assert_neq(smelt_cache_dir(c, buf, sizeof buf), SMELT_OK);
        cr_assert(t_contains(smelt_errmsg(c), off[i]), "%s", smelt_errmsg(c));
        smelt_plan_free(p), smelt_graph_free(g), smelt_ctx_free(c);
    }
    unsetenv("SMELT_CACHE");
}

Test(cache, corrupt_or_truncated_entries_are_rebuilt)
{
    fresh_cache();
    smelt_graph *g;
    smelt_ctx *c1 = t_ctx();
    smelt_plan *p = one_kernel(c1, &g, 2.5);
    smelt_plan_free(p), smelt_graph_free(g), smelt_ctx_free(c1);
    char names[8][300];
    cr_assert_eq(cache_entries(names, 8), 1);
    struct stat st;
    stat(names[0], &st);
    off_t good = st.st_size;
    /* truncated */
    cr_assert_eq(truncate(names[0], good / 2), 0);
    c1 = t_ctx();
    p = one_kernel(c1, &g, 2.5);
    cr_assert_eq(compiler_calls(), 2, "a truncated entry was not rebuilt");
    smelt_plan_free(p), smelt_graph_free(g), smelt_ctx_free(c1);
    stat(names[0], &st);
    cr_assert_eq(st.st_size, good, "the rebuilt entry is not whole");
    /* one flipped byte in the payload */
    FILE *f = fopen(names[0], "r+b");
    fseek(f, 100, SEEK_SET);
    int ch = fgetc(f);
    fseek(f, 100, SEEK_SET);
    fputc(ch ^ 0x5a, f);
    fclose(f);
    c1 = t_ctx();
    p = one_kernel(c1, &g, 2.5);
    cr_assert_eq(compiler_calls(), 3, "a corrupt entry was trusted");
    smelt_tensor *in = t_tensor(c1, SMELT_F32, SHP(64)), *out = NULL;
    for (int i = 0; i < 64; i++)
        t_set(in, i, 0.25 * (i + 1));
    t_run(p, 1, &in, 1, &out);
    for (int i = 0; i < 64; i++)
        cr_assert_eq(smelt_tensor_get(out, i), (float)((float)(0.25 * (i + 1)) + 2.5f) * (float)(0.25 * (i + 1)));
    smelt_tensor_free(in), smelt_tensor_free(out);
    smelt_plan_free(p), smelt_graph_free(g), smelt_ctx_free(c1);
}

Test(cache, two_processes_fill_it_at_once)
{
    fresh_cache();
    pid_t kids[2];
    for (int k = 0; k < 2; k++) {
        kids[k] = fork();
        if (kids[k] == 0) {
            smelt_ctx *c = NULL;
            smelt_ctx_new(&c);
            int bad = 0;
            for (int i = 0; i < 6; i++) { /* the same kernels in both, in other orders */
                smelt_graph *g = NULL;
                smelt_graph_new(c, &g);
                int64_t n = 64;
                smelt_node *a = smelt_input(g, NULL, SMELT_F32, 1, &n);
                double kk = k ? 5 - i : i;
                smelt_node *y = smelt_mul(g, smelt_add(g, a, smelt_scalar(g, kk + 0.5)), a);
                smelt_plan_opts o;
                smelt_plan_opts_init(&o);
                o.backend = "CC";
                smelt_plan *p = NULL;
                bad |= smelt_plan_new(c, g, 1, &y, &o, &p) != SMELT_OK;
                smelt_plan_free(p);
                smelt_graph_free(g);
            }
            smelt_ctx_free(c);
            _exit(bad);
        }
    }
    for (int k = 0; k < 2; k++) {
        int st;
        waitpid(kids[k], &st, 0);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child %d failed", k);
    }
    char names[16][300];
    cr_assert_eq(cache_entries(names, 16), 6, "6 distinct kernels, 6 entries");
    int before = compiler_calls();
    smelt_ctx *c = t_ctx();
    for (int i = 0; i < 6; i++) { /* every entry is whole: no compile needed */
        smelt_graph *g;
        smelt_plan *p = one_kernel(c, &g, i + 0.5);
        smelt_plan_free(p), smelt_graph_free(g);
    }
    cr_assert_eq(compiler_calls(), before, "an entry written concurrently was unusable");
    smelt_ctx_free(c);
}

Test(cache, size_cap_evicts_least_recently_used)
{
    fresh_cache();
    smelt_graph *g;
    smelt_ctx *c = t_ctx();
    smelt_plan *p = one_kernel(c, &g, 10.5);
    smelt_plan_free(p), smelt_graph_free(g);
    char names[8][300];
    cache_entries(names, 8);
    struct stat st;
    stat(names[0], &st);
    char cap[64]; /* room for two entries, not three */
    snprintf(cap, sizeof cap, "%.6f", 2.5 * (double)st.st_size / 1048576.0);
    setenv("SMELT_CACHE_MAX_MB", cap, 1);
    for (int i = 0; i < 3; i++) {
        usleep(20000); /* distinct modification times */
        p = one_kernel(c, &g, 20.5 + i);
        smelt_plan_free(p), smelt_graph_free(g);
    }
    int n = cache_entries(names, 8);
    cr_assert(n >= 1 && n <= 2, "%d entries left under a cap of about two", n);
    unsetenv("SMELT_CACHE_MAX_MB");
    int before = compiler_calls();
    smelt_ctx *c2 = t_ctx(); /* the newest survives */
    p = one_kernel(c2, &g, 22.5);
    cr_assert_eq(compiler_calls(), before, "the most recent entry was evicted");
    smelt_plan_free(p), smelt_graph_free(g), smelt_ctx_free(c2);
    smelt_ctx_free(c);
}

Test(cache, off_writes_nothing)
{
    fresh_cache();
    setenv("SMELT_CACHE", "0", 1);
    smelt_graph *g;
    smelt_ctx *c = t_ctx();
    smelt_plan *p = one_kernel(c, &g, 3.5);
    char names[8][300];
    cr_assert_eq(cache_entries(names, 8), 0);
    smelt_plan_free(p), smelt_graph_free(g), smelt_ctx_free(c);
    unsetenv("SMELT_CACHE");
}

Test(tier, compiler_errors_and_missing_compiler_are_clear)
{
    fresh_cache();
    setenv("CC", "/nonexistent/cc", 1);
    smelt_ctx *c = t_ctx();
    T_ERR(c, smelt_backend_check(c, "CC"), SMELT_ERR_BACKEND, "/nonexistent/cc");
    char fake[320];
    snprintf(fake, sizeof fake, "%s/badcc", dir);
    write_script(fake, "#!/bin/sh\necho 'badcc: internal compiler error: testing' >&2\nexit 1\n");
    setenv("CC", fake, 1);
    smelt_ctx *c2 = t_ctx();
    smelt_graph *g = t_graph(c2);
    smelt_node *a = smelt_input(g, NULL, SMELT_F32, SHP(8));
    smelt_node *y = smelt_unary(g, SMELT_OP_NEG, a);
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    o.backend = "CC";
    smelt_plan *p = NULL;
    T_ERR(c2, smelt_plan_new(c2, g, 1, &y, &o, &p), SMELT_ERR_COMPILE, "internal compiler error: testing");
    cr_assert_null(p);
    smelt_graph_free(g);
    smelt_ctx_free(c), smelt_ctx_free(c2);
    unsetenv("CC");
}

/* ---- hardening: the compiler runs without a shell, with a time limit;
 * the persistent cache holds code, so only its owner may put any there ---- */

static void check_one_kernel(smelt_ctx *ctx, smelt_plan *p, double k)
{
    trng r;
    trng_init(&r, (uint64_t)(k * 8));
    smelt_tensor *in = t_rand(ctx, &r, SMELT_F32, SHP(64)), *out = NULL;
    t_run(p, 1, &in, 1, &out);
    for (int i = 0; i < 64; i++) {
        float a = (float)smelt_tensor_get(in, i);
        cr_assert_eq(smelt_tensor_get(out, i), (float)(a + (float)k) * a, "element %d", i);
    }
    smelt_tensor_free(in), smelt_tensor_free(out);
}

/* One plan of one_kernel(k) in a new context (an empty in-memory cache):
 * checked, and how many times the compiler ran for it. */
static int plan_once(double k)
{
    int before = compiler_calls();
    smelt_graph *g;
    smelt_ctx *c = t_ctx();
    smelt_plan *p = one_kernel(c, &g, k);
    smelt_plan_stats s = t_stats(p);
    cr_assert_eq(s.fallbacks, 0, "the kernel fell back: %s", smelt_plan_describe(p));
    check_one_kernel(c, p, k);
    smelt_plan_free(p), smelt_graph_free(g), smelt_ctx_free(c);
    return compiler_calls() - before;
}

static void cache_path(char *buf, size_t n) { snprintf(buf, n, "%s/cache", dir); }

Test(tier, compiler_runs_without_a_shell)
{
    fresh_cache();
    /* a TMPDIR and CC flags that a shell command line would run */
    char tmp[400], args[320], wrap[320], text[1024], marker[400];
    snprintf(tmp, sizeof tmp, "%s/q'$(touch INJECTED)'q;touch INJECTED2", dir);
    cr_assert_eq(mkdir(tmp, 0700), 0);
    snprintf(args, sizeof args, "%s/args", dir);
    snprintf(wrap, sizeof wrap, "%s/cc-args", dir);
    snprintf(text, sizeof text, "#!/bin/sh\nfor a in \"$@\"; do echo \"$a\" >> '%s'; done\nexec cc \"$@\"\n", args);
    write_script(wrap, text);
    char cc[700];
    snprintf(cc, sizeof cc, "%s  -DSMELT_TEST_FLAG=1\t-DX=a;touch${IFS}INJECTED3", wrap);
    setenv("CC", cc, 1);
    setenv("TMPDIR", tmp, 1);
    char cwd[512];
    cr_assert(getcwd(cwd, sizeof cwd));
    cr_assert_eq(chdir(dir), 0);
    smelt_ctx *c = t_ctx();
    smelt_graph *g;
    smelt_plan *p = one_kernel(c, &g, 4.5);
    check_one_kernel(c, p, 4.5);
    smelt_plan_free(p), smelt_graph_free(g), smelt_ctx_free(c);
    cr_assert_eq(chdir(cwd), 0);
    unsetenv("TMPDIR");
    unsetenv("CC");
    for (int i = 0; i < 3; i++) {
        snprintf(marker, sizeof marker, i ? "%s/INJECTED%d" : "%s/INJECTED", dir, i + 1);
        cr_assert(access(marker, F_OK) != 0, "a shell ran: %s exists", marker);
    }
    char *log = t_read_file(args);
    cr_assert(t_contains(log, "-DSMELT_TEST_FLAG=1\n"), "the flags of CC were not passed: %s", log);
    cr_assert(t_contains(log, "\n-DX=a;touch${IFS}INJECTED3\n"), "CC was not split on blanks alone: %s", log);
    free(log);
}

Test(tier, compiler_that_hangs_is_stopped)
{
    fresh_cache();
    char hang[320];
    snprintf(hang, sizeof hang, "%s/hangcc", dir);
    write_script(hang, "#!/bin/sh\nsleep 600\n");
    setenv("CC", hang, 1);
    setenv("SMELT_CC_TIMEOUT", "0.3", 1);
    smelt_ctx *c = t_ctx();
    smelt_graph *g = t_graph(c);
    smelt_node *a = smelt_input(g, NULL, SMELT_F32, SHP(64));
    smelt_node *y = smelt_mul(g, smelt_add(g, a, smelt_scalar(g, 6.5)), a);
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    o.backend = "CC";
    smelt_plan *p = NULL;
    double t0 = smelt__now_ms();
    T_ERR(c, smelt_plan_new(c, g, 1, &y, &o, &p), SMELT_ERR_COMPILE, "did not finish within 0.3 s");
    cr_assert(smelt__now_ms() - t0 < 5000, "the timeout took %.0f ms", smelt__now_ms() - t0);
    /* AUTO keeps the TCC kernels */
    p = plan_with(c, g, 1, &y, "AUTO");
    check_one_kernel(c, p, 6.5);
    check_one_kernel(c, p, 6.5); /* queues the CC compile */
    T_OK(c, smelt_plan_wait(p));
    check_one_kernel(c, p, 6.5);
    smelt_plan_stats s = t_stats(p);
    cr_assert_eq(s.kernels_fast, 0);
    cr_assert(t_contains(smelt_plan_describe(p), "stays on TCC"), "%s", smelt_plan_describe(p));
    smelt_plan_free(p);
    /* a limit that is not a number of seconds: ignored with a warning, the
     * default holds (it used to make every CC compile fail: CC off) */
    unsetenv("CC");
    setenv("SMELT_CC_TIMEOUT", "soon", 1);
    smelt_ctx *c2 = t_ctx(); /* (c's CC backend keeps the hanging compiler) */
    T_OK(c2, smelt_plan_new(c2, g, 1, &y, &o, &p));
    check_one_kernel(c2, p, 6.5);
    cr_assert(t_contains(smelt_plan_describe(p), "warning: SMELT_CC_TIMEOUT='soon' is not"), "%s",
              smelt_plan_describe(p));
    smelt_plan_free(p);
    smelt_ctx_free(c2);
    unsetenv("SMELT_CC_TIMEOUT");
    unsetenv("CC");
    smelt_graph_free(g), smelt_ctx_free(c);
}

Test(cache, folder_and_entries_are_private)
{
    fresh_cache();
    mode_t old = umask(0);
    cr_assert_eq(plan_once(30.5), 1);
    umask(old);
    char cache[300], names[4][300];
    cache_path(cache, sizeof cache);
    struct stat st;
    cr_assert_eq(stat(cache, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0700, "cache folder mode %o", (unsigned)(st.st_mode & 0777));
    cr_assert_eq(cache_entries(names, 4), 1);
    cr_assert_eq(stat(names[0], &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600, "entry mode %o", (unsigned)(st.st_mode & 0777));
    char key[320];
    snprintf(key, sizeof key, "%s/key", cache);
    cr_assert_eq(stat(key, &st), 0);
    cr_assert_eq(st.st_mode & 0777, 0600, "key mode %o", (unsigned)(st.st_mode & 0777));
}

Test(cache, folder_others_can_write_is_not_used)
{
    fresh_cache();
    cr_assert_eq(plan_once(31.5), 1);
    cr_assert_eq(plan_once(31.5), 0);
    char cache[300], names[4][300];
    cache_path(cache, sizeof cache);
    for (int owner = 0; owner < 2; owner++) {
        if (owner && geteuid() != 0)
            break; /* only root can give the folder to another user */
        if (owner) {
            chmod(cache, 0700);
            cr_assert_eq(chown(cache, 65534, 65534), 0);
        } else {
            chmod(cache, 0777);
        }
        const char *why = owner ? "is owned by another user" : "is writable by group or others";
        cr_assert_eq(plan_once(31.5), 1, "an entry of a folder that %s was used", why);
        cr_assert_eq(plan_once(32.5), 1);
        cr_assert_eq(cache_entries(names, 4), 1, "an entry was written to a folder that %s", why);
        smelt_ctx *c = t_ctx();
        char buf[512];
        T_ERR(c, smelt_cache_dir(c, buf, sizeof buf), SMELT_ERR_IO, why);
        cr_assert(t_contains(smelt_errmsg(c), "SMELT_CACHE_DIR"), "no fix named: %s", smelt_errmsg(c));
        smelt_graph *g;
        smelt_plan *p = one_kernel(c, &g, 31.5);
        cr_assert(t_contains(smelt_plan_describe(p), "warning: persistent kernel cache not used"),
                  "%s", smelt_plan_describe(p));
        smelt_plan_free(p), smelt_graph_free(g), smelt_ctx_free(c);
    }
    cr_assert_eq(chown(cache, geteuid(), getegid()), 0);
    chmod(cache, 0700);
    cr_assert_eq(plan_once(31.5), 0, "the folder, made private again, is not used");
}

/* A planted shared object whose constructor leaves a file behind, with a
 * header an attacker can compute without the folder's secret. */
Test(cache, planted_entry_never_runs)
{
    fresh_cache();
    cr_assert_eq(plan_once(33.5), 1);
    char names[4][300], src[320], so[320], marker[320], cmd[1200];
    cr_assert_eq(cache_entries(names, 4), 1);
    snprintf(src, sizeof src, "%s/evil.c", dir);
    snprintf(so, sizeof so, "%s/evil.so", dir);
    snprintf(marker, sizeof marker, "%s/PLANTED-RAN", dir);
    char text[600];
    snprintf(text, sizeof text,
             "#include <stdio.h>\n__attribute__((constructor)) static void planted(void)"
             "{ FILE *f = fopen(\"%s\", \"w\"); if (f) fclose(f); }\n", marker);
    t_write_file(src, text);
    snprintf(cmd, sizeof cmd, "cc -shared -fPIC -o '%s' '%s'", so, src);
    cr_assert_eq(system(cmd), 0);
    size_t n;
    char *img = t_read_file_n(so, &n);
    for (int magic = 0; magic < 2; magic++) { /* the old format and the new one */
        uint64_t len = n, sum = smelt__hash(img, n, 0xcac4e);
        FILE *f = fopen(names[0], "wb");
        fwrite(magic ? "SMELTKC2" : "SMELTKC1", 1, 8, f);
        fwrite(&len, 8, 1, f);
        fwrite(&sum, 8, 1, f);
        fwrite(img, 1, n, f);
        fclose(f);
        cr_assert_eq(plan_once(33.5), 1, "the planted entry was taken for a kernel");
        cr_assert(access(marker, F_OK) != 0, "planted code ran");
        cr_assert_eq(plan_once(33.5), 0, "the planted entry was not replaced");
    }
    free(img);
}

Test(cache, symlink_fifo_and_foreign_entries_are_replaced, .timeout = 60)
{
    fresh_cache();
    cr_assert_eq(plan_once(34.5), 1);
    char names[4][300], other[320];
    cr_assert_eq(cache_entries(names, 4), 1);
    snprintf(other, sizeof other, "%s/copy.ske", dir);
    size_t n;
    char *good = t_read_file_n(names[0], &n);
    FILE *f = fopen(other, "wb");
    fwrite(good, 1, n, f);
    fclose(f);
    free(good);
    for (int kind = 0; kind < 3; kind++) {
        unlink(names[0]);
        if (kind == 0)
            cr_assert_eq(symlink(other, names[0]), 0);
        else if (kind == 1)
            cr_assert_eq(mkfifo(names[0], 0600), 0); /* opening it blocked forever */
        else if (geteuid() == 0) { /* a whole entry, of another user */
            char cmd[700];
            snprintf(cmd, sizeof cmd, "cp '%s' '%s'", other, names[0]);
            cr_assert_eq(system(cmd), 0);
            cr_assert_eq(chown(names[0], 65534, 65534), 0);
        } else
            break;
        cr_assert_eq(plan_once(34.5), 1, "entry kind %d was used", kind);
        struct stat st;
        cr_assert_eq(lstat(names[0], &st), 0);
        cr_assert(S_ISREG(st.st_mode) && st.st_uid == geteuid(), "entry kind %d was not replaced", kind);
        cr_assert_eq(plan_once(34.5), 0);
    }
}

Test(cache, entry_without_its_kernel_is_rebuilt)
{
    fresh_cache();
    cr_assert_eq(plan_once(35.5), 1);
    char a[4][300], b[4][300];
    cr_assert_eq(cache_entries(a, 4), 1);
    cr_assert_eq(plan_once(36.5), 1);
    cr_assert_eq(cache_entries(b, 4), 2);
    const char *other = strcmp(b[0], a[0]) ? b[0] : b[1];
    /* the entry of 35.5 replaced by the (valid) entry of 36.5 */
    cr_assert_eq(rename(other, a[0]), 0);
    smelt_ctx *c = t_ctx();
    smelt_graph *g;
    smelt_plan *p = one_kernel(c, &g, 35.5);
    check_one_kernel(c, p, 35.5);
    /* compiled, not "from disk" (it used to be reported as loaded) */
    cr_assert(t_contains(smelt_plan_describe(p), "kernels: 1 compiled, 0 from memory, 0 from disk"), "%s",
              smelt_plan_describe(p));
    smelt_plan_free(p), smelt_graph_free(g), smelt_ctx_free(c);
    cr_assert_eq(compiler_calls(), 3, "an entry without the kernel was not rebuilt");
    cr_assert_eq(plan_once(35.5), 0, "the rebuilt entry was not kept");
}

/* AUTO: a kernel that TinyCC cannot compile (here: a block template that
 * fails; in the field, libtcc out of memory) is compiled by CC at once. */
Test(tier, auto_compiles_with_cc_when_tcc_fails)
{
    fresh_cache();
    char tdir[300], cdir[320], file[360];
    snprintf(tdir, sizeof tdir, "%s/templates", dir);
    snprintf(cdir, sizeof cdir, "%s/c", tdir);
    snprintf(file, sizeof file, "%s/kernel_block.c.in", cdir);
    cr_assert_eq(mkdir(tdir, 0700), 0);
    cr_assert_eq(mkdir(cdir, 0700), 0);
    t_write_file(file, "#error the TinyCC tier fails in this test\n");
    setenv("SMELT_TEMPLATE_DIR", tdir, 1);
    smelt_ctx *c = t_ctx();
    smelt_graph *g = t_graph(c);
    smelt_node *a = smelt_input(g, NULL, SMELT_F32, SHP(64));
    smelt_node *y = smelt_mul(g, smelt_add(g, a, smelt_scalar(g, 7.5)), a);
    smelt_plan *p = plan_with(c, g, 1, &y, "AUTO");
    for (int run = 0; run < 3; run++)
        check_one_kernel(c, p, 7.5);
    T_OK(c, smelt_plan_wait(p));
    smelt_plan_stats s = t_stats(p);
    cr_assert_eq(s.fallbacks, 0);
    cr_assert_eq(s.kernels_fast, s.kernels, "%d of %d kernels on CC", s.kernels_fast, s.kernels);
    cr_assert(t_contains(smelt_plan_describe(p), "compiled by CC"), "%s", smelt_plan_describe(p));
    unsetenv("SMELT_TEMPLATE_DIR");
    smelt_plan_free(p), smelt_graph_free(g), smelt_ctx_free(c);
}

/* A temporary file of an entry being written (.tmp-*) takes room: it
 * counts against SMELT_CACHE_MAX_MB; one older than the compiler timeout
 * was left by a process killed between writing and renaming it and is
 * deleted (it used to stay forever, uncounted). */
Test(cache, stale_temporaries_are_swept_and_fresh_ones_counted)
{
    fresh_cache();
    cr_assert_eq(plan_once(40.5), 1);
    char cache[300], stale[400], fresh[400], names[8][300];
    cache_path(cache, sizeof cache);
    snprintf(stale, sizeof stale, "%s/.tmp-999999-0-0", cache);
    snprintf(fresh, sizeof fresh, "%s/.tmp-999999-1-0", cache);
    static char block[1 << 20];
    memset(block, 7, sizeof block);
    for (int k = 0; k < 2; k++) {
        FILE *f = fopen(k ? fresh : stale, "wb");
        cr_assert_not_null(f);
        cr_assert_eq(fwrite(block, 1, sizeof block, f), sizeof block);
        fclose(f);
    }
    struct timespec old[2] = {{.tv_sec = time(NULL) - 3600}, {.tv_sec = time(NULL) - 3600}};
    cr_assert_eq(utimensat(AT_FDCWD, stale, old, 0), 0);
    /* a cap of 1 MiB: the fresh temporary alone fills it, so the entries
     * go; the stale one is deleted */
    setenv("SMELT_CACHE_MAX_MB", "1", 1);
    cr_assert_eq(plan_once(41.5), 1);
    struct stat st;
    cr_assert_neq(stat(stale, &st), 0, "a temporary file an hour old was not deleted");
    cr_assert_eq(stat(fresh, &st), 0, "a fresh temporary file (being written) was deleted");
    cr_assert_eq(cache_entries(names, 8), 0, "the fresh temporary file did not count against the cap");
    unsetenv("SMELT_CACHE_MAX_MB");
    unlink(fresh);
}

/* A cache folder where nothing can be stored (here: its key file is a
 * folder, as a read-only folder or a full disk would fail a store) is
 * named in a warning; it was listed as the cache in silence. */
Test(cache, a_store_that_fails_is_a_warning)
{
    fresh_cache();
    char cache[300], key[320];
    cache_path(cache, sizeof cache);
    cr_assert_eq(mkdir(cache, 0700), 0);
    snprintf(key, sizeof key, "%s/key", cache);
    cr_assert_eq(mkdir(key, 0700), 0);
    smelt_ctx *c = t_ctx();
    smelt_graph *g;
    smelt_plan *p = one_kernel(c, &g, 42.5);
    check_one_kernel(c, p, 42.5);
    cr_assert(t_contains(smelt_plan_describe(p), "could not be stored"), "%s", smelt_plan_describe(p));
    smelt_plan_free(p), smelt_graph_free(g), smelt_ctx_free(c);
    rmdir(key);
    cr_assert_eq(plan_once(42.5), 1);
    c = t_ctx();
    p = one_kernel(c, &g, 42.5); /* stored now: the warning is gone */
    cr_assert(!t_contains(smelt_plan_describe(p), "could not be stored"), "%s", smelt_plan_describe(p));
    smelt_plan_free(p), smelt_graph_free(g), smelt_ctx_free(c);
}
