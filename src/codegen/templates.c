/* Kernel templates: embedded at build time, or read from SMELT_TEMPLATE_DIR
 * (a file there replaces the built-in of the same name). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"

extern const struct {
    const char *name, *text;
} smelt__builtin_templates[];

const char *smelt__template_builtin(const char *name)
{
    for (int i = 0; smelt__builtin_templates[i].name; i++)
        if (!strcmp(smelt__builtin_templates[i].name, name))
            return smelt__builtin_templates[i].text;
    return NULL;
}

/* The folder the calling thread's templates come from first (the runtime
 * sets it from SMELT_TEMPLATE_DIR around each emission). */
static _Thread_local const char *template_dir;

const char *smelt__templates_from(const char *dir)
{
    const char *was = template_dir;
    template_dir = dir;
    return was;
}

char *smelt__template_load(const char *name, smelt__sb *err)
{
    const char *dir = template_dir;
    if (dir && *dir) {
        smelt__sb path;
        smelt__sb_init(&path);
        smelt__sb_printf(&path, "%s/%s", dir, name);
        char *t = smelt__read_file(smelt__sb_str(&path), (size_t)1 << 24, NULL);
        smelt__sb_free(&path);
        if (t)
            return t;
    }
    const char *b = smelt__template_builtin(name);
    if (!b) {
        smelt__sb_printf(err, "no template named %s", name);
        return NULL;
    }
    char *t = smelt__strdup(b);
    if (!t)
        smelt__sb_puts(err, "out of memory");
    return t;
}
