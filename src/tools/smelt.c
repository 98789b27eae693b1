/* smelt: the command-line tool (docs/cli.md).
 *
 *   smelt eval EXPR name=file.npy ... [-o out.npy] [--time] ...
 *   smelt run GRAPH.smelt name=file.npy ... [-o out.npy ...]
 *   smelt explain EXPR|GRAPH [name=file.npy | name=f32[3,4]] ...
 *   smelt info [--ops]
 *   smelt run|explain MODEL.onnx ...   (python -m smelt.onnx: docs/onnx.md)
 *
 * Exit status: 0 success, 1 bad input (files, expressions, dtypes, compile
 * or run errors), 2 bad usage.  Errors go to stderr as one line starting
 * with "smelt: " (an expression error adds the expression and a caret line).
 * Only the public API (smelt.h) is used. */
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "smelt.h"
#include "smelt_cuda.h"

enum { EXIT_INPUT = 1, EXIT_USAGE = 2 };
#define MAX_BIND 64
#define MAX_OUT 64

/* ---- messages ------------------------------------------------------------ */

static const char *cmd_name = NULL; /* for "see 'smelt CMD --help'" */

static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fputs("smelt: error: ", stderr);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (cmd_name)
        fprintf(stderr, " (see 'smelt %s --help')\n", cmd_name);
    else
        fputs(" (see 'smelt --help')\n", stderr);
    return EXIT_USAGE;
}

/* AUTO or a registered backend's name (case-insensitive) */
static bool backend_known(const char *name)
{
    const char *b;
    for (int i = 0; (b = smelt_backend_name(i, NULL)); i++)
        if (!strcasecmp(name, b))
            return true;
    return !strcasecmp(name, "AUTO");
}

/* A library message: the first line after "smelt: error: ", the rest (an
 * expression and its caret line) as it is. */
static int input_error_msg(const char *msg)
{
    const char *nl = strchr(msg, '\n');
    fprintf(stderr, "smelt: error: %.*s\n", nl ? (int)(nl - msg) : (int)strlen(msg), msg);
    if (nl)
        fprintf(stderr, "%s\n", nl + 1);
    return EXIT_INPUT;
}

static int input_error(const char *fmt, ...)
{
    char buf[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    return input_error_msg(buf);
}

/* ---- help ---------------------------------------------------------------- */

static const char help_main[] =
    "usage: smelt COMMAND [ARGS] [OPTIONS]\n"
    "\n"
    "Fuse elementwise tensor expressions into kernels compiled at run time.\n"
    "\n"
    "commands:\n"
    "  eval EXPR name=file.npy ...     evaluate an expression (numexpr syntax)\n"
    "  run GRAPH name=file.npy ...     run a saved graph file\n"
    "  explain EXPR|GRAPH [inputs]     show the clusters, kernels and their source\n"
    "  info                            version, backends, threads, cache settings\n"
    "  run|explain MODEL.onnx ...      an ONNX model (through Python's smelt.onnx;\n"
    "                                  'smelt run model.onnx --help')\n"
    "\n"
    "options of every command: --help, --threads N\n"
    "'smelt COMMAND --help' describes a command; see also docs/cli.md.\n"
    "exit status: 0 success, 1 bad input, 2 bad usage.\n";

static const char help_eval[] =
    "usage: smelt eval EXPR name=file.npy ... [options]\n"
    "\n"
    "Evaluate EXPR (numexpr / NumPy syntax, docs/expressions.md) on the arrays of\n"
    "the .npy files, e.g.\n"
    "  smelt eval 'where(a > 0, a*b, exp(c)) + 1' a=a.npy b=b.npy c=c.npy -o r.npy\n"
    "Without -o the result is printed (large results are summarised).\n"
    "\n"
    "options:\n"
    "  -o, --output FILE    write the result as a .npy file\n"
    "  --opt-level N        0 unfused ... 3 fused (default 3)\n"
    "  --backend NAME       TCC, CC, NVRTC or AUTO (default: SMELT_JIT_BACKEND, AUTO)\n"
    "  --time               compile and run times, fused against unfused (opt-level 0)\n"
    "  --dump DIR           write the generated kernel sources and graph.smelt to DIR\n"
    "  --save-graph FILE    save the expression's graph (for smelt run / explain)\n"
    "  --threads N          worker threads (default: all cores)\n"
    "  -- EXPR              an expression that looks like an option (e.g. -a)\n";

static const char help_run[] =
    "usage: smelt run GRAPH.smelt name=file.npy ... [-o out.npy ...] [options]\n"
    "\n"
    "Run a graph file (written by smelt eval --save-graph, smelt_graph_save or\n"
    "smelt_trace_save; format in docs/formats.md).  Every input of the graph is\n"
    "given by name.  Give -o once per output, or none to print the outputs.\n"
    "\n"
    "options:\n"
    "  -o, --output FILE    write the next output as a .npy file (repeatable)\n"
    "  --opt-level N        0 unfused ... 3 fused (default 3)\n"
    "  --backend NAME       TCC, CC, NVRTC or AUTO\n"
    "  --time               compile and run times, fused against unfused\n"
    "  --dump DIR           write the generated kernel sources to DIR\n"
    "  --threads N          worker threads (default: all cores)\n";

static const char help_explain[] =
    "usage: smelt explain EXPR|GRAPH [name=file.npy | name=DTYPE[SHAPE]] ... [options]\n"
    "\n"
    "Show what smelt does with an expression or a graph file: the graph, the\n"
    "passes (constants folded, common subexpressions removed, dead code\n"
    "removed), the clusters fused into kernels, and each kernel's generated\n"
    "source.  Nothing runs: inputs only give dtypes and shapes, from a .npy\n"
    "file's header or written out, e.g. a=f32[1000,1000] b=i64[] c=bool[3].\n"
    "\n"
    "options:\n"
    "  --opt-level N        0 unfused ... 3 fused (default 3)\n"
    "  --backend NAME       TCC, CC, NVRTC or AUTO\n"
    "  --no-source          leave out the kernel sources\n"
    "  --full-source        show each kernel's whole source, its prelude included\n"
    "  --save-graph FILE    save the graph (EXPR only)\n"
    "  -- EXPR              an expression that looks like an option (e.g. -a)\n";

static const char help_info[] =
    "usage: smelt info [--ops]\n"
    "\n"
    "Print the version, the backends (TCC, CC, NVRTC) and whether each can be\n"
    "used here (and why not), the worker threads, and the kernel cache settings\n"
    "(SMELT_CACHE_DIR, SMELT_CACHE, ...).\n"
    "\n"
    "options:\n"
    "  --ops                list the operators (the expression functions)\n";

/* ---- options ------------------------------------------------------------- */

typedef struct opts {
    const char *pos[MAX_BIND + 2];
    int npos;
    const char *out[MAX_OUT];
    int nout;
    int opt_level;
    const char *backend, *dump, *save_graph;
    int threads;
    bool time, no_source, full_source, ops, help;
} opts;

static int parse_int_arg(const char *opt, const char *s, int lo, int hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < lo || v > hi)
        return usage_error("%s needs a number in %d..%d, got '%s'", opt, lo, hi, s);
    *out = (int)v;
    return 0;
}

/* "-x", "-O3", "--name" or "--name=value"; anything else that starts with
 * '-' ("-a * 2", "-2", "-sin(x)") is an expression. */
static bool looks_like_option(const char *a)
{
    if (a[0] != '-' || !a[1])
        return false;
    const char *p = a + 1;
    if (*p == '-') {
        for (p++; *p && *p != '='; p++)
            if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '-'))
                return false;
        return true;
    }
    if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z')))
        return false;
    for (p++; *p; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9')))
            return false;
    return true;
}

/* Options may come anywhere; "--" ends them.  Allowed: a string of the
 * option letters the command takes. */
static int parse_opts(int argc, char **argv, const char *allowed, opts *o)
{
    memset(o, 0, sizeof *o);
    o->opt_level = 3;
    o->threads = -1;
    bool dashdash = false;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (dashdash || !looks_like_option(a)) {
            if (o->npos == MAX_BIND + 2)
                return usage_error("too many inputs: at most %d name=value inputs", MAX_BIND);
            o->pos[o->npos++] = a;
            continue;
        }
        if (!strcmp(a, "--")) {
            dashdash = true;
            continue;
        }
        /* --name=value or --name value */
        char name[64];
        const char *val = NULL;
        const char *eq = strncmp(a, "--", 2) ? NULL : strchr(a, '=');
        snprintf(name, sizeof name, "%.*s", eq ? (int)(eq - a) : (int)strlen(a), a);
        if (eq)
            val = eq + 1;
        static const struct {
            const char *name, *alt;
            char key;
            bool arg;
        } table[] = {
            {"--help", "-h", 'h', false},      {"--output", "-o", 'o', true},
            {"--opt-level", "-O", 'O', true},  {"--backend", NULL, 'b', true},
            {"--time", NULL, 't', false},      {"--dump", NULL, 'd', true},
            {"--save-graph", NULL, 's', true}, {"--threads", NULL, 'j', true},
            {"--no-source", NULL, 'n', false}, {"--ops", NULL, 'p', false},
            {"--full-source", NULL, 'f', false},
        };
        int k = -1;
        for (int j = 0; j < (int)(sizeof table / sizeof table[0]) && k < 0; j++)
            if (!strcmp(name, table[j].name) || (table[j].alt && !strcmp(name, table[j].alt)))
                k = j;
        /* -O3 */
        if (k < 0 && a[1] == 'O' && a[2] >= '0' && a[2] <= '9') {
            k = 2;
            val = a + 2;
        }
        if (k < 0 || !strchr(allowed, table[k].key)) {
            if (k < 0 && a[1] != '-')
                return usage_error("unknown option '%s' (an expression that looks like an option goes after '--')", a);
            return usage_error("unknown option '%s'", a);
        }
        if (table[k].arg && !val) {
            if (i + 1 >= argc)
                return usage_error("%s needs a value", table[k].name);
            val = argv[++i];
        } else if (!table[k].arg && val) {
            return usage_error("%s takes no value", table[k].name);
        }
        int st = 0;
        switch (table[k].key) {
        case 'h': o->help = true; break;
        case 'o':
            if (o->nout == MAX_OUT)
                return usage_error("too many -o options");
            o->out[o->nout++] = val;
            break;
        case 'O': st = parse_int_arg("--opt-level", val, 0, 3, &o->opt_level); break;
        case 'b':
            if (!backend_known(val)) {
                char valid[256] = "";
                for (int i = 0; smelt_backend_name(i, NULL); i++)
                    snprintf(valid + strlen(valid), sizeof valid - strlen(valid), "%s, ",
                             smelt_backend_name(i, NULL));
                return usage_error("unknown backend '%s' (valid: %sAUTO)", val, valid);
            }
            o->backend = val;
            break;
        case 't': o->time = true; break;
        case 'd': o->dump = val; break;
        case 's': o->save_graph = val; break;
        case 'j': st = parse_int_arg("--threads", val, 0, 4096, &o->threads); break;
        case 'n': o->no_source = true; break;
        case 'p': o->ops = true; break;
        case 'f': o->full_source = true; break;
        }
        if (st)
            return st;
    }
    return 0;
}

/* ---- input bindings ------------------------------------------------------- */

typedef struct binding {
    char name[64];
    const char *value;
    bool spec; /* DTYPE[SHAPE], with or without a generator */
    int gen;   /* GEN_*: values made up from the spec */
    smelt_dtype dt;
    int ndim;
    int64_t shape[SMELT_MAX_DIMS];
    smelt_tensor *t;
} binding;

static bool is_ident(const char *s, size_t n)
{
    if (!n || n >= 64 || (s[0] >= '0' && s[0] <= '9'))
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_'))
            return false;
    }
    return true;
}

/* Inputs given inline: name=GEN:DTYPE[SHAPE] */
enum { GEN_NONE, GEN_RANDOM, GEN_ARANGE, GEN_ZEROS, GEN_ONES };
static const char *const gen_names[] = {"", "random:", "arange:", "zeros:", "ones:"};

/* DTYPE[d0,d1,...]: 1 if s is one (filled in), 0 if not, -1 on a bad one,
 * -2 with more than SMELT_MAX_DIMS dimensions. */
static int parse_spec(const char *s, binding *b)
{
    const char *lb = strchr(s, '[');
    size_t n = strlen(s);
    if (!lb || n < 3 || s[n - 1] != ']' || lb == s || strchr(s, '/'))
        return 0;
    char dname[32];
    if ((size_t)(lb - s) >= sizeof dname)
        return 0;
    snprintf(dname, sizeof dname, "%.*s", (int)(lb - s), s);
    int dt = smelt_dtype_from_name(dname);
    if (dt < 0)
        return -1;
    b->dt = (smelt_dtype)dt;
    b->ndim = 0;
    const char *p = lb + 1;
    while (*p == ' ')
        p++;
    if (*p == ']')
        return p[1] ? -1 : 1;
    for (;;) {
        char *end;
        errno = 0;
        long long v = strtoll(p, &end, 10);
        if (end == p || errno || v < 0)
            return -1;
        if (b->ndim == SMELT_MAX_DIMS)
            return -2;
        b->shape[b->ndim++] = v;
        p = end;
        while (*p == ' ')
            p++;
        if (*p == ']')
            return p[1] ? -1 : 1;
        if (*p != ',')
            return -1;
        p++;
    }
}

static int parse_bindings(const char *const *args, int n, bool allow_spec, binding *b)
{
    for (int i = 0; i < n; i++) {
        const char *eq = strchr(args[i], '=');
        if (!eq || !is_ident(args[i], (size_t)(eq - args[i])))
            return usage_error("'%s' is not name=%s", args[i],
                               allow_spec ? "file.npy or name=DTYPE[SHAPE]" : "file.npy or name=random:DTYPE[SHAPE]");
        memset(&b[i], 0, sizeof b[i]);
        snprintf(b[i].name, sizeof b[i].name, "%.*s", (int)(eq - args[i]), args[i]);
        b[i].value = eq + 1;
        if (!*b[i].value)
            return usage_error("'%s' gives no file", args[i]);
        for (int j = 0; j < i; j++)
            if (!strcmp(b[j].name, b[i].name))
                return usage_error("input '%s' is given twice", b[i].name);
        const char *spec = b[i].value;
        for (int k = GEN_RANDOM; k <= GEN_ONES; k++)
            if (!strncmp(spec, gen_names[k], strlen(gen_names[k]))) {
                b[i].gen = k;
                spec += strlen(gen_names[k]);
                break;
            }
        int s = parse_spec(spec, &b[i]);
        if (s == -2)
            return usage_error("'%s': at most %d dimensions", b[i].value, SMELT_MAX_DIMS);
        if (s < 0 || (b[i].gen && !s))
            return usage_error("'%s' is not a valid %sDTYPE[SHAPE] (e.g. f32[3,4], i64[])", b[i].value,
                               gen_names[b[i].gen]);
        b[i].spec = s == 1;
        if (b[i].spec && !b[i].gen && !allow_spec)
            return usage_error("'%s' gives a dtype and a shape but no values: use a .npy file, or "
                               "random:%s, arange:%s, zeros:%s or ones:%s",
                               args[i], spec, spec, spec, spec);
    }
    return 0;
}

static void free_bindings(binding *b, int n)
{
    for (int i = 0; i < n; i++)
        smelt_tensor_free(b[i].t);
}

/* The values of an inline input: random (uniform in [-1, 1) for floats,
 * [-100, 100) for signed integers, [0, 256) for u8, 0/1 for bool; seeded by
 * the input's name, so the same on every run), arange (0, 1, 2, ... in the
 * dtype), zeros or ones. */
static int make_input(smelt_ctx *ctx, binding *b)
{
    if (smelt_tensor_new(ctx, b->dt, b->ndim, b->shape, &b->t))
        return input_error("input '%s': %s", b->name, smelt_errmsg(ctx));
    uint64_t x = 0x9e3779b97f4a7c15ULL;
    for (const char *c = b->name; *c; c++)
        x = (x ^ (unsigned char)*c) * 0x100000001b3ULL;
    char *d = smelt_tensor_data(b->t);
    size_t es = smelt_dtype_size(b->dt);
    for (int64_t i = 0, n = smelt_tensor_numel(b->t); i < n; i++) {
        double v = b->gen == GEN_ARANGE ? (double)i : b->gen == GEN_ONES ? 1.0 : 0.0;
        if (b->gen == GEN_RANDOM) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17; /* xorshift64 */
            double u = (double)(x >> 11) / 9007199254740992.0;
            v = smelt_dtype_is_float(b->dt) ? 2 * u - 1
                : b->dt == SMELT_BOOL  ? (double)(u < 0.5)
                : b->dt == SMELT_U8    ? floor(256 * u)
                                       : floor(200 * u) - 100;
        }
        char *p = d + (size_t)i * es;
        switch (b->dt) {
        case SMELT_F32: { float f = (float)v; memcpy(p, &f, 4); break; }
        case SMELT_F64: memcpy(p, &v, 8); break;
        case SMELT_I32: { int32_t k = (int32_t)(int64_t)fmod(v, 4294967296.0); memcpy(p, &k, 4); break; }
        case SMELT_I64: { int64_t k = (int64_t)v; memcpy(p, &k, 8); break; }
        case SMELT_U8: *(uint8_t *)p = (uint8_t)fmod(v, 256.0); break;
        case SMELT_BOOL: *(uint8_t *)p = b->gen == GEN_ARANGE ? (uint8_t)(i & 1) : v != 0; break;
        default: smelt_elem_store(b->dt, p, v); break; /* f16, bf16 */
        }
    }
    return 0;
}

/* Load the arrays (load) or only their headers. */
static int load_bindings(smelt_ctx *ctx, binding *b, int n, bool load)
{
    for (int i = 0; i < n; i++) {
        if (b[i].spec) {
            int rc = load && b[i].gen ? make_input(ctx, &b[i]) : 0;
            if (rc)
                return rc;
            continue;
        }
        int st = load ? smelt_npy_load(ctx, b[i].value, &b[i].t)
                      : smelt_npy_info(ctx, b[i].value, &b[i].dt, &b[i].ndim, b[i].shape);
        if (st)
            return input_error("input '%s': %s", b[i].name, smelt_errmsg(ctx));
        if (load) {
            b[i].dt = smelt_tensor_dtype(b[i].t);
            b[i].ndim = smelt_tensor_ndim(b[i].t);
            memcpy(b[i].shape, smelt_tensor_shape(b[i].t), sizeof(int64_t) * (size_t)b[i].ndim);
        }
    }
    return 0;
}

static void shape_str(char *buf, size_t n, int ndim, const int64_t *shape)
{
    size_t k = (size_t)snprintf(buf, n, "[");
    for (int i = 0; i < ndim && k < n; i++)
        k += (size_t)snprintf(buf + k, n - k, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (k < n)
        snprintf(buf + k, n - k, "]");
}

/* ---- printing results ----------------------------------------------------- */

static double elem_double(smelt_dtype dt, const char *p, long long *iv)
{
    switch (dt) {
    case SMELT_F32: { float f; memcpy(&f, p, 4); return f; }
    case SMELT_F64: { double d; memcpy(&d, p, 8); return d; }
    case SMELT_I32: { int32_t x; memcpy(&x, p, 4); *iv = x; return (double)x; }
    case SMELT_I64: { int64_t x; memcpy(&x, p, 8); *iv = x; return (double)x; }
    case SMELT_U8: *iv = *(const uint8_t *)p; return *iv;
    case SMELT_F16:
    case SMELT_BF16: return smelt_elem_load(dt, p);
    default: *iv = *(const uint8_t *)p != 0; return (double)*iv;
    }
}

/* Shortest text that reads back as the same value, as NumPy's repr of a
 * scalar writes it: positional for 1e-4 <= |v| < 1e16 ("10.0", "0.001",
 * "123456790.0"), else scientific ("1e+16", "1.5e-05"). */
static void fmt_elem(char *buf, size_t n, smelt_dtype dt, const char *p)
{
    long long iv = 0;
    double v = elem_double(dt, p, &iv);
    if (dt == SMELT_BOOL) {
        snprintf(buf, n, "%s", iv ? "True" : "False");
        return;
    }
    if (!smelt_dtype_is_float(dt)) {
        snprintf(buf, n, "%lld", iv);
        return;
    }
    if (isnan(v)) {
        snprintf(buf, n, "nan");
        return;
    }
    if (isinf(v)) {
        snprintf(buf, n, v < 0 ? "-inf" : "inf");
        return;
    }
    int maxp = dt == SMELT_F64 ? 17 : 9;
    char sci[64];
    for (int prec = 1; prec <= maxp; prec++) {
        snprintf(sci, sizeof sci, "%.*e", prec - 1, v);
        double back = strtod(sci, NULL);
        if (dt == SMELT_F64 ? back == v : smelt_dtype_round(dt, back) == v)
            break;
    }
    /* sci is "-d.ddde+XX": its digits and exponent */
    char *e = strchr(sci, 'e');
    int ex = atoi(e + 1);
    if (v != 0 && (fabs(v) < 1e-4 || fabs(v) >= 1e16)) {
        *e = 0;
        snprintf(buf, n, "%.40se%c%02d", sci, ex < 0 ? '-' : '+', ex < 0 ? -ex : ex);
        return;
    }
    if (v == 0) {
        snprintf(buf, n, "%s0.0", signbit(v) ? "-" : "");
        return;
    }
    /* positional: the digits with the point moved (-4 <= ex <= 15) */
    char digits[24], out[64];
    int nd = 0, k = 0;
    for (const char *c = sci; c < e; c++)
        if (*c >= '0' && *c <= '9' && nd < (int)sizeof digits)
            digits[nd++] = *c;
    if (v < 0)
        out[k++] = '-';
    if (ex < 0) {
        out[k++] = '0', out[k++] = '.';
        for (int z = 0; z < -ex - 1; z++)
            out[k++] = '0';
        for (int d = 0; d < nd; d++)
            out[k++] = digits[d];
    } else {
        for (int d = 0; d <= ex || d < nd; d++) {
            if (d == ex + 1)
                out[k++] = '.';
            out[k++] = d < nd ? digits[d] : '0';
        }
        if (nd <= ex + 1)
            out[k++] = '.', out[k++] = '0';
    }
    out[k] = 0;
    snprintf(buf, n, "%s", out);
}

typedef struct printer {
    const smelt_tensor *t;
    size_t es;
    bool summarise;
    int col;
} printer;

static void print_rec(printer *pr, int d, const char *base)
{
    const smelt_tensor *t = pr->t;
    int nd = smelt_tensor_ndim(t);
    const int64_t *shape = smelt_tensor_shape(t), *str = smelt_tensor_strides(t);
    int64_t n = shape[d];
    putchar('[');
    pr->col++;
    for (int64_t i = 0; i < n; i++) {
        if (pr->summarise && n > 6 && i == 3) {
            if (d == nd - 1) {
                fputs(" ...", stdout);
                pr->col += 4;
            } else {
                printf("\n%*s...", d + 1, "");
                for (int k = 0; k < nd - d - 2; k++)
                    putchar('\n');
            }
            i = n - 3;
        }
        const char *p = base + i * str[d] * (int64_t)pr->es;
        if (d == nd - 1) {
            char buf[64];
            fmt_elem(buf, sizeof buf, smelt_tensor_dtype(t), p);
            int len = (int)strlen(buf) + (i ? 1 : 0);
            if (i && pr->col + len > 78) {
                printf("\n%*s", d + 1, "");
                pr->col = d + 1;
                len--;
            } else if (i) {
                putchar(' ');
            }
            fputs(buf, stdout);
            pr->col += len;
        } else {
            if (i) {
                putchar('\n');
                for (int k = 0; k < nd - d - 2; k++)
                    putchar('\n');
                printf("%*s", d + 1, "");
                pr->col = d + 1;
            }
            print_rec(pr, d + 1, p);
        }
    }
    putchar(']');
    pr->col++;
}

static void print_tensor(const smelt_tensor *t)
{
    printer pr = {t, smelt_dtype_size(smelt_tensor_dtype(t)), smelt_tensor_numel(t) > 1000, 0};
    const char *base = smelt_tensor_data(t);
    if (smelt_tensor_ndim(t) == 0) {
        char buf[64];
        fmt_elem(buf, sizeof buf, smelt_tensor_dtype(t), base);
        puts(buf);
        return;
    }
    print_rec(&pr, 0, base);
    putchar('\n');
}

/* ---- building, timing, running --------------------------------------------- */

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int new_ctx(const opts *o, smelt_ctx **ctx)
{
    if (smelt_ctx_new(ctx))
        return input_error("cannot create a context (out of memory)");
    if (o->threads >= 0 && smelt_ctx_set_threads(*ctx, o->threads))
        return input_error_msg(smelt_errmsg(*ctx));
    return 0;
}

/* A plan of g at opt_level; *ms the wall time of building it. */
static int make_plan(smelt_ctx *ctx, smelt_graph *g, int n_out, smelt_node *const *outs,
                     int opt_level, const char *backend, smelt_plan **p, double *ms)
{
    smelt_plan_opts po;
    smelt_plan_opts_init(&po);
    po.opt_level = opt_level;
    po.backend = backend;
    double t0 = now_ms();
    int st = smelt_plan_new(ctx, g, n_out, outs, &po, p);
    *ms = now_ms() - t0;
    if (st)
        return input_error_msg(smelt_errmsg(ctx));
    return 0;
}

/* Median run time of p (outputs preallocated in out). */
static int time_runs(smelt_ctx *ctx, smelt_plan *p, int n_in, smelt_tensor *const *in, int n_out,
                     smelt_tensor **out, double *median, int *runs)
{
    double t[201];
    int n = 0;
    double total = 0;
    /* a tiered plan queues its kernels for the optimising tier on its second
     * run: make that run, wait for those compiles, then time (the first
     * timed run switches them in) */
    if (smelt_plan_run(p, n_in, in, n_out, out))
        return input_error_msg(smelt_errmsg(ctx));
    smelt_plan_wait(p);
    while (n < 201 && (n < 5 || total < 500)) {
        double t0 = now_ms();
        if (smelt_plan_run(p, n_in, in, n_out, out))
            return input_error_msg(smelt_errmsg(ctx));
        t[n] = now_ms() - t0;
        total += t[n++];
    }
    qsort(t, (size_t)n, sizeof t[0], cmp_double);
    *median = t[n / 2];
    *runs = n;
    return 0;
}

static const char *plural(int n, const char *s) { return n == 1 ? s : "s"; }

/* The backend whose kernels a plan runs now. */
static const char *ran_on(const smelt_plan *p)
{
    smelt_plan_stats s;
    smelt_plan_get_stats(p, &s);
    if (!s.tier_backend || !s.kernels_fast)
        return s.backend;
    return s.kernels_fast == s.kernels ? s.tier_backend : "mixed tiers";
}

/* --time: build and time the unfused plan too, then report. */
static int report_time(const opts *o, smelt_ctx *ctx, smelt_graph *g, int n_out,
                       smelt_node *const *outs, smelt_plan *p, double build_ms, int n_in,
                       smelt_tensor *const *in, smelt_tensor **res)
{
    smelt_ctx *ctx0 = NULL; /* a fresh context: no kernel comes from the other plan */
    smelt_plan *p0 = NULL;
    smelt_tensor *res0[MAX_OUT] = {0};
    double build0 = 0, run_f = 0, run_u = 0;
    int runs_f = 0, runs_u = 0, rc;
    smelt_plan_stats sf, su;
    if ((rc = time_runs(ctx, p, n_in, in, n_out, res, &run_f, &runs_f)))
        return rc;
    smelt_plan_get_stats(p, &sf);
    bool compare = o->opt_level != 0;
    if (compare) {
        if ((rc = new_ctx(o, &ctx0)))
            return rc;
        rc = make_plan(ctx0, g, n_out, outs, 0, o->backend, &p0, &build0);
        if (!rc && smelt_plan_run(p0, n_in, in, n_out, res0))
            rc = input_error_msg(smelt_errmsg(ctx0));
        if (!rc)
            rc = time_runs(ctx0, p0, n_in, in, n_out, res0, &run_u, &runs_u);
        if (!rc)
            smelt_plan_get_stats(p0, &su);
    }
    if (!rc) {
        printf("compile  %-8s (opt-level %d): %3d kernel%s %9.3f ms  (%s", compare ? "fused" : "",
               o->opt_level, sf.kernels, plural(sf.kernels, ""), build_ms, sf.backend);
        if (sf.tier_backend)
            printf(", then %s in the background: %.3f ms", sf.tier_backend, sf.tier_compile_ms);
        printf(")\n");
        if (compare) {
            printf("         %-8s (opt-level 0): %3d kernel%s %9.3f ms  (%s", "unfused", su.kernels,
                   plural(su.kernels, ""), build0, su.backend);
            if (su.tier_backend)
                printf(", then %s in the background: %.3f ms", su.tier_backend, su.tier_compile_ms);
            printf(")\n");
            printf("run      fused %.3f ms on %s, unfused %.3f ms on %s (medians of %d and %d runs): "
                   "%.2fx\n",
                   run_f, ran_on(p), run_u, ran_on(p0), runs_f, runs_u, run_f > 0 ? run_u / run_f : 0.0);
        } else {
            printf("run      %.3f ms on %s (median of %d runs)\n", run_f, ran_on(p), runs_f);
        }
    }
    for (int i = 0; i < n_out; i++)
        smelt_tensor_free(res0[i]);
    smelt_plan_free(p0);
    smelt_ctx_free(ctx0);
    return rc;
}

/* mkdir -p: 0, or -1 with errno set */
static int mkdir_p(const char *dir)
{
    char path[4096];
    if (snprintf(path, sizeof path, "%s", dir) >= (int)sizeof path)
        return errno = ENAMETOOLONG, -1;
    for (char *s = path + 1;; s++)
        if (!*s || *s == '/') {
            char c = *s;
            *s = 0;
            if (mkdir(path, 0755) && errno != EEXIST)
                return -1;
            if (!(*s = c))
                return 0;
        }
}

static int setup_dump(const char *dir)
{
    if (mkdir_p(dir))
        return input_error("--dump: cannot create '%s': %s", dir, strerror(errno));
    if (setenv("SMELT_DUMP_DIR", dir, 1))
        return input_error("--dump: cannot set SMELT_DUMP_DIR");
    return 0;
}

/* Run the plan, then write or print the outputs. */
static int run_and_output(const opts *o, smelt_ctx *ctx, smelt_graph *g, int n_out,
                          smelt_node *const *outs, int n_in, smelt_tensor *const *in)
{
    smelt_plan *p = NULL;
    smelt_tensor *res[MAX_OUT] = {0};
    double build_ms;
    int rc = make_plan(ctx, g, n_out, outs, o->opt_level, o->backend, &p, &build_ms);
    if (!rc && smelt_plan_run(p, n_in, in, n_out, res))
        rc = input_error_msg(smelt_errmsg(ctx));
    for (int i = 0; !rc && i < n_out; i++) {
        if (o->nout) {
            if (smelt_npy_save(ctx, o->out[i], res[i]))
                rc = input_error_msg(smelt_errmsg(ctx));
        } else {
            if (n_out > 1)
                printf("output %d:\n", i);
            print_tensor(res[i]);
        }
    }
    if (!rc && o->time)
        rc = report_time(o, ctx, g, n_out, outs, p, build_ms, n_in, in, res);
    for (int i = 0; i < n_out; i++)
        smelt_tensor_free(res[i]);
    smelt_plan_free(p);
    return rc;
}

/* ---- commands ------------------------------------------------------------- */

/* A graph with one input per binding and the expression's node. */
static int expr_graph(smelt_ctx *ctx, const char *expr, binding *b, int nb, smelt_graph **g,
                      smelt_node **r)
{
    if (smelt_graph_new(ctx, g))
        return input_error_msg(smelt_errmsg(ctx));
    for (int i = 0; i < nb; i++)
        smelt_input(*g, b[i].name, b[i].dt, b[i].ndim, b[i].shape);
    *r = smelt_expr(*g, expr, NULL, NULL, 0);
    if (!*r)
        return input_error_msg(smelt_graph_errmsg(*g));
    return 0;
}

static int cmd_eval(const opts *o, binding *b, int nb)
{
    int rc;
    if (o->nout > 1)
        return usage_error("an expression has one result: give -o once");
    smelt_ctx *ctx = NULL;
    smelt_graph *g = NULL;
    smelt_node *r;
    if (!(rc = new_ctx(o, &ctx)) && !(rc = load_bindings(ctx, b, nb, true)))
        rc = expr_graph(ctx, o->pos[0], b, nb, &g, &r);
    if (!rc && o->save_graph && smelt_graph_save(g, 1, &r, o->save_graph))
        rc = input_error_msg(smelt_errmsg(ctx));
    if (!rc && o->dump) {
        char path[4200];
        snprintf(path, sizeof path, "%s/graph.smelt", o->dump);
        if (!(rc = setup_dump(o->dump)) && smelt_graph_save(g, 1, &r, path))
            rc = input_error_msg(smelt_errmsg(ctx));
    }
    if (!rc) {
        smelt_tensor *in[MAX_BIND];
        for (int i = 0; i < nb; i++)
            in[i] = b[i].t;
        rc = run_and_output(o, ctx, g, 1, &r, nb, in);
    }
    smelt_graph_free(g);
    free_bindings(b, nb);
    smelt_ctx_free(ctx);
    return rc;
}

/* A graph file: named *.smelt, or a file that starts with "smelt-graph". */
static bool starts_with(const char *path, const char *magic, size_t n)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC); /* a FIFO must not block */
    struct stat st;
    if (fd < 0)
        return false;
    char head[16] = {0};
    ssize_t got = !fstat(fd, &st) && S_ISREG(st.st_mode) ? read(fd, head, n) : -1;
    close(fd);
    return got == (ssize_t)n && !memcmp(head, magic, n);
}

static bool is_graph_file(const char *arg)
{
    size_t n = strlen(arg);
    return (n > 6 && !strcmp(arg + n - 6, ".smelt")) || starts_with(arg, "smelt-graph", 11);
}

/* A .npy file where a graph file is expected: say what to do instead. */
static int not_npy(const char *arg)
{
    if (!starts_with(arg, "\x93NUMPY", 6))
        return 0;
    return input_error("%s is a .npy file, not a graph file: give arrays as inputs (name=%s) to "
                       "smelt eval, or a graph file written by --save-graph", arg, arg);
}

/* Match bindings to the graph's inputs by name; order[i] = binding of input i. */
static int match_inputs(smelt_graph *g, binding *b, int nb, int *order, bool all)
{
    int nin = smelt_graph_num_inputs(g);
    for (int j = 0; j < nb; j++) {
        int i = 0;
        while (i < nin && strcmp(smelt_node_name(smelt_graph_input(g, i)), b[j].name))
            i++;
        if (i == nin)
            return usage_error("the graph has no input '%s'", b[j].name);
    }
    for (int i = 0; i < nin; i++) {
        smelt_node *in = smelt_graph_input(g, i);
        const char *name = smelt_node_name(in);
        order[i] = -1;
        for (int j = 0; j < nb; j++)
            if (!strcmp(b[j].name, name))
                order[i] = j;
        char want[160];
        shape_str(want, sizeof want, smelt_node_ndim(in), smelt_node_shape(in));
        if (order[i] < 0) {
            if (all)
                return usage_error("input '%s' (%s %s) is not given", name,
                                   smelt_dtype_name(smelt_node_dtype(in)), want);
            continue;
        }
        const binding *x = &b[order[i]];
        bool ok = x->dt == smelt_node_dtype(in) && x->ndim == smelt_node_ndim(in);
        for (int d = 0; ok && d < x->ndim; d++)
            ok = (x->shape[d] == 1) == (smelt_node_shape(in)[d] == 1);
        if (!ok) {
            char have[160];
            shape_str(have, sizeof have, x->ndim, x->shape);
            return input_error("input '%s': the graph takes %s %s (any sizes of the same rank, with "
                               "size 1 where it has 1), got %s %s",
                               name, smelt_dtype_name(smelt_node_dtype(in)), want,
                               smelt_dtype_name(x->dt), have);
        }
    }
    return 0;
}

static int cmd_run(const opts *o, binding *b, int nb)
{
    int rc;
    smelt_ctx *ctx = NULL;
    smelt_graph *g = NULL;
    smelt_node **outs = NULL;
    int n_out = 0;
    int order[MAX_BIND + 1];
    if ((rc = new_ctx(o, &ctx)) || (rc = not_npy(o->pos[0])))
        goto done;
    if (smelt_graph_load(ctx, o->pos[0], &g, &n_out, &outs)) {
        rc = input_error_msg(smelt_errmsg(ctx));
        goto done;
    }
    if (n_out == 0 || n_out > MAX_OUT) {
        rc = input_error("%s: the graph has %d outputs (smelt run takes 1..%d)", o->pos[0], n_out, MAX_OUT);
        goto done;
    }
    if (o->nout && o->nout != n_out) {
        rc = usage_error("the graph has %d output%s: give -o %d time%s or not at all", n_out,
                         plural(n_out, ""), n_out, plural(n_out, ""));
        goto done;
    }
    if (smelt_graph_num_inputs(g) > MAX_BIND) {
        rc = input_error("%s: the graph has %d inputs; smelt takes at most %d", o->pos[0],
                         smelt_graph_num_inputs(g), MAX_BIND);
        goto done;
    }
    if (o->dump && (rc = setup_dump(o->dump)))
        goto done;
    if ((rc = load_bindings(ctx, b, nb, true)) || (rc = match_inputs(g, b, nb, order, true)))
        goto done;
    smelt_tensor *in[MAX_BIND];
    for (int i = 0; i < smelt_graph_num_inputs(g); i++)
        in[i] = b[order[i]].t;
    rc = run_and_output(o, ctx, g, n_out, outs, smelt_graph_num_inputs(g), in);
done:
    smelt_free(outs);
    smelt_graph_free(g);
    free_bindings(b, nb);
    smelt_ctx_free(ctx);
    return rc;
}


/* smelt_plan_emit_only's report with the kernel sources left out: the
 * first line, the "==== kernel: verdict" lines, the plan section. */
static void print_report_without_source(const char *report)
{
    printf("\n== CUDA kernels (no GPU here: compiled by NVRTC, not run; sources left out) ==\n");
    const char *plan = strstr(report, "\n==== plan\n");
    bool first = true;
    for (const char *l = report; *l && (!plan || l <= plan);) {
        const char *nl = strchr(l, '\n');
        int len = nl ? (int)(nl - l) : (int)strlen(l);
        if (first || !strncmp(l, "==== ", 5))
            printf("%.*s\n", len, l);
        first = false;
        l += len + (nl ? 1 : 0);
    }
    if (plan)
        printf("%s", plan);
}

/* explain: what each stage did to the graph (the plan's statistics s) */
static void explain_stages(const opts *o, const smelt_plan_stats *s)
{
    printf("\n== what each stage did ==\n");
    if (o->opt_level >= 1)
        printf("constant folding        %d node%s folded into constants\n"
               "common subexpressions   %d duplicate node%s removed\n"
               "algebraic identities    %d node%s simplified (x * 1, neg(neg(x)), ...)\n"
               "dead branches           %d where operator%s with a constant condition or equal branches\n"
               "dead code               %d unused node%s removed\n",
               s->folded, plural(s->folded, ""), s->cse, plural(s->cse, ""), s->simplified, plural(s->simplified, ""),
               s->dead_branches, plural(s->dead_branches, ""), s->dce, plural(s->dce, ""));
    if (o->opt_level >= 1 && s->conv_folded)
        printf("conv scale/shift        %d convolution%s with its per-channel scale and shift (batch-norm) "
               "folded into its weights\n", s->conv_folded, plural(s->conv_folded, ""));
    if (o->opt_level < 1)
        printf("passes                  none at opt-level 0\n");
    printf("fusion                  %d operator%s in %d kernel%s%s\n", s->ops, plural(s->ops, ""),
           s->kernels, plural(s->kernels, ""),
           o->opt_level >= 3 ? "" : " (fusion is off below opt-level 3)");
    printf("compilation             %d compiled, %d from memory, %d from disk, %.3f ms (%s%s%s)\n",
           s->compiles, s->cache_hits, s->disk_hits, s->compile_ms, s->backend,
           s->tier_backend ? ", then in the background: " : "", s->tier_backend ? s->tier_backend : "");
}

/* explain: each kernel's generated source (the prelude with --full-source only) */
static void explain_kernels(const opts *o, const smelt_plan *p)
{
    for (int i = 0; !o->no_source && i < smelt_plan_num_kernels(p); i++) {
        const char *src = smelt_plan_kernel_source(p, i), *name = smelt_plan_kernel_name(p, i);
        if (!src || !name) {
            printf("\n== kernel %d: no generated source (a library call, or not compiled) ==\n", i);
            continue;
        }
        /* the prelude (types, math declarations, helpers) is the same in
         * every kernel: show it with --full-source only */
        char mark[64];
        snprintf(mark, sizeof mark, "/* %s", name);
        const char *body = strstr(src, mark);
        if (o->full_source || !body)
            body = src;
        printf("\n== kernel %d: %s%s ==\n%s", i, name,
               body == src ? "" : " (prelude left out; --full-source shows it)", body);
        if (*body && body[strlen(body) - 1] != '\n')
            putchar('\n');
    }
}

static int cmd_explain(const opts *o, binding *b, int nb)
{
    int rc;
    bool graph_file = is_graph_file(o->pos[0]);
    if ((rc = not_npy(o->pos[0])))
        return rc;
    if (graph_file && o->save_graph)
        return usage_error("--save-graph is for an expression");
    smelt_ctx *ctx = NULL;
    smelt_graph *g = NULL;
    smelt_node **outs = NULL, *r = NULL;
    smelt_plan *p = NULL;
    char *text = NULL;
    int n_out = 0, order[MAX_BIND + 1];
    if ((rc = new_ctx(o, &ctx)) || (rc = load_bindings(ctx, b, nb, false)))
        goto done;
    if (graph_file) {
        if (smelt_graph_load(ctx, o->pos[0], &g, &n_out, &outs)) {
            rc = input_error_msg(smelt_errmsg(ctx));
            goto done;
        }
        if (n_out == 0) {
            rc = input_error("%s: the graph has no outputs", o->pos[0]);
            goto done;
        }
        if (smelt_graph_num_inputs(g) > MAX_BIND) {
            rc = input_error("%s: the graph has %d inputs; smelt takes at most %d", o->pos[0],
                         smelt_graph_num_inputs(g), MAX_BIND);
            goto done;
        }
        if ((rc = match_inputs(g, b, nb, order, false)))
            goto done;
    } else {
        if ((rc = expr_graph(ctx, o->pos[0], b, nb, &g, &r)))
            goto done;
        outs = &r;
        n_out = 1;
        if (o->save_graph && smelt_graph_save(g, 1, outs, o->save_graph)) {
            rc = input_error_msg(smelt_errmsg(ctx));
            goto done;
        }
    }
    double ms;
    if (smelt_graph_to_text(g, n_out, outs, &text)) {
        rc = input_error_msg(smelt_errmsg(ctx));
        goto done;
    }
    /* NVRTC asked for (--backend, else SMELT_JIT_BACKEND / MGB_JIT_BACKEND)
     * and no GPU here: emit the CUDA kernels and let NVRTC check them */
    const char *bk = o->backend;
    if (!bk && (!(bk = smelt_env("SMELT_JIT_BACKEND")) || !*bk))
        bk = smelt_env("MGB_JIT_BACKEND");
    if (bk && !strcasecmp(bk, "NVRTC") && smelt_backend_check(ctx, "NVRTC")) {
        smelt_plan_opts po;
        smelt_plan_opts_init(&po);
        po.opt_level = o->opt_level;
        po.backend = "NVRTC";
        char *report = NULL;
        int st = smelt_plan_emit_only(ctx, g, n_out, outs, &po, NULL, &report);
        if (!graph_file)
            printf("expression: %s\n", o->pos[0]);
        printf("\n== graph (smelt-graph format, docs/formats.md) ==\n%s", text);
        if (report && o->no_source) /* the summary, each kernel's verdict, the plan */
            print_report_without_source(report);
        else if (report)
            printf("\n== CUDA kernels (no GPU here: compiled by NVRTC, not run) ==\n%s", report);
        if (st)
            rc = input_error_msg(smelt_errmsg(ctx));
        smelt_free(report);
        goto done;
    }
    if ((rc = make_plan(ctx, g, n_out, outs, o->opt_level, o->backend, &p, &ms)))
        goto done;
    smelt_plan_stats s;
    smelt_plan_get_stats(p, &s);
    if (!graph_file)
        printf("expression: %s\n", o->pos[0]);
    printf("\n== graph (smelt-graph format, docs/formats.md) ==\n%s", text);
    printf("\n== plan ==\n%s", smelt_plan_describe(p));
    explain_stages(o, &s);
    explain_kernels(o, p);
done:
    smelt_free(text);
    smelt_plan_free(p);
    if (outs != &r)
        smelt_free(outs);
    smelt_graph_free(g);
    free_bindings(b, nb);
    smelt_ctx_free(ctx);
    return rc;
}

static void env_line(const char *name, const char *what)
{
    const char *v = smelt_env(name);
    printf("  %-27s %-24s %s\n", name, v ? v : "(unset)", what);
}

static int cmd_info(const opts *o, binding *b, int nb)
{
    (void)b, (void)nb;
    int rc;
    smelt_ctx *ctx;
    if ((rc = new_ctx(o, &ctx)))
        return rc;
    if (o->ops) {
        /* whether the expression language calls it: ask the parser */
        printf("%-16s %-9s %s\n", "operator", "operands", "in expressions");
        for (int i = 0; i < SMELT_OP_COUNT; i++) {
            const char *name = smelt_op_name((smelt_op)i);
            int n = smelt_op_arity((smelt_op)i);
            char e[64];
            snprintf(e, sizeof e, "%s(%s)", name, n == 0 ? "" : n == 1 ? "x" : n == 2 ? "x, y" : "x, y, z");
            smelt_graph *g = NULL;
            bool ok = false;
            for (int form = 0; form < 2; form++) { /* the reductions' form takes axis and keepdims */
                char r[64];
                snprintf(r, sizeof r, "%s(x, axis=None, keepdims=False)", name);
                if (smelt_graph_new(ctx, &g))
                    break;
                smelt_input(g, "x", SMELT_I64, 0, NULL);
                smelt_input(g, "y", SMELT_I64, 0, NULL);
                smelt_input(g, "z", SMELT_I64, 0, NULL);
                bool parsed = smelt_expr(g, form ? r : e, NULL, NULL, 0);
                ok = ok || parsed || !strstr(smelt_graph_errmsg(g), "unknown function");
                smelt_graph_free(g);
                if (form && parsed)
                    snprintf(e, sizeof e, "%s(x, axis, keepdims)", name);
            }
            if (ok && i == SMELT_OP_ARANGE)
                snprintf(e, sizeof e, "%s(n)", name); /* (a whole number, not an array) */
            /* views: their arguments are shapes, axes, slices */
            static const char *const views[][2] = {{"broadcast_to", "broadcast_to(x, shape)"},
                                                   {"reshape", "reshape(x, shape)"},
                                                   {"transpose", "transpose(x[, axes]), x.T"},
                                                   {"slice", "x[start:stop:step, i, None]"},
                                                   {"concat", "concat((x, y, ...), axis)"},
                                                   {"pad", "pad(x, widths, constant_values=v)"}};
            for (size_t k = 0; k < sizeof views / sizeof views[0]; k++)
                if (!strcmp(name, views[k][0]))
                    snprintf(e, sizeof e, "%s", views[k][1]), ok = true;
            printf("%-16s %-9d %s\n", name, n, ok ? e : "-");
        }
        smelt_ctx_free(ctx);
        return 0;
    }
    printf("smelt %s\n\nbackends:\n", SMELT_VERSION);
    const char *name, *what;
    for (int i = 0; (name = smelt_backend_name(i, &what)); i++) {
        if (smelt_backend_check(ctx, name) == SMELT_OK) {
            printf("  %-6s available      %s\n", name, what);
        } else { /* the library's "backend X is not available: why" */
            const char *why = smelt_errmsg(ctx), *colon = strstr(why, "is not available: ");
            printf("  %-6s not available: %s\n", name, colon ? colon + 18 : why);
        }
    }
    /* what AUTO (or SMELT_JIT_BACKEND) gives: a tiny plan says */
    smelt_graph *g = NULL;
    smelt_plan *p = NULL;
    int64_t one = 1;
    const char *warnings = NULL; /* settings the library ignored, from a plan's description */
    if (!smelt_graph_new(ctx, &g)) {
        smelt_node *x = smelt_input(g, "x", SMELT_F32, 1, &one);
        smelt_node *y = smelt_unary(g, SMELT_OP_NEG, x);
        const char *env = smelt_env("SMELT_JIT_BACKEND");
        if (!env || !*env)
            env = smelt_env("MGB_JIT_BACKEND");
        if (y && !smelt_plan_new(ctx, g, 1, &y, NULL, &p)) {
            smelt_plan_stats s;
            smelt_plan_get_stats(p, &s);
            printf("  in force: %s%s%s (%s)\n", s.backend, s.tier_backend ? ", then in the background: " : "",
                   s.tier_backend ? s.tier_backend : "",
                   env && *env ? "from SMELT_JIT_BACKEND / MGB_JIT_BACKEND" : "AUTO");
            warnings = strstr(smelt_plan_describe(p), "warning: ");
        } else {
            printf("  in force: none: %s\n", smelt_errmsg(ctx));
        }
    }
    if (warnings)
        printf("\n%s", warnings);
    smelt_plan_free(p);
    smelt_graph_free(g);
    printf("\nthreads: %d%s\n", smelt_ctx_threads(ctx),
           o->threads > 0 ? " (--threads)" : " (all cores; --threads N to change)");
    char dir[4096];
    printf("\nkernel cache:\n  in memory            per context (every backend)\n");
    if (smelt_cache_dir(ctx, dir, sizeof dir) == SMELT_OK)
        printf("  persistent           %s (compiled CC kernels)\n", dir);
    else
        printf("  persistent           off: %s\n", smelt_errmsg(ctx));
    printf("\nenvironment:\n");
    env_line("SMELT_JIT_BACKEND", "backend: TCC, CC, NVRTC, AUTO");
    env_line("MGB_JIT_BACKEND", "the same (MegEngine's name)");
    env_line("SMELT_CACHE", "0, false, no or off turns the persistent cache off");
    env_line("SMELT_CACHE_DIR", "persistent cache folder");
    env_line("SMELT_CACHE_MAX_MB", "persistent cache size cap in MiB (default 512)");
    env_line("SMELT_MEM_CACHE_MAX_KERNELS", "in-memory kernel cache bound (default 4096)");
    env_line("SMELT_MEM_CACHE_MAX_MB", "the same in MiB (default 256)");
    env_line("SMELT_CC_TIMEOUT", "seconds a CC compile may take (120)");
    env_line("SMELT_DUMP_DIR", "write generated kernel sources");
    env_line("SMELT_TEMPLATE_DIR", "kernel templates to use");
    printf("\ndtypes:");
    for (int d = 0; d < SMELT_DTYPE_COUNT; d++)
        printf(" %s", smelt_dtype_name((smelt_dtype)d));
    printf(" (f16 and bf16 compute in f32)\n");
    printf("\noperators: %d (smelt info --ops lists them)\n", SMELT_OP_COUNT);
    smelt_ctx_free(ctx);
    return 0;
}

typedef struct command {
    const char *name, *help;
    const char *flags;   /* the option letters it takes (parse_opts) */
    const char *missing; /* the usage error without a first argument; NULL: it takes none */
    bool specs;          /* inputs may be name=DTYPE[SHAPE] specs */
    int (*run)(const opts *o, binding *b, int nb);
} command;

static const command commands[] = {
    {"eval", help_eval, "hoObtdsj", "no expression given", false, cmd_eval},
    {"run", help_run, "hoObtdj", "no graph file given", false, cmd_run},
    {"explain", help_explain, "hObnfsj", "no expression or graph file given", true, cmd_explain},
    {"info", help_info, "hpj", NULL, false, cmd_info},
};

/* A command: its options, --help, its first argument and the name=file
 * bindings after it, then the command itself. */
static int run_command(const command *c, int argc, char **argv)
{
    opts o;
    binding b[MAX_BIND];
    int rc = parse_opts(argc, argv, c->flags, &o);
    if (rc)
        return rc;
    if (o.help) {
        fputs(c->help, stdout);
        return 0;
    }
    if (!c->missing)
        return o.npos ? usage_error("unexpected argument '%s'", o.pos[0]) : c->run(&o, b, 0);
    if (o.npos < 1)
        return usage_error("%s", c->missing);
    int nb = o.npos - 1;
    if (nb > MAX_BIND)
        return usage_error("too many inputs (%d): at most %d name=value inputs", nb, MAX_BIND);
    if ((rc = parse_bindings(o.pos + 1, nb, c->specs, b)))
        return rc;
    return c->run(&o, b, nb);
}

/* ---- ONNX models: the Python package's command line ----------------------- */

#ifndef SMELT_SOURCE_PYTHON
#define SMELT_SOURCE_PYTHON ""
#endif
#ifndef SMELT_ONNX_VENV_PYTHON
#define SMELT_ONNX_VENV_PYTHON ""
#endif

/* The first positional argument of `smelt run|explain ARGS`, skipping the
 * options and the values of those that take one; NULL if none. */
static const char *first_positional(int argc, char **argv)
{
    static const char *const valued[] = {"-o", "--output", "--opt-level", "--backend", "--dump",
                                         "--threads", "--save-graph", "--out"};
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--"))
            return i + 1 < argc ? argv[i + 1] : NULL;
        if (a[0] != '-' || !a[1])
            return a;
        if (strchr(a, '='))
            continue;
        for (size_t k = 0; k < sizeof valued / sizeof valued[0]; k++)
            if (!strcmp(a, valued[k])) {
                i++;
                break;
            }
    }
    return NULL;
}

static bool is_onnx_file(const char *path)
{
    size_t n = path ? strlen(path) : 0;
    return n > 5 && !strcasecmp(path + n - 5, ".onnx");
}

/* `smelt run|explain MODEL.onnx ...` is `python -m smelt.onnx run|explain
 * ...`: ONNX's protobuf files are read by the onnx package (PyPI), and the
 * graph is built by smelt.onnx's converter, which exists once, in Python.
 * The Python: SMELT_PYTHON, else the build's onnx-venv (scripts/onnx-
 * conformance --setup), else python3 on PATH; the package: the source
 * tree's python/ when it is there (else an installed one); the library:
 * the libsmelt this tool runs on (SMELT_LIBRARY, unless already set). */
static int exec_onnx(int argc, char **argv)
{
    const char *py = getenv("SMELT_PYTHON");
    if (!py || !*py)
        py = access(SMELT_ONNX_VENV_PYTHON, X_OK) == 0 ? SMELT_ONNX_VENV_PYTHON : "python3";
    char main_py[4096];
    snprintf(main_py, sizeof main_py, "%s/smelt/onnx/__main__.py", SMELT_SOURCE_PYTHON);
    if (*SMELT_SOURCE_PYTHON && access(main_py, R_OK) == 0) {
        const char *old = getenv("PYTHONPATH");
        size_t n = strlen(SMELT_SOURCE_PYTHON) + (old ? strlen(old) : 0) + 2;
        char *pp = malloc(n);
        if (!pp)
            return input_error("out of memory");
        snprintf(pp, n, "%s%s%s", SMELT_SOURCE_PYTHON, old && *old ? ":" : "", old && *old ? old : "");
        setenv("PYTHONPATH", pp, 1);
        free(pp);
    }
    Dl_info info;
    union {
        int (*fn)(smelt_ctx **);
        void *p;
    } sym = {.fn = smelt_ctx_new}; /* an address inside the library */
    const char *lib = getenv("SMELT_LIBRARY");
    if ((!lib || !*lib) && dladdr(sym.p, &info) && info.dli_fname &&
        strstr(info.dli_fname, "libsmelt"))
        setenv("SMELT_LIBRARY", info.dli_fname, 1);
    /* python -m smelt.onnx, with one line instead of a traceback when the
     * package or what it needs (numpy, cffi) does not import */
    static const char boot[] =
        "import sys\n"
        "try:\n"
        "    from smelt.onnx.__main__ import main\n"
        "except ImportError as e:\n"
        "    sys.stderr.write('smelt: error: %s cannot import %s, which smelt.onnx needs (SMELT_PYTHON names a "
        "Python that has it; scripts/onnx-conformance --setup makes build/onnx-venv)\\n' % (sys.executable, "
        "e.name or e))\n"
        "    sys.exit(1)\n"
        "sys.exit(main(sys.argv[1:]))\n";
    char **av = calloc((size_t)argc + 3, sizeof *av);
    if (!av)
        return input_error("out of memory");
    av[0] = (char *)py;
    av[1] = (char *)"-c";
    av[2] = (char *)boot;
    for (int i = 1; i < argc; i++)
        av[i + 2] = argv[i];
    fflush(NULL);
    execvp(py, av);
    int e = errno;
    free(av);
    return input_error("cannot start %s for an ONNX model: %s (set SMELT_PYTHON to a Python with the onnx "
                       "package, or run scripts/onnx-conformance --setup)",
                       py, strerror(e));
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs(help_main, stderr);
        return EXIT_USAGE;
    }
    const char *c = argv[1];
    if (!strcmp(c, "--help") || !strcmp(c, "-h") || !strcmp(c, "help")) {
        if (argc > 2 && strcmp(c, "help") == 0) {
            for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
                if (!strcmp(argv[2], commands[i].name)) {
                    fputs(commands[i].help, stdout);
                    return 0;
                }
            return usage_error("unknown command '%s'", argv[2]);
        }
        fputs(help_main, stdout);
        return 0;
    }
    if (!strcmp(c, "--version") || !strcmp(c, "-V")) {
        printf("smelt %s\n", SMELT_VERSION);
        return 0;
    }
    if ((!strcmp(c, "run") || !strcmp(c, "explain")) && is_onnx_file(first_positional(argc - 2, argv + 2)))
        return exec_onnx(argc, argv);
    for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
        if (!strcmp(c, commands[i].name)) {
            cmd_name = c;
            return run_command(&commands[i], argc - 2, argv + 2);
        }
    return usage_error("unknown command '%s'", c);
}
