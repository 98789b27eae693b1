/* The in-memory kernel cache of a context: kernels keyed by (backend,
 * serialised description) and by (backend, generated source), whose hash
 * names them, in two chained hash tables.  The same cluster appearing many
 * times compiles once.  It is bounded, least recently used out first:
 *
 *   SMELT_MEM_CACHE_MAX_KERNELS   kernels (default 4096)
 *   SMELT_MEM_CACHE_MAX_MB        estimated MiB (default 256)
 *
 * read when a context's cache is created; a value that is not a number
 * above 0 is ignored (the default holds) and named in plan descriptions.
 * Eviction drops the cache's reference only: a kernel a plan still runs is
 * released by the last holder (smelt__kernel_unref). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime.h"

#define DEFAULT_MAX_KERNELS 4096
#define DEFAULT_MAX_MB 256

struct smelt__kcache {
    smelt__kernel **tab[2]; /* buckets by description, by source */
    size_t nb;              /* buckets in each (a power of two) */
    smelt__kernel *newest, *oldest;
    size_t n, bytes, max_n, max_bytes;
};

static void config(smelt__kcache *c, const smelt__settings *cfg, smelt__sb *warn)
{
    const char *keeps = "the in-memory kernel cache keeps";
    double n = smelt__bound(cfg, SMELT__S_SMELT_MEM_CACHE_MAX_KERNELS, DEFAULT_MAX_KERNELS, true, "kernels", keeps,
                            warn);
    double mb = smelt__bound(cfg, SMELT__S_SMELT_MEM_CACHE_MAX_MB, DEFAULT_MAX_MB, false, "MiB", keeps, warn);
    if (c)
        c->max_n = (size_t)n, c->max_bytes = (size_t)(mb * 1048576.0);
}


void smelt__kernel_ref(smelt__kernel *k) { __atomic_fetch_add(&k->refs, 1, __ATOMIC_RELAXED); }

void smelt__kernel_unref(smelt__kernel *k)
{
    if (!k || __atomic_sub_fetch(&k->refs, 1, __ATOMIC_ACQ_REL))
        return;
    k->backend->iface->release(k->backend, k->handle);
    free(k->source);
    free(k->desc);
    free(k);
}

static void lru_unlink(smelt__kcache *c, smelt__kernel *k)
{
    *(k->newer ? &k->newer->older : &c->newest) = k->older;
    *(k->older ? &k->older->newer : &c->oldest) = k->newer;
}

static void lru_push(smelt__kcache *c, smelt__kernel *k)
{
    k->newer = NULL;
    k->older = c->newest;
    *(c->newest ? &c->newest->newer : &c->oldest) = k;
    c->newest = k;
}

static void chain(smelt__kcache *c, smelt__kernel *k)
{
    for (int w = 0; w < 2; w++) {
        smelt__kernel **b = &c->tab[w][k->hash[w] & (c->nb - 1)];
        k->next[w] = *b;
        *b = k;
    }
}

/* Out of both tables and the LRU list, onto *gone (through older) for the
 * caller to drop the cache's reference. */
static void take_out(smelt__kcache *c, smelt__kernel *k, smelt__kernel **gone)
{
    for (int w = 0; w < 2; w++) {
        smelt__kernel **pp = &c->tab[w][k->hash[w] & (c->nb - 1)];
        while (*pp != k)
            pp = &(*pp)->next[w];
        *pp = k->next[w];
    }
    lru_unlink(c, k);
    c->n--;
    c->bytes -= k->bytes;
    k->older = *gone;
    *gone = k;
}

/* The kernel of be whose description (w 0) or source (w 1) is key (hash h),
 * made the most recently used, with a reference for the caller. */
static smelt__kernel *find(smelt_ctx *ctx, const smelt__backend *be, int w, uint64_t h,
                           const smelt__sb *key)
{
    pthread_mutex_lock(&ctx->lock);
    smelt__kcache *c = ctx->kcache;
    smelt__kernel *k = c && c->nb ? c->tab[w][h & (c->nb - 1)] : NULL;
    while (k && !(k->hash[w] == h && k->backend == be && (w ? k->src_len : k->desc_len) == key->len &&
                  !memcmp(w ? k->source : k->desc, key->s, key->len)))
        k = k->next[w];
    if (k) {
        lru_unlink(c, k);
        lru_push(c, k);
        smelt__kernel_ref(k);
    }
    pthread_mutex_unlock(&ctx->lock);
    return k;
}

/* Add k (the table grown to a bucket per kernel), then evict the least
 * recently used while over a bound; the evicted are chained on *gone
 * (through older) for the caller to drop.  Under ctx->lock. */
static int insert(smelt__kcache *c, smelt__kernel *k, smelt__kernel **gone)
{
    if (c->n + 1 > c->nb) {
        size_t nb = c->nb ? c->nb * 2 : 64;
        smelt__kernel **t0 = calloc(nb, sizeof *t0), **t1 = calloc(nb, sizeof *t1);
        if (!t0 || !t1) {
            free(t0), free(t1);
            return SMELT_ERR_NOMEM;
        }
        free(c->tab[0]), free(c->tab[1]);
        c->tab[0] = t0, c->tab[1] = t1, c->nb = nb;
        for (smelt__kernel *o = c->newest; o; o = o->older)
            chain(c, o);
    }
    chain(c, k);
    lru_push(c, k);
    c->n++;
    c->bytes += k->bytes;
    *gone = NULL;
    while ((c->n > c->max_n || c->bytes > c->max_bytes) && c->oldest != k)
        take_out(c, c->oldest, gone);
    return SMELT_OK;
}

static void drop_all(smelt__kernel *k)
{
    for (smelt__kernel *o; k; k = o) {
        o = k->older;
        smelt__kernel_unref(k);
    }
}

void smelt__kcache_free(smelt__kcache *c)
{
    if (!c)
        return;
    drop_all(c->newest);
    free(c->tab[0]), free(c->tab[1]);
    free(c);
}

void smelt__kcache_forget(smelt_ctx *ctx, smelt__backend *be)
{
    pthread_mutex_lock(&ctx->lock);
    smelt__kcache *c = ctx->kcache;
    smelt__kernel *gone = NULL;
    for (smelt__kernel *k = c ? c->newest : NULL, *o; k; k = o) {
        o = k->older;
        if (k->backend == be)
            take_out(c, k, &gone);
    }
    pthread_mutex_unlock(&ctx->lock);
    drop_all(gone);
}

int smelt__kcache_count(smelt_ctx *ctx, size_t *bytes)
{
    pthread_mutex_lock(&ctx->lock);
    smelt__kcache *c = ctx->kcache;
    int n = c ? (int)c->n : 0;
    if (bytes)
        *bytes = c ? c->bytes : 0;
    pthread_mutex_unlock(&ctx->lock);
    return n;
}

/* A kernel description as bytes, field by field, with what else decides
 * its source (the template override folder). */
static void serialise(smelt__sb *b, const smelt__kdesc *d, const char *tdir)
{
    int head[] = {d->n_in, d->n_out, d->n_ops, d->rank, d->idx32, d->reduce, d->red, d->rmask, d->multi, d->spread};
    smelt__sb_putn(b, (const char *)head, sizeof head);
    smelt__sb_putn(b, (const char *)d->in_dt, sizeof d->in_dt[0] * (size_t)d->n_in);
    smelt__sb_putn(b, (const char *)d->out_val, sizeof d->out_val[0] * (size_t)d->n_out);
    smelt__sb_putn(b, (const char *)d->mode, (size_t)(d->n_in + d->n_out));
    smelt__sb_putn(b, (const char *)d->gidx, (size_t)d->n_in);
    for (int i = 0; i < d->n_ops; i++) {
        const smelt__kop *k = &d->ops[i];
        int f[] = {(int)k->op, (int)k->dtype, k->small, k->nin, k->in[0], k->in[1], k->in[2]};
        smelt__sb_putn(b, (const char *)f, sizeof(int) * (size_t)(4 + k->nin));
        if (k->op == SMELT_OP_CONST) {
            smelt__sb_putn(b, (const char *)&k->fval, sizeof k->fval);
            smelt__sb_putn(b, (const char *)&k->ival, sizeof k->ival);
        }
    }
    smelt__sb_puts(b, tdir ? tdir : "");
}

static void dump_source(const char *dir, const char *name, const char *ext, const char *src)
{
    if (!dir || !*dir)
        return;
    smelt__mkdir_p(dir, 0755); /* as --dump does; describe warns when it cannot */
    char path[4096];
    snprintf(path, sizeof path, "%s/%s.%s", dir, name, ext);
    FILE *f = fopen(path, "w");
    if (f) {
        fputs(src, f);
        fclose(f);
    }
}


int smelt__kcache_get(smelt_ctx *ctx, smelt__backend *be, const smelt__kdesc *d,
                      smelt__kernel **out, bool *compiled, double *ms, smelt__sb *err)
{
    *out = NULL;
    *compiled = false;
    *ms = 0;
    if (be->iface->supports && !be->iface->supports(be, d, err))
        return SMELT_ERR_UNSUPPORTED;
    smelt__sb desc, src, log;
    smelt__sb_init(&desc);
    smelt__sb_init(&src);
    smelt__sb_init(&log);
    char name[40];
    void *fn = NULL, *handle = NULL;
    smelt__kernel *k = NULL, *gone = NULL;
    /* the same description again (a repeated layer): no emission at all */
    const smelt__settings *cfg = smelt__settings_of(ctx);
    const char *tdir = cfg->raw[SMELT__S_SMELT_TEMPLATE_DIR];
    serialise(&desc, d, tdir);
    uint64_t seed = (uint64_t)(uintptr_t)be, hd = smelt__hash(desc.s, desc.len, seed), hs = 0;
    int st = desc.oom ? SMELT_ERR_NOMEM : SMELT_OK;
    if (st)
        goto nomem;
    if ((*out = find(ctx, be, 0, hd, &desc)))
        goto done;
    const char *tdir_was = smelt__templates_from(tdir);
    st = smelt__emit(&be->iface->target, d, &src, name, err);
    smelt__templates_from(tdir_was);
    if (st)
        goto done;
    /* another description with the same source (e.g. other operand modes
     * that the source does not distinguish; the source names the kernel) */
    hs = smelt__hash(src.s, src.len, seed);
    if ((*out = find(ctx, be, 1, hs, &src)))
        goto done;
    dump_source(cfg->raw[SMELT__S_SMELT_DUMP_DIR], name, be->iface->target.dialect->ext, src.s);
    double t0 = smelt__now_ms();
    unsigned long disk0 = smelt__dcache_thread_hits();
    st = be->iface->compile(be, src.s, name, &fn, &handle, &log);
    bool from_disk = smelt__dcache_thread_hits() != disk0;
    *ms = smelt__now_ms() - t0;
    if (st) {
        smelt__sb_printf(err, "%s failed to compile %s:\n%s", be->iface->name, name,
                         smelt__sb_str(&log));
        st = SMELT_ERR_COMPILE;
        goto done;
    }
    k = calloc(1, sizeof *k);
    if (k) {
        memcpy(k->name, name, sizeof k->name);
        k->src_len = src.len;
        k->desc_len = desc.len;
        /* the code and the backend's state for it grow with the source:
         * about 3 bytes a source byte and 4 KiB (measured with TinyCC) */
        k->bytes = sizeof *k + desc.len + 4 * src.len + 4096;
        k->desc = smelt__sb_take(&desc);
        k->source = smelt__sb_take(&src);
        memcpy(&k->fn, &fn, sizeof k->fn); /* object to function pointer, as dlsym */
        k->handle = handle;
        k->backend = be;
        k->from_disk = from_disk;
        k->n_operands = d->n_in + d->n_out;
        k->rank = d->rank;
        k->step = smelt__emit_step(&be->iface->target, d);
        k->refs = 2; /* the cache's and the caller's */
        k->hash[0] = hd;
        k->hash[1] = hs;
    }
    pthread_mutex_lock(&ctx->lock);
    if (!ctx->kcache && (ctx->kcache = calloc(1, sizeof *ctx->kcache)))
        config(ctx->kcache, cfg, NULL);
    st = k && ctx->kcache ? insert(ctx->kcache, k, &gone) : SMELT_ERR_NOMEM;
    pthread_mutex_unlock(&ctx->lock);
    drop_all(gone);
    if (!st) {
        *out = k;
        *compiled = true;
        goto done;
    }
    if (k) {
        k->refs = 1;
        smelt__kernel_unref(k);
    } else {
        be->iface->release(be, handle);
    }
nomem:
    smelt__sb_puts(err, "out of memory");
done:
    smelt__sb_free(&log);
    smelt__sb_free(&src);
    smelt__sb_free(&desc);
    return st;
}
