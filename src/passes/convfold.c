/* A per-channel scale and shift after a convolution with constant weights,
 * folded into the weights (opt_level >= 1): batch-norm in inference,
 * (y - mean) / sqrt(var + eps) * gamma + beta, and a conv's bias are such
 * a chain once constant folding has made tensors of their parameters.
 *
 *   conv_taps(x, W) [views] op1 k1 op2 k2 ... opn kn
 *
 * where each op is +, -, * or / with the chain's value on one side (not the
 * divisor) and a constant on the other that is the same along every axis
 * but the channel axis (a scalar constant, or a tensor constant of shape
 * [O, 1, ...] or [1, O, 1, ...] broadcast), is y = a[c] * conv + b[c] per
 * output channel c.  It becomes
 *
 *   conv_taps(x, W') [views] + b'      W'[c, ...] = W[c, ...] * a[c], b' = b
 *
 * with a and b computed in double from the constants' values and W', b'
 * rounded once to the dtype.  The views between the conv and the chain may
 * only cut or reshape axes after the channel axis (the output's padding
 * columns, a 1-D conv's squeezed axis).  Only where the chain reads the
 * conv alone: the conv, its views and every operator of the chain but the
 * last have one reader and are no output; W (or the reshapes over it that
 * the conv reads) has the conv as its only reader.  A chain of adds alone,
 * or of one operator, is left as it is; so is one whose a or b is not
 * finite (a zero variance with zero eps: the kernel's inf and NaN stay).
 *
 * The result is rounded differently from the unfolded chain (a product
 * with W * a instead of a product with W, then the chain): docs/numerics.md.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "passes.h"

/* the instruction that reads v (v has one reader), or -1 */
static int reader(const smelt__prog *p, int v)
{
    for (int i = v + 1; i < p->n; i++)
        for (int j = 0; j < p->v[i].nin; j++)
            if (p->v[i].in[j] == v)
                return i;
    return -1;
}

static bool only_reader(const smelt__inst *x)
{
    return x->uses == 1 && !x->is_output;
}

static bool same_shape(const smelt__inst *a, const smelt__inst *b)
{
    return a->ndim == b->ndim && !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim);
}

/* a view of the conv's value (channels on axis 1) that keeps the channel
 * axis and each (batch, channel) block whole */
static bool channel_view(const smelt__prog *p, const smelt__inst *x, int64_t O)
{
    const smelt__inst *a = &p->v[x->in[0]];
    if (x->dtype != a->dtype || x->ndim < 2 || x->shape[1] != O || x->shape[0] != a->shape[0])
        return false;
    if (x->op == SMELT_OP_SLICE)
        return x->vp[0] >= 2;
    return x->op == SMELT_OP_RESHAPE && smelt__reshape_ones(x->ndim, x->shape, a->ndim, a->shape);
}

/* The constant k's value for each channel into kc[O]: false when k is not
 * a constant of the chain's dtype that is the same along every axis of a
 * rank-r value but axis 1. */
static bool per_channel(const smelt__prog *p, const smelt__inst *k, smelt_dtype dt, int r, int64_t O, double *kc)
{
    if (k->dtype != dt || k->ndim > r)
        return false;
    if (k->op == SMELT_OP_CONST) {
        for (int64_t c = 0; c < O; c++)
            kc[c] = k->fval;
        return true;
    }
    if (k->op != SMELT_OP_TENSOR)
        return false;
    bool along = false;
    for (int j = 0; j < k->ndim; j++) {
        int d = r - k->ndim + j;
        if (k->shape[j] != 1 && !(d == 1 && k->shape[j] == O))
            return false;
        along = along || (d == 1 && k->shape[j] == O && O > 1);
    }
    const char *data = p->blobs[k->ival]->data;
    size_t es = smelt__dtypes[dt].size;
    for (int64_t c = 0; c < O; c++)
        kc[c] = smelt__elem_load(dt, data + (along ? (size_t)c * es : 0));
    return true;
}

/* A new blob of n elements of dt (its index in p->blobs), or -1. */
static int new_blob(smelt__prog *p, smelt_dtype dt, int64_t n)
{
    size_t bytes = (size_t)n * smelt__dtypes[dt].size;
    smelt__blob *b = malloc(sizeof *b + bytes + 1);
    smelt__blob **bl = realloc(p->blobs, sizeof *bl * (size_t)(p->nblobs + 1));
    if (bl)
        p->blobs = bl;
    if (!b || !bl) {
        free(b);
        return -1;
    }
    b->refs = 1;
    b->bytes = bytes;
    b->hash = 0;
    p->blobs[p->nblobs] = b;
    return p->nblobs++;
}

#define CHAIN_MAX 16

/* The fold at conv_taps c: whether it was made. */
static bool fold_conv(smelt__prog *p, int c)
{
    const smelt__inst *cv = &p->v[c];
    smelt_dtype dt = cv->dtype;
    int64_t O = cv->shape[1];
    if (!only_reader(cv) || !smelt__is_float(dt) || O < 1)
        return false;
    int w = cv->in[1]; /* the weights: a tensor constant, or reshapes of one, read by the conv alone */
    while (p->v[w].op == SMELT_OP_RESHAPE && only_reader(&p->v[w]))
        w = p->v[w].in[0];
    const smelt__inst *wt = &p->v[w];
    int64_t nw = smelt__numel(wt->ndim, wt->shape);
    if (wt->op != SMELT_OP_TENSOR || !only_reader(wt) || wt->dtype != dt || wt->ndim < 1 || wt->shape[0] != O)
        return false;
    int v = c; /* the value the chain reads: the conv or views of it */
    for (int r; only_reader(&p->v[v]) && (r = reader(p, v)) >= 0 && smelt__is_view(p->v[r].op);) {
        if (!channel_view(p, &p->v[r], O))
            return false;
        v = r;
    }
    double *a = malloc(sizeof(double) * (size_t)O * 3), *b = a + O, *kc = b + O;
    if (!a)
        return false;
    for (int64_t ch = 0; ch < O; ch++)
        a[ch] = 1, b[ch] = 0;
    int chain[CHAIN_MAX], n = 0;
    bool scaled = false;
    for (int cur = v, r; n < CHAIN_MAX && only_reader(&p->v[cur]) && (r = reader(p, cur)) >= 0; cur = r) {
        const smelt__inst *x = &p->v[r];
        smelt_op op = x->op;
        if (x->nin != 2 || x->dtype != dt || !same_shape(x, &p->v[v]) || x->in[0] == x->in[1] ||
            (op != SMELT_OP_ADD && op != SMELT_OP_SUB && op != SMELT_OP_MUL && op != SMELT_OP_DIV))
            break;
        int side = x->in[0] == cur ? 0 : 1; /* the chain's operand */
        if ((op == SMELT_OP_DIV && side == 1) || !per_channel(p, &p->v[x->in[1 - side]], dt, x->ndim, O, kc))
            break;
        for (int64_t ch = 0; ch < O; ch++) {
            double k = kc[ch];
            if (op == SMELT_OP_ADD)
                b[ch] += k;
            else if (op == SMELT_OP_SUB && side == 0)
                b[ch] -= k;
            else if (op == SMELT_OP_SUB)
                a[ch] = -a[ch], b[ch] = k - b[ch];
            else if (op == SMELT_OP_MUL)
                a[ch] *= k, b[ch] *= k;
            else
                a[ch] /= k, b[ch] /= k;
        }
        scaled = scaled || op == SMELT_OP_MUL || op == SMELT_OP_DIV || (op == SMELT_OP_SUB && side == 1);
        chain[n++] = r;
    }
    bool ok = n >= 2 && scaled;
    for (int64_t ch = 0; ok && ch < O; ch++)
        ok = isfinite(a[ch]) && isfinite(b[ch]);
    int wb = ok ? new_blob(p, dt, nw) : -1, bb = wb >= 0 ? new_blob(p, dt, O) : -1;
    if (bb < 0) {
        free(a);
        return false;
    }
    size_t es = smelt__dtypes[dt].size;
    const char *wsrc = p->blobs[p->v[w].ival]->data;
    char *wdst = p->blobs[wb]->data, *bdst = p->blobs[bb]->data;
    int64_t per = nw / O;
    for (int64_t i = 0; ok && i < nw; i++) {
        double x = smelt__elem_load(dt, wsrc + (size_t)i * es), y = smelt__dtype_round_result(dt, x * a[i / per]);
        ok = isfinite(y) || !isfinite(x); /* (a product that overflows: not folded) */
        smelt__elem_store(dt, wdst + (size_t)i * es, y);
    }
    for (int64_t ch = 0; ch < O; ch++)
        smelt__elem_store(dt, bdst + (size_t)ch * es, smelt__dtype_round_result(dt, b[ch]));
    free(a);
    if (!ok)
        return false; /* (the new blobs stay unread until the program is freed) */
    p->v[w].ival = wb;
    /* the chain's first operator becomes b' [O, 1, ...] (rank one less than
     * the chain's, channels on its axis 1), its last the sum */
    smelt__inst *k = &p->v[chain[0]], *last = &p->v[chain[n - 1]];
    int rank = p->v[v].ndim;
    k->op = SMELT_OP_TENSOR;
    k->nin = 0;
    k->ival = bb;
    k->fval = 0;
    k->ndim = rank - 1;
    for (int d = 0; d < rank - 1; d++)
        k->shape[d] = d == 0 ? O : 1;
    last->op = SMELT_OP_ADD;
    last->nin = 2;
    last->in[0] = v;
    last->in[1] = chain[0];
    return true;
}

int smelt__pass_conv_affine(smelt__prog *p)
{
    int folded = 0;
    smelt__prog_uses(p);
    for (int i = 0; i < p->n; i++)
        if (p->v[i].op == SMELT_OP_CONV_TAPS && fold_conv(p, i)) {
            folded++;
            smelt__prog_uses(p);
        }
    return folded;
}
