/* The emitter's parts shared by its files: emit.c (expressions, templates,
 * the dispatcher), emit-blocks.c, emit-loop.c, emit-reduce.c, emit-rows.c,
 * emit-rows-device.c.  Private to src/codegen/. */
#ifndef SMELT_EMIT_H
#define SMELT_EMIT_H
#include <stdbool.h>
#include <stdint.h>

#include "codegen.h"

#define NAME_TOKEN "SMELT_KERNEL_NAME"

/* Emission state for one lane of the loop body.  A value used once, by an
 * operator whose expression names it once, is not stored in a variable but
 * written inline: TinyCC then keeps it in a register instead of spilling. */
typedef struct ectx {
    const smelt__dialect *dl;
    const smelt__kdesc *d;
    int *uses;
    bool *inl;
    int lane; /* -1: the scalar loop */
    int form; /* how operands are named: FORM_* */
    bool stage;  /* C loop form: f16/bf16 operands staged in float arrays h<k> */
    bool arrays; /* C loop form with f16/bf16 results: one loop per operator over
                  * arrays v<k>[j], each f16/bf16 array rounded as a whole */
    uint64_t ldg; /* device: inputs (bit k) read through the read-only cache, __ldg */
    const char *divq; /* device row programs' last pass: f32 divisions by a row's scalar (or a
                       * constant) as smelt_divr_f32, the flag that says they all held, else NULL */
    uint64_t uni;     /* with divq: the inputs (bit k) that are the row's scalars */
    const char *wq; /* C loop form: f32 exp, sin, cos, tan as their small-range forms
                     * (smelt_exp_f32_w ...), the variable keeping their witness (c_group), else NULL */
    const bool *cond; /* C loop form: value v written inline in a branch (branch_values), or NULL */
} ectx;

/* Operand references: C kernels follow the operand's mode (q0[j], b0,
 * q0[j * s0]) or read a staged f16/bf16 operand's f32 copy (h0[j], see
 * staged); device nd kernels index every operand by its own offset
 * (q0[o0]); device vector bodies read and write lanes of vectors (l0.v[2]);
 * block primitives read element i of their compute-type arrays (A0[i]). */
enum { FORM_C, FORM_OFFSET, FORM_VEC, FORM_BLK };

/* Elements per call of a C loop-form kernel's group function (c_group). */
#define C_GROUP 128 /* a multiple of 16 (the prelude's f16/bf16 helpers' width) */

/* A template's slots: {{KEY}} is replaced by val. */
typedef struct slot {
    const char *key, *val;
} slot;

#define NSLOTS(s) ((int)(sizeof(s) / sizeof(s)[0]))

/* n as a slot's value, in a buffer that lives as long as the caller's block */
#define SLOT_NUM(n) smelt__slot_num((char[16]){0}, (n))

/* A device target's warp width in the kernels' text (smelt__warp_text):
 * the templates' {{WARP}}, {{WARP_MASK}}, {{WARP_LOG2}}, {{HALF_WARP}} and
 * {{SHFL_STEPS}}; L, the lanes, for the emitter's own text. */
typedef struct warp_text {
    int L;
    char lanes[12], mask[12], log2[12], half[12], steps[64];
} warp_text;
#define WARP_SLOTS(w) \
    {"WARP", (w).lanes}, {"WARP_MASK", (w).mask}, {"WARP_LOG2", (w).log2}, {"HALF_WARP", (w).half}, \
    {"SHFL_STEPS", (w).steps}

#define BLK_ARGS "int64_t, char *, const char *, const char *, const char *"

/* Results the column form computes at once: each reads a row of RED_W
 * elements, and fetches the row RED_COL_AHEAD below into the cache.
 * Without that fetch, a 4096 x 4096 f32 column sum on one core ran at
 * 0.43 ns an element with 256 (1 KiB a row, 64 KiB of f64 accumulators:
 * L2), and slower with 64; with it, 0.30 ns with 256, 0.23 with 64 and
 * 0.18 with 128 (32 KiB of f64 accumulators: L1), as fast as a row sum
 * (AMD EPYC Zen 5, CC tier). */
#define RED_W 128
/* How far ahead (bytes) the row form fetches a run read at stride 1.  The
 * hardware's prefetch alone kept a 4096 x 4096 f32 row sum with f64
 * accumulators at 7-8 GB/s on one core and 18-34 on two, where f32
 * accumulators (fewer instructions per line) read 12-17 and 39-41; fetching
 * 4 KiB ahead gave 10-14 and 36-39 (Intel Xeon 2-core VM, 2026-11-29;
 * 1 KiB: 8.5, 2 KiB and 16 KiB: as 4 KiB).  Only runs longer than
 * RED_PROD_BLOCK: shorter ones are a fused operand's, already in cache. */
#define RED_ROW_AHEAD 4096
/* The condition of the C text that only gcc and clang compile (fetch hints:
 * TinyCC and NVRTC see the #else) */
#define C_GCC_ONLY "defined(__GNUC__) && !defined(__TINYC__) && !defined(__CUDACC__)"

/* ---- reductions -----------------------------------------------------------
 * One kernel per reduction, with its producers in its element loop (input
 * fusion: smelt_prod) and its epilogue on each stored result (smelt_epi),
 * in smelt's one reduction order (src/ir/ir.h): the C form (both CPU tiers: kernel_reduce.c.in) and
 * the device form (kernel_reduce.cu.in).  The C form's lanes, the loop
 * that accumulates a run of elements into the 32 lanes, are the functions
 * red_lanes writes: in the CC tier's source, and compiled into smelt as
 * block primitives that the TinyCC tier's kernels call (TinyCC's own code
 * is scalar and spills every value). */
#define RED_COL_AHEAD 8

typedef struct red_kind {
    smelt_op op;
    smelt_dtype in, acc, out; /* the operand's, the accumulator's, the result's dtype */
    bool arg;                 /* argmax, argmin: (value, index) pairs */
} red_kind;

#define RED_LANES_ARGS "int64_t n, void *accp, const void *xp, const int64_t *args"

/* Elements of the operand the C forms compute at once (a row form's run;
 * the column form computes RED_W, one row of its results). */
#define RED_PROD_BLOCK 1024

/* A row program (C, gcc or clang) fetches the next row of an input into the
 * cache while it computes this one, when that row is contiguous and at most
 * this many bytes (a fraction of a core's L2). */
#define SMELT_ROWS_PREFETCH 65536

/* A row program whose rows are at most this many elements defers each
 * row's last pass (the full-size outputs) into a pass of the next row, a
 * run at a time (shape_c_rows): the output stores spread over that pass's
 * arithmetic instead of coming in one burst at the end of the row. */
#define SMELT_ROWS_DEFER 32768

#define SMELT_ROWS_DEFER_RUN 512 /* elements a call (each call finds its place in the shape anew) */

/* A C row program's reductions compute and fold their operand this many
 * elements at a time (at most RED_PROD_BLOCK, the run buffer), each run
 * after the next row's fetch and the deferred stores that go with it.
 * Runs of 512 with deferred calls of 512, against 1024 and 2048: rmsnorm
 * 4096 x 4096 0.83x the time, layernorm 0.87x, softmax and log_softmax
 * the same (2026-11-27, fd498d4): the loads, the
 * fetches and the streaming stores interleave more finely.  Runs of 128
 * cost layernorm more in calls than they saved.  TinyCC's block form keeps
 * RED_PROD_BLOCK (its calls cost more). */
#define SMELT_ROWS_RUN 512

/* ---- row programs (multi-reduction kernels, smelt__kdesc.multi) ---------
 * One row at a time (the reduced dimensions are innermost: row o is the
 * elements o * nred .. (o + 1) * nred - 1 of the iteration space).  Its
 * reductions in turn (stages), each operand computed by its producers (a
 * stage piece, smelt_p<s>) a run at a time into a block and combined in
 * smelt's one reduction order, as the single form combines it; the values
 * at the results' shape once what they read is known (a small piece,
 * smelt_s<t>, run on one element: the row's scalars sv[]); then the
 * full-size outputs (the final piece, smelt_f), one more pass over the row
 * while it is in cache.  A piece is an elementwise kernel of the loop (or
 * block) form reading the kernel's inputs with its strides and the row's
 * scalars with strides 0.  A full-size value that two passes read is
 * computed in each, the same way from the same inputs: the same bits. */
#define ROWS_KEPT (1 << 20) /* a piece's binding to a kept value (rows_call_setup) */

typedef struct rows_info {
    int nst;    /* stages: the reductions, in order */
    int *st;    /* op index of stage s's reduction */
    int *avail; /* per op: a reduction's stage + 1; a small op's small piece (computed before that stage) */
    int *slot;  /* per value: its scalar in sv[] (-1: none) */
    int nslot;
    /* the row cache (C forms): a full-size value one pass computes and a
     * later one reads is kept for the row (nred elements of it, at byte
     * cache_off[k] * nred of the row's slot, the widest values first, so
     * every one aligned) instead of computed again */
    bool cache;
    int *piece;     /* per op: the pass that computes a full-size op (stage s, or nst: the last), -1 none */
    int *cache_off; /* per op: bytes per element before it in the slot, -1 not kept */
    int cache_bytes; /* per element of a row */
} rows_info;

/* Piece kind of row program d, with its operands' bindings
 * (rows_call_setup) in bind: ROWS_SMALL, small piece t (the values at the
 * results' shape known before stage t; outputs: those read after it);
 * ROWS_STAGE, stage t's producers (outputs: the reduction's operand into
 * tmp, then with the row cache the values later passes read and the
 * kernel's outputs it computes); ROWS_FINAL, the last pass (the full-size
 * outputs).  *nout 0: no such piece; else pc->ops is allocated (SMELT_OK)
 * and outs[] holds the values it outputs. */
enum { ROWS_SMALL, ROWS_STAGE, ROWS_FINAL };

/* ---- functions (each file's, in the order of the files) ---- */
/* emit.c */
void smelt__branch_values(const smelt__kdesc *d, const bool *inl, const int *cons_op, const int *cons_slot, bool *cond);
bool smelt__device_nd_vec(const smelt__kdesc *d);
void smelt__device_offsets(smelt__sb *init, smelt__sb *b, smelt__sb *next, const smelt__kdesc *d, int V);
void smelt__device_vec_body(smelt__sb *b, smelt__sb *aligned, ectx *e, int V);
int smelt__device_vec_width(const smelt__kdesc *d);
void smelt__emit_arrays(smelt__sb *b, const ectx *e);
void smelt__emit_lane(smelt__sb *b, const ectx *e);
bool smelt__fast_div(const ectx *e, int k);
const char *smelt__fast_w(const ectx *e, int k);
const char *smelt__gather_index_type(const smelt__kdesc *d, int q);
bool smelt__ident_char(char c);
bool smelt__is_const(const smelt__kdesc *d, int v);
bool smelt__is_flat(const smelt__kdesc *d);
void smelt__literal(smelt__sb *b, const smelt__dialect *dl, const smelt__kop *k);
int smelt__load_render(smelt__sb *out, const smelt__dialect *dl, const char *base, const slot *slots,
                       int n, smelt__sb *err);
void smelt__op_expr(smelt__sb *b, const ectx *e, int k);
const char *smelt__op_template(const smelt__kdesc *d, int k, smelt_dtype *ct);
smelt_dtype smelt__operand_dtype(const smelt__kdesc *d, int k);
void smelt__plan_inlining(const smelt__kdesc *d, int *uses, bool *inl, int *cons_op, int *cons_slot);
int smelt__render_prelude(smelt__sb *out, const smelt__dialect *dl, char **mathlib, smelt__sb *err);
void smelt__row_offsets(smelt__sb *row, const smelt__kdesc *d);
const char *smelt__slot_num(char *buf, int n);
smelt_dtype smelt__value_dtype(const smelt__kdesc *d, int v);
int smelt__warp_text(warp_text *w, const smelt__target *t, smelt__sb *err);
void smelt__with_math(smelt__sb *text, const char *mathlib);
/* emit-blocks.c */
void smelt__blk_entry(smelt__sb *table, const char *fn, const smelt__opinfo *oi);
void smelt__declare_once(smelt__sb *decls, const char *fn, const char *args);
int smelt__emit_blocks(const smelt__dialect *dl, const smelt__kdesc *d, smelt__sb *src,
                       char *name, bool raw, smelt__sb *err);
int smelt__finish_name(smelt__sb *text, smelt__sb *src, char *name, const char *prefix);
bool smelt__op_is_math(const smelt__opinfo *oi);
/* emit-loop.c */
int smelt__shape_c_loop(const smelt__dialect *dl, const smelt__kdesc *d, const char *prelude,
                        smelt__sb *text, smelt__sb *err);
int smelt__c_walker(const smelt__dialect *dl, const smelt__kdesc *d, const char *prelude, bool ahead,
                    smelt__sb *text, smelt__sb *err);
int smelt__c_element(const smelt__dialect *dl, const smelt__kdesc *d, smelt__sb *body, smelt__sb *consts,
                     bool *plain);
int smelt__shape_device_grid(const smelt__dialect *dl, const smelt__kdesc *d, const char *prelude,
                             smelt__sb *text, smelt__sb *err);
int smelt__shape_device_tile(const smelt__dialect *dl, const smelt__kdesc *d, const char *prelude,
                             smelt__sb *text, smelt__sb *err);
/* emit-reduce.c */
void smelt__red_blk_prims(smelt__sb *prims, smelt__sb *table);
void smelt__red_defs(smelt__sb *b, const smelt__dialect *dl, const red_kind *k, bool blocks);
void smelt__red_dev_offsets(smelt__sb *b, bool xo, int ind, int nx, int R, int nr);
void smelt__red_dims(const smelt__kdesc *d, smelt__sb *kd, smelt__sb *rd, int *nk, int *nr, int *klast, int *rlast);
int smelt__red_fn(const smelt__dialect *dl, const smelt__kdesc *pd, const char *fname, bool blocks, bool ahead,
                  smelt__sb *out, smelt__sb *err);
void smelt__red_ident(smelt__sb *b, const smelt__dialect *dl, const red_kind *k);
red_kind smelt__red_kind_of(smelt_op op, smelt_dtype in);
void smelt__red_lanes(smelt__sb *b, const smelt__dialect *dl, const red_kind *k, const char *fn, const char *qual);
int smelt__red_nops(const smelt__kdesc *d);
void smelt__red_prim_name(char *name, size_t n, const red_kind *k);
void smelt__red_step(smelt__sb *out, const smelt__dialect *dl, const red_kind *k, const char *ind, const char *v,
                     const char *e);
int smelt__shape_c_reduce(const smelt__dialect *dl, const smelt__kdesc *d, bool blocks, const char *prelude,
                          smelt__sb *text, smelt__sb *err);
int smelt__shape_device_reduce(const smelt__target *t, const smelt__kdesc *d, const char *prelude,
                               smelt__sb *text, smelt__sb *err);
/* emit-rows.c */
void smelt__rename_words(smelt__sb *out, const char *text, const char *const *names, int n, const char *suffix);
int smelt__rows_analyse(const smelt__kdesc *d, bool cache, rows_info *ri);
int smelt__rows_check(const smelt__kdesc *d, smelt__sb *err);
void smelt__rows_free(rows_info *ri);
int smelt__rows_held_slots(const smelt__kdesc *d, const rows_info *ri, const int *first, const int *last, int *slot,
                           int *off);
int smelt__rows_held_spans(const smelt__kdesc *d, const rows_info *ri, int *first, int *last, smelt__sb *err);
bool smelt__rows_is_held(const smelt__kdesc *d, const rows_info *ri, const int *first, const int *last, int v);
void smelt__rows_modes(const smelt__kdesc *d, smelt__kdesc *pc, const int *bind, bool small);
int smelt__rows_piece(const smelt__kdesc *d, const bool *mine, const int *outs, int nout, int rank,
                      smelt__kdesc *pc, int *src, smelt__sb *err, int first);
int smelt__rows_piece_of(const smelt__kdesc *d, const rows_info *ri, int kind, int t, bool *mine, int *outs,
                         int *nout, smelt__kdesc *pc, int *bind, smelt__sb *err);
int smelt__shape_c_rows(const smelt__dialect *dl, const smelt__kdesc *d, bool blocks, const char *prelude,
                        smelt__sb *text, smelt__sb *err);
/* emit-rows-device.c */
int smelt__shape_device_rows(const smelt__target *t, const smelt__kdesc *d, const char *prelude, smelt__sb *text,
                             smelt__sb *err);
extern const char smelt__gather_fn[];
extern const char smelt__gather_fn_dev[];
extern const char smelt__red_blocks_prelude[];
extern const char *const smelt__red_def_names[6];
#endif
