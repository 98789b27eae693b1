/* The fusion layer: partitioning a program into clusters, the kernel
 * description of a cluster, and the layout a launch merges to. */
#ifndef SMELT_FUSION_H
#define SMELT_FUSION_H
#include "ir.h"

enum { SMELT_MODE_CONTIG = 0, SMELT_MODE_BCAST = 1, SMELT_MODE_STRIDED = 2 };

/* A kernel description: what the emitter turns into source. Values are
 * numbered: 0..n_in-1 are the kernel inputs, n_in + k is body op k. */
typedef struct smelt__kop {
    smelt_op op;
    smelt_dtype dtype;
    int nin;
    int in[3];
    double fval;
    int64_t ival;
    bool small; /* multi-reduction kernels: a value at the results' shape */
} smelt__kop;

typedef struct smelt__kdesc {
    int n_in, n_out, n_ops;
    smelt_dtype in_dt[SMELT_MAX_KERNEL_OPERANDS];
    smelt__kop *ops;
    int out_val[SMELT_MAX_KERNEL_OPERANDS]; /* value index of each output */
    /* layout variant */
    int rank;                              /* merged rank; 1 and all CONTIG = flat */
    uint8_t mode[SMELT_MAX_KERNEL_OPERANDS]; /* inputs then outputs */
    bool idx32; /* iteration space and every operand offset fit in 31 bits: device
                 * dialects index with 32-bit arithmetic (C kernels ignore it) */
    /* reduction kernels (reduce): ops[red] is the reduction; the operators
     * after it are its epilogue (elementwise, at the result's shape, reading
     * the reduced value, their own values, constants and inputs that the
     * producers do not read), run on each result as it is stored.  The
     * outputs: first values of its producers read outside the kernel (full
     * size, written as they are computed), then those at the result's
     * shape (the reduced value when read elsewhere, the epilogue's).  Its
     * operand (full size) is input 0
     * when nothing is fused, else a value the operators before it compute
     * per element from the inputs (its producers: input fusion).  The
     * iteration space is the operand's shape, whose merged dimensions in
     * rmask (bit d: dimension d of rank) are reduced
     * (smelt__merge_reduce_layout); every input is read over it, with
     * stride 0 along the dimensions it is broadcast in. */
    bool reduce;
    int red;
    uint8_t rmask;
    /* how a device runs the kernel (0 on a CPU, and until the launch
     * layer, src/runtime/launch.c, picks it for a device): an opaque code
     * here; its encodings (warps, lanes, tiles, shared memory) are the
     * launch layer's and the device emitter's, src/codegen/devlaunch.h.
     * The partitioner never sets or reads it. */
    uint16_t spread;
    /* a multi-reduction kernel (a row program): several reductions over
     * the same rows (same operand shape and axes, keepdims, the reduced
     * axes innermost), full-size operators that read their results
     * broadcast back (the diamond: softmax, layernorm), values at the
     * results' shape (ops[k].small).  ops[red] is the first reduction;
     * operators are in dependency order, every operand over the first
     * reduction's operand shape (broadcast: strides 0); the kernel runs one
     * row at a time, its reductions in turn, then a last pass that writes
     * the full-size outputs (src/codegen/emit-rows.c, "row programs"). */
    bool multi;
    /* indexed reads (take, take_along_axis; docs/fusion.md): gidx[k] > 0
     * when input k is an array read where an index says, the index being
     * input gidx[k] - 1, read once a row (the executor makes it constant
     * along a row: one element a row where it is not); the kernel adds
     * index x the axis's stride to input k's offset, its gather slot's
     * (inputs with gidx, in order) size and stride at run time in the
     * kernel's gather block (ptrs[n_in + n_out + 2]: SMELT_GX_*) */
    int8_t gidx[SMELT_MAX_KERNEL_OPERANDS];
} smelt__kdesc;
/* The gather block: [SMELT_GX_BAD] 0, or 1 + the slot of the first bad
 * index a kernel met, [SMELT_GX_VALUE] that index; then each slot's axis
 * size and stride (elements) at SMELT_GX_SLOTS + 2 slot (+ 1). */
enum { SMELT_GX_BAD = 0, SMELT_GX_VALUE = 1, SMELT_GX_SLOTS = 2 };
/* Whether kernel d reads with indices */
static inline bool smelt__kdesc_gathers(const smelt__kdesc *d)
{
    for (int k = 0; k < d->n_in; k++)
        if (d->gidx[k])
            return true;
    return false;
}

/* ---- partition (src/fusion/partition.c) ----------------------------------- */
typedef struct smelt__cluster {
    int *members; /* instruction indices, ascending (topological) */
    int nmem;
    int *inputs; /* values read from outside (no constants) */
    uint8_t *why; /* per input: why its producer is not in this cluster (0: a graph input) */
    int nin;
    int *outputs; /* members read outside the cluster or requested */
    int nout;
} smelt__cluster;

typedef struct smelt__partition {
    smelt__cluster *c; /* in an order that respects dependencies */
    int n;
} smelt__partition;

/* Operators in one cluster at most (a larger fusible group splits). */
#define SMELT_MAX_CLUSTER_OPS 256
/* The decision on a producer -> consumer edge: fused, or why not. */
enum { SMELT__FUSE, SMELT__FUSE_OFF, SMELT__FUSE_OPAQUE, SMELT__FUSE_SHAPE, SMELT__FUSE_OPS,
       SMELT__FUSE_CYCLE, SMELT__FUSE_OPERANDS, SMELT__FUSE_SPLIT, SMELT__FUSE_AFTER_REDUCE,
       SMELT__FUSE_DEAD, SMELT__FUSE_EPI_INPUT, SMELT__FUSE_ROWS, SMELT__FUSE_LIBRARY, SMELT__FUSE_PIECES,
       SMELT__FUSE_GATHER, SMELT__FUSE_NREASONS };
extern const char *const smelt__fuse_why[SMELT__FUSE_NREASONS];
/* fuse=false: one cluster per operator (the unfused path).  rows_min: a
 * row program of rows longer than SMELT_ROWS_MAX_LEN needs this many rows
 * (SMELT_ROWS_MIN; SMELT_ROWS_MIN_DEVICE for a device, where a row is a
 * warp's). */
int smelt__partition_build(const smelt__prog *p, bool fuse, int rows_min, smelt__partition *out);
/* One cluster per member of c (the fallback when c fails to compile). */
int smelt__partition_split(const smelt__prog *p, const smelt__cluster *c, smelt__partition *out);
void smelt__partition_free(smelt__partition *pt);
/* The position in c->members of its reduction (-1: none); the members
 * before it are its producers, those after it its epilogue. */
int smelt__red_member(const smelt__prog *p, const smelt__cluster *c);
/* Whether c is a multi-reduction kernel (smelt__kdesc.multi): more than one
 * reduction, or a member after its reduction not at the result's shape. */
bool smelt__red_multi(const smelt__prog *p, const smelt__cluster *c);
/* The reductions among c's members. */
int smelt__red_count_members(const smelt__prog *p, const smelt__cluster *c);
/* Rows at least this many, or rows no longer than SMELT_ROWS_MAX_LEN
 * elements, for a multi-reduction kernel (it runs a row in one thread);
 * on a device, where it runs a row in one warp, at least
 * SMELT_ROWS_MIN_DEVICE long rows (fewer would leave the GPU to as many
 * warps: the reductions run as kernels of their own instead, spread over
 * the warps) */
#define SMELT_ROWS_MIN 8
#define SMELT_ROWS_MIN_DEVICE 1024
#define SMELT_ROWS_MAX_LEN 65536 /* four chunks (a number: the reasons' text spells it) */
/* A row whose elements lie apart (a kept axis inside the reduced ones: a
 * softmax over axis 0) has at most this many bytes of kept elements
 * between two of its own: the rows next to it, run next, then find its
 * lines in cache.  Wider, the kernels of the single form, vectorised along
 * the kept axis, are faster (measured 2026-11-22 at abd7e58: 2-8x faster
 * than them at 16-64 f32 columns, 0.76x at 128, 0.25x at 4096). */
#define SMELT_ROWS_MAX_GAP 256
/* Whether input q of a reduction's kernel is read by its epilogue (then at
 * the result's shape, with strides 0 along the reduced axes; the
 * producers do not read it). */
bool smelt__red_epi_input(const smelt__kdesc *d, int q);
/* The kernel description of a cluster (layout fields left for the caller). */
int smelt__cluster_kdesc(const smelt__prog *p, const smelt__cluster *c, smelt__kdesc *d);
void smelt__kdesc_free(smelt__kdesc *d);
/* Drop size-1 dimensions of the iteration shape S (rank r), merge adjacent
 * dimensions every operand walks contiguously, and classify each operand's
 * innermost stride.  S and st are rewritten; returns the new rank (>= 1). */
int smelt__merge_layout(int r, int64_t *S, int n, int64_t (*st)[SMELT_MAX_DIMS], uint8_t *mode);
/* The same for a reduction: S is its operand's shape (rank r), mask its
 * reduced axes, st[0] the operand's strides and st[1..n) the outputs'
 * over the same dimensions (0 along reduced ones).  Size-1 dimensions are
 * dropped, adjacent ones of one kind (reduced or kept) that every operand
 * walks contiguously merge; at least one reduced dimension stays (of size
 * 1, outermost, when every reduced axis had size 1).  *rmask gets the
 * merged dimensions that are reduced; returns the rank (>= 1). */
int smelt__merge_reduce_layout(int r, int64_t *S, unsigned mask, int n, int64_t (*st)[SMELT_MAX_DIMS],
                               uint8_t *mode, uint8_t *rmask);

#endif
