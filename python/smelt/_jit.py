"""smelt.jit and smelt.trace: trace a plain NumPy function once per input
signature, compile it into one smelt plan, and run the plan on later calls.

A call of a compiled function: the arguments are flattened (tuples, lists
and dicts of arrays and scalars), their signature (dtype, shape, strides,
static values) looks up an entry, and one C call (smelt_plan_run_rebind)
points the entry's tensors at the arrays' memory and runs the plan.
"""
import functools
import inspect
import os
import sys

import numpy as np

from . import _dtypes as D
from . import _dlpack
from ._lib import T, Error, TracerError, context, ffi, lib, make_error, text
from ._tracer import Tracer, TraceState, data_ptr, ensure_usable, lift, wrap_tensor, current, user_location

from_buffer = ffi.from_buffer  # bound once: the per-call path


def _load_accel():
    """The optional accelerator (python/smelt/_accel.c, built by meson where
    Python's headers are): the cached call in C.  None without it, or with
    SMELT_ACCEL=0; the Python path below does the same."""
    if os.environ.get("SMELT_ACCEL", "1").lower() in ("0", "no", "off", "false"):
        return None
    from ._lib import library_path
    m = None
    try:
        from . import _smelt_accel as m  # installed beside the package
    except ImportError:
        import importlib.machinery
        import importlib.util
        here = os.path.dirname(os.path.abspath(__file__))
        dirs = [os.path.dirname(os.path.abspath(library_path)) if library_path else None,
                os.path.join(os.path.dirname(os.path.dirname(here)), "build")]
        for d in dirs:
            for suf in importlib.machinery.EXTENSION_SUFFIXES if d else ():
                path = os.path.join(d, "_smelt_accel" + suf)
                if os.path.exists(path):
                    try:
                        spec = importlib.util.spec_from_file_location("_smelt_accel", path)
                        m = importlib.util.module_from_spec(spec)
                        spec.loader.exec_module(m)
                    except ImportError:
                        m = None
                        continue
                    break
            if m is not None:
                break
    if m is None:
        return None
    m.setup(int(ffi.cast("uintptr_t", ffi.addressof(lib, "smelt_plan_run_rebind"))), np.ndarray, np.empty)
    return m


_accel = _load_accel()
_accel_call = _accel.call if _accel is not None else None


def _addr(c):
    return int(ffi.cast("uintptr_t", c))

# ---- arguments: flattening and signatures ---------------------------------------
_ARRAY = 0


def as_array(x):
    """A NumPy array over x's memory (no copy where x allows: buffers,
    __array_interface__, __dlpack__ on the CPU)."""
    if isinstance(x, np.ndarray):
        return x
    if hasattr(x, "__dlpack_device__") and _dlpack.device_of(x):
        raise TypeError("smelt: a %s in GPU memory is read by functions compiled with smelt.jit(..., "
                        "backend='NVRTC') only; copy it to the host here (its .numpy() or .cpu())" % type(x).__name__)
    if hasattr(x, "__dlpack__") and not hasattr(x, "__array_interface__"):
        try:
            return np.from_dlpack(x)
        except Exception as e:
            raise TypeError("smelt: cannot read a %s through DLPack on the CPU: %s" % (type(x).__name__, e)) from None
    return np.asarray(x)


def _is_arraylike(x):
    return isinstance(x, (np.ndarray, np.generic)) or hasattr(x, "__array_interface__") or \
        hasattr(x, "__dlpack__") or hasattr(x, "__array__")


def flatten(x, leaves):
    """The structure key of x; its arrays appended to leaves.  Arrays are
    leaves keyed by dtype, shape and strides; Python scalars, None and
    strings are static (part of the key, passed as they are)."""
    t = type(x)
    if t is np.ndarray:
        leaves.append(x)
        return (x.dtype, x.shape, x.strides)
    if t is tuple or t is list:
        return (t, tuple(flatten(v, leaves) for v in x))
    if t is dict:
        ks = sorted(x)
        return (dict, tuple(ks), tuple(flatten(x[k], leaves) for k in ks))
    if x is None or t in (int, float, bool, str, complex):
        return ("s", t, x)
    if isinstance(x, Tracer):
        raise TracerError("a traced value is passed to a compiled function inside another trace (%s)%s: call "
                          "the plain function there" % (x._tr.fname, _loc()))
    if _is_arraylike(x):
        if hasattr(x, "__dlpack_device__") and _dlpack.device_of(x):  # a CUDA array (docs/python.md)
            a = _dlpack.DeviceLeaf(x)
            leaves.append(a)
            return a.key
        a = as_array(x)
        leaves.append(a)
        return (a.dtype, a.shape, a.strides)
    try:
        hash(x)
    except TypeError:
        raise TypeError("smelt: an argument of type %s is neither an array, a scalar nor a tuple, list or dict "
                        "of them, and not hashable (static)" % t.__name__) from None
    return ("s", t, x)


def unflatten(key, it):
    """x rebuilt from its key, taking leaves from the iterator it."""
    k0 = key[0]
    if k0 is tuple or k0 is list:
        return k0(unflatten(k, it) for k in key[1])
    if k0 is dict:
        return {k: unflatten(v, it) for k, v in zip(key[1], key[2])}
    if k0 == "s":
        return key[2]
    return next(it)


def _loc():
    loc = user_location()
    return " at " + loc if loc else ""


# ---- the compiled entries ----------------------------------------------------------
class _Entry:
    """One input signature: its graph, plan and tensors."""

    __slots__ = ("tr", "plan", "plan0", "n_in", "n_out", "in_arr", "out_arr", "out_specs", "out_key",
                 "extra_static", "callbacks", "donated", "outs_cache", "calls", "nodes", "opts_keep", "in_t",
                 "out_t", "eager_pending", "_keep_cb", "convert", "lock", "acc", "dev")

    def run(self, leaves, out):
        try:
            ptrs = [from_buffer(a) for a in leaves]
        except (ValueError, TypeError, BufferError):  # a strided view: its first element's address
            ptrs = [data_ptr(a) for a in leaves]
        if self.callbacks:
            ptrs.extend(self._extra_ptrs())
        else:
            ptrs.extend(self.extra_static)
        donated = self.donated
        out_arr = self.out_arr
        if out is None and not donated:  # new arrays: C-contiguous, from_buffer takes them
            outs = [np.empty(shape, dtype) for shape, dtype in self.out_specs]
            ptrs += [from_buffer(o) for o in outs]
        elif out is None:
            outs = []
            for j, (shape, dtype) in enumerate(self.out_specs):
                o = leaves[donated[j]] if j in donated else np.empty(shape, dtype)
                outs.append(o)
                ptrs.append(data_ptr(o))
        else:
            outs, out_arr = self._given(out, leaves)
            ptrs.extend(data_ptr(o) for o in outs)
        plan = self.plan
        if self.eager_pending:  # trace(symbolic=False): the first call runs op by op
            plan = self.plan0
            self.eager_pending = False
        self.calls += 1
        with self.lock:
            st = lib.smelt_plan_run_rebind(plan, self.n_in, self.in_arr, self.n_out, out_arr, ptrs)
            if st:
                msg = self.tr.ctx.errmsg()
        if st:
            if "not aligned" in msg and not all(a.flags.aligned for a in leaves):
                # memory NumPy marks unaligned: copies of the arguments
                return self.run([ensure_usable(a, "argument") for a in leaves], out)
            raise make_error(st, "running %s: %s" % (self.tr.fname, msg))
        return outs

    def _extra_ptrs(self):
        res = {}
        ptrs = []
        for item in self.tr.extra:
            if item[0] == "capture":
                ptrs.append(data_ptr(item[1]))
            else:
                cb, i = item[1], item[2]
                if cb not in res:
                    res[cb] = cb.call_again()
                ptrs.append(data_ptr(res[cb][i]))
        # keep the callbacks' arrays alive until the run is over
        self._keep_cb = res
        return ptrs

    def _given(self, out, leaves):
        """Validate out= (an array, or a tuple/list of them, one per output)."""
        outs = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(outs) != self.n_out:
            raise ValueError("out=: %d array(s) given, the function has %d output(s)" % (len(outs), self.n_out))
        key = []
        for j, (o, (shape, dtype)) in enumerate(zip(outs, self.out_specs)):
            if not isinstance(o, np.ndarray):
                raise TypeError("out=: output %d is a %s, not a NumPy array" % (j, type(o).__name__))
            if o.shape != tuple(shape) or o.dtype != dtype:
                raise ValueError("out=: output %d is %s%s, the function gives %s%s"
                                 % (j, o.dtype, list(o.shape), np.dtype(dtype), list(shape)))
            if not o.flags.writeable or not o.flags.aligned or any(s % o.itemsize for s in o.strides):
                raise ValueError("out=: output %d is not writeable, aligned memory with element strides" % j)
            key.append(o.strides)
        key = tuple(key)
        arr = self.outs_cache.get(key)
        if arr is None:
            ts = [wrap_tensor(self.tr.ctx, o) for o in outs]
            arr = ffi.new(T["smelt_tensor *[]"], ts)
            self.outs_cache[key] = (arr, ts)
        else:
            arr = arr[0]
        return outs, arr


class _Callback:
    """A function of exclude_from_trace recorded in a trace: run again on
    every call, its arrays passed as inputs."""

    def __init__(self, fn, args, kwargs, key, specs, first):
        self.fn, self.args, self.kwargs, self.key, self.specs = fn, args, kwargs, key, specs
        self.first = first  # the trace's results serve the call that traced

    def call_again(self):
        if self.first is not None:
            r, self.first = self.first, None
            return r
        leaves = []
        r = self.fn(*self.args, **self.kwargs)
        key = flatten(r, leaves)
        leaves = [ensure_usable(a, "exclude_from_trace's result") for a in leaves]
        if key != self.key and [(a.dtype, a.shape) for a in leaves] != self.specs:
            raise Error(-3, "%s (exclude_from_trace) returned %s on this call, %s when it was traced: its "
                        "results must keep their structure, dtypes and shapes"
                        % (getattr(self.fn, "__name__", "function"), [(str(a.dtype), a.shape) for a in leaves],
                           [(str(d), s) for d, s in self.specs]))
        return leaves


def exclude_from_trace(fn):
    """Decorator (MegEngine's exclude_from_trace): the function runs in
    Python on every call of a traced function that calls it, and its array
    results enter the graph as inputs.  Its arguments must be concrete
    (no traced values); its results: arrays, scalars, and tuples, lists or
    dicts of them, of the same dtypes and shapes each call."""
    if not callable(fn):
        raise TypeError("exclude_from_trace decorates a function: @smelt.exclude_from_trace")

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        tr = current()
        if tr is None:
            return fn(*args, **kwargs)
        probe = []
        try:
            flatten((args, kwargs), probe)
        except TracerError:
            raise TracerError("%s (exclude_from_trace) is called with a traced value%s: it runs before the "
                              "compiled plan, so its arguments must be concrete" % (fn.__name__, _loc())) from None
        r = fn(*args, **kwargs)
        leaves = []
        key = flatten(r, leaves)
        leaves = [ensure_usable(a, "exclude_from_trace's result") for a in leaves]
        cb = _Callback(fn, args, kwargs, key, [(a.dtype, a.shape) for a in leaves], leaves)
        tracers = []
        for i, a in enumerate(leaves):
            t = tr.input(D.to_smelt(a.dtype), a.shape)
            tr.extra.append(("callback", cb, i))
            tracers.append(t)
        return unflatten(key, iter(tracers))
    wrapper.__smelt_excluded__ = True
    return wrapper


# ---- compiled functions --------------------------------------------------------------
def _norm_nums(v, what):
    if v is None:
        return ()
    if isinstance(v, int):
        return (v,)
    try:
        return tuple(int(i) for i in v)
    except TypeError:
        raise TypeError("%s must be an int or a sequence of ints" % what) from None


def _norm_names(v):
    if v is None:
        return ()
    if isinstance(v, str):
        return (v,)
    return tuple(v)


class Function:
    """A function compiled by smelt.jit / smelt.trace.  Calling it runs the
    plan of its arguments' signature (traced and compiled on the first call
    with that signature).  f.stats(), f.explain(*args), f.dump(path),
    f.lower(*args) (the plan's kernels) describe what was made."""

    def __init__(self, fn, opt_level=3, backend=None, static_argnums=(), static_argnames=(),
                 donate_argnums=(), capture_as_const=False, symbolic=True, name=None):
        if not callable(fn):
            raise TypeError("smelt.jit: %r is not callable" % (fn,))
        if not isinstance(opt_level, int) or not 0 <= opt_level <= 3:
            raise ValueError("opt_level must be 0, 1, 2 or 3, not %r" % (opt_level,))
        self.fn = fn
        self.opt_level = opt_level
        self.backend = backend
        self.static_argnums = _norm_nums(static_argnums, "static_argnums")
        self.static_argnames = _norm_names(static_argnames)
        self.donate_argnums = _norm_nums(donate_argnums, "donate_argnums")
        self.capture_as_const = bool(capture_as_const)
        self.symbolic = bool(symbolic)
        self.__name__ = name or getattr(fn, "__name__", "function")
        self.__doc__ = getattr(fn, "__doc__", None)
        self.__module__ = getattr(fn, "__module__", None) or __name__
        self.__qualname__ = getattr(fn, "__qualname__", self.__name__)
        self.__wrapped__ = fn
        try:
            sig = inspect.signature(fn)
            self._params = [p.name for p in sig.parameters.values()]
            self._takes_out = "out" in sig.parameters
        except (TypeError, ValueError):
            self._params, self._takes_out = [], False
        if backend is not None:
            ctx = context()
            st = lib.smelt_backend_check(ctx.ptr, backend.encode())
            if st:
                raise make_error(st, "backend=%r: %s" % (backend, ctx.errmsg()))
        self._cache = {}
        self._plans = 0
        self._traces = 0
        self._last = None
        self._fast = not (self.static_argnums or self.static_argnames or self.donate_argnums)
        # the accelerator's table: argument key -> entry (see _accel.c)
        self._acc = {} if _accel is not None and self._fast else None

    # pickling: by name when the module's attribute is this object (a
    # decorated module-level function), else the function and the options;
    # the plans are not pickled: each process traces anew
    def __reduce__(self):
        mod = sys.modules.get(self.__module__)
        obj = mod
        for part in (self.__qualname__ or "<").split("."):
            obj = getattr(obj, part, None)
        if obj is self:
            return self.__qualname__
        return (_rebuild, (self.fn, self._options()))

    def _options(self):
        return dict(opt_level=self.opt_level, backend=self.backend, static_argnums=self.static_argnums,
                    static_argnames=self.static_argnames, donate_argnums=self.donate_argnums,
                    capture_as_const=self.capture_as_const, symbolic=self.symbolic)

    def __get__(self, obj, objtype=None):  # as a method
        if obj is None:
            return self
        return functools.partial(self, obj)

    def __repr__(self):
        return "<smelt.jit %s: %d plan(s)>" % (self.__name__, self._plans)

    def _key(self, args, kwargs):
        leaves = []
        if self._fast and not kwargs:
            key = []
            for a in args:
                if type(a) is np.ndarray:
                    leaves.append(a)
                    key.append((a.dtype, a.shape, a.strides))
                else:
                    key.append(flatten(a, leaves))
            return tuple(key), leaves
        sn = self.static_argnums
        key = []
        for i, a in enumerate(args):
            if i in sn or i - len(args) in sn:
                try:
                    hash(a)
                except TypeError:
                    raise TypeError("static argument %d must be hashable, got %s" % (i, type(a).__name__)) from None
                key.append(("s", type(a), a))
            else:
                key.append(flatten(a, leaves))
        kkey = []
        for k in sorted(kwargs):
            v = kwargs[k]
            if k in self.static_argnames:
                kkey.append((k, ("s", type(v), v)))
            else:
                kkey.append((k, flatten(v, leaves)))
        return (tuple(key), tuple(kkey)), leaves

    def __call__(self, *args, **kwargs):
        acc = self._acc
        if acc is not None and current() is None:  # arrays of a signature seen before: the C path
            if not kwargs:
                r = _accel_call(acc, args, self)
            elif len(kwargs) == 1 and "out" in kwargs and not self._takes_out:
                r = _accel_call(acc, args, self, kwargs["out"])
            else:
                r = None
            if r is not None:
                return r
        out = kwargs.pop("out", None) if not self._takes_out else None
        if current() is not None:  # inside another trace: trace through this function
            return self.fn(*args, **kwargs)
        key, leaves = self._key(args, kwargs)
        e = self._cache.get(key)
        if e is None:
            e = self._compile(key, args, kwargs, leaves)
        elif e.convert:  # byte-swapped arguments: native copies each call
            leaves = [ensure_usable(a, "argument") for a in leaves]
        self._last = e
        outs = e.run(leaves, out) if not e.dev else _dlpack.run(e, leaves, out)
        ok = e.out_key
        if acc is not None and e.acc is None and not kwargs:
            self._accel_add(e, args, leaves)
        if ok is _ONE:
            return outs[0]
        return unflatten(ok, iter(outs))

    def _accel_add(self, e, args, leaves):
        """Enter e in the accelerator's table when its calls need nothing
        but the arrays: one output, no callbacks, donation, conversion or
        pending eager run, every argument an ndarray used as it is."""
        e.acc = False
        if e.out_key is not _ONE or e.n_out != 1 or e.callbacks or e.donated or e.eager_pending or e.convert or \
                len(leaves) != len(args) or any(type(a) is not np.ndarray or a is not b for a, b in zip(args, leaves)):
            return
        k = _accel.key(args)
        if k is None or k in self._acc:
            return
        shape, dtype = e.out_specs[0]
        try:  # what an out= of this dtype's buffer says (the accelerator compares it)
            m = memoryview(np.empty((0,), dtype))
            fmt = (m.format, m.itemsize)
        except (TypeError, ValueError, BufferError):
            return
        e.acc = [_addr(e.plan), e.n_in, _addr(e.in_arr), e.n_out, _addr(e.out_arr),
                 tuple(_addr(p) for p in e.extra_static), ((tuple(shape), np.dtype(dtype)),), e.lock, 0, e, fmt]
        self._acc[k] = e.acc

    # ---- tracing
    def _compile(self, key, args, kwargs, leaves):
        ctx = context()
        host = _dlpack.standins(leaves)  # device arrays: host stand-ins of their dtype and shape to trace
        dev = host is not leaves
        leaves = host
        usable = [ensure_usable(a, "argument %d" % i) for i, a in enumerate(leaves)]
        convert = any(u is not a and u.dtype != a.dtype for u, a in zip(usable, leaves))
        if any(u is not a for u, a in zip(usable, leaves)):
            # a copy was needed (unaligned, byte-swapped): the entry's layout is the copy's
            leaves[:] = usable
        with ctx.lock:
            tr = TraceState(ctx, self.capture_as_const, self.__name__)
            with tr:
                tracers = [tr.input(D.to_smelt(a.dtype, "argument"), a.shape, "arg%d" % i)
                           for i, a in enumerate(leaves)]
                it = iter(tracers)
                targs, tkw = self._rebuild_args(key, args, kwargs, it)
                result = self.fn(*targs, **tkw)
                out_leaves = []
                out_key = _flatten_out(result, out_leaves)
                nodes = [lift(o, tr) for o in out_leaves]
            self._traces += 1
            e = _Entry()
            e.tr, e.out_key = tr, out_key
            e.convert = convert and not dev
            e.dev = dev  # runs by _dlpack.run
            e.lock = ctx.lock
            e.n_in = lib.smelt_graph_num_inputs(tr.g)
            e.n_out = len(nodes)
            e.nodes = nodes
            e.out_specs = [(o.shape, o.dtype) for o in nodes]
            e.donated = self._donations(args, leaves, nodes)
            e.plan = self._plan(ctx, tr, nodes, self.opt_level, e)
            e.plan0 = self._plan(ctx, tr, nodes, 0, e) if not self.symbolic else None
            e.eager_pending = not self.symbolic
            in_t = [wrap_tensor(ctx, a) for a in leaves]
            extra_static = []
            for item in tr.extra:
                if item[0] == "capture":
                    in_t.append(wrap_tensor(ctx, item[1]))
                    extra_static.append(data_ptr(item[1]))
                else:
                    cb, i = item[1], item[2]
                    d, s = cb.specs[i]
                    in_t.append(wrap_tensor(ctx, np.empty(s, d)))
            e.callbacks = any(item[0] == "callback" for item in tr.extra)
            e.extra_static = extra_static
            e.in_t = in_t
            e.in_arr = ffi.new(T["smelt_tensor *[]"], in_t or [ffi.NULL])
            out_t = []
            for j, (shape, dtype) in enumerate(e.out_specs):
                if e.donated and j in e.donated:
                    out_t.append(wrap_tensor(ctx, leaves[e.donated[j]]))
                else:
                    out_t.append(wrap_tensor(ctx, np.empty(shape, dtype)))
            e.out_t = out_t
            e.out_arr = ffi.new(T["smelt_tensor *[]"], out_t or [ffi.NULL])
            e.outs_cache = {}
            e.calls = 0
            e.acc = None
        self._cache[key] = e
        return e

    def _rebuild_args(self, key, args, kwargs, it):
        if self._fast and not kwargs:
            targs = [unflatten(k, it) for k in key]
            return targs, {}
        akey, kkey = key
        targs = [unflatten(k, it) for k in akey]
        tkw = {k: unflatten(v, it) for k, v in kkey}
        return targs, tkw

    def _donations(self, args, leaves, nodes):
        """Output j -> index of a donated argument leaf it is written over
        (same dtype, shape and writeable memory), matched in order."""
        if not self.donate_argnums:
            return None
        donated = []
        for i in self.donate_argnums:
            if not -len(args) <= i < len(args):
                raise ValueError("donate_argnums: %d is out of range for %d arguments" % (i, len(args)))
            sub = []
            flatten(args[i], sub)
            ids = {id(a) for a in sub}
            donated += [k for k, a in enumerate(leaves) if id(a) in ids and a.flags.writeable]
        m = {}
        used = set()
        for j, o in enumerate(nodes):
            for k in donated:
                a = leaves[k]
                if k not in used and a.shape == o.shape and a.dtype == o.dtype:
                    m[j] = k
                    used.add(k)
                    break
        self._donated_inputs = donated
        return m or None

    def _plan(self, ctx, tr, nodes, opt_level, e):
        opts = ffi.new(T["smelt_plan_opts *"])
        lib.smelt_plan_opts_init(opts)
        opts.opt_level = opt_level
        keep = []
        if self.backend is not None:
            b = ffi.new(T["char[]"], self.backend.encode())
            keep.append(b)
            opts.backend = b
        if e.donated:
            d = ffi.new(T["int[]"], sorted(set(e.donated.values())))
            keep.append(d)
            opts.donate, opts.n_donate = d, len(e.donated)
        p = ffi.new(T["smelt_plan **"])
        arr = ffi.new(T["smelt_node *[]"], [n._n for n in nodes] or [ffi.NULL])
        st = lib.smelt_plan_new(ctx.ptr, tr.g, len(nodes), arr, opts, p)
        if st:
            raise make_error(st, "compiling %s: %s" % (self.__name__, ctx.errmsg()))
        e.opts_keep = keep
        self._plans += 1
        return ffi.gc(p[0], lib.smelt_plan_free)

    # ---- introspection
    def _entry(self, args, kwargs):
        if not args and not kwargs:
            if self._last is None:
                raise ValueError("%s has not been called yet: pass arguments to describe their plan" % self.__name__)
            return self._last
        key, leaves = self._key(args, kwargs)
        e = self._cache.get(key)
        return e if e is not None else self._compile(key, args, kwargs, leaves)

    def stats(self):
        """Counters: traces, plans, calls, and the last plan's statistics
        (kernels, compiles, fused ops, memory ...)."""
        d = {"traces": self._traces, "plans": self._plans, "signatures": len(self._cache),
             "calls": sum(e.calls + (e.acc[8] if e.acc else 0) for e in self._cache.values())}
        compiles = 0
        for e in self._cache.values():
            s = plan_stats(e.plan)
            compiles += s["compiles"]
        d["compiles"] = compiles
        if self._last is not None:
            d["last"] = plan_stats(self._last.plan)
        return d

    def explain(self, *args, source=False, **kwargs):
        """The plan of these arguments' signature (or of the last call):
        clusters, kernels, fusion reasons (smelt_plan_describe); with
        source=True, each kernel's generated code too."""
        e = self._entry(args, kwargs)
        s = text(lib.smelt_plan_describe(e.plan))
        if source:
            for i in range(lib.smelt_plan_num_kernels(e.plan)):
                s += "\n// ---- %s\n%s" % (text(lib.smelt_plan_kernel_name(e.plan, i)),
                                          text(lib.smelt_plan_kernel_source(e.plan, i)))
        return s

    def wait(self):
        """Block until the background (optimising tier) compiles of every
        plan are done."""
        for e in self._cache.values():
            lib.smelt_plan_wait(e.plan)

    def dump(self, path, *args, **kwargs):
        """Write the graph of these arguments' signature (or of the last
        call) as a smelt graph file (docs/formats.md); smelt.load reads it.
        Arrays the function captured are inputs after the arguments, or
        constants in the file with capture_as_const=True."""
        e = self._entry(args, kwargs)
        arr = ffi.new(T["smelt_node *[]"], [n._n for n in e.nodes] or [ffi.NULL])
        st = lib.smelt_graph_save(e.tr.g, len(e.nodes), arr, os.fsencode(path))
        if st:
            raise make_error(st, e.tr.ctx.errmsg())


def _rebuild(fn, options):
    return Function(fn, **options)


_ONE = ("a",)  # the key of a function's result that is one array


def _flatten_out(r, leaves):
    t = type(r)
    if t is tuple or t is list:
        return (t, tuple(_flatten_out(v, leaves) for v in r))
    if t is dict:
        ks = sorted(r)
        return (dict, tuple(ks), tuple(_flatten_out(r[k], leaves) for k in ks))
    if isinstance(r, Tracer) or isinstance(r, np.ndarray):
        leaves.append(r)
        return _ONE
    if r is None or isinstance(r, (int, float, bool, str, np.generic)):
        return ("s", t, r)
    raise TypeError("a traced function returned a %s; it may return arrays, scalars, and tuples, lists or "
                    "dicts of them" % t.__name__)


def plan_stats(plan):
    s = ffi.new(T["smelt_plan_stats *"])
    lib.smelt_plan_get_stats(plan, s)
    d = {}
    for name, _ in ffi.typeof("smelt_plan_stats").fields:
        v = getattr(s, name)
        d[name] = text(v) if isinstance(v, ffi.CData) else v
    return d


def jit(fn=None, *, opt_level=3, backend=None, static_argnums=(), static_argnames=(), donate_argnums=(),
        capture_as_const=False):
    """Compile a plain NumPy function with smelt (a decorator, as jax.jit).

    The function is traced once per input signature (dtypes, shapes,
    strides, static values): NumPy's functions, operators, methods and
    slicing on its arguments build a smelt graph, which is fused (opt_level
    3) and compiled into one plan; later calls with the same signature run
    the plan.  backend= names the backend ("TCC", "CC", "NVRTC", "AUTO";
    default: SMELT_JIT_BACKEND, MGB_JIT_BACKEND, else AUTO).  Arrays the
    function reads that are not arguments are read anew on every call
    (capture_as_const=True bakes their values in).  donate_argnums: outputs
    are written over those arguments' memory where dtype and shape match
    (the arrays returned are those arguments)."""
    opts = dict(opt_level=opt_level, backend=backend, static_argnums=static_argnums,
                static_argnames=static_argnames, donate_argnums=donate_argnums,
                capture_as_const=capture_as_const)
    if fn is None:
        return lambda f: Function(f, **opts)
    return Function(fn, **opts)


def trace(fn=None, *, symbolic=True, opt_level=3, capture_as_const=False, backend=None):
    """MegEngine's trace with its names: symbolic=True traces with
    placeholders, as smelt.jit; symbolic=False runs the first call of each
    signature operator by operator (opt_level 0, every operator its own
    kernel) and the fused plan after (the same bits: fused and unfused
    plans agree bit for bit)."""
    opts = dict(opt_level=opt_level, capture_as_const=capture_as_const, symbolic=symbolic, backend=backend)
    if fn is None:
        return lambda f: Function(f, **opts)
    return Function(fn, **opts)
