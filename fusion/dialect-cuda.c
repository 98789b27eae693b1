/* The CUDA dialect (NVRTC).  Type and function names are C's: the prelude
 * (templates/cuda/prelude.cu.in) declares the fixed-width integer types and
 * CUDA's device math library has expf/exp and the rest under C's names. */
#include "dialect.h"

const smelt__dialect smelt__dialect_cuda = {
    .name = "cuda",
    .dir = "cuda",
    .ext = "cu",
    .type = {[SMELT_F32] = "float", [SMELT_F64] = "double", [SMELT_I32] = "int32_t",
             [SMELT_I64] = "int64_t", [SMELT_U8] = "uint8_t", [SMELT_BOOL] = "uint8_t",
             [SMELT_F16] = "float", [SMELT_BF16] = "float"},
    .stype = {[SMELT_F32] = "float", [SMELT_F64] = "double", [SMELT_I32] = "int32_t",
              [SMELT_I64] = "int64_t", [SMELT_U8] = "uint8_t", [SMELT_BOOL] = "uint8_t",
              [SMELT_F16] = "uint16_t", [SMELT_BF16] = "uint16_t"},
    .utype = {[SMELT_F32] = "float", [SMELT_F64] = "double", [SMELT_I32] = "uint32_t",
              [SMELT_I64] = "uint64_t", [SMELT_U8] = "uint8_t", [SMELT_BOOL] = "uint8_t",
              [SMELT_F16] = "float", [SMELT_BF16] = "float"},
    .fn_suffix = {[SMELT_F32] = "f", [SMELT_F64] = "", [SMELT_I32] = "", [SMELT_I64] = "",
                  [SMELT_U8] = "", [SMELT_BOOL] = "", [SMELT_F16] = "f", [SMELT_BF16] = "f"},
    .restrict_kw = "__restrict__",
    .device = true,
};
