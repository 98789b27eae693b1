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
 * view's strides; a constant's one element, strides 0); scratch: room for
 * SMELT_MAX_DIMS strides */
int smelt__value_view(smelt_plan *p, runstate *rs, int v, smelt__view *out, int64_t *scratch);
/* the address of constant v's one element (bits: its value) */
int smelt__value_cell(smelt_plan *p, int v, const void *bits, char **cell);
/* kernel ki over the box of its iteration space (run_kernel's pieces);
 * the same for a reduction's kernel */
int smelt__run_box(smelt_plan *p, runstate *rs, int ki, smelt__view *w, const int64_t *box, bool *split);
int smelt__reduce_box(smelt_plan *p, runstate *rs, int ki, smelt__view *w, const int64_t *box, bool *split);
/* Reduction kernel ki's run-time shapes checked and its operands' views
 * (w; their strides' scratch); *none: nothing to compute; *pieces: an
 * operand is a concat's or a pad's pieces */
int smelt__reduce_views(smelt_plan *p, runstate *rs, int ki, smelt__view *w, int64_t (*scratch)[SMELT_MAX_DIMS],
                        bool *none, bool *pieces);
/* A row program's one call over every row of a box of its iteration
 * space (exec.c), for a batch chain (chain.c): all its arguments but the
 * operands' addresses (ptrs[0 .. n - 1]) and its row cache (ptrs[n], slot
 * bytes) */
typedef struct smelt__rowcall {
    smelt__kfn fn;
    int n;                  /* operands: inputs, then outputs */
    int64_t rows;           /* rows of the box */
    size_t slot;            /* its row cache's bytes */
    int64_t shape[SMELT_MAX_DIMS + 1];
    int64_t strides[SMELT_MAX_KERNEL_OPERANDS * SMELT_MAX_DIMS];
} smelt__rowcall;
int smelt__kernel_scratch(smelt_plan *p, smelt__pkernel *k, size_t bytes);
int smelt__rows_call(smelt_plan *p, int ki, smelt__view *w, const int64_t *box, smelt__rowcall *rc, bool *split);
/* Kernels ki, ki + 1, ki + 2 as a batch chain when they form one (chain.c):
 * *ran, whether they ran */
int smelt__run_chain(smelt_plan *p, runstate *rs, int ki, bool *ran, bool *split);
/* kernel ki, a matmul (src/runtime/matmul.c) */
int smelt__run_matmul(smelt_plan *p, runstate *rs, int ki);
/* A matmul's work: the matrices of the batch, each cut into square tiles
 * (the last ones shorter) of the largest side from MM_SIDE_MAX down to
 * MM_SIDE_MIN that makes MM_TASKS tiles in all, one BLAS call each,
 * single-threaded BLAS on smelt's threads.  The tiles are a function of
 * the shape only, so the bits do not depend on the thread count
 * (OpenBLAS's own threading picks other kernels by thread count, with
 * other sums; with the Haswell kernels even the rows of a call change the
 * bits).  Each call packs its rows of A and its columns of B again:
 * square tiles pack the least for their number, and large ones let
 * OpenBLAS's blocking work (the mlp's products on 2 cores, SkylakeX
 * kernels: tiles of 256 rows x all columns 91.8 ms, 1024 x all 83.7,
 * these 85.1; bench/RESULTS.md). */
typedef struct smelt__mmjob {
    smelt_ctx *ctx;
    smelt__view w[3];            /* A, B, C */
    int64_t sc[3][SMELT_MAX_DIMS]; /* (their strides' scratch) */
    int nb;                      /* batch dimensions of C */
    const int64_t *cshape;
    int64_t M, N, K, blocks;     /* tiles per matrix */
    int64_t tm, tn, ncb;         /* a tile's rows and columns; column tiles per matrix */
    int64_t mats, tasks;         /* matrices; tiles in all (0: nothing to do) */
    smelt_dtype dt;
    int st;                      /* the first error (SMELT_OK) */
    pthread_mutex_t mu;
} smelt__mmjob;
/* matmul kernel ki's job at this run; one tile of it (sub: operands'
 * matrices at other addresses, NULL: none) */
int smelt__mm_setup(smelt_plan *p, runstate *rs, int ki, smelt__mmjob *j);
void smelt__mm_tile(smelt__mmjob *j, int64_t bi, int64_t tile, char *const *sub);
/* concats and pads (src/runtime/pieces.c): the view of a value of pieces
 * (a constant pad's); kernel ki once per region of pieces */
int smelt__pieces_view(smelt_plan *p, int v, smelt__view *out, int64_t *zeros);
int smelt__run_pieces(smelt_plan *p, runstate *rs, int ki, smelt__view *w, bool *split);
#endif
