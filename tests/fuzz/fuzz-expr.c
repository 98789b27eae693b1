/* smelt_eval of arbitrary expression text over a few small tensors of
 * different dtypes and broadcastable shapes. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    smelt_ctx *ctx = fuzz_ctx();
    static smelt_tensor *t[4];
    static const char *const names[4] = {"a", "b", "c", "d"};
    if (!t[0]) {
        const int64_t sa[2] = {3, 4}, sb[1] = {4}, sc[2] = {3, 1};
        if (smelt_tensor_new(ctx, SMELT_F32, 2, sa, &t[0]) || smelt_tensor_new(ctx, SMELT_F64, 1, sb, &t[1]) ||
            smelt_tensor_new(ctx, SMELT_I32, 2, sc, &t[2]) || smelt_tensor_new(ctx, SMELT_BOOL, 0, NULL, &t[3]))
            abort();
        for (int k = 0; k < 4; k++)
            fuzz_fill(t[k]);
    }
    char *expr = fuzz_cstr(data, size);
    if (!expr)
        return 0;
    smelt_tensor *out = NULL;
    int st = smelt_eval(ctx, expr, names, t, 4, &out);
    fuzz_check_error(ctx, st, "smelt_eval");
    free(expr);
    smelt_tensor_free(out);
    return 0;
}
