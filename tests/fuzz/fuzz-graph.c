/* smelt_graph_from_text on arbitrary text, then a plan (TCC) of what it
 * read, run on small inputs, and the text written back.  fuzz_fill's
 * integers (-2 .. 4) are out of range for a gather along a short axis, and
 * the corpus's take lines read constants such as INT64_MIN: the run must
 * say SMELT_ERR_INDEX, never read outside the array. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    smelt_ctx *ctx = fuzz_ctx();
    char *text = fuzz_cstr(data, size);
    if (!text)
        return 0;
    smelt_graph *g = NULL;
    smelt_node **outs = NULL;
    int n_out = 0;
    int st = smelt_graph_from_text(ctx, text, &g, &n_out, &outs);
    free(text);
    fuzz_check_error(ctx, st, "smelt_graph_from_text");
    if (st)
        return 0;
    char *back = NULL;
    st = smelt_graph_to_text(g, n_out, outs, &back);
    fuzz_check_error(ctx, st, "smelt_graph_to_text");
    smelt_free(back);
    smelt_plan *p = NULL;
    st = smelt_plan_new(ctx, g, n_out, outs, NULL, &p);
    fuzz_check_error(ctx, st, "smelt_plan_new");
    int n_in = smelt_graph_num_inputs(g);
    bool small = st == SMELT_OK;
    for (int i = 0; i < n_in && small; i++) {
        const smelt_node *in = smelt_graph_input(g, i);
        int64_t n = 1;
        for (int d = 0; d < smelt_node_ndim(in); d++)
            n *= smelt_node_shape(in)[d];
        small = n <= FUZZ_MAX_RUN_ELEMS;
    }
    if (small) {
        smelt_tensor **in = calloc((size_t)n_in + 1, sizeof *in), **res = calloc((size_t)n_out + 1, sizeof *res);
        for (int i = 0; in && res && i < n_in && st == SMELT_OK; i++) {
            const smelt_node *x = smelt_graph_input(g, i);
            st = smelt_tensor_new(ctx, smelt_node_dtype(x), smelt_node_ndim(x), smelt_node_shape(x), &in[i]);
            if (st == SMELT_OK)
                fuzz_fill(in[i]);
        }
        if (in && res && st == SMELT_OK) {
            st = smelt_plan_run(p, n_in, in, n_out, res);
            fuzz_check_index(ctx, st, "smelt_plan_run"); /* (a gather's bad index: an error, no read) */
        }
        for (int i = 0; in && i < n_in; i++)
            smelt_tensor_free(in[i]);
        for (int i = 0; res && i < n_out; i++)
            smelt_tensor_free(res[i]);
        free(in), free(res);
    }
    smelt_plan_free(p);
    smelt_free(outs);
    smelt_graph_free(g);
    return 0;
}
