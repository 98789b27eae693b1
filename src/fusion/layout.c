/* Layout merging: the iteration shape and operand strides of one launch
 * reduced to the fewest dimensions, and each operand's innermost mode (the
 * layout variant a kernel is compiled for). */
#include "fusion.h"

/* Both merges: dimensions of size 1 dropped, and a dimension merged into
 * the next inner one when every operand walks the two contiguously (for a
 * reduction, when both are reduced or both kept: mask, bit d for axis d);
 * at least one dimension stays, and a reduction keeps a reduced one (of
 * size 1, when every reduced axis had size 1: outermost, stride 0, or the
 * only dimension, stride 1). */
static int merge(int r, int64_t *S, bool reduce, unsigned mask, int n, int64_t (*st)[SMELT_MAX_DIMS],
                 uint8_t *mode, uint8_t *rmask)
{
    int64_t nS[SMELT_MAX_DIMS + 1], nst[SMELT_MAX_KERNEL_OPERANDS][SMELT_MAX_DIMS + 1];
    bool red[SMELT_MAX_DIMS + 1], any_red = false;
    int nr = 0; /* built innermost first */
    for (int d = r - 1; d >= 0; d--) {
        bool rd = reduce && (mask >> d & 1u);
        if (S[d] == 1)
            continue;
        bool merge = nr > 0 && red[nr - 1] == rd;
        for (int o = 0; o < n && merge; o++)
            merge = st[o][d] == nst[o][nr - 1] * nS[nr - 1];
        any_red = any_red || rd;
        if (merge) {
            nS[nr - 1] *= S[d];
            continue;
        }
        nS[nr] = S[d];
        red[nr] = rd;
        for (int o = 0; o < n; o++)
            nst[o][nr] = st[o][d];
        nr++;
    }
    if (reduce ? !any_red : nr == 0) {
        /* stride 0 where kept dimensions remain (outermost: no operand's
         * mode changes), else 1: the only dimension, whose stride gives
         * every operand its mode, and an output of mode BCAST would be
         * written to a copy (a producer's full-size output of one
         * element, fused into a reduction of one element, was never
         * stored: CC, 2026-11-29) */
        nS[nr] = 1;
        red[nr] = reduce;
        for (int o = 0; o < n; o++)
            nst[o][nr] = !reduce || nr == 0;
        nr++;
    }
    *rmask = 0;
    for (int d = 0; d < nr; d++) {
        S[d] = nS[nr - 1 - d];
        if (red[nr - 1 - d])
            *rmask |= (uint8_t)(1u << d);
        for (int o = 0; o < n; o++)
            st[o][d] = nst[o][nr - 1 - d];
    }
    for (int o = 0; o < n; o++) {
        int64_t s = st[o][nr - 1];
        mode[o] = s == 1 ? SMELT_MODE_CONTIG : s == 0 ? SMELT_MODE_BCAST : SMELT_MODE_STRIDED;
    }
    return nr;
}

int smelt__merge_layout(int r, int64_t *S, int n, int64_t (*st)[SMELT_MAX_DIMS], uint8_t *mode)
{
    uint8_t none;
    return merge(r, S, false, 0, n, st, mode, &none);
}

int smelt__merge_reduce_layout(int r, int64_t *S, unsigned mask, int n, int64_t (*st)[SMELT_MAX_DIMS],
                               uint8_t *mode, uint8_t *rmask)
{
    return merge(r, S, true, mask, n, st, mode, rmask);
}
