/* The launch layer: a kernel's iteration space and operand strides for the
 * operands a plan or a run gives it, and how a device runs it (the spread
 * of a reduction or a row program over warps and blocks, the tiles of an
 * elementwise kernel that reads transposed inputs).  plan.c and exec.c both
 * ask here; neither asks the other. */
#include <string.h>

#include "plan.h"

int smelt__kernel_strides(const smelt_plan *p, int ki, const smelt__view *w, int64_t *S,
                          int64_t (*st)[SMELT_MAX_DIMS], unsigned *mask)
{
    return smelt__kernel_strides_box(p, ki, w, NULL, S, st, mask);
}

int smelt__kernel_strides_box(const smelt_plan *p, int ki, const smelt__view *w, const int64_t *box, int64_t *S,
                              int64_t (*st)[SMELT_MAX_DIMS], unsigned *mask)
{
    const smelt__pkernel *k = &p->kern[ki];
    int nin = k->cl.nin, n = nin + k->cl.nout;
    *mask = 0;
    if (!k->desc.reduce || k->desc.multi) {
        /* the members' shape (a row program's: its reductions' operand's,
         * its kept axes first, then its reduced ones: the rows are what
         * the reduced axes index, wherever they lie in memory);
         * broadcast operands: strides 0 (right-aligned) */
        const smelt__rshape *S0 = &p->rs[k->cl.members[0]];
        unsigned axes = 0;
        if (k->desc.multi) {
            const smelt__inst *x = &p->prog.v[k->cl.members[smelt__red_member(&p->prog, &k->cl)]];
            S0 = &p->rs[x->in[0]];
            axes = x->axes;
        }
        int r = S0->ndim, perm[SMELT_MAX_DIMS], np = 0, nkept = 0;
        for (int pass = 0; pass < 2; pass++)
            for (int d = 0; d < r; d++)
                if ((axes >> d & 1u) == (unsigned)pass) {
                    *mask |= (unsigned)pass << np;
                    nkept += !pass;
                    perm[np++] = d;
                }
        for (int d = 0; d < r; d++)
            S[d] = box ? box[perm[d]] : S0->shape[perm[d]];
        for (int o = 0; o < n; o++) {
            /* a value at the results' shape without keepdims lines up with
             * the kept axes (d < nkept here), others with every axis */
            bool rn = k->rn_operands >> o & 1u;
            for (int d = 0; d < r; d++) {
                int xd = rn ? (d < nkept ? d - (nkept - w[o].ndim) : -1) : perm[d] - (r - w[o].ndim);
                st[o][d] = (xd < 0 || w[o].shape[xd] == 1) ? 0 : w[o].strides[xd];
            }
        }
        return r;
    }
    int ri = k->cl.members[smelt__red_member(&p->prog, &k->cl)];
    const smelt__inst *x = &p->prog.v[ri];
    *mask = x->axes;
    const smelt__rshape *A = &p->rs[x->in[0]], *Y = &p->rs[ri]; /* the operand's shape, the result's */
    for (int d = 0, od = 0; d < A->ndim; d++) {
        bool red = x->axes >> d & 1u;
        S[d] = box ? box[d] : A->shape[d];
        for (int o = 0; o < n; o++) {
            if (o >= nin ? k->cl.outputs[o - nin] >= ri : smelt__red_epi_input(&k->desc, o)) {
                /* at the result's shape (broadcast to it: right-aligned), along its kept axes */
                int xd = od - (Y->ndim - w[o].ndim);
                st[o][d] = red || xd < 0 || w[o].shape[xd] == 1 ? 0 : w[o].strides[xd];
                continue;
            }
            int xd = d - (A->ndim - w[o].ndim); /* broadcast inputs: stride 0 (right-aligned) */
            st[o][d] = (xd < 0 || w[o].shape[xd] == 1) ? 0 : w[o].strides[xd];
        }
        od += !red || x->keepdims;
    }
    return A->ndim;
}

/* A device reduction with fewer results than this spreads each result's
 * chunks over the warps (an H100 holds 8448 warps at once; a warp per
 * result leaves a full reduction of 64M elements to one warp: the mean of
 * (a - b) ** 2 over two 64M f32 vectors took 465 ms instead of 0.43) */
#define DEV_SPLIT_RESULTS 4096

/* A row program: held (SMELT_SPREAD_HELD + b + 16 c) when a lane's
 * elements fit the registers and shared memory allowed, else streaming
 * (0).  Columns (the kept dimensions innermost, nred >= 1024, 32 results
 * or more): a thread per (result, lane); a few long results: a warp per
 * (result, chunk); else a warp per result. */
uint16_t smelt__red_spread(const smelt_plan *p, int ki, int64_t nout, int64_t nred, int rank, uint8_t rmask)
{
    const smelt__devtarget *dev = p->be->iface->target.device;
    if (!p->be->iface->target.dialect->device || !dev)
        return 0;
    const int64_t W = dev->warp;
    if (p->kern[ki].desc.multi) { /* a row program: held when its rows fit (src/codegen/emit-rows-device.c, smelt__shape_device_rows) */
        const smelt__pkernel *k = &p->kern[ki];
        int b = 0, c = 0;
        while (b <= SMELT_HELD_MAX_LOG2 && (W << b) < nred)
            b++;
        if (nred < 1 || k->rows_held < 0 || k->rows_shared < 0 || b > SMELT_HELD_MAX_LOG2 ||
            __builtin_popcount(rmask) != 1)
            return 0;
        int most = k->rows_math ? SMELT_HELD_MATH_MAX_LOG2 : SMELT_HELD_REGS_MAX_LOG2;
        /* the block form: N warps (auto: SMELT_BLOCK_WARPS_AUTO where the
         * row fills them or the program has one reduction), fewer where a
         * lane would hold fewer than 2^SMELT_BLOCK_K_MIN_LOG2 elements; a
         * lane holds K = nred / (W N) (W lanes a warp), rounded up (rows of 4100: 17
         * elements a lane, where 32, the next power of 2, took rmsnorm's
         * kernel to 90 registers against 46 at 4096) */
        int w = __builtin_ctz((unsigned)(p->rows_warps ? p->rows_warps : SMELT_BLOCK_WARPS_AUTO));
        while (w > 0 && nred <= (W << w) * ((1 << SMELT_BLOCK_K_MIN_LOG2) - 1))
            w--;
        /* by default a program of more reductions takes only blocks its rows
         * fill, the most warps that do (rows of 960: 2 warps of 15) */
        while (!p->rows_warps && k->rows_stages != 1 && w > 0 && nred % (W << w))
            w--;
        int64_t K = w ? (nred + (W << w) - 1) / (W << w) : 0;
        bool exact = K * (W << w) == nred; /* the row fills its blocks */
        /* and a reduction's operands, computed before the warps fold them in turn: 8 bytes at most */
        if (w && K <= (1 << most) && K <= (1 << SMELT_BLOCK_K_MAX_LOG2) && (k->rows_held + 8) * K <= p->rows_held_max)
            return smelt__held_block(w, (int)K, exact);
        /* registers: the most elements a lane, a power of 2, within the bytes allowed */
        while (c <= b && c <= most &&
               ((int64_t)k->rows_held << c) <= p->rows_held_max)
            c++;
        int64_t kr = c ? (int64_t)1 << (c - 1) : 0, shared = ((int64_t)1 << b) - kr;
        int64_t bytes = shared * W * k->rows_shared; /* a warp's shared memory */
        if (shared && (p->rows_shared == 0 || bytes > SMELT_MIN(SMELT_ROWS_SHARED_MAX, dev->shared_bytes) ||
                       (p->rows_shared < 0 && (!k->rows_math || bytes > SMELT_ROWS_SHARED_AUTO))))
            return 0;
        return (uint16_t)(SMELT_SPREAD_HELD + b + 16 * c);
    }
    if (rank >= 1 && !(rmask >> (rank - 1) & 1u) && nred >= 1024 && nout >= W)
        return SMELT_SPREAD_COLS;
    return nred > SMELT_RED_CHUNK && nout < DEV_SPLIT_RESULTS ? SMELT_SPREAD_CHUNKS : 0;
}

/* Whether an input with strides sto (elements of es bytes) is read
 * transposed: in order along dimension q, its elements 64 bytes apart or
 * more along the innermost pd (each a cache line or memory sector of its
 * own), so that a tile packs or stages it (the CPU's launch_tiles, the
 * GPU's smelt__device_tile) */
bool smelt__read_transposed(const int64_t *sto, int q, int pd, size_t es)
{
    return (sto[q] == 1 || sto[q] == -1) && (sto[pd] < 0 ? -sto[pd] : sto[pd]) * (int64_t)es >= 64;
}

/* A device elementwise kernel's tiles (src/codegen/devlaunch.h,
 * SMELT_SPREAD_TILE) over merged shape S: the inputs read transposed along
 * a dimension q before the innermost (a warp's loads along the innermost
 * would each take a memory sector of their own; 4096 x 4096 f32 a.T + b
 * ran at 38 % of an H100's copy), as many as SMELT_TILE_SHARED_MAX holds;
 * 0: no tiles */
uint16_t smelt__device_tile(const smelt__pkernel *k, int rank, const int64_t *S, int64_t (*st)[SMELT_MAX_DIMS],
                            const uint8_t *mode)
{
    int pd = rank - 1;
    if (rank < 2 || S[pd] < SMELT_TILE || k->desc.reduce)
        return 0;
    for (int q = 0; q < pd; q++) {
        unsigned mask = 0;
        size_t bytes = 0;
        if (S[q] < SMELT_TILE)
            continue;
        for (int o = 0; o < k->cl.nin && o < SMELT_TILE_MAX_IN; o++) {
            size_t es = smelt__dtypes[k->desc.in_dt[o]].size, tb = (size_t)SMELT_TILE * (SMELT_TILE + 1) * es;
            if (mode[o] == SMELT_MODE_STRIDED && smelt__read_transposed(st[o], q, pd, es) && bytes + tb <= SMELT_TILE_SHARED_MAX)
                mask |= 1u << o, bytes += tb;
        }
        if (mask)
            return (uint16_t)(SMELT_SPREAD_TILE + (q << SMELT_TILE_Q_SHIFT) + mask);
    }
    return 0;
}


/* The grid of a device reduction or row program of nout results of nred
 * elements each in form spread (smelt__red_spread): a warp per result (a
 * block per row in the block form), or a warp per (result, chunk), or a
 * lane per (result, chunk) in groups of a warp's width of results; *part,
 * the bytes of chunk results and *ncnt the counters a spread one needs in
 * device memory (0: none). */
void smelt__red_grid(const smelt_plan *p, int ki, uint16_t spread, int64_t nout, int64_t nred, smelt__devlaunch *dl,
                     size_t *part, int64_t *ncnt)
{
    const smelt__pkernel *k = &p->kern[ki];
    const int64_t W = p->be->iface->target.device->warp; /* a device backend's (smelt__red_spread chose spread) */
    dl->n = nout * W;
    *part = 0, *ncnt = 0;
    if (k->desc.multi)
        dl->steps = p->rows_steps;
    if (k->desc.multi && spread >= SMELT_SPREAD_BLOCK) { /* a block per row */
        dl->block = (int)W * smelt__held_warps(spread);
        dl->n = nout * dl->block;
    }
    int64_t nchunk = (nred + SMELT_RED_CHUNK - 1) / SMELT_RED_CHUNK;
    if (spread && !k->desc.multi) { /* a warp per (result, chunk); per (W results, chunk, lane) */
        int64_t ngroup = (nout + W - 1) / W, warps = spread == SMELT_SPREAD_COLS ? ngroup * nchunk * W : nout * nchunk;
        *part = (size_t)warps * (spread == SMELT_SPREAD_COLS ? (size_t)W : 1) * 16;
        *ncnt = spread == SMELT_SPREAD_COLS ? ngroup : nout;
        dl->n = warps * W;
    }
}

/* A host kernel with indexed reads reads each index once a row
 * (smelt__row_offsets, src/codegen/emit.c): where an index changes along the
 * innermost dimension, a dimension of size 1 goes after it (rows of one
 * element).  The new rank, -1 when there is no room. */
int smelt__gather_rows(const smelt__pkernel *k, int rank, int64_t *S, int n, int64_t (*st)[SMELT_MAX_DIMS],
                       uint8_t *mode)
{
    bool varies = false;
    for (int q = 0; q < k->cl.nin; q++)
        varies = varies || (k->desc.gidx[q] && st[k->desc.gidx[q] - 1][rank - 1] != 0);
    if (!varies)
        return rank;
    if (rank >= SMELT_MAX_DIMS)
        return -1;
    S[rank] = 1;
    for (int o = 0; o < n; o++) {
        st[o][rank] = 1;
        mode[o] = SMELT_MODE_CONTIG;
    }
    return rank + 1;
}
