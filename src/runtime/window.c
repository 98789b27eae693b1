/* Windows and scans on the host (class LIBRARY kernels of their own):
 *
 * conv_taps (ops.def): for each image n and group, the output's [O / G,
 * M] block (M = (OH - 1) Wq + OW: a phase's flat grid of Wq columns a row,
 * up to the last output) is the sum over taps (kh, kw), in order, of the
 * weights' [O / G, C / G] matrix of that tap times the phase's rows of
 * the group's channels from the tap's offset (kh dh / sh) Wq + kw dw / sw:
 * a shifted view of the input read as it lies.  f32 on a CPU with
 * AVX-512: smelt's own kernel (convk.c), each element one chain of fused
 * multiply-adds over the taps, then the channels, in order, the weights
 * packed for it once a call; otherwise each tap's product is BLAS's
 * (leading dimension L), accumulated by BLAS (beta = 1).  Columns are
 * cut into tiles that depend on the shape only, so the bits do not depend
 * on the thread count.
 *
 * cumsum, cumprod: each line along the axis combined in order, in the
 * result's dtype (f16 and bf16 through f32, rounded at each step, as
 * NumPy's accumulate): one order everywhere. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "convk.h"
#include "plan.h"
#include "runtime.h"

#define CONV_TASKS 16   /* tiles of columns wanted over all images and groups */
#define CONV_TILE_MIN 512 /* columns a tile at least */

/* A conv_taps node's geometry at the run's shapes (ops.def), and whether
 * BLAS reads the input and writes the result as they lie (else through
 * contiguous memory): the host's and a device's alike. */
typedef struct convgeom {
    int64_t N, G, Og, Cg, KH, KW, sh, sw, dh, dw, Wq, M, OH, OW, L, O;
    bool xdirect, ydirect;
} convgeom;

static int conv_geom(smelt_plan *p, const smelt__inst *x, const smelt__view *in, const smelt__view *out, convgeom *c)
{
    const smelt__view *X = &in[0], *W = &in[1];
    c->N = X->shape[0], c->G = x->vp[4], c->Cg = W->shape[1], c->Og = W->shape[0] / c->G;
    c->KH = W->shape[2], c->KW = W->shape[3], c->sh = x->vp[0], c->sw = x->vp[1], c->dh = x->vp[2], c->dw = x->vp[3];
    c->OH = x->vp[5], c->OW = x->vp[6], c->L = X->shape[3], c->O = W->shape[0];
    c->Wq = x->vp[7];
    c->M = (c->OH - 1) * c->Wq + c->OW;
    if (X->shape[1] != c->sh * c->sw || X->shape[2] != c->Cg * c->G ||
        (c->KH - 1) * c->dh / c->sh * c->Wq + (c->KW - 1) * c->dw / c->sw + c->M > c->L)
        return smelt__err(p->ctx, SMELT_ERR_SHAPE, "conv: the run-time shapes do not fit the graph's (a plan with "
                          "a convolution runs at the graph's spatial sizes and channels)");
    c->xdirect = X->strides[3] == 1 && X->strides[2] >= c->L && (c->Cg <= 1 || X->strides[2] > 0);
    c->ydirect = out->strides[3] == 1 && (c->OH == 1 || out->strides[2] == c->Wq) && out->strides[1] >= c->M;
    return SMELT_OK;
}

/* tap t's offset in a phase's flat grid, and its phase */
static int64_t tap_offset(const convgeom *c, int64_t t, int64_t *phase)
{
    int64_t kh = t / c->KW, kw = t % c->KW;
    *phase = kh * c->dh % c->sh * c->sw + kw * c->dw % c->sw;
    return kh * c->dh / c->sh * c->Wq + kw * c->dw / c->sw;
}

typedef struct convjob {
    smelt_ctx *ctx;
    smelt_dtype dt;
    size_t es;
    convgeom c;
    int64_t tn, ntile;
    const char *x;     /* [N, P, C, L] at strides xs */
    int64_t xs[4];
    const char *wpack; /* [KH * KW, O, Cg] contiguous; own: [G][blocks of CK_R rows of O / G][KH * KW][Cg][rows] */
    bool own;          /* smelt's kernel (f32, AVX-512: convk.c), else BLAS's products */
    const int64_t *toff; /* own: each tap's offset, its phase's included (elements) */
    char *y;           /* [N, O, M...] at strides ys (ys[3] 1, ys[2] Wq) */
    int64_t ys[4];
    int st;
    pthread_mutex_t mu;
} convjob;

static void conv_task(void *arg, int64_t task)
{
    convjob *j = arg;
    const convgeom *c = &j->c;
    int64_t tile = task % j->ntile, ng = task / j->ntile, g = ng % c->G, n = ng / c->G;
    int64_t m0 = tile * j->tn, mt = SMELT_MIN(j->tn, c->M - m0);
    int64_t es = (int64_t)j->es;
    char *cp = j->y + (n * j->ys[0] + g * c->Og * j->ys[1] + m0) * es;
    if (c->Cg == 0) {
        for (int64_t o = 0; o < c->Og; o++)
            memset(cp + o * j->ys[1] * es, 0, (size_t)(mt * es));
        return;
    }
    if (j->own) {
        /* subnormal operands read as zero, as BLAS's products (smelt__blas_gemm_beta) */
        unsigned csr = smelt__daz_on();
        /* a row of taps reads its phases' columns, (KW - 1) dw / sw past its first tap's */
        int64_t span = (c->KW - 1) * c->dw / c->sw + (SMELT_MIN(c->KW, c->sw) - 1) * 16 * CK_V;
        smelt__convk_tile((const float *)j->x + n * j->xs[0] + g * c->Cg * j->xs[2] + m0, j->xs[2], j->toff, c->KH,
                          c->KW, span, c->Cg, (const float *)j->wpack + g * c->Og * c->KH * c->KW * c->Cg, c->Og,
                          (float *)cp, j->ys[1], mt);
        smelt__daz_restore(csr);
        return;
    }
    for (int64_t t = 0; t < c->KH * c->KW; t++) {
        int64_t ph, off = tap_offset(c, t, &ph);
        const char *a = j->wpack + (t * c->O + g * c->Og) * c->Cg * es;
        const char *b = j->x + (n * j->xs[0] + ph * j->xs[1] + g * c->Cg * j->xs[2] + off + m0) * es;
        int st = smelt__blas_gemm_beta(j->ctx, j->dt, false, false, c->Og, mt, c->Cg, a, c->Cg, b, j->xs[2],
                                       t ? 1.0 : 0.0, cp, j->ys[1]);
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

/* The weights [O, Cg, KH, KW] (strides ws, f32) as the own kernel reads
 * them: for each group, blocks of CK_R output channels (the last one the
 * rest), each [tap][Cg][rows of the block] (convk.h) */
static void weights_for_kernel(const convgeom *c, const float *w, const int64_t *ws, float *dst)
{
    for (int64_t o0 = 0; o0 < c->O; o0 += c->Og)
        for (int64_t ob = o0; ob < o0 + c->Og; ob += CK_R) {
            int64_t R = SMELT_MIN(CK_R, o0 + c->Og - ob);
            for (int64_t kh = 0; kh < c->KH; kh++)
                for (int64_t kw = 0; kw < c->KW; kw++) {
                    const float *s = w + ob * ws[0] + kh * ws[2] + kw * ws[3];
                    for (int64_t ci = 0; ci < c->Cg; ci++, s += ws[1])
                        for (int64_t r = 0; r < R; r++)
                            *dst++ = s[r * ws[0]];
                }
        }
}

/* The weights [O, Cg, KH, KW] (strides ws) as [tap][O][Cg]: the tap's
 * matrix of a group a legal BLAS operand (shape and strides of the copy) */
static void weights_by_tap(const convgeom *c, const int64_t *ws, int64_t *shape, int64_t *ss)
{
    const int64_t sh[4] = {c->KH, c->KW, c->O, c->Cg}, st[4] = {ws[2], ws[3], ws[0], ws[1]};
    memcpy(shape, sh, sizeof sh), memcpy(ss, st, sizeof st);
}

static bool conv_blas_only;

void smelt__conv_force_blas(bool on)
{
    conv_blas_only = on;
}

bool smelt__conv_own_kernel(smelt_dtype dt)
{
    return dt == SMELT_F32 && !conv_blas_only && smelt__x86_level() >= 4 && smelt__convk_ok();
}

int smelt__run_conv_taps(smelt_plan *p, const smelt__inst *x, const smelt__view *in, const smelt__view *out)
{
    const smelt__view *X = &in[0], *W = &in[1];
    convjob j = {.ctx = p->ctx, .dt = x->dtype, .es = smelt__dtypes[x->dtype].size};
    int st = conv_geom(p, x, in, out, &j.c);
    if (st)
        return st;
    const convgeom *c = &j.c;
    if (c->N == 0 || c->O == 0 || c->OH == 0 || c->OW == 0)
        return SMELT_OK;
    j.own = smelt__conv_own_kernel(j.dt);
    if (!j.own) {
        if ((st = smelt__blas_check(p->ctx)))
            return st;
        smelt__blas_single_threaded();
    }
    int64_t wn = c->KH * c->KW * c->O * c->Cg, T = c->KH * c->KW;
    size_t xn = c->xdirect ? 0 : (size_t)smelt__numel(4, X->shape);
    size_t yn = c->ydirect ? 0 : (size_t)smelt__numel(4, out->shape);
    size_t tn = j.own ? (size_t)T * sizeof(int64_t) : 0;
    char *base = malloc(tn + ((size_t)wn + xn + yn) * j.es + 1); /* the taps' offsets first */
    if (!base)
        return smelt__err(p->ctx, SMELT_ERR_NOMEM, "conv: out of memory");
    char *mem = base + tn;
    if (j.own) {
        weights_for_kernel(c, (const float *)W->data, W->strides, (float *)mem);
    } else {
        int64_t wshape[4], wst[4];
        weights_by_tap(c, W->strides, wshape, wst);
        pack4(mem, W->data, wshape, wst, j.es);
    }
    j.wpack = mem;
    j.x = X->data;
    memcpy(j.xs, X->strides, sizeof j.xs);
    if (!c->xdirect) {
        char *xp = mem + wn * (int64_t)j.es;
        pack4(xp, X->data, X->shape, X->strides, j.es);
        j.x = xp;
        smelt__contig_strides(4, X->shape, j.xs);
    }
    j.y = out->data;
    memcpy(j.ys, out->strides, sizeof j.ys);
    if (!c->ydirect) {
        j.y = mem + (wn + (int64_t)xn) * (int64_t)j.es;
        smelt__contig_strides(4, out->shape, j.ys);
    }
    if (j.own) {
        int64_t *toff = (int64_t *)(void *)base, ph;
        for (int64_t t = 0; t < T; t++)
            toff[t] = tap_offset(c, t, &ph), toff[t] += ph * j.xs[1];
        j.toff = toff;
    }
    int64_t groups = c->N * c->G, want = (CONV_TASKS + groups - 1) / groups;
    j.tn = SMELT_MAX((c->M + want - 1) / want, CONV_TILE_MIN);
    if (j.own) /* whole blocks of the kernel's columns */
        j.tn = (j.tn + 16 * CK_V - 1) / (16 * CK_V) * (16 * CK_V);
    j.tn = SMELT_MIN(j.tn, c->M);
    j.ntile = (c->M + j.tn - 1) / j.tn;
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
    if (!j.st && !c->ydirect) { /* the valid columns into the output as it lies */
        for (int64_t n = 0; n < c->N; n++)
            for (int64_t o = 0; o < c->O; o++)
                for (int64_t h = 0; h < c->OH; h++)
                    for (int64_t w = 0; w < c->OW; w++)
                        memcpy(out->data + (n * out->strides[0] + o * out->strides[1] + h * out->strides[2] +
                                            w * out->strides[3]) * (int64_t)j.es,
                               j.y + (n * j.ys[0] + o * j.ys[1] + h * j.ys[2] + w) * (int64_t)j.es, j.es);
    }
    free(base);
    return j.st;
}

/* ---- on a device ----------------------------------------------------------
 * The same products: for each tap in order, the tap's weights times its
 * shifted view of the phase, accumulated in place (beta 1 after the first
 * tap), one backend product (cuBLAS) a tap over the images and groups (a
 * strided batch of the larger count, a call for each of the smaller).  The
 * weights, and an input or result the product cannot take as it lies, go
 * through device memory the kernel keeps (k->dscratch) by the backend's
 * strided copy. */

/* a strided copy on the device (rank 4, es-byte elements) */
static int dev_copy4(smelt_plan *p, int es, const int64_t *shape, const void *src, const int64_t *ss, void *dst,
                     const int64_t *ds)
{
    smelt__devcopy cp = {.rank = 4, .es = es, .src = src, .dst = dst};
    memcpy(cp.shape, shape, 4 * sizeof *shape), memcpy(cp.ss, ss, 4 * sizeof *ss), memcpy(cp.ds, ds, 4 * sizeof *ds);
    return p->be->iface->copy_strided(p->be, &cp);
}

/* device memory of at least bytes on k, kept for the next run */
static int dev_scratch(smelt_plan *p, smelt__pkernel *k, size_t bytes)
{
    if (k->dscratch && k->dscratch_be == p->be && k->dscratch_bytes >= bytes)
        return SMELT_OK;
    if (k->dscratch)
        smelt__be_free(k->dscratch_be, k->dscratch);
    k->dscratch_bytes = k->dscratch_part = 0;
    if (!(k->dscratch = smelt__be_alloc(p->be, bytes ? bytes : 1)))
        return smelt__err(p->ctx, SMELT_ERR_NOMEM, "conv: out of device memory for the weights laid out by tap "
                          "(%zu bytes)", bytes);
    k->dscratch_be = p->be, k->dscratch_bytes = bytes;
    return SMELT_OK;
}

#define DEV_ALIGN(b) (((b) + 255) & ~(size_t)255)
#define GEMM_BATCH_MAX 65535 /* matrices a call (a grid's y and z stop there) */

int smelt__run_conv_taps_device(smelt_plan *p, smelt__pkernel *k, const smelt__inst *x, const smelt__view *in,
                                const smelt__view *out)
{
    const smelt__view *X = &in[0], *W = &in[1];
    smelt__backend *be = p->be;
    convgeom cg;
    int st = conv_geom(p, x, in, out, &cg);
    if (st)
        return st;
    const convgeom *c = &cg;
    if (c->N == 0 || c->O == 0 || c->OH == 0 || c->OW == 0)
        return SMELT_OK;
    if (!be->iface->gemm || !be->iface->copy_strided)
        return smelt__err(p->ctx, SMELT_ERR_UNSUPPORTED, "conv on %s: the backend has no matrix product or strided "
                          "copy", be->iface->name);
    int es = (int)smelt__dtypes[x->dtype].size;
    int64_t T = c->KH * c->KW, wn = T * c->O * c->Cg;
    int64_t xn = c->xdirect ? 0 : smelt__numel(4, X->shape), yn = c->ydirect ? 0 : smelt__numel(4, out->shape);
    size_t wb = DEV_ALIGN((size_t)wn * (size_t)es), xb = DEV_ALIGN((size_t)xn * (size_t)es);
    if ((st = dev_scratch(p, k, wb + xb + (size_t)yn * (size_t)es)))
        return st;
    char *wpack = k->dscratch, *xp = k->dscratch + wb, *yp = k->dscratch + wb + xb;
    int64_t wshape[4], wst[4], wds[4], xs[4], ys[4];
    weights_by_tap(c, W->strides, wshape, wst);
    smelt__contig_strides(4, wshape, wds);
    if (wn && (st = dev_copy4(p, es, wshape, W->data, wst, wpack, wds)))
        return st;
    const char *xb0 = X->data;
    memcpy(xs, X->strides, sizeof xs);
    if (!c->xdirect) {
        smelt__contig_strides(4, X->shape, xs);
        if ((st = dev_copy4(p, es, X->shape, X->data, X->strides, xp, xs)))
            return st;
        xb0 = xp;
    }
    char *yb0 = out->data;
    memcpy(ys, out->strides, sizeof ys);
    if (!c->ydirect)
        smelt__contig_strides(4, out->shape, ys), yb0 = yp;
    /* the batch: images (A shared) and groups; a strided batch of the larger count */
    bool by_group = c->G >= c->N;
    int64_t outer = by_group ? c->N : c->G, inner = by_group ? c->G : c->N;
    smelt__gemm g = {.dt = x->dtype, .M = c->Og, .N = c->M, .K = c->Cg, .lda = SMELT_MAX(c->Cg, 1), .ldb = xs[2],
                     .ldc = ys[1]};
    g.sa = by_group ? c->Og * c->Cg : 0;
    g.sb = by_group ? c->Cg * xs[2] : xs[0];
    g.sc = by_group ? c->Og * ys[1] : ys[0];
    if (c->Cg == 0) /* an empty sum: zeros (nothing is read) */
        T = 1, g.ldb = SMELT_MAX(c->M, 1);
    for (int64_t t = 0; t < T && !st; t++) {
        int64_t ph = 0, off = c->Cg ? tap_offset(c, t, &ph) : 0;
        g.beta = t ? 1 : 0;
        for (int64_t q = 0; q < outer && !st; q++)
            for (int64_t b0 = 0; b0 < inner && !st; b0 += GEMM_BATCH_MAX) { /* (image, group) of the first */
                int64_t ni = by_group ? q : b0, gi = by_group ? b0 : q;
                g.batch = SMELT_MIN(inner - b0, GEMM_BATCH_MAX);
                g.A = wpack + (t * c->O + gi * c->Og) * c->Cg * es;
                g.B = xb0 + (ni * xs[0] + ph * xs[1] + gi * c->Cg * xs[2] + off) * es;
                g.C = yb0 + (ni * ys[0] + gi * c->Og * ys[1]) * es;
                st = be->iface->gemm(be, &g);
            }
    }
    if (!st && !c->ydirect) { /* the valid columns into the output as it lies */
        const int64_t valid[4] = {c->N, c->O, c->OH, c->OW};
        st = dev_copy4(p, es, valid, yp, ys, out->data, out->strides);
    }
    return st;
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

/* A scan on a device: the backend's kernel, a thread a line in the host's
 * order (templates/cuda/kernel_scan.cu.in) */
int smelt__run_scan_device(smelt_plan *p, const smelt__inst *x, const smelt__view *in, const smelt__view *out)
{
    int ax = (int)x->vp[0];
    if (smelt__numel(out->ndim, out->shape) == 0)
        return SMELT_OK;
    if (!p->be->iface->scan)
        return smelt__err(p->ctx, SMELT_ERR_UNSUPPORTED, "%s on %s: the backend has no scan", smelt__ops[x->op].name,
                          p->be->iface->name);
    smelt__devscan s = {.dt = x->dtype, .prod = x->op == SMELT_OP_CUMPROD, .excl = x->vp[1] != 0,
                        .rev = x->vp[2] != 0, .n = out->shape[ax], .si = in->strides[ax], .so = out->strides[ax],
                        .in = in->data, .out = out->data};
    for (int d = 0; d < out->ndim; d++)
        if (d != ax)
            s.shape[s.rank] = out->shape[d], s.ist[s.rank] = in->strides[d], s.ost[s.rank++] = out->strides[d];
    return p->be->iface->scan(p->be, &s);
}
