/* The block form (TinyCC): kernels as calls of block primitives, and the
 * block library itself (src/codegen/emit.h). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"

/* ---- block form (TinyCC): the kernel walks its elements SMELT_BLOCK at a
 * time and calls, per operator, a vectorised primitive compiled into smelt
 * (smelt_blk_<op>_<dtype>, written at build time: smelt__emit_blk_library).
 * TinyCC's own code is scalar and spills every value; this way it only
 * sequences calls, and the arithmetic runs at the speed of gcc -O3 code. */
#define SMELT_BLOCK 512
#define SMELT_BLOCK_CONSTS 16   /* constants with a block filled once */
#define SMELT_BLOCK_MAX_BUFS 96 /* 384 KiB of stack at most */

/* The name substituted for NAME_TOKEN: a hash of the text.  */
int smelt__finish_name(smelt__sb *text, smelt__sb *src, char *name, const char *prefix)
{
    if (text->oom)
        return SMELT_ERR_NOMEM;
    snprintf(name, 32, "%s_%016" PRIx64, prefix, smelt__hash(text->s, text->len, 0x5eed));
    const char *p = text->s;
    for (const char *s; (s = strstr(p, NAME_TOKEN)); p = s + strlen(NAME_TOKEN)) {
        smelt__sb_putn(src, p, (size_t)(s - p));
        smelt__sb_puts(src, name);
    }
    smelt__sb_puts(src, p);
    return src->oom ? SMELT_ERR_NOMEM : SMELT_OK;
}

void smelt__declare_once(smelt__sb *decls, const char *fn, const char *args)
{
    char line[160];
    snprintf(line, sizeof line, "void %s(%s);\n", fn, args);
    if (!strstr(smelt__sb_str(decls), line))
        smelt__sb_puts(decls, line);
}

#define FILL_ARGS "int64_t, char *, const char *"
#define MOV_ARGS "int64_t, char *, const char *, int64_t"

/* The data movement primitives: smelt_blk_fill_<size> (one value into a
 * block), smelt_blk_gather_<size> and smelt_blk_scatter_<size> (a strided
 * operand into a block and back); size: bytes an element. */
static const char *move_name(char fn[40], const char *kind, size_t size)
{
    snprintf(fn, 40, "smelt_blk_%s_%zu", kind, size);
    return fn;
}

/* The block form's state while it writes a kernel: where each value's
 * block lives, which blocks are free, what the kernel declares. */
typedef struct blk_state {
    const smelt__dialect *dl;
    const smelt__kdesc *d;
    smelt__sb decls, setup, row, body;
    int *last, *bufof, *freeb; /* per value: last reader, block; free blocks */
    char (*loc)[64];           /* per value: where its elements are */
    int nbuf, nfree, nconst;   /* blocks used, free blocks, constants seen */
} blk_state;

static int blk_new_block(blk_state *b) { return b->nfree ? b->freeb[--b->nfree] : b->nbuf++; }
static void blk_in_block(blk_state *b, int v, int buf) { snprintf(b->loc[v], 64, "(char *)buf[%d]", buf); }

/* constants: the first SMELT_BLOCK_CONSTS get a block each, filled once;
 * the others are filled into a free block just before each use, so the
 * kernel's stack does not grow with the number of constants */
static void blk_constants(blk_state *b)
{
    const smelt__kdesc *d = b->d;
    for (int k = 0; k < d->n_ops; k++) {
        const smelt__kop *op = &d->ops[k];
        if (op->op != SMELT_OP_CONST)
            continue;
        int v = d->n_in + k;
        smelt__sb_printf(&b->setup, "    const %s v%d = ", b->dl->stype[op->dtype], v);
        if (op->dtype == SMELT_F16 || op->dtype == SMELT_BF16) /* the block holds bit patterns */
            smelt__sb_printf(&b->setup, "(uint16_t)0x%04xu", (unsigned)(op->dtype == SMELT_F16
                                                                           ? smelt__f16_from_double(op->fval)
                                                                           : smelt__bf16_from_double(op->fval)));
        else
            smelt__literal(&b->setup, b->dl, op);
        smelt__sb_puts(&b->setup, ";\n");
        char fn[40];
        smelt__declare_once(&b->decls, move_name(fn, "fill", smelt__dtypes[op->dtype].size), FILL_ARGS);
        if (b->nconst++ < SMELT_BLOCK_CONSTS) {
            b->bufof[v] = b->nbuf++;
            blk_in_block(b, v, b->bufof[v]);
            smelt__sb_printf(&b->setup, "    %s(%d, %s, (const char *)&v%d);\n", fn, SMELT_BLOCK,
                             b->loc[v], v);
        }
    }
}

/* inputs: contiguous ones are read in place, the others staged */
static void blk_inputs(blk_state *b)
{
    const smelt__kdesc *d = b->d;
    for (int k = 0; k < d->n_in; k++) {
        size_t sz = smelt__dtypes[d->in_dt[k]].size;
        char fn[40], *l = b->loc[k];
        if (d->mode[k] == SMELT_MODE_CONTIG || b->last[k] < 0) {
            snprintf(l, 64, "(q%d + j * %zu)", k, sz);
            continue;
        }
        b->bufof[k] = b->nbuf++;
        blk_in_block(b, k, b->bufof[k]);
        if (d->mode[k] == SMELT_MODE_BCAST) {
            smelt__sb_printf(&b->body, "            %s(m, %s, q%d);\n", move_name(fn, "fill", sz), l, k);
            smelt__declare_once(&b->decls, fn, FILL_ARGS);
        } else {
            smelt__sb_printf(&b->body, "            %s(m, %s, q%d + j * s%d * %zu, s%d);\n",
                             move_name(fn, "gather", sz), l, k, k, sz, k);
            smelt__declare_once(&b->decls, fn, MOV_ARGS);
        }
    }
}

/* Whether operand j of op repeats an earlier operand. */
static bool repeated_operand(const smelt__kop *op, int j)
{
    for (int i = 0; i < j; i++)
        if (op->in[i] == op->in[j])
            return true;
    return false;
}

/* Operator k: one call of its primitive (constants: blk_constants). */
static void blk_operator(blk_state *b, int k)
{
    const smelt__kdesc *d = b->d;
    const smelt__kop *op = &d->ops[k];
    int v = d->n_in + k;
    if (op->op == SMELT_OP_CONST)
        return;
    /* constants without a block of their own: filled for this operator */
    int temp[3], ntemp = 0;
    for (int j = 0; j < op->nin; j++) {
        int x = op->in[j];
        if (repeated_operand(op, j) || !smelt__is_const(d, x) || b->bufof[x] >= 0)
            continue;
        temp[ntemp] = blk_new_block(b);
        blk_in_block(b, x, temp[ntemp++]);
        char fn[40];
        smelt__sb_printf(&b->body, "            %s(m, %s, (const char *)&v%d);\n",
                         move_name(fn, "fill", smelt__dtypes[smelt__value_dtype(d, x)].size), b->loc[x], x);
    }
    /* destination: a contiguous output written in place, else a block */
    int out = -1;
    for (int o = 0; o < d->n_out && out < 0; o++)
        if (d->out_val[o] == v && d->mode[d->n_in + o] == SMELT_MODE_CONTIG)
            out = d->n_in + o;
    if (out >= 0) {
        snprintf(b->loc[v], 64, "(q%d + j * %zu)", out, smelt__dtypes[op->dtype].size);
    } else {
        b->bufof[v] = blk_new_block(b);
        blk_in_block(b, v, b->bufof[v]);
    }
    char fn[SMELT_BLK_NAME_MAX];
    smelt_dtype ct;
    smelt__op_template(d, k, &ct);
    smelt__blk_name(fn, op->op, ct, op->dtype);
    smelt__declare_once(&b->decls, fn, BLK_ARGS);
    smelt__sb_printf(&b->body, "            %s(m, %s", fn, b->loc[v]);
    for (int j = 0; j < 3; j++)
        smelt__sb_printf(&b->body, ", %s", j < op->nin ? b->loc[op->in[j]] : "0");
    smelt__sb_puts(&b->body, ");\n");
    for (int t = 0; t < ntemp; t++)
        b->freeb[b->nfree++] = temp[t];
    /* blocks whose last reader this was are free for later values */
    for (int j = 0; j < op->nin; j++) {
        int x = op->in[j];
        if (!repeated_operand(op, j) && b->last[x] == k && b->bufof[x] >= 0 && !smelt__is_const(d, x))
            b->freeb[b->nfree++] = b->bufof[x];
    }
}

/* outputs not written in place */
static void blk_outputs(blk_state *b)
{
    const smelt__kdesc *d = b->d;
    for (int o = 0; o < d->n_out; o++) {
        int v = d->out_val[o], q = d->n_in + o;
        size_t sz = smelt__dtypes[smelt__value_dtype(d, v)].size;
        char want[64];
        snprintf(want, sizeof want, "(q%d + j * %zu)", q, sz);
        if (!strcmp(b->loc[v], want))
            continue;
        char fn[40];
        if (d->mode[q] == SMELT_MODE_STRIDED)
            smelt__sb_printf(&b->body, "            %s(m, q%d + j * s%d * %zu, %s, s%d);\n",
                             move_name(fn, "scatter", sz), q, q, sz, b->loc[v], q);
        else
            smelt__sb_printf(&b->body, "            %s(m, %s, %s, 1);\n", move_name(fn, "gather", sz), want,
                             b->loc[v]);
        smelt__declare_once(&b->decls, fn, MOV_ARGS);
    }
}

/* raw: the text as it is (NAME_TOKEN unreplaced) into src, name unused */
int smelt__emit_blocks(const smelt__dialect *dl, const smelt__kdesc *d, smelt__sb *src,
                       char *name, bool raw, smelt__sb *err)
{
    int nops = d->n_in + d->n_out, R = d->rank, nv = d->n_in + d->n_ops, st = SMELT_OK;
    blk_state b = {.dl = dl, .d = d};
    smelt__sb text;
    smelt__sb_init(&b.decls), smelt__sb_init(&b.setup);
    smelt__sb_init(&b.row), smelt__sb_init(&b.body), smelt__sb_init(&text);
    b.last = malloc(sizeof(int) * (size_t)(nv + 1)), b.bufof = malloc(sizeof(int) * (size_t)(nv + 1));
    b.loc = calloc((size_t)nv + 1, sizeof *b.loc);
    b.freeb = malloc(sizeof(int) * (size_t)(nv + 4)); /* values' blocks and 3 temporaries */
    if (!b.last || !b.bufof || !b.loc || !b.freeb) {
        st = SMELT_ERR_NOMEM;
        goto done;
    }
    /* last use of every value: operators, then the output copies (at nv) */
    for (int v = 0; v < nv; v++)
        b.last[v] = -1, b.bufof[v] = -1;
    for (int k = 0; k < d->n_ops; k++)
        for (int j = 0; j < d->ops[k].nin; j++)
            b.last[d->ops[k].in[j]] = k;
    for (int o = 0; o < d->n_out; o++)
        b.last[d->out_val[o]] = d->n_ops;

    /* per-row pointers and innermost strides */
    if (smelt__kdesc_gathers(d))
        smelt__sb_puts(&b.decls, smelt__gather_fn);
    smelt__row_offsets(&b.row, d);
    for (int k = 0; k < nops; k++) {
        smelt_dtype dt = smelt__operand_dtype(d, k);
        smelt__sb_printf(&b.row, "        char *q%d = ptrs[%d] + o%d * %zu;\n", k, k, k, smelt__dtypes[dt].size);
        if (d->mode[k] == SMELT_MODE_STRIDED)
            smelt__sb_printf(&b.setup, "    const int64_t s%d = strides[%d];\n", k, k * R + R - 1);
    }
    blk_constants(&b);
    blk_inputs(&b);
    for (int k = 0; k < d->n_ops; k++)
        blk_operator(&b, k);
    blk_outputs(&b);
    if (b.nbuf > SMELT_BLOCK_MAX_BUFS) {
        smelt__sb_printf(err, "the kernel needs %d block buffers of %d elements on its stack, more than %d",
                         b.nbuf, SMELT_BLOCK, SMELT_BLOCK_MAX_BUFS);
        st = SMELT_ERR_COMPILE;
        goto done;
    }
    const slot sl[] = {{"DECLS", smelt__sb_str(&b.decls)}, {"NAME", NAME_TOKEN}, {"RANK", SLOT_NUM(R)},
                       {"NOPS", SLOT_NUM(d->n_ops - b.nconst)}, {"NBUF", SLOT_NUM(b.nbuf ? b.nbuf : 1)},
                       {"BLOCK", SLOT_NUM(SMELT_BLOCK)}, {"SETUP", smelt__sb_str(&b.setup)},
                       {"ROW", smelt__sb_str(&b.row)}, {"BODY", smelt__sb_str(&b.body)}};
    if (!(st = smelt__load_render(raw ? src : &text, dl, "kernel_block", sl, NSLOTS(sl), err)) && !raw)
        st = smelt__finish_name(&text, src, name, "smelt_ew");
done:
    free(b.loc), free(b.last), free(b.bufof), free(b.freeb);
    smelt__sb_free(&b.decls), smelt__sb_free(&b.setup);
    smelt__sb_free(&b.row), smelt__sb_free(&b.body), smelt__sb_free(&text);
    return st;
}

/* ---- the block primitives themselves: C source compiled into smelt
 * (src/codegen/gen-blocks.c writes it at build time; meson.build compiles
 * it once for each x86-64 level).  One loop per operator and compute dtype,
 * its body the operator's expression as the loop form spells it (smelt__op_expr);
 * casts; data movement.  The prelude and math are the loop form's. */
#define BLK_SIG "(int64_t n, char *restrict o, const char *restrict a, const char *restrict b, const char *restrict c)"

static void blk_unused(smelt__sb *b, int arity)
{
    for (int k = arity; k < 3; k++)
        smelt__sb_printf(b, "    (void)%c;\n", 'a' + k);
}

/* O[i] = the expression of e's one operator, over n elements.  Every
 * operator is plain C arithmetic (smelt's own math included), so the
 * compiler's vector body and scalar epilogue compute the same bits: a result
 * never depends on an element's position.  f16/bf16 operands are f32 arrays
 * here (blk_half); a cast to them writes their bits, rounded once. */
static void blk_loop(smelt__sb *b, const char *fn, const ectx *e)
{
    const smelt__kdesc *d = e->d;
    const smelt__kop *op = d->ops;
    bool bits = op->op == SMELT_OP_CAST && smelt__is_half(op->dtype);
    const char *to = bits ? e->dl->stype[op->dtype] : e->dl->type[op->dtype];
    smelt__sb_printf(b, "static void %s" BLK_SIG "\n{\n    %s *restrict O = (%s *)o;\n", fn, to, to);
    for (int k = 0; k < d->n_in; k++)
        smelt__sb_printf(b, "    const %s *restrict A%d = (const %s *)%c;\n", e->dl->type[d->in_dt[k]], k,
                         e->dl->type[d->in_dt[k]], 'a' + k);
    blk_unused(b, d->n_in);
    smelt__sb_puts(b, "    for (int64_t i = 0; i < n; i++)\n        O[i] = ");
    if (bits)
        smelt__sb_printf(b, "smelt_d2h_%s((double)A0[i])", smelt__dtypes[op->dtype].name);
    else
        smelt__op_expr(b, e, 0);
    smelt__sb_puts(b, ";\n}\n");
}

/* An f16/bf16 (dt) primitive: a kernel's block (SMELT_BLOCK elements) at a
 * time, the operands converted to f32 blocks, the f32 primitive inner run
 * on them, its result rounded and stored (size 0) or written by inner as it
 * is (comparisons, casts: size bytes an element); where's condition is read
 * as it is.  Every element goes through the same conversions and the same
 * f32 primitive, so the f32 primitive's position independence carries
 * over. */
static void blk_half(smelt__sb *b, const char *fn, const char *inner, smelt_dtype dt, int arity, bool where,
                     size_t size)
{
    const char *h = smelt__dtypes[dt].name;
    smelt__sb_printf(b, "static void %s" BLK_SIG "\n{\n    float ", fn);
    for (int k = where; k < arity; k++)
        smelt__sb_printf(b, "%sx%d[%d]", k > where ? ", " : "", k, SMELT_BLOCK);
    smelt__sb_printf(b, size ? ";\n" : ", y[%d];\n", SMELT_BLOCK);
    blk_unused(b, arity);
    smelt__sb_printf(b, "    for (int64_t i = 0; i < n; i += %d) {\n        const int64_t m = n - i < %d ? n - i : %d;\n",
                     SMELT_BLOCK, SMELT_BLOCK, SMELT_BLOCK);
    for (int k = where; k < arity; k++)
        smelt__sb_printf(b, "        smelt_load_%s(m, x%d, (const uint16_t *)%c + i);\n", h, k, 'a' + k);
    if (size)
        smelt__sb_printf(b, "        %s(m, o + i * %zu", inner, size);
    else
        smelt__sb_printf(b, "        %s(m, (char *)y", inner);
    for (int k = 0; k < 3; k++)
        smelt__sb_printf(b, k >= arity ? ", 0" : k < where ? ", a + i" : ", (const char *)x%d", k);
    smelt__sb_puts(b, ");\n");
    if (!size)
        smelt__sb_printf(b, "        smelt_store_%s(m, (uint16_t *)o + i, y);\n", h);
    smelt__sb_puts(b, "    }\n}\n");
}

/* f16/bf16 blocks to f32 and back, as they are (smelt_load_*, smelt_store_*) */
static void blk_convert(smelt__sb *b, const char *fn, bool load, smelt_dtype h)
{
    smelt__sb_printf(b, "static void %s" BLK_SIG "\n{\n", fn);
    blk_unused(b, 1);
    smelt__sb_printf(b, "    smelt_%s_%s(n, %s);\n}\n", load ? "load" : "store", smelt__dtypes[h].name,
                     load ? "(float *)o, (const uint16_t *)a" : "(uint16_t *)o, (const float *)a");
}

/* Whether oi is a transcendental operator: its float expression is smelt's
 * math function of its name, smelt_<op>_%S(...). */
bool smelt__op_is_math(const smelt__opinfo *oi)
{
    size_t n = oi ? strlen(oi->name) : 0;
    return oi && !strncmp(oi->c_float, "smelt_", 6) && !strncmp(oi->c_float + 6, oi->name, n) &&
           !strncmp(oi->c_float + 6 + n, "_%S(", 4);
}

/* A row of the primitives' table; math: the primitive of a transcendental
 * operator, for which src/blocks.c may bind another level. */
void smelt__blk_entry(smelt__sb *table, const char *fn, const smelt__opinfo *oi)
{
    smelt__sb_printf(table, "    {\"%s\", (smelt__blk_fn)%s, %d},\n", fn, fn, smelt__op_is_math(oi));
}

/* fill, gather and scatter for elements of 1, 2, 4 and 8 bytes */
static void blk_moves(smelt__sb *b, smelt__sb *table)
{
    for (size_t size = 1; size <= 8; size *= 2) {
        char fn[40];
        int bits = 8 * (int)size;
        smelt__sb_printf(b, "static void %s(int64_t n, char *restrict o, const char *restrict v)\n{\n"
                            "    uint%d_t *restrict O = (uint%d_t *)o, x = *(const uint%d_t *)v;\n"
                            "    for (int64_t i = 0; i < n; i++)\n        O[i] = x;\n}\n",
                         move_name(fn, "fill", size), bits, bits, bits);
        smelt__blk_entry(table, fn, NULL);
        for (int scatter = 0; scatter < 2; scatter++) {
            smelt__sb_printf(b, "static void %s(int64_t n, char *restrict o, const char *restrict a, int64_t s)\n{\n"
                                "    uint%d_t *restrict O = (uint%d_t *)o;\n"
                                "    const uint%d_t *restrict A = (const uint%d_t *)a;\n"
                                "    for (int64_t i = 0; i < n; i++)\n        %s;\n}\n",
                             move_name(fn, scatter ? "scatter" : "gather", size), bits, bits, bits, bits,
                             scatter ? "O[i * s] = A[i]" : "O[i] = A[i * s]");
            smelt__blk_entry(table, fn, NULL);
        }
    }
}

int smelt__emit_blk_library(smelt__sb *out, smelt__sb *err)
{
    const smelt__dialect *dl = &smelt__dialect_c;
    smelt__sb prims, table, prelude;
    smelt__sb_init(&prims), smelt__sb_init(&table), smelt__sb_init(&prelude);
    char fn[SMELT_BLK_NAME_MAX], inner[SMELT_BLK_NAME_MAX + 8], *mathlib = NULL;
    /* one operator on operands A0[i], A1[i], A2[i] of its compute type; its
     * result not rounded to f16/bf16 (arrays: blk_half's store rounds it) */
    smelt__kop op;
    smelt__kdesc d = {.n_out = 1, .n_ops = 1, .ops = &op, .rank = 1};
    bool inl[3] = {true, true, true};
    ectx e = {.dl = dl, .d = &d, .inl = inl, .lane = -1, .form = FORM_BLK, .arrays = true};
    for (smelt_op o = 0; o < SMELT_OP_COUNT; o++) {
        const smelt__opinfo *oi = &smelt__ops[o];
        bool fp_only = oi->rule == SMELT_RULE_FLOAT || oi->rule == SMELT_RULE_TRUEDIV;
        for (smelt_dtype dt = 0; dt < SMELT_DTYPE_COUNT; dt++) {
            smelt_dtype ct;
            if (oi->cls == SMELT_CLASS_SOURCE || oi->cls == SMELT_CLASS_CAST || oi->cls == SMELT_CLASS_REDUCE ||
                !(oi->dtypes & smelt__dtypes[dt].kind) || (fp_only && !smelt__is_float(dt)))
                continue;
            op = (smelt__kop){.op = o, .dtype = oi->rule == SMELT_RULE_CMP ? SMELT_BOOL : dt, .nin = oi->arity,
                              .in = {0, 1, 2}};
            d.n_in = oi->arity;
            for (int k = 0; k < 3; k++)
                d.in_dt[k] = k == 0 && oi->rule == SMELT_RULE_WHERE ? SMELT_BOOL : dt;
            const char *t = smelt__op_template(&d, 0, &ct);
            if (!*t)
                continue;
            smelt__blk_name(fn, o, dt, dt);
            if (smelt__is_half(dt)) { /* the f32 primitive, or one of its own for f16's %H */
                smelt__blk_name(inner, o, SMELT_F32, SMELT_F32);
                if (dt == SMELT_F16 && strstr(t, "%H")) {
                    snprintf(inner, sizeof inner, "%s_in_f32", fn);
                    blk_loop(&prims, inner, &e);
                }
                blk_half(&prims, fn, inner, dt, oi->arity, oi->rule == SMELT_RULE_WHERE, oi->rule == SMELT_RULE_CMP);
            } else {
                blk_loop(&prims, fn, &e);
            }
            smelt__blk_entry(&table, fn, oi);
        }
    }
    for (smelt_dtype fr = 0; fr < SMELT_DTYPE_COUNT; fr++)
        for (smelt_dtype to = 0; to < SMELT_DTYPE_COUNT; to++) {
            smelt__blk_name(fn, SMELT_OP_CAST, fr, to);
            if (smelt__is_half(fr) && to == SMELT_F32) {
                blk_convert(&prims, fn, true, fr);
            } else if (smelt__is_half(fr)) { /* to f32 blocks, then the f32 cast */
                smelt__blk_name(inner, SMELT_OP_CAST, SMELT_F32, to);
                blk_half(&prims, fn, inner, fr, 1, false, smelt__dtypes[to].size);
            } else if (fr == SMELT_F32 && smelt__is_half(to)) {
                blk_convert(&prims, fn, false, to);
            } else {
                op = (smelt__kop){.op = SMELT_OP_CAST, .dtype = to, .nin = 1};
                d.n_in = 1;
                d.in_dt[0] = fr;
                blk_loop(&prims, fn, &e);
            }
            smelt__blk_entry(&table, fn, NULL);
        }
    blk_moves(&prims, &table);
    smelt__red_blk_prims(&prims, &table);
    int st = smelt__render_prelude(&prelude, dl, &mathlib, err);
    if (!st) {
        const slot sl[] = {{"PRELUDE", smelt__sb_str(&prelude)}, {"PRIMITIVES", smelt__sb_str(&prims)},
                           {"TABLE", smelt__sb_str(&table)}};
        st = smelt__load_render(out, dl, "blocks", sl, NSLOTS(sl), err);
    }
    if (!st) {
        smelt__with_math(out, mathlib);
        st = out->oom ? SMELT_ERR_NOMEM : SMELT_OK;
    }
    free(mathlib);
    smelt__sb_free(&prims), smelt__sb_free(&table), smelt__sb_free(&prelude);
    return st;
}
