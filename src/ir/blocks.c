/* The block primitives (written by the emitter at build time,
 * src/codegen/gen-blocks.c, compiled by gcc -O3 once for each x86-64
 * instruction-set level: meson.build): the TinyCC tier's kernels call them,
 * constant folding runs them on one element.  Every level computes the same
 * bits. */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

typedef struct {
    const char *name;
    smelt__blk_prim fn;
    bool math; /* a transcendental operator's */
} blk_sym;
extern const blk_sym smelt__blk_syms_base[];
#ifdef SMELT_BLK_X86_VARIANTS
extern const blk_sym smelt__blk_syms_v3[], smelt__blk_syms_v4[];
#endif

/* The level whose primitive is bound: isa's (SMELT_BLOCKS_ISA, read by the
 * runtime: 1 x86-64, 3 x86-64-v3, 4 x86-64-v4) where the CPU runs it; else AVX-512 (v4) for the math
 * primitives and AVX2 (v3) for the memory-bound rest, where the CPU has
 * them: on Zen 4, chain8 ran at 7.2 ms on v3 and 8.8 on v4, gelu_tanh at 20.7
 * on v3 and 14.7 on v4 (bench/RESULTS.md).  Every level computes the same
 * bits. */
static const blk_sym *blk_table(bool math, int isa)
{
#ifdef SMELT_BLK_X86_VARIANTS
    int level = smelt__x86_level();
    bool v4 = level >= 4, v3 = level >= 3;
    if (isa == 1)
        return smelt__blk_syms_base;
    if (isa == 3 && v3)
        return smelt__blk_syms_v3;
    if (isa == 4 && v4)
        return smelt__blk_syms_v4;
    return v4 && math ? smelt__blk_syms_v4 : v3 ? smelt__blk_syms_v3 : smelt__blk_syms_base;
#else
    (void)math, (void)isa;
    return smelt__blk_syms_base;
#endif
}

/* The levels' tables list the same primitives in the same order. */
smelt__blk_prim smelt__blk_find(const char *name, int isa)
{
    const blk_sym *t = smelt__blk_syms_base;
    for (int i = 0; t[i].name; i++)
        if (!strcmp(t[i].name, name))
            return blk_table(t[i].math, isa)[i].fn;
    return NULL;
}
