/* Strings, hashing, clocks and error recording. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <locale.h>
#include <unistd.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>

#include "ir.h"

/* ---- allocations, counted (ir.h) ---------------------------------------- */
#undef malloc
#undef calloc
#undef realloc
static _Thread_local int64_t n_allocs;

void *smelt__malloc(size_t n) { return n_allocs++, malloc(n); }
void *smelt__calloc(size_t n, size_t m) { return n_allocs++, calloc(n, m); }
void *smelt__realloc(void *p, size_t n) { return n_allocs++, realloc(p, n); }
int64_t smelt__allocs(void) { return n_allocs; }

const char *smelt_strerror(int status)
{
    switch (status) {
#define SMELT_X_(name, val, text) \
    case val:                     \
        return text;
        SMELT_STATUS_LIST(SMELT_X_)
#undef SMELT_X_
    default:
        return "unknown status";
    }
}

void smelt__sb_init(smelt__sb *b) { memset(b, 0, sizeof *b); }

void smelt__sb_free(smelt__sb *b)
{
    free(b->s);
    smelt__sb_init(b);
}

static bool sb_reserve(smelt__sb *b, size_t extra)
{
    if (b->oom)
        return false;
    if (b->len + extra + 1 <= b->cap)
        return true;
    if (extra > SIZE_MAX / 4 - b->len) { /* cap would overflow (and the loop below never end) */
        b->oom = true;
        return false;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + extra + 1)
        cap *= 2;
    char *s = realloc(b->s, cap);
    if (!s) {
        b->oom = true;
        return false;
    }
    b->s = s;
    b->cap = cap;
    return true;
}

void smelt__sb_putn(smelt__sb *b, const char *s, size_t n)
{
    if (!sb_reserve(b, n))
        return;
    memcpy(b->s + b->len, s, n);
    b->len += n;
    b->s[b->len] = 0;
}

void smelt__sb_puts(smelt__sb *b, const char *s) { smelt__sb_putn(b, s, strlen(s)); }

void smelt__sb_vprintf(smelt__sb *b, const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0 || !sb_reserve(b, (size_t)n))
        return;
    vsnprintf(b->s + b->len, (size_t)n + 1, fmt, ap);
    b->len += (size_t)n;
}

void smelt__sb_printf(smelt__sb *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    smelt__sb_vprintf(b, fmt, ap);
    va_end(ap);
}

const char *smelt__sb_str(smelt__sb *b)
{
    if (b->oom)
        return "out of memory";
    return b->s ? b->s : "";
}

char *smelt__sb_take(smelt__sb *b)
{
    if (b->oom) {
        smelt__sb_free(b);
        return NULL;
    }
    char *s = b->s ? b->s : smelt__strdup("");
    smelt__sb_init(b);
    return s;
}

void *smelt__grow(void *v, int n, int *cap, size_t elem, int first)
{
    if (n < *cap)
        return v;
    int c = *cap ? *cap * 2 : first;
    void *nv = realloc(v, elem * (size_t)c);
    if (nv)
        *cap = c;
    return nv;
}

char *smelt__strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = malloc(n);
    if (d)
        memcpy(d, s, n);
    return d;
}

/* FNV-1a, 64-bit, then a final avalanche (splitmix64). */
uint64_t smelt__hash(const void *data, size_t n, uint64_t seed)
{
    const unsigned char *p = data;
    uint64_t h = 1469598103934665603ULL ^ seed;
    for (size_t i = 0; i < n; i++) {
        h ^= p[i];
        h *= 1099511628211ULL;
    }
    h ^= h >> 30;
    h *= 0xbf58476d1ce4e5b9ULL;
    h ^= h >> 27;
    h *= 0x94d049bb133111ebULL;
    h ^= h >> 31;
    return h;
}

FILE *smelt__fopen_regular(int dirfd, const char *path, bool nofollow)
{
    int fd = openat(dirfd, path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | (nofollow ? O_NOFOLLOW : 0));
    struct stat st = {0};
    if (fd < 0)
        return NULL;
    if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
        int e = S_ISDIR(st.st_mode) ? EISDIR : EINVAL; /* (EINVAL: a FIFO, a device, a socket) */
        close(fd);
        errno = e;
        return NULL;
    }
    int fl = fcntl(fd, F_GETFL);
    FILE *f = fl < 0 || fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) ? NULL : fdopen(fd, "rb");
    if (!f) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return f;
}

const char *smelt__open_strerror(int e)
{
    return e == EINVAL ? "not a regular file (a FIFO, a device or a socket)" : strerror(e);
}

FILE *smelt__fopen_beneath(const char *dir, const char *rel, const char **why)
{
    *why = NULL;
    if (!rel[0] || rel[0] == '/') {
        *why = rel[0] ? "an absolute path" : "an empty path";
        return NULL;
    }
    for (const char *c = rel; *c;) { /* no ".." component */
        size_t l = strcspn(c, "/");
        if (l == 2 && c[0] == '.' && c[1] == '.') {
            *why = "a path that climbs out of the folder with '..'";
            return NULL;
        }
        c += l + (c[l] == '/');
    }
    int dfd = open(dir ? dir : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char comp[4096];
    const char *c = rel;
    for (size_t l; dfd >= 0 && c[l = strcspn(c, "/")] == '/'; c += l + 1) { /* the folders: no symlink */
        if (!l || (l == 1 && c[0] == '.'))
            continue;
        if (l >= sizeof comp) {
            close(dfd);
            errno = ENAMETOOLONG;
            return NULL;
        }
        memcpy(comp, c, l);
        comp[l] = 0;
        int nfd = openat(dfd, comp, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(dfd);
        dfd = nfd;
    }
    if (dfd < 0)
        return NULL;
    FILE *f = smelt__fopen_regular(dfd, c, true);
    int e = errno;
    close(dfd);
    errno = e;
    return f;
}

char *smelt__read_file(const char *path, size_t max, size_t *len)
{
    FILE *f = smelt__fopen_regular(AT_FDCWD, path, false);
    if (!f)
        return NULL;
    smelt__sb b;
    smelt__sb_init(&b);
    char buf[65536];
    size_t n;
    while (!b.oom && b.len <= max && (n = fread(buf, 1, sizeof buf, f)) > 0) /* the length stays once out of memory */
        smelt__sb_putn(&b, buf, n);
    int e = ferror(f) ? (errno ? errno : EIO) : b.len > max ? EFBIG : b.oom ? ENOMEM : 0;
    fclose(f);
    if (e) {
        smelt__sb_free(&b);
        errno = e;
        return NULL;
    }
    if (len)
        *len = b.len;
    return smelt__sb_take(&b);
}

int smelt__write_file(smelt_ctx *ctx, const char *path, int n, const void *const *data, const size_t *len)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return smelt__err(ctx, SMELT_ERR_IO, "cannot open '%s' for writing: %s", path, strerror(errno));
    bool ok = true;
    for (int i = 0; i < n && ok; i++)
        ok = !len[i] || fwrite(data[i], 1, len[i], f) == len[i];
    int e = errno;
    if (fclose(f) == 0 && ok)
        return SMELT_OK;
    int st = smelt__err(ctx, SMELT_ERR_IO, "cannot write '%s': %s", path, strerror(e ? e : errno));
    remove(path);
    return st;
}

int smelt__mkdir_p(const char *path, unsigned mode)
{
    char buf[4096];
    size_t n = strlen(path);
    if (n >= sizeof buf)
        return -1;
    memcpy(buf, path, n + 1);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, (mode_t)mode) && errno != EEXIST)
                return -1;
            *p = '/';
        }
    return (mkdir(buf, (mode_t)mode) && errno != EEXIST) ? -1 : 0;
}

double smelt__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

/* Allocations of at least SMELT_HUGE_MIN bytes start on a 2 MiB boundary
 * and ask for transparent huge pages: a kernel that walks a matrix a
 * column at a time (a transpose) touches one page where it touched 512,
 * and the first touch of 64 MiB takes 32 faults instead of 16384. */
#define SMELT_HUGE_PAGE ((size_t)2 << 20)
#define SMELT_HUGE_MIN ((size_t)4 << 20)

void *smelt__aligned_alloc(size_t bytes)
{
    void *p = NULL;
    n_allocs++;
    if (bytes >= SMELT_HUGE_MIN) { /* 2 MiB pages where the kernel gives them on request */
        size_t n = (bytes + SMELT_HUGE_PAGE - 1) / SMELT_HUGE_PAGE * SMELT_HUGE_PAGE;
        if (posix_memalign(&p, SMELT_HUGE_PAGE, n) != 0)
            return NULL;
#ifdef MADV_HUGEPAGE
        (void)madvise(p, n, MADV_HUGEPAGE); /* a hint: refused, the memory is as good */
#endif
        return p;
    }
    if (posix_memalign(&p, 64, bytes ? bytes : 64) != 0)
        return NULL;
    return p;
}

/* A context begins with its error slot (struct smelt_ctx, runtime.h). */
static smelt__sb *err_of(const smelt_ctx *ctx) { return &((smelt__ctx_err *)(void *)(uintptr_t)ctx)->err; }

int smelt__err_at(smelt_ctx *ctx, int status, const char *file, int line, const char *fmt, ...)
{
    if (!ctx)
        return status;
    /* the message first, then in place of the old one: an argument may be
     * the old one (smelt_errmsg(ctx), as a caller adds its context) */
    smelt__sb m;
    smelt__sb_init(&m);
    if (file && line > 0)
        smelt__sb_printf(&m, "%s:%d: ", file, line);
    else if (file)
        smelt__sb_printf(&m, "%s: ", file);
    va_list ap;
    va_start(ap, fmt);
    smelt__sb_vprintf(&m, fmt, ap);
    va_end(ap);
    if (status != SMELT_OK && !m.len) /* every error has a message */
        smelt__sb_puts(&m, smelt_strerror(status));
    smelt__sb *e = err_of(ctx);
    smelt__sb_free(e);
    *e = m;
    return status;
}

void smelt__clear_err(smelt_ctx *ctx)
{
    if (ctx)
        smelt__sb_free(err_of(ctx));
}

const char *smelt_errmsg(const smelt_ctx *ctx)
{
    if (!ctx)
        return "no context";
    const smelt__sb *e = err_of(ctx);
    if (e->oom)
        return "out of memory";
    return e->s ? e->s : "";
}

/* strtod in the "C" locale whatever LC_NUMERIC says. */
double smelt__strtod(const char *s, char **end)
{
    const char *dp = localeconv()->decimal_point;
    if (!dp || !strcmp(dp, ".") || !strchr(s, '.'))
        return strtod(s, end);
    size_t n = strlen(s), dl = strlen(dp);
    char *t = malloc(n * dl + 1);
    if (!t) {
        *end = (char *)s;
        return 0;
    }
    size_t k = 0, dot = (size_t)-1;
    for (size_t i = 0; i < n; i++) {
        if (s[i] == '.' && dot == (size_t)-1) {
            dot = i;
            memcpy(t + k, dp, dl);
            k += dl;
        } else {
            t[k++] = s[i];
        }
    }
    t[k] = 0;
    char *e;
    double v = strtod(t, &e);
    size_t used = (size_t)(e - t);
    if (dot != (size_t)-1 && used > dot)
        used = used - dl + 1;
    *end = (char *)s + used;
    free(t);
    return v;
}
