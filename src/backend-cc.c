/* CC backend: the same emitted C, compiled by the system C compiler ($CC,
 * else cc) into a shared object and loaded with dlopen.  Flags are chosen
 * for speed without changing results: -O3 -march=native -fno-math-errno
 * -ffp-contract=off (no -ffast-math); transcendental functions are smelt's
 * own plain C (templates/common/math.h.in), which gcc vectorises at any
 * width with the same bits.  Shared objects go through the persistent cache
 * (src/diskcache.c): a warm cache costs no compiler start-up. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

#define CC_FLAGS "-O3 -fno-math-errno -ffp-contract=off -fPIC -shared"
#define CC_LIBS "-lm"

/* -march=native, or SMELT_CC_MARCH (x86-64-v2, ...): results are the same
 * bits at every level (smelt's own math, no contraction); tests compile the
 * same kernels at several */
static const char *cc_march(void)
{
    const char *m = getenv("SMELT_CC_MARCH");
    return m && *m && strspn(m, "abcdefghijklmnopqrstuvwxyz0123456789-_") == strlen(m) ? m : "native";
}

typedef struct cc_state {
    char compiler[1024]; /* resolved path */
    char ident[1200];    /* path, size, mtime: changes whenever the compiler does */
    char tmpdir[256];
    unsigned serial;
} cc_state;

const char *smelt__cc_flags(void) { return CC_FLAGS; }

static int find_compiler(cc_state *s, smelt__sb *why)
{
    const char *cc = getenv("CC");
    if (!cc || !*cc)
        cc = "cc";
    if (strchr(cc, ' ')) {
        smelt__sb_printf(why, "CC='%s': give the compiler's name or path alone", cc);
        return 0;
    }
    struct stat st;
    if (strchr(cc, '/')) {
        if (stat(cc, &st) || !(st.st_mode & S_IXUSR)) {
            smelt__sb_printf(why, "the C compiler %s is not an executable file", cc);
            return 0;
        }
        snprintf(s->compiler, sizeof s->compiler, "%s", cc);
    } else {
        const char *path = getenv("PATH");
        if (!path)
            path = "/usr/bin:/bin";
        bool found = false;
        while (*path && !found) {
            const char *e = strchr(path, ':');
            size_t l = e ? (size_t)(e - path) : strlen(path);
            snprintf(s->compiler, sizeof s->compiler, "%.*s/%s", (int)l, path, cc);
            found = stat(s->compiler, &st) == 0 && (st.st_mode & S_IXUSR);
            path += l + (e ? 1 : 0);
        }
        if (!found) {
            smelt__sb_printf(why, "no C compiler: '%s' is not on PATH (set CC)", cc);
            return 0;
        }
    }
    snprintf(s->ident, sizeof s->ident, "%s:%lld:%lld", s->compiler, (long long)st.st_size,
             (long long)st.st_mtime);
    return 1;
}

static int cc_available(smelt__backend *be, smelt__sb *why)
{
    return find_compiler(be->context, why);
}

/* The target: this CPU's model and feature flags (what -march=native sees). */
static char cpu_target_buf[4096];
static pthread_once_t cpu_target_once = PTHREAD_ONCE_INIT;

static void cpu_target_init(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[4096];
    size_t used = 0;
    while (f && fgets(line, sizeof line, f)) {
        size_t l = strlen(line);
        if ((!strncmp(line, "model name", 10) || !strncmp(line, "flags", 5)) &&
            used + l < sizeof cpu_target_buf) {
            memcpy(cpu_target_buf + used, line, l + 1);
            used += l;
        }
        if (!strncmp(line, "flags", 5))
            break; /* the first processor's */
    }
    if (f)
        fclose(f);
}

static const char *cpu_target(void)
{
    pthread_once(&cpu_target_once, cpu_target_init);
    return cpu_target_buf;
}

static void cache_key(const cc_state *s, const char *source, char *key)
{
    smelt__sb b;
    smelt__sb_init(&b);
    smelt__sb_printf(&b, "smelt %s\ncompiler %s\nflags %s -march=%s %s\ntarget %s\n", SMELT_VERSION,
                     s->ident, CC_FLAGS, cc_march(), CC_LIBS, cpu_target());
    smelt__sb_puts(&b, source);
    const char *t = smelt__sb_str(&b);
    snprintf(key, 40, "%016llx%016llx", (unsigned long long)smelt__hash(t, strlen(t), 1),
             (unsigned long long)smelt__hash(t, strlen(t), 2));
    smelt__sb_free(&b);
}

static int write_file(const char *path, const char *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    size_t w = fwrite(data, 1, n, f);
    return (fclose(f) == 0 && w == n) ? 0 : -1;
}

static int ensure_tmpdir(cc_state *s, smelt__sb *log)
{
    if (s->tmpdir[0])
        return 0;
    const char *t = getenv("TMPDIR");
    snprintf(s->tmpdir, sizeof s->tmpdir, "%s/smelt-cc-XXXXXX", t && *t ? t : "/tmp");
    if (!mkdtemp(s->tmpdir)) {
        smelt__sb_printf(log, "cannot make a temporary folder: %s\n", strerror(errno));
        s->tmpdir[0] = 0;
        return -1;
    }
    return 0;
}

/* dlopen a shared object held in memory.  Through a file of a name never
 * used before: the dynamic loader reuses a loaded object of the same name. */
static void *open_image(cc_state *s, const char *data, size_t n, smelt__sb *log)
{
    if (ensure_tmpdir(s, log))
        return NULL;
    char path[512];
    snprintf(path, sizeof path, "%s/cached-%u.so", s->tmpdir,
             __atomic_fetch_add(&s->serial, 1, __ATOMIC_RELAXED));
    int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0700);
    if (fd < 0) {
        smelt__sb_printf(log, "cannot write %s: %s\n", path, strerror(errno));
        return NULL;
    }
    size_t put = 0;
    while (put < n) {
        ssize_t w = write(fd, data + put, n - put);
        if (w <= 0)
            break;
        put += (size_t)w;
    }
    close(fd);
    void *h = put == n ? dlopen(path, RTLD_NOW | RTLD_LOCAL) : NULL;
    if (!h)
        smelt__sb_printf(log, "loading a cached kernel: %s\n", put == n ? dlerror() : "short write");
    unlink(path);
    return h;
}

static int cc_compile(smelt__backend *be, const char *source, const char *fn_name, void **fn,
                      void **handle, smelt__sb *log)
{
    cc_state *s = be->context;
    *fn = *handle = NULL;
    char key[40];
    cache_key(s, source, key);
    char *img = NULL;
    size_t n = 0;
    void *h = NULL;
    if (smelt__dcache_load(key, &img, &n) == 0) {
        h = open_image(s, img, n, log);
        free(img);
        img = NULL;
    }
    if (!h) {
        if (ensure_tmpdir(s, log))
            return SMELT_ERR_COMPILE;
        char src[512], so[512];
        unsigned id = __atomic_fetch_add(&s->serial, 1, __ATOMIC_RELAXED);
        snprintf(src, sizeof src, "%s/%s-%u.c", s->tmpdir, fn_name, id);
        snprintf(so, sizeof so, "%s/%s-%u.so", s->tmpdir, fn_name, id);
        if (write_file(src, source, strlen(source))) {
            smelt__sb_printf(log, "cannot write %s\n", src);
            return SMELT_ERR_COMPILE;
        }
        smelt__sb cmd;
        smelt__sb_init(&cmd);
        smelt__sb_printf(&cmd, "'%s' " CC_FLAGS " -march=%s -o '%s' '%s' " CC_LIBS " 2>&1", s->compiler,
                         cc_march(), so, src);
        FILE *p = popen(smelt__sb_str(&cmd), "r");
        smelt__sb_free(&cmd);
        int rc = -1;
        if (p) {
            char buf[4096];
            size_t r;
            while ((r = fread(buf, 1, sizeof buf, p)) > 0)
                smelt__sb_putn(log, buf, r);
            rc = pclose(p);
        }
        unlink(src);
        if (rc != 0) {
            smelt__sb_printf(log, "%s exited with status %d\n", s->compiler, rc);
            unlink(so);
            return SMELT_ERR_COMPILE;
        }
        img = smelt__read_file(so, (size_t)1 << 30, &n);
        if (img)
            smelt__dcache_store(key, img, n);
        free(img);
        h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
        if (!h)
            smelt__sb_printf(log, "dlopen: %s\n", dlerror());
        unlink(so);
        if (!h)
            return SMELT_ERR_COMPILE;
    }
    *fn = dlsym(h, fn_name);
    if (!*fn) {
        smelt__sb_printf(log, "symbol %s not found in the compiled object\n", fn_name);
        dlclose(h);
        return SMELT_ERR_COMPILE;
    }
    *handle = h;
    return SMELT_OK;
}

static void cc_release(smelt__backend *be, void *handle)
{
    SMELT_UNUSED(be);
    if (handle)
        dlclose(handle);
}

static void cc_destroy(smelt__backend *be)
{
    cc_state *s = be->context;
    if (s->tmpdir[0])
        rmdir(s->tmpdir);
    free(s);
    free(be);
}

static const smelt__backend_i cc_iface = {
    .name = "CC",
    .dialect = &smelt__dialect_c,
    .available = cc_available,
    .compile = cc_compile,
    .release = cc_release,
    .alloc = smelt__host_alloc,
    .free = smelt__host_free,
    .destroy = cc_destroy,
};

smelt__backend *smelt__backend_cc_new(smelt_ctx *ctx)
{
    smelt__backend *be = calloc(1, sizeof *be);
    cc_state *s = calloc(1, sizeof *s);
    if (!be || !s) {
        free(be);
        free(s);
        return NULL;
    }
    be->iface = &cc_iface;
    be->context = s;
    be->ctx = ctx;
    be->kind = SMELT_BK_CC;
    return be;
}
