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

#include "expr.h"

#define MAX_DEPTH 200

smelt_node smelt__expr_placeholder; /* never written */

val smelt__expr_fail(P *p, size_t pos, int status, const char *fmt, ...)
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

/* "unexpected <the current token> at column N", extra appended. */
val smelt__expr_unexpected(P *p, const char *extra)
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
    return smelt__expr_fail(p, p->t.pos, SMELT_ERR_PARSE, "unexpected %s at column %zu%s", b, p->t.pos + 1,
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
            smelt__expr_fail(p, i, SMELT_ERR_PARSE, "unexpected '_' at column %zu (invalid number literal)", i + 1);
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
            smelt__expr_fail(p, t->pos, SMELT_ERR_PARSE, "integer literal %.*s at column %zu does not fit in int64",
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
            smelt__expr_unexpected(p, NULL);
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
                smelt__expr_fail(p, start, SMELT_ERR_NOMEM, "out of memory");
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
            smelt__expr_fail(p, start, SMELT_ERR_PARSE, "complex literal at column %zu: complex numbers are not supported",
                 start + 1);
        else
            smelt__expr_fail(p, i, SMELT_ERR_PARSE, "unexpected '%c' at column %zu (invalid number literal)", s[i], i + 1);
    }
}

void smelt__expr_next(P *p)
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
        smelt__expr_unexpected(p, c == '!' ? " (use ~ or 'not' to negate)" : NULL);
        t->kind = T_END; /* stop the parse; the error is recorded */
    }
}


/* A builder error of the graph, located at pos. */
static val graph_fail(P *p, size_t pos, const char *sym)
{
    int st = p->g->status ? p->g->status : SMELT_ERR_INVALID_ARG;
    const char *m = smelt__sb_str(&p->g->err);
    if (sym)
        return smelt__expr_fail(p, pos, st, "%s at column %zu ('%s')", m, pos + 1, sym);
    return smelt__expr_fail(p, pos, st, "%s at column %zu", m, pos + 1);
}

/* A node the builder made (NULL: its error, located at pos). */
val smelt__expr_made(P *p, smelt_node *n, size_t pos, const char *sym)
{
    return n ? (val){n, false} : graph_fail(p, pos, sym);
}

val smelt__expr_apply(P *p, smelt_op op, int n, const val *a, size_t pos, const char *sym)
{
    if (!p->build)
        return CHECKED;
    smelt_node *args[3] = {NULL, NULL, NULL};
    for (int i = 0; i < n; i++)
        args[i] = a[i].n;
    if (op == SMELT_OP_MATMUL)
        return smelt__expr_made(p, smelt_matmul(p->g, args[0], args[1]), pos, sym);
    return smelt__expr_made(p, smelt_op_apply(p->g, op, n, args), pos, sym);
}

static val apply2(P *p, smelt_op op, val a, val b, size_t pos, const char *sym)
{
    val v[2] = {a, b};
    return smelt__expr_apply(p, op, 2, v, pos, sym);
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
        return smelt__expr_made(p, smelt_const(p->g, s[0] == 'T' ? 1 : 0, SMELT_BOOL), pos, NULL);
    }
    double v;
    if (name_is(s, len, "inf"))
        v = INFINITY;
    else if (name_is(s, len, "nan"))
        v = NAN;
    else if (name_is(s, len, "pi"))
        v = 3.14159265358979323846;
    else
        return smelt__expr_fail(p, pos, SMELT_ERR_PARSE, "unknown name '%.*s' at column %zu", (int)SMELT_MIN(len, 40), s,
                    pos + 1);
    tok t = {.kind = T_FLOAT, .pos = pos, .len = len, .fval = v};
    return literal(p, &t);
}

/* After a primary: .T and subscripts a[i, 1:, ::-2, None] (basic indexing:
 * an integer drops its axis, a slice keeps it, None adds one of size 1;
 * axes not named stay whole). */
static val postfix(P *p, val a)
{
    while (a.n && !p->status && (is_op(p, ".") || is_op(p, "["))) {
        size_t pos = p->t.pos;
        if (is_op(p, ".")) {
            smelt__expr_next(p);
            if (!is_kw(p, "T"))
                return smelt__expr_unexpected(p, ": the only attribute is .T (the transpose); methods such as a.sum() are "
                                     "not supported (write sum(a))");
            smelt__expr_next(p);
            a = p->build ? smelt__expr_made(p, smelt_transpose(p->g, a.n, NULL), pos, ".T") : CHECKED;
            continue;
        }
        smelt__expr_next(p); /* '[' */
        int ax = 0, used = 0, rank0 = p->build ? smelt_node_ndim(a.n) : 0;
        a.lit = false;
        while (!p->status && !is_op(p, "]")) {
            size_t ipos = p->t.pos;
            int64_t b[3] = {SMELT_NONE, SMELT_NONE, 1};
            bool have[3] = {false, false, false}, slice = false;
            if (is_kw(p, "None")) {
                smelt__expr_next(p);
                if (p->build && !(a.n = smelt_expand_dims(p->g, a.n, ax)))
                    return graph_fail(p, ipos, "None");
                ax++;
            } else {
                for (int k = 0; k < 3 && !p->status; k++) {
                    if (k && !is_op(p, ":"))
                        break;
                    if (k) {
                        smelt__expr_next(p);
                        slice = true;
                    }
                    if (!smelt__expr_opt_int(p, &b[k], &have[k]))
                        return NONE;
                    if (k == 2 && !have[2])
                        b[2] = 1;
                }
                if (p->status)
                    return NONE;
                if (!slice && !have[0])
                    return smelt__expr_unexpected(p, " (an index is an integer, a slice start:stop:step or None)");
                if (have[2] && b[2] == 0)
                    return smelt__expr_fail(p, ipos, SMELT_ERR_PARSE, "slice step cannot be zero at column %zu", ipos + 1);
                if (p->build) {
                    if (used >= rank0)
                        return smelt__expr_fail(p, ipos, SMELT_ERR_PARSE, "too many indices at column %zu: the array has rank "
                                    "%d", ipos + 1, rank0);
                    int64_t len = smelt_node_shape(a.n)[ax];
                    if (!slice && (b[0] >= len || b[0] < -len))
                        return smelt__expr_fail(p, ipos, SMELT_ERR_PARSE, "index %lld at column %zu is out of bounds for axis "
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
                smelt__expr_next(p);
            else if (!is_op(p, "]"))
                return smelt__expr_unexpected(p, " (expected ',' or ']')");
        }
        if (p->status)
            return NONE;
        smelt__expr_next(p); /* ']' */
    }
    return a;
}
static val primary(P *p)
{
    tok t = p->t;
    if (t.kind == T_INT || t.kind == T_FLOAT) {
        smelt__expr_next(p);
        if (t.big && (p->neg_at != t.pos + 1 || is_op(p, "**"))) /* Python's -2**63 is -(2**63) */
            return smelt__expr_fail(p, t.pos, SMELT_ERR_PARSE,
                        "integer literal %.*s at column %zu does not fit in int64 (-%.*s does)",
                        (int)SMELT_MIN(t.len, 40), p->s + t.pos, t.pos + 1, (int)SMELT_MIN(t.len, 40),
                        p->s + t.pos);
        return literal(p, &t);
    }
    if (t.kind == T_NAME) {
        const char *s = p->s + t.pos;
        if (name_is(s, t.len, "and") || name_is(s, t.len, "or") || name_is(s, t.len, "not"))
            return smelt__expr_unexpected(p, NULL);
        smelt__expr_next(p);
        if (is_op(p, "("))
            return smelt__expr_call(p, t.pos, t.len);
        smelt_node *v = lookup_var(p, s, t.len);
        if (v)
            return p->build ? (val){v, false} : CHECKED;
        return named_const(p, s, t.len);
    }
    if (is_op(p, "(")) {
        smelt__expr_next(p);
        val v = smelt__expr_expr(p);
        if (!v.n)
            return v;
        if (!is_op(p, ")"))
            return smelt__expr_unexpected(p, " (expected ')')");
        smelt__expr_next(p);
        return v;
    }
    return smelt__expr_unexpected(p, NULL);
}

static val power(P *p)
{
    val a = postfix(p, primary(p));
    if (!a.n || !is_op(p, "**"))
        return a;
    size_t pos = p->t.pos;
    smelt__expr_next(p);
    val b = factor(p); /* right-associative; binds a following unary minus */
    if (!b.n)
        return b;
    /* NumPy's ** takes a float array to the literal 0.5 with sqrt (its
     * fast_scalar_power), not power: (-0.0) ** 0.5 is -0.0, (-inf) ** 0.5
     * nan, where power gives 0.0 and inf; so does smelt's ** */
    if (p->build && b.lit && b.n->op == SMELT_OP_CONST && b.n->weak && b.n->dtype == SMELT_F64 && b.n->fval == 0.5 &&
        !a.n->weak && smelt__is_float(a.n->dtype))
        return smelt__expr_apply(p, SMELT_OP_SQRT, 1, &a, pos, "**");
    return apply2(p, SMELT_OP_POW, a, b, pos, "**");
}

static val too_deep(P *p)
{
    return smelt__expr_fail(p, p->t.pos, SMELT_ERR_PARSE, "expression nested too deeply (more than %d levels) at column %zu",
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
        smelt__expr_next(p);
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
            r = smelt__expr_apply(p, SMELT_OP_NEG, 1, &a, pos, "-");
        } else { /* on bool, the builder makes it logical_not */
            r = smelt__expr_apply(p, SMELT_OP_BITWISE_NOT, 1, &a, pos, "~");
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
        smelt__expr_next(p);
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

val smelt__expr_expr(P *p) { return level(p, L_OR); }

static val not_test(P *p)
{
    if (!is_kw(p, "not"))
        return level(p, L_CMP);
    if (p->depth >= MAX_DEPTH)
        return too_deep(p);
    size_t pos = p->t.pos;
    smelt__expr_next(p);
    p->depth++;
    val a = not_test(p);
    p->depth--;
    if (!a.n)
        return a;
    return smelt__expr_apply(p, SMELT_OP_LOGICAL_NOT, 1, &a, pos, "not");
}

static val parse(P *p)
{
    p->pos = 0;
    p->neg_at = 0;
    p->depth = 0;
    smelt__expr_next(p);
    if (p->status)
        return NONE;
    if (p->t.kind == T_END)
        return smelt__expr_fail(p, p->t.pos, SMELT_ERR_PARSE, "empty expression");
    val v = smelt__expr_expr(p);
    if (v.n && p->t.kind != T_END)
        return smelt__expr_unexpected(p, NULL);
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
