/* Build time: smelt_blocks.c, the block primitives of the TinyCC tier,
 * written by the emitter (smelt__emit_blk_library) from the source tree's
 * templates, so that the primitives and the kernels of the other tiers come
 * from one code generator.  meson.build runs it and compiles its output.
 *
 *   gen-blocks OUT.c TEMPLATE_DIR */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"

int main(int argc, char **argv)
{
    if (argc != 3) {
        fputs("usage: gen-blocks OUT.c TEMPLATE_DIR\n", stderr);
        return 2;
    }
    smelt__templates_from(argv[2]); /* these templates, whatever the environment says */
    smelt__sb src, err;
    smelt__sb_init(&src), smelt__sb_init(&err);
    int st = smelt__emit_blk_library(&src, &err);
    FILE *f = st ? NULL : fopen(argv[1], "w");
    bool ok = f && fwrite(src.s, 1, src.len, f) == src.len;
    if (f && fclose(f))
        ok = false;
    if (!ok)
        fprintf(stderr, "gen-blocks: %s: %s\n", argv[1], st ? smelt__sb_str(&err) : strerror(errno));
    smelt__sb_free(&src), smelt__sb_free(&err);
    return ok ? 0 : 1;
}
