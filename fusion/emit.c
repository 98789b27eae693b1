/* The emitter: a kernel description (fusion/partition.c) in, kernel source
 * out, for any dialect.  Templates give the skeleton; this file fills the
 * slots: setup (pointers, constants, strides), per-row offsets, loop body. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dialect.h"

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
} ectx;

static smelt_dtype value_dtype(const smelt__kdesc *d, int v)
{
    return v < d->n_in ? d->in_dt[v] : d->ops[v - d->n_in].dtype;
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
    if (op->op == SMELT_OP_CAST) {
        *ct = value_dtype(d, op->in[0]);
        return NULL;
    }
    *ct = value_dtype(d, op->in[oi->rule == SMELT_RULE_WHERE ? 1 : 0]);
    const char *t = smelt__is_float(*ct) ? oi->c_float : oi->c_int;
    return strcmp(t, "=") ? t : oi->c_float;
}

static void operand_ref(smelt__sb *b, const ectx *e, int k)
{
    char j[32];
    if (e->lane > 0)
        snprintf(j, sizeof j, "(j + %d)", e->lane);
    else
        snprintf(j, sizeof j, "j");
    switch (e->d->mode[k]) {
    case SMELT_MODE_CONTIG: smelt__sb_printf(b, "q%d[%s]", k, j); break;
    case SMELT_MODE_BCAST: smelt__sb_printf(b, "b%d", k); break;
    default: smelt__sb_printf(b, "q%d[%s * s%d]", k, j, k);
    }
}

static void op_expr(smelt__sb *b, const ectx *e, int k);

static void value_ref(smelt__sb *b, const ectx *e, int v)
{
    if (e->inl[v]) {
        if (v < e->d->n_in) {
            operand_ref(b, e, v);
        } else {
            op_expr(b, e, v - e->d->n_in);
        }
    } else if (is_const(e->d, v) || e->lane < 0) {
        smelt__sb_printf(b, "v%d", v);
    } else {
        smelt__sb_printf(b, "v%d_%d", v, e->lane);
    }
}

/* Expand an ops.def expression template. */
static void expand(smelt__sb *b, const ectx *e, const char *t, smelt_dtype ct, const int *args)
{
    const smelt__dialect *dl = e->dl;
    for (const char *p = t; *p; p++) {
        if (p[0] == '%' && p[1] >= '0' && p[1] <= '2') {
            value_ref(b, e, args[p[1] - '0']);
            p++;
        } else if (p[0] == '%' && p[1] == 'T') {
            smelt__sb_puts(b, dl->type[ct]);
            p++;
        } else if (p[0] == '%' && p[1] == 'U') {
            smelt__sb_puts(b, dl->utype[ct]);
            p++;
        } else if (p[0] == '%' && p[1] == 'S') {
            smelt__sb_puts(b, smelt__dtypes[ct].name);
            p++;
        } else if (p[0] == '@') {
            const char *q = p + 1;
            while (*q && *q != '(')
                q++;
            smelt__sb_putn(b, p + 1, (size_t)(q - p - 1));
            smelt__sb_puts(b, dl->fn_suffix[ct]);
            p = q - 1;
        } else {
            smelt__sb_putn(b, p, 1);
        }
    }
}

static void literal(smelt__sb *b, const smelt__dialect *dl, const smelt__kop *k)
{
    switch (k->dtype) {
    case SMELT_F32: {
        float f = (float)k->fval;
        if (isfinite(f)) {
            smelt__sb_printf(b, "(float)%a", (double)f);
        } else {
            uint32_t u;
            memcpy(&u, &f, 4);
            smelt__sb_printf(b, "smelt_f32_bits(0x%08" PRIx32 "u)", u);
        }
        break;
    }
    case SMELT_F64:
        if (isfinite(k->fval)) {
            smelt__sb_printf(b, "%a", k->fval);
        } else {
            uint64_t u;
            memcpy(&u, &k->fval, 8);
            smelt__sb_printf(b, "smelt_f64_bits(0x%016" PRIx64 "ull)", u);
        }
        break;
    default:
        if (k->ival == INT64_MIN)
            smelt__sb_printf(b, "(%s)(-9223372036854775807LL - 1)", dl->type[k->dtype]);
        else
            smelt__sb_printf(b, "(%s)%" PRId64 "LL", dl->type[k->dtype], k->ival);
    }
}

/* The C expression computing op k, of the op's own type. */
static void op_expr(smelt__sb *b, const ectx *e, int k)
{
    const smelt__kdesc *d = e->d;
    const smelt__kop *op = &d->ops[k];
    const smelt__opinfo *oi = &smelt__ops[op->op];
    smelt_dtype ct;
    const char *t = op_template(d, k, &ct);
    if (!t) { /* cast */
        if (op->dtype == SMELT_BOOL) {
            smelt__sb_puts(b, "(");
            value_ref(b, e, op->in[0]);
            smelt__sb_puts(b, " != 0)");
        } else if (smelt__is_float(ct) && !smelt__is_float(op->dtype)) {
            smelt__sb_printf(b, "smelt_f2%s(", smelt__dtypes[op->dtype].name);
            value_ref(b, e, op->in[0]);
            smelt__sb_puts(b, ")");
        } else {
            smelt__sb_printf(b, "((%s)", e->dl->type[op->dtype]);
            value_ref(b, e, op->in[0]);
            smelt__sb_puts(b, ")");
        }
        return;
    }
    bool to_bool = op->dtype == SMELT_BOOL && oi->rule != SMELT_RULE_CMP;
    if (to_bool)
        smelt__sb_puts(b, "(");
    expand(b, e, t, ct, op->in);
    if (to_bool)
        smelt__sb_puts(b, " != 0)");
}

/* Which values are written inline (see ectx). */
static void plan_inlining(const smelt__kdesc *d, int *uses, bool *inl, int *cons_op, int *cons_slot)
{
    int nv = d->n_in + d->n_ops;
    for (int v = 0; v < nv; v++) {
        uses[v] = 0;
        inl[v] = false;
    }
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
        smelt_dtype ct;
        const char *t = op_template(d, cons_op[v], &ct);
        int refs = 1; /* a cast names its operand once */
        if (t) {
            char tok[3] = {'%', (char)('0' + cons_slot[v]), 0};
            refs = 0;
            for (const char *p = t; (p = strstr(p, tok)); p += 2)
                refs++;
        }
        inl[v] = refs == 1;
    }
}

/* Loads, operators and stores of one lane. */
static void emit_lane(smelt__sb *b, const ectx *e)
{
    const smelt__kdesc *d = e->d;
    const smelt__dialect *dl = e->dl;
    for (int v = 0; v < d->n_in + d->n_ops; v++) {
        if (e->inl[v] || is_const(d, v) || (v < d->n_in && e->uses[v] == 0))
            continue;
        smelt__sb_printf(b, "            %s ", dl->type[value_dtype(d, v)]);
        if (e->lane < 0)
            smelt__sb_printf(b, "v%d = ", v);
        else
            smelt__sb_printf(b, "v%d_%d = ", v, e->lane);
        if (v < d->n_in)
            operand_ref(b, e, v);
        else
            op_expr(b, e, v - d->n_in);
        smelt__sb_puts(b, ";\n");
    }
    for (int o = 0; o < d->n_out; o++) {
        smelt__sb_puts(b, "            ");
        operand_ref(b, e, d->n_in + o);
        smelt__sb_puts(b, " = ");
        value_ref(b, e, d->out_val[o]);
        smelt__sb_puts(b, ";\n");
    }
}

static bool is_flat(const smelt__kdesc *d)
{
    if (d->rank != 1)
        return false;
    for (int k = 0; k < d->n_in + d->n_out; k++)
        if (d->mode[k] != SMELT_MODE_CONTIG)
            return false;
    return true;
}

/* Replace {{KEY}} slots.  Unknown slots are an error naming the template. */
static int render(smelt__sb *out, const char *tpl, const char *tname, const char *const *keys,
                  const char *const *vals, int n, smelt__sb *err)
{
    const char *p = tpl;
    while (*p) {
        const char *s = strstr(p, "{{");
        if (!s) {
            smelt__sb_puts(out, p);
            break;
        }
        smelt__sb_putn(out, p, (size_t)(s - p));
        const char *e = strstr(s, "}}");
        if (!e) {
            smelt__sb_printf(err, "template %s: unterminated slot", tname);
            return SMELT_ERR_COMPILE;
        }
        int i;
        for (i = 0; i < n; i++)
            if (strlen(keys[i]) == (size_t)(e - s - 2) && !strncmp(s + 2, keys[i], (size_t)(e - s - 2)))
                break;
        if (i == n) {
            smelt__sb_printf(err, "template %s: unknown slot {{%.*s}}", tname, (int)(e - s - 2), s + 2);
            return SMELT_ERR_COMPILE;
        }
        smelt__sb_puts(out, vals[i]);
        p = e + 2;
    }
    return SMELT_OK;
}

static int load_render(smelt__sb *out, const smelt__dialect *dl, const char *base,
                       const char *const *keys, const char *const *vals, int n, smelt__sb *err)
{
    char tname[64];
    snprintf(tname, sizeof tname, "%s/%s.%s.in", dl->dir, base, dl->ext);
    char *tpl = smelt__template_load(tname, err);
    if (!tpl)
        return SMELT_ERR_COMPILE;
    int st = render(out, tpl, tname, keys, vals, n, err);
    free(tpl);
    return st;
}

int smelt__emit(const smelt__dialect *dl, const smelt__kdesc *d, smelt__sb *src, char *name,
                smelt__sb *err)
{
    int nops = d->n_in + d->n_out, R = d->rank, st;
    bool flat = is_flat(d);
    int unroll = d->unroll > 1 ? d->unroll : 1;
    smelt__sb math, prelude, setup, row, body, body_u, text;
    smelt__sb_init(&math), smelt__sb_init(&prelude), smelt__sb_init(&setup);
    smelt__sb_init(&row), smelt__sb_init(&body), smelt__sb_init(&body_u), smelt__sb_init(&text);

    /* prelude */
#define SMELT_MATHFN(fn, n)                                                                 \
    smelt__sb_printf(&math, "double %s(%s);\nfloat %sf(%s);\n", #fn,                       \
                     n == 1 ? "double" : n == 2 ? "double, double" : "double, double, double", \
                     #fn, n == 1 ? "float" : n == 2 ? "float, float" : "float, float, float");
#include "../src/mathfns.def"
#undef SMELT_MATHFN
    {
        const char *k[] = {"MATH_DECLS"}, *v[] = {smelt__sb_str(&math)};
        if ((st = load_render(&prelude, dl, "prelude", k, v, 1, err)))
            goto done;
    }

    /* setup: operand pointers, inner strides, constants */
    for (int k = 0; k < nops; k++) {
        smelt_dtype dt = k < d->n_in ? d->in_dt[k] : value_dtype(d, d->out_val[k - d->n_in]);
        const char *cq = k < d->n_in ? "const " : "";
        if (flat)
            smelt__sb_printf(&setup, "    %s%s *%s q%d = (%s%s *)ptrs[%d];\n", cq, dl->type[dt],
                             dl->restrict_kw, k, cq, dl->type[dt], k);
        else if (d->mode[k] == SMELT_MODE_STRIDED)
            smelt__sb_printf(&setup, "    const int64_t s%d = strides[%d];\n", k, k * R + R - 1);
    }
    int n_real = 0;
    for (int i = 0; i < d->n_ops; i++) {
        if (d->ops[i].op != SMELT_OP_CONST) {
            n_real++;
            continue;
        }
        smelt__sb_printf(&setup, "    const %s v%d = ", dl->type[d->ops[i].dtype], d->n_in + i);
        literal(&setup, dl, &d->ops[i]);
        smelt__sb_puts(&setup, ";\n");
    }

    /* per-row offsets (nd only) */
    if (!flat) {
        for (int k = 0; k < nops; k++)
            smelt__sb_printf(&row, "        int64_t o%d = col * strides[%d];\n", k, k * R + R - 1);
        if (R > 1) {
            smelt__sb_printf(&row, "        for (int d = %d; d >= 0; d--) {\n", R - 2);
            smelt__sb_puts(&row, "            int64_t idx = row % shape[d];\n            row /= shape[d];\n");
            for (int k = 0; k < nops; k++)
                smelt__sb_printf(&row, "            o%d += idx * strides[%d + d];\n", k, k * R);
            smelt__sb_puts(&row, "        }\n");
        }
        for (int k = 0; k < nops; k++) {
            smelt_dtype dt = k < d->n_in ? d->in_dt[k] : value_dtype(d, d->out_val[k - d->n_in]);
            const char *cq = k < d->n_in ? "const " : "";
            smelt__sb_printf(&row, "        %s%s *%s q%d = (%s%s *)ptrs[%d] + o%d;\n", cq,
                             dl->type[dt], dl->restrict_kw, k, cq, dl->type[dt], k, k);
            if (d->mode[k] == SMELT_MODE_BCAST)
                smelt__sb_printf(&row, "        const %s b%d = q%d[0];\n", dl->type[dt], k, k);
        }
    }

    /* body: one lane for the scalar loop, unroll lanes for the unrolled one */
    {
        int nv = d->n_in + d->n_ops;
        int *uses = malloc(sizeof(int) * (size_t)(3 * nv + 1));
        bool *inl = malloc(sizeof(bool) * (size_t)(nv + 1));
        if (!uses || !inl) {
            free(uses), free(inl);
            st = SMELT_ERR_NOMEM;
            goto done;
        }
        plan_inlining(d, uses, inl, uses + nv, uses + 2 * nv);
        ectx e = {dl, d, uses, inl, -1};
        emit_lane(&body, &e);
        for (int L = 0; L < unroll; L++) {
            e.lane = L;
            emit_lane(&body_u, &e);
        }
        free(uses), free(inl);
    }

    {
        char nops_s[16], rank_s[16], unroll_s[16];
        snprintf(nops_s, sizeof nops_s, "%d", n_real);
        snprintf(rank_s, sizeof rank_s, "%d", R);
        snprintf(unroll_s, sizeof unroll_s, "%d", unroll);
        const char *k[] = {"PRELUDE", "NAME", "NOPS", "RANK", "SETUP", "ROW", "BODY", "UNROLL", "BODY_UNROLLED"};
        const char *v[] = {smelt__sb_str(&prelude), NAME_TOKEN,          nops_s,
                           rank_s,                  smelt__sb_str(&setup), smelt__sb_str(&row),
                           smelt__sb_str(&body),    unroll_s,            smelt__sb_str(&body_u)};
        if ((st = load_render(&text, dl, flat ? "kernel_flat" : "kernel_nd", k, v, 9, err)))
            goto done;
    }
    if (text.oom) {
        st = SMELT_ERR_NOMEM;
        goto done;
    }
    /* name = hash of the source; then substitute it */
    uint64_t h = smelt__hash(text.s, text.len, 0x5eed);
    snprintf(name, 32, "smelt_ew_%016" PRIx64, h);
    {
        const char *p = text.s;
        for (const char *s; (s = strstr(p, NAME_TOKEN)); p = s + strlen(NAME_TOKEN)) {
            smelt__sb_putn(src, p, (size_t)(s - p));
            smelt__sb_puts(src, name);
        }
        smelt__sb_puts(src, p);
    }
    st = src->oom ? SMELT_ERR_NOMEM : SMELT_OK;
done:
    smelt__sb_free(&math), smelt__sb_free(&prelude), smelt__sb_free(&setup);
    smelt__sb_free(&row), smelt__sb_free(&body), smelt__sb_free(&body_u), smelt__sb_free(&text);
    return st;
}
