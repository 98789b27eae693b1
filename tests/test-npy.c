/* .npy files (src/frontends/npy.c): round trips of every dtype and shape, views,
 * format versions 1.0/2.0/3.0, big-endian data, Fortran order, malformed and
 * lying files (errors, never out-of-bounds reads), and a mutation fuzz run.
 * Files NumPy writes and reads are checked end to end by tests/test-cli.py. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common.h"

/* A fresh folder for the test's files. */
static const char *tmpdir(void)
{
    static char dir[64];
    snprintf(dir, sizeof dir, "/tmp/smelt-npy-XXXXXX");
    cr_assert_not_null(mkdtemp(dir));
    return dir;
}

/* A .npy file in buf: version major.0, the header dict (padded so the data
 * starts at a multiple of 64, ending in '\n'), then the data. */
static size_t make_npy(unsigned char *buf, int major, const char *dict, const void *data, size_t n)
{
    size_t pre = major == 1 ? 10 : 12, hl = strlen(dict) + 1;
    while ((pre + hl) % 64)
        hl++;
    memcpy(buf, "\x93NUMPY", 6);
    buf[6] = (unsigned char)major;
    buf[7] = 0;
    for (size_t i = 0; i < pre - 8; i++)
        buf[8 + i] = (unsigned char)(hl >> (8 * i));
    memset(buf + pre, ' ', hl);
    memcpy(buf + pre, dict, strlen(dict));
    buf[pre + hl - 1] = '\n';
    if (n)
        memcpy(buf + pre + hl, data, n);
    return pre + hl + n;
}

static void write_bytes(const char *path, const void *b, size_t n)
{
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    cr_assert_eq(fwrite(b, 1, n, f), n);
    fclose(f);
}

Test(npy, round_trip_every_dtype_and_shape)
{
    smelt_ctx *ctx = t_ctx();
    const char *dir = tmpdir();
    static const struct {
        int nd;
        int64_t s[4];
    } shapes[] = {{0, {0}}, {1, {7}}, {3, {3, 4, 5}}, {2, {2, 0}}, {4, {1, 2, 1, 3}}};
    trng r;
    trng_init(&r, 0);
    for (int d = 0; d < SMELT_DTYPE_COUNT; d++)
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            char path[128];
            snprintf(path, sizeof path, "%s/t%d_%zu.npy", dir, d, k);
            smelt_tensor *t = t_rand(ctx, &r, (smelt_dtype)d, shapes[k].nd, shapes[k].s);
            if (d == SMELT_BF16) { /* NumPy has no bfloat16 */
                T_ERR(ctx, smelt_npy_save(ctx, path, t), SMELT_ERR_DTYPE, "NumPy has no bf16 dtype");
                cr_assert_neq(access(path, F_OK), 0, "%s written", path);
                smelt_tensor_free(t);
                continue;
            }
            T_OK(ctx, smelt_npy_save(ctx, path, t));
            smelt_tensor *u = NULL;
            T_OK(ctx, smelt_npy_load(ctx, path, &u));
            cr_assert(t_bitwise_equal(t, u), "%s: %s %zu differs after a round trip", path,
                      smelt_dtype_name((smelt_dtype)d), k);
            cr_assert(smelt_tensor_is_contiguous(u));
            smelt_dtype dt;
            int nd;
            int64_t shp[SMELT_MAX_DIMS];
            T_OK(ctx, smelt_npy_info(ctx, path, &dt, &nd, shp));
            cr_assert_eq(dt, (smelt_dtype)d);
            cr_assert_eq(nd, shapes[k].nd);
            for (int i = 0; i < nd; i++)
                cr_assert_eq(shp[i], shapes[k].s[i]);
            /* the file is what NumPy writes: 64-byte aligned header, '\n' */
            FILE *f = fopen(path, "rb");
            unsigned char h[10];
            cr_assert_eq(fread(h, 1, 10, f), 10u);
            fclose(f);
            size_t hl = (size_t)h[8] | (size_t)h[9] << 8;
            cr_assert_eq((10 + hl) % 64, 0u);
            smelt_tensor_free(t);
            smelt_tensor_free(u);
            unlink(path);
        }
    rmdir(dir);
    smelt_ctx_free(ctx);
}

Test(npy, views_are_written_in_c_order)
{
    smelt_ctx *ctx = t_ctx();
    const char *dir = tmpdir();
    trng r;
    trng_init(&r, 1);
    int64_t shp[] = {4, 6};
    smelt_tensor *t = t_rand(ctx, &r, SMELT_F64, 2, shp), *tt = NULL, *sl = NULL, *u = NULL;
    int perm[] = {1, 0};
    T_OK(ctx, smelt_tensor_transpose(t, perm, &tt));
    T_OK(ctx, smelt_tensor_slice(tt, 0, 1, 6, 2, &sl)); /* (3, 4), strided both ways */
    char path[128];
    snprintf(path, sizeof path, "%s/v.npy", dir);
    T_OK(ctx, smelt_npy_save(ctx, path, sl));
    T_OK(ctx, smelt_npy_load(ctx, path, &u));
    cr_assert_eq(smelt_tensor_ndim(u), 2);
    cr_assert_eq(smelt_tensor_shape(u)[0], 3);
    cr_assert_eq(smelt_tensor_shape(u)[1], 4);
    for (int64_t i = 0; i < 12; i++)
        cr_assert_eq(smelt_tensor_get(u, i), smelt_tensor_get(sl, i));
    smelt_tensor_free(u), smelt_tensor_free(sl), smelt_tensor_free(tt), smelt_tensor_free(t);
    unlink(path);
    rmdir(dir);
    smelt_ctx_free(ctx);
}

Test(npy, versions_1_2_3)
{
    smelt_ctx *ctx = t_ctx();
    double v[3] = {1.5, -2.25, 1e300};
    unsigned char buf[512];
    for (int major = 1; major <= 3; major++) {
        size_t n = make_npy(buf, major, "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }", v, sizeof v);
        smelt_tensor *t = NULL;
        T_OK(ctx, smelt_npy_read(ctx, buf, n, &t));
        cr_assert_eq(smelt_tensor_dtype(t), SMELT_F64);
        for (int i = 0; i < 3; i++)
            cr_assert_eq(smelt_tensor_get(t, i), v[i], "version %d.0, element %d", major, i);
        smelt_tensor_free(t);
    }
    smelt_ctx_free(ctx);
}

Test(npy, header_spellings)
{
    smelt_ctx *ctx = t_ctx();
    static const char *const dicts[] = {
        "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 2), }",
        "{'shape': (2, 2), 'fortran_order': False, 'descr': '<i4'}",
        "{\"descr\": \"<i4\", \"fortran_order\": False, \"shape\": (2,2)}",
        "{ 'descr' : '<i4' , 'fortran_order' : False , 'shape' : ( 2 , 2 , ) , }",
        "{'descr': '<i4', 'fortran_order': False, 'shape': (2L, 2L), }",
        "{'descr': '=i4', 'fortran_order': False, 'shape': (2, 2), }",
        "{'descr': 'i4', 'fortran_order': False, 'shape': (2, 2), }",
    };
    int32_t v[4] = {1, -2, 3, 2147483647};
    unsigned char buf[512];
    for (size_t k = 0; k < sizeof dicts / sizeof dicts[0]; k++) {
        size_t n = make_npy(buf, 1, dicts[k], v, sizeof v);
        smelt_tensor *t = NULL;
        T_OK(ctx, smelt_npy_read(ctx, buf, n, &t));
        cr_assert_eq(smelt_tensor_ndim(t), 2, "%s", dicts[k]);
        for (int i = 0; i < 4; i++)
            cr_assert_eq(smelt_tensor_get(t, i), v[i], "%s", dicts[k]);
        smelt_tensor_free(t);
    }
    /* one-byte types take any byte-order mark */
    static const char *const u8s[] = {"|u1", "<u1", ">u1", "=u1"};
    unsigned char bytes[3] = {0, 7, 255};
    for (size_t k = 0; k < 4; k++) {
        char d[128];
        snprintf(d, sizeof d, "{'descr': '%s', 'fortran_order': False, 'shape': (3,), }", u8s[k]);
        size_t n = make_npy(buf, 1, d, bytes, 3);
        smelt_tensor *t = NULL;
        T_OK(ctx, smelt_npy_read(ctx, buf, n, &t));
        cr_assert_eq(smelt_tensor_dtype(t), SMELT_U8);
        cr_assert_eq(smelt_tensor_get(t, 2), 255);
        smelt_tensor_free(t);
    }
    smelt_ctx_free(ctx);
}

Test(npy, big_endian_is_swapped)
{
    smelt_ctx *ctx = t_ctx();
    unsigned char buf[512];
    /* >f4 1.5 = 3f c0 00 00, >i8 -2 */
    unsigned char f4[] = {0x3f, 0xc0, 0, 0, 0xc0, 0x20, 0, 0}; /* 1.5, -2.5 */
    size_t n = make_npy(buf, 1, "{'descr': '>f4', 'fortran_order': False, 'shape': (2,), }", f4, 8);
    smelt_tensor *t = NULL;
    T_OK(ctx, smelt_npy_read(ctx, buf, n, &t));
    cr_assert_eq(smelt_tensor_get(t, 0), 1.5);
    cr_assert_eq(smelt_tensor_get(t, 1), -2.5);
    smelt_tensor_free(t);
    unsigned char i8[16] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xfe, 0, 0, 0, 0, 0, 0, 0x01, 0x02};
    n = make_npy(buf, 1, "{'descr': '>i8', 'fortran_order': False, 'shape': (2,), }", i8, 16);
    T_OK(ctx, smelt_npy_read(ctx, buf, n, &t));
    cr_assert_eq(smelt_tensor_get(t, 0), -2);
    cr_assert_eq(smelt_tensor_get(t, 1), 258);
    smelt_tensor_free(t);
    unsigned char f2[6] = {0x3c, 0x00, 0xfb, 0xff, 0x00, 0x01}; /* 1, -65504, 2^-24 */
    n = make_npy(buf, 1, "{'descr': '>f2', 'fortran_order': False, 'shape': (3,), }", f2, 6);
    T_OK(ctx, smelt_npy_read(ctx, buf, n, &t));
    cr_assert_eq(smelt_tensor_dtype(t), SMELT_F16);
    cr_assert_eq(smelt_tensor_get(t, 0), 1.0);
    cr_assert_eq(smelt_tensor_get(t, 1), -65504.0);
    cr_assert_eq(smelt_tensor_get(t, 2), 0x1p-24);
    smelt_tensor_free(t);
    unsigned char f8[8] = {0x40, 0x09, 0x21, 0xfb, 0x54, 0x44, 0x2d, 0x18}; /* pi */
    n = make_npy(buf, 1, "{'descr': '>f8', 'fortran_order': False, 'shape': (), }", f8, 8);
    T_OK(ctx, smelt_npy_read(ctx, buf, n, &t));
    cr_assert_eq(smelt_tensor_get(t, 0), M_PI);
    smelt_tensor_free(t);
    smelt_ctx_free(ctx);
}

Test(npy, fortran_order_is_a_strided_view)
{
    smelt_ctx *ctx = t_ctx();
    unsigned char buf[1024];
    /* logical a[i][j][k] = 100 i + 10 j + k of shape (2, 3, 4), stored with
     * i fastest */
    int32_t data[24];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 4; k++)
                data[i + 2 * (j + 3 * k)] = 100 * i + 10 * j + k;
    size_t n = make_npy(buf, 1, "{'descr': '<i4', 'fortran_order': True, 'shape': (2, 3, 4), }", data, sizeof data);
    smelt_tensor *t = NULL;
    T_OK(ctx, smelt_npy_read(ctx, buf, n, &t));
    cr_assert_eq(smelt_tensor_ndim(t), 3);
    cr_assert_eq(smelt_tensor_shape(t)[0], 2);
    cr_assert_eq(smelt_tensor_shape(t)[2], 4);
    cr_assert_not(smelt_tensor_is_contiguous(t));
    for (int64_t x = 0; x < 24; x++)
        cr_assert_eq(smelt_tensor_get(t, x), 100 * (x / 12) + 10 * (x / 4 % 3) + x % 4, "element %lld",
                     (long long)x);
    /* a strided input works in an expression, and a saved copy is C order */
    smelt_tensor *out = NULL;
    const char *names[] = {"a"};
    T_OK(ctx, smelt_eval(ctx, "a * 2 + 1", names, &t, 1, &out));
    for (int64_t x = 0; x < 24; x++)
        cr_assert_eq(smelt_tensor_get(out, x), 2 * smelt_tensor_get(t, x) + 1);
    smelt_tensor_free(out);
    smelt_tensor_free(t);
    /* 1-D Fortran order is C order */
    n = make_npy(buf, 1, "{'descr': '<i4', 'fortran_order': True, 'shape': (5,), }", data, 20);
    T_OK(ctx, smelt_npy_read(ctx, buf, n, &t));
    cr_assert(smelt_tensor_is_contiguous(t));
    smelt_tensor_free(t);
    smelt_ctx_free(ctx);
}

Test(npy, bool_bytes_are_normalised)
{
    smelt_ctx *ctx = t_ctx();
    unsigned char buf[512], b[4] = {0, 1, 2, 255};
    size_t n = make_npy(buf, 1, "{'descr': '|b1', 'fortran_order': False, 'shape': (4,), }", b, 4);
    smelt_tensor *t = NULL;
    T_OK(ctx, smelt_npy_read(ctx, buf, n, &t));
    const uint8_t *d = smelt_tensor_data(t);
    cr_assert(d[0] == 0 && d[1] == 1 && d[2] == 1 && d[3] == 1);
    smelt_tensor_free(t);
    smelt_ctx_free(ctx);
}

typedef struct bad {
    const char *dict; /* NULL: raw bytes below */
    int extra;        /* data bytes more (+) or fewer (-) than the header says */
    int status;
    const char *msg;
} bad;

Test(npy, malformed_headers_are_errors)
{
    static const bad cases[] = {
        {"{'descr': '<f16', 'fortran_order': False, 'shape': (2,), }", 0, SMELT_ERR_DTYPE, "'<f16' (long double)"},
        {"{'descr': '<c16', 'fortran_order': False, 'shape': (2,), }", 0, SMELT_ERR_DTYPE, "(complex)"},
        {"{'descr': '<U3', 'fortran_order': False, 'shape': (2,), }", 0, SMELT_ERR_DTYPE, "(strings)"},
        {"{'descr': '|f4', 'fortran_order': False, 'shape': (2,), }", 0, SMELT_ERR_DTYPE, "unsupported dtype '|f4'"},
        {"{'descr': '<i2', 'fortran_order': False, 'shape': (2,), }", 0, SMELT_ERR_DTYPE, "smelt supports <f2 <f4 <f8 <i4 <i8 |u1 |b1"},
        {"{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (2,), }", 0, SMELT_ERR_DTYPE, "structured dtypes"},
        {"{'descr': '<f4', 'fortran_order': Maybe, 'shape': (2,), }", 0, SMELT_ERR_IO, "fortran_order is not True or False"},
        {"{'descr': '<f4', 'shape': (2,), }", 0, SMELT_ERR_IO, "no 'fortran_order' key"},
        {"{'descr': '<f4', 'fortran_order': False}", 0, SMELT_ERR_IO, "no 'shape' key"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), 'x': 1}", 0, SMELT_ERR_IO, "unexpected key 'x'"},
        {"{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (2,)}", 0, SMELT_ERR_IO, "unexpected key 'descr'"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (-2,), }", 0, SMELT_ERR_IO, "bad shape"},
        /* what NumPy rejects: a leading zero (Python's literals), a control character in a string */
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (0002,), }", 0, SMELT_ERR_IO, "leading zero"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1, 02), }", 0, SMELT_ERR_IO, "leading zero"},
        {"{'descr': '<f4\x01', 'fortran_order': False, 'shape': (2,), }", 0, SMELT_ERR_IO, "unexpected string"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': [2], }", 0, SMELT_ERR_IO, "shape is not a tuple"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", 0, SMELT_ERR_SHAPE, "more than 8 dimensions"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 0, SMELT_ERR_SHAPE, "shape (4294967296, 4294967296) is too large"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999,), }", 0, SMELT_ERR_SHAPE, "too large"},
        /* a zero dimension does not hide the others' size (strides overflowed) */
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (0, 4611686018427387904, 4611686018427387904), }", 0, SMELT_ERR_SHAPE, "shape (0, 4611686018427387904, 4611686018427387904) is too large"},
        {"{'descr': '<f8', 'fortran_order': True, 'shape': (4611686018427387904, 0, 2), }", 0, SMELT_ERR_SHAPE, "is too large"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), } x", 0, SMELT_ERR_IO, "text after the dict"},
        {"['descr', '<f4']", 0, SMELT_ERR_IO, "not a dict"},
        {"{'descr: '<f4', 'fortran_order': False, 'shape': (2,), }", 0, SMELT_ERR_IO, "malformed .npy header"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), ", 0, SMELT_ERR_IO, "malformed .npy header"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", -1, SMELT_ERR_IO,
         "truncated .npy file: the header says f32 (2,) (8 bytes of data), the file has 7"},
        {"{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", 4, SMELT_ERR_IO,
         "extra data after the array: the header says f32 (2,) (8 bytes of data), the file has 12"},
        {"{'descr': '<f8', 'fortran_order': False, 'shape': (1000000, 1000), }", 0, SMELT_ERR_IO, "truncated .npy file"},
    };
    smelt_ctx *ctx = t_ctx();
    unsigned char buf[1024], data[64];
    memset(data, 0x3c, sizeof data);
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        size_t n = make_npy(buf, 1, cases[k].dict, data, (size_t)(8 + cases[k].extra));
        smelt_tensor *t = (smelt_tensor *)1;
        int st = smelt_npy_read(ctx, buf, n, &t);
        cr_assert_eq(st, cases[k].status, "%s: status %d, expected %d: %s", cases[k].dict, st,
                     cases[k].status, smelt_errmsg(ctx));
        cr_assert_null(t);
        cr_assert(t_contains(smelt_errmsg(ctx), cases[k].msg), "%s: message '%s' lacks '%s'",
                  cases[k].dict, smelt_errmsg(ctx), cases[k].msg);
    }
    smelt_ctx_free(ctx);
}

/* A NUL in the descr ('<f4\0') used to end it early: '<f4' was read. And
 * shapes of zeros written as Python writes them still load. */
Test(npy, nul_in_a_string_and_zero_spellings)
{
    smelt_ctx *ctx = t_ctx();
    unsigned char buf[512], data[8] = {0};
    smelt_tensor *t;
    size_t n = make_npy(buf, 1, "{'descr': '<f4@', 'fortran_order': False, 'shape': (2,), }", data, 8);
    unsigned char *at = memchr(buf, '@', n);
    cr_assert_not_null(at);
    *at = 0;
    T_ERR(ctx, smelt_npy_read(ctx, buf, n, &t), SMELT_ERR_IO, "unexpected string");
    n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (00, 0), }", data, 0);
    T_OK(ctx, smelt_npy_read(ctx, buf, n, &t));
    cr_assert_eq(smelt_tensor_numel(t), 0);
    smelt_tensor_free(t);
    smelt_ctx_free(ctx);
}

Test(npy, malformed_preambles_are_errors)
{
    smelt_ctx *ctx = t_ctx();
    unsigned char buf[512];
    smelt_tensor *t;
    T_ERR(ctx, smelt_npy_read(ctx, "", 0, &t), SMELT_ERR_IO, "empty file");
    T_ERR(ctx, smelt_npy_read(ctx, "\x93NUM", 4, &t), SMELT_ERR_IO, "truncated .npy file");
    T_ERR(ctx, smelt_npy_read(ctx, "PK\x03\x04 this is a zip file", 24, &t), SMELT_ERR_IO, "not a .npy file");
    size_t n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", "abcd", 4);
    buf[6] = 4;
    T_ERR(ctx, smelt_npy_read(ctx, buf, n, &t), SMELT_ERR_IO, "unsupported .npy format version 4.0");
    buf[6] = 1;
    buf[7] = 1;
    T_ERR(ctx, smelt_npy_read(ctx, buf, n, &t), SMELT_ERR_IO, "version 1.1");
    buf[7] = 0;
    /* a header length that runs past the end of the file */
    buf[8] = 0xff;
    buf[9] = 0x7f;
    T_ERR(ctx, smelt_npy_read(ctx, buf, n, &t), SMELT_ERR_IO, "the header says 32767 bytes");
    /* version 2.0 with a 4 GiB header */
    n = make_npy(buf, 2, "{'descr': '<f4', 'fortran_order': False, 'shape': (), }", "abcd", 4);
    buf[8] = buf[9] = buf[10] = buf[11] = 0xff;
    T_ERR(ctx, smelt_npy_read(ctx, buf, n, &t), SMELT_ERR_IO, "larger than");
    T_ERR(ctx, smelt_npy_read(ctx, buf, 11, &t), SMELT_ERR_IO, "truncated");
    smelt_ctx_free(ctx);
}

Test(npy, file_errors)
{
    smelt_ctx *ctx = t_ctx();
    const char *dir = tmpdir();
    smelt_tensor *t = NULL;
    char path[128];
    snprintf(path, sizeof path, "%s/none.npy", dir);
    T_ERR(ctx, smelt_npy_load(ctx, path, &t), SMELT_ERR_IO, "cannot open");
    T_ERR(ctx, smelt_npy_info(ctx, path, NULL, NULL, NULL), SMELT_ERR_IO, "No such file");
    /* a folder says so (it was "empty file"); a FIFO is an error at once */
    T_ERR(ctx, smelt_npy_load(ctx, dir, &t), SMELT_ERR_IO, "directory");
    snprintf(path, sizeof path, "%s/fifo.npy", dir);
    cr_assert_eq(mkfifo(path, 0600), 0);
    T_ERR(ctx, smelt_npy_load(ctx, path, &t), SMELT_ERR_IO, "not a regular file");
    T_ERR(ctx, smelt_npy_info(ctx, path, NULL, NULL, NULL), SMELT_ERR_IO, "not a regular file");
    unlink(path);
    int64_t shp[] = {3};
    smelt_tensor *x = t_tensor(ctx, SMELT_F32, 1, shp);
    snprintf(path, sizeof path, "%s/no/such/dir/x.npy", dir);
    T_ERR(ctx, smelt_npy_save(ctx, path, x), SMELT_ERR_IO, "for writing");
    /* a file cut short on disk: load and info both say so */
    unsigned char buf[512];
    float v[3] = {1, 2, 3};
    size_t n = make_npy(buf, 1, "{'descr': '<f4', 'fortran_order': False, 'shape': (3,), }", v, sizeof v);
    snprintf(path, sizeof path, "%s/cut.npy", dir);
    for (size_t cut = 0; cut < n; cut += 7) {
        write_bytes(path, buf, cut);
        cr_assert_neq(smelt_npy_load(ctx, path, &t), SMELT_OK, "cut at %zu", cut);
        cr_assert_null(t);
        cr_assert_neq(smelt_npy_info(ctx, path, NULL, NULL, NULL), SMELT_OK);
    }
    write_bytes(path, buf, n);
    T_OK(ctx, smelt_npy_load(ctx, path, &t));
    cr_assert_eq(smelt_tensor_get(t, 2), 3);
    smelt_tensor_free(t);
    unlink(path);
    smelt_tensor_free(x);
    rmdir(dir);
    smelt_ctx_free(ctx);
}

Test(npy, fuzz_mutations)
{
    const char *e = getenv("SMELT_FUZZ_ITERS");
    int iters = e && atoi(e) > 0 ? atoi(e) : 4000;
    smelt_ctx *ctx = t_ctx();
    trng r;
    trng_init(&r, 3);
    unsigned char base[512], buf[600];
    double v[4] = {1, 2, 3, 4};
    static const char *const dicts[] = {
        "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }",
        "{'descr': '>f8', 'fortran_order': True, 'shape': (4,), }",
        "{'descr': '|u1', 'fortran_order': True, 'shape': (2, 4, 4), }",
    };
    for (int it = 0; it < iters; it++) {
        const char *d = dicts[trng_range(&r, 0, 2)];
        size_t n = make_npy(base, (int)trng_range(&r, 1, 3), d, v, sizeof v);
        memcpy(buf, base, n);
        int muts = (int)trng_range(&r, 1, 3);
        for (int m = 0; m < muts && n; m++) {
            size_t at = (size_t)trng_range(&r, 0, (int64_t)n - 1);
            switch (trng_range(&r, 0, 3)) {
            case 0: buf[at] = (unsigned char)trng_u64(&r); break;
            case 1: n = at; break; /* truncate */
            case 2: buf[at] = "0123456789(),'<>|=fiubTF: "[trng_range(&r, 0, 25)]; break;
            default:
                if (n + 8 < sizeof buf) {
                    memset(buf + n, 0x41, 8); /* trailing bytes */
                    n += 8;
                }
            }
        }
        /* an exact-size heap copy: reads past the end are caught by tools */
        unsigned char *copy = malloc(n ? n : 1);
        memcpy(copy, buf, n);
        smelt_tensor *t = NULL;
        if (smelt_npy_read(ctx, copy, n, &t) == SMELT_OK) {
            int64_t cnt = smelt_tensor_numel(t);
            cr_assert_leq(cnt * (int64_t)smelt_dtype_size(smelt_tensor_dtype(t)), (int64_t)n);
            for (int64_t i = 0; i < cnt; i++)
                (void)smelt_tensor_get(t, i);
            smelt_tensor_free(t);
        } else {
            cr_assert_null(t);
            cr_assert_neq(smelt_errmsg(ctx)[0], 0);
        }
        free(copy);
    }
    smelt_ctx_free(ctx);
}
