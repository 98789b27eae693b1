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
    .args = "a.",
    .thread_idx = "threadIdx.x",
    .block_idx = "blockIdx.x",
    .block_dim = "blockDim.x",
    .grid_dim = "gridDim.x",
    .barrier = "__syncthreads();",
    .shared_kw = "__shared__",
    .align16 = "__align__(16)",
    .launch_bounds = "__launch_bounds__",
    .ro_load = "__ldg",
};
