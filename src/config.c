/* Configuration from the environment: backend selection. */
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "internal.h"

static const char *const kind_names[SMELT_BK_COUNT] = {"AUTO", "TCC", "CC", "NVRTC"};
#define VALID_NAMES "TCC, CC, NVRTC, AUTO"

const char *smelt__backend_kind_name(int kind)
{
    return kind >= 0 && kind < SMELT_BK_COUNT ? kind_names[kind] : "?";
}

/* Parse one name; source says where it came from (for the message). */
static int parse(smelt_ctx *ctx, const char *name, const char *source, int *kind)
{
    for (int k = 0; k < SMELT_BK_COUNT; k++)
        if (!strcasecmp(name, kind_names[k])) {
            *kind = k;
            return SMELT_OK;
        }
    if (!strcasecmp(name, "HALIDE") || !strcasecmp(name, "MLIR"))
        return smelt__err(ctx, SMELT_ERR_BACKEND,
                          "%s=%s: smelt does not have the %s backend (MegEngine's); valid values "
                          "are " VALID_NAMES,
                          source, name, name);
    return smelt__err(ctx, SMELT_ERR_INVALID_ARG,
                      "%s: unknown backend '%s'; valid values are " VALID_NAMES, source, name);
}

static const char *name_in_force(smelt_ctx *ctx, const char *explicit_name, const char **source);

bool smelt__backend_is_auto(smelt_ctx *ctx, const char *explicit_name)
{
    const char *source;
    return !strcasecmp(name_in_force(ctx, explicit_name, &source), "AUTO");
}

int smelt__resolve_backend(smelt_ctx *ctx, const char *explicit_name, int *kind)
{
    const char *source = NULL;
    const char *name = name_in_force(ctx, explicit_name, &source);
    int st = parse(ctx, name, source, kind);
    if (st)
        return st;
    if (*kind == SMELT_BK_AUTO) {
        /* a usable GPU when there is one (probed once per process), else the
         * first CPU tier; CC follows in the background */
        smelt__backend *gpu;
        *kind = SMELT_BK_TCC;
        if (smelt__cuda_present(NULL) && ctx) {
            if (smelt__backend_get(ctx, SMELT_BK_NVRTC, &gpu) == SMELT_OK)
                *kind = SMELT_BK_NVRTC;
            else
                smelt__clear_err(ctx); /* e.g. an NVRTC too old for this GPU */
        }
    }
    return SMELT_OK;
}

static const char *name_in_force(smelt_ctx *ctx, const char *explicit_name, const char **src)
{
    const char *name = NULL, *source = NULL;
    if (explicit_name) {
        name = explicit_name;
        source = "backend option";
    } else if (ctx && ctx->backend_override) {
        name = ctx->backend_override;
        source = "smelt_ctx_set_backend";
    } else if ((name = getenv("SMELT_JIT_BACKEND")) && *name) {
        source = "SMELT_JIT_BACKEND";
    } else if ((name = getenv("MGB_JIT_BACKEND")) && *name) {
        source = "MGB_JIT_BACKEND";
    } else {
        name = "AUTO";
        source = "default";
    }
    *src = source;
    return name;
}

int smelt_ctx_set_backend(smelt_ctx *ctx, const char *name)
{
    if (!ctx)
        return SMELT_ERR_INVALID_ARG;
    if (name) {
        int kind;
        int st = parse(ctx, name, "smelt_ctx_set_backend", &kind);
        if (st)
            return st;
    }
    char *copy = name ? smelt__strdup(name) : NULL;
    if (name && !copy)
        return smelt__err(ctx, SMELT_ERR_NOMEM, "out of memory");
    free(ctx->backend_override);
    ctx->backend_override = copy;
    return SMELT_OK;
}
