/* CC backend: the same emitted C, compiled by the system C compiler ($CC,
 * else cc) into a shared object and loaded with dlopen.  Flags are chosen
 * for speed without changing results: -O3 -march=native -fno-math-errno
 * -ffp-contract=off (no -ffast-math); transcendental functions are smelt's
 * own plain C (templates/common/math.h.in), which gcc vectorises at any
 * width with the same bits.  The flags license no fold that changes a value:
 * -fno-math-errno only drops errno, -ffp-contract=off keeps every rounding;
 * -fno-trapping-math lets gcc fold (double)(int)x to trunc(x), which keeps
 * x's -0.0 where the integer 0 gives +0.0, so the prelude converts floats
 * to integers by bits (smelt_f2i32, smelt_f2i64) and never hands gcc that
 * pattern (tests/test-bitwise.c, the round trips through integers).
 * Shared objects go through the persistent cache
 * (src/runtime/diskcache.c): a warm cache costs no compiler start-up. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "backends.h"

#define CC_FLAGS "-O3 -fno-math-errno -fno-trapping-math -ffp-contract=off -fPIC -shared"
#define CC_LIBS "-lm"
#define CC_MAX_WORDS 64          /* words of $CC */
#define CC_LOG_MAX (256u << 10) /* compiler output kept in the log */

/* -march=native, or SMELT_CC_MARCH (x86-64-v2, ...): results are the same
 * bits at every level (smelt's own math, no contraction); tests compile the
 * same kernels at several */
typedef struct cc_state {
    smelt_ctx *ctx; /* whose settings hold (CC, PATH, TMPDIR, SMELT_CC_MARCH, SMELT_CC_TIMEOUT) */
    char compiler[1024]; /* resolved path */
    char ident[2400];    /* path, size, mtime, flags of $CC: changes whenever the compiler does */
    char words[1024];    /* $CC split on spaces: NUL-separated words */
    int nwords;
    char tmpdir[256];
    unsigned serial;
} cc_state;

const char *smelt__cc_flags(void) { return CC_FLAGS; }

static const char *cc_march(const cc_state *s) { return smelt__settings_of(s->ctx)->cc_march; }

/* Usable when $CC names an executable compiler (resolved into the state). */
static int cc_available(smelt__backend *be, smelt__sb *why)
{
    cc_state *s = be->context;
    const smelt__settings *cfg = smelt__settings_of(be->ctx);
    const char *env = cfg->raw[SMELT__S_CC];
    if (!env || strspn(env, " \t") == strlen(env))
        env = "cc";
    /* $CC is a compiler and its flags, split on spaces and tabs: never a shell */
    size_t used = 0;
    s->nwords = 0;
    for (const char *p = env + strspn(env, " \t"); *p; p += strspn(p, " \t")) {
        size_t l = strcspn(p, " \t");
        if (s->nwords == CC_MAX_WORDS || used + l + 1 > sizeof s->words) {
            smelt__sb_printf(why, "CC='%.200s' is too long (at most %d words, %zu bytes)", env,
                             CC_MAX_WORDS, sizeof s->words - 1);
            return 0;
        }
        memcpy(s->words + used, p, l);
        s->words[used + l] = 0;
        used += l + 1;
        s->nwords++;
        p += l;
    }
    const char *cc = s->words;
    struct stat st;
    if (strchr(cc, '/')) {
        if (stat(cc, &st) || !(st.st_mode & S_IXUSR)) {
            smelt__sb_printf(why, "the C compiler %s is not an executable file", cc);
            return 0;
        }
        snprintf(s->compiler, sizeof s->compiler, "%s", cc);
    } else {
        const char *path = cfg->raw[SMELT__S_PATH];
        if (!path)
            path = "/usr/bin:/bin";
        bool found = false;
        while (*path && !found) {
            const char *e = strchr(path, ':');
            size_t l = e ? (size_t)(e - path) : strlen(path);
            int w = snprintf(s->compiler, sizeof s->compiler, "%.*s/%s", (int)l, path, cc);
            found = w > 0 && (size_t)w < sizeof s->compiler && stat(s->compiler, &st) == 0 &&
                    (st.st_mode & S_IXUSR);
            path += l + (e ? 1 : 0);
        }
        if (!found) {
            smelt__sb_printf(why, "no C compiler: '%s' is not on PATH (set CC)", cc);
            return 0;
        }
    }
    int w = snprintf(s->ident, sizeof s->ident, "%s:%lld:%lld", s->compiler,
                     (long long)st.st_size, (long long)st.st_mtime);
    for (const char *p = s->words + strlen(s->words) + 1; p < s->words + used; p += strlen(p) + 1)
        w += snprintf(s->ident + w, sizeof s->ident - (size_t)w, " %s", p);
    return 1;
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
                     s->ident, CC_FLAGS, cc_march(s), CC_LIBS, cpu_target());
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
    const char *t = smelt__settings_of(s->ctx)->raw[SMELT__S_TMPDIR];
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

/* SMELT_CC_TIMEOUT: seconds a compile may take (default 120, config.c; a
 * value that is not a number of seconds is ignored with a warning in plan
 * descriptions, src/runtime/config.c). */
static int compile_timeout(const cc_state *s, double *secs, smelt__sb *log)
{
    (void)log;
    *secs = smelt__settings_of(s->ctx)->cc_timeout;
    return 0;
}

/* Run the compiler on src, writing so: an argument vector and posix_spawn,
 * no shell.  Its output goes to log.  The compiler runs in a process group
 * of its own, killed whole (cc1, as, ld too) when it exceeds the timeout.
 * 0, or -1 with the reason in log. */
static int run_compiler(cc_state *s, const char *so, const char *src, smelt__sb *log)
{
    double secs;
    if (compile_timeout(s, &secs, log))
        return -1;
    char flags[] = CC_FLAGS, libs[] = CC_LIBS, dash_o[] = "-o", march[80];
    char *argv[CC_MAX_WORDS + 32];
    snprintf(march, sizeof march, "-march=%s", cc_march(s));
    int n = 0;
    for (const char *p = s->words; n < s->nwords; p += strlen(p) + 1)
        argv[n++] = (char *)p;
    argv[0] = s->compiler; /* the resolved path */
    char *save;
    for (char *w = strtok_r(flags, " ", &save); w; w = strtok_r(NULL, " ", &save))
        argv[n++] = w;
    argv[n++] = march;
    argv[n++] = dash_o;
    argv[n++] = (char *)so;
    argv[n++] = (char *)src;
    for (char *w = strtok_r(libs, " ", &save); w; w = strtok_r(NULL, " ", &save))
        argv[n++] = w;
    argv[n] = NULL;

    int fds[2];
    if (pipe2(fds, O_CLOEXEC)) {
        smelt__sb_printf(log, "cannot run %s: pipe: %s\n", s->compiler, strerror(errno));
        return -1;
    }
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    sigset_t none;
    sigemptyset(&none);
    pid_t pid = -1;
    int e = posix_spawn_file_actions_init(&fa);
    if (!e && !(e = posix_spawnattr_init(&at))) {
        if (!(e = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0)) &&
            !(e = posix_spawn_file_actions_adddup2(&fa, fds[1], 1)) &&
            !(e = posix_spawn_file_actions_adddup2(&fa, fds[1], 2)) &&
            !(e = posix_spawnattr_setpgroup(&at, 0)) && !(e = posix_spawnattr_setsigmask(&at, &none)) &&
            !(e = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK)))
            e = posix_spawn(&pid, s->compiler, &fa, &at, argv, environ);
        posix_spawnattr_destroy(&at);
    }
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (e) {
        close(fds[0]);
        smelt__sb_printf(log, "cannot run %s: %s\n", s->compiler, strerror(e));
        return -1;
    }
    /* its output until end of file, then its exit, both before the deadline */
    double deadline = smelt__now_ms() + secs * 1000.0;
    bool eof = false, timed_out = false;
    int status = 0;
    for (;;) {
        double left = deadline - smelt__now_ms();
        if (left <= 0) {
            timed_out = true;
            kill(-pid, SIGKILL);
            waitpid(pid, &status, 0);
            break;
        }
        if (eof) {
            pid_t r = waitpid(pid, &status, WNOHANG);
            if (r == pid || (r < 0 && errno != EINTR))
                break;
            struct timespec ts = {0, 5000000}; /* 5 ms */
            nanosleep(&ts, NULL);
            continue;
        }
        struct pollfd pf = {.fd = fds[0], .events = POLLIN};
        int pr = poll(&pf, 1, left > 1000 ? 1000 : (int)left + 1);
        if (pr <= 0)
            continue;
        char buf[4096];
        ssize_t r = read(fds[0], buf, sizeof buf);
        if (r > 0 && log->len < CC_LOG_MAX)
            smelt__sb_putn(log, buf, (size_t)r);
        eof = r == 0 || (r < 0 && errno != EINTR && errno != EAGAIN);
    }
    close(fds[0]);
    if (timed_out) {
        smelt__sb_printf(log, "%s did not finish within %g s and was stopped (SMELT_CC_TIMEOUT sets the "
                              "limit)\n", s->compiler, secs);
        return -1;
    }
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
        return 0;
    if (WIFSIGNALED(status))
        smelt__sb_printf(log, "%s was killed by signal %d\n", s->compiler, WTERMSIG(status));
    else
        smelt__sb_printf(log, "%s exited with status %d\n", s->compiler, WEXITSTATUS(status));
    return -1;
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
        if (h && !dlsym(h, fn_name)) {
            dlclose(h);
            h = NULL;
        }
        if (!h) /* it does not hold the kernel its key names: rebuild it */
            smelt__dcache_remove(key);
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
        int rc = run_compiler(s, so, src, log);
        unlink(src);
        if (rc != 0) {
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
    .target = {.dialect = &smelt__dialect_c},
    .available = cc_available,
    .compile = cc_compile,
    .release = cc_release,
    .destroy = cc_destroy,
};

int smelt__backend_cc_new(smelt_ctx *ctx, const char *target, smelt__backend **out)
{
    SMELT_UNUSED(target);
    int st = smelt__backend_new(ctx, &cc_iface, sizeof(cc_state), out);
    if (!st)
        ((cc_state *)(*out)->context)->ctx = ctx;
    return st;
}
