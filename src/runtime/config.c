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

double smelt__env_bound(const char *name, double def, bool whole, const char *unit, const char *keeps,
                        smelt__sb *warn)
{
    const char *v = getenv(name);
    if (!v || !*v)
        return def;
    char *end;
    double x = strtod(v, &end);
    while (*end == ' ')
        end++;
    if (end != v && !*end && isfinite(x) && x > 0 && x < 1e12 && (!whole || x == floor(x)))
        return x;
    if (warn)
        smelt__sb_printf(warn, "warning: %s='%s' is not a %s above 0: ignored, %s %.0f %s\n", name, v,
                         whole ? "whole number" : "size in MiB", keeps, def, unit);
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
    if ((name = explicit_name)) {
        *source = "backend option";
    } else if (ctx && (name = ctx->backend_override)) {
        *source = "smelt_ctx_set_backend";
    } else if ((name = getenv("SMELT_JIT_BACKEND")) && *name) {
        *source = "SMELT_JIT_BACKEND";
    } else if ((name = getenv("MGB_JIT_BACKEND")) && *name) {
        *source = "MGB_JIT_BACKEND";
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
    const char *name;
    int kind;
    const char *words;  /* S_WORDS: the accepted words, '|' between them (case-insensitive) */
    const char *expect; /* what a valid value is (the warning says the value is not this) */
    const char *keeps;  /* what holds instead */
} setting;

/* The table: docs/env.md lists exactly these (tests/test-errors.c checks). */
static const setting table[] = {
    {"SMELT_JIT_BACKEND", S_ANY, NULL, NULL, NULL}, /* an unknown backend is an error (above) */
    {"MGB_JIT_BACKEND", S_ANY, NULL, NULL, NULL},
    {"SMELT_DUMP_DIR", S_DUMP_DIR, NULL, "a folder that can be created and written", "no kernel sources are written"},
    {"SMELT_TEMPLATE_DIR", S_DIR, NULL, "a folder", "the built-in templates are used"},
    {"CC", S_ANY, NULL, NULL, NULL}, /* checked when CC is used (smelt_backend_check says why) */
    {"SMELT_CC_MARCH", S_MARCH, NULL, "an -march level (letters, digits, '-', '_')", "native holds"},
    {"SMELT_BLOCKS_ISA", S_ISA, NULL, "x86-64, x86-64-v3 or x86-64-v4 (one this CPU runs)", "the default holds"},
    {"SMELT_CC_TIMEOUT", S_SECONDS, NULL, "a number of seconds in (0, 1e6]", "the default holds: 120 s"},
    {"SMELT_CUBLAS_LIB", S_ANY, NULL, NULL, NULL}, /* an explicit library: an error when it does not load */
    {"SMELT_BLAS_LIB", S_BLAS, NULL, "a library that loads and has cblas_sgemm and cblas_dgemm",
     "the default BLAS is used"},
    {"OPENBLAS_CORETYPE", S_ANY, NULL, NULL, NULL},
    {"SMELT_CACHE_DIR", S_ANY, NULL, NULL, NULL}, /* checked before each use (smelt__dcache_check) */
    {"SMELT_CACHE", S_WORDS, "0|false|no|off|1|true|yes|on", "0/false/no/off or 1/true/yes/on",
     "the persistent cache stays on"},
    {"SMELT_CACHE_MAX_MB", S_NUM, NULL, "a size in MiB above 0", "the cap stays 512 MiB"},
    {"SMELT_MEM_CACHE_MAX_KERNELS", S_WHOLE, NULL, "a whole number above 0",
     "the in-memory kernel cache keeps 4096 kernels"},
    {"SMELT_MEM_CACHE_MAX_MB", S_NUM, NULL, "a size in MiB above 0", "the in-memory kernel cache keeps 256 MiB"},
    {"SMELT_STREAM_STORES", S_WORDS, "auto|0|1", "auto, 0 or 1", "auto holds"},
    {"SMELT_CUDA_ROWS_HELD", S_WHOLE0, NULL, "a whole number of bytes", "the default holds: 512 bytes"},
    {"SMELT_CUDA_ROWS_SHARED", S_WORDS, "auto|0|1", "auto, 0 or 1", "auto holds"},
    {"SMELT_CUDA_ROWS_WARPS", S_WARPS, NULL, "auto, 1, 2, 4, 8, 16 or 32", "auto holds"},
    {"SMELT_CUDA_ROWS_STEPS", S_WHOLE, NULL, "a whole number above 0", "the default holds: 1 row"},
    {"SMELT_CUDA_DRIVER_LIB", S_ANY, NULL, NULL, NULL}, /* an explicit library: no GPU when it does not load */
    {"SMELT_NVRTC_LIB", S_ANY, NULL, NULL, NULL},
    {"SMELT_TEST_SEED", S_ANY, NULL, NULL, NULL},
};

static const setting *find(const char *name)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++)
        if (!strcmp(table[i].name, name))
            return &table[i];
    return NULL;
}

const char *smelt__setting_name(int i)
{
    return i >= 0 && (size_t)i < sizeof table / sizeof table[0] ? table[i].name : NULL;
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

const char *smelt__setting(const char *name)
{
    const setting *s = find(name);
    const char *v = getenv(name);
    return v && *v && (!s || valid(s, v)) ? v : NULL;
}

double smelt__setting_num(const char *name, double def)
{
    const char *v = smelt__setting(name);
    double x;
    return v && number(v, -1e300, 1e300, false, &x) ? x : def;
}

void smelt__settings_warnings(smelt__sb *warn)
{
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        const setting *s = &table[i];
        const char *v = getenv(s->name);
        if (s->kind != S_ANY && v && *v && !valid(s, v))
            smelt__sb_printf(warn, "warning: %s='%.200s' is not %s: ignored, %s\n", s->name, v, s->expect, s->keeps);
    }
}
