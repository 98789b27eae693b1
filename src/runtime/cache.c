/* The in-memory kernel cache of a context: kernels keyed by their generated
 * source (whose hash names them) and backend.  The same cluster appearing
 * many times compiles once. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime.h"

struct smelt__kcache {
    smelt__kernel **v;
    int n, cap;
};

void smelt__kcache_free(smelt__kcache *c)
{
    if (!c)
        return;
    for (int i = 0; i < c->n; i++) {
        c->v[i]->backend->iface->release(c->v[i]->backend, c->v[i]->handle);
        free(c->v[i]->source);
        free(c->v[i]->desc);
        free(c->v[i]);
    }
    free(c->v);
    free(c);
}

void smelt__kcache_forget(smelt_ctx *ctx, smelt__backend *be)
{
    pthread_mutex_lock(&ctx->lock);
    smelt__kcache *c = ctx->kcache;
    int n = 0;
    for (int i = 0; c && i < c->n; i++) {
        smelt__kernel *k = c->v[i];
        if (k->backend != be) {
            c->v[n++] = k;
            continue;
        }
        be->iface->release(be, k->handle);
        free(k->source);
        free(k->desc);
        free(k);
    }
    if (c)
        c->n = n;
    pthread_mutex_unlock(&ctx->lock);
}

/* A kernel description as bytes, field by field, with what else decides
 * its source (the template override folder). */
static void serialise(smelt__sb *b, const smelt__kdesc *d)
{
    int head[] = {d->n_in, d->n_out, d->n_ops, d->rank, d->blocks, d->idx32};
    smelt__sb_putn(b, (const char *)head, sizeof head);
    smelt__sb_putn(b, (const char *)d->in_dt, sizeof d->in_dt[0] * (size_t)d->n_in);
    smelt__sb_putn(b, (const char *)d->out_val, sizeof d->out_val[0] * (size_t)d->n_out);
    smelt__sb_putn(b, (const char *)d->mode, (size_t)(d->n_in + d->n_out));
    for (int i = 0; i < d->n_ops; i++) {
        const smelt__kop *k = &d->ops[i];
        int f[] = {(int)k->op, (int)k->dtype, k->nin, k->in[0], k->in[1], k->in[2]};
        smelt__sb_putn(b, (const char *)f, sizeof(int) * (size_t)(3 + k->nin));
        if (k->op == SMELT_OP_CONST) {
            smelt__sb_putn(b, (const char *)&k->fval, sizeof k->fval);
            smelt__sb_putn(b, (const char *)&k->ival, sizeof k->ival);
        }
    }
    const char *tdir = getenv("SMELT_TEMPLATE_DIR");
    smelt__sb_puts(b, tdir ? tdir : "");
}

static smelt__kernel *lookup_desc(smelt__kcache *c, smelt__backend *be, const smelt__sb *desc)
{
    for (int i = 0; c && i < c->n; i++)
        if (c->v[i]->backend == be && c->v[i]->desc_len == desc->len &&
            !memcmp(c->v[i]->desc, desc->s, desc->len))
            return c->v[i];
    return NULL;
}

static smelt__kernel *lookup(smelt__kcache *c, smelt__backend *be, const char *name,
                             const char *src)
{
    for (int i = 0; c && i < c->n; i++)
        if (c->v[i]->backend == be && !strcmp(c->v[i]->name, name) && !strcmp(c->v[i]->source, src))
            return c->v[i];
    return NULL;
}

static void dump_source(const char *name, const char *ext, const char *src)
{
    const char *dir = getenv("SMELT_DUMP_DIR");
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

void smelt__dump_dir_warning(smelt__sb *warn)
{
    const char *dir = getenv("SMELT_DUMP_DIR");
    struct stat st;
    if (dir && *dir &&
        (smelt__mkdir_p(dir, 0755) || stat(dir, &st) || !S_ISDIR(st.st_mode) || access(dir, W_OK)))
        smelt__sb_printf(warn, "warning: SMELT_DUMP_DIR='%s' is not a folder that can be created "
                               "and written: no kernel sources are written\n", dir);
}

int smelt__kcache_get(smelt_ctx *ctx, smelt__backend *be, const smelt__kdesc *d,
                      smelt__kernel **out, bool *compiled, double *ms, smelt__sb *err)
{
    *out = NULL;
    *compiled = false;
    *ms = 0;
    if (be->iface->supports && !be->iface->supports(be, d, err))
        return SMELT_ERR_UNSUPPORTED;
    /* the same description again (a repeated layer): no emission at all */
    smelt__sb desc;
    smelt__sb_init(&desc);
    serialise(&desc, d);
    if (desc.oom) {
        smelt__sb_free(&desc);
        smelt__sb_puts(err, "out of memory");
        return SMELT_ERR_NOMEM;
    }
    pthread_mutex_lock(&ctx->lock);
    smelt__kernel *k = lookup_desc(ctx->kcache, be, &desc);
    pthread_mutex_unlock(&ctx->lock);
    if (k) {
        smelt__sb_free(&desc);
        *out = k;
        return SMELT_OK;
    }
    smelt__sb src;
    smelt__sb_init(&src);
    char name[40];
    int st = smelt__emit(be->iface->dialect, d, &src, name, err);
    if (st) {
        smelt__sb_free(&src);
        smelt__sb_free(&desc);
        return st;
    }
    /* another description with the same source (e.g. other operand modes
     * that the source does not distinguish) */
    pthread_mutex_lock(&ctx->lock);
    k = lookup(ctx->kcache, be, name, src.s);
    pthread_mutex_unlock(&ctx->lock);
    if (k) {
        smelt__sb_free(&src);
        smelt__sb_free(&desc);
        *out = k;
        return SMELT_OK;
    }
    dump_source(name, be->iface->dialect->ext, src.s);
    double t0 = smelt__now_ms();
    void *fn = NULL, *handle = NULL;
    smelt__sb log;
    smelt__sb_init(&log);
    unsigned long disk0 = smelt__dcache_thread_hits();
    st = be->iface->compile(be, src.s, name, &fn, &handle, &log);
    bool from_disk = smelt__dcache_thread_hits() != disk0;
    *ms = smelt__now_ms() - t0;
    if (st) {
        smelt__sb_printf(err, "%s failed to compile %s:\n%s", be->iface->name, name,
                         smelt__sb_str(&log));
        smelt__sb_free(&log);
        smelt__sb_free(&src);
        smelt__sb_free(&desc);
        return SMELT_ERR_COMPILE;
    }
    smelt__sb_free(&log);
    k = calloc(1, sizeof *k);
    pthread_mutex_lock(&ctx->lock);
    if (!ctx->kcache)
        ctx->kcache = calloc(1, sizeof *ctx->kcache);
    smelt__kcache *c = ctx->kcache;
    if (c && c->n == c->cap) {
        int cap = c->cap ? c->cap * 2 : 32;
        smelt__kernel **v = realloc(c->v, sizeof *v * (size_t)cap);
        if (v) {
            c->v = v;
            c->cap = cap;
        }
    }
    if (!k || !c || c->n == c->cap) {
        pthread_mutex_unlock(&ctx->lock);
        be->iface->release(be, handle);
        free(k);
        smelt__sb_free(&src);
        smelt__sb_free(&desc);
        smelt__sb_puts(err, "out of memory");
        return SMELT_ERR_NOMEM;
    }
    memcpy(k->name, name, sizeof k->name);
    k->desc_len = desc.len;
    k->desc = smelt__sb_take(&desc);
    k->source = smelt__sb_take(&src);
    memcpy(&k->fn, &fn, sizeof k->fn); /* object to function pointer, as dlsym */
    k->handle = handle;
    k->backend = be;
    k->from_disk = from_disk;
    k->n_operands = d->n_in + d->n_out;
    k->rank = d->rank;
    c->v[c->n++] = k;
    pthread_mutex_unlock(&ctx->lock);
    *out = k;
    *compiled = true;
    return SMELT_OK;
}
