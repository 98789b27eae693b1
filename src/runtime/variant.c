/* A plan's kernels and their variants: the one interface between building
 * a plan (plan.c) and running it (exec.c).  Each kernel is compiled for a
 * layout (rank, operand modes, index width, reduced dimensions, spread) on
 * demand: plan.c asks for the layout of contiguous operands, exec.c for the
 * layout a run meets; a fused kernel that fails to compile is replaced here
 * by its unfused kernels. */
#include <stdlib.h>
#include <string.h>

#include "plan.h"

void smelt__pkernel_free(smelt__pkernel *k)
{
    free(k->cl.members), free(k->cl.inputs), free(k->cl.outputs);
    smelt__kdesc_free(&k->desc);
    free(k->scratch);
    if (k->dscratch)
        smelt__be_free(k->dscratch_be, k->dscratch);
    free(k->gx);
    if (k->dgx)
        smelt__be_free(k->dgx_be, k->dgx);
    for (int i = 0; i < k->nvar; i++)
        smelt__kernel_unref(k->var[i].k), smelt__kernel_unref(k->var[i].base);
    free(k->var);
}

/* Whether operand o of row program k is at its results' shape without
 * keepdims: an output of that shape (the operand's rank is larger), or an
 * input that members of that shape read (the partitioner lets no other
 * member read it: src/fusion/partition.c rows_form). */
static bool rows_rn_operand(const smelt_plan *p, const smelt__pkernel *k, int o)
{
    const smelt__inst *R = &p->prog.v[k->cl.members[smelt__red_member(&p->prog, &k->cl)]];
    const smelt__inst *A = &p->prog.v[R->in[0]];
    int nn;
    int64_t rn[SMELT_MAX_DIMS];
    smelt__red_shape(A->ndim, A->shape, R->axes, false, &nn, rn);
    if (nn == A->ndim)
        return false;
    if (o >= k->cl.nin) {
        const smelt__inst *v = &p->prog.v[k->cl.outputs[o - k->cl.nin]];
        return v->ndim == nn && !memcmp(v->shape, rn, sizeof(int64_t) * (size_t)nn);
    }
    for (int j = 0; j < k->cl.nmem; j++) {
        const smelt__inst *m = &p->prog.v[k->cl.members[j]];
        if (smelt__is_reduce(m->op) || m->ndim != nn || memcmp(m->shape, rn, sizeof(int64_t) * (size_t)nn))
            continue;
        for (int i = 0; i < m->nin; i++)
            if (m->in[i] == k->cl.inputs[o])
                return true;
    }
    return false;
}

/* Insert clusters of pt at position at (replacing nrep kernels there). */
int smelt__plan_put_kernels(smelt_plan *p, int at, int nrep, smelt__partition *pt)
{
    int need = p->nkern - nrep + pt->n;
    if (need > p->kcap) {
        int cap = p->kcap ? p->kcap : 16;
        while (cap < need)
            cap *= 2;
        smelt__pkernel *k = realloc(p->kern, sizeof *k * (size_t)cap);
        if (!k)
            return SMELT_ERR_NOMEM;
        p->kern = k;
        p->kcap = cap;
    }
    for (int i = at; i < at + nrep; i++)
        smelt__pkernel_free(&p->kern[i]);
    memmove(p->kern + at + pt->n, p->kern + at + nrep,
            sizeof *p->kern * (size_t)(p->nkern - at - nrep));
    p->nkern = need;
    for (int i = 0; i < pt->n; i++) {
        smelt__pkernel *k = &p->kern[at + i];
        memset(k, 0, sizeof *k);
        k->cl = pt->c[i];
        memset(&pt->c[i], 0, sizeof pt->c[i]);
        int st = smelt__cluster_kdesc(&p->prog, &k->cl, &k->desc);
        if (st)
            return st;
        k->library = smelt__ops[p->prog.v[k->cl.members[0]].op].cls == SMELT_CLASS_LIBRARY;
        k->rows_cache = smelt__rows_cache_bytes(&k->desc); /* (once: exec.c sizes the scratch by it) */
        k->rows_held = k->desc.multi ? smelt__rows_held_bytes(&k->desc, &k->rows_math, &k->rows_shared) : -1;
        k->rows_stages = k->desc.multi ? smelt__red_count_members(&p->prog, &k->cl) : 0;
        for (int o = 0; k->desc.multi && o < k->cl.nin + k->cl.nout; o++)
            k->rn_operands |= (uint64_t)rows_rn_operand(p, k, o) << o;
        int real = 0;
        for (int j = 0; j < k->desc.n_ops; j++)
            real += k->desc.ops[j].op != SMELT_OP_CONST;
        k->fused = real > 1;
    }
    return SMELT_OK;
}

int smelt__plan_variant(smelt_plan *p, int ki, int rank, const uint8_t *mode, bool idx32, uint8_t rmask,
                        uint16_t spread, smelt__kernel **out, bool *split)
{
    smelt__pkernel *k = &p->kern[ki];
    int n = k->cl.nin + k->cl.nout;
    *split = false;
    for (int i = 0; i < k->nvar; i++)
        if (k->var[i].rank == rank && k->var[i].idx32 == idx32 && k->var[i].rmask == rmask &&
            k->var[i].spread == spread && !memcmp(k->var[i].mode, mode, (size_t)n)) {
            *out = k->var[i].k;
            return SMELT_OK;
        }
    k->desc.rank = rank;
    k->desc.idx32 = idx32;
    k->desc.rmask = rmask;
    k->desc.spread = spread;
    memcpy(k->desc.mode, mode, (size_t)n);
    smelt__sb err;
    smelt__sb_init(&err);
    bool compiled;
    double ms;
    smelt__kernel *kk;
    int st = smelt__kcache_get(p->ctx, p->be, &k->desc, &kk, &compiled, &ms, &err);
    p->stats.compile_ms += ms;
    if (st && p->up_be) { /* AUTO: the other CPU tier compiles it now */
        smelt__sb_printf(&p->log, "warning: %s failed for a kernel of %d operators (%s); compiled by %s\n",
                         p->be->iface->name, k->cl.nmem, smelt_strerror(st), p->up_be->iface->name);
        smelt__sb_free(&err);
        st = smelt__kcache_get(p->ctx, p->up_be, &k->desc, &kk, &compiled, &ms, &err);
        p->stats.compile_ms += ms;
    }
    if (st == SMELT_OK) {
        smelt__variant *v = realloc(k->var, sizeof *v * (size_t)(k->nvar + 1));
        if (!v) {
            smelt__kernel_unref(kk);
            smelt__sb_free(&err);
            return smelt__err(p->ctx, SMELT_ERR_NOMEM, "out of memory");
        }
        smelt__kernel_ref(kk); /* held as k and as base */
        k->var = v;
        v[k->nvar].rank = rank;
        v[k->nvar].idx32 = idx32;
        v[k->nvar].rmask = rmask;
        v[k->nvar].spread = spread;
        memcpy(v[k->nvar].mode, mode, sizeof v[k->nvar].mode);
        v[k->nvar].k = kk;
        v[k->nvar].base = kk;
        v[k->nvar].origin = !compiled ? SMELT__FROM_MEMORY
                            : kk->from_disk ? SMELT__FROM_DISK : SMELT__COMPILED;
        k->nvar++;
        if (p->up_be && p->runs >= 2)
            smelt__tier_submit_variant(p, ki, k->nvar - 1);
        if (!compiled)
            p->stats.cache_hits++;
        else if (kk->from_disk)
            p->stats.disk_hits++;
        else
            p->stats.compiles++;
        smelt__sb_free(&err);
        *out = kk;
        return SMELT_OK;
    }
    if (!k->fused || (st != SMELT_ERR_COMPILE && st != SMELT_ERR_UNSUPPORTED)) {
        st = smelt__err(p->ctx, st, "%s", smelt__sb_str(&err));
        smelt__sb_free(&err);
        return st;
    }
    /* fall back: the cluster's operators as separate kernels; the warning
     * quotes the compiler's first error line */
    const char *msg = smelt__sb_str(&err), *nl = strchr(msg, '\n');
    const char *why = nl && nl[1] ? nl + 1 : msg, *end = strchr(why, '\n');
    smelt__sb_printf(&p->log, "warning: fused kernel of %d operators failed to compile (%.*s); "
                              "running them unfused\n",
                     k->cl.nmem, end ? (int)(end - why) : (int)strlen(why), why);
    smelt__sb_free(&err);
    smelt__partition pt;
    st = smelt__partition_split(&p->prog, &k->cl, &pt);
    if (st == SMELT_OK)
        st = smelt__plan_put_kernels(p, ki, 1, &pt);
    smelt__partition_free(&pt);
    if (st)
        return smelt__err(p->ctx, st, "%s", st == SMELT_ERR_NOMEM
                                                ? "out of memory while splitting a fused kernel that failed to compile "
                                                  "into unfused ones"
                                                : "fallback to unfused kernels failed");
    p->stats.fallbacks++;
    *split = true;
    *out = NULL;
    return SMELT_OK;
}

