/* Configuration from the environment: backend selection, numeric bounds,
 * and the table of every variable smelt reads, each validated in one place
 * (smelt__settings_warnings: plan descriptions and smelt info name a bad
 * value; smelt__setting: a value, or NULL when unset or invalid). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runtime.h"

double smelt__bound(const smelt__settings *cfg, int id, double def, bool whole, const char *unit,
                    const char *keeps, smelt__sb *warn)
{
    const char *v = cfg->raw[id];
    if (!v || !*v)
        return def;
    char *end;
    double x = strtod(v, &end);
    while (*end == ' ')
        end++;
    if (end != v && !*end && isfinite(x) && x > 0 && x < 1e12 && (!whole || x == floor(x)))
        return x;
    if (warn)
        smelt__sb_printf(warn, "warning: %s='%s' is not a %s above 0: ignored, %s %.0f %s\n",
                         smelt__settings_names[id], v, whole ? "whole number" : "size in MiB", keeps, def, unit);
    return def;
}

enum { KIND_AUTO = -2 }; /* smelt__backend_find says -1: no such backend */

/* Parse one name; source says where it came from (for the message). */
static int parse(smelt_ctx *ctx, const char *name, const char *source, int *kind)
{
    *kind = strcasecmp(name, "AUTO") ? smelt__backend_find(name) : KIND_AUTO;
    if (*kind != -1)
        return SMELT_OK;
    smelt__sb v; /* "TCC, CC, NVRTC, AUTO": the registry's names */
    smelt__sb_init(&v);
    for (int k = 0; k < smelt__backend_count; k++)
        smelt__sb_printf(&v, "%s, ", smelt__backend_table[k].name);
    smelt__sb_puts(&v, "AUTO");
    int st;
    if (!strcasecmp(name, "HALIDE") || !strcasecmp(name, "MLIR"))
        st = smelt__err(ctx, SMELT_ERR_BACKEND,
                        "%s=%s: smelt does not have the %s backend (MegEngine's); valid values "
                        "are %s", source, name, name, smelt__sb_str(&v));
    else
        st = smelt__err(ctx, SMELT_ERR_INVALID_ARG, "%s: unknown backend '%s'; valid values are %s",
                        source, name, smelt__sb_str(&v));
    smelt__sb_free(&v);
    return st;
}

/* The backend name in force and, in *source, where it comes from. */
static const char *name_in_force(smelt_ctx *ctx, const char *explicit_name, const char **source)
{
    const char *name;
    const smelt__settings *cfg = ctx ? smelt__ctx_settings(ctx) : smelt__settings_read();
    if ((name = explicit_name)) {
        *source = "backend option";
    } else if (ctx && (name = ctx->backend_override)) {
        *source = "smelt_ctx_set_backend";
    } else if ((name = cfg->backend)) {
        *source = cfg->backend_source;
    } else {
        name = "AUTO";
        *source = "default";
    }
    return name;
}

bool smelt__backend_is_auto(smelt_ctx *ctx, const char *explicit_name)
{
    const char *source;
    return !strcasecmp(name_in_force(ctx, explicit_name, &source), "AUTO");
}

int smelt__resolve_backend(smelt_ctx *ctx, const char *explicit_name, int *kind)
{
    const char *source, *name = name_in_force(ctx, explicit_name, &source);
    int st = parse(ctx, name, source, kind);
    if (st)
        return st;
    if (*kind == KIND_AUTO) {
        /* the present backend AUTO prefers most (a usable GPU when there is
         * one, probed once per process), else the next; a failure to create
         * it (e.g. an NVRTC too old for this GPU) moves on to the next */
        bool tried[SMELT__MAX_BACKENDS] = {false};
        for (;;) {
            int best = -1;
            for (int k = 0; k < smelt__backend_count; k++) {
                const smelt__backend_info *bi = &smelt__backend_table[k];
                if (!tried[k] && bi->auto_pref > 0 &&
                    (best < 0 || bi->auto_pref > smelt__backend_table[best].auto_pref))
                    best = k;
            }
            if (best < 0)
                return smelt__err(ctx, SMELT_ERR_BACKEND, "AUTO: no backend is usable here");
            tried[best] = true;
            const smelt__backend_info *bi = &smelt__backend_table[best];
            smelt__backend *be;
            *kind = best;
            if (!bi->present) /* no probe: checked when a plan is made */
                break;
            if (!ctx || !bi->present(NULL))
                continue;
            if (smelt__backend_get(ctx, best, &be) == SMELT_OK)
                break;
            smelt__clear_err(ctx);
        }
    }
    return SMELT_OK;
}

int smelt_ctx_set_backend(smelt_ctx *ctx, const char *name)
{
    if (!ctx)
        return SMELT_ERR_INVALID_ARG;
    int kind, st = name ? parse(ctx, name, "smelt_ctx_set_backend", &kind) : SMELT_OK;
    if (st)
        return st;
    char *copy = name ? smelt__strdup(name) : NULL;
    if (name && !copy)
        return smelt__err(ctx, SMELT_ERR_NOMEM, "out of memory");
    free(ctx->backend_override);
    ctx->backend_override = copy;
    return SMELT_OK;
}

/* ---- settings: every variable smelt reads, validated in one place ----- */

enum { S_ANY, S_WORDS, S_NUM, S_WHOLE, S_WHOLE0, S_SECONDS, S_DIR, S_DUMP_DIR, S_MARCH, S_ISA, S_BLAS, S_WARPS };

typedef struct setting {
    int kind;
    const char *words;  /* S_WORDS: the accepted words, '|' between them (case-insensitive) */
    const char *expect; /* what a valid value is (the warning says the value is not this) */
    const char *keeps;  /* what holds instead */
} setting;

/* The table, from settings.def: docs/env.md lists exactly its SMELT_SETTING
 * lines (tests/test-errors.c checks). */
enum { S_SYS = -1 };
static const setting table[] = {
#define SMELT_SETTING(name, kind, words, expect, keeps) {kind, words, expect, keeps},
#define SMELT_SYSTEM(name) {S_SYS, NULL, NULL, NULL},
#include "settings.def"
#undef SMELT_SETTING
#undef SMELT_SYSTEM
};
const char *const smelt__settings_names[] = {
#define SMELT_SETTING(name, kind, words, expect, keeps) #name,
#define SMELT_SYSTEM(name) #name,
#include "settings.def"
#undef SMELT_SETTING
#undef SMELT_SYSTEM
};
_Static_assert(sizeof table / sizeof table[0] == SMELT__S_COUNT, "one entry a variable");

const char *smelt__setting_name(int i)
{
    return i >= 0 && i < SMELT__S_COUNT && table[i].kind != S_SYS ? smelt__settings_names[i] : NULL;
}

static bool number(const char *v, double lo, double hi, bool whole, double *out)
{
    char *end;
    double x = smelt__strtod(v, &end);
    while (*end == ' ')
        end++;
    if (end == v || *end || !(x > lo) || !(x <= hi) || (whole && x != floor(x)))
        return false;
    if (out)
        *out = x;
    return true;
}

static bool valid(const setting *s, const char *v)
{
    switch (s->kind) {
    case S_WORDS:
        for (const char *w = s->words; *w;) {
            size_t l = strcspn(w, "|");
            if (strlen(v) == l && !strncasecmp(v, w, l))
                return true;
            w += l + (w[l] == '|');
        }
        return false;
    case S_NUM:
        return number(v, 0, 1e12, false, NULL);
    case S_WHOLE:
        return number(v, 0, 1e12, true, NULL);
    case S_WHOLE0:
        return number(v, -1, 1e12, true, NULL);
    case S_SECONDS:
        return number(v, 0, 1e6, false, NULL);
    case S_DIR: {
        struct stat st;
        return !stat(v, &st) && S_ISDIR(st.st_mode);
    }
    case S_DUMP_DIR: { /* created when missing, as kernels are dumped */
        struct stat st;
        return !smelt__mkdir_p(v, 0755) && !stat(v, &st) && S_ISDIR(st.st_mode) && !access(v, W_OK);
    }
    case S_MARCH:
        return strspn(v, "abcdefghijklmnopqrstuvwxyz0123456789-_") == strlen(v);
    case S_ISA: {
        int level = smelt__x86_level();
        return !strcmp(v, "x86-64") || (!strcmp(v, "x86-64-v3") && level >= 3) ||
               (!strcmp(v, "x86-64-v4") && level >= 4);
    }
    case S_BLAS:
        return smelt__blas_from_env();
    case S_WARPS: {
        char *end;
        long w = strtol(v, &end, 10);
        return !strcasecmp(v, "auto") || (!*end && end != v && w >= 1 && w <= 32 && !(w & (w - 1)));
    }
    default:
        return true;
    }
}

static bool valid_at(int id, const char *v)
{
    return v && *v && (table[id].kind == S_SYS || valid(&table[id], v));
}

/* a setting of the words auto|0|1: -1 auto (the default, and a value
 * that is neither: warned by describe), 0 never, 1 always */
static int auto01(const char *v)
{
    return v && !strcmp(v, "0") ? 0 : v && !strcmp(v, "1") ? 1 : -1;
}

/* ---- the reader: the one place smelt reads its environment ---------------
 * A snapshot is immutable and lives until the last context is freed (a
 * plan, a context, a background compile may hold it on any thread); a read
 * that finds the environment as an earlier one did returns that one. */
static pthread_mutex_t snap_lock = PTHREAD_MUTEX_INITIALIZER;
static smelt__settings *snaps;

static bool same(const char *a, const char *b) { return a == b || (a && b && !strcmp(a, b)); }

static void parse_settings(smelt__settings *s)
{
    const char *const *r = s->raw;
    if (r[SMELT__S_SMELT_JIT_BACKEND] && *r[SMELT__S_SMELT_JIT_BACKEND])
        s->backend = r[SMELT__S_SMELT_JIT_BACKEND], s->backend_source = "SMELT_JIT_BACKEND";
    else if (r[SMELT__S_MGB_JIT_BACKEND] && *r[SMELT__S_MGB_JIT_BACKEND])
        s->backend = r[SMELT__S_MGB_JIT_BACKEND], s->backend_source = "MGB_JIT_BACKEND";
    const char *m = r[SMELT__S_SMELT_CC_MARCH];
    s->cc_march = m && *m && valid(&table[SMELT__S_SMELT_CC_MARCH], m) ? m : "native";
    const char *isa = r[SMELT__S_SMELT_BLOCKS_ISA];
    s->blocks_isa = !isa                      ? 0
                    : !strcmp(isa, "x86-64")    ? 1
                    : !strcmp(isa, "x86-64-v3") ? 3
                    : !strcmp(isa, "x86-64-v4") ? 4
                                                : 0;
    const char *t = r[SMELT__S_SMELT_CC_TIMEOUT];
    double secs;
    s->cc_timeout = valid_at(SMELT__S_SMELT_CC_TIMEOUT, t) && number(t, -1e300, 1e300, false, &secs) ? secs : 120;
    const char *c = r[SMELT__S_SMELT_CACHE];
    s->cache_on = true;
    static const char *const off[] = {"0", "false", "no", "off"};
    for (int i = 0; c && i < 4; i++)
        s->cache_on = s->cache_on && strcasecmp(c, off[i]);
    s->stream_stores = auto01(r[SMELT__S_SMELT_STREAM_STORES]);
    s->batch_chains = auto01(r[SMELT__S_SMELT_BATCH_CHAINS]);
    const char *hv = r[SMELT__S_SMELT_CUDA_ROWS_HELD];
    s->rows_held = hv && !strcmp(hv, "0") ? 0
                   : (int)smelt__bound(s, SMELT__S_SMELT_CUDA_ROWS_HELD, SMELT_ROWS_HELD_BYTES, true, "bytes",
                                       "the default holds:", NULL); /* (warned by describe) */
    s->rows_shared = auto01(r[SMELT__S_SMELT_CUDA_ROWS_SHARED]);
    const char *wv = r[SMELT__S_SMELT_CUDA_ROWS_WARPS]; /* auto (default), 1, 2, 4, ..., 32 */
    s->rows_warps = 0;
    if (wv && *wv && strcasecmp(wv, "auto")) {
        char *end;
        long w = strtol(wv, &end, 10);
        if (!*end && w >= 1 && w <= (1 << SMELT_BLOCK_WARPS_MAX_LOG2) && !(w & (w - 1)))
            s->rows_warps = (int)w; /* (another value: warned by describe) */
    }
    s->rows_steps = (int)SMELT_MIN(smelt__bound(s, SMELT__S_SMELT_CUDA_ROWS_STEPS, 1, true, "row",
                                                "the default holds:", NULL),
                                   1 << 30);
}

static smelt__settings defaults;
static void defaults_init(void) { parse_settings(&defaults); }

const smelt__settings *smelt__settings_read(void)
{
    const char *now[SMELT__S_COUNT];
    for (int i = 0; i < SMELT__S_COUNT; i++)
        now[i] = getenv(smelt__settings_names[i]);
    pthread_mutex_lock(&snap_lock);
    smelt__settings *s = snaps;
    for (; s; s = s->next) {
        int i = 0;
        while (i < SMELT__S_COUNT && same(s->raw[i], now[i]))
            i++;
        if (i == SMELT__S_COUNT)
            break;
    }
    if (!s) {
        size_t bytes = sizeof *s;
        for (int i = 0; i < SMELT__S_COUNT; i++)
            bytes += now[i] ? strlen(now[i]) + 1 : 0;
        s = calloc(1, bytes);
        if (s) {
            char *at = (char *)(s + 1);
            for (int i = 0; i < SMELT__S_COUNT; i++)
                if (now[i]) {
                    size_t l = strlen(now[i]) + 1;
                    memcpy(at, now[i], l);
                    s->raw[i] = at;
                    at += l;
                }
            parse_settings(s);
            s->next = snaps;
            snaps = s;
        }
    }
    pthread_mutex_unlock(&snap_lock);
    if (!s) { /* out of memory: the defaults */
        static pthread_once_t once = PTHREAD_ONCE_INIT;
        pthread_once(&once, defaults_init);
        s = &defaults;
    }
    return s;
}

static int live_contexts;

void smelt__settings_hold(int d)
{
    pthread_mutex_lock(&snap_lock);
    live_contexts += d;
    if (live_contexts == 0) /* no context: no plan, no compile holds one */
        while (snaps) {
            smelt__settings *s = snaps;
            snaps = s->next;
            free(s);
        }
    pthread_mutex_unlock(&snap_lock);
}

const smelt__settings *smelt__ctx_settings(smelt_ctx *ctx)
{
    const smelt__settings *s = smelt__settings_read();
    __atomic_store_n(&ctx->settings, s, __ATOMIC_RELEASE);
    return s;
}

const smelt__settings *smelt__settings_of(smelt_ctx *ctx)
{
    const smelt__settings *s = ctx ? __atomic_load_n(&ctx->settings, __ATOMIC_ACQUIRE) : NULL;
    return s ? s : smelt__settings_read();
}

bool smelt__setting_valid(const smelt__settings *cfg, int id) { return valid_at(id, cfg->raw[id]); }

void smelt__settings_warnings(const smelt__settings *cfg, smelt__sb *warn)
{
    for (int i = 0; i < SMELT__S_COUNT; i++) {
        const setting *s = &table[i];
        const char *v = cfg->raw[i];
        if (s->kind != S_ANY && s->kind != S_SYS && v && *v && !valid(s, v))
            smelt__sb_printf(warn, "warning: %s='%.200s' is not %s: ignored, %s\n", smelt__settings_names[i], v,
                             s->expect, s->keeps);
    }
}

const char *smelt_env(const char *name)
{
    for (int i = 0; name && smelt__setting_name(i); i++)
        if (!strcmp(smelt__settings_names[i], name))
            return smelt__settings_read()->raw[i];
    return NULL;
}
