/* Common-subexpression elimination: identical instructions (same operator,
 * dtype, operands, shape, constant value, reduced axes and view
 * parameters) are computed
 * once. */
#include <stdlib.h>
#include <string.h>

#include "passes.h"

static uint64_t inst_key(const smelt__inst *in)
{
    uint64_t h = smelt__hash(&in->op, sizeof in->op, in->dtype ^ ((uint64_t)in->axes << 8) ^
                                                         ((uint64_t)in->keepdims << 16));
    h = smelt__hash(in->in, sizeof(int) * (size_t)in->nin, h);
    if (in->op == SMELT_OP_CONST || in->op == SMELT_OP_TENSOR) {
        h = smelt__hash(&in->fval, sizeof in->fval, h);
        h = smelt__hash(&in->ival, sizeof in->ival, h);
    }
    h = smelt__hash(in->vp, sizeof in->vp, h);
    return smelt__hash(in->shape, sizeof(int64_t) * (size_t)in->ndim, h ^ (uint64_t)in->ndim);
}

static bool same(const smelt__inst *a, const smelt__inst *b)
{
    return a->op == b->op && a->dtype == b->dtype && a->nin == b->nin && a->ndim == b->ndim &&
           a->axes == b->axes && a->keepdims == b->keepdims &&
           !memcmp(a->in, b->in, sizeof(int) * (size_t)a->nin) &&
           !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) && !memcmp(a->vp, b->vp, sizeof a->vp) &&
           ((a->op != SMELT_OP_CONST && a->op != SMELT_OP_TENSOR) ||
            (a->ival == b->ival && !memcmp(&a->fval, &b->fval, sizeof a->fval)));
}

int smelt__pass_cse(smelt__prog *p)
{
    if (!p->n)
        return 0;
    int cap = 1;
    while (cap < 2 * p->n)
        cap *= 2;
    int *table = malloc(sizeof(int) * (size_t)cap);
    int *repl = malloc(sizeof(int) * (size_t)p->n);
    if (!table || !repl) {
        free(table);
        free(repl);
        return 0; /* CSE is an optimisation: skipping it is correct */
    }
    memset(table, -1, sizeof(int) * (size_t)cap);
    int removed = 0;
    for (int i = 0; i < p->n; i++) {
        smelt__inst *in = &p->v[i];
        for (int j = 0; j < in->nin; j++)
            in->in[j] = repl[in->in[j]];
        repl[i] = i;
        if (in->op == SMELT_OP_INPUT)
            continue;
        size_t s = inst_key(in) & (size_t)(cap - 1); /* open addressing, linear probing */
        while (table[s] >= 0 && !same(&p->v[table[s]], in))
            s = (s + 1) & (size_t)(cap - 1);
        if (table[s] < 0) {
            table[s] = i;
        } else {
            repl[i] = table[s];
            removed++;
        }
    }
    for (int i = 0; i < p->nout; i++)
        p->outputs[i] = repl[p->outputs[i]];
    free(table);
    free(repl);
    return removed;
}
