/* Configuration from the environment: backend selection, numeric bounds. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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
