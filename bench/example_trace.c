/* A traced function with opt_level 3: the README's example, built as
 * build/bench/smelt-example.  swish(x) * y + 1 on 1M floats. */
#include <math.h>
#include <smelt.h>
#include <stdio.h>

static int layer(smelt_graph *g, int n_in, smelt_node *const *in, int n_out, smelt_node **out,
                 void *user)
{
    (void)n_in, (void)n_out, (void)user;
    smelt_node *x = in[0], *y = in[1];
    smelt_node *sw = smelt_div(g, x, smelt_add(g, smelt_scalar(g, 1.0),
                                               smelt_unary(g, SMELT_OP_EXP, smelt_unary(g, SMELT_OP_NEG, x))));
    out[0] = smelt_add(g, smelt_mul(g, sw, y), smelt_scalar(g, 1.0));
    return SMELT_OK;
}

int main(void)
{
    smelt_ctx *ctx;
    smelt_trace *tr;
    smelt_plan_opts opts;
    smelt_plan_opts_init(&opts); /* opt_level 3, backend from SMELT_JIT_BACKEND */
    if (smelt_ctx_new(&ctx) || smelt_trace_new(ctx, layer, NULL, 2, 1, &opts, &tr))
        return 1;

    int64_t shape[1] = {1 << 20};
    smelt_tensor *x, *y, *out = NULL;
    smelt_tensor_new(ctx, SMELT_F32, 1, shape, &x);
    smelt_tensor_new(ctx, SMELT_F32, 1, shape, &y);
    float *xd = smelt_tensor_data(x), *yd = smelt_tensor_data(y);
    for (int64_t i = 0; i < shape[0]; i++) {
        xd[i] = (float)sin((double)i);
        yd[i] = (float)cos((double)i);
    }
    smelt_tensor *in[2] = {x, y};
    for (int call = 0; call < 3; call++) { /* the first call records and compiles */
        int st = smelt_trace_call(tr, 2, in, 1, &out);
        if (st) {
            fprintf(stderr, "error: %s\n", smelt_errmsg(ctx));
            return 1;
        }
    }
    smelt_plan_stats s;
    smelt_plan_get_stats(smelt_trace_last_plan(tr), &s);
    printf("out[1] = %g; %d kernel(s) for %d operators, compiled in %.3f ms\n",
           smelt_tensor_get(out, 1), s.kernels, s.ops, s.compile_ms);
    printf("%s", smelt_plan_describe(smelt_trace_last_plan(tr)));
    smelt_tensor_free(out);
    smelt_tensor_free(x);
    smelt_tensor_free(y);
    smelt_trace_free(tr);
    smelt_ctx_free(ctx);
    return 0;
}
