/* The block primitives (generated from ops.def by scripts/embed.py, compiled
 * by gcc -O3 once for each x86-64 instruction-set level: meson.build): the
 * TinyCC tier's kernels call them, constant folding runs them on one
 * element.  Every level computes the same bits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

typedef struct {
    const char *name;
    smelt__blk_prim fn;
} blk_sym;
extern const blk_sym smelt__blk_syms_base[];
#ifdef SMELT_BLK_X86_VARIANTS
extern const blk_sym smelt__blk_syms_v3[], smelt__blk_syms_v4[];
#endif

/* Is name the primitive of a transcendental operator (its kernel
 * expression is smelt's own math function "smelt_<op>_%S(")? */
static bool math_primitive(const char *name)
{
    if (strncmp(name, "smelt_blk_", 10))
        return false;
    const char *op = name + 10, *end = strrchr(op, '_');
    char buf[64];
    if (!end || end - op >= (ptrdiff_t)sizeof buf)
        return false;
    snprintf(buf, sizeof buf, "%.*s", (int)(end - op), op);
    int o = smelt_op_from_name(buf);
    if (o < 0 || !smelt__ops[o].c_float)
        return false;
    const char *e = smelt__ops[o].c_float;
    size_t n = strlen(buf);
    return !strncmp(e, "smelt_", 6) && !strncmp(e + 6, buf, n) && !strncmp(e + 6 + n, "_%S(", 4);
}

/* The level whose primitive is bound: SMELT_BLOCKS_ISA's (x86-64, x86-64-v3,
 * x86-64-v4) where the CPU runs it; else AVX-512 (v4) for the math
 * primitives and AVX2 (v3) for the memory-bound rest, where the CPU has
 * them: on Zen 4, chain8 ran at 7.2 ms on v3 and 8.8 on v4, gelu_tanh at 20.7
 * on v3 and 14.7 on v4 (bench/RESULTS.md).  Every level computes the same
 * bits. */
static const blk_sym *blk_table(const char *name)
{
#ifdef SMELT_BLK_X86_VARIANTS
    const char *want = getenv("SMELT_BLOCKS_ISA");
    int level = smelt__x86_level();
    bool v4 = level >= 4, v3 = level >= 3;
    if (want && !strcmp(want, "x86-64"))
        return smelt__blk_syms_base;
    if (want && !strcmp(want, "x86-64-v3") && v3)
        return smelt__blk_syms_v3;
    if (want && !strcmp(want, "x86-64-v4") && v4)
        return smelt__blk_syms_v4;
    return v4 && math_primitive(name) ? smelt__blk_syms_v4 : v3 ? smelt__blk_syms_v3 : smelt__blk_syms_base;
#else
    (void)name;
    return smelt__blk_syms_base;
#endif
}

smelt__blk_prim smelt__blk_find(const char *name)
{
    const blk_sym *t = blk_table(name);
    for (int i = 0; t[i].name; i++)
        if (!strcmp(t[i].name, name))
            return t[i].fn;
    return NULL;
}
