/* Building a plan: lower, run the passes of the opt level, partition, emit
 * and compile every kernel (with the unfused fallback), describe. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "passes.h"
#include "plan.h"
#include "smelt_cuda.h" /* smelt_plan_emit_only */

void smelt_plan_opts_init(smelt_plan_opts *opts)
{
    if (opts) {
        opts->opt_level = 3;
        opts->backend = NULL;
        opts->donate = NULL;
        opts->n_donate = 0;
        opts->capture_as_const = 0;
    }
}

static void tier_init(smelt_plan *p)
{
    pthread_mutex_init(&p->up_mu, NULL);
    pthread_cond_init(&p->up_cv, NULL);
}

void smelt_plan_free(smelt_plan *p)
{
    if (!p)
        return;
    smelt__tier_cancel(p);
    pthread_mutex_destroy(&p->up_mu);
    pthread_cond_destroy(&p->up_cv);
    for (int i = 0; i < p->nups; i++)
        smelt__kernel_unref(p->ups[i].base), smelt__kernel_unref(p->ups[i].fast);
    free(p->ups);
    for (int i = 0; i < p->nkern; i++)
        smelt__pkernel_free(&p->kern[i]);
    free(p->kern);
    for (int i = 0; p->buf && i < p->prog.n; i++)
        smelt__be_free(p->be, p->buf[i]);
    free(p->buf);
    free(p->bufsize);
    smelt__be_free(p->be, p->arena);
    free(p->moff);
    free(p->donated);
    free(p->rs);
    free(p->out_slot);
    smelt__prog_free(&p->prog);
    smelt__sb_free(&p->log);
    smelt__sb_free(&p->desc);
    free(p);
}

/* The layout a kernel has when every input is contiguous (a view: read
 * through its strides), at the shapes in p->rs (the graph's here; *rmask: a
 * reduction's reduced dimensions). */
static void default_layout(const smelt_plan *p, int ki, int *rank, uint8_t *mode, uint8_t *rmask, uint16_t *tile)
{
    const smelt__pkernel *k = &p->kern[ki];
    int n = k->cl.nin + k->cl.nout;
    int64_t S[SMELT_MAX_DIMS], st[SMELT_MAX_KERNEL_OPERANDS][SMELT_MAX_DIMS];
    int64_t cs[SMELT_MAX_KERNEL_OPERANDS][SMELT_MAX_DIMS];
    smelt__view w[SMELT_MAX_KERNEL_OPERANDS];
    for (int o = 0; o < n; o++) {
        int v = o < k->cl.nin ? k->cl.inputs[o] : k->cl.outputs[o - k->cl.nin];
        const smelt__rshape *x = &p->rs[v];
        int64_t off;
        if (!smelt__view_chain(&p->prog, v, &off, cs[o])) /* (a view reads through its strides) */
            smelt__contig_strides(x->ndim, x->shape, cs[o]);
        w[o] = (smelt__view){NULL, x->ndim, x->shape, cs[o]};
    }
    unsigned axes;
    int r = smelt__kernel_strides(p, ki, w, S, st, &axes);
    *rmask = 0, *tile = 0;
    if (k->desc.reduce)
        *rank = smelt__merge_reduce_layout(r, S, axes, n, st, mode, rmask);
    else
        *rank = smelt__merge_layout(r, S, n, st, mode);
    bool gathers = smelt__kdesc_gathers(&k->desc), dev = p->be->iface->target.dialect->device;
    if (gathers && !dev)
        *rank = SMELT_MAX(smelt__gather_rows(k, *rank, S, n, st, mode), *rank);
    if (!k->desc.reduce && dev && !gathers)
        *tile = smelt__device_tile(k, *rank, S, st, mode);
}

/* Under a kernel's line: the kernels it reads without fusing with them,
 * one line per reason (kof: the kernel of each value). */
static void describe_why(smelt__sb *b, const smelt__pkernel *k, const int *kof)
{
    for (int r = SMELT__FUSE + 1; r < SMELT__FUSE_NREASONS; r++) {
        int ks[SMELT_MAX_KERNEL_OPERANDS], n = 0, t;
        for (int j = 0; j < k->cl.nin; j++) {
            if (k->cl.why[j] != r)
                continue;
            int kp = kof[k->cl.inputs[j]];
            for (t = 0; t < n && ks[t] != kp; t++)
                ;
            if (t == n) /* a kernel listed once */
                ks[n++] = kp;
        }
        if (!n)
            continue;
        smelt__sb_printf(b, "  not fused with kernel%s", smelt__plural(n));
        for (t = 0; t < n; t++)
            smelt__sb_printf(b, t ? ", %d" : " %d", ks[t]);
        smelt__sb_printf(b, ": %s\n", smelt__fuse_why[r]);
    }
}

/* A kernel's inputs: inN (graph inputs), %k (intermediates), a view as the
 * value it views and its outermost operator, "%7=transpose(in0)". */
static void describe_inputs(smelt__sb *b, const smelt_plan *p, const smelt__pkernel *k)
{
    for (int j = 0; j < k->cl.nin; j++) {
        int v = k->cl.inputs[j], bases[SMELT_MAX_PARTS], nb = smelt__view_bases(&p->prog, v, bases);
        bool view = nb != 1 || bases[0] != v;
        if (j)
            smelt__sb_puts(b, " ");
        bool gx = k->desc.gidx[j]; /* an indexed read folded into the kernel: its array */
        if (gx)
            smelt__sb_printf(b, "%%%d=indexed(", v);
        else if (view)
            smelt__sb_printf(b, "%%%d=%s(", v, smelt__ops[p->prog.v[v].op].name);
        for (int i = 0; i < nb; i++) {
            const smelt__inst *x = &p->prog.v[bases[i]];
            if (x->op == SMELT_OP_INPUT)
                smelt__sb_printf(b, i ? " in%d" : "in%d", x->input_index);
            else
                smelt__sb_printf(b, i ? " %%%d" : "%%%d", bases[i]);
        }
        if (gx) {
            int sl = p->prog.v[v].op == SMELT_OP_RESHAPE ? p->prog.v[v].in[0] : v;
            smelt__sb_printf(b, " along axis %lld at input %d's indices)", (long long)p->prog.v[sl].vp[0],
                             k->desc.gidx[j] - 1);
        } else if (view)
            smelt__sb_puts(b, ")");
    }
}

static void describe(smelt_plan *p)
{
    smelt__sb *b = &p->desc;
    smelt__sb_free(b);
    const smelt_plan_stats *s = &p->stats;
    smelt__sb_printf(b, "plan: opt_level %d, backend %s, %d instruction%s, %d kernel%s\n",
                     p->opt_level, s->backend, p->prog.n, smelt__plural(p->prog.n), p->nkern,
                     smelt__plural(p->nkern));
    smelt__sb_printf(b, "passes: folded %d, cse %d, simplified %d, dead branches %d, views moved %d, dce %d",
                     s->folded, s->cse, s->simplified, s->dead_branches, s->views_moved, s->dce);
    if (s->conv_folded) /* (the line as before where no convolution folds) */
        smelt__sb_printf(b, ", conv scale/shift folded %d", s->conv_folded);
    smelt__sb_printf(b, "\n");
    smelt__sb_printf(b, "kernels: %d compiled, %d from memory, %d from disk; compile %.3f ms, "
                        "fallbacks %d\n",
                     s->compiles, s->cache_hits, s->disk_hits, s->compile_ms, s->fallbacks);
    const smelt__memplan *m = &p->mem;
    if (p->opt_level >= 2)
        smelt__sb_printf(b, "memory: %d intermediate%s (%d in place) in an arena of %lld bytes (largest live "
                            "set %lld, one buffer each %lld); kernel outputs show their offsets (@)\n",
                         m->buffers, smelt__plural(m->buffers), m->inplace, (long long)m->arena,
                         (long long)m->lower, (long long)m->naive);
    else
        smelt__sb_printf(b, "memory: %d intermediate%s, one buffer each: %lld bytes (largest live set %lld; "
                            "opt_level 2 shares an arena)\n",
                         m->buffers, smelt__plural(m->buffers), (long long)m->naive, (long long)m->lower);
    static const char *const origin[] = {"compiled", "from memory", "from disk"};
    int *kof = malloc(sizeof(int) * (size_t)(p->prog.n + 1));
    for (int i = 0; kof && i < p->nkern; i++)
        for (int j = 0; j < p->kern[i].cl.nmem; j++)
            kof[p->kern[i].cl.members[j]] = i;
    for (int i = 0; i < p->nkern; i++) {
        smelt__pkernel *k = &p->kern[i];
        const smelt__variant *v = k->nvar ? &k->var[0] : NULL;
        if (k->library) { /* "kernel 2 matmul [BLAS: OpenBLAS 0.3.21 ...]" */
            const smelt__inst *lx = &p->prog.v[k->cl.members[0]];
            if (lx->op == SMELT_OP_CONV_TAPS) /* "kernel 1 conv [9 taps: 3x3 window, one product each, ...]" */
                smelt__sb_printf(b, "kernel %d conv [%lld taps: a %lldx%lld window of shifted views, %s: %s] inputs [",
                                 i, (long long)(p->prog.v[lx->in[1]].shape[2] * p->prog.v[lx->in[1]].shape[3]),
                                 (long long)p->prog.v[lx->in[1]].shape[2], (long long)p->prog.v[lx->in[1]].shape[3],
                                 !p->be->iface->gemm && smelt__conv_own_kernel(lx->dtype)
                                     ? "summed in registers over taps and channels"
                                     : "one product each accumulated in BLAS",
                                 p->be->iface->gemm ? "cuBLAS"
                                 : smelt__conv_own_kernel(lx->dtype) ? "smelt's AVX-512 kernel"
                                 : smelt__blas_name()                ? smelt__blas_name()
                                                                     : "none");
            else if (lx->op != SMELT_OP_MATMUL) /* a scan */
                smelt__sb_printf(b, "kernel %d %s [a scan along axis %lld, in order] inputs [", i,
                                 smelt__ops[lx->op].name, (long long)lx->vp[0]);
            else
                smelt__sb_printf(b, "kernel %d matmul [BLAS: %s] inputs [", i,
                                 p->be->iface->gemm ? "cuBLAS" : smelt__blas_name() ? smelt__blas_name() : "none");
            describe_inputs(b, p, k);
            smelt__sb_printf(b, "] outputs [");
            for (int j = 0; j < k->cl.nout; j++)
                smelt__sb_printf(b, p->out_slot[k->cl.outputs[j]] >= 0 ? "out%d" : "%%%d",
                                 p->out_slot[k->cl.outputs[j]] >= 0 ? p->out_slot[k->cl.outputs[j]] : k->cl.outputs[j]);
            smelt__sb_puts(b, "]\n");
            continue;
        }
        const char *from = !v ? "-"
                           : v->k == v->base ? origin[v->origin]
                           : v->k->from_disk ? "from disk in the background"
                                             : "compiled in the background";
        smelt__sb_printf(b, "kernel %d %s [%s] (%s): %d operator%s [", i,
                         v ? v->k->name : "(not compiled)", v ? v->k->backend->iface->name : "-",
                         from, k->cl.nmem, smelt__plural(k->cl.nmem));
        for (int j = 0; j < k->cl.nmem; j++)
            smelt__sb_printf(b, j ? " %s" : "%s", smelt__ops[p->prog.v[k->cl.members[j]].op].name);
        smelt__sb_puts(b, "] inputs [");
        describe_inputs(b, p, k);
        smelt__sb_puts(b, "] outputs [");
        for (int j = 0; j < k->cl.nout; j++) {
            int v = k->cl.outputs[j];
            if (p->out_slot[v] >= 0)
                smelt__sb_printf(b, j ? " out%d" : "out%d", p->out_slot[v]);
            else
                smelt__sb_printf(b, j ? " %%%d" : "%%%d", v);
            if (p->opt_level < 2 || p->moff[v] < 0)
                continue;
            smelt__sb_printf(b, "@%lld", (long long)p->moff[v]);
            for (int i = 0; i < k->cl.nin; i++) /* both live here: the same offset is in place */
                if (p->moff[k->cl.inputs[i]] == p->moff[v])
                    smelt__sb_printf(b, " (in place of %%%d)", k->cl.inputs[i]);
        }
        smelt__sb_printf(b, "] shape ");
        const smelt__inst *it = &p->prog.v[k->cl.members[0]];
        if (k->desc.multi) /* a row program: its reductions' operand (the rows) */
            it = &p->prog.v[p->prog.v[k->cl.members[smelt__red_member(&p->prog, &k->cl)]].in[0]];
        smelt__shape_str(b, it->ndim, it->shape);
        char held[96] = "";
        if (k->desc.multi && v && v->spread >= SMELT_SPREAD_HELD) { /* src/codegen/emit-rows-device.c, smelt__shape_device_rows */
            int K, kr;
            smelt__held_split(v->spread, &K, &kr);
            if (smelt__held_warps(v->spread) > 1)
                snprintf(held, sizeof held, ", its rows held by blocks of %d warps: %d elements a lane in registers",
                         smelt__held_warps(v->spread), K);
            else
                snprintf(held, sizeof held, ", its rows held: %d elements a lane in registers, %d in shared memory", kr,
                         K - kr);
        }
        if (k->desc.multi)
            smelt__sb_printf(b, " in rows (a row program of %d reduction%s%s)", k->rows_stages,
                             k->rows_stages == 1 ? "" : "s", held);
        if (!k->desc.reduce && v && smelt__is_tile(v->spread)) { /* src/codegen/emit-loop.c, smelt__shape_device_tile */
            smelt__sb_printf(b, " in tiles of %d x %d (input", SMELT_TILE, SMELT_TILE);
            for (int i = 0, n = 0; i < k->cl.nin; i++)
                if (smelt__tile_packed(v->spread, i))
                    smelt__sb_printf(b, "%s %d", n++ ? "," : "", i);
            smelt__sb_puts(b, " through shared memory)");
        }
        /* the dtype the kernel writes (its first member may be a comparison; a
         * dead operator, kept at opt_level 0, writes nothing) */
        int w = k->cl.nout ? k->cl.outputs[0] : k->cl.members[k->cl.nmem - 1];
        smelt__sb_printf(b, " %s\n", smelt__dtypes[p->prog.v[w].dtype].name);
        if (kof)
            describe_why(b, k, kof);
    }
    free(kof);
    if (p->log.len)
        smelt__sb_puts(b, smelt__sb_str(&p->log));
    smelt__settings_warnings(p->settings, b);
    smelt__dcache_store_warning(b);
}

const char *smelt_plan_describe(smelt_plan *p)
{
    if (!p)
        return "";
    describe(p);
    return smelt__sb_str(&p->desc);
}

int smelt_plan_get_stats(const smelt_plan *p, smelt_plan_stats *out)
{
    if (!p || !out)
        return SMELT_ERR_INVALID_ARG;
    smelt_plan *mp = (smelt_plan *)p; /* the tier lock only */
    pthread_mutex_lock(&mp->up_mu);
    *out = p->stats;
    out->tier_pending = p->pending;
    pthread_mutex_unlock(&mp->up_mu);
    out->kernels = p->nkern;
    out->ops = 0;
    out->kernels_fast = 0;
    out->tier_backend = p->up_be ? p->up_be->iface->name : NULL;
    out->mem_buffers = p->mem.buffers;
    out->mem_inplace = p->mem.inplace;
    out->mem_plan_ms = p->mem.ms;
    out->mem_bytes = p->opt_level >= 2 ? p->mem.arena : p->mem.naive;
    out->mem_lower_bytes = p->mem.lower;
    out->mem_naive_bytes = p->mem.naive;
    out->copies = 0;
    for (int i = 0; i < p->nkern; i++) {
        out->ops += p->kern[i].cl.nmem;
        for (int j = 0; j < p->kern[i].cl.nmem; j++)
            out->copies += p->prog.v[p->kern[i].cl.members[j]].op == SMELT_OP_COPY;
        out->kernels_fast += p->up_be && p->kern[i].nvar && p->kern[i].var[0].k->backend == p->up_be;
    }
    return SMELT_OK;
}

/* smelt_plan_new on a given backend (NULL: the one opts, the context or the
 * environment names). */
/* smelt_plan_new's arguments checked; its options (the defaults where
 * opts is NULL) in *o */
static int plan_check_args(smelt_ctx *ctx, smelt_graph *g, int n_out, smelt_node *const *outputs,
                           const smelt_plan_opts *opts, smelt_plan_opts *o)
{
    if (n_out <= 0 || !outputs)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "smelt_plan_new: no outputs requested");
    for (int i = 0; i < n_out; i++)
        if (!outputs[i] || outputs[i]->g != g)
            return smelt__err(ctx, SMELT_ERR_INVALID_ARG,
                              "smelt_plan_new: output %d is %s", i,
                              outputs[i] ? "a node of another graph" : "NULL");
    smelt_plan_opts_init(o);
    if (opts)
        *o = *opts;
    if (o->opt_level < 0 || o->opt_level > 3)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "opt_level must be 0..3, got %d", o->opt_level);
    if (o->n_donate < 0 || (o->n_donate && !o->donate))
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "smelt_plan_opts: n_donate is %d and donate %s", o->n_donate,
                          o->donate ? "set" : "NULL");
    for (int i = 0; i < o->n_donate; i++)
        if (o->donate[i] < 0 || o->donate[i] >= g->nin)
            return smelt__err(ctx, SMELT_ERR_INVALID_ARG,
                              "smelt_plan_opts: donate[%d] is %d, not an input of the graph (it has %d: 0..%d)", i,
                              o->donate[i], g->nin, g->nin - 1);
    return SMELT_OK;
}

/* The passes of opt_level >= 1 over the plan's program, counted in its
 * statistics */
static void plan_passes(smelt_plan *p)
{
    p->stats.folded = smelt__pass_fold(&p->prog);
    p->stats.cse = smelt__pass_cse(&p->prog);
    p->stats.simplified = smelt__pass_simplify(&p->prog, &p->stats.dead_branches);
    if (p->stats.simplified || p->stats.dead_branches) { /* what they leave may fold or repeat */
        p->stats.folded += smelt__pass_fold(&p->prog);
        p->stats.cse += smelt__pass_cse(&p->prog);
    }
    p->stats.conv_folded = smelt__pass_conv_affine(&p->prog); /* (over the tensors folding made) */
    if ((p->stats.views_moved = smelt__pass_views(&p->prog)))
        p->stats.cse += smelt__pass_cse(&p->prog); /* (views of one operand made twice) */
    p->stats.dce = smelt__pass_dce(&p->prog);
}

/* The per-value tables: output slots, buffers, memory offsets, donated inputs */
static int plan_values(smelt_plan *p, const smelt_plan_opts *o)
{
    p->out_slot = malloc(sizeof(int) * (size_t)(p->prog.n + 1));
    p->rs = calloc((size_t)p->prog.n + 1, sizeof *p->rs);
    p->buf = calloc((size_t)p->prog.n + 1, sizeof *p->buf);
    p->bufsize = calloc((size_t)p->prog.n + 1, sizeof *p->bufsize);
    p->moff = malloc(sizeof *p->moff * (size_t)(p->prog.n + 1));
    p->donated = calloc((size_t)p->prog.ninputs + 1, sizeof *p->donated);
    if (!p->out_slot || !p->rs || !p->buf || !p->bufsize || !p->moff || !p->donated)
        return smelt__err(p->ctx, SMELT_ERR_NOMEM, "out of memory");
    for (int i = 0; i < p->prog.n; i++)
        p->out_slot[i] = -1;
    for (int i = 0; i < p->prog.nout; i++)
        p->out_slot[p->prog.out_base[i]] = i; /* (the value its kernel writes: through views, in place) */
    for (int i = 0; i < o->n_donate; i++)
        p->donated[o->donate[i]] = true;
    return SMELT_OK;
}

/* Each kernel compiled at the layout every contiguous run will use (a
 * library call: none, its backend checked) */
static int plan_compile_contiguous(smelt_plan *p)
{
    smelt__backend *be = p->be;
    int st;
    for (int i = 0; i < p->nkern; i++) {
        if (p->kern[i].library) {
            if ((st = !be->iface->launch ? smelt__blas_check(p->ctx)
                      : !be->iface->gemm ? smelt__err(p->ctx, SMELT_ERR_UNSUPPORTED, "matmul: %s has no matrix product",
                                                      be->iface->name)
                                         : SMELT_OK))
                return st;
            continue;
        }
        int rank;
        uint8_t mode[SMELT_MAX_KERNEL_OPERANDS], rmask;
        uint16_t tile;
        default_layout(p, i, &rank, mode, &rmask, &tile);
        const smelt__inst *it = &p->prog.v[p->kern[i].cl.members[0]];
        if (rmask) /* a reduction: its iteration space is its operand's */
            it = &p->prog.v[p->prog.v[p->kern[i].cl.members[smelt__red_member(&p->prog, &p->kern[i].cl)]].in[0]];
        bool idx32 = be->iface->target.dialect->device && smelt__numel(it->ndim, it->shape) <= INT32_MAX &&
                     !smelt__kdesc_gathers(&p->kern[i].desc);
        int64_t nout = 0, nred = 0; /* a reduction's results and their elements */
        if (rmask) {
            const smelt__inst *y = &p->prog.v[p->kern[i].cl.members[smelt__red_member(&p->prog, &p->kern[i].cl)]];
            nout = smelt__numel(y->ndim, y->shape);
            nred = nout ? smelt__numel(it->ndim, it->shape) / nout : 0;
        }
        smelt__kernel *k;
        bool split;
        uint16_t spread = rmask ? smelt__red_spread(p, i, nout, nred, rank, rmask) : tile;
        if ((st = smelt__plan_variant(p, i, rank, mode, idx32, rmask, spread, &k, &split)))
            return st;
        if (split)
            i--; /* compile the replacements */
    }
    return SMELT_OK;
}

static int plan_new_on(smelt_ctx *ctx, smelt_graph *g, int n_out, smelt_node *const *outputs,
                       const smelt_plan_opts *opts, smelt__backend *forced, smelt_plan **out)
{
    if (!ctx)
        return SMELT_ERR_INVALID_ARG;
    if (!out)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "smelt_plan_new: out is NULL");
    *out = NULL;
    if (!g)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "smelt_plan_new: graph is NULL");
    if (g->status)
        return smelt__err(ctx, g->status, "graph has an error: %s", smelt__sb_str(&g->err));
    smelt_plan_opts o;
    int st = plan_check_args(ctx, g, n_out, outputs, opts, &o);
    if (st)
        return st;
    const smelt__settings *settings = smelt__ctx_settings(ctx); /* the environment, read now */
    int kind;
    smelt__backend *be = forced;
    if (!be && !(st = smelt__resolve_backend(ctx, o.backend, &kind)))
        st = smelt__backend_get(ctx, kind, &be);
    if (st)
        return st;
    kind = be->kind;

    smelt_plan *p = calloc(1, sizeof *p);
    if (!p)
        return smelt__err(ctx, SMELT_ERR_NOMEM, "out of memory");
    p->ctx = ctx;
    p->be = be;
    p->settings = settings;
    p->opt_level = o.opt_level;
    tier_init(p);
    const smelt__backend_info *bi = &smelt__backend_table[kind];
    if (bi->tier_up && smelt__backend_is_auto(ctx, o.backend)) {
        smelt__backend *up; /* the optimising tier, where this machine has one */
        if (smelt__backend_get(ctx, smelt__backend_find(bi->tier_up), &up) == SMELT_OK)
            p->up_be = up;
        else
            smelt__clear_err(ctx);
    }
    p->stats.backend = be->iface->name;
    if (be->iface->target.dialect->device) { /* a row program's registers (exec.c, smelt__red_spread) */
        p->rows_held_max = p->settings->rows_held;
        p->rows_shared = p->settings->rows_shared;
        p->rows_warps = p->settings->rows_warps;
        p->rows_steps = p->settings->rows_steps;
    }
    smelt__sb err;
    smelt__sb_init(&err);
    if (bi->disk_cache || p->up_be) {
        if (smelt__dcache_check(&err) < 0) /* say why kernels are compiled every time */
            smelt__sb_printf(&p->log, "warning: persistent kernel cache not used: %s\n", smelt__sb_str(&err));
        smelt__sb_free(&err);
    }
    if ((st = smelt__prog_from_graph(g, n_out, outputs, &p->prog, &err))) {
        smelt__err(ctx, st, "%s", smelt__sb_str(&err));
        goto fail;
    }
    p->prog.blk_isa = settings->blocks_isa; /* folding runs the kernels' primitives */
    if (o.opt_level >= 1)
        plan_passes(p);
    if ((st = smelt__prog_finalize(&p->prog))) {
        smelt__err(ctx, st, "out of memory");
        goto fail;
    }
    if ((st = plan_values(p, &o)))
        goto fail;
    smelt__partition pt;
    if ((st = smelt__partition_build(&p->prog, o.opt_level >= 3,
                                     be->iface->target.dialect->device ? SMELT_ROWS_MIN_DEVICE : SMELT_ROWS_MIN, &pt))) {
        smelt__err(ctx, st, st == SMELT_ERR_NOMEM ? "out of memory while partitioning the graph into kernels"
                                                  : "partitioning failed");
        goto fail;
    }
    st = smelt__plan_put_kernels(p, 0, 0, &pt);
    smelt__partition_free(&pt);
    if (st) {
        smelt__err(ctx, st, "out of memory");
        goto fail;
    }
    for (int v = 0; v < p->prog.n; v++) { /* the graph's shapes: the first layouts and memory plan */
        p->rs[v].ndim = p->prog.v[v].ndim;
        memcpy(p->rs[v].shape, p->prog.v[v].shape, sizeof p->rs[v].shape);
    }
    if ((st = plan_compile_contiguous(p)))
        goto fail;
    /* the memory plan for the graph's shapes (each run plans for its own) */
    if ((st = smelt__mem_plan(p, p->rs, smelt__mem_align(p), o.opt_level >= 2, p->moff, &p->mem))) {
        smelt__err(ctx, st, "out of memory");
        goto fail;
    }
    if (o.opt_level >= 2) /* a run of the graph's shapes takes these offsets as they are */
        p->msig = smelt__mem_sig(p);
    smelt__sb_free(&err);
    *out = p;
    return SMELT_OK;
fail:
    smelt__sb_free(&err);
    smelt_plan_free(p);
    return st;
}

int smelt_plan_num_kernels(const smelt_plan *p) { return p ? p->nkern : 0; }

static const smelt__kernel *plan_kernel(const smelt_plan *p, int i)
{
    if (!p || i < 0 || i >= p->nkern || !p->kern[i].nvar)
        return NULL;
    return p->kern[i].var[0].k;
}

const char *smelt_plan_kernel_name(const smelt_plan *p, int i)
{
    const smelt__kernel *k = plan_kernel(p, i);
    return k ? k->name : NULL;
}

const char *smelt_plan_kernel_source(const smelt_plan *p, int i)
{
    const smelt__kernel *k = plan_kernel(p, i);
    return k ? k->source : NULL;
}

int smelt_plan_new(smelt_ctx *ctx, smelt_graph *g, int n_out, smelt_node *const *outputs,
                   const smelt_plan_opts *opts, smelt_plan **out)
{
    return plan_new_on(ctx, g, n_out, outputs, opts, NULL, out);
}

int smelt_plan_emit_only(smelt_ctx *ctx, smelt_graph *g, int n_out, smelt_node *const *outputs,
                         const smelt_plan_opts *opts, const char *arch, char **report)
{
    if (!ctx)
        return SMELT_ERR_INVALID_ARG;
    if (!report)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "smelt_plan_emit_only: report is NULL");
    *report = NULL;
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    if (opts)
        o = *opts;
    /* the compile-only backend named (or the first) */
    int kind = -1;
    smelt__sb names;
    smelt__sb_init(&names);
    for (int k = 0; k < smelt__backend_count; k++) {
        if (!smelt__backend_table[k].compile_only)
            continue;
        smelt__sb_printf(&names, "%s%s", names.len ? " or " : "", smelt__backend_table[k].name);
        if (kind < 0 && (!o.backend || !strcasecmp(o.backend, smelt__backend_table[k].name)))
            kind = k;
    }
    if (kind < 0) {
        int st = smelt__err(ctx, SMELT_ERR_UNSUPPORTED,
                            "smelt_plan_emit_only: backend %s: only %s kernels can be emitted "
                            "without running them (use smelt_plan_new and smelt_plan_describe)",
                            o.backend ? o.backend : "AUTO", smelt__sb_str(&names));
        smelt__sb_free(&names);
        return st;
    }
    smelt__sb_free(&names);
    smelt__backend *be;
    int st = smelt__backend_table[kind].create(ctx, arch ? arch : "", &be);
    if (st)
        return st;
    be->kind = kind;
    smelt__sb why, fail;
    smelt__sb_init(&why);
    smelt__sb_init(&fail);
    if (!be->iface->available(be, &why)) {
        st = smelt__err(ctx, SMELT_ERR_BACKEND, "backend %s cannot compile: %s", be->iface->name,
                        smelt__sb_str(&why));
        smelt__sb_free(&why);
        be->iface->destroy(be);
        return st;
    }
    smelt__sb_free(&why);
    smelt_plan *p = NULL;
    st = plan_new_on(ctx, g, n_out, outputs, &o, be, &p);
    smelt__sb b;
    smelt__sb_init(&b);
    int rejected = be->iface->report(be, &b, &fail);
    if (b.len) {
        if (p)
            smelt__sb_printf(&b, "\n==== plan\n%s", smelt_plan_describe(p));
        *report = smelt__sb_take(&b);
    }
    smelt__sb_free(&b);
    smelt_plan_free(p);
    smelt__kcache_forget(ctx, be);
    be->iface->destroy(be);
    if (st == SMELT_OK && rejected)
        st = smelt__err(ctx, SMELT_ERR_COMPILE, "%s (the plan fell back to unfused kernels); see the report",
                        smelt__sb_str(&fail));
    smelt__sb_free(&fail);
    return st;
}
