/* The backend interface.  A backend is an {iface, context} pair; the plan
 * builder and the executor only ever call through the iface. */
#ifndef SMELT_BACKEND_H
#define SMELT_BACKEND_H

typedef struct smelt__backend_i {
    const char *name;
    const smelt__dialect *dialect;
    int unroll; /* lanes of the unrolled loop body the emitter writes */
    /* 1 if usable here; otherwise 0 with the reason in why. */
    int (*available)(smelt__backend *be, smelt__sb *why);
    /* Compile source; look up fn_name; *fn the entry point, *handle what
     * release() frees.  On failure SMELT_ERR_COMPILE with the log in log. */
    int (*compile)(smelt__backend *be, const char *source, const char *fn_name, void **fn,
                   void **handle, smelt__sb *log);
    void (*release)(smelt__backend *be, void *handle);
    /* Memory for tensors the executor owns (host backends: aligned malloc). */
    void *(*alloc)(smelt__backend *be, size_t bytes);
    void (*free)(smelt__backend *be, void *ptr);
    void (*destroy)(smelt__backend *be);
} smelt__backend_i;

struct smelt__backend {
    const smelt__backend_i *iface;
    void *context;
    smelt_ctx *ctx;
    int kind; /* SMELT_BK_* */
};

smelt__backend *smelt__backend_tcc_new(smelt_ctx *ctx);
/* The backend of the given kind for ctx (created once per context). */
int smelt__backend_get(smelt_ctx *ctx, int kind, smelt__backend **out);
void *smelt__host_alloc(smelt__backend *be, size_t bytes);
void smelt__host_free(smelt__backend *be, void *ptr);

#endif
