/* The expression language: numexpr / NumPy syntax parsed into graph nodes.
 *
 *   where(a > 0, a*b, exp(c)) + 1
 *
 * Grammar (Python's precedence, lowest first):
 *   expr       := or_test
 *   or_test    := and_test ('or' and_test)*
 *   and_test   := not_test ('and' not_test)*
 *   not_test   := 'not' not_test | comparison
 *   comparison := bor (('<'|'<='|'>'|'>='|'=='|'!=') bor)*     chained as in Python
 *   bor        := bxor ('|' bxor)*
 *   bxor       := band ('^' band)*
 *   band       := shift ('&' shift)*
 *   shift      := arith (('<<'|'>>') arith)*
 *   arith      := term (('+'|'-') term)*
 *   term       := factor (('*'|'/'|'//'|'%') factor)*
 *   factor     := ('+'|'-'|'~') factor | power
 *   power      := primary ['**' factor]
 *   primary    := NUMBER | NAME | NAME '(' [expr (',' expr)* [',']] ')' | '(' expr ')'
 *               | REDUCTION '(' expr [',' axis] (',' NAME '=' (axis | bool))* [','] ')'
 *   axis       := None | INT | '(' [INT (',' INT)* [',']] ')'         INT: with an optional sign
 *
 * Functions are the elementwise (and opaque: barrier) operators of
 * src/ir/ops.def under their own names, its reductions (sum, mean, max, ...,
 * NumPy's: sum(a), sum(a, 1), max(a, axis=-1, keepdims=True),
 * mean(a, axis=(0, 2)); keyword arguments are theirs only), plus the
 * NumPy spellings of the alias
 * table below (the only other list of names, beside numexpr's functions
 * that smelt refuses with a reason), plus the dtype names as casts
 * (float32(x), i64(x), ...).  & | ^ ~ are logical on bool operands (the
 * builder's doing) and bitwise otherwise; number literals are weak scalars
 * (NEP 50), function results strong (NumPy scalars).
 *
 * The expression is parsed twice: a check pass that builds nothing (so a
 * syntax error leaves the graph untouched), then a build pass.  Recursion is
 * bounded (MAX_DEPTH); every loop over binary operators is iterative, so no
 * input can exhaust the stack. */
#include <locale.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

#define MAX_DEPTH 200

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

enum { T_END, T_INT, T_FLOAT, T_NAME, T_OP };

typedef struct tok {
    int kind;
    size_t pos, len;
    int64_t ival;
    double fval;
    bool big; /* 2^63 (ival INT64_MIN): only as the operand of a unary minus */
} tok;

/* A parsed value: a node (a placeholder in the check pass); lit marks a
 * number literal just made, which a unary minus negates in place. */
typedef struct val {
    smelt_node *n;
    bool lit;
} val;

typedef struct P {
    const char *s;
    size_t len, pos;
    tok t;
    smelt_graph *g;
    bool build;
    const char *const *names;
    smelt_node *const *nodes;
    int n;
    int depth;
    size_t neg_at; /* 1 + the position of the operand of the last unary minus */
    int status;
    smelt__sb msg;
    size_t errpos;
} P;

static smelt_node placeholder; /* never written */
#define CHECKED ((val){&placeholder, false})
#define NONE ((val){NULL, false})

static val fail(P *p, size_t pos, int status, const char *fmt, ...) SMELT_PRINTF(4, 5);
static val fail(P *p, size_t pos, int status, const char *fmt, ...)
{
    if (p->status)
        return NONE;
    p->status = status;
    p->errpos = pos;
    va_list ap;
    va_start(ap, fmt);
    smelt__sb_vprintf(&p->msg, fmt, ap);
    va_end(ap);
    return NONE;
}

static bool is_alpha(int c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
static bool is_digit(int c) { return c >= '0' && c <= '9'; }
static bool is_space(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* "unexpected <the current token> at column N", extra appended. */
static val unexpected(P *p, const char *extra)
{
    char b[64];
    unsigned char c = (unsigned char)p->s[p->t.pos]; /* pos <= len: the NUL at worst */
    if (p->t.kind == T_END)
        snprintf(b, sizeof b, "end of expression");
    else if (p->t.len == 1 && (c < 0x20 || c > 0x7e))
        snprintf(b, sizeof b, "byte 0x%02x", c);
    else
        snprintf(b, sizeof b, "'%.*s'", (int)SMELT_MIN(p->t.len, 40), p->s + p->t.pos);
    if (!extra && p->t.kind == T_OP && p->t.len == 1 && c == '=')
        extra = " (use == to compare; keyword arguments are those of reductions: sum(a, axis=1, keepdims=True))";
    return fail(p, p->t.pos, SMELT_ERR_PARSE, "unexpected %s at column %zu%s", b, p->t.pos + 1,
                extra ? extra : "");
}

static int digit_value(int c)
{
    c |= 0x20; /* lower case; digits keep their value */
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'z' ? c - 'a' + 10 : 99;
}

/* Digits of base from i to the returned end.  Underscores as in Python:
 * one between two digits, or right after a base prefix (0x_ff). */
static size_t scan_digits(P *p, size_t i, int base, bool prefixed)
{
    const char *s = p->s;
    for (size_t start = i; i < p->len; i++) {
        if (s[i] != '_') {
            if (digit_value(s[i]) >= base)
                break;
            continue;
        }
        bool after = i > start ? s[i - 1] != '_' : prefixed;
        if (!after || i + 1 >= p->len || digit_value(s[i + 1]) >= base) {
            fail(p, i, SMELT_ERR_PARSE, "unexpected '_' at column %zu (invalid number literal)", i + 1);
            return i;
        }
    }
    return i;
}

/* The value of an integer literal's digits (underscores skipped): up to
 * 2^63, which only a unary minus makes fit (t->big). */
static void int_value(P *p, tok *t, size_t from, size_t to, int base)
{
    uint64_t v = 0, lim = (uint64_t)INT64_MAX + 1;
    for (size_t k = from; k < to; k++) {
        if (p->s[k] == '_')
            continue;
        uint64_t d = (uint64_t)digit_value(p->s[k]);
        if (v > (lim - d) / (uint64_t)base) {
            fail(p, t->pos, SMELT_ERR_PARSE, "integer literal %.*s at column %zu does not fit in int64",
                 (int)SMELT_MIN(to - t->pos, 40), p->s + t->pos, t->pos + 1);
            return;
        }
        v = v * (uint64_t)base + d;
    }
    t->ival = (int64_t)v; /* 2^63 wraps to INT64_MIN */
    t->big = v == lim;
}

static void lex_number(P *p)
{
    const char *s = p->s;
    size_t i = p->pos, start = i;
    tok *t = &p->t;
    t->kind = T_INT;
    t->pos = start;
    int prefix = s[i] == '0' && i + 1 < p->len ? s[i + 1] | 0x20 : 0;
    int base = prefix == 'x' ? 16 : prefix == 'o' ? 8 : prefix == 'b' ? 2 : 10;
    if (base != 10) {
        size_t d0 = i + 2;
        i = scan_digits(p, d0, base, true);
        if (p->status)
            return;
        if (i == d0) {
            t->pos = i;
            t->len = i < p->len ? 1 : 0;
            t->kind = i < p->len ? T_OP : T_END;
            unexpected(p, NULL);
            return;
        }
        int_value(p, t, d0, i, base);
    } else {
        bool is_float = false;
        i = scan_digits(p, i, 10, false);
        if (i < p->len && s[i] == '.') {
            is_float = true;
            i = scan_digits(p, i + 1, 10, false);
        }
        if (!p->status && i < p->len && (s[i] | 0x20) == 'e') {
            size_t e = i + 1;
            if (e < p->len && (s[e] == '+' || s[e] == '-'))
                e++;
            if (e < p->len && is_digit(s[e])) {
                is_float = true;
                i = scan_digits(p, e, 10, false);
            }
        }
        if (p->status)
            return;
        if (is_float) {
            smelt__sb b;
            smelt__sb_init(&b);
            for (size_t k = start; k < i; k++)
                if (s[k] != '_')
                    smelt__sb_putn(&b, s + k, 1);
            char *end;
            t->kind = T_FLOAT;
            t->fval = b.oom ? 0 : smelt__strtod(b.s, &end);
            if (b.oom)
                fail(p, start, SMELT_ERR_NOMEM, "out of memory");
            smelt__sb_free(&b);
        } else {
            int_value(p, t, start, i, 10);
        }
    }
    if (p->status)
        return;
    t->len = i - start;
    p->pos = i;
    if (i < p->len && (is_alpha(s[i]) || is_digit(s[i]))) {
        if ((s[i] | 0x20) == 'j')
            fail(p, start, SMELT_ERR_PARSE, "complex literal at column %zu: complex numbers are not supported",
                 start + 1);
        else
            fail(p, i, SMELT_ERR_PARSE, "unexpected '%c' at column %zu (invalid number literal)", s[i], i + 1);
    }
}

static void next(P *p)
{
    const char *s = p->s;
    while (p->pos < p->len && is_space((unsigned char)s[p->pos]))
        p->pos++;
    tok *t = &p->t;
    memset(t, 0, sizeof *t);
    t->pos = p->pos;
    if (p->pos >= p->len) {
        t->kind = T_END;
        return;
    }
    int c = (unsigned char)s[p->pos];
    if (is_digit(c) || (c == '.' && p->pos + 1 < p->len && is_digit(s[p->pos + 1]))) {
        lex_number(p);
        if (p->status)
            t->kind = T_END; /* stop the parse; the error is recorded */
        return;
    }
    if (is_alpha(c)) {
        size_t i = p->pos;
        while (i < p->len && (is_alpha(s[i]) || is_digit(s[i])))
            i++;
        t->kind = T_NAME;
        t->len = i - p->pos;
        p->pos = i;
        return;
    }
    static const char *const two[] = {"**", "//", "<<", ">>", "<=", ">=", "==", "!="};
    t->kind = T_OP;
    for (size_t k = 0; k < sizeof two / sizeof two[0]; k++)
        if (p->pos + 1 < p->len && s[p->pos] == two[k][0] && s[p->pos + 1] == two[k][1]) {
            t->len = 2;
            p->pos += 2;
            return;
        }
    t->len = 1;
    p->pos++;
    if (!strchr("+-*/%<>&|^~(),=.[]:@", c) || c == 0) {
        /* NumPy syntax smelt does not have (yet): say so */
        unexpected(p, c == '!' ? " (use ~ or 'not' to negate)" : NULL);
        t->kind = T_END; /* stop the parse; the error is recorded */
    }
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

static bool name_is(const char *s, size_t len, const char *name)
{
    return strlen(name) == len && !memcmp(s, name, len);
}

static bool is_op(P *p, const char *op) { return p->t.kind == T_OP && name_is(p->s + p->t.pos, p->t.len, op); }
static bool is_kw(P *p, const char *kw) { return p->t.kind == T_NAME && name_is(p->s + p->t.pos, p->t.len, kw); }

/* A builder error of the graph, located at pos. */
static val graph_fail(P *p, size_t pos, const char *sym)
{
    int st = p->g->status ? p->g->status : SMELT_ERR_INVALID_ARG;
    const char *m = smelt__sb_str(&p->g->err);
    if (sym)
        return fail(p, pos, st, "%s at column %zu ('%s')", m, pos + 1, sym);
    return fail(p, pos, st, "%s at column %zu", m, pos + 1);
}

/* A node the builder made (NULL: its error, located at pos). */
static val made(P *p, smelt_node *n, size_t pos, const char *sym)
{
    return n ? (val){n, false} : graph_fail(p, pos, sym);
}

static val apply(P *p, smelt_op op, int n, const val *a, size_t pos, const char *sym)
{
    if (!p->build)
        return CHECKED;
    smelt_node *args[3] = {NULL, NULL, NULL};
    for (int i = 0; i < n; i++)
        args[i] = a[i].n;
    if (op == SMELT_OP_MATMUL)
        return made(p, smelt_matmul(p->g, args[0], args[1]), pos, sym);
    return made(p, smelt_op_apply(p->g, op, n, args), pos, sym);
}

static val apply2(P *p, smelt_op op, val a, val b, size_t pos, const char *sym)
{
    val v[2] = {a, b};
    return apply(p, op, 2, v, pos, sym);
}

static val literal(P *p, const tok *t)
{
    if (!p->build)
        return CHECKED;
    smelt_node *n;
    if (t->kind == T_FLOAT) {
        n = smelt_const(p->g, t->fval, SMELT_F64);
    } else {
        n = smelt_const(p->g, (double)t->ival, SMELT_I64);
        if (n) { /* exact, beyond 2^53 too */
            n->ival = t->ival;
            n->fval = (double)t->ival;
        }
    }
    if (!n)
        return graph_fail(p, t->pos, NULL);
    n->weak = true; /* a Python number: NEP 50 weak scalar */
    return (val){n, true};
}

static val expr(P *p);
static val factor(P *p);

static smelt_node *lookup_var(P *p, const char *s, size_t len)
{
    for (int i = 0; i < p->n; i++)
        if (p->names[i] && name_is(s, len, p->names[i]))
            return p->nodes[i];
    for (int i = 0; i < p->g->nin; i++)
        if (name_is(s, len, p->g->inputs[i]->name))
            return p->g->inputs[i];
    return NULL;
}

/* A named constant (after the variables): True, False, inf, nan, pi; any
 * other name is unknown. */
static val named_const(P *p, const char *s, size_t len)
{
    size_t pos = (size_t)(s - p->s);
    if (name_is(s, len, "True") || name_is(s, len, "False")) {
        if (!p->build)
            return CHECKED;
        return made(p, smelt_const(p->g, s[0] == 'T' ? 1 : 0, SMELT_BOOL), pos, NULL);
    }
    double v;
    if (name_is(s, len, "inf"))
        v = INFINITY;
    else if (name_is(s, len, "nan"))
        v = NAN;
    else if (name_is(s, len, "pi"))
        v = 3.14159265358979323846;
    else
        return fail(p, pos, SMELT_ERR_PARSE, "unknown name '%.*s' at column %zu", (int)SMELT_MIN(len, 40), s,
                    pos + 1);
    tok t = {.kind = T_FLOAT, .pos = pos, .len = len, .fval = v};
    return literal(p, &t);
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
static bool opt_int(P *p, int64_t *v, bool *have)
{
    *have = false;
    bool neg = is_op(p, "-");
    if (neg || is_op(p, "+")) {
        next(p);
        if (p->t.kind != T_INT) {
            unexpected(p, " (expected an integer)");
            return false;
        }
    }
    if (p->t.kind != T_INT)
        return true;
    if (p->t.big && !neg) {
        fail(p, p->t.pos, SMELT_ERR_PARSE, "integer at column %zu does not fit in int64", p->t.pos + 1);
        return false;
    }
    *v = p->t.big ? INT64_MIN : neg ? -p->t.ival : p->t.ival;
    *have = true;
    next(p);
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
        next(p);
    while (!tuple || !is_op(p, ")")) {
        size_t pos = p->t.pos;
        if (*n < SMELT_MAX_DIMS && !opt_int(p, &v[*n], &have))
            return false;
        if (*n < SMELT_MAX_DIMS && !have) {
            unexpected(p, hint);
            return false;
        }
        if (*n == SMELT_MAX_DIMS || v[*n] > lim || v[*n] < -lim) {
            fail(p, pos, SMELT_ERR_PARSE, "%s at column %zu: %s", what, pos + 1, tmsg);
            return false;
        }
        ++*n;
        if (!tuple)
            return true;
        if (is_op(p, ","))
            next(p);
        else if (!is_op(p, ")")) {
            unexpected(p, " (expected ',' or ')' in a tuple)");
            return false;
        }
    }
    next(p); /* ')' */
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
        next(p);
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
        fail(p, p->t.pos, SMELT_ERR_PARSE, "axis=() reduces no axis, which smelt does not support: leave the "
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
    next(p); /* '(' */
    if (is_op(p, ")"))
        return fail(p, npos, SMELT_ERR_PARSE, "%s() takes an array (and optionally axis, keepdims), got no argument "
                    "at column %zu", fname, npos + 1);
    val a = expr(p);
    if (!a.n)
        return a;
    int nax = 0, axes[SMELT_MAX_DIMS];
    bool have_axis = false, have_keep = false, keep = false, none;
    while (!p->status && is_op(p, ",")) {
        next(p);
        if (is_op(p, ")"))
            break;
        size_t kpos = p->t.pos;
        if (!at_keyword(p)) { /* NumPy's positional axis */
            if (have_axis || have_keep)
                return fail(p, kpos, SMELT_ERR_PARSE, "%s() at column %zu: after the array and the axis, arguments "
                            "are keyword arguments (keepdims=True)", fname, kpos + 1);
            if (!axis_value(p, &nax, axes, &none))
                return NONE;
            have_axis = true;
            continue;
        }
        const char *kw = p->s + p->t.pos;
        size_t klen = p->t.len;
        next(p); /* the name */
        next(p); /* '=' */
        if (name_is(kw, klen, "axis")) {
            if (have_axis)
                return fail(p, kpos, SMELT_ERR_PARSE, "%s() got axis twice at column %zu", fname, kpos + 1);
            if (!axis_value(p, &nax, axes, &none))
                return NONE;
            have_axis = true;
        } else if (name_is(kw, klen, "keepdims")) {
            if (have_keep)
                return fail(p, kpos, SMELT_ERR_PARSE, "%s() got keepdims twice at column %zu", fname, kpos + 1);
            if (is_kw(p, "True") || is_kw(p, "False"))
                keep = is_kw(p, "True");
            else if (p->t.kind == T_INT && (p->t.ival == 0 || p->t.ival == 1))
                keep = p->t.ival == 1;
            else
                return unexpected(p, " (keepdims is True or False)");
            next(p);
            have_keep = true;
        } else if (name_is(kw, klen, "ddof") && (kind == RED_VAR || kind == RED_STD)) {
            if (have_ddof)
                return fail(p, kpos, SMELT_ERR_PARSE, "%s() got ddof twice at column %zu", fname, kpos + 1);
            if (p->t.kind != T_INT || p->t.ival < 0 || p->t.ival > 1000000)
                return unexpected(p, " (ddof is a whole number from 0)");
            ddof = (double)p->t.ival;
            next(p);
            have_ddof = true;
        } else {
            bool numpy = name_is(kw, klen, "dtype") || name_is(kw, klen, "out") || name_is(kw, klen, "initial") ||
                         name_is(kw, klen, "where") || name_is(kw, klen, "ddof");
            return fail(p, kpos, SMELT_ERR_PARSE, "%s() at column %zu: %s keyword argument '%.*s' (%s() takes axis=%s "
                        "and keepdims=)", fname, kpos + 1, numpy ? "the unsupported" : "unexpected",
                        (int)SMELT_MIN(klen, 40), kw, fname, kind == RED_VAR || kind == RED_STD ? ", ddof=" : "");
        }
    }
    if (p->status)
        return NONE;
    if (!is_op(p, ")"))
        return unexpected(p, p->t.kind == T_END ? " (expected ')')" : " (expected ',' or ')')");
    next(p); /* ')' */
    if (!p->build)
        return CHECKED;
    return made(p, kind == RED_PLAIN ? smelt_reduce(p->g, op, a.n, nax, axes, keep)
                                     : composite(p->g, kind, a.n, nax, axes, keep, ddof), npos, NULL);
}

/* arange(n): 0, 1, ..., n - 1 as i64 (NumPy's default integer), n a whole
 * number. */
static val call_arange(P *p, size_t npos)
{
    next(p); /* '(' */
    if (p->t.kind != T_INT || p->t.big || p->t.ival < 0)
        return fail(p, p->t.pos, SMELT_ERR_PARSE, "arange() at column %zu takes one whole number n >= 0 "
                    "(arange(n): 0, 1, ..., n - 1)", npos + 1);
    int64_t n = p->t.ival;
    next(p);
    if (!is_op(p, ")"))
        return unexpected(p, " (arange(n) takes one argument)");
    next(p); /* ')' */
    if (!p->build)
        return CHECKED;
    return made(p, smelt_arange(p->g, n, SMELT_I64), npos, NULL);
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
    next(p);
    if (at_keyword(p)) {
        next(p);
        next(p);
    }
    return true;
}

static val call_layout(P *p, int kind, const char *fname, size_t npos)
{
    next(p); /* '(' */
    val a = expr(p);
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
        return unexpected(p, p->t.kind == T_END ? " (expected ')')" : " (expected ',' or ')')");
    next(p);
    bool axes_opt = kind == LF_TRANSPOSE || kind == LF_PERMUTE;
    if (n < 0 && !axes_opt)
        return fail(p, npos, SMELT_ERR_PARSE, "%s() at column %zu takes an array and %s", fname, npos + 1,
                    kind == LF_RESHAPE || kind == LF_BROADCAST ? "a shape" : "an axis");
    if (n > 1 && (kind == LF_EXPAND || kind == LF_SQUEEZE || kind == LF_FLIP))
        return fail(p, npos, SMELT_ERR_PARSE, "%s() at column %zu takes one axis", fname, npos + 1);
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
            return fail(p, npos, SMELT_ERR_PARSE, "%s() at column %zu: %d axes for an array of rank %d", fname,
                        npos + 1, n, smelt_node_ndim(a.n));
        r = smelt_transpose(g, a.n, n >= 0 ? perm : NULL);
        break;
    case LF_RESHAPE: r = smelt_reshape(g, a.n, n, v); break;
    case LF_EXPAND: r = smelt_expand_dims(g, a.n, perm[0]); break;
    case LF_SQUEEZE: r = smelt_squeeze(g, a.n, perm[0]); break;
    case LF_FLIP: r = smelt_flip(g, a.n, perm[0]); break;
    default: r = smelt_broadcast_to(g, a.n, n, v); break;
    }
    return made(p, r, npos, NULL);
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
    next(p); /* '(' */
    val a = expr(p), x = NONE;
    if (!a.n)
        return a;
    bool two = kind == IX_TAKE || kind == IX_ALONG;
    if (two) {
        if (!is_op(p, ","))
            return fail(p, npos, SMELT_ERR_PARSE, "%s() at column %zu takes an array and its indices: %s", fname,
                        npos + 1, usage[kind]);
        next(p);
        if (!(x = expr(p)).n)
            return x;
    }
    int n = 0;
    int64_t v[SMELT_MAX_DIMS];
    if (next_argument(p)) {
        if (!int_tuple(p, " (expected an integer)", INT64_MAX, "argument", "more than one entry", &n, v))
            return NONE;
    }
    if (!is_op(p, ")"))
        return unexpected(p, p->t.kind == T_END ? " (expected ')')" : " (expected ',' or ')')");
    next(p);
    if (n > 1 || (n == 0 && (kind == IX_ALONG || kind == IX_ONE_HOT)))
        return fail(p, npos, SMELT_ERR_PARSE, "%s() at column %zu: %s", fname, npos + 1, usage[kind]);
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
    return made(p, r, npos, NULL);
}

/* concat((a, b, ...)[, axis]) and concatenate: the parts as a tuple or a
 * list; axis (default 0) an integer, also by keyword. */
static val call_concat(P *p, const char *fname, size_t npos)
{
    next(p); /* '(' */
    bool list = is_op(p, "[");
    if (!list && !is_op(p, "("))
        return unexpected(p, " (concat takes a tuple of arrays: concat((a, b), axis=0))");
    next(p);
    smelt_node *parts[64];
    int n = 0;
    while (!is_op(p, list ? "]" : ")")) {
        val v = expr(p);
        if (!v.n)
            return v;
        if (n == 64)
            return fail(p, npos, SMELT_ERR_PARSE, "%s() at column %zu: more than 64 arrays", fname, npos + 1);
        parts[n++] = v.n;
        if (is_op(p, ","))
            next(p);
        else if (!is_op(p, list ? "]" : ")"))
            return unexpected(p, list ? " (expected ',' or ']')" : " (expected ',' or ')')");
    }
    next(p);
    int64_t axis = 0;
    if (is_op(p, ",")) {
        next(p);
        if (at_keyword(p)) {
            if (!is_kw(p, "axis"))
                return unexpected(p, " (concat's keyword is axis=)");
            next(p);
            next(p);
        }
        bool have;
        if (is_kw(p, "None"))
            return fail(p, p->t.pos, SMELT_ERR_PARSE, "%s() at column %zu: axis=None (flattening) is not supported: "
                        "reshape the parts to 1-D first", fname, p->t.pos + 1);
        if (!opt_int(p, &axis, &have))
            return NONE;
        if (!have)
            return unexpected(p, " (the axis is an integer)");
        if (axis < -1000 || axis > 1000)
            axis = 1000;
    }
    if (!is_op(p, ")"))
        return unexpected(p, p->t.kind == T_END ? " (expected ')')" : " (expected ',' or ')')");
    next(p);
    if (!n)
        return fail(p, npos, SMELT_ERR_PARSE, "%s() at column %zu needs at least one array", fname, npos + 1);
    if (!p->build)
        return CHECKED;
    return made(p, smelt_concat(p->g, n, parts, (int)axis), npos, NULL);
}

/* pad(a, pad_width[, constant_values=v]), NumPy's (mode 'constant'):
 * pad_width an integer (every side), (before, after) (every axis) or one
 * pair per axis ((b0, a0), (b1, a1), ...); v a number (default 0). */
static val call_pad(P *p, const char *fname, size_t npos)
{
    next(p); /* '(' */
    val a = expr(p);
    if (!a.n)
        return a;
    if (!is_op(p, ","))
        return fail(p, npos, SMELT_ERR_PARSE, "%s() at column %zu takes an array and its pad widths: "
                    "pad(a, ((1, 1), (0, 2)))", fname, npos + 1);
    next(p);
    if (at_keyword(p) && is_kw(p, "pad_width")) {
        next(p);
        next(p);
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
        next(p);
        nested = is_op(p, "(");
        p->pos = save, p->t = t;
    }
    if (nested) {
        next(p);
        while (!is_op(p, ")")) {
            int k;
            int64_t v[SMELT_MAX_DIMS];
            if (npairs == SMELT_MAX_DIMS)
                return fail(p, wpos, SMELT_ERR_PARSE, "pad widths at column %zu: %s", wpos + 1, tmsg);
            if (!int_tuple(p, " (a pad width is an integer)", INT64_MAX, "pad widths", tmsg, &k, v))
                return NONE;
            if (k != 2)
                return fail(p, wpos, SMELT_ERR_PARSE, "pad widths at column %zu: each axis takes (before, after)",
                            wpos + 1);
            w[npairs][0] = v[0], w[npairs][1] = v[1], npairs++;
            if (is_op(p, ","))
                next(p);
            else if (!is_op(p, ")"))
                return unexpected(p, " (expected ',' or ')' in a tuple)");
        }
        next(p);
    } else {
        int k;
        int64_t v[SMELT_MAX_DIMS];
        if (!int_tuple(p, " (pad widths: an integer, (before, after) or ((b0, a0), (b1, a1), ...))", INT64_MAX,
                       "pad widths", tmsg, &k, v))
            return NONE;
        if (k != 1 && k != 2)
            return fail(p, wpos, SMELT_ERR_PARSE, "pad widths at column %zu: an integer, (before, after) or one "
                        "pair per axis", wpos + 1);
        w[0][0] = v[0], w[0][1] = v[k - 1], npairs = -1; /* (every axis) */
    }
    double value = 0;
    if (is_op(p, ",")) {
        next(p);
        if (!at_keyword(p) || !is_kw(p, "constant_values"))
            return unexpected(p, " (pad's other argument is constant_values=)");
        next(p);
        next(p);
        bool neg = is_op(p, "-");
        if (neg || is_op(p, "+"))
            next(p);
        if (p->t.kind == T_INT)
            value = p->t.big ? 9223372036854775808.0 : (double)p->t.ival;
        else if (p->t.kind == T_FLOAT)
            value = p->t.fval;
        else if (is_kw(p, "inf") || is_kw(p, "nan") || is_kw(p, "True") || is_kw(p, "False"))
            value = is_kw(p, "inf") ? INFINITY : is_kw(p, "nan") ? NAN : is_kw(p, "True");
        else
            return unexpected(p, " (constant_values is a number)");
        value = neg ? -value : value;
        next(p);
    }
    if (!is_op(p, ")"))
        return unexpected(p, p->t.kind == T_END ? " (expected ')')" : " (expected ',' or ')')");
    next(p);
    if (!p->build)
        return CHECKED;
    int r = smelt_node_ndim(a.n);
    if (npairs >= 0 && npairs != r && npairs != 1)
        return fail(p, wpos, SMELT_ERR_PARSE, "pad widths at column %zu: %d pairs for an array of rank %d", wpos + 1,
                    npairs, r);
    int64_t flat[2 * SMELT_MAX_DIMS];
    for (int d = 0; d < r; d++) {
        int k = npairs == r ? d : 0;
        flat[2 * d] = w[k][0], flat[2 * d + 1] = w[k][1];
    }
    return made(p, smelt_pad(p->g, a.n, flat, value), npos, NULL);
}

/* After a primary: .T and subscripts a[i, 1:, ::-2, None] (basic indexing:
 * an integer drops its axis, a slice keeps it, None adds one of size 1;
 * axes not named stay whole). */
static val postfix(P *p, val a)
{
    while (a.n && !p->status && (is_op(p, ".") || is_op(p, "["))) {
        size_t pos = p->t.pos;
        if (is_op(p, ".")) {
            next(p);
            if (!is_kw(p, "T"))
                return unexpected(p, ": the only attribute is .T (the transpose); methods such as a.sum() are "
                                     "not supported (write sum(a))");
            next(p);
            a = p->build ? made(p, smelt_transpose(p->g, a.n, NULL), pos, ".T") : CHECKED;
            continue;
        }
        next(p); /* '[' */
        int ax = 0, used = 0, rank0 = p->build ? smelt_node_ndim(a.n) : 0;
        a.lit = false;
        while (!p->status && !is_op(p, "]")) {
            size_t ipos = p->t.pos;
            int64_t b[3] = {SMELT_NONE, SMELT_NONE, 1};
            bool have[3] = {false, false, false}, slice = false;
            if (is_kw(p, "None")) {
                next(p);
                if (p->build && !(a.n = smelt_expand_dims(p->g, a.n, ax)))
                    return graph_fail(p, ipos, "None");
                ax++;
            } else {
                for (int k = 0; k < 3 && !p->status; k++) {
                    if (k && !is_op(p, ":"))
                        break;
                    if (k) {
                        next(p);
                        slice = true;
                    }
                    if (!opt_int(p, &b[k], &have[k]))
                        return NONE;
                    if (k == 2 && !have[2])
                        b[2] = 1;
                }
                if (p->status)
                    return NONE;
                if (!slice && !have[0])
                    return unexpected(p, " (an index is an integer, a slice start:stop:step or None)");
                if (have[2] && b[2] == 0)
                    return fail(p, ipos, SMELT_ERR_PARSE, "slice step cannot be zero at column %zu", ipos + 1);
                if (p->build) {
                    if (used >= rank0)
                        return fail(p, ipos, SMELT_ERR_PARSE, "too many indices at column %zu: the array has rank "
                                    "%d", ipos + 1, rank0);
                    int64_t len = smelt_node_shape(a.n)[ax];
                    if (!slice && (b[0] >= len || b[0] < -len))
                        return fail(p, ipos, SMELT_ERR_PARSE, "index %lld at column %zu is out of bounds for axis "
                                    "%d of size %lld", (long long)b[0], ipos + 1, ax, (long long)len);
                    smelt_node *r = slice ? smelt_slice(p->g, a.n, ax, b[0], b[1], b[2])
                                          : smelt_slice(p->g, a.n, ax, b[0], b[0] == -1 ? SMELT_NONE : b[0] + 1, 1);
                    if (r && !slice)
                        r = smelt_squeeze(p->g, r, ax);
                    if (!(a.n = r))
                        return graph_fail(p, ipos, NULL);
                }
                ax += slice;
                used++;
            }
            if (is_op(p, ","))
                next(p);
            else if (!is_op(p, "]"))
                return unexpected(p, " (expected ',' or ']')");
        }
        if (p->status)
            return NONE;
        next(p); /* ']' */
    }
    return a;
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
    next(p); /* '(' */
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
            next(p);
            next(p); /* '=' */
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
                    next(p);
                } else if (!opt_int(p, &v, &have) || !have) {
                    return p->status ? NONE : unexpected(p, " (expected an integer, True or False)");
                }
                if (fw == 5)
                    axis = v;
                else
                    flags[scan ? fw - 3 : fw] = v;
            } else {
                return fail(p, kpos, SMELT_ERR_PARSE, "%s() at column %zu: unexpected keyword argument '%.*s'",
                            fname, kpos + 1, (int)SMELT_MIN(klen, 40), kw);
            }
        } else if ((kind == WF_CUMSUM || kind == WF_CUMPROD) && na == 1) {
            bool have;
            if (!opt_int(p, &axis, &have) || !have)
                return p->status ? NONE : unexpected(p, " (expected an axis)");
        } else {
            size_t apos = p->t.pos;
            val v = expr(p);
            if (!v.n)
                return v;
            if (na == maxpos)
                return fail(p, apos, SMELT_ERR_PARSE, "%s() at column %zu: too many arrays", fname, apos + 1);
            a[na++] = v;
        }
        if (is_op(p, ","))
            next(p);
        else if (!is_op(p, ")"))
            return unexpected(p, p->t.kind == T_END ? " (expected ')')" : " (expected ',' or ')')");
    }
    if (p->status)
        return NONE;
    next(p); /* ')' */
    if (na < (kind == WF_CONV ? 2 : 1))
        return fail(p, npos, SMELT_ERR_PARSE, "%s() at column %zu takes %s", fname, npos + 1,
                    kind == WF_CONV ? "x and the weights (and a bias)" : "an array");
    if ((kind == WF_MAXPOOL || kind == WF_AVGPOOL) && kn[0] < 0)
        return fail(p, npos, SMELT_ERR_PARSE, "%s() at column %zu needs kernel=", fname, npos + 1);
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
            return fail(p, npos, SMELT_ERR_PARSE, "%s() at column %zu: %s has %d entries (1%s for %d spatial axes)",
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
    return made(p, r, npos, NULL);
}

static val call(P *p, size_t npos, size_t nlen)
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
            return fail(p, npos, SMELT_ERR_PARSE, "%s() at column %zu: %s; smelt fuses elementwise "
                        "operations (smelt info --ops lists them)", fname, npos + 1, why);
        return fail(p, npos, SMELT_ERR_PARSE, "unknown function '%s' at column %zu (%s%s%s"
                    "smelt info --ops lists the functions)", fname, npos + 1,
                    near ? "did you mean " : "", near ? near : "", near ? "? " : "");
    }
    if (op >= 0 && smelt__ops[op].cls == SMELT_CLASS_REDUCE)
        return call_reduce(p, (smelt_op)op, fname, npos, RED_PLAIN);
    int arity = op >= 0 ? smelt__ops[op].arity : 1;

    next(p); /* '(' */
    val a[3] = {NONE, NONE, NONE};
    int n = 0;
    while (!p->status && !is_op(p, ")")) {
        if (at_keyword(p))
            return fail(p, p->t.pos, SMELT_ERR_PARSE, "%s() at column %zu takes no keyword arguments (those are "
                        "the reductions': sum(a, axis=1, keepdims=True))", fname, p->t.pos + 1);
        val v = expr(p);
        if (!v.n)
            return v;
        if (n < 3)
            a[n] = v;
        n++;
        if (is_op(p, ","))
            next(p);
        else if (!is_op(p, ")"))
            return unexpected(p, n == 1 && p->t.kind == T_END ? " (expected ')')" : " (expected ',' or ')')");
    }
    if (p->status)
        return NONE;
    next(p); /* ')' */
    if (n != arity)
        return fail(p, npos, SMELT_ERR_PARSE, "%s() takes %d argument%s, got %d at column %zu", fname,
                    arity, arity == 1 ? "" : "s", n, npos + 1);
    if (op >= 0) {
        /* NumPy's functions return NumPy scalars, which are strongly typed:
         * f32 * cos(3) is f64, where f32 * (3 + 5) is f32 */
        val r = apply(p, (smelt_op)op, n, a, npos, NULL);
        if (p->build && r.n)
            r.n->weak = false;
        return r;
    }
    if (!p->build)
        return CHECKED;
    return made(p, smelt_cast(p->g, a[0].n, (smelt_dtype)cast_dt), npos, NULL);
}

static val primary(P *p)
{
    tok t = p->t;
    if (t.kind == T_INT || t.kind == T_FLOAT) {
        next(p);
        if (t.big && (p->neg_at != t.pos + 1 || is_op(p, "**"))) /* Python's -2**63 is -(2**63) */
            return fail(p, t.pos, SMELT_ERR_PARSE,
                        "integer literal %.*s at column %zu does not fit in int64 (-%.*s does)",
                        (int)SMELT_MIN(t.len, 40), p->s + t.pos, t.pos + 1, (int)SMELT_MIN(t.len, 40),
                        p->s + t.pos);
        return literal(p, &t);
    }
    if (t.kind == T_NAME) {
        const char *s = p->s + t.pos;
        if (name_is(s, t.len, "and") || name_is(s, t.len, "or") || name_is(s, t.len, "not"))
            return unexpected(p, NULL);
        next(p);
        if (is_op(p, "("))
            return call(p, t.pos, t.len);
        smelt_node *v = lookup_var(p, s, t.len);
        if (v)
            return p->build ? (val){v, false} : CHECKED;
        return named_const(p, s, t.len);
    }
    if (is_op(p, "(")) {
        next(p);
        val v = expr(p);
        if (!v.n)
            return v;
        if (!is_op(p, ")"))
            return unexpected(p, " (expected ')')");
        next(p);
        return v;
    }
    return unexpected(p, NULL);
}

static val power(P *p)
{
    val a = postfix(p, primary(p));
    if (!a.n || !is_op(p, "**"))
        return a;
    size_t pos = p->t.pos;
    next(p);
    val b = factor(p); /* right-associative; binds a following unary minus */
    if (!b.n)
        return b;
    /* NumPy's ** takes a float array to the literal 0.5 with sqrt (its
     * fast_scalar_power), not power: (-0.0) ** 0.5 is -0.0, (-inf) ** 0.5
     * nan, where power gives 0.0 and inf; so does smelt's ** */
    if (p->build && b.lit && b.n->op == SMELT_OP_CONST && b.n->weak && b.n->dtype == SMELT_F64 && b.n->fval == 0.5 &&
        !a.n->weak && smelt__is_float(a.n->dtype))
        return apply(p, SMELT_OP_SQRT, 1, &a, pos, "**");
    return apply2(p, SMELT_OP_POW, a, b, pos, "**");
}

static val too_deep(P *p)
{
    return fail(p, p->t.pos, SMELT_ERR_PARSE, "expression nested too deeply (more than %d levels) at column %zu",
                MAX_DEPTH, p->t.pos + 1);
}

static val factor(P *p)
{
    if (p->depth >= MAX_DEPTH)
        return too_deep(p);
    p->depth++;
    val r;
    if (is_op(p, "-") || is_op(p, "+") || is_op(p, "~")) {
        char c = p->s[p->t.pos];
        size_t pos = p->t.pos;
        next(p);
        if (c == '-')
            p->neg_at = p->t.pos + 1;
        val a = factor(p);
        if (!a.n || c == '+') {
            r = a;
        } else if (c == '-' && a.lit && p->build) {
            smelt_node *n = a.n; /* a literal made just now: negate it */
            if (n->dtype == SMELT_F64) {
                n->fval = -n->fval;
            } else {
                n->ival = (int64_t)(0 - (uint64_t)n->ival);
                n->fval = (double)n->ival;
            }
            r = a;
        } else if (c == '-') {
            r = apply(p, SMELT_OP_NEG, 1, &a, pos, "-");
        } else { /* on bool, the builder makes it logical_not */
            r = apply(p, SMELT_OP_BITWISE_NOT, 1, &a, pos, "~");
        }
    } else {
        r = power(p);
    }
    p->depth--;
    return r;
}

/* A binary operator: its spelling (a symbol or a keyword) and its operator. */
typedef struct binop {
    const char *sym;
    smelt_op op;
} binop;

/* The binary operators, a level of precedence a row, lowest first (the
 * grammar above; a row ends at a NULL sym).  not has a function of its
 * own.  On bool operands the builder makes & ^ | logical_and, logical_xor,
 * logical_or, as NumPy. */
enum { L_OR, L_AND, L_NOT, L_CMP, L_BOR, L_BXOR, L_BAND, L_SHIFT, L_ARITH, L_TERM, L_FACTOR };
static const binop levels[L_FACTOR][7] = {
    [L_OR] = {{"or", SMELT_OP_LOGICAL_OR}},
    [L_AND] = {{"and", SMELT_OP_LOGICAL_AND}},
    [L_CMP] = {{"<", SMELT_OP_LT}, {"<=", SMELT_OP_LE}, {">", SMELT_OP_GT}, {">=", SMELT_OP_GE},
               {"==", SMELT_OP_EQ}, {"!=", SMELT_OP_NE}},
    [L_BOR] = {{"|", SMELT_OP_BITWISE_OR}},
    [L_BXOR] = {{"^", SMELT_OP_BITWISE_XOR}},
    [L_BAND] = {{"&", SMELT_OP_BITWISE_AND}},
    [L_SHIFT] = {{"<<", SMELT_OP_LEFT_SHIFT}, {">>", SMELT_OP_RIGHT_SHIFT}},
    [L_ARITH] = {{"+", SMELT_OP_ADD}, {"-", SMELT_OP_SUB}},
    [L_TERM] = {{"*", SMELT_OP_MUL}, {"/", SMELT_OP_DIV}, {"//", SMELT_OP_FLOOR_DIV}, {"%", SMELT_OP_MOD},
                {"@", SMELT_OP_MATMUL}},
};

/* The operator of level lv at the current token, or NULL. */
static const binop *match(P *p, int lv)
{
    for (const binop *o = levels[lv]; o->sym; o++)
        if (is_alpha(o->sym[0]) ? is_kw(p, o->sym) : is_op(p, o->sym))
            return o;
    return NULL;
}

static val not_test(P *p);

/* An expression of precedence level lv: the left-associative operators of
 * its row between operands of the level above.  Comparisons chain instead,
 * as in Python: a < b < c means (a < b) and (b < c) (acc: the and so far). */
static val level(P *p, int lv)
{
    if (lv == L_NOT)
        return not_test(p);
    if (lv == L_FACTOR)
        return factor(p);
    val a = level(p, lv + 1), acc = NONE;
    const binop *o;
    while (a.n && (o = match(p, lv))) {
        size_t pos = p->t.pos;
        next(p);
        val b = level(p, lv + 1);
        if (!b.n)
            return b;
        val c = apply2(p, o->op, a, b, pos, o->sym);
        if (lv != L_CMP || !c.n) {
            a = c;
            continue;
        }
        acc = acc.n ? apply2(p, SMELT_OP_LOGICAL_AND, acc, c, pos, o->sym) : c;
        if (!acc.n)
            return acc;
        a = b;
    }
    return acc.n && a.n ? acc : a;
}

static val expr(P *p) { return level(p, L_OR); }

static val not_test(P *p)
{
    if (!is_kw(p, "not"))
        return level(p, L_CMP);
    if (p->depth >= MAX_DEPTH)
        return too_deep(p);
    size_t pos = p->t.pos;
    next(p);
    p->depth++;
    val a = not_test(p);
    p->depth--;
    if (!a.n)
        return a;
    return apply(p, SMELT_OP_LOGICAL_NOT, 1, &a, pos, "not");
}

static val parse(P *p)
{
    p->pos = 0;
    p->neg_at = 0;
    p->depth = 0;
    next(p);
    if (p->status)
        return NONE;
    if (p->t.kind == T_END)
        return fail(p, p->t.pos, SMELT_ERR_PARSE, "empty expression");
    val v = expr(p);
    if (v.n && p->t.kind != T_END)
        return unexpected(p, NULL);
    return v;
}

/* The message with the expression and a caret under the error. */
static void full_message(const P *p, smelt__sb *out)
{
    smelt__sb_printf(out, "%s\n  ", smelt__sb_str((smelt__sb *)&p->msg));
    size_t from = 0, to = p->len, at = SMELT_MIN(p->errpos, p->len);
    if (to > 100) {
        from = at > 50 ? at - 50 : 0;
        to = SMELT_MIN(p->len, from + 100);
    }
    size_t caret = 2 + (at - from);
    if (from > 0) {
        smelt__sb_puts(out, "...");
        caret += 3;
    }
    for (size_t i = from; i < to; i++) {
        unsigned char c = (unsigned char)p->s[i];
        char ch = is_space(c) ? ' ' : (c < 0x20 || c > 0x7e) ? '?' : (char)c;
        smelt__sb_putn(out, &ch, 1);
    }
    if (to < p->len)
        smelt__sb_puts(out, "...");
    smelt__sb_puts(out, "\n");
    for (size_t i = 0; i < caret; i++)
        smelt__sb_puts(out, " ");
    smelt__sb_puts(out, "^");
}

/* Make the graph's error (replacing a builder's, which the message quotes). */
static smelt_node *graph_error(smelt_graph *g, int st, const char *fmt, ...) SMELT_PRINTF(3, 4);
static smelt_node *graph_error(smelt_graph *g, int st, const char *fmt, ...)
{
    smelt__sb_free(&g->err);
    va_list ap;
    va_start(ap, fmt);
    smelt__sb_vprintf(&g->err, fmt, ap);
    va_end(ap);
    g->status = st;
    smelt__err(g->ctx, st, "%s", smelt__sb_str(&g->err));
    return NULL;
}

smelt_node *smelt_expr(smelt_graph *g, const char *expression, const char *const *names,
                       smelt_node *const *nodes, int n)
{
    if (!g || g->status)
        return NULL;
    if (!expression)
        return graph_error(g, SMELT_ERR_INVALID_ARG, "smelt_expr: expression is NULL");
    if (n < 0 || (n > 0 && (!names || !nodes)))
        return graph_error(g, SMELT_ERR_INVALID_ARG, "smelt_expr: names or nodes is NULL");
    for (int i = 0; i < n; i++) {
        if (!names[i])
            return graph_error(g, SMELT_ERR_INVALID_ARG, "smelt_expr: name is NULL");
        if (!nodes[i] || nodes[i]->g != g)
            return graph_error(g, SMELT_ERR_INVALID_ARG, "smelt_expr: the node for '%s' is %s", names[i],
                               nodes[i] ? "a node of another graph" : "NULL");
    }
    P p = {.s = expression, .len = strlen(expression), .g = g, .names = names, .nodes = nodes, .n = n};
    smelt__sb_init(&p.msg);
    val v = parse(&p); /* check pass: builds nothing */
    if (!p.status) {
        p.build = true;
        v = parse(&p);
    }
    if (p.status) {
        smelt__sb full;
        smelt__sb_init(&full);
        full_message(&p, &full);
        v.n = graph_error(g, p.status, "%s", smelt__sb_str(&full));
        smelt__sb_free(&full);
    }
    smelt__sb_free(&p.msg);
    return v.n;
}

int smelt_eval(smelt_ctx *ctx, const char *expression, const char *const *names,
               smelt_tensor *const *tensors, int n, smelt_tensor **out)
{
    if (!ctx)
        return SMELT_ERR_INVALID_ARG;
    if (!out)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "smelt_eval: out is NULL");
    *out = NULL;
    if (n < 0 || (n > 0 && (!names || !tensors)))
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "smelt_eval: names or tensors is NULL");
    for (int i = 0; i < n; i++)
        if (!names[i] || !tensors[i])
            return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "smelt_eval: %s %d is NULL",
                              names[i] ? "tensor" : "name", i);
    smelt_graph *g;
    int st = smelt_graph_new(ctx, &g);
    if (st)
        return st;
    for (int i = 0; i < n; i++)
        smelt_input(g, names[i], tensors[i]->dtype, tensors[i]->ndim, tensors[i]->shape);
    smelt_node *r = smelt_expr(g, expression, NULL, NULL, 0);
    smelt_plan *plan = NULL;
    if (!r)
        st = g->status ? g->status : SMELT_ERR_INVALID_ARG; /* message already on ctx */
    else
        st = smelt_plan_new(ctx, g, 1, &r, NULL, &plan);
    if (!st)
        st = smelt_plan_run(plan, n, tensors, 1, out);
    smelt_plan_free(plan);
    smelt_graph_free(g);
    return st;
}
