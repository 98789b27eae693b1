/* Matrix products (class LIBRARY kernels of their own): BLAS on the host,
 * in tiles that depend on the shape only, on smelt's threads; the
 * backend's batched product (cuBLAS) on a device.  Called by the executor
 * (src/runtime/exec.c). */
#include <stdlib.h>
#include <string.h>

#include "exec.h"

/* Whether BLAS reads a matrix of a matmul operand (r rows, c columns at
 * strides sr, sc) as it lies: *t transposed, *ld its leading dimension;
 * not f16/bf16 (BLAS reads f32), broadcast, negative or odd strides. */
static bool mm_direct(smelt_dtype dt, int64_t r, int64_t c, int64_t sr, int64_t sc, bool *t, int64_t *ld)
{
    *t = false;
    *ld = SMELT_MAX(c, 1);
    if (smelt__is_half(dt))
        return false;
    if (sc == 1 && (r == 1 || (sr >= c && sr > 0))) {
        *ld = r == 1 ? SMELT_MAX(c, 1) : sr;
        return true;
    }
    if (sr == 1 && (c == 1 || (sc >= r && sc > 0))) {
        *t = true;
        *ld = c == 1 ? SMELT_MAX(r, 1) : sc;
        return true;
    }
    return false;
}

/* That matrix packed row-major into pack (f32 for f16/bf16). */
static void mm_pack(char *pack, const char *data, smelt_dtype dt, int64_t r, int64_t c, int64_t sr, int64_t sc)
{
    size_t es = smelt__dtypes[dt].size, ps = smelt__is_half(dt) ? 4 : es;
    for (int64_t i = 0; i < r; i++)
        for (int64_t j = 0; j < c; j++) {
            const char *q = data + (i * sr + j * sc) * (int64_t)es;
            char *o = pack + (size_t)(i * c + j) * ps;
            if (smelt__is_half(dt)) {
                float f = (float)smelt__elem_load(dt, q);
                memcpy(o, &f, 4);
            } else {
                memcpy(o, q, es);
            }
        }
}

/* A matmul's tiles (smelt__mmjob, exec.h, says why square and why on
 * smelt's threads) */
#define MM_SIDE_MAX 1024
#define MM_SIDE_MIN 256
#define MM_TASKS 8
static void mm_fail(smelt__mmjob *j, int st)
{
    pthread_mutex_lock(&j->mu);
    j->st = j->st ? j->st : st;
    pthread_mutex_unlock(&j->mu);
}

/* Tile `tile` of matrix bi of the batch; an operand o with sub[o] set
 * (a batch chain's scratch: chain.c) has matrix bi there instead, laid
 * out as in its view. */
void smelt__mm_tile(smelt__mmjob *j, int64_t bi, int64_t tile, char *const *sub)
{
    int64_t r0 = tile / j->ncb * j->tm, n0 = tile % j->ncb * j->tn;
    int64_t M = SMELT_MIN(j->tm, j->M - r0), N = SMELT_MIN(j->tn, j->N - n0), K = j->K, off[3] = {0, 0, 0}, t = bi;
    char *base[3];
    for (int d = j->nb - 1; d >= 0; d--) { /* batch index d of C; A's and B's right-aligned (size 1: broadcast) */
        int64_t idx = t % j->cshape[d];
        t /= j->cshape[d];
        for (int o = 0; o < 3; o++) {
            int od = d - (j->nb - (j->w[o].ndim - 2));
            if (od >= 0 && j->w[o].shape[od] != 1)
                off[o] += idx * j->w[o].strides[od];
        }
    }
    const smelt__view *A = &j->w[0], *B = &j->w[1], *C = &j->w[2];
    for (int o = 0; o < 3; o++)
        base[o] = sub && sub[o] ? sub[o] : j->w[o].data + off[o] * (int64_t)smelt__dtypes[j->dt].size;
    int64_t sam = A->strides[A->ndim - 2], sak = A->strides[A->ndim - 1];
    int64_t scm = C->strides[C->ndim - 2], scn = C->strides[C->ndim - 1];
    smelt_dtype dt = j->dt, ct = smelt__is_half(dt) ? SMELT_F32 : dt;
    size_t es = smelt__dtypes[dt].size, cs = smelt__dtypes[ct].size;
    bool cdirect = !smelt__is_half(dt) && scn == 1 && (scm >= N || M == 1), ta, tb;
    int64_t lda, ldb, sbk = B->strides[B->ndim - 2], sbn = B->strides[B->ndim - 1];
    const char *a = base[0] + r0 * sam * (int64_t)es, *b = base[1] + n0 * sbn * (int64_t)es;
    bool da = mm_direct(dt, M, K, sam, sak, &ta, &lda), db = mm_direct(dt, K, N, sbk, sbn, &tb, &ldb);
    /* memory for what BLAS cannot take as it lies (the operands packed, the result) */
    size_t na = da ? 0 : (size_t)(M * K), nbk = db ? 0 : (size_t)(K * N), nc = cdirect ? 0 : (size_t)(M * N);
    char *pack = na + nbk + nc ? malloc((na + nbk + nc) * cs) : NULL;
    char *pa = pack, *pb = pack ? pa + na * cs : NULL, *pc = pack ? pb + nbk * cs : NULL;
    if (na + nbk + nc && !pack) {
        mm_fail(j, smelt__err(j->ctx, SMELT_ERR_NOMEM, "matmul: out of memory"));
        return;
    }
    if (!da)
        mm_pack(pa, a, dt, M, K, sam, sak), a = pa;
    if (!db)
        mm_pack(pb, b, dt, K, N, sbk, sbn), b = pb;
    char *c0 = base[2] + (r0 * scm + n0 * scn) * (int64_t)es, *c = cdirect ? c0 : pc;
    int64_t ldc = cdirect ? (M == 1 ? N : scm) : N;
    int st = SMELT_OK;
    if (K == 0) { /* an empty sum: zeros (BLAS would not touch C) */
        for (int64_t i = 0; i < M; i++)
            memset(c + (size_t)(i * ldc) * cs, 0, (size_t)N * cs);
    } else {
        st = smelt__blas_gemm(j->ctx, ct, ta, tb, M, N, K, a, lda, b, ldb, c, ldc);
    }
    for (int64_t i = 0; !st && !cdirect && i < M; i++) /* into C as it lies, rounded to f16/bf16 */
        for (int64_t q = 0; q < N; q++) {
            char *o = c0 + (i * scm + q * scn) * (int64_t)es;
            const char *v = pc + (size_t)(i * N + q) * cs;
            if (smelt__is_half(dt)) {
                float f;
                memcpy(&f, v, 4);
                smelt__elem_store(dt, o, (double)f);
            } else {
                memcpy(o, v, es);
            }
        }
    free(pack);
    if (st)
        mm_fail(j, st);
}

static void mm_task(void *arg, int64_t task)
{
    smelt__mmjob *j = arg;
    smelt__mm_tile(j, task / j->blocks, task % j->blocks, NULL);
}

/* A device product's matrices a call (a grid's y and z stop at 65535; by
 * address, 1.5 MiB of addresses) */
#define MM_PTRS_MAX 65535
/* Batch dimensions that no one stride walks: at most this many calls of
 * the innermost one's strided batch, else one call by address */
#define MM_STRIDED_CALLS_MAX 4
/* The offsets (elements) of A, B and C at the batch index idx of the nd
 * merged batch dimensions whose strides are bst; then idx steps to the
 * next index, the last dimension fastest */
static void mm_batch_step(int nd, int64_t *idx, const int64_t *bs, int64_t (*bst)[SMELT_MAX_DIMS], int64_t off[3])
{
    for (int o = 0; o < 3; o++) {
        off[o] = 0;
        for (int d = 0; d < nd; d++)
            off[o] += idx[d] * bst[o][d];
    }
    for (int d = nd - 1; d >= 0 && ++idx[d] == bs[d]; d--)
        idx[d] = 0;
}

/* A matmul on a device plan: the backend's batched product (cuBLAS) over
 * the batch dimensions left after merging those every operand walks with
 * one stride: a strided batch of the innermost a call where there are at
 * most MM_STRIDED_CALLS_MAX of them, else calls that list every matrix's
 * address.  Operands as they lie (a transpose flag, a leading dimension);
 * a layout BLAS cannot read (a stepped or reversed inner axis) is an
 * error that says to pass a contiguous tensor. */
static int run_matmul_device(smelt_plan *p, smelt__mmjob *j)
{
    const smelt__view *A = &j->w[0], *B = &j->w[1], *C = &j->w[2];
    int nb = j->nb, nm = 0;
    int64_t bs[SMELT_MAX_DIMS], bst[3][SMELT_MAX_DIMS]; /* merged batch dims, outermost first */
    for (int d = 0; d < nb; d++) {
        int64_t s[3];
        for (int o = 0; o < 3; o++) {
            int od = d - (nb - (j->w[o].ndim - 2));
            s[o] = od >= 0 && j->w[o].shape[od] != 1 ? j->w[o].strides[od] : 0;
        }
        bool merge = nm > 0;
        for (int o = 0; o < 3 && merge; o++)
            merge = bst[o][nm - 1] == s[o] * j->cshape[d];
        if (j->cshape[d] == 1)
            continue;
        if (merge) {
            bs[nm - 1] *= j->cshape[d];
            for (int o = 0; o < 3; o++)
                bst[o][nm - 1] = s[o];
        } else {
            bs[nm] = j->cshape[d];
            for (int o = 0; o < 3; o++)
                bst[o][nm] = s[o];
            nm++;
        }
    }
    smelt__gemm g = {.dt = j->dt, .M = j->M, .N = j->N, .K = j->K, .batch = nm ? bs[nm - 1] : 1};
    bool ok = mm_direct(SMELT_F32, j->M, j->K, A->strides[A->ndim - 2], A->strides[A->ndim - 1], &g.ta, &g.lda) &&
              mm_direct(SMELT_F32, j->K, j->N, B->strides[B->ndim - 2], B->strides[B->ndim - 1], &g.tb, &g.ldb);
    if (j->K == 0) /* an empty sum: zeros (any layout: nothing is read) */
        ok = true, g.ta = g.tb = false, g.lda = 1, g.ldb = SMELT_MAX(j->N, 1);
    int64_t scm = C->strides[C->ndim - 2], scn = C->strides[C->ndim - 1];
    g.ldc = j->M == 1 ? SMELT_MAX(j->N, 1) : scm;
    if (!ok || (scn != 1 && j->N > 1) || (scm < j->N && j->M > 1))
        return smelt__err(p->ctx, SMELT_ERR_UNSUPPORTED, "matmul on %s: an operand's strides are no layout cuBLAS "
                          "reads (a stepped or reversed inner axis); pass a contiguous tensor", p->be->iface->name);
    g.sa = nm ? bst[0][nm - 1] : 0, g.sb = nm ? bst[1][nm - 1] : 0, g.sc = nm ? bst[2][nm - 1] : 0;
    int64_t total = smelt__numel(nm, bs), idx[SMELT_MAX_DIMS] = {0}, outer = nm ? total / bs[nm - 1] : 1, off[3];
    size_t es = smelt__dtypes[j->dt].size;
    if (nm <= 1 || outer <= MM_STRIDED_CALLS_MAX) { /* a strided batch a call, MM_PTRS_MAX matrices at most */
        int st = SMELT_OK;
        int64_t inner = g.batch;
        for (int64_t t = 0; t < outer && !st; t++) {
            mm_batch_step(nm - 1, idx, bs, bst, off); /* (nm 0: no dimension) */
            for (int64_t b0 = 0; b0 < inner && !st; b0 += MM_PTRS_MAX) {
                g.batch = SMELT_MIN(inner - b0, MM_PTRS_MAX);
                g.A = A->data + (off[0] + b0 * g.sa) * (int64_t)es, g.B = B->data + (off[1] + b0 * g.sb) * (int64_t)es;
                g.C = C->data + (off[2] + b0 * g.sc) * (int64_t)es;
                st = p->be->iface->gemm(p->be, &g);
            }
        }
        return st;
    }
    /* batch dimensions that no one stride walks, more than a few batches of
     * the innermost (attention's heads written into the merged output: 32
     * calls of 16 matrices of 512 x 64 would each leave most of the GPU
     * idle): every matrix's address, MM_PTRS_MAX matrices a call */
    int64_t chunk = SMELT_MIN(total, MM_PTRS_MAX);
    const void **ptrs = malloc(sizeof *ptrs * 3 * (size_t)chunk);
    if (!ptrs)
        return smelt__err(p->ctx, SMELT_ERR_NOMEM, "matmul: out of memory for %lld matrices' addresses",
                          (long long)chunk);
    int st = SMELT_OK;
    for (int64_t t0 = 0; t0 < total && !st; t0 += chunk) {
        int64_t n = SMELT_MIN(chunk, total - t0);
        for (int64_t t = 0; t < n; t++) {
            const char *base[3] = {A->data, B->data, C->data};
            mm_batch_step(nm, idx, bs, bst, off);
            for (int o = 0; o < 3; o++)
                ptrs[o * n + t] = base[o] + off[o] * (int64_t)es;
        }
        g.batch = n, g.ptrs = ptrs;
        st = p->be->iface->gemm(p->be, &g);
    }
    free(ptrs);
    return st;
}

/* A matmul (a library kernel): BLAS on each block of rows of each matrix
 * of the batch, operands read as they lie where BLAS can (a transpose flag,
 * a leading dimension), else packed; a result BLAS cannot write in place
 * (f16/bf16, strided) goes through f32/contiguous memory. */
int smelt__mm_setup(smelt_plan *p, runstate *rs, int ki, smelt__mmjob *j)
{
    smelt__pkernel *k = &p->kern[ki];
    int v = k->cl.members[0];
    const smelt__inst *x = &p->prog.v[v];
    for (int o = 0; o < 3; o++) {
        int u = o < 2 ? x->in[o] : v, st;
        st = smelt__value_view(p, rs, u, &j->w[o], j->sc[o]);
        if (st)
            return st;
    }
    const smelt__rshape *C = &p->rs[v];
    j->ctx = p->ctx;
    j->nb = C->ndim - 2;
    j->cshape = C->shape;
    j->M = C->shape[j->nb], j->N = C->shape[j->nb + 1], j->K = j->w[0].shape[j->w[0].ndim - 1];
    j->dt = x->dtype;
    j->st = SMELT_OK;
    j->mats = smelt__numel(j->nb, C->shape);
    j->tasks = 0;
    if (j->M == 0 || j->N == 0 || j->mats == 0)
        return SMELT_OK;
    /* square tiles, the largest side that makes MM_TASKS tiles (at least MM_SIDE_MIN) */
    int64_t side = MM_SIDE_MAX;
    while (side > MM_SIDE_MIN && j->mats * ((j->M + side - 1) / side) * ((j->N + side - 1) / side) < MM_TASKS)
        side /= 2;
    j->tm = SMELT_MIN(j->M, side), j->tn = SMELT_MIN(j->N, side);
    j->ncb = (j->N + j->tn - 1) / j->tn;
    j->tasks = j->mats * (j->blocks = (j->M + j->tm - 1) / j->tm * j->ncb);
    return SMELT_OK;
}

int smelt__run_matmul(smelt_plan *p, runstate *rs, int ki)
{
    static __thread smelt__mmjob j;
    int st = smelt__mm_setup(p, rs, ki, &j);
    if (st || !j.tasks)
        return st;
    if (p->be->iface->launch)
        return run_matmul_device(p, &j);
    if ((st = smelt__blas_check(p->ctx)))
        return st;
    smelt__blas_single_threaded();
    pthread_mutex_init(&j.mu, NULL);
    int threads = smelt_ctx_threads(p->ctx);
    if (threads <= 1 || j.tasks == 1 || j.M * j.N * SMELT_MAX(j.K, 1) < (1 << 18)) {
        for (int64_t t = 0; t < j.tasks && !j.st; t++)
            mm_task(&j, t);
    } else {
        if (!p->ctx->pool)
            p->ctx->pool = smelt__pool_new(threads);
        smelt__pool_run(p->ctx->pool, mm_task, &j, j.tasks);
    }
    pthread_mutex_destroy(&j.mu);
    return j.st;
}
