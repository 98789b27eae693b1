"""libsmelt.so through cffi in ABI mode: no compiler at install time.

cffi's ABI mode was chosen over ctypes by measured call overhead (a cached
call of a compiled function converts every array and makes one C call:
cffi's ffi.from_buffer and a call cost about a third of ctypes' equivalent,
docs/python.md).  Only the declarations the package uses are here; they
follow include/smelt.h.
"""
import os
import threading

import cffi

ffi = cffi.FFI()
ffi.cdef("""
typedef struct smelt_ctx smelt_ctx;
typedef struct smelt_graph smelt_graph;
typedef struct smelt_node smelt_node;
typedef struct smelt_plan smelt_plan;
typedef struct smelt_tensor smelt_tensor;

const char *smelt_strerror(int status);
const char *smelt_dtype_name(int dt);
size_t smelt_dtype_size(int dt);
const char *smelt_op_name(int op);
int smelt_op_from_name(const char *name);
int smelt_op_arity(int op);
const char *smelt_op_alias(int i, const char **op);

int smelt_ctx_new(smelt_ctx **out);
void smelt_ctx_free(smelt_ctx *ctx);
const char *smelt_errmsg(const smelt_ctx *ctx);
int smelt_ctx_set_backend(smelt_ctx *ctx, const char *name);
int smelt_backend_check(smelt_ctx *ctx, const char *name);
const char *smelt_backend_name(int i, const char **about);
int smelt_ctx_set_threads(smelt_ctx *ctx, int threads);
int smelt_ctx_threads(const smelt_ctx *ctx);

int smelt_tensor_new(smelt_ctx *ctx, int dt, int ndim, const int64_t *shape, smelt_tensor **out);
int smelt_tensor_wrap(smelt_ctx *ctx, int dt, int ndim, const int64_t *shape,
                      const int64_t *strides, void *data, smelt_tensor **out);
int smelt_tensor_rebind(smelt_tensor *t, void *data);
void smelt_tensor_free(smelt_tensor *t);
int smelt_tensor_dtype(const smelt_tensor *t);
int smelt_tensor_ndim(const smelt_tensor *t);
const int64_t *smelt_tensor_shape(const smelt_tensor *t);
const int64_t *smelt_tensor_strides(const smelt_tensor *t);
int64_t smelt_tensor_numel(const smelt_tensor *t);
void *smelt_tensor_data(const smelt_tensor *t);
int smelt_tensor_new_device(smelt_ctx *ctx, int dt, int ndim, const int64_t *shape, smelt_tensor **out);
int smelt_tensor_wrap_device(smelt_ctx *ctx, int dt, int ndim, const int64_t *shape,
                             const int64_t *strides, void *device_ptr, smelt_tensor **out);
int smelt_tensor_is_device(const smelt_tensor *t);
int smelt_tensor_copy_from_host(smelt_tensor *dst_device, const smelt_tensor *src_host);
int smelt_tensor_copy_to_host(smelt_tensor *dst_host, const smelt_tensor *src_device);

int smelt_graph_new(smelt_ctx *ctx, smelt_graph **out);
void smelt_graph_free(smelt_graph *g);
int smelt_graph_status(const smelt_graph *g);
const char *smelt_graph_errmsg(const smelt_graph *g);
int smelt_graph_num_inputs(const smelt_graph *g);
smelt_node *smelt_input(smelt_graph *g, const char *name, int dt, int ndim, const int64_t *shape);
smelt_node *smelt_const(smelt_graph *g, double value, int dt);
smelt_node *smelt_scalar(smelt_graph *g, double value);
smelt_node *smelt_op_apply(smelt_graph *g, int op, int n, smelt_node *const *args);
smelt_node *smelt_cast(smelt_graph *g, smelt_node *a, int dt);
smelt_node *smelt_broadcast_to(smelt_graph *g, smelt_node *a, int ndim, const int64_t *shape);
smelt_node *smelt_reshape(smelt_graph *g, smelt_node *a, int ndim, const int64_t *shape);
smelt_node *smelt_transpose(smelt_graph *g, smelt_node *a, const int *perm);
smelt_node *smelt_slice(smelt_graph *g, smelt_node *a, int axis, int64_t start, int64_t stop, int64_t step);
smelt_node *smelt_flip(smelt_graph *g, smelt_node *a, int axis);
smelt_node *smelt_expand_dims(smelt_graph *g, smelt_node *a, int axis);
smelt_node *smelt_squeeze(smelt_graph *g, smelt_node *a, int axis);
smelt_node *smelt_concat(smelt_graph *g, int n, smelt_node *const *parts, int axis);
smelt_node *smelt_pad(smelt_graph *g, smelt_node *a, const int64_t *widths, double value);
smelt_node *smelt_arange(smelt_graph *g, int64_t n, int dt);
smelt_node *smelt_take(smelt_graph *g, smelt_node *a, smelt_node *indices, int axis);
smelt_node *smelt_take_along_axis(smelt_graph *g, smelt_node *a, smelt_node *indices, int axis);
smelt_node *smelt_one_hot(smelt_graph *g, smelt_node *indices, int64_t depth, int dt);
smelt_node *smelt_tril(smelt_graph *g, smelt_node *a, int64_t k);
smelt_node *smelt_triu(smelt_graph *g, smelt_node *a, int64_t k);
smelt_node *smelt_matmul(smelt_graph *g, smelt_node *a, smelt_node *b);
smelt_node *smelt_constant(smelt_graph *g, const smelt_tensor *t);
smelt_node *smelt_reduce(smelt_graph *g, int op, smelt_node *a, int n_axes, const int *axes, int keepdims);
int smelt_node_dtype(const smelt_node *n);
int smelt_node_ndim(const smelt_node *n);
const int64_t *smelt_node_shape(const smelt_node *n);
int smelt_node_op(const smelt_node *n);
smelt_node *smelt_expr(smelt_graph *g, const char *expr, const char *const *names,
                       smelt_node *const *nodes, int n);
int smelt_grad(smelt_graph *g, smelt_node *loss, int n_wrt, smelt_node *const *wrt, smelt_node **grads);
int smelt_grad_ct(smelt_graph *g, int n_out, smelt_node *const *outs, smelt_node *const *cotangents,
                  int n_wrt, smelt_node *const *wrt, smelt_node **grads);

typedef struct smelt_plan_opts {
    int opt_level;
    const char *backend;
    const int *donate;
    int n_donate;
    int capture_as_const;
} smelt_plan_opts;
void smelt_plan_opts_init(smelt_plan_opts *opts);
int smelt_plan_new(smelt_ctx *ctx, smelt_graph *g, int n_out, smelt_node *const *outputs,
                   const smelt_plan_opts *opts, smelt_plan **out);
void smelt_plan_free(smelt_plan *p);
int smelt_plan_run(smelt_plan *p, int n_in, smelt_tensor *const *inputs, int n_out,
                   smelt_tensor **outputs);
int smelt_plan_run_rebind(smelt_plan *p, int n_in, smelt_tensor *const *inputs, int n_out,
                          smelt_tensor *const *outputs, void *const *data);
typedef struct smelt_plan_stats {
    int kernels; int ops; int compiles; int cache_hits; int fallbacks; double compile_ms;
    int folded; int cse; int dce; int simplified; int dead_branches;
    const char *backend; const char *tier_backend; int kernels_fast; int tier_pending;
    double tier_compile_ms; int disk_hits;
    int mem_buffers; int mem_inplace; int donated_inplace;
    int64_t mem_bytes; int64_t mem_lower_bytes; int64_t mem_naive_bytes; double mem_plan_ms;
    int copies; int views_moved; int64_t run_allocs; int conv_folded; int batch_chains;
} smelt_plan_stats;
int smelt_plan_get_stats(const smelt_plan *p, smelt_plan_stats *out);
int smelt_plan_wait(smelt_plan *p);
const char *smelt_plan_describe(smelt_plan *p);
int smelt_plan_num_kernels(const smelt_plan *p);
const char *smelt_plan_kernel_name(const smelt_plan *p, int i);
const char *smelt_plan_kernel_source(const smelt_plan *p, int i);

void smelt_free(void *ptr);
int smelt_graph_save(smelt_graph *g, int n_out, smelt_node *const *outputs, const char *path);
int smelt_graph_load(smelt_ctx *ctx, const char *path, smelt_graph **g, int *n_out, smelt_node ***outputs);
smelt_node *smelt_graph_input(const smelt_graph *g, int i);
const char *smelt_node_name(const smelt_node *n);
""")

# Every C type the package passes, parsed once here: cffi parses a type
# string with pycparser on its first use (milliseconds each), which would
# otherwise fall on the first call of every compiled function.
T = {name: ffi.typeof(name) for name in ['char *', 'char *[]', 'char[]', 'const char **', 'int *', 'int64_t[]', 'int[]', 'smelt_ctx **', 'smelt_graph **', 'smelt_node ***', 'smelt_node *[]', 'smelt_plan **', 'smelt_plan_opts *', 'smelt_plan_stats *', 'smelt_tensor **', 'smelt_tensor *[]', 'void *']}

_here = os.path.dirname(os.path.abspath(__file__))


def _candidates():
    env = os.environ.get("SMELT_LIBRARY")
    if env:
        return [env]
    out = [os.path.join(_here, "libsmelt.so.0"),  # a copy installed beside the package
           os.path.normpath(os.path.join(_here, "..", "..", "build", "libsmelt.so"))]
    out += ["libsmelt.so.0"]  # the system's search path (after meson install)
    return out


def _load():
    errors = []
    for path in _candidates():
        if os.sep in path and not os.path.exists(path):
            errors.append("%s: no such file" % path)
            continue
        try:
            return ffi.dlopen(path), path
        except OSError as e:
            errors.append("%s: %s" % (path, e))
    raise ImportError("smelt: cannot load libsmelt.so (set SMELT_LIBRARY to its path, or build it "
                      "with scripts/setup, or install it with meson install): " + "; ".join(errors))


lib, library_path = _load()
# cffi builds each function's accessor on its first use: build them now,
# not during the first call of a compiled function
for _name in dir(lib):
    getattr(lib, _name)


def text(p):
    """A C string as str ('' for NULL)."""
    return ffi.string(p).decode("utf-8", "replace") if p != ffi.NULL else ""


def c_table(fn):
    """[(name, extra)] of a C table read by index, fn(i, const char **extra)
    -> name, NULL past the end (smelt_op_alias, smelt_backend_name)."""
    out, extra, i = [], ffi.new(T["const char **"]), 0
    while True:
        p = fn(i, extra)
        if p == ffi.NULL:
            return out
        out.append((text(p), text(extra[0])))
        i += 1


# ---- errors ---------------------------------------------------------------
class Error(Exception):
    """An error reported by libsmelt: .status (a SMELT_ERR_* code, negative)
    and the message (smelt_errmsg's detail)."""

    def __init__(self, status, message):
        Exception.__init__(self, message)
        self.status = status
        self.message = message


class InvalidArgumentError(Error, ValueError):
    pass


class ShapeError(Error, ValueError):
    pass


class DtypeError(Error, TypeError):
    pass


class BackendError(Error):
    pass


class CompileError(Error):
    pass


class RuntimeFailure(Error, RuntimeError):
    pass


class UnsupportedError(Error, NotImplementedError):
    pass


class TracerError(Error, TypeError):
    """A traced value was used where Python needs a concrete one (if, float(),
    an index): the message names the line and how to fix it."""

    def __init__(self, message):
        Error.__init__(self, -1, message)


_by_status = {-1: InvalidArgumentError, -2: MemoryError, -3: ShapeError, -4: DtypeError, -5: BackendError,
              -6: CompileError, -7: RuntimeFailure, -8: OSError, -9: SyntaxError, -10: UnsupportedError,
              -11: IndexError}
_classes = {}


def error_class(status):
    """The Error subclass for a status (it also derives from the matching
    Python exception: ValueError for shapes, TypeError for dtypes, ...)."""
    cls = _classes.get(status)
    if cls is None:
        base = _by_status.get(status)
        if base is None or issubclass(base, Error):
            cls = base or Error
        else:
            cls = type(base.__name__.replace("Error", "") + "Error" if base is not MemoryError
                       else "OutOfMemoryError", (Error, base), {})
        _classes[status] = cls
    return cls


def make_error(status, message):
    name = text(lib.smelt_strerror(status))
    return error_class(status)(status, "%s: %s" % (name, message) if message else name)


# ---- the context ----------------------------------------------------------
class Context:
    """A smelt_ctx.  One is made per process on first use (context()) and
    lives as long as the process; a lock serialises compiles and runs, since
    a context is used by one thread at a time."""

    def __init__(self):
        p = ffi.new(T["smelt_ctx **"])
        st = lib.smelt_ctx_new(p)
        if st:
            raise make_error(st, "cannot create a context")
        # never freed: plans, graphs and tensors freed by the garbage
        # collector (at exit too, in any order) still refer to it
        self.ptr = p[0]
        self.lock = threading.RLock()
        self.pid = os.getpid()

    def errmsg(self):
        return text(lib.smelt_errmsg(self.ptr))

    def check(self, st, what=None):
        if st:
            msg = self.errmsg()
            raise make_error(st, "%s: %s" % (what, msg) if what else msg)


_ctx = None
_ctx_lock = threading.Lock()


def context():
    """The process's context (a new one in a forked child)."""
    global _ctx
    c = _ctx
    if c is None or c.pid != os.getpid():
        with _ctx_lock:
            if _ctx is None or _ctx.pid != os.getpid():
                _ctx = Context()
            c = _ctx
    return c
