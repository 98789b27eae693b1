/* The persistent kernel cache: compiled objects on disk, keyed by a hash of
 * everything that determines them (source, compiler identity, flags, target,
 * smelt version) and never by compiler output.
 *
 *   dir      SMELT_CACHE_DIR, else $XDG_CACHE_HOME/smelt, else ~/.cache/smelt
 *   off      SMELT_CACHE=0 (or false, no, off; 1, true, yes, on: on)
 *   size cap SMELT_CACHE_MAX_MB (default 512); least recently used first out
 * A value that is none of these is ignored (the default holds) and named in
 * smelt__dcache_config's warning (plan descriptions and smelt info show it).
 *
 * An entry <key>.ske is "SMELTKC1", the payload size and checksum (u64 each),
 * then the payload.  It is written to a temporary file in the same folder and
 * renamed, so readers see a whole entry or none; a bad entry (truncated,
 * wrong checksum) is deleted and reported as a miss, so the caller rebuilds
 * it.  A hit touches the entry's modification time (the LRU order). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <strings.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

#define MAGIC "SMELTKC1"
#define HDR 24

#define DEFAULT_MAX_MB 512.0

/* The settings from the environment: whether the cache is on, its cap in
 * bytes; warn (may be NULL) gets a line for each value ignored. */
static bool config(double *cap, smelt__sb *warn)
{
    static const char *const offs[] = {"0", "false", "no", "off"}, *const ons[] = {"1", "true", "yes", "on"};
    bool on = true;
    const char *v = getenv("SMELT_CACHE");
    if (v && *v) {
        bool known = false;
        for (int i = 0; i < 4; i++) {
            if (!strcasecmp(v, offs[i]))
                on = false, known = true;
            known |= !strcasecmp(v, ons[i]);
        }
        if (!known && warn)
            smelt__sb_printf(warn, "warning: SMELT_CACHE='%s' is not 0/false/no/off or "
                                   "1/true/yes/on: ignored, the persistent cache stays on\n", v);
    }
    *cap = DEFAULT_MAX_MB * 1048576.0;
    v = getenv("SMELT_CACHE_MAX_MB");
    if (v && *v) {
        char *end;
        double mb = strtod(v, &end);
        while (*end == ' ')
            end++;
        if (end != v && !*end && isfinite(mb) && mb > 0 && mb < 1e12)
            *cap = mb * 1048576.0;
        else if (warn)
            smelt__sb_printf(warn, "warning: SMELT_CACHE_MAX_MB='%s' is not a size in MiB above 0: "
                                   "ignored, the cap stays %.0f MiB\n", v, DEFAULT_MAX_MB);
    }
    return on;
}

void smelt__dcache_config_warnings(smelt__sb *warn)
{
    double cap;
    config(&cap, warn);
}

int smelt__dcache_dir(char *buf, size_t n)
{
    double cap;
    if (!config(&cap, NULL))
        return -1;
    const char *d = getenv("SMELT_CACHE_DIR"), *x = getenv("XDG_CACHE_HOME"), *h = getenv("HOME");
    int w;
    if (d && *d)
        w = snprintf(buf, n, "%s", d);
    else if (x && *x)
        w = snprintf(buf, n, "%s/smelt", x);
    else if (h && *h)
        w = snprintf(buf, n, "%s/.cache/smelt", h);
    else
        return -1;
    if (w < 0 || (size_t)w >= n)
        return -1;
    return smelt__mkdir_p(buf);
}

static void entry_path(char *buf, size_t n, const char *dir, const char *key)
{
    snprintf(buf, n, "%s/%s.ske", dir, key);
}

static _Thread_local unsigned long thread_hits;

unsigned long smelt__dcache_thread_hits(void) { return thread_hits; }

int smelt__dcache_load(const char *key, char **data, size_t *size)
{
    char dir[4096], path[4400];
    *data = NULL;
    *size = 0;
    if (smelt__dcache_dir(dir, sizeof dir))
        return -1;
    entry_path(path, sizeof path, dir, key);
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return -1;
    struct stat st;
    char hdr[HDR];
    int ok = fstat(fd, &st) == 0 && st.st_size >= HDR && read(fd, hdr, HDR) == HDR &&
             !memcmp(hdr, MAGIC, 8);
    uint64_t len = 0, sum = 0;
    char *buf = NULL;
    if (ok) {
        memcpy(&len, hdr + 8, 8);
        memcpy(&sum, hdr + 16, 8);
        ok = len == (uint64_t)st.st_size - HDR && (buf = malloc(len ? len : 1)) != NULL;
    }
    size_t got = 0;
    while (ok && got < len) {
        ssize_t r = read(fd, buf + got, len - got);
        if (r <= 0)
            ok = 0;
        else
            got += (size_t)r;
    }
    close(fd);
    if (ok && smelt__hash(buf, len, 0xcac4e) != sum)
        ok = 0;
    if (!ok) { /* never trusted: remove it, the caller rebuilds */
        free(buf);
        unlink(path);
        return -1;
    }
    utimensat(AT_FDCWD, path, NULL, 0); /* most recently used */
    thread_hits++;
    *data = buf;
    *size = len;
    return 0;
}

typedef struct ent {
    char name[300];
    off_t size;
    struct timespec mtime;
} ent;

static int by_mtime(const void *a, const void *b)
{
    const ent *x = a, *y = b;
    if (x->mtime.tv_sec != y->mtime.tv_sec)
        return x->mtime.tv_sec < y->mtime.tv_sec ? -1 : 1;
    return (x->mtime.tv_nsec > y->mtime.tv_nsec) - (x->mtime.tv_nsec < y->mtime.tv_nsec);
}

static void evict(const char *dir)
{
    double cap;
    config(&cap, NULL);
    DIR *d = opendir(dir);
    if (!d)
        return;
    ent *v = NULL;
    size_t n = 0, capn = 0;
    double total = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        size_t l = strlen(e->d_name);
        if (l < 5 || l >= sizeof v->name || strcmp(e->d_name + l - 4, ".ske"))
            continue;
        char p[4400];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        struct stat st;
        if (stat(p, &st))
            continue;
        if (n == capn) {
            capn = capn ? capn * 2 : 64;
            ent *nv = realloc(v, sizeof *v * capn);
            if (!nv)
                break;
            v = nv;
        }
        memcpy(v[n].name, e->d_name, l + 1);
        v[n].size = st.st_size;
        v[n].mtime = st.st_mtim;
        total += (double)st.st_size;
        n++;
    }
    closedir(d);
    if (total > cap) {
        qsort(v, n, sizeof *v, by_mtime);
        for (size_t i = 0; i < n && total > cap; i++) {
            char p[4400];
            snprintf(p, sizeof p, "%s/%s", dir, v[i].name);
            if (!unlink(p))
                total -= (double)v[i].size;
        }
    }
    free(v);
}

int smelt__dcache_store(const char *key, const char *data, size_t size)
{
    char dir[4096], path[4400], tmp[4400];
    if (smelt__dcache_dir(dir, sizeof dir))
        return -1;
    entry_path(path, sizeof path, dir, key);
    static unsigned counter;
    snprintf(tmp, sizeof tmp, "%s/.tmp-%ld-%u-%ld", dir, (long)getpid(),
             __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED), (long)time(NULL));
    int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0)
        return -1;
    char hdr[HDR];
    uint64_t len = size, sum = smelt__hash(data, size, 0xcac4e);
    memcpy(hdr, MAGIC, 8);
    memcpy(hdr + 8, &len, 8);
    memcpy(hdr + 16, &sum, 8);
    int ok = write(fd, hdr, HDR) == HDR;
    size_t put = 0;
    while (ok && put < size) {
        ssize_t w = write(fd, data + put, size - put);
        if (w <= 0)
            ok = 0;
        else
            put += (size_t)w;
    }
    ok = close(fd) == 0 && ok;
    if (!ok || rename(tmp, path)) {
        unlink(tmp);
        return -1;
    }
    evict(dir);
    return 0;
}

int smelt_cache_dir(smelt_ctx *ctx, char *buf, size_t n)
{
    if (!buf || !n)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "smelt_cache_dir: buf is NULL");
    buf[0] = 0;
    double cap;
    if (!config(&cap, NULL))
        return smelt__err(ctx, SMELT_ERR_UNSUPPORTED, "turned off by SMELT_CACHE=%s",
                          getenv("SMELT_CACHE"));
    if (smelt__dcache_dir(buf, n)) {
        buf[0] = 0;
        return smelt__err(ctx, SMELT_ERR_IO, "no usable folder (SMELT_CACHE_DIR, XDG_CACHE_HOME "
                                             "and HOME give none that can be created)");
    }
    return SMELT_OK;
}
