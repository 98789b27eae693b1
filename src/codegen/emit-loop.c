/* The loop form: C kernels in groups (the CC tier), CUDA grid and tile
 * kernels (src/codegen/emit.h). */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"

/* ---- loop form for C (the CC tier): groups of C_GROUP elements ---------
 * The loop body lives in one non-inlined function computing C_GROUP
 * elements; the kernel calls it for every whole group and, for a row's
 * last elements, calls smelt_group_n (the same statements over m <
 * C_GROUP elements) where the body is plain, else smelt_group on copies
 * padded to a whole group (bodies with arrays, the small-range forms' two passes,
 * f16/bf16 staging).  smelt's math is plain IEEE C, so a shorter loop
 * gives the same bits.  A group is large enough that the call and the
 * math's constants cost little. */
/* The arguments of a call of smelt_group: every operand at element j (with
 * its stride), but the outputs in the w<k> buffers (ARGS_W, streaming
 * stores) or every operand that is not broadcast in t<k> (ARGS_TAIL). */
enum { ARGS_DIRECT, ARGS_W, ARGS_TAIL };
static void group_args(smelt__sb *b, const smelt__kdesc *d, int to)
{
    for (int k = 0; k < d->n_in + d->n_out; k++) {
        const char *sep = k ? ", " : "";
        bool strided = d->mode[k] == SMELT_MODE_STRIDED;
        if (d->mode[k] == SMELT_MODE_BCAST)
            smelt__sb_printf(b, "%sb%d", sep, k);
        else if (to == ARGS_TAIL)
            smelt__sb_printf(b, strided ? "%st%d, 1" : "%st%d", sep, k);
        else if (to == ARGS_W && k >= d->n_in)
            smelt__sb_printf(b, "%sw%d", sep, k);
        else
            smelt__sb_printf(b, strided ? "%sq%d + j * s%d, s%d" : "%sq%d + j", sep, k, k, k);
    }
}

/* The main loop's step: j += C_GROUP and, for a reduction's producers
 * (ahead), compiled by gcc or clang, each contiguous input fetched
 * RED_ROW_AHEAD bytes on while that is still in its row (bound: the row's
 * end, past this call's: the producers are called a block at a time, and
 * the hardware's prefetch restarts at each block).  A hint: the fused mean
 * of squared differences of 16M f32 took 0.5-0.85x the time on 1 and 2
 * cores (Intel Xeon 2-core VM, 2026-11-29); plain elementwise kernels
 * gained nothing. */
static void c_step(const smelt__kdesc *d, const char *bound, bool ahead, smelt__sb *out)
{
    smelt__sb_printf(out, "j += %d", C_GROUP);
    bool any = false;
    for (int k = 0; k < d->n_in && ahead; k++)
        any = any || d->mode[k] == SMELT_MODE_CONTIG;
    if (!any)
        return;
    smelt__sb_puts(out, "\n#if " C_GCC_ONLY "\n");
    for (int k = 0; k < d->n_in; k++)
        if (d->mode[k] == SMELT_MODE_CONTIG) {
            int size = (int)smelt__dtypes[smelt__operand_dtype(d, k)].size;
            smelt__sb_printf(out, "             , j + %d < %s ? smelt_fetch((uint64_t)(q%d + j) + %d, %d) : (void)0\n",
                             C_GROUP + RED_ROW_AHEAD / size, bound, k, RED_ROW_AHEAD, C_GROUP * size);
        }
    smelt__sb_puts(out, "#endif\n            ");
}

/* Whole groups with streaming (non-temporal) stores, for kernels whose
 * outputs are contiguous, when the executor sets shape[rank] (outputs larger
 * than the last-level cache, not read by the next kernel).  Each group's
 * outputs go to an aligned local buffer, then to memory with non-temporal
 * stores as wide as the target's vectors (64 bytes with AVX-512, 32 with
 * AVX, else 16; gcc keeps the copy loop as written, and with 16-byte stores
 * it made the gelu_tanh kernel 1.2-1.3x slower on an AMD EPYC) once every
 * output is 64-byte aligned (the first output aligned first, below); GCC's
 * and clang's x86-64 builtins, no header.
 * No fence here: the executor fences once per call of the kernel
 * (call_kernel, src/runtime/exec.c).  bound: the loop's end ("end" in flat
 * kernels, "n" in a row of an nd kernel). */
static void c_stream(const smelt__kdesc *d, const smelt__dialect *dl, const char *bound, const char *call,
                     const char *tail, const char *stail, bool plain, smelt__sb *out)
{
    int nops = d->n_in + d->n_out;
    if (d->rank >= SMELT_MAX_DIMS) /* no shape[rank] slot */
        return;
    for (int k = d->n_in; k < nops; k++)
        if (d->mode[k] != SMELT_MODE_CONTIG)
            return;
    smelt__sb wcall; /* smelt_group's arguments with the outputs to w buffers (call's: to memory) */
    smelt__sb_init(&wcall);
    group_args(&wcall, d, ARGS_W);
    smelt__sb_puts(out, "#if defined(__x86_64__) && defined(__GNUC__)\n"
                        "#if defined(__AVX512F__)\n"
                        "#define SMELT_NT 64\n"
                        "#define smelt_nt_gcc __builtin_ia32_movntdq512\n"
                        "#elif defined(__AVX__)\n"
                        "#define SMELT_NT 32\n"
                        "#define smelt_nt_gcc __builtin_ia32_movntdq256\n"
                        "#else\n"
                        "#define SMELT_NT 16\n"
                        "#define smelt_nt_gcc __builtin_ia32_movntdq\n"
                        "#endif\n"
                        "    typedef long long smelt_vnt __attribute__((vector_size(SMELT_NT), may_alias));\n"
                        "#if defined(__clang__)\n"
                        "#define smelt_nt(p, v) __builtin_nontemporal_store((v), (smelt_vnt *)(void *)(p))\n"
                        "#else\n"
                        "#define smelt_nt(p, v) smelt_nt_gcc((smelt_vnt *)(void *)(p), (v))\n"
                        "#endif\n");
    /* an output that does not start on a 64-byte boundary (NumPy's arrays
     * start 16 bytes past one): its elements up to the first boundary through
     * the tail's path (the same statements, so the same bits), then whole
     * groups, and the tail's whole lines, stream wherever the outputs are
     * misaligned alike.  Without it every group of such an output took
     * plain stores: the fused layernorm of 4096 x 4096 f32 into a NumPy
     * array took 12.5-14.0 ms against 7.1-7.6 into an aligned one (2
     * threads, 2026-11-29).  Without streaming, a plain body's, where 4
     * groups follow: each group's vector stores then stay within lines (a
     * chain of 4M f32 into a NumPy array took 1.15-1.25x the time of an
     * aligned one); other bodies' tails compute a whole padded group. */
    int o = d->n_in;
    char room[96]; /* what must follow the first elements */
    if (plain)
        snprintf(room, sizeof room, "j + m + (shape[%d] == 1 ? 1 : %d) <= %s", d->rank, 4 * C_GROUP, bound);
    else
        snprintf(room, sizeof room, "shape[%d] == 1 && j + m < %s", d->rank, bound);
    smelt__sb_printf(out, "    {\n"
                          "        const int64_t m = (int64_t)(((64 - ((unsigned long)(q%d + j) & 63)) & 63) / sizeof *q%d);\n"
                          "        if (m && (unsigned long)(q%d + j) %% sizeof *q%d == 0 && %s) {\n%s"
                          "            j += m;\n        }\n    }\n",
                     o, o, o, o, room, tail);
    smelt__sb off; /* nonzero where an output at j is off a line */
    smelt__sb_init(&off);
    smelt__sb_puts(&off, "(0");
    for (int k = d->n_in; k < nops; k++)
        smelt__sb_printf(&off, " | ((unsigned long)(q%d + j) & 63)", k);
    smelt__sb_puts(&off, ")");
    smelt__sb_printf(out, "    if (shape[%d] == 1) {\n", d->rank);
    smelt__sb_printf(out, "        for (; j + %d <= %s && %s; j += %d)\n            smelt_group(%s);\n", C_GROUP, bound,
                     smelt__sb_str(&off), C_GROUP, call);
    smelt__sb_printf(out, "        for (; j + %d <= %s; j += %d) {\n", C_GROUP, bound, C_GROUP);
    for (int k = d->n_in; k < nops; k++)
        smelt__sb_printf(out, "            %s w%d[%d] __attribute__((aligned(64)));\n",
                         dl->stype[smelt__value_dtype(d, d->out_val[k - d->n_in])], k, C_GROUP);
    smelt__sb_printf(out, "            smelt_group(%s);\n", smelt__sb_str(&wcall));
    for (int k = d->n_in; k < nops; k++)
        smelt__sb_printf(out, "            for (int i = 0; i < (int)(sizeof w%d / SMELT_NT); i++)\n"
                              "                smelt_nt((char *)(q%d + j) + SMELT_NT * i, ((const smelt_vnt *)(const void *)w%d)[i]);\n",
                         k, k, k);
    smelt__sb_printf(out, "        }\n        if (j < %s && !%s) {\n            const int64_t m = %s - j;\n%s            j = %s;\n        }\n",
                     bound, smelt__sb_str(&off), bound, stail, bound);
    smelt__sb_puts(out, "    }\n#endif\n"); /* (the executor fences them: src/runtime/exec.c) */
    out->oom = out->oom || off.oom;
    smelt__sb_free(&wcall), smelt__sb_free(&off);
}

/* The tail: elements [j, j + m) of a row, m < C_GROUP (and m > 0).  A plain
 * body through smelt_group_n, else a whole group on copies (gathered with
 * the index clamped into the valid part), its first m results kept.
 * stream: the outputs, contiguous and at a 64-byte line at j, go through
 * aligned local arrays: their whole lines with streaming stores (c_stream
 * defines smelt_nt), the rest plainly. */
static void c_tail(const smelt__kdesc *d, const smelt__dialect *dl, bool plain, bool stream, smelt__sb *tail)
{
    int nops = d->n_in + d->n_out;
    const char *al = stream ? " __attribute__((aligned(64)))" : "";
    if (plain) {
        for (int k = d->n_in; k < nops && stream; k++)
            smelt__sb_printf(tail, "        %s w%d[%d]%s;\n", dl->stype[smelt__operand_dtype(d, k)], k, C_GROUP, al);
        smelt__sb_puts(tail, "        smelt_group_n(");
        group_args(tail, d, stream ? ARGS_W : ARGS_DIRECT);
        smelt__sb_puts(tail, ", m);\n");
    } else {
        for (int k = 0; k < nops; k++)
            if (d->mode[k] != SMELT_MODE_BCAST)
                smelt__sb_printf(tail, "        %s t%d[%d]%s;\n", dl->stype[smelt__operand_dtype(d, k)], k, C_GROUP,
                                 k >= d->n_in ? al : "");
        smelt__sb_printf(tail, "        for (int64_t k = 0; k < %d; k++) {\n            const int64_t x = j + (k < m ? k : 0);\n",
                         C_GROUP);
        for (int k = 0; k < d->n_in; k++)
            if (d->mode[k] == SMELT_MODE_CONTIG)
                smelt__sb_printf(tail, "            t%d[k] = q%d[x];\n", k, k);
            else if (d->mode[k] == SMELT_MODE_STRIDED)
                smelt__sb_printf(tail, "            t%d[k] = q%d[x * s%d];\n", k, k, k);
        smelt__sb_puts(tail, "        }\n        smelt_group(");
        group_args(tail, d, ARGS_TAIL);
        smelt__sb_puts(tail, ");\n");
    }
    const char *a = plain ? "w" : "t";
    if (stream) {
        for (int k = d->n_in; k < nops; k++)
            smelt__sb_printf(tail, "        const int64_t nl%d = m * (int64_t)sizeof *q%d / 64 * (64 / SMELT_NT); /* whole lines */\n"
                                   "        for (int64_t i = 0; i < nl%d; i++)\n"
                                   "            smelt_nt((char *)(q%d + j) + SMELT_NT * i, ((const smelt_vnt *)(const void *)%s%d)[i]);\n"
                                   "        for (int64_t k = nl%d * SMELT_NT / (int64_t)sizeof *q%d; k < m; k++)\n"
                                   "            q%d[j + k] = %s%d[k];\n",
                             k, k, k, k, a, k, k, k, k, a, k);
    } else if (!plain) {
        smelt__sb_puts(tail, "        for (int64_t k = 0; k < m; k++) {\n");
        for (int k = d->n_in; k < nops; k++)
            if (d->mode[k] == SMELT_MODE_STRIDED)
                smelt__sb_printf(tail, "            q%d[(j + k) * s%d] = t%d[k];\n", k, k, k);
            else
                smelt__sb_printf(tail, "            q%d[j + k] = t%d[k];\n", k, k);
        smelt__sb_puts(tail, "        }\n");
    }
}

/* The group function: the body over C_GROUP elements.  With a fast body
 * (its f32 exp, sin, cos and tan through their small-range forms,
 * smelt_exp_f32_w ...: the same bits where every argument lies in the
 * range, math.h.in; exp 0.81x the time, sin, cos and tan without the
 * Payne and Hanek reduction: docs/numerics.md), that
 * one first and then, where an argument lay outside, the body again over
 * the whole group; which needs the outputs apart from the inputs they
 * would overwrite (a kernel computed in place runs only the body). */
static bool c_group(const smelt__kdesc *d, const smelt__dialect *dl, const char *consts,
                    const char *body, const char *fast, bool arrays, uint64_t branch_in, smelt__sb *group,
                    smelt__sb *tail, smelt__sb *stail)
{
    int nops = d->n_in + d->n_out;
    smelt__sb params; /* the operands (smelt_group's and smelt_group_n's) */
    smelt__sb_init(&params);
    for (int k = 0; k < nops; k++) {
        smelt_dtype dt = smelt__operand_dtype(d, k);
        const char *sep = k ? ", " : "", *cq = k < d->n_in ? "const " : "";
        if (d->mode[k] == SMELT_MODE_BCAST)
            smelt__sb_printf(&params, "%s%s b%d", sep, dl->type[dt], k);
        else
            smelt__sb_printf(&params, "%s%s%s *%s q%d", sep, cq, dl->stype[dt], dl->restrict_kw, k);
        if (d->mode[k] == SMELT_MODE_STRIDED)
            smelt__sb_printf(&params, ", int64_t s%d", k);
    }
    smelt__sb_printf(group, "static __attribute__((noinline)) void smelt_group(%s", smelt__sb_str(&params));
    /* f16/bf16 operands: converted a group at a time (the prelude's
     * smelt_load16_* / smelt_store16_*, F16C where the compiler has it) */
    smelt__sb stage_in, stage_out;
    smelt__sb_init(&stage_in), smelt__sb_init(&stage_out);
    for (int k = 0; k < nops; k++) {
        smelt_dtype dt = smelt__operand_dtype(d, k);
        if (!smelt__is_half(dt) || (k < d->n_in && d->mode[k] == SMELT_MODE_BCAST))
            continue;
        char stride[16] = "1";
        if (d->mode[k] == SMELT_MODE_STRIDED)
            snprintf(stride, sizeof stride, "s%d", k);
        smelt__sb_printf(&stage_in, "    float h%d[%d];\n", k, C_GROUP);
        smelt__sb *st = k < d->n_in ? &stage_in : &stage_out;
        smelt__sb_printf(st, "    for (int c = 0; c < %d; c += 16)\n", C_GROUP);
        if (k < d->n_in)
            smelt__sb_printf(st, "        smelt_load16_%s(h%d + c, q%d + c * %s, %s);\n", smelt__dtypes[dt].name, k, k,
                             stride, stride);
        else
            smelt__sb_printf(st, "        smelt_store16_%s(q%d + c * %s, h%d + c, %s);\n", smelt__dtypes[dt].name, k,
                             stride, k, stride);
    }
    /* inputs the body reads in a branch (smelt__branch_values): gcc reads them with
     * masked loads, which the hardware does not fetch ahead (from memory,
     * 2.4x slower than plain loads on AMD Zen 5); fetched here 8 KiB ahead
     * (a hint: it never faults, wherever it points) */
    for (int k = 0; k < d->n_in && k < 64; k++)
        if (branch_in >> k & 1 && d->mode[k] == SMELT_MODE_CONTIG)
            smelt__sb_printf(&stage_in, "    smelt_fetch((uint64_t)q%d + 8192, %d * (int64_t)sizeof *q%d);\n", k, C_GROUP,
                             k);
    if (arrays) /* the body has its own loops */
        smelt__sb_printf(group, ")\n{\n%s%s%s%s}\n", consts, smelt__sb_str(&stage_in), body,
                         smelt__sb_str(&stage_out));
    else if (!*fast)
        smelt__sb_printf(group, ")\n{\n%s%s    for (int64_t j = 0; j < %d; j++) {\n%s    }\n%s}\n", consts,
                         smelt__sb_str(&stage_in), C_GROUP, body, smelt__sb_str(&stage_out));
    else {
        smelt__sb_printf(group, ")\n{\n%s%s    uint32_t smelt_ew = 0;\n    int smelt_fast = 1", consts, smelt__sb_str(&stage_in));
        for (int o = d->n_in; o < nops; o++) /* an output read as an input (in place) */
            for (int k = 0; k < d->n_in; k++) {
                if (d->mode[k] == SMELT_MODE_BCAST || smelt__is_half(smelt__operand_dtype(d, k)))
                    continue; /* (f16/bf16 operands: staged, in arrays of the group's own) */
                char so[16] = "1", sk[16] = "1"; /* their strides in the group's arguments */
                if (d->mode[o] == SMELT_MODE_STRIDED)
                    snprintf(so, sizeof so, "s%d", o);
                if (d->mode[k] == SMELT_MODE_STRIDED)
                    snprintf(sk, sizeof sk, "s%d", k);
                smelt__sb_printf(group, " &&\n        smelt_apart(q%d, %s, sizeof *q%d, q%d, %s, sizeof *q%d, %d)", o, so,
                                 o, k, sk, k, C_GROUP);
            }
        smelt__sb_printf(group, ";\n    if (smelt_fast) {\n        for (int64_t j = 0; j < %d; j++) {\n%s        }\n"
                                "        smelt_fast = smelt_ew <= SMELT_W_MAX;\n    }\n"
                                "    if (!smelt_fast)\n        for (int64_t j = 0; j < %d; j++) {\n%s        }\n%s}\n",
                         C_GROUP, fast, C_GROUP, body, smelt__sb_str(&stage_out));
    }
    /* a plain body (no arrays, fast path or staging): the tail, a row's
     * last m < C_GROUP elements, through smelt_group_n, the same
     * statements over m elements in place (per element the same
     * operations, so the same bits): conv_bn_relu's fused step, whose
     * epilogue runs over rows of 56 of a 58-wide grid, took 0.70-0.76x
     * the time of the padded copies below (2 threads, 2026-11-29) */
    bool plain = !arrays && !*fast && !stage_in.len && !stage_out.len;
    smelt__sb_free(&stage_in), smelt__sb_free(&stage_out);
    if (plain)
        smelt__sb_printf(group, "static __attribute__((noinline)) void smelt_group_n(%s, int64_t n)\n{\n%s"
                                "    for (int64_t j = 0; j < n; j++) {\n%s    }\n}\n",
                         smelt__sb_str(&params), consts, body);
    group->oom = group->oom || params.oom;
    smelt__sb_free(&params);
    c_tail(d, dl, plain, false, tail);
    c_tail(d, dl, plain, true, stail);
    return plain;
}

/* The loop form's setup: operand pointers (flat and device kernels) or
 * inner strides (n-d), and the constants (device: in setup; C: in the
 * group function, gconst).  Returns the number of operators that are not
 * constants. */
static int emit_setup(const smelt__dialect *dl, const smelt__kdesc *d, bool flat, smelt__sb *setup,
                      smelt__sb *gconst)
{
    int nops = d->n_in + d->n_out, R = d->rank;
    for (int k = 0; k < nops; k++) {
        smelt_dtype dt = smelt__operand_dtype(d, k);
        const char *cq = k < d->n_in ? "const " : "";
        if (flat || dl->device)
            smelt__sb_printf(setup, "    %s%s *%s q%d = (%s%s *)%sptrs[%d];\n", cq, dl->stype[dt],
                             dl->restrict_kw, k, cq, dl->stype[dt], dl->args, k);
        else if (d->mode[k] == SMELT_MODE_STRIDED)
            smelt__sb_printf(setup, "    const int64_t s%d = strides[%d];\n", k, k * R + R - 1);
    }
    int n_real = d->n_ops;
    for (int i = 0; i < d->n_ops; i++) {
        if (d->ops[i].op != SMELT_OP_CONST)
            continue;
        n_real--;
        smelt__sb *cb = dl->device ? setup : gconst;
        smelt__sb_printf(cb, "    const %s v%d = ", dl->type[d->ops[i].dtype], d->n_in + i);
        smelt__literal(cb, dl, &d->ops[i]);
        smelt__sb_puts(cb, ";\n");
    }
    return n_real;
}

/* Per-row offsets of an n-d kernel (device kernels: per element) and the
 * row's operand pointers and broadcast values. */
static void emit_rows(const smelt__dialect *dl, const smelt__kdesc *d, smelt__sb *row, smelt__sb *init,
                      smelt__sb *next)
{
    if (dl->device) {
        smelt__device_offsets(init, row, next, d, 1);
        return;
    }
    smelt__row_offsets(row, d);
    for (int k = 0; k < d->n_in + d->n_out; k++) {
        smelt_dtype dt = smelt__operand_dtype(d, k);
        const char *cq = k < d->n_in ? "const " : "";
        smelt__sb_printf(row, "        %s%s *%s q%d = (%s%s *)ptrs[%d] + o%d;\n", cq,
                         dl->stype[dt], dl->restrict_kw, k, cq, dl->stype[dt], k, k);
        if (d->mode[k] == SMELT_MODE_BCAST && smelt__is_half(dt))
            smelt__sb_printf(row, "        const %s b%d = smelt_h2f_%s(q%d[0]);\n", dl->type[dt], k,
                             smelt__dtypes[dt].name, k);
        else if (d->mode[k] == SMELT_MODE_BCAST)
            smelt__sb_printf(row, "        const %s b%d = q%d[0];\n", dl->type[dt], k, k);
    }
}

/* The statements for one element (or, arrays, for a group), and the
 * device's vector body when vec > 1; *arrays: the group computes f16/bf16
 * results as arrays; fast (C, not arrays): the element's statements again
 * with its f32 exp, sin, cos, tan as smelt_exp_f32_w ... (c_group), left empty when it has
 * none. */
static int emit_body(const smelt__dialect *dl, const smelt__kdesc *d, bool flat, int vec,
                     smelt__sb *body, smelt__sb *vbody, smelt__sb *valigned, bool *arrays, smelt__sb *fast,
                     uint64_t *branch_in)
{
    int nv = d->n_in + d->n_ops;
    int *uses = calloc((size_t)(3 * nv + 1), sizeof(int));
    bool *inl = calloc((size_t)(2 * nv + 1), sizeof(bool)), *cond = inl + nv; /* (cond: C loops) */
    if (!uses || !inl) {
        free(uses), free(inl);
        return SMELT_ERR_NOMEM;
    }
    smelt__plan_inlining(d, uses, inl, uses + nv, uses + 2 * nv);
    if (!dl->device)
        smelt__branch_values(d, inl, uses + nv, uses + 2 * nv, cond);
    for (int k = 0; k < d->n_in && k < 64 && branch_in; k++)
        if (cond[k])
            *branch_in |= (uint64_t)1 << k;
    ectx e = {dl, d, uses, inl, -1, dl->device && !flat ? FORM_OFFSET : FORM_C, !dl->device, false, 0, NULL, 0,
              NULL, dl->device ? NULL : cond};
    for (int k = 0; k < d->n_ops && !dl->device; k++)
        e.arrays = e.arrays || (smelt__is_half(d->ops[k].dtype) && d->ops[k].op != SMELT_OP_CONST);
    for (int v = d->n_in; v < nv && e.arrays; v++) /* each f16/bf16 result its own rounded array */
        inl[v] = inl[v] && !smelt__is_half(smelt__value_dtype(d, v));
    *arrays = e.arrays;
    if (e.arrays)
        smelt__emit_arrays(body, &e);
    else
        smelt__emit_lane(body, &e);
    e.wq = fast && !e.arrays ? "smelt_ew" : NULL; /* (fast: C callers only) */
    for (int k = 0; k < d->n_ops; k++)
        if (smelt__fast_w(&e, k)) {
            smelt__emit_lane(fast, &e);
            break;
        }
    e.wq = NULL;
    if (vec > 1)
        smelt__device_vec_body(vbody, valigned, &e, vec);
    free(uses), free(inl);
    return SMELT_OK;
}

/* The statements of one element j of the loop form's group (operands
 * q<k>[j], contiguous, and b<k>, broadcast) and its constants, for a
 * caller that writes its own loop around them (a row program's stage,
 * emit-rows.c); plain: false where the group needs more than that (f16 or
 * bf16 arrays, the small-range forms' second body), and then body is no use. */
int smelt__c_element(const smelt__dialect *dl, const smelt__kdesc *d, smelt__sb *body, smelt__sb *consts, bool *plain)
{
    bool arrays = false;
    uint64_t branch_in = 0;
    smelt__sb setup, fast;
    smelt__sb_init(&setup), smelt__sb_init(&fast);
    emit_setup(dl, d, false, &setup, consts);
    int st = emit_body(dl, d, false, 1, body, NULL, NULL, &arrays, &fast, &branch_in);
    *plain = !st && !arrays && !fast.len;
    smelt__sb_free(&setup), smelt__sb_free(&fast);
    return st;
}

/* ---- the loop form's kernel shapes ------------------------------------
 * Each writes its template from the shared parts (emit_setup, emit_rows,
 * emit_body) and fills only its own slots. */

/* C (the CC tier): a flat or n-d loop over groups of C_GROUP elements;
 * ahead: its inputs fetched ahead (c_step) */
int smelt__c_walker(const smelt__dialect *dl, const smelt__kdesc *d, const char *prelude, bool ahead,
                    smelt__sb *text, smelt__sb *err)
{
    bool flat = smelt__is_flat(d), arrays;
    smelt__sb setup, row, body, fast, gconst, group, call, tail, stail, stream, step;
    smelt__sb_init(&setup), smelt__sb_init(&row), smelt__sb_init(&body), smelt__sb_init(&gconst), smelt__sb_init(&step);
    smelt__sb_init(&group), smelt__sb_init(&call), smelt__sb_init(&tail), smelt__sb_init(&stail), smelt__sb_init(&stream);
    smelt__sb_init(&fast);
    int n_real = emit_setup(dl, d, flat, &setup, &gconst);
    if (!flat)
        emit_rows(dl, d, &row, NULL, NULL);
    uint64_t branch_in = 0;
    int st = emit_body(dl, d, flat, 1, &body, NULL, NULL, &arrays, &fast, &branch_in);
    if (!st) {
        group_args(&call, d, ARGS_DIRECT);
        if (smelt__kdesc_gathers(d))
            smelt__sb_puts(&group, smelt__gather_fn);
        bool plain = c_group(d, dl, smelt__sb_str(&gconst), smelt__sb_str(&body), smelt__sb_str(&fast), arrays,
                             branch_in, &group, &tail, &stail);
        c_stream(d, dl, flat ? "end" : "n", smelt__sb_str(&call), smelt__sb_str(&tail), smelt__sb_str(&stail), plain,
                 &stream);
        c_step(d, flat ? "shape[0]" : "inner - col", ahead, &step);
        const slot sl[] = {
            {"PRELUDE", prelude}, {"NAME", NAME_TOKEN}, {"NOPS", SLOT_NUM(n_real)}, {"W", SLOT_NUM(C_GROUP)},
            {"RANK", SLOT_NUM(d->rank)}, {"SETUP", smelt__sb_str(&setup)}, {"ROW", smelt__sb_str(&row)},
            {"BODY", smelt__sb_str(&body)}, {"GROUP", smelt__sb_str(&group)}, {"CALL", smelt__sb_str(&call)},
            {"TAIL", smelt__sb_str(&tail)}, {"STREAM", smelt__sb_str(&stream)}, {"STEP", smelt__sb_str(&step)}};
        st = smelt__load_render(text, dl, flat ? "kernel_flat" : "kernel_nd", sl, NSLOTS(sl), err);
    }
    smelt__sb_free(&setup), smelt__sb_free(&row), smelt__sb_free(&body), smelt__sb_free(&gconst);
    smelt__sb_free(&group), smelt__sb_free(&call), smelt__sb_free(&tail), smelt__sb_free(&stail), smelt__sb_free(&stream);
    smelt__sb_free(&step);
    smelt__sb_free(&fast);
    return st;
}

int smelt__shape_c_loop(const smelt__dialect *dl, const smelt__kdesc *d, const char *prelude,
                        smelt__sb *text, smelt__sb *err)
{
    return smelt__c_walker(dl, d, prelude, false, text, err);
}

/* A device (CUDA): one element per thread in a grid-stride loop over a
 * parameter block, vector loads when every operand is contiguous. */
int smelt__shape_device_grid(const smelt__dialect *dl, const smelt__kdesc *d, const char *prelude,
                             smelt__sb *text, smelt__sb *err)
{
    bool flat = smelt__is_flat(d), arrays;
    int nops = d->n_in + d->n_out, R = d->rank, vec = flat || smelt__device_nd_vec(d) ? smelt__device_vec_width(d) : 1;
    smelt__sb setup, row, body, vbody, valigned, init, next, vinit, vrow, vnext;
    smelt__sb_init(&setup), smelt__sb_init(&row), smelt__sb_init(&body);
    smelt__sb_init(&vbody), smelt__sb_init(&valigned), smelt__sb_init(&init), smelt__sb_init(&next);
    smelt__sb_init(&vinit), smelt__sb_init(&vrow), smelt__sb_init(&vnext);
    int n_real = emit_setup(dl, d, flat, &setup, NULL);
    /* indexed reads: the gather block, one more operand (its strides 0) */
    int gx = smelt__kdesc_gathers(d);
    smelt__sb pre;
    smelt__sb_init(&pre);
    smelt__sb_puts(&pre, prelude);
    if (gx) {
        smelt__sb_puts(&pre, smelt__gather_fn_dev);
        smelt__sb_printf(&setup, "    int64_t *const smelt_gx = (int64_t *)a.ptrs[%d];\n", nops);
    }
    if (!flat)
        emit_rows(dl, d, &row, &init, &next);
    if (!flat && vec > 1)
        smelt__device_offsets(&vinit, &vrow, &vnext, d, vec);
    int st = emit_body(dl, d, flat, vec, &body, &vbody, &valigned, &arrays, NULL, NULL);
    if (!st) {
        const slot sl[] = {
            {"PRELUDE", smelt__sb_str(&pre)}, {"NAME", NAME_TOKEN}, {"NOPS", SLOT_NUM(n_real)}, {"RANK", SLOT_NUM(R)},
            {"SETUP", smelt__sb_str(&setup)}, {"ROW", smelt__sb_str(&row)}, {"BODY", smelt__sb_str(&body)},
            {"INDEX", d->idx32 ? "unsigned int" : "long long"}, {"NOPERANDS", SLOT_NUM(nops + gx)},
            {"NSTRIDES", SLOT_NUM((nops + gx) * R)}, {"VEC", SLOT_NUM(vec)},
            {"BY_VALUE", SLOT_NUM(smelt__kparam_by_value(nops + gx, R, d->idx32, 0))},
            {"VEC_ALIGNED", smelt__sb_str(&valigned)}, {"BODY_VEC", smelt__sb_str(&vbody)},
            {"ROW_INIT", smelt__sb_str(&init)}, {"ROW_NEXT", smelt__sb_str(&next)},
            {"ROW_INIT_VEC", smelt__sb_str(&vinit)}, {"ROW_VEC", smelt__sb_str(&vrow)},
            {"ROW_NEXT_VEC", smelt__sb_str(&vnext)}};
        st = smelt__load_render(text, dl, flat ? "kernel_flat" : "kernel_nd", sl, NSLOTS(sl), err);
    }
    smelt__sb_free(&setup), smelt__sb_free(&row), smelt__sb_free(&body);
    smelt__sb_free(&vbody), smelt__sb_free(&valigned), smelt__sb_free(&init), smelt__sb_free(&next);
    smelt__sb_free(&pre);
    smelt__sb_free(&vinit), smelt__sb_free(&vrow), smelt__sb_free(&vnext);
    return st;
}

/* CUDA over tiles (smelt__is_tile(d->spread)): the inputs read transposed
 * through shared memory, a tile at a time (templates/cuda/kernel_tile.cu.in;
 * the launch layer picks the tiles, src/codegen/devlaunch.h). */
int smelt__shape_device_tile(const smelt__dialect *dl, const smelt__kdesc *d, const char *prelude,
                             smelt__sb *text, smelt__sb *err)
{
    bool arrays;
    int nops = d->n_in + d->n_out, R = d->rank, Q = smelt__tile_q(d->spread), P = R - 1;
    if (R < 2 || Q >= P) {
        smelt__sb_printf(err, "a tiled kernel needs its tile's dimension %d before the innermost of %d", Q, R);
        return SMELT_ERR_INVALID_ARG;
    }
    smelt__sb setup, tiles, outer, loads, offs, body, vbody, valigned;
    smelt__sb_init(&setup), smelt__sb_init(&tiles), smelt__sb_init(&outer), smelt__sb_init(&loads);
    smelt__sb_init(&offs), smelt__sb_init(&body), smelt__sb_init(&vbody), smelt__sb_init(&valigned);
    int n_real = emit_setup(dl, d, false, &setup, NULL);
    smelt__sb_puts(&outer, "        smelt_idx ");
    for (int k = 0; k < nops; k++)
        smelt__sb_printf(&outer, "%stb%d = 0", k ? ", " : "", k);
    smelt__sb_puts(&outer, ";\n");
    for (int dd = R - 2; dd >= 0; dd--) { /* the other dimensions, innermost first */
        if (dd == Q)
            continue;
        smelt__sb_printf(&outer, "        {\n            const smelt_idx x = u %% a.shape[%d];\n"
                                 "            u /= a.shape[%d];\n", dd, dd);
        for (int k = 0; k < nops; k++)
            smelt__sb_printf(&outer, "            tb%d += x * a.strides[%d];\n", k, k * R + dd);
        smelt__sb_puts(&outer, "        }\n");
    }
    smelt__sb_puts(&outer, "        (void)u;\n");
    for (int k = 0; k < nops; k++) {
        const char *T = dl->stype[smelt__operand_dtype(d, k)];
        if (smelt__tile_packed(d->spread, k) && k < d->n_in) {
            smelt__sb_printf(&tiles, "    %s %s tile%d[%d][%d];\n", dl->shared_kw, T, k, SMELT_TILE, SMELT_TILE + 1);
            smelt__sb_printf(&loads, "                tile%d[ty + i][tx] = q%d[tb%d + qq * a.strides[%d] + pp * a.strides[%d]];\n",
                             k, k, k, k * R + Q, k * R + P);
            smelt__sb_printf(&offs, "                const %s *q%d = &tile%d[tx][ty + i];\n"
                                    "                const smelt_idx o%d = 0;\n", T, k, k, k);
        } else {
            smelt__sb_printf(&offs, "                const smelt_idx o%d = tb%d + qq * a.strides[%d] + pp * a.strides[%d];\n",
                             k, k, k * R + Q, k * R + P);
        }
    }
    int st = emit_body(dl, d, false, 1, &body, &vbody, &valigned, &arrays, NULL, NULL);
    if (!st) {
        const slot sl[] = {
            {"PRELUDE", prelude}, {"NAME", NAME_TOKEN}, {"NOPS", SLOT_NUM(n_real)}, {"RANK", SLOT_NUM(R)},
            {"SETUP", smelt__sb_str(&setup)}, {"TILES", smelt__sb_str(&tiles)}, {"OUTER", smelt__sb_str(&outer)},
            {"LOADS", smelt__sb_str(&loads)}, {"OFFSETS", smelt__sb_str(&offs)}, {"BODY", smelt__sb_str(&body)},
            {"INDEX", d->idx32 ? "unsigned int" : "long long"}, {"NOPERANDS", SLOT_NUM(nops)},
            {"NSTRIDES", SLOT_NUM(nops * R)}, {"T", SLOT_NUM(SMELT_TILE)}, {"T4", SLOT_NUM(SMELT_TILE / 4)},
            {"THREADS", SLOT_NUM(SMELT_TILE * SMELT_TILE / 4)}, {"Q", SLOT_NUM(Q)}, {"P", SLOT_NUM(P)},
            {"BY_VALUE", SLOT_NUM(smelt__kparam_by_value(nops, R, d->idx32, 0))}};
        st = smelt__load_render(text, dl, "kernel_tile", sl, NSLOTS(sl), err);
    }
    smelt__sb_free(&setup), smelt__sb_free(&tiles), smelt__sb_free(&outer), smelt__sb_free(&loads);
    smelt__sb_free(&offs), smelt__sb_free(&body), smelt__sb_free(&vbody), smelt__sb_free(&valigned);
    return st;
}
