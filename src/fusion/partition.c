/* Partitioner: the program's operators grouped into clusters, one kernel
 * each.  Rules (docs/fusion.md):
 *   - a matrix product (class LIBRARY) is a BLAS call, a kernel of its own;
 *   - elementwise operators, casts and broadcasts fuse (OPAQUE operators such
 *     as barrier never do); constants are inlined into every kernel that reads them;
 *   - a reduction takes its elementwise producers into its kernel (input
 *     fusion); a producer's value that is also read outside the kernel (or
 *     is a plan output) is an extra output of full size that the kernel
 *     writes as it computes it; elementwise consumers at the result's shape
 *     fuse after it (an epilogue, run on each result as it is produced),
 *     reading the reduced value, constants and inputs of the kernel that
 *     its producers do not read; a kernel holds one reduction at most;
 *   - all operators of a cluster have one shape (the iteration space); a
 *     smaller, broadcast operand is read with stride 0;
 *   - a merge never creates a cycle: no path may leave a cluster and re-enter;
 *   - a value used inside and outside its cluster is an extra output;
 *   - at most SMELT_MAX_KERNEL_OPERANDS inputs + outputs per cluster, and at
 *     most SMELT_MAX_CLUSTER_OPS operators: a larger group splits into
 *     several kernels (bounded compile time and kernel size).
 * should_fuse applies them, one producer -> consumer edge at a time, and
 * the reason an edge stays between two kernels is kept for the description.
 */
#include <stdlib.h>
#include <string.h>

#include "fusion.h"

typedef struct pstate {
    const smelt__prog *p;
    int *parent;              /* union-find over instruction indices */
    int *uoff, *users;        /* CSR user lists */
    int *stamp, epoch, *stack;
    int *ehead, *etail;       /* per root (or view): its list of out-edges (creates_cycle) */
    int *enext, *eto, nedge;  /* per edge: the next in its list, the consumer */
    unsigned *dstamp, dtok;   /* a visit's kernels already listed */
    int *size;       /* members of each union-find root */
    int *head, *tail; /* each root's member list, */
    int *next;        /* linked through next (-1 ends it): a merge is O(1), its checks O(members) */
    bool fuse;        /* opt_level 3 */
    int rows_min;     /* long rows a row program needs (smelt__partition_build) */
    bool *hasred;     /* per root: its cluster holds a reduction */
    bool *pieces;     /* per root: a member reads a concat or a pad (in pieces) */
    unsigned *pcut;   /* per instruction: the axes of its iteration shape (a reduction's: its
                       * operand's) along which the pieces it reads are cut, and PCUT_READS
                       * when it reads any (a cut on a size-1 axis may leave no axis bit) */
    int *redidx;      /* per root: that reduction's instruction index (-1: none) */
    int *members;     /* scratch: a union's members (union_rows_form) */
} pstate;
#define PCUT_READS (1u << 31)

_Static_assert(SMELT_ROWS_MAX_LEN == 4 * SMELT_RED_CHUNK, "SMELT_ROWS_MAX_LEN is four chunks");

/* After "not fused with kernel N: ", indexed by SMELT__FUSE_* */
#define STR_(x) #x
#define STR(x) STR_(x)
const char *const smelt__fuse_why[SMELT__FUSE_NREASONS] = {
    [SMELT__FUSE] = "fused",
    [SMELT__FUSE_OFF] = "opt_level < 3 (fusion off)",
    [SMELT__FUSE_OPAQUE] = "an opaque operator (barrier) is a fusion boundary",
    [SMELT__FUSE_LIBRARY] = "a matrix product runs in BLAS, a kernel of its own",
    [SMELT__FUSE_PIECES] = "a kernel that reads a concat or a pad (run once per piece) holds no reduction over "
                           "an axis the pieces cut",
    [SMELT__FUSE_SHAPE] = "different iteration shapes",
    [SMELT__FUSE_GATHER] = "an indexed read (take) fuses with reductions only in a row program on a CPU whose indices are the "
                          "same along the reduced axes",
    [SMELT__FUSE_OPS] = "the kernel would exceed " STR(SMELT_MAX_CLUSTER_OPS) " operators",
    [SMELT__FUSE_CYCLE] = "would create a cycle",
    [SMELT__FUSE_OPERANDS] = "the kernel would exceed " STR(SMELT_MAX_KERNEL_OPERANDS) " operands",
    [SMELT__FUSE_SPLIT] = "the fused kernel failed to compile",
    [SMELT__FUSE_AFTER_REDUCE] = "after a reduction (not fused yet)",
    [SMELT__FUSE_EPI_INPUT] = "an epilogue's operand computed elementwise (not fused yet)",
    [SMELT__FUSE_DEAD] = "the reduction's result is never read",
    [SMELT__FUSE_ROWS] = "a row program needs reductions of one shape and axes, of at least " STR(SMELT_ROWS_MIN)
                         " rows (" STR(SMELT_ROWS_MIN_DEVICE) " on a GPU) or rows of at most " STR(SMELT_ROWS_MAX_LEN)
                         " elements, at most "
                         STR(SMELT_ROWS_MAX_GAP) " bytes of kept elements inside a row's elements (a softmax over "
                         "axis 0 of 64 f32 columns, not of 128), and a result without keepdims read only at the "
                         "results' shape",
};

static int find(pstate *s, int x)
{
    while (s->parent[x] != x) {
        s->parent[x] = s->parent[s->parent[x]];
        x = s->parent[x];
    }
    return x;
}

/* Sources and views are in no cluster: a kernel reads them (a view where
 * the value it views lies, written by the kernel that computes that). */
static bool is_op(const smelt__prog *p, int i)
{
    int c = smelt__ops[p->v[i].op].cls;
    return c != SMELT_CLASS_SOURCE && c != SMELT_CLASS_VIEW;
}
static bool fusible(const smelt__prog *p, int i)
{
    int c = smelt__ops[p->v[i].op].cls;
    return c == SMELT_CLASS_ELEMWISE || c == SMELT_CLASS_CAST || c == SMELT_CLASS_GATHER;
}

static bool in_set(pstate *s, int x, int ka, int kb)
{
    if (!is_op(s->p, x))
        return false;
    int r = find(s, x);
    return r == ka || r == kb;
}

/* The members of clusters ka and kc (roots, ka != kc), one after the other. */
#define FOR_MEMBERS(s, ka, kc, m) \
    for (int k_ = 0, m; k_ < 2; k_++) \
        for (m = (s)->head[k_ ? (kc) : (ka)]; m >= 0; m = (s)->next[m])

/* Would merging clusters ka and kc create a cycle between kernels: a path
 * that leaves the union and comes back to it?  A kernel runs after all of
 * its inputs, so a path that enters another cluster goes on from every
 * member of it, not only from the one it entered (two siblings of one
 * cluster need no path between them).  The search runs over kernels, not
 * instructions: each root (and each view, in no cluster) keeps the edges
 * out of its members in one list (ehead, enext, eto), an edge listed once
 * its consumer's turn has come (only instructions up to the one being
 * fused take part); a visit drops for good the edges that have become
 * internal to the kernel and those to a kernel already listed, so a value
 * read by thousands of consumers costs the distinct kernels they are in,
 * not its readers, each time a path crosses it. */
static bool visit(pstate *s, int r, int ka, int kc, int *sp, bool seed)
{
    unsigned tok = ++s->dtok;
    for (int e = s->ehead[r], prev = -1, nx; e >= 0; e = nx) {
        nx = s->enext[e];
        int y = s->eto[e], k = is_op(s->p, y) ? find(s, y) : y;
        if (k == r || s->dstamp[k] == tok) { /* internal, or a kernel already listed: dropped */
            if (prev < 0)
                s->ehead[r] = nx;
            else
                s->enext[prev] = nx;
            if (s->etail[r] == e)
                s->etail[r] = prev;
            continue;
        }
        s->dstamp[k] = tok;
        prev = e;
        if (k == ka || k == kc) {
            if (!seed)
                return true; /* back into the union */
            continue;        /* (an edge between the two: inside the union) */
        }
        if (s->stamp[k] != s->epoch) {
            s->stamp[k] = s->epoch;
            s->stack[(*sp)++] = k;
        }
    }
    return false;
}

static bool creates_cycle(pstate *s, int ka, int kc)
{
    int sp = 0;
    s->epoch++;
    visit(s, ka, ka, kc, &sp, true);
    visit(s, kc, ka, kc, &sp, true);
    while (sp)
        if (visit(s, s->stack[--sp], ka, kc, &sp, false))
            return true;
    return false;
}

/* The edges from x to its consumer i join the list of x's kernel (or of x,
 * a view); a source's are never followed (nothing reaches a source). */
static void add_edge(pstate *s, int x, int i)
{
    const smelt__prog *p = s->p;
    if (!is_op(p, x) && smelt__ops[p->v[x].op].cls == SMELT_CLASS_SOURCE)
        return;
    int r = is_op(p, x) ? find(s, x) : x, e = s->nedge++;
    s->eto[e] = i;
    s->enext[e] = -1;
    if (s->ehead[r] < 0)
        s->ehead[r] = e;
    else
        s->enext[s->etail[r]] = e;
    s->etail[r] = e;
}

/* Inputs + outputs of the union of clusters ka and kc, counting every user
 * not yet in the union as outside (conservative). */
static int operand_count(pstate *s, int ka, int kc)
{
    const smelt__prog *p = s->p;
    int count = 0;
    s->epoch++;
    FOR_MEMBERS(s, ka, kc, m) {
        for (int j = 0; j < p->v[m].nin; j++) {
            int x = p->v[m].in[j];
            if (p->v[x].op == SMELT_OP_CONST || in_set(s, x, ka, kc) || s->stamp[x] == s->epoch)
                continue;
            s->stamp[x] = s->epoch;
            count++;
        }
        bool out = p->v[m].is_output;
        for (int u = s->uoff[m]; u < s->uoff[m + 1] && !out; u++)
            out = !in_set(s, s->users[u], ka, kc);
        count += out;
    }
    return count;
}

/* Can the members of cluster kc (no reduction, fusible) join cluster kr,
 * which holds reduction r, as its epilogue: each after r, at r's result
 * shape, reading constants, members of kc, r and its epilogue (not its
 * producers), and inputs of the kernel read at the result's shape (by its
 * producers too only with keepdims: the result's rank, one set of strides
 * serves both)? */
static bool epi_ok(pstate *s, int kc, int kr)
{
    const smelt__prog *p = s->p;
    int r = s->redidx[kr];
    const smelt__inst *R = &p->v[r];
    for (int m = s->head[kc]; m >= 0; m = s->next[m]) {
        const smelt__inst *b = &p->v[m];
        if (m < r || !fusible(p, m) || b->ndim != R->ndim ||
            memcmp(b->shape, R->shape, sizeof(int64_t) * (size_t)b->ndim))
            return false;
        for (int j = 0; j < b->nin; j++) {
            int y = b->in[j], ky = is_op(p, y) ? find(s, y) : -1;
            if (p->v[y].op == SMELT_OP_CONST || ky == kc || (ky == kr && y >= r))
                continue;
            if (ky == kr)
                return false; /* a producer's value */
            if (R->keepdims)
                continue;
            if (s->uoff[y + 1] - s->uoff[y] <= 3 * s->size[kr]) {
                for (int u = s->uoff[y]; u < s->uoff[y + 1] && s->users[u] < r; u++) /* (in order) */
                    if (find(s, s->users[u]) == kr)
                        return false;
            } else /* a value read by many (an input of every layer): kr's members that read it */
                for (int q = s->head[kr]; q >= 0; q = s->next[q])
                    for (int t = 0; q < r && t < p->v[q].nin; t++)
                        if (p->v[q].in[t] == y)
                            return false;
        }
    }
    return true;
}

static bool same_shape(const smelt__inst *a, const smelt__inst *b)
{
    return a->ndim == b->ndim && !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim);
}

/* Whether b has the results' shape without keepdims, rn (rank nn; a
 * reduction with keepdims has another rank: nn < the operand's rank). */
static bool is_rn(const smelt__inst *b, int nn, const int64_t *rn)
{
    return b->ndim == nn && !memcmp(b->shape, rn, sizeof(int64_t) * (size_t)nn);
}

/* Whether every member of mem[0..n) that reads y (not a member) has the
 * results' shape without keepdims. */
static bool outside_read_by_rn_only(const smelt__prog *p, const int *mem, int n, int y, int nn, const int64_t *rn)
{
    for (int k = 0; k < n; k++) {
        const smelt__inst *c = &p->v[mem[k]];
        for (int i = 0; i < c->nin; i++)
            if (c->in[i] == y && (smelt__is_reduce(c->op) || !is_rn(c, nn, rn)))
                return false;
    }
    return true;
}

/* The form of a kernel of members mem[0..n): 0 none or one reduction with
 * its producers and an epilogue at its result's shape (the single form),
 * 1 a row program (smelt__kdesc.multi) that can run, -1 a row program that
 * cannot: every reduction over the same operand shape A and axes, enough
 * rows or short ones (rows_min), strided rows with at most
 * SMELT_ROWS_MAX_GAP bytes between their elements; every other member
 * fusible, of shape A or of the results' shape with or without keepdims
 * (the latter read only by their like, from inputs only they read). */
static int rows_form(const smelt__prog *p, const int *mem, int n, int rows_min)
{
    int r0 = -1, nred = 0;
    for (int j = 0; j < n; j++)
        if (smelt__is_reduce(p->v[mem[j]].op)) {
            nred++;
            r0 = r0 < 0 || mem[j] < r0 ? mem[j] : r0;
        }
    if (r0 < 0)
        return 0;
    const smelt__inst *R = &p->v[r0], *A = &p->v[R->in[0]];
    bool multi = nred > 1; /* (an indexed read: only a row program reads it with a reduction) */
    for (int j = 0; j < n; j++)
        multi = multi || (mem[j] > r0 && !same_shape(&p->v[mem[j]], R)) ||
                smelt__ops[p->v[mem[j]].op].cls == SMELT_CLASS_GATHER;
    if (!multi)
        return 0;
    /* the results' shapes: with keepdims (Rk) and without (Rn) */
    int nk = 0, nn = 0;
    int64_t rk[SMELT_MAX_DIMS], rn[SMELT_MAX_DIMS];
    smelt__red_shape(A->ndim, A->shape, R->axes, true, &nk, rk);
    smelt__red_shape(A->ndim, A->shape, R->axes, false, &nn, rn);
    if (nk == A->ndim && !memcmp(rk, A->shape, sizeof(int64_t) * (size_t)nk))
        return -1; /* (every reduced axis of size 1) */
    /* rows: the kept axes index them, the reduced ones their elements; a
     * kept axis inside the reduced ones makes each row strided: span / len
     * kept elements per element of a row (SMELT_ROWS_MAX_GAP) */
    int64_t rows = 1, len = 1, span = 0;
    for (int d = 0; d < A->ndim; d++) {
        if (A->shape[d] == 1)
            continue;
        if (R->axes >> d & 1u) {
            len *= A->shape[d];
            span = span ? span * A->shape[d] : A->shape[d];
        } else {
            rows *= A->shape[d];
            span = span ? span * A->shape[d] : 0;
        }
    }
    bool strided = len > 0 && span > len; /* (no element: an empty row is not strided) */
    if ((rows < rows_min && len > SMELT_ROWS_MAX_LEN) ||
        (strided && span / len * (int64_t)smelt__dtypes[A->dtype].size > SMELT_ROWS_MAX_GAP))
        return -1;
    for (int j = 0; j < n; j++) {
        const smelt__inst *b = &p->v[mem[j]];
        bool isk = b->ndim == nk && !memcmp(b->shape, rk, sizeof(int64_t) * (size_t)nk);
        if (smelt__is_reduce(b->op) ? b->axes != R->axes || !same_shape(&p->v[b->in[0]], A)
                                    : !fusible(p, mem[j]) || (!same_shape(b, A) && !isk && !is_rn(b, nn, rn)))
            return -1;
    }
    /* a value at the results' shape without keepdims (rank nn) lines up
     * with the kept axes: only such values read it, and what they read
     * from outside is read by them alone (one set of strides per operand) */
    for (int j = 0; j < n; j++) {
        const smelt__inst *b = &p->v[mem[j]];
        bool brn = is_rn(b, nn, rn) && !smelt__is_reduce(b->op);
        for (int i = 0; i < b->nin; i++) {
            int y = b->in[i];
            if (p->v[y].op == SMELT_OP_CONST)
                continue;
            bool member = false, yrn = is_rn(&p->v[y], nn, rn);
            if (!brn && !yrn)
                continue; /* (member or not: no objection; the search below is quadratic) */
            for (int k = 0; k < n && !member; k++)
                member = mem[k] == y;
            if (member ? yrn != brn : !brn ? false : !outside_read_by_rn_only(p, mem, n, y, nn, rn))
                return -1;
        }
    }
    return 1;
}

/* rows_form of the union of clusters ka and kc (roots, ka != kc). */
static int union_rows_form(pstate *s, int ka, int kc)
{
    int n = 0;
    FOR_MEMBERS(s, ka, kc, m)
        s->members[n++] = m;
    return rows_form(s->p, s->members, n, s->rows_min);
}

/* The iteration shape of instruction m: a reduction's is its operand's. */
static const smelt__inst *iter_shape(const smelt__prog *p, int m)
{
    return smelt__is_reduce(p->v[m].op) ? &p->v[p->v[m].in[0]] : &p->v[m];
}

/* Whether the union of clusters ka and kc (roots, ka != kc), when it holds
 * a reduction and reads pieces, can run once per piece: every member that
 * reads pieces iterates over the reduction's operand's shape, cut only
 * along kept axes (the executor then splits the results, not the rows). */
static bool pieces_fit(pstate *s, int ka, int kc)
{
    if (!(s->hasred[ka] || s->hasred[kc]) || !(s->pieces[ka] || s->pieces[kc]))
        return true;
    FOR_MEMBERS(s, ka, kc, m) {
        if (!s->pcut[m])
            continue;
        for (int k = 0; k < 2; k++) {
            int r = s->redidx[k ? kc : ka];
            if (r < 0)
                continue;
            const smelt__inst *A = &s->p->v[s->p->v[r].in[0]], *M = iter_shape(s->p, m);
            if (M->ndim != A->ndim || memcmp(M->shape, A->shape, sizeof(int64_t) * (size_t)A->ndim) ||
                (s->pcut[m] & s->p->v[r].axes))
                return false;
        }
    }
    return true;
}

/* Merge cluster kx into ki (roots). */
static void join(pstate *s, int kx, int ki)
{
    s->parent[kx] = ki;
    if (s->hasred[kx] && (!s->hasred[ki] || s->redidx[kx] < s->redidx[ki]))
        s->hasred[ki] = true, s->redidx[ki] = s->redidx[kx]; /* the first reduction */
    s->pieces[ki] = s->pieces[ki] || s->pieces[kx];
    s->size[ki] += s->size[kx];
    s->next[s->tail[ki]] = s->head[kx];
    s->tail[ki] = s->tail[kx];
    if (s->ehead[kx] >= 0) { /* kx's out-edges join ki's */
        if (s->ehead[ki] < 0)
            s->ehead[ki] = s->ehead[kx];
        else
            s->enext[s->etail[ki]] = s->ehead[kx];
        s->etail[ki] = s->etail[kx];
        s->ehead[kx] = s->etail[kx] = -1;
    }
}

/* Every fusion rule, for the edge from producer x (in cluster kx) to
 * consumer i (in ki), both operators: SMELT__FUSE to merge the two clusters
 * (or that they are one already), else the reason not to. */
/* Whether cluster k (a root) holds an indexed read */
static bool has_gather(pstate *s, int k)
{
    for (int m = s->head[k]; m >= 0; m = s->next[m])
        if (smelt__ops[s->p->v[m].op].cls == SMELT_CLASS_GATHER)
            return true;
    return false;
}

/* Whether the union of clusters ka and kc, holding a reduction and an
 * indexed read, may become a row program (on a CPU: rows_min) in which
 * every index is the same along the reduced axes: the kernel's passes read
 * an index once a row (src/codegen/emit-rows.c, smelt__rows_piece).  rows_form makes
 * any such union of one reduction a row program too (a reduction's own
 * kernel reads no index, smelt__emit). */
static bool gathers_fit(pstate *s, int ka, int kc, int rows)
{
    if (rows <= 0 || s->rows_min != SMELT_ROWS_MIN)
        return false;
    FOR_MEMBERS(s, ka, kc, m) {
        if (smelt__ops[s->p->v[m].op].cls != SMELT_CLASS_GATHER)
            continue;
        const smelt__inst *I = &s->p->v[s->p->v[m].in[1]];
        for (int k = 0; k < 2; k++) {
            int r = s->redidx[k ? kc : ka];
            if (r < 0)
                continue;
            const smelt__inst *A = &s->p->v[s->p->v[r].in[0]];
            for (int d = 0; d < A->ndim; d++) {
                int xd = d - (A->ndim - I->ndim);
                if ((s->p->v[r].axes >> d & 1u) && xd >= 0 && I->shape[xd] != 1)
                    return false;
            }
        }
    }
    return true;
}

static int should_fuse(pstate *s, int x, int i, int kx, int ki)
{
    const smelt__inst *a = &s->p->v[x], *b = &s->p->v[i];
    if (!s->fuse)
        return SMELT__FUSE_OFF;
    bool red = smelt__is_reduce(b->op);
    if (kx == ki)
        return SMELT__FUSE;
    if (smelt__ops[a->op].cls == SMELT_CLASS_LIBRARY || smelt__ops[b->op].cls == SMELT_CLASS_LIBRARY)
        return SMELT__FUSE_LIBRARY;
    if (!pieces_fit(s, kx, ki))
        return SMELT__FUSE_PIECES;
    int rows = s->hasred[kx] || s->hasred[ki] ? union_rows_form(s, kx, ki) : 0;
    if ((s->hasred[kx] || s->hasred[ki]) && (has_gather(s, kx) || has_gather(s, ki)) && !gathers_fit(s, kx, ki, rows))
        return SMELT__FUSE_GATHER;
    if (rows < 0)
        return SMELT__FUSE_ROWS;
    if (rows > 0) { /* a row program: the shapes checked, the common rules below */
        if (red && s->uoff[i + 1] == s->uoff[i] && !b->is_output)
            return SMELT__FUSE_DEAD;
        goto common;
    }
    /* the single form: a kernel holds one reduction; after it, an epilogue: elementwise
     * operators at the result's shape (epi_ok), run on each result as it
     * is produced */
    if (s->hasred[kx]) {
        if (red || s->hasred[ki])
            return SMELT__FUSE_AFTER_REDUCE;
        if (!fusible(s->p, i))
            return SMELT__FUSE_OPAQUE;
        const smelt__inst *R = &s->p->v[s->redidx[kx]];
        if (x < s->redidx[kx] || b->ndim != R->ndim || memcmp(b->shape, R->shape, sizeof(int64_t) * (size_t)b->ndim))
            return SMELT__FUSE_AFTER_REDUCE; /* a full-size consumer (the diamond) */
        if (!epi_ok(s, ki, kx))
            return SMELT__FUSE_EPI_INPUT;
    } else if (s->hasred[ki] && !red) { /* x's cluster into an epilogue */
        if (!fusible(s->p, x))
            return SMELT__FUSE_OPAQUE;
        if (!epi_ok(s, kx, ki))
            return SMELT__FUSE_EPI_INPUT;
    }
    if (!s->hasred[kx] && (!fusible(s->p, x) || (!red && !fusible(s->p, i))))
        return SMELT__FUSE_OPAQUE;
    /* (a reduction's producers have its operand's shape, its own differs) */
    if (!red && !s->hasred[kx] && (a->ndim != b->ndim || memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim)))
        return SMELT__FUSE_SHAPE;
    if (red && s->uoff[i + 1] == s->uoff[i] && !b->is_output)
        return SMELT__FUSE_DEAD; /* (kept at opt_level 0 only) */
common:
    if (s->size[kx] + s->size[ki] > SMELT_MAX_CLUSTER_OPS)
        return SMELT__FUSE_OPS;
    if (creates_cycle(s, kx, ki))
        return SMELT__FUSE_CYCLE;
    if (operand_count(s, kx, ki) > SMELT_MAX_KERNEL_OPERANDS)
        return SMELT__FUSE_OPERANDS;
    return SMELT__FUSE;
}

/* why[3 * i + j]: the reason input j of instruction i is not in i's kernel */
static int cluster_io(const smelt__prog *p, const int *uoff, const int *users, const uint8_t *why,
                      smelt__cluster *c, int *mark, int tag)
{
    /* mark[x] == tag: x is a member; == -tag: already listed as input */
    for (int k = 0; k < c->nmem; k++)
        mark[c->members[k]] = tag;
    size_t cap = (size_t)(c->nmem * 3 + 1);
    c->inputs = malloc((sizeof(int) + 1) * cap); /* c->why after the inputs: freed with them */
    c->why = (uint8_t *)(c->inputs + cap);
    c->outputs = malloc(sizeof(int) * (size_t)(c->nmem + 1));
    if (!c->inputs || !c->outputs)
        return SMELT_ERR_NOMEM;
    c->nin = c->nout = 0;
    for (int k = 0; k < c->nmem; k++) {
        const smelt__inst *in = &p->v[c->members[k]];
        for (int j = 0; j < in->nin; j++) {
            int x = in->in[j];
            /* constants are inlined, but a reduction reads its operand from
             * memory (the executor lays a constant out with strides 0) */
            if ((p->v[x].op == SMELT_OP_CONST && !smelt__is_reduce(in->op)) || mark[x] == tag || mark[x] == -tag)
                continue;
            mark[x] = -tag;
            c->why[c->nin] = why[3 * c->members[k] + j];
            c->inputs[c->nin++] = x;
        }
    }
    for (int k = 0; k < c->nmem; k++) {
        int m = c->members[k];
        bool out = p->v[m].is_output;
        for (int u = uoff[m]; u < uoff[m + 1] && !out; u++)
            out = mark[users[u]] != tag;
        if (out)
            c->outputs[c->nout++] = m;
    }
    /* a dead reduction or matrix product (kept at opt_level 0, which runs
     * every node: a gradient's graph leaves the forward's loss unread) still
     * writes its value, to an intermediate nobody reads: those kernels
     * have no form without an output */
    int last = c->nmem ? c->members[c->nmem - 1] : -1;
    if (!c->nout && last >= 0 && (smelt__is_reduce(p->v[last].op) || smelt__ops[p->v[last].op].cls == SMELT_CLASS_LIBRARY))
        c->outputs[c->nout++] = last;
    return SMELT_OK;
}

static int build_users(const smelt__prog *p, int **uoff_out, int **users_out)
{
    int *uoff = calloc((size_t)p->n + 1, sizeof(int));
    int total = 0;
    for (int i = 0; i < p->n; i++)
        total += p->v[i].nin;
    int *users = malloc(sizeof(int) * (size_t)(total + 1));
    int *fill = calloc((size_t)p->n + 1, sizeof(int));
    if (!uoff || !users || !fill) {
        free(uoff), free(users), free(fill);
        return SMELT_ERR_NOMEM;
    }
    for (int i = 0; i < p->n; i++)
        for (int j = 0; j < p->v[i].nin; j++)
            uoff[p->v[i].in[j] + 1]++;
    for (int i = 0; i < p->n; i++)
        uoff[i + 1] += uoff[i];
    for (int i = 0; i < p->n; i++)
        for (int j = 0; j < p->v[i].nin; j++) {
            int x = p->v[i].in[j];
            users[uoff[x] + fill[x]++] = i;
        }
    free(fill);
    *uoff_out = uoff;
    *users_out = users;
    return SMELT_OK;
}

void smelt__partition_free(smelt__partition *pt)
{
    for (int i = 0; i < pt->n; i++) {
        free(pt->c[i].members);
        free(pt->c[i].inputs);
        free(pt->c[i].outputs);
    }
    free(pt->c);
    memset(pt, 0, sizeof *pt);
}

/* Clusters from a root assignment, ordered so that producers come first. */
static int collect(const smelt__prog *p, const int *root, const int *uoff, const int *users,
                   const uint8_t *why, smelt__partition *out)
{
    int n = p->n, st = SMELT_ERR_NOMEM;
    int *cid = malloc(sizeof(int) * (size_t)(n + 1));
    int *mark = calloc((size_t)n + 1, sizeof(int));
    smelt__cluster *tmp = calloc((size_t)n + 1, sizeof *tmp);
    int nc = 0;
    int *indeg = NULL, *queue = NULL, *vstack = NULL;
    memset(out, 0, sizeof *out);
    if (!cid || !mark || !tmp)
        goto done;
    for (int i = 0; i < n; i++)
        cid[i] = -1;
    for (int i = 0; i < n; i++) /* count each cluster's members, then list them */
        if (root[i] >= 0) {
            if (cid[root[i]] < 0)
                cid[root[i]] = nc++;
            tmp[cid[root[i]]].nmem++;
        }
    for (int k = 0; k < nc; k++) {
        if (!(tmp[k].members = malloc(sizeof(int) * (size_t)tmp[k].nmem)))
            goto done;
        tmp[k].nmem = 0;
    }
    for (int i = 0; i < n; i++)
        if (root[i] >= 0) {
            smelt__cluster *c = &tmp[cid[root[i]]];
            c->members[c->nmem++] = i;
        }
    for (int k = 0; k < nc; k++)
        if (cluster_io(p, uoff, users, why, &tmp[k], mark, k + 1))
            goto done;
    /* Kahn's algorithm over cluster dependencies */
    indeg = calloc((size_t)nc + 1, sizeof(int));
    queue = malloc(sizeof(int) * (size_t)(nc + 1));
    vstack = malloc(sizeof(int) * (size_t)(n + 1));
    if (!indeg || !queue || !vstack)
        goto done;
    for (int i = 0; i < n; i++)
        mark[i] = 0;
    /* a cluster depends on the clusters that write the values its inputs
     * are (or view), one edge per such value */
    for (int k = 0; k < nc; k++)
        for (int j = 0; j < tmp[k].nin; j++) {
            int bases[SMELT_MAX_PARTS], nb = smelt__view_bases(p, tmp[k].inputs[j], bases);
            for (int i = 0; i < nb; i++) {
                int b = bases[i];
                if (root[b] >= 0 && mark[b] != -(k + 1)) {
                    mark[b] = -(k + 1);
                    indeg[k]++;
                }
            }
        }
    out->c = calloc((size_t)nc + 1, sizeof *out->c);
    if (!out->c)
        goto done;
    int head = 0, tail = 0;
    for (int k = 0; k < nc; k++)
        if (!indeg[k])
            queue[tail++] = k;
    for (int k = 0; k < nc; k++)
        mark[k] = 0; /* reused: last value that decremented cluster k */
    while (head < tail) {
        int k = queue[head++];
        out->c[out->n++] = tmp[k];
        for (int o = 0; o < tmp[k].nout; o++) {
            int v = tmp[k].outputs[o], sp = 0;
            vstack[sp++] = v;
            while (sp) /* v's users, and those of the views of it */
            for (int w = vstack[--sp], u = uoff[w]; u < uoff[w + 1]; u++) {
                int x = users[u];
                if (smelt__is_view(p->v[x].op))
                    vstack[sp++] = x;
                if (root[x] < 0)
                    continue;
                int kk = cid[root[x]];
                if (kk == k || mark[kk] == v + 1)
                    continue;
                mark[kk] = v + 1; /* one edge per (value, consumer cluster) */
                if (--indeg[kk] == 0)
                    queue[tail++] = kk;
            }
        }
    }
    st = out->n == nc ? SMELT_OK : SMELT_ERR_RUNTIME; /* a cycle: a partitioner bug */
    if (st == SMELT_OK)
        nc = 0; /* ownership moved to out */
done:
    if (st) { /* out's clusters are copies of tmp's: freed below, once */
        out->n = 0;
        smelt__partition_free(out);
    }
    for (int k = 0; k < nc; k++)
        free(tmp[k].members), free(tmp[k].inputs), free(tmp[k].outputs);
    free(tmp), free(cid), free(mark), free(indeg), free(queue), free(vstack);
    return st;
}

/* A DFS tree of the kernels (and views) over their out-edges, before the
 * sibling pass: pre-order numbers, the last number in each subtree, the
 * tree parent.  A kernel B below kernel A in the tree, not A's child, is
 * reached from A by a path through another kernel: merging the two would
 * create a cycle. */
static int kernel_tree(pstate *s, int *pre, int *last, int *tparent)
{
    const smelt__prog *p = s->p;
    int *cur = malloc(sizeof(int) * (size_t)(p->n + 1)), cnt = 0;
    if (!cur)
        return SMELT_ERR_NOMEM;
    for (int i = 0; i < p->n; i++)
        pre[i] = -1;
    for (int v0 = 0; v0 < p->n; v0++) {
        if ((is_op(p, v0) && find(s, v0) != v0) || pre[v0] >= 0)
            continue;
        int sp = 0;
        pre[v0] = cnt++, tparent[v0] = -1, cur[v0] = s->ehead[v0], s->stack[sp++] = v0;
        while (sp) {
            int v = s->stack[sp - 1], e = cur[v];
            if (e < 0) {
                last[v] = cnt - 1;
                sp--;
                continue;
            }
            cur[v] = s->enext[e];
            int y = s->eto[e], k = is_op(p, y) ? find(s, y) : y;
            if (pre[k] >= 0)
                continue; /* (k == v too) */
            pre[k] = cnt++, tparent[k] = v, cur[k] = s->ehead[k], s->stack[sp++] = k;
        }
    }
    free(cur);
    return SMELT_OK;
}

/* The first position at or after `from` whose key is not in (lo, hi]: a
 * segment tree of the keys' minimum (mn) and maximum (mx), leaves at w. */
static int seg_first(const int *mn, const int *mx, int node, int nl, int nr, int from, int lo, int hi)
{
    if (nr <= from || (mn[node] > lo && mx[node] <= hi))
        return -1;
    if (nr - nl == 1)
        return nl;
    int mid = (nl + nr) / 2, r = seg_first(mn, mx, 2 * node, nl, mid, from, lo, hi);
    return r >= 0 ? r : seg_first(mn, mx, 2 * node + 1, mid, nr, from, lo, hi);
}

static int by_pair(const void *a, const void *b)
{
    const int *x = a, *y = b;
    return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : (x[1] > y[1]) - (x[1] < y[1]);
}

/* siblings: kernels of reductions that read one value and no edge joins
 * (sum(x) and sum(x * x) of an input) read it once, as one row program,
 * where they make one.  Each value's users are tried in pairs, in order.
 * Only users in a kernel with a reduction take part: the others' kernels
 * never change here (both sides of a join hold one), so the pairs left out
 * could never join.  Pairs that the kernel tree shows on one path (a
 * residual stream's layers, each reading the same weights) are skipped
 * without a look, in bulk (a segment tree of the users' tree numbers): the
 * answer would be no, a cycle.  Kernels joined here lose that shortcut. */
static int siblings(pstate *s)
{
    const smelt__prog *p = s->p;
    int n = p->n, ne = 1, w = 1;
    for (int v = 0; v < n; v++) /* (the most users of one value) */
        ne = SMELT_MAX(ne, s->uoff[v + 1] - s->uoff[v]);
    while (w < ne)
        w *= 2;
    int *pre = malloc(sizeof(int) * (size_t)(n + 1)), *last = malloc(sizeof(int) * (size_t)(n + 1));
    int *tparent = malloc(sizeof(int) * (size_t)(n + 1)), *cand = malloc(sizeof(int) * (size_t)ne);
    int *mn = malloc(sizeof(int) * (size_t)(2 * w)), *mx = malloc(sizeof(int) * (size_t)(2 * w));
    int *grp = malloc(sizeof(int) * 2 * (size_t)ne);
    bool *joined = calloc((size_t)n + 1, sizeof(bool)); /* per root: joined in this pass */
    int st = pre && last && tparent && cand && mn && mx && grp && joined ? SMELT_OK : SMELT_ERR_NOMEM;
    if (!st)
        st = kernel_tree(s, pre, last, tparent);
    for (int v = 0; !st && v < n; v++) {
        int nc = 0;
        for (int u = s->uoff[v]; u < s->uoff[v + 1]; u++)
            if (is_op(p, s->users[u]) && s->hasred[find(s, s->users[u])])
                cand[nc++] = s->users[u];
        if (nc < 2)
            continue;
        /* keys: each user's kernel's tree number (-1: joined, always looked at) */
        int lw = 1;
        while (lw < nc)
            lw *= 2;
        for (int c = 0; c < lw; c++) {
            int k = c < nc ? find(s, cand[c]) : -1;
            mn[lw + c] = mx[lw + c] = k >= 0 && !joined[k] ? pre[k] : -1;
            if (c < nc)
                grp[2 * c] = k >= 0 && !joined[k] ? tparent[k] : -1, grp[2 * c + 1] = c;
        }
        for (int x = lw - 1; x >= 1; x--)
            mn[x] = SMELT_MIN(mn[2 * x], mn[2 * x + 1]), mx[x] = SMELT_MAX(mx[2 * x], mx[2 * x + 1]);
        qsort(grp, (size_t)nc, 2 * sizeof(int), by_pair); /* users by their kernel's tree parent */
        bool skip = true; /* no join yet among this value's users */
        for (int c1 = 0; c1 < nc; c1++) {
            int nx = -1, gi = -1; /* the next user outside, ka's next child in grp (while skip) */
            for (int c2 = c1 + 1; c2 < nc; c2++) {
                int ka = find(s, cand[c1]);
                if (skip && !joined[ka]) {
                    /* the next user whose kernel is neither ka nor below
                     * it in the tree, or is ka's child there */
                    if (nx < c2) {
                        nx = seg_first(mn, mx, 1, 0, lw, c2, pre[ka] - 1, last[ka]);
                        nx = nx < 0 || nx >= nc ? nc : nx;
                    }
                    if (gi < 0) { /* the first (ka, >= c2) in grp */
                        int lo = 0, hi = nc;
                        while (lo < hi) {
                            int mid = (lo + hi) / 2, key[2] = {ka, c2};
                            if (by_pair(&grp[2 * mid], key) < 0)
                                lo = mid + 1;
                            else
                                hi = mid;
                        }
                        gi = lo;
                    }
                    while (gi < nc && grp[2 * gi] == ka && grp[2 * gi + 1] < c2)
                        gi++;
                    c2 = SMELT_MIN(nx, gi < nc && grp[2 * gi] == ka ? grp[2 * gi + 1] : nc);
                    if (c2 >= nc)
                        break;
                }
                int kb = find(s, cand[c2]);
                bool tree_path = !joined[ka] && !joined[kb] &&
                                 ((pre[ka] < pre[kb] && pre[kb] <= last[ka] && tparent[kb] != ka) ||
                                  (pre[kb] < pre[ka] && pre[ka] <= last[kb] && tparent[ka] != kb));
                if (ka != kb && !tree_path && s->size[ka] + s->size[kb] <= SMELT_MAX_CLUSTER_OPS &&
                    pieces_fit(s, ka, kb) && union_rows_form(s, ka, kb) > 0 && !creates_cycle(s, ka, kb) &&
                    operand_count(s, ka, kb) <= SMELT_MAX_KERNEL_OPERANDS) {
                    join(s, ka, kb);
                    joined[kb] = true;
                    skip = false;
                }
            }
        }
    }
    free(pre), free(last), free(tparent), free(cand), free(mn), free(mx), free(grp), free(joined);
    return st;
}

int smelt__partition_build(const smelt__prog *p, bool fuse, int rows_min, smelt__partition *out)
{
    pstate s = {.p = p, .fuse = fuse, .rows_min = rows_min};
    int st = build_users(p, &s.uoff, &s.users);
    if (st)
        return st;
    s.parent = malloc(sizeof(int) * (size_t)(p->n + 1));
    s.stamp = calloc((size_t)p->n + 1, sizeof(int));
    s.stack = malloc(sizeof(int) * (size_t)(p->n + 1));
    s.size = malloc(sizeof(int) * (size_t)(p->n + 1));
    s.head = malloc(sizeof(int) * (size_t)(p->n + 1));
    s.tail = malloc(sizeof(int) * (size_t)(p->n + 1));
    s.next = malloc(sizeof(int) * (size_t)(p->n + 1));
    s.hasred = calloc((size_t)p->n + 1, sizeof(bool));
    s.pieces = calloc((size_t)p->n + 1, sizeof(bool));
    s.pcut = calloc((size_t)p->n + 1, sizeof(unsigned));
    s.redidx = malloc(sizeof(int) * (size_t)(p->n + 1));
    s.members = malloc(sizeof(int) * (size_t)(p->n + 1));
    int *root = malloc(sizeof(int) * (size_t)(p->n + 1));
    uint8_t *why = calloc((size_t)p->n + 1, 3);
    s.ehead = malloc(sizeof(int) * (size_t)(p->n + 1));
    s.etail = malloc(sizeof(int) * (size_t)(p->n + 1));
    s.dstamp = calloc((size_t)p->n + 1, sizeof(unsigned));
    s.enext = malloc(sizeof(int) * (size_t)(s.uoff[p->n] + 1));
    s.eto = malloc(sizeof(int) * (size_t)(s.uoff[p->n] + 1));
    if (!s.ehead || !s.etail || !s.dstamp || !s.enext || !s.eto || !s.parent || !s.stamp || !s.stack || !s.size || !s.head || !s.tail || !s.next || !s.hasred || !s.pieces || !s.pcut || !s.redidx || !s.members || !root || !why) {
        st = SMELT_ERR_NOMEM;
        goto done;
    }
    for (int i = 0; i < p->n; i++)
        s.ehead[i] = s.etail[i] = -1;
    for (int i = 0; i < p->n; i++)
        s.parent[i] = i, s.size[i] = 1, s.head[i] = s.tail[i] = i, s.next[i] = -1,
        s.hasred[i] = smelt__is_reduce(p->v[i].op), s.redidx[i] = s.hasred[i] ? i : -1;
    for (int i = 0; i < p->n; i++)
        for (int j = 0; is_op(p, i) && j < p->v[i].nin; j++) {
            int v = p->v[i].in[j], r = iter_shape(p, i)->ndim, d = r - p->v[v].ndim;
            if (!smelt__has_pieces(p, v))
                continue;
            unsigned c = smelt__pieces_axes(p, v); /* (right-aligned; a broadcast input has fewer axes) */
            s.pieces[i] = true;
            s.pcut[i] |= PCUT_READS | (d >= 0 ? c << d : ~0u);
        }
    for (int i = 0; i < p->n; i++) {
        for (int j = 0; j < p->v[i].nin; j++)
            add_edge(&s, p->v[i].in[j], i);
        for (int j = 0; j < p->v[i].nin; j++) { /* sources have no inputs */
            int x = p->v[i].in[j], kx = find(&s, x), ki = find(&s, i);
            if (!is_op(p, x) || (why[3 * i + j] = (uint8_t)should_fuse(&s, x, i, kx, ki)) || kx == ki)
                continue;
            join(&s, kx, ki);
        }
    }
    if (fuse && (st = siblings(&s)))
        goto done;
    for (int i = 0; i < p->n; i++)
        root[i] = is_op(p, i) ? find(&s, i) : -1;
    st = collect(p, root, s.uoff, s.users, why, out);
done:
    free(s.parent), free(s.stamp), free(s.stack), free(s.size), free(root), free(s.uoff), free(s.users);
    free(s.head), free(s.tail), free(s.next), free(s.hasred), free(s.pieces), free(s.pcut), free(s.redidx), free(s.members), free(why);
    free(s.ehead), free(s.etail), free(s.dstamp), free(s.enext), free(s.eto);
    return st;
}

int smelt__partition_split(const smelt__prog *p, const smelt__cluster *c, smelt__partition *out)
{
    memset(out, 0, sizeof *out); /* set on every path: the caller frees it */
    int *uoff, *users;
    int st = build_users(p, &uoff, &users);
    if (st)
        return st;
    int *root = malloc(sizeof(int) * (size_t)(p->n + 1));
    uint8_t *why = calloc((size_t)p->n + 1, 3);
    if (!root || !why) {
        free(uoff), free(users), free(root), free(why);
        return SMELT_ERR_NOMEM;
    }
    for (int i = 0; i < p->n; i++)
        root[i] = -1;
    for (int k = 0; k < c->nmem; k++)
        root[c->members[k]] = c->members[k];
    /* an edge inside c is cut by the failed compile; one into c keeps its reason */
    for (int k = 0; k < c->nmem; k++)
        for (int j = 0, m = c->members[k]; j < p->v[m].nin; j++) {
            int x = p->v[m].in[j];
            why[3 * m + j] = root[x] >= 0 ? SMELT__FUSE_SPLIT : 0;
            for (int t = 0; t < c->nin; t++)
                if (c->inputs[t] == x)
                    why[3 * m + j] = c->why[t];
        }
    /* only the members take part: users outside count as outside */
    st = collect(p, root, uoff, users, why, out);
    free(root), free(uoff), free(users), free(why);
    return st;
}

int smelt__red_member(const smelt__prog *p, const smelt__cluster *c)
{
    for (int j = 0; j < c->nmem; j++)
        if (smelt__is_reduce(p->v[c->members[j]].op))
            return j;
    return -1;
}

int smelt__red_count_members(const smelt__prog *p, const smelt__cluster *c)
{
    int n = 0;
    for (int j = 0; j < c->nmem; j++)
        n += smelt__is_reduce(p->v[c->members[j]].op);
    return n;
}

bool smelt__red_multi(const smelt__prog *p, const smelt__cluster *c)
{
    return rows_form(p, c->members, c->nmem, SMELT_ROWS_MIN) != 0; /* (the laxer rule: any row program) */
}

bool smelt__red_epi_input(const smelt__kdesc *d, int q)
{
    if (d->multi)
        return false;
    for (int k = d->reduce ? d->red + 1 : d->n_ops; k < d->n_ops; k++)
        for (int j = 0; j < d->ops[k].nin; j++)
            if (d->ops[k].in[j] == q)
                return true;
    return false;
}

void smelt__kdesc_free(smelt__kdesc *d)
{
    free(d->ops);
    d->ops = NULL;
}

/* Instruction index -> kernel value index for the few instructions a
 * cluster names: an open-addressing table of the cluster's size, not of the
 * program's (a plan of many small clusters stays linear). */
typedef struct vmap {
    int *key, *val, mask;
} vmap;

static int *vmap_slot(vmap *m, int key)
{
    for (unsigned h = (unsigned)key * 2654435761u;; h++) {
        int i = (int)(h & (unsigned)m->mask);
        if (m->key[i] < 0)
            m->key[i] = key, m->val[i] = -1;
        if (m->key[i] == key)
            return &m->val[i];
    }
}

int smelt__cluster_kdesc(const smelt__prog *p, const smelt__cluster *c, smelt__kdesc *d)
{
    memset(d, 0, sizeof *d);
    if (c->nin + c->nout > SMELT_MAX_KERNEL_OPERANDS)
        return SMELT_ERR_INVALID_ARG;
    int cap = 16;
    while (cap < 2 * (c->nin + c->nmem * 4 + 1))
        cap *= 2;
    vmap map = {malloc(sizeof(int) * (size_t)cap), malloc(sizeof(int) * (size_t)cap), cap - 1};
    d->ops = malloc(sizeof *d->ops * (size_t)(c->nmem * 4 + 1));
    if (!map.key || !map.val || !d->ops) {
        free(map.key), free(map.val);
        smelt__kdesc_free(d);
        return SMELT_ERR_NOMEM;
    }
    for (int i = 0; i < cap; i++)
        map.key[i] = -1;
    d->n_in = c->nin;
    d->multi = smelt__red_multi(p, c);
    int rj = smelt__red_member(p, c);
    for (int k = 0; k < c->nin; k++) {
        *vmap_slot(&map, c->inputs[k]) = k;
        d->in_dt[k] = p->v[c->inputs[k]].dtype;
    }
    for (int k = 0; k < c->nmem; k++) {
        const smelt__inst *in = &p->v[c->members[k]];
        smelt__kop op = {0};
        op.op = in->op;
        op.dtype = in->dtype;
        op.nin = in->nin;
        for (int j = 0; j < in->nin; j++) {
            int x = in->in[j], *v = vmap_slot(&map, x);
            if (*v < 0) { /* a constant, inlined */
                smelt__kop cst = {0};
                cst.op = SMELT_OP_CONST;
                cst.dtype = p->v[x].dtype;
                cst.fval = p->v[x].fval;
                cst.ival = p->v[x].ival;
                d->ops[d->n_ops] = cst;
                *v = d->n_in + d->n_ops++;
            }
            op.in[j] = *v;
        }
        if (smelt__ops[in->op].cls == SMELT_CLASS_GATHER) { /* a load of input in[0], its index's read at a row's start */
            d->gidx[op.in[0]] = (int8_t)(op.in[1] + 1);
            op.op = SMELT_OP_COPY;
            op.nin = 1;
        }
        if (smelt__is_reduce(in->op) && !d->reduce) {
            d->reduce = true;
            d->red = d->n_ops;
        }
        /* a row program's values at the results' shape (with or without
         * keepdims): the reductions' and every other not at their operand's */
        op.small = d->multi && (smelt__is_reduce(in->op) ||
                                (in->op != SMELT_OP_CONST && !same_shape(in, &p->v[p->v[c->members[rj]].in[0]])));
        d->ops[d->n_ops] = op;
        *vmap_slot(&map, c->members[k]) = d->n_in + d->n_ops++;
    }
    d->n_out = c->nout;
    for (int k = 0; k < c->nout; k++)
        d->out_val[k] = *vmap_slot(&map, c->outputs[k]);
    free(map.key), free(map.val);
    return SMELT_OK;
}
