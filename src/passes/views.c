/* Layout folding: a view of a value computed elementwise becomes the same
 * computation over views of its operands,
 *
 *   transpose(exp(x) + b)  ->  exp(transpose(x)) + transpose(broadcast_to(b))
 *
 * so the kernel that reads the view computes it from the operands where
 * they lie, and nothing is written in between.  Only where the value is
 * read by the view alone (it is not computed twice) and is not an output,
 * and where the view would not stop on a value computed elementwise for
 * this one alone (it would then be written out for the view: strands());
 * an operand of another shape is broadcast to the value's first (a
 * broadcast view), a constant stays a scalar.  A reshape moves only where
 * every operand has the value's shape and strides can express the reshape
 * of each (a broadcast operand or a transposed one would need a copy,
 * where the value's own buffer is contiguous).  The moved view goes on
 * down through operands computed the same way.  Element values do not
 * change: each is computed from the same operands by the same operator. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

typedef struct vstate {
    smelt__prog q; /* the program being built */
    int *uses;     /* per instruction of q: its readers (outputs count) */
    int cap;
    int moved;
    bool oom;
} vstate;

static int put(vstate *s, const smelt__inst *x, int uses)
{
    if (s->oom)
        return 0;
    smelt__inst *v = smelt__grow(s->q.v, s->q.n, &s->q.cap, sizeof *v, 64);
    int *u = smelt__grow(s->uses, s->q.n, &s->cap, sizeof *u, 64);
    if (u)
        s->uses = u;
    if (v)
        s->q.v = v;
    if (!v || !u) {
        s->oom = true;
        return 0;
    }
    s->q.v[s->q.n] = *x;
    s->uses[s->q.n] = uses;
    return s->q.n++;
}

static bool same_shape(const smelt__inst *a, const smelt__inst *b)
{
    return a->ndim == b->ndim && !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim);
}

/* Whether view x may move from value u (in q) to u's operands. */
static bool movable(const vstate *s, const smelt__inst *x, int u)
{
    const smelt__inst *U = &s->q.v[u];
    int cls = smelt__ops[U->op].cls;
    if ((cls != SMELT_CLASS_ELEMWISE && cls != SMELT_CLASS_CAST) || s->uses[u] != 1 || U->is_output)
        return false;
    for (int j = 0; x->op == SMELT_OP_RESHAPE && j < U->nin; j++) {
        const smelt__inst *a = &s->q.v[U->in[j]];
        int64_t off, st[SMELT_MAX_DIMS], vst[SMELT_MAX_DIMS];
        if (a->op == SMELT_OP_CONST)
            continue;
        if (!same_shape(a, U) || !smelt__view_chain(&s->q, U->in[j], &off, st) ||
            !smelt__view_strides(x->op, x->vp, x->ndim, x->shape, a->ndim, a->shape, st, &off, vst))
            return false;
    }
    return true;
}

/* Whether moving view x from u to u's operands (and on down) would leave
 * it on a value computed elementwise for u alone: that value, fused with u
 * where the view stayed put, would then be written out for the view to read
 * (a reshape of exp(x - max(x)) moved onto x - max(x), a broadcast
 * difference it cannot pass). */
static bool strands(const vstate *s, const smelt__inst *x, int u)
{
    const smelt__inst *U = &s->q.v[u];
    for (int j = 0; j < U->nin; j++) {
        int a = U->in[j];
        const smelt__inst *A = &s->q.v[a];
        int cls = smelt__ops[A->op].cls;
        bool ew = (cls == SMELT_CLASS_ELEMWISE || cls == SMELT_CLASS_CAST) && s->uses[a] == 1 && !A->is_output;
        if (A->op == SMELT_OP_CONST)
            continue;
        if (same_shape(A, U) && movable(s, x, a) ? strands(s, x, a) : ew)
            return true;
    }
    return false;
}

/* View x (its operand ignored) over value u of q: the index of its value
 * in q.  One read of u (the caller's) passes to what this makes. */
static int view_of(vstate *s, const smelt__inst *x, int u)
{
    if (!movable(s, x, u) || strands(s, x, u)) {
        smelt__inst v = *x;
        v.in[0] = u;
        v.dtype = s->q.v[u].dtype; /* (a view has its operand's dtype; x's was the value's it moved from) */
        return put(s, &v, 0);
    }
    smelt__inst U = s->q.v[u];
    s->uses[u] = 0; /* (read by nothing now: dce drops it) */
    for (int j = 0; j < U.nin && !s->oom; j++) {
        int a = U.in[j];
        const smelt__inst *A = &s->q.v[a];
        if (A->op == SMELT_OP_CONST) { /* a scalar broadcasts anywhere */
            smelt__inst c = *A;
            c.ndim = 0;
            s->uses[a]--;
            U.in[j] = put(s, &c, 1);
            continue;
        }
        if (!same_shape(A, &U)) {
            smelt__inst b = {.op = SMELT_OP_BROADCAST, .dtype = A->dtype, .ndim = U.ndim, .nin = 1, .in = {a},
                             .input_index = -1};
            memcpy(b.shape, U.shape, sizeof b.shape);
            a = put(s, &b, 1);
        }
        U.in[j] = view_of(s, x, a);
        s->uses[U.in[j]]++;
    }
    U.ndim = x->ndim;
    memcpy(U.shape, x->shape, sizeof U.shape);
    U.is_output = false;
    s->moved++;
    return put(s, &U, 0);
}

int smelt__pass_views(smelt__prog *p)
{
    smelt__prog_uses(p);
    vstate s = {.q = *p};
    s.q.v = NULL, s.q.n = s.q.cap = 0;
    int *remap = malloc(sizeof(int) * (size_t)(p->n + 1));
    s.oom = !remap;
    for (int i = 0; i < p->n && !s.oom; i++) {
        smelt__inst x = p->v[i];
        for (int j = 0; j < x.nin; j++)
            x.in[j] = remap[x.in[j]];
        if (smelt__is_view(x.op) && !smelt__is_piece(x.op) && movable(&s, &x, x.in[0]) &&
            !strands(&s, &x, x.in[0])) {
            remap[i] = view_of(&s, &x, x.in[0]);
            s.uses[remap[i]] = x.uses;
            s.q.v[remap[i]].is_output = x.is_output;
            continue;
        }
        remap[i] = put(&s, &x, x.uses);
    }
    if (s.oom || !s.moved) { /* (an optimisation: skipping it is correct) */
        free(remap), free(s.q.v), free(s.uses);
        return 0;
    }
    for (int i = 0; i < p->nout; i++)
        p->outputs[i] = remap[p->outputs[i]];
    free(p->v);
    p->v = s.q.v, p->n = s.q.n, p->cap = s.q.cap;
    free(remap), free(s.uses);
    smelt__prog_uses(p);
    return s.moved;
}
