/* The graph builder, dtypes, the operator table, host tensors and views, and
 * the float64 reference interpreter on hand-computed values. */
#include <math.h>
#include <string.h>

#include "common.h"

/* ---- tables ----------------------------------------------------------------- */

Test(table, ops_match_ops_def)
{
    cr_assert_gt(SMELT_OP_COUNT, 60, "ops.def lists %d operators", (int)SMELT_OP_COUNT);
    for (int op = 0; op < SMELT_OP_COUNT; op++) {
        const char *name = smelt_op_name((smelt_op)op);
        cr_assert_not_null(name, "op %d has no name", op);
        cr_assert_str_eq(name, test_ops[op].name);
        cr_assert_eq(smelt_op_arity((smelt_op)op), test_ops[op].arity, "%s", name);
        cr_assert_eq(smelt_op_from_name(name), op, "%s does not round-trip", name);
        cr_assert(strlen(test_ops[op].dtypes) >= 1 && strspn(test_ops[op].dtypes, "FIUB") ==
                                                          strlen(test_ops[op].dtypes),
                  "%s: dtypes column '%s'", name, test_ops[op].dtypes);
        for (int k = 0; k < op; k++)
            cr_assert_str_neq(name, test_ops[k].name, "duplicate name %s", name);
    }
    cr_assert_null(smelt_op_name(SMELT_OP_COUNT));
    cr_assert_null(smelt_op_name((smelt_op)-1));
    cr_assert_eq(smelt_op_arity(SMELT_OP_COUNT), -1);
    cr_assert_eq(smelt_op_from_name("no_such_op"), SMELT_ERR_INVALID_ARG);
    cr_assert_eq(smelt_op_from_name(NULL), SMELT_ERR_INVALID_ARG);
    cr_assert_eq(smelt_op_from_name("add"), SMELT_OP_ADD);
    cr_assert_eq(smelt_op_arity(SMELT_OP_WHERE), 3);
}

Test(table, dtypes)
{
    static const char *names[] = {"f32", "f64", "i32", "i64", "u8", "bool", "f16", "bf16"};
    static const size_t sizes[] = {4, 8, 4, 8, 1, 1, 2, 2};
    for (int d = 0; d < SMELT_DTYPE_COUNT; d++) {
        cr_assert_str_eq(smelt_dtype_name((smelt_dtype)d), names[d]);
        cr_assert_eq(smelt_dtype_size((smelt_dtype)d), sizes[d]);
        cr_assert_eq(smelt_dtype_from_name(names[d]), d);
    }
    cr_assert_eq(smelt_dtype_from_name("float32"), SMELT_F32);
    cr_assert_eq(smelt_dtype_from_name("uint8"), SMELT_U8);
    cr_assert_eq(smelt_dtype_from_name("float16"), SMELT_F16);
    cr_assert_eq(smelt_dtype_from_name("bfloat16"), SMELT_BF16);
    cr_assert_eq(smelt_dtype_from_name("f128"), SMELT_ERR_DTYPE);
    cr_assert_eq(smelt_dtype_from_name("half"), SMELT_ERR_DTYPE);
    cr_assert_eq(smelt_dtype_from_name(NULL), SMELT_ERR_DTYPE);
    cr_assert_null(smelt_dtype_name(SMELT_DTYPE_COUNT));
    cr_assert_eq(smelt_dtype_size(SMELT_DTYPE_COUNT), 0);
}

Test(table, promotion_is_numpy)
{
    static const struct {
        smelt_dtype a, b, r;
    } cases[] = {
        {SMELT_F32, SMELT_F32, SMELT_F32}, {SMELT_F32, SMELT_F64, SMELT_F64},
        {SMELT_I32, SMELT_F32, SMELT_F64}, {SMELT_I64, SMELT_F32, SMELT_F64},
        {SMELT_U8, SMELT_F32, SMELT_F32},  {SMELT_BOOL, SMELT_F32, SMELT_F32},
        {SMELT_I32, SMELT_I64, SMELT_I64}, {SMELT_U8, SMELT_I32, SMELT_I32},
        {SMELT_BOOL, SMELT_U8, SMELT_U8},  {SMELT_BOOL, SMELT_BOOL, SMELT_BOOL},
        {SMELT_U8, SMELT_U8, SMELT_U8},    {SMELT_I64, SMELT_F64, SMELT_F64},
        /* f16 as NumPy; bf16 like f16; f16 with bf16 gives f32, as PyTorch */
        {SMELT_F16, SMELT_F16, SMELT_F16}, {SMELT_F16, SMELT_F32, SMELT_F32},
        {SMELT_F16, SMELT_F64, SMELT_F64}, {SMELT_U8, SMELT_F16, SMELT_F16},
        {SMELT_BOOL, SMELT_F16, SMELT_F16}, {SMELT_I32, SMELT_F16, SMELT_F64},
        {SMELT_I64, SMELT_F16, SMELT_F64}, {SMELT_F16, SMELT_BF16, SMELT_F32},
        {SMELT_BF16, SMELT_BF16, SMELT_BF16}, {SMELT_BF16, SMELT_F32, SMELT_F32},
        {SMELT_BF16, SMELT_F64, SMELT_F64}, {SMELT_U8, SMELT_BF16, SMELT_BF16},
        {SMELT_BOOL, SMELT_BF16, SMELT_BF16}, {SMELT_I32, SMELT_BF16, SMELT_F64},
        {SMELT_I64, SMELT_BF16, SMELT_F64},
    };
    for (int i = 0; i < NELEMS(cases); i++) {
        cr_assert_eq(smelt_dtype_promote(cases[i].a, cases[i].b), cases[i].r, "%s+%s",
                     smelt_dtype_name(cases[i].a), smelt_dtype_name(cases[i].b));
        cr_assert_eq(smelt_dtype_promote(cases[i].b, cases[i].a), cases[i].r, "%s+%s",
                     smelt_dtype_name(cases[i].b), smelt_dtype_name(cases[i].a));
    }
}

Test(table, strerror)
{
    static const int codes[] = {SMELT_OK,          SMELT_ERR_INVALID_ARG, SMELT_ERR_NOMEM,
                                SMELT_ERR_SHAPE,   SMELT_ERR_DTYPE,       SMELT_ERR_BACKEND,
                                SMELT_ERR_COMPILE, SMELT_ERR_RUNTIME,     SMELT_ERR_IO,
                                SMELT_ERR_PARSE,   SMELT_ERR_UNSUPPORTED};
    for (int i = 0; i < NELEMS(codes); i++) {
        cr_assert_str_neq(smelt_strerror(codes[i]), "unknown status", "code %d", codes[i]);
        for (int j = 0; j < i; j++)
            cr_assert_str_neq(smelt_strerror(codes[i]), smelt_strerror(codes[j]));
    }
    cr_assert_str_eq(smelt_strerror(SMELT_OK), "success");
    cr_assert_str_eq(smelt_strerror(1), "unknown status");
    cr_assert_str_eq(smelt_strerror(-999), "unknown status");
}

/* ---- builder ---------------------------------------------------------------- */

Test(builder, inputs_and_shapes)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_F32, SHP(3, 1));
    smelt_node *b = smelt_input(g, NULL, SMELT_F32, SHP(4));
    cr_assert(a && b);
    cr_assert_eq(smelt_graph_num_inputs(g), 2);
    cr_assert_eq(smelt_node_op(a), SMELT_OP_INPUT);
    cr_assert_eq(smelt_node_ndim(a), 2);
    cr_assert_eq(smelt_node_shape(a)[0], 3);
    smelt_node *c = smelt_add(g, a, b);
    cr_assert_not_null(c, "%s", smelt_graph_errmsg(g));
    cr_assert_eq(smelt_node_op(c), SMELT_OP_ADD);
    cr_assert_eq(smelt_node_dtype(c), SMELT_F32);
    cr_assert_eq(smelt_node_ndim(c), 2);
    cr_assert_eq(smelt_node_shape(c)[0], 3);
    cr_assert_eq(smelt_node_shape(c)[1], 4);
    /* rank grows on the left */
    smelt_node *d = smelt_input(g, "d", SMELT_F32, SHP(2, 1, 1));
    smelt_node *e = smelt_mul(g, c, d);
    cr_assert_not_null(e);
    cr_assert_eq(smelt_node_ndim(e), 3);
    cr_assert_eq(smelt_node_shape(e)[0], 2);
    cr_assert_eq(smelt_node_shape(e)[1], 3);
    cr_assert_eq(smelt_node_shape(e)[2], 4);
    /* rank 0 */
    smelt_node *s = smelt_input(g, "s", SMELT_F64, 0, NULL);
    cr_assert_not_null(s);
    cr_assert_eq(smelt_node_ndim(s), 0);
    smelt_node *f = smelt_add(g, e, s);
    cr_assert_eq(smelt_node_dtype(f), SMELT_F64);
    cr_assert_eq(smelt_node_ndim(f), 3);
    cr_assert_eq(smelt_graph_status(g), SMELT_OK);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

static smelt_dtype binary_dtype(smelt_graph *g, smelt_op op, smelt_node *a, smelt_node *b)
{
    smelt_node *r = smelt_binary(g, op, a, b);
    cr_assert_not_null(r, "%s: %s", smelt_op_name(op), smelt_graph_errmsg(g));
    return smelt_node_dtype(r);
}

Test(builder, dtype_rules)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *in[SMELT_DTYPE_COUNT];
    for (int d = 0; d < SMELT_DTYPE_COUNT; d++)
        in[d] = smelt_input(g, NULL, (smelt_dtype)d, SHP(4));
    /* SAME: NumPy promotion */
    for (int a = 0; a < SMELT_DTYPE_COUNT; a++)
        for (int b = 0; b < SMELT_DTYPE_COUNT; b++)
            cr_assert_eq(binary_dtype(g, SMELT_OP_MAXIMUM, in[a], in[b]),
                         smelt_dtype_promote((smelt_dtype)a, (smelt_dtype)b));
    /* CMP: bool */
    cr_assert_eq(binary_dtype(g, SMELT_OP_LT, in[SMELT_F32], in[SMELT_I32]), SMELT_BOOL);
    /* FLOAT: integers become floating point (u8 and bool: f16, others f64, as NumPy);
     * TRUEDIV (div): every integer pair gives f64, as NumPy's true_divide */
    cr_assert_eq(binary_dtype(g, SMELT_OP_DIV, in[SMELT_I32], in[SMELT_I32]), SMELT_F64);
    cr_assert_eq(binary_dtype(g, SMELT_OP_DIV, in[SMELT_U8], in[SMELT_U8]), SMELT_F64);
    cr_assert_eq(binary_dtype(g, SMELT_OP_ATAN2, in[SMELT_U8], in[SMELT_U8]), SMELT_F16);
    cr_assert_eq(binary_dtype(g, SMELT_OP_ATAN2, in[SMELT_I32], in[SMELT_I32]), SMELT_F64);
    cr_assert_eq(binary_dtype(g, SMELT_OP_DIV, in[SMELT_F32], in[SMELT_F32]), SMELT_F32);
    cr_assert_eq(smelt_node_dtype(smelt_unary(g, SMELT_OP_EXP, in[SMELT_BOOL])), SMELT_F16);
    cr_assert_eq(smelt_node_dtype(smelt_unary(g, SMELT_OP_EXP, in[SMELT_BF16])), SMELT_BF16);
    cr_assert_eq(binary_dtype(g, SMELT_OP_DIV, in[SMELT_F16], in[SMELT_F16]), SMELT_F16);
    cr_assert_eq(binary_dtype(g, SMELT_OP_LT, in[SMELT_F16], in[SMELT_BF16]), SMELT_BOOL);
    cr_assert_eq(smelt_node_dtype(smelt_unary(g, SMELT_OP_EXP, in[SMELT_I64])), SMELT_F64);
    /* WHERE: the condition becomes bool, the branches promote */
    smelt_node *w = smelt_where(g, in[SMELT_F32], in[SMELT_U8], in[SMELT_I32]);
    cr_assert_eq(smelt_node_dtype(w), SMELT_I32);
    /* weak scalars (NEP 50): the array's dtype wins within a category */
    cr_assert_eq(binary_dtype(g, SMELT_OP_MUL, in[SMELT_F32], smelt_scalar(g, 2.5)), SMELT_F32);
    cr_assert_eq(binary_dtype(g, SMELT_OP_ADD, in[SMELT_I32], smelt_scalar(g, 2)), SMELT_I32);
    cr_assert_eq(binary_dtype(g, SMELT_OP_ADD, in[SMELT_U8], smelt_scalar(g, 3)), SMELT_U8);
    cr_assert_eq(binary_dtype(g, SMELT_OP_ADD, in[SMELT_I32], smelt_scalar(g, 2.5)), SMELT_F64);
    cr_assert_eq(binary_dtype(g, SMELT_OP_ADD, in[SMELT_U8], smelt_scalar(g, 2.5)), SMELT_F64);
    cr_assert_eq(binary_dtype(g, SMELT_OP_MUL, in[SMELT_F16], smelt_scalar(g, 2.5)), SMELT_F16);
    cr_assert_eq(binary_dtype(g, SMELT_OP_MUL, in[SMELT_BF16], smelt_scalar(g, 3)), SMELT_BF16);
    cr_assert_eq(binary_dtype(g, SMELT_OP_ADD, in[SMELT_F16], smelt_scalar(g, 1e6)), SMELT_F16);
    cr_assert_eq(binary_dtype(g, SMELT_OP_ADD, in[SMELT_BOOL], smelt_scalar(g, 1)), SMELT_I64);
    cr_assert_eq(binary_dtype(g, SMELT_OP_ADD, smelt_scalar(g, 1), smelt_scalar(g, 2)), SMELT_I64);
    cr_assert_eq(binary_dtype(g, SMELT_OP_ADD, smelt_scalar(g, 1), smelt_scalar(g, 0.5)), SMELT_F64);
    /* strong constants promote like arrays */
    cr_assert_eq(binary_dtype(g, SMELT_OP_ADD, in[SMELT_F32], smelt_const(g, 2, SMELT_F64)), SMELT_F64);
    cr_assert_eq(smelt_graph_status(g), SMELT_OK, "%s", smelt_graph_errmsg(g));
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(builder, every_operator_accepts_exactly_its_dtypes)
{
    smelt_ctx *ctx = t_ctx();
    for (int op = 0; op < SMELT_OP_COUNT; op++) {
        if (strcmp(test_ops[op].cls, "ELEMWISE"))
            continue;
        for (int d = 0; d < SMELT_DTYPE_COUNT; d++) {
            smelt_graph *g = t_graph(ctx);
            smelt_node *args[3];
            for (int k = 0; k < test_ops[op].arity; k++)
                args[k] = smelt_input(g, NULL, (smelt_dtype)d, SHP(2));
            smelt_node *r = smelt_op_apply(g, (smelt_op)op, test_ops[op].arity, args);
            if (t_op_supports((smelt_op)op, (smelt_dtype)d)) {
                cr_assert_not_null(r, "%s on %s: %s", test_ops[op].name,
                                   smelt_dtype_name((smelt_dtype)d), smelt_graph_errmsg(g));
                cr_assert_eq(smelt_node_op(r), t_builder_op((smelt_op)op, (smelt_dtype)d), "%s on %s",
                             test_ops[op].name, smelt_dtype_name((smelt_dtype)d));
                cr_assert_eq(smelt_node_dtype(r), t_result_dtype((smelt_op)op, (smelt_dtype)d),
                             "%s on %s gives %s", test_ops[op].name, smelt_dtype_name((smelt_dtype)d),
                             smelt_dtype_name(smelt_node_dtype(r)));
            } else {
                cr_assert_null(r, "%s accepted %s", test_ops[op].name, smelt_dtype_name((smelt_dtype)d));
                cr_assert_eq(smelt_graph_status(g), SMELT_ERR_DTYPE);
                cr_assert(t_contains(smelt_graph_errmsg(g), test_ops[op].name), "%s",
                          smelt_graph_errmsg(g));
                cr_assert(t_contains(smelt_graph_errmsg(g), "does not support"), "%s",
                          smelt_graph_errmsg(g));
            }
            smelt_graph_free(g);
        }
    }
    smelt_ctx_free(ctx);
}

Test(builder, non_elementwise_ops_need_their_own_builder)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, NULL, SMELT_F32, SHP(2));
    cr_assert_null(smelt_unary(g, SMELT_OP_CAST, a));
    cr_assert_eq(smelt_graph_status(g), SMELT_ERR_INVALID_ARG);
    cr_assert(t_contains(smelt_graph_errmsg(g), "cast"), "%s", smelt_graph_errmsg(g));
    smelt_graph_free(g);

    g = t_graph(ctx);
    a = smelt_input(g, NULL, SMELT_F32, SHP(2));
    cr_assert_null(smelt_op_apply(g, SMELT_OP_ADD, 1, &a));
    cr_assert_eq(smelt_graph_status(g), SMELT_ERR_INVALID_ARG);
    cr_assert(t_contains(smelt_graph_errmsg(g), "add takes 2 operands"), "%s", smelt_graph_errmsg(g));
    smelt_graph_free(g);

    g = t_graph(ctx);
    a = smelt_input(g, NULL, SMELT_F32, SHP(2));
    cr_assert_null(smelt_unary(g, (smelt_op)SMELT_OP_COUNT, a));
    cr_assert_eq(smelt_graph_status(g), SMELT_ERR_INVALID_ARG);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(builder, casts_and_constants)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, NULL, SMELT_I32, SHP(5));
    cr_assert_eq(smelt_cast(g, a, SMELT_I32), a, "a cast to the same dtype is the node itself");
    smelt_node *c = smelt_cast(g, a, SMELT_F32);
    cr_assert_eq(smelt_node_op(c), SMELT_OP_CAST);
    cr_assert_eq(smelt_node_dtype(c), SMELT_F32);
    cr_assert_eq(smelt_node_shape(c)[0], 5);
    smelt_node *k = smelt_cast(g, smelt_const(g, 2.75, SMELT_F64), SMELT_I32);
    cr_assert_eq(smelt_node_op(k), SMELT_OP_CONST, "a cast constant stays a constant");
    cr_assert_eq(smelt_node_dtype(k), SMELT_I32);
    cr_assert_eq(smelt_node_ndim(k), 0);
    smelt_node *s = smelt_scalar(g, 0.5);
    cr_assert_eq(smelt_node_dtype(s), SMELT_F64);
    cr_assert_eq(smelt_node_dtype(smelt_scalar(g, 3)), SMELT_I64);
    cr_assert_null(smelt_cast(g, a, (smelt_dtype)42));
    cr_assert_eq(smelt_graph_status(g), SMELT_ERR_DTYPE);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(builder, broadcast_to_node)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, NULL, SMELT_F32, SHP(3, 1));
    smelt_node *b = smelt_broadcast_to(g, a, SHP(2, 3, 4));
    cr_assert_not_null(b, "%s", smelt_graph_errmsg(g));
    cr_assert_eq(smelt_node_op(b), SMELT_OP_BROADCAST);
    cr_assert_eq(smelt_node_ndim(b), 3);
    cr_assert_eq(smelt_node_shape(b)[2], 4);
    cr_assert_null(smelt_broadcast_to(g, a, SHP(2, 4, 4)));
    cr_assert_eq(smelt_graph_status(g), SMELT_ERR_SHAPE);
    cr_assert(t_contains(smelt_graph_errmsg(g), "(3, 1) to (2, 4, 4)"), "%s", smelt_graph_errmsg(g));
    smelt_graph_free(g);

    g = t_graph(ctx);
    a = smelt_input(g, NULL, SMELT_F32, SHP(3, 1));
    cr_assert_null(smelt_broadcast_to(g, a, SHP(4)), "cannot lower the rank");
    cr_assert_eq(smelt_graph_status(g), SMELT_ERR_SHAPE);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(builder, bad_inputs)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    cr_assert_not_null(smelt_input(g, "x", SMELT_F32, SHP(2)));
    cr_assert_null(smelt_input(g, "x", SMELT_F32, SHP(2)));
    cr_assert_eq(smelt_graph_status(g), SMELT_ERR_INVALID_ARG);
    cr_assert(t_contains(smelt_graph_errmsg(g), "duplicate input name 'x'"), "%s", smelt_graph_errmsg(g));
    cr_assert(t_contains(smelt_errmsg(ctx), "duplicate"), "the context has the message too: %s",
              smelt_errmsg(ctx));
    smelt_graph_free(g);

    static const int64_t shape9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    g = t_graph(ctx);
    cr_assert_null(smelt_input(g, NULL, SMELT_F32, 9, shape9));
    cr_assert_eq(smelt_graph_status(g), SMELT_ERR_SHAPE);
    smelt_graph_free(g);
    g = t_graph(ctx);
    cr_assert_null(smelt_input(g, NULL, SMELT_F32, SHP(2, -1)));
    cr_assert_eq(smelt_graph_status(g), SMELT_ERR_SHAPE);
    smelt_graph_free(g);
    g = t_graph(ctx);
    cr_assert_null(smelt_input(g, NULL, (smelt_dtype)-1, SHP(2)));
    cr_assert_eq(smelt_graph_status(g), SMELT_ERR_DTYPE);
    smelt_graph_free(g);
    g = t_graph(ctx);
    cr_assert_null(smelt_input(g, NULL, SMELT_F32, 2, NULL));
    cr_assert_eq(smelt_graph_status(g), SMELT_ERR_INVALID_ARG);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(builder, nodes_of_another_graph)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g1 = t_graph(ctx), *g2 = t_graph(ctx);
    smelt_node *a = smelt_input(g1, NULL, SMELT_F32, SHP(2));
    smelt_node *b = smelt_input(g2, NULL, SMELT_F32, SHP(2));
    cr_assert_null(smelt_add(g1, a, b));
    cr_assert_eq(smelt_graph_status(g1), SMELT_ERR_INVALID_ARG);
    cr_assert(t_contains(smelt_graph_errmsg(g1), "another graph"), "%s", smelt_graph_errmsg(g1));
    smelt_plan *p = NULL;
    smelt_node *outs[1] = {b};
    T_ERR(ctx, smelt_plan_new(ctx, g1, 1, outs, NULL, &p), SMELT_ERR_INVALID_ARG, "another graph");
    cr_assert_null(p);
    cr_assert_eq(smelt_graph_status(g2), SMELT_OK);
    smelt_graph_free(g1);
    smelt_graph_free(g2);
    smelt_ctx_free(ctx);
}

/* ---- host tensors ---------------------------------------------------------------- */

Test(tensor, new_and_accessors)
{
    smelt_ctx *ctx = t_ctx();
    smelt_tensor *t = t_tensor(ctx, SMELT_I32, SHP(2, 3, 4));
    cr_assert_eq(smelt_tensor_dtype(t), SMELT_I32);
    cr_assert_eq(smelt_tensor_ndim(t), 3);
    cr_assert_eq(smelt_tensor_numel(t), 24);
    cr_assert_eq(smelt_tensor_strides(t)[0], 12);
    cr_assert_eq(smelt_tensor_strides(t)[1], 4);
    cr_assert_eq(smelt_tensor_strides(t)[2], 1);
    cr_assert(smelt_tensor_is_contiguous(t));
    cr_assert_eq((uintptr_t)smelt_tensor_data(t) % 64, 0, "tensor data is 64-byte aligned");
    for (int i = 0; i < 24; i++)
        ((int32_t *)smelt_tensor_data(t))[i] = i * 3 - 7;
    for (int i = 0; i < 24; i++)
        cr_assert_eq(smelt_tensor_get(t, i), i * 3 - 7);
    cr_assert_eq(smelt_tensor_get(t, 24), 0, "out of range reads 0");
    cr_assert_eq(smelt_tensor_get(t, -1), 0);
    smelt_tensor_free(t);

    smelt_tensor *z = t_tensor(ctx, SMELT_F32, SHP(0, 5));
    cr_assert_eq(smelt_tensor_numel(z), 0);
    smelt_tensor_free(z);
    smelt_tensor *s = t_tensor(ctx, SMELT_F64, 0, NULL);
    cr_assert_eq(smelt_tensor_numel(s), 1);
    *(double *)smelt_tensor_data(s) = 2.5;
    cr_assert_eq(smelt_tensor_get(s, 0), 2.5);
    smelt_tensor_free(s);
    smelt_ctx_free(ctx);
}

Test(tensor, views)
{
    smelt_ctx *ctx = t_ctx();
    smelt_tensor *t = t_tensor(ctx, SMELT_F64, SHP(3, 4));
    for (int i = 0; i < 12; i++)
        ((double *)smelt_tensor_data(t))[i] = i;

    smelt_tensor *tr = NULL;
    T_OK(ctx, smelt_tensor_transpose(t, (const int[]){1, 0}, &tr));
    cr_assert_eq(smelt_tensor_shape(tr)[0], 4);
    cr_assert_eq(smelt_tensor_shape(tr)[1], 3);
    cr_assert_not(smelt_tensor_is_contiguous(tr));
    for (int r = 0; r < 4; r++)
        for (int c = 0; c < 3; c++)
            cr_assert_eq(smelt_tensor_get(tr, r * 3 + c), c * 4 + r);

    smelt_tensor *sl = NULL;
    T_OK(ctx, smelt_tensor_slice(t, 1, 1, 4, 2, &sl)); /* columns 1 and 3 */
    cr_assert_eq(smelt_tensor_shape(sl)[1], 2);
    cr_assert_eq(smelt_tensor_strides(sl)[1], 2);
    cr_assert_eq(smelt_tensor_get(sl, 0), 1);
    cr_assert_eq(smelt_tensor_get(sl, 1), 3);
    cr_assert_eq(smelt_tensor_get(sl, 5), 11);
    smelt_tensor *sl2 = NULL;
    T_OK(ctx, smelt_tensor_slice(t, 0, -2, 3, 1, &sl2)); /* negative start */
    cr_assert_eq(smelt_tensor_shape(sl2)[0], 2);
    cr_assert_eq(smelt_tensor_get(sl2, 0), 4);

    smelt_tensor *bc = NULL, *row = NULL;
    T_OK(ctx, smelt_tensor_slice(t, 0, 2, 3, 1, &row)); /* (1, 4) */
    T_OK(ctx, smelt_tensor_broadcast_to(row, SHP(2, 5, 4), &bc));
    cr_assert_eq(smelt_tensor_numel(bc), 40);
    cr_assert_eq(smelt_tensor_strides(bc)[0], 0);
    cr_assert_eq(smelt_tensor_strides(bc)[1], 0);
    for (int i = 0; i < 40; i++)
        cr_assert_eq(smelt_tensor_get(bc, i), 8 + i % 4);

    smelt_tensor *cc = NULL;
    T_OK(ctx, smelt_tensor_contiguous(tr, &cc));
    cr_assert(smelt_tensor_is_contiguous(cc));
    cr_assert(t_bitwise_equal(cc, tr));
    cr_assert_eq(((double *)smelt_tensor_data(cc))[1], 4);

    /* views keep the buffer alive */
    smelt_tensor_free(t);
    cr_assert_eq(smelt_tensor_get(tr, 1), 4);

    smelt_tensor *bad = NULL;
    T_ERR(ctx, smelt_tensor_transpose(tr, (const int[]){0, 0}, &bad), SMELT_ERR_INVALID_ARG, "permutation");
    T_ERR(ctx, smelt_tensor_slice(tr, 0, 0, 4, 0, &bad), SMELT_ERR_INVALID_ARG, "step");
    T_ERR(ctx, smelt_tensor_slice(tr, 5, 0, 1, 1, &bad), SMELT_ERR_INVALID_ARG, "axis 5");
    T_ERR(ctx, smelt_tensor_slice(tr, 0, 0, 9, 1, &bad), SMELT_ERR_INVALID_ARG, "outside");
    T_ERR(ctx, smelt_tensor_broadcast_to(tr, SHP(4, 4), &bad), SMELT_ERR_SHAPE, "(4, 3) to (4, 4)");
    T_ERR(ctx, smelt_tensor_broadcast_to(tr, SHP(4), &bad), SMELT_ERR_SHAPE, "rank");
    cr_assert_null(bad);

    smelt_tensor *all[] = {tr, sl, sl2, bc, row, cc};
    t_free_all(all, NELEMS(all));
    smelt_ctx_free(ctx);
}

Test(tensor, wrap_with_strides)
{
    smelt_ctx *ctx = t_ctx();
    float mem[24];
    for (int i = 0; i < 24; i++)
        mem[i] = (float)i;
    smelt_tensor *t = NULL;
    /* every other element of a (3, 8) array: shape (3, 4), strides (8, 2) */
    T_OK(ctx, smelt_tensor_wrap(ctx, SMELT_F32, SHP(3, 4), (const int64_t[]){8, 2}, mem, &t));
    cr_assert_eq(smelt_tensor_data(t), mem);
    cr_assert_not(smelt_tensor_is_contiguous(t));
    cr_assert_eq(smelt_tensor_get(t, 5), 10);
    smelt_tensor_free(t);
    cr_assert_eq(mem[23], 23, "wrapped memory is not freed or touched");
    T_ERR(ctx, smelt_tensor_wrap(ctx, SMELT_F32, SHP(3), NULL, NULL, &t), SMELT_ERR_INVALID_ARG, "data is NULL");
    T_ERR(ctx, smelt_tensor_new(ctx, SMELT_F32, SHP(-3), &t), SMELT_ERR_SHAPE, "negative");
    T_ERR(ctx, smelt_tensor_new(ctx, (smelt_dtype)9, SHP(3), &t), SMELT_ERR_DTYPE, "dtype");
    cr_assert_null(t);
    smelt_ctx_free(ctx);
}

/* ---- the reference interpreter on hand-computed values ----------------------------- */

Test(reference, known_values)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_I32, SHP(2, 3));
    smelt_node *y = smelt_input(g, "y", SMELT_F32, SHP(3));
    smelt_node *q = smelt_binary(g, SMELT_OP_FLOOR_DIV, x, smelt_scalar(g, 2)); /* i32 */
    smelt_node *m = smelt_binary(g, SMELT_OP_MOD, x, smelt_scalar(g, -3));
    smelt_node *s = smelt_add(g, smelt_mul(g, y, smelt_scalar(g, 2)), q); /* i32 + f32 -> f64 */
    smelt_node *w = smelt_where(g, smelt_binary(g, SMELT_OP_GT, x, smelt_scalar(g, 0)), y,
                                smelt_unary(g, SMELT_OP_NEG, y));
    smelt_node *o = smelt_binary(g, SMELT_OP_ADD, smelt_cast(g, x, SMELT_U8), smelt_scalar(g, 250));
    cr_assert_eq(smelt_graph_status(g), SMELT_OK, "%s", smelt_graph_errmsg(g));
    cr_assert_eq(smelt_node_dtype(s), SMELT_F64);
    cr_assert_eq(smelt_node_dtype(o), SMELT_U8);
    smelt_tensor *in[2] = {t_tensor(ctx, SMELT_I32, SHP(2, 3)), t_tensor(ctx, SMELT_F32, SHP(3))};
    static const int32_t xv[6] = {-7, -1, 0, 1, 5, 8};
    static const float yv[3] = {0.5f, -1.25f, 3.0f};
    memcpy(smelt_tensor_data(in[0]), xv, sizeof xv);
    memcpy(smelt_tensor_data(in[1]), yv, sizeof yv);
    smelt_node *outs[] = {q, m, s, w, o};
    smelt_tensor *ref[5] = {0};
    t_reference(ctx, g, 5, outs, 2, in, ref);
    static const double eq[6] = {-4, -1, 0, 0, 2, 4};
    static const double em[6] = {-1, -1, 0, -2, -1, -1};
    static const double es[6] = {-3, -3.5, 6, 1, -0.5, 10};
    static const double ew[6] = {-0.5, 1.25, -3, 0.5, -1.25, 3};
    static const double eo[6] = {243, 249, 250, 251, 255, 2};
    for (int i = 0; i < 6; i++) {
        cr_assert_eq(smelt_tensor_get(ref[0], i), eq[i], "floor_div [%d]", i);
        cr_assert_eq(smelt_tensor_get(ref[1], i), em[i], "mod [%d]: %g", i, smelt_tensor_get(ref[1], i));
        cr_assert_eq(smelt_tensor_get(ref[2], i), es[i], "add [%d]", i);
        cr_assert_eq(smelt_tensor_get(ref[3], i), ew[i], "where [%d]", i);
        cr_assert_eq(smelt_tensor_get(ref[4], i), eo[i], "u8 wraps [%d]", i);
    }
    /* and the kernels agree */
    t_check_plan("known values", ctx, g, 5, outs, 3, 2, in, T_EXACT);
    t_free_all(ref, 5);
    t_free_all(in, 2);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(reference, rejects_mismatched_inputs)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, NULL, SMELT_F32, SHP(4));
    smelt_node *y = smelt_unary(g, SMELT_OP_EXP, x);
    smelt_tensor *bad = t_tensor(ctx, SMELT_F32, SHP(5));
    smelt_tensor *res = NULL;
    T_ERR(ctx, smelt_reference_eval(ctx, g, 1, &y, 1, &bad, &res), SMELT_ERR_SHAPE, "input 0");
    T_ERR(ctx, smelt_reference_eval(ctx, g, 1, &y, 0, NULL, &res), SMELT_ERR_INVALID_ARG, "1 inputs");
    cr_assert_null(res);
    smelt_tensor_free(bad);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* ---- plans of unusual graphs ---------------------------------------------------------- */

Test(plan, outputs_that_are_inputs_constants_or_repeated)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, NULL, SMELT_F32, SHP(6, 5));
    smelt_node *e = smelt_unary(g, SMELT_OP_EXP, x);
    smelt_node *k = smelt_const(g, 1.5, SMELT_F32);
    smelt_node *outs[] = {x, e, e, k};
    smelt_tensor *in = t_rand(ctx, &r, SMELT_F32, SHP(6, 5));
    for (int opt = 0; opt <= 3; opt++)
        t_check_plan("identity/constant outputs", ctx, g, NELEMS(outs), outs, opt, 1, &in,
                     (t_tol){4, 0, 0, false});
    /* the outputs are separate tensors */
    smelt_plan *p = t_plan(ctx, g, NELEMS(outs), outs, 3);
    smelt_tensor *got[4] = {0};
    t_run(p, 1, &in, 4, got);
    cr_assert_neq(smelt_tensor_data(got[0]), smelt_tensor_data(in));
    cr_assert_neq(smelt_tensor_data(got[1]), smelt_tensor_data(got[2]));
    cr_assert_eq(smelt_tensor_ndim(got[3]), 0);
    cr_assert_eq(smelt_tensor_get(got[3], 0), 1.5);
    t_free_all(got, 4);
    smelt_plan_free(p);
    smelt_tensor_free(in);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(plan, zero_size_and_rank_zero)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 0);
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, NULL, SMELT_F64, SHP(0, 3));
    smelt_node *s = smelt_input(g, NULL, SMELT_F64, 0, NULL);
    smelt_node *y = smelt_add(g, smelt_unary(g, SMELT_OP_SIN, x), s);
    smelt_node *z = smelt_mul(g, s, s);
    smelt_node *outs[] = {y, z};
    smelt_tensor *in[] = {t_tensor(ctx, SMELT_F64, SHP(0, 3)), t_rand(ctx, &r, SMELT_F64, 0, NULL)};
    smelt_plan *p = t_plan(ctx, g, 2, outs, 3);
    smelt_tensor *got[2] = {0};
    t_run(p, 2, in, 2, got);
    cr_assert_eq(smelt_tensor_numel(got[0]), 0);
    cr_assert_eq(smelt_tensor_shape(got[0])[1], 3);
    cr_assert_eq(smelt_tensor_ndim(got[1]), 0);
    double v = smelt_tensor_get(in[1], 0);
    cr_assert_eq(smelt_tensor_get(got[1], 0), v * v);
    t_free_all(got, 2);
    t_free_all(in, 2);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

Test(plan, opts_init_and_levels)
{
    smelt_plan_opts o;
    memset(&o, 0x55, sizeof o);
    smelt_plan_opts_init(&o);
    cr_assert_eq(o.opt_level, 3);
    cr_assert_null(o.backend);
    smelt_plan_opts_init(NULL); /* no crash */

    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, NULL, SMELT_F32, SHP(4));
    smelt_node *y = smelt_unary(g, SMELT_OP_NEG, x);
    smelt_plan *p = NULL;
    o.opt_level = 4;
    T_ERR(ctx, smelt_plan_new(ctx, g, 1, &y, &o, &p), SMELT_ERR_INVALID_ARG, "opt_level");
    o.opt_level = -1;
    T_ERR(ctx, smelt_plan_new(ctx, g, 1, &y, &o, &p), SMELT_ERR_INVALID_ARG, "opt_level");
    cr_assert_null(p);
    T_OK(ctx, smelt_plan_new(ctx, g, 1, &y, NULL, &p)); /* NULL opts: defaults */
    smelt_plan_stats s = t_stats(p);
    cr_assert_eq(s.kernels, 1);
    cr_assert_str_eq(s.backend, "TCC");
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}
