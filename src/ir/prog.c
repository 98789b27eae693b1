/* Lowering a graph to a program: a flat, topologically ordered array of
 * instructions that the passes, the partitioner and the executor share. */
#include <stdlib.h>
#include <string.h>

#include "ir.h"

static int prog_push(smelt__prog *p, const smelt__inst *in)
{
    smelt__inst *v = smelt__grow(p->v, p->n, &p->cap, sizeof *v, 64);
    if (!v)
        return -1;
    p->v = v;
    p->v[p->n] = *in;
    return p->n++;
}

void smelt__prog_free(smelt__prog *p)
{
    free(p->v);
    free(p->outputs);
    free(p->in_dtypes);
    free(p->in_ndim);
    free(p->in_shape);
    memset(p, 0, sizeof *p);
}

int smelt__prog_from_graph(smelt_graph *g, int n_out, smelt_node *const *outs, smelt__prog *p,
                           smelt__sb *err)
{
    memset(p, 0, sizeof *p);
    p->nout = n_out;
    p->ninputs = g->nin;
    p->outputs = calloc((size_t)(n_out ? n_out : 1), sizeof *p->outputs);
    p->in_dtypes = calloc((size_t)(g->nin ? g->nin : 1), sizeof *p->in_dtypes);
    p->in_ndim = calloc((size_t)(g->nin ? g->nin : 1), sizeof *p->in_ndim);
    p->in_shape = calloc((size_t)(g->nin ? g->nin : 1), sizeof *p->in_shape);
    if (!p->outputs || !p->in_dtypes || !p->in_ndim || !p->in_shape)
        goto oom;
    for (int i = 0; i < g->nin; i++) {
        p->in_dtypes[i] = g->inputs[i]->dtype;
        p->in_ndim[i] = g->inputs[i]->ndim;
        memcpy(p->in_shape[i], g->inputs[i]->shape, sizeof p->in_shape[i]);
    }
    for (int k = 0; k < g->n; k++) {
        smelt_node *n = g->nodes[k];
        smelt__inst in = {.op = n->op, .dtype = n->dtype, .ndim = n->ndim, .nin = n->nin, .fval = n->fval,
                          .ival = n->ival, .input_index = n->input_index, .axes = n->axes,
                          .keepdims = n->keepdims};
        memcpy(in.shape, n->shape, sizeof in.shape);
        for (int j = 0; j < n->nin; j++)
            in.in[j] = n->in[j]->id; /* node ids equal instruction indices */
        if (prog_push(p, &in) < 0)
            goto oom;
    }
    for (int i = 0; i < n_out; i++)
        p->outputs[i] = outs[i]->id;
    return SMELT_OK;
oom:
    smelt__prog_free(p);
    smelt__sb_puts(err, "out of memory");
    return SMELT_ERR_NOMEM;
}

void smelt__prog_uses(smelt__prog *p)
{
    for (int i = 0; i < p->n; i++) {
        p->v[i].uses = 0;
        p->v[i].is_output = false;
    }
    for (int i = 0; i < p->n; i++)
        for (int j = 0; j < p->v[i].nin; j++)
            p->v[p->v[i].in[j]].uses++;
    for (int i = 0; i < p->nout; i++) {
        p->v[p->outputs[i]].uses++;
        p->v[p->outputs[i]].is_output = true;
    }
}

/* Every output must be computed by its own non-source instruction so that a
 * kernel writes it: inputs, constants and repeated outputs get a copy. */
int smelt__prog_finalize(smelt__prog *p)
{
    for (int i = 0; i < p->nout; i++) {
        int v = p->outputs[i];
        bool dup = false;
        for (int j = 0; j < i; j++)
            dup = dup || p->outputs[j] == v;
        if (!dup && smelt__ops[p->v[v].op].cls != SMELT_CLASS_SOURCE)
            continue;
        smelt__inst c = {.op = SMELT_OP_BROADCAST, .dtype = p->v[v].dtype, .ndim = p->v[v].ndim, .nin = 1,
                         .in = {v}, .input_index = -1, .copy = true};
        memcpy(c.shape, p->v[v].shape, sizeof c.shape);
        int k = prog_push(p, &c);
        if (k < 0)
            return SMELT_ERR_NOMEM;
        p->outputs[i] = k;
    }
    smelt__prog_uses(p);
    return SMELT_OK;
}
