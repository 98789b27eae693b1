/* Row programs on a device: the CUDA form (a warp or more a row, the row
 * held in registers and shared memory; src/codegen/emit.h). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"

/* The held form's index of the lane's element j of kernel operand q (mode
 * m) from its pointer bq<q> (rows_dev_bases), in warps of L lanes. */
static void held_index(char *o, size_t n, int m, int q, int L)
{
    if (m == SMELT_MODE_STRIDED)
        snprintf(o, n, "%d * j * sq%d", L, q);
    else if (m == SMELT_MODE_BCAST)
        snprintf(o, n, "0");
    else
        snprintf(o, n, "%d * j", L);
}

/* The held form's elements of a lane: j < kr in registers (kc<v>[j],
 * loops unrolled: indexed by constants), the rest in shared memory
 * (kcs<v>[L (j - kr)], the warp's slice of its slot); part: which. */
typedef struct rows_held {
    int K, kr; /* elements a lane holds, of them in registers */
    bool *in;  /* per kernel input: held */
    int part;  /* 0: registers, 1: shared memory (the loop being emitted) */
    int W;     /* warps a row spans (the block form: > 1; its elements from wb on, rows_dev_bases) */
    bool exact; /* the block form: the row fills the block (no element tested against its end) */
    int L;      /* lanes a warp (the target's) */
} rows_held;

/* Whether part p of the held form h has elements (the streaming form, h
 * NULL: its one loop, p 0) */
static bool held_part(const rows_held *h, int p)
{
    return !h ? p == 0 : p ? h->kr < h->K : h->kr > 0;
}

static void held_ref(char *o, size_t n, const rows_held *h, int v)
{
    if (h->part)
        snprintf(o, n, "kcs%d[%d * (j - %d)]", v, h->L, h->kr);
    else
        snprintf(o, n, "kc%d[j]", v);
}

/* The inputs of piece pc that are the row's scalars (bit q: bind[q] <= -2). */
static uint64_t rows_uniform(const smelt__kdesc *pc, const int *bind)
{
    uint64_t m = 0;
    for (int q = 0; q < pc->n_in && q < 64; q++)
        if (bind[q] <= -2)
            m |= (uint64_t)1 << q;
    return m;
}

/* Whether piece pc has a division smelt__fast_div takes; if so, the flag
 * smelt_dok declared, true where each such division's divisor lies in the
 * range smelt_divr_f32 needs (once a row). */
static bool rows_fast_divs(smelt__sb *b, const smelt__dialect *dl, const smelt__kdesc *pc, const int *bind)
{
    ectx e = {.d = pc, .divq = "", .uni = rows_uniform(pc, bind)};
    bool any = false;
    for (int k = 0; k < pc->n_ops; k++) {
        if (!smelt__fast_div(&e, k))
            continue;
        int v = pc->ops[k].in[1];
        smelt__sb_puts(b, any ? " &&\n            smelt_divr_ok(" : "        int smelt_dok = smelt_divr_ok(");
        if (v < pc->n_in)
            smelt__sb_printf(b, "sv%d", -2 - bind[v]);
        else
            smelt__literal(b, dl, &pc->ops[v - pc->n_in]);
        smelt__sb_puts(b, ")");
        any = true;
    }
    if (any)
        smelt__sb_puts(b, ";\n");
    return any;
}

/* One element of a piece on a device, in its own scope: operand q named
 * q<q> at offset o<q> (rows_call_setup's bindings: a kernel operand at
 * off[] (full) or xo[] (small), the row's scalar sv<slot>, or tmp, the
 * local array rt; in the held form (h) a kept value v, or a kernel input v
 * that h->in marks, is the lane's element j of it (held_ref), read into a
 * local first: a value written here may take the place of one read here);
 * its constants, loads, operators and stores. */
static int rows_dev_piece(smelt__sb *b, const smelt__dialect *dl, const smelt__kdesc *pc, const int *bind, int kin,
                          bool small, const char *ind, const rows_held *h, const char *divq)
{
    int nv = pc->n_in + pc->n_ops, n = pc->n_in + pc->n_out;
    int *uses = calloc((size_t)(3 * nv + 1), sizeof(int));
    bool *inl = calloc((size_t)(nv + 1), sizeof(bool));
    if (!uses || !inl) {
        free(uses), free(inl);
        return SMELT_ERR_NOMEM;
    }
    smelt__plan_inlining(pc, uses, inl, uses + nv, uses + 2 * nv);
    smelt__sb_printf(b, "%s{\n", ind);
    uint64_t ldg = 0; /* the kernel's inputs read from memory here */
    for (int q = 0; q < n; q++) {
        const char *T = dl->stype[smelt__operand_dtype(pc, q)], *c = q < pc->n_in ? "const " : "";
        int kv = bind[q] >= ROWS_KEPT ? bind[q] - ROWS_KEPT : bind[q] >= 0 && h && h->in[bind[q]] ? bind[q] : -1;
        if (kv < 0 && q < pc->n_in && q < 64 && bind[q] >= 0 && bind[q] < kin)
            ldg |= (uint64_t)1 << q;
        char r[48];
        if (kv >= 0)
            held_ref(r, sizeof r, h, kv);
        if (kv >= 0 && q < pc->n_in)
            smelt__sb_printf(b, "%s    const %s h%d = %s, *q%d = &h%d;\n%s    const smelt_idx o%d = 0;\n", ind, T, q, r, q,
                             q, ind, q);
        else if (kv >= 0)
            smelt__sb_printf(b, "%s    %s *q%d = &%s;\n%s    const smelt_idx o%d = 0;\n", ind, T, q, r, ind, q);
        else if (bind[q] <= -2)
            smelt__sb_printf(b, "%s    %s%s *q%d = &sv%d;\n%s    const smelt_idx o%d = 0;\n", ind, c, T, q, -2 - bind[q],
                             ind, q);
        else if (bind[q] == -1)
            smelt__sb_printf(b, "%s    %s *q%d = rt;\n%s    const smelt_idx o%d = 0;\n", ind, T, q, ind, q);
        else if (h && !small) { /* the held form: the lane's pointer into the row (rows_dev_bases) */
            char o[48];
            held_index(o, sizeof o, pc->mode[q], bind[q], h->L);
            smelt__sb_printf(b, "%s    %s%s *%s q%d = (%s%s *)bq%d;\n%s    const smelt_idx o%d = %s;\n", ind,
                             c, T, dl->restrict_kw, q, c, T, bind[q], ind, q, o);
        } else
            smelt__sb_printf(b, "%s    %s%s *%s q%d = (%s%s *)%sptrs[%d];\n%s    const smelt_idx o%d = %s[%d];\n",
                             ind, c, T, dl->restrict_kw, q, c, T, dl->args, bind[q], ind, q, small ? "xo" : "off",
                             bind[q]);
    }
    for (int i = 0; i < pc->n_ops; i++)
        if (pc->ops[i].op == SMELT_OP_CONST) {
            smelt__sb_printf(b, "%s    const %s v%d = ", ind, dl->type[pc->ops[i].dtype], pc->n_in + i);
            smelt__literal(b, dl, &pc->ops[i]);
            smelt__sb_puts(b, ";\n");
        }
    /* read through the read-only cache: a kernel's inputs are not written while it runs (an output in place
     * of one writes each element after its thread's reads of it), so the compiler may send these loads
     * ahead of the stores before them (layernorm's last pass: the 16 elements' w and b a lane together,
     * where each pair of loads waited behind the previous element's store; the same registers) */
    ectx e = {dl, pc, uses, inl, -1, FORM_OFFSET, false, false, ldg, divq, rows_uniform(pc, bind), NULL, NULL};
    smelt__emit_lane(b, &e);
    smelt__sb_printf(b, "%s}\n", ind);
    free(uses), free(inl);
    return SMELT_OK;
}

/* The loop over a row's elements that lane holds in a pass: the streaming
 * form's r = c0 + lane, + L, ... < c1 (a chunk; L lanes a warp); the held form's
 * elements r = lane + L j of the part h->part, those below nred (the
 * first K / 2 are in every row: the compiler drops their test); unrolled
 * for registers (their arrays indexed by constants), else by 16 for loads
 * (load: rows_dev_preload: a lane's loads go out 16 at a time; all at once,
 * they would take as many registers) and by 8 (loads of inputs a pass
 * reads alone). */
static void rows_dev_loop(smelt__sb *b, const rows_held *h, int L, const char *c0, const char *c1, const char *ind,
                          bool load)
{
    if (!h) {
        smelt__sb_printf(b, "%sfor (smelt_idx r = %s + lane; r < %s; r += %d) {\n%s    {\n", ind, c0, c1, L, ind);
        return;
    }
    smelt__sb_printf(b, "%s#pragma unroll%s\n", ind, !h->part ? "" : load ? " 16" : " 8");
    if (h->W > 1) /* the block form: every warp's elements may pass the row's end, unless exact */
        smelt__sb_printf(b, "%sfor (int j = 0; j < %d; j++) {\n"
                            "%s    const smelt_idx r = wb + (smelt_idx)(lane + %d * j);\n%s    if (%s) {\n",
                         ind, h->K, ind, L, ind, h->exact ? "true" : "j < jn");
    else
        smelt__sb_printf(b, "%sfor (int j = %d; j < %d; j++) {\n"
                            "%s    const smelt_idx r = (smelt_idx)(lane + %d * j);\n%s    if (j < %d || r < nred) {\n",
                         ind, h->part ? h->kr : 0, h->part ? h->K : h->kr, ind, L, ind, h->K / 2);
}

/* The held form (one reduced dimension): each kernel operand's pointer to
 * the lane's first element of the row, bq<q>, and its stride along the row
 * sq<q> (elements; strided operands): element j of the lane is at
 * bq<q>[L j] (contiguous), bq<q>[0] (broadcast) or bq<q>[L j sq<q>], an
 * offset the compiler folds into the load. */
static void rows_dev_bases(smelt__sb *b, const smelt__dialect *dl, const smelt__kdesc *d, const char *ind, int W)
{
    for (int q = 0; q < d->n_in + d->n_out; q++) {
        const char *T = dl->stype[smelt__operand_dtype(d, q)], *c = q < d->n_in ? "const " : "";
        if (d->mode[q] == SMELT_MODE_STRIDED)
            smelt__sb_printf(b, "%sconst smelt_idx sq%d = a.strides[%d];\n", ind, q, q * d->rank + d->rank - 1);
        smelt__sb_printf(b, "%s%s%s *%s const bq%d = (%s%s *)%sptrs[%d] + xo[%d]", ind, c, T, dl->restrict_kw, q, c, T,
                         dl->args, q, q);
        if (d->mode[q] == SMELT_MODE_CONTIG)
            smelt__sb_puts(b, W > 1 ? " + wb + lane" : " + lane");
        else if (d->mode[q] == SMELT_MODE_STRIDED)
            smelt__sb_printf(b, W > 1 ? " + (wb + (smelt_idx)lane) * sq%d" : " + (smelt_idx)lane * sq%d", q);
        smelt__sb_printf(b, ";\n%s(void)bq%d;\n", ind, q);
    }
}

/* The held form: the kernel inputs h->in marks and first read in pass p,
 * from memory into their arrays, in loops of their own before the pass's,
 * so that a lane's loads go out together. */
static void rows_dev_preload(smelt__sb *b, const smelt__dialect *dl, const smelt__kdesc *d, rows_held *h,
                             const int *first, int p, const char *ind)
{
    bool any = false;
    for (int v = 0; v < d->n_in; v++)
        any = any || (h->in[v] && first[v] == p);
    for (h->part = 0; any && h->part < 2; h->part++) {
        if (!held_part(h, h->part))
            continue;
        rows_dev_loop(b, h, h->L, "", "", ind, true);
        for (int v = 0; v < d->n_in; v++)
            if (h->in[v] && first[v] == p) {
                char o[48], r[48];
                held_index(o, sizeof o, d->mode[v], v, h->L);
                held_ref(r, sizeof r, h, v);
                smelt__sb_printf(b, "%s        %s = ((const %s *)bq%d)[%s];\n", ind, r, dl->stype[d->in_dt[v]], v, o);
            }
        smelt__sb_printf(b, "%s    }\n%s}\n", ind, ind);
    }
    h->part = 0;
}

/* Whether a reduction's fold gives the same bits in any grouping (it is
 * associative, and its identity is one): max and min (NaN first, payload
 * and all; zeros by their sum: +0 wins a max, -0 a min), argmax and argmin
 * (the first of the best: the left operand wins ties), any, all, and
 * integer accumulators (sums and products wrap) - not floating-point
 * sums and products. */
static bool red_any_grouping(const red_kind *rk)
{
    return rk->op == SMELT_OP_MAX || rk->op == SMELT_OP_MIN || rk->op == SMELT_OP_ARGMAX || rk->op == SMELT_OP_ARGMIN ||
           rk->op == SMELT_OP_ANY || rk->op == SMELT_OP_ALL || !smelt__is_float(rk->acc);
}

/* The block form: a lane's fold of its K elements of the warp (exact: all in
 * the row).  mm: a max or min of floats (fmaxf, fminf, fmax or fmin; else
 * NULL) folds them by that function, one instruction, and a NaN test, and
 * keeps the result unless an element was a NaN or the result is a zero, which
 * the exact fold takes again: NaN first and zeros by their sign.  Otherwise
 * the result is the largest (smallest) value, whichever order. */
static void rows_dev_warp_fold(smelt__sb *b, const char *ind, const char *sfx, const char *op, int L, int K, bool exact,
                               const char *mm)
{
    char in2[64];
    const char *in = ind;
    if (mm) {
        smelt__sb_printf(b, "%s{\n%s    smelt_acc%s fm = v;\n%s    int fx = 0;\n", ind, ind, sfx, ind);
        smelt__sb_printf(b, "%s    #pragma unroll\n%s    for (int j = 0; j < %d; j++)\n", ind, ind, K);
        smelt__sb_printf(b, "%s        %sif (j < jn)\n", ind, exact ? "// " : "");
        smelt__sb_printf(b, "%s        {\n%s            const smelt_acc%s u = smelt_conv%s(%s);\n"
                            "%s            fx |= u != u;\n%s            fm = %s(fm, u);\n%s        }\n",
                         ind, ind, sfx, sfx, op, ind, ind, mm, ind);
        smelt__sb_printf(b, "%s    if (!fx && fm != 0)\n%s        v = fm;\n%s    else {\n", ind, ind, ind);
        snprintf(in2, sizeof in2, "%s        ", ind);
        in = in2;
    }
    smelt__sb_printf(b, "%s#pragma unroll\n", in);
    smelt__sb_printf(b, "%sfor (int j = 0; j < %d; j++)\n", in, K);
    smelt__sb_printf(b, "%s    %sif (j < jn)\n", in, exact ? "// " : "");
    smelt__sb_printf(b, "%s        smelt_fold%s(&v, &vi, smelt_conv%s(%s), (long long)(wb + lane + %d * j));\n", in, sfx,
                     sfx, op, L);
    if (mm)
        smelt__sb_printf(b, "%s    }\n%s}\n", ind, ind);
}

/* The block form's fold of a reduction (smelt__shape_device_rows): warp s takes
 * its lanes' accumulators v (and the indices vi of argmax and argmin: arg)
 * where warp s - 1 left them in shared memory, folds its K elements of
 * operand op (warp 0 from the identity), and leaves them for warp s + 1,
 * a barrier after each warp; then every warp takes the last ones.  So
 * lane l folds l, l + L, ... in turn (L lanes a warp), the one warp's order.  A fold that
 * gives the same bits in any grouping (free: red_any_grouping) runs in
 * every warp at once, from the identity I, and each lane then folds the
 * warps' results in order: one barrier instead of W.  exact: every
 * element of the block is in the row (no test; else j < jn, the lane's
 * elements in the row). */
static void rows_dev_chain(smelt__sb *b, const smelt__dialect *dl, const char *ind, const char *sfx, const char *op, int L,
                           int W, int K, bool arg, bool free, bool exact, const char *I, const char *mm)
{
    const char *sh = dl->shared_kw;
    const char *ix = arg ? "" : "// ";
    if (free) {
        smelt__sb_printf(b, "%s%s smelt_acc%s ch[%d][%d];\n", ind, sh, sfx, W, L);
        smelt__sb_printf(b, "%s%s%s long long chi[%d][%d];\n", ind, ix, sh, W, L);
        rows_dev_warp_fold(b, ind, sfx, op, L, K, exact, mm);
        smelt__sb_printf(b, "%sch[wp][lane] = v;\n", ind);
        smelt__sb_printf(b, "%s%schi[wp][lane] = vi;\n", ind, ix);
        smelt__sb_printf(b, "%s%s\n", ind, dl->barrier);
        smelt__sb_printf(b, "%sv = %s;\n", ind, I);
        smelt__sb_printf(b, "%svi = 9223372036854775807LL;\n", ind);
        smelt__sb_printf(b, "%s#pragma unroll\n", ind);
        smelt__sb_printf(b, "%sfor (int s = 0; s < %d; s++)\n", ind, W);
        smelt__sb_printf(b, "%s    smelt_fold%s(&v, &vi, ch[s][lane], %s);\n", ind, sfx, arg ? "chi[s][lane]" : "0");
        return;
    }
    smelt__sb_printf(b, "%s%s smelt_acc%s ch[%d];\n", ind, sh, sfx, L);
    smelt__sb_printf(b, "%s%s%s long long chi[%d];\n", ind, ix, sh, L);
    smelt__sb_printf(b, "%sfor (int s = 0; s < %d; s++) {\n", ind, W);
    smelt__sb_printf(b, "%s    if (wp == s) {\n", ind);
    smelt__sb_printf(b, "%s        if (s) {\n", ind);
    smelt__sb_printf(b, "%s            v = ch[lane];\n", ind);
    smelt__sb_printf(b, "%s            %svi = chi[lane];\n", ind, ix);
    smelt__sb_printf(b, "%s        }\n", ind);
    char in2[64];
    snprintf(in2, sizeof in2, "%s        ", ind);
    rows_dev_warp_fold(b, in2, sfx, op, L, K, exact, NULL);
    smelt__sb_printf(b, "%s        ch[lane] = v;\n", ind);
    smelt__sb_printf(b, "%s        %schi[lane] = vi;\n", ind, ix);
    smelt__sb_printf(b, "%s    }\n", ind);
    smelt__sb_printf(b, "%s    %s\n", ind, dl->barrier);
    smelt__sb_printf(b, "%s}\n", ind);
    smelt__sb_printf(b, "%sv = ch[lane];\n", ind);
    smelt__sb_printf(b, "%s%svi = chi[lane];\n", ind, ix);
}

/* The state of one device row program's emission (smelt__shape_device_rows
 * and the helpers below, in the order they write it). */
typedef struct rows_dev {
    const smelt__dialect *dl;
    const smelt__kdesc *d;
    const warp_text *wt;
    int L;              /* lanes a warp (the target's) */
    int K, kr, W;       /* the held form's elements a lane, of them in registers, warps a row (K 0: streaming) */
    int nin, noper, R, nk, nr, klast, rlast, nv;
    int shared;         /* bytes of shared memory a block holds (the held form) */
    rows_info ri;
    rows_held hv, *h;   /* h: &hv in the held form, else NULL */
    bool *mine, held[SMELT_MAX_KERNEL_OPERANDS];
    int *first;         /* the held form: first and last pass of each value, slots and offsets (4 nv) */
    int bind[SMELT_MAX_KERNEL_OPERANDS], outs[SMELT_MAX_KERNEL_OPERANDS];
    smelt__sb defs, body, kd, rd, what, xo;
    const char *in, *el; /* indentation of a stage's loop and of its element */
    const char *lead;    /* the thread that stores a row's scalars */
} rows_dev;

/* The held form's declarations: its shared memory, the block form's
 * first element and elements in the row (wb, jn), each operand's base
 * (rows_dev_bases) and each held value's arrays (kc<v>, kcs<v>). */
static int rows_dev_held_setup(rows_dev *c, smelt__sb *err)
{
    const smelt__kdesc *d = c->d;
    int st, nv = c->nv, K = c->K, kr = c->kr, L = c->L;
    if ((st = smelt__rows_held_spans(d, &c->ri, c->first, c->first + nv, err)))
        return st;
    for (int v = 0; v < c->nin; v++)
        c->held[v] = smelt__rows_is_held(d, &c->ri, c->first, c->first + nv, v);
    int *slot = c->first + 2 * nv, *off = c->first + 3 * nv;
    int per = smelt__rows_held_slots(d, &c->ri, c->first, c->first + nv, slot, off);
    c->shared = kr < K ? L * (K - kr) * per : 0;
    if (per < 0) {
        smelt__sb_puts(err, "a row program holds too many values");
        return SMELT_ERR_INVALID_ARG;
    }
    if (c->shared > 0)
        smelt__sb_printf(&c->body, "        %s %s unsigned char smelt_sm[%d];\n", c->dl->shared_kw, c->dl->align16,
                         c->shared);
    if (c->W > 1) /* and the lane's elements in the row, jn (exact: all K) */
        smelt__sb_printf(&c->body, "        const smelt_idx wb = (smelt_idx)%d * wp; /* the warp's first element */\n"
                                   "        %sconst long long jr = (long long)nred - (long long)wb - lane; /* (smelt_idx may be "
                                   "unsigned) */\n"
                                   "        %sconst int jn = jr <= 0 ? 0 : jr >= %d ? %d : (int)((jr + %d) / %d);\n",
                         L * K, c->hv.exact ? "// " : "", c->hv.exact ? "// " : "", L * K, K, L - 1, L);
    rows_dev_bases(&c->body, c->dl, d, "        ", c->W);
    for (int v = 0; v < nv; v++) { /* the held values' arrays */
        if (!smelt__rows_is_held(d, &c->ri, c->first, c->first + nv, v))
            continue;
        const char *T = c->dl->stype[smelt__value_dtype(d, v)];
        if (kr)
            smelt__sb_printf(&c->body, "        %s kc%d[%d];\n", T, v, kr);
        if (kr < K)
            smelt__sb_printf(&c->body, "        %s *const kcs%d = (%s *)(void *)(smelt_sm + %d) + lane;\n", T, v, T,
                             L * (K - kr) * off[slot[v]]);
    }
    return SMELT_OK;
}

/* Small piece t (the values at the results' shape known before stage t),
 * on every lane, and the stores of those that are outputs */
static int rows_dev_small(rows_dev *c, int t, smelt__sb *err)
{
    const smelt__kdesc *d = c->d;
    int nout = 0, st;
    smelt__kdesc pc;
    if ((st = smelt__rows_piece_of(d, &c->ri, ROWS_SMALL, t, c->mine, c->outs, &nout, &pc, c->bind, err)) || !nout)
        return st;
    st = rows_dev_piece(&c->body, c->dl, &pc, c->bind, d->n_in, true, "        ", NULL, NULL);
    free(pc.ops);
    for (int o = 0; o < nout; o++)
        for (int q = 0; q < d->n_out; q++)
            if (d->out_val[q] == c->outs[o])
                smelt__sb_printf(&c->body, "        if (%s)\n            ((%s *)a.ptrs[%d])[xo[%d]] = sv%d;\n", c->lead,
                                 c->dl->stype[smelt__value_dtype(d, c->outs[o])], c->nin + q, c->nin + q,
                                 c->ri.slot[c->outs[o]]);
    return st;
}

/* Stage t's loop over the lane's elements of one part (registers, shared
 * memory; the streaming form's one) of reduction k's operand x: the
 * operand read or computed by the stage's piece, then folded (the block
 * form: kept in kt[] for the chain); chop: what the chain folds */
static int rows_dev_stage_part(rows_dev *c, int t, int x, bool kept, bool opheld, const char *sfx, const char *chop,
                               smelt__sb *err)
{
    const smelt__kdesc *d = c->d;
    const char *in = c->in, *el = c->el;
    int st = SMELT_OK;
    char opnd[48] = "rt[0]";
    if (opheld)
        held_ref(opnd, sizeof opnd, c->h, x);
    rows_dev_loop(&c->body, c->h, c->L, "c0", "c1", in, false);
    smelt__sb_printf(&c->body, "%ssmelt_in%s rt[1];\n", el, sfx);
    if (!c->K)
        smelt__red_dev_offsets(&c->body, false, (int)strlen(el), c->noper, c->R, c->nr);
    if (x < c->nin && !(c->K && c->held[x])) { /* an input this pass alone reads */
        char o[48];
        if (c->K) {
            held_index(o, sizeof o, d->mode[x], x, c->L);
            smelt__sb_printf(&c->body, "%srt[0] = ((const smelt_in%s *)bq%d)[%s];\n", el, sfx, x, o);
        } else {
            smelt__sb_printf(&c->body, "%srt[0] = ((const smelt_in%s *)a.ptrs[%d])[off[%d]];\n", el, sfx, x, x);
        }
    } else if (x >= c->nin && !kept) {
        smelt__kdesc pc;
        int nout;
        if (!(st = smelt__rows_piece_of(d, &c->ri, ROWS_STAGE, t, c->mine, c->outs, &nout, &pc, c->bind, err))) {
            smelt__rows_modes(d, &pc, c->bind, false);
            st = rows_dev_piece(&c->body, c->dl, &pc, c->bind, d->n_in, false, el, c->h, NULL);
            free(pc.ops);
        }
    }
    if (c->W > 1)
        smelt__sb_printf(&c->body, "%s(void)rt;\n%s%s%s = %s;\n%s    }\n%s}\n", el, el, opheld ? "// " : "", chop, opnd,
                         in, in);
    else
        smelt__sb_printf(&c->body, "%s(void)rt;\n%ssmelt_fold%s(&v, &vi, smelt_conv%s(%s), (long long)r);\n"
                                   "%s    }\n%s}\n",
                         el, el, sfx, sfx, opnd, in, in);
    return st;
}

/* Reduction t (stage t): its operand over the row, folded in smelt's one
 * order (chunks, lanes, the block form's warps in turn, the shuffle
 * tree), its result on every lane (sv) and stored where it is an output */
static int rows_dev_stage(rows_dev *c, int t, smelt__sb *err)
{
    const smelt__kdesc *d = c->d;
    const smelt__dialect *dl = c->dl;
    const char *in = c->in;
    int st = SMELT_OK, K = c->K, W = c->W, nin = c->nin, nv = c->nv;
    int k = c->ri.st[t], x = d->ops[k].in[0];
    red_kind rk = smelt__red_kind_of(d->ops[k].op, smelt__value_dtype(d, x));
    char sfx[16];
    snprintf(sfx, sizeof sfx, "_%d", t);
    smelt__sb one, ident;
    smelt__sb_init(&one), smelt__sb_init(&ident);
    smelt__red_defs(&one, dl, &rk, false);
    smelt__rename_words(&c->defs, smelt__sb_str(&one), smelt__red_def_names, NSLOTS(smelt__red_def_names), sfx);
    smelt__red_ident(&ident, dl, &rk);
    smelt__sb_printf(&c->what, "%s%s of %s", t ? ", " : "", smelt__ops[rk.op].name, smelt__dtypes[rk.in].name);
    const char *I = smelt__sb_str(&ident);
    smelt__sb_printf(&c->body, "        { /* reduction %d: %s of %s into %s (%s accumulators) */\n"
                               "            smelt_acc%s tot = %s;\n            long long toti = 9223372036854775807LL;\n",
                     t, smelt__ops[rk.op].name, smelt__dtypes[rk.in].name, smelt__dtypes[rk.out].name,
                     smelt__dtypes[rk.acc].name, sfx, I);
    if (!K)
        smelt__sb_printf(&c->body, "            for (smelt_idx c0 = 0; c0 < nred; c0 += %d) {\n"
                                   "                const smelt_idx c1 = nred - c0 < %d ? nred : c0 + %d;\n",
                         SMELT_RED_CHUNK, SMELT_RED_CHUNK, SMELT_RED_CHUNK);
    smelt__sb_printf(&c->body, "%ssmelt_acc%s v = %s;\n%slong long vi = 9223372036854775807LL;\n", in, sfx, I, in);
    if (K)
        rows_dev_preload(&c->body, dl, d, c->h, c->first, t, in);
    bool kept = K && x >= nin && c->ri.piece[x - nin] != t,
         opheld = K && smelt__rows_is_held(d, &c->ri, c->first, c->first + nv, x);
    if (W > 1 && !opheld) /* the block form: the lane's operands, computed together, folded in turn */
        smelt__sb_printf(&c->body, "%ssmelt_in%s kt[%d];\n", in, sfx, K);
    char chop[48] = "kt[j]"; /* the operand the chain folds */
    if (opheld)
        held_ref(chop, sizeof chop, c->h, x);
    for (int part = 0; part < 2 && !st; part++) { /* the lane's elements: registers, shared memory */
        if (!held_part(c->h, part))
            continue;
        c->hv.part = part;
        st = rows_dev_stage_part(c, t, x, kept, opheld, sfx, chop, err);
    }
    c->hv.part = 0;
    if (W > 1) { /* warp s folds its elements after warp s - 1: the lanes' order of one warp */
        /* a fold in any grouping keeps the warps' results in shared memory, each reduction
         * its own: at most 4 KB (W <= 8 for an f64 argmax), else the chain's L slots (a kernel
         * of many such folds over 32 warps would pass the 48 KB a block may declare) */
        int slot = (int)smelt__dtypes[rk.acc].size + (rk.arg ? 8 : 0);
        /* a max or min of floats: by fmaxf or fminf, the exact fold where a NaN or a zero needs it */
        const char *mm = rk.arg || (rk.op != SMELT_OP_MAX && rk.op != SMELT_OP_MIN) ? NULL
                         : rk.acc == SMELT_F32 ? (rk.op == SMELT_OP_MAX ? "fmaxf" : "fminf")
                         : rk.acc == SMELT_F64 ? (rk.op == SMELT_OP_MAX ? "fmax" : "fmin")
                                               : NULL;
        rows_dev_chain(&c->body, dl, in, sfx, chop, c->L, W, K, rk.arg, red_any_grouping(&rk) && W * c->L * slot <= 4096,
                       c->h->exact, I, mm);
    }
    smelt__sb_printf(&c->body, "%sfor (int dd = %d; dd >= 1; dd >>= 1) {\n"
                               "%s    smelt_acc%s u = smelt_shfl(v, dd);\n"
                               "%s    long long ui = %s;\n"
                               "%s    smelt_fold%s(&v, &vi, u, ui);\n%s}\n"
                               "%ssmelt_fold%s(&tot, &toti, v, vi);\n",
                     in, c->L / 2, in, sfx, in, rk.arg ? "smelt_shfl(vi, dd)" : "vi", in, sfx, in, in, sfx);
    if (!K)
        smelt__sb_puts(&c->body, "            }\n");
    smelt__sb_printf(&c->body, "            tot = smelt_bcast(tot);\n            toti = smelt_bcast(toti);\n"
                               "            sv%d = smelt_result%s(tot, toti, nred);\n",
                     c->ri.slot[nin + k], sfx);
    for (int q = 0; q < d->n_out; q++)
        if (d->out_val[q] == nin + k)
            smelt__sb_printf(&c->body, "            if (%s)\n                ((smelt_out%s *)a.ptrs[%d])[xo[%d]] = sv%d;\n",
                             c->lead, sfx, nin + q, nin + q, c->ri.slot[nin + k]);
    smelt__sb_puts(&c->body, "        }\n");
    smelt__sb_free(&one), smelt__sb_free(&ident);
    return st;
}

/* The final pass: the full-size outputs */
static int rows_dev_final(rows_dev *c, smelt__sb *err)
{
    const smelt__kdesc *d = c->d;
    int nout, st;
    smelt__kdesc pc;
    if ((st = smelt__rows_piece_of(d, &c->ri, ROWS_FINAL, 0, c->mine, c->outs, &nout, &pc, c->bind, err)) || !nout)
        return st;
    smelt__rows_modes(d, &pc, c->bind, false);
    /* f32 divisions by the row's scalar through its reciprocal (smelt_divr_f32:
     * the same bits, fewer instructions), where every element of the lane lies
     * in the range it holds for; else the pass again, dividing (its outputs are
     * not in place of what it reads: smelt__inplace_ok); a row whose divisor
     * lies outside divides at once */
    bool fd = rows_fast_divs(&c->body, c->dl, &pc, c->bind);
    for (int again = 0; again <= (int)fd && !st; again++) {
        const char *ind = fd ? "            " : "        ";
        if (fd) /* a divisor outside the range: the division at once */
            smelt__sb_puts(&c->body, again ? "        if (!smelt_dok) {\n" : "        if (smelt_dok) {\n");
        for (int part = 0; part < 2 && !st; part++) {
            if (!held_part(c->h, part))
                continue;
            c->hv.part = part;
            rows_dev_loop(&c->body, c->h, c->L, "0", "nred", ind, false);
            if (!c->K)
                smelt__red_dev_offsets(&c->body, false, 16, c->noper, c->R, c->nr);
            st = rows_dev_piece(&c->body, c->dl, &pc, c->bind, d->n_in, false, fd ? "                    " : "                ",
                                c->h, fd && !again ? "smelt_dok" : NULL);
            smelt__sb_printf(&c->body, "%s    }\n%s}\n", ind, ind);
        }
        if (fd)
            smelt__sb_puts(&c->body, "        }\n");
    }
    free(pc.ops);
    return st;
}

/* The kernel's text: kernel_rows.cu.in with the form's description, launch
 * bounds and row loop */
static int rows_dev_render(rows_dev *c, const char *prelude, smelt__sb *text, smelt__sb *err)
{
    const smelt__kdesc *d = c->d;
    int K = c->K, kr = c->kr, W = c->W, L = c->L;
    char form[200] = "Every pass reads its operands from memory.";
    if (K && W > 1)
        snprintf(form, sizeof form, "A row spans %d warps, a block; a lane holds its %d elements of the values two "
                                    "passes read in registers (kc<v>): a row is read from memory once.", W, K);
    else if (K)
        snprintf(form, sizeof form, "A lane holds its %d elements of the values two passes read, %d in registers "
                                    "(kc<v>), %d in shared memory (kcs<v>): a row is read from memory once.",
                 K, kr, K - kr);
    const smelt__dialect *dl = c->dl;
    const char *tid = dl->thread_idx, *bid = dl->block_idx, *lg = c->wt->log2;
    char bounds[64] = "", rowloop[480], per[40] = "One warp per row";
    if (W > 1 || c->shared)
        snprintf(bounds, sizeof bounds, "%s(%d) ", dl->launch_bounds, L * W);
    if (W > 1) {
        snprintf(per, sizeof per, "A block of %d warps per row", W);
        snprintf(rowloop, sizeof rowloop,
                 "    const int lane = (int)(%s & %du), wp = (int)(%s >> %s); /* the row's warp */\n"
                 "    for (long long ow = %s; ow < (long long)nout; ow += %s) {\n", tid, L - 1, tid, lg, bid,
                 dl->grid_dim);
    } else {
        snprintf(rowloop, sizeof rowloop,
                 "    const int lane = (int)(%s & %du);\n"
                 "    const long long nwarps = ((long long)%s * %s) >> %s;\n"
                 "    for (long long ow = ((long long)%s * %s + %s) >> %s; ow < (long long)nout; "
                 "ow += nwarps) {\n", tid, L - 1, dl->block_dim, dl->grid_dim, lg, bid, dl->block_dim, tid, lg);
    }
    const slot sl[] = {
        {"PRELUDE", prelude}, {"NAME", NAME_TOKEN}, {"NOPS", SLOT_NUM(smelt__red_nops(d))}, {"NST", SLOT_NUM(c->ri.nst)},
        {"WHAT", smelt__sb_str(&c->what)}, {"RANK", SLOT_NUM(c->R)}, {"NK", SLOT_NUM(c->nk)}, {"NR", SLOT_NUM(c->nr)},
        {"KD", smelt__sb_str(&c->kd)}, {"RD", smelt__sb_str(&c->rd)}, {"CHUNK", SLOT_NUM(SMELT_RED_CHUNK)},
        {"NOPERANDS", SLOT_NUM(c->noper)}, {"NSTRIDES", SLOT_NUM(c->noper * c->R)}, {"DEFS", smelt__sb_str(&c->defs)},
        {"INDEX", d->idx32 ? "unsigned int" : "long long"}, {"FORM", form},
        {"BOUNDS", bounds}, {"ROWLOOP", rowloop}, {"PER", per},
        {"BY_VALUE", SLOT_NUM(smelt__kparam_by_value(c->noper, c->R, d->idx32, 0))},
        {"XO", smelt__sb_str(&c->xo)}, {"BODY", smelt__sb_str(&c->body)}, WARP_SLOTS(*c->wt)};
    return smelt__load_render(text, c->dl, "kernel_rows", sl, NSLOTS(sl), err);
}

/* A device (CUDA): a warp per row, its lanes along the row; every lane
 * holds the row's scalars.  The streaming form (spread 0) reads each pass's
 * operands from memory and computes again what an earlier pass computed;
 * the held form (spread SMELT_SPREAD_HELD + b + 16 c: rows of at most
 * L * 2^b elements, one chunk, L lanes a warp) keeps a lane's elements of every input two
 * passes read and of every value a later pass reads (rows_info.cache): the
 * first kr = 2^(c - 1) (none for c = 0) in registers (kc<v>), the rest in
 * shared memory (kcs<v>, smelt__rows_held_slots; a block is one warp), so a row
 * is read from memory once; the block form (SMELT_SPREAD_BLOCK and up), a
 * row over a block of W warps, K elements a lane in registers. */
int smelt__shape_device_rows(const smelt__target *t, const smelt__kdesc *d, const char *prelude, smelt__sb *text,
                             smelt__sb *err)
{
    warp_text wt;
    int st = smelt__warp_text(&wt, t, err);
    if (st || (st = smelt__rows_check(d, err)))
        return st;
    rows_dev c = {.dl = t->dialect, .d = d, .wt = &wt, .L = wt.L, .W = 1, .nin = d->n_in,
                  .noper = d->n_in + d->n_out, .R = d->rank, .nv = d->n_in + d->n_ops};
    if (d->spread >= SMELT_SPREAD_HELD) {
        smelt__held_split(d->spread, &c.K, &c.kr);
        c.W = smelt__held_warps(d->spread);
    }
    if ((st = smelt__rows_analyse(d, c.K > 0, &c.ri)))
        return st;
    c.mine = malloc(sizeof(bool) * (size_t)(d->n_ops + 1));
    c.first = c.K ? malloc(sizeof(int) * (size_t)(4 * c.nv + 1)) : NULL;
    c.hv = (rows_held){c.K, c.kr, c.held, 0, c.W, smelt__held_exact(d->spread), c.L};
    c.h = c.K ? &c.hv : NULL;
    smelt__sb_init(&c.defs), smelt__sb_init(&c.body), smelt__sb_init(&c.kd), smelt__sb_init(&c.rd);
    smelt__sb_init(&c.what), smelt__sb_init(&c.xo);
    if (!c.mine || (c.K && !c.first))
        st = SMELT_ERR_NOMEM;
    smelt__red_dims(d, &c.kd, &c.rd, &c.nk, &c.nr, &c.klast, &c.rlast);
    smelt__red_dev_offsets(&c.xo, true, 8, c.noper - 1, c.R, c.nr);
    if (!st && c.K && c.nr != 1) {
        smelt__sb_puts(err, "a row program's held form reduces one dimension (after merging)");
        st = SMELT_ERR_INVALID_ARG;
    }
    if (!st && c.K)
        st = rows_dev_held_setup(&c, err);
    for (int v = 0; v < c.nv && !st; v++)
        if (c.ri.slot[v] >= 0)
            smelt__sb_printf(&c.body, "        %s sv%d;\n", c.dl->stype[smelt__value_dtype(d, v)], c.ri.slot[v]);
    c.in = c.K ? "            " : "                ";
    c.el = c.K ? "                    " : "                        ";
    char lead[40]; /* the thread that stores a row's scalars */
    snprintf(lead, sizeof lead, "%s == 0", c.W > 1 ? c.dl->thread_idx : "lane");
    c.lead = lead;
    for (int s = 0; s <= c.ri.nst && !st; s++)
        if (!(st = rows_dev_small(&c, s, err)) && s < c.ri.nst)
            st = rows_dev_stage(&c, s, err);
    if (!st)
        st = rows_dev_final(&c, err);
    if (c.W > 1) /* the chains' shared memory is the next row's */
        smelt__sb_printf(&c.body, "        %s\n", c.dl->barrier);
    if (!st)
        st = rows_dev_render(&c, prelude, text, err);
    smelt__sb_free(&c.defs), smelt__sb_free(&c.body), smelt__sb_free(&c.kd), smelt__sb_free(&c.rd);
    smelt__sb_free(&c.what), smelt__sb_free(&c.xo);
    free(c.mine), free(c.first);
    smelt__rows_free(&c.ri);
    return st;
}
