/* Algebraic simplification and dead branches: an instruction whose value is
 * one of its operands, bit for bit, is replaced by that operand (later
 * instructions and outputs read the operand; dce removes the rest):
 *
 *   x + z, z + x    z = 0, or -0.0 for floats (+0.0 would turn -0.0 into +0.0)
 *   x - z           z = 0 (+0.0 for floats: -0.0 - +0.0 = -0.0)
 *   x * 1, 1 * x, x / 1, x ** 1, x | 0, x ^ 0, x or False, x and True
 *   f(f(x)) = x     neg, logical_not, bitwise_not
 *   f(f(x)) = f(x)  abs, sign, floor, ceil, trunc, rint, round, relu
 *   copy(x), cast of x to its own dtype, maximum(x, x), minimum(x, x),
 *   x & x, x | x, logical and/or of x with x
 *   where(c, a, b) with a constant c: a or b ("dead branches"), and
 *   where(c, a, a): a
 *   views that change nothing (a transpose in order, a whole slice, a
 *   reshape that keeps each dimension), and a transpose of a transpose or
 *   a reshape of a reshape becomes one view of the inner one's operand
 *
 * and x - x, x ^ x (integers) become the constant 0; x ** 2 becomes
 * square(x), and x ** -1 (floats) reciprocal(x), as NumPy computes them:
 * smelt's pow gives those bits for those exponents on every tier
 * (templates/common/math.h.in), so only the cost changes.  Only where the
 * operand has the instruction's dtype and shape (a broadcast operand is
 * not the result).  Floating-point rules keep every bit, NaN payloads
 * aside: x * 1 (or x ** 1) of a signalling NaN stays signalling where the
 * product would have quieted it.  A dropped branch's run-time shapes are not
 * checked, as with any dead value. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

/* The identities: op with constant operand `side` (0 first, 1 second, 2 either)
 * equal to `value` is its other operand, for the dtype kinds in `kinds`
 * (an identity of 0 for floats means -0.0 with neg_zero). */
typedef struct ident {
    smelt_op op;
    int side;
    double value;
    int kinds;
    bool neg_zero; /* floats: the identity is -0.0 */
} ident;

static const ident identities[] = {
    {SMELT_OP_ADD, 2, 0, SMELT_DT_F | SMELT_DT_I | SMELT_DT_U | SMELT_DT_B, true},
    {SMELT_OP_SUB, 1, 0, SMELT_DT_F | SMELT_DT_I | SMELT_DT_U, false},
    {SMELT_OP_MUL, 2, 1, SMELT_DT_F | SMELT_DT_I | SMELT_DT_U, false},
    {SMELT_OP_DIV, 1, 1, SMELT_DT_F, false},
    {SMELT_OP_POW, 1, 1, SMELT_DT_F | SMELT_DT_I | SMELT_DT_U, false},
    {SMELT_OP_BITWISE_OR, 2, 0, SMELT_DT_I | SMELT_DT_U | SMELT_DT_B, false},
    {SMELT_OP_BITWISE_XOR, 2, 0, SMELT_DT_I | SMELT_DT_U | SMELT_DT_B, false},
    {SMELT_OP_LOGICAL_OR, 2, 0, SMELT_DT_B, false},
    {SMELT_OP_LOGICAL_AND, 2, 1, SMELT_DT_B, false},
};

static const smelt_op involutions[] = {SMELT_OP_NEG, SMELT_OP_LOGICAL_NOT, SMELT_OP_BITWISE_NOT};
static const smelt_op idempotent[] = {SMELT_OP_ABS,  SMELT_OP_SIGN,  SMELT_OP_FLOOR, SMELT_OP_CEIL,
                                      SMELT_OP_TRUNC, SMELT_OP_RINT, SMELT_OP_ROUND, SMELT_OP_RELU};
static const smelt_op self_same[] = {SMELT_OP_MAXIMUM,    SMELT_OP_MINIMUM,     SMELT_OP_BITWISE_AND,
                                     SMELT_OP_BITWISE_OR, SMELT_OP_LOGICAL_AND, SMELT_OP_LOGICAL_OR};

static bool in_list(smelt_op op, const smelt_op *l, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (l[i] == op)
            return true;
    return false;
}
#define IN(op, l) in_list((op), (l), sizeof(l) / sizeof *(l))

static bool is_const(const smelt__inst *c, double v, bool neg_zero)
{
    if (c->op != SMELT_OP_CONST)
        return false;
    if (!smelt__is_float(c->dtype))
        return (double)c->ival == v;
    return c->fval == v && (v != 0 || !signbit(c->fval) == !neg_zero);
}

/* A view that changes nothing, whatever the run-time sizes: a transpose
 * that keeps the order of the axes, a reshape that keeps every dimension,
 * a slice of everything. */
static bool view_identity(const smelt__inst *x, const smelt__inst *a)
{
    bool same = x->op != SMELT_OP_BROADCAST && (x->op != SMELT_OP_RESHAPE || x->ndim == a->ndim);
    for (int d = 0; same && x->op != SMELT_OP_SLICE && d < x->ndim; d++)
        same = x->vp[d] == (x->op == SMELT_OP_PERMUTE ? d : -2 - d);
    return same && (x->op != SMELT_OP_SLICE ||
                    ((x->vp[1] == SMELT_NONE || x->vp[1] == 0) && x->vp[2] == SMELT_NONE && x->vp[3] == 1));
}

/* A transpose of a transpose, a reshape of a reshape: one view of the
 * inner one's operand (x rewritten; false when it is not, as for a
 * reshape that keeps a dimension the inner one infers). */
static bool view_compose(const smelt__prog *p, smelt__inst *x)
{
    const smelt__inst *a = &p->v[x->in[0]];
    if (a->op != x->op || (x->op != SMELT_OP_PERMUTE && x->op != SMELT_OP_RESHAPE))
        return false;
    int64_t vp[SMELT_MAX_DIMS];
    for (int d = 0; d < x->ndim; d++) {
        int64_t e = x->vp[d];
        if (x->op == SMELT_OP_PERMUTE)
            vp[d] = a->vp[e];
        else if (e >= -1)
            vp[d] = e;
        else if ((vp[d] = a->vp[-2 - e]) == -1)
            return false;
    }
    memcpy(x->vp, vp, sizeof(int64_t) * (size_t)x->ndim);
    x->in[0] = a->in[0];
    return true;
}

/* a can stand for x: its dtype and shape (not a broadcast operand) */
static bool same_layout(const smelt__inst *a, const smelt__inst *x)
{
    return a->dtype == x->dtype && a->ndim == x->ndim &&
           !memcmp(a->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
}

/* x ** 2 as square(x), x ** -1 (floats) as reciprocal(x): x rewritten in
 * place (false when it is not), where x's operand has its dtype and shape */
static bool strength_reduce(const smelt__prog *p, smelt__inst *x)
{
    if (x->op != SMELT_OP_POW)
        return false;
    const smelt__inst *a = &p->v[x->in[0]], *b = &p->v[x->in[1]];
    int kind = smelt__dtypes[x->dtype].kind;
    smelt_op to = is_const(b, 2, false) && (kind & (SMELT_DT_F | SMELT_DT_I | SMELT_DT_U)) ? SMELT_OP_SQUARE
                  : is_const(b, -1, false) && kind == SMELT_DT_F                             ? SMELT_OP_RECIPROCAL
                                                                                            : SMELT_OP_POW;
    if (to == SMELT_OP_POW || !same_layout(a, x))
        return false;
    x->op = to;
    x->nin = 1;
    return true;
}

/* What instruction i equals: an operand's index, -2 for the constant 0,
 * -1 for nothing.  *branch: a dead branch (where), else algebra. */
static int rewrite(const smelt__prog *p, const smelt__inst *x, bool *branch)
{
    const smelt__inst *a = x->nin > 0 ? &p->v[x->in[0]] : NULL, *b = x->nin > 1 ? &p->v[x->in[1]] : NULL;
    int kind = smelt__dtypes[x->dtype].kind;
    *branch = x->op == SMELT_OP_WHERE;
    if (x->op == SMELT_OP_WHERE) {
        if (x->in[1] == x->in[2])
            return x->in[1];
        return a->op == SMELT_OP_CONST ? x->in[(smelt__is_float(a->dtype) ? a->fval != 0 : a->ival != 0) ? 1 : 2]
                                       : -1;
    }
    for (size_t k = 0; k < sizeof identities / sizeof *identities; k++) {
        const ident *d = &identities[k];
        if (d->op != x->op || !(d->kinds & kind))
            continue;
        if (d->side != 1 && is_const(a, d->value, d->neg_zero)) /* the constant first */
            return x->in[1];
        if (d->side != 0 && is_const(b, d->value, d->neg_zero)) /* the constant second */
            return x->in[0];
    }
    if (x->nin == 1 && a->nin == 1 && a->op == x->op && IN(x->op, involutions))
        return a->in[0];
    if (x->nin == 1 && a->op == x->op && IN(x->op, idempotent))
        return x->in[0];
    if (smelt__is_view(x->op) && view_identity(x, a))
        return x->in[0];
    if ((x->op == SMELT_OP_COPY && !smelt__has_pieces(p, x->in[0])) || /* (that one joins a concat's parts) */
        (x->op == SMELT_OP_CAST && a->dtype == x->dtype))
        return x->in[0];
    if (x->nin == 2 && x->in[0] == x->in[1] && IN(x->op, self_same))
        return x->in[0];
    if (x->nin == 2 && x->in[0] == x->in[1] && (kind & (SMELT_DT_I | SMELT_DT_U)) &&
        (x->op == SMELT_OP_SUB || x->op == SMELT_OP_BITWISE_XOR))
        return -2;
    return -1;
}

int smelt__pass_simplify(smelt__prog *p, int *branches)
{
    int n = 0;
    *branches = 0;
    int *repl = malloc(sizeof(int) * (size_t)(p->n ? p->n : 1));
    if (!repl)
        return 0; /* an optimisation: skipping it is correct */
    for (int i = 0; i < p->n; i++) {
        smelt__inst *x = &p->v[i];
        for (int j = 0; j < x->nin; j++)
            x->in[j] = repl[x->in[j]];
        repl[i] = i;
        if (smelt__ops[x->op].cls == SMELT_CLASS_SOURCE)
            continue;
        while (smelt__is_view(x->op) && view_compose(p, x))
            n++;
        n += strength_reduce(p, x);
        bool branch;
        int r = rewrite(p, x, &branch);
        if (r == -2) { /* the constant 0, of x's dtype and shape */
            x->op = SMELT_OP_CONST;
            x->nin = 0;
            x->fval = 0;
            x->ival = 0;
            n++;
            continue;
        }
        const smelt__inst *y = r >= 0 ? &p->v[r] : NULL;
        if (!y || !same_layout(y, x))
            continue;
        repl[i] = r;
        *branches += branch;
        n += !branch;
    }
    for (int i = 0; i < p->nout; i++)
        p->outputs[i] = repl[p->outputs[i]];
    free(repl);
    smelt__prog_uses(p);
    return n;
}
