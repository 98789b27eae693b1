/* How a device runs a kernel: the target a device backend describes (its
 * warp width, shared memory, largest grid) and the launch forms the launch
 * layer (src/runtime/launch.c) picks from it for a kernel description,
 * encoded in smelt__kdesc.spread, which the device emitter
 * (src/codegen/emit-*.c) decodes to write the kernel.
 *
 * Why here: both the launcher (runtime) and the code generator must read
 * these, and a layer includes only those below it (meson.build), so the
 * lowest layer both see is this one, codegen.  The fusion layer below
 * describes what a kernel computes; it carries spread as an opaque code and
 * never sets or reads it.
 *
 * The forms (spread):
 * - a reduction (smelt__red_spread picks it): 0, a warp per result;
 *   SMELT_SPREAD_CHUNKS, a warp per (result, chunk) for a few long results
 *   (templates/cuda/kernel_reduce_spread.cu.in); SMELT_SPREAD_COLS, a thread
 *   per (result, lane) for columns (kernel_reduce_cols.cu.in);
 * - a row program: 0, streaming (every pass reads its operands);
 *   SMELT_SPREAD_HELD + b + 16 c, its lanes hold 2^b elements each of the
 *   values two passes read, 2^(c - 1) in registers (smelt__held_split); or
 *   the block form, SMELT_SPREAD_BLOCK and up (smelt__held_block);
 * - an elementwise kernel (smelt__device_tile picks it): 0, a grid-stride
 *   loop; or its tiles, SMELT_SPREAD_TILE and up. */
#ifndef SMELT_DEVLAUNCH_H
#define SMELT_DEVLAUNCH_H
#include <stdbool.h>
#include <stdint.h>

/* What a device backend's processor allows (src/backends/cuda/cuda.c
 * describes an NVIDIA GPU's): the launch layer chooses a kernel's form and
 * grid from this and the kernel's description, and the emitter writes the
 * kernel for its warp width. */
typedef struct smelt__devtarget {
    int warp;             /* lanes of a warp: threads that run in step (a power of 2) */
    int64_t shared_bytes; /* static shared memory a block may take */
    int64_t max_grid;     /* blocks of a grid's x dimension */
} smelt__devtarget;

enum { SMELT_SPREAD_CHUNKS = 1, SMELT_SPREAD_COLS = 2 };
/* A device row program whose lanes hold their elements of a row: spread
 * SMELT_SPREAD_HELD + b + 16 c, 2^b elements a lane (at most
 * SMELT_HELD_MAX_LOG2: a chunk), the first 2^(c - 1) of them in registers
 * (c = 0: none), the rest in shared memory; see src/codegen/emit-rows-device.c,
 * smelt__shape_device_rows, and smelt__rows_held_bytes. */
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

#endif
