/* The fusion layer: partitioning a program into clusters, the kernel
 * description of a cluster, and the layout a launch merges to. */
#ifndef SMELT_FUSION_H
#define SMELT_FUSION_H
#include "ir.h"

enum { SMELT_MODE_CONTIG = 0, SMELT_MODE_BCAST = 1, SMELT_MODE_STRIDED = 2 };
enum { SMELT_SPREAD_CHUNKS = 1, SMELT_SPREAD_COLS = 2 };
/* A device row program whose lanes hold their elements of a row: spread
 * SMELT_SPREAD_HELD + b + 16 c, 2^b elements a lane (at most
 * SMELT_HELD_MAX_LOG2: a chunk), the first 2^(c - 1) of them in registers
 * (c = 0: none), the rest in shared memory; see src/codegen/emit.c,
 * shape_device_rows, and smelt__rows_held_bytes. */
enum { SMELT_SPREAD_HELD = 8, SMELT_HELD_MAX_LOG2 = 9 };
/* The block form of a held row program: a row is a block of 2^w warps (w
 * from 1 to SMELT_BLOCK_WARPS_MAX_LOG2), each lane holding K elements in
 * registers (1 <= K <= 2^SMELT_BLOCK_K_MAX_LOG2, any K: rows of 5120 are 8
 * warps of 20 elements a lane): spread SMELT_SPREAD_BLOCK + (K - 1) +
 * 128 w, plus SMELT_BLOCK_EXACT where the row has exactly 32 2^w K
 * elements (the kernel tests no element against the row's end).  The lanes
 * of warp s hold elements 32 (s K + j) + lane; a reduction's lanes fold
 * warp after warp, in the one warp's order (docs/cuda.md). */
enum { SMELT_SPREAD_BLOCK = 1024, SMELT_BLOCK_WARPS_MAX_LOG2 = 5, SMELT_BLOCK_K_MAX_LOG2 = 7, SMELT_BLOCK_EXACT = 2048 };
/* The block form (SMELT_CUDA_ROWS_WARPS = N > 1) takes N warps a row, fewer
 * where a lane would hold fewer than 2^SMELT_BLOCK_K_MIN_LOG2 elements
 * (rows of at most 64 (2^SMELT_BLOCK_K_MIN_LOG2 - 1) = 448 stay a warp's); a lane's
 * elements in registers, within the same limits as the one warp's, with
 * 8 bytes more a row element for a pass's operands (computed together,
 * then folded warp after warp: kt in shape_device_rows).
 * (torch.compile's persistent reductions hold rows of 4096 in 8 warps, 16
 * elements a lane.) */
enum { SMELT_BLOCK_K_MIN_LOG2 = 3 };
/* A device elementwise kernel over tiles (an input read transposed, with
 * stride 1 along a dimension q other than the innermost): spread
 * SMELT_SPREAD_TILE + q << SMELT_TILE_Q_SHIFT + a mask of the inputs read
 * through a tile of shared memory (input k: bit k, k < SMELT_TILE_MAX_IN).
 * A block of SMELT_TILE x SMELT_TILE / 4 threads takes SMELT_TILE x
 * SMELT_TILE elements (q by the innermost dimension): it loads each such
 * input's tile along q, where it lies in order, and computes and stores
 * along the innermost dimension (templates/cuda/kernel_tile.cu.in; the
 * executor's smelt__device_tile picks q and the inputs). */
enum { SMELT_SPREAD_TILE = 0x8000, SMELT_TILE_Q_SHIFT = 12, SMELT_TILE_MAX_IN = 12, SMELT_TILE = 32 };
/* Shared memory the tiles of one block take at most (bytes) */
#define SMELT_TILE_SHARED_MAX (32 * 1024)
static inline bool smelt__is_tile(uint16_t spread) { return spread >= SMELT_SPREAD_TILE; }
static inline int smelt__tile_q(uint16_t spread) { return (spread - SMELT_SPREAD_TILE) >> SMELT_TILE_Q_SHIFT; }
static inline bool smelt__tile_packed(uint16_t spread, int k)
{
    return smelt__is_tile(spread) && k < SMELT_TILE_MAX_IN && (spread >> k & 1);
}
/* SMELT_CUDA_ROWS_WARPS=auto (the default): blocks of up to this many warps
 * for rows that fill them exactly (32 2^w K elements: no test against the
 * row's end; a program of more reductions takes the most warps its rows
 * fill, fewer than this where that fills them) and for row programs of one
 * reduction; a warp a row for rows of other lengths with more.  Measured on an H200 (bench/RESULTS.md,
 * 2026-11-27), f32, ms, a warp a row / 8 warps / 16:
 * rows of 4096 (16384 of them; xent 8192): softmax 0.323 / 0.179 / 0.258,
 * layernorm 0.245 / 0.189 / 0.289, rmsnorm 0.284 / 0.163 / 0.191,
 * log_softmax 0.280 / 0.201 / 0.266, xent 0.549 / 0.508 / 0.642; rows of
 * 4000 (11250), a warp a row / 8 warps (a test of each element against
 * the lane's count in the row): softmax 0.246 / 0.209, layernorm 0.230 /
 * 0.209, rmsnorm 0.176 / 0.138, but log_softmax 0.209 / 0.330 (78
 * registers where its exact form takes 48: each element's exp sits in a
 * branch of its own). */
enum { SMELT_BLOCK_WARPS_AUTO = 8 };
/* A held row program's elements a lane (*K) and of them in registers (*kr) */
static inline void smelt__held_split(uint16_t spread, int *K, int *kr)
{
    if (spread >= SMELT_SPREAD_BLOCK) {
        *K = *kr = 1 + (spread & ((1 << SMELT_BLOCK_K_MAX_LOG2) - 1));
        return;
    }
    int c = (spread - SMELT_SPREAD_HELD) >> 4;
    *K = 1 << ((spread - SMELT_SPREAD_HELD) & 15);
    *kr = !c ? 0 : (1 << (c - 1)) < *K ? 1 << (c - 1) : *K;
}
/* ... and the warps a row spans (1 but in the block form) */
static inline int smelt__held_warps(uint16_t spread)
{
    return spread >= SMELT_SPREAD_BLOCK ? 1 << ((spread - SMELT_SPREAD_BLOCK) % SMELT_BLOCK_EXACT >> SMELT_BLOCK_K_MAX_LOG2)
                                        : 1;
}
/* ... and whether its rows fill its blocks exactly */
static inline bool smelt__held_exact(uint16_t spread)
{
    return spread >= SMELT_SPREAD_BLOCK + SMELT_BLOCK_EXACT;
}
/* The block form's spread: 2^w warps of K elements a lane */
static inline uint16_t smelt__held_block(int w, int K, bool exact)
{
    return (uint16_t)(SMELT_SPREAD_BLOCK + (K - 1) + (w << SMELT_BLOCK_K_MAX_LOG2) + (exact ? SMELT_BLOCK_EXACT : 0));
}
/* Elements a lane holds in registers: at most 2^SMELT_HELD_REGS_MAX_LOG2,
 * 2^SMELT_HELD_MATH_MAX_LOG2 when a full-size operator is a transcendental
 * function (on an H200 a softmax of 4096 f32 rows, 128 elements a lane in
 * registers (255 registers, 8 warps an SM), ran 0.53 ms against 0.40
 * streaming, while one of 512, 16 a lane, gained; layernorm, no such
 * operator, gained at 128: 0.25 against 0.43 ms; bench/RESULTS.md), and
 * SMELT_ROWS_HELD_BYTES of them (SMELT_CUDA_ROWS_HELD sets it) */
enum { SMELT_HELD_REGS_MAX_LOG2 = 7, SMELT_HELD_MATH_MAX_LOG2 = 5 };
#define SMELT_ROWS_HELD_BYTES 512
/* The most shared memory a held row program's block (one warp) takes: the
 * static limit; by default (SMELT_CUDA_ROWS_SHARED=auto) only a program
 * with a transcendental operator at full size keeps elements there, at most
 * SMELT_ROWS_SHARED_AUTO bytes a warp.  Measured on an H200, 16384 rows of
 * 4096 f32: softmax 32 elements a lane in registers and 96 in shared
 * memory (12 KB) 0.335 ms, streaming 0.402; layernorm 128 in registers
 * 0.258, 64 and 64 0.400, 128 in shared memory 0.812; xent's rows of 8192
 * with 224 in shared memory (28 KB) 2.40, streaming 0.553. */
#define SMELT_ROWS_SHARED_MAX (48 * 1024)
#define SMELT_ROWS_SHARED_AUTO (12 * 1024)

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
    /* a device reduction spread over more warps than one per result
     * (smelt__red_spread picks it): SMELT_SPREAD_CHUNKS, a warp per (result,
     * chunk) for a few long results (templates/cuda/kernel_reduce_spread.cu.in);
     * SMELT_SPREAD_COLS, a thread per (result, lane) for columns
     * (kernel_reduce_cols.cu.in); 0, a warp per result; for a row
     * program, SMELT_SPREAD_HELD + b + 16 c: its lanes hold 2^b elements
     * each of the values two passes read, 2^(c - 1) in registers
     * (smelt__held_split; 0: every pass reads its operands); or the
     * block form, SMELT_SPREAD_BLOCK and up (smelt__held_block); for an
     * elementwise device kernel, 0 or its tiles (SMELT_SPREAD_TILE) */
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
