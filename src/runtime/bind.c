/* Running a plan on new caller-owned buffers without new tensors: a
 * tensor made by smelt_tensor_wrap is pointed at other memory of the same
 * layout (smelt_tensor_rebind), and smelt_plan_run_rebind does that for
 * every operand and runs, in one call, which is what a language binding
 * (python/smelt) calls on each call of a compiled function. */
#include "runtime.h"
#include "plan.h"

/* Whether t can be pointed at data (SMELT_OK) or why not. */
static int rebind_check(const smelt_tensor *t, const void *data)
{
    if (!t)
        return SMELT_ERR_INVALID_ARG;
    if (!t->buf || t->buf->mem || t->buf->dev)
        return smelt__err(t->ctx, SMELT_ERR_INVALID_ARG,
                          "smelt_tensor_rebind: the tensor %s; only a tensor made by smelt_tensor_wrap "
                          "(caller-owned host memory) can be pointed at other memory",
                          t->buf && t->buf->dev ? "is a device tensor" : "owns its memory");
    if (!data && smelt__numel(t->ndim, t->shape) > 0)
        return smelt__err(t->ctx, SMELT_ERR_INVALID_ARG, "smelt_tensor_rebind: data is NULL");
    size_t esz = smelt__dtypes[t->dtype].size;
    if ((uintptr_t)data % esz)
        return smelt__err(t->ctx, SMELT_ERR_INVALID_ARG,
                          "smelt_tensor_rebind: data %p is not aligned to its %zu-byte elements", data, esz);
    return SMELT_OK;
}

int smelt_tensor_rebind(smelt_tensor *t, void *data)
{
    int st = rebind_check(t, data);
    if (!st)
        t->data = data;
    return st;
}

int smelt_plan_run(smelt_plan *p, int n_in, smelt_tensor *const *inputs, int n_out, smelt_tensor **outputs)
{
    int64_t a0 = smelt__allocs(); /* counted on this thread (ir.h) */
    int st = smelt__plan_run(p, n_in, inputs, n_out, outputs);
    if (p)
        p->stats.run_allocs = smelt__allocs() - a0;
    return st;
}

int smelt_plan_run_rebind(smelt_plan *p, int n_in, smelt_tensor *const *inputs, int n_out,
                          smelt_tensor *const *outputs, void *const *data)
{
    if (!p)
        return SMELT_ERR_INVALID_ARG;
    if (n_in < 0 || n_out < 0 || (n_in && !inputs) || (n_out && !outputs) || !data)
        return smelt__err(p->ctx, SMELT_ERR_INVALID_ARG,
                          "smelt_plan_run_rebind: inputs, outputs or data is NULL");
    smelt_tensor *outs[SMELT_MAX_KERNEL_OPERANDS * 4];
    if (n_out > (int)(sizeof outs / sizeof *outs))
        return smelt__err(p->ctx, SMELT_ERR_INVALID_ARG,
                          "smelt_plan_run_rebind: %d outputs, at most %d", n_out,
                          (int)(sizeof outs / sizeof *outs));
    /* every tensor checked before any is changed: an error leaves them as they were */
    for (int i = 0; i < n_in + n_out; i++) {
        smelt_tensor *t = i < n_in ? inputs[i] : outputs[i - n_in];
        if (!t)
            return smelt__err(p->ctx, SMELT_ERR_INVALID_ARG, "smelt_plan_run_rebind: %s %d is NULL",
                              i < n_in ? "input" : "output", i < n_in ? i : i - n_in);
        int st = data[i] ? rebind_check(t, data[i]) : SMELT_OK;
        if (st)
            return st;
        if (i >= n_in)
            outs[i - n_in] = t;
    }
    for (int i = 0; i < n_in + n_out; i++)
        if (data[i])
            (i < n_in ? inputs[i] : outputs[i - n_in])->data = data[i];
    return smelt_plan_run(p, n_in, inputs, n_out, outs);
}
