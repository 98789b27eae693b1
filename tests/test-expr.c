/* The expression language (src/frontends/expr.c): the grid of every operator and
 * function of src/ir/ops.def (and every operator symbol and NumPy alias) x every
 * dtype, against the float64 reference interpreter; precedence and literals;
 * NEP 50 weak scalars; error messages with their column and caret line;
 * graphs built from expressions on inner nodes; and a fuzz run (longer with
 * SMELT_FUZZ_ITERS, see scripts/fuzz-expr). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common.h"

#include <criterion/parameterized.h>

/* the alias table (src/frontends/expr-calls.c) */

static bool callable(int op)
{
    return !strcmp(test_ops[op].cls, "ELEMWISE") || !strcmp(test_ops[op].cls, "OPAQUE") ||
           !strcmp(test_ops[op].cls, "REDUCE");
}

static t_tol tol_for(smelt_dtype dt)
{
    if (dt == SMELT_F32)
        return (t_tol){4, 1e-6, 1e-5, false};
    if (dt == SMELT_F64)
        return (t_tol){4, 1e-12, 1e-12, false};
    if (t_is_half(dt)) /* computed in f32, rounded: at most 1 ulp from the rounded reference */
        return (t_tol){1, 0, 0, false};
    return T_EXACT;
}

/* Fresh data, never all zero: floats k/8 for k in [-24, 24] without 0 (exact
 * in every dtype, so floor_div and mod are exact too), integers in [-9, 9]
 * (u8 [1, 12]), bool random; a small operand (exponent, shift) in [0, 5]. */
static void fill(smelt_tensor *t, trng *r, bool small)
{
    smelt_dtype dt = smelt_tensor_dtype(t);
    for (int64_t i = 0; i < smelt_tensor_numel(t); i++) {
        if (t_is_float(dt)) {
            int64_t k = trng_range(r, 1, 24);
            t_set(t, i, (trng_u64(r) & 1 ? -1.0 : 1.0) * (double)k / 8);
        } else if (dt == SMELT_BOOL) {
            t_set(t, i, (double)(trng_u64(r) & 1));
        } else if (small) {
            t_set_i64(t, i, trng_range(r, 0, 5));
        } else {
            t_set_i64(t, i, dt == SMELT_U8 ? trng_range(r, 1, 12) : trng_range(r, -9, 9));
        }
    }
}

/* Evaluate expr on inputs a [4, 5], b [5], c [4, 1] of the given dtypes:
 * if want_op >= 0, the expression's node must be that operator and match the
 * reference; if supported is false, it must fail naming the operator. */
static void check_expr(smelt_ctx *ctx, const char *expr, const smelt_dtype *dt, int want_op,
                       bool supported, bool small_b)
{
    trng r;
    uint64_t h = 1469598103934665603ULL;
    for (const char *p = expr; *p; p++)
        h = (h ^ (unsigned char)*p) * 1099511628211ULL;
    trng_init(&r, h ^ (uint64_t)dt[0] * 131 ^ (uint64_t)dt[1] * 7);
    static const int64_t sa[] = {4, 5}, sb[] = {5}, sc[] = {4, 1};
    smelt_graph *g = t_graph(ctx);
    smelt_node *in[3] = {smelt_input(g, "a", dt[0], 2, sa), smelt_input(g, "b", dt[1], 1, sb),
                         smelt_input(g, "c", dt[2], 2, sc)};
    cr_assert(in[0] && in[1] && in[2]);
    char label[200];
    snprintf(label, sizeof label, "'%s' with a %s, b %s, c %s (seed %llu)", expr,
             smelt_dtype_name(dt[0]), smelt_dtype_name(dt[1]), smelt_dtype_name(dt[2]),
             (unsigned long long)r.seed);
    smelt_node *n = smelt_expr(g, expr, NULL, NULL, 0);
    if (!supported) {
        cr_assert_null(n, "%s: accepted, but %s does not support it", label, test_ops[want_op].name);
        cr_assert_eq(smelt_graph_status(g), SMELT_ERR_DTYPE, "%s: %s", label, smelt_graph_errmsg(g));
        cr_assert(t_contains(smelt_graph_errmsg(g), test_ops[want_op].name), "%s: message '%s'",
                  label, smelt_graph_errmsg(g));
        cr_assert(t_contains(smelt_graph_errmsg(g), "at column"), "%s: %s", label, smelt_graph_errmsg(g));
        smelt_graph_free(g);
        return;
    }
    cr_assert_not_null(n, "%s: %s", label, smelt_graph_errmsg(g));
    cr_assert_eq((int)smelt_node_op(n), want_op, "%s: parsed as %s, expected %s", label,
                 smelt_op_name(smelt_node_op(n)), test_ops[want_op].name);
    smelt_tensor *t[3];
    static const int64_t *shapes[] = {sa, sb, sc};
    static const int nd[] = {2, 1, 2};
    for (int i = 0; i < 3; i++) {
        t[i] = t_tensor(ctx, dt[i], nd[i], shapes[i]);
        fill(t[i], &r, i == 1 && small_b);
    }
    t_check_plan(label, ctx, g, 1, &n, 3, 3, t, tol_for(smelt_node_dtype(n)));
    /* smelt_eval gives the same */
    const char *names[] = {"a", "b", "c"};
    smelt_tensor *out = NULL;
    T_OK(ctx, smelt_eval(ctx, expr, names, t, 3, &out));
    cr_assert_eq(smelt_tensor_dtype(out), smelt_node_dtype(n), "%s: smelt_eval dtype", label);
    smelt_tensor *ref = NULL;
    t_reference(ctx, g, 1, &n, 3, t, &ref);
    t_expect_match(label, out, ref, tol_for(smelt_node_dtype(n)));
    smelt_tensor_free(ref);
    smelt_tensor_free(out);
    t_free_all(t, 3);
    smelt_graph_free(g);
}

static bool small_second(const char *name)
{
    return !strcmp(name, "pow") || !strcmp(name, "left_shift") || !strcmp(name, "right_shift");
}

/* ---- every operator of the table, by its own name, x every dtype ---------- */

static int callable_ops[SMELT_OP_COUNT];

ParameterizedTestParameters(expr_grid, function)
{
    int n = 0;
    for (int op = 0; op < SMELT_OP_COUNT; op++)
        if (callable(op))
            callable_ops[n++] = op;
    return cr_make_param_array(int, callable_ops, (size_t)n);
}

ParameterizedTest(int *op, expr_grid, function)
{
    smelt_ctx *ctx = t_ctx();
    const char *name = test_ops[*op].name;
    int ar = test_ops[*op].arity;
    char expr[96];
    snprintf(expr, sizeof expr, "%s(%s)", name, ar == 1 ? "a" : ar == 2 ? "a, b" : "a, b, c");
    for (int d = 0; d < SMELT_DTYPE_COUNT; d++) {
        smelt_dtype dt[3] = {(smelt_dtype)d, (smelt_dtype)d, (smelt_dtype)d};
        check_expr(ctx, expr, dt, t_builder_op((smelt_op)*op, (smelt_dtype)d),
                   t_op_supports((smelt_op)*op, (smelt_dtype)d), small_second(name));
    }
    smelt_ctx_free(ctx);
}

/* ---- every operator symbol x every dtype ------------------------------------ */

typedef struct syn {
    const char *expr, *op; /* & | ^ ~ on bool: the builder's logical operator (t_builder_op) */
} syn;

static const syn syntax[] = {
    {"a + b", "add"},          {"a - b", "sub"},         {"a * b", "mul"},
    {"a / b", "div"},          {"a // b", "floor_div"},  {"a % b", "mod"},
    {"a ** b", "pow"},         {"a < b", "lt"},          {"a <= b", "le"},
    {"a > b", "gt"},           {"a >= b", "ge"},         {"a == b", "eq"},
    {"a != b", "ne"},          {"a & b", "bitwise_and"}, {"a | b", "bitwise_or"},
    {"a ^ b", "bitwise_xor"},  {"a << b", "left_shift"}, {"a >> b", "right_shift"},
    {"-a", "neg"},             {"~a", "bitwise_not"},    {"a and b", "logical_and"},
    {"a or b", "logical_or"},  {"not a", "logical_not"}, {"where(a, b, c)", "where"},
};

ParameterizedTestParameters(expr_grid, operator_symbol)
{
    static int idx[sizeof syntax / sizeof syntax[0]];
    for (size_t i = 0; i < sizeof idx / sizeof idx[0]; i++)
        idx[i] = (int)i;
    return cr_make_param_array(int, idx, sizeof idx / sizeof idx[0]);
}

ParameterizedTest(int *i, expr_grid, operator_symbol)
{
    const syn *s = &syntax[*i];
    smelt_ctx *ctx = t_ctx();
    for (int d = 0; d < SMELT_DTYPE_COUNT; d++) {
        int op = smelt_op_from_name(s->op);
        cr_assert(op >= 0, "%s is not an operator", s->op);
        smelt_dtype dt[3] = {(smelt_dtype)d, (smelt_dtype)d, (smelt_dtype)d};
        check_expr(ctx, s->expr, dt, t_builder_op((smelt_op)op, (smelt_dtype)d),
                   t_op_supports((smelt_op)op, (smelt_dtype)d), small_second(s->op));
    }
    smelt_ctx_free(ctx);
}

/* where: every dtype of the condition with every dtype of the values */
Test(expr_grid, where_condition_dtypes)
{
    smelt_ctx *ctx = t_ctx();
    for (int c = 0; c < SMELT_DTYPE_COUNT; c++)
        for (int v = 0; v < SMELT_DTYPE_COUNT; v++) {
            smelt_dtype dt[3] = {(smelt_dtype)c, (smelt_dtype)v, (smelt_dtype)v};
            check_expr(ctx, "where(a, b, c)", dt, SMELT_OP_WHERE, true, false);
        }
    smelt_ctx_free(ctx);
}

/* the casts: every dtype name as a function, from every dtype */
Test(expr_grid, dtype_names_are_casts)
{
    smelt_ctx *ctx = t_ctx();
    static const char *const names[] = {"f32", "float32", "f64", "float64", "i32", "int32",
                                        "i64", "int64", "u8",  "uint8",   "bool",  "f16",
                                        "float16", "bf16", "bfloat16"};
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++)
        for (int d = 0; d < SMELT_DTYPE_COUNT; d++) {
            smelt_graph *g = t_graph(ctx);
            int64_t shp[] = {4, 5};
            smelt_input(g, "a", (smelt_dtype)d, 2, shp);
            char e[64];
            snprintf(e, sizeof e, "%s(a)", names[k]);
            smelt_node *n = smelt_expr(g, e, NULL, NULL, 0);
            cr_assert_not_null(n, "%s: %s", e, smelt_graph_errmsg(g));
            cr_assert_eq((int)smelt_node_dtype(n), smelt_dtype_from_name(names[k]), "%s", e);
            if (d != smelt_dtype_from_name(names[k])) {
                cr_assert_eq(smelt_node_op(n), SMELT_OP_CAST, "%s from %s", e, smelt_dtype_name((smelt_dtype)d));
                trng r;
                trng_init(&r, (uint64_t)(k * 16 + (size_t)d));
                smelt_tensor *t = t_tensor(ctx, (smelt_dtype)d, 2, shp);
                fill(t, &r, false);
                t_check_plan(e, ctx, g, 1, &n, 3, 1, &t, T_EXACT);
                smelt_tensor_free(t);
            }
            smelt_graph_free(g);
        }
    smelt_ctx_free(ctx);
}

/* every NumPy alias names an operator the parser reaches */
Test(expr_grid, aliases)
{
    smelt_ctx *ctx = t_ctx();
    const char *op;
    int n = 0;
    for (const char *alias; (alias = smelt_op_alias(n, &op)); n++) {
        int k = smelt_op_from_name(op);
        cr_assert(k >= 0 && callable(k), "alias %s -> %s: not a callable operator", alias, op);
        cr_assert_lt(smelt_op_from_name(alias), 0, "alias %s shadows an operator", alias);
        int d = SMELT_F64;
        if (!t_op_supports((smelt_op)k, SMELT_F64))
            d = SMELT_I64;
        int ar = test_ops[k].arity;
        char e[96];
        snprintf(e, sizeof e, "%s(%s)", alias, ar == 1 ? "a" : ar == 2 ? "a, b" : "a, b, c");
        smelt_dtype dt[3] = {(smelt_dtype)d, (smelt_dtype)d, (smelt_dtype)d};
        check_expr(ctx, e, dt, k, true, small_second(op));
    }
    cr_assert_gt(n, 20);
    smelt_ctx_free(ctx);
}

/* ---- literals, precedence, weak scalars ------------------------------------- */

/* A constant expression: value and dtype. */
static void expect_value(smelt_ctx *ctx, const char *expr, double want, smelt_dtype dt)
{
    smelt_tensor *out = NULL;
    int st = smelt_eval(ctx, expr, NULL, NULL, 0, &out);
    cr_assert_eq(st, SMELT_OK, "'%s': %s", expr, smelt_errmsg(ctx));
    cr_assert_eq(smelt_tensor_ndim(out), 0, "'%s': rank %d", expr, smelt_tensor_ndim(out));
    cr_assert_eq(smelt_tensor_dtype(out), dt, "'%s': dtype %s, expected %s", expr,
                 smelt_dtype_name(smelt_tensor_dtype(out)), smelt_dtype_name(dt));
    double v = smelt_tensor_get(out, 0);
    if (isnan(want))
        cr_assert(isnan(v), "'%s' = %.17g, expected nan", expr, v);
    else
        cr_assert_eq(v, want, "'%s' = %.17g, expected %.17g", expr, v, want);
    smelt_tensor_free(out);
}

Test(expr_syntax, precedence_and_associativity)
{
    smelt_ctx *ctx = t_ctx();
    expect_value(ctx, "2 + 3 * 4 ** 2", 50, SMELT_I64);
    expect_value(ctx, "-2 ** 2", -4, SMELT_I64);
    expect_value(ctx, "(-2) ** 2", 4, SMELT_I64);
    expect_value(ctx, "2.0 ** -1", 0.5, SMELT_F64);
    expect_value(ctx, "2 ** 3 ** 2", 512, SMELT_I64);
    expect_value(ctx, "10 - 4 - 3", 3, SMELT_I64);
    expect_value(ctx, "(1 + 2) * 3", 9, SMELT_I64);
    expect_value(ctx, "7 // 2 * 2", 6, SMELT_I64);
    expect_value(ctx, "-7 % 3", 2, SMELT_I64);
    expect_value(ctx, "-7 // 2", -4, SMELT_I64);
    expect_value(ctx, "7 / 2", 3.5, SMELT_F64);
    expect_value(ctx, "1 << 2 + 1", 8, SMELT_I64);
    expect_value(ctx, "5 & 3 ^ 1", 0, SMELT_I64);
    expect_value(ctx, "5 | 3 & 1", 5, SMELT_I64);
    expect_value(ctx, "~5", -6, SMELT_I64);
    expect_value(ctx, "- - 3", 3, SMELT_I64);
    expect_value(ctx, "+3", 3, SMELT_I64);
    expect_value(ctx, "-256 >> 4", -16, SMELT_I64);
    expect_value(ctx, "1 < 2 < 3", 1, SMELT_BOOL);
    expect_value(ctx, "1 < 3 < 2", 0, SMELT_BOOL);
    expect_value(ctx, "3 > 2 == True", 0, SMELT_BOOL); /* chained: 3 > 2 and 2 == True */
    expect_value(ctx, "(3 > 2) == True", 1, SMELT_BOOL);
    expect_value(ctx, "True & False | True", 1, SMELT_BOOL);
    expect_value(ctx, "~True", 0, SMELT_BOOL);
    expect_value(ctx, "not 1 > 2", 1, SMELT_BOOL);
    expect_value(ctx, "1 > 2 or 2 > 1 and not False", 1, SMELT_BOOL);
    expect_value(ctx, "where(1 > 2, 10, 20)", 20, SMELT_I64);
    expect_value(ctx, "maximum(3, 7.5) + minimum(-1, 2)", 6.5, SMELT_F64);
    expect_value(ctx, "arctan2(0.0, -1.0)", M_PI, SMELT_F64);
    expect_value(ctx, "sqrt(16)", 4, SMELT_F64);
    expect_value(ctx, "abs(-3)", 3, SMELT_I64);
    expect_value(ctx, "float32(1) / 3", (double)(1.0f / 3.0f), SMELT_F32);
    smelt_ctx_free(ctx);
}

Test(expr_syntax, literals)
{
    smelt_ctx *ctx = t_ctx();
    expect_value(ctx, "1e3", 1000, SMELT_F64);
    expect_value(ctx, "1E-2", 0.01, SMELT_F64);
    expect_value(ctx, ".5", 0.5, SMELT_F64);
    expect_value(ctx, "5.", 5, SMELT_F64);
    expect_value(ctx, "2.5e+1", 25, SMELT_F64);
    expect_value(ctx, "0x1F", 31, SMELT_I64);
    expect_value(ctx, "0b101", 5, SMELT_I64);
    expect_value(ctx, "0o17", 15, SMELT_I64);
    expect_value(ctx, "9223372036854775807", 9223372036854775807.0, SMELT_I64);
    expect_value(ctx, "True", 1, SMELT_BOOL);
    expect_value(ctx, "False", 0, SMELT_BOOL);
    expect_value(ctx, "inf", INFINITY, SMELT_F64);
    expect_value(ctx, "-inf", -INFINITY, SMELT_F64);
    expect_value(ctx, "nan", NAN, SMELT_F64);
    expect_value(ctx, "pi", M_PI, SMELT_F64);
    expect_value(ctx, " \t1 +\n 2 ", 3, SMELT_I64);
    /* an integer literal keeps every bit (beyond 2^53) */
    smelt_tensor *out = NULL;
    T_OK(ctx, smelt_eval(ctx, "9007199254740993 + 0", NULL, NULL, 0, &out));
    cr_assert_eq(*(const int64_t *)smelt_tensor_data(out), 9007199254740993LL);
    smelt_tensor_free(out);
    T_OK(ctx, smelt_eval(ctx, "-9223372036854775807 - 1", NULL, NULL, 0, &out));
    cr_assert_eq(*(const int64_t *)smelt_tensor_data(out), INT64_MIN);
    smelt_tensor_free(out);
    /* Python's: the most negative int64 as a literal, underscores between digits */
    const char *minimums[] = {"-9223372036854775808", "-0x8000000000000000", "- 9_223_372_036_854_775_808",
                              "1 + -9223372036854775808 - 1"};
    for (int i = 0; i < 4; i++) {
        T_OK(ctx, smelt_eval(ctx, minimums[i], NULL, NULL, 0, &out));
        cr_assert_eq(*(const int64_t *)smelt_tensor_data(out), INT64_MIN, "%s", minimums[i]);
        smelt_tensor_free(out);
    }
    expect_value(ctx, "1_000", 1000, SMELT_I64);
    expect_value(ctx, "0x_ff + 0b_1_0 + 0o1_7", 272, SMELT_I64);
    expect_value(ctx, "1_0.2_5", 10.25, SMELT_F64);
    expect_value(ctx, "1_0e1_0", 1e11, SMELT_F64);
    expect_value(ctx, ".5_5", 0.55, SMELT_F64);
    smelt_ctx_free(ctx);
}

/* NEP 50: literals take the array's dtype within its kind */
Test(expr_syntax, weak_scalars)
{
    smelt_ctx *ctx = t_ctx();
    static const struct {
        smelt_dtype a;
        const char *expr;
        smelt_dtype want;
    } cases[] = {
        {SMELT_F32, "a * 2.5", SMELT_F32},   {SMELT_F32, "a + 1", SMELT_F32},
        {SMELT_F32, "2 ** a", SMELT_F32},    {SMELT_F32, "a * (1 + 2.5)", SMELT_F32},
        {SMELT_F32, "-1.5 * a", SMELT_F32},  {SMELT_I32, "a * 2", SMELT_I32},
        {SMELT_I32, "a * 2.5", SMELT_F64},   {SMELT_I32, "a / 2", SMELT_F64},
        {SMELT_U8, "a + 1", SMELT_U8},       {SMELT_U8, "a * 0.5", SMELT_F64},
        {SMELT_BOOL, "a + 1", SMELT_I64},
        {SMELT_BOOL, "a * 1.5", SMELT_F64},  {SMELT_BOOL, "a & True", SMELT_BOOL},
        {SMELT_I64, "a > 2.5", SMELT_BOOL},  {SMELT_F64, "a + float32(1)", SMELT_F64},
        {SMELT_I32, "a + int64(1)", SMELT_I64}, {SMELT_I32, "a & 6", SMELT_I32},
        /* a function of literals is a NumPy scalar: strongly typed */
        {SMELT_F32, "a * (cos(3) + 5)", SMELT_F64}, {SMELT_F32, "a * sqrt(2)", SMELT_F64},
        {SMELT_F32, "a * (abs(-3) + 0.5)", SMELT_F64}, {SMELT_I32, "a + maximum(2, 3)", SMELT_I64},
        {SMELT_U8, "a * where(True, 2, 3)", SMELT_I64}, {SMELT_F32, "a * (3 + 5)", SMELT_F32},
        /* an integer array compares exactly with any Python int */
        {SMELT_U8, "a < 300", SMELT_BOOL},   {SMELT_I32, "a == 2147483648", SMELT_BOOL},
        {SMELT_U8, "-1 < a", SMELT_BOOL},    {SMELT_I32, "a <= -9223372036854775808", SMELT_BOOL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        smelt_graph *g = t_graph(ctx);
        int64_t shp[] = {7};
        smelt_input(g, "a", cases[i].a, 1, shp);
        smelt_node *n = smelt_expr(g, cases[i].expr, NULL, NULL, 0);
        cr_assert_not_null(n, "%s: %s", cases[i].expr, smelt_graph_errmsg(g));
        cr_assert_eq(smelt_node_dtype(n), cases[i].want, "'%s' with a %s gives %s, expected %s",
                     cases[i].expr, smelt_dtype_name(cases[i].a), smelt_dtype_name(smelt_node_dtype(n)),
                     smelt_dtype_name(cases[i].want));
        trng r;
        trng_init(&r, i);
        smelt_tensor *t = t_tensor(ctx, cases[i].a, 1, shp);
        fill(t, &r, false);
        t_check_plan(cases[i].expr, ctx, g, 1, &n, 3, 1, &t, tol_for(cases[i].want));
        smelt_tensor_free(t);
        smelt_graph_free(g);
    }
    smelt_ctx_free(ctx);
}

/* ---- errors ------------------------------------------------------------------ */

/* expr fails with status and the message's first line; the caret is under
 * column col (1-based; 0: no caret check). */
static void expect_error(const char *expr, int status, const char *first_line, int col)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    int64_t s45[] = {4, 5}, s3[] = {3};
    smelt_input(g, "a", SMELT_F32, 2, s45);
    smelt_input(g, "i", SMELT_I32, 2, s45);
    smelt_input(g, "d", SMELT_F32, 1, s3);
    smelt_node *n = smelt_expr(g, expr, NULL, NULL, 0);
    cr_assert_null(n, "'%s' was accepted", expr);
    const char *m = smelt_graph_errmsg(g);
    cr_assert_eq(smelt_graph_status(g), status, "'%s': status %d, expected %d: %s", expr,
                 smelt_graph_status(g), status, m);
    cr_assert_str_eq(smelt_errmsg(ctx), m, "the context has the graph's message");
    const char *nl = strchr(m, '\n');
    cr_assert_not_null(nl, "'%s': no expression line in '%s'", expr, m);
    cr_assert(strlen(first_line) == (size_t)(nl - m) && !strncmp(m, first_line, (size_t)(nl - m)),
              "'%s': first line is\n  %.*s\nexpected\n  %s", expr, (int)(nl - m), m, first_line);
    const char *l2 = nl + 1, *l3 = strchr(l2, '\n');
    cr_assert_not_null(l3, "'%s': no caret line in '%s'", expr, m);
    l3++;
    cr_assert(!strchr(l3, '\n') && l3[strlen(l3) - 1] == '^', "'%s': bad caret line '%s'", expr, l3);
    if (col)
        cr_assert_eq((int)strlen(l3), 2 + col, "'%s': caret at %d, expected column %d:\n%s", expr,
                     (int)strlen(l3) - 2, col, m);
    /* sticky: the graph keeps the first error */
    cr_assert_null(smelt_expr(g, "a + 1", NULL, NULL, 0));
    cr_assert_eq(smelt_graph_status(g), status);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(expr_errors, syntax)
{
    expect_error("a + * b", SMELT_ERR_PARSE, "unexpected '*' at column 5", 5);
    expect_error("a +", SMELT_ERR_PARSE, "unexpected end of expression at column 4", 4);
    expect_error("(a + 1", SMELT_ERR_PARSE, "unexpected end of expression at column 7 (expected ')')", 7);
    expect_error("a + 1)", SMELT_ERR_PARSE, "unexpected ')' at column 6", 6);
    expect_error("a a", SMELT_ERR_PARSE, "unexpected 'a' at column 3", 3);
    expect_error("", SMELT_ERR_PARSE, "empty expression", 1);
    expect_error("   ", SMELT_ERR_PARSE, "empty expression", 4);
    expect_error("a = 1", SMELT_ERR_PARSE,
                 "unexpected '=' at column 3 (use == to compare; keyword arguments are those of reductions: "
                 "sum(a, axis=1, keepdims=True))", 3);
    expect_error("exp(a, x=1)", SMELT_ERR_PARSE,
                 "exp() at column 8 takes no keyword arguments (those are the reductions': sum(a, axis=1, "
                 "keepdims=True))", 8);
    expect_error("!a", SMELT_ERR_PARSE, "unexpected '!' at column 1 (use ~ or 'not' to negate)", 1);
    expect_error("a $ 1", SMELT_ERR_PARSE, "unexpected '$' at column 3", 3);
    expect_error("a.b", SMELT_ERR_PARSE,
                 "unexpected 'b' at column 3: the only attribute is .T (the transpose); methods such as a.sum() "
                 "are not supported (write sum(a))", 3);
    expect_error("a[0", SMELT_ERR_PARSE, "unexpected end of expression at column 4 (expected ',' or ']')", 4);
    expect_error("a[0, 1, 2]", SMELT_ERR_PARSE, "too many indices at column 9: the array has rank 2", 9);
    expect_error("a[4]", SMELT_ERR_PARSE, "index 4 at column 3 is out of bounds for axis 0 of size 4", 3);
    expect_error("a[:, -6]", SMELT_ERR_PARSE, "index -6 at column 6 is out of bounds for axis 1 of size 5", 6);
    expect_error("a[::0]", SMELT_ERR_PARSE, "slice step cannot be zero at column 3", 3);
    expect_error("a[+]", SMELT_ERR_PARSE, "unexpected ']' at column 4 (expected an integer)", 4);
    expect_error("reshape(a, (3, -1))", SMELT_ERR_SHAPE,
                 "reshape: cannot reshape (4, 5) into a shape of 3 elements and one inferred dimension at column 1", 1);
    expect_error("reshape(a, (-1, -1))", SMELT_ERR_SHAPE,
                 "reshape: can only specify one unknown dimension (-1) at column 1", 1);
    expect_error("transpose(a, (0, 0))", SMELT_ERR_INVALID_ARG,
                 "transpose: axis 0 is repeated (perm must hold each axis of 2 once) at column 1", 1);
    expect_error("transpose(a, (1, 0, 2))", SMELT_ERR_PARSE, "transpose() at column 1: 3 axes for an array of rank 2", 1);
    expect_error("squeeze(a, 0)", SMELT_ERR_SHAPE,
                 "squeeze: axis 0 has size 4 (only an axis of size 1 can be removed) at column 1", 1);
    expect_error("flip(a, 2)", SMELT_ERR_INVALID_ARG, "slice: axis 2 is out of bounds for an array of rank 2 at column 1", 1);
    expect_error("reshape(a)", SMELT_ERR_PARSE, "reshape() at column 1 takes an array and a shape", 1);
    expect_error("'a'", SMELT_ERR_PARSE, "unexpected ''' at column 1", 1);
    expect_error("a +\x01", SMELT_ERR_PARSE, "unexpected byte 0x01 at column 4", 4);
    expect_error("a + \xc3\xa9", SMELT_ERR_PARSE, "unexpected byte 0xc3 at column 5", 5);
    expect_error("1a", SMELT_ERR_PARSE, "unexpected 'a' at column 2 (invalid number literal)", 2);
    expect_error("1.5.2", SMELT_ERR_PARSE, "unexpected '.2' at column 4", 4);
    expect_error("0x", SMELT_ERR_PARSE, "unexpected end of expression at column 3", 3);
    expect_error("2j", SMELT_ERR_PARSE, "complex literal at column 1: complex numbers are not supported", 1);
    expect_error("a + 99999999999999999999", SMELT_ERR_PARSE,
                 "integer literal 99999999999999999999 at column 5 does not fit in int64", 5);
    expect_error("a + 9223372036854775808", SMELT_ERR_PARSE,
                 "integer literal 9223372036854775808 at column 5 does not fit in int64 "
                 "(-9223372036854775808 does)", 5);
    expect_error("-9223372036854775808 ** 1", SMELT_ERR_PARSE,
                 "integer literal 9223372036854775808 at column 2 does not fit in int64 "
                 "(-9223372036854775808 does)", 2);
    expect_error("-0x8000000000000001", SMELT_ERR_PARSE,
                 "integer literal 0x8000000000000001 at column 2 does not fit in int64", 2);
    expect_error("1__000", SMELT_ERR_PARSE, "unexpected '_' at column 2 (invalid number literal)", 2);
    expect_error("a + 1_", SMELT_ERR_PARSE, "unexpected '_' at column 6 (invalid number literal)", 6);
    expect_error("1_.5", SMELT_ERR_PARSE, "unexpected '_' at column 2 (invalid number literal)", 2);
    expect_error("1._5", SMELT_ERR_PARSE, "unexpected '_' at column 3 (invalid number literal)", 3);
    expect_error("1e_5", SMELT_ERR_PARSE, "unexpected 'e' at column 2 (invalid number literal)", 2);
    expect_error("0x_", SMELT_ERR_PARSE, "unexpected '_' at column 3 (invalid number literal)", 3);
    expect_error("sin(a,", SMELT_ERR_PARSE, "unexpected end of expression at column 7", 7);
    expect_error("sin(a", SMELT_ERR_PARSE, "unexpected end of expression at column 6 (expected ')')", 6);
    expect_error("sin(a b)", SMELT_ERR_PARSE, "unexpected 'b' at column 7 (expected ',' or ')')", 7);
    expect_error("a and", SMELT_ERR_PARSE, "unexpected end of expression at column 6", 6);
    expect_error("a + not a", SMELT_ERR_PARSE, "unexpected 'not' at column 5", 5);
}

Test(expr_errors, names_and_arguments)
{
    expect_error("a + q", SMELT_ERR_PARSE, "unknown name 'q' at column 5", 5);
    expect_error("foo(a)", SMELT_ERR_PARSE,
                 "unknown function 'foo' at column 1 (smelt info --ops lists the functions)", 1);
    expect_error("2 * input(a)", SMELT_ERR_PARSE,
                 "unknown function 'input' at column 5 (smelt info --ops lists the functions)", 5);
    expect_error("cast(a)", SMELT_ERR_PARSE,
                 "unknown function 'cast' at column 1 (smelt info --ops lists the functions)", 1);
    expect_error("real(a)", SMELT_ERR_PARSE,
                 "real() at column 1: smelt has no complex dtypes; smelt fuses elementwise operations "
                 "(smelt info --ops lists them)", 1);
    expect_error("sin(a, a)", SMELT_ERR_PARSE, "sin() takes 1 argument, got 2 at column 1", 1);
    expect_error("1 + where(a, a)", SMELT_ERR_PARSE, "where() takes 3 arguments, got 2 at column 5", 5);
    expect_error("arctan2(a)", SMELT_ERR_PARSE, "arctan2() takes 2 arguments, got 1 at column 1", 1);
    expect_error("exp()", SMELT_ERR_PARSE, "exp() takes 1 argument, got 0 at column 1", 1);
    expect_error("f32(a, a)", SMELT_ERR_PARSE, "f32() takes 1 argument, got 2 at column 1", 1);
}

/* A typo gets the nearest function; NumPy syntax smelt does not have yet
 * says so, instead of a bare "unexpected" or "unknown". */
Test(expr_errors, suggestions_and_not_supported_yet)
{
    expect_error("sigmod(a)", SMELT_ERR_PARSE,
                 "unknown function 'sigmod' at column 1 (did you mean sigmoid? smelt info --ops lists "
                 "the functions)", 1);
    expect_error("1 + tahn(a)", SMELT_ERR_PARSE,
                 "unknown function 'tahn' at column 5 (did you mean tanh? smelt info --ops lists "
                 "the functions)", 5);
    expect_error("sqr(a)", SMELT_ERR_PARSE,
                 "unknown function 'sqr' at column 1 (did you mean sqrt? smelt info --ops lists "
                 "the functions)", 1);
    expect_error("a @ a", SMELT_ERR_SHAPE, "matmul: (4, 5) @ (4, 5): the inner dimensions differ (5 and 4) at column 3 "
                 "('@')", 3);
    expect_error("i @ a.T", SMELT_ERR_DTYPE, "matmul does not support dtype i32 (f32, f64, f16 and bf16: cast integers "
                 "first, e.g. float32(x)) at column 3 ('@')", 3);
    expect_error("a @ @ a", SMELT_ERR_PARSE, "unexpected '@' at column 5", 5);
    expect_error("stack((a, a))", SMELT_ERR_PARSE,
                 "stack() at column 1: this layout operation is not supported yet (transpose, reshape, "
                 "expand_dims, squeeze, flip, broadcast_to, concat, pad and slicing a[1:, ::2, None] are); smelt "
                 "fuses elementwise operations (smelt info --ops lists them)", 1);
    expect_error("concat((a, d))", SMELT_ERR_SHAPE,
                 "concat: part 1: cannot concatenate (4, 5) and (3,) along axis 0 (the same rank, and every other "
                 "dimension equal) at column 1", 1);
    expect_error("1 + concat((a, a), axis=2)", SMELT_ERR_INVALID_ARG,
                 "concat: axis 2 is out of bounds for an array of rank 2 at column 5", 5);
    expect_error("concat(a, a)", SMELT_ERR_PARSE,
                 "unexpected 'a' at column 8 (concat takes a tuple of arrays: concat((a, b), axis=0))", 8);
    expect_error("concat((a, a), axis=None)", SMELT_ERR_PARSE,
                 "concat() at column 21: axis=None (flattening) is not supported: reshape the parts to 1-D first", 21);
    expect_error("pad(a, ((1, 1), (2, 2), (0, 0)))", SMELT_ERR_PARSE,
                 "pad widths at column 8: 3 pairs for an array of rank 2", 8);
    expect_error("pad(a, (1, -1))", SMELT_ERR_INVALID_ARG,
                 "pad: axis 0: the widths (1, -1) must be 0 or more at column 1", 1);
    expect_error("pad(i, 1, constant_values=1e10)", SMELT_ERR_INVALID_ARG,
                 "pad: the value 1e+10 does not fit in i32 at column 1", 1);
    expect_error("pad(a, 1, mode=2)", SMELT_ERR_PARSE,
                 "unexpected 'mode' at column 11 (pad's other argument is constant_values=)", 11);
    expect_error("median(a, axis=1)", SMELT_ERR_PARSE,
                 "median() at column 1: this reduction is not supported yet (sum, prod, mean, max, min, argmax, "
                 "argmin, any, all, var, std and logsumexp are); smelt fuses elementwise operations (smelt info "
                 "--ops lists them)", 1);
    expect_error("2 * dot(a, a)", SMELT_ERR_PARSE,
                 "dot() at column 5: this matrix product is not supported yet (matmul and @ are); smelt fuses "
                 "elementwise operations (smelt info --ops lists them)", 5);
}

Test(expr_errors, types_and_shapes)
{
    expect_error("a & 1", SMELT_ERR_DTYPE, "bitwise_and does not support dtype f32 at column 3 ('&')", 3);
    expect_error("i + (a << 2)", SMELT_ERR_DTYPE, "left_shift does not support dtype f32 at column 8 ('<<')", 8);
    expect_error("~a", SMELT_ERR_DTYPE, "bitwise_not does not support dtype f32 at column 1 ('~')", 1);
    expect_error("-(a > 0)", SMELT_ERR_DTYPE, "neg does not support dtype bool at column 1 ('-')", 1);
    expect_error("bitwise_or(i, a)", SMELT_ERR_DTYPE, "bitwise_or does not support dtype f64 at column 1", 1);
    /* NumPy computes these on bool in int8, which smelt lacks */
    static const char *const int8[][2] = {
        {"(a > 0) // (i > 0)", "floor_div"}, {"(a > 0) % True", "mod"}, {"(a > 0) ** (i > 1)", "pow"},
        {"square(a > 0)", "square"}, {"reciprocal(a > 0)", "reciprocal"}, {"fmod(a > 0, a > 1)", "fmod"},
        {"(a > 0) << True", "left_shift"}};
    for (int k = 0; k < 7; k++) {
        char want[200];
        snprintf(want, sizeof want, "%s does not support dtype bool (NumPy computes it in int8, which "
                 "smelt does not have; cast to an integer dtype first, e.g. int32(x)) at column ",
                 int8[k][1]);
        smelt_ctx *ctx = t_ctx();
        smelt_graph *g = t_graph(ctx);
        int64_t s45[] = {4, 5};
        smelt_input(g, "a", SMELT_F32, 2, s45);
        smelt_input(g, "i", SMELT_I32, 2, s45);
        cr_assert_null(smelt_expr(g, int8[k][0], NULL, NULL, 0), "%s", int8[k][0]);
        cr_assert_eq(smelt_graph_status(g), SMELT_ERR_DTYPE);
        cr_assert(t_contains(smelt_graph_errmsg(g), want), "%s: %s", int8[k][0], smelt_graph_errmsg(g));
        smelt_graph_free(g);
        smelt_ctx_free(ctx);
    }
    /* a Python int beyond the dtype is still an error outside comparisons (NumPy 2) */
    expect_error("i + 2147483648", SMELT_ERR_DTYPE, "the scalar 2147483648 does not fit in i32 at column 3 ('+')", 3);
    expect_error("a + d", SMELT_ERR_SHAPE, "add: shapes (4, 5) and (3,) are not broadcastable at column 3 ('+')", 3);
}

Test(expr_errors, nesting_is_bounded)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    size_t n = 100000;
    char *s = malloc(2 * n + 2);
    cr_assert_not_null(s);
    memset(s, '(', n);
    s[n] = 'a';
    memset(s + n + 1, ')', n);
    s[2 * n + 1] = 0;
    smelt_input(g, "a", SMELT_F32, 0, NULL);
    cr_assert_null(smelt_expr(g, s, NULL, NULL, 0));
    cr_assert(t_contains(smelt_graph_errmsg(g), "nested too deeply"), "%s", smelt_graph_errmsg(g));
    smelt_graph_free(g);
    /* unary chains too */
    g = t_graph(ctx);
    smelt_input(g, "a", SMELT_F32, 0, NULL);
    memset(s, '-', n);
    s[n] = 'a';
    s[n + 1] = 0;
    cr_assert_null(smelt_expr(g, s, NULL, NULL, 0));
    cr_assert(t_contains(smelt_graph_errmsg(g), "nested too deeply"));
    smelt_graph_free(g);
    /* 150 levels are fine, and a long flat chain is not nesting */
    g = t_graph(ctx);
    smelt_input(g, "a", SMELT_F32, 0, NULL);
    memset(s, '(', 150);
    s[150] = 'a';
    memset(s + 151, ')', 150);
    s[301] = 0;
    cr_assert_not_null(smelt_expr(g, s, NULL, NULL, 0), "%s", smelt_graph_errmsg(g));
    size_t k = 0;
    s[k++] = 'a';
    while (k + 2 < 2 * n) {
        s[k++] = '+';
        s[k++] = 'a';
    }
    s[k] = 0;
    cr_assert_not_null(smelt_expr(g, s, NULL, NULL, 0), "%s", smelt_graph_errmsg(g));
    smelt_graph_free(g);
    free(s);
    smelt_ctx_free(ctx);
}

Test(expr_errors, long_expressions_show_a_window)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_input(g, "a", SMELT_F32, 0, NULL);
    char s[1200];
    size_t k = 0;
    while (k < 1000) {
        s[k++] = 'a';
        s[k++] = '+';
    }
    s[k++] = '*';
    s[k] = 0;
    cr_assert_null(smelt_expr(g, s, NULL, NULL, 0));
    const char *m = smelt_graph_errmsg(g);
    cr_assert(t_contains(m, "unexpected '*' at column 1001"), "%s", m);
    const char *l2 = strchr(m, '\n') + 1, *l3 = strchr(l2, '\n') + 1;
    cr_assert_lt(strlen(l3), 120);
    cr_assert(!strncmp(l2, "  ...", 5), "the window starts with '...':\n%s", m);
    cr_assert_eq(l2[strlen(l3) - 1], '*', "the caret points at the '*':\n%s", m);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(expr_errors, bad_arguments)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    cr_assert_null(smelt_expr(NULL, "1", NULL, NULL, 0));
    cr_assert_null(smelt_expr(g, NULL, NULL, NULL, 0));
    cr_assert_eq(smelt_graph_status(g), SMELT_ERR_INVALID_ARG);
    smelt_graph_free(g);
    g = t_graph(ctx);
    const char *names[] = {"x"};
    smelt_node *nodes[] = {NULL};
    cr_assert_null(smelt_expr(g, "x", names, nodes, 1));
    cr_assert(t_contains(smelt_graph_errmsg(g), "'x' is NULL"), "%s", smelt_graph_errmsg(g));
    smelt_graph_free(g);
    smelt_tensor *out = (smelt_tensor *)1;
    T_ERR(ctx, smelt_eval(ctx, "a + 1", NULL, NULL, 0, &out), SMELT_ERR_PARSE, "unknown name 'a'");
    cr_assert_null(out);
    smelt_ctx_free(ctx);
}

/* ---- expressions inside larger graphs ------------------------------------------ */

Test(expr_graph, names_bind_inner_nodes)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    int64_t shp[] = {3, 8};
    smelt_node *x = smelt_input(g, "x", SMELT_F32, 2, shp);
    smelt_node *y = smelt_input(g, "y", SMELT_F32, 2, shp);
    smelt_node *s = smelt_mul(g, x, y);
    smelt_node *b = smelt_unary(g, SMELT_OP_BARRIER, s);
    const char *names[] = {"s", "b", "x"}; /* "x" rebinds the input x to s */
    smelt_node *nodes[] = {s, b, s};
    smelt_node *r = smelt_expr(g, "where(s > 0, sqrt(b), y) + x", names, nodes, 3);
    cr_assert_not_null(r, "%s", smelt_graph_errmsg(g));
    smelt_node *r2 = smelt_expr(g, "r * 2", (const char *[]){"r"}, &r, 1);
    cr_assert_not_null(r2, "%s", smelt_graph_errmsg(g));
    smelt_node *outs[] = {r, r2};
    trng rg;
    trng_init(&rg, 1);
    smelt_tensor *in[2] = {t_tensor(ctx, SMELT_F32, 2, shp), t_tensor(ctx, SMELT_F32, 2, shp)};
    fill(in[0], &rg, false);
    fill(in[1], &rg, false);
    t_check_plan("inner nodes", ctx, g, 2, outs, 3, 2, in, tol_for(SMELT_F32));
    /* the value: where(x*y > 0, sqrt(x*y), y) + x*y */
    smelt_tensor *got = NULL;
    smelt_plan *p = t_plan(ctx, g, 1, &r, 3);
    t_run(p, 2, in, 1, &got);
    for (int64_t i = 0; i < 24; i++) {
        double xv = smelt_tensor_get(in[0], i), yv = smelt_tensor_get(in[1], i);
        float sv = (float)xv * (float)yv;
        float want = (sv > 0 ? sqrtf(sv) : (float)yv) + sv;
        cr_assert_eq((float)smelt_tensor_get(got, i), want, "element %lld", (long long)i);
    }
    smelt_tensor_free(got);
    smelt_plan_free(p);
    t_free_all(in, 2);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(expr_graph, syntax_errors_build_nothing)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_input(g, "a", SMELT_F32, 0, NULL);
    char *before = NULL, *after = NULL;
    smelt_node *a = smelt_graph_input(g, 0);
    T_OK(ctx, smelt_graph_to_text(g, 1, &a, &before));
    /* the check pass runs first: a later syntax error leaves no nodes behind
     * (verified on a copy of the graph that never saw the error) */
    smelt_graph *g2 = t_graph(ctx);
    smelt_input(g2, "a", SMELT_F32, 0, NULL);
    cr_assert_null(smelt_expr(g2, "sin(a) * exp(a) +", NULL, NULL, 0));
    smelt_graph_free(g2);
    T_OK(ctx, smelt_graph_to_text(g, 1, &a, &after));
    cr_assert_str_eq(before, after);
    smelt_free(before);
    smelt_free(after);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* ---- fuzz ----------------------------------------------------------------------- */

static int fuzz_iters(int dflt)
{
    const char *e = getenv("SMELT_FUZZ_ITERS");
    return e && atoi(e) > 0 ? atoi(e) : dflt;
}

static const char *const pieces[] = {
    "a", "b", "c", "1", "2.5", "0x1f", "1e3", ".5", "True", "False", "inf", "nan", "pi",
    "+", "-", "*", "/", "//", "%", "**", "<", "<=", ">", ">=", "==", "!=", "&", "|", "^",
    "~", "<<", ">>", "(", ")", ",", " ", "and", "or", "not", "where(", "sin(", "arctan2(",
    "maximum(", "f32(", "foo(", "exp", "=", "!", ".", "[", "'", "\t", "9999999999999999999999",
    "1j", "0b", "e", "_x", "abs(", "bitwise_and(",
};

/* Parse s on a graph with inputs a f32, b i32, c bool; on success sometimes
 * compile and run it; on failure the message must locate the error. */
static void fuzz_one(smelt_ctx *ctx, const char *s, bool run)
{
    smelt_graph *g = t_graph(ctx);
    int64_t shp[] = {5};
    smelt_node *in[3] = {smelt_input(g, "a", SMELT_F32, 1, shp), smelt_input(g, "b", SMELT_I32, 1, shp),
                         smelt_input(g, "c", SMELT_BOOL, 1, shp)};
    smelt_node *n = smelt_expr(g, s, NULL, NULL, 0);
    if (!n) {
        const char *m = smelt_graph_errmsg(g);
        cr_assert(smelt_graph_status(g) != SMELT_OK, "'%s': NULL without an error", s);
        cr_assert(t_contains(m, "at column") || t_contains(m, "empty expression"),
                  "'%s': the message does not say where: %s", s, m);
        cr_assert(strchr(m, '^'), "'%s': no caret line: %s", s, m);
    } else if (run) {
        smelt_plan *p = NULL;
        int st = smelt_plan_new(ctx, g, 1, &n, NULL, &p);
        cr_assert_eq(st, SMELT_OK, "'%s' parsed but does not compile: %s", s, smelt_errmsg(ctx));
        trng r;
        trng_init(&r, 99);
        smelt_tensor *t[3];
        for (int i = 0; i < 3; i++) {
            t[i] = t_tensor(ctx, smelt_node_dtype(in[i]), 1, shp);
            fill(t[i], &r, false);
        }
        smelt_tensor *out = NULL;
        cr_assert_eq(smelt_plan_run(p, 3, t, 1, &out), SMELT_OK, "'%s': %s", s, smelt_errmsg(ctx));
        smelt_tensor_free(out);
        t_free_all(t, 3);
        smelt_plan_free(p);
    }
    smelt_graph_free(g);
}

Test(expr_fuzz, token_soup)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 7);
    int iters = fuzz_iters(3000), parsed = 0;
    char s[512];
    for (int it = 0; it < iters; it++) {
        size_t k = 0;
        int n = (int)trng_range(&r, 0, 24);
        for (int j = 0; j < n; j++) {
            const char *p = pieces[trng_range(&r, 0, NELEMS(pieces) - 1)];
            size_t l = strlen(p);
            if (k + l + 1 < sizeof s) {
                memcpy(s + k, p, l);
                k += l;
            }
        }
        s[k] = 0;
        smelt_graph *g = t_graph(ctx);
        smelt_input(g, "a", SMELT_F32, 0, NULL);
        bool ok = smelt_expr(g, s, NULL, NULL, 0) != NULL;
        smelt_graph_free(g);
        parsed += ok;
        fuzz_one(ctx, s, ok && it % 16 == 0);
    }
    cr_log_info("token soup: %d of %d parsed (seed %llu)", parsed, iters, (unsigned long long)r.seed);
    smelt_ctx_free(ctx);
}

Test(expr_fuzz, mutations_and_bytes)
{
    static const char *const seeds[] = {
        "where(a > 0, a*b, exp(a)) + 1", "sin(a) ** 2 + cos(a) ** 2", "(b << 2) & 0xff | ~b",
        "c & (a < 2.5) | not c", "arctan2(a, 1.5) // 0.25 % 3", "maximum(a, -b) * f64(c)",
    };
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 11);
    int iters = fuzz_iters(3000);
    char s[256];
    for (int it = 0; it < iters; it++) {
        const char *src = seeds[trng_range(&r, 0, NELEMS(seeds) - 1)];
        size_t n = strlen(src);
        memcpy(s, src, n + 1);
        int muts = (int)trng_range(&r, 1, 4);
        for (int m = 0; m < muts; m++) {
            size_t at = (size_t)trng_range(&r, 0, (int64_t)n - 1);
            switch (trng_range(&r, 0, 3)) {
            case 0: s[at] = (char)trng_range(&r, 1, 255); break; /* any byte but NUL */
            case 1: memmove(s + at, s + at + 1, n - at); n--; break;
            case 2:
                if (n + 1 < sizeof s) {
                    memmove(s + at + 1, s + at, n - at + 1);
                    s[at] = "()+-*,ab1.e"[trng_range(&r, 0, 10)];
                    n++;
                }
                break;
            default: s[at] = s[(size_t)trng_range(&r, 0, (int64_t)n - 1)]; break;
            }
            if (!n)
                break;
        }
        fuzz_one(ctx, s, it % 32 == 0);
    }
    smelt_ctx_free(ctx);
}

/* ---- reductions --------------------------------------------------------------- */

/* expr on a (f32 [4, 5]) and i (i32 [4, 5]): the dtype and shape of its
 * result, and the reference's values */
static void expect_reduce(const char *expr, smelt_dtype dt, int ndim, const int64_t *shape)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *in[] = {smelt_input(g, "a", SMELT_F32, SHP(4, 5)), smelt_input(g, "i", SMELT_I32, SHP(4, 5))};
    smelt_node *n = smelt_expr(g, expr, NULL, NULL, 0);
    cr_assert_not_null(n, "'%s': %s", expr, smelt_graph_errmsg(g));
    cr_assert_eq(smelt_node_dtype(n), dt, "'%s': %s", expr, smelt_dtype_name(smelt_node_dtype(n)));
    cr_assert_eq(smelt_node_ndim(n), ndim, "'%s': rank %d", expr, smelt_node_ndim(n));
    for (int d = 0; d < ndim; d++)
        cr_assert_eq(smelt_node_shape(n)[d], shape[d], "'%s': dimension %d", expr, d);
    trng r;
    trng_init(&r, 7);
    smelt_tensor *t[] = {t_tensor(ctx, SMELT_F32, SHP(4, 5)), t_tensor(ctx, SMELT_I32, SHP(4, 5))};
    fill(t[0], &r, false), fill(t[1], &r, false);
    (void)in;
    t_check_plan(expr, ctx, g, 1, &n, 3, 2, t, (t_tol){4, 1e-6, 1e-5, false});
    t_free_all(t, 2);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(expr_reduce, numpy_calls)
{
    expect_reduce("sum(a)", SMELT_F32, 0, NULL);
    expect_reduce("prod(i)", SMELT_I64, 0, NULL); /* numexpr's */
    expect_reduce("sum(a, 1)", SMELT_F32, SHP(4));
    expect_reduce("sum(a, axis=1)", SMELT_F32, SHP(4));
    expect_reduce("sum(i, axis = -2, keepdims = True)", SMELT_I64, SHP(1, 5));
    expect_reduce("max(a, axis=-1, keepdims=True)", SMELT_F32, SHP(4, 1));
    expect_reduce("mean(i, axis=(0, 1))", SMELT_F64, 0, NULL);
    expect_reduce("mean(a, axis=(1,), keepdims=1)", SMELT_F32, SHP(4, 1));
    expect_reduce("argmax(a, axis=1)", SMELT_I64, SHP(4));
    expect_reduce("argmin(a)", SMELT_I64, 0, NULL);
    expect_reduce("amin(a, None, keepdims=False)", SMELT_F32, 0, NULL);
    expect_reduce("any(a > 1, axis=0)", SMELT_BOOL, SHP(5));
    expect_reduce("all(i, 0,)", SMELT_BOOL, SHP(5));
    expect_reduce("a - max(a, axis=1, keepdims=True) + sum(i) * 2", SMELT_F64, SHP(4, 5));
    /* the softmax, in one expression */
    expect_reduce("exp(a - max(a, axis=-1, keepdims=True)) / "
                  "sum(exp(a - max(a, axis=-1, keepdims=True)), axis=-1, keepdims=True)",
                  SMELT_F32, SHP(4, 5));
}

Test(expr_reduce, errors)
{
    expect_error("sum()", SMELT_ERR_PARSE, "sum() takes an array (and optionally axis, keepdims), got no argument "
                 "at column 1", 1);
    expect_error("sum(a, axis=2)", SMELT_ERR_INVALID_ARG,
                 "sum: axis 2 is out of bounds for an array of rank 2 at column 1", 1);
    expect_error("sum(a, axis=(1, -1))", SMELT_ERR_INVALID_ARG,
                 "sum: duplicate value in 'axis' (axis -1 given twice) at column 1", 1);
    expect_error("argmax(a, axis=(0, 1))", SMELT_ERR_INVALID_ARG,
                 "argmax takes one axis or all of them, got 2 axes (as NumPy's) at column 1", 1);
    expect_error("sum(a, dtype=1)", SMELT_ERR_PARSE, "sum() at column 8: the unsupported keyword argument 'dtype' "
                 "(sum() takes axis= and keepdims=)", 8);
    expect_error("max(a, foo=1)", SMELT_ERR_PARSE, "max() at column 8: unexpected keyword argument 'foo' "
                 "(max() takes axis= and keepdims=)", 8);
    expect_error("sum(a, 1, 0)", SMELT_ERR_PARSE, "sum() at column 11: after the array and the axis, arguments are "
                 "keyword arguments (keepdims=True)", 11);
    expect_error("sum(a, axis=1, axis=0)", SMELT_ERR_PARSE, "sum() got axis twice at column 16", 16);
    expect_error("sum(a, keepdims=2)", SMELT_ERR_PARSE, "unexpected '2' at column 17 (keepdims is True or False)", 17);
    expect_error("sum(a, axis=1.5)", SMELT_ERR_PARSE,
                 "unexpected '1.5' at column 13 (an axis is an integer, a tuple of integers or None)", 13);
    expect_error("sum(a, axis=())", SMELT_ERR_PARSE, "axis=() reduces no axis, which smelt does not support: leave "
                 "the axis out (or give None) to reduce every axis", 0);
    expect_error("sum(a, axis=(0 1))", SMELT_ERR_PARSE,
                 "unexpected '1' at column 16 (expected ',' or ')' in a tuple)", 16);
    expect_error("sum(a b)", SMELT_ERR_PARSE, "unexpected 'b' at column 7 (expected ',' or ')')", 7);
}

/* var, std (ddof) and logsumexp: composites of reductions, against sums in
 * long double on fresh random rows; SciPy's logsumexp on rows of -inf, +inf
 * and NaN; ddof's errors. */
Test(expr, var_std_logsumexp)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 31);
    enum { R = 5, C = 37 };
    smelt_tensor *x = t_tensor(ctx, SMELT_F64, SHP(R, C));
    double *xd = smelt_tensor_data(x);
    for (int i = 0; i < R * C; i++)
        xd[i] = trng_uniform(&r, -4, 4) + 10;
    xd[3 * C + 1] = -INFINITY, xd[4 * C + 2] = INFINITY; /* rows 3, 4: logsumexp's special rows */
    for (int c = 0; c < C; c++)
        xd[2 * C + c] = -INFINITY; /* row 2: all -inf */
    const char *name = "x";
    const char *exprs[] = {"var(x, axis=1)", "std(x, axis=1, ddof=1)", "logsumexp(x, axis=-1)"};
    for (int k = 0; k < 3; k++) {
        smelt_tensor *out = NULL;
        T_OK(ctx, smelt_eval(ctx, exprs[k], &name, &x, 1, &out));
        const double *o = smelt_tensor_data(out);
        const int rows[] = {0, 1, 3}; /* finite rows; logsumexp also row 3 (one -inf) */
        for (int ri = 0; ri < (k == 2 ? 3 : 2); ri++) {
            int i = rows[ri];
            long double s = 0, m = -INFINITY, v = 0, e = 0;
            for (int c = 0; c < C; c++)
                s += xd[i * C + c], m = fmaxl(m, xd[i * C + c]);
            s /= C;
            for (int c = 0; c < C; c++)
                v += (xd[i * C + c] - s) * (xd[i * C + c] - s), e += expl(xd[i * C + c] - m);
            long double want = k == 0 ? v / C : k == 1 ? sqrtl(v / (C - 1)) : logl(e) + m;
            cr_assert(fabsl(o[i] - want) <= 1e-13L * fabsl(want), "%s row %d: %.17g, expected %.17Lg", exprs[k], i, o[i],
                      want);
        }
        if (k == 2)
            cr_assert(o[2] == -INFINITY && o[4] == INFINITY, "logsumexp of a row of -inf, of one with +inf: %g %g",
                      o[2], o[4]);
        smelt_tensor_free(out);
    }
    smelt_tensor *out = NULL;
    T_ERR(ctx, smelt_eval(ctx, "var(x, ddof=-1)", &name, &x, 1, &out), SMELT_ERR_PARSE, "ddof is a whole number");
    T_ERR(ctx, smelt_eval(ctx, "logsumexp(x, ddof=1)", &name, &x, 1, &out), SMELT_ERR_PARSE,
          "keyword argument 'ddof'");
    T_ERR(ctx, smelt_eval(ctx, "var(x, ddof=1, ddof=1)", &name, &x, 1, &out), SMELT_ERR_PARSE, "ddof twice");
    smelt_tensor_free(x);
    smelt_ctx_free(ctx);
}

/* arange(n): 0, 1, ..., n - 1 (i64), broadcast as NumPy's; the one-hot pick
 * of a cross-entropy; bad arguments are clear errors */
Test(expr_reduce, arange)
{
    expect_reduce("arange(5) * a", SMELT_F64, SHP(4, 5));
    expect_reduce("sum(where(arange(5) == i, a, 0), axis=1)", SMELT_F32, SHP(4));
    expect_reduce("max(where(arange(5) == abs(i) % 5, a, -inf), axis=-1, keepdims=True)", SMELT_F32, SHP(4, 1));
    expect_error("arange(-1) + a", SMELT_ERR_PARSE, "arange() at column 1 takes one whole number n >= 0 (arange(n): "
                 "0, 1, ..., n - 1)", 8);
    expect_error("arange(a)", SMELT_ERR_PARSE, "arange() at column 1 takes one whole number n >= 0 (arange(n): "
                 "0, 1, ..., n - 1)", 8);
    expect_error("arange(4, 5)", SMELT_ERR_PARSE, "unexpected ',' at column 9 (arange(n) takes one argument)", 9);
    expect_error("arange(4) + a", SMELT_ERR_SHAPE,
                 "add: shapes (4,) and (4, 5) are not broadcastable at column 11 ('+')", 11);
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    cr_assert_null(smelt_arange(g, 3, SMELT_BOOL));
    cr_assert_eq(smelt_graph_status(g), SMELT_ERR_DTYPE, "%s", smelt_graph_errmsg(g));
    cr_assert(t_contains(smelt_graph_errmsg(g), "arange: dtype bool is not a number type"), "%s",
              smelt_graph_errmsg(g));
    smelt_graph_free(g);
    g = t_graph(ctx);
    cr_assert_null(smelt_arange(g, -2, SMELT_I64));
    cr_assert_eq(smelt_graph_status(g), SMELT_ERR_SHAPE, "%s", smelt_graph_errmsg(g));
    smelt_graph_free(g);
    /* every number dtype, through a kernel of its own and fused, against the reference */
    const smelt_dtype dts[] = {SMELT_I32, SMELT_I64, SMELT_U8, SMELT_F16, SMELT_F32, SMELT_F64};
    for (size_t k = 0; k < sizeof dts / sizeof dts[0]; k++) {
        g = t_graph(ctx);
        smelt_node *x = smelt_input(g, "x", dts[k], SHP(3, 70));
        smelt_node *outs[] = {smelt_arange(g, 70, dts[k]), smelt_mul(g, x, smelt_arange(g, 70, dts[k]))};
        trng r;
        trng_init(&r, 11 + k);
        smelt_tensor *in = t_rand(ctx, &r, dts[k], SHP(3, 70));
        t_check_plan("arange", ctx, g, 2, outs, 3, 1, &in, (t_tol){4, 1e-6, 1e-5, false});
        t_check_plan("arange", ctx, g, 2, outs, 0, 1, &in, (t_tol){4, 1e-6, 1e-5, false});
        smelt_tensor_free(in);
        smelt_graph_free(g);
    }
    smelt_ctx_free(ctx);
}
