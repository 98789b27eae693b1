/* The CUDA dialect (NVRTC).  Type and function names are C's: the prelude
 * (templates/common/prelude.h.in) declares the fixed-width integer types and
 * CUDA's device math library has expf/exp and the rest under C's names. */
#include "codegen.h"

const smelt__dialect smelt__dialect_cuda = {
    .dir = "cuda",
    .ext = "cu",
    SMELT_C_NAMES,
    .restrict_kw = "__restrict__",
    .helper_kw = "static __device__ __forceinline__",
    .math_kw = "static __device__",
    .math_slow_kw = "static __device__ __noinline__",
    .table_kw = "static __device__ const",
    .device = true,
};
