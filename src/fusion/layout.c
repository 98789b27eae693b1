/* Layout merging: the iteration shape and operand strides of one launch
 * reduced to the fewest dimensions, and each operand's innermost mode (the
 * layout variant a kernel is compiled for). */
#include "fusion.h"

int smelt__merge_layout(int r, int64_t *S, int n, int64_t (*st)[SMELT_MAX_DIMS], uint8_t *mode)
{
    int64_t nS[SMELT_MAX_DIMS], nst[SMELT_MAX_KERNEL_OPERANDS][SMELT_MAX_DIMS];
    int nr = 0; /* built innermost first */
    for (int d = r - 1; d >= 0; d--) {
        if (S[d] == 1)
            continue;
        bool merge = nr > 0;
        for (int o = 0; o < n && merge; o++)
            merge = st[o][d] == nst[o][nr - 1] * nS[nr - 1];
        if (merge) {
            nS[nr - 1] *= S[d];
            continue;
        }
        nS[nr] = S[d];
        for (int o = 0; o < n; o++)
            nst[o][nr] = st[o][d];
        nr++;
    }
    if (nr == 0) {
        nS[0] = 1;
        for (int o = 0; o < n; o++)
            nst[o][0] = 1;
        nr = 1;
    }
    for (int d = 0; d < nr; d++) {
        S[d] = nS[nr - 1 - d];
        for (int o = 0; o < n; o++)
            st[o][d] = nst[o][nr - 1 - d];
    }
    for (int o = 0; o < n; o++) {
        int64_t s = st[o][nr - 1];
        mode[o] = s == 1 ? SMELT_MODE_CONTIG : s == 0 ? SMELT_MODE_BCAST : SMELT_MODE_STRIDED;
    }
    return nr;
}

int smelt__merge_reduce_layout(int r, int64_t *S, unsigned mask, int n, int64_t (*st)[SMELT_MAX_DIMS],
                               uint8_t *mode, uint8_t *rmask)
{
    int64_t nS[SMELT_MAX_DIMS + 1], nst[SMELT_MAX_KERNEL_OPERANDS][SMELT_MAX_DIMS + 1];
    bool red[SMELT_MAX_DIMS + 1], any_red = false;
    int nr = 0; /* built innermost first */
    for (int d = r - 1; d >= 0; d--) {
        bool rd = mask >> d & 1u;
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
    if (!any_red) { /* one element a result: a reduced dimension of size 1, outermost */
        nS[nr] = 1;
        red[nr] = true;
        for (int o = 0; o < n; o++)
            nst[o][nr] = 0;
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
