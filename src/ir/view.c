/* Views (class VIEW): the shape a layout operator gives its operand, and
 * the strides that read the operand's elements in that shape.  The graph
 * builder, the reference interpreter and the executor all use these two
 * functions, so a view means one thing everywhere. */
#include <string.h>

#include "ir.h"

int smelt__matmul_shape(int na, const int64_t *a, int nb, const int64_t *b, int *nout, int64_t *out, smelt__sb *why)
{
    char x[SMELT_SHAPE_STR_MAX], y[SMELT_SHAPE_STR_MAX];
    if (a[na - 1] != b[nb - 2]) {
        smelt__sb_printf(why, "%s @ %s: the inner dimensions differ (%lld and %lld)", smelt__shape_fmt(x, na, a),
                         smelt__shape_fmt(y, nb, b), (long long)a[na - 1], (long long)b[nb - 2]);
        return SMELT_ERR_SHAPE;
    }
    int nd;
    if (smelt__broadcast_shapes(na - 2, a, nb - 2, b, &nd, out)) {
        smelt__sb_printf(why, "%s @ %s: the batch dimensions are not broadcastable", smelt__shape_fmt(x, na, a),
                         smelt__shape_fmt(y, nb, b));
        return SMELT_ERR_SHAPE;
    }
    out[nd] = a[na - 2];
    out[nd + 1] = b[nb - 1];
    *nout = nd + 2;
    return SMELT_OK;
}

void smelt__slice_range(int64_t n, int64_t start, int64_t stop, int64_t step, int64_t *first, int64_t *count)
{
    bool back = step < 0;
    if (start == SMELT_NONE)
        start = back ? n - 1 : 0;
    else if (start < 0)
        start = start + n < 0 ? (back ? -1 : 0) : start + n;
    else if (start >= n)
        start = back ? n - 1 : n;
    if (stop == SMELT_NONE)
        stop = back ? -1 : n;
    else if (stop < 0)
        stop = stop + n < 0 ? (back ? -1 : 0) : stop + n;
    else if (stop >= n)
        stop = back ? n - 1 : n;
    *first = start;
    if (back)
        *count = stop < start ? (start - stop - 1) / -step + 1 : 0;
    else
        *count = start < stop ? (stop - start - 1) / step + 1 : 0;
}

int smelt__view_shape(smelt_op op, int rank, const int64_t *vp, const int64_t *gshape, int ndim, const int64_t *in,
                      int *ondim, int64_t *out, smelt__sb *why)
{
    char a[SMELT_SHAPE_STR_MAX], b[SMELT_SHAPE_STR_MAX];
    *ondim = rank;
    switch (op) {
    case SMELT_OP_BROADCAST: {
        int nd;
        bool ok = rank >= ndim && !smelt__broadcast_shapes(ndim, in, rank, gshape, &nd, out);
        for (int d = 0; ok && d < rank; d++)
            ok = out[d] == gshape[d];
        if (!ok) {
            smelt__sb_printf(why, "cannot broadcast %s to %s", smelt__shape_fmt(a, ndim, in),
                             smelt__shape_fmt(b, rank, gshape));
            return SMELT_ERR_SHAPE;
        }
        return SMELT_OK;
    }
    case SMELT_OP_PERMUTE:
        for (int d = 0; d < rank; d++)
            out[d] = in[vp[d]];
        return SMELT_OK;
    case SMELT_OP_SLICE: {
        int64_t first;
        memcpy(out, in, sizeof(int64_t) * (size_t)ndim);
        smelt__slice_range(in[vp[0]], vp[1], vp[2], vp[3], &first, &out[vp[0]]);
        return SMELT_OK;
    }
    case SMELT_OP_PAD:
        memcpy(out, in, sizeof(int64_t) * (size_t)ndim);
        out[vp[0]] += vp[1] + vp[2];
        return SMELT_OK;
    case SMELT_OP_RESHAPE: {
        int64_t known = 1, total = smelt__numel(ndim, in);
        int infer = -1;
        for (int d = 0; d < rank; d++) {
            out[d] = vp[d] <= -2 ? in[-2 - vp[d]] : vp[d];
            if (vp[d] == -1) {
                infer = d;
            } else if (out[d] > 1 && known > SMELT_MAX_ELEMS / out[d]) { /* (the product would overflow) */
                smelt__sb_printf(why, "cannot reshape %s (%lld elements) into a shape of more than 2^59 elements",
                                 smelt__shape_fmt(a, ndim, in), (long long)total);
                return SMELT_ERR_SHAPE;
            } else {
                known *= out[d];
            }
        }
        if (infer >= 0)
            out[infer] = known ? total / known : -1;
        if (infer >= 0 && (known == 0 || total % known)) {
            smelt__sb_printf(why, "cannot reshape %s into a shape of %lld elements and one inferred dimension",
                             smelt__shape_fmt(a, ndim, in), (long long)known);
            return SMELT_ERR_SHAPE;
        }
        if (smelt__numel(rank, out) != total) {
            smelt__sb_printf(why, "cannot reshape %s (%lld elements) into %s", smelt__shape_fmt(a, ndim, in),
                             (long long)total, smelt__shape_fmt(b, rank, out));
            return SMELT_ERR_SHAPE;
        }
        return SMELT_OK;
    }
    default:
        smelt__sb_printf(why, "%s is not a view", smelt__ops[op].name);
        return SMELT_ERR_INVALID_ARG;
    }
}

int smelt__concat_shape(int axis, int na, const int64_t *a, int nb, const int64_t *b, int64_t *out, smelt__sb *why)
{
    char x[SMELT_SHAPE_STR_MAX], y[SMELT_SHAPE_STR_MAX];
    bool ok = na == nb && axis >= 0 && axis < na;
    for (int d = 0; ok && d < na; d++)
        ok = d == axis || a[d] == b[d];
    if (!ok) {
        smelt__sb_printf(why, "cannot concatenate %s and %s along axis %d (the same rank, and every other "
                         "dimension equal)", smelt__shape_fmt(x, na, a), smelt__shape_fmt(y, nb, b), axis);
        return SMELT_ERR_SHAPE;
    }
    memcpy(out, a, sizeof(int64_t) * (size_t)na);
    out[axis] += b[axis];
    return SMELT_OK;
}

int smelt__view_bases(const smelt__prog *p, int v, int *out)
{
    int stack[SMELT_MAX_PARTS + 2], sp = 0, n = 0; /* (the builder keeps the parts within it) */
    stack[sp++] = v;
    while (sp) {
        int x = stack[--sp];
        while (smelt__is_view(p->v[x].op) && p->v[x].op != SMELT_OP_CONCAT)
            x = p->v[x].in[0];
        if (p->v[x].op == SMELT_OP_CONCAT && sp + 2 <= SMELT_MAX_PARTS + 2) {
            stack[sp++] = p->v[x].in[1];
            stack[sp++] = p->v[x].in[0];
            continue;
        }
        bool seen = false;
        for (int k = 0; k < n; k++)
            seen = seen || out[k] == x;
        if (!seen && n < SMELT_MAX_PARTS)
            out[n++] = x;
    }
    return n;
}

bool smelt__has_pieces(const smelt__prog *p, int v)
{
    for (; smelt__is_view(p->v[v].op); v = p->v[v].in[0])
        if (smelt__is_piece(p->v[v].op))
            return true;
    return false;
}

unsigned smelt__pieces_axes(const smelt__prog *p, int v)
{
    const smelt__inst *x = &p->v[v];
    if (!smelt__has_pieces(p, v))
        return 0;
    const smelt__inst *a = &p->v[x->in[0]];
    unsigned m = smelt__pieces_axes(p, x->in[0]), r = 0;
    switch (x->op) {
    case SMELT_OP_CONCAT:
        return m | smelt__pieces_axes(p, x->in[1]) | 1u << x->vp[0];
    case SMELT_OP_PAD:
        return m | 1u << x->vp[0];
    case SMELT_OP_SLICE:
        return m;
    case SMELT_OP_PERMUTE: /* (axis d is the operand's axis vp[d]) */
        for (int d = 0; d < x->ndim; d++)
            r |= (m >> x->vp[d] & 1u) << d;
        return r;
    case SMELT_OP_BROADCAST: /* (right-aligned; a new or size-1 axis has no cut) */
        for (int d = 0; d < x->ndim; d++) {
            int from = d - (x->ndim - a->ndim);
            if (from >= 0 && a->shape[from] == x->shape[d])
                r |= (m >> from & 1u) << d;
        }
        return r;
    case SMELT_OP_RESHAPE: /* (of size-1 axes only: the others in order) */
        for (int d = 0, from = 0; d < x->ndim; d++)
            if (x->shape[d] != 1) {
                while (from < a->ndim && a->shape[from] == 1)
                    from++;
                if (from < a->ndim)
                    r |= (m >> from++ & 1u) << d;
            }
        return r;
    default:
        return ~0u;
    }
}

/* NumPy's _attempt_nocopy_reshape: the new dimensions taken in groups whose
 * product equals a group of old ones, each old group walked with one
 * stride (contiguous within itself). */
static bool reshape_strides(int r, const int64_t *out, int ndim, const int64_t *in, const int64_t *st, int64_t *ost)
{
    int64_t od[SMELT_MAX_DIMS], os[SMELT_MAX_DIMS];
    int on = 0;
    if (smelt__numel(ndim, in) == 0) { /* no element: any strides */
        for (int d = 0; d < r; d++)
            ost[d] = 0;
        return true;
    }
    for (int d = 0; d < ndim; d++)
        if (in[d] != 1)
            od[on] = in[d], os[on++] = st[d];
    int oi = 0, oj = 1, ni = 0, nj = 1;
    while (ni < r && oi < on) {
        int64_t np = out[ni], opr = od[oi];
        while (np != opr) {
            if (np < opr)
                np *= out[nj++];
            else
                opr *= od[oj++];
        }
        for (int k = oi; k < oj - 1; k++)
            if (os[k] != od[k + 1] * os[k + 1])
                return false;
        ost[nj - 1] = os[oj - 1];
        for (int k = nj - 1; k > ni; k--)
            ost[k - 1] = ost[k] * out[k];
        ni = nj++;
        oi = oj++;
    }
    for (int d = ni; d < r; d++) /* trailing dimensions of size 1 */
        ost[d] = 0;
    for (int d = 0; d < r; d++)
        if (out[d] == 1)
            ost[d] = 0;
    return true;
}

bool smelt__view_strides(smelt_op op, const int64_t *vp, int r, const int64_t *out, int ndim, const int64_t *in,
                         const int64_t *st, int64_t *off, int64_t *ost)
{
    switch (op) {
    case SMELT_OP_BROADCAST:
        for (int d = 0; d < r; d++) {
            int xd = d - (r - ndim);
            ost[d] = xd < 0 || in[xd] == 1 ? 0 : st[xd];
        }
        return true;
    case SMELT_OP_PERMUTE:
        for (int d = 0; d < r; d++)
            ost[d] = st[vp[d]];
        return true;
    case SMELT_OP_SLICE: {
        int64_t first, count;
        memcpy(ost, st, sizeof(int64_t) * (size_t)ndim);
        smelt__slice_range(in[vp[0]], vp[1], vp[2], vp[3], &first, &count);
        if (count > 0)
            *off += first * st[vp[0]];
        ost[vp[0]] = st[vp[0]] * vp[3];
        return true;
    }
    case SMELT_OP_RESHAPE:
        return reshape_strides(r, out, ndim, in, st, ost);
    default:
        return false;
    }
}
