/* Lowering a graph to a program: a flat, topologically ordered array of
 * instructions that the passes, the partitioner and the executor share. */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

static int prog_push(smelt__prog *p, const smelt__inst *in)
{
    smelt__inst *v = smelt__grow(p->v, p->n, &p->cap, sizeof *v, 64);
    if (!v)
        return -1;
    p->v = v;
    p->v[p->n] = *in;
    return p->n++;
}

void smelt__prog_free(smelt__prog *p)
{
    free(p->v);
    free(p->outputs);
    free(p->in_dtypes);
    free(p->in_ndim);
    free(p->in_shape);
    for (int i = 0; i < p->nblobs; i++)
        smelt__blob_release(p->blobs[i]);
    free(p->out_base);
    free(p->blobs);
    memset(p, 0, sizeof *p);
}

int smelt__prog_from_graph(smelt_graph *g, int n_out, smelt_node *const *outs, smelt__prog *p,
                           smelt__sb *err)
{
    memset(p, 0, sizeof *p);
    p->nout = n_out;
    p->ninputs = g->nin;
    p->outputs = calloc((size_t)(n_out ? n_out : 1), sizeof *p->outputs);
    p->in_dtypes = calloc((size_t)(g->nin ? g->nin : 1), sizeof *p->in_dtypes);
    p->in_ndim = calloc((size_t)(g->nin ? g->nin : 1), sizeof *p->in_ndim);
    p->in_shape = calloc((size_t)(g->nin ? g->nin : 1), sizeof *p->in_shape);
    if (!p->outputs || !p->in_dtypes || !p->in_ndim || !p->in_shape)
        goto oom;
    for (int i = 0; i < g->nin; i++) {
        p->in_dtypes[i] = g->inputs[i]->dtype;
        p->in_ndim[i] = g->inputs[i]->ndim;
        memcpy(p->in_shape[i], g->inputs[i]->shape, sizeof p->in_shape[i]);
    }
    for (int k = 0; k < g->n; k++) {
        smelt_node *n = g->nodes[k];
        smelt__inst in = {.op = n->op, .dtype = n->dtype, .ndim = n->ndim, .nin = n->nin, .fval = n->fval,
                          .ival = n->ival, .input_index = n->input_index, .axes = n->axes,
                          .keepdims = n->keepdims};
        memcpy(in.shape, n->shape, sizeof in.shape);
        memcpy(in.vp, n->vp, sizeof in.vp);
        for (int j = 0; j < n->nin; j++)
            in.in[j] = n->in[j]->id; /* node ids equal instruction indices */
        if (n->op == SMELT_OP_TENSOR) {
            smelt__blob **b = realloc(p->blobs, sizeof *b * (size_t)(p->nblobs + 1));
            if (!b)
                goto oom;
            p->blobs = b;
            __atomic_add_fetch(&n->blob->refs, 1, __ATOMIC_RELAXED);
            in.ival = p->nblobs;
            p->blobs[p->nblobs++] = n->blob;
        }
        if (prog_push(p, &in) < 0)
            goto oom;
    }
    for (int i = 0; i < n_out; i++)
        p->outputs[i] = outs[i]->id;
    return SMELT_OK;
oom:
    smelt__prog_free(p);
    smelt__sb_puts(err, "out of memory");
    return SMELT_ERR_NOMEM;
}

void smelt__prog_uses(smelt__prog *p)
{
    for (int i = 0; i < p->n; i++) {
        p->v[i].uses = 0;
        p->v[i].is_output = false;
    }
    for (int i = 0; i < p->n; i++)
        for (int j = 0; j < p->v[i].nin; j++)
            p->v[p->v[i].in[j]].uses++;
    for (int i = 0; i < p->nout; i++) {
        p->v[p->outputs[i]].uses++;
        p->v[p->outputs[i]].is_output = true;
    }
}

/* The strides (elements) and offset of value v read as a view over
 * contiguous values, at the graph's shapes: v's own for a value that is not
 * a view.  false when a reshape on the way cannot be had by strides. */
bool smelt__view_chain(const smelt__prog *p, int v, int64_t *off, int64_t *st)
{
    const smelt__inst *x = &p->v[v];
    if (!smelt__is_view(x->op)) {
        *off = 0;
        smelt__contig_strides(x->ndim, x->shape, st);
        return true;
    }
    int64_t ist[SMELT_MAX_DIMS];
    const smelt__inst *a = &p->v[x->in[0]];
    return smelt__view_chain(p, x->in[0], off, ist) &&
           smelt__view_strides(x->op, x->vp, x->ndim, x->shape, a->ndim, a->shape, ist, off, st);
}

static smelt__inst copy_of(const smelt__prog *p, int v)
{
    smelt__inst c = {.op = SMELT_OP_COPY, .dtype = p->v[v].dtype, .ndim = p->v[v].ndim, .nin = 1, .in = {v},
                     .input_index = -1};
    memcpy(c.shape, p->v[v].shape, sizeof c.shape);
    return c;
}

/* Every output must be computed by its own non-source instruction so that a
 * kernel writes it: inputs, constants, views and repeated outputs get a
 * copy.  A reshape that strides cannot express reads a copy of its operand
 * (laid out contiguously). */
/* The value whose kernel can write output v through v's views, in place
 * in the output's memory (their inverse: a transpose back, a reshape back,
 * which strides express on a contiguous output whatever the sizes: from
 * the output down, reshapes before transposes, after them only reshapes of
 * size-1 axes): v itself when v is not a view; -1 when the views are others
 * (slices, broadcasts, reshapes after transposes) or a value on the way is
 * read elsewhere too.  chain marks the views on the way. */
static int alias_base(const smelt__prog *p, int v, bool *chain)
{
    int x = v;
    if (!smelt__is_view(p->v[v].op))
        return v;
    if (p->v[v].uses != 1)
        return -1;
    bool permuted = false; /* (the inverse so far; a reshape back of a transposed value needs strides it may lack) */
    while (smelt__is_view(p->v[x].op)) {
        const smelt__inst *y = &p->v[x];
        int u = y->in[0];
        bool ones = true; /* a reshape that only adds or drops axes of size 1 (strides always express it) */
        for (int d = 0; d < y->ndim && y->op == SMELT_OP_RESHAPE; d++)
            ones = ones && (y->vp[d] <= -2 || y->vp[d] == 1);
        if ((y->op != SMELT_OP_PERMUTE && y->op != SMELT_OP_RESHAPE) || (y->op == SMELT_OP_RESHAPE && permuted && !ones) ||
            p->v[u].uses != 1 || p->v[u].is_output)
            return -1;
        permuted = permuted || y->op == SMELT_OP_PERMUTE;
        x = u;
    }
    int cls = smelt__ops[p->v[x].op].cls;
    if (cls == SMELT_CLASS_SOURCE || p->v[x].op == SMELT_OP_CONST)
        return -1;
    for (int y = v; y != x; y = p->v[y].in[0])
        chain[y] = true;
    return x;
}

/* Whether reshape x of a (graph shapes) only adds or drops axes of size 1:
 * it then maps a concat's or a pad's pieces axis to axis. */
bool smelt__reshape_ones(int xn, const int64_t *xs, int an, const int64_t *as)
{
    int i = 0, j = 0;
    for (;;) {
        while (i < xn && xs[i] == 1)
            i++;
        while (j < an && as[j] == 1)
            j++;
        if (i == xn || j == an)
            return i == xn && j == an;
        if (xs[i++] != as[j++])
            return false;
    }
}

/* An indexed read x (take, take_along_axis: in[0] the array, in[1] the
 * indices, vp[0] the axis) becomes one a kernel reads elementwise: in[0]
 * a view of the array's first element along the axis (slice 0:1, then,
 * for take, that axis replaced by as many axes of size 1 as the indices
 * have), in[1] the indices viewed at the result's rank (their axes where
 * the result has them); both then broadcast to x's shape, and a kernel
 * adds index x stride along the axis to the first one's address (the
 * executor's gather slots, src/runtime/exec.c).  Views both, always: a
 * kernel reads each from memory, never a value it computes itself.
 * ival keeps the array's instruction (the axis's size and stride at run
 * time).  An array read in pieces (a concat, a pad) is copied first. */
static bool lower_gather(smelt__prog *q, smelt__inst *x)
{
    int64_t off, cst[SMELT_MAX_DIMS];
    if (smelt__has_pieces(q, x->in[0]) || !smelt__view_chain(q, x->in[0], &off, cst)) {
        /* a concat's or a pad's pieces, a reshape strides cannot express: the array is read from a copy
         * (an index goes anywhere along the axis) */
        smelt__inst c = copy_of(q, x->in[0]);
        if ((x->in[0] = prog_push(q, &c)) < 0)
            return false;
    }
    smelt__inst a0 = q->v[x->in[0]];
    const smelt__inst *a = &a0, *ix = &q->v[x->in[1]]; /* (a: a copy; q->v moves as it grows) */
    int axis = (int)x->vp[0], k = x->op == SMELT_OP_TAKE ? ix->ndim : 1;
    smelt__inst s = {.op = SMELT_OP_SLICE, .dtype = a->dtype, .ndim = a->ndim, .nin = 1, .in = {x->in[0]},
                     .input_index = -1, .vp = {axis, 0, 1, 1}};
    memcpy(s.shape, a->shape, sizeof s.shape);
    s.shape[axis] = 1;
    x->ival = x->in[0];
    int v = prog_push(q, &s);
    if (v < 0)
        return false;
    if (k != 1) { /* take: the axis becomes the indices' axes, each of size 1 */
        smelt__inst r = s;
        r.op = SMELT_OP_RESHAPE, r.in[0] = v, r.ndim = 0;
        for (int d = 0; d < a->ndim; d++)
            for (int t = 0; t < (d == axis ? k : 1); t++)
                r.shape[r.ndim++] = d == axis ? 1 : a->shape[d];
        for (int d = 0; d < r.ndim; d++)
            r.vp[d] = r.shape[d];
        if ((v = prog_push(q, &r)) < 0)
            return false;
    }
    x->in[0] = v;
    ix = &q->v[x->in[1]]; /* (again: the pushes above may have moved q->v) */
    smelt__inst r = {.op = SMELT_OP_RESHAPE, .dtype = ix->dtype, .nin = 1, .in = {x->in[1]}, .input_index = -1};
    for (int d = 0; d < ix->ndim; d++)
        r.shape[r.ndim++] = ix->shape[d];
    for (int d = axis + 1; x->op == SMELT_OP_TAKE && d < a->ndim; d++)
        r.shape[r.ndim++] = 1;
    for (int d = 0; d < r.ndim; d++)
        r.vp[d] = r.shape[d];
    if ((v = prog_push(q, &r)) < 0)
        return false;
    x->in[1] = v;
    return true;
}

int smelt__prog_finalize(smelt__prog *p)
{
    int *remap = malloc(sizeof(int) * (size_t)(p->n + 1));
    bool *chain = calloc((size_t)p->n + 1, sizeof *chain);
    free(p->out_base);
    p->out_base = malloc(sizeof(int) * (size_t)(p->nout + 1));
    smelt__prog q = *p;
    q.v = NULL, q.n = q.cap = 0;
    bool ok = remap && chain && p->out_base;
    smelt__prog_uses(p);
    for (int i = 0; ok && i < p->nout; i++) { /* outputs written through their views */
        bool dup = false;
        for (int j = 0; j < i; j++)
            dup = dup || p->outputs[j] == p->outputs[i];
        int b = dup ? -1 : alias_base(p, p->outputs[i], chain);
        p->out_base[i] = b;
    }
    for (int i = 0; ok && i < p->n; i++) {
        smelt__inst x = p->v[i];
        for (int j = 0; j < x.nin; j++)
            x.in[j] = remap[x.in[j]];
        int64_t off, st[SMELT_MAX_DIMS], vst[SMELT_MAX_DIMS];
        const smelt__inst *a = x.nin ? &q.v[x.in[0]] : NULL;
        if (x.op == SMELT_OP_RESHAPE && !chain[i] && /* (an output's: read backwards, from the output) */
            (smelt__has_pieces(&q, x.in[0])
                 ? !smelt__reshape_ones(x.ndim, x.shape, a->ndim, a->shape)
                 : !smelt__view_chain(&q, x.in[0], &off, st) ||
                       !smelt__view_strides(x.op, x.vp, x.ndim, x.shape, a->ndim, a->shape, st, &off, vst))) {
            smelt__inst c = copy_of(&q, x.in[0]);
            ok = (x.in[0] = prog_push(&q, &c)) >= 0;
        }
        if (smelt__ops[x.op].cls == SMELT_CLASS_GATHER && ok)
            ok = lower_gather(&q, &x);
        int cls = smelt__ops[x.op].cls;
        for (int j = 0; ok && j < x.nin && (cls == SMELT_CLASS_REDUCE || cls == SMELT_CLASS_LIBRARY); j++)
            if (smelt__has_pieces(&q, x.in[j]) && /* (BLAS reads no pieces; a reduction's kernel runs
                                                   * once per piece along its kept axes) */
                (cls == SMELT_CLASS_LIBRARY || (smelt__pieces_axes(&q, x.in[j]) & x.axes))) {
                smelt__inst c = copy_of(&q, x.in[j]);
                ok = (x.in[j] = prog_push(&q, &c)) >= 0;
            }
        ok = ok && (remap[i] = prog_push(&q, &x)) >= 0;
    }
    for (int i = 0; ok && i < p->nout; i++) {
        p->outputs[i] = remap[p->outputs[i]];
        p->out_base[i] = p->out_base[i] >= 0 ? remap[p->out_base[i]] : -1;
    }
    free(remap);
    free(chain);
    free(p->v);
    p->v = q.v, p->n = q.n, p->cap = q.cap;
    if (!ok)
        return SMELT_ERR_NOMEM;
    for (int i = 0; i < p->nout; i++) {
        int v = p->outputs[i];
        int cls = smelt__ops[p->v[v].op].cls;
        if (p->out_base[i] >= 0 && cls != SMELT_CLASS_SOURCE) {
            continue;
        }
        smelt__inst c = copy_of(p, v);
        int k = prog_push(p, &c);
        if (k < 0)
            return SMELT_ERR_NOMEM;
        p->outputs[i] = p->out_base[i] = k;
    }
    smelt__prog_uses(p);
    return SMELT_OK;
}
