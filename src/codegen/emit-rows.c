/* Row programs (several reductions and their row's work in one kernel):
 * their analysis, shared with the device form, and the C form
 * (src/codegen/emit.h). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"

/* A row program's inputs read by index: the row the next row's index names
 * is fetched into the cache (smelt_pf) while this row computes, as the
 * other inputs' next rows are; an index out of range fetches nothing (the
 * pass that reads it reports it).  gk: the template's flags. */
static void rows_gather_prefetch(smelt__sb *gpf, smelt__sb *gk, const smelt__kdesc *d)
{
    for (int k = 0, s = 0; k < d->n_in; k++) {
        smelt__sb_printf(gk, "%s%d", k ? ", " : "", d->gidx[k] ? 1 : 0);
        if (!d->gidx[k])
            continue;
        int q = d->gidx[k] - 1;
        smelt__sb_printf(gpf,
                         "        if (o + 1 < end && gpf[%d]) {\n"
                         "            const int64_t *const gxb = (const int64_t *)(const void *)ptrs[%d];\n"
                         "            const int64_t v = (int64_t)((const %s *)(const void *)ptrs[%d])[yn[%d]];\n"
                         "            const int64_t n = gxb[%d], w = v < 0 ? v + n : v;\n"
                         "            if (w >= 0 && w < n)\n"
                         "                pfs[npf] = insz[%d], pfp[npf++] = ptrs[%d] + (yn[%d] + w * gxb[%d]) * insz[%d];\n"
                         "        }\n",
                         k, d->n_in + d->n_out + 2, smelt__gather_index_type(d, q), q, q, SMELT_GX_SLOTS + 2 * s, k, k, k,
                         SMELT_GX_SLOTS + 2 * s + 1, k);
        s++;
    }
}

void smelt__rows_free(rows_info *ri) { free(ri->st), free(ri->avail), free(ri->slot), free(ri->piece), free(ri->cache_off); }

/* The full-size operators value v needs in pass p (rows_info.piece):
 * those no earlier pass computed; one that did is kept (the row cache). */
static void rows_assign(const smelt__kdesc *d, rows_info *ri, int v, int p)
{
    if (v < d->n_in || smelt__is_const(d, v) || d->ops[v - d->n_in].small || ri->piece[v - d->n_in] == p)
        return;
    int k = v - d->n_in;
    if (ri->piece[k] >= 0) {
        if (ri->cache_off[k] < 0) {
            ri->cache_off[k] = ri->cache_bytes;
            ri->cache_bytes += (int)smelt__dtypes[d->ops[k].dtype].size;
        }
        return;
    }
    ri->piece[k] = p;
    for (int j = 0; j < d->ops[k].nin; j++)
        rows_assign(d, ri, d->ops[k].in[j], p);
}

int smelt__rows_analyse(const smelt__kdesc *d, bool cache, rows_info *ri)
{
    int nv = d->n_in + d->n_ops;
    ri->nst = ri->nslot = ri->cache_bytes = 0;
    ri->cache = cache;
    ri->st = malloc(sizeof(int) * (size_t)(d->n_ops + 1));
    ri->avail = calloc((size_t)d->n_ops + 1, sizeof(int));
    ri->slot = malloc(sizeof(int) * (size_t)(nv + 1));
    ri->piece = malloc(sizeof(int) * (size_t)(d->n_ops + 1));
    ri->cache_off = malloc(sizeof(int) * (size_t)(d->n_ops + 1));
    if (!ri->st || !ri->avail || !ri->slot || !ri->piece || !ri->cache_off) {
        smelt__rows_free(ri);
        return SMELT_ERR_NOMEM;
    }
    for (int k = 0; k < d->n_ops; k++)
        ri->piece[k] = ri->cache_off[k] = -1;
    for (int v = 0; v < nv; v++)
        ri->slot[v] = -1;
    for (int k = 0; k < d->n_ops; k++) {
        const smelt__kop *op = &d->ops[k];
        if (smelt__is_reduce(op->op)) {
            ri->st[ri->nst] = k;
            ri->avail[k] = ++ri->nst;
            ri->slot[d->n_in + k] = ri->nslot++;
        } else if (op->small && op->op != SMELT_OP_CONST) {
            for (int j = 0; j < op->nin; j++)
                if (op->in[j] >= d->n_in && ri->avail[op->in[j] - d->n_in] > ri->avail[k])
                    ri->avail[k] = ri->avail[op->in[j] - d->n_in];
            ri->slot[d->n_in + k] = ri->nslot++;
        }
    }
    if (cache) {
        for (int s = 0; s < ri->nst; s++)
            rows_assign(d, ri, d->ops[ri->st[s]].in[0], s);
        for (int o = 0; o < d->n_out; o++) { /* (a stage writes the outputs it computes) */
            int v = d->out_val[o];
            if (v >= d->n_in && (d->ops[v - d->n_in].small || ri->piece[v - d->n_in] >= 0))
                continue;
            rows_assign(d, ri, v, ri->nst);
        }
        /* the kept values' places, the widest first: each one's nred
         * elements then start at a multiple of its element size (the slot
         * itself at a multiple of 64 bytes: the kernel template, exec.c) */
        int at = 0;
        for (int size = 8; size >= 1; size /= 2)
            for (int k = 0; k < d->n_ops; k++)
                if (ri->cache_off[k] >= 0 && (int)smelt__dtypes[d->ops[k].dtype].size == size) {
                    ri->cache_off[k] = at;
                    at += size;
                }
    }
    return SMELT_OK;
}

int smelt__rows_cache_bytes(const smelt__kdesc *d)
{
    rows_info ri = {0};
    if (!d->multi || smelt__rows_analyse(d, true, &ri))
        return 0;
    int n = ri.cache_bytes;
    smelt__rows_free(&ri);
    return n;
}

/* Mark the full-size operators value v needs (none past a scalar);
 * with the row cache, those of pass p. */
static void rows_closure(const smelt__kdesc *d, const rows_info *ri, int p, int v, bool *mine)
{
    if (v < d->n_in || smelt__is_const(d, v) || d->ops[v - d->n_in].small || mine[v - d->n_in] ||
        (ri->cache && ri->piece[v - d->n_in] != p))
        return;
    mine[v - d->n_in] = true;
    for (int j = 0; j < d->ops[v - d->n_in].nin; j++)
        rows_closure(d, ri, p, d->ops[v - d->n_in].in[j], mine);
}

/* The piece of kernel d that computes the operators mine marks (in order)
 * and outputs the values outs[0..nout): an elementwise kernel description
 * (ops allocated) whose input j reads value src[j] of d (a kernel input, or
 * a value computed outside the piece; value first, when >= 0, is input 0),
 * constants copied; modes left to the caller.  A row program's passes and
 * a reduction's epilogue are such pieces. */
int smelt__rows_piece(const smelt__kdesc *d, const bool *mine, const int *outs, int nout, int rank,
                      smelt__kdesc *pc, int *src, smelt__sb *err, int first)
{
    memset(pc, 0, sizeof *pc);
    int nv = d->n_in + d->n_ops, st = SMELT_OK;
    int *map = malloc(sizeof(int) * (size_t)(nv + 1));
    pc->ops = malloc(sizeof *pc->ops * (size_t)(d->n_ops + 1));
    if (!map || !pc->ops) {
        free(map), free(pc->ops);
        pc->ops = NULL;
        return SMELT_ERR_NOMEM;
    }
    for (int v = 0; v < nv; v++)
        map[v] = -1;
    if (first >= 0) { /* a value the caller wants as input 0 */
        map[first] = 0;
        src[0] = first;
        pc->in_dt[pc->n_in++] = smelt__value_dtype(d, first);
    }
    for (int k = 0; k < d->n_ops; k++) /* its inputs, by first use */
        for (int j = 0; mine[k] && j < d->ops[k].nin; j++) {
            int v = d->ops[k].in[j];
            if (map[v] >= 0 || smelt__is_const(d, v) || (v >= d->n_in && mine[v - d->n_in]))
                continue;
            if (pc->n_in == SMELT_MAX_KERNEL_OPERANDS) {
                st = SMELT_ERR_INVALID_ARG;
                break;
            }
            map[v] = pc->n_in;
            src[pc->n_in] = v;
            pc->in_dt[pc->n_in++] = smelt__value_dtype(d, v);
            int q = v < d->n_in ? d->gidx[v] - 1 : -1; /* an indexed read's index: an input too */
            if (q >= 0 && map[q] < 0 && pc->n_in < SMELT_MAX_KERNEL_OPERANDS) {
                map[q] = pc->n_in;
                src[pc->n_in] = q;
                pc->in_dt[pc->n_in++] = smelt__value_dtype(d, q);
            }
            if (q >= 0)
                pc->gidx[map[v]] = (int8_t)(map[q] + 1);
        }
    for (int k = 0; k < d->n_ops && !st; k++) {
        if (!mine[k])
            continue;
        smelt__kop op = d->ops[k];
        for (int j = 0; j < op.nin; j++) {
            int v = op.in[j];
            if (map[v] < 0) { /* a constant */
                pc->ops[pc->n_ops] = d->ops[v - d->n_in];
                map[v] = pc->n_in + pc->n_ops++;
            }
            op.in[j] = map[v];
        }
        op.small = false;
        pc->ops[pc->n_ops] = op;
        map[d->n_in + k] = pc->n_in + pc->n_ops++;
    }
    for (int o = 0; o < nout && !st; o++) {
        if (map[outs[o]] < pc->n_in)
            st = SMELT_ERR_INVALID_ARG;
        pc->out_val[o] = map[outs[o]];
    }
    pc->n_out = nout;
    pc->rank = rank;
    pc->idx32 = d->idx32;
    if (!st && pc->n_in + pc->n_out > SMELT_MAX_KERNEL_OPERANDS)
        st = SMELT_ERR_INVALID_ARG;
    free(map);
    if (st) {
        free(pc->ops);
        pc->ops = NULL;
        smelt__sb_printf(err, "a row program's pass needs more than %d operands", SMELT_MAX_KERNEL_OPERANDS);
    }
    return st;
}

/* Whether value v of row program d is read outside small piece t. */
static bool rows_read_outside(const smelt__kdesc *d, const rows_info *ri, int v, int t)
{
    for (int o = 0; o < d->n_out; o++)
        if (d->out_val[o] == v)
            return true;
    for (int k = 0; k < d->n_ops; k++)
        for (int j = 0; j < d->ops[k].nin; j++)
            if (d->ops[k].in[j] == v &&
                (!d->ops[k].small || smelt__is_reduce(d->ops[k].op) || ri->avail[k] != t))
                return true;
    return false;
}

/* The text with each whole word of names[0..n) followed by suffix. */
void smelt__rename_words(smelt__sb *out, const char *text, const char *const *names, int n, const char *suffix)
{
    for (const char *p = text; *p;) {
        int hit = -1;
        if (!smelt__ident_char(p > text ? p[-1] : ' '))
            for (int i = 0; i < n && hit < 0; i++) {
                size_t l = strlen(names[i]);
                if (!strncmp(p, names[i], l) && !smelt__ident_char(p[l]))
                    hit = i;
            }
        if (hit < 0) {
            smelt__sb_putn(out, p++, 1);
            continue;
        }
        smelt__sb_puts(out, names[hit]);
        smelt__sb_puts(out, suffix);
        p += strlen(names[hit]);
    }
}

const char *const smelt__red_def_names[6] = {"smelt_acc", "smelt_in", "smelt_out", "smelt_fold", "smelt_result",
                                            "smelt_conv"};

/* The operand table of a piece's call, name_p and name_s: the pointer and
 * strides (rank R) of each operand q, bound by bind[q] to a kernel operand
 * (>= 0), tmp (-1), the row's scalar -2 - bind[q] (strides 0) or its kept
 * value bind[q] - ROWS_KEPT (the row cache: contiguous over the reduced
 * dimensions, rbs); small: kernel operands at the row's offsets (set per
 * row, into row), strides 0. */
static void rows_call_setup(smelt__sb *setup, smelt__sb *row, const smelt__kdesc *d, const rows_info *ri,
                            const smelt__kdesc *pc, const int *bind, const char *name, int R, bool small,
                            const char *sv)
{
    int n = pc->n_in + pc->n_out;
    smelt__sb_printf(setup, "    char *%s_p[%d];\n    int64_t %s_s[%d];\n", name, n + 3, name, n * R);
    if (smelt__kdesc_gathers(pc)) /* the gather block (smelt__kdesc.gidx) */
        smelt__sb_printf(setup, "    %s_p[%d] = ptrs[%d];\n", name, n + 2, d->n_in + d->n_out + 2);
    for (int q = 0; q < n; q++) {
        int b = bind[q];
        if (b >= ROWS_KEPT)
            smelt__sb_printf(setup, "    %s_p[%d] = slot + (int64_t)%d * nred;\n", name, q,
                             ri->cache_off[b - ROWS_KEPT - d->n_in]);
        else if (b <= -2)
            smelt__sb_printf(setup, "    %s_p[%d] = (char *)&%s[%d];\n", name, q, sv, -2 - b);
        else if (b == -1)
            smelt__sb_printf(setup, "    %s_p[%d] = (char *)tmp;\n", name, q);
        else if (small)
            smelt__sb_printf(row, "        %s_p[%d] = ptrs[%d] + yo[%d] * %zu;\n", name, q, b, b,
                             smelt__dtypes[smelt__operand_dtype(pc, q)].size);
        else
            smelt__sb_printf(setup, "    %s_p[%d] = ptrs[%d];\n", name, q, b);
        for (int dd = 0; dd < R; dd++) {
            if (b >= ROWS_KEPT)
                smelt__sb_printf(setup, "    %s_s[%d] = rbs[%d];\n", name, q * R + dd, dd);
            else if (b <= -2 || small)
                smelt__sb_printf(setup, "    %s_s[%d] = 0;\n", name, q * R + dd);
            else if (b == -1)
                smelt__sb_printf(setup, "    %s_s[%d] = %d;\n", name, q * R + dd, dd == R - 1);
            else
                smelt__sb_printf(setup, "    %s_s[%d] = strides[%d];\n", name, q * R + dd, b * R + dd);
        }
    }
}

/* The binding (rows_call_setup) of value v of d read by a piece: a kernel
 * input, a kept value (the row cache), or a scalar. */
static int rows_bind(const smelt__kdesc *d, const rows_info *ri, int v)
{
    return v < d->n_in ? v : !d->ops[v - d->n_in].small ? ROWS_KEPT + v : -2 - ri->slot[v];
}

int smelt__rows_piece_of(const smelt__kdesc *d, const rows_info *ri, int kind, int t, bool *mine, int *outs,
                         int *nout, smelt__kdesc *pc, int *bind, smelt__sb *err)
{
    int nin = d->n_in, n = 0, ob[SMELT_MAX_KERNEL_OPERANDS], src[SMELT_MAX_KERNEL_OPERANDS];
    for (int k = 0; k < d->n_ops; k++)
        mine[k] = kind == ROWS_SMALL && d->ops[k].small && !smelt__is_reduce(d->ops[k].op) && ri->avail[k] == t;
    if (kind == ROWS_SMALL) {
        for (int k = 0; k < d->n_ops && n < SMELT_MAX_KERNEL_OPERANDS; k++)
            if (mine[k] && rows_read_outside(d, ri, nin + k, t))
                outs[n] = nin + k, ob[n] = rows_bind(d, ri, nin + k), n++;
    } else if (kind == ROWS_STAGE) {
        int x = d->ops[ri->st[t]].in[0];
        rows_closure(d, ri, t, x, mine);
        outs[n] = x, ob[n++] = ri->cache_off[x - nin] >= 0 ? ROWS_KEPT + x : -1; /* kept: the row cache, not tmp */
        for (int k = 0; k < d->n_ops && n < SMELT_MAX_KERNEL_OPERANDS; k++)
            if (mine[k] && ri->cache_off[k] >= 0 && nin + k != x)
                outs[n] = nin + k, ob[n++] = ROWS_KEPT + nin + k;
        for (int o = 0; o < d->n_out && n < SMELT_MAX_KERNEL_OPERANDS && ri->cache; o++)
            if (d->out_val[o] >= nin && mine[d->out_val[o] - nin])
                outs[n] = d->out_val[o], ob[n++] = nin + o;
    } else {
        for (int o = 0; o < d->n_out && n < SMELT_MAX_KERNEL_OPERANDS; o++) {
            int v = d->out_val[o];
            if (v >= nin && !d->ops[v - nin].small && (!ri->cache || ri->piece[v - nin] == ri->nst)) {
                rows_closure(d, ri, ri->nst, v, mine);
                outs[n] = v, ob[n++] = nin + o;
            }
        }
    }
    *nout = n;
    if (!n)
        return SMELT_OK;
    int st = smelt__rows_piece(d, mine, outs, n, kind == ROWS_SMALL ? 1 : d->rank, pc, src, err, -1);
    for (int q = 0; !st && q < pc->n_in; q++)
        bind[q] = rows_bind(d, ri, src[q]);
    for (int o = 0; !st && o < n; o++)
        bind[pc->n_in + o] = ob[o];
    return st;
}

/* The held form of a device row program (smelt__kdesc.spread >=
 * SMELT_SPREAD_HELD): the passes (stages 0..nst-1, then nst: the last)
 * that read each value, as first[v] .. last[v] (-1: none).  A kernel input
 * two passes read is held from its first; a kept value (rows_info.cache)
 * from the pass that computes it. */
int smelt__rows_held_spans(const smelt__kdesc *d, const rows_info *ri, int *first, int *last, smelt__sb *err)
{
    int nin = d->n_in, nv = nin + d->n_ops, st = SMELT_OK;
    bool *mine = malloc(sizeof(bool) * (size_t)(d->n_ops + 1));
    if (!mine)
        return SMELT_ERR_NOMEM;
    for (int v = 0; v < nv; v++)
        first[v] = last[v] = -1;
    for (int p = 0; p <= ri->nst && !st; p++) {
        int outs[SMELT_MAX_KERNEL_OPERANDS], bind[SMELT_MAX_KERNEL_OPERANDS], nout = 0, reads[SMELT_MAX_KERNEL_OPERANDS];
        int nr = 0;
        smelt__kdesc pc;
        int x = p < ri->nst ? d->ops[ri->st[p]].in[0] : -1;
        if (x >= 0 && (x < nin || ri->piece[x - nin] != p)) { /* a stage reducing an input or a kept value */
            reads[nr++] = x;
        } else if (!(st = smelt__rows_piece_of(d, ri, p < ri->nst ? ROWS_STAGE : ROWS_FINAL, p, mine, outs, &nout, &pc, bind,
                                        err)) && nout) {
            for (int q = 0; q < pc.n_in; q++)
                if (bind[q] >= ROWS_KEPT || (bind[q] >= 0 && bind[q] < nin))
                    reads[nr++] = bind[q] >= ROWS_KEPT ? bind[q] - ROWS_KEPT : bind[q];
            free(pc.ops);
        }
        for (int i = 0; i < nr; i++) {
            if (first[reads[i]] < 0)
                first[reads[i]] = p;
            last[reads[i]] = p;
        }
    }
    for (int k = 0; k < d->n_ops; k++)
        if (ri->cache_off[k] >= 0)
            first[nin + k] = ri->piece[k];
    free(mine);
    return st;
}

/* Whether value v (first[v] .. last[v], smelt__rows_held_spans) is held: a kept
 * value, or an input two passes read. */
bool smelt__rows_is_held(const smelt__kdesc *d, const rows_info *ri, const int *first, const int *last, int v)
{
    return v < d->n_in ? first[v] >= 0 && last[v] > first[v] : ri->cache_off[v - d->n_in] >= 0;
}

/* The held values' places in shared memory (the held form's elements past
 * those in registers): slot[v] (-1: not held), slots of one element size
 * each, at byte off[s] (per element of a lane: 32 times that per element a
 * lane keeps there).  A value takes the slot of one no later pass reads;
 * a value a piece computes, also of one its pass reads last if that pass
 * does not reduce it (rows_dev_piece reads a piece's held operands before
 * it writes; an input is loaded before the pass, rows_dev_preload);
 * returns the bytes per element of them all, -1 for too many. */
int smelt__rows_held_slots(const smelt__kdesc *d, const rows_info *ri, const int *first, const int *last, int *slot,
                           int *off)
{
    int nv = d->n_in + d->n_ops, ns = 0, size[SMELT_MAX_KERNEL_OPERANDS + 256], occ[SMELT_MAX_KERNEL_OPERANDS + 256];
    int bytes = 0;
    for (int v = 0; v < nv; v++)
        slot[v] = -1;
    for (int p = 0; p <= ri->nst; p++)
        for (int v = 0; v < nv; v++) {
            if (!smelt__rows_is_held(d, ri, first, last, v) || first[v] != p)
                continue;
            int sz = (int)smelt__dtypes[smelt__value_dtype(d, v)].size, x = p < ri->nst ? d->ops[ri->st[p]].in[0] : -1, s;
            for (s = 0; s < ns; s++)
                if (size[s] == sz && (last[occ[s]] < p || (last[occ[s]] == p && occ[s] != x && v >= d->n_in)))
                    break;
            if (s == ns) {
                if (ns == (int)(sizeof size / sizeof size[0]))
                    return -1;
                size[ns++] = sz;
            }
            occ[s] = v;
            slot[v] = s;
        }
    for (int s = 0; s < ns; s++) {
        off[s] = bytes;
        bytes += size[s];
    }
    return bytes;
}

int smelt__rows_held_bytes(const smelt__kdesc *d, bool *math, int *shared)
{
    rows_info ri = {0};
    *math = false;
    *shared = -1;
    for (int k = 0; k < d->n_ops; k++)
        *math = *math || (!d->ops[k].small && smelt__op_is_math(&smelt__ops[d->ops[k].op]));
    if (!d->multi || smelt__rows_analyse(d, true, &ri))
        return -1;
    int nv = d->n_in + d->n_ops, peak = 0;
    int *first = malloc(sizeof(int) * (size_t)(4 * nv + 1));
    smelt__sb err;
    smelt__sb_init(&err);
    if (!first || smelt__rows_held_spans(d, &ri, first, first + nv, &err))
        peak = -1;
    for (int b = 0; b < ri.nst && peak >= 0; b++) { /* between pass b and pass b + 1 */
        int bytes = 0;
        for (int v = 0; v < nv; v++)
            if (smelt__rows_is_held(d, &ri, first, first + nv, v) && first[v] <= b && first[nv + v] > b)
                bytes += (int)smelt__dtypes[smelt__value_dtype(d, v)].size;
        peak = SMELT_MAX(peak, bytes);
    }
    if (peak >= 0)
        *shared = smelt__rows_held_slots(d, &ri, first, first + nv, first + 2 * nv, first + 3 * nv);
    smelt__sb_free(&err);
    free(first);
    smelt__rows_free(&ri);
    return peak;
}

/* Copies of the row's scalars that are kernel outputs (at the row's offset). */
static void rows_out_copies(smelt__sb *b, const smelt__dialect *dl, const smelt__kdesc *d, const rows_info *ri,
                            int v, const char *ind)
{
    for (int o = 0; o < d->n_out; o++)
        if (d->out_val[o] == v) {
            const char *T = dl->stype[smelt__value_dtype(d, v)];
            smelt__sb_printf(b, "%s*(%s *)(void *)(ptrs[%d] + yo[%d] * (int64_t)sizeof(%s)) = *(const %s *)(const void *)&sv[%d];\n",
                             ind, T, d->n_in + o, d->n_in + o, T, T, ri->slot[v]);
        }
}

/* A piece's modes: inputs from kernel operands as the kernel reads them,
 * scalars broadcast, tmp contiguous, the final pass's outputs as the
 * kernel's (small pieces: every operand strided, rank 1). */
void smelt__rows_modes(const smelt__kdesc *d, smelt__kdesc *pc, const int *bind, bool small)
{
    for (int q = 0; q < pc->n_in + pc->n_out; q++)
        pc->mode[q] = small ? SMELT_MODE_STRIDED
                      : bind[q] >= ROWS_KEPT ? SMELT_MODE_CONTIG
                      : bind[q] <= -2 ? SMELT_MODE_BCAST
                      : bind[q] == -1 ? SMELT_MODE_CONTIG
                                      : d->mode[bind[q]];
}

int smelt__rows_check(const smelt__kdesc *d, smelt__sb *err)
{
    int R = d->rank;
    bool ok = d->multi && d->n_out >= 1 && (d->rmask >> (R - 1) & 1u);
    for (int dd = 0; ok && dd + 1 < R; dd++)
        ok = !(d->rmask >> dd & 1u) || (d->rmask >> (dd + 1) & 1u);
    if (!ok) {
        smelt__sb_puts(err, "a row program reduces its innermost dimensions (after merging)");
        return SMELT_ERR_INVALID_ARG;
    }
    return SMELT_OK;
}

/* A C row program as its text is built (smelt__shape_c_rows): the pieces'
 * functions (pre), the reductions' definitions (defs), the calls' set-up
 * and the row's body */
typedef struct c_rows {
    const smelt__dialect *dl;
    const smelt__kdesc *d;
    bool blocks;
    rows_info ri;
    bool *mine;
    int bind[SMELT_MAX_KERNEL_OPERANDS], outs[SMELT_MAX_KERNEL_OPERANDS];
    int R, nin, nfin, later, rrun, nr;
    int fq, fsz; /* the final pass's first output: its operand (-1 none) and element size */
    smelt__sb pre, defs, setup, body, what;
    smelt__sb *err;
} c_rows;

/* the final pass (the full-size outputs), smelt_f, reading the row's
 * scalars from svf, a copy: with rows of at most SMELT_ROWS_DEFER
 * elements (defer) it runs for row o during pass `later` of row o + 1,
 * a run at a time (Lf: that row's first element, -1 none), the first
 * pass that writes the row cache (before each run writes it, after the
 * final pass read it) or else the last; then on its own after the last
 * row.  The same values in a different order of stores. */
static int c_rows_final(c_rows *c)
{
    const smelt__kdesc *d = c->d;
    smelt__kdesc pc;
    int st;
    c->nfin = 0, c->later = c->ri.nst - 1;
    if (!(st = smelt__rows_piece_of(d, &c->ri, ROWS_FINAL, 0, c->mine, c->outs, &c->nfin, &pc, c->bind, c->err)) &&
        c->nfin) {
        smelt__rows_modes(d, &pc, c->bind, false);
        int b = c->bind[pc.n_in];
        if (b >= d->n_in && b < d->n_in + d->n_out) /* (always: a full-size output) */
            c->fq = b, c->fsz = (int)smelt__dtypes[smelt__operand_dtype(&pc, pc.n_in)].size;
        st = smelt__red_fn(c->dl, &pc, "smelt_f", c->blocks, false, &c->pre, c->err);
        rows_call_setup(&c->setup, &c->body, d, &c->ri, &pc, c->bind, "smelt_f", c->R, false, "svf");
        free(pc.ops);
    }
    for (int t = c->ri.nst - 1; t >= 0; t--)
        for (int k = 0; k < d->n_ops; k++)
            if (c->ri.piece[k] == t && c->ri.cache_off[k] >= 0)
                c->later = t;
    /* into a pass that computes a transcendental function too: with exp's
     * arithmetic as it was, that gained nothing (softmax 4096 x 4096 1.05x
     * and 0.99x the time); since smelt_exp_f32_w and the input pass in one
     * call, softmax 0.90x (0.895-0.922 in 7 rounds of 8, 1.008 in one),
     * log_softmax 0.97x and xent 1.00x (medians of 6; 2026-11-27,
     * 5232b27).  rmsnorm and layernorm, whose passes only
     * load and add: 19 % and 9 % faster. */
    if (c->blocks || !c->nfin) /* TinyCC's block form: the calls cost more (rmsnorm 7 % slower) */
        c->later = -1;
    return st;
}

/* small piece t: the values at the results' shape known before stage t */
static int c_rows_small(c_rows *c, int t)
{
    int nout = 0, st;
    char name[32];
    smelt__kdesc pc;
    snprintf(name, sizeof name, "smelt_s%d", t);
    if (!(st = smelt__rows_piece_of(c->d, &c->ri, ROWS_SMALL, t, c->mine, c->outs, &nout, &pc, c->bind, c->err)) &&
        nout) {
        smelt__rows_modes(c->d, &pc, c->bind, true);
        /* the loop form (CC): its inputs, one value each, broadcast
         * and its outputs contiguous, so that the piece computes its
         * value once (hoisted out of the group's loop) rather than a
         * padded group of 128 strided copies of it: the same
         * expression, the same bits.  With rows of 384 (embed_ln) the
         * group was ~8 % of the row program's time (perf, 2026-11-28) */
        for (int q = 0; q < pc.n_in + pc.n_out && !c->blocks; q++)
            pc.mode[q] = q < pc.n_in ? SMELT_MODE_BCAST : SMELT_MODE_CONTIG;
        st = smelt__red_fn(c->dl, &pc, name, c->blocks, false, &c->pre, c->err);
        rows_call_setup(&c->setup, &c->body, c->d, &c->ri, &pc, c->bind, name, 1, true, "sv");
        smelt__sb_printf(&c->body, "        %s(0, 1, %s_p, one, %s_s);\n", name, name, name);
        for (int o = 0; o < nout; o++)
            rows_out_copies(&c->body, c->dl, c->d, &c->ri, c->outs[o], "        ");
        free(pc.ops);
    }
    return st;
}

/* Stage t's producers (piece pc, its function name) and its lanes in one
 * loop, name_lanes, for the loop form (CC) with rows of one reduced
 * dimension: n elements (a multiple of 32, from lane 0) of the row from
 * column j + u, each computed by the group's statements into xv, stored
 * where the piece stores it (the row cache, a kernel output) and combined
 * into its lane as the lanes function combines it: the same values in
 * the same order, without the piece's walk (its divisions per call) and
 * the operand's round trip through tmp.  Its call's arguments into args;
 * false (nothing written) where the piece does not fit: an operand
 * strided or f16/bf16, the group's small-range forms or arrays, argmax or argmin,
 * a float max or min. */
static bool c_rows_fused(c_rows *c, const smelt__kdesc *pc, const red_kind *rk, const char *name, smelt__sb *args)
{
    const smelt__kdesc *d = c->d;
    const smelt__dialect *dl = c->dl;
    int nin = c->nin, n = pc->n_in + pc->n_out, X = pc->n_in;
    /* a float max or min: the lanes' integer keys (red_fast_minmax) beat
     * the exact compare-and-select step the loop would take (xent's third
     * pass, 4096 x 4096 f32 on 1 core: 1.04-1.16x the time) */
    bool keyed = (rk->op == SMELT_OP_MAX || rk->op == SMELT_OP_MIN) && (rk->acc == SMELT_F32 || rk->acc == SMELT_F64);
    if (c->blocks || c->nr != 1 || rk->arg || keyed || pc->n_out < 1 || smelt__operand_dtype(pc, X) != rk->in)
        return false;
    for (int k = 0; k < n; k++) {
        int b = c->bind[k];
        if ((pc->mode[k] != SMELT_MODE_CONTIG && pc->mode[k] != SMELT_MODE_BCAST) ||
            smelt__is_half(smelt__operand_dtype(pc, k)) || (b == -1 && k != X) ||
            (k >= pc->n_in && pc->mode[k] != SMELT_MODE_CONTIG))
            return false;
        if (k < pc->n_in && pc->gidx[k] && (c->bind[pc->gidx[k] - 1] < 0 || c->bind[pc->gidx[k] - 1] >= nin))
            return false;
    }
    smelt__sb body, consts, fn, sig;
    smelt__sb_init(&body), smelt__sb_init(&consts), smelt__sb_init(&fn), smelt__sb_init(&sig);
    bool plain = false;
    if (smelt__c_element(dl, pc, &body, &consts, &plain) || !plain) {
        smelt__sb_free(&body), smelt__sb_free(&consts), smelt__sb_free(&fn), smelt__sb_free(&sig);
        return false;
    }
    const char *A = dl->type[rk->acc], *XT = dl->stype[rk->in];
    bool keep = c->bind[X] != -1; /* the operand stored too (the row cache, a kernel output) */
    char gx[64];
    snprintf(gx, sizeof gx, "(int64_t *)(void *)ptrs[%d]", d->n_in + d->n_out + 2);
    for (int k = 0, s = 0; k < n; k++) {
        smelt_dtype dt = smelt__operand_dtype(pc, k);
        const char *T = dl->stype[dt], *cq = k < pc->n_in ? "const " : "";
        int b = c->bind[k];
        if (k == X && !keep)
            continue;
        if (pc->mode[k] == SMELT_MODE_BCAST)
            smelt__sb_printf(&sig, ", %s b%d", dl->type[dt], k);
        else
            smelt__sb_printf(&sig, ", %s%s *%s q%d", cq, T, dl->restrict_kw, k);
        /* the argument: the operand at the row's column j + u */
        char at[320] = "";
        if (k < pc->n_in && pc->gidx[k]) { /* an indexed read: the row its index names (smelt_gi, as the piece) */
            int iq = c->bind[pc->gidx[k] - 1];
            snprintf(at, sizeof at, " + smelt_gi((int64_t)((const %s *)(const void *)ptrs[%d])[yo[%d]], %s, %d) * (%s)[%d]",
                     smelt__gather_index_type(pc, pc->gidx[k] - 1), iq, iq, gx, s, gx, SMELT_GX_SLOTS + 2 * s + 1);
            s++;
        }
        if (b <= -2)
            smelt__sb_printf(args, ", *(const %s *)(const void *)&sv[%d]", T, -2 - b);
        else if (b >= ROWS_KEPT)
            smelt__sb_printf(args, ", (%s%s *)(%svoid *)(slot + (int64_t)%d * nred) + j + u", cq, T, cq,
                             c->ri.cache_off[b - ROWS_KEPT - nin]);
        else if (pc->mode[k] == SMELT_MODE_BCAST)
            smelt__sb_printf(args, ", ((const %s *)(const void *)ptrs[%d])[yo[%d]%s]", T, b, b, at);
        else
            smelt__sb_printf(args, ", (%s%s *)(%svoid *)ptrs[%d] + yo[%d]%s + j + u", cq, T, cq, b, b, at);
    }
    /* the group's statements, the operand into xv: one loop over the
     * lanes (with the operand in an array between two loops gcc kept
     * the lanes on the stack, a store and a load each step) */
    char from[32];
    snprintf(from, sizeof from, "q%d[j]", X);
    const char *bt = smelt__sb_str(&body);
    smelt__sb el;
    smelt__sb_init(&el);
    for (const char *h; (h = strstr(bt, from)); bt = h + strlen(from)) {
        smelt__sb_putn(&el, bt, (size_t)(h - bt));
        smelt__sb_puts(&el, "xv");
    }
    smelt__sb_puts(&el, bt);
    smelt__sb_printf(&fn, "static void %s_lanes(int64_t n, void *accp%s)\n{\n"
                          "    %s *restrict acc = (%s *)accp;\n%s"
                          "    %s v[32];\n"
                          "    for (int q = 0; q < 32; q++)\n"
                          "        v[q] = acc[q];\n"
                          "    for (int64_t i = 0; i < n; i += 32)\n"
                          "        for (int q = 0; q < 32; q++) {\n"
                          "            const int64_t j = i + q;\n"
                          "            %s xv;\n%s",
                     name, smelt__sb_str(&sig), A, A, smelt__sb_str(&consts), A, XT, smelt__sb_str(&el));
    if (keep)
        smelt__sb_printf(&fn, "            q%d[j] = xv;\n", X);
    smelt__red_step(&fn, dl, rk, "            ", "v[q]", "xv");
    smelt__sb_puts(&fn, "        }\n"
                        "    for (int q = 0; q < 32; q++)\n"
                        "        acc[q] = v[q];\n}\n");
    smelt__sb_puts(&c->defs, smelt__sb_str(&fn));
    bool oom = fn.oom || el.oom || sig.oom || args->oom;
    smelt__sb_free(&body), smelt__sb_free(&consts), smelt__sb_free(&fn), smelt__sb_free(&sig), smelt__sb_free(&el);
    return !oom;
}

/* pass t's share of fetching the next row: 1 for reading an input or the
 * row cache, 2 for computing its operand, 1 more for the pass the final
 * pass runs in (layernorm's mean, then its squares and the final pass:
 * a quarter of the next row in the first) */
static int rows_pass_weight(const c_rows *c, int t)
{
    int x = c->d->ops[c->ri.st[t]].in[0], nin = c->nin;
    bool kept = c->ri.cache && x >= nin && c->ri.piece[x - nin] != t;
    return (kept || x < nin ? 1 : 2) + (t == c->later);
}

/* stage t's operand, a run of rrun elements at a time (the lanes go on
 * where they stopped: the same order as one call).  The next row is
 * fetched meanwhile (smelt_pf), spread over the reductions' passes by
 * their weights (rows_pass_weight), a slice for each run; a row of one
 * run, all of it in the second pass.  (All of it in the second pass left
 * the memory idle while the first pass read the cached row, then queued
 * the whole next row's lines at once: 4096 x 4096 f32 on 2 threads,
 * 2026-11-29, layernorm's kernel 0.93x the time, log_softmax's 0.95x,
 * softmax's 0.98x.) */
static int c_rows_operand(c_rows *c, int t, int x, const char *lf, const char *sfx)
{
    const smelt__kdesc *d = c->d;
    smelt__sb *body = &c->body;
    int R = c->R, nin = c->nin, st = SMELT_OK;
    bool kept = c->ri.cache && x >= nin && c->ri.piece[x - nin] != t, input = !kept && x < nin;
    char step[32] = "1", name[32];
    if (input) { /* an input: read where it is */
        snprintf(step, sizeof step, "strides[%d]", x * R + R - 1);
        smelt__sb_printf(body, "                    int64_t off = yo[%d] + j * strides[%d];\n"
                               "                    for (int k = nr - 2; k >= 0; k--) {\n"
                               "                        const int64_t sz = shape[rd[k]], qq = q / sz;\n"
                               "                        off += (q - qq * sz) * strides[%d + rd[k]];\n"
                               "                        q = qq;\n                    }\n",
                         x, x * R + R - 1, x * R);
    } else {
        smelt__sb_puts(body, "                    (void)q;\n");
    }
    char pft[512] = "";
    if (c->ri.nst >= 2 && !c->blocks) { /* the next row's [Wt, Wt + wt) / W */
        int W = 0, Wt = 0, wt = rows_pass_weight(c, t); /* the passes' weights in all, before t, t's */
        for (int k = 0; k < c->ri.nst; k++)
            W += rows_pass_weight(c, k), Wt += k < t ? rows_pass_weight(c, k) : 0;
        snprintf(pft, sizeof pft,
                 "                        if (nred > %d) {\n"
                 "                            const int64_t p0 = (%d * nred + %d * (r + u)) / %d, p1 = (%d * nred + %d * (r + u + nb)) / %d;\n"
                 "                            smelt_pf(pfp, pfs, npf, p0, p1 - p0);\n"
                 "                        }%s\n",
                 c->rrun, Wt, wt, W, Wt, wt, W,
                 t == 1 ? " else\n                            smelt_pf(pfp, pfs, npf, r + u, nb);" : "");
    } else if (t == 1) /* TinyCC's (no fetch there; the same runs) */
        snprintf(pft, sizeof pft, "                        smelt_pf(pfp, pfs, npf, r + u, nb);\n");
    else if (t == 0 && c->ri.nst == 1 && c->later == 0)
        snprintf(pft, sizeof pft, "                        if (defer)\n"
                                  "                            smelt_pf(pfp, pfs, npf, r + u, nb);\n");
    const char *pf = pft;
    /* an input's pass that neither fetches nor stores in between: one
     * call a segment (the calls' set-up, 32 lanes in and out, cost the
     * softmax's max pass as much as its loads) */
    const int run = input && !*pf && t != c->later ? SMELT_RED_CHUNK : c->rrun;
    smelt__sb_printf(body, "                    for (int64_t u = 0; u < seg; u += %d) {\n"
                           "                        const int64_t nb = seg - u < %d ? seg - u : %d;\n"
                           "                        const int64_t a[3] = {%s, (r + u) & 31, r + u};\n%s",
                     run, run, run, step, pf);
    const int line = c->fq >= 0 ? 64 / c->fsz : 1; /* the output's elements a line */
    if (t == c->later) /* up to the end of this run at least, before it overwrites the row cache */
        smelt__sb_printf(body, "                        if (Lf >= 0 && fdone < r + u + nb) {\n"
                               "                            const int64_t f0 = fdone;\n"
                               "                            fdone = nred - f0 > %d ? f0 + %d : nred;\n"
                               "                            fdone = fdone < r + u + nb ? r + u + nb : fdone;\n"
                               "                            fdone = (fdone + Lfa + %d) / %d * %d - Lfa; /* a run ends on a line of the output */\n"
                               "                            fdone = fdone < nred ? fdone : nred;\n"
                               "                            smelt_f(Lf + f0, Lf + fdone, smelt_f_p, fsh, smelt_f_s);\n"
                               "                        }\n",
                         SMELT_ROWS_DEFER_RUN, SMELT_ROWS_DEFER_RUN, line - 1, line, line);
    if (kept) { /* kept by an earlier pass */
        smelt__sb_printf(body, "                        %s_row(nb, buf, (const smelt_in%s *)(const void *)(slot + (int64_t)%d * nred) + r + u, a);\n",
                         lf, sfx, c->ri.cache_off[x - nin]);
    } else if (input) {
        smelt__sb_printf(body, "                        %s_row(nb, buf, (const smelt_in%s *)(const void *)ptrs[%d] + off + u * a[0], a);\n",
                         lf, sfx, x);
    } else { /* computed by its producers */
        smelt__kdesc pc;
        int nout;
        snprintf(name, sizeof name, "smelt_p%d", t);
        if (!(st = smelt__rows_piece_of(d, &c->ri, ROWS_STAGE, t, c->mine, c->outs, &nout, &pc, c->bind, c->err))) {
            smelt__rows_modes(d, &pc, c->bind, false);
            st = smelt__red_fn(c->dl, &pc, name, c->blocks, false, &c->pre, c->err);
            rows_call_setup(&c->setup, body, d, &c->ri, &pc, c->bind, name, R, false, "sv");
            smelt__sb_puts(body, "                        const int64_t L = L0 + r + u;\n");
            /* the whole groups of 32 from lane 0 in the stage's own loop
             * (c_rows_fused), the rest (a row's last < 32) as below */
            smelt__sb fargs;
            smelt__sb_init(&fargs);
            red_kind rk = smelt__red_kind_of(d->ops[c->ri.st[t]].op, smelt__value_dtype(d, x));
            const char *f0 = "";
            if (c_rows_fused(c, &pc, &rk, name, &fargs)) {
                smelt__sb_printf(body, "                        const int64_t nf = (r + u) & 31 ? 0 : nb & ~(int64_t)31;\n"
                                       "                        if (nf)\n"
                                       "                            %s_lanes(nf, buf%s);\n"
                                       "                        if (nf < nb) {\n"
                                       "                        const int64_t af[3] = {1, (r + u + nf) & 31, r + u + nf};\n",
                                 name, smelt__sb_str(&fargs));
                f0 = " + nf";
            } else {
                smelt__sb_puts(body, "                        {\n"
                                     "                        const int64_t nf = 0, *const af = a;\n");
            }
            smelt__sb_free(&fargs);
            if (c->bind[pc.n_in] >= ROWS_KEPT) /* the operand into the row cache, read back from there */
                smelt__sb_printf(body, "                        %s(L%s, L + nb, %s_p, psh, %s_s);\n"
                                       "                        %s_row(nb - nf, buf, (const smelt_in%s *)(const void *)(slot + (int64_t)%d * nred) + r + u + nf, af);\n",
                                 name, f0, name, name, lf, sfx, c->ri.cache_off[x - nin]);
            else
                smelt__sb_printf(body, "                        %s_p[%d] = (char *)tmp - (j + u + nf) * (int64_t)sizeof(smelt_in%s);\n"
                                       "                        %s(L%s, L + nb, %s_p, psh, %s_s);\n"
                                       "                        %s_row(nb - nf, buf, tmp, af);\n",
                                 name, pc.n_in, sfx, name, f0, name, name, lf);
            smelt__sb_puts(body, "                        }\n");
            free(pc.ops);
        }
    }
    smelt__sb_puts(body, "                    }\n");
    smelt__sb_puts(body, "                    r += seg;\n                }\n");
    return st;
}

/* the lanes' tree into the row's total */
static void c_rows_fold(c_rows *c, bool arg, const char *sfx)
{
    smelt__sb *body = &c->body;
    if (c->blocks || arg) {
        smelt__sb_printf(body, "                for (int d = 16; d >= 1; d >>= 1)\n"
                               "                    for (int l = 0; l < d; l++)\n"
                               "                        smelt_fold%s(&acc[l], &acci[l], acc[l + d], acci[l + d]);\n"
                               "                smelt_fold%s(&tot, &toti, acc[0], acci[0]);\n",
                         sfx, sfx);
        return;
    }
    /* the same tree (lane l takes lane l + d, d = 16, 8, 4, 2, 1)
     * on a local copy of the lanes, each level a loop of constant
     * length that the compiler turns into vector operations (each
     * lane's fold as before: the same values); in place in buf it
     * stayed scalar, a chain through memory once per row and
     * reduction, which short rows (embed_ln: 384) feel */
    smelt__sb_printf(body, "                {\n"
                           "                    smelt_acc%s f[32];\n"
                           "                    int64_t fi = 0;\n"
                           "                    for (int l = 0; l < 32; l++)\n"
                           "                        f[l] = acc[l];\n",
                     sfx);
    for (int dd = 16; dd >= 1; dd /= 2)
        smelt__sb_printf(body, "                    for (int l = 0; l < %d; l++)\n"
                               "                        smelt_fold%s(&f[l], &fi, f[l + %d], 0);\n",
                         dd, sfx, dd);
    smelt__sb_printf(body, "                    smelt_fold%s(&tot, &toti, f[0], 0);\n"
                           "                }\n",
                     sfx);
}

/* stage t: its reduction over the row */
static int c_rows_stage(c_rows *c, int t)
{
    const smelt__kdesc *d = c->d;
    const smelt__dialect *dl = c->dl;
    int k = c->ri.st[t], x = d->ops[k].in[0];
    red_kind rk = smelt__red_kind_of(d->ops[k].op, smelt__value_dtype(d, x));
    char sfx[16], lf[SMELT_BLK_NAME_MAX + 16];
    snprintf(sfx, sizeof sfx, "_%d", t);
    smelt__sb one, ident;
    smelt__sb_init(&one), smelt__sb_init(&ident);
    smelt__red_defs(&one, dl, &rk, c->blocks);
    smelt__rename_words(&c->defs, smelt__sb_str(&one), smelt__red_def_names, NSLOTS(smelt__red_def_names), sfx);
    smelt__red_ident(&ident, dl, &rk);
    if (c->blocks) {
        smelt__red_prim_name(lf, sizeof lf, &rk);
        smelt__sb_printf(&c->defs, "void %s_row(" RED_LANES_ARGS ");\n", lf);
    } else {
        snprintf(lf, sizeof lf, "smelt_red%d", t);
        smelt__red_lanes(&c->defs, dl, &rk, lf, "static");
    }
    smelt__sb_printf(&c->what, "%s%s of %s", t ? ", " : "", smelt__ops[rk.op].name, smelt__dtypes[rk.in].name);
    const char *I = smelt__sb_str(&ident);
    smelt__sb_printf(&c->body, "        { /* reduction %d: %s of %s into %s (%s accumulators) */\n"
                               "            smelt_acc%s *acc = (smelt_acc%s *)(void *)buf, tot = %s;\n"
                               "            int64_t *acci = buf + 32 * %d, toti = 9223372036854775807LL;\n"
                               "            for (int64_t c = 0; c < nchunk; c++) {\n"
                               "                for (int l = 0; l < 32; l++) {\n"
                               "                    acc[l] = %s;\n"
                               "                    acci[l] = 9223372036854775807LL;\n                }\n"
                               "                int64_t r = c * %d;\n"
                               "                const int64_t rend = nred - r < %d ? nred : r + %d;\n"
                               "                while (r < rend) {\n"
                               "                    int64_t q = r / rlen;\n"
                               "                    const int64_t j = r - q * rlen, seg = rlen - j < rend - r ? rlen - j : rend - r;\n",
                     t, smelt__ops[rk.op].name, smelt__dtypes[rk.in].name, smelt__dtypes[rk.out].name,
                     smelt__dtypes[rk.acc].name, sfx, sfx, I, RED_W, I, SMELT_RED_CHUNK, SMELT_RED_CHUNK,
                     SMELT_RED_CHUNK);
    int st = c_rows_operand(c, t, x, lf, sfx);
    c_rows_fold(c, rk.arg, sfx);
    smelt__sb_printf(&c->body, "            }\n"
                               "            *(smelt_out%s *)(void *)&sv[%d] = smelt_result%s(tot, toti, nred);\n",
                     sfx, c->ri.slot[c->nin + k], sfx);
    rows_out_copies(&c->body, dl, d, &c->ri, c->nin + k, "            ");
    smelt__sb_puts(&c->body, "        }\n");
    if (t == c->later)
        smelt__sb_puts(&c->body, "        Lf = -1, fdone = 0;\n");
    smelt__sb_free(&one), smelt__sb_free(&ident);
    return st;
}

/* the final pass of this row: deferred, or now (tail: after the last row) */
static void c_rows_finish(c_rows *c, smelt__sb *tail)
{
    const smelt__kdesc *d = c->d;
    smelt__sb *body = &c->body;
    /* each slot copied at its value's type: the piece that computed
     * it stored that many bytes, and a wider (int64_t) load of them
     * waits for the store to reach the cache (a failed store forward,
     * seen in perf on embed_ln's rows of 384) */
    int nv = c->nin + d->n_ops;
    for (int v = c->nin; v < nv; v++)
        if (c->ri.slot[v] >= 0) {
            const char *T = c->dl->stype[smelt__value_dtype(d, v)];
            smelt__sb_printf(body, "        *(%s *)(void *)&svf[%d] = *(const %s *)(const void *)&sv[%d];\n", T,
                             c->ri.slot[v], T, c->ri.slot[v]);
        }
    smelt__sb_puts(body, "        if (defer)\n"
                         "            Lf = L0");
    if (c->fq >= 0) /* the deferred pass's runs end on the output's 64-byte lines (above): its
                     * streaming stores start at a line (c_stream, emit-loop.c) */
        smelt__sb_printf(body, ", Lfa = (int64_t)(((unsigned long)(ptrs[%d] + yo[%d] * %d) & 63) / %d)", c->fq, c->fq,
                         c->fsz, c->fsz);
    smelt__sb_puts(body, ";\n");
    if (c->later >= 0)
        smelt__sb_puts(tail, "    if (Lf >= 0)\n"
                             "        smelt_f(Lf, Lf + nred, smelt_f_p, fsh, smelt_f_s);\n");
    if (c->ri.nst == 1) /* no second pass: this one fetches the next row */
        smelt__sb_printf(body, "        else\n"
                               "            for (int64_t u = 0; u < nred; u += %d) {\n"
                               "                const int64_t nb = nred - u < %d ? nred - u : %d;\n"
                               "                smelt_pf(pfp, pfs, npf, u, nb);\n"
                               "                smelt_f(L0 + u, L0 + u + nb, smelt_f_p, fsh, smelt_f_s);\n"
                               "            }\n",
                         RED_PROD_BLOCK, RED_PROD_BLOCK, RED_PROD_BLOCK);
    else
        smelt__sb_puts(body, "        else\n"
                             "            smelt_f(L0, L0 + nred, smelt_f_p, fsh, smelt_f_s);\n");
}

/* C (both CPU tiers; TinyCC's pieces are of the block form and its lanes
 * the library's). */
int smelt__shape_c_rows(const smelt__dialect *dl, const smelt__kdesc *d, bool blocks, const char *prelude,
                        smelt__sb *text, smelt__sb *err)
{
    int st = smelt__rows_check(d, err), R = d->rank, nin = d->n_in, noper = nin + d->n_out, nk, nr, klast, rlast;
    c_rows c = {.dl = dl, .d = d, .blocks = blocks, .R = R, .nin = nin, .fq = -1, .fsz = 1, .err = err};
    if (st || (st = smelt__rows_analyse(d, true, &c.ri)))
        return st;
    c.mine = malloc(sizeof(bool) * (size_t)(d->n_ops + 1));
    smelt__sb kd, rd, insz;
    smelt__sb_init(&c.pre), smelt__sb_init(&c.defs), smelt__sb_init(&c.setup), smelt__sb_init(&c.body);
    smelt__sb_init(&kd), smelt__sb_init(&rd), smelt__sb_init(&c.what), smelt__sb_init(&insz);
    if (!c.mine)
        st = SMELT_ERR_NOMEM;
    if (!blocks)
        smelt__sb_puts(&c.pre, prelude);
    smelt__red_dims(d, &kd, &rd, &nk, &nr, &klast, &rlast);
    c.nr = nr;
    c.later = c.ri.nst - 1;
    c.rrun = blocks ? RED_PROD_BLOCK : SMELT_ROWS_RUN; /* a reduction's runs */
    if (!st)
        st = c_rows_final(&c);
    else if (blocks)
        c.later = -1;
    for (int t = 0; t <= c.ri.nst && !st; t++) {
        st = c_rows_small(&c, t);
        if (t == c.ri.nst || st)
            break;
        st = c_rows_stage(&c, t);
    }
    smelt__sb tail;
    smelt__sb_init(&tail);
    if (!st && c.nfin)
        c_rows_finish(&c, &tail);
    if (blocks && !c.pre.len)
        smelt__sb_puts(&c.pre, smelt__red_blocks_prelude);
    for (int q = 0; q < nin; q++)
        smelt__sb_printf(&insz, "%s%d", q ? ", " : "", (int)smelt__dtypes[d->in_dt[q]].size);
    smelt__sb gpf, gk;
    smelt__sb_init(&gpf), smelt__sb_init(&gk);
    rows_gather_prefetch(&gpf, &gk, d);
    const slot sl[] = {
        {"PRELUDE", smelt__sb_str(&c.pre)}, {"NAME", NAME_TOKEN}, {"NOPS", SLOT_NUM(smelt__red_nops(d))},
        {"NIN", SLOT_NUM(nin)}, {"INSZ", smelt__sb_str(&insz)}, {"PFMAX", SLOT_NUM(SMELT_ROWS_PREFETCH)},
        {"GK", smelt__sb_str(&gk)}, {"GPF", smelt__sb_str(&gpf)},
        {"NST", SLOT_NUM(c.ri.nst)}, {"WHAT", smelt__sb_str(&c.what)}, {"RANK", SLOT_NUM(R)}, {"NK", SLOT_NUM(nk)},
        {"NR", SLOT_NUM(nr)}, {"KD", smelt__sb_str(&kd)}, {"RD", smelt__sb_str(&rd)}, {"RLAST", SLOT_NUM(rlast)},
        {"CHUNK", SLOT_NUM(SMELT_RED_CHUNK)}, {"W", SLOT_NUM(RED_W)}, {"PB", SLOT_NUM(RED_PROD_BLOCK)},
        {"NSLOT", SLOT_NUM(c.ri.nslot ? c.ri.nslot : 1)}, {"NOPER", SLOT_NUM(noper)}, {"DEFS", smelt__sb_str(&c.defs)},
        {"CACHE", SLOT_NUM(c.ri.cache_bytes)}, {"DEFER", SLOT_NUM(c.later >= 0 ? SMELT_ROWS_DEFER : -1)},
        {"SETUP", smelt__sb_str(&c.setup)}, {"BODY", smelt__sb_str(&c.body)}, {"TAIL", smelt__sb_str(&tail)}};
    if (!st)
        st = smelt__load_render(text, dl, "kernel_rows", sl, NSLOTS(sl), err);
    smelt__sb_free(&c.pre), smelt__sb_free(&c.defs), smelt__sb_free(&c.setup), smelt__sb_free(&c.body);
    smelt__sb_free(&kd), smelt__sb_free(&rd), smelt__sb_free(&c.what), smelt__sb_free(&insz), smelt__sb_free(&tail);
    smelt__sb_free(&gpf), smelt__sb_free(&gk);
    free(c.mine);
    smelt__rows_free(&c.ri);
    return st;
}
