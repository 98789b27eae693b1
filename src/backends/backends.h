/* The backends' own declarations: each backend's constructor (named only
 * by the registry, src/backends/registry.c) and what tests and the
 * registry call directly. */
#ifndef SMELT_BACKENDS_H
#define SMELT_BACKENDS_H
#include "runtime.h"

/* Constructors (smelt__backend_info.create): 0 and a new backend in *out,
 * or a status recorded on ctx. */
/* TinyCC, in-process (tcc/tcc.c).  target is unused (NULL). */
int smelt__backend_tcc_new(smelt_ctx *ctx, const char *target, smelt__backend **out);
/* The system C compiler (cc/cc.c).  target is unused (NULL). */
int smelt__backend_cc_new(smelt_ctx *ctx, const char *target, smelt__backend **out);
const char *smelt__cc_flags(void); /* the optimisation flags it compiles with */
/* CUDA through the driver API and NVRTC, both loaded with dlopen
 * (cuda/cuda.c).  target NULL: the GPU of this machine; "" a compile-only
 * backend for its arch (sm_80 without a GPU); otherwise one
 * compile-only backend for that arch ("sm_90" CUBIN, "compute_90" PTX) that
 * needs libnvrtc but no GPU, and cannot launch. */
int smelt__backend_cuda_new(smelt_ctx *ctx, const char *target, smelt__backend **out);
/* 1 if a usable CUDA GPU and libnvrtc are present (probed once per process);
 * otherwise 0 with the reason in why (may be NULL). */
int smelt__cuda_present(smelt__sb *why);
/* NVRTC alone: compile source for arch; *image is CUBIN ("sm_*") or PTX
 * ("compute_*"), freed by the caller.  SMELT_ERR_BACKEND if libnvrtc cannot
 * be loaded, SMELT_ERR_COMPILE with the log otherwise. */
int smelt__nvrtc_compile(const char *source, const char *name, const char *arch, char **image,
                         size_t *size, smelt__sb *log);
/* The CUDA backend's own kernels' source (templates/cuda/kernel_scan.cu.in
 * for dtype dt, kernel_copy.cu.in for es-byte elements) and function name
 * (at least 32 bytes): what it compiles on first use. */
int smelt__cuda_scan_source(smelt_dtype dt, smelt__sb *src, char *name, smelt__sb *err);
int smelt__cuda_copy_source(int es, smelt__sb *src, char *name, smelt__sb *err);

#endif
