/* A dialect: the small table that makes the one emitter speak C or CUDA. */
#ifndef SMELT_DIALECT_H
#define SMELT_DIALECT_H
#include "../src/internal.h"

struct smelt__dialect {
    const char *name;                      /* "c" */
    const char *dir;                       /* template folder: "c" */
    const char *ext;                       /* template file extension: "c" */
    const char *type[SMELT_DTYPE_COUNT];   /* compute type (values in the kernel body) */
    const char *stype[SMELT_DTYPE_COUNT];  /* storage type (memory); differs for f16/bf16,
                                            * which are bit patterns converted by the
                                            * prelude's smelt_h2f_* / smelt_f2h_* */
    const char *utype[SMELT_DTYPE_COUNT];  /* unsigned counterpart (wrapping arithmetic) */
    const char *fn_suffix[SMELT_DTYPE_COUNT]; /* math functions: expf vs exp */
    const char *restrict_kw;
    /* Device dialect (CUDA): kernels read one parameter block `a` (see
     * smelt__kparam_bytes), run one element per thread in a grid-stride loop,
     * come in 32- and 64-bit index variants and use vector loads when every
     * operand is contiguous.  The templates hold the rest of the spelling. */
    bool device;
};
#endif
