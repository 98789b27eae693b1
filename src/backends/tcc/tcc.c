/* TinyCC backend: in-memory compilation with libtcc, -nostdlib -Werror,
 * every math function bound with tcc_add_symbol. */
#include <libtcc.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backends.h"

#ifdef TCC_RELOCATE_AUTO /* an older libtcc: tcc_relocate also takes where the code goes */
#define RELOCATE(s) tcc_relocate(s, TCC_RELOCATE_AUTO)
#else
#define RELOCATE(s) tcc_relocate(s)
#endif

/* libtcc has global state: one compile at a time in the whole process. */
static pthread_mutex_t tcc_lock = PTHREAD_MUTEX_INITIALIZER;

static void on_error(void *opaque, const char *msg) { smelt__sb_printf(opaque, "%s\n", msg); }

/* ---- libtcc's allocator and exit ----------------------------------------
 * libtcc calls exit(1) when an allocation fails outside a compile (tcc_new,
 * tcc_add_symbol, tcc_relocate), printing "tcc: error: memory full" first.
 * smelt links a copy of libtcc whose malloc, calloc, realloc, free, exit and
 * __fprintf_chk are the functions below (meson.build, objcopy
 * --redefine-sym).  Every libtcc call runs under tcc_lock with `escape` set:
 * exit returns there with longjmp.  Blocks allocated during that call
 * sequence are kept on a list, so that after such an escape the state is
 * deleted and whatever else the failed call had allocated is freed; at the
 * end of a sequence that succeeded the list is emptied (the blocks then
 * belong to the compiled kernel's state). */
typedef struct tblk {
    struct tblk *next, *prev; /* NULL: not on the list */
} tblk;                       /* 16 bytes: the payload keeps malloc's alignment */
static tblk recent = {&recent, &recent};
static jmp_buf *escape;

static void *tblk_link(tblk *b)
{
    b->next = recent.next, b->prev = &recent;
    recent.next->prev = b, recent.next = b;
    return b + 1;
}

static void tblk_unlink(tblk *b)
{
    b->prev->next = b->next, b->next->prev = b->prev;
}

void *smelt__tcc_malloc(size_t n);
void *smelt__tcc_calloc(size_t n, size_t size);
void *smelt__tcc_realloc(void *p, size_t n);
void smelt__tcc_free(void *p);
void smelt__tcc_exit(int status);
int smelt__tcc_fprintf_chk(FILE *f, int flag, const char *fmt, ...);
int smelt__tcc_fprintf(FILE *f, const char *fmt, ...);
int smelt__tcc_vfprintf(FILE *f, const char *fmt, va_list ap);
int smelt__tcc_printf(const char *fmt, ...);
int smelt__tcc_fputs(const char *s, FILE *f);
int smelt__tcc_puts(const char *s);
int smelt__tcc_fputc(int c, FILE *f);
int smelt__tcc_putchar(int c);
size_t smelt__tcc_fwrite(const void *p, size_t size, size_t n, FILE *f);

void *smelt__tcc_malloc(size_t n)
{
    tblk *b = n <= SIZE_MAX - sizeof *b ? malloc(sizeof *b + n) : NULL;
    return b ? tblk_link(b) : NULL;
}

void *smelt__tcc_calloc(size_t n, size_t size)
{
    if (size && n > SIZE_MAX / size)
        return NULL;
    void *p = smelt__tcc_malloc(n * size);
    if (p)
        memset(p, 0, n * size);
    return p;
}

void smelt__tcc_free(void *p)
{
    if (!p)
        return;
    tblk *b = (tblk *)p - 1;
    if (b->next)
        tblk_unlink(b);
    free(b);
}

void *smelt__tcc_realloc(void *p, size_t n)
{
    if (!p)
        return smelt__tcc_malloc(n);
    if (!n) {
        smelt__tcc_free(p);
        return NULL;
    }
    tblk *b = (tblk *)p - 1;
    bool listed = b->next != NULL;
    if (listed)
        tblk_unlink(b);
    tblk *nb = n <= SIZE_MAX - sizeof *b ? realloc(b, sizeof *b + n) : NULL;
    if (listed) /* the block moved, or stays where it was */
        tblk_link(nb ? nb : b);
    return nb ? nb + 1 : NULL;
}

/* The blocks allocated so far belong to live states from now on. */
static void tblk_keep(void)
{
    for (tblk *b = recent.next, *n; b != &recent; b = n)
        n = b->next, b->next = b->prev = NULL;
    recent.next = recent.prev = &recent;
}

static void tblk_free_all(void)
{
    while (recent.next != &recent) {
        tblk *b = recent.next;
        tblk_unlink(b);
        free(b);
    }
}

void smelt__tcc_exit(int status)
{
    if (escape)
        longjmp(*escape, 1);
    exit(status); /* not reached from smelt (every call of smelt's runs with escape set) */
}

/* libtcc prints an error to stderr only when it has no error function,
 * i.e. just before it would exit: the library prints nothing. */
int smelt__tcc_fprintf_chk(FILE *f, int flag, const char *fmt, ...)
{
    SMELT_UNUSED(f), SMELT_UNUSED(flag), SMELT_UNUSED(fmt);
    return 0;
}

/* The same for the position-independent libtcc.a, built without
 * _FORTIFY_SOURCE: its plain output functions print nothing either (smelt
 * never asks libtcc to write a file; kernels are relocated in memory). */
int smelt__tcc_fprintf(FILE *f, const char *fmt, ...)
{
    SMELT_UNUSED(f), SMELT_UNUSED(fmt);
    return 0;
}
int smelt__tcc_vfprintf(FILE *f, const char *fmt, va_list ap)
{
    SMELT_UNUSED(f), SMELT_UNUSED(fmt), SMELT_UNUSED(ap);
    return 0;
}
int smelt__tcc_printf(const char *fmt, ...)
{
    SMELT_UNUSED(fmt);
    return 0;
}
int smelt__tcc_fputs(const char *s, FILE *f)
{
    SMELT_UNUSED(s), SMELT_UNUSED(f);
    return 0;
}
int smelt__tcc_puts(const char *s)
{
    SMELT_UNUSED(s);
    return 0;
}
int smelt__tcc_fputc(int c, FILE *f)
{
    SMELT_UNUSED(f);
    return c;
}
int smelt__tcc_putchar(int c) { return c; }
size_t smelt__tcc_fwrite(const void *p, size_t size, size_t n, FILE *f)
{
    SMELT_UNUSED(p), SMELT_UNUSED(size), SMELT_UNUSED(f);
    return n;
}

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

/* function to object pointer by memcpy (ISO C has no cast for it) */
static void add_fn(TCCState *s, const char *name, void (*fn)(void))
{
    void *p;
    memcpy(&p, &fn, sizeof p);
    tcc_add_symbol(s, name, p);
}

static void bind_math(TCCState *s, const char *source)
{
#define SMELT_MATHFN(fn, n)                          \
    if (calls(source, #fn))                          \
        add_fn(s, #fn, (void (*)(void))fn);          \
    if (calls(source, #fn "f"))                      \
        add_fn(s, #fn "f", (void (*)(void))fn##f);
#include "mathfns.def"
#undef SMELT_MATHFN
}

static void bind_blocks(TCCState *s, const char *source, int isa)
{
    /* the kernel declares each primitive it calls: "void smelt_blk_...(" */
    for (const char *p = source; (p = strstr(p, "void smelt_blk_")); p += 5) {
        const char *name = p + 5, *e = strchr(name, '(');
        char nm[128];
        if (!e || e - name >= (ptrdiff_t)sizeof nm)
            break;
        snprintf(nm, sizeof nm, "%.*s", (int)(e - name), name);
        smelt__blk_prim f = smelt__blk_find(nm, isa);
        if (f)
            add_fn(s, nm, (void (*)(void))f);
    }
}

/* Compile under tcc_lock (held by the caller), libtcc's exit caught. */
static int compile_locked(const char *source, const char *fn_name, void **fn, void **handle, int isa,
                          smelt__sb *log)
{
    jmp_buf jb;
    TCCState *volatile s = NULL;
    escape = &jb;
    if (setjmp(jb)) { /* libtcc gave up outside a compile: out of memory */
        escape = &jb; /* tcc_delete only frees */
        if (s)
            tcc_delete(s);
        tblk_free_all();
        escape = NULL;
        smelt__sb_puts(log, "TinyCC ran out of memory\n");
        return SMELT_ERR_NOMEM;
    }
    int st = SMELT_ERR_COMPILE;
    s = tcc_new();
    if (!s) {
        smelt__sb_puts(log, "TinyCC ran out of memory (tcc_new)\n");
        st = SMELT_ERR_NOMEM;
        goto out;
    }
    tcc_set_output_type(s, TCC_OUTPUT_MEMORY);
    tcc_set_error_func(s, log, on_error);
    tcc_set_options(s, "-nostdlib -Werror");
    bind_math(s, source);
    bind_blocks(s, source, isa);
    if (tcc_compile_string(s, source) < 0 || RELOCATE(s) < 0)
        goto out;
    *fn = tcc_get_symbol(s, fn_name);
    if (!*fn) {
        smelt__sb_printf(log, "symbol %s not found after compilation\n", fn_name);
        goto out;
    }
    *handle = s;
    s = NULL;
    st = SMELT_OK;
out:
    if (st && strstr(smelt__sb_str(log), "memory full")) /* caught by libtcc's own recovery */
        st = SMELT_ERR_NOMEM;
    if (s)
        tcc_delete(s);
    if (st)
        tblk_free_all(); /* what a failed compile left behind */
    tblk_keep();
    escape = NULL;
    return st;
}

static int tcc_compile(smelt__backend *be, const char *source, const char *fn_name, void **fn,
                       void **handle, smelt__sb *log)
{
    *fn = *handle = NULL;
    int isa = smelt__settings_of(be->ctx)->blocks_isa; /* SMELT_BLOCKS_ISA */
    pthread_mutex_lock(&tcc_lock);
    int st = compile_locked(source, fn_name, fn, handle, isa, log);
    pthread_mutex_unlock(&tcc_lock);
    return st;
}

static void tcc_release(smelt__backend *be, void *handle)
{
    SMELT_UNUSED(be);
    if (handle) {
        pthread_mutex_lock(&tcc_lock);
        tcc_delete(handle); /* only frees: libtcc cannot exit here */
        pthread_mutex_unlock(&tcc_lock);
    }
}

static void tcc_destroy(smelt__backend *be) { free(be); }

static const smelt__backend_i tcc_iface = {
    .name = "TCC",
    /* kernels sequence calls to the library's vectorised block primitives:
     * TinyCC's own code is scalar and spills every value */
    .target = {.dialect = &smelt__dialect_c, .blocks = true},
    .available = tcc_available,
    .compile = tcc_compile,
    .release = tcc_release,
    .destroy = tcc_destroy,
};

int smelt__backend_tcc_new(smelt_ctx *ctx, const char *target, smelt__backend **out)
{
    SMELT_UNUSED(target);
    return smelt__backend_new(ctx, &tcc_iface, 0, out);
}
