/* The functions an expression may call (src/frontends/expr.c parses the
 * rest): ops.def's operators under their names and the NumPy aliases
 * below, reductions with NumPy's axis and keepdims, arange, layouts,
 * indexing, concat, pad, windows and scans (src/ir/window.c), casts. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "expr.h"

/* NumPy / numexpr spellings of operators of the table. */
static const struct {
    const char *alias, *op;
} aliases[] = {
    {"negative", "neg"},          {"absolute", "abs"},
    {"fabs", "abs"},              {"subtract", "sub"},
    {"multiply", "mul"},          {"divide", "div"},
    {"true_divide", "div"},       {"floor_divide", "floor_div"},
    {"remainder", "mod"},         {"power", "pow"},
    {"arcsin", "asin"},           {"arccos", "acos"},
    {"arctan", "atan"},           {"arctan2", "atan2"},
    {"arcsinh", "asinh"},         {"arccosh", "acosh"},
    {"arctanh", "atanh"},         {"equal", "eq"},
    {"not_equal", "ne"},          {"less", "lt"},
    {"less_equal", "le"},         {"greater", "gt"},
    {"greater_equal", "ge"},      {"around", "round"},
    {"clip", "clamp"},            {"conj", "copy"},
    {"conjugate", "copy"},
    {"invert", "bitwise_not"},    {"bitwise_invert", "bitwise_not"},
    {"bitwise_left_shift", "left_shift"},
    {"bitwise_right_shift", "right_shift"},
    {"amax", "max"},              {"amin", "min"},
};

/* numexpr's and NumPy's functions that smelt does not have (yet), and why
 * (a group's names end at a NULL). */
static const struct {
    const char *why, *names[19];
} unsupported[] = {
    {"smelt has no complex dtypes", {"real", "imag", "complex"}},
    {"smelt has no string dtypes", {"contains"}},
    {"this reduction is not supported yet (sum, prod, mean, max, min, argmax, argmin, any, all, var, std "
     "and logsumexp are)",
     {"cumsum", "cumprod", "norm", "softmax", "median", "ptp", "nansum",
      "nanmean", "nanmax", "nanmin", "average"}},
    {"this matrix product is not supported yet (matmul and @ are)", {"dot", "einsum", "inner", "outer", "tensordot"}},
    {"this layout operation is not supported yet (transpose, reshape, expand_dims, squeeze, flip, "
     "broadcast_to, concat, pad and slicing a[1:, ::2, None] are)",
     {"stack", "roll", "take", "tile", "repeat"}},
};

/* The alias table, one entry per call (NULL past the end): the expression
 * language's, the tests' and the Python package's one list of NumPy names. */
const char *smelt_op_alias(int i, const char **op)
{
    if (i < 0 || i >= (int)(sizeof aliases / sizeof aliases[0]))
        return NULL;
    if (op)
        *op = aliases[i].op;
    return aliases[i].alias;
}


/* Edit distance of a and b (at most 40 characters each), for "did you mean". */
static int edit_distance(const char *a, const char *b)
{
    size_t n = strlen(a), m = strlen(b);
    if (n > 40 || m > 40)
        return 99;
    int d[41][41];
    for (size_t i = 0; i <= n; i++)
        d[i][0] = (int)i;
    for (size_t j = 0; j <= m; j++)
        d[0][j] = (int)j;
    for (size_t i = 1; i <= n; i++)
        for (size_t j = 1; j <= m; j++) {
            int c = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            c = SMELT_MIN(c, d[i - 1][j] + 1);
            c = SMELT_MIN(c, d[i][j - 1] + 1);
            if (i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1])
                c = SMELT_MIN(c, d[i - 2][j - 2] + 1); /* a transposition */
            d[i][j] = c;
        }
    return d[n][m];
}

static bool callable_op(int op)
{
    return op >= 0 && (smelt__ops[op].cls == SMELT_CLASS_ELEMWISE || smelt__ops[op].cls == SMELT_CLASS_OPAQUE ||
                       smelt__ops[op].cls == SMELT_CLASS_REDUCE || smelt__ops[op].cls == SMELT_CLASS_LIBRARY);
}

/* The function name nearest to name (operators, aliases, dtype names),
 * if it is close enough to be a typo; NULL otherwise. */
static void consider(const char *name, const char *cand, int *bd, const char **best)
{
    /* twice the edit distance, one less for a candidate of the same length
     * (a transposition, "tahn" -> tanh, beats a deletion, -> tan) */
    int d = 2 * edit_distance(name, cand) - (strlen(cand) == strlen(name));
    if (d < *bd)
        *bd = d, *best = cand;
}

static const char *nearest_function(const char *name)
{
    const char *best = NULL;
    int bd = 2 * ((int)strlen(name) <= 4 ? 1 : 2) + 1; /* the most edits that count as a typo */
    for (int op = 0; op < SMELT_OP_COUNT; op++)
        if (callable_op(op))
            consider(name, smelt__ops[op].name, &bd, &best);
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        consider(name, aliases[i].alias, &bd, &best);
    for (int dt = 0; dt < SMELT_DTYPE_COUNT; dt++)
        consider(name, smelt_dtype_name((smelt_dtype)dt), &bd, &best);
    return best;
}

static const char *unsupported_function(const char *name)
{
    for (size_t i = 0; i < sizeof unsupported / sizeof unsupported[0]; i++)
        for (const char *const *n = unsupported[i].names; *n; n++)
            if (!strcmp(name, *n))
                return unsupported[i].why;
    return NULL;
}


/* Whether the current token is a name followed by '=' (not '=='): a
 * keyword argument. */
static bool at_keyword(P *p)
{
    if (p->t.kind != T_NAME)
        return false;
    size_t i = p->pos;
    while (i < p->len && is_space((unsigned char)p->s[i]))
        i++;
    return i < p->len && p->s[i] == '=' && (i + 1 >= p->len || p->s[i + 1] != '=');
}

/* An optional integer with an optional sign: *have false when the next
 * token is not one (nothing consumed). */
bool smelt__expr_opt_int(P *p, int64_t *v, bool *have)
{
    *have = false;
    bool neg = is_op(p, "-");
    if (neg || is_op(p, "+")) {
        smelt__expr_next(p);
        if (p->t.kind != T_INT) {
            smelt__expr_unexpected(p, " (expected an integer)");
            return false;
        }
    }
    if (p->t.kind != T_INT)
        return true;
    if (p->t.big && !neg) {
        smelt__expr_fail(p, p->t.pos, SMELT_ERR_PARSE, "integer at column %zu does not fit in int64", p->t.pos + 1);
        return false;
    }
    *v = p->t.big ? INT64_MIN : neg ? -p->t.ival : p->t.ival;
    *have = true;
    smelt__expr_next(p);
    return true;
}

/* An integer or a tuple of them (at most SMELT_MAX_DIMS, each of magnitude
 * lim at most): a shape, axes.  hint follows "unexpected ..." where an
 * integer is missing; too many entries, or too large a one, is "what at
 * column N: tmsg". */
static bool int_tuple(P *p, const char *hint, int64_t lim, const char *what, const char *tmsg, int *n, int64_t *v)
{
    bool have, tuple = is_op(p, "(");
    *n = 0;
    if (tuple)
        smelt__expr_next(p);
    while (!tuple || !is_op(p, ")")) {
        size_t pos = p->t.pos;
        if (*n < SMELT_MAX_DIMS && !smelt__expr_opt_int(p, &v[*n], &have))
            return false;
        if (*n < SMELT_MAX_DIMS && !have) {
            smelt__expr_unexpected(p, hint);
            return false;
        }
        if (*n == SMELT_MAX_DIMS || v[*n] > lim || v[*n] < -lim) {
            smelt__expr_fail(p, pos, SMELT_ERR_PARSE, "%s at column %zu: %s", what, pos + 1, tmsg);
            return false;
        }
        ++*n;
        if (!tuple)
            return true;
        if (is_op(p, ","))
            smelt__expr_next(p);
        else if (!is_op(p, ")")) {
            smelt__expr_unexpected(p, " (expected ',' or ')' in a tuple)");
            return false;
        }
    }
    smelt__expr_next(p); /* ')' */
    return true;
}

/* An axis value: None (every axis: *n 0, *none), an integer or a tuple of
 * them, each with an optional sign. */
static bool axis_value(P *p, int *n, int *axes, bool *none)
{
    *n = 0;
    *none = false;
    if (is_kw(p, "None")) {
        *none = true;
        smelt__expr_next(p);
        return true;
    }
    int64_t v[SMELT_MAX_DIMS];
    char tmsg[64];
    snprintf(tmsg, sizeof tmsg, "at most %d axes of rank %d at most", SMELT_MAX_DIMS, SMELT_MAX_DIMS);
    if (!int_tuple(p, " (an axis is an integer, a tuple of integers or None)", 1000, "axis", tmsg, n, v))
        return false;
    for (int i = 0; i < *n; i++)
        axes[i] = (int)v[i];
    if (!*n) {
        smelt__expr_fail(p, p->t.pos, SMELT_ERR_PARSE, "axis=() reduces no axis, which smelt does not support: leave the "
             "axis out (or give None) to reduce every axis");
        return false;
    }
    return true;
}

/* Composites of reductions, expanded here into the graph:
 *   var(a) = mean(d * d), d = a - mean(a, keepdims), two passes as NumPy
 *            (never E[a^2] - E[a]^2); with ddof, sum(d * d) / (n - ddof),
 *            n = sum(ones_like(d)) (the run's count, in d's dtype);
 *   std(a) = sqrt(var(a));
 *   logsumexp(a) = log(sum(exp(a - m))) + m, m = max(a) where finite, else 0
 *            (SciPy's: a row of -inf gives -inf, one with +inf gives +inf). */
enum { RED_PLAIN, RED_VAR, RED_STD, RED_LOGSUMEXP };

static smelt_node *finite_max(smelt_graph *g, smelt_node *a, int nax, const int *axes, int keep)
{
    smelt_node *m = smelt_reduce(g, SMELT_OP_MAX, a, nax, axes, keep);
    return smelt_where(g, smelt_unary(g, SMELT_OP_ISFINITE, m), m, smelt_scalar(g, 0));
}

static smelt_node *composite(smelt_graph *g, int kind, smelt_node *a, int nax, const int *axes, bool keep,
                             double ddof)
{
    if (kind == RED_LOGSUMEXP) {
        smelt_node *mk = finite_max(g, a, nax, axes, 1);
        smelt_node *s = smelt_reduce(g, SMELT_OP_SUM, smelt_unary(g, SMELT_OP_EXP, smelt_sub(g, a, mk)), nax, axes,
                                     keep);
        return smelt_add(g, smelt_unary(g, SMELT_OP_LOG, s), keep ? mk : finite_max(g, a, nax, axes, 0));
    }
    smelt_node *d = smelt_sub(g, a, smelt_reduce(g, SMELT_OP_MEAN, a, nax, axes, 1)), *dd = smelt_mul(g, d, d);
    smelt_node *v = ddof == 0 ? smelt_reduce(g, SMELT_OP_MEAN, dd, nax, axes, keep)
                              : smelt_div(g, smelt_reduce(g, SMELT_OP_SUM, dd, nax, axes, keep),
                                          smelt_sub(g, smelt_reduce(g, SMELT_OP_SUM, smelt_unary(g, SMELT_OP_ONES_LIKE, d),
                                                                    nax, axes, keep),
                                                    smelt_scalar(g, ddof)));
    return kind == RED_STD ? smelt_unary(g, SMELT_OP_SQRT, v) : v;
}

/* A reduction: NAME(a [, axis] [, axis=...] [, keepdims=...]), as NumPy's
 * functions take them (and numexpr's sum(a), prod(a)); var and std also
 * take ddof=. */
static val call_reduce(P *p, smelt_op op, const char *fname, size_t npos, int kind)
{
    double ddof = 0;
    bool have_ddof = false;
    smelt__expr_next(p); /* '(' */
    if (is_op(p, ")"))
        return smelt__expr_fail(p, npos, SMELT_ERR_PARSE, "%s() takes an array (and optionally axis, keepdims), got no argument "
                    "at column %zu", fname, npos + 1);
    val a = smelt__expr_expr(p);
    if (!a.n)
        return a;
    int nax = 0, axes[SMELT_MAX_DIMS];
    bool have_axis = false, have_keep = false, keep = false, none;
    while (!p->status && is_op(p, ",")) {
        smelt__expr_next(p);
        if (is_op(p, ")"))
            break;
        size_t kpos = p->t.pos;
        if (!at_keyword(p)) { /* NumPy's positional axis */
            if (have_axis || have_keep)
                return smelt__expr_fail(p, kpos, SMELT_ERR_PARSE, "%s() at column %zu: after the array and the axis, arguments "
                            "are keyword arguments (keepdims=True)", fname, kpos + 1);
            if (!axis_value(p, &nax, axes, &none))
                return NONE;
            have_axis = true;
            continue;
        }
        const char *kw = p->s + p->t.pos;
        size_t klen = p->t.len;
        smelt__expr_next(p); /* the name */
        smelt__expr_next(p); /* '=' */
        if (name_is(kw, klen, "axis")) {
            if (have_axis)
                return smelt__expr_fail(p, kpos, SMELT_ERR_PARSE, "%s() got axis twice at column %zu", fname, kpos + 1);
            if (!axis_value(p, &nax, axes, &none))
                return NONE;
            have_axis = true;
        } else if (name_is(kw, klen, "keepdims")) {
            if (have_keep)
                return smelt__expr_fail(p, kpos, SMELT_ERR_PARSE, "%s() got keepdims twice at column %zu", fname, kpos + 1);
            if (is_kw(p, "True") || is_kw(p, "False"))
                keep = is_kw(p, "True");
            else if (p->t.kind == T_INT && (p->t.ival == 0 || p->t.ival == 1))
                keep = p->t.ival == 1;
            else
                return smelt__expr_unexpected(p, " (keepdims is True or False)");
            smelt__expr_next(p);
            have_keep = true;
        } else if (name_is(kw, klen, "ddof") && (kind == RED_VAR || kind == RED_STD)) {
            if (have_ddof)
                return smelt__expr_fail(p, kpos, SMELT_ERR_PARSE, "%s() got ddof twice at column %zu", fname, kpos + 1);
            if (p->t.kind != T_INT || p->t.ival < 0 || p->t.ival > 1000000)
                return smelt__expr_unexpected(p, " (ddof is a whole number from 0)");
            ddof = (double)p->t.ival;
            smelt__expr_next(p);
            have_ddof = true;
        } else {
            bool numpy = name_is(kw, klen, "dtype") || name_is(kw, klen, "out") || name_is(kw, klen, "initial") ||
                         name_is(kw, klen, "where") || name_is(kw, klen, "ddof");
            return smelt__expr_fail(p, kpos, SMELT_ERR_PARSE, "%s() at column %zu: %s keyword argument '%.*s' (%s() takes axis=%s "
                        "and keepdims=)", fname, kpos + 1, numpy ? "the unsupported" : "unexpected",
                        (int)SMELT_MIN(klen, 40), kw, fname, kind == RED_VAR || kind == RED_STD ? ", ddof=" : "");
        }
    }
    if (p->status)
        return NONE;
    if (!is_op(p, ")"))
        return smelt__expr_unexpected(p, p->t.kind == T_END ? " (expected ')')" : " (expected ',' or ')')");
    smelt__expr_next(p); /* ')' */
    if (!p->build)
        return CHECKED;
    return smelt__expr_made(p, kind == RED_PLAIN ? smelt_reduce(p->g, op, a.n, nax, axes, keep)
                                     : composite(p->g, kind, a.n, nax, axes, keep, ddof), npos, NULL);
}

/* arange(n): 0, 1, ..., n - 1 as i64 (NumPy's default integer), n a whole
 * number. */
static val call_arange(P *p, size_t npos)
{
    smelt__expr_next(p); /* '(' */
    if (p->t.kind != T_INT || p->t.big || p->t.ival < 0)
        return smelt__expr_fail(p, p->t.pos, SMELT_ERR_PARSE, "arange() at column %zu takes one whole number n >= 0 "
                    "(arange(n): 0, 1, ..., n - 1)", npos + 1);
    int64_t n = p->t.ival;
    smelt__expr_next(p);
    if (!is_op(p, ")"))
        return smelt__expr_unexpected(p, " (arange(n) takes one argument)");
    smelt__expr_next(p); /* ')' */
    if (!p->build)
        return CHECKED;
    return smelt__expr_made(p, smelt_arange(p->g, n, SMELT_I64), npos, NULL);
}

/* Layout functions, NumPy's: transpose(a[, axes]), reshape(a, shape),
 * expand_dims(a, axis), squeeze(a, axis), flip(a, axis),
 * broadcast_to(a, shape); the second argument may be given by its keyword
 * (axes=, shape=, newshape=, axis=). */
static const char *const layout_fns[] = {"transpose", "reshape", "expand_dims", "squeeze", "flip", "broadcast_to",
                                         "permute_dims"};
enum { LF_TRANSPOSE, LF_RESHAPE, LF_EXPAND, LF_SQUEEZE, LF_FLIP, LF_BROADCAST, LF_PERMUTE, LF_N };

/* Past a comma and the argument's optional `name=`: whether a further
 * argument follows */
static bool next_argument(P *p)
{
    if (!is_op(p, ","))
        return false;
    smelt__expr_next(p);
    if (at_keyword(p)) {
        smelt__expr_next(p);
        smelt__expr_next(p);
    }
    return true;
}

static val call_layout(P *p, int kind, const char *fname, size_t npos)
{
    smelt__expr_next(p); /* '(' */
    val a = smelt__expr_expr(p);
    if (!a.n)
        return a;
    int n = -1;
    int64_t v[SMELT_MAX_DIMS];
    if (next_argument(p)) {
        char tmsg[32];
        snprintf(tmsg, sizeof tmsg, "more than %d entries", SMELT_MAX_DIMS);
        if (!int_tuple(p, " (expected an integer or a tuple of integers)", INT64_MAX,
                       kind == LF_RESHAPE || kind == LF_BROADCAST ? "shape" : "axes", tmsg, &n, v))
            return NONE;
    }
    if (!is_op(p, ")"))
        return smelt__expr_unexpected(p, p->t.kind == T_END ? " (expected ')')" : " (expected ',' or ')')");
    smelt__expr_next(p);
    bool axes_opt = kind == LF_TRANSPOSE || kind == LF_PERMUTE;
    if (n < 0 && !axes_opt)
        return smelt__expr_fail(p, npos, SMELT_ERR_PARSE, "%s() at column %zu takes an array and %s", fname, npos + 1,
                    kind == LF_RESHAPE || kind == LF_BROADCAST ? "a shape" : "an axis");
    if (n > 1 && (kind == LF_EXPAND || kind == LF_SQUEEZE || kind == LF_FLIP))
        return smelt__expr_fail(p, npos, SMELT_ERR_PARSE, "%s() at column %zu takes one axis", fname, npos + 1);
    if (!p->build)
        return CHECKED;
    smelt_graph *g = p->g;
    smelt_node *r = NULL;
    int perm[SMELT_MAX_DIMS];
    for (int d = 0; d < n; d++)
        perm[d] = v[d] < -1000 || v[d] > 1000 ? 1000 : (int)v[d];
    switch (kind) {
    case LF_TRANSPOSE:
    case LF_PERMUTE:
        if (n >= 0 && n != smelt_node_ndim(a.n))
            return smelt__expr_fail(p, npos, SMELT_ERR_PARSE, "%s() at column %zu: %d axes for an array of rank %d", fname,
                        npos + 1, n, smelt_node_ndim(a.n));
        r = smelt_transpose(g, a.n, n >= 0 ? perm : NULL);
        break;
    case LF_RESHAPE: r = smelt_reshape(g, a.n, n, v); break;
    case LF_EXPAND: r = smelt_expand_dims(g, a.n, perm[0]); break;
    case LF_SQUEEZE: r = smelt_squeeze(g, a.n, perm[0]); break;
    case LF_FLIP: r = smelt_flip(g, a.n, perm[0]); break;
    default: r = smelt_broadcast_to(g, a.n, n, v); break;
    }
    return smelt__expr_made(p, r, npos, NULL);
}

/* Indexed reads and their kin, NumPy's: take(a, indices[, axis]) (no
 * axis: a flattened), take_along_axis(a, indices, axis), tril(a[, k]),
 * triu(a[, k]); one_hot(indices, depth) (float32).  An integer argument
 * may be given by its keyword (axis=, k=, depth=). */
static const char *const index_fns[] = {"take", "take_along_axis", "one_hot", "tril", "triu"};
enum { IX_TAKE, IX_ALONG, IX_ONE_HOT, IX_TRIL, IX_TRIU, IX_N };

static val call_index(P *p, int kind, const char *fname, size_t npos)
{
    static const char *const usage[] = {"take(a, indices, axis)", "take_along_axis(a, indices, axis)",
                                        "one_hot(indices, depth)", "tril(a, k)", "triu(a, k)"};
    smelt__expr_next(p); /* '(' */
    val a = smelt__expr_expr(p), x = NONE;
    if (!a.n)
        return a;
    bool two = kind == IX_TAKE || kind == IX_ALONG;
    if (two) {
        if (!is_op(p, ","))
            return smelt__expr_fail(p, npos, SMELT_ERR_PARSE, "%s() at column %zu takes an array and its indices: %s", fname,
                        npos + 1, usage[kind]);
        smelt__expr_next(p);
        if (!(x = smelt__expr_expr(p)).n)
            return x;
    }
    int n = 0;
    int64_t v[SMELT_MAX_DIMS];
    if (next_argument(p)) {
        if (!int_tuple(p, " (expected an integer)", INT64_MAX, "argument", "more than one entry", &n, v))
            return NONE;
    }
    if (!is_op(p, ")"))
        return smelt__expr_unexpected(p, p->t.kind == T_END ? " (expected ')')" : " (expected ',' or ')')");
    smelt__expr_next(p);
    if (n > 1 || (n == 0 && (kind == IX_ALONG || kind == IX_ONE_HOT)))
        return smelt__expr_fail(p, npos, SMELT_ERR_PARSE, "%s() at column %zu: %s", fname, npos + 1, usage[kind]);
    if (!p->build)
        return CHECKED;
    smelt_graph *g = p->g;
    int ax = n && v[0] >= -1000 && v[0] <= 1000 ? (int)v[0] : 1000;
    smelt_node *r = NULL;
    switch (kind) {
    case IX_TAKE: r = n ? smelt_take(g, a.n, x.n, ax) : smelt_take(g, smelt_reshape(g, a.n, 1, (int64_t[]){-1}), x.n, 0); break;
    case IX_ALONG: r = smelt_take_along_axis(g, a.n, x.n, ax); break;
    case IX_ONE_HOT: r = smelt_one_hot(g, a.n, v[0], SMELT_F32); break;
    case IX_TRIL: r = smelt_tril(g, a.n, n ? v[0] : 0); break;
    default: r = smelt_triu(g, a.n, n ? v[0] : 0); break;
    }
    return smelt__expr_made(p, r, npos, NULL);
}

/* concat((a, b, ...)[, axis]) and concatenate: the parts as a tuple or a
 * list; axis (default 0) an integer, also by keyword. */
static val call_concat(P *p, const char *fname, size_t npos)
{
    smelt__expr_next(p); /* '(' */
    bool list = is_op(p, "[");
    if (!list && !is_op(p, "("))
        return smelt__expr_unexpected(p, " (concat takes a tuple of arrays: concat((a, b), axis=0))");
    smelt__expr_next(p);
    smelt_node *parts[64];
    int n = 0;
    while (!is_op(p, list ? "]" : ")")) {
        val v = smelt__expr_expr(p);
        if (!v.n)
            return v;
        if (n == 64)
            return smelt__expr_fail(p, npos, SMELT_ERR_PARSE, "%s() at column %zu: more than 64 arrays", fname, npos + 1);
        parts[n++] = v.n;
        if (is_op(p, ","))
            smelt__expr_next(p);
        else if (!is_op(p, list ? "]" : ")"))
            return smelt__expr_unexpected(p, list ? " (expected ',' or ']')" : " (expected ',' or ')')");
    }
    smelt__expr_next(p);
    int64_t axis = 0;
    if (is_op(p, ",")) {
        smelt__expr_next(p);
        if (at_keyword(p)) {
            if (!is_kw(p, "axis"))
                return smelt__expr_unexpected(p, " (concat's keyword is axis=)");
            smelt__expr_next(p);
            smelt__expr_next(p);
        }
        bool have;
        if (is_kw(p, "None"))
            return smelt__expr_fail(p, p->t.pos, SMELT_ERR_PARSE, "%s() at column %zu: axis=None (flattening) is not supported: "
                        "reshape the parts to 1-D first", fname, p->t.pos + 1);
        if (!smelt__expr_opt_int(p, &axis, &have))
            return NONE;
        if (!have)
            return smelt__expr_unexpected(p, " (the axis is an integer)");
        if (axis < -1000 || axis > 1000)
            axis = 1000;
    }
    if (!is_op(p, ")"))
        return smelt__expr_unexpected(p, p->t.kind == T_END ? " (expected ')')" : " (expected ',' or ')')");
    smelt__expr_next(p);
    if (!n)
        return smelt__expr_fail(p, npos, SMELT_ERR_PARSE, "%s() at column %zu needs at least one array", fname, npos + 1);
    if (!p->build)
        return CHECKED;
    return smelt__expr_made(p, smelt_concat(p->g, n, parts, (int)axis), npos, NULL);
}

/* pad(a, pad_width[, constant_values=v]), NumPy's (mode 'constant'):
 * pad_width an integer (every side), (before, after) (every axis) or one
 * pair per axis ((b0, a0), (b1, a1), ...); v a number (default 0). */
static val call_pad(P *p, const char *fname, size_t npos)
{
    smelt__expr_next(p); /* '(' */
    val a = smelt__expr_expr(p);
    if (!a.n)
        return a;
    if (!is_op(p, ","))
        return smelt__expr_fail(p, npos, SMELT_ERR_PARSE, "%s() at column %zu takes an array and its pad widths: "
                    "pad(a, ((1, 1), (0, 2)))", fname, npos + 1);
    smelt__expr_next(p);
    if (at_keyword(p) && is_kw(p, "pad_width")) {
        smelt__expr_next(p);
        smelt__expr_next(p);
    }
    int64_t w[SMELT_MAX_DIMS][2];
    int npairs = 0;
    char tmsg[40];
    snprintf(tmsg, sizeof tmsg, "more than %d entries", SMELT_MAX_DIMS);
    size_t wpos = p->t.pos;
    bool nested = false;
    if (is_op(p, "(")) { /* ((b, a), ...) or (b, a) or (k,) */
        size_t save = p->pos;
        tok t = p->t;
        smelt__expr_next(p);
        nested = is_op(p, "(");
        p->pos = save, p->t = t;
    }
    if (nested) {
        smelt__expr_next(p);
        while (!is_op(p, ")")) {
            int k;
            int64_t v[SMELT_MAX_DIMS];
            if (npairs == SMELT_MAX_DIMS)
                return smelt__expr_fail(p, wpos, SMELT_ERR_PARSE, "pad widths at column %zu: %s", wpos + 1, tmsg);
            if (!int_tuple(p, " (a pad width is an integer)", INT64_MAX, "pad widths", tmsg, &k, v))
                return NONE;
            if (k != 2)
                return smelt__expr_fail(p, wpos, SMELT_ERR_PARSE, "pad widths at column %zu: each axis takes (before, after)",
                            wpos + 1);
            w[npairs][0] = v[0], w[npairs][1] = v[1], npairs++;
            if (is_op(p, ","))
                smelt__expr_next(p);
            else if (!is_op(p, ")"))
                return smelt__expr_unexpected(p, " (expected ',' or ')' in a tuple)");
        }
        smelt__expr_next(p);
    } else {
        int k;
        int64_t v[SMELT_MAX_DIMS];
        if (!int_tuple(p, " (pad widths: an integer, (before, after) or ((b0, a0), (b1, a1), ...))", INT64_MAX,
                       "pad widths", tmsg, &k, v))
            return NONE;
        if (k != 1 && k != 2)
            return smelt__expr_fail(p, wpos, SMELT_ERR_PARSE, "pad widths at column %zu: an integer, (before, after) or one "
                        "pair per axis", wpos + 1);
        w[0][0] = v[0], w[0][1] = v[k - 1], npairs = -1; /* (every axis) */
    }
    double value = 0;
    if (is_op(p, ",")) {
        smelt__expr_next(p);
        if (!at_keyword(p) || !is_kw(p, "constant_values"))
            return smelt__expr_unexpected(p, " (pad's other argument is constant_values=)");
        smelt__expr_next(p);
        smelt__expr_next(p);
        bool neg = is_op(p, "-");
        if (neg || is_op(p, "+"))
            smelt__expr_next(p);
        if (p->t.kind == T_INT)
            value = p->t.big ? 9223372036854775808.0 : (double)p->t.ival;
        else if (p->t.kind == T_FLOAT)
            value = p->t.fval;
        else if (is_kw(p, "inf") || is_kw(p, "nan") || is_kw(p, "True") || is_kw(p, "False"))
            value = is_kw(p, "inf") ? INFINITY : is_kw(p, "nan") ? NAN : is_kw(p, "True");
        else
            return smelt__expr_unexpected(p, " (constant_values is a number)");
        value = neg ? -value : value;
        smelt__expr_next(p);
    }
    if (!is_op(p, ")"))
        return smelt__expr_unexpected(p, p->t.kind == T_END ? " (expected ')')" : " (expected ',' or ')')");
    smelt__expr_next(p);
    if (!p->build)
        return CHECKED;
    int r = smelt_node_ndim(a.n);
    if (npairs >= 0 && npairs != r && npairs != 1)
        return smelt__expr_fail(p, wpos, SMELT_ERR_PARSE, "pad widths at column %zu: %d pairs for an array of rank %d", wpos + 1,
                    npairs, r);
    int64_t flat[2 * SMELT_MAX_DIMS];
    for (int d = 0; d < r; d++) {
        int k = npairs == r ? d : 0;
        flat[2 * d] = w[k][0], flat[2 * d + 1] = w[k][1];
    }
    return smelt__expr_made(p, smelt_pad(p->g, a.n, flat, value), npos, NULL);
}



/* Windows and scans (src/ir/window.c): conv(x, w[, b], strides=, pads=,
 * dilations=, groups=), max_pool(x, kernel=, strides=, pads=, dilations=,
 * ceil_mode=), avg_pool(x, kernel=, strides=, pads=, ceil_mode=,
 * count_include_pad=), global_max_pool(x), global_avg_pool(x),
 * cumsum(a[, axis], exclusive=, reverse=), cumprod(...).  A window's
 * entries are per spatial axis: an integer (every axis), a tuple of one
 * per axis, and pads also a tuple (before..., after...) of two per axis
 * (ONNX's order).  cumsum of an array of rank > 1 without an axis: of the
 * array flattened, as NumPy's. */
static const char *const window_fns[] = {"conv", "max_pool", "avg_pool", "global_max_pool", "global_avg_pool",
                                         "cumsum", "cumprod"};
enum { WF_CONV, WF_MAXPOOL, WF_AVGPOOL, WF_GMAX, WF_GAVG, WF_CUMSUM, WF_CUMPROD, WF_N };

static val call_window(P *p, int kind, const char *fname, size_t npos)
{
    smelt__expr_next(p); /* '(' */
    val a[3] = {NONE, NONE, NONE};
    int na = 0, maxpos = kind == WF_CONV ? 3 : 1;
    smelt_window win;
    smelt_window_init(&win);
    int64_t kv[4][SMELT_MAX_DIMS]; /* kernel, strides, pads, dilations as given */
    int kn[4] = {-1, -1, -1, -1};
    int64_t axis = INT64_MIN, flags[3] = {0, 0, 0}; /* groups / ceil_mode / count_include_pad; exclusive, reverse */
    static const char *const names[] = {"kernel", "strides", "pads", "dilations"};
    static const char *const fnames[] = {"groups", "ceil_mode", "count_include_pad", "exclusive", "reverse", "axis"};
    char tmsg[40];
    snprintf(tmsg, sizeof tmsg, "more than %d entries", SMELT_MAX_DIMS);
    while (!p->status && !is_op(p, ")")) {
        if (at_keyword(p)) {
            size_t kpos = p->t.pos, klen = p->t.len;
            const char *kw = p->s + kpos;
            smelt__expr_next(p);
            smelt__expr_next(p); /* '=' */
            int which = -1, fw = -1;
            for (int k = 0; k < 4; k++)
                which = name_is(kw, klen, names[k]) ? k : which;
            for (int k = 0; k < 6; k++)
                fw = name_is(kw, klen, fnames[k]) ? k : fw;
            bool scan = kind == WF_CUMSUM || kind == WF_CUMPROD;
            if (which >= 0 && !scan && kind != WF_GMAX && kind != WF_GAVG) {
                if (!int_tuple(p, " (expected an integer or a tuple of integers)", INT64_MAX / 4, names[which], tmsg,
                               &kn[which], kv[which]))
                    return NONE;
            } else if (fw >= 0 && (scan ? fw >= 3 : fw < 3 && (fw == 0) == (kind == WF_CONV))) {
                int64_t v = 0;
                bool have;
                if (is_kw(p, "True") || is_kw(p, "False")) {
                    v = is_kw(p, "True");
                    smelt__expr_next(p);
                } else if (!smelt__expr_opt_int(p, &v, &have) || !have) {
                    return p->status ? NONE : smelt__expr_unexpected(p, " (expected an integer, True or False)");
                }
                if (fw == 5)
                    axis = v;
                else
                    flags[scan ? fw - 3 : fw] = v;
            } else {
                return smelt__expr_fail(p, kpos, SMELT_ERR_PARSE, "%s() at column %zu: unexpected keyword argument '%.*s'",
                            fname, kpos + 1, (int)SMELT_MIN(klen, 40), kw);
            }
        } else if ((kind == WF_CUMSUM || kind == WF_CUMPROD) && na == 1) {
            bool have;
            if (!smelt__expr_opt_int(p, &axis, &have) || !have)
                return p->status ? NONE : smelt__expr_unexpected(p, " (expected an axis)");
        } else {
            size_t apos = p->t.pos;
            val v = smelt__expr_expr(p);
            if (!v.n)
                return v;
            if (na == maxpos)
                return smelt__expr_fail(p, apos, SMELT_ERR_PARSE, "%s() at column %zu: too many arrays", fname, apos + 1);
            a[na++] = v;
        }
        if (is_op(p, ","))
            smelt__expr_next(p);
        else if (!is_op(p, ")"))
            return smelt__expr_unexpected(p, p->t.kind == T_END ? " (expected ')')" : " (expected ',' or ')')");
    }
    if (p->status)
        return NONE;
    smelt__expr_next(p); /* ')' */
    if (na < (kind == WF_CONV ? 2 : 1))
        return smelt__expr_fail(p, npos, SMELT_ERR_PARSE, "%s() at column %zu takes %s", fname, npos + 1,
                    kind == WF_CONV ? "x and the weights (and a bias)" : "an array");
    if ((kind == WF_MAXPOOL || kind == WF_AVGPOOL) && kn[0] < 0)
        return smelt__expr_fail(p, npos, SMELT_ERR_PARSE, "%s() at column %zu needs kernel=", fname, npos + 1);
    if (!p->build)
        return CHECKED;
    smelt_graph *g = p->g;
    smelt_node *x = a[0].n, *r = NULL;
    int ns = smelt_node_ndim(x) - 2, i0 = ns == 1 ? 1 : 0;
    for (int k = 0; k < 4; k++) { /* the entries into the window's (h, w) slots */
        int64_t *dst = k == 0 ? win.kernel : k == 1 ? win.strides : k == 2 ? win.pads : win.dilations;
        if (kn[k] < 0)
            continue;
        int per = k == 2 ? 2 : 1;
        if (kn[k] != 1 && kn[k] != ns && kn[k] != per * ns)
            return smelt__expr_fail(p, npos, SMELT_ERR_PARSE, "%s() at column %zu: %s has %d entries (1%s for %d spatial axes)",
                        fname, npos + 1, names[k], kn[k], k == 2 ? ", one per axis or two" : " or one per axis",
                        ns > 0 ? ns : 0);
        for (int i = 0; i < ns && ns <= 2; i++) {
            if (k == 2) {
                dst[i0 + i] = kv[k][kn[k] == 1 ? 0 : i];
                dst[2 + i0 + i] = kv[k][kn[k] == 1 ? 0 : kn[k] == ns ? i : ns + i];
            } else {
                dst[i0 + i] = kv[k][kn[k] == 1 ? 0 : i];
            }
        }
    }
    switch (kind) {
    case WF_CONV:
        win.groups = flags[0] ? flags[0] : 1;
        r = smelt_conv(g, x, a[1].n, na > 2 ? a[2].n : NULL, &win);
        break;
    case WF_MAXPOOL:
    case WF_AVGPOOL:
        win.ceil_mode = (int)flags[1], win.count_include_pad = (int)flags[2];
        r = kind == WF_MAXPOOL ? smelt_max_pool(g, x, &win) : smelt_avg_pool(g, x, &win);
        break;
    case WF_GMAX: r = smelt_global_max_pool(g, x); break;
    case WF_GAVG: r = smelt_global_avg_pool(g, x); break;
    default:
        if (axis == INT64_MIN && smelt_node_ndim(x) > 1)
            x = smelt_reshape(g, x, 1, (int64_t[]){-1});
        axis = axis == INT64_MIN ? 0 : axis;
        if (axis < -1000 || axis > 1000)
            axis = 1000;
        r = (kind == WF_CUMSUM ? smelt_cumsum : smelt_cumprod)(g, x, (int)axis, (int)flags[0], (int)flags[1]);
        break;
    }
    return smelt__expr_made(p, r, npos, NULL);
}

val smelt__expr_call(P *p, size_t npos, size_t nlen)
{
    const char *name = p->s + npos;
    char fname[64];
    snprintf(fname, sizeof fname, "%.*s", (int)SMELT_MIN(nlen, 40), name);
    /* resolve: alias, operator of the table, dtype name (a cast) */
    static const char *const composites[] = {"var", "std", "logsumexp"};
    for (int k = 0; k < 3; k++)
        if (!strcmp(fname, composites[k]))
            return call_reduce(p, SMELT_OP_SUM, fname, npos, RED_VAR + k);
    if (!strcmp(fname, "arange"))
        return call_arange(p, npos);
    if (!strcmp(fname, "concat") || !strcmp(fname, "concatenate"))
        return call_concat(p, fname, npos);
    if (!strcmp(fname, "pad"))
        return call_pad(p, fname, npos);
    for (int k = 0; k < IX_N; k++)
        if (!strcmp(fname, index_fns[k]))
            return call_index(p, k, fname, npos);
    for (int k = 0; k < LF_N; k++)
        if (!strcmp(fname, layout_fns[k]))
            return call_layout(p, k, fname, npos);
    for (int k = 0; k < WF_N; k++)
        if (!strcmp(fname, window_fns[k]))
            return call_window(p, k, fname, npos);
    const char *canon = fname;
    for (size_t i = 0; i < sizeof aliases / sizeof aliases[0]; i++)
        if (!strcmp(fname, aliases[i].alias))
            canon = aliases[i].op;
    int op = nlen < 40 ? smelt_op_from_name(canon) : -1;
    if (!callable_op(op))
        op = -1;
    int cast_dt = op < 0 && nlen < 40 ? smelt_dtype_from_name(fname) : -1;
    if (op < 0 && cast_dt < 0) {
        const char *why = unsupported_function(fname), *near = why ? NULL : nearest_function(fname);
        if (why)
            return smelt__expr_fail(p, npos, SMELT_ERR_PARSE, "%s() at column %zu: %s; smelt fuses elementwise "
                        "operations (smelt info --ops lists them)", fname, npos + 1, why);
        return smelt__expr_fail(p, npos, SMELT_ERR_PARSE, "unknown function '%s' at column %zu (%s%s%s"
                    "smelt info --ops lists the functions)", fname, npos + 1,
                    near ? "did you mean " : "", near ? near : "", near ? "? " : "");
    }
    if (op >= 0 && smelt__ops[op].cls == SMELT_CLASS_REDUCE)
        return call_reduce(p, (smelt_op)op, fname, npos, RED_PLAIN);
    int arity = op >= 0 ? smelt__ops[op].arity : 1;

    smelt__expr_next(p); /* '(' */
    val a[3] = {NONE, NONE, NONE};
    int n = 0;
    while (!p->status && !is_op(p, ")")) {
        if (at_keyword(p))
            return smelt__expr_fail(p, p->t.pos, SMELT_ERR_PARSE, "%s() at column %zu takes no keyword arguments (those are "
                        "the reductions': sum(a, axis=1, keepdims=True))", fname, p->t.pos + 1);
        val v = smelt__expr_expr(p);
        if (!v.n)
            return v;
        if (n < 3)
            a[n] = v;
        n++;
        if (is_op(p, ","))
            smelt__expr_next(p);
        else if (!is_op(p, ")"))
            return smelt__expr_unexpected(p, n == 1 && p->t.kind == T_END ? " (expected ')')" : " (expected ',' or ')')");
    }
    if (p->status)
        return NONE;
    smelt__expr_next(p); /* ')' */
    if (n != arity)
        return smelt__expr_fail(p, npos, SMELT_ERR_PARSE, "%s() takes %d argument%s, got %d at column %zu", fname,
                    arity, arity == 1 ? "" : "s", n, npos + 1);
    if (op >= 0) {
        /* NumPy's functions return NumPy scalars, which are strongly typed:
         * f32 * cos(3) is f64, where f32 * (3 + 5) is f32 */
        val r = smelt__expr_apply(p, (smelt_op)op, n, a, npos, NULL);
        if (p->build && r.n)
            r.n->weak = false;
        return r;
    }
    if (!p->build)
        return CHECKED;
    return smelt__expr_made(p, smelt_cast(p->g, a[0].n, (smelt_dtype)cast_dt), npos, NULL);
}
