/* A dialect: the small table that makes the one emitter speak C or CUDA. */
#ifndef SMELT_DIALECT_H
#define SMELT_DIALECT_H
#include "../src/internal.h"

struct smelt__dialect {
    const char *name;                      /* "c" */
    const char *dir;                       /* template folder: "c" */
    const char *ext;                       /* template file extension: "c" */
    const char *type[SMELT_DTYPE_COUNT];   /* storage and compute type */
    const char *utype[SMELT_DTYPE_COUNT];  /* unsigned counterpart (wrapping arithmetic) */
    const char *fn_suffix[SMELT_DTYPE_COUNT]; /* math functions: expf vs exp */
    const char *restrict_kw;
};
#endif
