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
 * where every sorted order needed 8).  First and best fit scan the live
 * buffers while at most SMELT_MEM_SCAN_MAX are live at once, and keep them
 * in treaps beyond (lifetime_fit_fast: the same offsets in O(n log n)).
 * Values in place of others go with them: the heuristics place buffers,
 * not values. */
#include <stdlib.h>
#include <string.h>

#include "plan.h"

#define SMELT_MEM_GREEDY_MAX 256
#define SMELT_MEM_SHUFFLE_MAX 80
#define SMELT_MEM_SHUFFLES 32
#define SMELT_MEM_SCAN_MAX 64 /* lifetime order: up to this many buffers live at once, the scan */

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

/* lifetime_fit in O(n log n): the live buffers in two treaps over the same
 * nodes, one by offset (each node holding the gap below it, down to the
 * previous buffer's end, and the largest gap of its subtree: the first gap
 * that fits), one by (gap, offset) (the smallest gap that fits, the lowest
 * of equal ones), and a heap of their ends (the dead leave first).  The
 * same offsets as the scan: live buffers never overlap, so the scan's top
 * below a buffer is the previous buffer's end.  Buffers of size 0 (which
 * may share an offset) keep the scan. */
typedef struct fitnode {
    int l, r, l2, r2;
    unsigned pri;
    int64_t gap, mx;
} fitnode;

typedef struct fitset {
    mbuf **b;
    fitnode *t;
} fitset;

static int64_t mx_of(const fitset *f, int x)
{
    return x < 0 ? -1 : f->t[x].mx;
}
static void upd(fitset *f, int x)
{
    f->t[x].mx = SMELT_MAX(f->t[x].gap, SMELT_MAX(mx_of(f, f->t[x].l), mx_of(f, f->t[x].r)));
}
/* by offset: a gets those below off, b the others */
static void split1(fitset *f, int x, int64_t off, int *a, int *b)
{
    if (x < 0) {
        *a = *b = -1;
    } else if (f->b[x]->off < off) {
        split1(f, f->t[x].r, off, &f->t[x].r, b);
        upd(f, x);
        *a = x;
    } else {
        split1(f, f->t[x].l, off, a, &f->t[x].l);
        upd(f, x);
        *b = x;
    }
}
static int merge1(fitset *f, int a, int b)
{
    if (a < 0 || b < 0)
        return a < 0 ? b : a;
    if (f->t[a].pri > f->t[b].pri) {
        f->t[a].r = merge1(f, f->t[a].r, b);
        upd(f, a);
        return a;
    }
    f->t[b].l = merge1(f, a, f->t[b].l);
    upd(f, b);
    return b;
}
static bool before2(const fitset *f, int x, int64_t gap, int64_t off)
{
    return f->t[x].gap != gap ? f->t[x].gap < gap : f->b[x]->off < off;
}
/* by (gap, offset): a gets those before (gap, off) */
static void split2(fitset *f, int x, int64_t gap, int64_t off, int *a, int *b)
{
    if (x < 0) {
        *a = *b = -1;
    } else if (before2(f, x, gap, off)) {
        split2(f, f->t[x].r2, gap, off, &f->t[x].r2, b);
        *a = x;
    } else {
        split2(f, f->t[x].l2, gap, off, a, &f->t[x].l2);
        *b = x;
    }
}
static int merge2(fitset *f, int a, int b)
{
    if (a < 0 || b < 0)
        return a < 0 ? b : a;
    if (f->t[a].pri > f->t[b].pri) {
        f->t[a].r2 = merge2(f, f->t[a].r2, b);
        return a;
    }
    f->t[b].l2 = merge2(f, a, f->t[b].l2);
    return b;
}
static int add2(fitset *f, int root, int x)
{
    int a, b;
    f->t[x].l2 = f->t[x].r2 = -1;
    split2(f, root, f->t[x].gap, f->b[x]->off, &a, &b);
    return merge2(f, merge2(f, a, x), b);
}
static int del2(fitset *f, int root, int x)
{
    int a, b, c, d;
    split2(f, root, f->t[x].gap, f->b[x]->off, &a, &b);
    split2(f, b, f->t[x].gap, f->b[x]->off + 1, &c, &d); /* c: x alone (offsets are distinct) */
    return merge2(f, a, d);
}
/* The lowest node of x's subtree takes the gap g (its offset's gap changed). */
static void set_first_gap(fitset *f, int x, int64_t g)
{
    if (f->t[x].l >= 0)
        set_first_gap(f, f->t[x].l, g);
    else
        f->t[x].gap = g;
    upd(f, x);
}
static int first_of(const fitset *f, int x)
{
    while (x >= 0 && f->t[x].l >= 0)
        x = f->t[x].l;
    return x;
}
static int last_of(const fitset *f, int x)
{
    while (x >= 0 && f->t[x].r >= 0)
        x = f->t[x].r;
    return x;
}

static void heap_sift(int *h, int m, int at, mbuf **b)
{
    for (;;) {
        int c = 2 * at + 1;
        if (c >= m)
            return;
        if (c + 1 < m && b[h[c + 1]]->end < b[h[c]]->end)
            c++;
        if (b[h[at]]->end <= b[h[c]]->end)
            return;
        int t = h[at];
        h[at] = h[c], h[c] = t, at = c;
    }
}

/* SMELT_ERR_NOMEM leaves *total as it was (the caller then scans) */
static int lifetime_fit_fast(mbuf **order, int n, bool best, int64_t *total_out)
{
    fitset f = {order, malloc(sizeof(fitnode) * (size_t)(n + 1))};
    int *heap = malloc(sizeof(int) * (size_t)(n + 1)), m = 0, r1 = -1, r2 = -1;
    if (!f.t || !heap) {
        free(f.t), free(heap);
        return SMELT_ERR_NOMEM;
    }
    int64_t total = 0;
    uint32_t seed = 2463534242u;
    for (int i = 0; i < n; i++) {
        mbuf *b = order[i];
        while (m && order[heap[0]]->end < b->start) { /* drop the dead */
            int x = heap[0], a, c, d;
            heap[0] = heap[--m];
            heap_sift(heap, m, 0, order);
            split1(&f, r1, order[x]->off, &a, &c);
            split1(&f, c, order[x]->off + 1, &c, &d); /* c: x alone */
            if (d >= 0) { /* the next one's gap now reaches down to x's predecessor */
                int s = first_of(&f, d), p = last_of(&f, a);
                r2 = del2(&f, r2, s);
                set_first_gap(&f, d, order[s]->off - (p >= 0 ? order[p]->off + order[p]->size : 0));
                r2 = add2(&f, r2, s);
            }
            r2 = del2(&f, r2, x);
            r1 = merge1(&f, a, d);
        }
        int at = -1; /* the node whose gap b takes */
        if (best) {
            for (int x = r2; x >= 0;)
                if (f.t[x].gap >= b->size)
                    at = x, x = f.t[x].l2;
                else
                    x = f.t[x].r2;
        } else if (mx_of(&f, r1) >= b->size) {
            for (int x = r1; x >= 0;) {
                if (mx_of(&f, f.t[x].l) >= b->size) {
                    x = f.t[x].l;
                } else if (f.t[x].gap >= b->size) {
                    at = x;
                    break;
                } else {
                    x = f.t[x].r;
                }
            }
        }
        int top = last_of(&f, r1);
        b->off = at >= 0 ? order[at]->off - f.t[at].gap : top >= 0 ? order[top]->off + order[top]->size : 0;
        total = SMELT_MAX(total, b->off + b->size);
        /* insert b: its gap down to its predecessor; its successor's gap now ends at b */
        int a, c;
        split1(&f, r1, b->off, &a, &c);
        int p = last_of(&f, a);
        seed ^= seed << 13, seed ^= seed >> 17, seed ^= seed << 5;
        f.t[i] = (fitnode){-1, -1, -1, -1, seed, b->off - (p >= 0 ? order[p]->off + order[p]->size : 0), 0};
        upd(&f, i);
        if (c >= 0) {
            int s = first_of(&f, c);
            r2 = del2(&f, r2, s);
            set_first_gap(&f, c, order[s]->off - (b->off + b->size));
            r2 = add2(&f, r2, s);
        }
        r1 = merge1(&f, merge1(&f, a, i), c);
        r2 = add2(&f, r2, i);
        heap[m] = i;
        for (int at2 = m++; at2 > 0 && order[heap[(at2 - 1) / 2]]->end > order[heap[at2]]->end; at2 = (at2 - 1) / 2) {
            int t = heap[at2];
            heap[at2] = heap[(at2 - 1) / 2], heap[(at2 - 1) / 2] = t;
        }
    }
    free(f.t), free(heap);
    *total_out = total;
    return SMELT_OK;
}

/* The buffers of plan p's values at shapes rs, in b[] (idx[v]: value v's,
 * -1 none: outputs, inputs, views), each living from the kernel that
 * writes it to the last that reads it; returns how many */
static int mem_buffers(const smelt_plan *p, const smelt__rshape *rs, int64_t align, int *idx, mbuf *b)
{
    int nb = 0;
    for (int ki = 0; ki < p->nkern; ki++) {
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
    return nb;
}

/* In place: an output of kernel ki takes the buffer of an input whose
 * buffer ki reads for the last time (place only: opt_level >= 2) */
static void mem_inplace(const smelt_plan *p, const smelt__rshape *rs, const int *idx, mbuf *b, smelt__memplan *out)
{
    for (int ki = 0; ki < p->nkern; ki++) {
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
}

/* Each heuristic in turn over the nr buffers roots (of b), the offsets of
 * the smallest arena into off[] for every value of b (nb); order, near and
 * delta are scratch */
static int mem_place(const smelt_plan *p, mbuf *b, int nb, mbuf **roots, int nr, mbuf **order, mbuf **near,
                     int64_t *delta, int64_t *off, smelt__memplan *out)
{
    /* keep holds the best offsets so far */
    int64_t *keep = malloc(sizeof *keep * (size_t)(nb + 1));
    int st = keep ? SMELT_OK : SMELT_ERR_NOMEM;
    out->arena = INT64_MAX;
    int (*const orders[])(const void *, const void *) = {by_start, by_start, by_size, by_size_life, by_life};
    /* the scan while few buffers are live at once (it is quicker), the
     * treaps beyond (the scan is quadratic in them) */
    bool nozero = true;
    int64_t nlive = 0, maxlive = 0;
    memset(delta, 0, sizeof *delta * (size_t)(p->nkern + 2));
    for (int i = 0; i < nr; i++) {
        nozero = nozero && roots[i]->size > 0;
        delta[roots[i]->start]++;
        delta[roots[i]->end + 1]--;
    }
    for (int ki = 0; ki <= p->nkern; ki++)
        nlive += delta[ki], maxlive = SMELT_MAX(maxlive, nlive);
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
        int64_t size = -1;
        if (h < 2 && nozero && maxlive > SMELT_MEM_SCAN_MAX && lifetime_fit_fast(order, nr, h == 1, &size))
            size = -1; /* (out of memory: the scan) */
        if (size < 0)
            size = h < 2 ? lifetime_fit(order, nr, near, h == 1) : greedy_by_size(order, nr, near);
        if (size < out->arena) {
            out->arena = size;
            for (int i = 0; i < nr; i++)
                keep[roots[i] - b] = roots[i]->off;
        }
    }
    for (int i = 0; !st && i < nb; i++) /* a value in place of another takes its offset */
        off[b[i].v] = keep[b[i].root];
    free(keep);
    return st;
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
    if (!st)
        nb = mem_buffers(p, rs, align, idx, b);
    for (int i = 0; !st && i < nb; i++)
        out->naive += b[i].size;
    if (!st && place)
        mem_inplace(p, rs, idx, b, out);
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
        st = mem_place(p, b, nb, roots, nr, order, near, delta, off, out);
    }
done:
    free(idx), free(b), free(order), free(near), free(roots), free(delta);
    out->ms = smelt__now_ms() - t0;
    return st;
}
