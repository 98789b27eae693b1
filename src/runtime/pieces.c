/* Concats and pads at run time (called by the executor, src/runtime/exec.c).
 * A value that is, or views, a concat or a pad lies in no one stretch of
 * memory: it is pieces, boxes of its index space whose elements lie at
 * strides from one address (a part's; a pad's value, strides 0).  A
 * kernel that reads one runs once per region of its iteration space that
 * one piece of every operand covers (run_kernel): the guard that picks a
 * piece is taken once per region, not per element. */
#include <stdlib.h>
#include <string.h>

#include "exec.h"

typedef struct piece {
    int64_t lo[SMELT_MAX_DIMS], n[SMELT_MAX_DIMS], st[SMELT_MAX_DIMS];
    char *data; /* the element at lo */
} piece;
#define MAX_PIECES 256  /* per operand */
#define MAX_REGIONS 4096 /* per kernel run */

static int64_t floordiv(int64_t a, int64_t b) { return a / b - (a % b != 0 && (a < 0) != (b < 0)); }

/* Value v's pieces over its run-time shape, appended to out[*np..]; empty
 * ones left out. */
static int pieces_of(smelt_plan *p, runstate *rs, int v, piece *out, int *np)
{
    const smelt__inst *x = &p->prog.v[v];
    const smelt__rshape *r = &p->rs[v];
    int k0 = *np, st;
    if (!smelt__has_pieces(&p->prog, v)) {
        int64_t scratch[SMELT_MAX_DIMS];
        smelt__view w;
        if ((st = smelt__value_view(p, rs, v, &w, scratch)))
            return st;
        if (*np == MAX_PIECES)
            return smelt__err(p->ctx, SMELT_ERR_UNSUPPORTED, "a concat or pad of more than %d pieces", MAX_PIECES);
        piece *q = &out[(*np)++];
        for (int d = 0; d < r->ndim; d++)
            q->lo[d] = 0, q->n[d] = r->shape[d], q->st[d] = w.strides[d];
        q->data = w.data;
        if (smelt__numel(r->ndim, r->shape) == 0)
            --*np;
        return SMELT_OK;
    }
    const smelt__rshape *a = &p->rs[x->in[0]];
    if ((st = pieces_of(p, rs, x->in[0], out, np)))
        return st;
    int ax = (int)x->vp[0], k1 = *np;
    int64_t es = (int64_t)smelt__dtypes[x->dtype].size;
    switch (x->op) {
    case SMELT_OP_CONCAT:
        if ((st = pieces_of(p, rs, x->in[1], out, np)))
            return st;
        for (int i = k1; i < *np; i++)
            out[i].lo[ax] += a->shape[ax];
        return SMELT_OK;
    case SMELT_OP_PAD: {
        char *cell = NULL;
        for (int i = k0; i < k1; i++)
            out[i].lo[ax] += x->vp[1];
        if ((st = smelt__value_cell(p, v, &x->vp[3], &cell)))
            return st;
        for (int side = 0; side < 2; side++) {
            int64_t len = x->vp[1 + side];
            if (!len || smelt__numel(r->ndim, r->shape) == 0)
                continue;
            if (*np == MAX_PIECES)
                return smelt__err(p->ctx, SMELT_ERR_UNSUPPORTED, "a concat or pad of more than %d pieces",
                                  MAX_PIECES);
            piece *q = &out[(*np)++];
            for (int d = 0; d < r->ndim; d++)
                q->lo[d] = 0, q->n[d] = r->shape[d], q->st[d] = 0;
            q->lo[ax] = side ? x->vp[1] + a->shape[ax] : 0;
            q->n[ax] = len;
            q->data = cell;
        }
        return SMELT_OK;
    }
    case SMELT_OP_PERMUTE:
        for (int i = k0; i < *np; i++) {
            piece t = out[i];
            for (int d = 0; d < r->ndim; d++)
                out[i].lo[d] = t.lo[x->vp[d]], out[i].n[d] = t.n[x->vp[d]], out[i].st[d] = t.st[x->vp[d]];
        }
        return SMELT_OK;
    case SMELT_OP_SLICE: { /* output j reads the operand's first + j * step */
        int64_t first, count, step = x->vp[3];
        smelt__slice_range(a->shape[ax], x->vp[1], x->vp[2], step, &first, &count);
        int m = k0;
        for (int i = k0; i < *np; i++) {
            piece q = out[i];
            int64_t L = q.lo[ax], H = q.lo[ax] + q.n[ax], jlo, jhi;
            if (step > 0)
                jlo = -floordiv(first - L, step), jhi = -floordiv(first - H, step);
            else
                jlo = floordiv(first - H, -step) + 1, jhi = floordiv(first - L, -step) + 1;
            jlo = SMELT_MAX(jlo, 0), jhi = SMELT_MIN(jhi, count);
            if (jhi <= jlo)
                continue;
            q.data += (first + jlo * step - L) * q.st[ax] * es;
            q.st[ax] *= step;
            q.lo[ax] = jlo, q.n[ax] = jhi - jlo;
            out[m++] = q;
        }
        *np = m;
        return SMELT_OK;
    }
    case SMELT_OP_BROADCAST:
    case SMELT_OP_RESHAPE: /* (a reshape that only adds or drops axes of size 1: smelt__prog_finalize) */
        if (x->op == SMELT_OP_RESHAPE && !smelt__reshape_ones(r->ndim, r->shape, a->ndim, a->shape))
            return smelt__err(p->ctx, SMELT_ERR_SHAPE, "reshape of a concat or pad: at the run-time shapes it "
                              "no longer only adds or drops axes of size 1 (as it did in the graph)");
        for (int i = k0; i < *np; i++) {
            piece t = out[i];
            for (int d = 0, xd = 0; d < r->ndim; d++) {
                int from = -1; /* the operand's axis that axis d is (-1: a new one, or broadcast) */
                if (x->op == SMELT_OP_BROADCAST) {
                    from = d - (r->ndim - a->ndim);
                    from = from >= 0 && a->shape[from] == r->shape[d] ? from : -1;
                } else if (r->shape[d] != 1) { /* the reshape's next axis of size other than 1 */
                    while (a->shape[xd] == 1)
                        xd++;
                    from = xd++;
                }
                out[i].lo[d] = from < 0 ? 0 : t.lo[from];
                out[i].n[d] = from < 0 ? r->shape[d] : t.n[from];
                out[i].st[d] = from < 0 ? 0 : t.st[from];
            }
        }
        return SMELT_OK;
    default:
        return smelt__err(p->ctx, SMELT_ERR_RUNTIME, "%s over a concat or pad: not read in pieces",
                          smelt__ops[x->op].name);
    }
}

/* Value v (it has pieces) as a stand-in view: its run-time shape, no
 * memory (run_pieces gives each region its piece's). */
int smelt__pieces_view(smelt_plan *p, int v, smelt__view *out, int64_t *zeros)
{
    memset(zeros, 0, sizeof(int64_t) * SMELT_MAX_DIMS);
    *out = (smelt__view){NULL, p->rs[v].ndim, p->rs[v].shape, zeros};
    return SMELT_OK;
}

/* Kernel ki over the regions its operands' pieces make (w: every operand's
 * view, pieces_view for those that read pieces).  Its iteration shape is
 * its members' (a reduction's: its operand's, cut along kept axes only:
 * the partition's rule, so each region is whole rows, its results a box
 * of the results); the other operands start at the region's first element
 * (their strides in the kernel's iteration order: a row program's has the
 * kept axes first). */
int smelt__run_pieces(smelt_plan *p, runstate *rs, int ki, smelt__view *w, bool *split)
{
    const smelt__pkernel *k = &p->kern[ki];
    const smelt__inst *x = k->desc.reduce ? &p->prog.v[k->cl.members[smelt__red_member(&p->prog, &k->cl)]] : NULL;
    const smelt__rshape *S0 = x ? &p->rs[x->in[0]] : &p->rs[k->cl.members[0]];
    unsigned raxes = x ? x->axes : 0;
    int r = S0->ndim, n = k->cl.nin + k->cl.nout, np[SMELT_MAX_KERNEL_OPERANDS];
    piece *pc[SMELT_MAX_KERNEL_OPERANDS] = {0};
    int64_t cut[SMELT_MAX_DIMS][2 * MAX_PIECES + 2], KS[SMELT_MAX_DIMS], kst[SMELT_MAX_KERNEL_OPERANDS][SMELT_MAX_DIMS];
    int ncut[SMELT_MAX_DIMS], it[SMELT_MAX_DIMS], st = SMELT_OK;
    unsigned im;
    smelt__kernel_strides_box(p, ki, w, NULL, KS, kst, &im);
    for (int d = 0, nk = 0, nr = 0, nkept = r - __builtin_popcount(raxes); d < r; d++)
        it[d] = !k->desc.multi ? d : raxes >> d & 1u ? nkept + nr++ : nk++;
    for (int d = 0; d < r; d++)
        cut[d][0] = 0, cut[d][1] = S0->shape[d], ncut[d] = 2;
    for (int o = 0; o < k->cl.nin && !st; o++) {
        int v = k->cl.inputs[o], wr = p->rs[v].ndim;
        np[o] = 0;
        if (!smelt__has_pieces(&p->prog, v))
            continue;
        if (!(pc[o] = malloc(sizeof(piece) * MAX_PIECES))) {
            st = smelt__err(p->ctx, SMELT_ERR_NOMEM, "out of memory");
            break;
        }
        if ((st = pieces_of(p, rs, v, pc[o], &np[o])))
            break;
        for (int i = 0; i < np[o]; i++)
            for (int d = r - wr; d < r; d++) { /* (right-aligned; an axis it is broadcast along has no cut) */
                int xd = d - (r - wr);
                if (p->rs[v].shape[xd] != S0->shape[d])
                    continue;
                for (int e = 0; e < 2; e++) {
                    int64_t c = pc[o][i].lo[xd] + (e ? pc[o][i].n[xd] : 0);
                    int j = 0;
                    while (j < ncut[d] && cut[d][j] != c)
                        j++;
                    if (j == ncut[d])
                        cut[d][ncut[d]++] = c;
                }
            }
    }
    int64_t regions = 1;
    for (int d = 0; d < r && !st; d++) {
        for (int i = 1; i < ncut[d]; i++) /* (few: insertion sort) */
            for (int j = i; j > 0 && cut[d][j - 1] > cut[d][j]; j--) {
                int64_t t = cut[d][j];
                cut[d][j] = cut[d][j - 1], cut[d][j - 1] = t;
            }
        regions *= ncut[d] - 1;
        if (regions > MAX_REGIONS)
            st = smelt__err(p->ctx, SMELT_ERR_UNSUPPORTED, "the concats and pads a kernel reads cut it into more "
                            "than %d regions", MAX_REGIONS);
        else if ((raxes >> d & 1u) && ncut[d] > 2)
            st = smelt__err(p->ctx, SMELT_ERR_UNSUPPORTED,
                            "at the run-time shapes, a concat or pad cuts axis %d, which a reduction reduces "
                            "(at the graph's shapes it did not: a size-0 part grew); build the graph with "
                            "these shapes", d);
    }
    int idx[SMELT_MAX_DIMS] = {0};
    for (int64_t g = 0; g < regions && !st && !*split; g++) {
        int64_t lo[SMELT_MAX_DIMS], box[SMELT_MAX_DIMS];
        smelt__view rw[SMELT_MAX_KERNEL_OPERANDS];
        for (int d = 0; d < r; d++)
            lo[d] = cut[d][idx[d]], box[d] = cut[d][idx[d] + 1] - lo[d];
        for (int o = 0; o < n && !st; o++) {
            int v = o < k->cl.nin ? k->cl.inputs[o] : k->cl.outputs[o - k->cl.nin], wr = p->rs[v].ndim;
            int64_t es = (int64_t)smelt__dtypes[p->prog.v[v].dtype].size;
            rw[o] = w[o];
            if (!pc[o]) { /* at the region's first element */
                for (int d = 0; d < r; d++)
                    rw[o].data += lo[d] * kst[o][it[d]] * es;
                continue;
            }
            const piece *q = NULL;
            for (int i = 0; i < np[o] && !q; i++) {
                bool in = true;
                for (int d = r - wr; d < r && in; d++) {
                    int xd = d - (r - wr);
                    in = p->rs[v].shape[xd] != S0->shape[d] ||
                         (pc[o][i].lo[xd] <= lo[d] && lo[d] < pc[o][i].lo[xd] + pc[o][i].n[xd]);
                }
                q = in ? &pc[o][i] : NULL;
            }
            if (!q && np[o] == 0) { /* every piece empty: rows of no elements, nothing read (a
                                     * cell of memory stands in) */
                static const int64_t zero = 0;
                st = smelt__value_cell(p, v, &zero, &rw[o].data);
                continue;
            }
            if (!q) {
                st = smelt__err(p->ctx, SMELT_ERR_RUNTIME, "a region no piece covers (a bug)");
                break;
            }
            rw[o].data = q->data;
            rw[o].strides = q->st;
            for (int d = r - wr; d < r; d++) {
                int xd = d - (r - wr);
                if (p->rs[v].shape[xd] == S0->shape[d])
                    rw[o].data += (lo[d] - q->lo[xd]) * q->st[xd] * es;
            }
        }
        if (!st)
            st = x ? smelt__reduce_box(p, rs, ki, rw, box, split) : smelt__run_box(p, rs, ki, rw, box, split);
        for (int d = r - 1; d >= 0 && ++idx[d] == ncut[d] - 1; d--)
            idx[d] = 0;
    }
    for (int o = 0; o < k->cl.nin; o++)
        free(pc[o]);
    return st;
}
