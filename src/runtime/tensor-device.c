/* Device tensors: a tensor whose buffer lives in a device backend's memory
 * (today: CUDA through the NVRTC backend).  They are created contiguous;
 * views of them (transpose, slice, broadcast_to) are read by kernels in
 * place.  Plans of a device backend also accept host tensors: the executor
 * stages them through device copies (smelt__device_stage). */
#include <stdlib.h>
#include <string.h>

#include "runtime.h"
#include "smelt_cuda.h"

/* how the tensor layer reads device memory (ir.h); it frees it with smelt__be_free */
static int dev_read(smelt__backend *be, void *dst, const void *src, size_t bytes)
{
    return be->iface->copy(be, dst, src, bytes, SMELT_COPY_D2H);
}

int smelt__tensor_new_on(smelt_ctx *ctx, smelt__backend *be, smelt_dtype dt, int ndim,
                         const int64_t *shape, smelt_tensor **out)
{
    static char placeholder; /* wrap validates dtype and shape; the memory comes next */
    int st = smelt_tensor_wrap(ctx, dt, ndim, shape, NULL, &placeholder, out);
    if (st)
        return st;
    smelt_tensor *t = *out;
    size_t bytes = (size_t)smelt__numel(ndim, shape) * smelt__dtypes[dt].size;
    void *mem = smelt__be_alloc(be, bytes);
    if (!mem) { /* the backend recorded why */
        smelt_tensor_free(t);
        *out = NULL;
        return SMELT_ERR_NOMEM;
    }
    t->buf->mem = mem;
    t->buf->bytes = bytes;
    t->buf->dev = be;
    t->buf->dev_free = smelt__be_free;
    t->buf->dev_read = dev_read;
    t->data = mem;
    return SMELT_OK;
}

int smelt_tensor_new_device(smelt_ctx *ctx, smelt_dtype dt, int ndim, const int64_t *shape,
                            smelt_tensor **out)
{
    if (!ctx)
        return SMELT_ERR_INVALID_ARG;
    if (!out)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "smelt_tensor_new_device: out is NULL");
    *out = NULL;
    smelt__backend *be;
    int st = smelt__backend_device(ctx, &be);
    return st ? st : smelt__tensor_new_on(ctx, be, dt, ndim, shape, out);
}

int smelt_tensor_wrap_device(smelt_ctx *ctx, smelt_dtype dt, int ndim, const int64_t *shape,
                             const int64_t *strides, void *device_ptr, smelt_tensor **out)
{
    const char *fn = "smelt_tensor_wrap_device";
    if (!ctx)
        return SMELT_ERR_INVALID_ARG;
    if (!out)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "%s: out is NULL", fn);
    *out = NULL;
    if (!smelt__dtype_valid((int)dt))
        return smelt__err(ctx, SMELT_ERR_DTYPE, "%s: invalid dtype %d", fn, (int)dt);
    int st = smelt__shape_check(ctx, fn, ndim, shape);
    if (st)
        return st;
    if (!device_ptr && smelt__numel(ndim, shape) > 0)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "%s: device_ptr is NULL", fn);
    size_t es = smelt__dtypes[dt].size;
    if ((uintptr_t)device_ptr % es)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG,
                          "%s: device_ptr %p is not aligned to its %zu-byte elements", fn, device_ptr, es);
    smelt__backend *be;
    if ((st = smelt__backend_device(ctx, &be)))
        return st;
    if ((st = smelt_tensor_wrap(ctx, dt, ndim, shape, strides, device_ptr, out))) /* checks the strides */
        return st;
    smelt_tensor *t = *out;
    t->buf->dev = be; /* mem stays NULL: smelt_tensor_free leaves the memory alone */
    t->buf->dev_free = smelt__be_free;
    t->buf->dev_read = dev_read;
    return SMELT_OK;
}

int smelt_tensor_is_device(const smelt_tensor *t) { return smelt__is_device(t); }

/* dst and src: the same dtype and shape. */
static int check_like(const smelt_tensor *dst, const smelt_tensor *src, const char *fn)
{
    smelt_ctx *ctx = dst->ctx;
    if (dst->dtype != src->dtype)
        return smelt__err(ctx, SMELT_ERR_DTYPE, "%s: dtypes differ (%s and %s)", fn,
                          smelt__dtypes[dst->dtype].name, smelt__dtypes[src->dtype].name);
    if (dst->ndim != src->ndim ||
        memcmp(dst->shape, src->shape, sizeof(int64_t) * (size_t)dst->ndim)) {
        smelt__sb b;
        smelt__sb_init(&b);
        smelt__shape_str(&b, dst->ndim, dst->shape);
        smelt__sb_puts(&b, " and ");
        smelt__shape_str(&b, src->ndim, src->shape);
        int st = smelt__err(ctx, SMELT_ERR_SHAPE, "%s: shapes differ (%s)", fn, smelt__sb_str(&b));
        smelt__sb_free(&b);
        return st;
    }
    return SMELT_OK;
}

/* dst and src: one on the device (contiguous), the other on the host. */
static int check_pair(const smelt_tensor *dst, const smelt_tensor *src, bool to_device,
                      const char *fn)
{
    if (!dst || !src)
        return SMELT_ERR_INVALID_ARG;
    smelt_ctx *ctx = dst->ctx;
    const smelt_tensor *d = to_device ? dst : src, *h = to_device ? src : dst;
    if (!smelt__is_device(d) || smelt__is_device(h))
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "%s: %s must be a device tensor and %s a host tensor",
                          fn, to_device ? "dst" : "src", to_device ? "src" : "dst");
    int st = check_like(dst, src, fn);
    if (st)
        return st;
    if (!smelt_tensor_is_contiguous(d))
        return smelt__err(ctx, SMELT_ERR_UNSUPPORTED,
                          "%s: the device tensor is a non-contiguous view; copy it with a plan first",
                          fn);
    return SMELT_OK;
}

/* Element i (row-major index into the logical shape) of t: its offset in
 * elements from t->data. */
static int64_t elem_offset(const smelt_tensor *t, int64_t i)
{
    int64_t off = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        off += (i % t->shape[d]) * t->strides[d];
        i /= t->shape[d];
    }
    return off;
}

int smelt_tensor_copy_from_host(smelt_tensor *dst, const smelt_tensor *src)
{
    int st = check_pair(dst, src, true, "smelt_tensor_copy_from_host");
    if (st)
        return st;
    smelt_tensor *tmp = NULL;
    if (!smelt_tensor_is_contiguous(src) && (st = smelt_tensor_contiguous(src, &tmp)))
        return st;
    const smelt_tensor *h = tmp ? tmp : src;
    smelt__backend *be = dst->buf->dev;
    st = be->iface->copy(be, dst->data, h->data,
                         (size_t)smelt_tensor_numel(h) * smelt__dtypes[h->dtype].size, SMELT_COPY_H2D);
    smelt_tensor_free(tmp);
    return st;
}

int smelt_tensor_copy_to_host(smelt_tensor *dst, const smelt_tensor *src)
{
    int st = check_pair(dst, src, false, "smelt_tensor_copy_to_host");
    if (st)
        return st;
    size_t bytes = (size_t)smelt_tensor_numel(src) * smelt__dtypes[src->dtype].size;
    smelt__backend *be = src->buf->dev;
    if (smelt_tensor_is_contiguous(dst))
        return be->iface->copy(be, dst->data, src->data, bytes, SMELT_COPY_D2H);
    smelt_tensor *tmp; /* through a contiguous host copy, then scattered */
    if ((st = smelt_tensor_new(dst->ctx, dst->dtype, dst->ndim, dst->shape, &tmp)))
        return st;
    if (!(st = be->iface->copy(be, tmp->data, src->data, bytes, SMELT_COPY_D2H)))
        st = smelt_tensor_copy(dst, tmp);
    smelt_tensor_free(tmp);
    return st;
}

int smelt_tensor_copy(smelt_tensor *dst, const smelt_tensor *src)
{
    if (!dst || !src)
        return SMELT_ERR_INVALID_ARG;
    bool dd = smelt__is_device(dst), sd = smelt__is_device(src);
    if (dd != sd)
        return dd ? smelt_tensor_copy_from_host(dst, src) : smelt_tensor_copy_to_host(dst, src);
    const char *fn = "smelt_tensor_copy";
    int st = check_like(dst, src, fn);
    if (st)
        return st;
    size_t es = smelt__dtypes[src->dtype].size;
    int64_t n = smelt_tensor_numel(src);
    bool contig = smelt_tensor_is_contiguous(dst) && smelt_tensor_is_contiguous(src);
    if (dd) { /* device to device, on the device */
        smelt__backend *be = dst->buf->dev;
        if (src->buf->dev != be)
            return smelt__err(dst->ctx, SMELT_ERR_INVALID_ARG,
                              "%s: the device tensors belong to different contexts", fn);
        if (!contig)
            return smelt__err(dst->ctx, SMELT_ERR_UNSUPPORTED,
                              "%s: a device tensor is a non-contiguous view; copy it with a plan "
                              "first", fn);
        return be->iface->copy(be, dst->data, src->data, (size_t)n * es, SMELT_COPY_D2D);
    }
    if (contig) {
        memcpy(dst->data, src->data, (size_t)n * es);
        return SMELT_OK;
    }
    for (int64_t i = 0; i < n; i++)
        memcpy(dst->data + elem_offset(dst, i) * (int64_t)es,
               src->data + elem_offset(src, i) * (int64_t)es, es);
    return SMELT_OK;
}

/* ---- executor support -------------------------------------------------- */

static void free_copies(smelt_tensor *const *orig, smelt_tensor **copy, int n)
{
    for (int i = 0; copy && i < n; i++)
        if (copy[i] != orig[i])
            smelt_tensor_free(copy[i]);
    free(copy);
}

/* ts on be's device in *out: a device tensor is itself, a host one a new
 * device tensor, with its data when copy_in.  *out is NULL on failure, and
 * when every tensor is a device tensor (nothing allocated: ts serves). */
static int stage(smelt__backend *be, int n, smelt_tensor *const *ts, bool copy_in, smelt_tensor ***out)
{
    int host = 0;
    for (int i = 0; i < n; i++)
        host += !smelt__is_device(ts[i]);
    *out = NULL;
    if (!host)
        return SMELT_OK;
    smelt_tensor **d = calloc((size_t)n + 1, sizeof *d);
    int st = d ? SMELT_OK : smelt__err(be->ctx, SMELT_ERR_NOMEM, "out of memory");
    for (int i = 0; i < n && !st; i++) {
        smelt_tensor *t = ts[i];
        if (smelt__is_device(t))
            d[i] = t;
        else if (!(st = smelt__tensor_new_on(be->ctx, be, t->dtype, t->ndim, t->shape, &d[i])) && copy_in)
            st = smelt_tensor_copy_from_host(d[i], t);
    }
    if (st) { /* entries past the failure are NULL: freeing them is a no-op */
        free_copies(ts, d, n);
        d = NULL;
    }
    *out = d;
    return st;
}

int smelt__device_stage(smelt__backend *be, int n_in, smelt_tensor *const *inputs, int n_out,
                        smelt_tensor **outputs, smelt_tensor ***din, smelt_tensor ***dout)
{
    int st = stage(be, n_in, inputs, true, din);
    *dout = NULL; /* every element of an output is written: nothing to copy in */
    if (!st && (st = stage(be, n_out, outputs, false, dout))) {
        free_copies(inputs, *din, n_in);
        *din = NULL;
    }
    return st;
}

int smelt__device_unstage(smelt__backend *be, int n_in, smelt_tensor *const *inputs,
                          smelt_tensor **din, int n_out, smelt_tensor **outputs,
                          smelt_tensor **dout, int status)
{
    int sst = be->iface->sync(be); /* also before freeing what kernels may still use */
    int st = status ? status : sst;
    for (int i = 0; dout && i < n_out; i++)
        if (dout[i] != outputs[i] && !st)
            st = smelt_tensor_copy_to_host(outputs[i], dout[i]);
    free_copies(outputs, dout, n_out);
    free_copies(inputs, din, n_in);
    return st;
}
