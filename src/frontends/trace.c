/* Traced functions: the user's builder function is recorded once per input
 * signature (dtypes, ranks, broadcast pattern), optimised and compiled; later
 * calls with that signature run the compiled plan. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"

typedef struct tentry {
    int n;
    smelt_dtype dt[64];
    int ndim[64];
    uint8_t ones[64]; /* bit d: dimension d has size 1 */
    smelt_plan *plan;
    smelt_graph *g;    /* the recorded graph and its outputs (smelt_trace_save) */
    smelt_node **outs;
    const smelt_tensor **caps; /* captured tensors, the plan's inputs after the function's (borrowed) */
    smelt_node **capn;         /* their nodes */
    int ncap;
} tentry;

struct smelt_trace {
    smelt_ctx *ctx;
    smelt_trace_fn fn;
    void *user;
    int n_in, n_out;
    int opt_level;
    char *backend;
    int donate[64]; /* smelt_plan_opts.donate, copied */
    int n_donate;
    bool as_const; /* smelt_plan_opts.capture_as_const */
    tentry *e;
    int ne;
    smelt_plan *last;
    int last_entry;
};

int smelt_trace_new(smelt_ctx *ctx, smelt_trace_fn fn, void *user, int n_in, int n_out,
                    const smelt_plan_opts *opts, smelt_trace **out)
{
    if (!ctx)
        return SMELT_ERR_INVALID_ARG;
    if (!out || !fn)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "smelt_trace_new: %s is NULL", out ? "fn" : "out");
    *out = NULL;
    if (n_in < 0 || n_in > 64 || n_out <= 0)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG,
                          "smelt_trace_new: need 0..64 inputs and at least one output (got %d, %d)",
                          n_in, n_out);
    int opt_level = opts ? opts->opt_level : 3;
    if (opt_level < 0 || opt_level > 3)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "opt_level must be 0..3, got %d", opt_level);
    if (opts && (opts->n_donate < 0 || (opts->n_donate && !opts->donate)))
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "smelt_plan_opts: n_donate is %d and donate %s",
                          opts->n_donate, opts->donate ? "set" : "NULL");
    for (int i = 0; opts && i < opts->n_donate; i++)
        if (opts->donate[i] < 0 || opts->donate[i] >= n_in)
            return smelt__err(ctx, SMELT_ERR_INVALID_ARG,
                              "smelt_plan_opts: donate[%d] is %d, not an input of the function (it has %d)", i,
                              opts->donate[i], n_in);
    smelt_trace *t = malloc(sizeof *t);
    char *backend = opts && opts->backend ? smelt__strdup(opts->backend) : NULL;
    if (!t || (opts && opts->backend && !backend)) {
        free(t);
        free(backend);
        return smelt__err(ctx, SMELT_ERR_NOMEM, "out of memory");
    }
    *t = (smelt_trace){.ctx = ctx, .fn = fn, .user = user, .n_in = n_in, .n_out = n_out, .opt_level = opt_level,
                       .backend = backend, .as_const = opts && opts->capture_as_const};
    for (int i = 0; opts && i < opts->n_donate; i++) { /* each once: at most n_in of them */
        int j = 0;
        while (j < t->n_donate && t->donate[j] != opts->donate[i])
            j++;
        if (j == t->n_donate)
            t->donate[t->n_donate++] = opts->donate[i];
    }
    *out = t;
    return SMELT_OK;
}

void smelt_trace_free(smelt_trace *t)
{
    if (!t)
        return;
    for (int i = 0; i < t->ne; i++) {
        smelt_plan_free(t->e[i].plan);
        smelt_graph_free(t->e[i].g);
        free(t->e[i].outs);
        free(t->e[i].caps);
        free(t->e[i].capn);
    }
    free(t->e);
    free(t->backend);
    free(t);
}

static void signature(tentry *s, int n, smelt_tensor *const *in)
{
    memset(s, 0, sizeof *s);
    s->n = n;
    for (int i = 0; i < n; i++) {
        s->dt[i] = in[i]->dtype;
        s->ndim[i] = in[i]->ndim;
        for (int d = 0; d < in[i]->ndim; d++)
            if (in[i]->shape[d] == 1)
                s->ones[i] |= (uint8_t)(1u << d);
    }
}

static bool same_sig(const tentry *a, const tentry *b)
{
    return a->n == b->n && !memcmp(a->dt, b->dt, sizeof(smelt_dtype) * (size_t)a->n) &&
           !memcmp(a->ndim, b->ndim, sizeof(int) * (size_t)a->n) &&
           !memcmp(a->ones, b->ones, (size_t)a->n);
}

/* What smelt_trace_capture does while t records into entry e. */
typedef struct capstate {
    smelt_trace *t;
    tentry *e;
} capstate;

static smelt_node *capture(smelt_graph *g, const smelt_tensor *x, void *arg)
{
    capstate *c = arg;
    if (c->t->as_const)
        return smelt_constant(g, x);
    for (int i = 0; i < c->e->ncap; i++) /* the same tensor: one node */
        if (c->e->caps[i] == x)
            return c->e->capn[i];
    const smelt_tensor **caps = realloc(c->e->caps, sizeof *caps * (size_t)(c->e->ncap + 1));
    if (caps)
        c->e->caps = caps;
    smelt_node **capn = realloc(c->e->capn, sizeof *capn * (size_t)(c->e->ncap + 1));
    if (capn)
        c->e->capn = capn;
    if (!caps || !capn) {
        smelt__err(g->ctx, SMELT_ERR_NOMEM, "out of memory");
        return NULL;
    }
    char name[32];
    snprintf(name, sizeof name, "captured%d", c->e->ncap);
    smelt_node *n = smelt_input(g, name, x->dtype, x->ndim, x->shape);
    if (n) {
        c->e->caps[c->e->ncap] = x;
        c->e->capn[c->e->ncap++] = n;
    }
    return n;
}

smelt_node *smelt_trace_capture(smelt_graph *g, const smelt_tensor *t)
{
    if (!g || g->status)
        return NULL;
    if (!t) {
        smelt_constant(g, NULL); /* (its error) */
        return NULL;
    }
    return g->capture ? g->capture(g, t, g->capture_arg) : smelt_constant(g, t);
}

/* Record t's function on graph inputs like inputs and plan the graph, which
 * is kept with its outputs (smelt_trace_save); captured tensors go into e. */
static int record(smelt_trace *t, smelt_tensor *const *inputs, smelt_plan **out,
                  smelt_graph **gout, smelt_node ***outs_out, tentry *e)
{
    smelt_graph *g;
    int st = smelt_graph_new(t->ctx, &g);
    if (st)
        return st;
    smelt_node *in[64], **outs = calloc((size_t)t->n_out, sizeof *outs);
    if (!outs) {
        smelt_graph_free(g);
        return smelt__err(t->ctx, SMELT_ERR_NOMEM, "out of memory");
    }
    for (int i = 0; i < t->n_in; i++)
        in[i] = smelt_input(g, NULL, inputs[i]->dtype, inputs[i]->ndim, inputs[i]->shape);
    capstate cs = {t, e};
    g->capture = capture;
    g->capture_arg = &cs;
    st = t->fn(g, t->n_in, in, t->n_out, outs, t->user);
    g->capture = NULL; /* (the graph outlives cs) */
    g->capture_arg = NULL;
    if (g->status)
        st = smelt__err(t->ctx, st ? st : g->status, "traced function: %s", smelt__sb_str(&g->err));
    else if (st)
        smelt__err(t->ctx, st, "traced function returned %d (%s)", st, smelt_strerror(st));
    for (int i = 0; !st && i < t->n_out; i++)
        if (!outs[i])
            st = smelt__err(t->ctx, SMELT_ERR_INVALID_ARG, "traced function left output %d unset", i);
    if (!st) {
        smelt_plan_opts o = {t->opt_level, t->backend, t->donate, t->n_donate, 0};
        st = smelt_plan_new(t->ctx, g, t->n_out, outs, &o, out);
    }
    if (st) {
        free(outs);
        smelt_graph_free(g);
        return st;
    }
    *gout = g;
    *outs_out = outs;
    return SMELT_OK;
}

int smelt_trace_save(smelt_trace *t, const char *path)
{
    if (!t)
        return SMELT_ERR_INVALID_ARG;
    if (!t->last)
        return smelt__err(t->ctx, SMELT_ERR_INVALID_ARG,
                          "smelt_trace_save: the trace has not been called yet");
    return smelt_graph_save(t->e[t->last_entry].g, t->n_out, t->e[t->last_entry].outs, path);
}

int smelt_trace_call(smelt_trace *t, int n_in, smelt_tensor *const *inputs, int n_out,
                     smelt_tensor **outputs)
{
    if (!t)
        return SMELT_ERR_INVALID_ARG;
    if (n_in != t->n_in || n_out != t->n_out || (n_in && !inputs) || !outputs)
        return smelt__err(t->ctx, SMELT_ERR_INVALID_ARG,
                          "trace takes %d inputs and %d outputs, got %d and %d", t->n_in, t->n_out,
                          n_in, n_out);
    for (int i = 0; i < n_in; i++)
        if (!inputs[i])
            return smelt__err(t->ctx, SMELT_ERR_INVALID_ARG, "input %d is NULL", i);
    tentry s;
    signature(&s, n_in, inputs);
    int at = 0;
    while (at < t->ne && !same_sig(&t->e[at], &s))
        at++;
    if (at == t->ne) {
        int st = record(t, inputs, &s.plan, &s.g, &s.outs, &s);
        if (st) {
            free(s.caps), free(s.capn);
            return st;
        }
        tentry *e = realloc(t->e, sizeof *e * (size_t)(t->ne + 1));
        if (!e) {
            smelt_plan_free(s.plan);
            smelt_graph_free(s.g);
            free(s.outs), free(s.caps), free(s.capn);
            return smelt__err(t->ctx, SMELT_ERR_NOMEM, "out of memory");
        }
        t->e = e;
        t->e[t->ne++] = s;
    }
    t->last = t->e[at].plan;
    t->last_entry = at;
    const tentry *e = &t->e[at];
    if (!e->ncap)
        return smelt_plan_run(t->last, n_in, inputs, n_out, outputs);
    smelt_tensor **all = malloc(sizeof *all * (size_t)(n_in + e->ncap)); /* the inputs, then the captured */
    if (!all)
        return smelt__err(t->ctx, SMELT_ERR_NOMEM, "out of memory");
    memcpy(all, inputs, sizeof *all * (size_t)n_in);
    for (int i = 0; i < e->ncap; i++)
        all[n_in + i] = (smelt_tensor *)e->caps[i];
    int st = smelt_plan_run(t->last, n_in + e->ncap, all, n_out, outputs);
    free(all);
    return st;
}

smelt_plan *smelt_trace_last_plan(smelt_trace *t) { return t ? t->last : NULL; }
int smelt_trace_num_plans(const smelt_trace *t) { return t ? t->ne : 0; }
