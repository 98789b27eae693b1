/* smelt_eval of arbitrary expression text over a few small tensors of
 * different dtypes and broadcastable shapes, and e, indices for take and
 * take_along_axis that are in range and out of it (INT64_MAX, INT64_MIN):
 * an index out of range must come back as SMELT_ERR_INDEX from the run. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    smelt_ctx *ctx = fuzz_ctx();
    static smelt_tensor *t[5];
    static const char *const names[5] = {"a", "b", "c", "d", "e"};
    if (!t[0]) {
        const int64_t sa[2] = {3, 4}, sb[1] = {4}, sc[2] = {3, 1}, se[1] = {5};
        if (smelt_tensor_new(ctx, SMELT_F32, 2, sa, &t[0]) || smelt_tensor_new(ctx, SMELT_F64, 1, sb, &t[1]) ||
            smelt_tensor_new(ctx, SMELT_I32, 2, sc, &t[2]) || smelt_tensor_new(ctx, SMELT_BOOL, 0, NULL, &t[3]) ||
            smelt_tensor_new(ctx, SMELT_I64, 1, se, &t[4]))
            abort();
        for (int k = 0; k < 4; k++)
            fuzz_fill(t[k]);
        const int64_t ev[5] = {1, -4, 3, INT64_MAX, INT64_MIN};
        memcpy(smelt_tensor_data(t[4]), ev, sizeof ev);
    }
    char *expr = fuzz_cstr(data, size);
    if (!expr)
        return 0;
    smelt_tensor *out = NULL;
    int st = smelt_eval(ctx, expr, names, t, 5, &out);
    fuzz_check_index(ctx, st, "smelt_eval");
    free(expr);
    smelt_tensor_free(out);
    return 0;
}
