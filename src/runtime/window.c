/* Windows and scans on the host (class LIBRARY kernels of their own):
 *
 * conv_taps (ops.def): for each image n and group, the output's [O / G,
 * M] block (M = (OH - 1) Wq + OW: a phase's flat grid of Wq columns a row,
 * up to the last output) is the sum over taps (kh, kw), in order, of the
 * weights' [O / G, C / G] matrix of that tap times the phase's rows of
 * the group's channels from the tap's offset (kh dh / sh) Wq + kw dw / sw:
 * a shifted view of the input that BLAS reads as it lies (leading
 * dimension L), accumulated by BLAS (beta = 1).  Columns are cut into
 * tiles that depend on the shape only, so the bits do not depend on the
 * thread count.
 *
 * cumsum, cumprod: each line along the axis combined in order, in the
 * result's dtype (f16 and bf16 through f32, rounded at each step, as
 * NumPy's accumulate): one order everywhere. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plan.h"
#include "runtime.h"

#define CONV_TASKS 16   /* tiles of columns wanted over all images and groups */
#define CONV_TILE_MIN 512 /* columns a tile at least */

typedef struct convjob {
    smelt_ctx *ctx;
    smelt_dtype dt;
    size_t es;
    int64_t N, G, Og, Cg, KH, KW, sh, sw, dh, dw, Wq, M, tn, ntile;
    const char *x;     /* [N, P, C, L] at strides xs */
    int64_t xs[4];
    const char *wpack; /* [KH * KW, O, Cg] contiguous */
    char *y;           /* [N, O, M...] at strides ys (ys[3] 1, ys[2] Wq) */
    int64_t ys[4];
    int st;
    pthread_mutex_t mu;
} convjob;

static void conv_task(void *arg, int64_t task)
{
    convjob *j = arg;
    int64_t tile = task % j->ntile, ng = task / j->ntile, g = ng % j->G, n = ng / j->G;
    int64_t m0 = tile * j->tn, mt = SMELT_MIN(j->tn, j->M - m0);
    int64_t es = (int64_t)j->es, O = j->Og * j->G;
    char *c = j->y + (n * j->ys[0] + g * j->Og * j->ys[1] + m0) * es;
    if (j->Cg == 0) {
        for (int64_t o = 0; o < j->Og; o++)
            memset(c + o * j->ys[1] * es, 0, (size_t)(mt * es));
        return;
    }
    int t = 0;
    for (int64_t kh = 0; kh < j->KH; kh++)
        for (int64_t kw = 0; kw < j->KW; kw++, t++) {
            int64_t ph = kh * j->dh % j->sh, pw = kw * j->dw % j->sw;
            int64_t off = kh * j->dh / j->sh * j->Wq + kw * j->dw / j->sw;
            const char *a = j->wpack + ((int64_t)t * O + g * j->Og) * j->Cg * es;
            const char *b = j->x + (n * j->xs[0] + (ph * j->sw + pw) * j->xs[1] + g * j->Cg * j->xs[2] + off + m0) * es;
            int st = smelt__blas_gemm_beta(j->ctx, j->dt, false, false, j->Og, mt, j->Cg, a, j->Cg, b, j->xs[2],
                                           t ? 1.0 : 0.0, c, j->ys[1]);
            if (st) {
                pthread_mutex_lock(&j->mu);
                j->st = j->st ? j->st : st;
                pthread_mutex_unlock(&j->mu);
                return;
            }
        }
}

/* a strided 4-D array copied into contiguous memory */
static void pack4(char *dst, const char *src, const int64_t *shape, const int64_t *st, size_t es)
{
    for (int64_t a = 0; a < shape[0]; a++)
        for (int64_t b = 0; b < shape[1]; b++)
            for (int64_t c = 0; c < shape[2]; c++)
                for (int64_t d = 0; d < shape[3]; d++, dst += es)
                    memcpy(dst, src + (a * st[0] + b * st[1] + c * st[2] + d * st[3]) * (int64_t)es, es);
}

int smelt__run_conv_taps(smelt_plan *p, const smelt__inst *x, const smelt__view *in, const smelt__view *out)
{
    const smelt__view *X = &in[0], *W = &in[1];
    convjob j = {.ctx = p->ctx, .dt = x->dtype, .es = smelt__dtypes[x->dtype].size};
    j.N = X->shape[0], j.G = x->vp[4], j.Cg = W->shape[1], j.Og = W->shape[0] / j.G;
    j.KH = W->shape[2], j.KW = W->shape[3], j.sh = x->vp[0], j.sw = x->vp[1], j.dh = x->vp[2], j.dw = x->vp[3];
    int64_t OH = x->vp[5], OW = x->vp[6], L = X->shape[3], O = W->shape[0];
    j.Wq = x->vp[7];
    j.M = (OH - 1) * j.Wq + OW;
    if (X->shape[1] != j.sh * j.sw || X->shape[2] != j.Cg * j.G ||
        (j.KH - 1) * j.dh / j.sh * j.Wq + (j.KW - 1) * j.dw / j.sw + j.M > L)
        return smelt__err(p->ctx, SMELT_ERR_SHAPE, "conv: the run-time shapes do not fit the graph's (a plan with "
                          "a convolution runs at the graph's spatial sizes and channels)");
    if (j.N == 0 || O == 0 || OH == 0 || OW == 0)
        return SMELT_OK;
    int st = smelt__blas_check(p->ctx);
    if (st)
        return st;
    smelt__blas_single_threaded();
    int64_t T = j.KH * j.KW, wn = T * O * j.Cg;
    bool xdirect = X->strides[3] == 1 && X->strides[2] >= L && (j.Cg <= 1 || X->strides[2] > 0);
    bool ydirect = out->strides[3] == 1 && (OH == 1 || out->strides[2] == j.Wq) && out->strides[1] >= j.M;
    size_t xn = xdirect ? 0 : (size_t)smelt__numel(4, X->shape), yn = ydirect ? 0 : (size_t)smelt__numel(4, out->shape);
    char *mem = malloc(((size_t)wn + xn + yn) * j.es + 1);
    if (!mem)
        return smelt__err(p->ctx, SMELT_ERR_NOMEM, "conv: out of memory");
    /* the weights as [tap][O][Cg] */
    char *wp = mem;
    for (int64_t t = 0, i = 0; t < T; t++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t c = 0; c < j.Cg; c++, i++)
                memcpy(wp + i * (int64_t)j.es,
                       W->data + (o * W->strides[0] + c * W->strides[1] + t / j.KW * W->strides[2] +
                                  t % j.KW * W->strides[3]) * (int64_t)j.es, j.es);
    j.wpack = wp;
    j.x = X->data;
    memcpy(j.xs, X->strides, sizeof j.xs);
    if (!xdirect) {
        char *xp = mem + wn * (int64_t)j.es;
        pack4(xp, X->data, X->shape, X->strides, j.es);
        j.x = xp;
        smelt__contig_strides(4, X->shape, j.xs);
    }
    j.y = out->data;
    memcpy(j.ys, out->strides, sizeof j.ys);
    if (!ydirect) {
        j.y = mem + (wn + (int64_t)xn) * (int64_t)j.es;
        smelt__contig_strides(4, out->shape, j.ys);
    }
    int64_t groups = j.N * j.G, want = (CONV_TASKS + groups - 1) / groups;
    j.tn = SMELT_MAX((j.M + want - 1) / want, CONV_TILE_MIN);
    j.tn = SMELT_MIN(j.tn, j.M);
    j.ntile = (j.M + j.tn - 1) / j.tn;
    int64_t tasks = groups * j.ntile;
    pthread_mutex_init(&j.mu, NULL);
    int threads = smelt_ctx_threads(p->ctx);
    if (threads <= 1 || tasks == 1) {
        for (int64_t t = 0; t < tasks && !j.st; t++)
            conv_task(&j, t);
    } else {
        if (!p->ctx->pool)
            p->ctx->pool = smelt__pool_new(threads);
        smelt__pool_run(p->ctx->pool, conv_task, &j, tasks);
    }
    pthread_mutex_destroy(&j.mu);
    if (!j.st && !ydirect) { /* the valid columns into the output as it lies */
        for (int64_t n = 0; n < j.N; n++)
            for (int64_t o = 0; o < O; o++)
                for (int64_t h = 0; h < OH; h++)
                    for (int64_t w = 0; w < OW; w++)
                        memcpy(out->data + (n * out->strides[0] + o * out->strides[1] + h * out->strides[2] +
                                            w * out->strides[3]) * (int64_t)j.es,
                               j.y + (n * j.ys[0] + o * j.ys[1] + h * j.ys[2] + w) * (int64_t)j.es, j.es);
    }
    free(mem);
    return j.st;
}

/* ---- scans ---------------------------------------------------------------- */
static int64_t load_int(smelt_dtype dt, const char *q)
{
    switch (dt) {
    case SMELT_I64: { int64_t v; memcpy(&v, q, 8); return v; }
    case SMELT_I32: { int32_t v; memcpy(&v, q, 4); return v; }
    case SMELT_U8: return (uint8_t)*q;
    default: return *q != 0; /* bool */
    }
}

typedef struct scanjob {
    const smelt__inst *x;
    const smelt__view *in, *out;
    int axis;
    int64_t lines;
} scanjob;

static void scan_line(const scanjob *j, int64_t line)
{
    const smelt__view *I = j->in, *O = j->out;
    int nd = O->ndim, ax = j->axis;
    int64_t oi = 0, oo = 0, t = line;
    for (int d = nd - 1; d >= 0; d--) {
        if (d == ax)
            continue;
        int64_t idx = t % O->shape[d];
        t /= O->shape[d];
        oi += idx * I->strides[d], oo += idx * O->strides[d];
    }
    smelt_dtype dt = j->x->dtype; /* the operand's too (the builder casts it) */
    bool prod = j->x->op == SMELT_OP_CUMPROD, excl = j->x->vp[1], rev = j->x->vp[2];
    int64_t n = O->shape[ax], si = I->strides[ax], so = O->strides[ax];
    size_t es = smelt__dtypes[dt].size;
    if (dt == SMELT_F64 || dt == SMELT_F32 || smelt__is_half(dt)) {
        double acc = prod ? 1 : 0;
        for (int64_t k = 0; k < n; k++) {
            int64_t e = rev ? n - 1 - k : k;
            double v = smelt__elem_load(dt, I->data + (oi + e * si) * (int64_t)es);
            char *q = O->data + (oo + e * so) * (int64_t)es;
            if (excl)
                smelt__elem_store(dt, q, acc);
            if (dt == SMELT_F64) {
                acc = prod ? acc * v : acc + v;
            } else { /* in f32, rounded to the dtype at each step */
                float f = prod ? (float)acc * (float)v : (float)acc + (float)v;
                acc = smelt__dtype_round(dt, (double)f);
            }
            if (!excl)
                smelt__elem_store(dt, q, acc);
        }
        return;
    }
    uint64_t acc = prod ? 1 : 0; /* i64, wrapping */
    for (int64_t k = 0; k < n; k++) {
        int64_t e = rev ? n - 1 - k : k;
        uint64_t v = (uint64_t)load_int(dt, I->data + (oi + e * si) * (int64_t)es);
        char *q = O->data + (oo + e * so) * (int64_t)es;
        if (excl)
            memcpy(q, &acc, 8);
        acc = prod ? acc * v : acc + v;
        if (!excl)
            memcpy(q, &acc, 8);
    }
}

static void scan_task(void *arg, int64_t chunk)
{
    const scanjob *j = arg;
    for (int64_t l = chunk * 64; l < SMELT_MIN(j->lines, chunk * 64 + 64); l++)
        scan_line(j, l);
}

int smelt__run_scan(smelt_plan *p, const smelt__inst *x, const smelt__view *in, const smelt__view *out)
{
    scanjob j = {.x = x, .in = in, .out = out, .axis = (int)x->vp[0]};
    int64_t total = smelt__numel(out->ndim, out->shape);
    if (total == 0)
        return SMELT_OK;
    j.lines = total / out->shape[j.axis];
    int64_t chunks = (j.lines + 63) / 64;
    int threads = smelt_ctx_threads(p->ctx);
    if (threads <= 1 || chunks == 1 || total < (1 << 16)) {
        for (int64_t c = 0; c < chunks; c++)
            scan_task(&j, c);
    } else {
        if (!p->ctx->pool)
            p->ctx->pool = smelt__pool_new(threads);
        smelt__pool_run(p->ctx->pool, scan_task, &j, chunks);
    }
    return SMELT_OK;
}
