/* Reductions: one reduction a kernel (C and CUDA), its lanes, and the
 * lanes of the block library (src/codegen/emit.h). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"

red_kind smelt__red_kind_of(smelt_op op, smelt_dtype in)
{
    return (red_kind){op, in, smelt__red_acc(op, in), smelt__red_result(op, in),
                      smelt__ops[op].rule == SMELT_RULE_ARG};
}

/* ops.def's combine (or, for argmax and argmin, beats) template of k, with
 * %0 and %1 spelled a and b. */
static void red_expand(smelt__sb *out, const smelt__dialect *dl, const red_kind *k, const char *a, const char *b)
{
    const smelt__opinfo *oi = &smelt__ops[k->op];
    const char *t = smelt__is_float(k->acc) || !strcmp(oi->c_int, "=") ? oi->c_float : oi->c_int;
    for (const char *p = t; *p; p++) {
        if (p[0] != '%' || !p[1] || !strchr("01TU", p[1]))
            smelt__sb_putn(out, p, 1);
        else if (*++p == '0' || *p == '1')
            smelt__sb_puts(out, *p == '0' ? a : b);
        else
            smelt__sb_puts(out, (*p == 'T' ? dl->type : dl->utype)[k->acc]);
    }
}

/* An element e (of the operand's storage type) as an accumulator value:
 * f16/bf16 converted (exactly), any/all's (x != 0), others cast. */
static void red_conv(smelt__sb *out, const smelt__dialect *dl, const red_kind *k, const char *e)
{
    bool half = smelt__is_half(k->in), test = smelt__ops[k->op].rule == SMELT_RULE_BOOL;
    if (half)
        smelt__sb_printf(out, "%ssmelt_h2f_%s(%s)%s", test ? "(" : "", smelt__dtypes[k->in].name, e,
                         test ? " != 0)" : "");
    else if (test)
        smelt__sb_printf(out, "(%s != 0)", e);
    else
        smelt__sb_printf(out, "(%s)%s", dl->type[k->acc], e);
}

/* The statements that take element e (index j) into slot v (index vi). */
static void red_step(smelt__sb *out, const smelt__dialect *dl, const red_kind *k, const char *ind, const char *v,
                     const char *vi, const char *e, const char *j)
{
    smelt__sb_printf(out, "%sconst %s e = ", ind, dl->type[k->acc]);
    red_conv(out, dl, k, e);
    smelt__sb_puts(out, ";\n");
    if (!k->arg) {
        smelt__sb_printf(out, "%s%s = ", ind, v);
        red_expand(out, dl, k, v, "e");
        smelt__sb_puts(out, ";\n");
        return;
    }
    /* a select, not a branch: the compiler vectorises it */
    smelt__sb_printf(out, "%sconst int64_t ej = %s;\n%sconst int take = ", ind, j, ind);
    red_expand(out, dl, k, v, "e");
    smelt__sb_puts(out, " || (!");
    red_expand(out, dl, k, "e", v);
    smelt__sb_printf(out, " && ej < %s);\n%s%s = take ? e : %s;\n%s%s = take ? ej : %s;\n", vi, ind, v, v, ind, vi,
                     vi);
}

/* One element e into accumulator v (not argmax, argmin: no index), the
 * statements of the lanes' step (red_step): a row program's stage that
 * computes its operand in the lanes' loop (emit-rows.c) combines as the
 * lanes do. */
void smelt__red_step(smelt__sb *out, const smelt__dialect *dl, const red_kind *k, const char *ind, const char *v,
                     const char *e)
{
    red_step(out, dl, k, ind, v, "", e, "0");
}

/* max and min of floats, contiguous elements: each lane's largest (smallest)
 * element as an integer that orders as the float does (-0 below +0: the
 * key's sign-magnitude bits turned two's complement), and a second key
 * watching for a NaN.  Without a NaN in the lane's value or its elements,
 * the lane ends where smelt's fold (ops.def) leaves it: the same value,
 * +0 over -0 (max) or -0 over +0 (min), the same bits; with one, the lanes
 * are left as they were and the exact loop after it takes the run again
 * (the first NaN of a lane is its result).  An integer max per element
 * instead of the fold's compares and selects: several times faster where
 * the compiler vectorises it, and the same on every target. */
static void red_fast_minmax(smelt__sb *b, const smelt__dialect *dl, const red_kind *k)
{
    bool max = k->op == SMELT_OP_MAX, dbl = k->acc == SMELT_F64;
    if ((!max && k->op != SMELT_OP_MIN) || (k->acc != SMELT_F32 && !dbl))
        return;
    const char *K = dbl ? "int64_t" : "int32_t", *w = dbl ? "f64" : "f32";
    const char *inf = dbl ? "0x7ff0000000000000LL" : "0x7f800000";
    const char *ninf = dbl ? "(int64_t)0x800fffffffffffffULL" : "(int32_t)0x807fffffu";
    const char *cmp = max ? ">" : "<";
    /* the prelude's smelt_key: +inf's key is inf, -inf's ninf, a NaN's
     * beyond one of them; kw: the lane's other extreme, to see a NaN at
     * either end */
    smelt__sb_printf(b, "    if (s == 1 && n - i >= 64) {\n"
                        "        %s km[32], kw[32];\n"
                        "        int ok = 1;\n"
                        "        for (int q = 0; q < 32; q++) {\n"
                        "            ok &= v[q] == v[q];\n"
                        "            km[q] = kw[q] = smelt_key_%s(v[q]);\n"
                        "        }\n"
                        "        if (ok) {\n"
                        "            const int64_t i0 = i;\n"
                        "            for (; i + 32 <= n; i += 32)\n"
                        "                for (int q = 0; q < 32; q++) {\n"
                        "                    const %s key = smelt_key_%s(",
                     K, w, K, w);
    red_conv(b, dl, k, "x[i + q]");
    smelt__sb_printf(b, ");\n"
                        "                    km[q] = key %s km[q] ? key : km[q];\n"
                        "                    kw[q] = key %s kw[q] ? kw[q] : key;\n"
                        "                }\n"
                        "            int nan = 0;\n"
                        "            for (int q = 0; q < 32; q++)\n"
                        "                nan |= km[q] > %s || km[q] < %s || kw[q] > %s || kw[q] < %s;\n"
                        "            if (nan)\n"
                        "                i = i0; /* the exact loop takes it */\n"
                        "            else\n"
                        "                for (int q = 0; q < 32; q++)\n"
                        "                    v[q] = smelt_unkey_%s(km[q]);\n"
                        "        }\n"
                        "    }\n",
                     cmp, cmp, inf, ninf, inf, ninf, w);
}

/* The name of k's lanes primitive (argument names: the combine's operator,
 * mean's being sum's, the operand's and the accumulator's dtypes). */
void smelt__red_prim_name(char *name, size_t n, const red_kind *k)
{
    smelt_op op = k->op == SMELT_OP_MEAN ? SMELT_OP_SUM : k->op;
    snprintf(name, n, "smelt_blk_red_%s_%s_%s", smelt__ops[op].name, smelt__dtypes[k->in].name,
             smelt__dtypes[k->acc].name);
}
/* a loop over a run, twice: where the operand's stride is 1 (cond, its
 * element x[0]) and where it is not (x[1]), so that the first vectorises */
static void red_two_loops(smelt__sb *b, const smelt__dialect *dl, const red_kind *k, const char *ind, const char *cond,
                          const char *loop, const char *acc, const char *acci, const char *const *x, const char *idx)
{
    for (int t = 0; t < 2; t++) {
        if (t)
            smelt__sb_printf(b, "%selse\n", ind);
        else
            smelt__sb_printf(b, "%sif (%s)\n", ind, cond);
        smelt__sb_puts(b, loop);
        red_step(b, dl, k, "                ", acc, acci, x[t], idx);
        smelt__sb_puts(b, "            }\n");
    }
}


/* The lanes of k, fn_row and fn_col (qual: their qualifiers).
 *   row: n elements x[i * args[0]] into the lanes acc[0..32), element i in
 *        lane (args[1] + i) % 32 (argmax, argmin: its index args[2] + i);
 *   col: n rows of args[2] results, element w of row i x[i * args[0] + w *
 *        args[1]], into acc[l * RED_W + w], row i in lane (args[3] + i) % 32
 *        (its index args[4] + i).
 * The indices of argmax and argmin sit 32 * RED_W slots after the values. */
void smelt__red_lanes(smelt__sb *b, const smelt__dialect *dl, const red_kind *k, const char *fn, const char *qual)
{
    const char *A = dl->type[k->acc], *X = dl->stype[k->in];
    /* (the prelude's smelt_fetch, but the library's block lanes have no prelude) */
    smelt__sb_printf(b, "#if " C_GCC_ONLY " && !defined(SMELT_AHEAD)\n"
                        "#define SMELT_AHEAD\n"
                        "static inline void smelt_ahead(uint64_t p, int bytes)\n{\n"
                        "    for (int z = 0; z < bytes; z += 64)\n"
                        "        __builtin_prefetch((const void *)(p + %d + z), 0, 3);\n}\n#endif\n",
                     RED_ROW_AHEAD);
    smelt__sb_printf(b, "%s void %s_row(" RED_LANES_ARGS ")\n{\n"
                        "    %s *restrict acc = (%s *)accp;\n"
                        "    const %s *restrict x = (const %s *)xp;\n"
                        "    const int64_t s = args[0];\n"
                        "    int64_t i = 0;\n"
                        "    int l = (int)args[1];\n",
                     qual, fn, A, A, X, X);
    if (k->arg)
        smelt__sb_printf(b, "    int64_t *restrict acci = (int64_t *)accp + %d;\n"
                            "    const int64_t r0 = args[2];\n", 32 * RED_W);
    else
        smelt__sb_puts(b, "    int64_t *restrict acci = 0;\n    const int64_t r0 = 0;\n    (void)acci, (void)r0;\n");
    smelt__sb_puts(b, "    for (; l != 0 && i < n; i++, l = (l + 1) & 31) {\n");
    red_step(b, dl, k, "        ", "acc[l]", "acci[l]", "x[i * s]", "r0 + i");
    smelt__sb_printf(b, "    }\n    %s v[32];\n    int64_t vi[32];\n    for (int q = 0; q < 32; q++)\n"
                        "        v[q] = acc[q]%s;\n", A, k->arg ? ", vi[q] = acci[q]" : ", vi[q] = 0");
    red_fast_minmax(b, dl, k);
    /* a run read at stride 1 from memory: the lines RED_ROW_AHEAD bytes on
     * are fetched as each 32 elements are taken (a hint: no result
     * changes).  Runs of a fused operand, computed a block at a time into
     * the cache (RED_PROD_BLOCK elements at most), fetch nothing: there the
     * fetches cost a row program (a layernorm of 4096 x 4096) 10-15 %. */
    char step[400];
    snprintf(step, sizeof step,
             "#if " C_GCC_ONLY "\n"
             "        for (; i + 32 <= n; i += 32, n > %d ? smelt_ahead((uint64_t)(x + i), %d) : (void)0)\n"
             "#else\n        for (; i + 32 <= n; i += 32)\n#endif\n"
             "            for (int q = 0; q < 32; q++) {\n",
             RED_PROD_BLOCK, 32 * (int)smelt__dtypes[k->in].size);
    red_two_loops(b, dl, k, "    ", "s == 1", step,
                  "v[q]", "vi[q]", (const char *[]){"x[i + q]", "x[(i + q) * s]"}, "r0 + i + q");
    smelt__sb_puts(b, "    for (int q = 0; i < n; i++, q++) {\n");
    red_step(b, dl, k, "        ", "v[q]", "vi[q]", "x[i * s]", "r0 + i");
    smelt__sb_printf(b, "    }\n    for (int q = 0; q < 32; q++)\n        acc[q] = v[q]%s;\n}\n",
                     k->arg ? ", acci[q] = vi[q]" : "");

    smelt__sb_printf(b, "%s void %s_col(" RED_LANES_ARGS ")\n{\n"
                        "    %s *restrict acc = (%s *)accp;\n"
                        "    const %s *restrict x = (const %s *)xp;\n"
                        "    const int64_t sr = args[0], sw = args[1], nw = args[2];\n"
                        "    int l = (int)args[3];\n",
                     qual, fn, A, A, X, X);
    if (k->arg)
        smelt__sb_printf(b, "    int64_t *restrict acci = (int64_t *)accp + %d;\n"
                            "    const int64_t r0 = args[4];\n", 32 * RED_W);
    smelt__sb_printf(b, "    for (int64_t i = 0; i < n; i++, l = (l + 1) & 31) {\n"
                        "        const %s *restrict row = x + i * sr;\n"
                        "        %s *restrict a = acc + l * %d;\n", X, A, RED_W);
    if (k->arg)
        smelt__sb_printf(b, "        int64_t *restrict ai = acci + l * %d;\n", RED_W);
    /* rows far apart defeat the hardware's prefetch: the row RED_COL_AHEAD
     * below is fetched now (a hint: no result changes) */
    smelt__sb_printf(b, "#if defined(__GNUC__) && !defined(__TINYC__)\n"
                        "        if (sw == 1 && i + %d < n)\n"
                        "            for (int64_t w = 0; w < nw; w += %d)\n"
                        "                __builtin_prefetch(row + %d * sr + w, 0, 3);\n"
                        "#endif\n",
                     RED_COL_AHEAD, 64 / (int)smelt__dtypes[k->in].size, RED_COL_AHEAD);
    red_two_loops(b, dl, k, "        ", "sw == 1", "            for (int64_t w = 0; w < nw; w++) {\n", "a[w]", "ai[w]",
                  (const char *[]){"row[w]", "row[w * sw]"}, "r0 + i");
    smelt__sb_puts(b, "    }\n}\n");
}

/* A smelt__literal of the accumulator's identity (or, idx, of the largest index). */
void smelt__red_ident(smelt__sb *b, const smelt__dialect *dl, const red_kind *k)
{
    smelt__kop c = {.op = SMELT_OP_CONST, .dtype = k->acc, .fval = smelt__red_identity(k->op, k->acc)};
    int id = smelt__ops[k->op].ident;
    c.ival = k->acc == SMELT_I64 && id == SMELT_IDENT_LOWEST    ? INT64_MIN
             : k->acc == SMELT_I64 && id == SMELT_IDENT_HIGHEST ? INT64_MAX
             : smelt__is_float(k->acc)                         ? 0 /* +-inf: fval says it */
                                                                : (int64_t)c.fval;
    smelt__literal(b, dl, &c);
}

/* The types and helpers both reduction templates use: smelt_fold (a
 * value, or argmax's pair, takes another), smelt_result (what a result
 * stores), and for the device smelt_conv (an element as an accumulator
 * value).  Functions rather than macros: TinyCC's preprocessor is the part
 * of it that fails (crashes) when an allocation fails (tests/test-faults.c),
 * and TinyCC's kernels (blocks) include no prelude: the library converts
 * their f16/bf16 results (its cast primitive, the prelude's rounding). */
void smelt__red_defs(smelt__sb *b, const smelt__dialect *dl, const red_kind *k, bool blocks)
{
    const char *kw = dl->helper_kw;
    smelt__sb_printf(b, "typedef %s smelt_acc; /* %s accumulators */\n"
                        "typedef %s smelt_in;  /* the operand's elements (%s) */\n"
                        "typedef %s smelt_out; /* the results (%s) */\n",
                     dl->type[k->acc], smelt__dtypes[k->acc].name, dl->stype[k->in], smelt__dtypes[k->in].name,
                     dl->stype[k->out], smelt__dtypes[k->out].name);
    char cast[SMELT_BLK_NAME_MAX];
    smelt__blk_name(cast, SMELT_OP_CAST, SMELT_F32, k->out);
    if (smelt__is_half(k->out) && blocks && !k->arg)
        smelt__declare_once(b, cast, BLK_ARGS);
    smelt__sb_printf(b, "%s void smelt_fold(smelt_acc *v, int64_t *vi, smelt_acc u, int64_t ui)\n{\n", kw);
    if (k->arg) { /* (v, vi) takes (u, ui) when u beats v, or neither beats the other and ui is lower */
        smelt__sb_puts(b, "    if (");
        red_expand(b, dl, k, "(*v)", "u");
        smelt__sb_puts(b, " || (!");
        red_expand(b, dl, k, "u", "(*v)");
        smelt__sb_puts(b, " && ui < *vi)) {\n        *v = u;\n        *vi = ui;\n    }\n}\n");
    } else {
        smelt__sb_puts(b, "    (void)vi, (void)ui;\n    *v = ");
        red_expand(b, dl, k, "(*v)", "u");
        smelt__sb_puts(b, ";\n}\n");
    }
    smelt__sb_printf(b, "%s smelt_out smelt_result(smelt_acc v, int64_t vi, int64_t nred)\n{\n", kw);
    if (k->arg) {
        smelt__sb_puts(b, "    (void)v, (void)nred;\n    return vi;\n}\n");
    } else {
        smelt__sb_printf(b, "    (void)vi, (void)nred;\n    const smelt_acc r = %s;\n",
                         k->op == SMELT_OP_MEAN ? "v / (smelt_acc)nred" : "v");
        if (smelt__is_half(k->out) && blocks)
            smelt__sb_printf(b, "    smelt_out h;\n    %s(1, (char *)&h, (const char *)&r, 0, 0);\n    return h;\n}\n",
                             cast);
        else if (smelt__is_half(k->out)) {
            smelt__sb_printf(b, "    return smelt_f2h_%s(r);\n}\n", smelt__dtypes[k->out].name);
        } else {
            smelt__sb_puts(b, "    return (smelt_out)r;\n}\n");
        }
    }
    if (dl->device) {
        smelt__sb_printf(b, "%s smelt_acc smelt_conv(smelt_in x)\n{\n    return ", kw);
        red_conv(b, dl, k, "x");
        smelt__sb_puts(b, ";\n}\n");
    }
}

/* A TinyCC reduction kernel's own prelude: the library does its arithmetic. */
const char smelt__red_blocks_prelude[] =
    "/* smelt reduction kernel for TinyCC: no prelude needed, the library's lanes do the arithmetic */\n"
    "typedef unsigned char uint8_t;\ntypedef unsigned short uint16_t;\ntypedef int int32_t;\n"
    "typedef unsigned int uint32_t;\ntypedef long long int64_t;\ntypedef unsigned long long uint64_t;\n"
    "static float smelt_f32_bits(uint32_t u) { union { uint32_t u; float f; } x; x.u = u; return x.f; }\n"
    "static double smelt_f64_bits(uint64_t u) { union { uint64_t u; double f; } x; x.u = u; return x.f; }\n";

/* The dimension lists and a description shared by both forms. */
void smelt__red_dims(const smelt__kdesc *d, smelt__sb *kd, smelt__sb *rd, int *nk, int *nr, int *klast, int *rlast)
{
    *nk = *nr = 0;
    *klast = *rlast = -1;
    for (int dd = 0; dd < d->rank; dd++) {
        bool r = d->rmask >> dd & 1u;
        smelt__sb_printf(r ? rd : kd, "%s%d", (r ? *nr : *nk) ? ", " : "", dd);
        if (r)
            (*nr)++, *rlast = dd;
        else
            (*nk)++, *klast = dd;
    }
    if (!*nk)
        smelt__sb_puts(kd, "0");
}

/* Whether output o is at the result's shape: the reduction's value, or an
 * epilogue's (the full-size outputs, its producers' values, come first). */
static bool red_rout(const smelt__kdesc *d, int o) { return d->out_val[o] >= d->n_in + d->red; }
/* The operators after the reduction: its epilogue. */
static bool red_epi(const smelt__kdesc *d) { return d->red + 1 < d->n_ops; }

static int red_check(const smelt__kdesc *d, smelt__sb *err)
{
    int x = d->red >= 0 && d->red < d->n_ops ? d->ops[d->red].in[0] : -1, nfull = 0;
    bool ok = d->n_out >= 1 && d->rmask && x >= 0 && x < d->n_in + d->red && smelt__is_reduce(d->ops[d->red].op);
    for (int o = 0; ok && o < d->n_out; o++) {
        ok = red_rout(d, o) || o == nfull;
        nfull += !red_rout(d, o);
    }
    ok = ok && (x >= d->n_in || (x == 0 && nfull == 0)); /* (the epilogue's inputs after it) */
    for (int k = d->red + 1; ok && k < d->n_ops; k++) /* the reduced value, the epilogue's, constants */
        for (int j = 0; j < d->ops[k].nin; j++) {
            int v = d->ops[k].in[j];
            ok = ok && (v < d->n_in || v >= d->n_in + d->red || d->ops[v - d->n_in].op == SMELT_OP_CONST);
        }
    if (!ok) {
        smelt__sb_puts(err, "a reduction kernel is its operand's producers, the reduction, then its epilogue");
        return SMELT_ERR_INVALID_ARG;
    }
    return SMELT_OK;
}

/* The epilogue as an elementwise kernel description (ops allocated): its
 * inputs the reduced value (as the result is stored), then the kernel's
 * inputs it reads (ein[j]: input j's operand index in the kernel), its
 * operators the constants it reads that the producers' part holds, then
 * its own; its outputs the epilogue's outputs (not the reduced value);
 * rank 1, every operand strided (the column form computes a row of
 * results at once): the piece of d after its reduction (smelt__rows_piece). */
static int red_epilogue(const smelt__kdesc *d, smelt__kdesc *e, int *ein)
{
    int rv = d->n_in + d->red, outs[SMELT_MAX_KERNEL_OPERANDS], n = 0;
    bool *mine = malloc(sizeof(bool) * (size_t)(d->n_ops + 1));
    if (!mine)
        return SMELT_ERR_NOMEM;
    for (int k = 0; k < d->n_ops; k++) /* the operators after the reduction */
        mine[k] = k > d->red;
    for (int o = 0; o < d->n_out; o++)
        if (d->out_val[o] > rv)
            outs[n++] = d->out_val[o];
    smelt__sb err;
    smelt__sb_init(&err);
    int st = smelt__rows_piece(d, mine, outs, n, 1, e, ein, &err, rv); /* (the reduced value: input 0) */
    smelt__sb_free(&err);
    free(mine);
    for (int q = 0; !st && q < e->n_in + e->n_out; q++)
        e->mode[q] = SMELT_MODE_STRIDED;
    return st;
}

/* The operand index of the reduced value among the kernel's operands, or
 * -1 when only its epilogue reads it. */
static int red_y(const smelt__kdesc *d)
{
    for (int o = 0; o < d->n_out; o++)
        if (d->out_val[o] == d->n_in + d->red)
            return d->n_in + o;
    return -1;
}

/* Whether the reduction's operand is computed in the kernel (input fusion). */
static bool red_fused(const smelt__kdesc *d) { return d->ops[d->red].in[0] >= d->n_in; }

/* The producers of a fused reduction as an elementwise kernel description:
 * the reduction's inputs, the operators before it; its outputs the
 * reduction's operand (operand n_in, written contiguously into the
 * kernel's block of elements), then the kernel's full-size outputs. */
static smelt__kdesc red_producers(const smelt__kdesc *d)
{
    smelt__kdesc p = *d;
    p.n_ops = d->red;
    p.out_val[0] = d->ops[d->red].in[0];
    p.mode[d->n_in] = SMELT_MODE_CONTIG;
    p.n_out = 1;
    for (int e = 0; e < d->n_out && !red_rout(d, e); e++) { /* the full-size outputs */
        p.out_val[1 + e] = d->out_val[e];
        p.mode[d->n_in + 1 + e] = d->mode[d->n_in + e];
        p.n_out++;
    }
    p.reduce = false;
    p.red = 0;
    p.rmask = 0;
    return p;
}

/* The producers' elementwise kernel (the loop form, or for TinyCC the
 * block form) as a static function fname; ahead: the loop form fetches its
 * inputs ahead (smelt_prod, called a block at a time over memory; a row
 * program's passes have their own fetch, smelt_pf) */
int smelt__red_fn(const smelt__dialect *dl, const smelt__kdesc *pd, const char *fname, bool blocks, bool ahead,
                  smelt__sb *out, smelt__sb *err)
{
    smelt__kdesc p = *pd;
    smelt__sb text;
    smelt__sb_init(&text);
    int st = blocks ? smelt__emit_blocks(dl, &p, &text, NULL, true, err) : smelt__c_walker(dl, &p, "", ahead, &text, err);
    if (!st) {
        const char *q = smelt__sb_str(&text), *h = strstr(q, "static double smelt_f64_bits");
        if (blocks && out->len && h && strchr(h, '\n')) /* the block form's head, once */
            q = strchr(h, '\n') + 1;
        smelt__sb named;
        smelt__sb_init(&named);
        for (const char *s; (s = strstr(q, NAME_TOKEN)); q = s + strlen(NAME_TOKEN)) {
            bool def = s - q >= 5 && !strncmp(s - 5, "void ", 5);
            smelt__sb_putn(&named, q, (size_t)(s - q) - (def ? 5 : 0));
            smelt__sb_puts(&named, def ? "static void " : "");
            smelt__sb_puts(&named, fname);
        }
        smelt__sb_puts(&named, q);
        /* the loop form's helper, smelt_group, named after the function:
         * the producers' and the epilogue's stand side by side */
        q = smelt__sb_str(&named);
        for (const char *s; (s = strstr(q, "smelt_group")); q = s + strlen("smelt_group")) {
            smelt__sb_putn(out, q, (size_t)(s - q));
            smelt__sb_printf(out, "%s_group", fname);
        }
        smelt__sb_puts(out, q);
        st = out->oom || text.oom || named.oom ? SMELT_ERR_NOMEM : SMELT_OK;
        smelt__sb_free(&named);
    }
    smelt__sb_free(&text);
    return st;
}

static void red_what(smelt__sb *b, const red_kind *k, const smelt__kdesc *d)
{
    smelt__sb_printf(b, "%s of %s into %s (%s accumulators)", smelt__ops[k->op].name, smelt__dtypes[k->in].name,
                     smelt__dtypes[k->out].name, smelt__dtypes[k->acc].name);
    if (red_fused(d))
        smelt__sb_printf(b, ", its operand computed from %d inputs", d->n_in);
}

/* Real operators (not constants) of a kernel, as a slot. */
int smelt__red_nops(const smelt__kdesc *d)
{
    int n = 0;
    for (int k = 0; k < d->n_ops; k++)
        n += d->ops[k].op != SMELT_OP_CONST;
    return n;
}

static const char red_fused_text[] =
    "Input fusion: the operand's elements are computed by its producers,\n"
    " * the operators fused before the reduction (smelt_prod, an elementwise kernel),\n"
    " * a run at a time into a block, with the values and roundings of the\n"
    " * unfused kernels, and combined from there in the same order.";

static const char red_epi_text[] =
    "\n * Epilogue: the operators fused after the reduction (smelt_epi, an\n"
    " * elementwise kernel) run on each result as it is stored, with the\n"
    " * values and roundings of the unfused kernel that would read it.";

/* C (both CPU tiers): blocks, the TinyCC tier's, calls the library's lanes
 * (smelt__emit_blk_library compiles the same functions into it). */
/* The C forms' element loop (CALL): the lanes' function over a run of the
 * operand, read from memory (sx, the kernel's strides) or computed by the
 * producers a block at a time (fused: sx the iteration space's own
 * strides); lf, the lanes' function, row or column (col) form */
static void red_c_call(smelt__sb *sx, smelt__sb *call, const smelt__kdesc *d, bool fused, bool col, const char *lf)
{
    int R = d->rank, nin = d->n_in, np = nin + d->n_out;
    if (!fused) {
        smelt__sb_puts(sx, "    const int64_t *sx = strides;");
        if (col)
            smelt__sb_printf(call, "{\n                    const int64_t a[5] = {rs, xw, m, r & 31, r};\n"
                                    "                    %s_col(seg, buf, x + xo + off, a);\n                }", lf);
        else
            smelt__sb_printf(call, "{\n                    const int64_t a[3] = {rs, r & 31, r};\n"
                                    "                    %s_row(seg, buf, x + xo + off, a);\n                }", lf);
    } else {
        /* sx: the iteration space's own (contiguous) strides, so that xo + off
         * is an element's linear index, the producers' iteration index; the
         * producers read the inputs with the kernel's strides (pst) and write
         * tmp (strides 0 but along the innermost dimension) */
        smelt__sb_printf(sx, "    int64_t sx[%d], pst[%d], psh[%d];\n    char *pp[%d];\n    smelt_in tmp[%d];\n"
                              "    for (int d = %d; d >= 0; d--) {\n"
                              "        sx[d] = d == %d ? 1 : sx[d + 1] * shape[d + 1];\n"
                              "        psh[d] = shape[d];\n    }\n    psh[%d] = 0; /* no streaming stores */\n"
                              "    for (int q = 0; q < %d; q++) /* the inputs, tmp, the full-size outputs */\n"
                              "        for (int d = 0; d < %d; d++)\n"
                              "            pst[q * %d + d] = q < %d ? strides[q * %d + d] : q == %d ? d == %d : "
                              "strides[(q - 1) * %d + d];\n"
                              "    for (int q = 0; q < %d; q++)\n        pp[q] = q < %d ? ptrs[q] : ptrs[q - 1];",
                         R, np * R, R + 1, np, RED_PROD_BLOCK, R - 1, R - 1, R, np, R, R, nin, R, nin, R - 1, R, np,
                         nin);
        if (col)
            smelt__sb_printf(call, "for (int64_t u = 0; u < seg; u++) {\n"
                                    "                    const int64_t L = xo + off + u * rs, a[5] = {0, 1, m, (r + u) & 31, r + u};\n"
                                    "                    pp[%d] = (char *)tmp - (L %% shape[%d]) * (int64_t)sizeof(smelt_in);\n"
                                    "                    smelt_prod(L, L + m, pp, psh, pst);\n"
                                    "                    %s_col(1, buf, tmp, a);\n                }", nin, R - 1, lf);
        else
            smelt__sb_printf(call, "for (int64_t u = 0; u < seg; u += %d) {\n"
                                    "                    const int64_t nb = seg - u < %d ? seg - u : %d, L = xo + off + u;\n"
                                    "                    const int64_t a[3] = {1, (r + u) & 31, r + u};\n"
                                    "                    pp[%d] = (char *)tmp - (L %% shape[%d]) * (int64_t)sizeof(smelt_in);\n"
                                    "                    smelt_prod(L, L + nb, pp, psh, pst);\n"
                                    "                    %s_row(nb, buf, tmp, a);\n                }", RED_PROD_BLOCK,
                             RED_PROD_BLOCK, RED_PROD_BLOCK, nin, R - 1, lf);
    }
}

/* The C forms' store (STORE) of a row of m results: each result, or the
 * results then the epilogue (smelt_epi) on them; 0 or a status */
static int red_c_store(smelt__sb *store, const smelt__kdesc *d, bool col, int ny, int klast)
{
    int st = SMELT_OK, R = d->rank;
    if (!red_epi(d)) {
        smelt__sb_puts(store, "\n            for (int64_t w = 0; w < m; w++)\n"
                               "                y[yo + w * yw] = smelt_result(tot[w], toti[w], nred);");
    } else { /* the results, then smelt_epi on them: a row of m results at once */
        int ein[SMELT_MAX_KERNEL_OPERANDS + 1], eq[2 * SMELT_MAX_KERNEL_OPERANDS + 1], ne = 0;
        smelt__kdesc ed;
        if (!(st = red_epilogue(d, &ed, ein))) { /* its operands: inputs, then outputs */
            for (int j = 1; j < ed.n_in; j++)
                eq[ne++] = ein[j];
            for (int o = 0; o < d->n_out; o++)
                if (d->out_val[o] > d->n_in + d->red)
                    eq[ne++] = d->n_in + o;
            free(ed.ops);
        }
        smelt__sb_printf(store, "{\n            smelt_out rv[%d];\n            for (int64_t w = 0; w < m; w++) {\n"
                                 "                rv[w] = smelt_result(tot[w], toti[w], nred);\n%s            }\n"
                                 "            char *ep[%d];\n            int64_t es[%d], esh[2] = {m, 0};\n"
                                 "            ep[0] = (char *)rv;\n            es[0] = 1;\n",
                         col ? RED_W : 1, ny >= 0 ? "                y[yo + w * yw] = rv[w];\n" : "",
                         ne + 1, ne + 1);
        for (int e = 1; e <= ne; e++) {
            int q = eq[e - 1];
            smelt__sb_printf(store, "            {\n                int64_t eo = 0, et = o;\n"
                                     "                for (int k = nk - 1; k >= 0; k--) {\n"
                                     "                    const int64_t sz = shape[kd[k]], qq = et / sz;\n"
                                     "                    eo += (et - qq * sz) * strides[%d + kd[k]];\n"
                                     "                    et = qq;\n                }\n"
                                     "                ep[%d] = ptrs[%d] + eo * %zu;\n"
                                     "                es[%d] = 0;\n            }\n",
                             q * R, e, q, smelt__dtypes[smelt__operand_dtype(d, q)].size, e);
            if (col)
                smelt__sb_printf(store, "            es[%d] = strides[%d];\n", e, q * R + klast);
        }
        smelt__sb_puts(store, "            smelt_epi(0, m, ep, esh, es);\n        }");
    }
    return st;
}

int smelt__shape_c_reduce(const smelt__dialect *dl, const smelt__kdesc *d, bool blocks, const char *prelude,
                          smelt__sb *text, smelt__sb *err)
{
    int st = red_check(d, err);
    if (st)
        return st;
    bool fused = red_fused(d);
    red_kind k = smelt__red_kind_of(d->ops[d->red].op, smelt__value_dtype(d, d->ops[d->red].in[0]));
    int nk, nr, klast, rlast, nin = d->n_in, nx = nin + d->n_out - 1;
    bool col = d->rmask >> (d->rank - 1) & 1u ? false : true; /* the innermost dimension is kept */
    smelt__sb kd, rd, defs, lanes, what, call, group, ident, pre, sx;
    smelt__sb_init(&kd), smelt__sb_init(&rd), smelt__sb_init(&defs), smelt__sb_init(&lanes);
    smelt__sb_init(&what), smelt__sb_init(&call), smelt__sb_init(&group), smelt__sb_init(&ident);
    smelt__sb_init(&pre), smelt__sb_init(&sx);
    if (fused) { /* the producers' function after the prelude (TinyCC: instead of it) */
        if (!blocks)
            smelt__sb_puts(&pre, prelude);
        smelt__kdesc p = red_producers(d);
        st = smelt__red_fn(dl, &p, "smelt_prod", blocks, true, &pre, err);
        prelude = smelt__sb_str(&pre);
    }
    if (!st && red_epi(d)) { /* the epilogue's function (after the producers') */
        if (!blocks && !fused)
            smelt__sb_puts(&pre, prelude);
        smelt__kdesc e;
        int ein[SMELT_MAX_KERNEL_OPERANDS + 1];
        st = red_epilogue(d, &e, ein);
        if (!st)
            st = smelt__red_fn(dl, &e, "smelt_epi", blocks, false, &pre, err);
        free(e.ops);
        prelude = smelt__sb_str(&pre);
    }
    smelt__red_dims(d, &kd, &rd, &nk, &nr, &klast, &rlast);
    smelt__red_defs(&defs, dl, &k, blocks);
    red_what(&what, &k, d);
    smelt__red_ident(&ident, dl, &k);
    char fn[SMELT_BLK_NAME_MAX];
    smelt__red_prim_name(fn, sizeof fn, &k);
    if (blocks)
        smelt__sb_printf(&lanes, "void %s_row(" RED_LANES_ARGS ");\nvoid %s_col(" RED_LANES_ARGS ");\n", fn, fn);
    else
        smelt__red_lanes(&lanes, dl, &k, "smelt_red", "static");
    const char *lf = blocks ? fn : "smelt_red";
    if (col)
        smelt__sb_printf(&group, "{\n            const int64_t ii = o %% inner;\n"
                                 "            m = inner - ii < %d ? inner - ii : %d;\n"
                                 "            if (m > end - i)\n                m = end - i;\n        }", RED_W, RED_W);
    red_c_call(&sx, &call, d, fused, col, lf);
    int ny = red_y(d);
    smelt__sb store;
    smelt__sb_init(&store);
    if (!st)
        st = red_c_store(&store, d, col, ny, klast);
    char inner[32], xw[32], yw[32];
    snprintf(inner, sizeof inner, col ? "shape[%d]" : "1", klast);
    snprintf(xw, sizeof xw, col ? "sx[%d]" : "0", klast);
    snprintf(yw, sizeof yw, col ? "sy[%d]" : "0", klast);
    const slot sl[] = {
        {"PRELUDE", prelude}, {"NAME", NAME_TOKEN}, {"NOPS", SLOT_NUM(smelt__red_nops(d))}, {"WHAT", smelt__sb_str(&what)},
        {"RANK", SLOT_NUM(d->rank)}, {"NX", SLOT_NUM(nx)}, {"SX", smelt__sb_str(&sx)},
        {"FUSED", fused ? red_fused_text : ""},
        {"NK", SLOT_NUM(nk)}, {"NR", SLOT_NUM(nr)}, {"KD", smelt__sb_str(&kd)}, {"RD", smelt__sb_str(&rd)},
        {"FORM", col ? "column" : "row"}, {"CHUNK", SLOT_NUM(SMELT_RED_CHUNK)}, {"W", SLOT_NUM(RED_W)},
        {"LS", SLOT_NUM(col ? RED_W : 1)}, {"DEFS", smelt__sb_str(&defs)}, {"LANES", smelt__sb_str(&lanes)},
        {"RLAST", SLOT_NUM(rlast)}, {"INNER", inner}, {"XW", xw}, {"YW", yw}, {"GROUP", smelt__sb_str(&group)},
        {"CALL", smelt__sb_str(&call)}, {"IDENT", smelt__sb_str(&ident)},
        {"NY", SLOT_NUM(ny >= 0 ? ny : nx)}, {"STORE", smelt__sb_str(&store)},
        {"EPI", red_epi(d) ? red_epi_text : ""}};
    if (!st)
        st = smelt__load_render(text, dl, "kernel_reduce", sl, NSLOTS(sl), err);
    smelt__sb_free(&store);
    smelt__sb_free(&kd), smelt__sb_free(&rd), smelt__sb_free(&defs), smelt__sb_free(&lanes);
    smelt__sb_free(&what), smelt__sb_free(&call), smelt__sb_free(&group), smelt__sb_free(&ident);
    smelt__sb_free(&pre), smelt__sb_free(&sx);
    return st;
}

/* A device (CUDA): a warp per result. */
/* A spread reduction's lane loop (kernel_reduce_spread.cu.in,
 * kernel_reduce_cols.cu.in), at indentation ind: the lane's elements r =
 * r0, r0 + L, ... (L: the warp's lanes) below c1 folded into v, vi in that order, 8 at a time
 * computed (OFF, the offsets, and ELEM, the element e) before they are
 * folded, so that their loads go out together: one at a time, each
 * behind its test of the chunk's end, the few warps of a spread form
 * (4096 for 16384 x 4096 columns) kept too few loads in flight (the
 * columns at 37 % of an H100's copy, a hand-written kernel of the same
 * order 87 %). */
enum { RED_LANE_BATCH = 8 };
static void red_dev_lane_loop(smelt__sb *b, int ind, int L, const char *r0, const char *off, const char *elem)
{
    smelt__sb_printf(b, "%*ssmelt_idx r0 = %s;\n", ind, "", r0);
    smelt__sb_printf(b, "%*sfor (; r0 + %d * %d < c1; r0 += %d * %d) { /* (smelt_idx may be unsigned) */\n", ind, "",
                     L, RED_LANE_BATCH - 1, L, RED_LANE_BATCH);
    smelt__sb_printf(b, "%*s    smelt_acc ev[%d];\n#pragma unroll\n", ind, "", RED_LANE_BATCH);
    smelt__sb_printf(b, "%*s    for (int u = 0; u < %d; u++) {\n", ind, "", RED_LANE_BATCH);
    smelt__sb_printf(b, "%*s        const smelt_idx r = r0 + %d * u;\n%s%s\n", ind, "", L, off, elem);
    smelt__sb_printf(b, "%*s        ev[u] = e;\n%*s    }\n#pragma unroll\n", ind, "", ind, "");
    smelt__sb_printf(b, "%*s    for (int u = 0; u < %d; u++)\n", ind, "", RED_LANE_BATCH);
    smelt__sb_printf(b, "%*s        smelt_fold(&v, &vi, ev[u], (long long)(r0 + %d * u));\n%*s}\n", ind, "", L, ind, "");
    smelt__sb_printf(b, "%*sfor (smelt_idx r = r0; r < c1; r += %d) {\n%s%s\n", ind, "", L, off, elem);
    smelt__sb_printf(b, "%*s    smelt_fold(&v, &vi, e, (long long)r);\n%*s}\n", ind, "", ind, "");
}

/* A device reduction's offsets, for every form of its kernel
 * (kernel_reduce*.cu.in, kernel_rows.cu.in) over its nx + 1 operands, at
 * indentation ind: XO, every operand's offset at result t (xo[], which the
 * template declares); OFF, at element r of that result (off[], from xo[]):
 * with one reduced dimension (nr, after merging) its stride times r, else
 * through the reduced shape. */
void smelt__red_dev_offsets(smelt__sb *b, bool xo, int ind, int nx, int R, int nr)
{
    const char *kk = xo ? "kd" : "rd", *dst = xo ? "xo" : "off", *v = xo ? "t" : "q", *w = xo ? "q" : "qq";
    if (!xo && nr == 1) {
        smelt__sb_printf(b, "%*ssmelt_idx off[%d];\n%*sfor (int j = 0; j < %d; j++)\n"
                            "%*s    off[j] = xo[j] + r * sx[j * %d + rd[0]];\n",
                         ind, "", nx, ind, "", nx, ind, "", R);
        return;
    }
    if (xo)
        smelt__sb_printf(b, "%*sfor (int j = 0; j <= %d; j++)\n%*s    xo[j] = 0;\n", ind, "", nx, ind, "");
    else
        smelt__sb_printf(b, "%*ssmelt_idx q = r, off[%d];\n%*sfor (int j = 0; j < %d; j++)\n%*s    off[j] = xo[j];\n",
                         ind, "", nx, ind, "", nx, ind, "");
    smelt__sb_printf(b,
                     "%*sfor (int k = %s - 1; k >= 0; k--) {\n"
                     "%*s    const smelt_idx sz = a.shape[%s[k]], %s = %s / sz;\n"
                     "%*s    for (int j = 0; j %s %d; j++)\n"
                     "%*s        %s[j] += (%s - %s * sz) * sx[j * %d + %s[k]];\n"
                     "%*s    %s = %s;\n%*s}\n",
                     ind, "", xo ? "nk" : "nr", ind, "", kk, w, v, ind, "", xo ? "<=" : "<", nx, ind, "", dst, v, w, R,
                     kk, ind, "", v, w, ind, "");
}

/* A spread reduction's second parameter: device memory for its chunks'
 * results and a counter per result (smelt__devlaunch's red_part, red_cnt). */
static const char red_scratch_text[] = "struct smelt_red_scratch {\n    char *part;\n    unsigned *cnt;\n};\n\n";

/* A device reduction's element (ELEM: e, the operand's element at off[])
 * and, fused, the producers' pointers and constants (SETUP) */
static int red_dev_elem(smelt__sb *elem, smelt__sb *setup, const smelt__dialect *dl, const smelt__kdesc *d, bool fused)
{
    int st = SMELT_OK, nin = d->n_in;
    if (!fused) {
        smelt__sb_puts(elem, "                smelt_acc e = smelt_conv(x[off[0]]);");
    } else { /* the producers per element, their value stored as the unfused kernel stores it */
        smelt__kdesc p = red_producers(d);
        int nv = p.n_in + p.n_ops;
        int *uses = calloc((size_t)(3 * nv + 1), sizeof(int));
        bool *inl = calloc((size_t)(nv + 1), sizeof(bool));
        if (!uses || !inl) {
            st = SMELT_ERR_NOMEM;
        } else {
            smelt__plan_inlining(&p, uses, inl, uses + nv, uses + 2 * nv);
            for (int q = 0; q < nin; q++)
                smelt__sb_printf(setup, "    const %s *%s q%d = (const %s *)%sptrs[%d];\n",
                                 dl->stype[d->in_dt[q]], dl->restrict_kw, q, dl->stype[d->in_dt[q]], dl->args, q);
            for (int q = nin + 1; q < nin + p.n_out; q++) /* the full-size outputs */
                smelt__sb_printf(setup, "    %s *%s q%d = (%s *)%sptrs[%d];\n", dl->stype[smelt__operand_dtype(&p, q)],
                                 dl->restrict_kw, q, dl->stype[smelt__operand_dtype(&p, q)], dl->args, q - 1);
            for (int i = 0; i < p.n_ops; i++)
                if (p.ops[i].op == SMELT_OP_CONST) {
                    smelt__sb_printf(setup, "    const %s v%d = ", dl->type[p.ops[i].dtype], nin + i);
                    smelt__literal(setup, dl, &p.ops[i]);
                    smelt__sb_puts(setup, ";\n");
                }
            smelt__sb_printf(elem, "                smelt_in q%d[1];\n", nin);
            for (int q = 0; q < nin + p.n_out; q++)
                smelt__sb_printf(elem, "                const smelt_idx o%d = %s%d%s;\n", q, q != nin ? "off[" : "",
                                 q < nin ? q : q == nin ? 0 : q - 1, q != nin ? "]" : "");
            ectx e = {dl, &p, uses, inl, -1, FORM_OFFSET, false, false, 0, NULL, 0, NULL, NULL};
            smelt__emit_lane(elem, &e);
            smelt__sb_printf(elem, "                smelt_acc e = smelt_conv(q%d[0]);", nin);
        }
        free(uses), free(inl);
    }
    return st;
}

/* A device reduction's store (STORE) of result xo: on lane 0, the result,
 * or the result then the epilogue on it */
static int red_dev_store(smelt__sb *store, const smelt__dialect *dl, const smelt__kdesc *d, int ny)
{
    int st = SMELT_OK;
    if (!red_epi(d)) {
        smelt__sb_puts(store, "\n            y[xo[" );
        smelt__sb_printf(store, "%d]] = smelt_result(tot, toti, nred);", ny);
    } else { /* lane 0: the result, then the epilogue on it */
        smelt__kdesc e;
        int ein[SMELT_MAX_KERNEL_OPERANDS + 1];
        st = red_epilogue(d, &e, ein);
        int nv = e.n_in + e.n_ops;
        int *uses = st ? NULL : calloc((size_t)(3 * nv + 1), sizeof(int));
        bool *inl = st ? NULL : calloc((size_t)(nv + 1), sizeof(bool));
        if (!st && (!uses || !inl))
            st = SMELT_ERR_NOMEM;
        if (!st) {
            smelt__plan_inlining(&e, uses, inl, uses + nv, uses + 2 * nv);
            smelt__sb_printf(store, "{\n            smelt_out q0[1];\n            const smelt_idx o0 = 0;\n"
                                     "            q0[0] = smelt_result(tot, toti, nred);\n");
            if (ny >= 0)
                smelt__sb_printf(store, "            y[xo[%d]] = q0[0];\n", ny);
            for (int q = 1; q < e.n_in; q++) {
                const char *T = dl->stype[e.in_dt[q]];
                smelt__sb_printf(store, "            const %s *%s q%d = (const %s *)%sptrs[%d];\n"
                                         "            const smelt_idx o%d = xo[%d];\n", T, dl->restrict_kw, q, T, dl->args,
                                 ein[q], q, ein[q]);
            }
            for (int o = 0, q = e.n_in; o < d->n_out; o++)
                if (d->out_val[o] > d->n_in + d->red) {
                    const char *T = dl->stype[smelt__operand_dtype(&e, q)];
                    smelt__sb_printf(store, "            %s *%s q%d = (%s *)%sptrs[%d];\n"
                                             "            const smelt_idx o%d = xo[%d];\n", T, dl->restrict_kw, q, T,
                                     dl->args, d->n_in + o, q, d->n_in + o);
                    q++;
                }
            for (int i = 0; i < e.n_ops; i++)
                if (e.ops[i].op == SMELT_OP_CONST) {
                    smelt__sb_printf(store, "            const %s v%d = ", dl->type[e.ops[i].dtype], e.n_in + i);
                    smelt__literal(store, dl, &e.ops[i]);
                    smelt__sb_puts(store, ";\n");
                }
            ectx ec = {dl, &e, uses, inl, -1, FORM_OFFSET, false, false, 0, NULL, 0, NULL, NULL};
            smelt__emit_lane(store, &ec);
            smelt__sb_puts(store, "        }");
        }
        free(uses), free(inl);
        free(e.ops);
    }
    return st;
}

int smelt__shape_device_reduce(const smelt__target *t, const smelt__kdesc *d, const char *prelude,
                               smelt__sb *text, smelt__sb *err)
{
    const smelt__dialect *dl = t->dialect;
    warp_text wt;
    int st = red_check(d, err);
    if (!st)
        st = smelt__warp_text(&wt, t, err);
    if (st)
        return st;
    bool fused = red_fused(d);
    red_kind k = smelt__red_kind_of(d->ops[d->red].op, smelt__value_dtype(d, d->ops[d->red].in[0]));
    int nk, nr, klast, rlast, R = d->rank, nin = d->n_in, nx = nin + d->n_out - 1, nops = nx + 1;
    smelt__sb kd, rd, defs, what, ident, setup, elem;
    smelt__sb_init(&kd), smelt__sb_init(&rd), smelt__sb_init(&defs), smelt__sb_init(&what), smelt__sb_init(&ident);
    smelt__sb_init(&setup), smelt__sb_init(&elem);
    smelt__red_dims(d, &kd, &rd, &nk, &nr, &klast, &rlast);
    smelt__red_defs(&defs, dl, &k, false);
    red_what(&what, &k, d);
    smelt__red_ident(&ident, dl, &k);
    if (!st)
        st = red_dev_elem(&elem, &setup, dl, d, fused);
    int ny = red_y(d);
    smelt__sb store;
    smelt__sb_init(&store);
    if (!st)
        st = red_dev_store(&store, dl, d, ny);
    /* a spread variant: its loop first, then (never reached) the usual one;
     * the offsets at each form's indentation */
    smelt__sb spread, xo[2], off[2];
    smelt__sb_init(&spread);
    for (int f = 0; f < 2; f++) {
        smelt__sb_init(&xo[f]), smelt__sb_init(&off[f]);
        smelt__red_dev_offsets(&xo[f], true, f ? 12 : 8, nx, R, nr);
        smelt__red_dev_offsets(&off[f], false, f ? (d->spread == SMELT_SPREAD_COLS ? 20 : 16) : 16, nx, R, nr);
    }
    smelt__sb loop;
    smelt__sb_init(&loop);
    if (d->spread)
        red_dev_lane_loop(&loop, d->spread == SMELT_SPREAD_COLS ? 16 : 12, wt.L,
                          d->spread == SMELT_SPREAD_COLS ? "c0 + l" : "c0 + lane", smelt__sb_str(&off[1]),
                          smelt__sb_str(&elem));
    const slot fsl[] = {{"NAME", NAME_TOKEN}, {"STORE", smelt__sb_str(&store)}, {"RANK", SLOT_NUM(R)},
                        {"NX", SLOT_NUM(nx)}, {"LOOP", smelt__sb_str(&loop)}, {"CHUNK", SLOT_NUM(SMELT_RED_CHUNK)},
                        {"ARG", SLOT_NUM(k.arg)}, {"XO", smelt__sb_str(&xo[1])}, WARP_SLOTS(wt)};
    if (!st && d->spread)
        st = smelt__load_render(&spread, dl, d->spread == SMELT_SPREAD_COLS ? "kernel_reduce_cols" : "kernel_reduce_spread",
                         fsl, NSLOTS(fsl), err);
    const slot sl[] = {
        {"PRELUDE", prelude}, {"NAME", NAME_TOKEN}, {"NOPS", SLOT_NUM(smelt__red_nops(d))}, {"WHAT", smelt__sb_str(&what)},
        {"NY", SLOT_NUM(ny >= 0 ? ny : nx)}, {"STORE", smelt__sb_str(&store)},
        {"EPI", red_epi(d) ? red_epi_text : ""},
        {"RANK", SLOT_NUM(R)}, {"NX", SLOT_NUM(nx)}, {"SETUP", smelt__sb_str(&setup)},
        {"ELEM", smelt__sb_str(&elem)}, {"FUSED", fused ? red_fused_text : ""},
        {"NK", SLOT_NUM(nk)}, {"NR", SLOT_NUM(nr)}, {"KD", smelt__sb_str(&kd)}, {"RD", smelt__sb_str(&rd)},
        {"CHUNK", SLOT_NUM(SMELT_RED_CHUNK)}, {"DEFS", smelt__sb_str(&defs)},
        {"INDEX", d->idx32 ? "unsigned int" : "long long"}, {"NOPERANDS", SLOT_NUM(nops)},
        {"NSTRIDES", SLOT_NUM(nops * R)},
        /* (a spread variant's second parameter counts towards the limit) */
        {"BY_VALUE", SLOT_NUM(smelt__kparam_by_value(nops, R, d->idx32, d->spread ? 16 : 0))},
        {"IDENT", smelt__sb_str(&ident)}, {"ARG", SLOT_NUM(k.arg)},
        {"SCRATCH", d->spread ? red_scratch_text : ""},
        {"SCRATCH_PARAM", d->spread ? ", const smelt_red_scratch s" : ""},
        {"SPREAD", smelt__sb_str(&spread)}, {"XO", smelt__sb_str(&xo[0])}, {"OFF", smelt__sb_str(&off[0])},
        WARP_SLOTS(wt)};
    if (!st)
        st = smelt__load_render(text, dl, "kernel_reduce", sl, NSLOTS(sl), err);
    smelt__sb_free(&spread), smelt__sb_free(&loop);
    for (int f = 0; f < 2; f++)
        smelt__sb_free(&xo[f]), smelt__sb_free(&off[f]);
    smelt__sb_free(&store);
    smelt__sb_free(&kd), smelt__sb_free(&rd), smelt__sb_free(&defs), smelt__sb_free(&what), smelt__sb_free(&ident);
    smelt__sb_free(&setup), smelt__sb_free(&elem);
    return st;
}

/* The lanes of every reduction and operand dtype, as block primitives
 * (smelt__emit_blk_library); mean's are sum's. */
void smelt__red_blk_prims(smelt__sb *prims, smelt__sb *table)
{
    for (smelt_op o = 0; o < SMELT_OP_COUNT; o++) {
        if (!smelt__is_reduce(o))
            continue;
        for (smelt_dtype dt = 0; dt < SMELT_DTYPE_COUNT; dt++) {
            if (!(smelt__ops[o].dtypes & smelt__dtypes[dt].kind))
                continue;
            red_kind k = smelt__red_kind_of(o, dt);
            char fn[SMELT_BLK_NAME_MAX], row[SMELT_BLK_NAME_MAX + 8], col[SMELT_BLK_NAME_MAX + 8];
            smelt__red_prim_name(fn, sizeof fn, &k);
            snprintf(row, sizeof row, "\"%s_row\"", fn);
            if (strstr(smelt__sb_str(table), row)) /* mean's, the same as sum's */
                continue;
            smelt__red_lanes(prims, &smelt__dialect_c, &k, fn, "static");
            snprintf(row, sizeof row, "%s_row", fn);
            snprintf(col, sizeof col, "%s_col", fn);
            smelt__blk_entry(table, row, NULL);
            smelt__blk_entry(table, col, NULL);
        }
    }
}
