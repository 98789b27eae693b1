"""smelt.load (graph files), backends, threads."""
import os

import numpy as np

from . import _dtypes as D
from ._lib import T, c_table, context, ffi, lib, make_error, text
from ._jit import as_array, plan_stats
from ._tracer import data_ptr, ensure_usable, wrap_tensor


def tensor_to_numpy(t):
    """A NumPy array over a tensor smelt allocated (no copy); the tensor is
    freed when the array is."""
    dt = lib.smelt_tensor_dtype(t)
    nd = lib.smelt_tensor_ndim(t)
    sp = lib.smelt_tensor_shape(t)
    shape = tuple(int(sp[i]) for i in range(nd))
    dtype = D.to_numpy(dt)
    n = int(np.prod(shape, dtype=np.int64))
    if n == 0:
        lib.smelt_tensor_free(t)
        return np.empty(shape, dtype)
    data = ffi.gc(ffi.cast(T["char *"], lib.smelt_tensor_data(t)), lambda _p, t=t: lib.smelt_tensor_free(t))
    return np.frombuffer(ffi.buffer(data, n * dtype.itemsize), dtype).reshape(shape)


class Loaded:
    """A graph file (smelt.load): call it with one array per graph input, in
    order (or by name as keywords); returns the outputs (a tuple when there
    are several).  One plan serves every shape of the same ranks."""

    def __init__(self, path, opt_level=3, backend=None):
        ctx = context()
        g = ffi.new(T["smelt_graph **"])
        n_out = ffi.new(T["int *"])
        outs = ffi.new(T["smelt_node ***"])
        st = lib.smelt_graph_load(ctx.ptr, os.fsencode(path), g, n_out, outs)
        if st:
            raise make_error(st, "%s: %s" % (path, ctx.errmsg()))
        self.g = ffi.gc(g[0], lib.smelt_graph_free)
        self.n_out = n_out[0]
        self.nodes = ffi.new(T["smelt_node *[]"], [outs[0][i] for i in range(self.n_out)] or [ffi.NULL])
        lib.smelt_free(outs[0])
        self.n_in = lib.smelt_graph_num_inputs(self.g)
        self.names = []
        self.specs = []
        for i in range(self.n_in):
            nd = lib.smelt_graph_input(self.g, i)
            self.names.append(text(lib.smelt_node_name(nd)))
            self.specs.append(D.to_numpy(lib.smelt_node_dtype(nd)))
        opts = ffi.new(T["smelt_plan_opts *"])
        lib.smelt_plan_opts_init(opts)
        opts.opt_level = opt_level
        b = ffi.new(T["char[]"], backend.encode()) if backend else ffi.NULL
        opts.backend = b
        p = ffi.new(T["smelt_plan **"])
        with ctx.lock:
            st = lib.smelt_plan_new(ctx.ptr, self.g, self.n_out, self.nodes, opts, p)
        if st:
            raise make_error(st, "%s: %s" % (path, ctx.errmsg()))
        self.plan = ffi.gc(p[0], lib.smelt_plan_free)
        self.ctx = ctx
        self.path = path

    def __call__(self, *args, **kwargs):
        args = list(args)
        for k, v in kwargs.items():
            if k not in self.names:
                raise TypeError("%s has no input named %r (inputs: %s)" % (self.path, k, ", ".join(self.names)))
            i = self.names.index(k)
            while len(args) <= i:
                args.append(None)
            if args[i] is not None:
                raise TypeError("input %r given twice" % k)
            args[i] = v
        if len(args) != self.n_in or any(a is None for a in args):
            raise TypeError("%s takes %d inputs (%s), %d given" % (self.path, self.n_in, ", ".join(self.names),
                                                                   sum(a is not None for a in args)))
        arrs = [ensure_usable(as_array(a), "input %s" % n) for a, n in zip(args, self.names)]
        ts = [wrap_tensor(self.ctx, a) for a in arrs]
        outs = ffi.new(T["smelt_tensor *[]"], self.n_out or 1)
        with self.ctx.lock:
            st = lib.smelt_plan_run(self.plan, self.n_in, ffi.new(T["smelt_tensor *[]"], ts or [ffi.NULL]),
                                    self.n_out, outs)
            if st:
                raise make_error(st, "%s: %s" % (self.path, self.ctx.errmsg()))
        res = tuple(tensor_to_numpy(outs[i]) for i in range(self.n_out))
        return res[0] if len(res) == 1 else res

    def explain(self):
        return text(lib.smelt_plan_describe(self.plan))

    def stats(self):
        return plan_stats(self.plan)


def load(path, *, opt_level=3, backend=None):
    """A graph file written by f.dump(path) or smelt_graph_save, as a
    callable (MegEngine's load of a dumped trace)."""
    return Loaded(path, opt_level, backend)


def backends():
    """{name: (usable, why)} for every registered backend: whether it can be
    used here and, if not, why (smelt info's list)."""
    ctx = context()
    out = {}
    for name, about in c_table(lib.smelt_backend_name):
        st = lib.smelt_backend_check(ctx.ptr, name.encode())
        out[name] = (st == 0, about if st == 0 else ctx.errmsg())
    return out


def set_threads(n):
    """Worker threads for kernels (0: all cores, the default)."""
    ctx = context()
    ctx.check(lib.smelt_ctx_set_threads(ctx.ptr, int(n)), "set_threads")


def get_threads():
    return lib.smelt_ctx_threads(context().ptr)


def info():
    """The library's path, backends and threads, as text."""
    from ._lib import library_path
    lines = ["library: %s" % library_path, "threads: %d" % get_threads()]
    for name, (ok, why) in backends().items():
        lines.append("backend %-6s %s" % (name, ("yes: " if ok else "no: ") + why))
    return "\n".join(lines)
