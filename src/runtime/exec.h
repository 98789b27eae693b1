/* The executor's parts shared across its files: exec.c (the run: inputs,
 * shapes, memory, kernels in order), matmul.c (matrix products), pieces.c
 * (concats and pads). */
#ifndef SMELT_EXEC_H
#define SMELT_EXEC_H
#include "plan.h"

/* one run's state (smelt__plan_run) */
typedef struct runstate {
    smelt_tensor *const *inputs;
    smelt_tensor **outputs;
    int64_t cstrides[SMELT_MAX_DIMS]; /* scratch */
    int stream; /* SMELT_STREAM_STORES: -1 auto, 0 never, 1 every flat kernel */
} runstate;

/* The view of value v at this run (its buffer, the caller's tensor, a
 * view's strides); a constant's (r: its run-time shape; zeros: scratch for
 * its strides) */
int smelt__value_view(smelt_plan *p, runstate *rs, int v, smelt__view *out, int64_t *scratch);
int smelt__const_view(smelt_plan *p, int v, const smelt__rshape *r, smelt__view *out, int64_t *zeros);
/* the address of constant v's one element (bits: its value) */
int smelt__value_cell(smelt_plan *p, int v, const void *bits, char **cell);
/* kernel ki over the box of its iteration space (run_kernel's pieces);
 * the same for a reduction's kernel */
int smelt__run_box(smelt_plan *p, runstate *rs, int ki, smelt__view *w, const int64_t *box, bool *split);
int smelt__reduce_box(smelt_plan *p, runstate *rs, int ki, smelt__view *w, const int64_t *box, bool *split);
/* kernel ki, a matmul (src/runtime/matmul.c) */
int smelt__run_matmul(smelt_plan *p, runstate *rs, int ki);
/* concats and pads (src/runtime/pieces.c): the view of a value of pieces
 * (a constant pad's); kernel ki once per region of pieces */
int smelt__pieces_view(smelt_plan *p, int v, smelt__view *out, int64_t *zeros);
int smelt__run_pieces(smelt_plan *p, runstate *rs, int ki, smelt__view *w, bool *split);
#endif
