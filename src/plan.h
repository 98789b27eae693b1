/* Plans: shared by plan.c (building) and exec.c (running). */
#ifndef SMELT_PLAN_H
#define SMELT_PLAN_H
#include "internal.h"

typedef struct smelt__variant {
    int rank;
    uint8_t mode[SMELT_MAX_KERNEL_OPERANDS];
    smelt__kernel *k;
} smelt__variant;

typedef struct smelt__pkernel {
    smelt__cluster cl;  /* prog values it reads and writes */
    smelt__kdesc desc;  /* operators; layout fields per variant */
    smelt__variant *var;
    int nvar;
    bool fused;         /* more than one operator */
} smelt__pkernel;

typedef struct smelt__rshape {
    int ndim;
    int64_t shape[SMELT_MAX_DIMS];
} smelt__rshape;

struct smelt_plan {
    smelt_ctx *ctx;
    smelt__backend *be;
    int opt_level;
    smelt__prog prog;
    smelt__pkernel *kern;
    int nkern, kcap;
    smelt_plan_stats stats;
    smelt__sb log;  /* warnings */
    smelt__sb desc; /* smelt_plan_describe */
    int *out_slot;  /* prog value -> output index, or -1 */
    /* run state */
    smelt__rshape *rs; /* runtime shape of each value */
    void **buf;        /* intermediate storage per value */
    size_t *bufsize;
};

/* Compile the variant of kernel ki for a layout; on failure of a fused
 * kernel, replace it by its unfused kernels (logged) and report *split. */
int smelt__plan_variant(smelt_plan *p, int ki, int rank, const uint8_t *mode,
                        smelt__kernel **out, bool *split);
/* The layout a kernel has when every operand is contiguous, given the
 * example shapes of the graph. */
void smelt__plan_default_layout(const smelt_plan *p, int ki, int *rank, uint8_t *mode);
/* Drop size-1 dimensions of the iteration shape S (rank r), merge adjacent
 * dimensions every operand walks contiguously, and classify each operand's
 * innermost stride.  S and st are rewritten; returns the new rank (>= 1). */
int smelt__merge_layout(int r, int64_t *S, int n, int64_t (*st)[SMELT_MAX_DIMS], uint8_t *mode);
#endif
