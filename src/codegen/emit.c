/* The emitter: a kernel description (fusion/partition.c) in, kernel source
 * out, for any dialect.  Templates give the skeleton; this file fills the
 * slots: setup (pointers, constants, strides), per-row offsets, loop body. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "codegen.h"

#define NAME_TOKEN "SMELT_KERNEL_NAME"

/* Emission state for one lane of the loop body.  A value used once, by an
 * operator whose expression names it once, is not stored in a variable but
 * written inline: TinyCC then keeps it in a register instead of spilling. */
typedef struct ectx {
    const smelt__dialect *dl;
    const smelt__kdesc *d;
    int *uses;
    bool *inl;
    int lane; /* -1: the scalar loop */
    int form; /* how operands are named: FORM_* */
    bool stage;  /* C loop form: f16/bf16 operands staged in float arrays h<k> */
    bool arrays; /* C loop form with f16/bf16 results: one loop per operator over
                  * arrays v<k>[j], each f16/bf16 array rounded as a whole */
    uint64_t ldg; /* device: inputs (bit k) read through the read-only cache, __ldg */
    const char *divq; /* device row programs' last pass: f32 divisions by a row's scalar (or a
                       * constant) as smelt_divr_f32, the flag that says they all held, else NULL */
    uint64_t uni;     /* with divq: the inputs (bit k) that are the row's scalars */
    const char *expq; /* C loop form: f32 exps as smelt_exp_f32_w, the variable keeping the
                       * largest k + 126 of their arguments (c_group), else NULL */
    const bool *cond; /* C loop form: value v written inline in a branch (branch_values), or NULL */
} ectx;

/* Operand references: C kernels follow the operand's mode (q0[j], b0,
 * q0[j * s0]) or read a staged f16/bf16 operand's f32 copy (h0[j], see
 * staged); device nd kernels index every operand by its own offset
 * (q0[o0]); device vector bodies read and write lanes of vectors (l0.v[2]);
 * block primitives read element i of their compute-type arrays (A0[i]). */
enum { FORM_C, FORM_OFFSET, FORM_VEC, FORM_BLK };

/* Elements per call of a C loop-form kernel's group function (c_group). */
#define C_GROUP 128 /* a multiple of 16 (the prelude's f16/bf16 helpers' width) */

static smelt_dtype value_dtype(const smelt__kdesc *d, int v)
{
    return v < d->n_in ? d->in_dt[v] : d->ops[v - d->n_in].dtype;
}

/* operand k: an input, or output k - n_in */
static smelt_dtype operand_dtype(const smelt__kdesc *d, int k)
{
    return k < d->n_in ? d->in_dt[k] : value_dtype(d, d->out_val[k - d->n_in]);
}

static bool is_const(const smelt__kdesc *d, int v)
{
    return v >= d->n_in && d->ops[v - d->n_in].op == SMELT_OP_CONST;
}

/* The expression template op k uses (NULL for casts). */
static const char *op_template(const smelt__kdesc *d, int k, smelt_dtype *ct)
{
    const smelt__kop *op = &d->ops[k];
    const smelt__opinfo *oi = &smelt__ops[op->op];
    *ct = value_dtype(d, op->in[oi->rule == SMELT_RULE_WHERE ? 1 : 0]);
    if (op->op == SMELT_OP_CAST)
        return NULL;
    const char *t = smelt__is_float(*ct) ? oi->c_float : oi->c_int;
    return strcmp(t, "=") ? t : oi->c_float;
}

/* Whether operand k of a C loop-form kernel is an f16/bf16 one that the
 * group function converts as a whole (c_group): h<k>[j]. */
static bool staged(const ectx *e, int k)
{
    return e->stage && smelt__is_half(operand_dtype(e->d, k)) &&
           (k >= e->d->n_in || e->d->mode[k] != SMELT_MODE_BCAST);
}

static void operand_ref(smelt__sb *b, const ectx *e, int k)
{
    if (e->form == FORM_OFFSET && k < 64 && (e->ldg >> k & 1))
        smelt__sb_printf(b, "__ldg(&q%d[o%d])", k, k);
    else if (e->form == FORM_OFFSET)
        smelt__sb_printf(b, "q%d[o%d]", k, k);
    else if (e->form == FORM_VEC)
        smelt__sb_printf(b, "l%d.v[%d]", k, e->lane);
    else if (e->form == FORM_BLK)
        smelt__sb_printf(b, "A%d[i]", k);
    else if (staged(e, k))
        smelt__sb_printf(b, "h%d[j]", k);
    else if (e->d->mode[k] == SMELT_MODE_CONTIG)
        smelt__sb_printf(b, "q%d[j]", k);
    else if (e->d->mode[k] == SMELT_MODE_BCAST)
        smelt__sb_printf(b, "b%d", k);
    else
        smelt__sb_printf(b, "q%d[j * s%d]", k, k);
}

/* Input k read as a value of its compute type: f16/bf16 operands are
 * converted from their bit patterns (a C kernel's broadcast operand b<k> is
 * converted once per row, the others once per group when staged). */
static void input_ref(smelt__sb *b, const ectx *e, int k)
{
    smelt_dtype dt = e->d->in_dt[k];
    bool conv = smelt__is_half(dt) && e->form != FORM_BLK && !staged(e, k) &&
                !(e->form == FORM_C && e->d->mode[k] == SMELT_MODE_BCAST);
    if (conv)
        smelt__sb_printf(b, "smelt_h2f_%s(", smelt__dtypes[dt].name);
    operand_ref(b, e, k);
    if (conv)
        smelt__sb_puts(b, ")");
}

static void op_expr(smelt__sb *b, const ectx *e, int k);

/* The expression that computes value v: its load or its operator. */
static void value_expr(smelt__sb *b, const ectx *e, int v)
{
    if (v < e->d->n_in)
        input_ref(b, e, v);
    else
        op_expr(b, e, v - e->d->n_in);
}

/* Value v where it is read: inline, or the variable (the array) holding it. */
static void value_ref(smelt__sb *b, const ectx *e, int v)
{
    if (e->inl[v] || (e->arrays && v < e->d->n_in))
        value_expr(b, e, v);
    else if (e->arrays && !is_const(e->d, v))
        smelt__sb_printf(b, "v%d[j]", v);
    else if (is_const(e->d, v) || e->lane < 0)
        smelt__sb_printf(b, "v%d", v);
    else
        smelt__sb_printf(b, "v%d_%d", v, e->lane);
}

/* Expand an ops.def expression template. */
static void expand(smelt__sb *b, const ectx *e, const char *t, smelt_dtype ct, const int *args)
{
    for (const char *p = t; *p; p++) {
        if (p[0] == '@') { /* @fn( */
            size_t n = strcspn(p + 1, "(");
            smelt__sb_putn(b, p + 1, n);
            smelt__sb_puts(b, e->dl->fn_suffix[ct]);
            p += n;
        } else if (p[0] != '%' || !p[1] || !strchr("012TUSH", p[1])) {
            smelt__sb_putn(b, p, 1);
        } else if (*++p <= '2') { /* %0 %1 %2: an operand */
            value_ref(b, e, args[*p - '0']);
        } else if (*p == 'T') {
            smelt__sb_puts(b, e->dl->type[ct]);
        } else if (*p == 'U') {
            smelt__sb_puts(b, e->dl->utype[ct]);
        } else if (*p == 'S') {
            smelt__sb_puts(b, smelt__dtypes[smelt__compute_dtype(ct)].name);
        } else {
            smelt__sb_puts(b, ct == SMELT_F16 ? "1" : "0");
        }
    }
}

/* A finite double as a C hexadecimal literal, whatever the locale ("%a"
 * would use the locale's decimal point). */
static void hexfloat(smelt__sb *b, double v)
{
    uint64_t u;
    memcpy(&u, &v, 8);
    int e = (int)((u >> 52) & 0x7ff);
    uint64_t m = u & 0xfffffffffffffULL;
    const char *sign = (u >> 63) ? "-" : "";
    if (e == 0 && m == 0)
        smelt__sb_printf(b, "%s0x0p+0", sign);
    else if (e == 0)
        smelt__sb_printf(b, "%s0x0.%013" PRIx64 "p-1022", sign, m);
    else
        smelt__sb_printf(b, "%s0x1.%013" PRIx64 "p%+d", sign, m, e - 1023);
}

static void literal(smelt__sb *b, const smelt__dialect *dl, const smelt__kop *k)
{
    float f = (float)k->fval; /* f32, and f16/bf16 as a value of their compute type, f32 (exact) */
    uint32_t u32;
    uint64_t u64;
    memcpy(&u32, &f, 4);
    memcpy(&u64, &k->fval, 8);
    if (k->dtype == SMELT_F64 && isfinite(k->fval)) {
        hexfloat(b, k->fval);
    } else if (k->dtype == SMELT_F64) {
        smelt__sb_printf(b, "smelt_f64_bits(0x%016" PRIx64 "ull)", u64);
    } else if (smelt__is_float(k->dtype) && isfinite(f)) {
        smelt__sb_puts(b, "(float)");
        hexfloat(b, (double)f);
    } else if (smelt__is_float(k->dtype)) {
        smelt__sb_printf(b, "smelt_f32_bits(0x%08" PRIx32 "u)", u32);
    } else if (k->ival == INT64_MIN) {
        smelt__sb_printf(b, "(%s)(-9223372036854775807LL - 1)", dl->type[k->dtype]);
    } else {
        smelt__sb_printf(b, "(%s)%" PRId64 "LL", dl->type[k->dtype], k->ival);
    }
}

/* Whether op k is an f32 division that ectx.divq computes through its
 * divisor's reciprocal: the divisor one value for the whole pass (a row's
 * scalar, or a constant). */
static bool fast_div(const ectx *e, int k)
{
    const smelt__kop *op = &e->d->ops[k];
    if (!e->divq || op->op != SMELT_OP_DIV || op->dtype != SMELT_F32 ||
        value_dtype(e->d, op->in[0]) != SMELT_F32 || value_dtype(e->d, op->in[1]) != SMELT_F32)
        return false;
    int v = op->in[1];
    return v < e->d->n_in ? v < 64 && (e->uni >> v & 1) : is_const(e->d, v);
}

/* Whether op k is an f32 exp that ectx.expq computes as smelt_exp_f32_w. */
static bool fast_exp(const ectx *e, int k)
{
    const smelt__kop *op = &e->d->ops[k];
    return e->expq && op->op == SMELT_OP_EXP && op->dtype == SMELT_F32 && value_dtype(e->d, op->in[0]) == SMELT_F32 &&
           !(e->cond && e->cond[e->d->n_in + k]); /* *w kept in a branch: the loop would not vectorise */
}

/* The C expression computing op k, of the op's own type. */
static void op_expr(smelt__sb *b, const ectx *e, int k)
{
    const smelt__kop *op = &e->d->ops[k];
    smelt_dtype ct;
    const char *t = op_template(e->d, k, &ct);
    if (!t) { /* cast: a prefix, the operand, end */
        const char *to = smelt__dtypes[op->dtype].name, *end = ")";
        if (op->dtype == SMELT_BOOL) {
            smelt__sb_puts(b, "(");
            end = " != 0)";
        } else if (smelt__is_half(op->dtype) && (ct == SMELT_F32 || smelt__is_half(ct))) {
            smelt__sb_printf(b, e->arrays ? "((float)" : "smelt_rnd_%s(", to); /* from an exact f32 value */
        } else if (smelt__is_half(op->dtype)) { /* one rounding, from double */
            smelt__sb_printf(b, "smelt_h2f_%s(smelt_d2h_%s((double)", to, to);
            end = "))";
        } else if (smelt__is_float(ct) && !smelt__is_float(op->dtype)) {
            smelt__sb_printf(b, "smelt_f2%s(", to);
        } else {
            smelt__sb_printf(b, "((%s)", e->dl->type[op->dtype]);
        }
        value_ref(b, e, op->in[0]);
        smelt__sb_puts(b, end);
        return;
    }
    if (fast_div(e, k)) { /* the divisor's reciprocal, computed once (math.h.in) */
        smelt__sb_puts(b, "smelt_divr_f32(");
        value_ref(b, e, op->in[0]);
        smelt__sb_puts(b, ", ");
        value_ref(b, e, op->in[1]);
        smelt__sb_printf(b, ", &%s)", e->divq);
        return;
    }
    if (fast_exp(e, k)) { /* its range's fewer instructions (math.h.in) */
        smelt__sb_puts(b, "smelt_exp_f32_w(");
        value_ref(b, e, op->in[0]);
        smelt__sb_printf(b, ", &%s)", e->expq);
        return;
    }
    bool to_bool = op->dtype == SMELT_BOOL && smelt__ops[op->op].rule != SMELT_RULE_CMP;
    bool rnd = smelt__is_half(op->dtype) && !e->arrays; /* computed in f32, rounded to f16/bf16 */
    if (to_bool)
        smelt__sb_puts(b, "(");
    if (rnd)
        smelt__sb_printf(b, "smelt_rnd_%s(", smelt__dtypes[op->dtype].name);
    expand(b, e, t, ct, op->in);
    if (to_bool || rnd)
        smelt__sb_puts(b, rnd ? ")" : " != 0)");
}

/* Which values are written inline (see ectx); uses and inl come zeroed. */
static void plan_inlining(const smelt__kdesc *d, int *uses, bool *inl, int *cons_op, int *cons_slot)
{
    int nv = d->n_in + d->n_ops;
    for (int o = 0; o < d->n_out; o++)
        uses[d->out_val[o]] += 2; /* never inline an output */
    for (int k = 0; k < d->n_ops; k++)
        for (int j = 0; j < d->ops[k].nin; j++) {
            int v = d->ops[k].in[j];
            if (uses[v]++ == 0) {
                cons_op[v] = k;
                cons_slot[v] = j;
            }
        }
    for (int v = 0; v < nv; v++) {
        if (uses[v] != 1 || is_const(d, v))
            continue;
        /* when its reader's expression names it once (a cast names its operand once) */
        smelt_dtype ct;
        char tok[3] = {'%', (char)('0' + cons_slot[v]), 0};
        const char *t = op_template(d, cons_op[v], &ct), *first = t ? strstr(t, tok) : NULL;
        inl[v] = !t || (first && !strstr(first + 2, tok));
    }
}

/* C loops: which values are written inline in a branch (cond[v]): where's
 * second and third operands, logical_and's second, or inside an operator
 * written there.  gcc vectorises a load there as a masked load, which the
 * hardware does not fetch ahead: c_group fetches such inputs itself; and
 * an exp there keeps the plain form (fast_exp). */
static void branch_values(const smelt__kdesc *d, const bool *inl, const int *cons_op, const int *cons_slot, bool *cond)
{
    for (int v = d->n_in + d->n_ops - 1; v >= 0; v--) { /* readers after what they read */
        cond[v] = false;
        if (!inl[v])
            continue;
        smelt_dtype ct;
        int k = cons_op[v];
        char tok[3] = {'%', (char)('0' + cons_slot[v]), 0};
        const char *t = op_template(d, k, &ct), *at = t ? strstr(t, tok) : NULL;
        for (const char *p = t; at && p < at && !cond[v]; p++)
            cond[v] = *p == '?' || (p[0] == '&' && p[1] == '&') || (p[0] == '|' && p[1] == '|');
        cond[v] = cond[v] || cond[d->n_in + k];
    }
}

/* The stores of the outputs, each line after indent: staged ones into
 * h<k>[j] (converted after the loop), other f16/bf16 ones converted here. */
static void emit_stores(smelt__sb *b, const ectx *e, const char *indent)
{
    const smelt__kdesc *d = e->d;
    for (int k = d->n_in; k < d->n_in + d->n_out; k++) {
        smelt_dtype dt = operand_dtype(d, k);
        bool conv = smelt__is_half(dt) && !staged(e, k);
        smelt__sb_puts(b, indent);
        operand_ref(b, e, k);
        smelt__sb_puts(b, " = ");
        if (conv)
            smelt__sb_printf(b, "smelt_f2h_%s(", smelt__dtypes[dt].name);
        value_ref(b, e, d->out_val[k - d->n_in]);
        smelt__sb_puts(b, conv ? ");\n" : ";\n");
    }
}

/* Loads, operators and stores of one lane. */
static void emit_lane(smelt__sb *b, const ectx *e)
{
    const smelt__kdesc *d = e->d;
    for (int v = 0; v < d->n_in + d->n_ops; v++) {
        if (e->inl[v] || is_const(d, v) || (v < d->n_in && e->uses[v] == 0))
            continue;
        smelt__sb_printf(b, "            %s ", e->dl->type[value_dtype(d, v)]);
        value_ref(b, e, v);
        smelt__sb_puts(b, " = ");
        value_expr(b, e, v);
        smelt__sb_puts(b, ";\n");
    }
    emit_stores(b, e, "            ");
}

/* The C loop form's body with f16/bf16 results (ectx.arrays): one loop
 * over the group per operator that is not written inline, into an array;
 * f16/bf16 arrays are then rounded as a whole (the prelude's smelt_rnd16_*,
 * F16C where the compiler has it: the per-value bit manipulation would
 * cost more than the arithmetic); then the stores. */
static void emit_arrays(smelt__sb *b, const ectx *e)
{
    const smelt__kdesc *d = e->d;
    for (int k = 0; k < d->n_ops; k++) {
        int v = d->n_in + k;
        if (e->inl[v] || is_const(d, v))
            continue;
        smelt_dtype dt = value_dtype(d, v);
        smelt__sb_printf(b, "    %s v%d[%d];\n    for (int64_t j = 0; j < %d; j++)\n        v%d[j] = ",
                         e->dl->type[dt], v, C_GROUP, C_GROUP, v);
        op_expr(b, e, k);
        smelt__sb_puts(b, ";\n");
        if (smelt__is_half(dt))
            smelt__sb_printf(b, "    for (int c = 0; c < %d; c += 16)\n        smelt_rnd16_%s(v%d + c);\n", C_GROUP,
                             smelt__dtypes[dt].name, v);
    }
    smelt__sb_printf(b, "    for (int64_t j = 0; j < %d; j++) {\n", C_GROUP);
    emit_stores(b, e, "        ");
    smelt__sb_puts(b, "    }\n");
}

/* Device nd kernels: each element's operand offsets from its coordinates
 * x0 (outermost) .. x{R-1}.  init (before the grid-stride loop) divides the
 * thread's first index j and the loop's step by the merged shape, innermost
 * dimension first, once; next (after the body) adds the step's digits to
 * the coordinates with a carry, one comparison a dimension (x + s + carry <
 * 2 shape: one subtraction).  Each element divided its index by the shape
 * (an integer division of about 20 instructions a dimension) until
 * 2026-11-27.  V > 1: j counts vectors of V elements along the innermost
 * dimension (its extent e{R-1} is the shape's over V), broadcast operands
 * (mode BCAST) keep one offset for the vector. */
static void device_offsets(smelt__sb *init, smelt__sb *b, smelt__sb *next, const smelt__kdesc *d, int V)
{
    int R = d->rank, n = d->n_in + d->n_out;
    if (R > 1) {
        for (int dd = 1; dd < R; dd++) {
            smelt__sb_printf(init, "    const smelt_idx e%d = a.shape[%d]", dd, dd);
            smelt__sb_printf(init, dd == R - 1 && V > 1 ? " / %d;\n" : ";\n", V);
        }
        smelt__sb_puts(init, "    smelt_idx ");
        for (int dd = 0; dd < R; dd++)
            smelt__sb_printf(init, "%sx%d, s%d", dd ? ", " : "", dd, dd);
        smelt__sb_puts(init, "; /* j's coordinates; the step's digits */\n    {\n        smelt_idx t = j, u = step;\n");
        for (int dd = R - 1; dd > 0; dd--)
            smelt__sb_printf(init, "        x%d = t %% e%d, t /= e%d;\n"
                                   "        s%d = u %% e%d, u /= e%d;\n", dd, dd, dd, dd, dd, dd);
        smelt__sb_puts(init, "        x0 = t, s0 = u;\n    }\n");
        smelt__sb_puts(next, "        {\n            smelt_idx cy = 0;\n");
        for (int dd = R - 1; dd > 0; dd--)
            smelt__sb_printf(next, "            x%d += s%d + cy;\n            cy = x%d >= e%d;\n"
                                   "            if (cy)\n                x%d -= e%d;\n", dd, dd, dd, dd, dd, dd);
        smelt__sb_puts(next, "            x0 += s0 + cy;\n        }\n");
        smelt__sb_printf(b, "        const smelt_idx c = x%d", R - 1);
    } else {
        smelt__sb_puts(b, "        const smelt_idx c = j");
    }
    if (V > 1)
        smelt__sb_printf(b, " * %d", V);
    smelt__sb_puts(b, ";\n");
    for (int k = 0; k < n; k++) {
        if (d->mode[k] == SMELT_MODE_CONTIG)
            smelt__sb_printf(b, "        smelt_idx o%d = c", k);
        else if (d->mode[k] == SMELT_MODE_BCAST)
            smelt__sb_printf(b, "        smelt_idx o%d = 0", k);
        else
            smelt__sb_printf(b, "        smelt_idx o%d = c * a.strides[%d]", k, k * R + R - 1);
        for (int dd = R - 2; dd >= 0; dd--)
            smelt__sb_printf(b, " + x%d * a.strides[%d]", dd, k * R + dd);
        smelt__sb_puts(b, ";\n");
    }
    for (int k = 0, s = 0; k < d->n_in && V == 1; k++) /* indexed reads: an index an element */
        if (d->gidx[k]) {
            smelt__sb_printf(b, "        o%d += (smelt_idx)(smelt_gi((int64_t)q%d[o%d], smelt_gx, %d) * smelt_gx[%d]);\n", k,
                             d->gidx[k] - 1, d->gidx[k] - 1, s, SMELT_GX_SLOTS + 2 * s + 1);
            s++;
        }
}

/* Device flat kernels: elements per vector (16 bytes of the widest operand)
 * and the vector body: whole-vector loads, the lanes, whole-vector stores.
 * aligned gets the run-time test that every operand is aligned for it. */
static int device_vec_width(const smelt__kdesc *d)
{
    size_t w = 1;
    for (int k = 0; k < d->n_in + d->n_out; k++)
        w = SMELT_MAX(w, smelt__dtypes[operand_dtype(d, k)].size);
    return (int)(16 / w);
}

static bool is_flat(const smelt__kdesc *d)
{
    if (smelt__kdesc_gathers(d))
        return false;
    for (int k = 0; k < d->n_in + d->n_out; k++)
        if (d->mode[k] != SMELT_MODE_CONTIG)
            return false;
    return d->rank == 1;
}

/* A device n-d kernel with a vector loop (V > 1 elements along the
 * innermost dimension, where the shape and strides allow at run time):
 * each operand contiguous or broadcast along it, the outputs contiguous. */
static bool device_nd_vec(const smelt__kdesc *d)
{
    if (is_flat(d) || d->reduce || smelt__is_tile(d->spread) || smelt__kdesc_gathers(d))
        return false;
    for (int k = 0; k < d->n_in + d->n_out; k++)
        if (d->mode[k] != SMELT_MODE_CONTIG && (k >= d->n_in || d->mode[k] != SMELT_MODE_BCAST))
            return false;
    return true;
}

/* operand k's vector: element o<k> of an n-d kernel's, the flat kernel's i-th */
static void vec_ref(smelt__sb *b, bool nd, const char *cq, const char *t, int V, int k)
{
    if (nd)
        smelt__sb_printf(b, "*(%ssmelt_vec<%s, %d> *)(q%d + o%d)", cq, t, V, k, k);
    else
        smelt__sb_printf(b, "((%ssmelt_vec<%s, %d> *)q%d)[i]", cq, t, V, k);
}

static void device_vec_body(smelt__sb *b, smelt__sb *aligned, ectx *e, int V)
{
    const smelt__kdesc *d = e->d;
    int n = d->n_in + d->n_out, R = d->rank;
    bool nd = !is_flat(d); /* vector i at offset o<k> (vectors of the innermost dimension) */
    if (nd)
        smelt__sb_printf(aligned, "a.shape[%d] %% %d == 0", R - 1, V);
    for (int k = 0; k < n; k++) {
        if (k < d->n_in && e->uses[k] == 0)
            continue;
        smelt_dtype dt = operand_dtype(d, k);
        const char *t = e->dl->stype[dt];
        if (nd && d->mode[k] == SMELT_MODE_BCAST) { /* one element for the vector's lanes */
            smelt__sb_printf(b, "            smelt_vec<%s, %d> l%d;\n            for (int u = 0; u < %d; u++)\n"
                                "                l%d.v[u] = q%d[o%d];\n", t, V, k, V, k, k, k);
            continue;
        }
        smelt__sb_printf(aligned, "%s(unsigned long long)q%d %% %d == 0", aligned->len ? " && " : "",
                         k, V * (int)smelt__dtypes[dt].size);
        for (int dd = 0; nd && dd < R - 1; dd++) /* each vector's offset a multiple of V */
            smelt__sb_printf(aligned, " && a.strides[%d] %% %d == 0", k * R + dd, V);
        if (k < d->n_in) {
            smelt__sb_printf(b, "            const smelt_vec<%s, %d> l%d = ", t, V, k);
            vec_ref(b, nd, "const ", t, V, k);
            smelt__sb_puts(b, ";\n");
        } else {
            smelt__sb_printf(b, "            smelt_vec<%s, %d> l%d;\n", t, V, k);
        }
    }
    e->form = FORM_VEC;
    for (e->lane = 0; e->lane < V; e->lane++)
        emit_lane(b, e);
    for (int k = d->n_in; k < n; k++) {
        smelt__sb_puts(b, "            ");
        vec_ref(b, nd, "", e->dl->stype[operand_dtype(d, k)], V, k);
        smelt__sb_printf(b, " = l%d;\n", k);
    }
}

int smelt__emit_step(const smelt__target *t, const smelt__kdesc *d)
{
    return t->dialect->device && !d->reduce && (is_flat(d) || device_nd_vec(d)) ? device_vec_width(d) : 1;
}

/* smelt's math library (templates/common/math.h.in), cut to what a kernel
 * uses: its top-level items (a function, table or macro, with the comment
 * above it), those the kernel names and, transitively, those they name.
 * Fewer lines for NVRTC and the C compiler to read. */
#define MATH_MARK "\001SMELT_MATH\001"
#define MAX_MATH_ITEMS 256
typedef struct {
    const char *s, *e;
    char name[64];
    bool used;
} math_item;

static bool ident_char(char c) { return c == '_' || (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z'); }

static bool item_start(const char *l)
{
    return !strncmp(l, "SMELT_MF", 8) || !strncmp(l, "SMELT_MTAB", 10) || !strncmp(l, "#define", 7);
}

/* The name of the item whose first line (after its comment) is p. */
static void item_name(math_item *it, const char *p)
{
    const char *q;
    if (!strncmp(p, "#define ", 8)) {
        for (q = p += 8; ident_char(*q); q++)
            ;
    } else {
        for (q = p; *q && *q != '(' && *q != '['; q++)
            ;
        while (q > p && !ident_char(q[-1]))
            q--;
        for (p = q; p > it->s && ident_char(p[-1]); p--)
            ;
    }
    snprintf(it->name, sizeof it->name, "%.*s", (int)(q - p), p);
}

/* Mark (and push) the items that text [s, e) names. */
static void math_mark(math_item *it, int n, const char *s, const char *e, int *stack, int *top)
{
    for (const char *p = s; p < e; p++) {
        if (ident_char(*p) && (p == s || !ident_char(p[-1])) && (*p == 's' || *p == 'S')) {
            const char *q = p;
            while (q < e && ident_char(*q))
                q++;
            char tok[64];
            snprintf(tok, sizeof tok, "%.*s", (int)(q - p < 63 ? q - p : 63), p);
            for (int i = 0; i < n; i++)
                if (!it[i].used && !strcmp(it[i].name, tok))
                    it[i].used = true, stack[(*top)++] = i;
            p = q;
        }
    }
}

static void math_select(smelt__sb *out, const char *lib, const char *uses, const char *uses_end)
{
    math_item it[MAX_MATH_ITEMS];
    int n = 0, stack[MAX_MATH_ITEMS], top = 0;
    const char *pending = NULL;
    for (const char *l = lib; *l && n < MAX_MATH_ITEMS;) {
        const char *nl = strchr(l, '\n');
        const char *next = nl ? nl + 1 : l + strlen(l);
        if (!strncmp(l, "/*", 2) && !pending)
            pending = l;
        else if (item_start(l)) {
            if (n)
                it[n - 1].e = pending ? pending : l;
            it[n].s = pending ? pending : l;
            it[n].used = false;
            item_name(&it[n++], l);
            pending = NULL;
        } else if (*l != ' ' && *l != '}' && *l != '\n' && *l != '{')
            pending = NULL;
        l = next;
    }
    if (!n) {
        smelt__sb_puts(out, lib);
        return;
    }
    it[n - 1].e = lib + strlen(lib);
    math_mark(it, n, uses, uses_end, stack, &top);
    while (top > 0) {
        int i = stack[--top];
        math_mark(it, n, it[i].s, it[i].e, stack, &top);
    }
    for (int i = 0; i < n; i++)
        if (it[i].used)
            smelt__sb_putn(out, it[i].s, (size_t)(it[i].e - it[i].s));
}

/* A template's slots: {{KEY}} is replaced by val. */
typedef struct slot {
    const char *key, *val;
} slot;
#define NSLOTS(s) ((int)(sizeof(s) / sizeof(s)[0]))
/* n as a slot's value, in a buffer that lives as long as the caller's block */
#define SLOT_NUM(n) slot_num((char[16]){0}, (n))
static const char *slot_num(char *buf, int n)
{
    snprintf(buf, 16, "%d", n);
    return buf;
}

static int render(smelt__sb *out, const char *tpl, const char *tname, const slot *slots, int n,
                  smelt__sb *err);

/* {{>name}}: template name rendered with the same slots, less its first
 * comment and its last newline (templates/cuda/args.cu.in, the parameter
 * block every CUDA template declares). */
static int render_include(smelt__sb *out, const char *name, size_t len, const slot *slots, int n, smelt__sb *err)
{
    char tname[64];
    snprintf(tname, sizeof tname, "%.*s", (int)SMELT_MIN(len, sizeof tname - 1), name);
    char *tpl = smelt__template_load(tname, err);
    if (!tpl)
        return SMELT_ERR_COMPILE;
    const char *body = tpl, *c = strncmp(tpl, "/*", 2) ? NULL : strstr(tpl, "*/\n");
    if (c)
        body = c + 3;
    size_t bl = strlen(body);
    if (bl && body[bl - 1] == '\n')
        ((char *)body)[bl - 1] = 0;
    int st = render(out, body, tname, slots, n, err);
    free(tpl);
    return st;
}

/* Replace {{KEY}} slots ({{>name}}: render_include).  Unknown slots are an
 * error naming the template. */
static int render(smelt__sb *out, const char *tpl, const char *tname, const slot *slots, int n,
                  smelt__sb *err)
{
    const char *p = tpl, *s, *e;
    for (; (s = strstr(p, "{{")); p = e + 2) {
        smelt__sb_putn(out, p, (size_t)(s - p));
        if (!(e = strstr(s, "}}"))) {
            smelt__sb_printf(err, "template %s: unterminated slot", tname);
            return SMELT_ERR_COMPILE;
        }
        size_t len = (size_t)(e - s - 2);
        if (s[2] == '>') {
            int st = render_include(out, s + 3, len - 1, slots, n, err);
            if (st)
                return st;
            continue;
        }
        int i = 0;
        while (i < n && (strlen(slots[i].key) != len || strncmp(s + 2, slots[i].key, len)))
            i++;
        if (i == n) {
            smelt__sb_printf(err, "template %s: unknown slot {{%.*s}}", tname, (int)len, s + 2);
            return SMELT_ERR_COMPILE;
        }
        smelt__sb_puts(out, slots[i].val);
    }
    smelt__sb_puts(out, p);
    return SMELT_OK;
}

static int render_file(smelt__sb *out, const char *tname, const slot *slots, int n, smelt__sb *err)
{
    char *tpl = smelt__template_load(tname, err);
    if (!tpl)
        return SMELT_ERR_COMPILE;
    int st = render(out, tpl, tname, slots, n, err);
    free(tpl);
    return st;
}

/* the dialect's template <dir>/<base>.<ext>.in */
static int load_render(smelt__sb *out, const smelt__dialect *dl, const char *base, const slot *slots,
                       int n, smelt__sb *err)
{
    char tname[64];
    snprintf(tname, sizeof tname, "%s/%s.%s.in", dl->dir, base, dl->ext);
    return render_file(out, tname, slots, n, err);
}

/* A C or CUDA source's prelude, in the dialect's qualifiers: the libm
 * functions kernels may call declared (src/mathfns.def; a device compiler
 * declares its own), MATH_MARK where smelt's math goes (with_math).
 * *mathlib gets the math library, for the caller to free. */
static int render_prelude(smelt__sb *out, const smelt__dialect *dl, char **mathlib, smelt__sb *err)
{
    smelt__sb decls;
    smelt__sb_init(&decls);
#define SMELT_MATHFN(fn, n)                                                                 \
    smelt__sb_printf(&decls, "double %s(%s);\nfloat %sf(%s);\n", #fn,                      \
                     n == 1 ? "double" : n == 2 ? "double, double" : "double, double, double", \
                     #fn, n == 1 ? "float" : n == 2 ? "float, float" : "float, float, float");
#include "mathfns.def"
#undef SMELT_MATHFN
    *mathlib = smelt__template_load("common/math.h.in", err);
    const slot sl[] = {{"MATH_DECLS", dl->device ? "" : smelt__sb_str(&decls)}, {"MATH", MATH_MARK},
                       {"HELPER_KW", dl->helper_kw}, {"MATH_KW", dl->math_kw},
                       {"MATH_SLOW_KW", dl->math_slow_kw}, {"TABLE_KW", dl->table_kw}};
    int st = *mathlib ? render_file(out, "common/prelude.h.in", sl, NSLOTS(sl), err) : SMELT_ERR_COMPILE;
    smelt__sb_free(&decls);
    return st;
}

/* text with MATH_MARK replaced by the items of smelt's math library that
 * the text after the mark names. */
static void with_math(smelt__sb *text, const char *mathlib)
{
    const char *m = strstr(smelt__sb_str(text), MATH_MARK);
    if (!m)
        return;
    smelt__sb full;
    smelt__sb_init(&full);
    smelt__sb_putn(&full, text->s, (size_t)(m - text->s));
    math_select(&full, mathlib, m + strlen(MATH_MARK), text->s + text->len);
    smelt__sb_puts(&full, m + strlen(MATH_MARK));
    smelt__sb_free(text);
    *text = full;
}

/* Indexed reads (smelt__kdesc.gidx): the index where input k's offset o<k>
 * points is read from its input at o<q>, checked against the axis's size
 * (smelt_gi: a bad one is recorded in the gather block and read as 0, so
 * nothing outside the array is read), and times the axis's stride added
 * to o<k>.  C kernels once a row, device kernels once an element. */
#define GATHER_FN(qual) \
    "#ifndef SMELT_GI\n#define SMELT_GI\n" \
    qual " int64_t smelt_gi(int64_t v, int64_t *gx, int s)\n" \
    "{\n" \
    "    const int64_t n = gx[2 + 2 * s], w = v < 0 ? v + n : v;\n" \
    "    if (w >= 0 && w < n)\n" \
    "        return w;\n" \
    "    gx[1] = v;\n" \
    "    gx[0] = 1 + s;\n" \
    "    return 0;\n" \
    "}\n#endif\n"
static const char gather_fn[] = GATHER_FN("static");
static const char gather_fn_dev[] = GATHER_FN("SMELT_D");

static void gather_offsets(smelt__sb *b, const smelt__kdesc *d, const char *ptrs, const char *ind)
{
    if (!smelt__kdesc_gathers(d))
        return;
    smelt__sb_printf(b, "%sint64_t *const smelt_gx = (int64_t *)%s[%d];\n", ind, ptrs, d->n_in + d->n_out + 2);
    for (int k = 0, s = 0; k < d->n_in; k++) {
        if (!d->gidx[k])
            continue;
        int q = d->gidx[k] - 1;
        smelt__sb_printf(b, "%so%d += smelt_gi((int64_t)((const %s *)%s[%d])[o%d], smelt_gx, %d) * smelt_gx[%d];\n",
                         ind, k, smelt__dtypes[d->in_dt[q]].size == 4 ? "int32_t" : smelt__dtypes[d->in_dt[q]].size == 8 ? "int64_t" : smelt__dtypes[d->in_dt[q]].size == 2 ? "int16_t" : "uint8_t",
                         ptrs, q, q, s, SMELT_GX_SLOTS + 2 * s + 1);
        s++;
    }
}

/* The element offsets of a row's first element (C kernels, both forms):
 * o<k> for every operand, from the row and column the kernel computed. */
static void row_offsets(smelt__sb *row, const smelt__kdesc *d)
{
    int nops = d->n_in + d->n_out, R = d->rank;
    for (int k = 0; k < nops; k++)
        smelt__sb_printf(row, "        int64_t o%d = col * strides[%d];\n", k, k * R + R - 1);
    if (R > 1) {
        smelt__sb_printf(row, "        for (int d = %d; d >= 0; d--) {\n", R - 2);
        smelt__sb_puts(row, "            int64_t idx = row % shape[d];\n            row /= shape[d];\n");
        for (int k = 0; k < nops; k++)
            smelt__sb_printf(row, "            o%d += idx * strides[%d + d];\n", k, k * R);
        smelt__sb_puts(row, "        }\n");
    }
    gather_offsets(row, d, "ptrs", "        ");
}

/* ---- block form (TinyCC): the kernel walks its elements SMELT_BLOCK at a
 * time and calls, per operator, a vectorised primitive compiled into smelt
 * (smelt_blk_<op>_<dtype>, written at build time: smelt__emit_blk_library).
 * TinyCC's own code is scalar and spills every value; this way it only
 * sequences calls, and the arithmetic runs at the speed of gcc -O3 code. */
#define SMELT_BLOCK 512
#define SMELT_BLOCK_CONSTS 16   /* constants with a block filled once */
#define SMELT_BLOCK_MAX_BUFS 96 /* 384 KiB of stack at most */

/* The name substituted for NAME_TOKEN: a hash of the text.  */
static int finish_name(smelt__sb *text, smelt__sb *src, char *name, const char *prefix)
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

static void declare_once(smelt__sb *decls, const char *fn, const char *args)
{
    char line[160];
    snprintf(line, sizeof line, "void %s(%s);\n", fn, args);
    if (!strstr(smelt__sb_str(decls), line))
        smelt__sb_puts(decls, line);
}

#define BLK_ARGS "int64_t, char *, const char *, const char *, const char *"
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
            literal(&b->setup, b->dl, op);
        smelt__sb_puts(&b->setup, ";\n");
        char fn[40];
        declare_once(&b->decls, move_name(fn, "fill", smelt__dtypes[op->dtype].size), FILL_ARGS);
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
            declare_once(&b->decls, fn, FILL_ARGS);
        } else {
            smelt__sb_printf(&b->body, "            %s(m, %s, q%d + j * s%d * %zu, s%d);\n",
                             move_name(fn, "gather", sz), l, k, k, sz, k);
            declare_once(&b->decls, fn, MOV_ARGS);
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
        if (repeated_operand(op, j) || !is_const(d, x) || b->bufof[x] >= 0)
            continue;
        temp[ntemp] = blk_new_block(b);
        blk_in_block(b, x, temp[ntemp++]);
        char fn[40];
        smelt__sb_printf(&b->body, "            %s(m, %s, (const char *)&v%d);\n",
                         move_name(fn, "fill", smelt__dtypes[value_dtype(d, x)].size), b->loc[x], x);
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
    op_template(d, k, &ct);
    smelt__blk_name(fn, op->op, ct, op->dtype);
    declare_once(&b->decls, fn, BLK_ARGS);
    smelt__sb_printf(&b->body, "            %s(m, %s", fn, b->loc[v]);
    for (int j = 0; j < 3; j++)
        smelt__sb_printf(&b->body, ", %s", j < op->nin ? b->loc[op->in[j]] : "0");
    smelt__sb_puts(&b->body, ");\n");
    for (int t = 0; t < ntemp; t++)
        b->freeb[b->nfree++] = temp[t];
    /* blocks whose last reader this was are free for later values */
    for (int j = 0; j < op->nin; j++) {
        int x = op->in[j];
        if (!repeated_operand(op, j) && b->last[x] == k && b->bufof[x] >= 0 && !is_const(d, x))
            b->freeb[b->nfree++] = b->bufof[x];
    }
}

/* outputs not written in place */
static void blk_outputs(blk_state *b)
{
    const smelt__kdesc *d = b->d;
    for (int o = 0; o < d->n_out; o++) {
        int v = d->out_val[o], q = d->n_in + o;
        size_t sz = smelt__dtypes[value_dtype(d, v)].size;
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
        declare_once(&b->decls, fn, MOV_ARGS);
    }
}

/* raw: the text as it is (NAME_TOKEN unreplaced) into src, name unused */
static int emit_blocks(const smelt__dialect *dl, const smelt__kdesc *d, smelt__sb *src,
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
        smelt__sb_puts(&b.decls, gather_fn);
    row_offsets(&b.row, d);
    for (int k = 0; k < nops; k++) {
        smelt_dtype dt = operand_dtype(d, k);
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
    if (!(st = load_render(raw ? src : &text, dl, "kernel_block", sl, NSLOTS(sl), err)) && !raw)
        st = finish_name(&text, src, name, "smelt_ew");
done:
    free(b.loc), free(b.last), free(b.bufof), free(b.freeb);
    smelt__sb_free(&b.decls), smelt__sb_free(&b.setup);
    smelt__sb_free(&b.row), smelt__sb_free(&b.body), smelt__sb_free(&text);
    return st;
}

/* ---- the block primitives themselves: C source compiled into smelt
 * (src/codegen/gen-blocks.c writes it at build time; meson.build compiles
 * it once for each x86-64 level).  One loop per operator and compute dtype,
 * its body the operator's expression as the loop form spells it (op_expr);
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
        op_expr(b, e, 0);
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
static bool op_is_math(const smelt__opinfo *oi)
{
    size_t n = oi ? strlen(oi->name) : 0;
    return oi && !strncmp(oi->c_float, "smelt_", 6) && !strncmp(oi->c_float + 6, oi->name, n) &&
           !strncmp(oi->c_float + 6 + n, "_%S(", 4);
}

/* A row of the primitives' table; math: the primitive of a transcendental
 * operator, for which src/blocks.c may bind another level. */
static void blk_entry(smelt__sb *table, const char *fn, const smelt__opinfo *oi)
{
    smelt__sb_printf(table, "    {\"%s\", (smelt__blk_fn)%s, %d},\n", fn, fn, op_is_math(oi));
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
        blk_entry(table, fn, NULL);
        for (int scatter = 0; scatter < 2; scatter++) {
            smelt__sb_printf(b, "static void %s(int64_t n, char *restrict o, const char *restrict a, int64_t s)\n{\n"
                                "    uint%d_t *restrict O = (uint%d_t *)o;\n"
                                "    const uint%d_t *restrict A = (const uint%d_t *)a;\n"
                                "    for (int64_t i = 0; i < n; i++)\n        %s;\n}\n",
                             move_name(fn, scatter ? "scatter" : "gather", size), bits, bits, bits, bits,
                             scatter ? "O[i * s] = A[i]" : "O[i] = A[i * s]");
            blk_entry(table, fn, NULL);
        }
    }
}

static void red_blk_prims(smelt__sb *prims, smelt__sb *table); /* the reductions' lanes (below) */

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
            const char *t = op_template(&d, 0, &ct);
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
            blk_entry(&table, fn, oi);
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
            blk_entry(&table, fn, NULL);
        }
    blk_moves(&prims, &table);
    red_blk_prims(&prims, &table);
    int st = render_prelude(&prelude, dl, &mathlib, err);
    if (!st) {
        const slot sl[] = {{"PRELUDE", smelt__sb_str(&prelude)}, {"PRIMITIVES", smelt__sb_str(&prims)},
                           {"TABLE", smelt__sb_str(&table)}};
        st = load_render(out, dl, "blocks", sl, NSLOTS(sl), err);
    }
    if (!st) {
        with_math(out, mathlib);
        st = out->oom ? SMELT_ERR_NOMEM : SMELT_OK;
    }
    free(mathlib);
    smelt__sb_free(&prims), smelt__sb_free(&table), smelt__sb_free(&prelude);
    return st;
}

/* ---- loop form for C (the CC tier): groups of C_GROUP elements ---------
 * The loop body lives in one non-inlined function computing C_GROUP
 * elements; the kernel calls it for every whole group and, for the last
 * elements, on copies padded to a whole group.  (Every element so goes
 * through the same compiled code; since smelt's math is plain IEEE C, a
 * scalar epilogue would give the same bits too, and the group is kept for
 * its simple tail and the f16/bf16 staging.  It is large enough that the
 * call and the math's constants cost little.) */
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

/* Whole groups with streaming (non-temporal) stores, for kernels whose
 * outputs are contiguous, when the executor sets shape[rank] (outputs larger
 * than the last-level cache, not read by the next kernel).  Each group's
 * outputs go to an aligned local buffer, then to memory with non-temporal
 * stores as wide as the target's vectors (64 bytes with AVX-512, 32 with
 * AVX, else 16; gcc keeps the copy loop as written, and with 16-byte stores
 * it made the gelu_tanh kernel 1.2-1.3x slower on an AMD EPYC) once every
 * output is 64-byte aligned; GCC's and clang's x86-64 builtins, no header.
 * No fence here: the executor fences once per call of the kernel
 * (call_kernel, src/runtime/exec.c).  bound: the loop's end ("end" in flat
 * kernels, "n" in a row of an nd kernel). */
static void c_stream(const smelt__kdesc *d, const smelt__dialect *dl, const char *bound, const char *call,
                     smelt__sb *out)
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
    smelt__sb_printf(out, "    if (shape[%d] == 1) {\n        for (; j + %d <= %s && (0", d->rank, C_GROUP, bound);
    for (int k = d->n_in; k < nops; k++)
        smelt__sb_printf(out, " | ((unsigned long)(q%d + j) & 63)", k);
    smelt__sb_printf(out, "); j += %d)\n            smelt_group(%s);\n", C_GROUP, call);
    smelt__sb_printf(out, "        for (; j + %d <= %s; j += %d) {\n", C_GROUP, bound, C_GROUP);
    for (int k = d->n_in; k < nops; k++)
        smelt__sb_printf(out, "            %s w%d[%d] __attribute__((aligned(64)));\n",
                         dl->stype[value_dtype(d, d->out_val[k - d->n_in])], k, C_GROUP);
    smelt__sb_printf(out, "            smelt_group(%s);\n", smelt__sb_str(&wcall));
    for (int k = d->n_in; k < nops; k++)
        smelt__sb_printf(out, "            for (int i = 0; i < (int)(sizeof w%d / SMELT_NT); i++)\n"
                              "                smelt_nt((char *)(q%d + j) + SMELT_NT * i, ((const smelt_vnt *)(const void *)w%d)[i]);\n",
                         k, k, k);
    smelt__sb_puts(out, "        }\n    }\n#endif\n"); /* (the executor fences them: src/runtime/exec.c) */
    smelt__sb_free(&wcall);
}

/* The group function: the body over C_GROUP elements.  With a fast body
 * (its f32 exps through smelt_exp_f32_w: 0.81x the time of smelt_exp_f32,
 * the same bits where every argument lies in its range, math.h.in), that
 * one first and then, where an argument lay outside, the body again over
 * the whole group; which needs the outputs apart from the inputs they
 * would overwrite (a kernel computed in place runs only the body). */
static void c_group(const smelt__kdesc *d, const smelt__dialect *dl, const char *consts,
                    const char *body, const char *fast, bool arrays, uint64_t branch_in, smelt__sb *group,
                    smelt__sb *tail)
{
    int nops = d->n_in + d->n_out;
    smelt__sb_puts(group, "static __attribute__((noinline)) void smelt_group(");
    for (int k = 0; k < nops; k++) {
        smelt_dtype dt = operand_dtype(d, k);
        const char *sep = k ? ", " : "", *cq = k < d->n_in ? "const " : "";
        if (d->mode[k] == SMELT_MODE_BCAST)
            smelt__sb_printf(group, "%s%s b%d", sep, dl->type[dt], k);
        else
            smelt__sb_printf(group, "%s%s%s *%s q%d", sep, cq, dl->stype[dt], dl->restrict_kw, k);
        if (d->mode[k] == SMELT_MODE_STRIDED)
            smelt__sb_printf(group, ", int64_t s%d", k);
    }
    /* f16/bf16 operands: converted a group at a time (the prelude's
     * smelt_load16_* / smelt_store16_*, F16C where the compiler has it) */
    smelt__sb stage_in, stage_out;
    smelt__sb_init(&stage_in), smelt__sb_init(&stage_out);
    for (int k = 0; k < nops; k++) {
        smelt_dtype dt = operand_dtype(d, k);
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
    /* inputs the body reads in a branch (branch_values): gcc reads them with
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
                if (d->mode[k] == SMELT_MODE_BCAST || smelt__is_half(operand_dtype(d, k)))
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
                                "        smelt_fast = smelt_ew <= SMELT_EXP_W_MAX;\n    }\n"
                                "    if (!smelt_fast)\n        for (int64_t j = 0; j < %d; j++) {\n%s        }\n%s}\n",
                         C_GROUP, fast, C_GROUP, body, smelt__sb_str(&stage_out));
    }
    smelt__sb_free(&stage_in), smelt__sb_free(&stage_out);
    /* the tail: gather (index clamped into the valid part), compute, scatter */
    for (int k = 0; k < nops; k++)
        if (d->mode[k] != SMELT_MODE_BCAST)
            smelt__sb_printf(tail, "        %s t%d[%d];\n", dl->stype[operand_dtype(d, k)], k, C_GROUP);
    smelt__sb_printf(tail, "        for (int64_t k = 0; k < %d; k++) {\n            const int64_t x = j + (k < m ? k : 0);\n", C_GROUP);
    for (int k = 0; k < d->n_in; k++)
        if (d->mode[k] == SMELT_MODE_CONTIG)
            smelt__sb_printf(tail, "            t%d[k] = q%d[x];\n", k, k);
        else if (d->mode[k] == SMELT_MODE_STRIDED)
            smelt__sb_printf(tail, "            t%d[k] = q%d[x * s%d];\n", k, k, k);
    smelt__sb_puts(tail, "        }\n        smelt_group(");
    group_args(tail, d, ARGS_TAIL);
    smelt__sb_puts(tail, ");\n        for (int64_t k = 0; k < m; k++) {\n");
    for (int k = d->n_in; k < nops; k++)
        if (d->mode[k] == SMELT_MODE_STRIDED)
            smelt__sb_printf(tail, "            q%d[(j + k) * s%d] = t%d[k];\n", k, k, k);
        else
            smelt__sb_printf(tail, "            q%d[j + k] = t%d[k];\n", k, k);
    smelt__sb_puts(tail, "        }\n");
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
        smelt_dtype dt = operand_dtype(d, k);
        const char *cq = k < d->n_in ? "const " : "";
        if (flat || dl->device)
            smelt__sb_printf(setup, "    %s%s *%s q%d = (%s%s *)%sptrs[%d];\n", cq, dl->stype[dt],
                             dl->restrict_kw, k, cq, dl->stype[dt], dl->device ? "a." : "", k);
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
        literal(cb, dl, &d->ops[i]);
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
        device_offsets(init, row, next, d, 1);
        return;
    }
    row_offsets(row, d);
    for (int k = 0; k < d->n_in + d->n_out; k++) {
        smelt_dtype dt = operand_dtype(d, k);
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
 * with its f32 exps as smelt_exp_f32_w (c_group), left empty when it has
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
    plan_inlining(d, uses, inl, uses + nv, uses + 2 * nv);
    if (!dl->device)
        branch_values(d, inl, uses + nv, uses + 2 * nv, cond);
    for (int k = 0; k < d->n_in && k < 64 && branch_in; k++)
        if (cond[k])
            *branch_in |= (uint64_t)1 << k;
    ectx e = {dl, d, uses, inl, -1, dl->device && !flat ? FORM_OFFSET : FORM_C, !dl->device, false, 0, NULL, 0,
              NULL, dl->device ? NULL : cond};
    for (int k = 0; k < d->n_ops && !dl->device; k++)
        e.arrays = e.arrays || (smelt__is_half(d->ops[k].dtype) && d->ops[k].op != SMELT_OP_CONST);
    for (int v = d->n_in; v < nv && e.arrays; v++) /* each f16/bf16 result its own rounded array */
        inl[v] = inl[v] && !smelt__is_half(value_dtype(d, v));
    *arrays = e.arrays;
    if (e.arrays)
        emit_arrays(body, &e);
    else
        emit_lane(body, &e);
    e.expq = fast && !e.arrays ? "smelt_ew" : NULL; /* (fast: C callers only) */
    for (int k = 0; k < d->n_ops; k++)
        if (fast_exp(&e, k)) {
            emit_lane(fast, &e);
            break;
        }
    e.expq = NULL;
    if (vec > 1)
        device_vec_body(vbody, valigned, &e, vec);
    free(uses), free(inl);
    return SMELT_OK;
}

/* ---- the loop form's kernel shapes ------------------------------------
 * Each writes its template from the shared parts (emit_setup, emit_rows,
 * emit_body) and fills only its own slots. */

/* C (the CC tier): a flat or n-d loop over groups of C_GROUP elements. */
static int shape_c_loop(const smelt__dialect *dl, const smelt__kdesc *d, const char *prelude,
                        smelt__sb *text, smelt__sb *err)
{
    bool flat = is_flat(d), arrays;
    smelt__sb setup, row, body, fast, gconst, group, call, tail, stream;
    smelt__sb_init(&setup), smelt__sb_init(&row), smelt__sb_init(&body), smelt__sb_init(&gconst);
    smelt__sb_init(&group), smelt__sb_init(&call), smelt__sb_init(&tail), smelt__sb_init(&stream);
    smelt__sb_init(&fast);
    int n_real = emit_setup(dl, d, flat, &setup, &gconst);
    if (!flat)
        emit_rows(dl, d, &row, NULL, NULL);
    uint64_t branch_in = 0;
    int st = emit_body(dl, d, flat, 1, &body, NULL, NULL, &arrays, &fast, &branch_in);
    if (!st) {
        group_args(&call, d, ARGS_DIRECT);
        if (smelt__kdesc_gathers(d))
            smelt__sb_puts(&group, gather_fn);
        c_group(d, dl, smelt__sb_str(&gconst), smelt__sb_str(&body), smelt__sb_str(&fast), arrays, branch_in, &group,
                &tail);
        c_stream(d, dl, flat ? "end" : "n", smelt__sb_str(&call), &stream);
        const slot sl[] = {
            {"PRELUDE", prelude}, {"NAME", NAME_TOKEN}, {"NOPS", SLOT_NUM(n_real)}, {"W", SLOT_NUM(C_GROUP)},
            {"RANK", SLOT_NUM(d->rank)}, {"SETUP", smelt__sb_str(&setup)}, {"ROW", smelt__sb_str(&row)},
            {"BODY", smelt__sb_str(&body)}, {"GROUP", smelt__sb_str(&group)}, {"CALL", smelt__sb_str(&call)},
            {"TAIL", smelt__sb_str(&tail)}, {"STREAM", smelt__sb_str(&stream)}};
        st = load_render(text, dl, flat ? "kernel_flat" : "kernel_nd", sl, NSLOTS(sl), err);
    }
    smelt__sb_free(&setup), smelt__sb_free(&row), smelt__sb_free(&body), smelt__sb_free(&gconst);
    smelt__sb_free(&group), smelt__sb_free(&call), smelt__sb_free(&tail), smelt__sb_free(&stream);
    smelt__sb_free(&fast);
    return st;
}

/* A device (CUDA): one element per thread in a grid-stride loop over a
 * parameter block, vector loads when every operand is contiguous. */
static int shape_device_grid(const smelt__dialect *dl, const smelt__kdesc *d, const char *prelude,
                             smelt__sb *text, smelt__sb *err)
{
    bool flat = is_flat(d), arrays;
    int nops = d->n_in + d->n_out, R = d->rank, vec = flat || device_nd_vec(d) ? device_vec_width(d) : 1;
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
        smelt__sb_puts(&pre, gather_fn_dev);
        smelt__sb_printf(&setup, "    int64_t *const smelt_gx = (int64_t *)a.ptrs[%d];\n", nops);
    }
    if (!flat)
        emit_rows(dl, d, &row, &init, &next);
    if (!flat && vec > 1)
        device_offsets(&vinit, &vrow, &vnext, d, vec);
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
        st = load_render(text, dl, flat ? "kernel_flat" : "kernel_nd", sl, NSLOTS(sl), err);
    }
    smelt__sb_free(&setup), smelt__sb_free(&row), smelt__sb_free(&body);
    smelt__sb_free(&vbody), smelt__sb_free(&valigned), smelt__sb_free(&init), smelt__sb_free(&next);
    smelt__sb_free(&pre);
    smelt__sb_free(&vinit), smelt__sb_free(&vrow), smelt__sb_free(&vnext);
    return st;
}

/* CUDA over tiles (smelt__is_tile(d->spread)): the inputs read transposed
 * through shared memory, a tile at a time (templates/cuda/kernel_tile.cu.in;
 * the executor picks the tiles, src/fusion/fusion.h). */
static int shape_device_tile(const smelt__dialect *dl, const smelt__kdesc *d, const char *prelude,
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
        const char *T = dl->stype[operand_dtype(d, k)];
        if (smelt__tile_packed(d->spread, k) && k < d->n_in) {
            smelt__sb_printf(&tiles, "    __shared__ %s tile%d[%d][%d];\n", T, k, SMELT_TILE, SMELT_TILE + 1);
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
        st = load_render(text, dl, "kernel_tile", sl, NSLOTS(sl), err);
    }
    smelt__sb_free(&setup), smelt__sb_free(&tiles), smelt__sb_free(&outer), smelt__sb_free(&loads);
    smelt__sb_free(&offs), smelt__sb_free(&body), smelt__sb_free(&vbody), smelt__sb_free(&valigned);
    return st;
}

/* ---- reductions -----------------------------------------------------------
 * One kernel per reduction, with its producers in its element loop (input
 * fusion: smelt_prod) and its epilogue on each stored result (smelt_epi),
 * in smelt's one reduction order (src/ir/ir.h): the C form (both CPU tiers: kernel_reduce.c.in) and
 * the device form (kernel_reduce.cu.in).  The C form's lanes, the loop
 * that accumulates a run of elements into the 32 lanes, are the functions
 * red_lanes writes: in the CC tier's source, and compiled into smelt as
 * block primitives that the TinyCC tier's kernels call (TinyCC's own code
 * is scalar and spills every value). */
/* Results the column form computes at once: each reads a row of RED_W
 * elements, and fetches the row RED_COL_AHEAD below into the cache.
 * Without that fetch, a 4096 x 4096 f32 column sum on one core ran at
 * 0.43 ns an element with 256 (1 KiB a row, 64 KiB of f64 accumulators:
 * L2), and slower with 64; with it, 0.30 ns with 256, 0.23 with 64 and
 * 0.18 with 128 (32 KiB of f64 accumulators: L1), as fast as a row sum
 * (AMD EPYC Zen 5, CC tier). */
#define RED_W 128
#define RED_COL_AHEAD 8

typedef struct red_kind {
    smelt_op op;
    smelt_dtype in, acc, out; /* the operand's, the accumulator's, the result's dtype */
    bool arg;                 /* argmax, argmin: (value, index) pairs */
} red_kind;

static red_kind red_kind_of(smelt_op op, smelt_dtype in)
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
static void red_prim_name(char *name, size_t n, const red_kind *k)
{
    smelt_op op = k->op == SMELT_OP_MEAN ? SMELT_OP_SUM : k->op;
    snprintf(name, n, "smelt_blk_red_%s_%s_%s", smelt__ops[op].name, smelt__dtypes[k->in].name,
             smelt__dtypes[k->acc].name);
}

#define RED_LANES_ARGS "int64_t n, void *accp, const void *xp, const int64_t *args"

/* The lanes of k, fn_row and fn_col (qual: their qualifiers).
 *   row: n elements x[i * args[0]] into the lanes acc[0..32), element i in
 *        lane (args[1] + i) % 32 (argmax, argmin: its index args[2] + i);
 *   col: n rows of args[2] results, element w of row i x[i * args[0] + w *
 *        args[1]], into acc[l * RED_W + w], row i in lane (args[3] + i) % 32
 *        (its index args[4] + i).
 * The indices of argmax and argmin sit 32 * RED_W slots after the values. */
static void red_lanes(smelt__sb *b, const smelt__dialect *dl, const red_kind *k, const char *fn, const char *qual)
{
    const char *A = dl->type[k->acc], *X = dl->stype[k->in];
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
    const char *loops[2][2] = {{"s == 1", "x[i + q]"}, {"s != 1", "x[(i + q) * s]"}};
    for (int t = 0; t < 2; t++) {
        if (t)
            smelt__sb_puts(b, "    else\n");
        else
            smelt__sb_printf(b, "    if (%s)\n", loops[t][0]);
        smelt__sb_puts(b, "        for (; i + 32 <= n; i += 32)\n            for (int q = 0; q < 32; q++) {\n");
        red_step(b, dl, k, "                ", "v[q]", "vi[q]", loops[t][1], "r0 + i + q");
        smelt__sb_puts(b, "            }\n");
    }
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
    const char *cols[2][2] = {{"sw == 1", "row[w]"}, {"sw != 1", "row[w * sw]"}};
    for (int t = 0; t < 2; t++) {
        if (t)
            smelt__sb_puts(b, "        else\n");
        else
            smelt__sb_printf(b, "        if (%s)\n", cols[t][0]);
        smelt__sb_puts(b, "            for (int64_t w = 0; w < nw; w++) {\n");
        red_step(b, dl, k, "                ", "a[w]", "ai[w]", cols[t][1], "r0 + i");
        smelt__sb_puts(b, "            }\n");
    }
    smelt__sb_puts(b, "    }\n}\n");
}

/* A literal of the accumulator's identity (or, idx, of the largest index). */
static void red_identity(smelt__sb *b, const smelt__dialect *dl, const red_kind *k)
{
    smelt__kop c = {.op = SMELT_OP_CONST, .dtype = k->acc, .fval = smelt__red_identity(k->op, k->acc)};
    int id = smelt__ops[k->op].ident;
    c.ival = k->acc == SMELT_I64 && id == SMELT_IDENT_LOWEST    ? INT64_MIN
             : k->acc == SMELT_I64 && id == SMELT_IDENT_HIGHEST ? INT64_MAX
             : smelt__is_float(k->acc)                         ? 0 /* +-inf: fval says it */
                                                                : (int64_t)c.fval;
    literal(b, dl, &c);
}

/* The types and helpers both reduction templates use: smelt_fold (a
 * value, or argmax's pair, takes another), smelt_result (what a result
 * stores), and for the device smelt_conv (an element as an accumulator
 * value).  Functions rather than macros: TinyCC's preprocessor is the part
 * of it that fails (crashes) when an allocation fails (tests/test-faults.c),
 * and TinyCC's kernels (blocks) include no prelude: the library converts
 * their f16/bf16 results (its cast primitive, the prelude's rounding). */
static void red_defs(smelt__sb *b, const smelt__dialect *dl, const red_kind *k, bool blocks)
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
        declare_once(b, cast, BLK_ARGS);
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
static const char red_blocks_prelude[] =
    "/* smelt reduction kernel for TinyCC: no prelude needed, the library's lanes do the arithmetic */\n"
    "typedef unsigned char uint8_t;\ntypedef unsigned short uint16_t;\ntypedef int int32_t;\n"
    "typedef unsigned int uint32_t;\ntypedef long long int64_t;\ntypedef unsigned long long uint64_t;\n"
    "static float smelt_f32_bits(uint32_t u) { union { uint32_t u; float f; } x; x.u = u; return x.f; }\n"
    "static double smelt_f64_bits(uint64_t u) { union { uint64_t u; double f; } x; x.u = u; return x.f; }\n";

/* The dimension lists and a description shared by both forms. */
static void red_dims(const smelt__kdesc *d, smelt__sb *kd, smelt__sb *rd, int *nk, int *nr, int *klast, int *rlast)
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
 * results at once): the piece of d after its reduction (rows_piece). */
static int rows_piece(const smelt__kdesc *d, const bool *mine, const int *outs, int nout, int rank,
                      smelt__kdesc *pc, int *src, smelt__sb *err, int first);
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
    int st = rows_piece(d, mine, outs, n, 1, e, ein, &err, rv); /* (the reduced value: input 0) */
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

/* Elements of the operand the C forms compute at once (a row form's run;
 * the column form computes RED_W, one row of its results). */
#define RED_PROD_BLOCK 1024

/* A row program (C, gcc or clang) fetches the next row of an input into the
 * cache while it computes this one, when that row is contiguous and at most
 * this many bytes (a fraction of a core's L2). */
#define SMELT_ROWS_PREFETCH 65536

/* A row program whose rows are at most this many elements defers each
 * row's last pass (the full-size outputs) into a pass of the next row, a
 * run at a time (shape_c_rows): the output stores spread over that pass's
 * arithmetic instead of coming in one burst at the end of the row. */
#define SMELT_ROWS_DEFER 32768
#define SMELT_ROWS_DEFER_RUN 512 /* elements a call (each call finds its place in the shape anew) */

/* A C row program's reductions compute and fold their operand this many
 * elements at a time (at most RED_PROD_BLOCK, the run buffer), each run
 * after the next row's fetch and the deferred stores that go with it.
 * Runs of 512 with deferred calls of 512, against 1024 and 2048: rmsnorm
 * 4096 x 4096 0.83x the time, layernorm 0.87x, softmax and log_softmax
 * the same (2026-11-27, fd498d4): the loads, the
 * fetches and the streaming stores interleave more finely.  Runs of 128
 * cost layernorm more in calls than they saved.  TinyCC's block form keeps
 * RED_PROD_BLOCK (its calls cost more). */
#define SMELT_ROWS_RUN 512

/* The producers' elementwise kernel (the loop form, or for TinyCC the
 * block form) as a static function smelt_prod. */
static int red_fn(const smelt__dialect *dl, const smelt__kdesc *pd, const char *fname, bool blocks, smelt__sb *out,
                  smelt__sb *err)
{
    smelt__kdesc p = *pd;
    smelt__sb text;
    smelt__sb_init(&text);
    int st = blocks ? emit_blocks(dl, &p, &text, NULL, true, err) : shape_c_loop(dl, &p, "", &text, err);
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
static int red_nops(const smelt__kdesc *d)
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
static int shape_c_reduce(const smelt__dialect *dl, const smelt__kdesc *d, bool blocks, const char *prelude,
                          smelt__sb *text, smelt__sb *err)
{
    int st = red_check(d, err);
    if (st)
        return st;
    bool fused = red_fused(d);
    red_kind k = red_kind_of(d->ops[d->red].op, value_dtype(d, d->ops[d->red].in[0]));
    int nk, nr, klast, rlast, R = d->rank, nin = d->n_in, nx = nin + d->n_out - 1, np = nx + 1;
    bool col = d->rmask >> (d->rank - 1) & 1u ? false : true; /* the innermost dimension is kept */
    smelt__sb kd, rd, defs, lanes, what, call, group, ident, pre, sx;
    smelt__sb_init(&kd), smelt__sb_init(&rd), smelt__sb_init(&defs), smelt__sb_init(&lanes);
    smelt__sb_init(&what), smelt__sb_init(&call), smelt__sb_init(&group), smelt__sb_init(&ident);
    smelt__sb_init(&pre), smelt__sb_init(&sx);
    if (fused) { /* the producers' function after the prelude (TinyCC: instead of it) */
        if (!blocks)
            smelt__sb_puts(&pre, prelude);
        smelt__kdesc p = red_producers(d);
        st = red_fn(dl, &p, "smelt_prod", blocks, &pre, err);
        prelude = smelt__sb_str(&pre);
    }
    if (!st && red_epi(d)) { /* the epilogue's function (after the producers') */
        if (!blocks && !fused)
            smelt__sb_puts(&pre, prelude);
        smelt__kdesc e;
        int ein[SMELT_MAX_KERNEL_OPERANDS + 1];
        st = red_epilogue(d, &e, ein);
        if (!st)
            st = red_fn(dl, &e, "smelt_epi", blocks, &pre, err);
        free(e.ops);
        prelude = smelt__sb_str(&pre);
    }
    red_dims(d, &kd, &rd, &nk, &nr, &klast, &rlast);
    red_defs(&defs, dl, &k, blocks);
    red_what(&what, &k, d);
    red_identity(&ident, dl, &k);
    char fn[SMELT_BLK_NAME_MAX];
    red_prim_name(fn, sizeof fn, &k);
    if (blocks)
        smelt__sb_printf(&lanes, "void %s_row(" RED_LANES_ARGS ");\nvoid %s_col(" RED_LANES_ARGS ");\n", fn, fn);
    else
        red_lanes(&lanes, dl, &k, "smelt_red", "static");
    const char *lf = blocks ? fn : "smelt_red";
    if (col)
        smelt__sb_printf(&group, "{\n            const int64_t ii = o %% inner;\n"
                                 "            m = inner - ii < %d ? inner - ii : %d;\n"
                                 "            if (m > end - i)\n                m = end - i;\n        }", RED_W, RED_W);
    if (!fused) {
        smelt__sb_puts(&sx, "    const int64_t *sx = strides;");
        if (col)
            smelt__sb_printf(&call, "{\n                    const int64_t a[5] = {rs, xw, m, r & 31, r};\n"
                                    "                    %s_col(seg, buf, x + xo + off, a);\n                }", lf);
        else
            smelt__sb_printf(&call, "{\n                    const int64_t a[3] = {rs, r & 31, r};\n"
                                    "                    %s_row(seg, buf, x + xo + off, a);\n                }", lf);
    } else {
        /* sx: the iteration space's own (contiguous) strides, so that xo + off
         * is an element's linear index, the producers' iteration index; the
         * producers read the inputs with the kernel's strides (pst) and write
         * tmp (strides 0 but along the innermost dimension) */
        smelt__sb_printf(&sx, "    int64_t sx[%d], pst[%d], psh[%d];\n    char *pp[%d];\n    smelt_in tmp[%d];\n"
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
            smelt__sb_printf(&call, "for (int64_t u = 0; u < seg; u++) {\n"
                                    "                    const int64_t L = xo + off + u * rs, a[5] = {0, 1, m, (r + u) & 31, r + u};\n"
                                    "                    pp[%d] = (char *)tmp - (L %% shape[%d]) * (int64_t)sizeof(smelt_in);\n"
                                    "                    smelt_prod(L, L + m, pp, psh, pst);\n"
                                    "                    %s_col(1, buf, tmp, a);\n                }", nin, R - 1, lf);
        else
            smelt__sb_printf(&call, "for (int64_t u = 0; u < seg; u += %d) {\n"
                                    "                    const int64_t nb = seg - u < %d ? seg - u : %d, L = xo + off + u;\n"
                                    "                    const int64_t a[3] = {1, (r + u) & 31, r + u};\n"
                                    "                    pp[%d] = (char *)tmp - (L %% shape[%d]) * (int64_t)sizeof(smelt_in);\n"
                                    "                    smelt_prod(L, L + nb, pp, psh, pst);\n"
                                    "                    %s_row(nb, buf, tmp, a);\n                }", RED_PROD_BLOCK,
                             RED_PROD_BLOCK, RED_PROD_BLOCK, nin, R - 1, lf);
    }
    int ny = red_y(d);
    smelt__sb store;
    smelt__sb_init(&store);
    if (!red_epi(d)) {
        smelt__sb_puts(&store, "\n            for (int64_t w = 0; w < m; w++)\n"
                               "                y[yo + w * yw] = smelt_result(tot[w], toti[w], nred);");
    } else { /* the results, then smelt_epi on them: a row of m results at once */
        int ein[SMELT_MAX_KERNEL_OPERANDS + 1], eq[2 * SMELT_MAX_KERNEL_OPERANDS + 1], ne = 0;
        smelt__kdesc ed;
        if (!st && !(st = red_epilogue(d, &ed, ein))) { /* its operands: inputs, then outputs */
            for (int j = 1; j < ed.n_in; j++)
                eq[ne++] = ein[j];
            for (int o = 0; o < d->n_out; o++)
                if (d->out_val[o] > d->n_in + d->red)
                    eq[ne++] = d->n_in + o;
            free(ed.ops);
        }
        smelt__sb_printf(&store, "{\n            smelt_out rv[%d];\n            for (int64_t w = 0; w < m; w++) {\n"
                                 "                rv[w] = smelt_result(tot[w], toti[w], nred);\n%s            }\n"
                                 "            char *ep[%d];\n            int64_t es[%d], esh[2] = {m, 0};\n"
                                 "            ep[0] = (char *)rv;\n            es[0] = 1;\n",
                         col ? RED_W : 1, ny >= 0 ? "                y[yo + w * yw] = rv[w];\n" : "",
                         ne + 1, ne + 1);
        for (int e = 1; e <= ne; e++) {
            int q = eq[e - 1];
            smelt__sb_printf(&store, "            {\n                int64_t eo = 0, et = o;\n"
                                     "                for (int k = nk - 1; k >= 0; k--) {\n"
                                     "                    const int64_t sz = shape[kd[k]], qq = et / sz;\n"
                                     "                    eo += (et - qq * sz) * strides[%d + kd[k]];\n"
                                     "                    et = qq;\n                }\n"
                                     "                ep[%d] = ptrs[%d] + eo * %zu;\n"
                                     "                es[%d] = 0;\n            }\n",
                             q * R, e, q, smelt__dtypes[operand_dtype(d, q)].size, e);
            if (col)
                smelt__sb_printf(&store, "            es[%d] = strides[%d];\n", e, q * R + klast);
        }
        smelt__sb_puts(&store, "            smelt_epi(0, m, ep, esh, es);\n        }");
    }
    char inner[32], xw[32], yw[32];
    snprintf(inner, sizeof inner, col ? "shape[%d]" : "1", klast);
    snprintf(xw, sizeof xw, col ? "sx[%d]" : "0", klast);
    snprintf(yw, sizeof yw, col ? "sy[%d]" : "0", klast);
    const slot sl[] = {
        {"PRELUDE", prelude}, {"NAME", NAME_TOKEN}, {"NOPS", SLOT_NUM(red_nops(d))}, {"WHAT", smelt__sb_str(&what)},
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
        st = load_render(text, dl, "kernel_reduce", sl, NSLOTS(sl), err);
    smelt__sb_free(&store);
    smelt__sb_free(&kd), smelt__sb_free(&rd), smelt__sb_free(&defs), smelt__sb_free(&lanes);
    smelt__sb_free(&what), smelt__sb_free(&call), smelt__sb_free(&group), smelt__sb_free(&ident);
    smelt__sb_free(&pre), smelt__sb_free(&sx);
    return st;
}

/* A device (CUDA): a warp per result. */
/* A spread reduction's lane loop (kernel_reduce_spread.cu.in,
 * kernel_reduce_cols.cu.in), at indentation ind: the lane's elements r =
 * r0, r0 + 32, ... below c1 folded into v, vi in that order, 8 at a time
 * computed (OFF, the offsets, and ELEM, the element e) before they are
 * folded, so that their loads go out together: one at a time, each
 * behind its test of the chunk's end, the few warps of a spread form
 * (4096 for 16384 x 4096 columns) kept too few loads in flight (the
 * columns at 37 % of an H100's copy, a hand-written kernel of the same
 * order 87 %). */
enum { RED_LANE_BATCH = 8 };
static void red_dev_lane_loop(smelt__sb *b, int ind, const char *r0, const char *off, const char *elem)
{
    smelt__sb_printf(b, "%*ssmelt_idx r0 = %s;\n", ind, "", r0);
    smelt__sb_printf(b, "%*sfor (; r0 + 32 * %d < c1; r0 += 32 * %d) { /* (smelt_idx may be unsigned) */\n", ind, "",
                     RED_LANE_BATCH - 1, RED_LANE_BATCH);
    smelt__sb_printf(b, "%*s    smelt_acc ev[%d];\n#pragma unroll\n", ind, "", RED_LANE_BATCH);
    smelt__sb_printf(b, "%*s    for (int u = 0; u < %d; u++) {\n", ind, "", RED_LANE_BATCH);
    smelt__sb_printf(b, "%*s        const smelt_idx r = r0 + 32 * u;\n%s%s\n", ind, "", off, elem);
    smelt__sb_printf(b, "%*s        ev[u] = e;\n%*s    }\n#pragma unroll\n", ind, "", ind, "");
    smelt__sb_printf(b, "%*s    for (int u = 0; u < %d; u++)\n", ind, "", RED_LANE_BATCH);
    smelt__sb_printf(b, "%*s        smelt_fold(&v, &vi, ev[u], (long long)(r0 + 32 * u));\n%*s}\n", ind, "", ind, "");
    smelt__sb_printf(b, "%*sfor (smelt_idx r = r0; r < c1; r += 32) {\n%s%s\n", ind, "", off, elem);
    smelt__sb_printf(b, "%*s    smelt_fold(&v, &vi, e, (long long)r);\n%*s}\n", ind, "", ind, "");
}

/* A device reduction's offsets, for every form of its kernel
 * (kernel_reduce*.cu.in, kernel_rows.cu.in) over its nx + 1 operands, at
 * indentation ind: XO, every operand's offset at result t (xo[], which the
 * template declares); OFF, at element r of that result (off[], from xo[]):
 * with one reduced dimension (nr, after merging) its stride times r, else
 * through the reduced shape. */
static void red_dev_offsets(smelt__sb *b, bool xo, int ind, int nx, int R, int nr)
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

static int shape_device_reduce(const smelt__dialect *dl, const smelt__kdesc *d, const char *prelude,
                               smelt__sb *text, smelt__sb *err)
{
    int st = red_check(d, err);
    if (st)
        return st;
    bool fused = red_fused(d);
    red_kind k = red_kind_of(d->ops[d->red].op, value_dtype(d, d->ops[d->red].in[0]));
    int nk, nr, klast, rlast, R = d->rank, nin = d->n_in, nx = nin + d->n_out - 1, nops = nx + 1;
    smelt__sb kd, rd, defs, what, ident, setup, elem;
    smelt__sb_init(&kd), smelt__sb_init(&rd), smelt__sb_init(&defs), smelt__sb_init(&what), smelt__sb_init(&ident);
    smelt__sb_init(&setup), smelt__sb_init(&elem);
    red_dims(d, &kd, &rd, &nk, &nr, &klast, &rlast);
    red_defs(&defs, dl, &k, false);
    red_what(&what, &k, d);
    red_identity(&ident, dl, &k);
    if (!fused) {
        smelt__sb_puts(&elem, "                smelt_acc e = smelt_conv(x[off[0]]);");
    } else { /* the producers per element, their value stored as the unfused kernel stores it */
        smelt__kdesc p = red_producers(d);
        int nv = p.n_in + p.n_ops;
        int *uses = calloc((size_t)(3 * nv + 1), sizeof(int));
        bool *inl = calloc((size_t)(nv + 1), sizeof(bool));
        if (!uses || !inl) {
            st = SMELT_ERR_NOMEM;
        } else {
            plan_inlining(&p, uses, inl, uses + nv, uses + 2 * nv);
            for (int q = 0; q < nin; q++)
                smelt__sb_printf(&setup, "    const %s *__restrict__ q%d = (const %s *)a.ptrs[%d];\n",
                                 dl->stype[d->in_dt[q]], q, dl->stype[d->in_dt[q]], q);
            for (int q = nin + 1; q < nin + p.n_out; q++) /* the full-size outputs */
                smelt__sb_printf(&setup, "    %s *__restrict__ q%d = (%s *)a.ptrs[%d];\n",
                                 dl->stype[operand_dtype(&p, q)], q, dl->stype[operand_dtype(&p, q)], q - 1);
            for (int i = 0; i < p.n_ops; i++)
                if (p.ops[i].op == SMELT_OP_CONST) {
                    smelt__sb_printf(&setup, "    const %s v%d = ", dl->type[p.ops[i].dtype], nin + i);
                    literal(&setup, dl, &p.ops[i]);
                    smelt__sb_puts(&setup, ";\n");
                }
            smelt__sb_printf(&elem, "                smelt_in q%d[1];\n", nin);
            for (int q = 0; q < nin + p.n_out; q++)
                smelt__sb_printf(&elem, "                const smelt_idx o%d = %s%d%s;\n", q, q != nin ? "off[" : "",
                                 q < nin ? q : q == nin ? 0 : q - 1, q != nin ? "]" : "");
            ectx e = {dl, &p, uses, inl, -1, FORM_OFFSET, false, false, 0, NULL, 0, NULL, NULL};
            emit_lane(&elem, &e);
            smelt__sb_printf(&elem, "                smelt_acc e = smelt_conv(q%d[0]);", nin);
        }
        free(uses), free(inl);
    }
    int ny = red_y(d);
    smelt__sb store;
    smelt__sb_init(&store);
    if (!red_epi(d)) {
        smelt__sb_puts(&store, "\n            y[xo[" );
        smelt__sb_printf(&store, "%d]] = smelt_result(tot, toti, nred);", ny);
    } else if (!st) { /* lane 0: the result, then the epilogue on it */
        smelt__kdesc e;
        int ein[SMELT_MAX_KERNEL_OPERANDS + 1];
        st = red_epilogue(d, &e, ein);
        int nv = e.n_in + e.n_ops;
        int *uses = st ? NULL : calloc((size_t)(3 * nv + 1), sizeof(int));
        bool *inl = st ? NULL : calloc((size_t)(nv + 1), sizeof(bool));
        if (!st && (!uses || !inl))
            st = SMELT_ERR_NOMEM;
        if (!st) {
            plan_inlining(&e, uses, inl, uses + nv, uses + 2 * nv);
            smelt__sb_printf(&store, "{\n            smelt_out q0[1];\n            const smelt_idx o0 = 0;\n"
                                     "            q0[0] = smelt_result(tot, toti, nred);\n");
            if (ny >= 0)
                smelt__sb_printf(&store, "            y[xo[%d]] = q0[0];\n", ny);
            for (int q = 1; q < e.n_in; q++) {
                const char *T = dl->stype[e.in_dt[q]];
                smelt__sb_printf(&store, "            const %s *__restrict__ q%d = (const %s *)a.ptrs[%d];\n"
                                         "            const smelt_idx o%d = xo[%d];\n", T, q, T, ein[q], q, ein[q]);
            }
            for (int o = 0, q = e.n_in; o < d->n_out; o++)
                if (d->out_val[o] > d->n_in + d->red) {
                    const char *T = dl->stype[operand_dtype(&e, q)];
                    smelt__sb_printf(&store, "            %s *__restrict__ q%d = (%s *)a.ptrs[%d];\n"
                                             "            const smelt_idx o%d = xo[%d];\n", T, q, T, d->n_in + o, q,
                                     d->n_in + o);
                    q++;
                }
            for (int i = 0; i < e.n_ops; i++)
                if (e.ops[i].op == SMELT_OP_CONST) {
                    smelt__sb_printf(&store, "            const %s v%d = ", dl->type[e.ops[i].dtype], e.n_in + i);
                    literal(&store, dl, &e.ops[i]);
                    smelt__sb_puts(&store, ";\n");
                }
            ectx ec = {dl, &e, uses, inl, -1, FORM_OFFSET, false, false, 0, NULL, 0, NULL, NULL};
            emit_lane(&store, &ec);
            smelt__sb_puts(&store, "        }");
        }
        free(uses), free(inl);
        free(e.ops);
    }
    /* a spread variant: its loop first, then (never reached) the usual one;
     * the offsets at each form's indentation */
    smelt__sb spread, xo[2], off[2];
    smelt__sb_init(&spread);
    for (int f = 0; f < 2; f++) {
        smelt__sb_init(&xo[f]), smelt__sb_init(&off[f]);
        red_dev_offsets(&xo[f], true, f ? 12 : 8, nx, R, nr);
        red_dev_offsets(&off[f], false, f ? (d->spread == SMELT_SPREAD_COLS ? 20 : 16) : 16, nx, R, nr);
    }
    smelt__sb loop;
    smelt__sb_init(&loop);
    if (d->spread)
        red_dev_lane_loop(&loop, d->spread == SMELT_SPREAD_COLS ? 16 : 12,
                          d->spread == SMELT_SPREAD_COLS ? "c0 + l" : "c0 + lane", smelt__sb_str(&off[1]),
                          smelt__sb_str(&elem));
    const slot fsl[] = {{"NAME", NAME_TOKEN}, {"STORE", smelt__sb_str(&store)}, {"RANK", SLOT_NUM(R)},
                        {"NX", SLOT_NUM(nx)}, {"LOOP", smelt__sb_str(&loop)}, {"CHUNK", SLOT_NUM(SMELT_RED_CHUNK)},
                        {"ARG", SLOT_NUM(k.arg)}, {"XO", smelt__sb_str(&xo[1])}};
    if (!st && d->spread)
        st = load_render(&spread, dl, d->spread == SMELT_SPREAD_COLS ? "kernel_reduce_cols" : "kernel_reduce_spread",
                         fsl, NSLOTS(fsl), err);
    const slot sl[] = {
        {"PRELUDE", prelude}, {"NAME", NAME_TOKEN}, {"NOPS", SLOT_NUM(red_nops(d))}, {"WHAT", smelt__sb_str(&what)},
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
        {"SPREAD", smelt__sb_str(&spread)}, {"XO", smelt__sb_str(&xo[0])}, {"OFF", smelt__sb_str(&off[0])}};
    if (!st)
        st = load_render(text, dl, "kernel_reduce", sl, NSLOTS(sl), err);
    smelt__sb_free(&spread), smelt__sb_free(&loop);
    for (int f = 0; f < 2; f++)
        smelt__sb_free(&xo[f]), smelt__sb_free(&off[f]);
    smelt__sb_free(&store);
    smelt__sb_free(&kd), smelt__sb_free(&rd), smelt__sb_free(&defs), smelt__sb_free(&what), smelt__sb_free(&ident);
    smelt__sb_free(&setup), smelt__sb_free(&elem);
    return st;
}

/* ---- row programs (multi-reduction kernels, smelt__kdesc.multi) ---------
 * One row at a time (the reduced dimensions are innermost: row o is the
 * elements o * nred .. (o + 1) * nred - 1 of the iteration space).  Its
 * reductions in turn (stages), each operand computed by its producers (a
 * stage piece, smelt_p<s>) a run at a time into a block and combined in
 * smelt's one reduction order, as the single form combines it; the values
 * at the results' shape once what they read is known (a small piece,
 * smelt_s<t>, run on one element: the row's scalars sv[]); then the
 * full-size outputs (the final piece, smelt_f), one more pass over the row
 * while it is in cache.  A piece is an elementwise kernel of the loop (or
 * block) form reading the kernel's inputs with its strides and the row's
 * scalars with strides 0.  A full-size value that two passes read is
 * computed in each, the same way from the same inputs: the same bits. */
#define ROWS_KEPT (1 << 20) /* a piece's binding to a kept value (rows_call_setup) */
typedef struct rows_info {
    int nst;    /* stages: the reductions, in order */
    int *st;    /* op index of stage s's reduction */
    int *avail; /* per op: a reduction's stage + 1; a small op's small piece (computed before that stage) */
    int *slot;  /* per value: its scalar in sv[] (-1: none) */
    int nslot;
    /* the row cache (C forms): a full-size value one pass computes and a
     * later one reads is kept for the row (nred elements of it, at byte
     * cache_off[k] * nred of the row's slot, the widest values first, so
     * every one aligned) instead of computed again */
    bool cache;
    int *piece;     /* per op: the pass that computes a full-size op (stage s, or nst: the last), -1 none */
    int *cache_off; /* per op: bytes per element before it in the slot, -1 not kept */
    int cache_bytes; /* per element of a row */
} rows_info;

static void rows_free(rows_info *ri) { free(ri->st), free(ri->avail), free(ri->slot), free(ri->piece), free(ri->cache_off); }

/* The full-size operators value v needs in pass p (rows_info.piece):
 * those no earlier pass computed; one that did is kept (the row cache). */
static void rows_assign(const smelt__kdesc *d, rows_info *ri, int v, int p)
{
    if (v < d->n_in || is_const(d, v) || d->ops[v - d->n_in].small || ri->piece[v - d->n_in] == p)
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

static int rows_analyse(const smelt__kdesc *d, bool cache, rows_info *ri)
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
        rows_free(ri);
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
    if (!d->multi || rows_analyse(d, true, &ri))
        return 0;
    int n = ri.cache_bytes;
    rows_free(&ri);
    return n;
}

/* Mark the full-size operators value v needs (none past a scalar);
 * with the row cache, those of pass p. */
static void rows_closure(const smelt__kdesc *d, const rows_info *ri, int p, int v, bool *mine)
{
    if (v < d->n_in || is_const(d, v) || d->ops[v - d->n_in].small || mine[v - d->n_in] ||
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
static int rows_piece(const smelt__kdesc *d, const bool *mine, const int *outs, int nout, int rank,
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
        pc->in_dt[pc->n_in++] = value_dtype(d, first);
    }
    for (int k = 0; k < d->n_ops; k++) /* its inputs, by first use */
        for (int j = 0; mine[k] && j < d->ops[k].nin; j++) {
            int v = d->ops[k].in[j];
            if (map[v] >= 0 || is_const(d, v) || (v >= d->n_in && mine[v - d->n_in]))
                continue;
            if (pc->n_in == SMELT_MAX_KERNEL_OPERANDS) {
                st = SMELT_ERR_INVALID_ARG;
                break;
            }
            map[v] = pc->n_in;
            src[pc->n_in] = v;
            pc->in_dt[pc->n_in++] = value_dtype(d, v);
            int q = v < d->n_in ? d->gidx[v] - 1 : -1; /* an indexed read's index: an input too */
            if (q >= 0 && map[q] < 0 && pc->n_in < SMELT_MAX_KERNEL_OPERANDS) {
                map[q] = pc->n_in;
                src[pc->n_in] = q;
                pc->in_dt[pc->n_in++] = value_dtype(d, q);
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
static void rename_words(smelt__sb *out, const char *text, const char *const *names, int n, const char *suffix)
{
    for (const char *p = text; *p;) {
        int hit = -1;
        if (!ident_char(p > text ? p[-1] : ' '))
            for (int i = 0; i < n && hit < 0; i++) {
                size_t l = strlen(names[i]);
                if (!strncmp(p, names[i], l) && !ident_char(p[l]))
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

static const char *const red_def_names[] = {"smelt_acc", "smelt_in", "smelt_out", "smelt_fold", "smelt_result",
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
                             smelt__dtypes[operand_dtype(pc, q)].size);
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

/* Piece kind of row program d, with its operands' bindings
 * (rows_call_setup) in bind: ROWS_SMALL, small piece t (the values at the
 * results' shape known before stage t; outputs: those read after it);
 * ROWS_STAGE, stage t's producers (outputs: the reduction's operand into
 * tmp, then with the row cache the values later passes read and the
 * kernel's outputs it computes); ROWS_FINAL, the last pass (the full-size
 * outputs).  *nout 0: no such piece; else pc->ops is allocated (SMELT_OK)
 * and outs[] holds the values it outputs. */
enum { ROWS_SMALL, ROWS_STAGE, ROWS_FINAL };
static int rows_piece_of(const smelt__kdesc *d, const rows_info *ri, int kind, int t, bool *mine, int *outs,
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
    int st = rows_piece(d, mine, outs, n, kind == ROWS_SMALL ? 1 : d->rank, pc, src, err, -1);
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
static int rows_held_spans(const smelt__kdesc *d, const rows_info *ri, int *first, int *last, smelt__sb *err)
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
        } else if (!(st = rows_piece_of(d, ri, p < ri->nst ? ROWS_STAGE : ROWS_FINAL, p, mine, outs, &nout, &pc, bind,
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

/* Whether value v (first[v] .. last[v], rows_held_spans) is held: a kept
 * value, or an input two passes read. */
static bool rows_is_held(const smelt__kdesc *d, const rows_info *ri, const int *first, const int *last, int v)
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
static int rows_held_slots(const smelt__kdesc *d, const rows_info *ri, const int *first, const int *last, int *slot,
                           int *off)
{
    int nv = d->n_in + d->n_ops, ns = 0, size[SMELT_MAX_KERNEL_OPERANDS + 256], occ[SMELT_MAX_KERNEL_OPERANDS + 256];
    int bytes = 0;
    for (int v = 0; v < nv; v++)
        slot[v] = -1;
    for (int p = 0; p <= ri->nst; p++)
        for (int v = 0; v < nv; v++) {
            if (!rows_is_held(d, ri, first, last, v) || first[v] != p)
                continue;
            int sz = (int)smelt__dtypes[value_dtype(d, v)].size, x = p < ri->nst ? d->ops[ri->st[p]].in[0] : -1, s;
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
        *math = *math || (!d->ops[k].small && op_is_math(&smelt__ops[d->ops[k].op]));
    if (!d->multi || rows_analyse(d, true, &ri))
        return -1;
    int nv = d->n_in + d->n_ops, peak = 0;
    int *first = malloc(sizeof(int) * (size_t)(4 * nv + 1));
    smelt__sb err;
    smelt__sb_init(&err);
    if (!first || rows_held_spans(d, &ri, first, first + nv, &err))
        peak = -1;
    for (int b = 0; b < ri.nst && peak >= 0; b++) { /* between pass b and pass b + 1 */
        int bytes = 0;
        for (int v = 0; v < nv; v++)
            if (rows_is_held(d, &ri, first, first + nv, v) && first[v] <= b && first[nv + v] > b)
                bytes += (int)smelt__dtypes[value_dtype(d, v)].size;
        peak = SMELT_MAX(peak, bytes);
    }
    if (peak >= 0)
        *shared = rows_held_slots(d, &ri, first, first + nv, first + 2 * nv, first + 3 * nv);
    smelt__sb_free(&err);
    free(first);
    rows_free(&ri);
    return peak;
}

/* Copies of the row's scalars that are kernel outputs (at the row's offset). */
static void rows_out_copies(smelt__sb *b, const smelt__dialect *dl, const smelt__kdesc *d, const rows_info *ri,
                            int v, const char *ind)
{
    for (int o = 0; o < d->n_out; o++)
        if (d->out_val[o] == v) {
            const char *T = dl->stype[value_dtype(d, v)];
            smelt__sb_printf(b, "%s*(%s *)(void *)(ptrs[%d] + yo[%d] * (int64_t)sizeof(%s)) = *(const %s *)(const void *)&sv[%d];\n",
                             ind, T, d->n_in + o, d->n_in + o, T, T, ri->slot[v]);
        }
}

/* A piece's modes: inputs from kernel operands as the kernel reads them,
 * scalars broadcast, tmp contiguous, the final pass's outputs as the
 * kernel's (small pieces: every operand strided, rank 1). */
static void rows_modes(const smelt__kdesc *d, smelt__kdesc *pc, const int *bind, bool small)
{
    for (int q = 0; q < pc->n_in + pc->n_out; q++)
        pc->mode[q] = small ? SMELT_MODE_STRIDED
                      : bind[q] >= ROWS_KEPT ? SMELT_MODE_CONTIG
                      : bind[q] <= -2 ? SMELT_MODE_BCAST
                      : bind[q] == -1 ? SMELT_MODE_CONTIG
                                      : d->mode[bind[q]];
}

static int rows_check(const smelt__kdesc *d, smelt__sb *err)
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

/* C (both CPU tiers; TinyCC's pieces are of the block form and its lanes
 * the library's). */
static int shape_c_rows(const smelt__dialect *dl, const smelt__kdesc *d, bool blocks, const char *prelude,
                        smelt__sb *text, smelt__sb *err)
{
    int st = rows_check(d, err), R = d->rank, nin = d->n_in, noper = nin + d->n_out, nk, nr, klast, rlast;
    rows_info ri = {0};
    if (st || (st = rows_analyse(d, true, &ri)))
        return st;
    bool *mine = malloc(sizeof(bool) * (size_t)(d->n_ops + 1));
    int bind[SMELT_MAX_KERNEL_OPERANDS], outs[SMELT_MAX_KERNEL_OPERANDS];
    smelt__sb pre, defs, setup, body, kd, rd, what, insz;
    smelt__sb_init(&pre), smelt__sb_init(&defs), smelt__sb_init(&setup), smelt__sb_init(&body);
    smelt__sb_init(&kd), smelt__sb_init(&rd), smelt__sb_init(&what), smelt__sb_init(&insz);
    if (!mine)
        st = SMELT_ERR_NOMEM;
    if (!blocks)
        smelt__sb_puts(&pre, prelude);
    red_dims(d, &kd, &rd, &nk, &nr, &klast, &rlast);
    /* the final pass (the full-size outputs), smelt_f, reading the row's
     * scalars from svf, a copy: with rows of at most SMELT_ROWS_DEFER
     * elements (defer) it runs for row o during pass `later` of row o + 1,
     * a run at a time (Lf: that row's first element, -1 none), the first
     * pass that writes the row cache (before each run writes it, after the
     * final pass read it) or else the last; then on its own after the last
     * row.  The same values in a different order of stores. */
    int nfin = 0, later = ri.nst - 1;
    const int rrun = blocks ? RED_PROD_BLOCK : SMELT_ROWS_RUN; /* a reduction's runs */
    if (!st) {
        smelt__kdesc pc;
        if (!(st = rows_piece_of(d, &ri, ROWS_FINAL, 0, mine, outs, &nfin, &pc, bind, err)) && nfin) {
            rows_modes(d, &pc, bind, false);
            st = red_fn(dl, &pc, "smelt_f", blocks, &pre, err);
            rows_call_setup(&setup, &body, d, &ri, &pc, bind, "smelt_f", R, false, "svf");
            free(pc.ops);
        }
    }
    for (int t = ri.nst - 1; t >= 0; t--)
        for (int k = 0; k < d->n_ops; k++)
            if (ri.piece[k] == t && ri.cache_off[k] >= 0)
                later = t;
    /* into a pass that computes a transcendental function too: with exp's
     * arithmetic as it was, that gained nothing (softmax 4096 x 4096 1.05x
     * and 0.99x the time); since smelt_exp_f32_w and the input pass in one
     * call, softmax 0.90x (0.895-0.922 in 7 rounds of 8, 1.008 in one),
     * log_softmax 0.97x and xent 1.00x (medians of 6; 2026-11-27,
     * 5232b27).  rmsnorm and layernorm, whose passes only
     * load and add: 19 % and 9 % faster. */
    if (blocks || !nfin) /* TinyCC's block form: the calls cost more (rmsnorm 7 % slower) */
        later = -1;
    for (int t = 0; t <= ri.nst && !st; t++) {
        /* small piece t: the values at the results' shape known before stage t */
        int nout = 0;
        char name[32];
        smelt__kdesc pc;
        snprintf(name, sizeof name, "smelt_s%d", t);
        if (!(st = rows_piece_of(d, &ri, ROWS_SMALL, t, mine, outs, &nout, &pc, bind, err)) && nout) {
            rows_modes(d, &pc, bind, true);
            st = red_fn(dl, &pc, name, blocks, &pre, err);
            rows_call_setup(&setup, &body, d, &ri, &pc, bind, name, 1, true, "sv");
            smelt__sb_printf(&body, "        %s(0, 1, %s_p, one, %s_s);\n", name, name, name);
            for (int o = 0; o < nout; o++)
                rows_out_copies(&body, dl, d, &ri, outs[o], "        ");
            free(pc.ops);
        }
        if (t == ri.nst || st)
            break;
        /* stage t: its reduction */
        int k = ri.st[t], x = d->ops[k].in[0];
        red_kind rk = red_kind_of(d->ops[k].op, value_dtype(d, x));
        char sfx[16], lf[SMELT_BLK_NAME_MAX + 16];
        snprintf(sfx, sizeof sfx, "_%d", t);
        smelt__sb one, ident;
        smelt__sb_init(&one), smelt__sb_init(&ident);
        red_defs(&one, dl, &rk, blocks);
        rename_words(&defs, smelt__sb_str(&one), red_def_names, NSLOTS(red_def_names), sfx);
        red_identity(&ident, dl, &rk);
        if (blocks) {
            red_prim_name(lf, sizeof lf, &rk);
            smelt__sb_printf(&defs, "void %s_row(" RED_LANES_ARGS ");\n", lf);
        } else {
            snprintf(lf, sizeof lf, "smelt_red%d", t);
            red_lanes(&defs, dl, &rk, lf, "static");
        }
        smelt__sb_printf(&what, "%s%s of %s", t ? ", " : "", smelt__ops[rk.op].name, smelt__dtypes[rk.in].name);
        const char *I = smelt__sb_str(&ident);
        smelt__sb_printf(&body, "        { /* reduction %d: %s of %s into %s (%s accumulators) */\n"
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
        /* the operand a run of rrun elements at a time (the lanes
         * go on where they stopped: the same order as one call); the second
         * pass fetches the next row meanwhile (smelt_pf) */
        bool kept = ri.cache && x >= nin && ri.piece[x - nin] != t, input = !kept && x < nin;
        char step[32] = "1";
        if (input) { /* an input: read where it is */
            snprintf(step, sizeof step, "strides[%d]", x * R + R - 1);
            smelt__sb_printf(&body, "                    int64_t off = yo[%d] + j * strides[%d];\n"
                                    "                    for (int k = nr - 2; k >= 0; k--) {\n"
                                    "                        const int64_t sz = shape[rd[k]], qq = q / sz;\n"
                                    "                        off += (q - qq * sz) * strides[%d + rd[k]];\n"
                                    "                        q = qq;\n                    }\n",
                             x, x * R + R - 1, x * R);
        } else {
            smelt__sb_puts(&body, "                    (void)q;\n");
        }
        /* an input's pass that neither fetches nor stores in between: one
         * call a segment (the calls' set-up, 32 lanes in and out, cost the
         * softmax's max pass as much as its loads) */
        const char *pf = t == 1 ? "                        smelt_pf(pfp, pfs, npf, r + u, nb);\n"
                         : t == 0 && ri.nst == 1 && later == 0 ? "                        if (defer)\n"
                                                           "                            smelt_pf(pfp, pfs, npf, r + u, nb);\n"
                                                           : "";
        const int run = input && !*pf && t != later ? SMELT_RED_CHUNK : rrun;
        smelt__sb_printf(&body, "                    for (int64_t u = 0; u < seg; u += %d) {\n"
                                "                        const int64_t nb = seg - u < %d ? seg - u : %d;\n"
                                "                        const int64_t a[3] = {%s, (r + u) & 31, r + u};\n%s",
                         run, run, run, step, pf);
        if (t == later) /* up to the end of this run at least, before it overwrites the row cache */
            smelt__sb_printf(&body, "                        if (Lf >= 0 && fdone < r + u + nb) {\n"
                                    "                            const int64_t f0 = fdone;\n"
                                    "                            fdone = nred - f0 > %d ? f0 + %d : nred;\n"
                                    "                            fdone = fdone < r + u + nb ? r + u + nb : fdone;\n"
                                    "                            smelt_f(Lf + f0, Lf + fdone, smelt_f_p, fsh, smelt_f_s);\n"
                                    "                        }\n",
                             SMELT_ROWS_DEFER_RUN, SMELT_ROWS_DEFER_RUN);
        if (kept) { /* kept by an earlier pass */
            smelt__sb_printf(&body, "                        %s_row(nb, buf, (const smelt_in%s *)(const void *)(slot + (int64_t)%d * nred) + r + u, a);\n",
                             lf, sfx, ri.cache_off[x - nin]);
        } else if (input) {
            smelt__sb_printf(&body, "                        %s_row(nb, buf, (const smelt_in%s *)(const void *)ptrs[%d] + off + u * a[0], a);\n",
                             lf, sfx, x);
        } else { /* computed by its producers */
            smelt__kdesc pc;
            int nout;
            snprintf(name, sizeof name, "smelt_p%d", t);
            if (!(st = rows_piece_of(d, &ri, ROWS_STAGE, t, mine, outs, &nout, &pc, bind, err))) {
                rows_modes(d, &pc, bind, false);
                st = red_fn(dl, &pc, name, blocks, &pre, err);
                rows_call_setup(&setup, &body, d, &ri, &pc, bind, name, R, false, "sv");
                smelt__sb_puts(&body, "                        const int64_t L = L0 + r + u;\n");
                if (bind[pc.n_in] >= ROWS_KEPT) /* the operand into the row cache, read back from there */
                    smelt__sb_printf(&body, "                        %s(L, L + nb, %s_p, psh, %s_s);\n"
                                            "                        %s_row(nb, buf, (const smelt_in%s *)(const void *)(slot + (int64_t)%d * nred) + r + u, a);\n",
                                     name, name, name, lf, sfx, ri.cache_off[x - nin]);
                else
                    smelt__sb_printf(&body, "                        %s_p[%d] = (char *)tmp - (j + u) * (int64_t)sizeof(smelt_in%s);\n"
                                            "                        %s(L, L + nb, %s_p, psh, %s_s);\n"
                                            "                        %s_row(nb, buf, tmp, a);\n",
                                     name, pc.n_in, sfx, name, name, name, lf);
                free(pc.ops);
            }
        }
        smelt__sb_puts(&body, "                    }\n");
        smelt__sb_printf(&body, "                    r += seg;\n                }\n"
                                "                for (int d = 16; d >= 1; d >>= 1)\n"
                                "                    for (int l = 0; l < d; l++)\n"
                                "                        smelt_fold%s(&acc[l], &acci[l], acc[l + d], acci[l + d]);\n"
                                "                smelt_fold%s(&tot, &toti, acc[0], acci[0]);\n            }\n"
                                "            *(smelt_out%s *)(void *)&sv[%d] = smelt_result%s(tot, toti, nred);\n",
                         sfx, sfx, sfx, ri.slot[nin + k], sfx);
        rows_out_copies(&body, dl, d, &ri, nin + k, "            ");
        smelt__sb_puts(&body, "        }\n");
        if (t == later)
            smelt__sb_puts(&body, "        Lf = -1, fdone = 0;\n");
        smelt__sb_free(&one), smelt__sb_free(&ident);
    }
    smelt__sb tail;
    smelt__sb_init(&tail);
    if (!st && nfin) { /* the final pass of this row: deferred, or now */
        smelt__sb_printf(&body, "        for (int q = 0; q < %d; q++)\n"
                                "            svf[q] = sv[q];\n"
                                "        if (defer)\n"
                                "            Lf = L0;\n",
                         ri.nslot ? ri.nslot : 1);
        if (later >= 0)
            smelt__sb_puts(&tail, "    if (Lf >= 0)\n"
                                  "        smelt_f(Lf, Lf + nred, smelt_f_p, fsh, smelt_f_s);\n");
        if (ri.nst == 1) /* no second pass: this one fetches the next row */
            smelt__sb_printf(&body, "        else\n"
                                    "            for (int64_t u = 0; u < nred; u += %d) {\n"
                                    "                const int64_t nb = nred - u < %d ? nred - u : %d;\n"
                                    "                smelt_pf(pfp, pfs, npf, u, nb);\n"
                                    "                smelt_f(L0 + u, L0 + u + nb, smelt_f_p, fsh, smelt_f_s);\n"
                                    "            }\n",
                             RED_PROD_BLOCK, RED_PROD_BLOCK, RED_PROD_BLOCK);
        else
            smelt__sb_puts(&body, "        else\n"
                                  "            smelt_f(L0, L0 + nred, smelt_f_p, fsh, smelt_f_s);\n");
    }
    if (blocks && !pre.len)
        smelt__sb_puts(&pre, red_blocks_prelude);
    for (int q = 0; q < nin; q++)
        smelt__sb_printf(&insz, "%s%d", q ? ", " : "", (int)smelt__dtypes[d->in_dt[q]].size);
    const slot sl[] = {
        {"PRELUDE", smelt__sb_str(&pre)}, {"NAME", NAME_TOKEN}, {"NOPS", SLOT_NUM(red_nops(d))},
        {"NIN", SLOT_NUM(nin)}, {"INSZ", smelt__sb_str(&insz)}, {"PFMAX", SLOT_NUM(SMELT_ROWS_PREFETCH)},
        {"NST", SLOT_NUM(ri.nst)}, {"WHAT", smelt__sb_str(&what)}, {"RANK", SLOT_NUM(R)}, {"NK", SLOT_NUM(nk)},
        {"NR", SLOT_NUM(nr)}, {"KD", smelt__sb_str(&kd)}, {"RD", smelt__sb_str(&rd)}, {"RLAST", SLOT_NUM(rlast)},
        {"CHUNK", SLOT_NUM(SMELT_RED_CHUNK)}, {"W", SLOT_NUM(RED_W)}, {"PB", SLOT_NUM(RED_PROD_BLOCK)},
        {"NSLOT", SLOT_NUM(ri.nslot ? ri.nslot : 1)}, {"NOPER", SLOT_NUM(noper)}, {"DEFS", smelt__sb_str(&defs)},
        {"CACHE", SLOT_NUM(ri.cache_bytes)}, {"DEFER", SLOT_NUM(later >= 0 ? SMELT_ROWS_DEFER : -1)},
        {"SETUP", smelt__sb_str(&setup)}, {"BODY", smelt__sb_str(&body)}, {"TAIL", smelt__sb_str(&tail)}};
    if (!st)
        st = load_render(text, dl, "kernel_rows", sl, NSLOTS(sl), err);
    smelt__sb_free(&pre), smelt__sb_free(&defs), smelt__sb_free(&setup), smelt__sb_free(&body);
    smelt__sb_free(&kd), smelt__sb_free(&rd), smelt__sb_free(&what), smelt__sb_free(&insz), smelt__sb_free(&tail);
    free(mine);
    rows_free(&ri);
    return st;
}

/* The held form's index of the lane's element j of kernel operand q (mode
 * m) from its pointer bq<q> (rows_dev_bases). */
static void held_index(char *o, size_t n, int m, int q)
{
    if (m == SMELT_MODE_STRIDED)
        snprintf(o, n, "32 * j * sq%d", q);
    else
        snprintf(o, n, "%s", m == SMELT_MODE_BCAST ? "0" : "32 * j");
}

/* The held form's elements of a lane: j < kr in registers (kc<v>[j],
 * loops unrolled: indexed by constants), the rest in shared memory
 * (kcs<v>[32 (j - kr)], the warp's slice of its slot); part: which. */
typedef struct rows_held {
    int K, kr; /* elements a lane holds, of them in registers */
    bool *in;  /* per kernel input: held */
    int part;  /* 0: registers, 1: shared memory (the loop being emitted) */
    int W;     /* warps a row spans (the block form: > 1; its elements from wb on, rows_dev_bases) */
    bool exact; /* the block form: the row fills the block (no element tested against its end) */
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
        snprintf(o, n, "kcs%d[32 * (j - %d)]", v, h->kr);
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

/* Whether piece pc has a division fast_div takes; if so, the flag
 * smelt_dok declared, true where each such division's divisor lies in the
 * range smelt_divr_f32 needs (once a row). */
static bool rows_fast_divs(smelt__sb *b, const smelt__dialect *dl, const smelt__kdesc *pc, const int *bind)
{
    ectx e = {.d = pc, .divq = "", .uni = rows_uniform(pc, bind)};
    bool any = false;
    for (int k = 0; k < pc->n_ops; k++) {
        if (!fast_div(&e, k))
            continue;
        int v = pc->ops[k].in[1];
        smelt__sb_puts(b, any ? " &&\n            smelt_divr_ok(" : "        int smelt_dok = smelt_divr_ok(");
        if (v < pc->n_in)
            smelt__sb_printf(b, "sv%d", -2 - bind[v]);
        else
            literal(b, dl, &pc->ops[v - pc->n_in]);
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
    plan_inlining(pc, uses, inl, uses + nv, uses + 2 * nv);
    smelt__sb_printf(b, "%s{\n", ind);
    uint64_t ldg = 0; /* the kernel's inputs read from memory here */
    for (int q = 0; q < n; q++) {
        const char *T = dl->stype[operand_dtype(pc, q)], *c = q < pc->n_in ? "const " : "";
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
            held_index(o, sizeof o, pc->mode[q], bind[q]);
            smelt__sb_printf(b, "%s    %s%s *__restrict__ q%d = (%s%s *)bq%d;\n%s    const smelt_idx o%d = %s;\n", ind,
                             c, T, q, c, T, bind[q], ind, q, o);
        } else
            smelt__sb_printf(b, "%s    %s%s *__restrict__ q%d = (%s%s *)a.ptrs[%d];\n%s    const smelt_idx o%d = %s[%d];\n",
                             ind, c, T, q, c, T, bind[q], ind, q, small ? "xo" : "off", bind[q]);
    }
    for (int i = 0; i < pc->n_ops; i++)
        if (pc->ops[i].op == SMELT_OP_CONST) {
            smelt__sb_printf(b, "%s    const %s v%d = ", ind, dl->type[pc->ops[i].dtype], pc->n_in + i);
            literal(b, dl, &pc->ops[i]);
            smelt__sb_puts(b, ";\n");
        }
    /* read through the read-only cache: a kernel's inputs are not written while it runs (an output in place
     * of one writes each element after its thread's reads of it), so the compiler may send these loads
     * ahead of the stores before them (layernorm's last pass: the 16 elements' w and b a lane together,
     * where each pair of loads waited behind the previous element's store; the same registers) */
    ectx e = {dl, pc, uses, inl, -1, FORM_OFFSET, false, false, ldg, divq, rows_uniform(pc, bind), NULL, NULL};
    emit_lane(b, &e);
    smelt__sb_printf(b, "%s}\n", ind);
    free(uses), free(inl);
    return SMELT_OK;
}

/* The loop over a row's elements that lane holds in a pass: the streaming
 * form's r = c0 + lane, + 32, ... < c1 (a chunk); the held form's
 * elements r = lane + 32 j of the part h->part, those below nred (the
 * first K / 2 are in every row: the compiler drops their test); unrolled
 * for registers (their arrays indexed by constants), else by 16 for loads
 * (load: rows_dev_preload: a lane's loads go out 16 at a time; all at once,
 * they would take as many registers) and by 8 (loads of inputs a pass
 * reads alone). */
static void rows_dev_loop(smelt__sb *b, const rows_held *h, const char *c0, const char *c1, const char *ind, bool load)
{
    if (!h) {
        smelt__sb_printf(b, "%sfor (smelt_idx r = %s + lane; r < %s; r += 32) {\n%s    {\n", ind, c0, c1, ind);
        return;
    }
    smelt__sb_printf(b, "%s#pragma unroll%s\n", ind, !h->part ? "" : load ? " 16" : " 8");
    if (h->W > 1) /* the block form: every warp's elements may pass the row's end, unless exact */
        smelt__sb_printf(b, "%sfor (int j = 0; j < %d; j++) {\n"
                            "%s    const smelt_idx r = wb + (smelt_idx)(lane + 32 * j);\n%s    if (%s) {\n",
                         ind, h->K, ind, ind, h->exact ? "true" : "j < jn");
    else
        smelt__sb_printf(b, "%sfor (int j = %d; j < %d; j++) {\n"
                            "%s    const smelt_idx r = (smelt_idx)(lane + 32 * j);\n%s    if (j < %d || r < nred) {\n",
                         ind, h->part ? h->kr : 0, h->part ? h->K : h->kr, ind, ind, h->K / 2);
}

/* The held form (one reduced dimension): each kernel operand's pointer to
 * the lane's first element of the row, bq<q>, and its stride along the row
 * sq<q> (elements; strided operands): element j of the lane is at
 * bq<q>[32 j] (contiguous), bq<q>[0] (broadcast) or bq<q>[32 j sq<q>], an
 * offset the compiler folds into the load. */
static void rows_dev_bases(smelt__sb *b, const smelt__dialect *dl, const smelt__kdesc *d, const char *ind, int W)
{
    for (int q = 0; q < d->n_in + d->n_out; q++) {
        const char *T = dl->stype[operand_dtype(d, q)], *c = q < d->n_in ? "const " : "";
        if (d->mode[q] == SMELT_MODE_STRIDED)
            smelt__sb_printf(b, "%sconst smelt_idx sq%d = a.strides[%d];\n", ind, q, q * d->rank + d->rank - 1);
        smelt__sb_printf(b, "%s%s%s *__restrict__ const bq%d = (%s%s *)a.ptrs[%d] + xo[%d]", ind, c, T, q, c, T, q, q);
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
        rows_dev_loop(b, h, "", "", ind, true);
        for (int v = 0; v < d->n_in; v++)
            if (h->in[v] && first[v] == p) {
                char o[48], r[48];
                held_index(o, sizeof o, d->mode[v], v);
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
static void rows_dev_warp_fold(smelt__sb *b, const char *ind, const char *sfx, const char *op, int K, bool exact,
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
    smelt__sb_printf(b, "%s        smelt_fold%s(&v, &vi, smelt_conv%s(%s), (long long)(wb + lane + 32 * j));\n", in, sfx,
                     sfx, op);
    if (mm)
        smelt__sb_printf(b, "%s    }\n%s}\n", ind, ind);
}

/* The block form's fold of a reduction (shape_device_rows): warp s takes
 * its lanes' accumulators v (and the indices vi of argmax and argmin: arg)
 * where warp s - 1 left them in shared memory, folds its K elements of
 * operand op (warp 0 from the identity), and leaves them for warp s + 1,
 * a barrier after each warp; then every warp takes the last ones.  So
 * lane l folds l, l + 32, ... in turn, the one warp's order.  A fold that
 * gives the same bits in any grouping (free: red_any_grouping) runs in
 * every warp at once, from the identity I, and each lane then folds the
 * warps' results in order: one barrier instead of W.  exact: every
 * element of the block is in the row (no test; else j < jn, the lane's
 * elements in the row). */
static void rows_dev_chain(smelt__sb *b, const char *ind, const char *sfx, const char *op, int W, int K, bool arg,
                           bool free, bool exact, const char *I, const char *mm)
{
    const char *ix = arg ? "" : "// ";
    if (free) {
        smelt__sb_printf(b, "%s__shared__ smelt_acc%s ch[%d][32];\n", ind, sfx, W);
        smelt__sb_printf(b, "%s%s__shared__ long long chi[%d][32];\n", ind, ix, W);
        rows_dev_warp_fold(b, ind, sfx, op, K, exact, mm);
        smelt__sb_printf(b, "%sch[wp][lane] = v;\n", ind);
        smelt__sb_printf(b, "%s%schi[wp][lane] = vi;\n", ind, ix);
        smelt__sb_printf(b, "%s__syncthreads();\n", ind);
        smelt__sb_printf(b, "%sv = %s;\n", ind, I);
        smelt__sb_printf(b, "%svi = 9223372036854775807LL;\n", ind);
        smelt__sb_printf(b, "%s#pragma unroll\n", ind);
        smelt__sb_printf(b, "%sfor (int s = 0; s < %d; s++)\n", ind, W);
        smelt__sb_printf(b, "%s    smelt_fold%s(&v, &vi, ch[s][lane], %s);\n", ind, sfx, arg ? "chi[s][lane]" : "0");
        return;
    }
    smelt__sb_printf(b, "%s__shared__ smelt_acc%s ch[32];\n", ind, sfx);
    smelt__sb_printf(b, "%s%s__shared__ long long chi[32];\n", ind, ix);
    smelt__sb_printf(b, "%sfor (int s = 0; s < %d; s++) {\n", ind, W);
    smelt__sb_printf(b, "%s    if (wp == s) {\n", ind);
    smelt__sb_printf(b, "%s        if (s) {\n", ind);
    smelt__sb_printf(b, "%s            v = ch[lane];\n", ind);
    smelt__sb_printf(b, "%s            %svi = chi[lane];\n", ind, ix);
    smelt__sb_printf(b, "%s        }\n", ind);
    char in2[64];
    snprintf(in2, sizeof in2, "%s        ", ind);
    rows_dev_warp_fold(b, in2, sfx, op, K, exact, NULL);
    smelt__sb_printf(b, "%s        ch[lane] = v;\n", ind);
    smelt__sb_printf(b, "%s        %schi[lane] = vi;\n", ind, ix);
    smelt__sb_printf(b, "%s    }\n", ind);
    smelt__sb_printf(b, "%s    __syncthreads();\n", ind);
    smelt__sb_printf(b, "%s}\n", ind);
    smelt__sb_printf(b, "%sv = ch[lane];\n", ind);
    smelt__sb_printf(b, "%s%svi = chi[lane];\n", ind, ix);
}

/* A device (CUDA): a warp per row, its lanes along the row; every lane
 * holds the row's scalars.  The streaming form (spread 0) reads each pass's
 * operands from memory and computes again what an earlier pass computed;
 * the held form (spread SMELT_SPREAD_HELD + b + 16 c: rows of at most
 * 32 * 2^b elements, one chunk) keeps a lane's elements of every input two
 * passes read and of every value a later pass reads (rows_info.cache): the
 * first kr = 2^(c - 1) (none for c = 0) in registers (kc<v>), the rest in
 * shared memory (kcs<v>, rows_held_slots; a block is one warp), so a row
 * is read from memory once. */
static int shape_device_rows(const smelt__dialect *dl, const smelt__kdesc *d, const char *prelude, smelt__sb *text,
                             smelt__sb *err)
{
    int st = rows_check(d, err), R = d->rank, nin = d->n_in, noper = nin + d->n_out, nk, nr, klast, rlast;
    int K = 0, kr = 0, W = 1;
    if (d->spread >= SMELT_SPREAD_HELD) {
        smelt__held_split(d->spread, &K, &kr);
        W = smelt__held_warps(d->spread);
    }
    rows_info ri = {0};
    if (st || (st = rows_analyse(d, K > 0, &ri)))
        return st;
    int nv = nin + d->n_ops, shared = 0;
    bool *mine = malloc(sizeof(bool) * (size_t)(d->n_ops + 1)), held[SMELT_MAX_KERNEL_OPERANDS] = {false};
    int *first = K ? malloc(sizeof(int) * (size_t)(4 * nv + 1)) : NULL;
    int bind[SMELT_MAX_KERNEL_OPERANDS], outs[SMELT_MAX_KERNEL_OPERANDS];
    rows_held hv = {K, kr, held, 0, W, smelt__held_exact(d->spread)}, *h = K ? &hv : NULL;
    smelt__sb defs, body, kd, rd, what, xo;
    smelt__sb_init(&defs), smelt__sb_init(&body), smelt__sb_init(&kd), smelt__sb_init(&rd), smelt__sb_init(&what);
    smelt__sb_init(&xo);
    if (!mine || (K && !first))
        st = SMELT_ERR_NOMEM;
    red_dims(d, &kd, &rd, &nk, &nr, &klast, &rlast);
    red_dev_offsets(&xo, true, 8, noper - 1, R, nr);
    if (!st && K && nr != 1) {
        smelt__sb_puts(err, "a row program's held form reduces one dimension (after merging)");
        st = SMELT_ERR_INVALID_ARG;
    }
    if (!st && K && !(st = rows_held_spans(d, &ri, first, first + nv, err))) {
        for (int v = 0; v < nin; v++)
            held[v] = rows_is_held(d, &ri, first, first + nv, v);
        int *slot = first + 2 * nv, *off = first + 3 * nv, per = rows_held_slots(d, &ri, first, first + nv, slot, off);
        shared = kr < K ? 32 * (K - kr) * per : 0;
        if (per < 0) {
            smelt__sb_puts(err, "a row program holds too many values");
            st = SMELT_ERR_INVALID_ARG;
        }
        if (shared > 0)
            smelt__sb_printf(&body, "        __shared__ __align__(16) unsigned char smelt_sm[%d];\n", shared);
        if (W > 1) /* and the lane's elements in the row, jn (exact: all K) */
            smelt__sb_printf(&body, "        const smelt_idx wb = (smelt_idx)%d * wp; /* the warp's first element */\n"
                                    "        %sconst long long jr = (long long)nred - (long long)wb - lane; /* (smelt_idx may be "
                                    "unsigned) */\n"
                                    "        %sconst int jn = jr <= 0 ? 0 : jr >= %d ? %d : (int)((jr + 31) / 32);\n",
                             32 * K, hv.exact ? "// " : "", hv.exact ? "// " : "", 32 * K, K);
        rows_dev_bases(&body, dl, d, "        ", W);
        for (int v = 0; v < nv && !st; v++) { /* the held values' arrays */
            if (!rows_is_held(d, &ri, first, first + nv, v))
                continue;
            const char *T = dl->stype[value_dtype(d, v)];
            if (kr)
                smelt__sb_printf(&body, "        %s kc%d[%d];\n", T, v, kr);
            if (kr < K)
                smelt__sb_printf(&body, "        %s *const kcs%d = (%s *)(void *)(smelt_sm + %d) + lane;\n", T, v, T,
                                 32 * (K - kr) * off[slot[v]]);
        }
    }
    for (int v = 0; v < nin + d->n_ops && !st; v++)
        if (ri.slot[v] >= 0)
            smelt__sb_printf(&body, "        %s sv%d;\n", dl->stype[value_dtype(d, v)], ri.slot[v]);
    const char *in = K ? "            " : "                ", *el = K ? "                    " : "                        ";
    const char *lead = W > 1 ? "threadIdx.x == 0" : "lane == 0"; /* the thread that stores a row's scalars */
    for (int t = 0; t <= ri.nst && !st; t++) {
        int nout = 0;
        smelt__kdesc pc;
        if (!(st = rows_piece_of(d, &ri, ROWS_SMALL, t, mine, outs, &nout, &pc, bind, err)) && nout) {
            /* small piece t, on every lane */
            st = rows_dev_piece(&body, dl, &pc, bind, d->n_in, true, "        ", NULL, NULL);
            free(pc.ops);
            for (int o = 0; o < nout; o++)
                for (int q = 0; q < d->n_out; q++)
                    if (d->out_val[q] == outs[o])
                        smelt__sb_printf(&body, "        if (%s)\n            ((%s *)a.ptrs[%d])[xo[%d]] = sv%d;\n", lead,
                                         dl->stype[value_dtype(d, outs[o])], nin + q, nin + q, ri.slot[outs[o]]);
        }
        if (t == ri.nst || st)
            break;
        int k = ri.st[t], x = d->ops[k].in[0];
        red_kind rk = red_kind_of(d->ops[k].op, value_dtype(d, x));
        char sfx[16];
        snprintf(sfx, sizeof sfx, "_%d", t);
        smelt__sb one, ident;
        smelt__sb_init(&one), smelt__sb_init(&ident);
        red_defs(&one, dl, &rk, false);
        rename_words(&defs, smelt__sb_str(&one), red_def_names, NSLOTS(red_def_names), sfx);
        red_identity(&ident, dl, &rk);
        smelt__sb_printf(&what, "%s%s of %s", t ? ", " : "", smelt__ops[rk.op].name, smelt__dtypes[rk.in].name);
        const char *I = smelt__sb_str(&ident);
        smelt__sb_printf(&body, "        { /* reduction %d: %s of %s into %s (%s accumulators) */\n"
                                "            smelt_acc%s tot = %s;\n            long long toti = 9223372036854775807LL;\n",
                         t, smelt__ops[rk.op].name, smelt__dtypes[rk.in].name, smelt__dtypes[rk.out].name,
                         smelt__dtypes[rk.acc].name, sfx, I);
        if (!K)
            smelt__sb_printf(&body, "            for (smelt_idx c0 = 0; c0 < nred; c0 += %d) {\n"
                                    "                const smelt_idx c1 = nred - c0 < %d ? nred : c0 + %d;\n",
                             SMELT_RED_CHUNK, SMELT_RED_CHUNK, SMELT_RED_CHUNK);
        smelt__sb_printf(&body, "%ssmelt_acc%s v = %s;\n%slong long vi = 9223372036854775807LL;\n", in, sfx, I, in);
        if (K)
            rows_dev_preload(&body, dl, d, h, first, t, in);
        bool kept = K && x >= nin && ri.piece[x - nin] != t, opheld = K && rows_is_held(d, &ri, first, first + nv, x);
        if (W > 1 && !opheld) /* the block form: the lane's operands, computed together, folded in turn */
            smelt__sb_printf(&body, "%ssmelt_in%s kt[%d];\n", in, sfx, K);
        char chop[48] = "kt[j]"; /* the operand the chain folds */
        if (opheld)
            held_ref(chop, sizeof chop, h, x);
        for (int part = 0; part < 2 && !st; part++) { /* the lane's elements: registers, shared memory */
            if (!held_part(h, part))
                continue;
            hv.part = part;
            char opnd[48] = "rt[0]";
            if (opheld)
                held_ref(opnd, sizeof opnd, h, x);
            rows_dev_loop(&body, h, "c0", "c1", in, false);
            smelt__sb_printf(&body, "%ssmelt_in%s rt[1];\n", el, sfx);
            if (!K)
                red_dev_offsets(&body, false, (int)strlen(el), noper, R, nr);
            if (x < nin && !(K && held[x])) { /* an input this pass alone reads */
                char o[48];
                if (K) {
                    held_index(o, sizeof o, d->mode[x], x);
                    smelt__sb_printf(&body, "%srt[0] = ((const smelt_in%s *)bq%d)[%s];\n", el, sfx, x, o);
                } else {
                    smelt__sb_printf(&body, "%srt[0] = ((const smelt_in%s *)a.ptrs[%d])[off[%d]];\n", el, sfx, x, x);
                }
            } else if (x >= nin && !kept) {
                smelt__kdesc pc;
                int nout;
                if (!(st = rows_piece_of(d, &ri, ROWS_STAGE, t, mine, outs, &nout, &pc, bind, err))) {
                    rows_modes(d, &pc, bind, false);
                    st = rows_dev_piece(&body, dl, &pc, bind, d->n_in, false, el, h, NULL);
                    free(pc.ops);
                }
            }
            if (W > 1)
                smelt__sb_printf(&body, "%s(void)rt;\n%s%s%s = %s;\n%s    }\n%s}\n", el, el, opheld ? "// " : "", chop,
                                 opnd, in, in);
            else
                smelt__sb_printf(&body, "%s(void)rt;\n%ssmelt_fold%s(&v, &vi, smelt_conv%s(%s), (long long)r);\n"
                                        "%s    }\n%s}\n",
                                 el, el, sfx, sfx, opnd, in, in);
        }
        hv.part = 0;
        if (W > 1) { /* warp s folds its elements after warp s - 1: the lanes' order of one warp */
            /* a fold in any grouping keeps the warps' results in shared memory, each reduction
             * its own: at most 4 KB (W <= 8 for an f64 argmax), else the chain's 32 slots (a kernel
             * of many such folds over 32 warps would pass the 48 KB a block may declare) */
            int slot = (int)smelt__dtypes[rk.acc].size + (rk.arg ? 8 : 0);
            /* a max or min of floats: by fmaxf or fminf, the exact fold where a NaN or a zero needs it */
            const char *mm = rk.arg || (rk.op != SMELT_OP_MAX && rk.op != SMELT_OP_MIN) ? NULL
                             : rk.acc == SMELT_F32 ? (rk.op == SMELT_OP_MAX ? "fmaxf" : "fminf")
                             : rk.acc == SMELT_F64 ? (rk.op == SMELT_OP_MAX ? "fmax" : "fmin")
                                                   : NULL;
            rows_dev_chain(&body, in, sfx, chop, W, K, rk.arg, red_any_grouping(&rk) && W * 32 * slot <= 4096, h->exact,
                           I, mm);
        }
        smelt__sb_printf(&body, "%sfor (int dd = 16; dd >= 1; dd >>= 1) {\n"
                                "%s    smelt_acc%s u = smelt_shfl(v, dd);\n"
                                "%s    long long ui = %s;\n"
                                "%s    smelt_fold%s(&v, &vi, u, ui);\n%s}\n"
                                "%ssmelt_fold%s(&tot, &toti, v, vi);\n",
                         in, in, sfx, in, rk.arg ? "smelt_shfl(vi, dd)" : "vi", in, sfx, in, in, sfx);
        if (!K)
            smelt__sb_puts(&body, "            }\n");
        smelt__sb_printf(&body, "            tot = smelt_bcast(tot);\n            toti = smelt_bcast(toti);\n"
                                "            sv%d = smelt_result%s(tot, toti, nred);\n",
                         ri.slot[nin + k], sfx);
        for (int q = 0; q < d->n_out; q++)
            if (d->out_val[q] == nin + k)
                smelt__sb_printf(&body, "            if (%s)\n                ((smelt_out%s *)a.ptrs[%d])[xo[%d]] = sv%d;\n",
                                 lead, sfx, nin + q, nin + q, ri.slot[nin + k]);
        smelt__sb_puts(&body, "        }\n");
        smelt__sb_free(&one), smelt__sb_free(&ident);
    }
    if (!st) { /* the final pass: the full-size outputs */
        int nout;
        smelt__kdesc pc;
        if (!(st = rows_piece_of(d, &ri, ROWS_FINAL, 0, mine, outs, &nout, &pc, bind, err)) && nout) {
            rows_modes(d, &pc, bind, false);
            /* f32 divisions by the row's scalar through its reciprocal (smelt_divr_f32:
             * the same bits, fewer instructions), where every element of the lane lies
             * in the range it holds for; else the pass again, dividing (its outputs are
             * not in place of what it reads: smelt__inplace_ok); a row whose divisor
             * lies outside divides at once */
            bool fd = rows_fast_divs(&body, dl, &pc, bind);
            for (int again = 0; again <= (int)fd && !st; again++) {
                const char *ind = fd ? "            " : "        ";
                if (fd) /* a divisor outside the range: the division at once */
                    smelt__sb_puts(&body, again ? "        if (!smelt_dok) {\n" : "        if (smelt_dok) {\n");
                for (int part = 0; part < 2 && !st; part++) {
                    if (!held_part(h, part))
                        continue;
                    hv.part = part;
                    rows_dev_loop(&body, h, "0", "nred", ind, false);
                    if (!K)
                        red_dev_offsets(&body, false, 16, noper, R, nr);
                    st = rows_dev_piece(&body, dl, &pc, bind, d->n_in, false, fd ? "                    " : "                ",
                                        h, fd && !again ? "smelt_dok" : NULL);
                    smelt__sb_printf(&body, "%s    }\n%s}\n", ind, ind);
                }
                if (fd)
                    smelt__sb_puts(&body, "        }\n");
            }
            free(pc.ops);
        }
    }
    if (W > 1) /* the chains' shared memory is the next row's */
        smelt__sb_puts(&body, "        __syncthreads();\n");
    char form[200] = "Every pass reads its operands from memory.";
    if (K && W > 1)
        snprintf(form, sizeof form, "A row spans %d warps, a block; a lane holds its %d elements of the values two "
                                    "passes read in registers (kc<v>): a row is read from memory once.", W, K);
    else if (K)
        snprintf(form, sizeof form, "A lane holds its %d elements of the values two passes read, %d in registers "
                                    "(kc<v>), %d in shared memory (kcs<v>): a row is read from memory once.",
                 K, kr, K - kr);
    char bounds[40] = "", rowloop[400], per[40] = "One warp per row";
    if (W > 1 || shared)
        snprintf(bounds, sizeof bounds, "__launch_bounds__(%d) ", 32 * W);
    if (W > 1) {
        snprintf(per, sizeof per, "A block of %d warps per row", W);
        snprintf(rowloop, sizeof rowloop,
                 "    const int lane = (int)(threadIdx.x & 31u), wp = (int)(threadIdx.x >> 5); /* the row's warp */\n"
                 "    for (long long ow = blockIdx.x; ow < (long long)nout; ow += gridDim.x) {\n");
    } else {
        snprintf(rowloop, sizeof rowloop,
                 "    const int lane = (int)(threadIdx.x & 31u);\n"
                 "    const long long nwarps = ((long long)blockDim.x * gridDim.x) >> 5;\n"
                 "    for (long long ow = ((long long)blockIdx.x * blockDim.x + threadIdx.x) >> 5; ow < (long long)nout; "
                 "ow += nwarps) {\n");
    }
    const slot sl[] = {
        {"PRELUDE", prelude}, {"NAME", NAME_TOKEN}, {"NOPS", SLOT_NUM(red_nops(d))}, {"NST", SLOT_NUM(ri.nst)},
        {"WHAT", smelt__sb_str(&what)}, {"RANK", SLOT_NUM(R)}, {"NK", SLOT_NUM(nk)}, {"NR", SLOT_NUM(nr)},
        {"KD", smelt__sb_str(&kd)}, {"RD", smelt__sb_str(&rd)}, {"CHUNK", SLOT_NUM(SMELT_RED_CHUNK)},
        {"NOPERANDS", SLOT_NUM(noper)}, {"NSTRIDES", SLOT_NUM(noper * R)}, {"DEFS", smelt__sb_str(&defs)},
        {"INDEX", d->idx32 ? "unsigned int" : "long long"}, {"FORM", form},
        {"BOUNDS", bounds}, {"ROWLOOP", rowloop}, {"PER", per},
        {"BY_VALUE", SLOT_NUM(smelt__kparam_by_value(noper, R, d->idx32, 0))},
        {"XO", smelt__sb_str(&xo)}, {"BODY", smelt__sb_str(&body)}};
    if (!st)
        st = load_render(text, dl, "kernel_rows", sl, NSLOTS(sl), err);
    smelt__sb_free(&defs), smelt__sb_free(&body), smelt__sb_free(&kd), smelt__sb_free(&rd), smelt__sb_free(&what);
    smelt__sb_free(&xo);
    free(mine), free(first);
    rows_free(&ri);
    return st;
}

/* The lanes of every reduction and operand dtype, as block primitives
 * (smelt__emit_blk_library); mean's are sum's. */
static void red_blk_prims(smelt__sb *prims, smelt__sb *table)
{
    for (smelt_op o = 0; o < SMELT_OP_COUNT; o++) {
        if (!smelt__is_reduce(o))
            continue;
        for (smelt_dtype dt = 0; dt < SMELT_DTYPE_COUNT; dt++) {
            if (!(smelt__ops[o].dtypes & smelt__dtypes[dt].kind))
                continue;
            red_kind k = red_kind_of(o, dt);
            char fn[SMELT_BLK_NAME_MAX], row[SMELT_BLK_NAME_MAX + 8], col[SMELT_BLK_NAME_MAX + 8];
            red_prim_name(fn, sizeof fn, &k);
            snprintf(row, sizeof row, "\"%s_row\"", fn);
            if (strstr(smelt__sb_str(table), row)) /* mean's, the same as sum's */
                continue;
            red_lanes(prims, &smelt__dialect_c, &k, fn, "static");
            snprintf(row, sizeof row, "%s_row", fn);
            snprintf(col, sizeof col, "%s_col", fn);
            blk_entry(table, row, NULL);
            blk_entry(table, col, NULL);
        }
    }
}

int smelt__emit(const smelt__target *t, const smelt__kdesc *d, smelt__sb *src, char *name,
                smelt__sb *err)
{
    const smelt__dialect *dl = t->dialect;
    if (smelt__kdesc_gathers(d) && d->reduce && (!d->multi || dl->device)) {
        smelt__sb_puts(err, "an indexed read in a reduction's kernel other than a row program on a CPU\n"
                            "indexed reads fuse only into elementwise kernels and CPU row programs");
        return SMELT_ERR_UNSUPPORTED;
    }
    if (t->blocks && !d->reduce) /* the block form needs no prelude */
        return emit_blocks(dl, d, src, name, false, err);
    smelt__sb prelude, text;
    smelt__sb_init(&prelude), smelt__sb_init(&text);
    char *mathlib = NULL;
    int st = t->blocks ? SMELT_OK : render_prelude(&prelude, dl, &mathlib, err);
    if (!st && d->multi)
        st = dl->device ? shape_device_rows(dl, d, smelt__sb_str(&prelude), &text, err)
                        : shape_c_rows(dl, d, t->blocks, t->blocks ? "" : smelt__sb_str(&prelude), &text, err);
    else if (!st && d->reduce)
        st = dl->device ? shape_device_reduce(dl, d, smelt__sb_str(&prelude), &text, err)
                        : shape_c_reduce(dl, d, t->blocks, t->blocks ? red_blocks_prelude : smelt__sb_str(&prelude),
                                         &text, err);
    else if (!st)
        st = (!dl->device ? shape_c_loop : smelt__is_tile(d->spread) ? shape_device_tile : shape_device_grid)(
            dl, d, smelt__sb_str(&prelude), &text, err);
    if (!st) {
        with_math(&text, mathlib);
        st = finish_name(&text, src, name, d->multi ? "smelt_rows" : d->reduce ? "smelt_red" : "smelt_ew"); /* name = hash of the source */
    }
    smelt__sb_free(&prelude), smelt__sb_free(&text);
    free(mathlib);
    return st;
}

/* A library kernel of a device backend (a scan, a strided copy:
 * src/backends/cuda/cuda.c): the dialect's template base with the prelude
 * in {{PRELUDE}} (smelt's math as it names it), {{NAME}} the hash of the
 * source after prefix, and the n pairs of kv (key, value) as slots. */
int smelt__emit_library(const smelt__dialect *dl, const char *base, const char *prefix, const char *const *kv, int n,
                        smelt__sb *src, char *name, smelt__sb *err)
{
    enum { MAX_KV = 8 };
    if (n > MAX_KV)
        return SMELT_ERR_INVALID_ARG;
    smelt__sb prelude, text;
    smelt__sb_init(&prelude), smelt__sb_init(&text);
    char *mathlib = NULL;
    int st = render_prelude(&prelude, dl, &mathlib, err);
    if (!st) {
        slot sl[MAX_KV + 2] = {{"PRELUDE", smelt__sb_str(&prelude)}, {"NAME", NAME_TOKEN}};
        for (int i = 0; i < n; i++)
            sl[2 + i] = (slot){kv[2 * i], kv[2 * i + 1]};
        st = load_render(&text, dl, base, sl, n + 2, err);
    }
    if (!st) {
        with_math(&text, mathlib);
        st = finish_name(&text, src, name, prefix);
    }
    smelt__sb_free(&prelude), smelt__sb_free(&text);
    free(mathlib);
    return st;
}
