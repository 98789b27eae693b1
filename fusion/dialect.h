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
    /* qualifiers in the prelude (templates/common/prelude.h.in): of its
     * helpers, of smelt's math functions, of their out-of-line slow paths
     * and of their tables */
    const char *helper_kw, *math_kw, *math_slow_kw, *table_kw;
    /* Device dialect (CUDA): kernels read one parameter block `a` (see
     * smelt__kparam_bytes), run one element per thread in a grid-stride loop,
     * come in 32- and 64-bit index variants and use vector loads when every
     * operand is contiguous.  The templates hold the rest of the spelling. */
    bool device;
};
/* C's type and math-function names: storage (stype), compute (type), the
 * unsigned type of wrapping integer arithmetic, expf vs exp.  CUDA shares them. */
#define SMELT_C_NAMES \
    .type = {[SMELT_F32] = "float", [SMELT_F64] = "double", [SMELT_I32] = "int32_t", \
             [SMELT_I64] = "int64_t", [SMELT_U8] = "uint8_t", [SMELT_BOOL] = "uint8_t", \
             [SMELT_F16] = "float", [SMELT_BF16] = "float"}, \
    .stype = {[SMELT_F32] = "float", [SMELT_F64] = "double", [SMELT_I32] = "int32_t", \
              [SMELT_I64] = "int64_t", [SMELT_U8] = "uint8_t", [SMELT_BOOL] = "uint8_t", \
              [SMELT_F16] = "uint16_t", [SMELT_BF16] = "uint16_t"}, \
    .utype = {[SMELT_F32] = "float", [SMELT_F64] = "double", [SMELT_I32] = "uint32_t", \
              [SMELT_I64] = "uint64_t", [SMELT_U8] = "uint8_t", [SMELT_BOOL] = "uint8_t", \
              [SMELT_F16] = "float", [SMELT_BF16] = "float"}, \
    .fn_suffix = {[SMELT_F32] = "f", [SMELT_F64] = "", [SMELT_I32] = "", [SMELT_I64] = "", \
                  [SMELT_U8] = "", [SMELT_BOOL] = "", [SMELT_F16] = "f", [SMELT_BF16] = "f"}
#endif
