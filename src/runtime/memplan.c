/* Memory planning (opt_level >= 2): the intermediates of a plan share one
 * arena.  Each intermediate (a kernel's output that is not a plan output)
 * lives from the kernel that writes it to the last kernel that reads it,
 * both included, so a kernel's inputs and outputs share memory only in
 * place: an output takes the buffer of an input the kernel reads for the
 * last time when smelt__inplace_ok says each element is read before it is
 * written (the two then form one buffer whose life is both of theirs).
 * Offsets come from several heuristics, and the smallest arena wins (XLA's
 * "choose best"): greedy by size (the largest buffers first, each in the
 * smallest gap that fits among the placed buffers it overlaps in time;
 * TFLite's greedy-by-size; ties broken by start, then by longer life) and
 * first fit and best fit in lifetime order.  Greedy by size looks at every
 * placed buffer, quadratic in their number, so it runs only up to
 * SMELT_MEM_GREEDY_MAX buffers; up to SMELT_MEM_SHUFFLE_MAX buffers, the
 * same placement also runs in SMELT_MEM_SHUFFLES fixed pseudo-random orders,
 * which find packings the sorted orders miss (seen: 7 units of 64 bytes
 * where every sorted order needed 8).  Values in place of others go with
 * them: the heuristics place buffers, not values. */
#include <stdlib.h>
#include <string.h>

#include "plan.h"

#define SMELT_MEM_GREEDY_MAX 256
#define SMELT_MEM_SHUFFLE_MAX 80
#define SMELT_MEM_SHUFFLES 32

typedef struct mbuf {
    int v, start, end;
    int64_t size, off;
    int root;  /* the buffer it is in place of (its own index when none) */
    int taken; /* the kernel whose output took this buffer in place last (-1) */
} mbuf;

bool smelt__inplace_ok(const smelt_plan *p, const smelt__cluster *c, const smelt__rshape *rs, int u, int v)
{
    const smelt__inst *x = &p->prog.v[u], *y = &p->prog.v[v];
    if (smelt__ops[y->op].cls == SMELT_CLASS_LIBRARY)
        return false; /* (BLAS reads its operands while it writes) */
    for (int j = 0; j < c->nin; j++) /* a view of u reads u's elements at other indices */
        if (c->inputs[j] != u && smelt__reads_base(&p->prog, c->inputs[j], u))
            return false;
    if (smelt__dtypes[x->dtype].size != smelt__dtypes[y->dtype].size ||
        smelt__numel(rs[u].ndim, rs[u].shape) != smelt__numel(rs[v].ndim, rs[v].shape))
        return false; /* a broadcast operand is read at other elements' indices */
    /* a reduction's result over an input of its kernel: only when it reduces
     * size-1 axes (each result reads one element of each full-size input;
     * an input of the result's size broadcast along a reduced axis, as m in
     * sum(x - m, axis=0) with x (n, n) and m (n, 1), is read by every result) */
    if (smelt__is_reduce(y->op) &&
        smelt__numel(rs[y->in[0]].ndim, rs[y->in[0]].shape) != smelt__numel(rs[v].ndim, rs[v].shape))
        return false;
    /* an epilogue's output: refused (a result is written while other
     * results' rows are still being read, and a column form writes a row
     * of results at once) */
    int rj = smelt__red_member(&p->prog, c);
    if (rj >= 0 && (v > c->members[rj] || smelt__red_multi(&p->prog, c)))
        return false; /* (a row program reads its inputs again in its last pass) */
    for (int m = c->nmem - 1; m >= 0 && c->members[m] > v; m--) /* members after v's writer */
        for (int j = 0; j < p->prog.v[c->members[m]].nin; j++)
            if (p->prog.v[c->members[m]].in[j] == u)
                return false;
    return true;
}

static int by_size(const void *a, const void *b)
{
    const mbuf *x = *(const mbuf *const *)a, *y = *(const mbuf *const *)b;
    if (x->size != y->size)
        return x->size < y->size ? 1 : -1;
    return x->start - y->start;
}

static int by_size_life(const void *a, const void *b)
{
    const mbuf *x = *(const mbuf *const *)a, *y = *(const mbuf *const *)b;
    if (x->size != y->size)
        return x->size < y->size ? 1 : -1;
    return (y->end - y->start) - (x->end - x->start);
}

static int by_life(const void *a, const void *b)
{
    const mbuf *x = *(const mbuf *const *)a, *y = *(const mbuf *const *)b;
    int lx = x->end - x->start, ly = y->end - y->start;
    if (lx != ly)
        return ly - lx;
    return x->size != y->size ? (x->size < y->size ? 1 : -1) : x->start - y->start;
}

static int by_start(const void *a, const void *b)
{
    const mbuf *x = *(const mbuf *const *)a, *y = *(const mbuf *const *)b;
    return x->start != y->start ? x->start - y->start : x->v - y->v;
}

static int by_off(const void *a, const void *b)
{
    const mbuf *x = *(const mbuf *const *)a, *y = *(const mbuf *const *)b;
    return x->off < y->off ? -1 : x->off > y->off;
}

/* Place b below, between or above the buffers of near (n of them, sorted by
 * offset): the smallest gap that fits (best), else the lowest (first). */
static int64_t place(const mbuf *b, mbuf **near, int n, bool best)
{
    int64_t top = 0, at = -1, gap_best = INT64_MAX;
    for (int i = 0; i < n; i++) {
        int64_t gap = near[i]->off - top;
        if (gap >= b->size && (best ? gap < gap_best : at < 0)) {
            at = top;
            gap_best = gap;
        }
        top = SMELT_MAX(top, near[i]->off + near[i]->size);
    }
    return at >= 0 ? at : top;
}

/* Offsets by greedy by size (order: buffers by decreasing size); the arena's size. */
static int64_t greedy_by_size(mbuf **order, int n, mbuf **near)
{
    int64_t total = 0;
    for (int i = 0; i < n; i++) {
        mbuf *b = order[i];
        int m = 0;
        for (int j = 0; j < i; j++)
            if (order[j]->start <= b->end && b->start <= order[j]->end)
                near[m++] = order[j];
        qsort(near, (size_t)m, sizeof *near, by_off);
        b->off = place(b, near, m, true);
        total = SMELT_MAX(total, b->off + b->size);
    }
    return total;
}

/* Offsets by first (or best) fit in lifetime order (order: by start),
 * keeping the set of buffers still live sorted by offset; the arena's size. */
static int64_t lifetime_fit(mbuf **order, int n, mbuf **live, bool best)
{
    int64_t total = 0;
    int m = 0;
    for (int i = 0; i < n; i++) {
        mbuf *b = order[i];
        int k = 0;
        for (int j = 0; j < m; j++) /* drop the dead */
            if (live[j]->end >= b->start)
                live[k++] = live[j];
        m = k;
        b->off = place(b, live, m, best);
        total = SMELT_MAX(total, b->off + b->size);
        int at = m; /* insert by offset */
        while (at > 0 && live[at - 1]->off > b->off)
            at--;
        memmove(live + at + 1, live + at, sizeof *live * (size_t)(m - at));
        live[at] = b;
        m++;
    }
    return total;
}

int smelt__mem_plan(const smelt_plan *p, const smelt__rshape *rs, int64_t align, bool place, int64_t *off,
                    smelt__memplan *out)
{
    int n = p->prog.n, nb = 0;
    double t0 = smelt__now_ms();
    memset(out, 0, sizeof *out);
    for (int v = 0; v < n; v++)
        off[v] = -1;
    int *idx = malloc(sizeof(int) * (size_t)(n + 1));
    mbuf *b = malloc(sizeof *b * (size_t)(n + 1));
    mbuf **order = malloc(sizeof *order * (size_t)(n + 1)), **near = malloc(sizeof *near * (size_t)(n + 1));
    mbuf **roots = malloc(sizeof *roots * (size_t)(n + 1));
    int64_t *delta = calloc((size_t)p->nkern + 2, sizeof *delta);
    int st = idx && b && order && near && roots && delta ? SMELT_OK : SMELT_ERR_NOMEM;
    for (int v = 0; !st && v < n; v++)
        idx[v] = -1;
    for (int ki = 0; !st && ki < p->nkern; ki++) {
        const smelt__cluster *c = &p->kern[ki].cl;
        for (int j = 0; j < c->nin; j++) { /* (a view keeps the values it views alive) */
            int bases[SMELT_MAX_PARTS], nbase = smelt__view_bases(&p->prog, c->inputs[j], bases);
            for (int i = 0; i < nbase; i++)
                if (idx[bases[i]] >= 0)
                    b[idx[bases[i]]].end = ki;
        }
        for (int j = 0; j < c->nout; j++) {
            int v = c->outputs[j];
            if (p->out_slot[v] >= 0 || idx[v] >= 0)
                continue;
            int64_t bytes = smelt__numel(rs[v].ndim, rs[v].shape) * (int64_t)smelt__dtypes[p->prog.v[v].dtype].size;
            b[nb] = (mbuf){v, ki, ki, (bytes + align - 1) / align * align, 0, nb, -1};
            idx[v] = nb++;
        }
    }
    for (int i = 0; !st && i < nb; i++)
        out->naive += b[i].size;
    /* in place: an output of kernel ki takes the buffer of an input whose
     * buffer ki reads for the last time (place only: opt_level >= 2) */
    for (int ki = 0; !st && place && ki < p->nkern; ki++) {
        const smelt__cluster *c = &p->kern[ki].cl;
        for (int j = 0; j < c->nout; j++) {
            int iv = idx[c->outputs[j]];
            if (iv < 0 || b[iv].start != ki)
                continue;
            for (int i = 0; i < c->nin; i++) {
                int iu = idx[c->inputs[i]], r = iu < 0 ? -1 : b[iu].root; /* (never through a view: idx -1) */
                if (r < 0 || b[r].end != ki || b[r].taken == ki || b[r].size != b[iv].size ||
                    !smelt__inplace_ok(p, c, rs, c->inputs[i], c->outputs[j]))
                    continue;
                b[iv].root = r;
                b[r].end = b[iv].end;
                b[r].taken = ki;
                out->inplace++;
                break;
            }
        }
    }
    /* the buffers: values not in place of another (others go with theirs) */
    int nr = 0;
    for (int i = 0; !st && i < nb; i++)
        if (b[i].root == i)
            roots[nr++] = &b[i];
    if (!st) {
        for (int i = 0; i < nr; i++) { /* the live set's largest sum: no arena is smaller */
            delta[roots[i]->start] += roots[i]->size;
            delta[roots[i]->end + 1] -= roots[i]->size;
        }
        int64_t live = 0;
        for (int ki = 0; ki <= p->nkern; ki++) {
            live += delta[ki];
            out->lower = SMELT_MAX(out->lower, live);
        }
        out->buffers = nb;
        if (!place) { /* the bounds only */
            out->arena = out->naive;
            goto done;
        }
        /* each heuristic in turn; keep holds the best offsets so far */
        int64_t *keep = malloc(sizeof *keep * (size_t)(nb + 1));
        st = keep ? SMELT_OK : SMELT_ERR_NOMEM;
        out->arena = INT64_MAX;
        int (*const orders[])(const void *, const void *) = {by_start, by_start, by_size, by_size_life, by_life};
        uint64_t rng = 0x9e3779b97f4a7c15ull;
        for (int h = 0; !st && h < 5 + SMELT_MEM_SHUFFLES; h++) {
            if ((h >= 2 && nr > SMELT_MEM_GREEDY_MAX) || (h >= 5 && nr > SMELT_MEM_SHUFFLE_MAX))
                break;
            memcpy(order, roots, sizeof *order * (size_t)nr);
            if (h < 5)
                qsort(order, (size_t)nr, sizeof *order, orders[h]);
            for (int i = nr - 1; h >= 5 && i > 0; i--) { /* Fisher-Yates, a fixed sequence */
                rng = rng * 6364136223846793005ull + 1442695040888963407ull;
                int j = (int)((rng >> 33) % (uint64_t)(i + 1));
                mbuf *t = order[i];
                order[i] = order[j];
                order[j] = t;
            }
            int64_t size = h < 2 ? lifetime_fit(order, nr, near, h == 1) : greedy_by_size(order, nr, near);
            if (size < out->arena) {
                out->arena = size;
                for (int i = 0; i < nr; i++)
                    keep[roots[i] - b] = roots[i]->off;
            }
        }
        for (int i = 0; !st && i < nb; i++) /* a value in place of another takes its offset */
            off[b[i].v] = keep[b[i].root];
        free(keep);
    }
done:
    free(idx), free(b), free(order), free(near), free(roots), free(delta);
    out->ms = smelt__now_ms() - t0;
    return st;
}
