/* The persistent kernel cache: compiled objects on disk, keyed by a hash of
 * everything that determines them (source, compiler identity, flags, target,
 * smelt version) and never by compiler output.
 *
 *   dir      SMELT_CACHE_DIR, else $XDG_CACHE_HOME/smelt, else ~/.cache/smelt
 *   off      SMELT_CACHE=0 (or false, no, off; 1, true, yes, on: on)
 *   size cap SMELT_CACHE_MAX_MB (default 512); least recently used first out
 * A value that is none of these is ignored (the default holds) and named in
 * smelt__settings_warnings's lines (plan descriptions and smelt info show them).
 * The cache is the process's, not a context's: each use takes the settings
 * of that moment (smelt__settings_read).
 *
 * The cache holds code that smelt loads and runs, so it is trusted code and
 * only its owner may write it (docs/security.md):
 *   - the folder is created 0700 and used only when it is a folder owned by
 *     this user and not writable by group or others (else the cache is
 *     skipped and plans say why);
 *   - everything in it is opened relative to that checked folder, with
 *     O_NOFOLLOW | O_NONBLOCK, and must be a regular file of this user that
 *     group and others cannot write (a symlink, FIFO or device is deleted);
 *   - an entry <key>.ske is "SMELTKC2", the payload size, a SipHash-2-4 tag
 *     of the payload under a per-user secret (the folder's "key" file, 16
 *     random bytes, 0600), then the payload.  It is written 0600 to a
 *     temporary file and renamed, so readers see a whole entry or none; a
 *     bad entry (truncated, wrong tag, wrong owner) is deleted and reported
 *     as a miss, so the caller rebuilds it.
 * A hit touches the entry's modification time (the LRU order). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <strings.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "runtime.h"

#define MAGIC "SMELTKC2"
#define KEYFILE "key"
#define ENTRY_MAX ((uint64_t)1 << 30)

#define DEFAULT_MAX_MB 512.0

typedef struct header { /* an entry's first 24 bytes, then the payload */
    char magic[8];      /* MAGIC, without its NUL */
    uint64_t len, tag;  /* the payload's size and SipHash tag */
} header;
_Static_assert(sizeof(header) == 24, "an entry's header is 24 bytes");

/* Whether SMELT_CACHE leaves the cache on; warn (may be NULL) gets a line
 * for a value that is ignored. */
static bool cache_on(smelt__sb *warn)
{
    static const char *const words[] = {"0", "false", "no", "off", "1", "true", "yes", "on"};
    const char *v = smelt__settings_read()->raw[SMELT__S_SMELT_CACHE];
    for (int i = 0; v && *v && i < 8; i++)
        if (!strcasecmp(v, words[i]))
            return i >= 4;
    if (v && *v && warn)
        smelt__sb_printf(warn, "warning: SMELT_CACHE='%s' is not 0/false/no/off or "
                               "1/true/yes/on: ignored, the persistent cache stays on\n", v);
    return true;
}

/* The size cap in bytes (SMELT_CACHE_MAX_MB). */
static double cache_cap(smelt__sb *warn)
{
    return smelt__bound(smelt__settings_read(), SMELT__S_SMELT_CACHE_MAX_MB, DEFAULT_MAX_MB, false, "MiB",
                        "the cap stays", warn) *
           1048576.0;
}

/* ---- SipHash-2-4 (Aumasson and Bernstein), 64-bit tag ----------------- */
static uint64_t le64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

#define ROTL(x, b) (((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                                                                          \
    do {                                                                                  \
        v0 += v1, v1 = ROTL(v1, 13), v1 ^= v0, v0 = ROTL(v0, 32);                         \
        v2 += v3, v3 = ROTL(v3, 16), v3 ^= v2;                                            \
        v0 += v3, v3 = ROTL(v3, 21), v3 ^= v0;                                            \
        v2 += v1, v1 = ROTL(v1, 17), v1 ^= v2, v2 = ROTL(v2, 32);                         \
    } while (0)

static uint64_t siphash(const unsigned char key[16], const void *data, size_t n)
{
    const unsigned char *p = data;
    uint64_t k0 = le64(key), k1 = le64(key + 8);
    uint64_t v0 = 0x736f6d6570736575ULL ^ k0, v1 = 0x646f72616e646f6dULL ^ k1;
    uint64_t v2 = 0x6c7967656e657261ULL ^ k0, v3 = 0x7465646279746573ULL ^ k1;
    size_t whole = n & ~(size_t)7;
    uint64_t last = (uint64_t)n << 56; /* the length and the bytes after the whole words */
    for (size_t i = 0; i < (n & 7); i++)
        last |= (uint64_t)p[whole + i] << (8 * i);
    for (size_t i = 0; i <= whole; i += 8) { /* the whole words, then the last */
        uint64_t m = i < whole ? le64(p + i) : last;
        v3 ^= m;
        SIPROUND;
        SIPROUND;
        v0 ^= m;
    }
    v2 ^= 0xff;
    for (int i = 0; i < 4; i++)
        SIPROUND;
    return v0 ^ v1 ^ v2 ^ v3;
}

/* ---- the folder ------------------------------------------------------- */
/* 0 (path in buf), 1 when turned off by SMELT_CACHE=0, -1 when no folder
 * can be named. */
static int dir_path(char *buf, size_t n)
{
    if (!cache_on(NULL))
        return 1;
    const smelt__settings *cfg = smelt__settings_read();
    const char *d = cfg->raw[SMELT__S_SMELT_CACHE_DIR], *x = cfg->raw[SMELT__S_XDG_CACHE_HOME],
               *h = cfg->raw[SMELT__S_HOME];
    int w;
    if (d && *d)
        w = snprintf(buf, n, "%s", d);
    else if (x && *x)
        w = snprintf(buf, n, "%s/smelt", x);
    else if (h && *h)
        w = snprintf(buf, n, "%s/.cache/smelt", h);
    else
        return -1;
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

/* The cache folder (created 0700) in buf and an open descriptor of it, once
 * checked: owned by this user, not writable by group or others.  -1 when
 * the cache is off or unusable (why, if not NULL, says why). */
static int dcache_open(char *buf, size_t n, smelt__sb *why)
{
    int r = dir_path(buf, n);
    if (r) {
        if (r < 0 && why)
            smelt__sb_puts(why, "no folder: SMELT_CACHE_DIR, XDG_CACHE_HOME and HOME are unset or too long");
        return -1;
    }
    if (smelt__mkdir_p(buf, 0700)) {
        if (why)
            smelt__sb_printf(why, "cannot create the folder %s: %s", buf, strerror(errno));
        return -1;
    }
    int fd = open(buf, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st)) {
        if (why)
            smelt__sb_printf(why, "cannot open the folder %s: %s", buf, strerror(errno));
        if (fd >= 0)
            close(fd);
        return -1;
    }
    const char *bad = st.st_uid != geteuid() ? "is owned by another user"
                      : st.st_mode & 022    ? "is writable by group or others"
                                            : NULL;
    if (!bad && faccessat(fd, ".", W_OK | X_OK, AT_EACCESS)) { /* read-only: nothing could be stored */
        if (why)
            smelt__sb_printf(why, "the folder %s cannot be written (mode %03o): no kernel could be stored; "
                                  "chmod 700 it, or set SMELT_CACHE_DIR to a folder of yours",
                             buf, (unsigned)(st.st_mode & 0777));
        close(fd);
        return -1;
    }
    if (bad) {
        close(fd);
        if (why)
            smelt__sb_printf(why, "the folder %s %s (mode %03o): another user could plant code in it; "
                                  "chmod 700 it if it is yours, or set SMELT_CACHE_DIR to a folder of yours",
                             buf, bad, (unsigned)(st.st_mode & 0777));
        return -1;
    }
    return fd;
}

static _Thread_local unsigned long thread_hits;

unsigned long smelt__dcache_thread_hits(void) { return thread_hits; }

/* Open name in the folder for reading: a regular file of this user that
 * group and others cannot write, never through a symlink, never blocking
 * (a FIFO).  Anything else is deleted.  -1 when absent or deleted. */
static int open_trusted(int dfd, const char *name, struct stat *st)
{
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ELOOP || errno == ENXIO || errno == EACCES)
            unlinkat(dfd, name, 0);
        return -1;
    }
    if (fstat(fd, st) || !S_ISREG(st->st_mode) || st->st_uid != geteuid() || (st->st_mode & 022)) {
        close(fd);
        unlinkat(dfd, name, 0);
        return -1;
    }
    return fd;
}

/* All n bytes read into in, or written from out (in NULL), retrying
 * interrupted calls: 0, or -1. */
static int transfer(int fd, char *in, const char *out, size_t n)
{
    for (size_t done = 0; done < n;) {
        ssize_t r = in ? read(fd, in + done, n - done) : write(fd, out + done, n - done);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        done += (size_t)r;
    }
    return 0;
}

static int read_all(int fd, void *buf, size_t n) { return transfer(fd, buf, NULL, n); }
static int write_all(int fd, const void *buf, size_t n) { return transfer(fd, NULL, buf, n); }

/* A new file of data under a fresh temporary name, mode 0600, then linked
 * (exclusive: an existing target is kept) or renamed to name. */
static int put_file(int dfd, const char *name, const void *hdr, size_t hn, const void *data, size_t n,
                    bool exclusive)
{
    static unsigned counter;
    char tmp[96];
    snprintf(tmp, sizeof tmp, ".tmp-%ld-%u-%ld", (long)getpid(),
             __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED), (long)time(NULL));
    int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    int ok = !write_all(fd, hdr, hn) && !write_all(fd, data, n);
    ok = close(fd) == 0 && ok;
    if (ok)
        ok = exclusive ? !linkat(dfd, tmp, dfd, name, 0) : !renameat(dfd, tmp, dfd, name);
    if (!ok || exclusive)
        unlinkat(dfd, tmp, 0);
    return ok ? 0 : -1;
}

/* The folder's secret: read it, or make it once (two processes racing
 * agree on whichever was linked first). */
static int secret(int dfd, unsigned char key[16])
{
    for (int attempt = 0; attempt < 3; attempt++) {
        struct stat st;
        int fd = open_trusted(dfd, KEYFILE, &st);
        if (fd >= 0) {
            int ok = st.st_size == 16 && !(st.st_mode & 077) && !read_all(fd, key, 16);
            close(fd);
            if (ok)
                return 0;
            unlinkat(dfd, KEYFILE, 0); /* ours to replace: its entries are rebuilt */
            continue;
        }
        unsigned char fresh[16];
        if (getrandom(fresh, sizeof fresh, 0) != (ssize_t)sizeof fresh)
            return -1;
        if (put_file(dfd, KEYFILE, fresh, sizeof fresh, "", 0, true) && errno != EEXIST)
            return -1;
    }
    return -1;
}

/* The cache folder, opened (-1: none), and key's entry name in it. */
static int open_entry(const char *key, char name[128])
{
    char dir[4096];
    int dfd = dcache_open(dir, sizeof dir, NULL);
    snprintf(name, 128, "%s.ske", key);
    return dfd;
}

int smelt__dcache_load(const char *key, char **data, size_t *size)
{
    char name[128];
    *data = NULL;
    *size = 0;
    int dfd = open_entry(key, name);
    if (dfd < 0)
        return -1;
    unsigned char k[16];
    struct stat st;
    int fd = secret(dfd, k) ? -1 : open_trusted(dfd, name, &st);
    if (fd < 0) {
        close(dfd);
        return -1;
    }
    header h;
    char *buf = NULL;
    int ok = st.st_size >= (off_t)sizeof h && !read_all(fd, &h, sizeof h) && !memcmp(h.magic, MAGIC, 8) &&
             h.len == (uint64_t)st.st_size - sizeof h && h.len <= ENTRY_MAX &&
             (buf = malloc(h.len ? h.len : 1)) != NULL && !read_all(fd, buf, h.len) &&
             siphash(k, buf, h.len) == h.tag;
    if (ok) {
        futimens(fd, NULL); /* most recently used */
        thread_hits++;
        *data = buf;
        *size = h.len;
    } else { /* never trusted: remove it, the caller rebuilds */
        free(buf);
        unlinkat(dfd, name, 0);
    }
    close(fd);
    close(dfd);
    return ok ? 0 : -1;
}

void smelt__dcache_remove(const char *key)
{
    if (thread_hits) /* the load it follows was no hit: the kernel is compiled */
        thread_hits--;
    char name[128];
    int dfd = open_entry(key, name);
    if (dfd < 0)
        return;
    unlinkat(dfd, name, 0);
    close(dfd);
}

typedef struct ent {
    char name[300];
    off_t size;
    int64_t mtime_ns;
} ent;

static int by_mtime(const void *a, const void *b)
{
    const ent *x = a, *y = b;
    return (x->mtime_ns > y->mtime_ns) - (x->mtime_ns < y->mtime_ns);
}

/* Keep the folder under its cap: entries (.ske), least recently used first
 * out, and temporary files (.tmp-*, an entry being written) counted too; a
 * temporary file older than the compiler timeout belongs to a process that
 * died between writing and renaming it (a SIGKILL) and is deleted. */
static void evict(int dfd)
{
    double cap = cache_cap(NULL);
    int64_t stale_ns = (int64_t)(smelt__settings_read()->cc_timeout * 1e9);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    int64_t now_ns = (int64_t)now.tv_sec * 1000000000 + now.tv_nsec;
    int fd = dup(dfd);
    DIR *d = fd < 0 ? NULL : fdopendir(fd);
    if (!d) {
        if (fd >= 0)
            close(fd);
        return;
    }
    ent *v = NULL;
    int n = 0, nalloc = 0;
    double total = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        bool tmp = !strncmp(e->d_name, ".tmp-", 5);
        if (!tmp && (l < 5 || l >= sizeof v->name || strcmp(e->d_name + l - 4, ".ske")))
            continue;
        struct stat st;
        if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW))
            continue;
        if (tmp) {
            int64_t age = now_ns - ((int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec);
            if (!(age > stale_ns && !unlinkat(dfd, e->d_name, 0)))
                total += (double)st.st_size; /* still being written: it takes room */
            continue;
        }
        ent *nv = smelt__grow(v, n, &nalloc, sizeof *v, 64);
        if (!nv)
            break;
        v = nv;
        memcpy(v[n].name, e->d_name, l + 1);
        v[n].size = st.st_size;
        v[n].mtime_ns = (int64_t)st.st_mtim.tv_sec * 1000000000 + st.st_mtim.tv_nsec;
        total += (double)st.st_size;
        n++;
    }
    closedir(d);
    if (total > cap) {
        qsort(v, (size_t)n, sizeof *v, by_mtime);
        for (int i = 0; i < n && total > cap; i++)
            if (!unlinkat(dfd, v[i].name, 0))
                total -= (double)v[i].size;
    }
    free(v);
}

static int check(char *buf, size_t n, smelt__sb *why);

/* The last store that failed, and why (0: none since the last success). */
static int store_errno;

int smelt__dcache_store(const char *key, const char *data, size_t size)
{
    char name[128];
    int dfd = open_entry(key, name);
    if (dfd < 0)
        return -1;
    unsigned char k[16];
    int st = -1;
    errno = EFBIG;
    if (size <= ENTRY_MAX && !secret(dfd, k)) {
        header h = {.len = size, .tag = siphash(k, data, size)};
        memcpy(h.magic, MAGIC, 8);
        st = put_file(dfd, name, &h, sizeof h, data, size, false);
    }
    __atomic_store_n(&store_errno, st ? (errno ? errno : EIO) : 0, __ATOMIC_RELAXED);
    if (!st)
        evict(dfd);
    close(dfd);
    return st;
}

void smelt__dcache_store_warning(smelt__sb *warn)
{
    int e = __atomic_load_n(&store_errno, __ATOMIC_RELAXED);
    char dir[4096];
    if (e && check(dir, sizeof dir, NULL) == 0)
        smelt__sb_printf(warn, "warning: persistent kernel cache %s: a compiled kernel could not be stored "
                               "in it (%s): kernels are compiled again in every process\n", dir, strerror(e));
}

/* The cache folder in buf: 0 when it is usable, 1 when SMELT_CACHE=0 turns
 * it off, -1 (why says why) when it cannot be used. */
static int check(char *buf, size_t n, smelt__sb *why)
{
    if (dir_path(buf, n) > 0)
        return 1;
    int dfd = dcache_open(buf, n, why);
    if (dfd < 0)
        return -1;
    close(dfd);
    return 0;
}

int smelt__dcache_check(smelt__sb *why)
{
    char dir[4096];
    return check(dir, sizeof dir, why);
}

int smelt_cache_dir(smelt_ctx *ctx, char *buf, size_t n)
{
    if (!buf || !n)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "smelt_cache_dir: buf is NULL");
    smelt__sb why;
    smelt__sb_init(&why);
    int r = check(buf, n, &why), st = SMELT_OK;
    if (r > 0)
        st = smelt__err(ctx, SMELT_ERR_UNSUPPORTED, "turned off by SMELT_CACHE=%s",
                        smelt__settings_read()->raw[SMELT__S_SMELT_CACHE]);
    else if (r < 0)
        st = smelt__err(ctx, SMELT_ERR_IO, "persistent kernel cache not used: %s", smelt__sb_str(&why));
    if (r)
        buf[0] = 0;
    smelt__sb_free(&why);
    return st;
}
