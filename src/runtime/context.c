/* Contexts and the per-context registry of backends. */
#include <stdlib.h>
#include <strings.h>

#include "runtime.h"

int smelt_ctx_new(smelt_ctx **out)
{
    if (!out)
        return SMELT_ERR_INVALID_ARG;
    smelt_ctx *c = *out = calloc(1, sizeof *c);
    if (!c)
        return SMELT_ERR_NOMEM;
    pthread_mutex_init(&c->lock, NULL);
    smelt__settings_hold(1);
    c->settings = smelt__settings_read();
    return SMELT_OK;
}

void smelt_ctx_free(smelt_ctx *ctx)
{
    if (!ctx)
        return;
    smelt__bg_free(ctx->bg); /* before the kernels its jobs would write */
    smelt__kcache_free(ctx->kcache);
    for (int i = 0; i < smelt__backend_count; i++)
        if (ctx->backends[i])
            ctx->backends[i]->iface->destroy(ctx->backends[i]);
    smelt__pool_free(ctx->pool);
    pthread_mutex_destroy(&ctx->lock);
    free(ctx->backend_override);
    smelt__sb_free(&ctx->base.err);
    free(ctx);
    smelt__settings_hold(-1);
}

int smelt_ctx_set_threads(smelt_ctx *ctx, int threads)
{
    if (!ctx)
        return SMELT_ERR_INVALID_ARG;
    if (threads < 0)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "threads must be >= 0 (0 = all cores), got %d", threads);
    if (threads != ctx->threads) {
        smelt__pool_free(ctx->pool);
        ctx->pool = NULL;
        ctx->threads = threads;
    }
    return SMELT_OK;
}

int smelt_ctx_threads(const smelt_ctx *ctx)
{
    if (!ctx)
        return 0;
    return ctx->threads ? ctx->threads : smelt__ncpus();
}

int smelt__backend_new(smelt_ctx *ctx, const smelt__backend_i *iface, size_t context_bytes,
                       smelt__backend **out)
{
    smelt__backend *be = calloc(1, sizeof *be);
    void *c = context_bytes ? calloc(1, context_bytes) : NULL;
    *out = NULL;
    if (!be || (context_bytes && !c)) {
        free(be);
        free(c);
        return smelt__err(ctx, SMELT_ERR_NOMEM, "out of memory");
    }
    *be = (smelt__backend){.iface = iface, .context = c, .ctx = ctx};
    *out = be;
    return SMELT_OK;
}

void *smelt__be_alloc(smelt__backend *be, size_t bytes)
{
    return be->iface->alloc ? be->iface->alloc(be, bytes) : smelt__aligned_alloc(bytes);
}

void smelt__be_free(smelt__backend *be, void *ptr)
{
    if (be->iface->free)
        be->iface->free(be, ptr);
    else
        free(ptr);
}

int smelt__backend_find(const char *name)
{
    for (int k = 0; name && k < smelt__backend_count; k++)
        if (!strcasecmp(name, smelt__backend_table[k].name))
            return k;
    return -1;
}

const char *smelt_backend_name(int i, const char **about)
{
    if (i < 0 || i >= smelt__backend_count)
        return NULL;
    if (about)
        *about = smelt__backend_table[i].about;
    return smelt__backend_table[i].name;
}

int smelt__backend_get(smelt_ctx *ctx, int kind, smelt__backend **out)
{
    *out = NULL;
    if (kind < 0 || kind >= smelt__backend_count)
        return smelt__err(ctx, SMELT_ERR_BACKEND, "no backend of kind %d", kind);
    if (!ctx->backends[kind]) {
        smelt__backend *be;
        int st = smelt__backend_table[kind].create(ctx, NULL, &be);
        if (st)
            return st;
        be->kind = kind;
        smelt__sb why;
        smelt__sb_init(&why);
        if (!be->iface->available(be, &why))
            st = smelt__err(ctx, SMELT_ERR_BACKEND, "backend %s is not available: %s",
                            be->iface->name, smelt__sb_str(&why));
        smelt__sb_free(&why);
        if (st) {
            be->iface->destroy(be);
            return st;
        }
        ctx->backends[kind] = be;
    }
    *out = ctx->backends[kind];
    return SMELT_OK;
}

int smelt__backend_device(smelt_ctx *ctx, smelt__backend **out)
{
    int st = smelt__err(ctx, SMELT_ERR_BACKEND, "no device backend is registered");
    for (int k = 0; k < smelt__backend_count; k++)
        if (smelt__backend_table[k].device && !(st = smelt__backend_get(ctx, k, out)))
            break;
    return st;
}

int smelt_backend_check(smelt_ctx *ctx, const char *name)
{
    if (!ctx)
        return SMELT_ERR_INVALID_ARG;
    int kind; /* name NULL: the one in force (context, environment, AUTO) */
    int st = smelt__resolve_backend(ctx, name, &kind);
    if (st)
        return st;
    smelt__backend *be;
    return smelt__backend_get(ctx, kind, &be);
}
