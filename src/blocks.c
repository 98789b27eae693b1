/* The block primitives (generated from ops.def by scripts/embed.py, compiled
 * by gcc -O3 once for each x86-64 instruction-set level: meson.build): the
 * TinyCC tier's kernels call them, constant folding runs them on one
 * element.  Every level computes the same bits. */
#include <stdlib.h>
#include <string.h>

#include "internal.h"

typedef struct {
    const char *name;
    smelt__blk_prim fn;
} blk_sym;
extern const blk_sym smelt__blk_syms_base[];
#ifdef SMELT_BLK_X86_VARIANTS
extern const blk_sym smelt__blk_syms_v3[], smelt__blk_syms_v4[];
#endif

/* The widest level this CPU runs, or the one SMELT_BLOCKS_ISA names
 * (x86-64, x86-64-v3, x86-64-v4) where the CPU runs it. */
static const blk_sym *blk_table(void)
{
#ifdef SMELT_BLK_X86_VARIANTS
    const char *want = getenv("SMELT_BLOCKS_ISA");
    bool v4 = __builtin_cpu_supports("x86-64-v4"), v3 = __builtin_cpu_supports("x86-64-v3");
    if (want && !strcmp(want, "x86-64"))
        return smelt__blk_syms_base;
    if (want && !strcmp(want, "x86-64-v3") && v3)
        return smelt__blk_syms_v3;
    return v4 ? smelt__blk_syms_v4 : v3 ? smelt__blk_syms_v3 : smelt__blk_syms_base;
#else
    return smelt__blk_syms_base;
#endif
}

smelt__blk_prim smelt__blk_find(const char *name)
{
    const blk_sym *t = blk_table();
    for (int i = 0; t[i].name; i++)
        if (!strcmp(t[i].name, name))
            return t[i].fn;
    return NULL;
}
