/* The graph builder: typed nodes, NumPy promotion and broadcasting, sticky
 * errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

int smelt_graph_new(smelt_ctx *ctx, smelt_graph **out)
{
    if (!out)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "smelt_graph_new: out is NULL");
    *out = NULL;
    if (!ctx)
        return SMELT_ERR_INVALID_ARG;
    smelt_graph *g = calloc(1, sizeof *g);
    if (!g)
        return smelt__err(ctx, SMELT_ERR_NOMEM, "out of memory");
    g->ctx = ctx;
    *out = g;
    return SMELT_OK;
}

void smelt_graph_free(smelt_graph *g)
{
    if (!g)
        return;
    for (int i = 0; i < g->n; i++) {
        free(g->nodes[i]->name);
        smelt__blob_release(g->nodes[i]->blob);
        free(g->nodes[i]);
    }
    free(g->nodes);
    free(g->inputs);
    smelt__sb_free(&g->err);
    free(g);
}

int smelt_graph_status(const smelt_graph *g) { return g ? g->status : SMELT_ERR_INVALID_ARG; }
const char *smelt_graph_errmsg(const smelt_graph *g)
{
    if (!g)
        return "graph is NULL";
    if (g->status && !g->err.len) /* the message could not be allocated */
        return smelt_strerror(g->status);
    return smelt__sb_str((smelt__sb *)&g->err);
}
int smelt_graph_num_inputs(const smelt_graph *g) { return g ? g->nin : 0; }

static smelt_node *fail(smelt_graph *g, int status, const char *fmt, ...) SMELT_PRINTF(3, 4);
static smelt_node *fail(smelt_graph *g, int status, const char *fmt, ...)
{
    if (g->status)
        return NULL;
    g->status = status;
    va_list ap;
    va_start(ap, fmt);
    smelt__sb_vprintf(&g->err, fmt, ap);
    va_end(ap);
    smelt__err(g->ctx, status, "%s", smelt__sb_str(&g->err));
    return NULL;
}

static smelt_node *new_node(smelt_graph *g, smelt_op op, smelt_dtype dt, int ndim, const int64_t *shape,
                            int nin, smelt_node *const *in)
{
    smelt_node **nn = smelt__grow(g->nodes, g->n, &g->cap, sizeof *nn, 64);
    if (!nn)
        return fail(g, SMELT_ERR_NOMEM, "out of memory");
    g->nodes = nn;
    smelt_node *n = calloc(1, sizeof *n);
    if (!n)
        return fail(g, SMELT_ERR_NOMEM, "out of memory");
    n->g = g;
    n->id = g->n;
    n->op = op;
    n->dtype = dt;
    n->ndim = ndim;
    if (ndim)
        memcpy(n->shape, shape, sizeof(int64_t) * (size_t)ndim);
    n->nin = nin;
    for (int i = 0; i < nin; i++)
        n->in[i] = in[i];
    n->input_index = -1;
    g->nodes[g->n++] = n;
    return n;
}

/* For the builders of other files (src/ir/window.c): a node and a sticky
 * error, as this file's. */
smelt_node *smelt__new_node(smelt_graph *g, smelt_op op, smelt_dtype dt, int ndim, const int64_t *shape, int nin,
                            smelt_node *const *in)
{
    return new_node(g, op, dt, ndim, shape, nin, in);
}

smelt_node *smelt__graph_fail(smelt_graph *g, int status, const char *msg) { return fail(g, status, "%s", msg); }

/* The shared shape check (smelt__shape_check), as a sticky graph error. */
static bool check_shape(smelt_graph *g, const char *what, int ndim, const int64_t *shape)
{
    int st = smelt__shape_check(g->ctx, what, ndim, shape);
    if (st)
        fail(g, st, "%s", smelt_errmsg(g->ctx));
    return st == SMELT_OK;
}

smelt_node *smelt_input(smelt_graph *g, const char *name, smelt_dtype dt, int ndim,
                        const int64_t *shape)
{
    if (!g || g->status)
        return NULL;
    if (!smelt__dtype_valid((int)dt))
        return fail(g, SMELT_ERR_DTYPE, "input: invalid dtype %d", (int)dt);
    if (!check_shape(g, "input", ndim, shape))
        return NULL;
    char buf[32];
    if (!name) {
        snprintf(buf, sizeof buf, "in%d", g->nin);
        name = buf;
    }
    for (int i = 0; i < g->nin; i++)
        if (!strcmp(g->inputs[i]->name, name))
            return fail(g, SMELT_ERR_INVALID_ARG, "input: duplicate input name '%s'", name);
    smelt_node **ni = smelt__grow(g->inputs, g->nin, &g->incap, sizeof *ni, 16);
    if (!ni)
        return fail(g, SMELT_ERR_NOMEM, "out of memory");
    g->inputs = ni;
    smelt_node *n = new_node(g, SMELT_OP_INPUT, dt, ndim, shape, 0, NULL);
    if (!n)
        return NULL;
    n->name = smelt__strdup(name);
    if (!n->name)
        return fail(g, SMELT_ERR_NOMEM, "out of memory");
    n->input_index = g->nin;
    g->inputs[g->nin++] = n;
    return n;
}

static smelt_node *make_const(smelt_graph *g, double v, smelt_dtype dt, bool weak)
{
    smelt_node *n = new_node(g, SMELT_OP_CONST, dt, 0, NULL, 0, NULL);
    if (!n)
        return NULL;
    n->fval = smelt__dtype_round(dt, v);
    n->ival = smelt__is_float(dt) ? 0 : (int64_t)n->fval;
    n->weak = weak;
    return n;
}

smelt_node *smelt_const(smelt_graph *g, double value, smelt_dtype dt)
{
    if (!g || g->status)
        return NULL;
    if (!smelt__dtype_valid((int)dt))
        return fail(g, SMELT_ERR_DTYPE, "const: invalid dtype %d", (int)dt);
    /* an integer constant must be a number in its dtype's range (it was 0,
     * status OK, for NaN, infinities and 1e300), as a weak scalar must */
    static const double lo[SMELT_DTYPE_COUNT] = {[SMELT_I32] = -2147483648.0, [SMELT_I64] = -9223372036854775808.0},
                        hi[SMELT_DTYPE_COUNT] = {[SMELT_I32] = 2147483648.0, [SMELT_I64] = 9223372036854775808.0,
                                                 [SMELT_U8] = 256.0};
    /* (i64 takes 2^63 too: the double nearest INT64_MAX, which parsers pass) */
    if (!smelt__is_float(dt) && dt != SMELT_BOOL &&
        !(trunc(value) >= lo[dt] && (trunc(value) < hi[dt] || (dt == SMELT_I64 && value == hi[dt]))))
        return fail(g, SMELT_ERR_DTYPE, "const: %g does not fit in %s", value, smelt__dtypes[dt].name);
    return make_const(g, value, dt, false);
}

smelt_node *smelt_scalar(smelt_graph *g, double value)
{
    if (!g || g->status)
        return NULL;
    bool integral = isfinite(value) && value == trunc(value) && fabs(value) < 9.2e18;
    return make_const(g, value, integral ? SMELT_I64 : SMELT_F64, true);
}

static int category(smelt_dtype d)
{
    int k = smelt__dtypes[d].kind;
    return k == SMELT_DT_B ? 0 : (k == SMELT_DT_F ? 2 : 1);
}

/* NumPy 2 promotion with weak scalars (NEP 50). */
static smelt_dtype promote_args(int n, smelt_node *const *a)
{
    bool any_strong = false;
    smelt_dtype s = SMELT_BOOL; /* bool promoted with any dtype gives that dtype */
    for (int i = 0; i < n; i++)
        if (!a[i]->weak) {
            s = smelt_dtype_promote(s, a[i]->dtype);
            any_strong = true;
        }
    /* the weak scalars count only where their kind is higher (a float
     * scalar with an integer array), or when every operand is one */
    smelt_dtype r = s;
    for (int i = 0; i < n; i++)
        if (!any_strong || (a[i]->weak && category(a[i]->dtype) > category(s)))
            r = smelt_dtype_promote(r, a[i]->dtype);
    return r;
}

/* Whether a is a weak integer scalar that dt (u8 or i32) cannot hold. */
static bool weak_int_outside(const smelt_node *a, smelt_dtype dt)
{
    int64_t lo = dt == SMELT_U8 ? 0 : INT32_MIN, hi = dt == SMELT_U8 ? 255 : INT32_MAX;
    return a->op == SMELT_OP_CONST && a->weak && !smelt__is_float(a->dtype) &&
           (dt == SMELT_U8 || dt == SMELT_I32) && (a->ival < lo || a->ival > hi);
}

/* a converted to dt: a retyped weak constant, a cast node, or a itself. */
static smelt_node *convert(smelt_graph *g, smelt_node *a, smelt_dtype dt)
{
    if (a->dtype == dt)
        return a;
    if (a->op == SMELT_OP_CONST && a->weak) {
        /* NumPy 2: a Python int that the array's integer dtype cannot hold
         * is an error (u8 + 300), not a silent wrap */
        if (weak_int_outside(a, dt))
            return fail(g, SMELT_ERR_DTYPE, "the scalar %lld does not fit in %s", (long long)a->ival,
                        smelt__dtypes[dt].name);
        return make_const(g, smelt__is_float(a->dtype) ? a->fval : (double)a->ival, dt, false);
    }
    return new_node(g, SMELT_OP_CAST, dt, a->ndim, a->shape, 1, &a);
}

static smelt_node *check_operands(smelt_graph *g, const char *what, int n, smelt_node *const *args)
{
    for (int i = 0; i < n; i++) {
        if (!args[i])
            return fail(g, SMELT_ERR_INVALID_ARG, "%s: operand %d is NULL", what, i);
        if (args[i]->g != g)
            return fail(g, SMELT_ERR_INVALID_ARG, "%s: operand %d belongs to another graph", what, i);
    }
    return (smelt_node *)args; /* any non-NULL */
}

smelt_node *smelt_op_apply(smelt_graph *g, smelt_op op, int n, smelt_node *const *args)
{
    if (!g || g->status)
        return NULL;
    if ((int)op < 0 || op >= SMELT_OP_COUNT)
        return fail(g, SMELT_ERR_INVALID_ARG, "unknown operator %d", (int)op);
    const smelt__opinfo *oi = &smelt__ops[op];
    if (oi->cls != SMELT_CLASS_ELEMWISE && oi->cls != SMELT_CLASS_OPAQUE)
        return fail(g, SMELT_ERR_INVALID_ARG,
                    "%s: not an elementwise operator (use its own builder function)", oi->name);
    if (n != oi->arity)
        return fail(g, SMELT_ERR_INVALID_ARG, "%s takes %d operand%s, got %d", oi->name, oi->arity,
                    oi->arity == 1 ? "" : "s", n);
    if (!args || !check_operands(g, oi->name, n, args))
        return args ? NULL : fail(g, SMELT_ERR_INVALID_ARG, "%s: operands are NULL", oi->name);

    /* NumPy's bitwise operators on bool are the logical ones */
    smelt_dtype ct = promote_args(n, args);
    static const smelt_op logical[][2] = {
        {SMELT_OP_BITWISE_AND, SMELT_OP_LOGICAL_AND}, {SMELT_OP_BITWISE_OR, SMELT_OP_LOGICAL_OR},
        {SMELT_OP_BITWISE_XOR, SMELT_OP_LOGICAL_XOR}, {SMELT_OP_BITWISE_NOT, SMELT_OP_LOGICAL_NOT}};
    for (size_t i = 0; i < sizeof logical / sizeof logical[0] && ct == SMELT_BOOL; i++)
        if (op == logical[i][0])
            return smelt_op_apply(g, logical[i][1], n, args);

    /* dtype */
    if (oi->rule == SMELT_RULE_WHERE)
        ct = promote_args(2, args + 1);
    /* NumPy 2 compares an integer array with a Python int exactly, also one
     * its dtype cannot hold (u8 < 300 is true): in i64, which holds both */
    for (int i = 0; oi->rule == SMELT_RULE_CMP && i < n; i++)
        if (weak_int_outside(args[i], ct))
            ct = SMELT_I64;
    if (op == SMELT_OP_ROUND && ct == SMELT_BOOL)
        ct = SMELT_F16; /* as NumPy's round of bool */
    if (oi->rule == SMELT_RULE_FLOAT && !smelt__is_float(ct))
        ct = (ct == SMELT_U8 || ct == SMELT_BOOL) ? SMELT_F16 : SMELT_F64; /* as NumPy */
    if (oi->rule == SMELT_RULE_TRUEDIV && !smelt__is_float(ct))
        ct = SMELT_F64; /* NumPy's true_divide: every integer and bool pair */
    static const smelt_op int8_of_bool[] = {SMELT_OP_FLOOR_DIV, SMELT_OP_MOD, SMELT_OP_POW,
                                            SMELT_OP_SQUARE, SMELT_OP_RECIPROCAL, SMELT_OP_FMOD,
                                            SMELT_OP_LEFT_SHIFT, SMELT_OP_RIGHT_SHIFT};
    for (size_t i = 0; i < sizeof int8_of_bool / sizeof int8_of_bool[0] && ct == SMELT_BOOL; i++)
        if (op == int8_of_bool[i])
            return fail(g, SMELT_ERR_DTYPE,
                        "%s does not support dtype bool (NumPy computes it in int8, which smelt "
                        "does not have; cast to an integer dtype first, e.g. int32(x))", oi->name);
    if (!(oi->dtypes & smelt__dtypes[ct].kind))
        return fail(g, SMELT_ERR_DTYPE, "%s does not support dtype %s", oi->name,
                    smelt__dtypes[ct].name);
    smelt_dtype rt = oi->rule == SMELT_RULE_CMP ? SMELT_BOOL : ct;

    /* shape */
    int nd = 0;
    int64_t shape[SMELT_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        if (smelt__broadcast_shapes(nd, shape, args[i]->ndim, args[i]->shape, &nd, shape)) {
            char txt[3][SMELT_SHAPE_STR_MAX]; /* n >= 2: one shape always broadcasts */
            for (int k = 0; k < n; k++)
                smelt__shape_fmt(txt[k], args[k]->ndim, args[k]->shape);
            return fail(g, SMELT_ERR_SHAPE, "%s: shapes %s and %s%s%s are not broadcastable", oi->name, txt[0],
                        txt[1], n > 2 ? " and " : "", n > 2 ? txt[2] : "");
        }
    }

    smelt_node *cv[3];
    bool all_weak = true;
    for (int i = 0; i < n; i++) {
        smelt_dtype want = (oi->rule == SMELT_RULE_WHERE && i == 0) ? SMELT_BOOL : ct;
        if (!(cv[i] = convert(g, args[i], want)))
            return NULL;
        all_weak = all_weak && args[i]->weak;
    }
    smelt_node *r = new_node(g, op, rt, nd, shape, n, cv);
    if (r)
        r->weak = all_weak;
    return r;
}

smelt_node *smelt_unary(smelt_graph *g, smelt_op op, smelt_node *a)
{
    return smelt_op_apply(g, op, 1, &a);
}

smelt_node *smelt_binary(smelt_graph *g, smelt_op op, smelt_node *a, smelt_node *b)
{
    smelt_node *args[2] = {a, b};
    return smelt_op_apply(g, op, 2, args);
}

smelt_node *smelt_ternary(smelt_graph *g, smelt_op op, smelt_node *a, smelt_node *b,
                          smelt_node *c)
{
    smelt_node *args[3] = {a, b, c};
    return smelt_op_apply(g, op, 3, args);
}

smelt_node *smelt_cast(smelt_graph *g, smelt_node *a, smelt_dtype dt)
{
    if (!g || g->status)
        return NULL;
    if (!check_operands(g, "cast", 1, &a))
        return NULL;
    if (!smelt__dtype_valid((int)dt))
        return fail(g, SMELT_ERR_DTYPE, "cast: invalid dtype %d", (int)dt);
    /* a weak scalar cast to its own dtype becomes strongly typed, as
     * np.int64(1) is: a new node, not a itself */
    if (a->dtype == dt && !a->weak)
        return a;
    if (a->op == SMELT_OP_CONST) {
        smelt_node *c = make_const(g, smelt__is_float(a->dtype) ? a->fval : (double)a->ival, dt, false);
        if (c && a->dtype == dt) { /* every bit, beyond 2^53 too */
            c->fval = a->fval;
            c->ival = a->ival;
        }
        return c;
    }
    return new_node(g, SMELT_OP_CAST, dt, a->ndim, a->shape, 1, &a);
}

/* A view node: op with parameters vp (rank entries) over a, its shape from
 * smelt__view_shape (gshape: a broadcast's target). */
static smelt_node *new_view(smelt_graph *g, smelt_op op, smelt_node *a, int rank, const int64_t *vp,
                            const int64_t *gshape)
{
    int nd;
    int64_t out[SMELT_MAX_DIMS];
    smelt__sb why;
    smelt__sb_init(&why);
    int st = smelt__view_shape(op, rank, vp, gshape, a->ndim, a->shape, &nd, out, &why);
    smelt_node *n = st ? fail(g, st, "%s: %s", smelt__ops[op].name, smelt__sb_str(&why)) : NULL;
    smelt__sb_free(&why);
    if (st || !check_shape(g, smelt__ops[op].name, nd, out) || !(n = new_node(g, op, a->dtype, nd, out, 1, &a)))
        return NULL;
    if (vp)
        memcpy(n->vp, vp, sizeof(int64_t) * (size_t)(op == SMELT_OP_SLICE ? 4 : rank));
    return n;
}

smelt_node *smelt_broadcast_to(smelt_graph *g, smelt_node *a, int ndim, const int64_t *shape)
{
    if (!g || g->status)
        return NULL;
    if (!check_operands(g, "broadcast_to", 1, &a))
        return NULL;
    if (!check_shape(g, "broadcast_to", ndim, shape))
        return NULL;
    if (ndim < a->ndim)
        return fail(g, SMELT_ERR_SHAPE, "broadcast_to: cannot broadcast rank %d to rank %d",
                    a->ndim, ndim);
    return new_view(g, SMELT_OP_BROADCAST, a, ndim, NULL, shape);
}

/* axis of a rank-n array, negative counting from the end: 0..n-1, or -1
 * with the error recorded */
static int norm_axis(smelt_graph *g, const char *what, int axis, int n)
{
    if (axis < -n || axis >= n) {
        fail(g, SMELT_ERR_INVALID_ARG, "%s: axis %d is out of bounds for an array of rank %d", what, axis, n);
        return -1;
    }
    return axis < 0 ? axis + n : axis;
}

/* The parameters of view op over a checked: reshape entries a size, -1 (one
 * at most) or -2 - k (k < a's rank); transpose a permutation of a's axes;
 * slice an axis of a, bounds and a step other than 0 and SMELT_NONE. */
smelt_node *smelt__view_node(smelt_graph *g, smelt_op op, smelt_node *a, int n, const int64_t *vp)
{
    const char *name = smelt__ops[op].name;
    if (!g || g->status || !check_operands(g, name, 1, &a))
        return NULL;
    if (n < 0 || n > SMELT_MAX_DIMS || (n && !vp))
        return fail(g, SMELT_ERR_INVALID_ARG, "%s: %s", name, n && !vp ? "its list is NULL" : "rank out of range");
    if (op == SMELT_OP_RESHAPE) {
        int infer = 0;
        for (int d = 0; d < n; d++) {
            if (vp[d] == -1 && infer++)
                return fail(g, SMELT_ERR_SHAPE, "reshape: can only specify one unknown dimension (-1)");
            if (vp[d] < -2 - (int64_t)(a->ndim - 1))
                return fail(g, SMELT_ERR_SHAPE, "reshape: dimension %d is %lld (a size, or -1 to infer it)", d,
                            (long long)vp[d]);
        }
    } else if (op == SMELT_OP_PERMUTE) {
        unsigned seen = 0;
        if (n != a->ndim)
            return fail(g, SMELT_ERR_INVALID_ARG, "transpose: %d axes for an array of rank %d (give each axis once)",
                        n, a->ndim);
        for (int d = 0; d < n; d++) {
            if (vp[d] < 0 || vp[d] >= a->ndim || (seen >> vp[d] & 1u))
                return fail(g, SMELT_ERR_INVALID_ARG, "transpose: axis %lld %s (perm must hold each axis of %d once)",
                            (long long)vp[d], vp[d] < 0 || vp[d] >= a->ndim ? "is out of bounds" : "is repeated",
                            a->ndim);
            seen |= 1u << vp[d];
        }
    } else if (op == SMELT_OP_SLICE) {
        if (n != 4 || vp[0] < 0 || vp[0] >= a->ndim)
            return fail(g, SMELT_ERR_INVALID_ARG, "slice: axis %lld is out of bounds for an array of rank %d",
                        n == 4 ? (long long)vp[0] : -1LL, a->ndim);
        if (vp[3] == 0 || vp[3] == SMELT_NONE)
            return fail(g, SMELT_ERR_INVALID_ARG, "slice: step cannot be %s", vp[3] ? "absent" : "zero");
    } else {
        return fail(g, SMELT_ERR_INVALID_ARG, "%s is not a view with parameters", name);
    }
    return new_view(g, op, a, op == SMELT_OP_SLICE ? a->ndim : n, vp, NULL);
}

smelt_node *smelt_reshape(smelt_graph *g, smelt_node *a, int ndim, const int64_t *shape)
{
    if (g && !g->status && ndim > 0 && !shape)
        return fail(g, SMELT_ERR_INVALID_ARG, "reshape: shape is NULL");
    for (int d = 0; g && !g->status && shape && d < ndim && d < SMELT_MAX_DIMS; d++)
        if (shape[d] < -1)
            return fail(g, SMELT_ERR_SHAPE, "reshape: dimension %d is %lld (a size, or -1 to infer it)", d,
                        (long long)shape[d]);
    return smelt__view_node(g, SMELT_OP_RESHAPE, a, ndim, shape);
}

smelt_node *smelt_transpose(smelt_graph *g, smelt_node *a, const int *perm)
{
    if (!g || g->status || !check_operands(g, "transpose", 1, &a))
        return NULL;
    int64_t vp[SMELT_MAX_DIMS];
    for (int d = 0; d < a->ndim; d++) {
        int ax = perm ? perm[d] : a->ndim - 1 - d;
        vp[d] = ax < 0 && ax >= -a->ndim ? ax + a->ndim : ax;
    }
    return smelt__view_node(g, SMELT_OP_PERMUTE, a, a->ndim, vp);
}

smelt_node *smelt_slice(smelt_graph *g, smelt_node *a, int axis, int64_t start, int64_t stop, int64_t step)
{
    if (!g || g->status || !check_operands(g, "slice", 1, &a))
        return NULL;
    if ((axis = norm_axis(g, "slice", axis, a->ndim)) < 0)
        return NULL;
    const int64_t vp[4] = {axis, start, stop, step};
    return smelt__view_node(g, SMELT_OP_SLICE, a, 4, vp);
}

smelt_node *smelt_flip(smelt_graph *g, smelt_node *a, int axis)
{
    return smelt_slice(g, a, axis, SMELT_NONE, SMELT_NONE, -1);
}

/* expand_dims and squeeze: a reshape that keeps a's other dimensions as
 * they are at run time (-2 - k: dimension k of the operand) */
static smelt_node *dims_view(smelt_graph *g, const char *what, smelt_node *a, int axis, bool expand)
{
    if (!g || g->status || !check_operands(g, what, 1, &a))
        return NULL;
    int r = a->ndim + (expand ? 1 : -1);
    if (expand && r > SMELT_MAX_DIMS)
        return fail(g, SMELT_ERR_SHAPE, "expand_dims: rank %d would exceed %d", r, SMELT_MAX_DIMS);
    if ((axis = norm_axis(g, what, axis, expand ? r : a->ndim)) < 0)
        return NULL;
    if (!expand && a->shape[axis] != 1)
        return fail(g, SMELT_ERR_SHAPE, "squeeze: axis %d has size %lld (only an axis of size 1 can be removed)",
                    axis, (long long)a->shape[axis]);
    int64_t vp[SMELT_MAX_DIMS];
    for (int d = 0, k = 0; d < r; d++) {
        if (d == axis && expand) {
            vp[d] = 1;
            continue;
        }
        k += !expand && k == axis; /* the squeezed axis */
        vp[d] = -2 - k++;
    }
    return smelt__view_node(g, SMELT_OP_RESHAPE, a, r, vp);
}

smelt_node *smelt_expand_dims(smelt_graph *g, smelt_node *a, int axis) { return dims_view(g, "expand_dims", a, axis, true); }
smelt_node *smelt_squeeze(smelt_graph *g, smelt_node *a, int axis) { return dims_view(g, "squeeze", a, axis, false); }

/* The parts node n reads through views, concats and pads (with repeats). */
static int node_parts(const smelt_node *n)
{
    while (smelt__is_view(n->op) && n->op != SMELT_OP_CONCAT)
        n = n->in[0];
    return n->op == SMELT_OP_CONCAT ? node_parts(n->in[0]) + node_parts(n->in[1]) : 1;
}

smelt_node *smelt_concat(smelt_graph *g, int n, smelt_node *const *parts, int axis)
{
    if (!g || g->status)
        return NULL;
    if (n < 1 || !parts)
        return fail(g, SMELT_ERR_INVALID_ARG, "concat: %s", parts ? "no arrays to concatenate" : "parts is NULL");
    if (!check_operands(g, "concat", n, parts))
        return NULL;
    int r = parts[0]->ndim;
    if (r == 0)
        return fail(g, SMELT_ERR_SHAPE, "concat: zero-dimensional arrays cannot be concatenated (expand_dims first)");
    if ((axis = norm_axis(g, "concat", axis, r)) < 0)
        return NULL;
    smelt_dtype dt = promote_args(n, parts); /* NumPy's result_type of the parts */
    smelt_node *acc = NULL;
    for (int k = 0; k < n; k++) {
        smelt_node *x = parts[k]->dtype == dt && !parts[k]->weak ? parts[k] : smelt_cast(g, parts[k], dt);
        if (!x)
            return NULL;
        if (!acc) {
            acc = x;
            continue;
        }
        int64_t out[SMELT_MAX_DIMS];
        smelt__sb why;
        smelt__sb_init(&why);
        int st = smelt__concat_shape(axis, acc->ndim, acc->shape, x->ndim, x->shape, out, &why);
        if (st) {
            fail(g, st, "concat: part %d: %s", k, smelt__sb_str(&why));
            smelt__sb_free(&why);
            return NULL;
        }
        smelt__sb_free(&why);
        if (!check_shape(g, "concat", r, out))
            return NULL;
        /* more parts than one value reads: those so far become one (a copy) */
        if (node_parts(acc) + node_parts(x) > SMELT_MAX_PARTS && !(acc = smelt_unary(g, SMELT_OP_COPY, acc)))
            return NULL;
        if (!(acc = new_node(g, SMELT_OP_CONCAT, dt, r, out, 2, (smelt_node *[]){acc, x})))
            return NULL;
        acc->vp[0] = axis;
    }
    return acc;
}

smelt_node *smelt_pad(smelt_graph *g, smelt_node *a, const int64_t *widths, double value)
{
    if (!g || g->status || !check_operands(g, "pad", 1, &a))
        return NULL;
    if (a->ndim && !widths)
        return fail(g, SMELT_ERR_INVALID_ARG, "pad: widths is NULL");
    smelt_dtype dt = a->dtype;
    int64_t cell = 0;
    if (smelt__is_float(dt)) {
        smelt__elem_store(dt, (char *)&cell, value);
    } else if (dt == SMELT_BOOL) {
        cell = value != 0; /* (NaN too, as NumPy's bool(nan)) */
    } else {
        double lo = dt == SMELT_U8 ? 0 : dt == SMELT_I32 ? -2147483648.0 : -9223372036854775808.0;
        double hi = dt == SMELT_U8 ? 256 : dt == SMELT_I32 ? 2147483648.0 : 9223372036854775808.0;
        if (!(value > lo - 1 && value < hi))
            return fail(g, SMELT_ERR_INVALID_ARG, "pad: the value %g does not fit in %s", value, smelt__dtypes[dt].name);
        smelt__elem_store(dt, (char *)&cell, trunc(value));
    }
    for (int d = 0; d < a->ndim; d++)
        if (widths[2 * d] < 0 || widths[2 * d + 1] < 0)
            return fail(g, SMELT_ERR_INVALID_ARG, "pad: axis %d: the widths (%lld, %lld) must be 0 or more", d,
                        (long long)widths[2 * d], (long long)widths[2 * d + 1]);
    smelt_node *x = a;
    for (int d = 0; d < a->ndim && x; d++) {
        if (!widths[2 * d] && !widths[2 * d + 1])
            continue;
        const int64_t vp[4] = {d, widths[2 * d], widths[2 * d + 1], cell};
        int64_t out[SMELT_MAX_DIMS];
        memcpy(out, x->shape, sizeof out);
        if (vp[1] > INT64_MAX / 4 || vp[2] > INT64_MAX / 4 || (out[d] += vp[1] + vp[2]) < 0)
            return fail(g, SMELT_ERR_SHAPE, "pad: axis %d would be too long", d);
        if (!check_shape(g, "pad", x->ndim, out) || !(x = new_node(g, SMELT_OP_PAD, dt, x->ndim, out, 1, &x)))
            return NULL;
        memcpy(x->vp, vp, sizeof vp);
    }
    return x;
}

smelt_node *smelt_matmul(smelt_graph *g, smelt_node *a, smelt_node *b)
{
    if (!g || g->status)
        return NULL;
    smelt_node *ab[2] = {a, b};
    if (!check_operands(g, "matmul", 2, ab))
        return NULL;
    if (a->ndim == 0 || b->ndim == 0)
        return fail(g, SMELT_ERR_SHAPE, "matmul: operand %d is a scalar (NumPy's matmul needs arrays of rank 1 or "
                    "more; use * to scale)", a->ndim == 0 ? 0 : 1);
    for (int k = 0; k < 2; k++)
        if (!smelt__is_float(ab[k]->dtype))
            return fail(g, SMELT_ERR_DTYPE, "matmul does not support dtype %s (f32, f64, f16 and bf16: cast "
                        "integers first, e.g. float32(x))", smelt__dtypes[ab[k]->dtype].name);
    smelt_dtype dt = promote_args(2, ab); /* one dtype: as a binary operator promotes */
    smelt_node *x = a->dtype == dt ? a : smelt_cast(g, a, dt), *y = b->dtype == dt ? b : smelt_cast(g, b, dt);
    bool arow = a->ndim == 1, bcol = b->ndim == 1;
    if (arow)
        x = smelt_expand_dims(g, x, 0);
    if (bcol)
        y = smelt_expand_dims(g, y, 1);
    if (g->status)
        return NULL;
    int nd;
    int64_t out[SMELT_MAX_DIMS];
    smelt__sb why;
    smelt__sb_init(&why);
    int st = smelt__matmul_shape(x->ndim, x->shape, y->ndim, y->shape, &nd, out, &why);
    smelt_node *r = st ? fail(g, st, "matmul: %s", smelt__sb_str(&why)) : NULL;
    smelt__sb_free(&why);
    if (st || !check_shape(g, "matmul", nd, out))
        return NULL;
    r = new_node(g, SMELT_OP_MATMUL, dt, nd, out, 2, (smelt_node *[]){x, y});
    if (r && bcol)
        r = smelt_squeeze(g, r, -1);
    if (r && arow)
        r = smelt_squeeze(g, r, bcol ? -1 : -2);
    return r;
}

void smelt__blob_release(smelt__blob *b)
{
    if (b && __atomic_sub_fetch(&b->refs, 1, __ATOMIC_ACQ_REL) == 0)
        free(b);
}

smelt_node *smelt_constant(smelt_graph *g, const smelt_tensor *t)
{
    if (!g || g->status)
        return NULL;
    if (!t)
        return fail(g, SMELT_ERR_INVALID_ARG, "constant: the tensor is NULL");
    if (smelt__is_device(t))
        return fail(g, SMELT_ERR_INVALID_ARG, "constant: a device tensor (copy it to the host first: "
                    "smelt_tensor_copy_to_host)");
    if (!check_shape(g, "constant", t->ndim, t->shape))
        return NULL;
    size_t es = smelt__dtypes[t->dtype].size, bytes = (size_t)smelt__numel(t->ndim, t->shape) * es;
    smelt__blob *b = malloc(sizeof *b + (bytes ? bytes : 1));
    if (!b)
        return fail(g, SMELT_ERR_NOMEM, "constant: out of memory (%zu bytes)", bytes);
    b->refs = 1;
    b->bytes = bytes;
    smelt_tensor dst = *t; /* the values, C-contiguous, into the blob */
    smelt__contig_strides(t->ndim, t->shape, dst.strides);
    dst.data = b->data;
    dst.buf = NULL;
    smelt__tensor_copy_into(&dst, t);
    b->hash = smelt__hash(t->shape, sizeof(int64_t) * (size_t)t->ndim,
                          smelt__hash(b->data, bytes, (uint64_t)t->dtype * 131 + (uint64_t)t->ndim));
    for (int i = 0; i < g->n; i++) { /* stored once */
        smelt_node *m = g->nodes[i];
        if (m->op == SMELT_OP_TENSOR && m->blob->hash == b->hash && m->dtype == t->dtype && m->ndim == t->ndim &&
            !memcmp(m->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim) && m->blob->bytes == bytes &&
            !memcmp(m->blob->data, b->data, bytes)) {
            free(b);
            return m;
        }
    }
    smelt_node *n = new_node(g, SMELT_OP_TENSOR, t->dtype, t->ndim, t->shape, 0, NULL);
    if (!n) {
        free(b);
        return NULL;
    }
    n->blob = b;
    return n;
}

smelt_node *smelt_arange(smelt_graph *g, int64_t n, smelt_dtype dt)
{
    if (!g || g->status)
        return NULL;
    if (!smelt__dtype_valid((int)dt) || !(smelt__ops[SMELT_OP_ARANGE].dtypes & smelt__dtypes[dt].kind))
        return fail(g, SMELT_ERR_DTYPE, "arange: dtype %s is not a number type (give i64, i32, f32, ...)",
                    smelt__dtype_valid((int)dt) ? smelt__dtypes[dt].name : "(invalid)");
    if (!check_shape(g, "arange", 1, &n))
        return NULL;
    return new_node(g, SMELT_OP_ARANGE, dt, 1, &n, 0, NULL);
}

/* The value of a reduction over one element x (of dtype dt): x in the
 * accumulator's dtype, divided by 1 for mean, index 0 for argmax and argmin,
 * as the result dtype. */
static double reduce_one(smelt_op op, smelt_dtype dt, double x)
{
    smelt_dtype acc = smelt__red_acc(op, dt), res = smelt__red_result(op, dt);
    int rule = smelt__ops[op].rule;
    if (rule == SMELT_RULE_ARG)
        return 0;
    if (rule == SMELT_RULE_BOOL)
        return x != 0;
    return smelt__dtype_round(res, smelt__dtype_round(acc, x));
}

smelt_node *smelt_reduce(smelt_graph *g, smelt_op op, smelt_node *a, int n_axes, const int *axes,
                         int keepdims)
{
    if (!g || g->status)
        return NULL;
    if ((int)op < 0 || op >= SMELT_OP_COUNT || !smelt__is_reduce(op))
        return fail(g, SMELT_ERR_INVALID_ARG, "smelt_reduce: %s is not a reduction (sum, prod, mean, max, "
                    "min, argmax, argmin, any, all)", smelt_op_name(op) ? smelt_op_name(op) : "the operator");
    const char *name = smelt__ops[op].name;
    if (!check_operands(g, name, 1, &a))
        return NULL;
    if (n_axes < 0 || (n_axes > 0 && !axes))
        return fail(g, SMELT_ERR_INVALID_ARG, "%s: %s", name, n_axes < 0 ? "n_axes is negative" : "axes is NULL");
    if (smelt__ops[op].rule == SMELT_RULE_ARG && n_axes > 1)
        return fail(g, SMELT_ERR_INVALID_ARG, "%s takes one axis or all of them, got %d axes (as NumPy's)",
                    name, n_axes);
    unsigned mask = 0;
    for (int i = 0; i < n_axes; i++) {
        int ax = axes[i];
        if (ax < -a->ndim || ax >= a->ndim)
            return fail(g, SMELT_ERR_INVALID_ARG, "%s: axis %d is out of bounds for an array of rank %d", name,
                        ax, a->ndim);
        ax = ax < 0 ? ax + a->ndim : ax;
        if (mask >> ax & 1u)
            return fail(g, SMELT_ERR_INVALID_ARG, "%s: duplicate value in 'axis' (axis %d given twice)", name,
                        axes[i]);
        mask |= 1u << ax;
    }
    if (n_axes == 0)
        mask = (1u << a->ndim) - 1u;
    if (!(smelt__ops[op].dtypes & smelt__dtypes[a->dtype].kind))
        return fail(g, SMELT_ERR_DTYPE, "%s does not support dtype %s", name, smelt__dtypes[a->dtype].name);
    int ident = smelt__ops[op].ident;
    for (int d = 0; d < a->ndim; d++)
        if ((mask >> d & 1u) && a->shape[d] == 0 && (ident == SMELT_IDENT_LOWEST || ident == SMELT_IDENT_HIGHEST)) {
            char txt[SMELT_SHAPE_STR_MAX];
            return fail(g, SMELT_ERR_SHAPE, "%s of an empty array: axis %d of %s has size 0, and %s has no "
                        "identity (as NumPy: zero-size array to reduction operation)", name, d,
                        smelt__shape_fmt(txt, a->ndim, a->shape), name);
        }
    smelt_dtype rt = smelt__red_result(op, a->dtype);
    if (a->op == SMELT_OP_CONST) { /* a scalar: one element, known now */
        smelt_node *c = make_const(g, reduce_one(op, a->dtype, smelt__is_float(a->dtype) ? a->fval : (double)a->ival),
                                   rt, false);
        int rule = smelt__ops[op].rule;
        if (c && !smelt__is_float(a->dtype) && (rule == SMELT_RULE_SUM || rule == SMELT_RULE_SAME)) {
            c->ival = a->ival; /* every bit, beyond 2^53 too */
            c->fval = (double)a->ival;
        }
        return c;
    }
    int nd;
    int64_t shape[SMELT_MAX_DIMS];
    smelt__red_shape(a->ndim, a->shape, mask, keepdims != 0, &nd, shape);
    smelt_node *r = new_node(g, op, rt, nd, shape, 1, &a);
    if (r) {
        r->axes = (uint8_t)mask;
        r->keepdims = keepdims != 0;
    }
    return r;
}

smelt_dtype smelt_node_dtype(const smelt_node *n) { return n ? n->dtype : SMELT_F32; }
int smelt_node_ndim(const smelt_node *n) { return n ? n->ndim : 0; }
const int64_t *smelt_node_shape(const smelt_node *n) { return n ? n->shape : NULL; }
smelt_op smelt_node_op(const smelt_node *n) { return n ? n->op : SMELT_OP_INPUT; }

/* ---- indexed reads (ops.def: TAKE, TAKE_ALONG) --------------------------- */
static smelt_node *gather_node(smelt_graph *g, smelt_op op, smelt_node *a, smelt_node *idx, int axis)
{
    const char *name = smelt__ops[op].name;
    smelt_node *ai[2] = {a, idx};
    if (!g || g->status || !check_operands(g, name, 2, ai))
        return NULL;
    if (a->ndim == 0)
        return fail(g, SMELT_ERR_SHAPE, "%s: the array is a scalar (it needs an axis to index)", name);
    if (smelt__is_float(idx->dtype) || idx->dtype == SMELT_BOOL)
        return fail(g, SMELT_ERR_DTYPE, "%s: indices must be integers, not %s (cast them, e.g. int64(i))", name,
                    smelt__dtypes[idx->dtype].name);
    if ((axis = norm_axis(g, name, axis, a->ndim)) < 0)
        return NULL;
    if (a->shape[axis] == 0)
        return fail(g, SMELT_ERR_SHAPE, "%s: axis %d has size 0: no index is in range", name, axis);
    if (idx->op == SMELT_OP_CONST && idx->weak) /* a Python int: i64 */
        idx = convert(g, idx, SMELT_I64);
    if (!idx)
        return NULL;
    int nd = 0;
    int64_t shape[SMELT_MAX_DIMS];
    if (op == SMELT_OP_TAKE) {
        if (a->ndim - 1 + idx->ndim > SMELT_MAX_DIMS)
            return fail(g, SMELT_ERR_SHAPE, "take: the result would have rank %d (at most %d)",
                        a->ndim - 1 + idx->ndim, SMELT_MAX_DIMS);
        for (int d = 0; d < axis; d++)
            shape[nd++] = a->shape[d];
        for (int d = 0; d < idx->ndim; d++)
            shape[nd++] = idx->shape[d];
        for (int d = axis + 1; d < a->ndim; d++)
            shape[nd++] = a->shape[d];
    } else {
        if (idx->ndim != a->ndim)
            return fail(g, SMELT_ERR_SHAPE, "take_along_axis: the indices have rank %d, the array %d (they must "
                        "have the same rank)", idx->ndim, a->ndim);
        int64_t as[SMELT_MAX_DIMS];
        memcpy(as, a->shape, sizeof(int64_t) * (size_t)a->ndim);
        as[axis] = 1;
        if (smelt__broadcast_shapes(a->ndim, as, idx->ndim, idx->shape, &nd, shape)) {
            char t[2][SMELT_SHAPE_STR_MAX];
            smelt__shape_fmt(t[0], a->ndim, a->shape), smelt__shape_fmt(t[1], idx->ndim, idx->shape);
            return fail(g, SMELT_ERR_SHAPE, "take_along_axis: indices of shape %s do not broadcast against an "
                        "array of shape %s outside axis %d", t[1], t[0], axis);
        }
        shape[axis] = idx->shape[axis];
    }
    if (!check_shape(g, name, nd, shape))
        return NULL;
    smelt_node *r = new_node(g, op, a->dtype, nd, shape, 2, (smelt_node *[]){a, idx});
    if (r)
        r->vp[0] = axis;
    return r;
}

smelt_node *smelt_take(smelt_graph *g, smelt_node *a, smelt_node *indices, int axis)
{
    return gather_node(g, SMELT_OP_TAKE, a, indices, axis);
}

smelt_node *smelt_take_along_axis(smelt_graph *g, smelt_node *a, smelt_node *indices, int axis)
{
    return gather_node(g, SMELT_OP_TAKE_ALONG, a, indices, axis);
}

/* ---- compositions of other operators: one_hot, tril, triu ----------------- */
smelt_node *smelt_one_hot(smelt_graph *g, smelt_node *indices, int64_t depth, smelt_dtype dt)
{
    if (!g || g->status || !check_operands(g, "one_hot", 1, &indices))
        return NULL;
    if (smelt__is_float(indices->dtype) || indices->dtype == SMELT_BOOL)
        return fail(g, SMELT_ERR_DTYPE, "one_hot: indices must be integers, not %s", smelt__dtypes[indices->dtype].name);
    if (depth < 0)
        return fail(g, SMELT_ERR_INVALID_ARG, "one_hot: depth %lld is negative", (long long)depth);
    smelt_dtype it = indices->dtype == SMELT_U8 ? SMELT_I32 : indices->dtype;
    smelt_node *i = convert(g, indices, it);
    if (!i)
        return NULL;
    /* negative indices count from the end (ONNX OneHot): i == k - depth;
     * every operator at the result's shape (arange broadcast to it, a
     * view), so that they fuse into one kernel */
    smelt_node *x = smelt_expand_dims(g, i, -1);
    if (!x)
        return NULL;
    int64_t shape[SMELT_MAX_DIMS];
    memcpy(shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    shape[x->ndim - 1] = depth;
    smelt_node *ar = smelt_broadcast_to(g, smelt_arange(g, depth, it), x->ndim, shape);
    smelt_node *hot = smelt_binary(g, SMELT_OP_LOGICAL_OR, smelt_binary(g, SMELT_OP_EQ, x, ar),
                                   smelt_binary(g, SMELT_OP_EQ, x, smelt_sub(g, ar, smelt_const(g, (double)depth, it))));
    return smelt_cast(g, hot, dt);
}

static smelt_node *tri(smelt_graph *g, const char *what, smelt_node *a, int64_t k, bool lower)
{
    if (!g || g->status || !check_operands(g, what, 1, &a))
        return NULL;
    if (a->ndim < 2)
        return fail(g, SMELT_ERR_SHAPE, "%s: the array has rank %d (it needs 2 or more: the last two axes are the "
                    "matrices)", what, a->ndim);
    int64_t r = a->shape[a->ndim - 2], c = a->shape[a->ndim - 1];
    /* (broadcast to a's shape first, views: every operator at a's shape fuses into one kernel) */
    smelt_node *row = smelt_broadcast_to(g, smelt_expand_dims(g, smelt_arange(g, r, SMELT_I64), 1), a->ndim, a->shape);
    smelt_node *col = smelt_broadcast_to(g, smelt_arange(g, c, SMELT_I64), a->ndim, a->shape);
    smelt_node *diff = smelt_sub(g, col, row), *kk = smelt_const(g, (double)k, SMELT_I64);
    smelt_node *keep = smelt_binary(g, lower ? SMELT_OP_LE : SMELT_OP_GE, diff, kk);
    smelt_node *zero = smelt_const(g, 0, a->dtype);
    return smelt_where(g, keep, a, zero);
}

smelt_node *smelt_tril(smelt_graph *g, smelt_node *a, int64_t k) { return tri(g, "tril", a, k, true); }
smelt_node *smelt_triu(smelt_graph *g, smelt_node *a, int64_t k) { return tri(g, "triu", a, k, false); }
