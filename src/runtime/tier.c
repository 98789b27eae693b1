/* Tiered compilation: a context's background compiler.  Under AUTO on a CPU
 * a plan runs TinyCC kernels at once and queues each kernel here for the CC
 * backend; a finished kernel is recorded on its plan and switched in, with
 * all others finished by then, at the start of the plan's next run. */
#include <stdlib.h>
#include <string.h>

#include "plan.h"

typedef struct job {
    struct job *next;
    smelt_plan *plan;
    smelt__kdesc desc; /* own copy of the operators */
    smelt__kernel *base; /* a reference held */
} job;

struct smelt__bg {
    smelt_ctx *ctx;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    job *head, *tail;
    smelt_plan *busy; /* plan of the job being compiled */
    bool stop;
};

static void job_free(job *j)
{
    smelt__kernel_unref(j->base);
    smelt__kdesc_free(&j->desc);
    free(j);
}

/* A job done: its kernel (fast; NULL: failed with err) and its time go to the plan. */
static void finish(smelt_plan *p, smelt__kernel *base, smelt__kernel *fast, double ms, const char *err)
{
    pthread_mutex_lock(&p->up_mu);
    p->stats.tier_compile_ms += ms;
    if (fast) {
        smelt__upgrade *u = realloc(p->ups, sizeof *u * (size_t)(p->nups + 1));
        if (u) {
            p->ups = u;
            smelt__kernel_ref(base); /* fast's reference passes to the list */
            p->ups[p->nups++] = (smelt__upgrade){base, fast};
        } else {
            smelt__kernel_unref(fast);
        }
    } else {
        smelt__sb_printf(&p->log, "warning: %s tier failed for %s; it stays on %s (%.200s)\n",
                         p->up_be->iface->name, base->name, base->backend->iface->name, err);
    }
    p->pending--;
    pthread_cond_broadcast(&p->up_cv);
    pthread_mutex_unlock(&p->up_mu);
}

static void *worker(void *arg)
{
    struct smelt__bg *bg = arg;
    pthread_mutex_lock(&bg->mu);
    for (;;) {
        while (!bg->stop && !bg->head)
            pthread_cond_wait(&bg->cv, &bg->mu);
        if (bg->stop)
            break;
        job *j = bg->head;
        bg->head = j->next;
        if (!bg->head)
            bg->tail = NULL;
        bg->busy = j->plan;
        pthread_mutex_unlock(&bg->mu);

        smelt_plan *p = j->plan;
        smelt__sb err;
        smelt__sb_init(&err);
        smelt__kernel *k = NULL;
        bool compiled;
        double ms;
        int st = smelt__kcache_get(bg->ctx, p->up_be, &j->desc, &k, &compiled, &ms, &err);
        finish(p, j->base, st ? NULL : k, ms, smelt__sb_str(&err));
        smelt__sb_free(&err);
        job_free(j);

        pthread_mutex_lock(&bg->mu);
        bg->busy = NULL;
        pthread_cond_broadcast(&bg->cv);
    }
    pthread_mutex_unlock(&bg->mu);
    return NULL;
}

static int tier_submit(smelt_plan *p, const smelt__kdesc *d, smelt__kernel *base)
{
    smelt_ctx *ctx = p->ctx;
    if (!ctx->bg) {
        struct smelt__bg *bg = calloc(1, sizeof *bg);
        if (!bg)
            return SMELT_ERR_NOMEM;
        bg->ctx = ctx;
        pthread_mutex_init(&bg->mu, NULL);
        pthread_cond_init(&bg->cv, NULL);
        if (pthread_create(&bg->th, NULL, worker, bg)) {
            free(bg);
            return SMELT_ERR_NOMEM;
        }
        ctx->bg = bg;
    }
    job *j = calloc(1, sizeof *j);
    smelt__kop *ops = malloc(sizeof *ops * (size_t)(d->n_ops ? d->n_ops : 1));
    if (!j || !ops) {
        free(j);
        free(ops);
        return SMELT_ERR_NOMEM;
    }
    *j = (job){.plan = p, .desc = *d, .base = base};
    j->desc.ops = memcpy(ops, d->ops, sizeof *ops * (size_t)d->n_ops);
    smelt__kernel_ref(base);
    pthread_mutex_lock(&p->up_mu);
    p->pending++;
    pthread_mutex_unlock(&p->up_mu);
    struct smelt__bg *bg = ctx->bg;
    pthread_mutex_lock(&bg->mu);
    if (bg->tail)
        bg->tail->next = j;
    else
        bg->head = j;
    bg->tail = j;
    pthread_cond_signal(&bg->cv);
    pthread_mutex_unlock(&bg->mu);
    return SMELT_OK;
}

void smelt__tier_submit_variant(smelt_plan *p, int ki, int vi)
{
    smelt__pkernel *k = &p->kern[ki];
    smelt__variant *v = &k->var[vi];
    if (v->base->backend == p->up_be) /* compiled by it already (its first tier failed) */
        return;
    smelt__kdesc d = k->desc; /* the variant's layout; the job copies the operators */
    d.rank = v->rank;
    d.idx32 = v->idx32;
    d.rmask = v->rmask;
    d.spread = v->spread;
    memcpy(d.mode, v->mode, sizeof d.mode);
    if (tier_submit(p, &d, v->base))
        smelt__sb_puts(&p->log, "warning: cannot queue a kernel for the optimising tier\n");
}

/* A plan is tiered up from its second run: a plan run once (a one-shot
 * evaluation) never waits for, or pays for, the optimising compiler. */
void smelt__tier_start(smelt_plan *p)
{
    if (!p->up_be || ++p->runs != 2)
        return;
    for (int i = 0; i < p->nkern; i++)
        for (int v = 0; v < p->kern[i].nvar; v++)
            smelt__tier_submit_variant(p, i, v);
}

void smelt__tier_cancel(smelt_plan *p)
{
    struct smelt__bg *bg = p->ctx->bg;
    if (!bg)
        return;
    pthread_mutex_lock(&bg->mu);
    job **pp = &bg->head, *last = NULL;
    while (*pp) {
        job *j = *pp;
        if (j->plan == p) {
            *pp = j->next;
            job_free(j);
        } else {
            last = j;
            pp = &j->next;
        }
    }
    bg->tail = last;
    while (bg->busy == p)
        pthread_cond_wait(&bg->cv, &bg->mu);
    pthread_mutex_unlock(&bg->mu);
}

void smelt__bg_free(struct smelt__bg *bg)
{
    if (!bg)
        return;
    smelt__raise_flag(&bg->mu, &bg->cv, &bg->stop);
    pthread_join(bg->th, NULL); /* ctx->bg is set once its thread runs */
    while (bg->head) {
        job *j = bg->head;
        bg->head = j->next;
        job_free(j);
    }
    pthread_mutex_destroy(&bg->mu);
    pthread_cond_destroy(&bg->cv);
    free(bg);
}

void smelt__tier_apply(smelt_plan *p)
{
    if (!p->up_be)
        return;
    pthread_mutex_lock(&p->up_mu);
    if (p->napplied != p->nups) {
        for (int i = 0; i < p->nkern; i++)
            for (int v = 0; v < p->kern[i].nvar; v++) {
                smelt__variant *var = &p->kern[i].var[v];
                for (int u = 0; u < p->nups; u++)
                    if (p->ups[u].base == var->base && var->k != p->ups[u].fast) {
                        smelt__kernel_ref(p->ups[u].fast);
                        smelt__kernel_unref(var->k);
                        var->k = p->ups[u].fast;
                    }
            }
        p->napplied = p->nups;
    }
    pthread_mutex_unlock(&p->up_mu);
}

int smelt_plan_wait(smelt_plan *p)
{
    if (!p)
        return SMELT_ERR_INVALID_ARG;
    if (!p->up_be)
        return SMELT_OK;
    pthread_mutex_lock(&p->up_mu);
    while (p->pending > 0)
        pthread_cond_wait(&p->up_cv, &p->up_mu);
    pthread_mutex_unlock(&p->up_mu);
    return SMELT_OK;
}
