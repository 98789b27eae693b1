/* TinyCC backend: in-memory compilation with libtcc, -nostdlib -Werror,
 * every math function bound with tcc_add_symbol. */
#include <stdio.h>
#include <libtcc.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* libtcc has global state: one compile at a time in the whole process. */
static pthread_mutex_t tcc_lock = PTHREAD_MUTEX_INITIALIZER;

static void on_error(void *opaque, const char *msg) { smelt__sb_printf(opaque, "%s\n", msg); }

static int tcc_available(smelt__backend *be, smelt__sb *why)
{
    SMELT_UNUSED(be), SMELT_UNUSED(why);
    return 1; /* linked in statically */
}

/* Each tcc_add_symbol costs ~0.7 us: bind only the functions the source calls. */
static bool calls(const char *source, const char *fn)
{
    size_t n = strlen(fn);
    for (const char *p = source; (p = strstr(p, fn)); p += n) {
        char before = p == source ? ' ' : p[-1];
        if (p[n] == '(' && !(before == '_' || (before >= 'a' && before <= 'z') ||
                             (before >= 'A' && before <= 'Z') || (before >= '0' && before <= '9')))
            return true;
    }
    return false;
}

static void bind_math(TCCState *s, const char *source)
{
    /* function to object pointers by memcpy (ISO C has no cast for it) */
#define SMELT_MATHFN(fn, n)                                \
    {                                                      \
        double (*d_)() = (double (*)())fn;                 \
        float (*f_)() = (float (*)())fn##f;                \
        void *p_;                                          \
        memcpy(&p_, &d_, sizeof p_);                       \
        if (calls(source, #fn))                            \
            tcc_add_symbol(s, #fn, p_);                    \
        memcpy(&p_, &f_, sizeof p_);                       \
        if (calls(source, #fn "f"))                        \
            tcc_add_symbol(s, #fn "f", p_);                \
    }
#include "mathfns.def"
#undef SMELT_MATHFN
}

static void bind_blocks(TCCState *s, const char *source)
{
    /* the kernel declares each primitive it calls: "void smelt_blk_...(" */
    for (const char *p = source; (p = strstr(p, "void smelt_blk_")); p += 5) {
        const char *name = p + 5, *e = strchr(name, '(');
        char nm[128];
        if (!e || e - name >= (ptrdiff_t)sizeof nm)
            break;
        snprintf(nm, sizeof nm, "%.*s", (int)(e - name), name);
        smelt__blk_prim f = smelt__blk_find(nm);
        if (f) {
            void *fp;
            memcpy(&fp, &f, sizeof fp);
            tcc_add_symbol(s, nm, fp);
        }
    }
}

static int tcc_compile(smelt__backend *be, const char *source, const char *fn_name, void **fn,
                       void **handle, smelt__sb *log)
{
    SMELT_UNUSED(be);
    *fn = *handle = NULL;
    pthread_mutex_lock(&tcc_lock);
    TCCState *s = tcc_new();
    int st = SMELT_ERR_COMPILE;
    if (!s) {
        smelt__sb_puts(log, "tcc_new failed");
        goto out;
    }
    tcc_set_output_type(s, TCC_OUTPUT_MEMORY);
    tcc_set_error_func(s, log, on_error);
    tcc_set_options(s, "-nostdlib -Werror");
    bind_math(s, source);
    bind_blocks(s, source);
    if (tcc_compile_string(s, source) < 0)
        goto out;
#ifdef TCC_RELOCATE_AUTO
    if (tcc_relocate(s, TCC_RELOCATE_AUTO) < 0)
        goto out;
#else
    if (tcc_relocate(s) < 0)
        goto out;
#endif
    *fn = tcc_get_symbol(s, fn_name);
    if (!*fn) {
        smelt__sb_printf(log, "symbol %s not found after compilation\n", fn_name);
        goto out;
    }
    *handle = s;
    s = NULL;
    st = SMELT_OK;
out:
    if (s)
        tcc_delete(s);
    pthread_mutex_unlock(&tcc_lock);
    return st;
}

static void tcc_release(smelt__backend *be, void *handle)
{
    SMELT_UNUSED(be);
    if (handle) {
        pthread_mutex_lock(&tcc_lock);
        tcc_delete(handle);
        pthread_mutex_unlock(&tcc_lock);
    }
}

static void tcc_destroy(smelt__backend *be) { free(be); }

static const smelt__backend_i tcc_iface = {
    .name = "TCC",
    .dialect = &smelt__dialect_c,
    /* kernels sequence calls to the library's vectorised block primitives:
     * TinyCC's own code is scalar and spills every value */
    .blocks = true,
    .available = tcc_available,
    .compile = tcc_compile,
    .release = tcc_release,
    .alloc = smelt__host_alloc,
    .free = smelt__host_free,
    .destroy = tcc_destroy,
};

smelt__backend *smelt__backend_tcc_new(smelt_ctx *ctx)
{
    smelt__backend *be = calloc(1, sizeof *be);
    if (be) {
        be->iface = &tcc_iface;
        be->ctx = ctx;
        be->kind = SMELT_BK_TCC;
    }
    return be;
}
