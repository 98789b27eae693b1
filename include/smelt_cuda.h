/* smelt's CUDA API: device tensors and compiling kernels without a GPU
 * (the NVRTC backend; docs/cuda.md).  Include after, or instead of, smelt.h. */
#ifndef SMELT_CUDA_H
#define SMELT_CUDA_H
#include "smelt.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- CUDA (the NVRTC backend) ----------------------------------------------
 * libcuda.so.1 and libnvrtc are loaded at run time; smelt_backend_check(ctx,
 * "NVRTC") says whether this machine has a usable GPU, or why not.
 *
 * Device tensors live in GPU memory (device 0, the context's stream).  They
 * are created contiguous (smelt_tensor_new_device) or over the caller's
 * device memory with any strides (smelt_tensor_wrap_device);
 * transpose / slice / broadcast_to views of them
 * work as for host tensors and are read by kernels in place.  Plans of the
 * NVRTC backend take device tensors, or host tensors that they copy in and
 * out around the run; a NULL output is allocated on the device when an input
 * is a device tensor.  smelt_tensor_data() of a device tensor is a CUDA
 * device pointer; smelt_tensor_get() copies one element back.  Free device
 * tensors before their context.  Plan runs on the device return when the
 * kernels have finished. */
int smelt_tensor_new_device(smelt_ctx *ctx, smelt_dtype dt, int ndim, const int64_t *shape,
                            smelt_tensor **out);
int smelt_tensor_is_device(const smelt_tensor *t);
/* A device tensor over caller-owned device memory (a CUDA device pointer of
 * device 0, e.g. another library's array received through DLPack):
 * strides in elements (NULL: contiguous; any sign, as smelt_tensor_wrap),
 * device_ptr the first element, aligned to the element size (NULL only
 * when there are no elements).  smelt never frees the memory:
 * smelt_tensor_free frees the tensor only, and the caller keeps the memory
 * alive and unchanged by others until the tensor's last use (a plan run on
 * the device returns when its kernels have finished).  The caller also
 * makes sure the memory is ready: smelt's kernels run on its own
 * non-blocking stream, which does not wait for other streams.  Errors: the
 * NVRTC backend unusable (SMELT_ERR_BACKEND, as smelt_tensor_new_device),
 * a NULL pointer or a misaligned one (SMELT_ERR_INVALID_ARG), an invalid
 * dtype (SMELT_ERR_DTYPE), a bad shape or strides (SMELT_ERR_SHAPE). */
int smelt_tensor_wrap_device(smelt_ctx *ctx, smelt_dtype dt, int ndim, const int64_t *shape,
                             const int64_t *strides, void *device_ptr, smelt_tensor **out);
/* Copy all elements between a contiguous device tensor and a host tensor
 * (any strides) of the same dtype and shape. */
int smelt_tensor_copy_from_host(smelt_tensor *dst_device, const smelt_tensor *src_host);
int smelt_tensor_copy_to_host(smelt_tensor *dst_host, const smelt_tensor *src_device);
/* Emit the CUDA kernels a plan of g would run and compile each with NVRTC
 * for arch, without running anything: no GPU is needed, only libnvrtc.
 * arch: "sm_XY" (CUBIN) or "compute_XY" (PTX); NULL: this machine's GPU,
 * or sm_80 without one.  opts->backend must be NULL or "NVRTC".  *report
 * (freed with smelt_free; NULL when nothing was compiled) lists, for every
 * kernel compiled, whether NVRTC accepted it (or its log) and the source,
 * then the plan's description.  Returns SMELT_OK when NVRTC accepted every
 * kernel; SMELT_ERR_COMPILE (report set) when it rejected one; and
 * SMELT_ERR_BACKEND when libnvrtc cannot be loaded. */
int smelt_plan_emit_only(smelt_ctx *ctx, smelt_graph *g, int n_out, smelt_node *const *outputs,
                         const smelt_plan_opts *opts, const char *arch, char **report);

#ifdef __cplusplus
}
#endif
#endif
