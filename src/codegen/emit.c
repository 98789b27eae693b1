/* The emitter: a kernel description (fusion/partition.c) in, kernel source
 * out, for any dialect.  Templates give the skeleton; this file fills the
 * slots: setup (pointers, constants, strides), per-row offsets, loop body. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "emit.h"

smelt_dtype smelt__value_dtype(const smelt__kdesc *d, int v)
{
    return v < d->n_in ? d->in_dt[v] : d->ops[v - d->n_in].dtype;
}

/* operand k: an input, or output k - n_in */
smelt_dtype smelt__operand_dtype(const smelt__kdesc *d, int k)
{
    return k < d->n_in ? d->in_dt[k] : smelt__value_dtype(d, d->out_val[k - d->n_in]);
}

bool smelt__is_const(const smelt__kdesc *d, int v)
{
    return v >= d->n_in && d->ops[v - d->n_in].op == SMELT_OP_CONST;
}

/* The expression template op k uses (NULL for casts). */
const char *smelt__op_template(const smelt__kdesc *d, int k, smelt_dtype *ct)
{
    const smelt__kop *op = &d->ops[k];
    const smelt__opinfo *oi = &smelt__ops[op->op];
    *ct = smelt__value_dtype(d, op->in[oi->rule == SMELT_RULE_WHERE ? 1 : 0]);
    if (op->op == SMELT_OP_CAST)
        return NULL;
    const char *t = smelt__is_float(*ct) ? oi->c_float : oi->c_int;
    return strcmp(t, "=") ? t : oi->c_float;
}

/* Whether operand k of a C loop-form kernel is an f16/bf16 one that the
 * group function converts as a whole (c_group): h<k>[j]. */
static bool staged(const ectx *e, int k)
{
    return e->stage && smelt__is_half(smelt__operand_dtype(e->d, k)) &&
           (k >= e->d->n_in || e->d->mode[k] != SMELT_MODE_BCAST);
}

static void operand_ref(smelt__sb *b, const ectx *e, int k)
{
    if (e->form == FORM_OFFSET && k < 64 && (e->ldg >> k & 1))
        smelt__sb_printf(b, "%s(&q%d[o%d])", e->dl->ro_load, k, k);
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

/* The expression that computes value v: its load or its operator. */
static void value_expr(smelt__sb *b, const ectx *e, int v)
{
    if (v < e->d->n_in)
        input_ref(b, e, v);
    else
        smelt__op_expr(b, e, v - e->d->n_in);
}

/* Value v where it is read: inline, or the variable (the array) holding it. */
static void value_ref(smelt__sb *b, const ectx *e, int v)
{
    if (e->inl[v] || (e->arrays && v < e->d->n_in))
        value_expr(b, e, v);
    else if (e->arrays && !smelt__is_const(e->d, v))
        smelt__sb_printf(b, "v%d[j]", v);
    else if (smelt__is_const(e->d, v) || e->lane < 0)
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

/* A finite double as a C hexadecimal smelt__literal, whatever the locale ("%a"
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

void smelt__literal(smelt__sb *b, const smelt__dialect *dl, const smelt__kop *k)
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
bool smelt__fast_div(const ectx *e, int k)
{
    const smelt__kop *op = &e->d->ops[k];
    if (!e->divq || op->op != SMELT_OP_DIV || op->dtype != SMELT_F32 ||
        smelt__value_dtype(e->d, op->in[0]) != SMELT_F32 || smelt__value_dtype(e->d, op->in[1]) != SMELT_F32)
        return false;
    int v = op->in[1];
    return v < e->d->n_in ? v < 64 && (e->uni >> v & 1) : smelt__is_const(e->d, v);
}

/* The f32 functions with a small-range form f(x, &w) (math.h.in): the same
 * bits as the function where its witness w stays at most SMELT_W_MAX,
 * fewer instructions (exp: 2^k as one normal float; sin, cos, tan: no
 * Payne and Hanek reduction) */
static const struct {
    int op;
    const char *fn;
} fast_w[] = {{SMELT_OP_EXP, "smelt_exp_f32_w"},
              {SMELT_OP_SIN, "smelt_sin_f32_w"},
              {SMELT_OP_COS, "smelt_cos_f32_w"},
              {SMELT_OP_TAN, "smelt_tan_f32_w"}};

/* The small-range form ectx.wq computes op k with, or NULL. */
const char *smelt__fast_w(const ectx *e, int k)
{
    const smelt__kop *op = &e->d->ops[k];
    if (!e->wq || op->dtype != SMELT_F32 || smelt__value_dtype(e->d, op->in[0]) != SMELT_F32 ||
        (e->cond && e->cond[e->d->n_in + k])) /* *w kept in a branch: the loop would not vectorise */
        return NULL;
    for (size_t i = 0; i < sizeof fast_w / sizeof fast_w[0]; i++)
        if (fast_w[i].op == (int)op->op)
            return fast_w[i].fn;
    return NULL;
}

/* The C expression computing op k, of the op's own type. */
void smelt__op_expr(smelt__sb *b, const ectx *e, int k)
{
    const smelt__kop *op = &e->d->ops[k];
    smelt_dtype ct;
    const char *t = smelt__op_template(e->d, k, &ct);
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
    if (smelt__fast_div(e, k)) { /* the divisor's reciprocal, computed once (math.h.in) */
        smelt__sb_puts(b, "smelt_divr_f32(");
        value_ref(b, e, op->in[0]);
        smelt__sb_puts(b, ", ");
        value_ref(b, e, op->in[1]);
        smelt__sb_printf(b, ", &%s)", e->divq);
        return;
    }
    const char *wfn = smelt__fast_w(e, k);
    if (wfn) { /* its small range's fewer instructions (math.h.in) */
        smelt__sb_printf(b, "%s(", wfn);
        value_ref(b, e, op->in[0]);
        smelt__sb_printf(b, ", &%s)", e->wq);
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
void smelt__plan_inlining(const smelt__kdesc *d, int *uses, bool *inl, int *cons_op, int *cons_slot)
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
        if (uses[v] != 1 || smelt__is_const(d, v))
            continue;
        /* when its reader's expression names it once (a cast names its operand once) */
        smelt_dtype ct;
        char tok[3] = {'%', (char)('0' + cons_slot[v]), 0};
        const char *t = smelt__op_template(d, cons_op[v], &ct), *first = t ? strstr(t, tok) : NULL;
        inl[v] = !t || (first && !strstr(first + 2, tok));
    }
}

/* C loops: which values are written inline in a branch (cond[v]): where's
 * second and third operands, logical_and's second, or inside an operator
 * written there.  gcc vectorises a load there as a masked load, which the
 * hardware does not fetch ahead: c_group fetches such inputs itself; and
 * an exp, sin, cos or tan there keeps the plain form (smelt__fast_w). */
void smelt__branch_values(const smelt__kdesc *d, const bool *inl, const int *cons_op, const int *cons_slot, bool *cond)
{
    for (int v = d->n_in + d->n_ops - 1; v >= 0; v--) { /* readers after what they read */
        cond[v] = false;
        if (!inl[v])
            continue;
        smelt_dtype ct;
        int k = cons_op[v];
        char tok[3] = {'%', (char)('0' + cons_slot[v]), 0};
        const char *t = smelt__op_template(d, k, &ct), *at = t ? strstr(t, tok) : NULL;
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
        smelt_dtype dt = smelt__operand_dtype(d, k);
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
void smelt__emit_lane(smelt__sb *b, const ectx *e)
{
    const smelt__kdesc *d = e->d;
    for (int v = 0; v < d->n_in + d->n_ops; v++) {
        if (e->inl[v] || smelt__is_const(d, v) || (v < d->n_in && e->uses[v] == 0))
            continue;
        smelt__sb_printf(b, "            %s ", e->dl->type[smelt__value_dtype(d, v)]);
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
void smelt__emit_arrays(smelt__sb *b, const ectx *e)
{
    const smelt__kdesc *d = e->d;
    for (int k = 0; k < d->n_ops; k++) {
        int v = d->n_in + k;
        if (e->inl[v] || smelt__is_const(d, v))
            continue;
        smelt_dtype dt = smelt__value_dtype(d, v);
        smelt__sb_printf(b, "    %s v%d[%d];\n    for (int64_t j = 0; j < %d; j++)\n        v%d[j] = ",
                         e->dl->type[dt], v, C_GROUP, C_GROUP, v);
        smelt__op_expr(b, e, k);
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
void smelt__device_offsets(smelt__sb *init, smelt__sb *b, smelt__sb *next, const smelt__kdesc *d, int V)
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
int smelt__device_vec_width(const smelt__kdesc *d)
{
    size_t w = 1;
    for (int k = 0; k < d->n_in + d->n_out; k++)
        w = SMELT_MAX(w, smelt__dtypes[smelt__operand_dtype(d, k)].size);
    return (int)(16 / w);
}

bool smelt__is_flat(const smelt__kdesc *d)
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
bool smelt__device_nd_vec(const smelt__kdesc *d)
{
    if (smelt__is_flat(d) || d->reduce || smelt__is_tile(d->spread) || smelt__kdesc_gathers(d))
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

void smelt__device_vec_body(smelt__sb *b, smelt__sb *aligned, ectx *e, int V)
{
    const smelt__kdesc *d = e->d;
    int n = d->n_in + d->n_out, R = d->rank;
    bool nd = !smelt__is_flat(d); /* vector i at offset o<k> (vectors of the innermost dimension) */
    if (nd)
        smelt__sb_printf(aligned, "a.shape[%d] %% %d == 0", R - 1, V);
    for (int k = 0; k < n; k++) {
        if (k < d->n_in && e->uses[k] == 0)
            continue;
        smelt_dtype dt = smelt__operand_dtype(d, k);
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
        smelt__emit_lane(b, e);
    for (int k = d->n_in; k < n; k++) {
        smelt__sb_puts(b, "            ");
        vec_ref(b, nd, "", e->dl->stype[smelt__operand_dtype(d, k)], V, k);
        smelt__sb_printf(b, " = l%d;\n", k);
    }
}

int smelt__emit_step(const smelt__target *t, const smelt__kdesc *d)
{
    return t->dialect->device && !d->reduce && (smelt__is_flat(d) || smelt__device_nd_vec(d)) ? smelt__device_vec_width(d) : 1;
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

bool smelt__ident_char(char c) { return c == '_' || (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z'); }

static bool item_start(const char *l)
{
    return !strncmp(l, "SMELT_MF", 8) || !strncmp(l, "SMELT_MTAB", 10) || !strncmp(l, "#define", 7);
}

/* The name of the item whose first line (after its comment) is p. */
static void item_name(math_item *it, const char *p)
{
    const char *q;
    if (!strncmp(p, "#define ", 8)) {
        for (q = p += 8; smelt__ident_char(*q); q++)
            ;
    } else {
        for (q = p; *q && *q != '(' && *q != '['; q++)
            ;
        while (q > p && !smelt__ident_char(q[-1]))
            q--;
        for (p = q; p > it->s && smelt__ident_char(p[-1]); p--)
            ;
    }
    snprintf(it->name, sizeof it->name, "%.*s", (int)(q - p), p);
}

/* Mark (and push) the items that text [s, e) names. */
static void math_mark(math_item *it, int n, const char *s, const char *e, int *stack, int *top)
{
    for (const char *p = s; p < e; p++) {
        if (smelt__ident_char(*p) && (p == s || !smelt__ident_char(p[-1])) && (*p == 's' || *p == 'S')) {
            const char *q = p;
            while (q < e && smelt__ident_char(*q))
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

const char *smelt__slot_num(char *buf, int n)
{
    snprintf(buf, 16, "%d", n);
    return buf;
}

/* The target's warp as the device kernels spell it (WARP_SLOTS): its lanes,
 * a lane's mask (lanes - 1), log2 (a thread's warp: threadIdx.x >> it),
 * the shuffle tree's first step (half the lanes) and its steps. */
int smelt__warp_text(warp_text *w, const smelt__target *t, smelt__sb *err)
{
    int L = t->device ? t->device->warp : 0;
    if (L < 2 || (L & (L - 1)) || L > 1024) {
        smelt__sb_printf(err, "a device kernel needs its target's warp width (a power of 2; here %d)", L);
        return SMELT_ERR_INVALID_ARG;
    }
    w->L = L;
    snprintf(w->lanes, sizeof w->lanes, "%d", L);
    snprintf(w->mask, sizeof w->mask, "%d", L - 1);
    snprintf(w->log2, sizeof w->log2, "%d", __builtin_ctz((unsigned)L));
    snprintf(w->half, sizeof w->half, "%d", L / 2);
    w->steps[0] = 0;
    for (int d = L / 2; d >= 1; d /= 2)
        snprintf(w->steps + strlen(w->steps), sizeof w->steps - strlen(w->steps), d > 1 ? "%d, " : "%d", d);
    return SMELT_OK;
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
int smelt__load_render(smelt__sb *out, const smelt__dialect *dl, const char *base, const slot *slots,
                       int n, smelt__sb *err)
{
    char tname[64];
    snprintf(tname, sizeof tname, "%s/%s.%s.in", dl->dir, base, dl->ext);
    return render_file(out, tname, slots, n, err);
}

/* A C or CUDA source's prelude, in the dialect's qualifiers: the libm
 * functions kernels may call declared (src/mathfns.def; a device compiler
 * declares its own), MATH_MARK where smelt's math goes (smelt__with_math).
 * *mathlib gets the math library, for the caller to free. */
int smelt__render_prelude(smelt__sb *out, const smelt__dialect *dl, char **mathlib, smelt__sb *err)
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
    const slot sl[] = {{"MATH_DECLS", dl->libm_decls ? smelt__sb_str(&decls) : ""}, {"MATH", MATH_MARK},
                       {"HELPER_KW", dl->helper_kw}, {"MATH_KW", dl->math_kw},
                       {"MATH_SLOW_KW", dl->math_slow_kw}, {"TABLE_KW", dl->table_kw}};
    int st = *mathlib ? render_file(out, "common/prelude.h.in", sl, NSLOTS(sl), err) : SMELT_ERR_COMPILE;
    smelt__sb_free(&decls);
    return st;
}

/* text with MATH_MARK replaced by the items of smelt's math library that
 * the text after the mark names. */
void smelt__with_math(smelt__sb *text, const char *mathlib)
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
const char smelt__gather_fn[] = GATHER_FN("static");
const char smelt__gather_fn_dev[] = GATHER_FN("SMELT_D");

/* The C type an index of input q is read as */
const char *smelt__gather_index_type(const smelt__kdesc *d, int q)
{
    size_t z = smelt__dtypes[d->in_dt[q]].size;
    return z == 8 ? "int64_t" : z == 4 ? "int32_t" : z == 2 ? "int16_t" : "uint8_t";
}

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
                         ind, k, smelt__gather_index_type(d, q), ptrs, q, q, s, SMELT_GX_SLOTS + 2 * s + 1);
        s++;
    }
}

/* The element offsets of a row's first element (C kernels, both forms):
 * o<k> for every operand, from the row and column the kernel computed. */
void smelt__row_offsets(smelt__sb *row, const smelt__kdesc *d)
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
        return smelt__emit_blocks(dl, d, src, name, false, err);
    smelt__sb prelude, text;
    smelt__sb_init(&prelude), smelt__sb_init(&text);
    char *mathlib = NULL;
    int st = t->blocks ? SMELT_OK : smelt__render_prelude(&prelude, dl, &mathlib, err);
    if (!st && d->multi)
        st = dl->device ? smelt__shape_device_rows(t, d, smelt__sb_str(&prelude), &text, err)
                        : smelt__shape_c_rows(dl, d, t->blocks, t->blocks ? "" : smelt__sb_str(&prelude), &text, err);
    else if (!st && d->reduce)
        st = dl->device ? smelt__shape_device_reduce(t, d, smelt__sb_str(&prelude), &text, err)
                        : smelt__shape_c_reduce(dl, d, t->blocks, t->blocks ? smelt__red_blocks_prelude : smelt__sb_str(&prelude),
                                         &text, err);
    else if (!st)
        st = (!dl->device ? smelt__shape_c_loop : smelt__is_tile(d->spread) ? smelt__shape_device_tile : smelt__shape_device_grid)(
            dl, d, smelt__sb_str(&prelude), &text, err);
    if (!st) {
        smelt__with_math(&text, mathlib);
        st = smelt__finish_name(&text, src, name, d->multi ? "smelt_rows" : d->reduce ? "smelt_red" : "smelt_ew"); /* name = hash of the source */
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
    int st = smelt__render_prelude(&prelude, dl, &mathlib, err);
    if (!st) {
        slot sl[MAX_KV + 2] = {{"PRELUDE", smelt__sb_str(&prelude)}, {"NAME", NAME_TOKEN}};
        for (int i = 0; i < n; i++)
            sl[2 + i] = (slot){kv[2 * i], kv[2 * i + 1]};
        st = smelt__load_render(&text, dl, base, sl, n + 2, err);
    }
    if (!st) {
        smelt__with_math(&text, mathlib);
        st = smelt__finish_name(&text, src, name, prefix);
    }
    smelt__sb_free(&prelude), smelt__sb_free(&text);
    free(mathlib);
    return st;
}
