/* The CUDA dialect (NVRTC).  Type and function names are C's: the prelude
 * (templates/cuda/prelude.cu.in) declares the fixed-width integer types and
 * CUDA's device math library has expf/exp and the rest under C's names. */
#include "codegen.h"

const smelt__dialect smelt__dialect_cuda = {
    .name = "cuda",
    .dir = "cuda",
    .ext = "cu",
    SMELT_C_NAMES,
    .restrict_kw = "__restrict__",
    .device = true,
};
