/* The CUDA backend.
 *
 * cuda_emit: every kind of cluster is emitted as CUDA and compiled by NVRTC
 * to CUBIN for sm_80 and sm_90 on any machine (no GPU needed): each operator
 * in each dtype it accepts, casts, broadcast patterns up to rank 8, strided
 * operands, multi-output kernels, 32- and 64-bit index variants, parameter
 * blocks passed by value and through device memory, vector loads.  Skipped
 * with a message when libnvrtc cannot be loaded.
 * cuda_loader: what a machine without a GPU reports.
 * cuda_gpu: plans run on the GPU against the float64 reference; skipped
 * with a message when there is no GPU. */
#include <dirent.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"
#include "smelt_cuda.h"
#include "numpy-answers.h"
#include "backends.h"

static const char *const archs[] = {"sm_80", "sm_90"};

/* ---- helpers ------------------------------------------------------------ */

/* Skip the test when libnvrtc cannot be loaded. */
static void need_nvrtc(void)
{
    char *img = NULL;
    size_t n;
    smelt__sb log;
    smelt__sb_init(&log);
    int st = smelt__nvrtc_compile("extern \"C\" __global__ void probe() {}\n", "probe",
                                  "compute_80", &img, &n, &log);
    free(img);
    if (st == SMELT_ERR_BACKEND) {
        char why[512];
        snprintf(why, sizeof why, "%s", smelt__sb_str(&log));
        smelt__sb_free(&log);
        cr_skip_test("%s", why);
    }
    cr_assert_eq(st, SMELT_OK, "NVRTC cannot compile an empty kernel: %s", smelt__sb_str(&log));
    smelt__sb_free(&log);
}

static bool gpu_present(void)
{
    smelt_ctx *ctx = t_ctx_raw();
    bool ok = smelt_backend_check(ctx, "NVRTC") == SMELT_OK;
    smelt_ctx_free(ctx);
    return ok;
}

/* Emit g's kernels and compile them for every arch (or only for arch); the
 * report must say that NVRTC accepted all of them and contain each of the
 * must[] strings. */
static void emit_ok_arch(const char *label, smelt_ctx *ctx, smelt_graph *g, int n_out,
                         smelt_node *const *outs, const char *const *must, int nmust, const char *arch)
{
    for (size_t a = 0; a < sizeof archs / sizeof *archs; a++) {
        if (arch && strcmp(arch, archs[a]))
            continue;
        char *report = NULL;
        int st = smelt_plan_emit_only(ctx, g, n_out, outs, NULL, archs[a], &report);
        if (st && report)
            fprintf(stderr, "---- %s, %s: report\n%s\n", label, archs[a], report);
        cr_assert_eq(st, SMELT_OK, "%s, %s: smelt_plan_emit_only returned %d: %s", label, archs[a],
                     st, smelt_errmsg(ctx));
        cr_assert_not_null(report, "%s: no report", label);
        cr_assert(t_contains(report, " 0 rejected"), "%s, %s: %.200s", label, archs[a], report);
        for (int i = 0; i < nmust; i++)
            cr_assert(t_contains(report, must[i]), "%s, %s: the generated source lacks \"%s\"",
                      label, archs[a], must[i]);
        smelt_free(report);
    }
}

static void emit_ok(const char *label, smelt_ctx *ctx, smelt_graph *g, int n_out,
                    smelt_node *const *outs, const char *const *must, int nmust)
{
    emit_ok_arch(label, ctx, g, n_out, outs, must, nmust, NULL);
}

/* Does the operator take compute dtype dt (ops.def's F I U B letters)? */
static bool takes(smelt_op op, smelt_dtype dt)
{
    return (smelt__ops[op].dtypes & smelt__dtypes[dt].kind) != 0;
}

/* One graph applying every elementwise operator that takes dt to inputs of
 * dt, all results summed (cast back to dt) into one output: one fused
 * kernel whose body holds every operator's CUDA spelling.  Compiled for
 * every arch, or only for arch. */
static void all_ops_arch(smelt_dtype dt, const char *arch)
{
    need_nvrtc();
    smelt_ctx *ctx = t_ctx_raw();
    smelt_graph *g = t_graph(ctx);
    smelt_node *in[3];
    for (int i = 0; i < 3; i++)
        in[i] = smelt_input(g, NULL, dt, SHP(1000));
    smelt_node *acc = NULL;
    int nops = 0;
    for (int op = 0; op < SMELT_OP_COUNT; op++) {
        int cls = smelt__ops[op].cls;
        if ((cls != SMELT_CLASS_ELEMWISE && cls != SMELT_CLASS_OPAQUE) || !takes((smelt_op)op, dt))
            continue;
        smelt_node *r = smelt_op_apply(g, (smelt_op)op, smelt__ops[op].arity, in);
        cr_assert_not_null(r, "%s on %s: %s", smelt__ops[op].name, smelt_dtype_name(dt),
                           smelt_graph_errmsg(g));
        if (smelt_node_dtype(r) != dt)
            r = smelt_cast(g, r, dt);
        acc = acc ? smelt_add(g, acc, r) : r;
        nops++;
    }
    cr_assert_gt(nops, 3);
    /* constants that need more than a literal: non-finite floats, INT64_MIN */
    double special[] = {INFINITY, -INFINITY, NAN, -9223372036854775808.0};
    for (int i = smelt__is_float(dt) ? 0 : 3; i < (dt == SMELT_I64 || smelt__is_float(dt) ? 4 : 3); i++)
        acc = smelt_add(g, acc, smelt_const(g, special[i], dt));
    T_OK(ctx, smelt_graph_status(g));
    char label[64];
    snprintf(label, sizeof label, "%d operators on %s", nops, smelt_dtype_name(dt));
    const char *must[] = {"extern \"C\" __global__ void smelt_ew_", "smelt_vec<"};
    emit_ok_arch(label, ctx, g, 1, &acc, must, 2, arch);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

static void all_ops(smelt_dtype dt) { all_ops_arch(dt, NULL); }

/* A kernel description: a chain of adds over n_in inputs of dt, one output,
 * the given layout. */
typedef struct kd {
    smelt__kdesc d;
    smelt__kop ops[SMELT_MAX_KERNEL_OPERANDS];
} kd;

static void kd_chain(kd *k, int n_in, smelt_dtype dt, int rank, const uint8_t *modes, bool idx32)
{
    memset(k, 0, sizeof *k);
    smelt__kdesc *d = &k->d;
    d->n_in = n_in;
    d->n_out = 1;
    d->n_ops = n_in - 1;
    d->ops = k->ops;
    for (int i = 0; i < n_in; i++)
        d->in_dt[i] = dt;
    for (int i = 0; i < n_in - 1; i++)
        k->ops[i] = (smelt__kop){.op = SMELT_OP_ADD, .dtype = dt, .nin = 2,
                                 .in = {i ? n_in + i - 1 : 0, i + 1}};
    d->out_val[0] = n_in + n_in - 2;
    d->rank = rank;
    d->idx32 = idx32;
    memcpy(d->mode, modes, (size_t)n_in + 1);
}

/* Emit d as CUDA and compile it for arch; returns the source (caller frees)
 * and, for compute_* archs, the PTX in *ptx. */
static char *emit_compile(const kd *k, const char *arch, char **ptx)
{
    smelt__sb src, err;
    smelt__sb_init(&src);
    smelt__sb_init(&err);
    char name[40];
    static const smelt__devtarget nvidia = {.warp = 32, .shared_bytes = 48 * 1024, .max_grid = INT32_MAX};
    int st = smelt__emit(&(smelt__target){.dialect = &smelt__dialect_cuda, .device = &nvidia}, &k->d, &src, name, &err);
    cr_assert_eq(st, SMELT_OK, "emit: %s", smelt__sb_str(&err));
    char *img = NULL;
    size_t n = 0;
    st = smelt__nvrtc_compile(smelt__sb_str(&src), name, arch, &img, &n, &err);
    if (st)
        fprintf(stderr, "---- %s\n%s\n", name, smelt__sb_str(&src));
    cr_assert_eq(st, SMELT_OK, "NVRTC (%s) rejected %s: %s", arch, name, smelt__sb_str(&err));
    cr_assert_gt(n, 0);
    if (ptx)
        *ptx = img;
    else
        free(img);
    smelt__sb_free(&err);
    return smelt__sb_take(&src);
}

/* ---- cuda_emit: NVRTC compiles what the CUDA emitter writes --------------- */

Test(cuda_emit, ops_f32, .timeout = 240) { all_ops(SMELT_F32); }
Test(cuda_emit, ops_f64, .timeout = 240) { all_ops(SMELT_F64); }
Test(cuda_emit, ops_i32, .timeout = 240) { all_ops(SMELT_I32); }
Test(cuda_emit, ops_i64, .timeout = 240) { all_ops(SMELT_I64); }
Test(cuda_emit, ops_u8, .timeout = 240) { all_ops(SMELT_U8); }
Test(cuda_emit, ops_bool, .timeout = 240) { all_ops(SMELT_BOOL); }
/* f16 / bf16: unsigned short storage, f32 arithmetic, the prelude's own
 * conversions (no cuda_fp16.h; PTX cvt from sm_53 / sm_80).  One arch each:
 * their vector bodies have 8 lanes, and NVRTC takes seconds per arch. */
Test(cuda_emit, ops_f16, .timeout = 240) { all_ops_arch(SMELT_F16, "sm_80"); }
Test(cuda_emit, ops_bf16, .timeout = 240) { all_ops_arch(SMELT_BF16, "sm_90"); }

/* Every cast from each dtype, in one multi-output kernel per source dtype:
 * the casts are outputs and also summed into one more. */
Test(cuda_emit, casts_multi_output, .timeout = 120)
{
    need_nvrtc();
    smelt_ctx *ctx = t_ctx_raw();
    for (int from = 0; from < SMELT_DTYPE_COUNT; from++) {
        smelt_graph *g = t_graph(ctx);
        smelt_node *a = smelt_input(g, NULL, (smelt_dtype)from, SHP(7, 9));
        smelt_node *outs[SMELT_DTYPE_COUNT + 1], *acc = NULL;
        int n = 1;
        for (int to = 0; to < SMELT_DTYPE_COUNT; to++) {
            if (to == from)
                continue;
            smelt_node *c = smelt_cast(g, a, (smelt_dtype)to);
            outs[n++] = c;
            smelt_node *back = smelt_cast(g, smelt_unary(g, SMELT_OP_ABS, c), (smelt_dtype)from);
            acc = acc ? smelt_add(g, acc, back) : back;
        }
        outs[0] = acc;
        T_OK(ctx, smelt_graph_status(g));
        char label[64];
        snprintf(label, sizeof label, "casts from %s", smelt_dtype_name((smelt_dtype)from));
        char ptrs[32];
        snprintf(ptrs, sizeof ptrs, "char *ptrs[%d];", n + 1); /* one input, n outputs */
        const char *must[] = {ptrs};
        emit_ok(label, ctx, g, n, outs, must, 1);
        smelt_graph_free(g);
    }
    smelt_ctx_free(ctx);
}

/* Broadcast patterns: row, column, scalar, several in one kernel, rank 8. */
Test(cuda_emit, broadcasts, .timeout = 120)
{
    need_nvrtc();
    smelt_ctx *ctx = t_ctx_raw();
    struct {
        const char *label;
        int na, nb, nc;
        int64_t a[8], b[8], c[8];
        const char *must;
    } cases[] = {
        {"row (4,5)+(1,5)", 2, 2, 0, {4, 5}, {1, 5}, {0}, "smelt_idx shape[2];"},
        {"column (4,5)+(4,1)", 2, 2, 0, {4, 5}, {4, 1}, {0}, "smelt_idx o1 = 0 + x0 * a.strides[2];"},
        {"scalar (6,7)+(1,)", 2, 1, 0, {6, 7}, {1}, {0}, "smelt_idx o1 = 0;"},
        {"three (3,4,5)+(4,1)+(5,)", 3, 2, 1, {3, 4, 5}, {4, 1}, {5}, "smelt_idx shape[3];"},
        {"rank 8", 8, 8, 1, {2, 1, 2, 1, 2, 1, 2, 1}, {1, 3, 1, 3, 1, 3, 1, 3}, {3},
         "smelt_idx shape[8];"},
    };
    for (int i = 0; i < NELEMS(cases); i++) {
        smelt_graph *g = t_graph(ctx);
        smelt_node *a = smelt_input(g, NULL, SMELT_F32, cases[i].na, cases[i].a);
        smelt_node *b = smelt_input(g, NULL, SMELT_F32, cases[i].nb, cases[i].b);
        smelt_node *y = smelt_mul(g, smelt_unary(g, SMELT_OP_EXP, a), b);
        if (cases[i].nc) {
            smelt_node *c = smelt_input(g, NULL, SMELT_F64, cases[i].nc, cases[i].c);
            y = smelt_where(g, smelt_binary(g, SMELT_OP_GT, c, smelt_scalar(g, 0)), y,
                            smelt_sub(g, y, c));
        }
        smelt_node *outs[] = {y, smelt_add(g, a, smelt_scalar(g, 1))};
        T_OK(ctx, smelt_graph_status(g));
        const char *must[] = {cases[i].must};
        emit_ok(cases[i].label, ctx, g, 2, outs, must, 1);
        smelt_graph_free(g);
    }
    smelt_ctx_free(ctx);
}

/* broadcast_to as an operator inside a cluster. */
Test(cuda_emit, broadcast_to_op, .timeout = 60)
{
    need_nvrtc();
    smelt_ctx *ctx = t_ctx_raw();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, NULL, SMELT_I32, SHP(1, 8));
    smelt_node *b = smelt_broadcast_to(g, smelt_unary(g, SMELT_OP_NEG, a), SHP(5, 8));
    smelt_node *y = smelt_binary(g, SMELT_OP_MAXIMUM, b, smelt_scalar(g, 3));
    const char *must[] = {"smelt_idx o0 = c + x0 * a.strides[0];"};
    emit_ok("broadcast_to", ctx, g, 1, &y, must, 1);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* Strided operands (as transposed or sliced views give at run time), every
 * mode combination, ranks 1 to 8, both index widths. */
Test(cuda_emit, strided_layouts, .timeout = 120)
{
    need_nvrtc();
    static const uint8_t S = SMELT_MODE_STRIDED, B = SMELT_MODE_BCAST, C = SMELT_MODE_CONTIG;
    struct {
        int n_in, rank;
        smelt_dtype dt;
        uint8_t modes[4];
    } cases[] = {
        {1, 1, SMELT_F32, {S, C}},    {2, 1, SMELT_F64, {S, B, S}}, {2, 2, SMELT_I32, {S, C, C}},
        {3, 3, SMELT_I64, {S, B, C, S}}, {2, 8, SMELT_U8, {S, S, S}}, {3, 5, SMELT_BOOL, {B, S, C, C}},
    };
    for (int i = 0; i < NELEMS(cases); i++)
        for (int w = 0; w < 2; w++) {
            kd k;
            kd_chain(&k, cases[i].n_in, cases[i].dt, cases[i].rank, cases[i].modes, w == 0);
            char *src = emit_compile(&k, archs[(i + w) % 2], NULL); /* both archs, alternately */
            cr_assert(t_contains(src, w == 0 ? "typedef unsigned int smelt_idx;"
                                             : "typedef long long smelt_idx;"));
            cr_assert(t_contains(src, "* a.strides["), "case %d: no strided offset", i);
            free(src);
        }
}

/* The index width follows the iteration space: a graph of 2^32 elements
 * gets the 64-bit variant, a small one the 32-bit variant. */
Test(cuda_emit, index_width, .timeout = 60)
{
    need_nvrtc();
    smelt_ctx *ctx = t_ctx_raw();
    for (int big = 0; big < 2; big++) {
        smelt_graph *g = t_graph(ctx);
        int64_t shape[2] = {big ? 65536 : 64, 65536};
        smelt_node *a = smelt_input(g, NULL, SMELT_F32, 2, shape);
        smelt_node *b = smelt_input(g, NULL, SMELT_F32, 1, shape + 1);
        smelt_node *y = smelt_add(g, smelt_unary(g, SMELT_OP_TANH, a), b);
        const char *must[] = {big ? "typedef long long smelt_idx;" : "typedef unsigned int smelt_idx;"};
        emit_ok(big ? "2^32 elements" : "2^22 elements", ctx, g, 1, &y, must, 1);
        smelt_graph_free(g);
    }
    smelt_ctx_free(ctx);
}

/* 64 operands at rank 8 with 64-bit indices need 4680 bytes of parameters:
 * more than the 4 KB limit, so they go through device memory; the 32-bit
 * variant (2632 bytes) is passed by value. */
Test(cuda_emit, parameter_block, .timeout = 120)
{
    need_nvrtc();
    uint8_t modes[SMELT_MAX_KERNEL_OPERANDS];
    for (int i = 0; i < SMELT_MAX_KERNEL_OPERANDS; i++)
        modes[i] = i % 3 == 0 ? SMELT_MODE_BCAST : SMELT_MODE_STRIDED;
    int n_in = SMELT_MAX_KERNEL_OPERANDS - 1;
    modes[n_in] = SMELT_MODE_STRIDED; /* the output */
    cr_assert_gt(smelt__kparam_bytes(n_in + 1, 8, false), SMELT_KPARAM_MAX);
    cr_assert_leq(smelt__kparam_bytes(n_in + 1, 8, true), SMELT_KPARAM_MAX);
    for (int w = 0; w < 2; w++) {
        kd k;
        kd_chain(&k, n_in, SMELT_F32, 8, modes, w == 1);
        char *src = emit_compile(&k, w == 0 ? "sm_90" : "sm_80", NULL);
        cr_assert(t_contains(src, w == 0 ? "#if 0\n" : "#if 1\n"), "%s parameters",
                  w == 0 ? "64-bit: buffer" : "32-bit: by value");
        free(src);
    }
}

/* Contiguous kernels load and store 16 bytes at a time (PTX checked); f16
 * and bf16 results are rounded by the hardware's conversions. */
Test(cuda_emit, vector_loads, .timeout = 60)
{
    need_nvrtc();
    struct {
        smelt_dtype dt;
        const char *ld, *st;
    } cases[] = {
        {SMELT_F32, "ld.global.nc.v4.f32", "st.global.v4.f32"},
        {SMELT_F64, "ld.global.nc.v2.f64", "st.global.v2.f64"},
        {SMELT_F16, "ld.global.nc.v4", "cvt.rn.f16.f32"}, /* 8 halves; the hardware's rounding */
        {SMELT_BF16, "ld.global.nc.v4", "cvt.rn.bf16.f32"},
    };
    uint8_t modes[3] = {SMELT_MODE_CONTIG, SMELT_MODE_CONTIG, SMELT_MODE_CONTIG};
    for (int i = 0; i < NELEMS(cases); i++) {
        kd k;
        kd_chain(&k, 2, cases[i].dt, 1, modes, true);
        char *ptx = NULL;
        char *src = emit_compile(&k, "compute_80", &ptx);
        cr_assert(t_contains(src, "smelt_vec<"));
        cr_assert(t_contains(ptx, cases[i].ld), "%s: no %s in the PTX:\n%s",
                  smelt_dtype_name(cases[i].dt), cases[i].ld, ptx);
        cr_assert(t_contains(ptx, cases[i].st), "%s: no %s in the PTX", smelt_dtype_name(cases[i].dt),
                  cases[i].st);
        free(ptx);
        free(src);
    }
}

/* A kernel NVRTC rejects: the report shows the log and the source, the plan
 * falls back to unfused kernels, and the status says so. */
Test(cuda_emit, rejected_kernel_report, .timeout = 60)
{
    need_nvrtc();
    char dir[] = "/tmp/smelt-cuda-tpl-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char sub[256], path[300];
    snprintf(sub, sizeof sub, "%s/cuda", dir);
    cr_assert_eq(mkdir(sub, 0700), 0);
    const char *names[] = {"kernel_flat.cu.in", "kernel_nd.cu.in"};
    for (int i = 0; i < 2; i++) {
        char tname[64];
        snprintf(tname, sizeof tname, "cuda/%s", names[i]);
        const char *builtin = smelt__template_builtin(tname);
        cr_assert_not_null(builtin);
        char *text = malloc(strlen(builtin) + 100);
        sprintf(text, "#if {{NOPS}} > 1\n#error injected failure\n#endif\n%s", builtin);
        snprintf(path, sizeof path, "%s/%s", sub, names[i]);
        t_write_file(path, text);
        free(text);
    }
    setenv("SMELT_TEMPLATE_DIR", dir, 1);
    smelt_ctx *ctx = t_ctx_raw();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, NULL, SMELT_F32, SHP(100));
    smelt_node *y = smelt_unary(g, SMELT_OP_EXP, smelt_mul(g, a, a));
    char *report = NULL;
    T_ERR(ctx, smelt_plan_emit_only(ctx, g, 1, &y, NULL, "sm_80", &report), SMELT_ERR_COMPILE,
          "NVRTC rejected 1 of 3 kernels");
    cr_assert_not_null(report);
    cr_assert(t_contains(report, "rejected\n"), "%s", report);
    cr_assert(t_contains(report, "injected failure"), "%s", report);
    cr_assert(t_contains(report, "running them unfused"), "%s", report);
    smelt_free(report);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", sub, names[i]);
        unlink(path);
    }
    rmdir(sub);
    rmdir(dir);
}

/* Reductions: every reduction on every dtype (one kernel each, a warp per
 * result), and the layouts the emitter tells apart (a row, a column, kept
 * and reduced dimensions interleaved, the 64-bit index variant). */
static const smelt_op red_ops[] = {SMELT_OP_SUM,    SMELT_OP_PROD,   SMELT_OP_MEAN, SMELT_OP_MAX, SMELT_OP_MIN,
                                   SMELT_OP_ARGMAX, SMELT_OP_ARGMIN, SMELT_OP_ANY,  SMELT_OP_ALL};

static void reductions_of(smelt_dtype dt, const char *arch)
{
    need_nvrtc();
    smelt_ctx *ctx = t_ctx_raw();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, NULL, dt, SHP(6, 7, 300)), *outs[NELEMS(red_ops)];
    for (int o = 0; o < NELEMS(red_ops); o++)
        outs[o] = smelt_reduce(g, red_ops[o], a, 1, (int[]){o % 3}, o & 1);
    T_OK(ctx, smelt_graph_status(g));
    char label[64];
    snprintf(label, sizeof label, "reductions of %s", smelt_dtype_name(dt));
    const char *must[] = {"extern \"C\" __global__ void smelt_red_", "__shfl_down_sync"};
    emit_ok_arch(label, ctx, g, NELEMS(red_ops), outs, must, 2, arch);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(cuda_emit, reductions_f32, .timeout = 240) { reductions_of(SMELT_F32, NULL); }
Test(cuda_emit, reductions_f64, .timeout = 240) { reductions_of(SMELT_F64, "sm_90"); }
Test(cuda_emit, reductions_f16, .timeout = 240) { reductions_of(SMELT_F16, "sm_80"); }
Test(cuda_emit, reductions_bf16, .timeout = 240) { reductions_of(SMELT_BF16, "sm_90"); }
Test(cuda_emit, reductions_i32, .timeout = 240) { reductions_of(SMELT_I32, "sm_80"); }
Test(cuda_emit, reductions_i64, .timeout = 240) { reductions_of(SMELT_I64, "sm_90"); }
Test(cuda_emit, reductions_u8, .timeout = 240) { reductions_of(SMELT_U8, "sm_80"); }
Test(cuda_emit, reductions_bool, .timeout = 240) { reductions_of(SMELT_BOOL, NULL); }

/* Row programs (tests/rows-cases.h, several reductions per kernel):
 * compiled by NVRTC for sm_80 and sm_90, bf16 too; those of long rows
 * again in the block form (SMELT_CUDA_ROWS_WARPS=8: a row over several
 * warps, __syncthreads between them; rows that fill the blocks without a
 * test of each element, folds in any grouping without the chain). */
#include "rows-cases.h"
Test(cuda_emit, row_programs, .timeout = 240)
{
    need_nvrtc();
    smelt_ctx *ctx = t_ctx_raw();
    unsetenv("SMELT_CUDA_ROWS_WARPS");
    for (int c = 0; c <= 2 * NELEMS(rows_cases); c++) {
        rows_case rc = rows_cases[c % NELEMS(rows_cases)];
        bool block = c > NELEMS(rows_cases);
        if (c == NELEMS(rows_cases))
            rc = rows_cases[0], rc.dt = SMELT_BF16, rc.what = "softmax bf16";
        if (block && !strstr(rc.what, "long rows"))
            continue;
        if (block)
            setenv("SMELT_CUDA_ROWS_WARPS", "8", 1);
        smelt_graph *g = t_graph(ctx);
        smelt_node *outs[3];
        int n_out = rows_graph(g, &rc, outs);
        T_OK(ctx, smelt_graph_status(g));
        const char *must[6] = {"extern \"C\" __global__ void ", "smelt_rows_", block ? "__syncthreads();" : "__shfl_sync",
                               block ? "__launch_bounds__(" : "smelt_rows_"};
        int nm = 4;
        if (block && strstr(rc.what, "exact")) /* no element tested against the row's end */
            must[nm++] = "if (true) {";
        else if (block) /* ... else against the lane's count in the row */
            must[nm++] = "if (j < jn) {";
        if (block && strstr(rc.what, "argmin")) /* max, min, argmin: the warps at once, then their results */
            must[nm++] = "smelt_fold_0(&v, &vi, ch[s][lane], chi[s][lane]);";
        emit_ok(rc.what, ctx, g, n_out, outs, must, nm);
        smelt_graph_free(g);
    }
    unsetenv("SMELT_CUDA_ROWS_WARPS");
    smelt_ctx_free(ctx);
}

Test(cuda_emit, reduction_layouts, .timeout = 240)
{
    need_nvrtc();
    smelt_ctx *ctx = t_ctx_raw();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, NULL, SMELT_F32, SHP(3, 4, 5, 6));
    smelt_node *big = smelt_input(g, NULL, SMELT_F64, SHP(3, (int64_t)1 << 30)); /* 64-bit indices */
    smelt_node *outs[] = {smelt_reduce(g, SMELT_OP_SUM, a, 2, (int[]){0, 2}, 0),
                          smelt_reduce(g, SMELT_OP_MAX, a, 2, (int[]){1, 3}, 1),
                          smelt_reduce(g, SMELT_OP_ARGMIN, a, 0, NULL, 0),
                          smelt_reduce(g, SMELT_OP_MEAN, big, 1, (int[]){1}, 0)};
    T_OK(ctx, smelt_graph_status(g));
    const char *must[] = {"typedef long long smelt_idx", "typedef unsigned int smelt_idx"};
    emit_ok("reduction layouts", ctx, g, NELEMS(outs), outs, must, 2);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(cuda_emit, bad_arguments)
{
    smelt_ctx *ctx = t_ctx_raw();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, NULL, SMELT_F32, SHP(4));
    smelt_node *y = smelt_unary(g, SMELT_OP_NEG, a);
    char *report = NULL;
    T_ERR(ctx, smelt_plan_emit_only(ctx, g, 1, &y, NULL, "gfx90a", &report), SMELT_ERR_INVALID_ARG,
          "sm_XY");
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    o.backend = "TCC";
    T_ERR(ctx, smelt_plan_emit_only(ctx, g, 1, &y, &o, "sm_80", &report), SMELT_ERR_UNSUPPORTED,
          "only NVRTC");
    cr_assert_null(report);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* The backend's own kernels (a scan of each dtype, a strided copy of each
 * element size) compiled by NVRTC for every arch; the PTX of the f16 scan
 * uses the hardware's conversions; plans with a convolution (its input
 * laid out, its epilogue fused) and a scan emitted and compiled. */
Test(cuda_emit, windows_and_scans, .timeout = 240)
{
    need_nvrtc();
    const smelt_dtype dts[] = {SMELT_F32, SMELT_F64, SMELT_F16, SMELT_BF16, SMELT_I64};
    for (int k = 0; k < NELEMS(dts) + 3; k++) {
        smelt__sb src, log;
        smelt__sb_init(&src), smelt__sb_init(&log);
        char name[40];
        int st = k < NELEMS(dts) ? smelt__cuda_scan_source(dts[k], &src, name, &log)
                                 : smelt__cuda_copy_source(2 << (k - NELEMS(dts)), &src, name, &log);
        cr_assert_eq(st, SMELT_OK, "kernel %d: %s", k, smelt__sb_str(&log));
        for (size_t a = 0; a < sizeof archs / sizeof *archs; a++) {
            char *img = NULL;
            size_t n = 0;
            st = smelt__nvrtc_compile(smelt__sb_str(&src), name, archs[a], &img, &n, &log);
            cr_assert_eq(st, SMELT_OK, "%s for %s: %s\n%s", name, archs[a], smelt__sb_str(&log), smelt__sb_str(&src));
            free(img);
        }
        if (k == 2) { /* f16 */
            char *ptx = NULL;
            size_t n = 0;
            cr_assert_eq(smelt__nvrtc_compile(smelt__sb_str(&src), name, "compute_80", &ptx, &n, &log), SMELT_OK);
            cr_assert(t_contains(ptx, "cvt.rn.f16.f32") && t_contains(ptx, "cvt.f32.f16"), "%s", ptx);
            free(ptx);
        }
        smelt__sb_free(&src), smelt__sb_free(&log);
    }
    smelt__sb src, log;
    smelt__sb_init(&src), smelt__sb_init(&log);
    cr_assert_eq(smelt__cuda_scan_source(SMELT_I32, &src, (char[40]){0}, &log), SMELT_ERR_UNSUPPORTED);
    cr_assert(t_contains(smelt__sb_str(&log), "a scan of i32"), "%s", smelt__sb_str(&log));
    smelt__sb_free(&src), smelt__sb_free(&log);
    smelt_ctx *ctx = t_ctx_raw();
    smelt_graph *g = t_graph(ctx);
    smelt_node *v[4] = {smelt_input(g, "x", SMELT_F32, SHP(2, 8, 12, 12)),
                        smelt_input(g, "w", SMELT_F32, SHP(16, 8, 3, 3)), smelt_input(g, "b", SMELT_F32, SHP(16)),
                        smelt_input(g, "s", SMELT_F16, SHP(4, 30))};
    const char *names[] = {"x", "w", "b", "s"};
    smelt_node *outs[2] = {smelt_expr(g, "relu(conv(x, w, b, strides=2, pads=1) * 0.5)", names, v, 4),
                           smelt_expr(g, "cumsum(s, 1, exclusive=1) * 2", names, v, 4)};
    T_OK(ctx, smelt_graph_status(g));
    const char *must[] = {"conv [9 taps", "accumulated in BLAS: cuBLAS]", "cumsum [a scan along axis 1"};
    emit_ok("a convolution and a scan", ctx, g, 2, outs, must, 3);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* ---- cuda_loader: no GPU is an answer, not a crash ------------------------ */

Test(cuda_loader, check_gives_reason)
{
    smelt_ctx *ctx = t_ctx_raw();
    int st = smelt_backend_check(ctx, "NVRTC");
    if (st == SMELT_OK) {
        smelt_ctx_free(ctx);
        cr_skip_test("a GPU is present");
    }
    cr_assert_eq(st, SMELT_ERR_BACKEND, "%d: %s", st, smelt_errmsg(ctx));
    const char *msg = smelt_errmsg(ctx);
    cr_assert(t_contains(msg, "backend NVRTC is not available: "), "%s", msg);
    cr_assert(t_contains(msg, "no GPU") || t_contains(msg, "NVRTC not found"), "%s", msg);
    /* the context stays usable */
    T_OK(ctx, smelt_backend_check(ctx, "TCC"));
    smelt_ctx_free(ctx);
}

Test(cuda_loader, stub_driver)
{
    const char *stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
    if (access(stub, R_OK))
        cr_skip_test("no CUDA stub driver at %s", stub);
    setenv("SMELT_CUDA_DRIVER_LIB", stub, 1); /* read once per process: this test's */
    smelt_ctx *ctx = t_ctx_raw();
    T_ERR(ctx, smelt_backend_check(ctx, "NVRTC"), SMELT_ERR_BACKEND, "CUDA_ERROR_STUB_LIBRARY");
    smelt_ctx_free(ctx);
}

Test(cuda_loader, env_selects_nvrtc)
{
    if (gpu_present())
        cr_skip_test("a GPU is present");
    setenv("SMELT_JIT_BACKEND", "NVRTC", 1);
    smelt_ctx *ctx = t_ctx_raw();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, NULL, SMELT_F32, SHP(4));
    smelt_node *y = smelt_unary(g, SMELT_OP_EXP, a);
    smelt_plan *p = NULL;
    T_ERR(ctx, smelt_plan_new(ctx, g, 1, &y, NULL, &p), SMELT_ERR_BACKEND,
          "backend NVRTC is not available");
    cr_assert_null(p);
    smelt_tensor *dev = NULL;
    T_ERR(ctx, smelt_tensor_new_device(ctx, SMELT_F32, SHP(4), &dev), SMELT_ERR_BACKEND,
          "NVRTC");
    cr_assert_null(dev);
    static float host_mem[4];
    T_ERR(ctx, smelt_tensor_wrap_device(ctx, SMELT_F32, SHP(4), NULL, host_mem, &dev), SMELT_ERR_BACKEND,
          "NVRTC");
    cr_assert_null(dev);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(cuda_loader, auto_falls_back_to_cpu)
{
    if (gpu_present())
        cr_skip_test("a GPU is present: AUTO picks it");
    unsetenv("SMELT_JIT_BACKEND");
    unsetenv("MGB_JIT_BACKEND");
    smelt_ctx *ctx = t_ctx_raw();
    T_OK(ctx, smelt_ctx_set_backend(ctx, "AUTO"));
    T_OK(ctx, smelt_backend_check(ctx, "AUTO"));
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, NULL, SMELT_F64, SHP(3, 4));
    smelt_node *y = smelt_add(g, smelt_unary(g, SMELT_OP_SIN, a), smelt_scalar(g, 1));
    trng r;
    trng_init(&r, 1);
    smelt_tensor *x = t_rand(ctx, &r, SMELT_F64, SHP(3, 4));
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    cr_assert_str_eq(t_stats(p).backend, "TCC");
    smelt_plan_free(p);
    t_check_plan("AUTO", ctx, g, 1, &y, 3, 1, &x, (t_tol){.ulps = 16, .atol = 1e-13});
    smelt_tensor_free(x);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* ---- cuda_gpu / cuda_fake: plans on a device ------------------------------
 * Each test runs twice: on the GPU (cuda_gpu, skipped without one) and on
 * tests/fakecuda.c (cuda_fake), a stand-in driver and NVRTC that compile the
 * generated CUDA with the host C++ compiler and run the grid on the CPU:
 * the kernels' arithmetic and indexing, the parameter blocks and the
 * executor's device path checked against the reference on any machine. */

static smelt_ctx *device_ctx(bool fake)
{
    if (fake) {
        const char *lib = getenv("SMELT_TEST_FAKECUDA");
        if (!lib || !*lib)
            cr_skip_test("SMELT_TEST_FAKECUDA is not set (tests/meson.build sets it)");
        if (system("c++ --version > /dev/null 2>&1"))
            cr_skip_test("no host C++ compiler for the fake NVRTC");
        setenv("SMELT_CUDA_DRIVER_LIB", lib, 1); /* read once per process: this test's */
        setenv("SMELT_NVRTC_LIB", lib, 1);
        setenv("SMELT_CUBLAS_LIB", lib, 1);
    }
    smelt_ctx *ctx = t_ctx_raw();
    if (smelt_backend_check(ctx, "NVRTC") != SMELT_OK) {
        cr_assert(!fake, "the fake CUDA library does not load: %s", smelt_errmsg(ctx));
        char why[512];
        snprintf(why, sizeof why, "%s", smelt_errmsg(ctx));
        smelt_ctx_free(ctx);
        cr_skip_test("%s", why);
    }
    T_OK(ctx, smelt_ctx_set_backend(ctx, "NVRTC"));
    return ctx;
}

#define DEVICE_TEST(name, timeout_s)                                                      \
    static void name##_body(smelt_ctx *ctx);                                              \
    Test(cuda_gpu, name, .timeout = timeout_s)                                            \
    {                                                                                     \
        smelt_ctx *ctx = device_ctx(false);                                               \
        name##_body(ctx);                                                                 \
        smelt_ctx_free(ctx);                                                              \
    }                                                                                     \
    Test(cuda_fake, name, .timeout = timeout_s)                                           \
    {                                                                                     \
        smelt_ctx *ctx = device_ctx(true);                                                \
        name##_body(ctx);                                                                 \
        smelt_ctx_free(ctx);                                                              \
    }                                                                                     \
    static void name##_body(smelt_ctx *ctx)

/* Graph g's outputs on a CPU backend (TCC, CC) at opt_level opt (the CPU's
 * bits to compare with), into out; the CPU plan's kernels. */
static int cpu_run(smelt_ctx *ctx, const char *backend, smelt_graph *g, int n_out, smelt_node *const *outs, int opt,
                   int n_in, smelt_tensor *const *in, smelt_tensor **out)
{
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    o.backend = backend;
    o.opt_level = opt;
    smelt_plan *pc = NULL;
    T_OK(ctx, smelt_plan_new(ctx, g, n_out, outs, &o, &pc));
    t_run(pc, n_in, in, n_out, out);
    int kernels = t_stats(pc).kernels;
    smelt_plan_free(pc);
    return kernels;
}

static void tcc_run(smelt_ctx *ctx, smelt_graph *g, int n_out, smelt_node *const *outs, int opt, int n_in,
                    smelt_tensor *const *in, smelt_tensor **out)
{
    cpu_run(ctx, "TCC", g, n_out, outs, opt, n_in, in, out);
}

static smelt_tensor *to_device(smelt_ctx *ctx, const smelt_tensor *h)
{
    smelt_tensor *d = NULL;
    T_OK(ctx, smelt_tensor_new_device(ctx, smelt_tensor_dtype(h), smelt_tensor_ndim(h),
                                      smelt_tensor_shape(h), &d));
    T_OK(ctx, smelt_tensor_copy_from_host(d, h));
    cr_assert(smelt_tensor_is_device(d));
    return d;
}

static smelt_tensor *to_host(smelt_ctx *ctx, const smelt_tensor *d)
{
    smelt_tensor *h = t_tensor(ctx, smelt_tensor_dtype(d), smelt_tensor_ndim(d), smelt_tensor_shape(d));
    T_OK(ctx, smelt_tensor_copy_to_host(h, d));
    return h;
}

/* Device tensors in and out of a fused, broadcasting, multi-output plan. */
DEVICE_TEST(device_tensors, 120)
{
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_F32, SHP(257, 33));
    smelt_node *b = smelt_input(g, "b", SMELT_F32, SHP(33));
    smelt_node *e = smelt_unary(g, SMELT_OP_EXP, a);
    smelt_node *outs[] = {smelt_add(g, smelt_mul(g, e, b), smelt_scalar(g, 1)), e};
    trng r;
    trng_init(&r, 2);
    smelt_tensor *hin[] = {t_rand(ctx, &r, SMELT_F32, SHP(257, 33)), t_rand(ctx, &r, SMELT_F32, SHP(33))};
    smelt_tensor *din[] = {to_device(ctx, hin[0]), to_device(ctx, hin[1])};
    smelt_plan *p = t_plan(ctx, g, 2, outs, 3);
    cr_assert_str_eq(t_stats(p).backend, "NVRTC");
    smelt_tensor *dout[2] = {NULL, NULL}, *ref[2];
    t_run(p, 2, din, 2, dout);
    cr_assert(smelt_tensor_is_device(dout[0]) && smelt_tensor_is_device(dout[1]));
    t_reference(ctx, g, 2, outs, 2, hin, ref);
    for (int i = 0; i < 2; i++) {
        smelt_tensor *h = to_host(ctx, dout[i]);
        t_expect_match("device tensors", h, ref[i], (t_tol){.ulps = 16, .atol = 1e-5});
        smelt_tensor_free(h);
    }
    t_run(p, 2, din, 2, dout); /* again, into the same device outputs */
    t_free_all(dout, 2), t_free_all(ref, 2), t_free_all(din, 2), t_free_all(hin, 2);
    smelt_plan_free(p);
    smelt_graph_free(g);
}

/* Device memory: an output that is an input's own device tensor is an
 * error, unless the input is donated and the output's kernel is its last
 * reader: then it is written in place (an intermediate of the plan too). */
DEVICE_TEST(donated_device_tensor, 120)
{
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_F32, SHP(3001)), *b = smelt_input(g, "b", SMELT_F32, SHP(3001));
    smelt_node *t = smelt_unary(g, SMELT_OP_BARRIER, smelt_mul(g, a, b));
    smelt_node *y = smelt_add(g, smelt_unary(g, SMELT_OP_TANH, t), a);
    trng r;
    trng_init(&r, 21);
    smelt_tensor *hin[] = {t_rand(ctx, &r, SMELT_F32, SHP(3001)), t_rand(ctx, &r, SMELT_F32, SHP(3001))}, *ref;
    t_reference(ctx, g, 1, &y, 2, hin, &ref);
    smelt_tensor *din[] = {to_device(ctx, hin[0]), to_device(ctx, hin[1])};
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    T_ERR(ctx, smelt_plan_run(p, 2, din, 1, &din[0]), SMELT_ERR_INVALID_ARG, "donate the input");
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    const int donate[] = {0};
    o.donate = donate;
    o.n_donate = 1;
    smelt_plan *pd;
    T_OK(ctx, smelt_plan_new(ctx, g, 1, &y, &o, &pd));
    t_run(pd, 2, din, 1, &din[0]);
    cr_assert_eq(t_stats(pd).donated_inplace, 1);
    cr_assert_eq(t_stats(pd).mem_inplace, 1, "barrier(a * b) over a * b in the arena");
    smelt_tensor *h = to_host(ctx, din[0]);
    t_expect_match("donated device tensor", h, ref, (t_tol){.ulps = 4, .atol = 1e-6});
    smelt_tensor_free(h);
    smelt_tensor_free(ref);
    t_free_all(din, 2), t_free_all(hin, 2);
    smelt_plan_free(pd);
    smelt_plan_free(p);
    smelt_graph_free(g);
}

/* Host tensors on a device plan are copied in and out: every dtype, with
 * the vector path and its tail (n is not a multiple of any vector width). */
DEVICE_TEST(host_tensors_all_dtypes, 120)
{
    for (int dt = 0; dt < SMELT_DTYPE_COUNT; dt++) {
        smelt_graph *g = t_graph(ctx);
        smelt_node *a = smelt_input(g, NULL, (smelt_dtype)dt, SHP(10007));
        smelt_node *b = smelt_input(g, NULL, (smelt_dtype)dt, SHP(10007));
        smelt_node *y = smelt_binary(g, SMELT_OP_MAXIMUM, smelt_add(g, a, b), a);
        smelt_node *z = smelt_binary(g, SMELT_OP_LT, a, b); /* a bool output beside */
        trng r;
        trng_init(&r, (uint64_t)dt);
        smelt_tensor *in[] = {t_rand(ctx, &r, (smelt_dtype)dt, SHP(10007)),
                              t_rand(ctx, &r, (smelt_dtype)dt, SHP(10007))};
        smelt_node *outs[] = {y, z};
        t_check_plan(smelt_dtype_name((smelt_dtype)dt), ctx, g, 2, outs, 3, 2, in,
                     (t_tol){.ulps = 1});
        t_free_all(in, 2);
        smelt_graph_free(g);
    }
}

/* Every operator that takes f64, in one fused multi-output kernel (each
 * result an output, all summed into one more), against the reference. */
DEVICE_TEST(all_ops_f64, 300)
{
    smelt_graph *g = t_graph(ctx);
    smelt_node *in[3], *outs[SMELT_OP_COUNT + 1], *acc = NULL;
    for (int i = 0; i < 3; i++)
        in[i] = smelt_input(g, NULL, SMELT_F64, SHP(3, 41));
    int n = 0;
    for (int op = 0; op < SMELT_OP_COUNT; op++) {
        if (smelt__ops[op].cls != SMELT_CLASS_ELEMWISE || !takes((smelt_op)op, SMELT_F64))
            continue;
        smelt_node *r = smelt_op_apply(g, (smelt_op)op, smelt__ops[op].arity, in);
        outs[n++] = r;
        r = smelt_node_dtype(r) == SMELT_F64 ? r : smelt_cast(g, r, SMELT_F64);
        acc = acc ? smelt_add(g, acc, r) : r;
    }
    outs[n++] = acc;
    T_OK(ctx, smelt_graph_status(g));
    trng r;
    trng_init(&r, 5);
    smelt_tensor *x[3];
    for (int i = 0; i < 3; i++)
        x[i] = t_rand(ctx, &r, SMELT_F64, SHP(3, 41));
    t_check_plan("f64 operators", ctx, g, n, outs, 3, 3, x, (t_tol){.ulps = 4, .atol = 1e-12});
    t_free_all(x, 3);
    smelt_graph_free(g);
}

/* The CUDA kernels compute the CPU tiers' bits (docs/numerics.md): every
 * operator on f32, f64 and f16, special and random values of many
 * magnitudes (tests/common.c), fused on the device against the TinyCC tier
 * unfused.  NaN results must be NaN on both sides, payloads aside. */
DEVICE_TEST(same_bits_as_cpu, 300)
{
    const smelt_dtype dts[] = {SMELT_F32, SMELT_F64, SMELT_F16};
    const int64_t n = 2053;
    for (int t = 0; t < NELEMS(dts); t++) {
        smelt_graph *g = t_graph(ctx);
        smelt_node *outs[T_ALL_OPS_MAX];
        int m = t_all_ops_graph(g, dts[t], n, outs);
        T_OK(ctx, smelt_graph_status(g));
        trng r;
        trng_init(&r, 40 + (uint64_t)t);
        smelt_tensor *in[3];
        for (int k = 0; k < 3; k++)
            in[k] = t_tensor(ctx, dts[t], SHP(n));
        t_mixed_inputs(&r, in, 3);
        smelt_tensor *dev[T_ALL_OPS_MAX] = {0}, *cpu[T_ALL_OPS_MAX] = {0};
        smelt_plan *pd = t_plan(ctx, g, m, outs, 3);
        cr_assert_str_eq(t_stats(pd).backend, "NVRTC");
        t_run(pd, 3, in, m, dev);
        tcc_run(ctx, g, m, outs, 0, 3, in, cpu);
        for (int i = 0; i < m; i++) {
            int64_t at;
            cr_assert(t_same_results(cpu[i], dev[i], &at), "%s on %s: the device gives %a, TCC %a at [%lld] (%a %a %a)",
                      smelt_op_name(smelt_node_op(outs[i])), smelt_dtype_name(dts[t]), smelt_tensor_get(dev[i], at),
                      smelt_tensor_get(cpu[i], at), (long long)at, smelt_tensor_get(in[0], at),
                      smelt_tensor_get(in[1], at), smelt_tensor_get(in[2], at));
        }
        cr_log_info("%s: %d operators x %lld values: the same bits as TCC", smelt_dtype_name(dts[t]), m,
                    (long long)n);
        t_free_all(dev, m), t_free_all(cpu, m), t_free_all(in, 3);
        smelt_plan_free(pd);
        smelt_graph_free(g);
    }
}

/* Every operator that takes a float, on f16 and on bf16 operands, in one
 * fused multi-output kernel per dtype (the results also summed, in f32, into
 * one more output), against the reference, which rounds f16/bf16 results as
 * the kernels do: 1 ulp of the storage type. */
DEVICE_TEST(all_ops_half, 300)
{
    smelt_dtype dts[] = {SMELT_F16, SMELT_BF16};
    for (int t = 0; t < NELEMS(dts); t++) {
        smelt_dtype dt = dts[t];
        smelt_graph *g = t_graph(ctx);
        smelt_node *in[3], *outs[SMELT_OP_COUNT + 1], *acc = NULL;
        for (int i = 0; i < 3; i++)
            in[i] = smelt_input(g, NULL, dt, SHP(3, 41));
        int n = 0;
        for (int op = 0; op < SMELT_OP_COUNT; op++) {
            if (smelt__ops[op].cls != SMELT_CLASS_ELEMWISE || !takes((smelt_op)op, dt))
                continue;
            smelt_node *r = smelt_op_apply(g, (smelt_op)op, smelt__ops[op].arity, in);
            outs[n++] = r;
            r = smelt_cast(g, r, SMELT_F32);
            acc = acc ? smelt_add(g, acc, r) : r;
        }
        outs[n] = acc;
        T_OK(ctx, smelt_graph_status(g));
        cr_assert_gt(n, 50);
        trng r;
        trng_init(&r, 12 + (uint64_t)t);
        smelt_tensor *x[3], *got[SMELT_OP_COUNT + 1] = {0}, *ref[SMELT_OP_COUNT + 1] = {0};
        for (int i = 0; i < 3; i++)
            x[i] = t_rand(ctx, &r, dt, SHP(3, 41));
        smelt_plan *p = t_plan(ctx, g, n + 1, outs, 3);
        cr_assert_leq(t_stats(p).kernels, 4, "%s: %d operators in %d kernels", smelt_dtype_name(dt), n,
                      t_stats(p).kernels);
        t_run(p, 3, x, n + 1, got);
        t_reference(ctx, g, n + 1, outs, 3, x, ref);
        for (int i = 0; i < n; i++)
            t_expect_match(smelt_op_name(smelt_node_op(outs[i])), got[i], ref[i],
                           (t_tol){.ulps = 1, .atol = 1e-6});
        /* the sum (the reference keeps double precision in f32): each term is 1 ulp of dt */
        t_expect_match("sum", got[n], ref[n], (t_tol){.ulps = 16, .atol = 1.0, .rtol = 0.02});
        t_free_all(got, n + 1), t_free_all(ref, n + 1), t_free_all(x, 3);
        smelt_plan_free(p);
        smelt_graph_free(g);
    }
}

/* Every operator that takes an integer or bool dtype, in one fused
 * multi-output kernel per dtype (each result an output, all summed into one
 * more), on small operands; integer results must be exact. */
DEVICE_TEST(all_ops_int, 300)
{
    smelt_dtype dts[] = {SMELT_I32, SMELT_I64, SMELT_U8, SMELT_BOOL};
    for (int t = 0; t < NELEMS(dts); t++) {
        smelt_dtype dt = dts[t];
        smelt_graph *g = t_graph(ctx);
        smelt_node *in[3], *outs[SMELT_OP_COUNT + 1], *acc = NULL;
        for (int i = 0; i < 3; i++)
            in[i] = smelt_input(g, NULL, dt, SHP(5, 37));
        int n = 0;
        for (int op = 0; op < SMELT_OP_COUNT; op++) {
            if (smelt__ops[op].cls != SMELT_CLASS_ELEMWISE || !takes((smelt_op)op, dt) ||
                smelt__is_float(t_compute_dtype((smelt_op)op, dt)))
                continue;
            smelt_node *r = smelt_op_apply(g, (smelt_op)op, smelt__ops[op].arity, in);
            outs[n++] = r;
            if (op == SMELT_OP_RECIPROCAL) /* 1 / 0 is the most negative value: */
                continue;                  /* near -2^63 the double reference rounds */
            r = smelt_node_dtype(r) == dt ? r : smelt_cast(g, r, dt);
            acc = acc ? smelt_add(g, acc, r) : r;
        }
        outs[n++] = acc;
        T_OK(ctx, smelt_graph_status(g));
        trng r;
        trng_init(&r, 8 + (uint64_t)t);
        smelt_tensor *x[3];
        for (int i = 0; i < 3; i++) {
            x[i] = t_tensor(ctx, dt, SHP(5, 37));
            t_fill_uniform(x[i], &r, dt == SMELT_U8 ? 0 : -3, 3);
        }
        t_check_plan(smelt_dtype_name(dt), ctx, g, n, outs, 3, 3, x, T_EXACT);
        t_free_all(x, 3);
        smelt_graph_free(g);
    }
}

/* NumPy 2's answers (tests/numpy-answers.h) from the CUDA kernels. */
DEVICE_TEST(numpy_answers, 300)
{
    for (int i = 0; i < NELEMS(np_cases); i++)
        t_check_np_case(ctx, "NVRTC", &np_cases[i]);
}

/* Transposed and sliced device views: strided operands at run time. */
DEVICE_TEST(strided_views, 120)
{
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, NULL, SMELT_F64, SHP(40, 50));
    smelt_node *b = smelt_input(g, NULL, SMELT_F64, SHP(40, 50));
    smelt_node *y = smelt_sub(g, smelt_unary(g, SMELT_OP_TANH, a), b);
    trng r;
    trng_init(&r, 3);
    smelt_tensor *ha = t_rand(ctx, &r, SMELT_F64, SHP(50, 40)), *hb = t_rand(ctx, &r, SMELT_F64, SHP(40, 51));
    smelt_tensor *da = to_device(ctx, ha), *db = to_device(ctx, hb);
    smelt_tensor *va, *vb, *hva, *hvb;
    int perm[] = {1, 0};
    T_OK(ctx, smelt_tensor_transpose(da, perm, &va));
    T_OK(ctx, smelt_tensor_slice(db, 1, 1, 51, 1, &vb));
    T_OK(ctx, smelt_tensor_transpose(ha, perm, &hva));
    T_OK(ctx, smelt_tensor_slice(hb, 1, 1, 51, 1, &hvb));
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    smelt_tensor *in[] = {va, vb}, *hin[] = {hva, hvb}, *out = NULL, *ref;
    t_run(p, 2, in, 1, &out);
    t_reference(ctx, g, 1, &y, 2, hin, &ref);
    smelt_tensor *h = to_host(ctx, out);
    t_expect_match("strided views", h, ref, (t_tol){.ulps = 16, .atol = 1e-13});
    cr_assert_eq(smelt_tensor_get(out, 7), smelt_tensor_get(h, 7));
    smelt_tensor *hout = NULL; /* the host views themselves: staged through copies */
    t_run(p, 2, hin, 1, &hout);
    cr_assert(!smelt_tensor_is_device(hout));
    t_expect_match("strided host views", hout, ref, (t_tol){.ulps = 16, .atol = 1e-13});
    smelt_tensor *all[] = {hout, h, ref, out, va, vb, hva, hvb, da, db, ha, hb};
    t_free_all(all, NELEMS(all));
    smelt_plan_free(p);
    smelt_graph_free(g);
}

/* Broadcasts up to rank 8, several in one kernel, into a transposed host
 * output (copied back element by element). */
DEVICE_TEST(broadcast_rank8, 120)
{
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, NULL, SMELT_I32, SHP(2, 1, 2, 1, 2, 1, 2, 1));
    smelt_node *b = smelt_input(g, NULL, SMELT_I64, SHP(1, 3, 1, 3, 1, 3, 1, 3));
    smelt_node *c = smelt_input(g, NULL, SMELT_I64, SHP(3));
    smelt_node *y = smelt_mul(g, smelt_sub(g, a, b), c);
    trng r;
    trng_init(&r, 6);
    smelt_tensor *in[] = {t_rand(ctx, &r, SMELT_I32, SHP(2, 1, 2, 1, 2, 1, 2, 1)),
                          t_rand(ctx, &r, SMELT_I64, SHP(1, 3, 1, 3, 1, 3, 1, 3)),
                          t_rand(ctx, &r, SMELT_I64, SHP(3))};
    smelt_tensor *base = t_tensor(ctx, SMELT_I64, SHP(3, 2, 3, 2, 3, 2, 3, 2)), *out, *ref;
    int perm[] = {1, 0, 3, 2, 5, 4, 7, 6};
    T_OK(ctx, smelt_tensor_transpose(base, perm, &out));
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    t_run(p, 3, in, 1, &out);
    t_reference(ctx, g, 1, &y, 3, in, &ref);
    t_expect_match("rank 8", out, ref, T_EXACT);
    smelt_tensor *all[] = {out, base, ref};
    t_free_all(all, 3);
    t_free_all(in, 3);
    smelt_plan_free(p);
    smelt_graph_free(g);
}

/* A contiguous operand that starts one element off 16-byte alignment: the
 * flat kernel takes its scalar path. */
DEVICE_TEST(misaligned_flat, 60)
{
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, NULL, SMELT_F32, SHP(1000));
    smelt_node *y = smelt_unary(g, SMELT_OP_SQRT, smelt_unary(g, SMELT_OP_ABS, a));
    trng r;
    trng_init(&r, 4);
    smelt_tensor *h = t_rand(ctx, &r, SMELT_F32, SHP(1001)), *d = to_device(ctx, h), *hv, *dv;
    T_OK(ctx, smelt_tensor_slice(h, 0, 1, 1001, 1, &hv));
    T_OK(ctx, smelt_tensor_slice(d, 0, 1, 1001, 1, &dv));
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    smelt_tensor *out = NULL, *ref;
    t_run(p, 1, &dv, 1, &out);
    t_reference(ctx, g, 1, &y, 1, &hv, &ref);
    smelt_tensor *ho = to_host(ctx, out);
    t_expect_match("misaligned", ho, ref, (t_tol){.ulps = 2});
    smelt_tensor *all[] = {ho, ref, out, dv, hv, d, h};
    t_free_all(all, NELEMS(all));
    smelt_plan_free(p);
    smelt_graph_free(g);
}

/* An n-d kernel's vectors along the innermost dimension (gelu_tanh(x + b) * w,
 * b a row, w a column), and each case that must fall back to elements: an
 * innermost extent not a multiple of 4 (in rows whose stride is), a view
 * whose start is not 16-byte aligned, rows whose stride is not a multiple
 * of 4; a view whose rows are strided by a multiple of 4 keeps the
 * vectors.  fakecuda traps on a misaligned vector.  37 rows, so that the
 * grid-stride loop (fakecuda's grid of 3 blocks of 64) carries across
 * rows.  The bits of TinyCC's unfused plan on the same views. */
DEVICE_TEST(nd_vectors_and_fallbacks, 120)
{
    const struct {
        int64_t cols, start, width; /* x: columns [start, start + width) of a [37, cols] tensor */
    } cases[] = {{8, 0, 8}, {6, 0, 6}, {12, 0, 12}, {9, 1, 8}, {16, 4, 12}, {10, 0, 8}, {8, 0, 6}, {4100, 4, 4096}};
    for (int c = 0; c < NELEMS(cases); c++) {
        int64_t W = cases[c].width;
        smelt_graph *g = t_graph(ctx);
        smelt_node *in[3] = {smelt_input(g, "x", SMELT_F32, SHP(37, W)), smelt_input(g, "b", SMELT_F32, SHP(W)),
                             smelt_input(g, "w", SMELT_F32, SHP(37, 1))};
        smelt_node *y = smelt_expr(g, "gelu_tanh(x + b) * w", (const char *[]){"x", "b", "w"}, in, 3);
        T_OK(ctx, smelt_graph_status(g));
        trng r;
        trng_init(&r, 40 + (uint64_t)c);
        smelt_tensor *hx = t_rand(ctx, &r, SMELT_F32, SHP(37, cases[c].cols));
        smelt_tensor *h[3] = {NULL, t_rand(ctx, &r, SMELT_F32, SHP(W)), t_rand(ctx, &r, SMELT_F32, SHP(37, 1))};
        t_set(h[1], 0, NAN), t_set(h[1], W - 1, -0.0), t_set(hx, 3, 20.0f), t_set(hx, 5, -20.0f);
        T_OK(ctx, smelt_tensor_slice(hx, 1, cases[c].start, cases[c].start + W, 1, &h[0]));
        smelt_tensor *dx = to_device(ctx, hx), *d[3] = {NULL, to_device(ctx, h[1]), to_device(ctx, h[2])};
        T_OK(ctx, smelt_tensor_slice(dx, 1, cases[c].start, cases[c].start + W, 1, &d[0]));
        smelt_tensor *cpu = NULL, *dev = NULL;
        tcc_run(ctx, g, 1, &y, 0, 3, h, &cpu);
        smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
        cr_assert(strstr(smelt_plan_describe(p), "1 kernel"), "case %d: %s", c, smelt_plan_describe(p));
        t_run(p, 3, d, 1, &dev);
        smelt_tensor *hd = to_host(ctx, dev);
        int64_t at;
        cr_assert(t_same_results(cpu, hd, &at), "case %d: the device gives %a, TCC unfused %a at [%lld]", c,
                  smelt_tensor_get(hd, at), smelt_tensor_get(cpu, at), (long long)at);
        smelt_tensor *all[] = {hd, dev, cpu, d[0], d[1], d[2], dx, h[0], h[1], h[2], hx};
        t_free_all(all, NELEMS(all));
        smelt_plan_free(p);
        smelt_graph_free(g);
    }
}

/* 63 inputs and one output at rank 8 with 64-bit indices: 4680 bytes of
 * parameters, passed through device memory.  (The executor picks 32-bit
 * indices for anything that fits, so the 64-bit variant is launched here
 * directly through the backend.) */
DEVICE_TEST(parameter_buffer, 300)
{
    enum { NIN = SMELT_MAX_KERNEL_OPERANDS - 1, N = 256 };
    uint8_t modes[SMELT_MAX_KERNEL_OPERANDS];
    for (int i = 0; i <= NIN; i++)
        modes[i] = i % 2 && i < NIN ? SMELT_MODE_BCAST : SMELT_MODE_STRIDED;
    kd k;
    kd_chain(&k, NIN, SMELT_F32, 8, modes, false);
    cr_assert_gt(smelt__kparam_bytes(NIN + 1, 8, false), SMELT_KPARAM_MAX);
    smelt__backend *be;
    T_OK(ctx, smelt__backend_get(ctx, smelt__backend_find("NVRTC"), &be));
    smelt__kernel *kk;
    bool compiled;
    double ms;
    smelt__sb err;
    smelt__sb_init(&err);
    int st = smelt__kcache_get(ctx, be, &k.d, &kk, &compiled, &ms, &err);
    cr_assert_eq(st, SMELT_OK, "%s", smelt__sb_str(&err));
    smelt__sb_free(&err);
    /* inputs: (2,)*8 contiguous, or broadcast along the innermost axis
     * (stride 0 there); the output transposed: innermost stride 128 */
    int64_t shape[8], strides[SMELT_MAX_KERNEL_OPERANDS * 8];
    for (int d = 0; d < 8; d++)
        shape[d] = 2;
    char *ptrs[SMELT_MAX_KERNEL_OPERANDS];
    float host[SMELT_MAX_KERNEL_OPERANDS][N], expect[N];
    smelt_tensor *dev[SMELT_MAX_KERNEL_OPERANDS];
    trng r;
    trng_init(&r, 7);
    for (int i = 0; i <= NIN; i++) {
        for (int d = 0; d < 8; d++)
            strides[i * 8 + d] = (int64_t)1 << (7 - d);
        if (modes[i] == SMELT_MODE_BCAST)
            strides[i * 8 + 7] = 0;
        if (i == NIN) /* the output, its axes reversed */
            for (int d = 0; d < 8; d++)
                strides[i * 8 + d] = (int64_t)1 << d;
        for (int e = 0; e < N; e++)
            host[i][e] = (float)trng_uniform(&r, -1, 1);
        T_OK(ctx, smelt_tensor_new_device(ctx, SMELT_F32, SHP(N), &dev[i]));
        smelt_tensor *h;
        T_OK(ctx, smelt_tensor_wrap(ctx, SMELT_F32, SHP(N), NULL, host[i], &h));
        T_OK(ctx, smelt_tensor_copy_from_host(dev[i], h));
        smelt_tensor_free(h);
        ptrs[i] = smelt_tensor_data(dev[i]);
    }
    for (int e = 0; e < N; e++) { /* element e at coordinates = its bits */
        float acc = 0;
        for (int i = 0; i < NIN; i++) {
            int64_t off = 0;
            for (int d = 0; d < 8; d++)
                off += ((e >> (7 - d)) & 1) * strides[i * 8 + d];
            acc = i ? acc + host[i][off] : host[i][off];
        }
        int64_t off = 0;
        for (int d = 0; d < 8; d++)
            off += ((e >> (7 - d)) & 1) * strides[NIN * 8 + d];
        expect[off] = acc;
    }
    smelt__devlaunch l = {N, NIN + 1, 8, false, ptrs, shape, strides, NULL, NULL, 0, 0};
    T_OK(ctx, be->iface->launch(be, kk, &l));
    T_OK(ctx, be->iface->sync(be));
    smelt_tensor *h;
    T_OK(ctx, smelt_tensor_wrap(ctx, SMELT_F32, SHP(N), NULL, host[NIN], &h));
    T_OK(ctx, smelt_tensor_copy_to_host(h, dev[NIN]));
    smelt_tensor_free(h);
    for (int e = 0; e < N; e++)
        cr_assert_eq(host[NIN][e], expect[e], "element %d: %g, expected %g", e, host[NIN][e],
                     expect[e]);
    t_free_all(dev, NIN + 1);
}

/* AUTO picks the GPU; emitting kernels without running them (a
 * compile-only backend of its own) leaves the context's kernels intact. */
DEVICE_TEST(auto_and_emit_only, 120)
{
    T_OK(ctx, smelt_ctx_set_backend(ctx, "AUTO"));
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, NULL, SMELT_F32, SHP(300));
    smelt_node *y = smelt_unary(g, SMELT_OP_SIGMOID, smelt_mul(g, a, a));
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    cr_assert_str_eq(t_stats(p).backend, "NVRTC");
    char *report = NULL;
    T_OK(ctx, smelt_plan_emit_only(ctx, g, 1, &y, NULL, NULL, &report));
    cr_assert(t_contains(report, "1 kernel compiled, 0 rejected"), "%s", report);
    smelt_free(report);
    trng r;
    trng_init(&r, 9);
    smelt_tensor *x = t_rand(ctx, &r, SMELT_F32, SHP(300)), *out = NULL, *ref;
    t_run(p, 1, &x, 1, &out);
    t_reference(ctx, g, 1, &y, 1, &x, &ref);
    t_expect_match("AUTO", out, ref, (t_tol){.ulps = 4});
    smelt_tensor *all[] = {x, out, ref};
    t_free_all(all, 3);
    smelt_plan_free(p);
    smelt_graph_free(g);
}

/* Caller-owned device memory wrapped as device tensors (what DLPack hands
 * over): a plan reads the memory as a whole, as a transposed view and as an
 * offset, every-other-row slice; freeing the wraps leaves the memory (and
 * its owner) alone; bad arguments are errors. */
DEVICE_TEST(wrapped_device_memory, 120)
{
    trng r;
    trng_init(&r, 7);
    smelt_tensor *h = t_rand(ctx, &r, SMELT_F32, SHP(6, 5));
    smelt_tensor *owner = to_device(ctx, h);
    char *mem = smelt_tensor_data(owner);
    float *hd = smelt_tensor_data(h);
    struct {
        int64_t shape[2], strides[2], offset; /* elements */
        bool contiguous;
    } views[] = {{{6, 5}, {5, 1}, 0, true}, {{5, 6}, {1, 5}, 0, false}, {{3, 5}, {10, 1}, 5, false}};
    for (int v = 0; v < 3; v++) {
        smelt_graph *g = t_graph(ctx);
        smelt_node *a = smelt_input(g, "a", SMELT_F32, 2, views[v].shape);
        smelt_node *y = smelt_add(g, smelt_mul(g, smelt_unary(g, SMELT_OP_EXP, a), a), smelt_scalar(g, 1));
        smelt_tensor *w = NULL, *hv = NULL, *out = NULL, *ref = NULL;
        T_OK(ctx, smelt_tensor_wrap_device(ctx, SMELT_F32, 2, views[v].shape,
                                           views[v].contiguous ? NULL : views[v].strides,
                                           mem + views[v].offset * 4, &w));
        cr_assert(smelt_tensor_is_device(w));
        cr_assert_eq(smelt_tensor_data(w), mem + views[v].offset * 4);
        cr_assert_eq(smelt_tensor_strides(w)[0], views[v].strides[0]);
        cr_assert_eq(smelt_tensor_strides(w)[1], views[v].strides[1]);
        T_OK(ctx, smelt_tensor_wrap(ctx, SMELT_F32, 2, views[v].shape, views[v].strides, hd + views[v].offset, &hv));
        smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
        cr_assert_str_eq(t_stats(p).backend, "NVRTC");
        t_run(p, 1, &w, 1, &out);
        cr_assert(smelt_tensor_is_device(out), "a plan on a wrapped device tensor allocates its output on the device");
        t_reference(ctx, g, 1, &y, 1, &hv, &ref);
        smelt_tensor *ho = to_host(ctx, out);
        t_expect_match("wrapped device memory", ho, ref, (t_tol){.ulps = 16, .atol = 1e-6});
        smelt_tensor *all[] = {w, hv, out, ref, ho};
        t_free_all(all, 5); /* the wrap goes, the memory stays */
        smelt_plan_free(p);
        smelt_graph_free(g);
    }
    smelt_tensor *back = to_host(ctx, owner);
    cr_assert(t_bitwise_equal(back, h), "freeing a wrapped device tensor changed or freed the memory");
    smelt_tensor_free(back);

    /* errors */
    smelt_tensor *w = (smelt_tensor *)1;
    int64_t shp[] = {6, 5}, neg[] = {6, -5};
    T_ERR(ctx, smelt_tensor_wrap_device(ctx, SMELT_F32, 2, shp, NULL, NULL, &w), SMELT_ERR_INVALID_ARG,
          "device_ptr is NULL");
    cr_assert_null(w);
    T_ERR(ctx, smelt_tensor_wrap_device(ctx, SMELT_F32, 2, shp, NULL, mem + 2, &w), SMELT_ERR_INVALID_ARG,
          "not aligned");
    T_ERR(ctx, smelt_tensor_wrap_device(ctx, (smelt_dtype)99, 2, shp, NULL, mem, &w), SMELT_ERR_DTYPE,
          "invalid dtype 99");
    T_ERR(ctx, smelt_tensor_wrap_device(ctx, SMELT_F32, 2, neg, NULL, mem, &w), SMELT_ERR_SHAPE,
          "negative dimension");
    T_ERR(ctx, smelt_tensor_wrap_device(ctx, SMELT_F32, 9, shp, NULL, mem, &w), SMELT_ERR_SHAPE, "rank 9");
    T_ERR(ctx, smelt_tensor_wrap_device(ctx, SMELT_F32, 2, shp, NULL, mem, NULL), SMELT_ERR_INVALID_ARG,
          "out is NULL");
    cr_assert_eq(smelt_tensor_wrap_device(NULL, SMELT_F32, 2, shp, NULL, mem, &w), SMELT_ERR_INVALID_ARG);
    T_OK(ctx, smelt_tensor_wrap_device(ctx, SMELT_F32, 2, (int64_t[]){0, 5}, NULL, NULL, &w)); /* no elements */
    smelt_tensor_free(w);
    smelt_tensor_free(owner); /* once: the wraps never freed it */
    smelt_tensor_free(h);
}

/* A device tensor given to a CPU plan is an error, not a crash. */
DEVICE_TEST(device_tensor_on_cpu_plan, 60)
{
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, NULL, SMELT_F32, SHP(8));
    smelt_node *y = smelt_unary(g, SMELT_OP_NEG, a);
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    o.backend = "TCC";
    smelt_plan *p = NULL;
    T_OK(ctx, smelt_plan_new(ctx, g, 1, &y, &o, &p));
    smelt_tensor *d = NULL, *out = NULL;
    T_OK(ctx, smelt_tensor_new_device(ctx, SMELT_F32, SHP(8), &d));
    T_ERR(ctx, smelt_plan_run(p, 1, &d, 1, &out), SMELT_ERR_INVALID_ARG, "device tensor");
    smelt_tensor_free(d);
    smelt_plan_free(p);
    smelt_graph_free(g);
}

/* CUBINs go through the persistent kernel cache: an entry per kernel, a
 * truncated entry is rebuilt, and a kernel loaded from the cache computes
 * the same results. */
static int cu_entries(const char *dir, char *first, size_t n)
{
    DIR *d = opendir(dir);
    int count = 0;
    for (struct dirent *e; d && (e = readdir(d));)
        if (!strncmp(e->d_name, "cu", 2) && strstr(e->d_name, ".ske")) {
            if (!count)
                snprintf(first, n, "%.200s/%.90s", dir, e->d_name);
            count++;
        }
    if (d)
        closedir(d);
    return count;
}

DEVICE_TEST(cubin_persistent_cache, 120)
{
    char dir[] = "/tmp/smelt-test-cubin-XXXXXX", entry[320] = "";
    cr_assert_not_null(mkdtemp(dir));
    setenv("SMELT_CACHE_DIR", dir, 1);
    unsetenv("SMELT_CACHE");
    trng r;
    trng_init(&r, 9);
    smelt_tensor *h = t_rand(ctx, &r, SMELT_F32, SHP(1000));
    smelt_tensor *out[3] = {NULL, NULL, NULL};
    for (int round = 0; round < 3; round++) {
        smelt_ctx *c = round ? t_ctx_raw() : ctx; /* later rounds: like a new process */
        if (round)
            T_OK(c, smelt_ctx_set_backend(c, "NVRTC"));
        smelt_graph *g = t_graph(c);
        smelt_node *a = smelt_input(g, NULL, SMELT_F32, SHP(1000));
        smelt_node *y = smelt_unary(g, SMELT_OP_TANH, smelt_mul(g, a, smelt_scalar(g, 3.0)));
        smelt_plan *p = t_plan(c, g, 1, &y, 3);
        t_run(p, 1, &h, 1, &out[round]);
        cr_assert_eq(cu_entries(dir, entry, sizeof entry), 1, "one CUBIN entry in %s", dir);
        struct stat st;
        cr_assert_eq(stat(entry, &st), 0);
        cr_assert_gt(st.st_size, 24, "a whole entry");
        if (round == 0)
            cr_assert_eq(truncate(entry, st.st_size / 2), 0); /* round 1 must rebuild it */
        if (round)
            cr_assert(t_bitwise_equal(out[0], out[round]), "round %d differs", round);
        smelt_plan_free(p);
        smelt_graph_free(g);
        if (round)
            smelt_ctx_free(c);
    }
    t_free_all(out, 3);
    smelt_tensor_free(h);
    unsetenv("SMELT_CACHE_DIR");
}

/* Reductions on the device compute the CPU tiers' bits (smelt's one
 * reduction order: a warp's lanes and its shuffle-down tree are the C
 * kernels' 32 lanes and their tree): rows of several chunks, columns, a
 * middle axis, every axis, f16 means, integer sums, argmax with NaN. */
DEVICE_TEST(reductions_same_bits_as_cpu, 300)
{
    typedef struct {
        smelt_op op;
        smelt_dtype dt;
        int ndim;
        int64_t shape[3];
        int n_axes, axes[2], keep;
    } rcase;
    const rcase cases[] = {
        {SMELT_OP_SUM, SMELT_F32, 2, {3, 40000}, 1, {1}, 0},
        {SMELT_OP_MEAN, SMELT_F16, 2, {300, 7}, 1, {0}, 1},
        {SMELT_OP_ARGMAX, SMELT_F32, 2, {5, 100}, 1, {1}, 0},
        {SMELT_OP_MAX, SMELT_BF16, 3, {4, 50, 6}, 1, {1}, 0},
        {SMELT_OP_SUM, SMELT_I32, 3, {4, 5, 60}, 2, {0, 2}, 0},
        {SMELT_OP_PROD, SMELT_F64, 1, {70}, 0, {0}, 0},
        {SMELT_OP_ALL, SMELT_U8, 2, {20, 33}, 1, {1}, 1},
        {SMELT_OP_MIN, SMELT_F32, 2, {64, 30}, 0, {0}, 0},
        /* long results: their chunks spread over the warps */
        {SMELT_OP_ARGMIN, SMELT_F32, 2, {2, 50000}, 1, {1}, 0},
        {SMELT_OP_SUM, SMELT_F64, 2, {2, 70000}, 1, {1}, 0},
        {SMELT_OP_MAX, SMELT_F64, 2, {33000, 3}, 1, {0}, 1},
        {SMELT_OP_MEAN, SMELT_F16, 1, {70000}, 0, {0}, 0},
        {SMELT_OP_ALL, SMELT_U8, 2, {2, 40000}, 1, {1}, 0},
        {SMELT_OP_SUM, SMELT_I64, 3, {2, 3, 20000}, 2, {1, 2}, 1},
        /* a last chunk shorter than a warp (lanes past its end) and than a
         * lane's batch of 8 loads */
        {SMELT_OP_SUM, SMELT_F32, 2, {3, 16389}, 1, {1}, 0},
        {SMELT_OP_ARGMAX, SMELT_F32, 2, {2, 16384 + 200}, 1, {1}, 0},
        /* columns: a thread per (result, lane) */
        {SMELT_OP_SUM, SMELT_F32, 2, {2000, 70}, 1, {0}, 0},
        {SMELT_OP_ARGMAX, SMELT_F32, 2, {1500, 40}, 1, {0}, 1},
        {SMELT_OP_SUM, SMELT_F64, 2, {40000, 33}, 1, {0}, 0},
        {SMELT_OP_MIN, SMELT_BF16, 3, {1100, 2, 40}, 1, {0}, 0},
        {SMELT_OP_ANY, SMELT_BOOL, 2, {1024, 64}, 1, {0}, 1},
        {SMELT_OP_SUM, SMELT_F32, 2, {16389, 40}, 1, {0}, 0},
    };
    for (int c = 0; c < NELEMS(cases); c++) {
        const rcase *k = &cases[c];
        smelt_graph *g = t_graph(ctx);
        smelt_node *a = smelt_input(g, NULL, k->dt, k->ndim, k->shape);
        smelt_node *y = smelt_reduce(g, k->op, a, k->n_axes, k->axes, k->keep);
        T_OK(ctx, smelt_graph_status(g));
        trng r;
        trng_init(&r, 70 + (uint64_t)c);
        smelt_tensor *in = t_rand(ctx, &r, k->dt, k->ndim, k->shape), *dev = NULL, *cpu = NULL, *ref = NULL;
        if (k->op == SMELT_OP_ARGMAX) /* a NaN: the first counts as the max */
            t_set(in, 137, NAN), t_set(in, 420, NAN);
        if (k->op == SMELT_OP_ARGMIN) /* ties and NaNs in later chunks */
            t_set(in, 20000, -1e30), t_set(in, 40000, -1e30), t_set(in, 70000, NAN), t_set(in, 90000, NAN);
        if (k->op == SMELT_OP_ALL) /* one row all true, the other false late */
            for (int64_t i = 0; i < smelt_tensor_numel(in); i++)
                t_set(in, i, i != 70001);
        if (k->op == SMELT_OP_PROD)
            for (int64_t i = 0; i < smelt_tensor_numel(in); i++)
                t_set(in, i, trng_uniform(&r, 0.8, 1.25));
        smelt_plan *pd = t_plan(ctx, g, 1, &y, 3);
        cr_assert_str_eq(t_stats(pd).backend, "NVRTC");
        t_run(pd, 1, &in, 1, &dev);
        smelt_tensor *again = NULL; /* a second run: the chunks' counters were left zero */
        t_run(pd, 1, &in, 1, &again);
        cr_assert(t_bitwise_equal(dev, again), "case %d: a second run gives other bits", c);
        smelt_tensor_free(again);
        smelt_plan_opts o;
        smelt_plan_opts_init(&o);
        o.backend = "TCC";
        smelt_plan *pc = NULL;
        T_OK(ctx, smelt_plan_new(ctx, g, 1, &y, &o, &pc));
        t_run(pc, 1, &in, 1, &cpu);
        int64_t at;
        cr_assert(t_same_results(cpu, dev, &at), "case %d (%s of %s): the device gives %a, TCC %a at [%lld]", c,
                  smelt_op_name(k->op), smelt_dtype_name(k->dt), smelt_tensor_get(dev, at), smelt_tensor_get(cpu, at),
                  (long long)at);
        t_reference(ctx, g, 1, &y, 1, &in, &ref);
        t_expect_match("reduction on the device", dev, ref, (t_tol){.ulps = 2, .atol = 1e-3});
        smelt_tensor_free(in), smelt_tensor_free(dev), smelt_tensor_free(cpu), smelt_tensor_free(ref);
        smelt_plan_free(pd), smelt_plan_free(pc);
        smelt_graph_free(g);
    }
}

/* the softmax of an f32 input x [rows, cols] over its rows */
static smelt_node *softmax_rows(smelt_graph *g, int64_t rows, int64_t cols)
{
    smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(rows, cols));
    return smelt_expr(g, "exp(x - max(x, axis=-1, keepdims=True)) / "
                         "sum(exp(x - max(x, axis=-1, keepdims=True)), axis=-1, keepdims=True)",
                      (const char *[]){"x"}, &x, 1);
}

/* A softmax over a few long rows: one kernel on the CPU (a row program: a
 * thread a row), but on a device its reductions run as kernels of their
 * own, spread over the warps, rather than a warp a row; the same bits. */
DEVICE_TEST(few_long_rows_not_a_row_program, 120)
{
    smelt_graph *g = t_graph(ctx);
    smelt_node *y = softmax_rows(g, 16, 70000);
    T_OK(ctx, smelt_graph_status(g));
    trng r;
    trng_init(&r, 17);
    smelt_tensor *in = t_rand(ctx, &r, SMELT_F32, SHP(16, 70000)), *dev = NULL, *cpu = NULL;
    t_set(in, 5, NAN), t_set(in, 90000, INFINITY);
    smelt_plan *pd = t_plan(ctx, g, 1, &y, 3);
    cr_assert_gt(t_stats(pd).kernels, 1, "%s", smelt_plan_describe(pd));
    cr_assert(strstr(smelt_plan_describe(pd), "on a GPU"), "%s", smelt_plan_describe(pd));
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    o.backend = "TCC";
    smelt_plan *pc = NULL;
    T_OK(ctx, smelt_plan_new(ctx, g, 1, &y, &o, &pc));
    cr_assert_eq(t_stats(pc).kernels, 1, "%s", smelt_plan_describe(pc));
    t_run(pd, 1, &in, 1, &dev);
    t_run(pc, 1, &in, 1, &cpu);
    int64_t at;
    cr_assert(t_same_results(cpu, dev, &at), "the device gives %a, TCC's row program %a at [%lld]",
              smelt_tensor_get(dev, at), smelt_tensor_get(cpu, at), (long long)at);
    smelt_tensor_free(dev), smelt_tensor_free(cpu), smelt_tensor_free(in);
    smelt_plan_free(pd), smelt_plan_free(pc);
    smelt_graph_free(g);
}

/* Spread reductions over a concat, a region at a time (the regions' results
 * and counters in the kernel's one scratch, reused), twice: the bits of
 * TinyCC's plan. */
DEVICE_TEST(spread_reductions_over_regions, 120)
{
    const char *const exprs[] = {"sum(concat((a, b), axis=0), axis=1)", "max(concat((c, d), axis=1), axis=0)"};
    const int64_t shp[4][2] = {{2, 50000}, {1, 50000}, {2000, 40}, {2000, 24}};
    for (int e = 0; e < 2; e++) {
        smelt_graph *g = t_graph(ctx);
        smelt_node *in[2] = {smelt_input(g, "x", SMELT_F32, 2, shp[2 * e]), smelt_input(g, "y", SMELT_F32, 2, shp[2 * e + 1])};
        smelt_node *y = smelt_expr(g, exprs[e], (const char *[]){e ? "c" : "a", e ? "d" : "b"}, in, 2);
        T_OK(ctx, smelt_graph_status(g));
        trng r;
        trng_init(&r, 300 + (uint64_t)e);
        smelt_tensor *x[2] = {t_rand(ctx, &r, SMELT_F32, 2, shp[2 * e]), t_rand(ctx, &r, SMELT_F32, 2, shp[2 * e + 1])};
        smelt_tensor *dev = NULL, *again = NULL, *cpu = NULL;
        smelt_plan *pd = t_plan(ctx, g, 1, &y, 3);
        t_run(pd, 2, x, 1, &dev);
        t_run(pd, 2, x, 1, &again);
        tcc_run(ctx, g, 1, &y, 3, 2, x, &cpu);
        int64_t at;
        cr_assert(t_same_results(cpu, dev, &at), "%s: the device gives %a, TCC %a at [%lld]", exprs[e],
                  smelt_tensor_get(dev, at), smelt_tensor_get(cpu, at), (long long)at);
        cr_assert(t_bitwise_equal(dev, again), "%s: a second run gives other bits", exprs[e]);
        smelt_tensor_free(dev), smelt_tensor_free(again), smelt_tensor_free(cpu);
        smelt_tensor_free(x[0]), smelt_tensor_free(x[1]);
        smelt_plan_free(pd);
        smelt_graph_free(g);
    }
}

/* A reduction of a constant too large to fold reads the constant from
 * device memory with strides 0: the bits of a reduction of memory. */
DEVICE_TEST(reduction_of_a_large_constant, 120)
{
    smelt_graph *g = t_graph(ctx);
    smelt_node *c = smelt_const(g, 0.1, SMELT_F32);
    smelt_node *y = smelt_reduce(g, SMELT_OP_SUM, smelt_broadcast_to(g, c, SHP(3, (1 << 23) + 7)), 0, NULL, 0);
    smelt_plan *pd = t_plan(ctx, g, 1, &y, 1);
    cr_assert_eq(t_stats(pd).kernels, 1, "%s", smelt_plan_describe(pd));
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    o.backend = "TCC";
    o.opt_level = 0;
    smelt_plan *pc = NULL;
    T_OK(ctx, smelt_plan_new(ctx, g, 1, &y, &o, &pc));
    smelt_tensor *dev = NULL, *cpu = NULL;
    t_run(pd, 0, NULL, 1, &dev);
    t_run(pc, 0, NULL, 1, &cpu);
    cr_assert(t_bitwise_equal(dev, cpu), "the device gives %a, TCC from memory %a", smelt_tensor_get(dev, 0),
              smelt_tensor_get(cpu, 0));
    smelt_tensor_free(dev), smelt_tensor_free(cpu);
    smelt_plan_free(pd), smelt_plan_free(pc);
    smelt_graph_free(g);
}

/* Input fusion on the device: producers computed per element in the warp's
 * loop give the bits of TinyCC's unfused plan (rows, columns, everything;
 * broadcast operands; special values). */
DEVICE_TEST(fused_reductions_same_bits_as_cpu, 300)
{
    typedef struct {
        smelt_op op;
        smelt_dtype dt;
        int64_t shape[2];
        int n_axes, axes;
    } fcase;
    const fcase cases[] = {
        {SMELT_OP_SUM, SMELT_F32, {7, 3000}, 1, 1},   {SMELT_OP_MAX, SMELT_F32, {300, 9}, 1, 0},
        {SMELT_OP_MEAN, SMELT_F16, {40, 70}, 1, 1},   {SMELT_OP_ARGMIN, SMELT_F64, {30, 50}, 1, 0},
        {SMELT_OP_SUM, SMELT_I32, {20, 33}, 0, 0},    {SMELT_OP_PROD, SMELT_F64, {5, 40}, 1, 1},
        {SMELT_OP_ANY, SMELT_F32, {64, 30}, 1, 1},    {SMELT_OP_MIN, SMELT_F16, {33, 20}, 0, 0},
        /* spread: chunks over the warps; columns a thread per (result, lane) */
        {SMELT_OP_SUM, SMELT_F32, {3, 40000}, 1, 1},  {SMELT_OP_MAX, SMELT_F32, {2000, 40}, 1, 0},
    };
    for (int c = 0; c < NELEMS(cases); c++) {
        const fcase *k = &cases[c];
        smelt_graph *g = t_graph(ctx);
        smelt_node *a = smelt_input(g, "a", k->dt, 2, k->shape);
        smelt_node *m = smelt_input(g, "m", k->dt, SHP(k->shape[0], 1));
        smelt_node *x = smelt_sub(g, smelt_mul(g, a, a), m);
        smelt_node *y = smelt_reduce(g, k->op, x, k->n_axes, &k->axes, 0);
        T_OK(ctx, smelt_graph_status(g));
        trng r;
        trng_init(&r, 90 + (uint64_t)c);
        smelt_tensor *in[2] = {t_rand(ctx, &r, k->dt, 2, k->shape), t_rand(ctx, &r, k->dt, SHP(k->shape[0], 1))};
        if (k->dt != SMELT_I32)
            t_set(in[0], 17, NAN), t_set(in[0], 40, INFINITY), t_set(in[1], 2, -0.0);
        if (k->op == SMELT_OP_PROD)
            for (int64_t i = 0; i < smelt_tensor_numel(in[0]); i++)
                t_set(in[0], i, trng_uniform(&r, 0.9, 1.1));
        smelt_tensor *dev = NULL, *cpu = NULL;
        smelt_plan *pd = t_plan(ctx, g, 1, &y, 3);
        cr_assert_str_eq(t_stats(pd).backend, "NVRTC");
        cr_assert_eq(t_stats(pd).kernels, 1, "%s", smelt_plan_describe(pd));
        t_run(pd, 2, in, 1, &dev);
        tcc_run(ctx, g, 1, &y, 0, 2, in, &cpu);
        int64_t at;
        cr_assert(t_same_results(cpu, dev, &at), "case %d (%s of %s): the device gives %a, TCC unfused %a at [%lld]", c,
                  smelt_op_name(k->op), smelt_dtype_name(k->dt), smelt_tensor_get(dev, at), smelt_tensor_get(cpu, at),
                  (long long)at);
        smelt_tensor_free(dev), smelt_tensor_free(cpu), smelt_tensor_free(in[0]), smelt_tensor_free(in[1]);
        smelt_plan_free(pd);
        smelt_graph_free(g);
    }
}

/* The softmax on the device: one row program (a warp per row), the bits of
 * TinyCC's unfused plan.  Its lanes hold their elements of x, then of
 * exp(x - max), 32 at most in registers (it computes exp), the rest in
 * shared memory (x and exp(x - max) in one place: 4 bytes a row element),
 * up to 12 KB a warp; longer rows stream.  By default rows that fill
 * blocks of up to 8 warps exactly (1024, 4096) take them; with
 * SMELT_CUDA_ROWS_WARPS=1 a warp a row; with =32, rows over 448 take a
 * block of up to 32 warps, 8 elements a lane or more. */
DEVICE_TEST(fused_softmax_same_bits_as_cpu, 300)
{
    /* short rows; 1024 (each lane's 32 elements); 1025, 4096; a row of
     * 13000 (each lane takes 407 elements) */
    const int64_t shapes[][2] = {{37, 500}, {5, 1024}, {3, 1025}, {3, 4096}, {3, 13000}};
    const char *const held[][5] = {{"held: 16 elements a lane in registers, 0 in shared memory",
                                    "held by blocks of 4 warps: 8 elements a lane",
                                    "held: 32 elements a lane in registers, 32 in shared memory",
                                    "held by blocks of 8 warps: 16 elements a lane", NULL},
                                   {"held: 16 elements a lane in registers, 0 in shared memory",
                                    "held: 32 elements a lane in registers, 0 in shared memory",
                                    "held: 32 elements a lane in registers, 32 in shared memory",
                                    "held: 32 elements a lane in registers, 96 in shared memory", NULL},
                                   {"held by blocks of 2 warps: 8 elements a lane",
                                    "held by blocks of 4 warps: 8 elements a lane",
                                    "held by blocks of 4 warps: 9 elements a lane",
                                    "held by blocks of 16 warps: 8 elements a lane",
                                    "held by blocks of 32 warps: 13 elements a lane"}};
    for (int c = 0; c < 3 * NELEMS(shapes); c++) {
        int s = c % NELEMS(shapes), f = c / NELEMS(shapes);
        if (f)
            setenv("SMELT_CUDA_ROWS_WARPS", f == 1 ? "1" : "32", 1);
        else
            unsetenv("SMELT_CUDA_ROWS_WARPS");
        smelt_graph *g = t_graph(ctx);
        smelt_node *y = softmax_rows(g, shapes[s][0], shapes[s][1]);
        T_OK(ctx, smelt_graph_status(g));
        trng r;
        trng_init(&r, 11);
        smelt_tensor *in = t_rand(ctx, &r, SMELT_F32, SHP(shapes[s][0], shapes[s][1])), *dev = NULL, *cpu = NULL;
        t_set(in, 7, -0.0), t_set(in, 600, INFINITY), t_set(in, 1200, NAN);
        smelt_plan *pd = t_plan(ctx, g, 1, &y, 3);
        cr_assert_eq(t_stats(pd).kernels, 1, "%s", smelt_plan_describe(pd));
        cr_assert(held[f][s] ? strstr(smelt_plan_describe(pd), held[f][s]) != NULL
                             : strstr(smelt_plan_describe(pd), "rows held") == NULL,
                  "%s", smelt_plan_describe(pd));
        t_run(pd, 1, &in, 1, &dev);
        tcc_run(ctx, g, 1, &y, 0, 1, &in, &cpu);
        int64_t at;
        cr_assert(t_same_results(cpu, dev, &at), "rows of %lld: the device gives %a, TCC unfused %a at [%lld]",
                  (long long)shapes[s][1], smelt_tensor_get(dev, at), smelt_tensor_get(cpu, at), (long long)at);
        smelt_tensor_free(dev), smelt_tensor_free(cpu), smelt_tensor_free(in);
        smelt_plan_free(pd);
        smelt_graph_free(g);
    }
    unsetenv("SMELT_CUDA_ROWS_WARPS");
}

/* A row program's last pass dividing by the row's scalar: through the
 * scalar's reciprocal where every quotient of a lane lies in the range
 * smelt_divr_f32 holds for, else that lane's pass again, dividing
 * (src/codegen/emit.c).  The bits of TinyCC's unfused plan with divisors
 * inside and outside that range (the row's sum of w: its first element,
 * the rest zeros), each over four rows: dividends all within 2^90 of the
 * divisor's scale and two +0 (the fast path throughout, where the divisor allows), the
 * same down to subnormals and with the range's edges in a few places, with a random bit pattern
 * (zeros, subnormals, infinities, NaN) in every 40th place, and all random
 * bit patterns.  Rows held by a warp, by a block of 8 warps, and streamed. */
DEVICE_TEST(row_divisions_same_bits_as_cpu, 300)
{
    const int64_t cols[] = {512, 4096, 17000};
    const float div[] = {1.0f,        3.0f,       -7.5f,       0x1p-100f,   0x1.8p-101f,    0x1p100f,      0x1.8p100f,
                         0x1p120f,    -0x1p-120f, 0x1p-140f,   0.0f,        INFINITY,       NAN,           0x1.fffffep127f,
                         0x1.3p127f,  -0x1p-126f, 0x1.9p126f,  0x1.fffffep-1f, 0x1.000002p0f, -3e-30f};
    const int64_t R = 4 * NELEMS(div);
    for (int c = 0; c < NELEMS(cols); c++) {
        const int64_t C = cols[c];
        smelt_graph *g = t_graph(ctx);
        smelt_node *in[2] = {smelt_input(g, "x", SMELT_F32, SHP(R, C)), smelt_input(g, "w", SMELT_F32, SHP(R, C))};
        smelt_node *y = smelt_expr(g, "x / sum(w, axis=-1, keepdims=True)", (const char *[]){"x", "w"}, in, 2);
        T_OK(ctx, smelt_graph_status(g));
        smelt_tensor *t[2], *dev = NULL, *cpu = NULL;
        for (int i = 0; i < 2; i++)
            T_OK(ctx, smelt_tensor_new(ctx, SMELT_F32, 2, (const int64_t[]){R, C}, &t[i]));
        float *x = smelt_tensor_data(t[0]), *w = smelt_tensor_data(t[1]);
        trng r;
        trng_init(&r, 29 + c);
        for (int64_t i = 0; i < R; i++) {
            const float d = div[i / 4], a = fabsf(d);
            const int mode = (int)(i % 4);
            int e = 0;
            frexpf(isfinite(d) && d != 0 ? d : 1.0f, &e);
            for (int64_t j = 0; j < C; j++) {
                uint32_t u = (uint32_t)trng_u64(&r);
                float v;
                memcpy(&v, &u, 4);
                int k = e + (int)(trng_u64(&r) % 181) - 90;
                k = k < (mode == 1 ? -149 : -99) ? (mode == 1 ? -149 : -99) : k > 126 ? 126 : k; /* subnormals too */
                w[i * C + j] = j ? 0.0f : d;
                x[i * C + j] = mode == 3 || (mode == 2 && j % 40 == 7) ? v
                                                                       : ldexpf(1.0f + (float)trng_unit(&r), k - 1) * (u & 1 ? -1.0f : 1.0f);
            }
            const float edge[] = {a * 0x1p-98f, nextafterf(a * 0x1p-98f, 0), a * 0x1p98f,
                                  nextafterf(a * 0x1p98f, INFINITY), 0x1p-100f, 0x1p126f,
                                  nextafterf(0x1p-100f, 0), nextafterf(0x1p126f, INFINITY), -0.0f, 0x1p-149f};
            for (int k = 0; mode == 1 && k < NELEMS(edge); k++)
                x[i * C + 1 + 37 * k] = edge[k];
            if (mode == 0) /* +0 keeps the fast path */
                x[i * C + 5] = 0.0f, x[i * C + 700 % C] = 0.0f;
        }
        smelt_plan *pd = t_plan(ctx, g, 1, &y, 3);
        cr_assert_eq(t_stats(pd).kernels, 1, "%s", smelt_plan_describe(pd));
        t_run(pd, 2, t, 1, &dev);
        tcc_run(ctx, g, 1, &y, 0, 2, t, &cpu);
        int64_t at;
        cr_assert(t_same_results(cpu, dev, &at), "rows of %lld: %a / %a: the device gives %a, TCC unfused %a",
                  (long long)C, x[at], w[at / C * C], smelt_tensor_get(dev, at), smelt_tensor_get(cpu, at));
        for (int i = 0; i < 2; i++)
            smelt_tensor_free(t[i]);
        smelt_tensor_free(dev), smelt_tensor_free(cpu);
        smelt_plan_free(pd);
        smelt_graph_free(g);
    }
}

/* Row programs on the device (tests/rows-cases.h): one kernel each, the
 * bits of TinyCC's unfused plan, in the held form as it comes (registers;
 * shared memory too for transcendental ones), all in shared memory
 * (SMELT_CUDA_ROWS_HELD=0, SMELT_CUDA_ROWS_SHARED=1: f64, f16 and i32
 * values in it too, rows of 5000), streaming (SMELT_CUDA_ROWS_SHARED=0:
 * every pass reads its operands again), and rows of more than 448 held by
 * blocks of warps (SMELT_CUDA_ROWS_WARPS=8: 2 to 8 warps, up to 32
 * elements a lane; =32: up to 32 warps, 8 elements a lane or more).  The
 * default (auto) takes blocks of up to 8 warps for long rows of one
 * reduction or rows that fill them exactly, a warp a row for more; the
 * forms after it one warp (=1). */
#include "rows-cases.h"
/* A row program's block form in plan description d, "held by blocks of W
 * warps: K elements a lane", for rows of nred with at most `most` warps a
 * row: W, K the smallest that hold the row, W as many as allowed while a
 * lane holds 8 elements or more, and with fill, as many of those as the
 * row fills exactly (exec.c, smelt__red_spread) */
static void expect_block_form(const char *what, const char *d, int64_t nred, int most, bool fill)
{
    const char *at = strstr(d, "held by blocks of ");
    int W = 0, K = 0, top = most;
    while (top > 1 && 448LL * (top / 2) >= nred) /* a lane of the next smaller block holds 8 or more */
        top /= 2;
    while (fill && top > 1 && nred % (32LL * top))
        top /= 2;
    cr_assert(at && sscanf(at, "held by blocks of %d warps: %d elements a lane", &W, &K) == 2, "%s: %s", what, d);
    cr_assert(W == top && K >= 8 && 32LL * W * K >= nred && 32LL * W * (K - 1) < nred && (!fill || 32LL * W * K == nred),
              "%s: rows of %lld in %d warps of %d elements a lane (at most %d warps, %d expected): %s", what,
              (long long)nred, W, K, most, top, d);
}

DEVICE_TEST(row_programs_same_bits_as_cpu, 300)
{
    unsetenv("SMELT_CUDA_ROWS_HELD"), unsetenv("SMELT_CUDA_ROWS_SHARED"), unsetenv("SMELT_CUDA_ROWS_WARPS");
    for (int c = 0; c < 5 * NELEMS(rows_cases); c++) {
        const rows_case *rc = &rows_cases[c % NELEMS(rows_cases)];
        int form = c / NELEMS(rows_cases);
        if (c == NELEMS(rows_cases))
            setenv("SMELT_CUDA_ROWS_HELD", "0", 1), setenv("SMELT_CUDA_ROWS_SHARED", "1", 1),
                setenv("SMELT_CUDA_ROWS_WARPS", "1", 1);
        if (c == 2 * NELEMS(rows_cases))
            setenv("SMELT_CUDA_ROWS_SHARED", "0", 1);
        if (c == 3 * NELEMS(rows_cases))
            unsetenv("SMELT_CUDA_ROWS_HELD"), unsetenv("SMELT_CUDA_ROWS_SHARED"), setenv("SMELT_CUDA_ROWS_WARPS", "8", 1);
        if (c == 4 * NELEMS(rows_cases))
            setenv("SMELT_CUDA_ROWS_WARPS", "32", 1);
        smelt_node *outs[3];
        smelt_tensor *in[ROWS_MAX_IN], *dev[3] = {0}, *cpu[3] = {0};
        int n_out, n_in;
        smelt_graph *g = rows_setup(ctx, c % NELEMS(rows_cases), outs, &n_out, in, &n_in);
        smelt_plan *pd = t_plan(ctx, g, n_out, outs, 3);
        const char *d = smelt_plan_describe(pd);
        cr_assert_eq(t_stats(pd).kernels, rows_kernels(c % NELEMS(rows_cases)), "%s: %s", rc->what, d);
        bool held = strstr(d, "rows held") != NULL, one = strstr(d, "a row program of 1 reduction,") != NULL;
        if (form == 2)
            cr_assert(!held, "%s: %s", rc->what, d);
        else if ((form >= 3 || (form == 0 && (one || strstr(rc->what, "exact")))) && strstr(rc->what, "long rows"))
            expect_block_form(rc->what, d, rc->shape[rc->ndim - 1], form == 4 ? 32 : 8, form == 0 && !one);
        else if (form < 3)
            cr_assert(!strstr(d, "held by blocks"), "%s: %s", rc->what, d);
        if (form == 1)
            cr_assert(!held || strstr(d, "held: 0 elements a lane in registers"), "%s: %s", rc->what, d);
        if (form < 2 && c % NELEMS(rows_cases) == 0)
            cr_assert(held, "%s: %s", rc->what, d);
        if (form == 1 && !strcmp(rc->what, "rmsnorm, long rows"))
            cr_assert(strstr(d, "held: 0 elements a lane in registers, 256 in shared memory"), "%s: %s", rc->what, d);
        t_run(pd, n_in, in, n_out, dev);
        tcc_run(ctx, g, n_out, outs, 0, n_in, in, cpu);
        for (int k = 0; k < n_out; k++) {
            int64_t at;
            cr_assert(t_same_results(cpu[k], dev[k], &at), "%s (form %d), output %d: the device gives %a, TCC unfused %a at [%lld]",
                      rc->what, form, k, smelt_tensor_get(dev[k], at), smelt_tensor_get(cpu[k], at), (long long)at);
        }
        t_free_all(dev, n_out), t_free_all(cpu, n_out), t_free_all(in, n_in);
        smelt_plan_free(pd);
        smelt_graph_free(g);
    }
    unsetenv("SMELT_CUDA_ROWS_HELD"), unsetenv("SMELT_CUDA_ROWS_SHARED"), unsetenv("SMELT_CUDA_ROWS_WARPS");
}

/* The block form's folds in any grouping (max, argmax: every warp at once,
 * then the warps' results in order) give TinyCC's bits, NaN payloads
 * included (a fold selects, so a NaN keeps its payload; t_same_results
 * takes any two NaNs as equal, so the results are compared bit for bit):
 * rows of 2048 f32, 8 warps of 256 elements, default and 32 warps
 * allowed.  Row 0: two NaNs of one lane, payload A in warp 2, B in warp 5
 * (the first in the lane's order wins: A, at 700); row 1: B in warp 0,
 * A in warp 7, other lanes (the shuffle tree decides); row 2: the largest
 * value twice, in warps 1 and 7 (argmax: the first, 300). */
DEVICE_TEST(block_folds_nan_payloads, 120)
{
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(3, 2048));
    smelt_node *outs[] = {smelt_expr(g, "x - max(x, axis=-1, keepdims=True)", (const char *[]){"x"}, &x, 1),
                          smelt_expr(g, "max(x, axis=-1, keepdims=True)", (const char *[]){"x"}, &x, 1),
                          smelt_expr(g, "argmax(x, axis=-1, keepdims=True)", (const char *[]){"x"}, &x, 1)};
    T_OK(ctx, smelt_graph_status(g));
    trng r;
    trng_init(&r, 31);
    smelt_tensor *in = t_rand(ctx, &r, SMELT_F32, SHP(3, 2048)), *dev[3] = {0}, *cpu[3] = {0};
    uint32_t *bits = smelt_tensor_data(in);
    const uint32_t A = 0x7fc00123u, B = 0x7fc45600u;
    bits[700] = A, bits[1500] = B, bits[2048 + 40] = B, bits[2048 + 2047] = A;
    t_set(in, 2 * 2048 + 300, 5.0), t_set(in, 2 * 2048 + 1800, 5.0);
    tcc_run(ctx, g, 3, outs, 0, 1, &in, cpu);
    const float *m = smelt_tensor_data(cpu[1]);
    uint32_t m0;
    memcpy(&m0, &m[0], 4);
    cr_assert_eq(m0, A, "TCC's max of row 0: %08x", m0);
    cr_assert_eq(smelt_tensor_get(cpu[2], 0), 700);
    cr_assert_eq(smelt_tensor_get(cpu[2], 2), 300);
    for (int f = 0; f < 2; f++) {
        if (f)
            setenv("SMELT_CUDA_ROWS_WARPS", "32", 1);
        else
            unsetenv("SMELT_CUDA_ROWS_WARPS");
        smelt_plan *pd = t_plan(ctx, g, 3, outs, 3);
        cr_assert_eq(t_stats(pd).kernels, 1, "%s", smelt_plan_describe(pd));
        cr_assert(strstr(smelt_plan_describe(pd), "held by blocks of 8 warps"), "%s", smelt_plan_describe(pd));
        t_run(pd, 1, &in, 3, dev);
        int64_t at;
        cr_assert(t_same_results(cpu[0], dev[0], &at), "x - max at [%lld]", (long long)at);
        for (int k = 1; k < 3; k++)
            cr_assert(!memcmp(smelt_tensor_data(cpu[k]), smelt_tensor_data(dev[k]), (size_t)smelt_tensor_numel(cpu[k]) *
                                                                                    (k == 1 ? 4 : 8)),
                      "output %d (form %d): the device gives %a %a %a, TCC %a %a %a", k, f, smelt_tensor_get(dev[k], 0),
                      smelt_tensor_get(dev[k], 1), smelt_tensor_get(dev[k], 2), smelt_tensor_get(cpu[k], 0),
                      smelt_tensor_get(cpu[k], 1), smelt_tensor_get(cpu[k], 2));
        t_free_all(dev, 3);
        smelt_plan_free(pd);
    }
    unsetenv("SMELT_CUDA_ROWS_WARPS");
    t_free_all(cpu, 3);
    smelt_tensor_free(in);
    smelt_graph_free(g);
}

/* SMELT_CUDA_ROWS_HELD, the bytes a lane holds in registers,
 * SMELT_CUDA_ROWS_SHARED (auto: the rest in shared memory for programs
 * that compute a transcendental function; 0: never; 1: always) and
 * SMELT_CUDA_ROWS_WARPS (the warps a row spans, fewer where a lane would
 * hold fewer than 8 elements; registers only; auto, the default: 8 for
 * rows that fill the blocks, as here, or a row program of one reduction,
 * as this one, else 1): an rmsnorm of
 * 4096 f32 holds x, 4 bytes a row element, 128 elements a lane a warp a
 * row; values that are not numbers (or not auto, 0 or 1; not auto or a
 * power of 2 up to 32) are ignored with a warning in the plan's
 * description.  Every form gives the bits of
 * TinyCC's unfused plan; on fakecuda, a block form's launch has a block of
 * its warps for each row. */
DEVICE_TEST(rows_held_setting, 120)
{
    const struct {
        const char *held, *shared, *want; /* want: the description's words (NULL: not held) */
        bool warn;
        const char *warps; /* SMELT_CUDA_ROWS_WARPS */
        const char *steps; /* SMELT_CUDA_ROWS_STEPS: rows a block (1 when NULL or ignored) */
    } cases[] = {
        {"512", NULL, "held: 128 elements a lane in registers, 0 in shared memory", false, "1", NULL},
        {"511", NULL, NULL, false, "1", NULL},
        {"511", "1", "held: 64 elements a lane in registers, 64 in shared memory", false, "1", NULL},
        {"abc", "auto", "held: 128 elements a lane in registers, 0 in shared memory", true, "1", NULL},
        {"-5", "1", "held: 128 elements a lane in registers, 0 in shared memory", true, "1", NULL},
        {"0", "1", "held: 0 elements a lane in registers, 128 in shared memory", false, "1", NULL},
        {"0", NULL, NULL, false, "1", NULL},
        {"0", "0", NULL, false, "1", NULL},
        {"100", "2", NULL, true, "1", NULL},
        {"100", "1", "held: 16 elements a lane in registers, 112 in shared memory", false, "1", NULL},
        {"512", NULL, "held by blocks of 8 warps: 16 elements a lane in registers", false, "8", NULL},
        {"512", NULL, "held by blocks of 16 warps: 8 elements a lane in registers", false, "32", NULL},
        {"512", NULL, "held: 128 elements a lane in registers, 0 in shared memory", false, "2", NULL}, /* (4 + 8) 64 bytes */
        {"768", NULL, "held by blocks of 2 warps: 64 elements a lane in registers", false, "2", NULL},
        /* auto (one reduction: 8 warps), the default; a bad value leaves auto */
        {"512", NULL, "held by blocks of 8 warps: 16 elements a lane in registers", false, NULL, NULL},
        {"512", NULL, "held by blocks of 8 warps: 16 elements a lane in registers", false, "AUTO", NULL},
        {"512", NULL, "held by blocks of 8 warps: 16 elements a lane in registers", true, "3", NULL},
        {"512", NULL, "held by blocks of 8 warps: 16 elements a lane in registers", true, "64", NULL},
        {"512", NULL, "held by blocks of 8 warps: 16 elements a lane in registers", true, "8x", NULL},
        {"512", NULL, "held by blocks of 8 warps: 16 elements a lane in registers", true, "0", NULL},
        {"191", NULL, NULL, false, "8", NULL}, /* 16 elements a lane: x and the operand x * x, 16 (4 + 8) bytes */
        {"191", NULL, NULL, false, NULL, NULL}, /* ... and a warp a row would stream (no transcendental function) */
        {"192", NULL, "held by blocks of 8 warps: 16 elements a lane in registers", false, "8", NULL},
        /* rows a block: 2 (a grid of 2 blocks for the 3 rows), 3, more than there are; bad values leave 1 */
        {"512", NULL, "held by blocks of 8 warps: 16 elements a lane in registers", false, NULL, "2"},
        {"512", NULL, "held by blocks of 8 warps: 16 elements a lane in registers", false, "8", "3"},
        {"512", NULL, "held by blocks of 8 warps: 16 elements a lane in registers", false, NULL, "1000"},
        {"512", NULL, "held: 128 elements a lane in registers, 0 in shared memory", false, "1", "2"},
        {"512", NULL, "held by blocks of 8 warps: 16 elements a lane in registers", true, NULL, "0"},
        {"512", NULL, "held by blocks of 8 warps: 16 elements a lane in registers", true, NULL, "1.5"},
    };
    smelt_graph *g = t_graph(ctx);
    smelt_node *in[2] = {smelt_input(g, "x", SMELT_F32, SHP(3, 4096)), smelt_input(g, "w", SMELT_F32, SHP(4096))};
    smelt_node *y = smelt_expr(g, "x / sqrt(mean(x * x, axis=-1, keepdims=True) + 1e-6) * w", (const char *[]){"x", "w"},
                               in, 2);
    T_OK(ctx, smelt_graph_status(g));
    trng r;
    trng_init(&r, 23);
    smelt_tensor *x[2] = {t_rand(ctx, &r, SMELT_F32, SHP(3, 4096)), t_rand(ctx, &r, SMELT_F32, SHP(4096))}, *cpu = NULL;
    t_set(x[0], 5, -0.0), t_set(x[0], 4100, INFINITY), t_set(x[0], 9000, NAN);
    tcc_run(ctx, g, 1, &y, 0, 2, x, &cpu);
    for (int c = 0; c < NELEMS(cases); c++) {
        setenv("SMELT_CUDA_ROWS_HELD", cases[c].held, 1);
        if (cases[c].shared)
            setenv("SMELT_CUDA_ROWS_SHARED", cases[c].shared, 1);
        else
            unsetenv("SMELT_CUDA_ROWS_SHARED");
        if (cases[c].warps)
            setenv("SMELT_CUDA_ROWS_WARPS", cases[c].warps, 1);
        else
            unsetenv("SMELT_CUDA_ROWS_WARPS");
        if (cases[c].steps)
            setenv("SMELT_CUDA_ROWS_STEPS", cases[c].steps, 1);
        else
            unsetenv("SMELT_CUDA_ROWS_STEPS");
        smelt_plan *pd = t_plan(ctx, g, 1, &y, 3);
        const char *d = smelt_plan_describe(pd);
        cr_assert(cases[c].want ? strstr(d, cases[c].want) != NULL : strstr(d, "rows held") == NULL,
                  "case %d: %s", c, d);
        cr_assert_eq(strstr(d, "warning: SMELT_CUDA_ROWS_") != NULL, cases[c].warn, "case %d: %s", c, d);
        smelt_tensor *dev = NULL;
        t_run(pd, 2, x, 1, &dev);
        int64_t at;
        cr_assert(t_same_results(cpu, dev, &at), "case %d: the device gives %a, TCC unfused %a at [%lld]", c,
                  smelt_tensor_get(dev, at), smelt_tensor_get(cpu, at), (long long)at);
        /* on fakecuda, the launch: a block of the warps a row spans for each of the 3 rows, or
         * for each SMELT_CUDA_ROWS_STEPS of them; or blocks of warps a row each */
        const char *fake = getenv("SMELT_CUDA_DRIVER_LIB");
        void *h = fake ? dlopen(fake, RTLD_NOW | RTLD_NOLOAD) : NULL;
        const unsigned *last = h ? (const unsigned *)dlsym(h, "smelt_fake_last_launch") : NULL;
        const char *blk = strstr(d, "held by blocks of ");
        int st = cases[c].steps && !cases[c].warn ? atoi(cases[c].steps) : 1;
        if (last && blk)
            cr_assert(last[0] == (unsigned)(3 + st - 1) / (unsigned)st &&
                          last[1] == 32u * (unsigned)atoi(blk + strlen("held by blocks of ")),
                      "case %d: grid %u, block %u: %s", c, last[0], last[1], d);
        if (h)
            dlclose(h);
        smelt_tensor_free(dev);
        smelt_plan_free(pd);
    }
    unsetenv("SMELT_CUDA_ROWS_HELD"), unsetenv("SMELT_CUDA_ROWS_SHARED"), unsetenv("SMELT_CUDA_ROWS_WARPS");
    unsetenv("SMELT_CUDA_ROWS_STEPS");
    smelt_tensor_free(cpu), t_free_all(x, 2);
    smelt_graph_free(g);
}

/* Epilogues on the device: lane 0 runs the operators fused after the
 * reduction on its result; the bits of TinyCC's unfused plan.  Outputs:
 * the epilogue's, the reduced value (read elsewhere) and an intermediate
 * value of the epilogue; inputs read by the epilogue. */
DEVICE_TEST(epilogue_same_bits_as_cpu, 300)
{
    typedef struct {
        smelt_op op;
        smelt_dtype dt;
        int64_t shape[2];
        int n_axes, axes, keepdims;
    } ecase;
    const ecase cases[] = {
        {SMELT_OP_SUM, SMELT_F32, {7, 3000}, 1, 1, 0},  {SMELT_OP_MAX, SMELT_F32, {300, 9}, 1, 0, 1},
        {SMELT_OP_MEAN, SMELT_F16, {40, 70}, 1, 1, 1},  {SMELT_OP_ARGMIN, SMELT_F64, {30, 50}, 1, 0, 0},
        {SMELT_OP_SUM, SMELT_I32, {20, 33}, 0, 0, 0},   {SMELT_OP_PROD, SMELT_F64, {5, 40}, 1, 1, 0},
        {SMELT_OP_ANY, SMELT_F32, {64, 30}, 1, 1, 1},   {SMELT_OP_MIN, SMELT_F16, {33, 20}, 0, 0, 1},
    };
    for (int c = 0; c < NELEMS(cases); c++) {
        const ecase *k = &cases[c];
        smelt_graph *g = t_graph(ctx);
        smelt_node *a = smelt_input(g, "a", k->dt, 2, k->shape);
        smelt_node *m = smelt_input(g, "m", k->dt, SHP(k->shape[0], 1));
        smelt_node *y = smelt_reduce(g, k->op, smelt_sub(g, smelt_mul(g, a, a), m), k->n_axes, &k->axes, k->keepdims);
        smelt_node *v = smelt_node_dtype(y) == SMELT_BOOL ? smelt_cast(g, y, SMELT_F32) : y;
        smelt_node *mid = smelt_mul(g, v, v), *z;
        if (smelt_node_dtype(v) == SMELT_I64)
            z = smelt_sub(g, smelt_mul(g, mid, smelt_scalar(g, 3)), v);
        else
            z = smelt_add(g, smelt_unary(g, SMELT_OP_SQRT, smelt_add(g, mid, smelt_scalar(g, 1e-5))),
                          smelt_div(g, smelt_scalar(g, 1), v));
        /* an input read by the epilogue alone; with keepdims rows, m too */
        smelt_node *cin = smelt_input(g, "c", k->dt, smelt_node_ndim(y), smelt_node_shape(y));
        z = smelt_mul(g, z, cin);
        if (k->keepdims && k->axes == 1)
            z = smelt_add(g, z, m);
        smelt_node *outs[3] = {z, y, mid};
        T_OK(ctx, smelt_graph_status(g));
        trng r;
        trng_init(&r, 190 + (uint64_t)c);
        smelt_tensor *in[3] = {t_rand(ctx, &r, k->dt, 2, k->shape), t_rand(ctx, &r, k->dt, SHP(k->shape[0], 1)),
                               t_rand(ctx, &r, k->dt, smelt_node_ndim(y), smelt_node_shape(y))};
        if (k->dt != SMELT_I32)
            t_set(in[0], 17, NAN), t_set(in[0], 40, INFINITY), t_set(in[1], 2, -0.0);
        if (k->op == SMELT_OP_PROD)
            for (int64_t i = 0; i < smelt_tensor_numel(in[0]); i++)
                t_set(in[0], i, trng_uniform(&r, 0.9, 1.1));
        smelt_tensor *dev[3] = {0}, *cpu[3] = {0};
        smelt_plan *pd = t_plan(ctx, g, 3, outs, 3);
        cr_assert_str_eq(t_stats(pd).backend, "NVRTC");
        cr_assert_eq(t_stats(pd).kernels, 1, "%s", smelt_plan_describe(pd));
        t_run(pd, 3, in, 3, dev);
        tcc_run(ctx, g, 3, outs, 0, 3, in, cpu);
        for (int q = 0; q < 3; q++) {
            int64_t at;
            cr_assert(t_same_results(cpu[q], dev[q], &at), "case %d (%s of %s), output %d: the device gives %a, TCC "
                      "unfused %a at [%lld]", c, smelt_op_name(k->op), smelt_dtype_name(k->dt), q,
                      smelt_tensor_get(dev[q], at), smelt_tensor_get(cpu[q], at), (long long)at);
            smelt_tensor_free(dev[q]), smelt_tensor_free(cpu[q]);
        }
        smelt_tensor_free(in[0]), smelt_tensor_free(in[1]), smelt_tensor_free(in[2]);
        smelt_plan_free(pd);
        smelt_graph_free(g);
    }
}

/* Layout operators on the device (tests/layout-cases.h): views read where
 * their operand lies (negative and zero strides, 64-bit indexing), the
 * kernel and copy counts of the CPU, the bits of TinyCC's unfused plan. */
#include "layout-cases.h"
DEVICE_TEST(layout_views_same_bits_as_cpu, 300)
{
    for (int c = 0; c < NELEMS(layout_cases); c++) {
        const layout_case *k = &layout_cases[c];
        smelt_node *y;
        smelt_tensor *in[2], *dev = NULL, *cpu = NULL;
        smelt_graph *g = layout_setup(ctx, c, &y, in);
        smelt_plan *pd = t_plan(ctx, g, 1, &y, 3);
        cr_assert_eq(t_stats(pd).kernels, k->kernels, "%s: %s", k->what, smelt_plan_describe(pd));
        cr_assert_eq(t_stats(pd).copies, k->copies, "%s: %s", k->what, smelt_plan_describe(pd));
        t_run(pd, 2, in, 1, &dev);
        tcc_run(ctx, g, 1, &y, 0, 2, in, &cpu);
        int64_t at;
        cr_assert(t_same_results(cpu, dev, &at), "%s: the device gives %a, TCC unfused %a at [%lld]", k->what,
                  smelt_tensor_get(dev, at), smelt_tensor_get(cpu, at), (long long)at);
        smelt_tensor_free(dev), smelt_tensor_free(cpu), t_free_all(in, 2);
        smelt_plan_free(pd);
        smelt_graph_free(g);
    }
}

/* The spread reductions (a few long results; columns) fold 8 elements of a
 * lane at a time: with producers in the element loop whose value is also
 * an output (written as computed), two reduced dimensions that do not
 * merge, and chunks that end 7, 255 and 257 elements in; the bits of
 * TinyCC's unfused plan. */
DEVICE_TEST(spread_reductions_with_outputs, 120)
{
    typedef struct {
        const char *expr;
        smelt_op op;
        smelt_dtype dt;
        int ndim;
        int64_t xs[3];
        int nax, axes[2];
    } rcase;
    const rcase cases[] = {
        {"exp(transpose(x, (1, 0, 2)))", SMELT_OP_SUM, SMELT_F32, 3, {200, 3, 150}, 2, {1, 2}},
        {"exp(transpose(x, (1, 0, 2)))", SMELT_OP_MIN, SMELT_BF16, 3, {50, 40, 64}, 2, {0, 1}},
        {"exp(x) * 2", SMELT_OP_ARGMAX, SMELT_F32, 2, {2, 16384 + 16384 + 7}, 1, {1}},
        {"x[::-1] * 2", SMELT_OP_ARGMIN, SMELT_F16, 2, {16384 + 257, 40}, 1, {0}},
        {"exp(x) * 2", SMELT_OP_SUM, SMELT_F64, 2, {16384 + 255, 40}, 1, {0}},
    };
    for (int c = 0; c < NELEMS(cases); c++) {
        const rcase *k = &cases[c];
        smelt_graph *g = t_graph(ctx);
        smelt_node *x = smelt_input(g, "x", k->dt, k->ndim, k->xs);
        smelt_node *e = smelt_expr(g, k->expr, (const char *[]){"x"}, &x, 1);
        smelt_node *outs[2] = {e, smelt_reduce(g, k->op, e, k->nax, k->axes, 0)};
        T_OK(ctx, smelt_graph_status(g));
        trng r;
        trng_init(&r, 320 + (uint64_t)c);
        smelt_tensor *in = t_rand(ctx, &r, k->dt, k->ndim, k->xs), *dev[2] = {NULL, NULL}, *cpu[2] = {NULL, NULL};
        t_set(in, 5, NAN);
        smelt_plan *pd = t_plan(ctx, g, 2, outs, 3);
        t_run(pd, 1, &in, 2, dev);
        tcc_run(ctx, g, 2, outs, 0, 1, &in, cpu);
        for (int i = 0; i < 2; i++) {
            int64_t at;
            cr_assert(t_same_results(cpu[i], dev[i], &at), "%s, %s (%s), output %d: the device gives %a, TCC %a at [%lld]",
                      k->expr, smelt_op_name(k->op), smelt_dtype_name(k->dt), i, smelt_tensor_get(dev[i], at),
                      smelt_tensor_get(cpu[i], at), (long long)at);
        }
        t_free_all(dev, 2), t_free_all(cpu, 2), smelt_tensor_free(in);
        smelt_plan_free(pd);
        smelt_graph_free(g);
    }
}

/* Inputs read transposed (stride 1 along a dimension before the innermost)
 * go through shared memory a tile of 32 x 32 at a time (kernel_tile.cu.in):
 * sizes that are no multiple of 32, two such inputs, outer dimensions,
 * reversed strides, every float dtype; the bits of TinyCC's unfused plan,
 * and the plan says which inputs it tiles. */
DEVICE_TEST(transposed_reads_in_tiles, 120)
{
    typedef struct {
        const char *expr, *want; /* want: the plan's tiled inputs (NULL: not checked) */
        smelt_dtype dt;
        int ndim;
        int64_t xs[4], ys[4], zs[4];
    } tcase;
    const tcase cases[] = {
        {"x.T + y", "(input 0 through", SMELT_F32, 2, {70, 100}, {100, 70}, {1, 1}},
        {"x.T * y.T + 1", "(input 0, 1 through", SMELT_F64, 2, {90, 64}, {90, 64}, {1, 1}},
        {"transpose(x, (0, 2, 1)) + y", "(input 0 through", SMELT_F16, 3, {3, 40, 50}, {3, 50, 40}, {1, 1, 1}},
        {"x[::-1, ::-1].T - y", "(input 0 through", SMELT_BF16, 2, {64, 48}, {48, 64}, {1, 1}},
        {"exp(x.T) * y[::2]", "(input 0 through", SMELT_F32, 2, {33, 65}, {130, 33}, {1, 1}},
        /* dimensions between the tile's and the innermost; broadcast inputs;
         * integers; the regions of a concat and of a pad; more transposed
         * inputs than the shared memory takes (7 of 9 f32 tiles) */
        {"transpose(x, (0, 3, 2, 1)) + y", NULL, SMELT_F32, 4, {6, 40, 3, 50}, {6, 50, 3, 40}, {1, 1, 1, 1}},
        {"x.T + y + z", NULL, SMELT_F32, 2, {70, 100}, {100, 70}, {1, 70}},
        {"x.T > y", NULL, SMELT_U8, 2, {70, 100}, {100, 70}, {1, 1}},
        {"x.T + y", NULL, SMELT_I64, 2, {70, 100}, {100, 70}, {1, 1}},
        {"concat((x.T, y), axis=0) + 1", NULL, SMELT_F32, 2, {70, 100}, {50, 70}, {1, 1}},
        {"pad(x.T, ((3, 2), (5, 40))) + 1", NULL, SMELT_F32, 2, {70, 100}, {1, 1}, {1, 1}},
        {"x.T + x[::-1].T + x[:, ::-1].T + x[::-1, ::-1].T + y.T + y[::-1].T + y[:, ::-1].T + y[::-1, ::-1].T + z.T",
         NULL, SMELT_F32, 2, {45, 70}, {45, 70}, {45, 70}},
    };
    for (int c = 0; c < NELEMS(cases); c++) {
        const tcase *k = &cases[c];
        smelt_graph *g = t_graph(ctx);
        smelt_node *v[3] = {smelt_input(g, "x", k->dt, k->ndim, k->xs), smelt_input(g, "y", k->dt, k->ndim, k->ys),
                            smelt_input(g, "z", k->dt, k->ndim, k->zs)};
        smelt_node *y = smelt_expr(g, k->expr, (const char *[]){"x", "y", "z"}, v, 3);
        T_OK(ctx, smelt_graph_status(g));
        trng r;
        trng_init(&r, 120 + (uint64_t)c);
        smelt_tensor *in[3] = {t_rand(ctx, &r, k->dt, k->ndim, k->xs), t_rand(ctx, &r, k->dt, k->ndim, k->ys),
                               t_rand(ctx, &r, k->dt, k->ndim, k->zs)};
        if (t_is_float(k->dt))
            t_set(in[0], 5, NAN), t_set(in[0], 77, -0.0), t_set(in[1], 3, INFINITY);
        smelt_plan *pd = t_plan(ctx, g, 1, &y, 3);
        const char *d = smelt_plan_describe(pd);
        cr_assert(!k->want || (t_contains(d, "in tiles of 32 x 32") && t_contains(d, k->want)), "%s: %s", k->expr, d);
        smelt_tensor *dev = NULL, *cpu = NULL;
        t_run(pd, 3, in, 1, &dev);
        tcc_run(ctx, g, 1, &y, 0, 3, in, &cpu);
        int64_t at;
        cr_assert(t_same_results(cpu, dev, &at), "%s (%s): the device gives %a, TCC unfused %a at [%lld]", k->expr,
                  smelt_dtype_name(k->dt), smelt_tensor_get(dev, at), smelt_tensor_get(cpu, at), (long long)at);
        smelt_tensor_free(dev), smelt_tensor_free(cpu), t_free_all(in, 3);
        smelt_plan_free(pd);
        smelt_graph_free(g);
    }
}

/* Tensor constants on the device: laid out once in device memory, read by
 * a fused kernel directly and through a transposed view. */
DEVICE_TEST(tensor_constants, 120)
{
    smelt_graph *g = t_graph(ctx);
    trng r;
    trng_init(&r, 34);
    smelt_tensor *w = t_rand(ctx, &r, SMELT_F32, SHP(30, 50)), *in = t_rand(ctx, &r, SMELT_F32, SHP(50, 30));
    smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(50, 30)), *c = smelt_constant(g, w);
    smelt_node *y = smelt_mul(g, smelt_add(g, x, smelt_transpose(g, c, NULL)), smelt_scalar(g, 3));
    smelt_plan *pd = t_plan(ctx, g, 1, &y, 3);
    cr_assert_eq(t_stats(pd).kernels, 1, "%s", smelt_plan_describe(pd));
    smelt_tensor *dev = NULL, *cpu = NULL;
    t_run(pd, 1, &in, 1, &dev);
    t_run(pd, 1, &in, 1, &dev); /* again: the device copy is kept */
    tcc_run(ctx, g, 1, &y, 0, 1, &in, &cpu);
    int64_t at;
    cr_assert(t_same_results(cpu, dev, &at), "the device gives %a, TCC unfused %a at [%lld]",
              smelt_tensor_get(dev, at), smelt_tensor_get(cpu, at), (long long)at);
    smelt_tensor_free(dev), smelt_tensor_free(cpu), smelt_tensor_free(w), smelt_tensor_free(in);
    smelt_plan_free(pd);
    smelt_graph_free(g);
}

/* Matrix products on the device: cuBLAS (on the fake one, plain loops),
 * the CPU's cases (tests/matmul-cases.h) in every float dtype against the
 * float64 reference, with an epilogue fused after the product; operands
 * cuBLAS cannot read as they lie are a clear error. */
#include "matmul-cases.h"
DEVICE_TEST(matmul_through_cublas, 120)
{
    const smelt_dtype dts[] = {SMELT_F32, SMELT_F64, SMELT_F16, SMELT_BF16};
    trng r;
    trng_init(&r, 44);
    for (int t = 0; t < NELEMS(dts); t++)
        for (int c = 0; c < NELEMS(cases); c++) {
            const mcase *m = &cases[c];
            smelt_graph *g = t_graph(ctx);
            smelt_node *v[2] = {smelt_input(g, "a", dts[t], m->na, m->as), smelt_input(g, "b", dts[t], m->nb, m->bs)};
            smelt_node *y = smelt_mul(g, smelt_expr(g, m->expr, (const char *[]){"a", "b"}, v, 2), smelt_scalar(g, 0.5));
            T_OK(ctx, smelt_graph_status(g));
            smelt_tensor *in[2] = {t_rand(ctx, &r, dts[t], m->na, m->as), t_rand(ctx, &r, dts[t], m->nb, m->bs)};
            smelt_tensor *ref, *got = NULL;
            t_reference(ctx, g, 1, &y, 2, in, &ref);
            smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
            char what[96];
            snprintf(what, sizeof what, "%s, case %d (%s)", smelt_dtype_name(dts[t]), c, m->expr);
            cr_assert(t_contains(smelt_plan_describe(p), "[BLAS: cuBLAS]"), "%s: %s", what, smelt_plan_describe(p));
            if (m->packed && smelt_tensor_numel(ref)) {
                T_ERR(ctx, smelt_plan_run(p, 2, in, 1, &got), SMELT_ERR_UNSUPPORTED, "pass a contiguous tensor");
            } else {
                t_run(p, 2, in, 1, &got);
                t_expect_match(what, got, ref, mm_tol(dts[t], m->as[m->na - 1]));
                smelt_tensor_free(got);
            }
            smelt_tensor_free(ref), t_free_all(in, 2);
            smelt_plan_free(p);
            smelt_graph_free(g);
        }
}

/* On fakecuda, its cuBLAS calls so far (strided batches, batches of
 * addresses) into n; false on a GPU */
static bool fake_gemm_calls(unsigned n[2])
{
    const char *fake = getenv("SMELT_CUBLAS_LIB");
    void *h = fake ? dlopen(fake, RTLD_NOW | RTLD_NOLOAD) : NULL;
    const unsigned *c = h ? (const unsigned *)dlsym(h, "smelt_fake_gemm_calls") : NULL;
    if (c)
        n[0] = c[0], n[1] = c[1];
    if (h)
        dlclose(h);
    return c != NULL;
}

/* A batch of matrices that no one stride walks (a transposed batch
 * dimension): with more than 4 batches of the innermost dimension, one
 * cuBLAS call of their addresses, 65535 matrices a call (40000 x 2
 * matrices: two calls a product; the second output's inner product also
 * reads c transposed and broadcast over a batch dimension); with 4 or
 * fewer, a strided call each (2 x 40000: two calls); against the
 * reference, each float dtype. */
DEVICE_TEST(matmul_batches_by_address, 120)
{
    const smelt_dtype dts[] = {SMELT_F32, SMELT_F64, SMELT_F16, SMELT_BF16};
    const char *names[] = {"a", "b", "c"};
    trng r;
    trng_init(&r, 46);
    for (int t = 0; t < NELEMS(dts); t++)
        for (int f = 0; f < 2; f++) { /* f = 0: 40000 batches of 2; 1: 2 batches of 40000 */
            const int64_t n0 = f ? 40000 : 2, n1 = f ? 2 : 40000; /* a is [n0, n1, 1, 3], read as [n1, n0, 1, 3] */
            smelt_graph *g = t_graph(ctx);
            smelt_node *v[3] = {smelt_input(g, "a", dts[t], SHP(n0, n1, 1, 3)), smelt_input(g, "b", dts[t], SHP(n1, n0, 3, 2)),
                                smelt_input(g, "c", dts[t], SHP(1, n0, 3, 2))};
            smelt_node *y[2] = {smelt_expr(g, "transpose(a, (1, 0, 2, 3)) @ b + 1", names, v, 3),
                                smelt_expr(g, "transpose(a, (1, 0, 2, 3)) @ (b @ transpose(c, (0, 1, 3, 2)))", names, v, 3)};
            T_OK(ctx, smelt_graph_status(g));
            smelt_tensor *in[3] = {t_rand(ctx, &r, dts[t], SHP(n0, n1, 1, 3)), t_rand(ctx, &r, dts[t], SHP(n1, n0, 3, 2)),
                                   t_rand(ctx, &r, dts[t], SHP(1, n0, 3, 2))};
            smelt_tensor *ref[2], *got[2] = {NULL, NULL};
            t_reference(ctx, g, 2, y, 3, in, ref);
            smelt_plan *p = t_plan(ctx, g, 2, y, 3);
            unsigned before[2], after[2];
            bool fake = fake_gemm_calls(before);
            t_run(p, 3, in, 2, got);
            t_expect_match(smelt_dtype_name(dts[t]), got[0], ref[0], mm_tol(dts[t], 3));
            t_expect_match(smelt_dtype_name(dts[t]), got[1], ref[1], mm_tol(dts[t], 3 * 3));
            /* three products, each 2 calls: by address (40000 batches of 2), or strided (2 of 40000; b @ c.T:
             * c broadcast over b's first dimension, its batches walk one stride only within it) */
            if (fake && fake_gemm_calls(after))
                cr_assert(after[0] - before[0] == (f ? 6u : 0u) && after[1] - before[1] == (f ? 0u : 6u),
                          "%s, %s: %u strided calls, %u by address", smelt_dtype_name(dts[t]),
                          f ? "2 batches of 40000" : "40000 batches of 2", after[0] - before[0],
                          after[1] - before[1]);
            t_free_all(got, 2), t_free_all(ref, 2), t_free_all(in, 3);
            smelt_plan_free(p);
            smelt_graph_free(g);
        }
    /* one strided batch of 70000 matrices: two calls (65535 a call) */
    smelt_graph *g = t_graph(ctx);
    smelt_node *v[2] = {smelt_input(g, "a", SMELT_F32, SHP(70000, 1, 2)), smelt_input(g, "b", SMELT_F32, SHP(70000, 2, 1))};
    smelt_node *y = smelt_matmul(g, v[0], v[1]);
    smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F32, SHP(70000, 1, 2)), t_rand(ctx, &r, SMELT_F32, SHP(70000, 2, 1))};
    smelt_tensor *ref, *got = NULL;
    t_reference(ctx, g, 1, &y, 2, in, &ref);
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    unsigned before[2], after[2];
    bool fake = fake_gemm_calls(before);
    t_run(p, 2, in, 1, &got);
    t_expect_match("70000 matrices", got, ref, mm_tol(SMELT_F32, 2));
    if (fake && fake_gemm_calls(after))
        cr_assert(after[0] - before[0] == 2 && after[1] == before[1], "70000 matrices: %u strided calls, %u by address",
                  after[0] - before[0], after[1] - before[1]);
    smelt_tensor_free(got), smelt_tensor_free(ref), t_free_all(in, 2);
    smelt_plan_free(p);
    smelt_graph_free(g);
}

/* A transformer MLP block and an attention head on the device: the matrix
 * products through cuBLAS, the epilogues, the layernorm and the softmax in
 * the kernels of the CPU's plans (the same kernel counts, no copy), within
 * the CPU plan's bounds of the float64 reference, and the bits of the
 * unfused plan on the device. */
static void device_block(smelt_ctx *ctx, smelt_graph *g, smelt_node *out, int n_in, smelt_tensor *const *in,
                         int kernels, int copies, const char *what, t_tol tol)
{
    smelt_tensor *ref, *dev = NULL;
    t_reference(ctx, g, 1, &out, n_in, in, &ref);
    smelt_plan *p = t_plan(ctx, g, 1, &out, 3);
    cr_assert_eq(t_stats(p).kernels, kernels, "%s: %s", what, smelt_plan_describe(p));
    if (copies >= 0)
        cr_assert_eq(t_stats(p).copies, copies, "%s: %s", what, smelt_plan_describe(p));
    t_run(p, n_in, in, 1, &dev);
    t_expect_match(what, dev, ref, tol);
    /* the unfused plan on the device: the same products (the same cuBLAS
     * calls), every other operator a kernel of its own: the same bits */
    smelt_plan *pu = t_plan(ctx, g, 1, &out, 0);
    smelt_tensor *unf = NULL;
    t_run(pu, n_in, in, 1, &unf);
    int64_t at;
    cr_assert(t_same_results(unf, dev, &at), "%s: fused %a, unfused %a at [%lld]", what, smelt_tensor_get(dev, at),
              smelt_tensor_get(unf, at), (long long)at);
    smelt_tensor_free(unf), smelt_tensor_free(dev), smelt_tensor_free(ref);
    smelt_plan_free(pu), smelt_plan_free(p);
}

DEVICE_TEST(mlp_and_attention, 240)
{
    trng r;
    trng_init(&r, 45);
    smelt_graph *g = t_graph(ctx);
    smelt_tensor *in[5];
    smelt_node *y = mm_mlp(ctx, g, &r, in);
    const int last[] = {-1};
    smelt_node *d = smelt_sub(g, y, smelt_reduce(g, SMELT_OP_MEAN, y, 1, last, 1));
    smelt_node *mlp = smelt_div(g, d, smelt_unary(g, SMELT_OP_SQRT, smelt_add(g, smelt_reduce(g, SMELT_OP_MEAN,
                                                                       smelt_mul(g, d, d), 1, last, 1),
                                                                       smelt_scalar(g, 1e-5))));
    device_block(ctx, g, mlp, 5, in, 4, -1, "mlp on the device", (t_tol){.ulps = 64, .atol = 2e-4});
    t_free_all(in, 5);
    smelt_graph_free(g);

    g = t_graph(ctx);
    const char *names[] = {"q", "k", "v"};
    smelt_node *qkv[3];
    for (int i = 0; i < 3; i++)
        qkv[i] = smelt_input(g, names[i], SMELT_F32, SHP(8, 4, 32, 16));
    smelt_node *att = smelt_expr(g, MM_ATTENTION_OF("(8, 32, 64)"), names, qkv, 3);
    T_OK(ctx, smelt_graph_status(g));
    smelt_tensor *t[3];
    for (int i = 0; i < 3; i++)
        t[i] = t_rand(ctx, &r, SMELT_F32, SHP(8, 4, 32, 16));
    unsigned before[2], after[2];
    bool fake = fake_gemm_calls(before);
    device_block(ctx, g, att, 3, t, 3, 0, "attention on the device", (t_tol){.ulps = 16, .atol = 2e-6});
    /* q @ k.T: one strided batch; p @ v, written into the merged heads: one
     * batch of addresses (not a call for each of the 8 batches of 4 heads);
     * the fused plan once each, the unfused one (opt_level 0: the four
     * q @ k.T of the expression not merged) 4 and 1 */
    if (fake && fake_gemm_calls(after))
        cr_assert(after[0] == before[0] + 5 && after[1] == before[1] + 2, "attention: %u strided calls, %u by address",
                  after[0] - before[0], after[1] - before[1]);
    t_free_all(t, 3);
    smelt_graph_free(g);
}

/* ---- indexed reads on a device (take, take_along_axis) ------------------
 * An index an element, added to the array's offset; the same bits as
 * TinyCC; an index out of range is SMELT_ERR_INDEX, read from the gather
 * block the kernel wrote in device memory, and the plan runs again. */
DEVICE_TEST(gather, 240)
{
    trng r;
    trng_init(&r, 44);
    smelt_node *outs[3];
    smelt_tensor *in[3];
    smelt_graph *g = t_gather_case(ctx, &r, outs, in);
    smelt_tensor *cpu[3] = {NULL, NULL, NULL}, *dev[3] = {NULL, NULL, NULL};
    tcc_run(ctx, g, 3, outs, 3, 3, in, cpu);
    smelt_plan *p = t_plan(ctx, g, 3, outs, 3);
    cr_assert_str_eq(t_stats(p).backend, "NVRTC");
    cr_assert_eq(t_stats(p).kernels, 3, "no copy kernel for a gather: %d kernels", t_stats(p).kernels);
    t_run(p, 3, in, 3, dev);
    for (int k = 0; k < 3; k++)
        cr_assert(t_bitwise_equal(cpu[k], dev[k]), "output %d: the device and TinyCC differ at %lld", k,
                  (long long)t_first_difference(cpu[k], dev[k]));
    t_set_i64(in[2], 1234, 97);
    T_ERR(ctx, smelt_plan_run(p, 3, in, 3, dev), SMELT_ERR_INDEX, "take_along_axis: index 97 is out of range");
    t_set_i64(in[2], 1234, -98);
    T_ERR(ctx, smelt_plan_run(p, 3, in, 3, dev), SMELT_ERR_INDEX, "index -98");
    t_set_i64(in[2], 1234, -97);
    t_run(p, 3, in, 3, dev);
    t_free_all(cpu, 3), t_free_all(dev, 3), t_free_all(in, 3);
    smelt_plan_free(p);
    smelt_graph_free(g);
}

/* ---- windows and scans on a device ----------------------------------------
 * A convolution: one cuBLAS product per tap, accumulated in place (beta 1
 * after the first tap) over the CPU path's strided views of the padded,
 * phased input; a scan: a thread a line, combined in the CPU's order. */
#include "window-cases.h"

/* What tests/fakecuda.c's cuBLAS gives for conv case c without a bias: at
 * each output, the taps in order, each tap's product (its group's channels
 * in order, summed from 0 in the compute type: f32, f64 for f64) added to
 * the taps' before: the CPU path's order of the taps with the fake's
 * products.  (The test and the fake are built for the base x86-64, without
 * FMA: nothing is contracted.) */
static void fake_conv_bits(const ccase *c, smelt_dtype dt, const smelt_tensor *x, const smelt_tensor *w,
                           const int64_t *lo, int64_t OH, int64_t OW, double *out)
{
    int64_t Cg = c->C / c->groups, Og = c->O / c->groups;
    for (int64_t n = 0; n < c->N; n++)
        for (int64_t o = 0; o < c->O; o++)
            for (int64_t oh = 0; oh < OH; oh++)
                for (int64_t ow = 0; ow < OW; ow++) {
                    double accd = 0;
                    float accf = 0;
                    for (int64_t t = 0; t < c->KH * c->KW; t++) {
                        int64_t kh = t / c->KW, kw = t % c->KW;
                        int64_t ih = oh * c->sh + kh * c->dh - lo[0], iw = ow * c->sw + kw * c->dw - lo[1];
                        bool in = ih >= 0 && ih < c->H && iw >= 0 && iw < c->W;
                        double sd = 0;
                        float sf = 0;
                        for (int64_t ci = 0; ci < Cg; ci++) {
                            int64_t xi = ((n * c->C + o / Og * Cg + ci) * c->H + ih) * c->W + iw;
                            double xv = in ? smelt_tensor_get(x, xi) : 0;
                            double wv = smelt_tensor_get(w, ((o * Cg + ci) * c->KH + kh) * c->KW + kw);
                            sd += xv * wv;
                            sf += (float)xv * (float)wv;
                        }
                        accd = t ? accd + sd : sd;
                        accf = t ? accf + sf : sf;
                    }
                    out[((n * c->O + o) * OH + oh) * OW + ow] = dt == SMELT_F64 ? accd
                                                                : t_is_half(dt) ? t_round_half(dt, accf) : accf;
                }
}

/* Small integers: every product and sum exact, in any order */
static void fill_small_integers(smelt_tensor *t, trng *r)
{
    for (int64_t i = 0; i < smelt_tensor_numel(t); i++)
        t_set(t, i, (double)trng_range(r, -3, 3));
}

/* Each conv case in every float dtype, conv alone and conv + bias + relu
 * (its epilogue): against the float64 reference within matmul's bound;
 * the CPU plan's kernels (the epilogue fused, as on the CPU); the fused
 * plan the unfused one's bits; on the fake, the bits of the CPU path's
 * order of taps with the fake's products; with exact data (small
 * integers), TinyCC's bits (and CC's for f32). */
DEVICE_TEST(conv_through_cublas, 300)
{
    const smelt_dtype dts[] = {SMELT_F32, SMELT_F64, SMELT_F16, SMELT_BF16};
    unsigned calls[2];
    bool fake = fake_gemm_calls(calls);
    bool cc = smelt_backend_check(ctx, "CC") == SMELT_OK;
    trng r;
    trng_init(&r, 47);
    for (int t = 0; t < NELEMS(dts); t++)
        for (int k = 0; k < NELEMS(conv_cases); k++) {
            const ccase *c = &conv_cases[k];
            smelt_dtype dt = dts[t];
            int64_t lo[2], hi[2], OH, OW;
            conv_geometry(c, lo, hi, &OH, &OW);
            smelt_node *outs[2];
            smelt_tensor *in[3];
            smelt_graph *g = conv_relu_graph(ctx, &r, c, dt, outs, in);
            char what[96];
            snprintf(what, sizeof what, "%s, conv case %d", smelt_dtype_name(dt), k);
            smelt_tensor *ref[2], *dev[2] = {NULL, NULL}, *unf[2] = {NULL, NULL}, *cpu[2] = {NULL, NULL};
            t_reference(ctx, g, 2, outs, 3, in, ref);
            smelt_plan *p = t_plan(ctx, g, 2, outs, 3), *pu = t_plan(ctx, g, 2, outs, 0);
            cr_assert(t_contains(smelt_plan_describe(p), "accumulated in BLAS: cuBLAS]"), "%s: %s", what,
                      smelt_plan_describe(p));
            t_run(p, 3, in, 2, dev);
            t_run(pu, 3, in, 2, unf);
            int64_t K = c->C / c->groups * c->KH * c->KW, at;
            for (int o = 0; o < 2; o++) {
                t_expect_match(what, dev[o], ref[o], mm_tol(dt, K + 1));
                cr_assert(t_same_results(dev[o], unf[o], &at), "%s, output %d: fused %a, unfused %a at [%lld]", what,
                          o, smelt_tensor_get(dev[o], at), smelt_tensor_get(unf[o], at), (long long)at);
            }
            int cpu_kernels = cpu_run(ctx, "TCC", g, 2, outs, 3, 3, in, cpu);
            cr_assert_eq(t_stats(p).kernels, cpu_kernels, "%s: %d kernels on the device, %d on TCC\n%s", what,
                         t_stats(p).kernels, cpu_kernels, smelt_plan_describe(p));
            if (fake) { /* the CPU path's order of taps, the fake's products */
                int64_t n = smelt_tensor_numel(dev[0]);
                double *want = malloc(sizeof(double) * (size_t)n);
                fake_conv_bits(c, dt, in[0], in[1], lo, OH, OW, want);
                for (int64_t i = 0; i < n; i++)
                    cr_assert(smelt_tensor_get(dev[0], i) == want[i], "%s: element %lld is %a, the taps in order "
                              "give %a", what, (long long)i, smelt_tensor_get(dev[0], i), want[i]);
                free(want);
            }
            t_free_all(dev, 2), t_free_all(cpu, 2);
            for (int i = 0; i < 3; i++) /* exact data: the CPU's bits */
                fill_small_integers(in[i], &r);
            t_run(p, 3, in, 2, dev);
            for (int bi = 0; bi < (cc && dt == SMELT_F32 ? 2 : 1); bi++) {
                cpu_run(ctx, bi ? "CC" : "TCC", g, 2, outs, 3, 3, in, cpu);
                for (int o = 0; o < 2; o++)
                    cr_assert(t_bitwise_equal(cpu[o], dev[o]), "%s, small integers, output %d: the device and %s "
                              "differ at %lld", what, o, bi ? "CC" : "TCC",
                              (long long)t_first_difference(cpu[o], dev[o]));
                t_free_all(cpu, 2);
            }
            t_free_all(dev, 2), t_free_all(unf, 2), t_free_all(ref, 2), t_free_all(in, 3);
            smelt_plan_free(p), smelt_plan_free(pu);
            smelt_graph_free(g);
        }
}

/* Operands the products cannot take as they lie: an input broadcast along
 * its channels (stride 0: laid out by the strided copy first) and
 * transposed weights, a batch of images and groups, against the reference
 * and TinyCC's bits (small integers); a result written into a transposed
 * device tensor. */
DEVICE_TEST(conv_of_strided_operands, 120)
{
    trng r;
    trng_init(&r, 48);
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_F32, SHP(3, 1, 7, 9));
    smelt_node *wt = smelt_input(g, "wt", SMELT_F32, SHP(3, 3, 2, 6));
    smelt_window win;
    smelt_window_init(&win);
    win.groups = 2;
    smelt_node *x = smelt_broadcast_to(g, a, 4, (const int64_t[]){3, 4, 7, 9});
    smelt_node *w = smelt_transpose(g, wt, (const int[]){3, 2, 0, 1}); /* [6, 2, 3, 3] */
    smelt_node *y = smelt_unary(g, SMELT_OP_TANH, smelt_conv(g, x, w, NULL, &win));
    T_OK(ctx, smelt_graph_status(g));
    smelt_tensor *in[2] = {t_rand(ctx, &r, SMELT_F32, SHP(3, 1, 7, 9)), t_rand(ctx, &r, SMELT_F32, SHP(3, 3, 2, 6))};
    smelt_tensor *ref, *dev = NULL, *cpu = NULL;
    t_reference(ctx, g, 1, &y, 2, in, &ref);
    smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
    t_run(p, 2, in, 1, &dev);
    t_expect_match("broadcast input, transposed weights", dev, ref, mm_tol(SMELT_F32, 19));
    smelt_tensor_free(dev);
    dev = NULL;
    for (int i = 0; i < 2; i++)
        for (int64_t e = 0; e < smelt_tensor_numel(in[i]); e++)
            t_set(in[i], e, (double)trng_range(&r, -3, 3) / 16);
    t_run(p, 2, in, 1, &dev);
    tcc_run(ctx, g, 1, &y, 3, 2, in, &cpu);
    cr_assert(t_bitwise_equal(cpu, dev), "small values: the device and TinyCC differ at %lld",
              (long long)t_first_difference(cpu, dev));
    smelt_tensor_free(cpu), smelt_tensor_free(dev), smelt_tensor_free(ref), t_free_all(in, 2);
    smelt_plan_free(p);
    smelt_graph_free(g);
    /* a 1x1 conv, the products the output itself, written into a transposed
     * device tensor: through device memory the kernel keeps, then copied */
    g = t_graph(ctx);
    smelt_node *v[2] = {smelt_input(g, "x", SMELT_F32, SHP(2, 3, 4, 5)),
                        smelt_input(g, "w", SMELT_F32, SHP(6, 3, 1, 1))};
    smelt_window_init(&win);
    y = smelt_conv(g, v[0], v[1], NULL, &win);
    T_OK(ctx, smelt_graph_status(g));
    smelt_tensor *in2[2] = {t_tensor(ctx, SMELT_F32, SHP(2, 3, 4, 5)), t_tensor(ctx, SMELT_F32, SHP(6, 3, 1, 1))};
    for (int i = 0; i < 2; i++)
        fill_small_integers(in2[i], &r);
    smelt_tensor *base = NULL, *view = NULL, *host = t_tensor(ctx, SMELT_F32, SHP(2, 6, 5, 4));
    T_OK(ctx, smelt_tensor_new_device(ctx, SMELT_F32, SHP(2, 6, 5, 4), &base));
    T_OK(ctx, smelt_tensor_transpose(base, (const int[]){0, 1, 3, 2}, &view));
    p = t_plan(ctx, g, 1, &y, 3);
    t_run(p, 2, in2, 1, &view);
    T_OK(ctx, smelt_tensor_copy_to_host(host, base));
    cpu = NULL;
    tcc_run(ctx, g, 1, &y, 3, 2, in2, &cpu);
    for (int64_t i = 0; i < 2 * 6 * 4 * 5; i++) { /* cpu [n, o, h, w] is host [n, o, w, h] */
        int64_t q = i % 20, at = i - q + q % 5 * 4 + q / 5;
        cr_assert(smelt_tensor_get(host, at) == smelt_tensor_get(cpu, i), "a transposed output: %g, TinyCC %g at "
                  "[%lld]", smelt_tensor_get(host, at), smelt_tensor_get(cpu, i), (long long)i);
    }
    smelt_tensor_free(cpu), smelt_tensor_free(host), smelt_tensor_free(view), smelt_tensor_free(base);
    t_free_all(in2, 2);
    smelt_plan_free(p);
    smelt_graph_free(g);
}

/* cumsum and cumprod in every dtype the CPU takes (integers as i64), along
 * each axis, exclusive and reversed: TinyCC's bits (NaN, infinities and
 * -0 among f32's), the float64 reference's values; a strided (transposed)
 * operand and what reads a scan fused after it as on the CPU: TinyCC's
 * and CC's bits. */
DEVICE_TEST(scans_same_bits_as_cpu, 300)
{
    const smelt_dtype dts[] = {SMELT_F32, SMELT_F64, SMELT_F16, SMELT_BF16, SMELT_I32, SMELT_I64, SMELT_U8, SMELT_BOOL};
    const int64_t shapes[][3] = {{37, 0, 0}, {5, 9, 0}, {3, 4, 6}};
    trng r;
    trng_init(&r, 49);
    for (int t = 0; t < NELEMS(dts); t++)
        for (int s = 0; s < 3; s++)
            for (int ax = 0; ax <= s; ax++)
                for (int opi = 0; opi < 2; opi++)
                    for (int mode = 0; mode < 4; mode++) {
                        smelt_dtype dt = dts[t];
                        int nd = s + 1, excl = mode & 1, rev = mode >> 1 & 1;
                        smelt_graph *g = t_graph(ctx);
                        smelt_node *x = smelt_input(g, "x", dt, nd, shapes[s]);
                        smelt_node *y = opi ? smelt_cumprod(g, x, ax - (mode == 3 ? nd : 0), excl, rev)
                                            : smelt_cumsum(g, x, ax, excl, rev);
                        T_OK(ctx, smelt_graph_status(g));
                        smelt_tensor *in = t_rand(ctx, &r, dt, nd, shapes[s]);
                        if (opi && t_is_float(dt)) /* products of values near 1 */
                            t_fill_uniform(in, &r, 0.5, 1.5);
                        if (dt == SMELT_F32 && s == 2 && mode == 0) { /* special values */
                            t_set(in, 5, NAN), t_set(in, 30, INFINITY), t_set(in, 41, -INFINITY);
                            t_set(in, 0, -0.0), t_set(in, 50, -0.0);
                        }
                        char what[96];
                        snprintf(what, sizeof what, "%s %s, shape %d, axis %d, mode %d", opi ? "cumprod" : "cumsum",
                                 smelt_dtype_name(dt), s, ax, mode);
                        smelt_tensor *cpu = NULL, *dev = NULL;
                        tcc_run(ctx, g, 1, &y, 3, 1, &in, &cpu);
                        smelt_plan *p = t_plan(ctx, g, 1, &y, 3);
                        t_run(p, 1, &in, 1, &dev);
                        int64_t at;
                        cr_assert(t_same_results(cpu, dev, &at), "%s: the device gives %a, TinyCC %a at [%lld]", what,
                                  smelt_tensor_get(dev, at), smelt_tensor_get(cpu, at), (long long)at);
                        if ((dt == SMELT_F32 || dt == SMELT_F64 || !t_is_float(dt)) && !(opi && !t_is_float(dt))) {
                            smelt_tensor *ref;
                            t_reference(ctx, g, 1, &y, 1, &in, &ref);
                            t_expect_match(what, dev, ref, (t_tol){64, 1e-5, 1e-5, false});
                            smelt_tensor_free(ref);
                        }
                        smelt_tensor_free(cpu), smelt_tensor_free(dev), smelt_tensor_free(in);
                        smelt_plan_free(p);
                        smelt_graph_free(g);
                    }
    /* a transposed operand read where it lies, and a fused reader */
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(6, 50));
    smelt_node *outs[2] = {smelt_cumsum(g, smelt_transpose(g, x, (const int[]){1, 0}), 1, 1, 1),
                           smelt_expr(g, "cumprod(x, 0) * 2 + exp(x)", (const char *[]){"x"}, &x, 1)};
    T_OK(ctx, smelt_graph_status(g));
    smelt_tensor *in = t_rand(ctx, &r, SMELT_F32, SHP(6, 50)), *cpu[2] = {NULL, NULL}, *dev[2] = {NULL, NULL};
    int cpu_kernels = cpu_run(ctx, "TCC", g, 2, outs, 3, 1, &in, cpu);
    smelt_plan *p = t_plan(ctx, g, 2, outs, 3);
    cr_assert_eq(t_stats(p).kernels, cpu_kernels, "%d kernels on the device, %d on TCC\n%s", t_stats(p).kernels,
                 cpu_kernels, smelt_plan_describe(p));
    t_run(p, 1, &in, 2, dev);
    for (int o = 0; o < 2; o++)
        cr_assert(t_bitwise_equal(cpu[o], dev[o]), "output %d: the device and TinyCC differ at %lld", o,
                  (long long)t_first_difference(cpu[o], dev[o]));
    t_free_all(cpu, 2);
    if (smelt_backend_check(ctx, "CC") == SMELT_OK) {
        cpu_run(ctx, "CC", g, 2, outs, 3, 1, &in, cpu);
        for (int o = 0; o < 2; o++)
            cr_assert(t_bitwise_equal(cpu[o], dev[o]), "output %d: the device and CC differ at %lld", o,
                      (long long)t_first_difference(cpu[o], dev[o]));
        t_free_all(cpu, 2);
    }
    t_free_all(dev, 2);
    smelt_tensor_free(in);
    smelt_plan_free(p);
    smelt_graph_free(g);
}
