/* The executor: checks inputs against the plan, infers run-time shapes,
 * allocates intermediates and runs the kernels in order on the thread pool. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "exec.h"

/* Tensors smaller than this stay on the calling thread. */
#define SMALL_ELEMS 32768
#define MIN_CHUNK 16384

/* One launch of a host kernel over [0, n), in chunks on the thread pool.
 * Reductions use the extra room: two more pointers (chunk results and
 * their indices) and shape[rank], the phase (elementwise kernels: the
 * streaming-store flag). */
typedef struct launch {
    smelt__kfn fn;
    char *ptrs[SMELT_MAX_KERNEL_OPERANDS + 3]; /* (+ 2: an indexed read's gather block) */
    int64_t shape[SMELT_MAX_DIMS + 1];
    int64_t strides[(SMELT_MAX_KERNEL_OPERANDS + 1) * SMELT_MAX_DIMS]; /* (+ 1: a device's gather block) */
    int64_t n, chunk;
    bool fence; /* the kernel makes streaming stores: fence them after each call */
} launch;

/* One call of l's kernel over [s, e).  Streaming (non-temporal) stores are
 * weakly ordered: the thread that made them fences them once, here, before
 * the pool (or the caller) sees the call done; a fence inside the kernel
 * after each run of a row would wait for the stores to reach memory while
 * the next row's work could have gone on (a tenth of a softmax's time). */
static void call_kernel(const launch *l, int64_t s, int64_t e)
{
    l->fn(s, e, l->ptrs, l->shape, l->strides);
#if defined(__x86_64__) && defined(__GNUC__)
    if (l->fence)
        __builtin_ia32_sfence();
#endif
}

static void run_chunk(void *arg, int64_t c)
{
    launch *l = arg;
    int64_t s = c * l->chunk, e = SMELT_MIN(l->n, s + l->chunk);
    call_kernel(l, s, e);
}

/* arange's values, laid out once in memory the plan keeps (the device's
 * for a device plan) */
static int arange_view(smelt_plan *p, int v, smelt__view *out, int64_t *scratch)
{
    const smelt__inst *x = &p->prog.v[v];
    size_t es = smelt__dtypes[x->dtype].size, bytes = (size_t)x->shape[0] * es;
    if (!p->buf[v]) {
        char *host = malloc(bytes ? bytes : 1);
        if (!host || !(p->buf[v] = smelt__be_alloc(p->be, bytes ? bytes : 1))) {
            free(host);
            return smelt__err(p->ctx, SMELT_ERR_NOMEM, "cannot allocate %zu bytes for arange", bytes);
        }
        p->bufsize[v] = bytes;
        for (int64_t i = 0; i < x->shape[0]; i++)
            smelt__elem_store(x->dtype, host + (size_t)i * es, (double)i);
        int st = SMELT_OK;
        if (p->be->iface->copy)
            st = p->be->iface->copy(p->be, p->buf[v], host, bytes, SMELT_COPY_H2D);
        else
            memcpy(p->buf[v], host, bytes);
        free(host);
        if (st)
            return st;
    }
    scratch[0] = 1;
    *out = (smelt__view){p->buf[v], 1, x->shape, scratch};
    return SMELT_OK;
}

/* A tensor constant's values: the graph's own bytes on the host; a device
 * plan's copy, made once. */
static int tensor_view(smelt_plan *p, int v, smelt__view *out, int64_t *scratch)
{
    const smelt__inst *x = &p->prog.v[v];
    const smelt__blob *b = p->prog.blobs[x->ival];
    smelt__contig_strides(x->ndim, x->shape, scratch);
    if (!p->be->iface->launch) {
        *out = (smelt__view){(char *)b->data, x->ndim, x->shape, scratch};
        return SMELT_OK;
    }
    if (!p->buf[v]) {
        if (!(p->buf[v] = smelt__be_alloc(p->be, b->bytes ? b->bytes : 1)))
            return smelt__err(p->ctx, SMELT_ERR_NOMEM, "cannot allocate %zu bytes of device memory for a constant",
                              b->bytes);
        p->bufsize[v] = b->bytes;
        int st = p->be->iface->copy(p->be, p->buf[v], b->data, b->bytes, SMELT_COPY_H2D);
        if (st) {
            smelt__be_free(p->be, p->buf[v]);
            p->buf[v] = NULL;
            return st;
        }
    }
    *out = (smelt__view){p->buf[v], x->ndim, x->shape, scratch};
    return SMELT_OK;
}

/* A view's elements where its operand's lie (strides in scratch); a reshape
 * that the operand's run-time strides cannot express (a strided input) is
 * gathered into memory the plan keeps, on the host. */
static int view_view(smelt_plan *p, runstate *rs, int v, smelt__view *out, int64_t *scratch)
{
    const smelt__inst *x = &p->prog.v[v];
    const smelt__rshape *r = &p->rs[v];
    int64_t bs[SMELT_MAX_DIMS], off = 0;
    smelt__view b;
    int st = smelt__value_view(p, rs, x->in[0], &b, bs);
    if (st)
        return st;
    size_t es = smelt__dtypes[x->dtype].size;
    if (smelt__view_strides(x->op, x->vp, r->ndim, r->shape, b.ndim, b.shape, b.strides, &off, scratch)) {
        *out = (smelt__view){b.data + off * (int64_t)es, r->ndim, r->shape, scratch};
        return SMELT_OK;
    }
    if (p->be->iface->launch)
        return smelt__err(p->ctx, SMELT_ERR_INVALID_ARG, "%s: its operand's run-time strides (a non-contiguous "
                          "input) cannot be reshaped without a copy; pass a contiguous tensor", smelt__ops[x->op].name);
    int64_t n = smelt__numel(r->ndim, r->shape);
    size_t bytes = (size_t)n * es;
    if (p->bufsize[v] < bytes || !p->buf[v]) {
        smelt__be_free(p->be, p->buf[v]);
        p->buf[v] = smelt__be_alloc(p->be, bytes ? bytes : 1);
        p->bufsize[v] = p->buf[v] ? bytes : 0;
        if (!p->buf[v])
            return smelt__err(p->ctx, SMELT_ERR_NOMEM, "cannot allocate %zu bytes for a reshaped input", bytes);
    }
    for (int64_t i = 0; i < n; i++) { /* the operand's elements in row-major order */
        int64_t o = 0, t = i;
        for (int d = b.ndim - 1; d >= 0; d--) {
            o += (t % b.shape[d]) * b.strides[d];
            t /= b.shape[d];
        }
        memcpy((char *)p->buf[v] + (size_t)i * es, b.data + o * (int64_t)es, es);
    }
    smelt__contig_strides(r->ndim, r->shape, scratch);
    *out = (smelt__view){p->buf[v], r->ndim, r->shape, scratch};
    return SMELT_OK;
}

/* Value v in the memory of the output that views it (out: that output's
 * tensor, contiguous or made so by check_overlaps): the views' inverses
 * applied from the output down to v, a transpose back, a reshape back. */
static int output_alias(smelt_plan *p, int v, smelt__view *out, int64_t *scratch)
{
    int chain[64], n = 0;
    for (int y = p->prog.outputs[p->out_slot[v]]; y != v && n < 64; y = p->prog.v[y].in[0])
        chain[n++] = y;
    int64_t st[SMELT_MAX_DIMS], off = 0;
    memcpy(st, out->strides, sizeof(int64_t) * (size_t)out->ndim);
    for (int k = 0; k < n; k++) {
        const smelt__inst *x = &p->prog.v[chain[k]];
        const smelt__rshape *xr = &p->rs[chain[k]], *ur = &p->rs[x->in[0]];
        int64_t ust[SMELT_MAX_DIMS];
        if (x->op == SMELT_OP_PERMUTE) {
            for (int d = 0; d < x->ndim; d++)
                ust[x->vp[d]] = st[d];
        } else if (!smelt__view_strides(SMELT_OP_RESHAPE, NULL, ur->ndim, ur->shape, xr->ndim, xr->shape, st, &off,
                                        ust)) {
            return smelt__err(p->ctx, SMELT_ERR_RUNTIME, "output %d: its memory cannot hold the value it views "
                              "(a reshape strides cannot undo)", p->out_slot[v]);
        }
        memcpy(st, ust, sizeof st);
    }
    memcpy(scratch, st, sizeof(int64_t) * (size_t)p->rs[v].ndim);
    *out = (smelt__view){out->data, p->rs[v].ndim, p->rs[v].shape, scratch};
    return SMELT_OK;
}

/* A constant operand (of any shape: all its elements are one value) as a
 * view of one element, strides 0, in memory the plan keeps (the device's
 * for a device plan). */
static int const_view(smelt_plan *p, int v, const smelt__rshape *r, smelt__view *out, int64_t *zeros)
{
    const smelt__inst *c = &p->prog.v[v];
    char val[8] = {0}, *cell = NULL;
    smelt__elem_store(c->dtype, val, smelt__is_float(c->dtype) ? c->fval : (double)c->ival);
    if (!smelt__is_float(c->dtype))
        memcpy(val, &c->ival, smelt__dtypes[c->dtype].size); /* every bit of an i64 (little-endian) */
    int st = smelt__value_cell(p, v, val, &cell);
    memset(zeros, 0, sizeof(int64_t) * SMELT_MAX_DIMS);
    *out = (smelt__view){cell, r->ndim, r->shape, zeros};
    return st;
}

int smelt__value_view(smelt_plan *p, runstate *rs, int v, smelt__view *out, int64_t *scratch)
{
    const smelt__inst *x = &p->prog.v[v];
    /* a constant (of any shape; a plan output of one is a copy's): its one
     * element, strides 0 (as a buffer of its shape it would replace the
     * 8-byte cell by memory nobody writes: a gather from x - x read its
     * index's element of that, 2026-11-29) */
    if (x->op == SMELT_OP_CONST)
        return const_view(p, v, &p->rs[v], out, scratch);
    if (x->op == SMELT_OP_ARANGE)
        return arange_view(p, v, out, scratch);
    if (x->op == SMELT_OP_TENSOR)
        return tensor_view(p, v, out, scratch);
    if (smelt__is_view(x->op))
        return view_view(p, rs, v, out, scratch);
    if (x->op == SMELT_OP_INPUT) {
        smelt_tensor *t = rs->inputs[x->input_index];
        *out = (smelt__view){t->data, t->ndim, t->shape, t->strides};
        return SMELT_OK;
    }
    if (p->out_slot[v] >= 0) {
        smelt_tensor *t = rs->outputs[p->out_slot[v]];
        *out = (smelt__view){t->data, t->ndim, t->shape, t->strides};
        return p->prog.outputs[p->out_slot[v]] == v ? SMELT_OK : output_alias(p, v, out, scratch);
    }
    const smelt__rshape *r = &p->rs[v];
    smelt__contig_strides(r->ndim, r->shape, scratch);
    if (p->moff[v] >= 0) { /* in the arena (opt_level >= 2; plan_memory made it hold it) */
        *out = (smelt__view){p->arena + p->moff[v], r->ndim, r->shape, scratch};
        return SMELT_OK;
    }
    size_t bytes = (size_t)smelt__numel(r->ndim, r->shape) * smelt__dtypes[x->dtype].size;
    if (p->bufsize[v] < bytes || !p->buf[v]) {
        smelt__be_free(p->be, p->buf[v]);
        p->buf[v] = smelt__be_alloc(p->be, bytes);
        p->bufsize[v] = p->buf[v] ? bytes : 0;
        if (!p->buf[v])
            return smelt__err(p->ctx, SMELT_ERR_NOMEM, "cannot allocate %zu bytes for an intermediate", bytes);
    }
    *out = (smelt__view){p->buf[v], r->ndim, r->shape, scratch};
    return SMELT_OK;
}

/* Device dialects have 32-bit index variants: usable when the element count
 * and every operand's largest offset fit in 31 bits (strides >= 0). */
static bool fits_idx32(int64_t N, int rank, const int64_t *S, int n, int64_t (*st)[SMELT_MAX_DIMS])
{
    if (N > INT32_MAX)
        return false;
    for (int o = 0; o < n; o++) {
        int64_t span = 0;
        for (int d = 0; d < rank; d++) {
            if (st[o][d] < 0 || st[o][d] > INT32_MAX)
                return false;
            span += (S[d] - 1) * st[o][d];
            if (span > INT32_MAX)
                return false;
        }
    }
    return true;
}

/* The last-level cache's size in bytes: sysfs's largest cache level of cpu0
 * (sysconf's figure can be the whole package's), else sysconf, else 32 MiB. */
static int64_t llc_bytes(void)
{
    static int64_t cached; /* 0: not read yet */
    int64_t v = __atomic_load_n(&cached, __ATOMIC_RELAXED);
    if (v)
        return v;
    int best_level = 0;
    for (int i = 0; i < 8; i++) {
        char path[96], buf[32];
        int level = 0;
        long long kb = 0;
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/level", i);
        FILE *f = fopen(path, "r");
        if (!f)
            continue;
        if (fscanf(f, "%d", &level) != 1)
            level = 0;
        fclose(f);
        snprintf(path, sizeof path, "/sys/devices/system/cpu/cpu0/cache/index%d/size", i);
        if (level > best_level && (f = fopen(path, "r"))) {
            if (fgets(buf, sizeof buf, f) && sscanf(buf, "%lld", &kb) == 1 && kb > 0) {
                best_level = level;
                v = (int64_t)kb * (strchr(buf, 'M') ? 1048576 : 1024);
            }
            fclose(f);
        }
    }
#ifdef _SC_LEVEL3_CACHE_SIZE
    if (!v && sysconf(_SC_LEVEL3_CACHE_SIZE) > 0)
        v = sysconf(_SC_LEVEL3_CACHE_SIZE);
#endif
    if (!v)
        v = (int64_t)32 << 20;
    __atomic_store_n(&cached, v, __ATOMIC_RELAXED);
    return v;
}

/* Outputs at most this large are kept in the cache (stores through it)
 * even where the last-level cache is larger: a VM sees its host's whole
 * last-level cache (300 MB on a 2-core Xeon VM), of which it holds far
 * less.  There, with streaming, a 16M f32 add took 6.05-6.68 ms against
 * 9.05-10.48 (4M: 1.01-1.12 against 1.35-1.47), chain8 10.27 against
 * 13.66, layernorm 10.34 against 12.85 (4096 x 4096), 2 threads,
 * 2026-11-29.  An AMD EPYC VM's reads 32 MB: unchanged there. */
#define STREAM_KEEP_MAX ((int64_t)32 << 20)

/* Streaming (non-temporal) stores for kernel ki: its outputs are contiguous
 * rows, larger than the last-level cache (or STREAM_KEEP_MAX) and not read
 * by the next kernel (they would be evicted before any use; streaming skips
 * reading each line before writing it).  The outputs' whole size counts,
 * also where a launch covers a part of them: a concat's regions of 32 MiB
 * in a 64 MiB output went through the cache, 4096 x 4096 f32
 * relu(concat) 1.5x the time (2026-11-29).  C kernels read the flag from
 * shape[rank]; other kernels ignore it. */
static bool stream_outputs(const smelt_plan *p, const runstate *rs, int ki, int rank,
                           const uint8_t *mode)
{
    const smelt__pkernel *k = &p->kern[ki];
    if (rank >= SMELT_MAX_DIMS || !rs->stream)
        return false;
    int64_t bytes = 0;
    for (int o = k->cl.nin; o < k->cl.nin + k->cl.nout; o++)
        if (mode[o] != SMELT_MODE_CONTIG)
            return false;
    if (rs->stream == 1)
        return true;
    for (int o = 0; o < k->cl.nout; o++) {
        const smelt__rshape *r = &p->rs[k->cl.outputs[o]];
        bytes += smelt__numel(r->ndim, r->shape) * (int64_t)smelt__dtypes[p->prog.v[k->cl.outputs[o]].dtype].size;
    }
    if (bytes <= SMELT_MIN(llc_bytes(), STREAM_KEEP_MAX))
        return false;
    if (ki + 1 < p->nkern) {
        const smelt__pkernel *next = &p->kern[ki + 1];
        for (int i = 0; i < next->cl.nin; i++)
            for (int o = 0; o < k->cl.nout; o++)
                if (smelt__reads_base(&p->prog, next->cl.inputs[i], k->cl.outputs[o]))
                    return false;
    }
    return true;
}

/* ---- reductions --------------------------------------------------------
 * A reduction kernel (src/codegen/emit-reduce.c, kernel_reduce.*.in) runs over its
 * results; when there are few results and long rows, over the rows'
 * chunks first (phase 1, each chunk's result to a scratch array), then over
 * the results (phase 2, combining the chunks in order): the same order of
 * combination, so the same bits, on any number of threads. */
/* Items per call when red_run runs n items of per_item elements each. */
static int64_t red_chunk(int64_t n, int64_t per_item, int threads)
{
    if (threads <= 1 || n * per_item < SMALL_ELEMS || n <= 1)
        return SMELT_MAX(n, 1);
    return SMELT_MAX((n + threads * 4 - 1) / (threads * 4), (MIN_CHUNK + per_item - 1) / per_item);
}

static void red_run(smelt_plan *p, launch *l, int64_t n, int64_t per_item, int threads)
{
    l->n = n;
    l->chunk = red_chunk(n, per_item, threads);
    if (l->chunk >= n) {
        call_kernel(l, 0, n);
        return;
    }
    if (!p->ctx->pool)
        p->ctx->pool = smelt__pool_new(threads);
    smelt__pool_run(p->ctx->pool, run_chunk, l, (n + l->chunk - 1) / l->chunk);
}

/* The 8-byte cell of value v that holds one element (bits: a constant's
 * or a pad's value), laid out once in memory the plan keeps (the device's
 * for a device plan). */
int smelt__value_cell(smelt_plan *p, int v, const void *bits, char **cell)
{
    if (!p->buf[v]) {
        if (!(p->buf[v] = smelt__be_alloc(p->be, 8)))
            return smelt__err(p->ctx, SMELT_ERR_NOMEM, "out of memory");
        p->bufsize[v] = 8;
        int st = p->be->iface->copy ? p->be->iface->copy(p->be, p->buf[v], bits, 8, SMELT_COPY_H2D)
                                    : (memcpy(p->buf[v], bits, 8), SMELT_OK);
        if (st) {
            smelt__be_free(p->be, p->buf[v]);
            p->buf[v] = NULL;
            return st;
        }
    }
    *cell = p->buf[v];
    return SMELT_OK;
}

int smelt__reduce_views(smelt_plan *p, runstate *rs, int ki, smelt__view *w, int64_t (*scratch)[SMELT_MAX_DIMS],
                       bool *none, bool *pieces)
{
    *none = *pieces = false;
    smelt__pkernel *k = &p->kern[ki];
    int rj = smelt__red_member(&p->prog, &k->cl), ri = k->cl.members[rj];
    const smelt__inst *x = &p->prog.v[ri]; /* producers, the reduction, its epilogue */
    if (!k->cl.nout) { /* a dead reduction (kept at opt_level 0) */
        *none = true;
        return SMELT_OK;
    }
    const smelt__rshape *A = &p->rs[x->in[0]];
    const smelt__rshape *Y = &p->rs[ri]; /* the result's shape */
    int64_t nred = smelt__red_count(A->ndim, A->shape, x->axes), nout = smelt__numel(Y->ndim, Y->shape);
    for (int j = rj; j < k->cl.nmem && nred == 0; j++) { /* (a row program's every reduction) */
        const smelt__inst *xj = &p->prog.v[k->cl.members[j]];
        int ident = smelt__ops[xj->op].ident;
        if (smelt__is_reduce(xj->op) && (ident == SMELT_IDENT_LOWEST || ident == SMELT_IDENT_HIGHEST)) {
            char txt[SMELT_SHAPE_STR_MAX];
            return smelt__err(p->ctx, SMELT_ERR_SHAPE, "%s of an empty array: the run-time shape %s has a reduced "
                              "axis of size 0, and %s has no identity", smelt__ops[xj->op].name,
                              smelt__shape_fmt(txt, A->ndim, A->shape), smelt__ops[xj->op].name);
        }
    }
    if (nout == 0) {
        *none = true;
        return SMELT_OK;
    }
    smelt__rshape rk, rn, gk; /* a row program's results' shapes: with keepdims and without; the graph's */
    const smelt__inst *Ag = &p->prog.v[x->in[0]];
    if (k->desc.multi) {
        smelt__red_shape(A->ndim, A->shape, x->axes, true, &rk.ndim, rk.shape);
        smelt__red_shape(A->ndim, A->shape, x->axes, false, &rn.ndim, rn.shape);
        smelt__red_shape(Ag->ndim, Ag->shape, x->axes, true, &gk.ndim, gk.shape);
    }
    for (int j = 0; j < k->cl.nmem; j++) { /* producers: the operand's shape; epilogue: the result's
                                             * (a row program: either, reductions aside) */
        const smelt__rshape *o = &p->rs[k->cl.members[j]], *want = j < rj ? A : Y;
        if (j == rj)
            continue;
        bool bad = false;
        if (k->desc.multi && smelt__is_reduce(p->prog.v[k->cl.members[j]].op)) {
            const smelt__rshape *oa = &p->rs[p->prog.v[k->cl.members[j]].in[0]];
            bad = oa->ndim != A->ndim || memcmp(oa->shape, A->shape, sizeof(int64_t) * (size_t)oa->ndim);
            want = o; /* (its own shape follows from its operand's) */
        } else if (k->desc.multi) { /* the operand's shape, or the results' with or without keepdims,
                                      * as in the graph */
            const smelt__inst *m = &p->prog.v[k->cl.members[j]];
            want = m->ndim == Ag->ndim && !memcmp(m->shape, Ag->shape, sizeof(int64_t) * (size_t)m->ndim) ? A
                   : m->ndim == gk.ndim && !memcmp(m->shape, gk.shape, sizeof(int64_t) * (size_t)m->ndim) ? &rk
                                                                                                           : &rn;
        }
        if (bad || o->ndim != want->ndim || memcmp(o->shape, want->shape, sizeof(int64_t) * (size_t)o->ndim))
            return smelt__err(p->ctx, SMELT_ERR_SHAPE,
                              "run-time shapes differ inside a fused kernel (the inputs do not "
                              "keep the graph's broadcast pattern)");
    }
    /* operands: the inputs (the reduction's operand alone when nothing is
     * fused), the producers' full-size outputs, then the outputs at the
     * result's shape (the reduced value if read elsewhere, the epilogue's) */
    int nin = k->cl.nin, n = nin + k->cl.nout;
    for (int o = 0; o < n; o++) {
        int v = o < nin ? k->cl.inputs[o] : k->cl.outputs[o - nin], stt;
        if (o < nin && smelt__has_pieces(&p->prog, v)) {
            *pieces = true;
            stt = smelt__pieces_view(p, v, &w[o], scratch[o]);
        } else /* (a constant: one a pass left too large to fold) */
            stt = smelt__value_view(p, rs, v, &w[o], scratch[o]);
        if (stt)
            return stt;
    }
    return SMELT_OK;
}

static int run_reduce(smelt_plan *p, runstate *rs, int ki, bool *split)
{
    int64_t scratch[SMELT_MAX_KERNEL_OPERANDS][SMELT_MAX_DIMS];
    smelt__view w[SMELT_MAX_KERNEL_OPERANDS];
    bool none, pieces;
    int stt = smelt__reduce_views(p, rs, ki, w, scratch, &none, &pieces);
    if (stt || none)
        return stt;
    return pieces ? smelt__run_pieces(p, rs, ki, w, split) : smelt__reduce_box(p, rs, ki, w, NULL, split);
}

/* Device memory for a spread reduction: ncnt counters, zeroed (the kernel
 * leaves its counters zero), then from byte k->dscratch_part part bytes of
 * lane or chunk results.  Kept on the kernel: a later run whose counters
 * and results fit (another region of a concat, another shape) reuses it. */
static int dev_red_scratch(smelt_plan *p, smelt__pkernel *k, smelt__backend *be, size_t part, int64_t ncnt)
{
    size_t cnt = ((size_t)ncnt * 4 + 15) & ~(size_t)15;
    if (k->dscratch && k->dscratch_be == be && cnt <= k->dscratch_part && part <= k->dscratch_bytes - k->dscratch_part)
        return SMELT_OK;
    if (k->dscratch && k->dscratch_be == be) { /* grow both parts */
        cnt = SMELT_MAX(cnt, k->dscratch_part);
        part = SMELT_MAX(part, k->dscratch_bytes - k->dscratch_part);
    }
    if (k->dscratch)
        smelt__be_free(k->dscratch_be, k->dscratch);
    k->dscratch = NULL;
    k->dscratch_bytes = k->dscratch_part = 0;
    void *zero = calloc(cnt, 1);
    if (!zero)
        return smelt__err(p->ctx, SMELT_ERR_NOMEM, "out of memory");
    char *d = smelt__be_alloc(be, cnt + part);
    int stt = !d ? smelt__err(p->ctx, SMELT_ERR_NOMEM, "out of device memory for a reduction's "
                                                      "partial results (%zu bytes)", cnt + part)
                 : be->iface->copy(be, d, zero, cnt, SMELT_COPY_H2D);
    free(zero);
    if (stt) {
        if (d)
            smelt__be_free(be, d);
        return stt;
    }
    k->dscratch = d, k->dscratch_bytes = cnt + part, k->dscratch_be = be, k->dscratch_part = cnt;
    return SMELT_OK;
}

/* Reduction kernel ki over its operands w, whose shapes are box (the
 * reduction's operand's; NULL: the whole) where they are not broadcast. */
/* A reduction's layout at a run: its merged iteration space and the
 * variant compiled for it */
typedef struct redlayout {
    int rank;
    int64_t nout, nred;
    uint8_t mode[SMELT_MAX_KERNEL_OPERANDS], rmask;
    bool idx32;
    uint16_t spread;
    smelt__kernel *kk;
} redlayout;

/* Reduction kernel ki over its operands w (shapes box where not
 * broadcast): its layout and l's kernel, operands, shape and strides */
static int reduce_layout(smelt_plan *p, int ki, smelt__view *w, const int64_t *box, launch *l, redlayout *y,
                         bool *split)
{
    smelt__pkernel *k = &p->kern[ki];
    int n = k->cl.nin + k->cl.nout;
    int64_t S[SMELT_MAX_DIMS], st[SMELT_MAX_KERNEL_OPERANDS][SMELT_MAX_DIMS];
    unsigned axes;
    int r = smelt__kernel_strides_box(p, ki, w, box, S, st, &axes);
    y->nred = y->nout = 1;
    for (int d = 0; d < r; d++)
        *(axes >> d & 1u ? &y->nred : &y->nout) *= S[d];
    int rank = y->rank = smelt__merge_reduce_layout(r, S, axes, n, st, y->mode, &y->rmask);
    y->idx32 = p->be->iface->target.dialect->device && y->nout <= INT32_MAX / 32 &&
               fits_idx32(smelt__numel(rank, S), rank, S, n, st);
    y->spread = smelt__red_spread(p, ki, y->nout, y->nred, rank, y->rmask);
    int stt = smelt__plan_variant(p, ki, rank, y->mode, y->idx32, y->rmask, y->spread, &y->kk, split);
    if (stt || *split)
        return stt;
    l->fn = y->kk->fn;
    l->fence = false;
    for (int o = 0; o < n; o++)
        l->ptrs[o] = w[o].data;
    l->ptrs[n] = l->ptrs[n + 1] = NULL;
    l->ptrs[n + 2] = (char *)k->gx; /* (a CPU row program's indexed reads) */
    memcpy(l->shape, S, sizeof(int64_t) * (size_t)rank);
    for (int o = 0; o < n; o++)
        memcpy(l->strides + o * rank, st[o], sizeof(int64_t) * (size_t)rank);
    l->shape[rank] = 0;
    return SMELT_OK;
}

/* A row program's row cache: bytes a call (a multiple of 64: its values
 * aligned, src/codegen/emit-rows.c, smelt__rows_analyse) */
static size_t rows_slot(const smelt__pkernel *k, int64_t nred)
{
    return ((size_t)k->rows_cache * (size_t)nred + 63) & ~(size_t)63;
}

/* Kernel k's scratch (a reduction's chunk results, a row program's row
 * caches, a chain's tiles), at least bytes, kept for the next run.  On a
 * 64-byte line: each call's or thread's part starts on its own line (their
 * sizes are multiples of 64), so threads writing their parts never write
 * one line.  From malloc's 16-byte alignment, rows of 384 f32 in a
 * layernorm shared a line between two calls' row caches, written every
 * row: 2 threads took 1.2x the time of 1 where rows of 3072 took 0.6x
 * (2026-11-29). */
int smelt__kernel_scratch(smelt_plan *p, smelt__pkernel *k, size_t bytes)
{
    if (!bytes || k->scratch_bytes >= bytes)
        return SMELT_OK;
    free(k->scratch);
    k->scratch_bytes = 0;
    if (!(k->scratch = smelt__aligned_alloc(bytes)))
        return smelt__err(p->ctx, SMELT_ERR_NOMEM, "out of memory");
    k->scratch_bytes = bytes;
    return SMELT_OK;
}

int smelt__rows_call(smelt_plan *p, int ki, smelt__view *w, const int64_t *box, smelt__rowcall *rc, bool *split)
{
    static __thread launch l;
    redlayout y;
    int stt = reduce_layout(p, ki, w, box, &l, &y, split);
    if (stt || *split)
        return stt;
    const smelt__pkernel *k = &p->kern[ki];
    rc->fn = l.fn;
    rc->n = k->cl.nin + k->cl.nout;
    rc->rows = y.nout;
    rc->slot = rows_slot(k, y.nred);
    memcpy(rc->shape, l.shape, sizeof(int64_t) * (size_t)y.rank);
    memcpy(rc->strides, l.strides, sizeof(int64_t) * (size_t)(y.rank * rc->n));
    rc->shape[y.rank] = y.nout * 2; /* one call: every row (and no streaming stores) */
    return SMELT_OK;
}

int smelt__reduce_box(smelt_plan *p, runstate *rs, int ki, smelt__view *w, const int64_t *box, bool *split)
{
    smelt__pkernel *k = &p->kern[ki];
    int n = k->cl.nin + k->cl.nout;
    static __thread launch l;
    redlayout y;
    int stt = reduce_layout(p, ki, w, box, &l, &y, split);
    if (stt || *split)
        return stt;
    smelt__kernel *kk = y.kk;
    int rank = y.rank;
    int64_t nout = y.nout, nred = y.nred;
    uint16_t spread = y.spread;
    bool idx32 = y.idx32;
    const uint8_t *mode = y.mode;
    if (kk->backend->iface->launch) { /* a warp per result (the block form of a row program: a block per row) */
        smelt__devlaunch dl = {0, n, rank, idx32, l.ptrs, l.shape, l.strides, NULL, NULL, 0, 0};
        size_t part;
        int64_t ncnt;
        smelt__red_grid(p, ki, spread, nout, nred, &dl, &part, &ncnt); /* (launch.c) */
        if (spread && !k->desc.multi) { /* chunk results and counters in device memory */
            int stt2 = dev_red_scratch(p, k, kk->backend, part, ncnt);
            if (stt2)
                return stt2;
            dl.red_part = k->dscratch + k->dscratch_part;
            dl.red_cnt = k->dscratch;
        }
        return kk->backend->iface->launch(kk->backend, kk, &dl);
    }
    int threads = smelt_ctx_threads(p->ctx);
    int64_t nchunk = (nred + SMELT_RED_CHUNK - 1) / SMELT_RED_CHUNK;
    if (k->desc.multi) { /* a row program: rows; each call's row cache in the kernel's scratch */
        int64_t per = red_chunk(nout, SMELT_MAX(nred, 1), threads), calls = (nout + per - 1) / per;
        if ((stt = smelt__kernel_scratch(p, k, rows_slot(k, nred) * (size_t)calls)))
            return stt;
        l.ptrs[n] = k->scratch;
        l.fence = stream_outputs(p, rs, ki, rank, mode);
        l.shape[rank] = per * 2 + l.fence; /* (and streaming stores) */
        red_run(p, &l, nout, SMELT_MAX(nred, 1), threads);
        return SMELT_OK;
    }
    if (threads <= 1 || nchunk <= 1 || nout >= 4 * (int64_t)threads) {
        red_run(p, &l, nout, SMELT_MAX(nred, 1), threads);
        return SMELT_OK;
    }
    /* few long rows: their chunks in parallel, then each row's in order
     * (the chunks' results in memory the kernel keeps: a run of the same
     * shapes allocates nothing) */
    size_t items = (size_t)(nout * nchunk);
    if ((stt = smelt__kernel_scratch(p, k, items * 16)))
        return stt;
    l.ptrs[n] = k->scratch, l.ptrs[n + 1] = k->scratch + items * 8;
    l.shape[rank] = 1;
    red_run(p, &l, (int64_t)items, SMELT_RED_CHUNK, threads);
    l.shape[rank] = 2;
    red_run(p, &l, nout, nchunk, 1);
    return SMELT_OK;
}

/* One launch of elementwise kernel ki over shape S (rank r) with operand
 * strides st and first elements ptrs (merged here).  tiled: a part of a
 * tiled launch (no streaming stores: the next tile's lines are near). */
static int launch_ew(smelt_plan *p, runstate *rs, int ki, int r, int64_t *S, int64_t (*st)[SMELT_MAX_DIMS],
                     char *const *ptrs, bool tiled, bool *split)
{
    smelt__pkernel *k = &p->kern[ki];
    int n = k->cl.nin + k->cl.nout;
    int64_t N = smelt__numel(r, S);
    if (N == 0)
        return SMELT_OK;
    static __thread launch l;
    uint8_t mode[SMELT_MAX_KERNEL_OPERANDS];
    int rank = smelt__merge_layout(r, S, n, st, mode);
    bool gathers = smelt__kdesc_gathers(&k->desc);
    bool dev = p->be->iface->target.dialect->device, idx32 = dev && !gathers && fits_idx32(N, rank, S, n, st);
    if (gathers && !dev && (rank = smelt__gather_rows(k, rank, S, n, st, mode)) < 0)
        return smelt__err(p->ctx, SMELT_ERR_UNSUPPORTED, "take: an indexed read at rank %d (at most %d - 1 where "
                          "the index changes along the innermost dimension)", r, SMELT_MAX_DIMS);
    uint16_t tile = dev && !gathers ? smelt__device_tile(k, rank, S, st, mode) : 0;
    smelt__kernel *kk;
    int stt = smelt__plan_variant(p, ki, rank, mode, idx32, 0, tile, &kk, split);
    if (stt || *split)
        return stt;
    l.fn = kk->fn;
    memcpy(l.ptrs, ptrs, sizeof(char *) * (size_t)n);
    l.ptrs[n + 2] = dev ? k->dgx : (char *)k->gx;
    memcpy(l.shape, S, sizeof(int64_t) * (size_t)rank);
    l.fence = rank < SMELT_MAX_DIMS && !tiled && stream_outputs(p, rs, ki, rank, mode);
    if (rank < SMELT_MAX_DIMS)
        l.shape[rank] = l.fence;
    for (int o = 0; o < n; o++)
        memcpy(l.strides + o * rank, st[o], sizeof(int64_t) * (size_t)rank);
    l.n = N;
    if (kk->backend->iface->launch) { /* a device kernel: queued on the backend's stream */
        if (gathers) { /* the gather block: one more operand, after the outputs */
            l.ptrs[n] = k->dgx;
            memset(l.strides + n * rank, 0, sizeof(int64_t) * (size_t)rank);
        }
        smelt__devlaunch dl = {N, n + gathers, rank, idx32, l.ptrs, l.shape, l.strides, NULL, NULL,
                               tile ? SMELT_TILE * SMELT_TILE / 4 : 0, 0};
        return kk->backend->iface->launch(kk->backend, kk, &dl);
    }
    int threads = smelt_ctx_threads(p->ctx);
    if (N < SMALL_ELEMS || threads <= 1) {
        call_kernel(&l, 0, N);
        return SMELT_OK;
    }
    if (!p->ctx->pool)
        p->ctx->pool = smelt__pool_new(threads);
    int64_t chunk = (N + threads * 4 - 1) / (threads * 4);
    chunk = SMELT_MAX(chunk, MIN_CHUNK);
    chunk = (chunk + 255) & ~(int64_t)255;
    l.chunk = chunk;
    smelt__pool_run(p->ctx->pool, run_chunk, &l, (N + chunk - 1) / chunk);
    return SMELT_OK;
}

/* Host kernels with an operand that walks memory across the iteration (a
 * transposed one: contiguous along an outer dimension q, strided along the
 * innermost) run in tiles of TILE_Q x TILE_P over q and the innermost
 * dimension, one kernel call per tile (a tile's row is a whole group of
 * the CC kernels: 128 elements).  Each such input's tile is first copied
 * into a contiguous block of the thread's scratch (pack_tile), and the
 * kernel reads the block.  Read in place, a tile row of a transposed
 * 4096-wide f32 matrix touches 128 lines 16 KiB apart that share a few
 * cache sets and evict each other before the next row uses them again.
 * Outputs go out with streaming stores where launch_ew's would
 * (stream_outputs: larger than the last-level cache, not read by the next
 * kernel): a tile row is 8 whole lines (4096 x 4096 f32 a.T + b: 0.88x
 * the time of cached stores).  The dimension q, or -1 when there is none. */
#define TILE_Q 64
#define TILE_P 128
#define TILE_PACK 8 /* columns copied together: their lines stay in L1 */
static int tile_dim(int rank, const int64_t *S, int n, int64_t (*st)[SMELT_MAX_DIMS], const uint8_t *mode)
{
    if (rank < 2 || S[rank - 1] < TILE_P)
        return -1;
    for (int o = 0; o < n; o++)
        for (int q = 0; mode[o] == SMELT_MODE_STRIDED && q < rank - 1; q++)
            if ((st[o][q] == 1 || st[o][q] == -1) && S[q] >= TILE_Q)
                return q;
    return -1;
}

/* The first column of the tiles: where the first output's rows reach a
 * 64-byte line, when its rows are contiguous and all start at the same
 * place in a line (else 0), so that its tile rows stream whole lines
 * (NumPy's arrays start 16 bytes past a line: 4096 x 4096 f32 a.T + b into
 * one took 1.43-1.51x the time of an aligned output, 2026-11-29). */
static int64_t tile_lead(int rank, const int64_t *S, int64_t (*st)[SMELT_MAX_DIMS], char *const *ptrs,
                         const size_t *esz, int o, int pd)
{
    int64_t es = (int64_t)esz[o], at = (int64_t)((uintptr_t)ptrs[o] & 63);
    if (st[o][pd] != 1 || at % es)
        return 0;
    for (int d = 0; d < rank; d++)
        if (d != pd && st[o][d] * es % 64)
            return 0;
    int64_t lead = (64 - at) % 64 / es;
    return S[pd] - lead >= TILE_P ? lead : 0;
}

/* dst[i][j] = src[i * sq + j * sp] (elements of es bytes, copied as bits),
 * i < TILE_Q, j < TILE_P: TILE_PACK columns at a time, so that each line
 * read is used whole while it is in L1, the next TILE_PACK columns'
 * lines prefetched meanwhile (4096 x 4096 f32 a.T + b: 0.78x the time
 * without) */
#define PACK_TILE(T)                                                                               \
    do {                                                                                           \
        T *d = (T *)(void *)dst;                                                                   \
        const T *s = (const T *)(const void *)src;                                                 \
        for (int j0 = 0; j0 < TILE_P; j0 += TILE_PACK) {                                           \
            for (int j = j0 + TILE_PACK; j < j0 + 2 * TILE_PACK && j < TILE_P; j++)                \
                for (int i = 0; i < TILE_Q; i += 64 / (int)sizeof(T))                              \
                    __builtin_prefetch(s + i * sq + j * sp);                                       \
            for (int i = 0; i < TILE_Q; i++)                                                       \
                for (int j = j0; j < j0 + TILE_PACK; j++)                                          \
                    d[i * TILE_P + j] = s[i * sq + j * sp];                                        \
        }                                                                                          \
    } while (0)
static void pack_tile(char *dst, const char *src, size_t es, int64_t sq, int64_t sp)
{
    switch (es) {
    case 1: PACK_TILE(uint8_t); break;
    case 2: PACK_TILE(uint16_t); break;
    case 4: PACK_TILE(uint32_t); break;
    default: PACK_TILE(uint64_t); break;
    }
}

/* A tiled launch: tile t of the grid (the other dimensions, then q's and
 * the innermost's tiles) starts at ptrs + its index times gstep (bytes);
 * the kernel runs on shape/strides (the same for every tile) after the
 * inputs pk[0 .. npack) are packed into the thread's scratch. */
typedef struct tilerun {
    smelt__kfn fn;
    int n, grank, npack;
    int64_t ntiles, chunk;
    int64_t gshape[SMELT_MAX_DIMS];
    int64_t gstep[SMELT_MAX_KERNEL_OPERANDS][SMELT_MAX_DIMS];
    char *ptrs[SMELT_MAX_KERNEL_OPERANDS];
    int pk[SMELT_MAX_KERNEL_OPERANDS];
    size_t pes[SMELT_MAX_KERNEL_OPERANDS];
    int64_t psq[SMELT_MAX_KERNEL_OPERANDS], psp[SMELT_MAX_KERNEL_OPERANDS];
    char *scratch;
    size_t stride, block;
    bool fence; /* streaming stores: fenced after each chunk of tiles */
    int64_t shape[SMELT_MAX_DIMS + 1];
    int64_t strides[(SMELT_MAX_KERNEL_OPERANDS + 1) * SMELT_MAX_DIMS];
} tilerun;

static void run_tiles(void *arg, int64_t c)
{
    const tilerun *t = arg;
    char *mine = t->npack ? t->scratch + (size_t)smelt__pool_slot() * t->stride : NULL;
    int64_t e = SMELT_MIN(t->ntiles, (c + 1) * t->chunk);
    for (int64_t i = c * t->chunk; i < e; i++) {
        char *ptrs[SMELT_MAX_KERNEL_OPERANDS];
        memcpy(ptrs, t->ptrs, sizeof(char *) * (size_t)t->n);
        for (int64_t d = t->grank - 1, r = i; d >= 0; d--) {
            int64_t idx = r % t->gshape[d];
            r /= t->gshape[d];
            for (int o = 0; o < t->n; o++)
                ptrs[o] += idx * t->gstep[o][d];
        }
        for (int k = 0; k < t->npack; k++) {
            char *b = mine + (size_t)k * t->block;
            pack_tile(b, ptrs[t->pk[k]], t->pes[k], t->psq[k], t->psp[k]);
            ptrs[t->pk[k]] = b;
        }
        t->fn(0, TILE_Q * TILE_P, ptrs, t->shape, t->strides);
    }
#if defined(__x86_64__) && defined(__GNUC__)
    if (t->fence)
        __builtin_ia32_sfence();
#endif
}

/* Kernel ki over the whole tiles of S (rank r, operand strides st, element
 * sizes esz, first elements ptrs), q from tile_dim */
static int launch_tiles(smelt_plan *p, int ki, int r, const int64_t *S, int64_t (*st)[SMELT_MAX_DIMS],
                        char *const *ptrs, const size_t *esz, int q, bool stream, bool *split)
{
    smelt__pkernel *k = &p->kern[ki];
    static __thread tilerun t;
    int n = k->cl.nin + k->cl.nout, pd = r - 1;
    t.n = n;
    t.npack = 0;
    t.grank = 0;
    t.ntiles = 1;
    int64_t ts[2] = {TILE_Q, TILE_P}, tst[SMELT_MAX_KERNEL_OPERANDS][SMELT_MAX_DIMS];
    for (int o = 0; o < n; o++) {
        t.ptrs[o] = ptrs[o];
        bool pack = o < k->cl.nin && smelt__read_transposed(st[o], q, pd, esz[o]);
        tst[o][0] = pack ? TILE_P : st[o][q];
        tst[o][1] = pack ? 1 : st[o][pd];
        if (pack) {
            t.pk[t.npack] = o;
            t.pes[t.npack] = esz[o];
            t.psq[t.npack] = st[o][q];
            t.psp[t.npack++] = st[o][pd];
        }
    }
    /* the grid: the other dimensions, then q's tiles, then pd's */
    int gd[SMELT_MAX_DIMS + 1];
    int64_t gf[SMELT_MAX_DIMS + 1];
    for (int d = 0; d < r; d++)
        if (d != q && d != pd)
            gd[t.grank] = d, gf[t.grank++] = 1;
    gd[t.grank] = q, gf[t.grank++] = TILE_Q;
    gd[t.grank] = pd, gf[t.grank++] = TILE_P;
    for (int g = 0; g < t.grank; g++) {
        t.gshape[g] = S[gd[g]] / gf[g];
        t.ntiles *= t.gshape[g];
        for (int o = 0; o < n; o++)
            t.gstep[o][g] = st[o][gd[g]] * gf[g] * (int64_t)esz[o];
    }
    uint8_t mode[SMELT_MAX_KERNEL_OPERANDS];
    int rank = smelt__merge_layout(2, ts, n, tst, mode);
    smelt__kernel *kk;
    int stt = smelt__plan_variant(p, ki, rank, mode, false, 0, false, &kk, split);
    if (stt || *split)
        return stt;
    t.fn = kk->fn;
    memcpy(t.shape, ts, sizeof(int64_t) * (size_t)rank);
    t.fence = stream && rank < SMELT_MAX_DIMS;
    t.shape[rank] = t.fence;
    for (int o = 0; o < n; o++)
        memcpy(t.strides + o * rank, tst[o], sizeof(int64_t) * (size_t)rank);
    int threads = smelt_ctx_threads(p->ctx);
    if (!p->ctx->pool && !(p->ctx->pool = smelt__pool_new(threads)))
        return smelt__err(p->ctx, SMELT_ERR_NOMEM, "out of memory (thread pool)");
    t.block = 0;
    for (int k2 = 0; k2 < t.npack; k2++)
        t.block = SMELT_MAX(t.block, (size_t)TILE_Q * TILE_P * t.pes[k2]);
    t.scratch = NULL;
    t.stride = 0;
    if (t.npack && !(t.scratch = smelt__pool_scratch(p->ctx->pool, t.block * (size_t)t.npack, &t.stride)))
        return smelt__err(p->ctx, SMELT_ERR_NOMEM, "out of memory (%zu bytes of tile scratch per thread)",
                          t.block * (size_t)t.npack);
    t.chunk = SMELT_MAX((t.ntiles + threads * 4 - 1) / (threads * 4), 1);
    smelt__pool_run(p->ctx->pool, run_tiles, &t, (t.ntiles + t.chunk - 1) / t.chunk);
    return SMELT_OK;
}

/* Run kernel ki.  *split: it was replaced by unfused kernels; run ki again. */
/* A window's or a scan's library kernel: its loops (src/runtime/window.c)
 * over its operands as they lie; on a device, the backend's products, copies
 * and scan kernel. */
static int run_window(smelt_plan *p, runstate *rs, int ki)
{
    int v = p->kern[ki].cl.members[0];
    const smelt__inst *x = &p->prog.v[v];
    smelt__view w[3];
    int64_t sc[3][SMELT_MAX_DIMS];
    for (int o = 0; o <= x->nin; o++) {
        int u = o < x->nin ? x->in[o] : v;
        int st = smelt__value_view(p, rs, u, &w[o], sc[o]);
        if (st)
            return st;
    }
    if (p->be->iface->launch)
        return x->op == SMELT_OP_CONV_TAPS ? smelt__run_conv_taps_device(p, &p->kern[ki], x, w, &w[2])
                                           : smelt__run_scan_device(p, x, w, &w[x->nin]);
    return x->op == SMELT_OP_CONV_TAPS ? smelt__run_conv_taps(p, x, w, &w[2])
                                       : smelt__run_scan(p, x, w, &w[x->nin]);
}

/* ---- indexed reads: each gather slot's axis size and stride, in the
 * kernel's gather block before it runs; the first bad index it met,
 * after (SMELT_GX_*, src/fusion/fusion.h) ---- */

/* The array an indexed read's input k views (smelt__prog_finalize's slice,
 * under a reshape for take), and the axis */
static int gather_array(const smelt__prog *pr, int v, int *axis)
{
    if (pr->v[v].op == SMELT_OP_RESHAPE)
        v = pr->v[v].in[0];
    *axis = (int)pr->v[v].vp[0];
    return pr->v[v].in[0];
}

static int gather_setup(smelt_plan *p, runstate *rs, int ki)
{
    smelt__pkernel *k = &p->kern[ki];
    if (!smelt__kdesc_gathers(&k->desc))
        return SMELT_OK;
    int slots = 0;
    for (int q = 0; q < k->cl.nin; q++)
        slots += k->desc.gidx[q] != 0;
    size_t bytes = sizeof(int64_t) * (size_t)(SMELT_GX_SLOTS + 2 * slots);
    if (!k->gx && !(k->gx = calloc(1, bytes)))
        return smelt__err(p->ctx, SMELT_ERR_NOMEM, "out of memory");
    for (int q = 0, s = 0; q < k->cl.nin; q++) {
        if (!k->desc.gidx[q])
            continue;
        int axis, a = gather_array(&p->prog, k->cl.inputs[q], &axis);
        int64_t scratch[SMELT_MAX_DIMS];
        smelt__view w;
        int st = smelt__value_view(p, rs, a, &w, scratch);
        if (st)
            return st;
        k->gx[SMELT_GX_SLOTS + 2 * s] = w.shape[axis];
        k->gx[SMELT_GX_SLOTS + 2 * s++ + 1] = w.strides[axis];
    }
    k->gx[SMELT_GX_BAD] = k->gx[SMELT_GX_VALUE] = 0;
    if (!p->be->iface->launch)
        return SMELT_OK;
    if (!k->dgx) {
        if (!(k->dgx = smelt__be_alloc(p->be, bytes)))
            return smelt__err(p->ctx, SMELT_ERR_NOMEM, "cannot allocate %zu bytes of device memory", bytes);
        k->dgx_be = p->be;
    }
    return p->be->iface->copy(p->be, k->dgx, k->gx, bytes, SMELT_COPY_H2D);
}

static int gather_check(smelt_plan *p, int ki)
{
    smelt__pkernel *k = &p->kern[ki];
    if (!k->gx)
        return SMELT_OK;
    if (p->be->iface->launch) {
        int st = p->be->iface->sync ? p->be->iface->sync(p->be) : SMELT_OK;
        if (!st)
            st = p->be->iface->copy(p->be, k->gx, k->dgx, 2 * sizeof(int64_t), SMELT_COPY_D2H);
        if (st)
            return st;
    }
    if (!k->gx[SMELT_GX_BAD])
        return SMELT_OK;
    int slot = (int)k->gx[SMELT_GX_BAD] - 1;
    for (int q = 0, s = 0; q < k->cl.nin; q++) {
        if (!k->desc.gidx[q] || s++ != slot)
            continue;
        const char *name = "take";
        for (int m = 0; m < k->cl.nmem; m++)
            if (smelt__ops[p->prog.v[k->cl.members[m]].op].cls == SMELT_CLASS_GATHER &&
                p->prog.v[k->cl.members[m]].in[0] == k->cl.inputs[q])
                name = smelt__ops[p->prog.v[k->cl.members[m]].op].name;
        int axis;
        gather_array(&p->prog, k->cl.inputs[q], &axis);
        return smelt__err(p->ctx, SMELT_ERR_INDEX, "%s: index %lld is out of range for axis %d of size %lld "
                          "(valid: -%lld to %lld)", name, (long long)k->gx[SMELT_GX_VALUE], axis,
                          (long long)k->gx[SMELT_GX_SLOTS + 2 * slot], (long long)k->gx[SMELT_GX_SLOTS + 2 * slot],
                          (long long)k->gx[SMELT_GX_SLOTS + 2 * slot] - 1);
    }
    return smelt__err(p->ctx, SMELT_ERR_INDEX, "an index is out of range");
}

static int run_kernel(smelt_plan *p, runstate *rs, int ki, bool *split)
{
    smelt__pkernel *k = &p->kern[ki];
    if (k->library)
        return p->prog.v[k->cl.members[0]].op == SMELT_OP_MATMUL ? smelt__run_matmul(p, rs, ki) : run_window(p, rs, ki);
    if (k->desc.reduce) {
        int stt = gather_setup(p, rs, ki);
        stt = stt ? stt : run_reduce(p, rs, ki, split);
        return stt || *split ? stt : gather_check(p, ki);
    }
    const smelt__rshape *S0 = &p->rs[k->cl.members[0]];
    for (int j = 1; j < k->cl.nmem; j++) {
        const smelt__rshape *o = &p->rs[k->cl.members[j]];
        if (o->ndim != S0->ndim || memcmp(o->shape, S0->shape, sizeof(int64_t) * (size_t)o->ndim))
            return smelt__err(p->ctx, SMELT_ERR_SHAPE,
                              "run-time shapes differ inside a fused kernel (the inputs do not "
                              "keep the graph's broadcast pattern)");
    }
    int64_t N = smelt__numel(S0->ndim, S0->shape);
    if (N == 0)
        return SMELT_OK;
    int n = k->cl.nin + k->cl.nout;
    int64_t scratch[SMELT_MAX_KERNEL_OPERANDS][SMELT_MAX_DIMS];
    smelt__view w[SMELT_MAX_KERNEL_OPERANDS];
    bool pieces = false;
    for (int o = 0; o < n; o++) {
        int v = o < k->cl.nin ? k->cl.inputs[o] : k->cl.outputs[o - k->cl.nin];
        if (o < k->cl.nin && smelt__has_pieces(&p->prog, v)) {
            pieces = true;
            smelt__pieces_view(p, v, &w[o], scratch[o]);
            continue;
        }
        int stt = smelt__value_view(p, rs, v, &w[o], scratch[o]);
        if (stt)
            return stt;
    }
    int stt = gather_setup(p, rs, ki);
    if (stt)
        return stt;
    stt = pieces ? smelt__run_pieces(p, rs, ki, w, split) : smelt__run_box(p, rs, ki, w, NULL, split);
    return stt || *split ? stt : gather_check(p, ki);
}

/* Kernel ki (elementwise) over its operands w, whose shapes are box (NULL:
 * its members' shape) where they are not broadcast. */
int smelt__run_box(smelt_plan *p, runstate *rs, int ki, smelt__view *w, const int64_t *box, bool *split)
{
    smelt__pkernel *k = &p->kern[ki];
    int n = k->cl.nin + k->cl.nout;
    int64_t S[SMELT_MAX_DIMS], st[SMELT_MAX_KERNEL_OPERANDS][SMELT_MAX_DIMS];
    char *ptrs[SMELT_MAX_KERNEL_OPERANDS];
    size_t esz[SMELT_MAX_KERNEL_OPERANDS];
    for (int o = 0; o < n; o++) {
        int v = o < k->cl.nin ? k->cl.inputs[o] : k->cl.outputs[o - k->cl.nin];
        ptrs[o] = w[o].data;
        esz[o] = smelt__dtypes[p->prog.v[v].dtype].size;
    }
    const smelt__rshape *S0 = &p->rs[k->cl.members[0]];
    int64_t N = smelt__numel(S0->ndim, box ? box : S0->shape);
    uint8_t mode[SMELT_MAX_KERNEL_OPERANDS];
    unsigned none;
    int rank = smelt__merge_layout(smelt__kernel_strides_box(p, ki, w, box, S, st, &none), S, n, st, mode);
    int q = p->be->iface->launch || N < SMALL_ELEMS || k->gx ? -1 : tile_dim(rank, S, n, st, mode);
    if (q < 0)
        return launch_ew(p, rs, ki, rank, S, st, ptrs, false, split);
    /* the whole tiles of TILE_Q x TILE_P over dimensions q and the
     * innermost, from column lead (tile_lead), then the rest: q's last
     * rows whole, the innermost's last columns, the first lead columns */
    int pd = rank - 1;
    int64_t lead = tile_lead(rank, S, st, ptrs, esz, k->cl.nin, pd);
    int64_t Q = S[q] - S[q] % TILE_Q, P = (S[pd] - lead) - (S[pd] - lead) % TILE_P;
    /* each part: its first row and column, its rows and columns (the tiles first) */
    const int64_t part[4][4] = {{0, lead, Q, P}, {Q, 0, S[q] - Q, S[pd]}, {0, lead + P, Q, S[pd] - lead - P},
                                {0, 0, Q, lead}};
    int stt = SMELT_OK;
    for (int k2 = 0; k2 < 4 && !stt && !*split; k2++) {
        int64_t PS[SMELT_MAX_DIMS], Pst[SMELT_MAX_KERNEL_OPERANDS][SMELT_MAX_DIMS];
        char *pp[SMELT_MAX_KERNEL_OPERANDS];
        memcpy(PS, S, sizeof PS);
        memcpy(Pst, st, sizeof(Pst[0]) * (size_t)n);
        PS[q] = part[k2][2], PS[pd] = part[k2][3];
        for (int o = 0; o < n; o++)
            pp[o] = ptrs[o] + (part[k2][0] * st[o][q] + part[k2][1] * st[o][pd]) * (int64_t)esz[o];
        if (k2 == 0)
            stt = launch_tiles(p, ki, rank, PS, Pst, pp, esz, q, stream_outputs(p, rs, ki, rank, mode), split);
        else if (PS[q] && PS[pd])
            stt = launch_ew(p, rs, ki, rank, PS, Pst, pp, true, split);
    }
    return stt;
}

static void shape_text(smelt__sb *b, int ndim, const int64_t *s) { smelt__shape_str(b, ndim, s); }

static int check_inputs(smelt_plan *p, int n_in, smelt_tensor *const *inputs)
{
    if (n_in != p->prog.ninputs)
        return smelt__err(p->ctx, SMELT_ERR_INVALID_ARG, "plan takes %d inputs, got %d",
                          p->prog.ninputs, n_in);
    if (n_in && !inputs)
        return smelt__err(p->ctx, SMELT_ERR_INVALID_ARG, "inputs is NULL");
    for (int i = 0; i < n_in; i++) {
        smelt_tensor *t = inputs[i];
        if (!t)
            return smelt__err(p->ctx, SMELT_ERR_INVALID_ARG, "input %d is NULL", i);
        if (smelt__is_device(t) && !p->be->iface->launch)
            return smelt__err(p->ctx, SMELT_ERR_INVALID_ARG,
                              "input %d is a device tensor but the plan runs on %s (host "
                              "memory); copy it with smelt_tensor_copy_to_host",
                              i, p->be->iface->name);
        if (t->dtype != p->prog.in_dtypes[i])
            return smelt__err(p->ctx, SMELT_ERR_DTYPE, "input %d: expected dtype %s, got %s", i,
                              smelt__dtypes[p->prog.in_dtypes[i]].name, smelt__dtypes[t->dtype].name);
        bool ok = t->ndim == p->prog.in_ndim[i];
        for (int d = 0; ok && d < t->ndim; d++)
            ok = (t->shape[d] == 1) == (p->prog.in_shape[i][d] == 1);
        if (!ok) {
            smelt__sb b;
            smelt__sb_init(&b);
            shape_text(&b, t->ndim, t->shape);
            smelt__sb_puts(&b, " does not fit the plan's input shape ");
            shape_text(&b, p->prog.in_ndim[i], p->prog.in_shape[i]);
            int st = smelt__err(p->ctx, SMELT_ERR_SHAPE,
                                "input %d: shape %s (same rank and the same size-1 dimensions "
                                "needed)", i, smelt__sb_str(&b));
            smelt__sb_free(&b);
            return st;
        }
    }
    return SMELT_OK;
}

static int infer_shapes(smelt_plan *p, smelt_tensor *const *inputs)
{
    for (int v = 0; v < p->prog.n; v++) {
        const smelt__inst *x = &p->prog.v[v];
        smelt__rshape *r = &p->rs[v];
        if (x->op == SMELT_OP_INPUT) {
            smelt_tensor *t = inputs[x->input_index];
            r->ndim = t->ndim;
            memcpy(r->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
            continue;
        }
        if (smelt__is_reduce(x->op)) {
            const smelt__rshape *a = &p->rs[x->in[0]];
            smelt__red_shape(a->ndim, a->shape, x->axes, x->keepdims, &r->ndim, r->shape);
            continue;
        }
        if (x->op == SMELT_OP_CONST || x->op == SMELT_OP_ARANGE || x->op == SMELT_OP_TENSOR) {
            r->ndim = x->ndim;
            memcpy(r->shape, x->shape, sizeof r->shape);
            continue;
        }
        if (x->op == SMELT_OP_CONV_TAPS) { /* [N, O, OH, Wq] (vp[5], vp[7]: the graph's) */
            const smelt__rshape *a = &p->rs[x->in[0]], *b = &p->rs[x->in[1]];
            r->ndim = 4;
            r->shape[0] = a->shape[0], r->shape[1] = b->shape[0], r->shape[2] = x->vp[5], r->shape[3] = x->vp[7];
            continue;
        }
        if (x->op == SMELT_OP_CUMSUM || x->op == SMELT_OP_CUMPROD) {
            *r = p->rs[x->in[0]];
            continue;
        }
        if (x->op == SMELT_OP_MATMUL) {
            const smelt__rshape *a = &p->rs[x->in[0]], *b = &p->rs[x->in[1]];
            smelt__sb why;
            smelt__sb_init(&why);
            int st = smelt__matmul_shape(a->ndim, a->shape, b->ndim, b->shape, &r->ndim, r->shape, &why);
            if (st)
                st = smelt__err(p->ctx, st, "matmul: at the run-time shapes, %s", smelt__sb_str(&why));
            smelt__sb_free(&why);
            if (st)
                return st;
            continue;
        }
        if (smelt__is_view(x->op)) {
            const smelt__rshape *a = &p->rs[x->in[0]];
            smelt__sb why;
            smelt__sb_init(&why);
            int st = x->op == SMELT_OP_CONCAT ? smelt__concat_shape((int)x->vp[0], a->ndim, a->shape,
                                                                   p->rs[x->in[1]].ndim, p->rs[x->in[1]].shape,
                                                                   r->shape, &why)
                                              : smelt__view_shape(x->op, x->ndim, x->vp, x->shape, a->ndim, a->shape,
                                                                  &r->ndim, r->shape, &why);
            r->ndim = x->op == SMELT_OP_CONCAT ? a->ndim : r->ndim;
            if (st)
                st = smelt__err(p->ctx, st, "%s: at the run-time shapes, %s", smelt__ops[x->op].name,
                                smelt__sb_str(&why));
            smelt__sb_free(&why);
            if (st)
                return st;
            continue;
        }
        r->ndim = 0;
        for (int j = 0; j < x->nin; j++) {
            const smelt__rshape *a = &p->rs[x->in[j]];
            int nd;
            int64_t out[SMELT_MAX_DIMS];
            bool ok = !smelt__broadcast_shapes(r->ndim, r->shape, a->ndim, a->shape, &nd, out);
            if (!ok) {
                smelt__sb b;
                smelt__sb_init(&b);
                shape_text(&b, r->ndim, r->shape);
                smelt__sb_puts(&b, " and ");
                shape_text(&b, a->ndim, a->shape);
                int st = smelt__err(p->ctx, SMELT_ERR_SHAPE,
                                    "%s: run-time shapes %s are not broadcastable",
                                    smelt__ops[x->op].name, smelt__sb_str(&b));
                smelt__sb_free(&b);
                return st;
            }
            r->ndim = nd;
            memcpy(r->shape, out, sizeof(int64_t) * (size_t)nd);
        }
    }
    return SMELT_OK;
}

/* opt_level >= 2: the memory plan for this run's shapes and kernels (the
 * one made before when they are the same), and an arena that holds it.
 * A kernel split during the run keeps it valid: its replacements run in
 * the same place, their new intermediates outside the arena. */
static int plan_memory(smelt_plan *p)
{
    uint64_t sig = smelt__mem_sig(p);
    if (sig != p->msig) {
        p->msig = 0;
        int st = smelt__mem_plan(p, p->rs, smelt__mem_align(p), true, p->moff, &p->mem);
        if (st)
            return smelt__err(p->ctx, st, "out of memory");
        p->msig = sig;
    }
    if (p->mem.arena > p->arena_size) {
        smelt__be_free(p->be, p->arena);
        p->arena_size = 0;
        if (!(p->arena = smelt__be_alloc(p->be, (size_t)p->mem.arena)))
            return smelt__err(p->ctx, SMELT_ERR_NOMEM, "cannot allocate the %lld-byte arena of %d intermediates",
                              (long long)p->mem.arena, p->mem.buffers);
        p->arena_size = p->mem.arena;
    }
    return SMELT_OK;
}

/* Output i may be written straight over donated input k, whose elements
 * it has (same memory, shape and strides): the kernel that writes it is
 * the last to read the input and reads each element first. */
static bool donated_inplace(const smelt_plan *p, int i, const smelt_tensor *o, int k, const smelt_tensor *in)
{
    if (!p->donated[k] || o->data != in->data || smelt__dtypes[o->dtype].size != smelt__dtypes[in->dtype].size ||
        o->ndim != in->ndim || memcmp(o->shape, in->shape, sizeof(int64_t) * (size_t)o->ndim))
        return false;
    for (int d = 0; d < o->ndim; d++)
        if (o->shape[d] > 1 && o->strides[d] != in->strides[d])
            return false;
    int v = p->prog.outputs[i], kw = -1;
    for (int ki = 0; ki < p->nkern && kw < 0; ki++)
        for (int j = 0; j < p->kern[ki].cl.nout; j++)
            kw = p->kern[ki].cl.outputs[j] == v ? ki : kw;
    for (int ki = 0; kw >= 0 && ki < p->nkern; ki++) {
        const smelt__cluster *c = &p->kern[ki].cl;
        for (int j = 0; j < c->nin; j++) {
            int bases[SMELT_MAX_PARTS], nb = smelt__view_bases(&p->prog, c->inputs[j], bases);
            for (int i = 0; i < nb; i++) { /* (a view reads others' elements) */
                int b = bases[i];
                const smelt__inst *u = &p->prog.v[b];
                if (u->op == SMELT_OP_INPUT && u->input_index == k &&
                    (ki > kw || (ki == kw && (b != c->inputs[j] || !smelt__inplace_ok(p, c, p->rs, b, v)))))
                    return false;
            }
        }
    }
    return kw >= 0;
}

static int check_overlaps(smelt_plan *p, bool dev, int n_in, smelt_tensor *const *inputs, int n_out,
                          smelt_tensor **outputs, const bool *alloc, smelt_tensor ***tmp_out)
{
    p->stats.donated_inplace = 0;
    smelt_tensor **tmp = NULL;
    int st = SMELT_OK;
    for (int i = 0; i < n_out && !st; i++) {
        smelt_tensor *o = outputs[i];
        if (alloc[i])
            continue;
        for (int d = 0; d < o->ndim && !st; d++)
            if (o->shape[d] > 1 && o->strides[d] == 0)
                st = smelt__err(p->ctx, SMELT_ERR_INVALID_ARG,
                                "output %d has stride 0 on axis %d (size %lld): its elements would be written "
                                "more than once; give a tensor of its own (or NULL)", i, d, (long long)o->shape[d]);
        for (int j = 0; j < i && !st; j++)
            if (!alloc[j] && smelt__tensors_overlap(o, outputs[j]))
                st = smelt__err(p->ctx, SMELT_ERR_INVALID_ARG,
                                "outputs %d and %d overlap in memory: give each a tensor of its own (or NULL)", j, i);
        /* an output its value is written into through views (a transpose
         * back, a reshape back): on the host, through a contiguous
         * temporary unless it is contiguous */
        bool stage = !dev && p->prog.out_base[i] != p->prog.outputs[i] && !smelt_tensor_is_contiguous(o), direct = false;
        if (dev && p->prog.out_base[i] != p->prog.outputs[i] && !smelt_tensor_is_contiguous(o))
            st = smelt__err(p->ctx, SMELT_ERR_INVALID_ARG, "output %d: a non-contiguous device tensor for an output "
                            "the plan writes through its views: give a contiguous one (or NULL)", i);
        for (int k = 0; k < n_in && !st && !stage; k++) {
            if (!smelt__tensors_overlap(o, inputs[k]) ||
                (dev && !(smelt__is_device(o) && smelt__is_device(inputs[k])))) /* host ones are staged anyway */
                continue;
            if (donated_inplace(p, i, o, k, inputs[k]))
                direct = true;
            else if (!dev) /* host plans: through a temporary */
                stage = true;
            else
                st = smelt__err(p->ctx, SMELT_ERR_INVALID_ARG,
                                "output %d overlaps input %d in device memory: give a tensor of its own, or "
                                "donate the input when it is the same tensor (smelt_plan_opts.donate)", i, k);
        }
        p->stats.donated_inplace += direct && !stage && !st;
        if (st || !stage)
            continue;
        if (!tmp) {
            if (!(tmp = malloc(sizeof *tmp * (size_t)n_out))) {
                st = smelt__err(p->ctx, SMELT_ERR_NOMEM, "out of memory");
                break;
            }
            memcpy(tmp, outputs, sizeof *tmp * (size_t)n_out);
        }
        if ((st = smelt_tensor_new(p->ctx, o->dtype, o->ndim, o->shape, &tmp[i])))
            tmp[i] = o;
    }
    if (st && tmp) {
        for (int i = 0; i < n_out; i++)
            if (tmp[i] != outputs[i])
                smelt_tensor_free(tmp[i]);
        free(tmp);
        tmp = NULL;
    }
    *tmp_out = tmp;
    return st;
}

int smelt__plan_run(smelt_plan *p, int n_in, smelt_tensor *const *inputs, int n_out,
                    smelt_tensor **outputs)
{
    if (!p)
        return SMELT_ERR_INVALID_ARG;
    int st = check_inputs(p, n_in, inputs);
    if (st)
        return st;
    if (n_out != p->prog.nout || !outputs)
        return smelt__err(p->ctx, SMELT_ERR_INVALID_ARG, "plan has %d outputs, got %d%s",
                          p->prog.nout, n_out, outputs ? "" : " (outputs is NULL)");
    if ((st = infer_shapes(p, inputs)))
        return st;
    smelt__tier_start(p);
    smelt__tier_apply(p);
    if (p->opt_level >= 2 && (st = plan_memory(p)))
        return st;
    /* device plans: outputs the plan allocates live on the device when an
     * input does; host tensors are staged through device copies */
    bool dev = p->be->iface->launch != NULL, on_dev = false;
    for (int i = 0; dev && i < n_in; i++)
        on_dev = on_dev || smelt__is_device(inputs[i]);
    bool allocated[SMELT_MAX_KERNEL_OPERANDS * 4] = {0};
    bool *alloc = n_out <= (int)(sizeof allocated / sizeof *allocated) ? allocated
                                                                         : calloc((size_t)n_out, 1);
    if (!alloc)
        return smelt__err(p->ctx, SMELT_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n_out && !st; i++) {
        int v = p->prog.outputs[i];
        const smelt__rshape *r = &p->rs[v];
        smelt_dtype dt = p->prog.v[v].dtype;
        if (!outputs[i]) {
            st = on_dev ? smelt__tensor_new_on(p->ctx, p->be, dt, r->ndim, r->shape, &outputs[i])
                        : smelt_tensor_new(p->ctx, dt, r->ndim, r->shape, &outputs[i]);
            alloc[i] = st == SMELT_OK;
        } else if (!dev && smelt__is_device(outputs[i])) {
            st = smelt__err(p->ctx, SMELT_ERR_INVALID_ARG,
                            "output %d is a device tensor but the plan runs on %s (host memory)",
                            i, p->be->iface->name);
        } else if (outputs[i]->dtype != dt || outputs[i]->ndim != r->ndim ||
                   memcmp(outputs[i]->shape, r->shape, sizeof(int64_t) * (size_t)r->ndim)) {
            smelt__sb b;
            smelt__sb_init(&b);
            smelt__sb_printf(&b, "%s ", smelt__dtypes[dt].name);
            shape_text(&b, r->ndim, r->shape);
            smelt__sb_printf(&b, ", got %s ", smelt__dtypes[outputs[i]->dtype].name);
            shape_text(&b, outputs[i]->ndim, outputs[i]->shape);
            st = smelt__err(p->ctx, SMELT_ERR_SHAPE, "output %d: expected %s", i, smelt__sb_str(&b));
            smelt__sb_free(&b);
        }
    }
    /* outputs that overlap an input are computed into temporaries and
     * copied at the end (in place works, a transposed view of an input
     * too); outputs that overlap each other, or write an element twice
     * (a zero stride), are errors */
    smelt_tensor **tmp = NULL;
    if (!st)
        st = check_overlaps(p, dev, n_in, inputs, n_out, outputs, alloc, &tmp);
    runstate rs = {.inputs = inputs, .outputs = tmp ? tmp : outputs};
    rs.stream = p->settings->stream_stores;
    smelt_tensor **din = NULL, **dout = NULL;
    bool staged = dev && !st && !(st = smelt__device_stage(p->be, n_in, inputs, n_out, outputs, &din, &dout));
    if (staged)
        rs.inputs = din ? din : inputs, rs.outputs = dout ? dout : outputs;
    int chains = 0;
    for (int ki = 0; ki < p->nkern && !st; ki++) {
        bool split = false, chain = false;
        st = smelt__run_chain(p, &rs, ki, &chain, &split);
        if (!st && !split && !chain)
            st = run_kernel(p, &rs, ki, &split);
        chains += chain;
        ki += chain ? 2 : split ? -1 : 0;
    }
    p->stats.batch_chains = chains;
    if (staged) /* waits for the device, copies host outputs back */
        st = smelt__device_unstage(p->be, n_in, inputs, din, n_out, outputs, dout, st);
    for (int i = 0; tmp && i < n_out; i++)
        if (tmp[i] != outputs[i]) {
            if (!st)
                smelt__tensor_copy_into(outputs[i], tmp[i]);
            smelt_tensor_free(tmp[i]);
        }
    free(tmp);
    if (st)
        for (int i = 0; i < n_out; i++)
            if (alloc[i]) {
                smelt_tensor_free(outputs[i]);
                outputs[i] = NULL;
            }
    if (alloc != allocated)
        free(alloc);
    return st;
}
