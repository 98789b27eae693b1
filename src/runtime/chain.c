/* Batch chains: a matrix product whose result only a row program reads,
 * whose result only another matrix product reads (attention's q k^T, its
 * softmax, then times v), run one matrix of the batch at a time on each
 * thread: the product's tiles, the row program over that matrix's rows,
 * the second product's tiles, the two intermediates in the thread's own
 * scratch, which stays in its cache, instead of the plan's memory.  The
 * same BLAS calls on the same tiles and the same row program on the same
 * rows as the kernels one after the other: the same bits (tests/test-chain.c);
 * what changes is that the intermediates (for attention [8, 16, 512, 64],
 * two of 128 MiB) never go to memory and back.  SMELT_BATCH_CHAINS: auto
 * (when a matrix of the intermediate fits a core's cache), 0 or 1. */
#include <stdlib.h>
#include <string.h>

#include "exec.h"

/* auto: a matrix of the intermediate at most this (two of them and the
 * row cache in a thread's cache), and the batch at least this many
 * matrices a thread */
#define CHAIN_MATRIX_MAX (1 << 20)
#define CHAIN_MATS_MIN 2

static bool in_cluster(const smelt__cluster *c, int v)
{
    for (int j = 0; j < c->nmem; j++)
        if (c->members[j] == v)
            return true;
    return false;
}

/* whether value v is read by members of c only, and is no output */
static bool read_only_by(const smelt__prog *pr, int v, const smelt__cluster *c)
{
    if (pr->v[v].is_output)
        return false;
    for (int i = 0; i < pr->nout; i++)
        if (pr->outputs[i] == v || (pr->out_base && pr->out_base[i] == v))
            return false;
    for (int i = 0; i < pr->n; i++)
        for (int j = 0; j < pr->v[i].nin; j++)
            if (pr->v[i].in[j] == v && !in_cluster(c, i))
                return false;
    return true;
}

/* Whether kernels ki .. ki + 2 have a batch chain's form (their shapes
 * aside): the first value (the product), the second (the row program's
 * result) and which operand of the second product reads it */
static bool chain_form(const smelt_plan *p, int ki, int *v0, int *v1, int *pos)
{
    if (ki + 2 >= p->nkern || p->be->iface->launch)
        return false;
    const smelt__pkernel *k0 = &p->kern[ki], *k1 = &p->kern[ki + 1], *k2 = &p->kern[ki + 2];
    const smelt__prog *pr = &p->prog;
    if (!k0->library || pr->v[k0->cl.members[0]].op != SMELT_OP_MATMUL || k0->cl.nout != 1 ||
        !k2->library || pr->v[k2->cl.members[0]].op != SMELT_OP_MATMUL || !k1->desc.reduce || !k1->desc.multi ||
        k1->gx || k1->cl.nout != 1)
        return false;
    *v0 = k0->cl.members[0];
    *v1 = k1->cl.outputs[0];
    const smelt__inst *x = &pr->v[k1->cl.members[smelt__red_member(pr, &k1->cl)]], *m2 = &pr->v[k2->cl.members[0]];
    const smelt__inst *a = &pr->v[*v0];
    if (x->axes != 1u << (a->ndim - 1) || a->ndim < 3 || (a->dtype != SMELT_F32 && a->dtype != SMELT_F64) ||
        pr->v[*v1].dtype != a->dtype)
        return false;
    bool reads = false;
    for (int o = 0; o < k1->cl.nin; o++)
        reads = reads || k1->cl.inputs[o] == *v0;
    *pos = m2->in[0] == *v1 ? 0 : m2->in[1] == *v1 ? 1 : -1;
    return reads && *pos >= 0 && m2->in[1 - *pos] != *v1 && m2->in[1 - *pos] != *v0 &&
           read_only_by(pr, *v0, &k1->cl) && read_only_by(pr, *v1, &k2->cl);
}

/* a matrix of view w (rank r of the chain's) laid out as rows of n elements */
static bool rows_of(const smelt__view *w, int r, int64_t n)
{
    return w->ndim == r && w->strides[r - 1] == 1 && w->strides[r - 2] == n;
}

typedef struct chainjob {
    smelt__mmjob *j0, *j2;
    smelt__rowcall rc;
    int pos, o0, o1, nb;
    const int64_t *bshape;
    char *base[SMELT_MAX_KERNEL_OPERANDS];
    int64_t bst[SMELT_MAX_KERNEL_OPERANDS][SMELT_MAX_DIMS]; /* the operands' batch strides (bytes) */
    char *scratch;
    size_t mat, per; /* an intermediate matrix's bytes (a multiple of 64); a thread's */
    int64_t mats, tasks;
} chainjob;

static void chain_task(void *arg, int64_t t)
{
    chainjob *c = arg;
    char *S = c->scratch + (size_t)t * c->per, *P = S + c->mat, *ptrs[SMELT_MAX_KERNEL_OPERANDS + 3];
    char *sub0[3] = {NULL, NULL, S}, *sub2[3] = {c->pos == 0 ? P : NULL, c->pos == 1 ? P : NULL, NULL};
    for (int64_t b = t; b < c->mats && !c->j0->st && !c->j2->st; b += c->tasks) {
        for (int64_t tile = 0; tile < c->j0->blocks; tile++)
            smelt__mm_tile(c->j0, b, tile, sub0);
        for (int o = 0; o < c->rc.n; o++) { /* the matrix b of every other operand */
            int64_t off = 0, q = b;
            for (int d = c->nb - 1; d >= 0 && o != c->o0 && o != c->o1; d--) {
                off += q % c->bshape[d] * c->bst[o][d];
                q /= c->bshape[d];
            }
            ptrs[o] = o == c->o0 ? S : o == c->o1 ? P : c->base[o] + off;
        }
        ptrs[c->rc.n] = P + c->mat, ptrs[c->rc.n + 1] = ptrs[c->rc.n + 2] = NULL;
        c->rc.fn(0, c->rc.rows, ptrs, c->rc.shape, c->rc.strides);
        for (int64_t tile = 0; tile < c->j2->blocks; tile++)
            smelt__mm_tile(c->j2, b, tile, sub2);
    }
}

/* Whether this run takes the chain (its shapes and layouts), and its job */
static int chain_setup(smelt_plan *p, runstate *rs, int ki, int v0, int v1, chainjob *c, bool *take, bool *split)
{
    static __thread smelt__view w[SMELT_MAX_KERNEL_OPERANDS];
    static __thread int64_t scr[SMELT_MAX_KERNEL_OPERANDS][SMELT_MAX_DIMS];
    const smelt__rshape *A = &p->rs[v0];
    int r = A->ndim, nb = r - 2;
    int64_t M = A->shape[nb], N = A->shape[nb + 1];
    size_t es = smelt__dtypes[p->prog.v[v0].dtype].size;
    *take = false;
    if (c->j0->nb != nb || c->j2->nb != nb || memcmp(c->j2->cshape, A->shape, sizeof(int64_t) * (size_t)nb) ||
        p->rs[v1].ndim != r || memcmp(p->rs[v1].shape, A->shape, sizeof(int64_t) * (size_t)r) ||
        !rows_of(&c->j0->w[2], r, N) || !rows_of(&c->j2->w[c->pos], r, N) || !M || !N)
        return SMELT_OK;
    int setting = p->settings->batch_chains;
    c->mat = ((size_t)(M * N) * es + 63) & ~(size_t)63;
    c->mats = c->j0->mats;
    int threads = smelt_ctx_threads(p->ctx);
    if (!setting || (setting < 0 && (c->mat > CHAIN_MATRIX_MAX || c->mats < CHAIN_MATS_MIN * threads)))
        return SMELT_OK;
    bool none, pieces;
    int st = smelt__reduce_views(p, rs, ki + 1, w, scr, &none, &pieces);
    if (st || none || pieces)
        return st;
    const smelt__pkernel *k1 = &p->kern[ki + 1];
    int n = k1->cl.nin + k1->cl.nout;
    c->o0 = c->o1 = -1;
    for (int o = 0; o < n; o++) {
        int v = o < k1->cl.nin ? k1->cl.inputs[o] : k1->cl.outputs[o - k1->cl.nin];
        c->o0 = v == v0 ? o : c->o0;
        c->o1 = v == v1 ? o : c->o1;
        /* the operands' batch strides: broadcast ones 0, results without keepdims
         * aligned with the kept axes (smelt__kernel_strides_box) */
        int lead = (k1->rn_operands >> o & 1u ? r - 1 : r) - w[o].ndim;
        size_t eo = smelt__dtypes[p->prog.v[v].dtype].size;
        for (int d = 0; d < nb; d++) {
            int od = d - lead;
            c->bst[o][d] = od < 0 || w[o].shape[od] == 1 ? 0 : w[o].strides[od] * (int64_t)eo;
        }
        c->base[o] = w[o].data;
    }
    if (c->o0 < 0 || c->o1 < 0 || !rows_of(&w[c->o0], r, N) || !rows_of(&w[c->o1], r, N))
        return SMELT_OK;
    /* the row program over one matrix: the box of the batch's dimensions 1 */
    int64_t box[SMELT_MAX_DIMS];
    for (int d = 0; d < r; d++)
        box[d] = d < nb ? 1 : A->shape[d];
    if ((st = smelt__rows_call(p, ki + 1, w, box, &c->rc, split)) || *split)
        return st;
    c->nb = nb;
    c->bshape = A->shape;
    c->tasks = SMELT_MIN((int64_t)threads, c->mats);
    c->per = 2 * c->mat + c->rc.slot; /* (each a multiple of 64 bytes) */
    smelt__pkernel *k0 = &p->kern[ki];
    if ((st = smelt__kernel_scratch(p, k0, c->per * (size_t)c->tasks)))
        return st;
    c->scratch = k0->scratch;
    *take = true;
    return SMELT_OK;
}

int smelt__run_chain(smelt_plan *p, runstate *rs, int ki, bool *ran, bool *split)
{
    static __thread smelt__mmjob j0, j2;
    static __thread chainjob c;
    int st;
    *ran = false;
    smelt__pkernel *k0 = &p->kern[ki];
    if (k0->chain < 0 || !p->settings->batch_chains)
        return SMELT_OK;
    if (!k0->chain) /* (the plan's form: once) */
        k0->chain = chain_form(p, ki, &k0->chain_v[0], &k0->chain_v[1], &k0->chain_v[2]) ? 1 : -1;
    if (k0->chain < 0)
        return SMELT_OK;
    int v0 = k0->chain_v[0], v1 = k0->chain_v[1], pos = k0->chain_v[2];
    if ((st = smelt__mm_setup(p, rs, ki, &j0)) || (st = smelt__mm_setup(p, rs, ki + 2, &j2)) || !j0.tasks ||
        !j2.tasks)
        return st;
    c.j0 = &j0, c.j2 = &j2, c.pos = pos;
    bool take;
    if ((st = chain_setup(p, rs, ki, v0, v1, &c, &take, split)) || !take)
        return st;
    if ((st = smelt__blas_check(p->ctx)))
        return st;
    smelt__blas_single_threaded();
    pthread_mutex_init(&j0.mu, NULL);
    pthread_mutex_init(&j2.mu, NULL);
    if (c.tasks <= 1) {
        chain_task(&c, 0);
    } else {
        if (!p->ctx->pool)
            p->ctx->pool = smelt__pool_new(smelt_ctx_threads(p->ctx));
        smelt__pool_run(p->ctx->pool, chain_task, &c, c.tasks);
    }
    pthread_mutex_destroy(&j0.mu);
    pthread_mutex_destroy(&j2.mu);
    *ran = true;
    return j0.st ? j0.st : j2.st;
}
