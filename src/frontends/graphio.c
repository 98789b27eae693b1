/* Graph files: a versioned, line-oriented text format (docs/formats.md).
 *
 *   smelt-graph 1
 *   %0 = input "a" f32 [3, 4]
 *   %1 = const f32 0x1.8p+1
 *   %2 = mul %0 %1 : f32 [3, 4]
 *   %3 = sum %2 axes [1] keepdims : f32 [3, 1]
 *   output %3
 *
 * Every node of the graph is written in creation order; float constants are
 * hex floats (bit-exact).  The reader replays each line through the builder
 * and checks that the builder made exactly the node the line describes, so
 * a file cannot produce a graph the builder could not. */
#include <errno.h>
#include <inttypes.h>
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

#define FORMAT_VERSION 1
#define MAX_FILE (256u << 20)

void smelt_free(void *ptr) { free(ptr); }

smelt_node *smelt_graph_input(const smelt_graph *g, int i)
{
    return g && i >= 0 && i < g->nin ? g->inputs[i] : NULL;
}

const char *smelt_node_name(const smelt_node *n) { return n ? n->name : NULL; }

/* ---- writer ------------------------------------------------------------ */

/* %a, with the locale's decimal point turned back into '.'. */
static void put_hexfloat(smelt__sb *b, double v)
{
    char buf[64];
    snprintf(buf, sizeof buf, "%a", v);
    const char *dp = localeconv()->decimal_point;
    if (dp && strcmp(dp, ".")) {
        char *q = strstr(buf, dp);
        if (q) {
            *q = '.';
            memmove(q + 1, q + strlen(dp), strlen(q + strlen(dp)) + 1);
        }
    }
    smelt__sb_puts(b, buf);
}

static void put_value(smelt__sb *b, const smelt_node *n)
{
    if (!smelt__is_float(n->dtype)) {
        if (n->dtype == SMELT_BOOL)
            smelt__sb_puts(b, n->ival ? "true" : "false");
        else
            smelt__sb_printf(b, "%" PRId64, n->ival);
        return;
    }
    double v = n->fval;
    if (isinf(v)) {
        smelt__sb_puts(b, v < 0 ? "-inf" : "inf");
    } else if (isnan(v)) {
        uint64_t u;
        memcpy(&u, &v, 8);
        if (u == 0x7ff8000000000000ull)
            smelt__sb_puts(b, "nan");
        else
            smelt__sb_printf(b, "nan:0x%016" PRIx64, u);
    } else {
        put_hexfloat(b, v);
    }
}

static void put_shape(smelt__sb *b, int ndim, const int64_t *shape)
{
    smelt__sb_puts(b, "[");
    for (int i = 0; i < ndim; i++)
        smelt__sb_printf(b, i ? ", %" PRId64 : "%" PRId64, shape[i]);
    smelt__sb_puts(b, "]");
}

static void put_string(smelt__sb *b, const char *s)
{
    smelt__sb_puts(b, "\"");
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            smelt__sb_printf(b, "\\%c", *p);
        else if (*p < 0x20 || *p == 0x7f)
            smelt__sb_printf(b, "\\x%02x", *p);
        else
            smelt__sb_putn(b, (const char *)p, 1);
    }
    smelt__sb_puts(b, "\"");
}

/* A tensor constant: "constant DTYPE [shape]" and its values, inline
 * ([v, v, ...], as const writes them) or, saving to path with more than
 * SMELT_INLINE_MAX elements, in a .npy file beside it ("PATH.cID.npy",
 * named relative to the graph file; bf16, which NumPy lacks, stays inline). */
#define SMELT_INLINE_MAX 64
static int put_tensor(smelt__sb *b, const smelt_node *n, const char *path)
{
    smelt__sb_printf(b, "constant %s ", smelt__dtypes[n->dtype].name);
    put_shape(b, n->ndim, n->shape);
    int64_t cnt = smelt__numel(n->ndim, n->shape);
    size_t es = smelt__dtypes[n->dtype].size;
    if (path && cnt > SMELT_INLINE_MAX && n->dtype != SMELT_BF16) {
        smelt__sb full;
        smelt__sb_init(&full);
        smelt__sb_printf(&full, "%s.c%d.npy", path, n->id);
        const char *slash = strrchr(smelt__sb_str(&full), '/');
        smelt_tensor *t = NULL;
        int st = smelt_tensor_wrap(n->g->ctx, n->dtype, n->ndim, n->shape, NULL, n->blob->data, &t);
        if (!st)
            st = smelt_npy_save(n->g->ctx, smelt__sb_str(&full), t);
        smelt_tensor_free(t);
        smelt__sb_puts(b, " ");
        put_string(b, slash ? slash + 1 : smelt__sb_str(&full));
        smelt__sb_free(&full);
        return st;
    }
    smelt__sb_puts(b, " [");
    for (int64_t i = 0; i < cnt; i++) {
        smelt_node e = {.dtype = n->dtype}; /* one element, as a const of its dtype */
        const char *q = n->blob->data + (size_t)i * es;
        if (n->dtype == SMELT_I64)
            memcpy(&e.ival, q, 8);
        else if (smelt__is_float(n->dtype))
            e.fval = n->dtype == SMELT_F64 ? *(const double *)(const void *)q : smelt__elem_load(n->dtype, q);
        else
            e.ival = (int64_t)smelt__elem_load(n->dtype, q);
        if (i)
            smelt__sb_puts(b, ", ");
        put_value(b, &e);
    }
    smelt__sb_puts(b, "]");
    return SMELT_OK;
}

static int write_text(smelt_graph *g, int n_out, smelt_node *const *outputs, smelt__sb *b, const char *path)
{
    smelt_ctx *ctx = g->ctx;
    if (g->status)
        return smelt__err(ctx, g->status, "cannot save a graph with an error: %s", smelt__sb_str(&g->err));
    if (n_out < 0 || (n_out && !outputs))
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "graph save: outputs is NULL");
    for (int i = 0; i < n_out; i++)
        if (!outputs[i] || outputs[i]->g != g)
            return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "graph save: output %d is %s", i,
                              outputs[i] ? "a node of another graph" : "NULL");
    smelt__sb_printf(b, "smelt-graph %d\n# written by smelt %s: %d input%s, %d node%s, %d output%s\n",
                     FORMAT_VERSION, SMELT_VERSION, g->nin, g->nin == 1 ? "" : "s", g->n,
                     g->n == 1 ? "" : "s", n_out, n_out == 1 ? "" : "s");
    for (int k = 0; k < g->n; k++) {
        const smelt_node *n = g->nodes[k];
        smelt__sb_printf(b, "%%%d = ", n->id);
        if (n->op == SMELT_OP_INPUT) {
            smelt__sb_puts(b, "input ");
            put_string(b, n->name);
            smelt__sb_printf(b, " %s ", smelt__dtypes[n->dtype].name);
            put_shape(b, n->ndim, n->shape);
        } else if (n->op == SMELT_OP_CONST) {
            smelt__sb_printf(b, "const %s ", smelt__dtypes[n->dtype].name);
            put_value(b, n);
        } else if (n->op == SMELT_OP_TENSOR) {
            int st = put_tensor(b, n, path);
            if (st)
                return st;
        } else {
            smelt__sb_puts(b, smelt__ops[n->op].name);
            for (int j = 0; j < n->nin; j++)
                smelt__sb_printf(b, " %%%d", n->in[j]->id);
            if (smelt__is_reduce(n->op)) { /* the reduced axes, in full */
                smelt__sb_puts(b, " axes [");
                for (int d = 0, k = 0; d < n->in[0]->ndim; d++)
                    if (n->axes >> d & 1u)
                        smelt__sb_printf(b, k++ ? ", %d" : "%d", d);
                smelt__sb_puts(b, n->keepdims ? "] keepdims" : "]");
            }
            if (smelt__ops[n->op].cls == SMELT_CLASS_GATHER) /* an indexed read's axis */
                smelt__sb_printf(b, " axis %lld", (long long)n->vp[0]);
            int nvp = n->op == SMELT_OP_SLICE ? 4 : n->op == SMELT_OP_BROADCAST ? 0 : n->op == SMELT_OP_CONCAT ? 1
                      : n->op == SMELT_OP_PAD ? 3 : smelt__window_nvp(n->op) > 0 ? smelt__window_nvp(n->op) : n->ndim;
            bool params = (smelt__is_view(n->op) && n->op != SMELT_OP_BROADCAST) || smelt__window_nvp(n->op) > 0;
            for (int d = 0; params && d <= nvp; d++) {
                /* a view's parameters: [4, -1, d0] (d0: the operand's dimension 0), [axis, start, stop, step] */
                smelt__sb_puts(b, d == nvp ? "]" : d ? ", " : " [");
                if (d == nvp)
                    break; /* (before reading vp[d]: a conv_taps's 8 parameters fill vp) */
                int64_t v = n->vp[d];
                if (v == SMELT_NONE && n->op == SMELT_OP_SLICE)
                    smelt__sb_puts(b, "none");
                else if (v <= -2 && n->op == SMELT_OP_RESHAPE)
                    smelt__sb_printf(b, "d%lld", (long long)(-2 - v));
                else
                    smelt__sb_printf(b, "%lld", (long long)v);
            }
            if (n->op == SMELT_OP_PAD) { /* its value, written as a const's */
                smelt_node v = {.dtype = n->dtype, .fval = smelt__elem_load(n->dtype, (const char *)&n->vp[3])};
                v.ival = n->dtype == SMELT_I64 ? n->vp[3] : (int64_t)v.fval;
                smelt__sb_puts(b, " value ");
                put_value(b, &v);
            }
            smelt__sb_printf(b, " : %s ", smelt__dtypes[n->dtype].name);
            put_shape(b, n->ndim, n->shape);
        }
        smelt__sb_puts(b, n->weak ? " weak\n" : "\n");
    }
    for (int i = 0; i < n_out; i++)
        smelt__sb_printf(b, "output %%%d\n", outputs[i]->id);
    if (b->oom)
        return smelt__err(ctx, SMELT_ERR_NOMEM, "out of memory");
    return SMELT_OK;
}

int smelt_graph_to_text(smelt_graph *g, int n_out, smelt_node *const *outputs, char **text)
{
    if (!g || !text)
        return g ? smelt__err(g->ctx, SMELT_ERR_INVALID_ARG, "smelt_graph_to_text: text is NULL")
                 : SMELT_ERR_INVALID_ARG;
    *text = NULL;
    smelt__sb b;
    smelt__sb_init(&b);
    int st = write_text(g, n_out, outputs, &b, NULL);
    if (!st && !(*text = smelt__sb_take(&b)))
        st = smelt__err(g->ctx, SMELT_ERR_NOMEM, "out of memory");
    smelt__sb_free(&b);
    return st;
}

int smelt_graph_save(smelt_graph *g, int n_out, smelt_node *const *outputs, const char *path)
{
    if (!g)
        return SMELT_ERR_INVALID_ARG;
    if (!path)
        return smelt__err(g->ctx, SMELT_ERR_INVALID_ARG, "smelt_graph_save: path is NULL");
    smelt__sb b;
    smelt__sb_init(&b);
    int st = write_text(g, n_out, outputs, &b, path);
    if (!st)
        st = smelt__write_file(g->ctx, path, 1, (const void *[]){b.s}, &b.len);
    smelt__sb_free(&b);
    return st;
}

/* ---- reader ------------------------------------------------------------ */

typedef struct rd {
    smelt_ctx *ctx;
    const char *what; /* file name for messages */
    const char *dir;  /* the graph file's folder (constants' .npy files); NULL: text */
    int line;
    const char *s, *end; /* the current line */
    smelt_graph *g;
    struct def {
        int id;
        smelt_node *n;
    } *defs; /* defined node ids, increasing, and their nodes */
    int nid, idcap;
    smelt_node **outs;
    int nout, outcap;
} rd;

/* An error about the current line: "file:line: message". */
#define rerr(r, st, ...) smelt__err_at((r)->ctx, st, (r)->what, (r)->line, __VA_ARGS__)

static void ws(rd *r)
{
    while (r->s < r->end && (*r->s == ' ' || *r->s == '\t'))
        r->s++;
    if (r->s < r->end && *r->s == '#')
        r->s = r->end;
}

static bool at_end(rd *r)
{
    ws(r);
    return r->s >= r->end;
}

static bool eat(rd *r, char c)
{
    ws(r);
    return smelt__skip_char(&r->s, r->end, c);
}

/* A bare word: letters, digits and _ . + - : (names, dtypes, numbers). */
static int word(rd *r, char *out, size_t n)
{
    ws(r);
    size_t k = 0;
    while (r->s < r->end) {
        char c = *r->s;
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '_' || c == '.' || c == '+' || c == '-' || c == ':';
        if (!ok)
            break;
        if (k + 1 >= n)
            return rerr(r, SMELT_ERR_PARSE, "word too long");
        out[k++] = c;
        r->s++;
    }
    out[k] = 0;
    if (!k) {
        if (r->s < r->end)
            return rerr(r, SMELT_ERR_PARSE, "unexpected '%c'", *r->s);
        return rerr(r, SMELT_ERR_PARSE, "unexpected end of line");
    }
    return SMELT_OK;
}

static int parse_int(rd *r, const char *w, int64_t lo, int64_t hi, int64_t *out)
{
    const char *p = w;
    bool neg = *p == '-';
    if (*p == '-' || *p == '+')
        p++;
    if (!*p)
        return rerr(r, SMELT_ERR_PARSE, "'%s' is not an integer", w);
    uint64_t v = 0;
    for (; *p; p++) {
        if (*p < '0' || *p > '9')
            return rerr(r, SMELT_ERR_PARSE, "'%s' is not an integer", w);
        if (v > (UINT64_MAX - 9) / 10)
            return rerr(r, SMELT_ERR_PARSE, "integer '%s' is out of range", w);
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if ((!neg && v > (uint64_t)INT64_MAX) || (neg && v > (uint64_t)INT64_MAX + 1))
        return rerr(r, SMELT_ERR_PARSE, "integer '%s' is out of range", w);
    int64_t x = neg ? (int64_t)(0 - v) : (int64_t)v;
    if (x < lo || x > hi)
        return rerr(r, SMELT_ERR_PARSE, "%s is out of range [%" PRId64 ", %" PRId64 "]", w, lo, hi);
    *out = x;
    return SMELT_OK;
}

static smelt_node *lookup(const rd *r, int id)
{
    int lo = 0, hi = r->nid;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (r->defs[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < r->nid && r->defs[lo].id == id ? r->defs[lo].n : NULL;
}

/* %N: a new id (def; larger than every id before) or a defined node. */
static int ref(rd *r, int *id, smelt_node **node, bool def)
{
    if (!eat(r, '%'))
        return at_end(r) ? rerr(r, SMELT_ERR_PARSE, "expected a node reference (%%N), got the end of the line")
                         : rerr(r, SMELT_ERR_PARSE, "expected a node reference (%%N), got '%c'", *r->s);
    char w[32];
    int64_t v;
    int st;
    if ((st = word(r, w, sizeof w)) || (st = parse_int(r, w, 0, INT32_MAX, &v)))
        return st;
    *id = (int)v;
    if (def && r->nid && v <= r->defs[r->nid - 1].id)
        return rerr(r, SMELT_ERR_PARSE, "node %%%d: node numbers must increase (the last was %%%d)",
                    *id, r->defs[r->nid - 1].id);
    if (!def && !(*node = lookup(r, *id)))
        return rerr(r, SMELT_ERR_PARSE, "node %%%d is used before it is defined", *id);
    return SMELT_OK;
}

static int dtype(rd *r, smelt_dtype *dt)
{
    char w[32];
    int st = word(r, w, sizeof w);
    if (st)
        return st;
    int d = smelt_dtype_from_name(w);
    if (d < 0)
        return rerr(r, SMELT_ERR_PARSE, "unknown dtype '%s'", w);
    *dt = (smelt_dtype)d;
    return SMELT_OK;
}

static int shape(rd *r, int *ndim, int64_t *sh)
{
    if (!eat(r, '['))
        return rerr(r, SMELT_ERR_PARSE, "expected a shape [d0, d1, ...]");
    *ndim = 0;
    if (eat(r, ']'))
        return SMELT_OK;
    for (;;) {
        char w[32];
        int64_t v;
        int st;
        if ((st = word(r, w, sizeof w)) || (st = parse_int(r, w, 0, INT64_MAX, &v)))
            return st;
        if (*ndim == SMELT_MAX_DIMS)
            return rerr(r, SMELT_ERR_SHAPE, "more than %d dimensions", SMELT_MAX_DIMS);
        sh[(*ndim)++] = v;
        if (eat(r, ']'))
            return SMELT_OK;
        if (!eat(r, ','))
            return rerr(r, SMELT_ERR_PARSE, "expected ',' or ']' in a shape");
    }
}

static int quoted(rd *r, smelt__sb *out)
{
    if (!eat(r, '"'))
        return rerr(r, SMELT_ERR_PARSE, "expected a quoted name");
    while (r->s < r->end && *r->s != '"') {
        char c = *r->s++;
        if (c == '\\') {
            if (r->s >= r->end)
                break;
            c = *r->s++;
            if (c == 'x') {
                int v = 0;
                for (int k = 0; k < 2; k++) {
                    char h = r->s < r->end ? *r->s++ : 0;
                    int d = (h >= '0' && h <= '9') ? h - '0' : (h >= 'a' && h <= 'f') ? h - 'a' + 10
                          : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
                    if (d < 0)
                        return rerr(r, SMELT_ERR_PARSE, "bad \\x escape in a name");
                    v = v * 16 + d;
                }
                if (!v)
                    return rerr(r, SMELT_ERR_PARSE, "a name cannot contain \\x00");
                c = (char)v;
            } else if (c != '"' && c != '\\') {
                return rerr(r, SMELT_ERR_PARSE, "unknown escape '\\%c' in a name", c);
            }
        }
        smelt__sb_putn(out, &c, 1);
    }
    if (!eat(r, '"'))
        return rerr(r, SMELT_ERR_PARSE, "unterminated name");
    if (out->oom)
        return rerr(r, SMELT_ERR_NOMEM, "out of memory");
    return SMELT_OK;
}

static int const_value(rd *r, smelt_dtype dt, double *fv, int64_t *iv)
{
    char w[80];
    int st = word(r, w, sizeof w);
    if (st)
        return st;
    if (dt == SMELT_BOOL) {
        if (!strcmp(w, "true") || !strcmp(w, "1"))
            *iv = 1;
        else if (!strcmp(w, "false") || !strcmp(w, "0"))
            *iv = 0;
        else
            return rerr(r, SMELT_ERR_PARSE, "'%s' is not a bool (true or false)", w);
        *fv = (double)*iv;
        return SMELT_OK;
    }
    if (!smelt__is_float(dt)) {
        int64_t lo = dt == SMELT_I32 ? INT32_MIN : dt == SMELT_U8 ? 0 : INT64_MIN;
        int64_t hi = dt == SMELT_I32 ? INT32_MAX : dt == SMELT_U8 ? 255 : INT64_MAX;
        if ((st = parse_int(r, w, lo, hi, iv)))
            return st;
        *fv = (double)*iv;
        return SMELT_OK;
    }
    if (!strncmp(w, "nan:0x", 6)) {
        char *e;
        errno = 0;
        unsigned long long u = strtoull(w + 6, &e, 16);
        if (*e || e == w + 6 || errno)
            return rerr(r, SMELT_ERR_PARSE, "bad NaN bits '%s'", w);
        uint64_t bits = u;
        memcpy(fv, &bits, 8);
        if (!isnan(*fv))
            return rerr(r, SMELT_ERR_PARSE, "'%s' is not a NaN", w);
        return SMELT_OK;
    }
    char *e;
    *fv = smelt__strtod(w, &e);
    if (*e || e == w)
        return rerr(r, SMELT_ERR_PARSE, "'%s' is not a number", w);
    return SMELT_OK;
}

static int define(rd *r, int id, smelt_node *n)
{
    struct def *v = smelt__grow(r->defs, r->nid, &r->idcap, sizeof *v, 64);
    if (!v)
        return rerr(r, SMELT_ERR_NOMEM, "out of memory");
    r->defs = v;
    r->defs[r->nid++] = (struct def){id, n};
    return SMELT_OK;
}

static int builder_error(rd *r)
{
    return rerr(r, r->g->status ? r->g->status : SMELT_ERR_INVALID_ARG, "%s", smelt__sb_str(&r->g->err));
}

/* The end of a node line: nothing, or "weak" (*weak says which). */
static int weak_flag(rd *r, bool *weak)
{
    char w[16];
    int st;
    *weak = !at_end(r);
    if (!*weak)
        return SMELT_OK;
    if ((st = word(r, w, sizeof w)))
        return st;
    if (strcmp(w, "weak"))
        return rerr(r, SMELT_ERR_PARSE, "unexpected '%s' (only 'weak' may follow)", w);
    return at_end(r) ? SMELT_OK : rerr(r, SMELT_ERR_PARSE, "unexpected '%c' at the end of the line", *r->s);
}

/* After a reduction's operand: "axes [A, ...]" (non-negative, increasing)
 * or "keepdims". */
static int reduce_attr(rd *r, const char *opname, int cls, int *nax, int *axes, bool *keepdims)
{
    char w[32];
    int st = word(r, w, sizeof w);
    if (st)
        return st;
    if (cls != SMELT_CLASS_REDUCE)
        return rerr(r, SMELT_ERR_PARSE, "unexpected '%s' (%s takes operands %%N only)", w, opname);
    if (!strcmp(w, "keepdims")) {
        if (*keepdims)
            return rerr(r, SMELT_ERR_PARSE, "keepdims given twice");
        *keepdims = true;
        return SMELT_OK;
    }
    if (strcmp(w, "axes"))
        return rerr(r, SMELT_ERR_PARSE, "unexpected '%s' (a reduction takes axes [A, ...] and keepdims)", w);
    if (*nax >= 0)
        return rerr(r, SMELT_ERR_PARSE, "axes given twice");
    if (!eat(r, '['))
        return rerr(r, SMELT_ERR_PARSE, "expected a list of axes [A, ...]");
    *nax = 0;
    if (eat(r, ']'))
        return SMELT_OK;
    for (;;) {
        int64_t v;
        if ((st = word(r, w, sizeof w)) || (st = parse_int(r, w, 0, SMELT_MAX_DIMS - 1, &v)))
            return st;
        if (*nax && v <= axes[*nax - 1])
            return rerr(r, SMELT_ERR_PARSE, "axes must increase (%d after %d)", (int)v, axes[*nax - 1]);
        axes[(*nax)++] = (int)v;
        if (eat(r, ']'))
            return SMELT_OK;
        if (!eat(r, ','))
            return rerr(r, SMELT_ERR_PARSE, "expected ',' or ']' in a list of axes");
    }
}

/* A view's parameters: [E, ...], each an integer, "none" (a slice's absent
 * bound) or dK (a reshape's: the operand's dimension K). */
static int view_params(rd *r, smelt_op op, int *n, int64_t *vp)
{
    char w[32];
    int st;
    eat(r, '[');
    *n = 0;
    if (eat(r, ']'))
        return SMELT_OK;
    for (;;) {
        if (*n == SMELT_MAX_DIMS)
            return rerr(r, SMELT_ERR_PARSE, "more than %d parameters", SMELT_MAX_DIMS);
        if ((st = word(r, w, sizeof w)))
            return st;
        int64_t v;
        if (!strcmp(w, "none") && op == SMELT_OP_SLICE)
            v = SMELT_NONE;
        else if (w[0] == 'd' && op == SMELT_OP_RESHAPE) {
            if ((st = parse_int(r, w + 1, 0, SMELT_MAX_DIMS - 1, &v)))
                return st;
            v = -2 - v;
        } else if ((st = parse_int(r, w, INT64_MIN + 1, INT64_MAX, &v)))
            return st;
        vp[(*n)++] = v;
        if (eat(r, ']'))
            return SMELT_OK;
        if (!eat(r, ','))
            return rerr(r, SMELT_ERR_PARSE, "expected ',' or ']' in a list of parameters");
    }
}

/* A tensor constant's values after its shape: [v, ...] (as const writes
 * them, row-major) or "FILE.npy" (relative to the graph file's folder), of
 * the line's dtype and shape; *n the builder's node. */
static int tensor_values(rd *r, smelt_dtype dt, int ndim, const int64_t *sh, smelt_node **n)
{
    smelt_tensor *t = NULL;
    int st;
    ws(r);
    if (r->s < r->end && *r->s == '"') {
        smelt__sb name, path;
        smelt__sb_init(&name), smelt__sb_init(&path);
        if (!(st = quoted(r, &name))) {
            /* confined to the graph file's folder (docs/security.md): a
             * relative path without "..", no symlink on the way, a regular
             * file (a FIFO would block) */
            const char *f = smelt__sb_str(&name), *why = NULL;
            if (r->dir)
                smelt__sb_printf(&path, "%s/", r->dir);
            smelt__sb_puts(&path, f);
            FILE *fp = name.oom || path.oom ? NULL : smelt__fopen_beneath(r->dir, f, &why);
            if (name.oom || path.oom)
                st = rerr(r, SMELT_ERR_NOMEM, "out of memory");
            else if (why)
                st = rerr(r, SMELT_ERR_PARSE, "constant: \"%s\" is %s; a constant's .npy file must be named "
                          "relative to the graph file's folder and lie beneath it", f, why);
            else if (!fp)
                st = rerr(r, errno == ENOMEM ? SMELT_ERR_NOMEM : SMELT_ERR_IO, "constant: cannot open '%s': %s%s",
                          smelt__sb_str(&path), smelt__open_strerror(errno),
                          errno == ELOOP || errno == ENOTDIR ? " (no symlinks on a constant's path)" : "");
            else if ((st = smelt__npy_load_file(r->ctx, fp, smelt__sb_str(&path), &t)))
                st = rerr(r, st, "constant: %s", smelt_errmsg(r->ctx));
            else if (t->dtype != dt || t->ndim != ndim || memcmp(t->shape, sh, sizeof(int64_t) * (size_t)ndim))
                st = rerr(r, SMELT_ERR_PARSE, "constant: '%s' holds %s of another dtype or shape than the line's",
                          smelt__sb_str(&path), smelt__dtypes[t->dtype].name);
        }
        smelt__sb_free(&name), smelt__sb_free(&path);
    } else if (!eat(r, '[')) {
        return rerr(r, SMELT_ERR_PARSE, "constant: expected its values [v, ...] or a \"file.npy\"");
    } else if (smelt__numel(ndim, sh) > r->end - r->s) { /* a character a value at least (before allocating) */
        return rerr(r, SMELT_ERR_PARSE, "constant: the shape holds %lld values, more than the %lld characters left "
                    "in the text can write", (long long)smelt__numel(ndim, sh), (long long)(r->end - r->s));
    } else if (!(st = smelt_tensor_new(r->ctx, dt, ndim, sh, &t))) {
        int64_t cnt = smelt__numel(ndim, sh), i = 0;
        for (; !st && i < cnt; i++) {
            double fv = 0;
            int64_t iv = 0;
            if (i && !eat(r, ','))
                st = rerr(r, SMELT_ERR_PARSE, "constant: %lld values, the shape holds %lld", (long long)i,
                          (long long)cnt);
            else if (!(st = const_value(r, dt, &fv, &iv)) && smelt__is_float(dt))
                smelt__elem_store(dt, (char *)t->data + (size_t)i * smelt__dtypes[dt].size, fv);
            else if (!st)
                memcpy((char *)t->data + (size_t)i * smelt__dtypes[dt].size, &iv, smelt__dtypes[dt].size);
        }
        if (!st && !eat(r, ']'))
            st = rerr(r, SMELT_ERR_PARSE, "constant: more values than the shape's %lld", (long long)cnt);
    }
    if (!st && !(*n = smelt_constant(r->g, t)))
        st = builder_error(r);
    smelt_tensor_free(t);
    return st;
}

/* An operator line's operands and attributes (op_operands) */
typedef struct opline {
    smelt_node *args[3];
    int na, nax, axes[SMELT_MAX_DIMS], nvp;
    int64_t vp[SMELT_MAX_DIMS];
    bool keepdims;
    const char *padval; /* a pad's value, read once the dtype is known */
} opline;

/* An operator line's operands (%N), view or window parameters ([...]),
 * a gather's axis, a reduction's attributes and a pad's value, up to ':' */
static int op_operands(rd *r, int op, const char *opname, opline *o)
{
    int st, cls = smelt__ops[op].cls;
    while (!eat(r, ':')) {
        ws(r);
        if (op == SMELT_OP_PAD && !o->padval && r->end - r->s > 6 && !strncmp(r->s, "value ", 6)) {
            char w[80];
            r->s += 6;
            o->padval = r->s;
            if ((st = word(r, w, sizeof w)))
                return st;
            continue;
        }
        if (r->s < r->end && *r->s == '[' && (cls == SMELT_CLASS_VIEW || smelt__window_nvp((smelt_op)op) > 0) &&
            op != SMELT_OP_BROADCAST && o->nvp < 0) {
            if ((st = view_params(r, (smelt_op)op, &o->nvp, o->vp)))
                return st;
            continue;
        }
        if (cls == SMELT_CLASS_GATHER && o->nvp < 0 && r->end - r->s > 5 && !strncmp(r->s, "axis ", 5)) {
            char w[32], *e;
            r->s += 5;
            ws(r);
            if ((st = word(r, w, sizeof w)))
                return st;
            o->vp[0] = strtoll(w, &e, 10);
            if (*e || !*w)
                return rerr(r, SMELT_ERR_PARSE, "%s: axis '%s' is not an integer", opname, w);
            o->nvp = 1;
            continue;
        }
        if (r->s < r->end && *r->s != '%') { /* a reduction's attributes */
            if ((st = reduce_attr(r, opname, cls, &o->nax, o->axes, &o->keepdims)))
                return st;
            continue;
        }
        if (o->na == 3)
            return rerr(r, SMELT_ERR_PARSE, "too many operands for %s", opname);
        int a;
        if ((st = ref(r, &a, &o->args[o->na], false)))
            return st;
        o->na++;
    }
    return SMELT_OK;
}

/* The builder's node for operator op (class cls) over o, with the line's
 * dtype dt and shape (ndim, sh), into *out (NULL: the builder's error) */
static int op_build(rd *r, int op, const char *opname, opline *o, smelt_dtype dt, int ndim, const int64_t *sh,
                    smelt_node **out)
{
    smelt_graph *g = r->g;
    int st, cls = smelt__ops[op].cls;
    smelt_node *n = NULL;
    if (cls == SMELT_CLASS_REDUCE) /* every axis: n_axes 0 (argmax of all axes takes no list) */
        n = smelt_reduce(g, (smelt_op)op, o->args[0],
                         o->nax && o->nax == o->args[0]->ndim && o->axes[o->nax - 1] == o->nax - 1 ? 0 : o->nax, o->axes,
                         o->keepdims);
    else if (cls == SMELT_CLASS_CAST)
        n = smelt_cast(g, o->args[0], dt);
    else if (op == SMELT_OP_BROADCAST)
        n = smelt_broadcast_to(g, o->args[0], ndim, sh);
    else if (op == SMELT_OP_MATMUL)
        n = smelt_matmul(g, o->args[0], o->args[1]);
    else if (smelt__window_nvp((smelt_op)op) > 0 && o->nvp < 0)
        return rerr(r, SMELT_ERR_PARSE, "%s needs its parameters: %s %%N [...] : ...", opname, opname);
    else if (smelt__window_nvp((smelt_op)op) > 0)
        n = smelt__window_node(g, (smelt_op)op, o->args, o->nvp, o->vp);
    else if (cls == SMELT_CLASS_GATHER && o->nvp != 1)
        return rerr(r, SMELT_ERR_PARSE, "%s needs its axis: %s %%A %%I axis N : ...", opname, opname);
    else if (cls == SMELT_CLASS_GATHER)
        n = (op == SMELT_OP_TAKE ? smelt_take : smelt_take_along_axis)(g, o->args[0], o->args[1], (int)o->vp[0]);
    else if (cls == SMELT_CLASS_VIEW && o->nvp < 0)
        return rerr(r, SMELT_ERR_PARSE, "%s needs its parameters: %s %%N [...] : ...", opname, opname);
    else if (op == SMELT_OP_CONCAT && o->nvp != 1)
        return rerr(r, SMELT_ERR_PARSE, "concat takes [axis]");
    else if (op == SMELT_OP_CONCAT)
        n = smelt_concat(g, 2, o->args, (int)o->vp[0]);
    else if (op == SMELT_OP_PAD && (o->nvp != 3 || !o->padval || o->vp[0] < 0 || o->vp[0] >= o->args[0]->ndim))
        return rerr(r, SMELT_ERR_PARSE, "pad takes [axis, before, after] value V, axis an axis of its operand");
    else if (op == SMELT_OP_PAD) {
        const char *at = r->s;
        double fv = 0;
        int64_t iv = 0, w[2 * SMELT_MAX_DIMS] = {0};
        r->s = o->padval;
        st = const_value(r, dt, &fv, &iv);
        r->s = at;
        if (st)
            return st;
        w[2 * o->vp[0]] = o->vp[1], w[2 * o->vp[0] + 1] = o->vp[2];
        if ((n = smelt_pad(g, o->args[0], w, smelt__is_float(dt) ? fv : (double)iv)) && dt == SMELT_I64)
            n->vp[3] = iv; /* (every bit, beyond 2^53 too) */
    } else if (cls == SMELT_CLASS_VIEW)
        n = smelt__view_node(g, (smelt_op)op, o->args[0], o->nvp, o->vp);
    else if (op == SMELT_OP_ARANGE && ndim != 1)
        return rerr(r, SMELT_ERR_PARSE, "arange has shape [n], the line gives rank %d", ndim);
    else if (op == SMELT_OP_ARANGE)
        n = smelt_arange(g, sh[0], dt);
    else
        n = smelt_op_apply(g, (smelt_op)op, o->na, o->args);
    *out = n;
    return SMELT_OK;
}

/* Whether node n (made by the builder from the line, the graph's node
 * before and after) is what the line says: one node of op, its dtype and
 * shape */
static int op_check(rd *r, int op, const char *opname, const opline *o, int before, smelt_node *n, smelt_dtype dt,
                    int ndim, const int64_t *sh)
{
    smelt_graph *g = r->g;
    int st, na = o->na;
    smelt_node *const *args = o->args;
    if (g->n != before + 1 || n != g->nodes[before] || (int)n->op != op) {
        smelt__sb b;
        smelt__sb_init(&b);
        for (int i = 0; i < na; i++)
            smelt__sb_printf(&b, i ? ", %s" : "%s", smelt__dtypes[args[i]->dtype].name);
        st = rerr(r, SMELT_ERR_PARSE,
                  "%s of (%s) is not one node of the builder: the file must spell every cast",
                  opname, smelt__sb_str(&b));
        smelt__sb_free(&b);
        return st;
    }
    if (n->dtype != dt || n->ndim != ndim || memcmp(n->shape, sh, sizeof(int64_t) * (size_t)ndim)) {
        smelt__sb b;
        smelt__sb_init(&b);
        smelt__sb_printf(&b, "%s ", smelt__dtypes[n->dtype].name);
        put_shape(&b, n->ndim, n->shape);
        smelt__sb_printf(&b, ", the file says %s ", smelt__dtypes[dt].name);
        put_shape(&b, ndim, sh);
        st = rerr(r, SMELT_ERR_PARSE, "%s gives %s", opname, smelt__sb_str(&b));
        smelt__sb_free(&b);
        return st;
    }
    return SMELT_OK;
}

/* One operator's line: %id = op operands : dtype shape */
static int op_line(rd *r, const char *opname, smelt_node **out)
{
    int op = smelt_op_from_name(opname), st, ndim = 0;
    if (op < 0)
        return rerr(r, SMELT_ERR_PARSE, "unknown operator '%s'", opname);
    int cls = smelt__ops[op].cls;
    if (cls == SMELT_CLASS_SOURCE && op != SMELT_OP_ARANGE)
        return rerr(r, SMELT_ERR_PARSE, "'%s' takes no operands", opname);
    opline o = {.nax = -1, .nvp = -1};
    smelt_dtype dt = SMELT_F32;
    int64_t sh[SMELT_MAX_DIMS];
    if ((st = op_operands(r, op, opname, &o)))
        return st;
    if (o.na != smelt__ops[op].arity)
        return rerr(r, SMELT_ERR_PARSE, "%s takes %d operand%s, the line has %d", opname,
                    smelt__ops[op].arity, smelt__ops[op].arity == 1 ? "" : "s", o.na);
    if ((st = dtype(r, &dt)) || (st = shape(r, &ndim, sh)))
        return st;
    int before = r->g->n;
    if (cls == SMELT_CLASS_REDUCE && o.nax < 0)
        return rerr(r, SMELT_ERR_PARSE, "%s needs its axes: %s %%N axes [A, ...] [keepdims] : ...", opname, opname);
    if ((st = op_build(r, op, opname, &o, dt, ndim, sh, out)))
        return st;
    if (!*out)
        return builder_error(r);
    return op_check(r, op, opname, &o, before, *out, dt, ndim, sh);
}

static int node_line(rd *r)
{
    int id, st;
    if ((st = ref(r, &id, NULL, true)))
        return st;
    if (!eat(r, '='))
        return rerr(r, SMELT_ERR_PARSE, "expected '=' after %%%d", id);
    char opname[40];
    if ((st = word(r, opname, sizeof opname)))
        return st;
    smelt_graph *g = r->g;
    smelt_node *n = NULL;
    smelt_dtype dt = SMELT_F32;
    int ndim = 0;
    int64_t sh[SMELT_MAX_DIMS];
    if (!strcmp(opname, "input")) {
        smelt__sb name;
        smelt__sb_init(&name);
        if ((st = quoted(r, &name)) || (st = dtype(r, &dt)) || (st = shape(r, &ndim, sh))) {
            smelt__sb_free(&name);
            return st;
        }
        n = smelt_input(g, smelt__sb_str(&name), dt, ndim, sh);
        smelt__sb_free(&name);
        if (!n)
            return builder_error(r);
    } else if (!strcmp(opname, "const")) {
        double fv = 0;
        int64_t iv = 0;
        if ((st = dtype(r, &dt)) || (st = const_value(r, dt, &fv, &iv)))
            return st;
        n = smelt_const(g, fv, dt);
        if (!n)
            return builder_error(r);
        if (dt == SMELT_F64 || (dt == SMELT_F32 && isnan(fv)))
            n->fval = fv; /* bit-exact, NaN payloads included */
        if (!smelt__is_float(dt)) {
            n->ival = iv;
            n->fval = (double)iv;
        }
    } else if (!strcmp(opname, "constant")) {
        if ((st = dtype(r, &dt)) || (st = shape(r, &ndim, sh)) || (st = tensor_values(r, dt, ndim, sh, &n)))
            return st;
    } else if ((st = op_line(r, opname, &n))) {
        return st;
    }
    if ((st = weak_flag(r, &n->weak)))
        return st;
    return define(r, id, n);
}

static int output_line(rd *r)
{
    int id, st;
    smelt_node *n;
    if ((st = ref(r, &id, &n, false)))
        return st;
    if (!at_end(r))
        return rerr(r, SMELT_ERR_PARSE, "unexpected '%c' after the output", *r->s);
    smelt_node **v = smelt__grow(r->outs, r->nout, &r->outcap, sizeof *v, 8);
    if (!v)
        return rerr(r, SMELT_ERR_NOMEM, "out of memory");
    r->outs = v;
    r->outs[r->nout++] = n;
    return SMELT_OK;
}

/* The first line that is not blank: "smelt-graph <version>". */
static int version_line(rd *r)
{
    char w[32];
    int64_t v;
    int st;
    if (word(r, w, sizeof w) || strcmp(w, "smelt-graph"))
        return rerr(r, SMELT_ERR_PARSE, "not a smelt graph file (the first line must be 'smelt-graph %d')",
                    FORMAT_VERSION);
    if ((st = word(r, w, sizeof w)) || (st = parse_int(r, w, 1, INT32_MAX, &v)))
        return st;
    if (v > FORMAT_VERSION)
        return rerr(r, SMELT_ERR_UNSUPPORTED, "graph file version %" PRId64 " is newer than this smelt reads (%d)",
                    v, FORMAT_VERSION);
    return at_end(r) ? SMELT_OK : rerr(r, SMELT_ERR_PARSE, "unexpected text after the version");
}

static int read_text(smelt_ctx *ctx, const char *what, const char *dir, const char *text, size_t len,
                     smelt_graph **gout, int *n_out, smelt_node ***outputs)
{
    rd r = {.ctx = ctx, .what = what, .dir = dir};
    int st = smelt_graph_new(ctx, &r.g);
    if (st)
        return st;
    bool have_version = false;
    const char *p = text, *end = text + len;
    while (!st && p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        const char *le = nl ? nl : end;
        r.line++;
        r.s = p;
        r.end = le > p && le[-1] == '\r' ? le - 1 : le;
        p = nl ? nl + 1 : end;
        char w[32];
        if (memchr(r.s, 0, (size_t)(r.end - r.s)))
            st = rerr(&r, SMELT_ERR_PARSE, "NUL byte in the file");
        else if (at_end(&r))
            continue;
        else if (!have_version)
            have_version = (st = version_line(&r)) == SMELT_OK;
        else if (*r.s == '%')
            st = node_line(&r);
        else if (!(st = word(&r, w, sizeof w)) && !strcmp(w, "output"))
            st = output_line(&r);
        else if (!st)
            st = rerr(&r, SMELT_ERR_PARSE, "unexpected '%s' (expected %%N = ... or output %%N)", w);
    }
    if (!st && !have_version) {
        r.line = 1;
        st = rerr(&r, SMELT_ERR_PARSE, "not a smelt graph file (empty)");
    }
    free(r.defs);
    if (st) {
        free(r.outs);
        smelt_graph_free(r.g);
        return st;
    }
    *gout = r.g;
    *n_out = r.nout;
    *outputs = r.outs;
    if (!r.outs && !(*outputs = malloc(sizeof **outputs))) {
        smelt_graph_free(r.g);
        *gout = NULL;
        return smelt__err(ctx, SMELT_ERR_NOMEM, "out of memory");
    }
    return SMELT_OK;
}

/* The arguments of a load: the output pointers, then the input (in, whose
 * NULL message is null_msg). */
static int check_args(smelt_ctx *ctx, const char *in, const char *null_msg, smelt_graph **g, int *n_out,
                      smelt_node ***outputs)
{
    if (!ctx)
        return SMELT_ERR_INVALID_ARG;
    if (!g || !n_out || !outputs)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "graph load: an output pointer is NULL");
    *g = NULL;
    *n_out = 0;
    *outputs = NULL;
    return in ? SMELT_OK : smelt__err(ctx, SMELT_ERR_INVALID_ARG, "%s", null_msg);
}

int smelt_graph_from_text(smelt_ctx *ctx, const char *text, smelt_graph **g, int *n_out,
                          smelt_node ***outputs)
{
    int st = check_args(ctx, text, "smelt_graph_from_text: text is NULL", g, n_out, outputs);
    return st ? st : read_text(ctx, "<text>", NULL, text, strlen(text), g, n_out, outputs);
}

int smelt_graph_load(smelt_ctx *ctx, const char *path, smelt_graph **g, int *n_out,
                     smelt_node ***outputs)
{
    int st = check_args(ctx, path, "smelt_graph_load: path is NULL", g, n_out, outputs);
    if (st)
        return st;
    size_t len = 0;
    errno = 0;
    char *text = smelt__read_file(path, MAX_FILE, &len);
    if (!text && errno == EFBIG)
        return smelt__err(ctx, SMELT_ERR_IO, "%s: larger than %u MiB; not a graph file", path, MAX_FILE >> 20);
    if (!text)
        return smelt__err(ctx, errno == ENOMEM ? SMELT_ERR_NOMEM : SMELT_ERR_IO, "cannot open '%s': %s",
                          path, smelt__open_strerror(errno ? errno : EIO));
    char *dir = smelt__strdup(path), *slash = dir ? strrchr(dir, '/') : NULL;
    if (slash)
        *slash = 0;
    st = read_text(ctx, path, slash ? dir : ".", text, len, g, n_out, outputs);
    free(text);
    free(dir);
    return st;
}
