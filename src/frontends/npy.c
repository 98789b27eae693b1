/* .npy files: NumPy's array format, versions 1.0, 2.0 and 3.0.
 *
 *   "\x93NUMPY" major minor  header_len (2 bytes LE in 1.0, 4 in 2.0/3.0)
 *   header: a Python dict literal {'descr': '<f4', 'fortran_order': False,
 *           'shape': (3, 4), } padded with spaces, ending in '\n'
 *   data:   the elements, C order (or Fortran order), in descr's byte order
 *
 * The header is parsed by a small strict parser that never reads past the
 * bytes it was given; the data size must match the shape exactly. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir.h"
#include "smelt_cuda.h" /* smelt_tensor_copy_to_host */

#define MAGIC "\x93NUMPY"
#define MAX_HEADER (1u << 20)

typedef struct npyhdr {
    smelt_dtype dt;
    bool swap;    /* data is big-endian (on this host: foreign) */
    bool fortran; /* column-major data */
    int ndim;
    int64_t shape[SMELT_MAX_DIMS];
    size_t data_off; /* where the data starts */
    uint64_t nbytes; /* data size the header announces */
} npyhdr;

static bool host_is_le(void)
{
    const uint16_t one = 1;
    return *(const uint8_t *)&one == 1;
}

/* Reverse the bytes of each of the n elements of es bytes at d. */
static void swap_bytes(unsigned char *d, uint64_t n, size_t es)
{
    for (uint64_t i = 0; i < n; i++)
        for (size_t a = 0, b = es - 1; a < b; a++, b--) {
            unsigned char c = d[i * es + a];
            d[i * es + a] = d[i * es + b];
            d[i * es + b] = c;
        }
}

/* ---- header dict parser ---------------------------------------------- */

typedef struct hp {
    const char *s, *end;
    const char *what; /* file name for messages */
    smelt_ctx *ctx;
} hp;

/* An error about the header: "file: message". */
#define herr(h, st, ...) smelt__err_at((h)->ctx, st, (h)->what, 0, __VA_ARGS__)

static void skip_ws(hp *h)
{
    while (h->s < h->end && (*h->s == ' ' || *h->s == '\t' || *h->s == '\n' || *h->s == '\r'))
        h->s++;
}

static bool eat(hp *h, char c)
{
    skip_ws(h);
    return smelt__skip_char(&h->s, h->end, c);
}

/* A quoted string (no escapes are needed by the keys and dtypes we read). */
static int str(hp *h, char *out, size_t n)
{
    skip_ws(h);
    if (h->s >= h->end || (*h->s != '\'' && *h->s != '"'))
        return herr(h, SMELT_ERR_IO, "malformed .npy header (expected a quoted string)");
    char q = *h->s++;
    size_t k = 0;
    while (h->s < h->end && *h->s != q) {
        if (*h->s == '\\' || k + 1 >= n || (unsigned char)*h->s < 0x20) /* (a NUL ended '<f4\0' early) */
            return herr(h, SMELT_ERR_IO, "malformed .npy header (unexpected string)");
        out[k++] = *h->s++;
    }
    if (h->s >= h->end)
        return herr(h, SMELT_ERR_IO, "malformed .npy header (unterminated string)");
    h->s++;
    out[k] = 0;
    return SMELT_OK;
}

static bool word(hp *h, const char *w)
{
    skip_ws(h);
    size_t n = strlen(w);
    if ((size_t)(h->end - h->s) >= n && !memcmp(h->s, w, n)) {
        h->s += n;
        return true;
    }
    return false;
}

static int parse_descr(hp *h, const char *d, npyhdr *out)
{
    static const struct {
        char kind;
        int size;
        smelt_dtype dt;
    } known[] = {{'f', 4, SMELT_F32}, {'f', 8, SMELT_F64}, {'i', 4, SMELT_I32},
                 {'i', 8, SMELT_I64}, {'u', 1, SMELT_U8},  {'b', 1, SMELT_BOOL},
                 {'f', 2, SMELT_F16}};
    char order = d[0] && strchr("<>|=", d[0]) ? d[0] : '=';
    const char *k = d[0] && strchr("<>|=", d[0]) ? d + 1 : d;
    if (!*k)
        return herr(h, SMELT_ERR_DTYPE, "unsupported dtype '%s'; smelt supports <f2 <f4 <f8 <i4 <i8 |u1 |b1", d);
    char *end;
    long size = strtol(k + 1, &end, 10);
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) {
        if (known[i].kind != k[0] || known[i].size != size || *end || end == k + 1)
            continue;
        if (size == 1) {
            out->swap = false;
        } else if (order == '|') {
            break; /* a multi-byte type needs a byte order */
        } else {
            bool big = order == '>' || (order == '=' && !host_is_le());
            out->swap = big == host_is_le();
        }
        out->dt = known[i].dt;
        return SMELT_OK;
    }
    const char *hint = "";
    if (!strcmp(k, "f16") || !strcmp(k, "f12"))
        hint = " (long double)";
    else if (k[0] == 'c')
        hint = " (complex)";
    else if (k[0] == 'U' || k[0] == 'S')
        hint = " (strings)";
    else if (k[0] == 'O')
        hint = " (Python objects)";
    return herr(h, SMELT_ERR_DTYPE, "unsupported dtype '%s'%s; smelt supports <f2 <f4 <f8 <i4 <i8 |u1 |b1",
                d, hint);
}

static int parse_shape(hp *h, npyhdr *out)
{
    if (!eat(h, '('))
        return herr(h, SMELT_ERR_IO, "malformed .npy header (shape is not a tuple)");
    out->ndim = 0;
    for (;;) {
        skip_ws(h);
        if (eat(h, ')'))
            break;
        if (h->s >= h->end || *h->s < '0' || *h->s > '9')
            return herr(h, SMELT_ERR_IO, "malformed .npy header (bad shape)");
        int64_t v = 0;
        for (const char *d = h->s + 1; *h->s == '0' && d < h->end && *d >= '0' && *d <= '9'; d++)
            if (*d != '0') /* as Python: 0, 00, but not 0002 */
                return herr(h, SMELT_ERR_IO, "malformed .npy header (a dimension with a leading zero)");
        while (h->s < h->end && *h->s >= '0' && *h->s <= '9') {
            if (v > (INT64_MAX - 9) / 10)
                return herr(h, SMELT_ERR_SHAPE, "shape dimension too large (over 2^63)");
            v = v * 10 + (*h->s++ - '0');
        }
        smelt__skip_char(&h->s, h->end, 'L'); /* written by Python 2 */
        if (out->ndim == SMELT_MAX_DIMS)
            return herr(h, SMELT_ERR_SHAPE, "array has more than %d dimensions (smelt takes at most %d "
                        "dimensions)", SMELT_MAX_DIMS, SMELT_MAX_DIMS);
        out->shape[out->ndim++] = v;
        if (eat(h, ')'))
            break;
        if (!eat(h, ','))
            return herr(h, SMELT_ERR_IO, "malformed .npy header (bad shape)");
    }
    return SMELT_OK;
}

/* Parse the preamble and header in buf[0..n); n may cover only part of the
 * file: *need is set when more bytes are needed for the header. */
static int parse_header(smelt_ctx *ctx, const char *what, const unsigned char *buf, size_t n,
                        npyhdr *out, size_t *need)
{
    hp h = {.what = what, .ctx = ctx};
    *need = 0;
    memset(out, 0, sizeof *out);
    if (n == 0)
        return herr(&h, SMELT_ERR_IO, "empty file (not a .npy file)");
    if (n < 10 || memcmp(buf, MAGIC, 6))
        return herr(&h, SMELT_ERR_IO, n < 10 && !memcmp(buf, MAGIC, n < 6 ? n : 6)
                                          ? "truncated .npy file (no complete header)"
                                          : "not a .npy file (no \\x93NUMPY magic)");
    int major = buf[6], minor = buf[7];
    size_t pre, hlen;
    if (major == 1 && minor == 0) {
        pre = 10;
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8;
    } else if ((major == 2 || major == 3) && minor == 0) {
        if (n < 12) {
            *need = 12;
            return herr(&h, SMELT_ERR_IO, "truncated .npy file (no complete header)");
        }
        pre = 12;
        hlen = (size_t)buf[8] | (size_t)buf[9] << 8 | (size_t)buf[10] << 16 | (size_t)buf[11] << 24;
    } else {
        return herr(&h, SMELT_ERR_IO, "unsupported .npy format version %d.%d (smelt reads 1.0, 2.0, 3.0)",
                    major, minor);
    }
    if (hlen > MAX_HEADER)
        return herr(&h, SMELT_ERR_IO, "header of %zu bytes is larger than the %u smelt accepts", hlen,
                    MAX_HEADER);
    if (n < pre + hlen) {
        *need = pre + hlen;
        return herr(&h, SMELT_ERR_IO, "truncated .npy file (the header says %zu bytes, the file is shorter)",
                    hlen);
    }
    h.s = (const char *)buf + pre;
    h.end = h.s + hlen;
    bool have_descr = false, have_fortran = false, have_shape = false;
    if (!eat(&h, '{'))
        return herr(&h, SMELT_ERR_IO, "malformed .npy header (not a dict)");
    for (;;) {
        if (eat(&h, '}'))
            break;
        char key[32], val[64];
        int st = str(&h, key, sizeof key);
        if (st)
            return st;
        if (!eat(&h, ':'))
            return herr(&h, SMELT_ERR_IO, "malformed .npy header (expected ':')");
        if (!strcmp(key, "descr") && !have_descr) {
            skip_ws(&h);
            if (h.s < h.end && *h.s == '[')
                return herr(&h, SMELT_ERR_DTYPE, "structured dtypes are not supported");
            if ((st = str(&h, val, sizeof val)) || (st = parse_descr(&h, val, out)))
                return st;
            have_descr = true;
        } else if (!strcmp(key, "fortran_order") && !have_fortran) {
            if (word(&h, "True"))
                out->fortran = true;
            else if (!word(&h, "False"))
                return herr(&h, SMELT_ERR_IO, "malformed .npy header (fortran_order is not True or False)");
            have_fortran = true;
        } else if (!strcmp(key, "shape") && !have_shape) {
            if ((st = parse_shape(&h, out)))
                return st;
            have_shape = true;
        } else {
            return herr(&h, SMELT_ERR_IO, "malformed .npy header (unexpected key '%s')", key);
        }
        if (eat(&h, '}'))
            break;
        if (!eat(&h, ','))
            return herr(&h, SMELT_ERR_IO, "malformed .npy header (expected ',' or '}')");
    }
    skip_ws(&h);
    if (h.s != h.end)
        return herr(&h, SMELT_ERR_IO, "malformed .npy header (text after the dict)");
    if (!have_descr || !have_fortran || !have_shape)
        return herr(&h, SMELT_ERR_IO, "malformed .npy header (no '%s' key)",
                    !have_descr ? "descr" : !have_fortran ? "fortran_order" : "shape");
    int st = smelt__shape_check(ctx, what, out->ndim, out->shape);
    if (st)
        return st;
    out->nbytes = (uint64_t)smelt__numel(out->ndim, out->shape) * smelt_dtype_size(out->dt);
    out->data_off = pre + hlen;
    return SMELT_OK;
}

static int size_error(smelt_ctx *ctx, const char *what, const npyhdr *hd, uint64_t have)
{
    char shape[SMELT_SHAPE_STR_MAX];
    return smelt__err(ctx, SMELT_ERR_IO, "%s: %s: the header says %s %s (%llu bytes of data), the file has %llu",
                      what, have < hd->nbytes ? "truncated .npy file" : "extra data after the array",
                      smelt_dtype_name(hd->dt), smelt__shape_fmt(shape, hd->ndim, hd->shape),
                      (unsigned long long)hd->nbytes, (unsigned long long)have);
}

/* A tensor for hd (contiguous storage in file order); fill its data. */
static int make_tensor(smelt_ctx *ctx, const npyhdr *hd, smelt_tensor **out)
{
    int64_t shape[SMELT_MAX_DIMS];
    for (int i = 0; i < hd->ndim; i++) /* Fortran order: the transpose is C order */
        shape[i] = hd->fortran ? hd->shape[hd->ndim - 1 - i] : hd->shape[i];
    return smelt_tensor_new(ctx, hd->dt, hd->ndim, shape, out);
}

/* Byte order and bool normalisation, then the Fortran view. */
static int finish(const npyhdr *hd, smelt_tensor **t)
{
    size_t es = smelt_dtype_size(hd->dt);
    uint64_t n = hd->nbytes / es;
    unsigned char *d = smelt_tensor_data(*t);
    if (hd->swap)
        swap_bytes(d, n, es);
    if (hd->dt == SMELT_BOOL)
        for (uint64_t i = 0; i < n; i++)
            d[i] = d[i] != 0;
    if (hd->fortran && hd->ndim > 1) {
        int perm[SMELT_MAX_DIMS];
        for (int i = 0; i < hd->ndim; i++)
            perm[i] = hd->ndim - 1 - i;
        smelt_tensor *v;
        int st = smelt_tensor_transpose(*t, perm, &v);
        smelt_tensor_free(*t);
        *t = v;
        if (st)
            return st;
    }
    return SMELT_OK;
}

int smelt_npy_read(smelt_ctx *ctx, const void *data, size_t size, smelt_tensor **out)
{
    if (!out)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "smelt_npy_read: out is NULL");
    *out = NULL;
    if (!data && size)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "smelt_npy_read: data is NULL");
    npyhdr hd;
    size_t need;
    int st = parse_header(ctx, "<memory>", data, size, &hd, &need);
    if (st)
        return st;
    uint64_t have = size - hd.data_off;
    if (have != hd.nbytes)
        return size_error(ctx, "<memory>", &hd, have);
    if ((st = make_tensor(ctx, &hd, out)))
        return st;
    if (hd.nbytes)
        memcpy(smelt_tensor_data(*out), (const char *)data + hd.data_off, (size_t)hd.nbytes);
    return finish(&hd, out);
}

/* Parse the header of the open file f (named path in messages) and check
 * the data's size; the stream is left at the data, or closed on failure. */
static int read_npy_header(smelt_ctx *ctx, FILE *f, const char *path, FILE **fp, npyhdr *hd)
{
    *fp = NULL;
    unsigned char pre[12];
    size_t n = fread(pre, 1, sizeof pre, f), need;
    int st = parse_header(ctx, path, pre, n, hd, &need);
    if (st && need) {
        unsigned char *buf = malloc(need);
        if (!buf) {
            fclose(f);
            return smelt__err(ctx, SMELT_ERR_NOMEM, "out of memory");
        }
        memcpy(buf, pre, n);
        size_t m = n + fread(buf + n, 1, need - n, f);
        st = parse_header(ctx, path, buf, m, hd, &need);
        free(buf);
    }
    long long end = -1;
    if (!st && fseek(f, 0, SEEK_END) == 0)
        end = (long long)ftello(f);
    if (!st && (end < 0 || fseek(f, (long)hd->data_off, SEEK_SET) != 0))
        st = smelt__err(ctx, SMELT_ERR_IO, "%s: cannot seek: %s", path, strerror(errno));
    uint64_t have = (uint64_t)end < hd->data_off ? 0 : (uint64_t)end - hd->data_off;
    if (!st && have != hd->nbytes)
        st = size_error(ctx, path, hd, have);
    if (st)
        fclose(f);
    else
        *fp = f;
    return st;
}

/* Open path (fn: the caller, for a NULL path): a regular file, never
 * waiting on a FIFO; then read_npy_header. */
static int open_npy(smelt_ctx *ctx, const char *fn, const char *path, FILE **fp, npyhdr *hd)
{
    *fp = NULL;
    if (!path)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "%s: path is NULL", fn);
    FILE *f = smelt__fopen_regular(AT_FDCWD, path, false);
    if (!f)
        return smelt__err(ctx, errno == ENOMEM ? SMELT_ERR_NOMEM : SMELT_ERR_IO, "cannot open '%s': %s", path,
                          smelt__open_strerror(errno));
    return read_npy_header(ctx, f, path, fp, hd);
}

int smelt_npy_info(smelt_ctx *ctx, const char *path, smelt_dtype *dtype, int *ndim, int64_t *shape)
{
    FILE *f;
    npyhdr hd;
    int st = open_npy(ctx, "smelt_npy_info", path, &f, &hd);
    if (st)
        return st;
    fclose(f);
    if (dtype)
        *dtype = hd.dt;
    if (ndim)
        *ndim = hd.ndim;
    if (shape)
        memcpy(shape, hd.shape, sizeof(int64_t) * (size_t)hd.ndim);
    return SMELT_OK;
}

static int load(smelt_ctx *ctx, FILE *f, const char *path, npyhdr hd, smelt_tensor **out);

int smelt_npy_load(smelt_ctx *ctx, const char *path, smelt_tensor **out)
{
    if (!out)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "smelt_npy_load: out is NULL");
    *out = NULL;
    FILE *f;
    npyhdr hd;
    int st = open_npy(ctx, "smelt_npy_load", path, &f, &hd);
    return st ? st : load(ctx, f, path, hd, out);
}

int smelt__npy_load_file(smelt_ctx *ctx, FILE *f, const char *path, smelt_tensor **out)
{
    *out = NULL;
    npyhdr hd;
    int st = read_npy_header(ctx, f, path, &f, &hd);
    return st ? st : load(ctx, f, path, hd, out);
}

/* The data of the file f, at its data, into a new tensor; f is closed. */
static int load(smelt_ctx *ctx, FILE *f, const char *path, npyhdr hd, smelt_tensor **out)
{
    int st;
    st = make_tensor(ctx, &hd, out);
    if (!st && hd.nbytes && fread(smelt_tensor_data(*out), 1, (size_t)hd.nbytes, f) != hd.nbytes)
        st = smelt__err(ctx, SMELT_ERR_IO, "%s: read error: %s", path,
                        ferror(f) ? strerror(errno) : "file shrank while reading");
    fclose(f);
    if (!st)
        st = finish(&hd, out);
    if (st) {
        smelt_tensor_free(*out);
        *out = NULL;
    }
    return st;
}

int smelt_npy_save(smelt_ctx *ctx, const char *path, const smelt_tensor *t)
{
    if (!path || !t)
        return smelt__err(ctx, SMELT_ERR_INVALID_ARG, "smelt_npy_save: %s is NULL", path ? "tensor" : "path");
    if (smelt__is_device(t)) { /* through a host copy */
        smelt_tensor *h = NULL;
        int st = smelt_tensor_new(ctx, t->dtype, t->ndim, t->shape, &h);
        if (!st && (st = smelt_tensor_copy_to_host(h, t)) && ctx && ctx != t->ctx)
            smelt__err(ctx, st, "smelt_npy_save: cannot copy the device tensor to the host: %s",
                       smelt_errmsg(t->ctx)); /* else the copy's message is on ctx already */
        if (!st)
            st = smelt_npy_save(ctx, path, h);
        smelt_tensor_free(h);
        return st;
    }
    static const char *const descr[SMELT_DTYPE_COUNT] = {
        [SMELT_F32] = "<f4", [SMELT_F64] = "<f8", [SMELT_I32] = "<i4", [SMELT_I64] = "<i8",
        [SMELT_U8] = "|u1",  [SMELT_BOOL] = "|b1", [SMELT_F16] = "<f2"};
    if (!smelt__dtype_valid((int)t->dtype) || !descr[t->dtype])
        return smelt__err(ctx, SMELT_ERR_DTYPE,
                          "cannot save a %s tensor as .npy: NumPy has no %s dtype (cast it to f32 first)",
                          smelt_dtype_name(t->dtype), smelt_dtype_name(t->dtype));
    smelt__sb h;
    smelt__sb_init(&h);
    smelt__sb_printf(&h, "{'descr': '%s', 'fortran_order': False, 'shape': ", descr[t->dtype]);
    smelt__shape_str(&h, t->ndim, t->shape); /* a Python tuple: (), (5,), (3, 4) */
    smelt__sb_puts(&h, ", }");
    while (!h.oom && (10 + h.len + 1) % 64) /* (out of memory, the length stays: stop) */
        smelt__sb_puts(&h, " ");
    smelt__sb_puts(&h, "\n");
    if (h.oom) {
        smelt__sb_free(&h);
        return smelt__err(ctx, SMELT_ERR_NOMEM, "out of memory");
    }
    size_t es = smelt_dtype_size(t->dtype);
    bool swap = !host_is_le() && es > 1;
    smelt_tensor *c = NULL; /* a contiguous copy, when t is not or its bytes are swapped */
    int st = smelt_tensor_is_contiguous(t) && !swap ? SMELT_OK : smelt_tensor_contiguous(t, &c);
    if (!st) {
        int64_t n = smelt_tensor_numel(t);
        unsigned char *d = smelt_tensor_data(c ? c : t);
        if (swap)
            swap_bytes(d, (uint64_t)n, es);
        unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0,
                                 (unsigned char)(h.len & 0xff), (unsigned char)(h.len >> 8)};
        const void *parts[] = {pre, h.s, d};
        size_t len[] = {sizeof pre, h.len, (size_t)n * es};
        st = smelt__write_file(ctx, path, 3, parts, len);
    }
    smelt_tensor_free(c);
    smelt__sb_free(&h);
    return st;
}
