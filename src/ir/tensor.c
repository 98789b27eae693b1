/* Host tensors: dtype, shape, element strides, a reference-counted buffer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

int64_t smelt__numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

void smelt__contig_strides(int ndim, const int64_t *shape, int64_t *strides)
{
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= shape[i] > 0 ? shape[i] : 1;
    }
}

void smelt__shape_str(smelt__sb *b, int ndim, const int64_t *shape)
{
    smelt__sb_puts(b, "(");
    for (int i = 0; i < ndim; i++)
        smelt__sb_printf(b, i ? ", %lld" : "%lld", (long long)shape[i]);
    smelt__sb_puts(b, ndim == 1 ? ",)" : ")");
}

const char *smelt__shape_fmt(char *buf, int ndim, const int64_t *shape)
{
    smelt__sb b;
    smelt__sb_init(&b);
    smelt__shape_str(&b, ndim, shape);
    snprintf(buf, SMELT_SHAPE_STR_MAX, "%s", smelt__sb_str(&b));
    smelt__sb_free(&b);
    return buf;
}

int smelt__broadcast_shapes(int na, const int64_t *a, int nb, const int64_t *b, int *nout,
                            int64_t *out)
{
    int n = SMELT_MAX(na, nb);
    int64_t tmp[SMELT_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        int ia = na - n + i, ib = nb - n + i;
        int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
        if (da == db || db == 1)
            tmp[i] = da;
        else if (da == 1)
            tmp[i] = db;
        else
            return SMELT_ERR_SHAPE;
    }
    memcpy(out, tmp, sizeof(int64_t) * (size_t)n);
    *nout = n;
    return SMELT_OK;
}

int smelt__shape_check(smelt_ctx *ctx, const char *what, int ndim, const int64_t *shape)
{
    if (ndim < 0 || ndim > SMELT_MAX_DIMS)
        return smelt__err(ctx, SMELT_ERR_SHAPE, "%s: rank %d is outside 0..%d", what, ndim, SMELT_MAX_DIMS);
    if (ndim > 0 && !shape)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "%s: shape is NULL for rank %d", what, ndim);
    const char *bad = NULL;
    int64_t n = 1; /* a zero dimension counts as 1: strides are products of the others */
    for (int i = 0; i < ndim && !bad; i++) {
        if (shape[i] < 0)
            bad = "has a negative dimension";
        else if (shape[i] > 1 && n > SMELT_MAX_ELEMS / shape[i])
            bad = "is too large (more than 2^59 elements, counting a zero dimension as 1)";
        else
            n *= shape[i] ? shape[i] : 1;
    }
    if (!bad)
        return SMELT_OK;
    char txt[SMELT_SHAPE_STR_MAX];
    return smelt__err(ctx, SMELT_ERR_SHAPE, "%s: shape %s %s", what, smelt__shape_fmt(txt, ndim, shape), bad);
}

static int check_shape(smelt_ctx *ctx, const char *what, smelt_dtype dt, int ndim, const int64_t *shape)
{
    if (!smelt__dtype_valid((int)dt))
        return smelt__err(ctx, SMELT_ERR_DTYPE, "%s: invalid dtype %d", what, (int)dt);
    return smelt__shape_check(ctx, what, ndim, shape);
}

/* A contiguous tensor at data, in a new buffer that owns mem (NULL: data
 * is wrapped, not owned); NULL when out of memory. */
static smelt_tensor *tensor_alloc(smelt_ctx *ctx, smelt_dtype dt, int ndim, const int64_t *shape, void *data,
                                  void *mem, size_t bytes)
{
    smelt_tensor *t = calloc(1, sizeof *t);
    smelt__buffer *b = calloc(1, sizeof *b);
    if (!t || !b) {
        free(t);
        free(b);
        return NULL;
    }
    b->refs = 1;
    b->mem = mem;
    b->bytes = bytes;
    t->buf = b;
    t->data = data;
    t->ctx = ctx;
    t->dtype = dt;
    t->ndim = ndim;
    if (ndim)
        memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    smelt__contig_strides(ndim, t->shape, t->strides);
    return t;
}

int smelt_tensor_new(smelt_ctx *ctx, smelt_dtype dt, int ndim, const int64_t *shape,
                     smelt_tensor **out)
{
    if (!out)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "smelt_tensor_new: out is NULL");
    *out = NULL;
    int st = check_shape(ctx, "tensor_new", dt, ndim, shape);
    if (st)
        return st;
    size_t bytes = (size_t)smelt__numel(ndim, shape) * smelt__dtypes[dt].size;
    void *mem = smelt__aligned_alloc(bytes);
    if (!mem || !(*out = tensor_alloc(ctx, dt, ndim, shape, mem, mem, bytes))) {
        free(mem);
        return smelt__err(ctx, SMELT_ERR_NOMEM, "cannot allocate %zu bytes for a tensor", bytes);
    }
    return SMELT_OK;
}

int smelt_tensor_wrap(smelt_ctx *ctx, smelt_dtype dt, int ndim, const int64_t *shape,
                      const int64_t *strides, void *data, smelt_tensor **out)
{
    if (!out)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "smelt_tensor_wrap: out is NULL");
    *out = NULL;
    int st = check_shape(ctx, "tensor_wrap", dt, ndim, shape);
    if (st)
        return st;
    if (!data && smelt__numel(ndim, shape) > 0)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "smelt_tensor_wrap: data is NULL");
    int64_t extent = 0; /* elements between the first and the farthest element */
    for (int i = 0; strides && i < ndim; i++) {
        int64_t a = strides[i] == INT64_MIN ? INT64_MAX : strides[i] < 0 ? -strides[i] : strides[i];
        if (shape[i] > 1 && a > (SMELT_MAX_ELEMS - extent) / (shape[i] - 1))
            return smelt__err(ctx, SMELT_ERR_SHAPE, "smelt_tensor_wrap: stride %lld of axis %d is too large "
                              "for its size %lld (offsets overflow)", (long long)strides[i], i, (long long)shape[i]);
        extent += shape[i] > 1 ? a * (shape[i] - 1) : 0;
    }
    if (!(*out = tensor_alloc(ctx, dt, ndim, shape, data, NULL, 0)))
        return smelt__err(ctx, SMELT_ERR_NOMEM, "out of memory");
    if (strides)
        memcpy((*out)->strides, strides, sizeof(int64_t) * (size_t)ndim);
    return SMELT_OK;
}

void smelt_tensor_free(smelt_tensor *t)
{
    if (!t)
        return;
    if (t->buf && --t->buf->refs == 0) {
        if (t->buf->dev) { /* device memory (src/runtime/tensor-device.c); NULL: wrapped, not owned */
            if (t->buf->mem)
                t->buf->dev_free(t->buf->dev, t->buf->mem);
        }
        else
            free(t->buf->mem);
        free(t->buf);
    }
    free(t);
}

smelt_dtype smelt_tensor_dtype(const smelt_tensor *t) { return t ? t->dtype : SMELT_F32; }
int smelt_tensor_ndim(const smelt_tensor *t) { return t ? t->ndim : 0; }
const int64_t *smelt_tensor_shape(const smelt_tensor *t) { return t ? t->shape : NULL; }
const int64_t *smelt_tensor_strides(const smelt_tensor *t) { return t ? t->strides : NULL; }
int64_t smelt_tensor_numel(const smelt_tensor *t) { return t ? smelt__numel(t->ndim, t->shape) : 0; }
void *smelt_tensor_data(const smelt_tensor *t) { return t ? t->data : NULL; }

int smelt_tensor_is_contiguous(const smelt_tensor *t)
{
    if (!t)
        return 0;
    int64_t s[SMELT_MAX_DIMS];
    smelt__contig_strides(t->ndim, t->shape, s);
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] > 1 && t->strides[i] != s[i])
            return 0;
    return 1;
}

static smelt_tensor *view_of(const smelt_tensor *t)
{
    smelt_tensor *v = malloc(sizeof *v);
    if (!v)
        return NULL;
    *v = *t;
    v->buf->refs++;
    return v;
}

int smelt_tensor_transpose(const smelt_tensor *t, const int *perm, smelt_tensor **out)
{
    if (out)
        *out = NULL;
    if (!t || !out || (!perm && t->ndim))
        return t ? smelt__err(t->ctx, SMELT_ERR_INVALID_ARG, "smelt_tensor_transpose: %s is NULL", !out ? "out" : "perm")
                 : SMELT_ERR_INVALID_ARG;
    bool seen[SMELT_MAX_DIMS] = {0};
    for (int i = 0; i < t->ndim; i++) {
        if (perm[i] < 0 || perm[i] >= t->ndim || seen[perm[i]])
            return smelt__err(t->ctx, SMELT_ERR_INVALID_ARG,
                              "transpose: perm is not a permutation of 0..%d", t->ndim - 1);
        seen[perm[i]] = true;
    }
    smelt_tensor *v = view_of(t);
    if (!v)
        return smelt__err(t->ctx, SMELT_ERR_NOMEM, "out of memory");
    for (int i = 0; i < t->ndim; i++) {
        v->shape[i] = t->shape[perm[i]];
        v->strides[i] = t->strides[perm[i]];
    }
    *out = v;
    return SMELT_OK;
}

int smelt_tensor_slice(const smelt_tensor *t, int dim, int64_t start, int64_t stop, int64_t step,
                       smelt_tensor **out)
{
    if (!t || !out)
        return t ? smelt__err(t->ctx, SMELT_ERR_INVALID_ARG, "smelt_tensor_slice: out is NULL") : SMELT_ERR_INVALID_ARG;
    *out = NULL;
    if (dim < 0 || dim >= t->ndim)
        return smelt__err(t->ctx, SMELT_ERR_INVALID_ARG, "slice: axis %d out of range for rank %d",
                          dim, t->ndim);
    if (step <= 0)
        return smelt__err(t->ctx, SMELT_ERR_INVALID_ARG, "slice: step must be positive");
    int64_t n = t->shape[dim];
    if (start < 0)
        start += n;
    if (stop < 0)
        stop += n;
    if (start < 0 || stop > n || start > stop)
        return smelt__err(t->ctx, SMELT_ERR_INVALID_ARG,
                          "slice: [%lld, %lld) is outside axis %d of size %lld", (long long)start,
                          (long long)stop, dim, (long long)n);
    smelt_tensor *v = view_of(t);
    if (!v)
        return smelt__err(t->ctx, SMELT_ERR_NOMEM, "out of memory");
    v->data = t->data + start * t->strides[dim] * (int64_t)smelt__dtypes[t->dtype].size;
    v->shape[dim] = stop == start ? 0 : (stop - start - 1) / step + 1; /* no overflow */
    if (v->shape[dim] > 1) /* step < n: the product stays within the tensor's extent */
        v->strides[dim] = t->strides[dim] * step;
    *out = v;
    return SMELT_OK;
}

int smelt_tensor_broadcast_to(const smelt_tensor *t, int ndim, const int64_t *shape,
                              smelt_tensor **out)
{
    if (!t || !out || (!shape && ndim))
        return t ? smelt__err(t->ctx, SMELT_ERR_INVALID_ARG, "smelt_tensor_broadcast_to: %s is NULL",
                              !out ? "out" : "shape")
                 : SMELT_ERR_INVALID_ARG;
    *out = NULL;
    int st = check_shape(t->ctx, "broadcast_to", t->dtype, ndim, shape);
    if (st)
        return st;
    if (ndim < t->ndim)
        return smelt__err(t->ctx, SMELT_ERR_SHAPE, "broadcast_to: cannot reduce rank %d to %d",
                          t->ndim, ndim);
    smelt_tensor *v = view_of(t);
    if (!v)
        return smelt__err(t->ctx, SMELT_ERR_NOMEM, "out of memory");
    v->ndim = ndim;
    for (int i = 0; i < ndim; i++) {
        int j = i - (ndim - t->ndim);
        int64_t d = j >= 0 ? t->shape[j] : 1;
        if (d != shape[i] && d != 1) {
            smelt_tensor_free(v);
            char from[SMELT_SHAPE_STR_MAX], to[SMELT_SHAPE_STR_MAX];
            return smelt__err(t->ctx, SMELT_ERR_SHAPE, "broadcast_to: cannot broadcast %s to %s",
                              smelt__shape_fmt(from, t->ndim, t->shape), smelt__shape_fmt(to, ndim, shape));
        }
        v->shape[i] = shape[i];
        v->strides[i] = (j >= 0 && d == shape[i]) ? t->strides[j] : 0;
    }
    *out = v;
    return SMELT_OK;
}

/* Offset (elements) of row-major logical index i. */
static int64_t offset_of(const smelt_tensor *t, int64_t i)
{
    int64_t off = 0;
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t n = t->shape[d];
        off += (i % n) * t->strides[d];
        i /= n;
    }
    return off;
}

double smelt__elem_load(smelt_dtype dt, const char *p)
{
    switch (dt) {
    case SMELT_F32: return *(const float *)p;
    case SMELT_F64: return *(const double *)p;
    case SMELT_I32: return *(const int32_t *)p;
    case SMELT_I64: return (double)*(const int64_t *)p;
    case SMELT_U8: return *(const uint8_t *)p;
    case SMELT_BOOL: return *(const uint8_t *)p != 0;
    case SMELT_F16: return smelt__f16_to_double(*(const uint16_t *)p);
    case SMELT_BF16: return smelt__bf16_to_double(*(const uint16_t *)p);
    default: return 0;
    }
}

void smelt__elem_store(smelt_dtype dt, char *p, double v)
{
    switch (dt) {
    case SMELT_F32: *(float *)p = (float)v; break;
    case SMELT_F64: *(double *)p = v; break;
    case SMELT_I32: *(int32_t *)p = (int32_t)v; break;
    case SMELT_I64: *(int64_t *)p = (int64_t)v; break;
    case SMELT_U8: *(uint8_t *)p = (uint8_t)v; break;
    case SMELT_BOOL: *(uint8_t *)p = v != 0; break;
    case SMELT_F16: *(uint16_t *)p = smelt__f16_from_double(v); break;
    case SMELT_BF16: *(uint16_t *)p = smelt__bf16_from_double(v); break;
    default: break;
    }
}

double smelt_tensor_get(const smelt_tensor *t, int64_t i)
{
    if (!t || i < 0 || i >= smelt_tensor_numel(t))
        return 0;
    size_t es = smelt__dtypes[t->dtype].size;
    const char *p = t->data + offset_of(t, i) * (int64_t)es;
    _Alignas(8) char elem[8];
    if (smelt__is_device(t)) { /* one element copied from device memory */
        if (t->buf->dev_read(t->buf->dev, elem, p, es))
            return 0;
        p = elem;
    }
    return smelt__elem_load(t->dtype, p);
}

/* The bytes [*lo, *hi) that t's elements lie in; false when it has none. */
static bool extent(const smelt_tensor *t, const char **lo, const char **hi)
{
    int64_t min = 0, max = 0;
    for (int d = 0; d < t->ndim; d++) {
        if (t->shape[d] == 0)
            return false;
        int64_t span = t->strides[d] * (t->shape[d] - 1);
        if (span < 0)
            min += span;
        else
            max += span;
    }
    int64_t es = (int64_t)smelt__dtypes[t->dtype].size;
    *lo = t->data + min * es;
    *hi = t->data + (max + 1) * es;
    return true;
}

bool smelt__tensors_overlap(const smelt_tensor *a, const smelt_tensor *b)
{
    const char *alo, *ahi, *blo, *bhi;
    if (!extent(a, &alo, &ahi) || !extent(b, &blo, &bhi))
        return false;
    /* compared as integers: the two may come from different allocations */
    return (uintptr_t)alo < (uintptr_t)bhi && (uintptr_t)blo < (uintptr_t)ahi;
}

void smelt__tensor_copy_into(smelt_tensor *dst, const smelt_tensor *src)
{
    size_t es = smelt__dtypes[src->dtype].size;
    int64_t n = smelt_tensor_numel(src);
    if (smelt_tensor_is_contiguous(dst) && smelt_tensor_is_contiguous(src)) {
        memmove(dst->data, src->data, (size_t)n * es);
        return;
    }
    for (int64_t i = 0; i < n; i++)
        memcpy(dst->data + offset_of(dst, i) * (int64_t)es, src->data + offset_of(src, i) * (int64_t)es, es);
}

int smelt_tensor_contiguous(const smelt_tensor *t, smelt_tensor **out)
{
    if (!t || !out)
        return t ? smelt__err(t->ctx, SMELT_ERR_INVALID_ARG, "smelt_tensor_contiguous: out is NULL")
                 : SMELT_ERR_INVALID_ARG;
    if (smelt__is_device(t))
        return smelt__err(t->ctx, SMELT_ERR_UNSUPPORTED,
                          "smelt_tensor_contiguous: a device tensor (use smelt_tensor_copy_to_host)");
    int st = smelt_tensor_new(t->ctx, t->dtype, t->ndim, t->shape, out);
    if (!st)
        smelt__tensor_copy_into(*out, t);
    return st;
}

double smelt_elem_load(smelt_dtype dt, const void *p)
{
    return p && smelt__dtype_valid((int)dt) ? smelt__elem_load(dt, p) : 0;
}

void smelt_elem_store(smelt_dtype dt, void *p, double v)
{
    if (p && smelt__dtype_valid((int)dt))
        smelt__elem_store(dt, p, smelt__dtype_round(dt, v));
}
