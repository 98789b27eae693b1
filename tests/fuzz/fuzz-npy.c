/* smelt_npy_read on arbitrary bytes: an error with a message, or a tensor
 * whose every element can be read. */
#include "fuzz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    smelt_ctx *ctx = fuzz_ctx();
    smelt_tensor *t = NULL;
    int st = smelt_npy_read(ctx, data, size, &t);
    fuzz_check_error(ctx, st, "smelt_npy_read");
    if (st == SMELT_OK) {
        double sum = 0;
        for (int64_t i = 0, n = smelt_tensor_numel(t); i < n; i++)
            sum += smelt_tensor_get(t, i);
        (void)sum;
        smelt_tensor_free(t);
    } else if (t) {
        abort(); /* a failed call leaves *out NULL */
    }
    return 0;
}
