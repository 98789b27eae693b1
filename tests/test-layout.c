/* Layout operators (reshape, transpose, slice, flip, expand_dims, squeeze,
 * broadcast_to): views read where their operand lies, against the float64
 * reference and NumPy's semantics, inside fused kernels and reductions, at
 * run-time shapes and strides; the plans' kernel and copy counts. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common.h"
#include "layout-cases.h"

#define MAX_(a, b) ((a) > (b) ? (a) : (b))
#define MIN_(a, b) ((a) < (b) ? (a) : (b))

static smelt_plan *plan_on(smelt_ctx *ctx, smelt_graph *g, smelt_node *y, const char *backend, int opt)
{
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    o.backend = backend;
    o.opt_level = opt;
    smelt_plan *p = NULL;
    T_OK(ctx, smelt_plan_new(ctx, g, 1, &y, &o, &p));
    return p;
}

static t_tol tol_of(smelt_dtype dt) { return t_is_float(dt) ? t_chain_tol(dt) : T_EXACT; }

/* Every case: its kernel and copy counts, the reference's values, and the
 * bits of the unfused plan on TCC (1 and 4 threads) and CC. */
Test(layout, cases_fused_equal_unfused_and_reference, .timeout = 240)
{
    smelt_ctx *ctx = t_ctx();
    for (int c = 0; c < NELEMS(layout_cases); c++) {
        const layout_case *k = &layout_cases[c];
        smelt_node *y;
        smelt_tensor *in[2], *ref, *base = NULL;
        smelt_graph *g = layout_setup(ctx, c, &y, in);
        t_reference(ctx, g, 1, &y, 2, in, &ref);
        smelt_plan *p0 = plan_on(ctx, g, y, "TCC", 0);
        t_run(p0, 2, in, 1, &base);
        t_expect_match(k->what, base, ref, tol_of(k->dt));
        const char *backends[] = {"TCC", "TCC", "CC"};
        for (int b = 0; b < 3; b++) {
            T_OK(ctx, smelt_ctx_set_threads(ctx, b == 1 ? 4 : 1));
            smelt_plan *p = plan_on(ctx, g, y, backends[b], 3);
            smelt_plan_stats s = t_stats(p);
            cr_assert_eq(s.kernels, k->kernels, "%s: %d kernels, expected %d:\n%s", k->what, s.kernels, k->kernels,
                         smelt_plan_describe(p));
            cr_assert_eq(s.copies, k->copies, "%s: %d copies, expected %d:\n%s", k->what, s.copies, k->copies,
                         smelt_plan_describe(p));
            smelt_tensor *r = NULL;
            t_run(p, 2, in, 1, &r);
            int64_t at;
            cr_assert(t_same_results(base, r, &at), "%s on %s: %a fused, %a unfused at [%lld]", k->what,
                      backends[b], smelt_tensor_get(r, at), smelt_tensor_get(base, at), (long long)at);
            smelt_tensor_free(r);
            smelt_plan_free(p);
        }
        T_OK(ctx, smelt_ctx_set_threads(ctx, 0));
        smelt_tensor_free(base), smelt_tensor_free(ref), t_free_all(in, 2);
        smelt_plan_free(p0);
        smelt_graph_free(g);
    }
    smelt_ctx_free(ctx);
}

/* Each operator alone, every dtype, ranks 1 to 4, on the reference and on
 * NumPy's semantics spelled out by hand (index arithmetic). */
Test(layout, each_operator_every_dtype)
{
    smelt_ctx *ctx = t_ctx();
    const smelt_dtype dts[] = {SMELT_F32, SMELT_F64, SMELT_F16, SMELT_BF16, SMELT_I32, SMELT_I64, SMELT_U8, SMELT_BOOL};
    trng r;
    trng_init(&r, 5);
    for (int t = 0; t < NELEMS(dts); t++)
        for (int rank = 1; rank <= 4; rank++) {
            int64_t shape[4];
            for (int d = 0; d < rank; d++)
                shape[d] = trng_range(&r, 1, 6);
            smelt_graph *g = t_graph(ctx);
            smelt_node *x = smelt_input(g, "x", dts[t], rank, shape);
            int perm[4];
            for (int d = 0; d < rank; d++)
                perm[d] = (d + 1) % rank;
            int ax = (int)trng_range(&r, 0, rank - 1);
            smelt_node *outs[] = {
                smelt_transpose(g, x, NULL),
                smelt_transpose(g, x, perm),
                smelt_slice(g, x, ax, 1, SMELT_NONE, 2),
                smelt_slice(g, x, -1, -1, SMELT_NONE, -2),
                smelt_flip(g, x, ax),
                smelt_expand_dims(g, x, -1),
                smelt_reshape(g, x, 2, (int64_t[]){-1, shape[rank - 1]}),
                smelt_reshape(g, smelt_expand_dims(g, x, 0), 1, (int64_t[]){-1}),
                smelt_squeeze(g, smelt_expand_dims(g, x, ax), ax),
                smelt_broadcast_to(g, x, rank + 1, (int64_t[]){3, shape[0], rank > 1 ? shape[1] : 0,
                                                               rank > 2 ? shape[2] : 0, rank > 3 ? shape[3] : 0}),
            };
            int n = NELEMS(outs);
            T_OK(ctx, smelt_graph_status(g));
            smelt_tensor *in = t_rand(ctx, &r, dts[t], rank, shape), *ref[NELEMS(outs)], *got[NELEMS(outs)] = {0};
            t_reference(ctx, g, n, outs, 1, &in, ref);
            smelt_plan *p = t_plan(ctx, g, n, outs, 3);
            t_run(p, 1, &in, n, got);
            for (int o = 0; o < n; o++)
                t_expect_match(smelt_op_name(smelt_node_op(outs[o])), got[o], ref[o], T_EXACT);
            /* by hand: the transpose, the stepped slice and the flip */
            int64_t cnt = smelt_tensor_numel(in), idx[4], st[4];
            st[rank - 1] = 1;
            for (int d = rank - 2; d >= 0; d--)
                st[d] = st[d + 1] * shape[d + 1];
            for (int64_t i = 0; i < cnt; i++) {
                int64_t rem = i, tr = 0, fl = 0;
                for (int d = rank - 1; d >= 0; d--)
                    idx[d] = rem % shape[d], rem /= shape[d];
                for (int d = 0, m = 1; d < rank; m *= (int)shape[d], d++)
                    tr += idx[d] * m; /* row-major over the reversed shape */
                for (int d = 0; d < rank; d++)
                    fl += (d == ax ? shape[d] - 1 - idx[d] : idx[d]) * st[d];
                cr_assert_eq(smelt_tensor_get(got[0], tr), smelt_tensor_get(in, i), "transpose at %lld", (long long)i);
                cr_assert_eq(smelt_tensor_get(got[4], fl), smelt_tensor_get(in, i), "flip at %lld", (long long)i);
            }
            cr_assert_eq(smelt_tensor_shape(got[2])[ax], shape[ax] / 2, "x[1::2] along axis %d", ax);
            cr_assert_eq(smelt_tensor_shape(got[3])[rank - 1], (shape[rank - 1] + 1) / 2, "x[-1::-2]");
            t_free_all(got, n), t_free_all(ref, n);
            smelt_tensor_free(in);
            smelt_plan_free(p);
            smelt_graph_free(g);
        }
    smelt_ctx_free(ctx);
}

/* Python's slice rules: negative and out-of-range bounds, negative steps,
 * empty results. */
Test(layout, slice_bounds_as_python)
{
    smelt_ctx *ctx = t_ctx();
    const int64_t N = SMELT_NONE;
    const int64_t cases[][3] = {{0, 5, 1},  {-3, N, 1},   {N, -1, 2},   {100, N, 1}, {-100, 3, 1}, {N, N, -1},
                                {5, 1, -2}, {-1, -100, -3}, {3, 3, 1},  {4, 1, 1},   {N, 100, 3},  {1, N, 7}};
    for (int c = 0; c < NELEMS(cases); c++) {
        smelt_graph *g = t_graph(ctx);
        smelt_node *x = smelt_input(g, "x", SMELT_I64, SHP(9));
        smelt_node *y = smelt_slice(g, x, 0, cases[c][0], cases[c][1], cases[c][2]);
        T_OK(ctx, smelt_graph_status(g));
        /* Python: range(9)[start:stop:step] */
        int64_t n = 9, step = cases[c][2], lo, hi, want[9], nw = 0;
        int64_t start = cases[c][0], stop = cases[c][1];
        if (step > 0) {
            lo = start == N ? 0 : start < 0 ? MAX_(start + n, 0) : MIN_(start, n);
            hi = stop == N ? n : stop < 0 ? MAX_(stop + n, 0) : MIN_(stop, n);
            for (int64_t i = lo; i < hi; i += step)
                want[nw++] = i;
        } else {
            lo = start == N ? n - 1 : start < 0 ? MAX_(start + n, -1) : MIN_(start, n - 1);
            hi = stop == N ? -1 : stop < 0 ? MAX_(stop + n, -1) : MIN_(stop, n - 1);
            for (int64_t i = lo; i > hi; i += step)
                want[nw++] = i;
        }
        cr_assert_eq(smelt_node_shape(y)[0], nw, "case %d: %lld elements, expected %lld", c,
                     (long long)smelt_node_shape(y)[0], (long long)nw);
        smelt_tensor *in = t_tensor(ctx, SMELT_I64, SHP(9)), *out = NULL;
        for (int i = 0; i < 9; i++)
            t_set_i64(in, i, 10 + i);
        smelt_node *z = smelt_add(g, y, smelt_scalar(g, 0));
        smelt_plan *p = t_plan(ctx, g, 1, &z, 3);
        t_run(p, 1, &in, 1, &out);
        for (int64_t i = 0; i < nw; i++)
            cr_assert_eq(smelt_tensor_get(out, i), (double)(10 + want[i]), "case %d, element %lld", c, (long long)i);
        smelt_tensor_free(in), smelt_tensor_free(out);
        smelt_plan_free(p);
        smelt_graph_free(g);
    }
    smelt_ctx_free(ctx);
}

/* A plan runs at other run-time sizes: views follow them (a reshape's -1
 * is inferred again); a literal reshape that no longer fits is an error
 * that says so. */
Test(layout, run_time_shapes)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(4, 6));
    smelt_node *outs[] = {smelt_add(g, smelt_transpose(g, x, NULL), smelt_scalar(g, 1)),
                          smelt_mul(g, smelt_reshape(g, x, 2, (int64_t[]){-1, 3}), smelt_scalar(g, 2)),
                          smelt_slice(g, x, 0, -2, SMELT_NONE, 1)};
    smelt_plan *p = t_plan(ctx, g, 3, outs, 3);
    trng r;
    trng_init(&r, 9);
    smelt_tensor *in = t_rand(ctx, &r, SMELT_F32, SHP(10, 6)), *got[3] = {0};
    t_run(p, 1, &in, 3, got);
    cr_assert_eq(smelt_tensor_shape(got[0])[0], 6);
    cr_assert_eq(smelt_tensor_shape(got[0])[1], 10);
    cr_assert_eq(smelt_tensor_shape(got[1])[0], 20);
    cr_assert_eq(smelt_tensor_shape(got[2])[0], 2);
    for (int i = 0; i < 10; i++)
        for (int j = 0; j < 6; j++) {
            double v = smelt_tensor_get(in, i * 6 + j);
            cr_assert_eq(smelt_tensor_get(got[0], j * 10 + i), (double)((float)v + 1.0f));
            cr_assert_eq(smelt_tensor_get(got[1], i * 6 + j), (double)((float)v * 2.0f));
            if (i >= 8)
                cr_assert_eq(smelt_tensor_get(got[2], (i - 8) * 6 + j), v);
        }
    t_free_all(got, 3);
    smelt_tensor_free(in);
    smelt_plan_free(p);
    /* reshape (2, 12) of (4, 6) fits; of (6, 6) it does not */
    smelt_node *y = smelt_add(g, smelt_reshape(g, x, 2, (int64_t[]){2, 12}), smelt_scalar(g, 1));
    p = t_plan(ctx, g, 1, &y, 3);
    in = t_rand(ctx, &r, SMELT_F32, SHP(6, 6));
    smelt_tensor *out = NULL;
    T_ERR(ctx, smelt_plan_run(p, 1, &in, 1, &out), SMELT_ERR_SHAPE,
          "reshape: at the run-time shapes, cannot reshape (6, 6) (36 elements) into (2, 12)");
    smelt_tensor_free(in);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* Inputs with strides of their own (transposed, stepped): views compose
 * with them; a reshape they cannot express is gathered on the host. */
Test(layout, strided_inputs)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F64, SHP(6, 4));
    smelt_node *outs[] = {smelt_mul(g, smelt_reshape(g, x, 1, (int64_t[]){-1}), smelt_scalar(g, 3)),
                          smelt_add(g, smelt_transpose(g, x, NULL), smelt_flip(g, smelt_transpose(g, x, NULL), 1)),
                          smelt_reduce(g, SMELT_OP_SUM, smelt_reshape(g, x, 3, (int64_t[]){3, 2, 4}), 1, (int[]){1}, 0)};
    trng r;
    trng_init(&r, 11);
    smelt_tensor *base = t_rand(ctx, &r, SMELT_F64, SHP(4, 12)), *tr = NULL, *v = NULL, *dense = NULL;
    T_OK(ctx, smelt_tensor_slice(base, 1, 0, 12, 2, &v)); /* (4, 6), stepped */
    T_OK(ctx, smelt_tensor_transpose(v, (int[]){1, 0}, &tr)); /* (6, 4), strided both ways */
    T_OK(ctx, smelt_tensor_contiguous(tr, &dense));
    smelt_tensor *ref[3], *got[3] = {0};
    t_reference(ctx, g, 3, outs, 1, &dense, ref);
    for (int opt = 0; opt <= 3; opt += 3) {
        smelt_plan *p = t_plan(ctx, g, 3, outs, opt);
        t_run(p, 1, &tr, 3, got);
        for (int o = 0; o < 3; o++)
            t_expect_match("strided input", got[o], ref[o], (t_tol){.ulps = 2});
        t_free_all(got, 3);
        smelt_plan_free(p);
    }
    t_free_all(ref, 3);
    smelt_tensor_free(base), smelt_tensor_free(v), smelt_tensor_free(tr), smelt_tensor_free(dense);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* A kernel that reads a value and a view of it never writes over that
 * value in place (memory plans at opt_level 2 and 3), nor over a donated
 * input it reads through a view. */
Test(layout, no_in_place_through_a_view)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(64, 64));
    smelt_node *e = smelt_unary(g, SMELT_OP_BARRIER, smelt_unary(g, SMELT_OP_EXP, x));
    smelt_node *y = smelt_unary(g, SMELT_OP_TANH, smelt_sub(g, e, smelt_transpose(g, e, NULL)));
    trng r;
    trng_init(&r, 12);
    smelt_tensor *in = t_rand(ctx, &r, SMELT_F32, SHP(64, 64)), *ref, *got = NULL;
    t_reference(ctx, g, 1, &y, 1, &in, &ref);
    for (int opt = 2; opt <= 3; opt++) {
        smelt_plan *p = t_plan(ctx, g, 1, &y, opt);
        t_run(p, 1, &in, 1, &got);
        t_expect_match("e - e.T", got, ref, (t_tol){.ulps = 8, .atol = 1e-6});
        smelt_tensor_free(got);
        got = NULL;
        smelt_plan_free(p);
    }
    /* x = x.T * 2 with x donated: read through a view, so not in place */
    smelt_node *z = smelt_mul(g, smelt_transpose(g, x, NULL), smelt_scalar(g, 2));
    smelt_plan_opts o;
    smelt_plan_opts_init(&o);
    o.donate = (int[]){0};
    o.n_donate = 1;
    smelt_plan *p = NULL;
    T_OK(ctx, smelt_plan_new(ctx, g, 1, &z, &o, &p));
    smelt_tensor *x0 = NULL;
    T_OK(ctx, smelt_tensor_contiguous(in, &x0));
    T_OK(ctx, smelt_plan_run(p, 1, &in, 1, &in));
    for (int i = 0; i < 64; i++)
        for (int j = 0; j < 64; j++)
            cr_assert_eq(smelt_tensor_get(in, i * 64 + j), 2 * smelt_tensor_get(x0, j * 64 + i), "[%d, %d]", i, j);
    cr_assert_eq(t_stats(p).donated_inplace, 0);
    smelt_tensor_free(x0), smelt_tensor_free(in), smelt_tensor_free(ref);
    smelt_plan_free(p);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* Graph files carry views: saved, loaded, the same bits. */
Test(layout, graph_file_round_trip)
{
    smelt_ctx *ctx = t_ctx();
    char path[] = "/tmp/smelt-layout-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    close(fd);
    for (int c = 0; c < NELEMS(layout_cases); c++) {
        smelt_node *y;
        smelt_tensor *in[2], *a = NULL, *b = NULL;
        smelt_graph *g = layout_setup(ctx, c, &y, in), *g2 = NULL;
        T_OK(ctx, smelt_graph_save(g, 1, &y, path));
        int n_out = 0;
        smelt_node **outs = NULL;
        T_OK(ctx, smelt_graph_load(ctx, path, &g2, &n_out, &outs));
        cr_assert_eq(n_out, 1);
        smelt_plan *p = t_plan(ctx, g, 1, &y, 3), *p2 = t_plan(ctx, g2, 1, outs, 3);
        t_run(p, 2, in, 1, &a);
        t_run(p2, 2, in, 1, &b);
        cr_assert(t_bitwise_equal(a, b), "%s: the loaded graph differs", layout_cases[c].what);
        smelt_tensor_free(a), smelt_tensor_free(b), t_free_all(in, 2);
        smelt_plan_free(p), smelt_plan_free(p2);
        smelt_free(outs);
        smelt_graph_free(g), smelt_graph_free(g2);
    }
    unlink(path);
    smelt_ctx_free(ctx);
}

/* Bad parameters are sticky errors that name the fault. */
Test(layout, builder_errors)
{
    smelt_ctx *ctx = t_ctx();
    struct {
        int kind;
        const char *msg;
    } cases[] = {
        {0, "reshape: cannot reshape (2, 3) (6 elements) into (4,)"},
        {1, "reshape: can only specify one unknown dimension (-1)"},
        {2, "reshape: dimension 0 is -3 (a size, or -1 to infer it)"},
        {3, "transpose: axis 2 is out of bounds (perm must hold each axis of 2 once)"},
        {4, "transpose: axis 1 is repeated"},
        {5, "slice: step cannot be zero"},
        {6, "slice: axis 2 is out of bounds for an array of rank 2"},
        {7, "squeeze: axis 1 has size 3 (only an axis of size 1 can be removed)"},
        {8, "expand_dims: axis 4 is out of bounds for an array of rank 3"},
        {9, "broadcast_to: cannot broadcast (2, 3) to (2, 4)"},
        {10, "reshape: shape is NULL"},
        {11, "cannot reshape (2, 3) into a shape of 4 elements and one inferred dimension"},
    };
    for (int c = 0; c < NELEMS(cases); c++) {
        smelt_graph *g = t_graph(ctx);
        smelt_node *x = smelt_input(g, "x", SMELT_F32, SHP(2, 3)), *y = NULL;
        switch (cases[c].kind) {
        case 0: y = smelt_reshape(g, x, 1, (int64_t[]){4}); break;
        case 1: y = smelt_reshape(g, x, 2, (int64_t[]){-1, -1}); break;
        case 2: y = smelt_reshape(g, x, 2, (int64_t[]){-3, 2}); break;
        case 3: y = smelt_transpose(g, x, (int[]){2, 0}); break;
        case 4: y = smelt_transpose(g, x, (int[]){1, 1}); break;
        case 5: y = smelt_slice(g, x, 0, 0, 1, 0); break;
        case 6: y = smelt_slice(g, x, 2, 0, 1, 1); break;
        case 7: y = smelt_squeeze(g, x, 1); break;
        case 8: y = smelt_expand_dims(g, x, 4); break;
        case 9: y = smelt_broadcast_to(g, x, 2, (int64_t[]){2, 4}); break;
        case 10: y = smelt_reshape(g, x, 2, NULL); break;
        default: y = smelt_reshape(g, x, 2, (int64_t[]){4, -1}); break;
        }
        cr_assert_null(y, "case %d accepted", c);
        cr_assert(t_contains(smelt_graph_errmsg(g), cases[c].msg), "case %d: '%s' lacks '%s'", c,
                  smelt_graph_errmsg(g), cases[c].msg);
        smelt_graph_free(g);
    }
    cr_assert_null(smelt_transpose(NULL, NULL, NULL));
    smelt_ctx_free(ctx);
}

/* Large kernels that read a transposed operand run tile by tile, with the
 * ends of both dimensions after the tiles (sizes that are no multiple of
 * the tile): the same values as the reference, every thread count. */
Test(layout, tiled_transposed_reads, .timeout = 120)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_F32, SHP(300, 257)), *b = smelt_input(g, "b", SMELT_F32, SHP(257, 300));
    smelt_node *c = smelt_input(g, "c", SMELT_F64, SHP(3, 150, 130));
    smelt_node *u = smelt_input(g, "u", SMELT_U8, SHP(300, 257)), *h = smelt_input(g, "h", SMELT_F16, SHP(300, 257));
    /* the tiles copy transposed inputs of 1, 2, 4 and 8 bytes, walked
     * forwards and backwards along either dimension */
    smelt_node *outs[] = {smelt_add(g, smelt_transpose(g, a, NULL), b),
                          smelt_mul(g, smelt_transpose(g, c, (int[]){0, 2, 1}), smelt_scalar(g, 3)),
                          smelt_sub(g, smelt_flip(g, smelt_transpose(g, a, NULL), 0), b),
                          smelt_sub(g, smelt_flip(g, smelt_transpose(g, a, NULL), 1), b),
                          smelt_add(g, smelt_transpose(g, u, NULL), smelt_transpose(g, h, NULL))};
    enum { NOUT = sizeof outs / sizeof outs[0] };
    trng r;
    trng_init(&r, 14);
    smelt_tensor *in[] = {t_rand(ctx, &r, SMELT_F32, SHP(300, 257)), t_rand(ctx, &r, SMELT_F32, SHP(257, 300)),
                          t_rand(ctx, &r, SMELT_F64, SHP(3, 150, 130)), t_rand(ctx, &r, SMELT_U8, SHP(300, 257)),
                          t_rand(ctx, &r, SMELT_F16, SHP(300, 257))};
    smelt_tensor *ref[NOUT], *got[NOUT] = {0};
    t_reference(ctx, g, NOUT, outs, 5, in, ref);
    const char *backends[] = {"TCC", "CC"};
    for (int b2 = 0; b2 < 2; b2++)
        for (int th = 1; th <= 4; th += 3) {
            T_OK(ctx, smelt_ctx_set_threads(ctx, th));
            smelt_plan_opts o;
            smelt_plan_opts_init(&o);
            o.backend = backends[b2];
            smelt_plan *p = NULL;
            T_OK(ctx, smelt_plan_new(ctx, g, NOUT, outs, &o, &p));
            t_run(p, 5, in, NOUT, got);
            for (int k = 0; k < NOUT; k++)
                t_expect_match(backends[b2], got[k], ref[k], T_EXACT);
            t_free_all(got, NOUT);
            smelt_plan_free(p);
        }
    t_free_all(ref, NOUT), t_free_all(in, 5);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* Reductions that read a concat or a pad cut along their kept axes run once
 * per piece (no copy) at sizes that split them over threads: row sums,
 * column sums and softmax rows (a row program), against the reference and
 * bitwise equal to the unfused plans, on 1 and 4 threads. */
Test(layout, reductions_of_pieces_threads, .timeout = 120)
{
    smelt_ctx *ctx = t_ctx();
    smelt_graph *g = t_graph(ctx);
    smelt_node *a = smelt_input(g, "a", SMELT_F32, SHP(300, 257)), *b = smelt_input(g, "b", SMELT_F32, SHP(200, 257));
    smelt_node *c = smelt_input(g, "c", SMELT_F32, SHP(2, 70000)), *d = smelt_input(g, "d", SMELT_F32, SHP(3, 70000));
    smelt_node *ab = smelt_concat(g, 2, (smelt_node *[]){a, b}, 0);
    smelt_node *pa = smelt_pad(g, a, (int64_t[]){3, 5, 0, 0}, 0.25);
    smelt_node *e = smelt_unary(g, SMELT_OP_EXP, smelt_sub(g, ab, smelt_reduce(g, SMELT_OP_MAX, ab, 1, (int[]){-1}, true)));
    smelt_node *outs[] = {smelt_reduce(g, SMELT_OP_SUM, ab, 1, (int[]){1}, false),
                          smelt_reduce(g, SMELT_OP_SUM, smelt_transpose(g, ab, NULL), 1, (int[]){0}, false),
                          smelt_div(g, e, smelt_reduce(g, SMELT_OP_SUM, e, 1, (int[]){-1}, true)),
                          smelt_reduce(g, SMELT_OP_MAX, pa, 1, (int[]){1}, false),
                          /* few long rows: each row's chunks on the threads, then combined */
                          smelt_reduce(g, SMELT_OP_SUM, smelt_concat(g, 2, (smelt_node *[]){c, d}, 0), 1, (int[]){1},
                                       false)};
    enum { NOUT = sizeof outs / sizeof outs[0] };
    trng r;
    trng_init(&r, 15);
    smelt_tensor *in[] = {t_rand(ctx, &r, SMELT_F32, SHP(300, 257)), t_rand(ctx, &r, SMELT_F32, SHP(200, 257)),
                          t_rand(ctx, &r, SMELT_F32, SHP(2, 70000)), t_rand(ctx, &r, SMELT_F32, SHP(3, 70000))};
    smelt_tensor *ref[NOUT], *got[NOUT] = {0}, *unf[NOUT] = {0};
    t_reference(ctx, g, NOUT, outs, 4, in, ref);
    const char *backends[] = {"TCC", "CC"};
    for (int b2 = 0; b2 < 2; b2++)
        for (int th = 1; th <= 4; th += 3) {
            T_OK(ctx, smelt_ctx_set_threads(ctx, th));
            smelt_plan *p[2] = {NULL, NULL};
            for (int lvl = 0; lvl < 2; lvl++) {
                smelt_plan_opts o;
                smelt_plan_opts_init(&o);
                o.backend = backends[b2];
                o.opt_level = lvl ? 3 : 0;
                T_OK(ctx, smelt_plan_new(ctx, g, NOUT, outs, &o, &p[lvl]));
            }
            smelt_plan_stats s;
            smelt_plan_get_stats(p[1], &s);
            cr_expect_eq(s.copies, 0, "%s: %d copies", backends[b2], (int)s.copies);
            cr_expect_eq(smelt_plan_num_kernels(p[1]), 4, "%s: %d kernels", backends[b2],
                         smelt_plan_num_kernels(p[1]));
            t_run(p[0], 4, in, NOUT, unf);
            t_run(p[1], 4, in, NOUT, got);
            for (int k = 0; k < NOUT; k++) {
                t_expect_match(backends[b2], got[k], ref[k], t_chain_tol(SMELT_F32));
                cr_expect(t_bitwise_equal(got[k], unf[k]), "%s, %d threads: output %d fused != unfused",
                          backends[b2], th, k);
            }
            t_free_all(got, NOUT), t_free_all(unf, NOUT);
            smelt_plan_free(p[0]), smelt_plan_free(p[1]);
        }
    t_free_all(ref, NOUT), t_free_all(in, 4);
    smelt_graph_free(g);
    smelt_ctx_free(ctx);
}

/* Pieces at the edges: a reduction of a concat of rows run with rows of no
 * elements (the parts all empty: sums of nothing, and max's clear error),
 * and a member reading a concat whose only cut lies on a size-1 axis that
 * a reshape drops (it must not join a reduction kernel at another shape:
 * its values line up with the results, not the rows). */
Test(layout, reductions_of_pieces_edges)
{
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 16);
    for (int b2 = 0; b2 < 2; b2++) {
        smelt_plan_opts o;
        smelt_plan_opts_init(&o);
        o.backend = b2 ? "CC" : "TCC";
        smelt_graph *g = t_graph(ctx);
        smelt_node *a = smelt_input(g, "a", SMELT_F32, SHP(2, 5)), *b = smelt_input(g, "b", SMELT_F32, SHP(3, 5));
        smelt_node *ab = smelt_concat(g, 2, (smelt_node *[]){a, b}, 0);
        smelt_node *outs[] = {smelt_reduce(g, SMELT_OP_SUM, ab, 1, (int[]){1}, false),
                              smelt_reduce(g, SMELT_OP_MAX, ab, 1, (int[]){1}, false)};
        smelt_plan *p = NULL;
        T_OK(ctx, smelt_plan_new(ctx, g, 1, outs, &o, &p));
        smelt_tensor *in[] = {t_rand(ctx, &r, SMELT_F32, SHP(2, 0)), t_rand(ctx, &r, SMELT_F32, SHP(3, 0))};
        smelt_tensor *got = NULL;
        T_OK(ctx, smelt_plan_run(p, 2, in, 1, &got));
        cr_assert_eq(smelt_tensor_numel(got), 5);
        for (int i = 0; i < 5; i++)
            cr_expect_eq(((const float *)smelt_tensor_data(got))[i], 0.0f, "%s: sum of no elements", o.backend);
        smelt_tensor_free(got);
        smelt_plan_free(p);
        T_OK(ctx, smelt_plan_new(ctx, g, 1, outs + 1, &o, &p));
        got = NULL;
        T_ERR(ctx, smelt_plan_run(p, 2, in, 1, &got), SMELT_ERR_SHAPE, "max of an empty array");
        smelt_plan_free(p);
        t_free_all(in, 2);
        smelt_graph_free(g);

        g = t_graph(ctx);
        smelt_node *cls = smelt_input(g, "cls", SMELT_F32, SHP(1, 40)), *x = smelt_input(g, "x", SMELT_F32, SHP(5, 40));
        smelt_node *e = smelt_input(g, "e", SMELT_F32, SHP(6, 0)), *y = smelt_input(g, "y", SMELT_F32, SHP(6, 1));
        smelt_node *v = smelt_reshape(g, smelt_concat(g, 2, (smelt_node *[]){e, y}, 1), 1, (int64_t[]){6});
        smelt_node *m = smelt_reduce(g, SMELT_OP_MAX, smelt_concat(g, 2, (smelt_node *[]){cls, x}, 0), 1,
                                     (int[]){1}, false);
        smelt_node *out = smelt_add(g, m, v);
        smelt_tensor *in2[] = {t_rand(ctx, &r, SMELT_F32, SHP(1, 40)), t_rand(ctx, &r, SMELT_F32, SHP(5, 40)),
                               t_rand(ctx, &r, SMELT_F32, SHP(6, 0)), t_rand(ctx, &r, SMELT_F32, SHP(6, 1))};
        smelt_tensor *ref = NULL, *got2[2] = {0};
        t_reference(ctx, g, 1, &out, 4, in2, &ref);
        for (int lvl = 0; lvl < 2; lvl++) {
            o.opt_level = lvl ? 3 : 0;
            T_OK(ctx, smelt_plan_new(ctx, g, 1, &out, &o, &p));
            t_run(p, 4, in2, 1, &got2[lvl]);
            t_expect_match(o.backend, got2[lvl], ref, T_EXACT);
            smelt_plan_free(p);
        }
        cr_expect(t_bitwise_equal(got2[0], got2[1]), "%s: fused != unfused", o.backend);
        t_free_all(got2, 2), t_free_all(in2, 4);
        smelt_tensor_free(ref);
        smelt_graph_free(g);
    }
    smelt_ctx_free(ctx);
}
