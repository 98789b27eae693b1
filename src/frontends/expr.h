/* The expression language's parser state and what its two files share:
 * expr.c (the lexer, the grammar, smelt_expr and smelt_eval) and
 * expr-calls.c (the functions an expression may call: the alias table,
 * reductions, layouts, indexing, concat, pad, windows and scans, casts).
 * Private to src/frontends/. */
#ifndef SMELT_EXPR_H
#define SMELT_EXPR_H
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "ir.h"

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

extern smelt_node smelt__expr_placeholder; /* never written */
#define CHECKED ((val){&smelt__expr_placeholder, false})
#define NONE ((val){NULL, false})

static inline bool is_space(int c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }
static inline bool name_is(const char *s, size_t len, const char *name)
{
    return strlen(name) == len && !memcmp(s, name, len);
}
static inline bool is_op(P *p, const char *op) { return p->t.kind == T_OP && name_is(p->s + p->t.pos, p->t.len, op); }
static inline bool is_kw(P *p, const char *kw) { return p->t.kind == T_NAME && name_is(p->s + p->t.pos, p->t.len, kw); }

/* expr.c */
/* An error at pos (the first one sticks); returns NONE */
val smelt__expr_fail(P *p, size_t pos, int status, const char *fmt, ...) SMELT_PRINTF(4, 5);
/* "unexpected <the current token> at column N", extra appended */
val smelt__expr_unexpected(P *p, const char *extra);
/* The next token into p->t */
void smelt__expr_next(P *p);
/* A node the builder made (NULL: its error, located at pos) */
val smelt__expr_made(P *p, smelt_node *n, size_t pos, const char *sym);
/* Operator op over the n values a (the check pass: CHECKED) */
val smelt__expr_apply(P *p, smelt_op op, int n, const val *a, size_t pos, const char *sym);
/* An expression (the grammar's expr) */
val smelt__expr_expr(P *p);
/* expr-calls.c */
/* An optional integer argument (*have: whether one was given) */
bool smelt__expr_opt_int(P *p, int64_t *v, bool *have);
/* A call of the function named at npos (nlen characters), at its '(' */
val smelt__expr_call(P *p, size_t npos, size_t nlen);
#endif
