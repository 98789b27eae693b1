"""Sequences, optionals and control flow for smelt.onnx, resolved when the
graph is built.

A *sequence* is a Python list of values (traced tensors or NumPy arrays):
its length and each element's shape and dtype are part of the call's
signature, as a tensor's shape is.  An *optional* is its value (a tensor
or a sequence) or EMPTY: whether it holds one is known at the trace too.
So every Sequence* and Optional* operator runs at the trace, on Python
lists, and only the tensors reach smelt's graph.

Control flow is resolved the same way: If with a known condition inlines
its branch (a condition computed from the inputs runs both branches and
selects, when their outputs agree in shape and dtype); Scan is unrolled
over the scan inputs' known length; Loop is unrolled when its trip count
and condition are known (its trip count, its first condition and the
values its body's condition reads are static inputs: their values pick
the plan); SequenceMap inlines its body once per element.  A subgraph
reads the enclosing graph's values (ONNX's lexical scoping).
"""
from collections import ChainMap

import numpy as np

from .._lib import UnsupportedError
from . import _exotic
from ._convert import (OPS, KNOWN_INPUTS, _SHAPE_ONLY, UnsupportedOperator, _supported_elem, _dtype_name,
                       _onnx_np_dtype, _NARROW, is_traced, known, norm_axis)

MAX_UNROLL = 10000  # iterations of a Loop (or Scan) unrolled at most
SUBGRAPH_OPS = {"If", "Loop", "Scan", "SequenceMap"}


class _Empty:
    """The empty optional (a value that holds nothing) while tracing."""
    __slots__ = ()

    def __repr__(self):
        return "EMPTY"


EMPTY = _Empty()


# ---- types ---------------------------------------------------------------------------------------------
def container_type_ok(t):
    """None if the TypeProto t (a sequence or optional type) holds tensors
    of smelt's dtypes (or says nothing of its elements), else what it is."""
    which = t.WhichOneof("value")
    if which in ("sequence_type", "optional_type"):
        sub = getattr(t, which)
        if not sub.HasField("elem_type") or sub.elem_type.WhichOneof("value") is None:
            return None
        inner = sub.elem_type
        w = inner.WhichOneof("value")
        if w == "tensor_type":
            e = inner.tensor_type.elem_type
            if e and (e in _NARROW or e in _exotic.CARRIED):
                return "a %s of %s (narrow integers, float8, bfloat16, int4 and uint64 are carried only in tensors)" % (
                    which[:-5], _dtype_name(e))
            if e and not _supported_elem(e):
                return "a %s of %s tensors (smelt's dtypes: %s)" % (which[:-5], _dtype_name(e), _smelt_dtypes())
            return None
        if which == "optional_type" and w == "sequence_type":
            return container_type_ok(inner)
        return "a %s of %s" % (which[:-5], w)
    return "a value of type %s (tensors, sequences of tensors and optionals only)" % (which or "unknown")


def _smelt_dtypes():
    import smelt
    return smelt._dtypes.SUPPORTED


def is_container_type(t):
    return t is not None and t.WhichOneof("value") in ("sequence_type", "optional_type")


def _elem_np_dtype(t):
    """the NumPy dtype of the tensors a sequence / optional type holds, or None"""
    while t.WhichOneof("value") in ("sequence_type", "optional_type"):
        sub = getattr(t, t.WhichOneof("value"))
        if not sub.HasField("elem_type"):
            return None
        t = sub.elem_type
    if t.WhichOneof("value") == "tensor_type" and t.tensor_type.elem_type:
        return _onnx_np_dtype(t.tensor_type.elem_type)
    return None


def call_arg(a, t, name):
    """A graph input of a sequence or optional type, as the call gives it
    (a list of arrays; None for an empty optional), checked and made plain
    NumPy (a list of arrays, or None)."""
    which = t.WhichOneof("value")
    if which == "optional_type":
        if a is None:
            return None
        inner = t.optional_type.elem_type
        if inner.WhichOneof("value") == "sequence_type" or (inner.WhichOneof("value") is None
                                                            and isinstance(a, (list, tuple))):
            return call_arg(a, inner, name)
        a = np.asarray(a)
        dt = _elem_np_dtype(t)
        if dt is not None and a.dtype != dt:
            raise TypeError("input %r is an optional of %s, given %s" % (name, dt, a.dtype))
        return a
    if not isinstance(a, (list, tuple)):
        raise TypeError("input %r is a sequence: pass a list of arrays, not %s" % (name, type(a).__name__))
    dt = _elem_np_dtype(t)
    out = []
    for i, x in enumerate(a):
        x = np.asarray(x)
        if dt is not None and x.dtype != dt:
            raise TypeError("input %r: element %d is %s, the model wants %s" % (name, i, x.dtype, dt))
        out.append(x)
    return out


def trace_in(v):
    """a graph input inside the trace: None (an empty optional) is EMPTY"""
    return EMPTY if v is None else v


def graph_out(v, leaf):
    """A graph output as the traced function returns it: leaf(tensor) for
    a tensor, a list of them for a sequence, None for an empty optional."""
    if v is EMPTY:
        return None
    if isinstance(v, list):
        return [leaf(x) for x in v]
    return leaf(v)


def call_out(r, fix):
    """The call's result for one output: fix(leaf) per tensor."""
    if r is None:
        return None
    if isinstance(r, list):
        return [fix(x) for x in r]
    return fix(r)


# ---- subgraphs -----------------------------------------------------------------------------------------
class Subgraph:
    """A converted subgraph: its nodes (as OnnxFunction._convert_nodes makes
    them), input and output names, initializers and declared output types."""
    __slots__ = ("nodes", "ins", "outs", "inits", "out_types")

    def __init__(self, nodes, ins, outs, inits, out_types):
        self.nodes, self.ins, self.outs, self.inits, self.out_types = nodes, ins, outs, inits, out_types


def subgraph(fx, g, label, attr):
    """The GRAPH attribute `attr` of the node `label`: every refusal found
    here, as for the model's own nodes."""
    from onnx import numpy_helper
    from ._convert import _value_type_ok
    if fx.narrow or fx.exotic:
        raise UnsupportedOperator("%s: a subgraph (%s) in a model with narrow integers (or float8, bfloat16, int4, "
                                  "uint64) is not supported" % (label, attr))
    for init in g.initializer:
        if init.data_type and not _supported_elem(init.data_type):
            raise UnsupportedOperator("%s: initializer %r of %s: dtype %s"
                                      % (label, init.name, attr, _dtype_name(init.data_type)))
    for kind, vis in (("input", g.input), ("output", g.output)):
        for vi in vis:
            why = _value_type_ok(vi)
            if why:
                raise UnsupportedOperator("%s: %s %r of %s: %s" % (label, kind, vi.name, attr, why))
    for init in g.sparse_initializer:
        raise UnsupportedOperator("%s: sparse initializer in %s" % (label, attr))
    nodes = fx._convert_nodes(g.node, "%s.%s: " % (label, attr))
    return Subgraph(nodes, [vi.name for vi in g.input], [vi.name for vi in g.output],
                    {t.name: numpy_helper.to_array(t) for t in g.initializer}, [vi.type for vi in g.output])


def run_sub(fx, sub, env, inputs):
    """The subgraph's outputs for these inputs, reading the enclosing values
    env (nothing it computes leaks out)."""
    senv = ChainMap({}, env)
    senv.update(sub.inits)
    senv.update(zip(sub.ins, inputs))
    fx._run_nodes(sub.nodes, senv)
    return [senv[o] for o in sub.outs]


def _static_shape(t):
    """the shape and dtype a tensor TypeProto declares, when every dimension is a number"""
    if t is None or t.WhichOneof("value") != "tensor_type" or not t.tensor_type.HasField("shape"):
        return None
    dims = t.tensor_type.shape.dim
    if any(not d.HasField("dim_value") for d in dims):
        return None
    dt = _onnx_np_dtype(t.tensor_type.elem_type)
    return None if dt is None else (tuple(d.dim_value for d in dims), dt)


def _stack(parts, axis, label, what, t):
    if not parts:
        st = _static_shape(t)
        if st is None:
            raise UnsupportedError(-10, "%s: %s runs zero times and its %s's element shape is not declared"
                                   % (label, label.rsplit("(", 1)[-1].rstrip(")"), what))
        return np.zeros((0,) + st[0], st[1])
    if any(is_traced(p) for p in parts) or len(parts) > 1:
        return np.stack(parts, axis=axis)
    return np.expand_dims(np.asarray(parts[0]), axis)


# ---- the control operators (run by OnnxFunction._run_nodes with the enclosing values) -------------------
def control(name, attrs=(), check=None, outputs=1):
    """Register an operator run as fn(fx, ins, attrs, env, label): fx the
    OnnxFunction, env the values so far, label the node's name for errors.
    With outputs=1 fn returns its one value (a sequence is a list too),
    else the list of its outputs."""
    def reg(f):
        if outputs == 1:
            def g(fx, ins, A, env, label):
                return (f(fx, ins, A, env, label),)
        else:
            g = f
        g.control = True
        OPS[name] = (g, frozenset(attrs), check)
        return f
    return reg


def _is_tensor(v):
    return v is not EMPTY and not isinstance(v, list)


def _select(cond, a, b, label):
    """If with a condition computed from the inputs: a where per tensor"""
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [_select(cond, x, y, label) for x, y in zip(a, b)]
    if not (_is_tensor(a) and _is_tensor(b)):
        raise UnsupportedError(-10, "%s: a condition computed from the inputs with branches returning different "
                               "sequences or optionals (%s, %s): the condition must be known when the graph is "
                               "built" % (label, _describe(a), _describe(b)))
    if tuple(a.shape) != tuple(b.shape) or np.dtype(a.dtype) != np.dtype(b.dtype):
        raise UnsupportedError(-10, "%s: a condition computed from the inputs with branches of other shapes "
                               "or dtypes (%s%s, %s%s)" % (label, np.dtype(a.dtype), tuple(a.shape),
                                                           np.dtype(b.dtype), tuple(b.shape)))
    return np.where(cond, a, b)


def _describe(v):
    if v is EMPTY:
        return "an empty optional"
    if isinstance(v, list):
        return "a sequence of %d" % len(v)
    return "a tensor %s%s" % (np.dtype(v.dtype), tuple(v.shape))


@control("If", ["then_branch", "else_branch"], outputs=None)
def _if(fx, ins, A, env, label):
    """A known condition runs its branch; one computed from the inputs runs
    both and selects each tensor (the outputs must agree in structure,
    shape and dtype)."""
    cond = ins[0]
    if not is_traced(cond):
        c = np.asarray(cond).reshape(-1)
        if c.size != 1:
            raise ValueError("%s: the condition has %d elements, not 1" % (label, c.size))
        return run_sub(fx, A["then_branch" if bool(c[0]) else "else_branch"], env, [])
    t = run_sub(fx, A["then_branch"], env, [])
    e = run_sub(fx, A["else_branch"], env, [])
    c = cond.reshape(())
    return [_select(c, a, b, label) for a, b in zip(t, e)]


def _loop_check(node, A, opset):
    """what Loop needs and this node lacks: a trip count or a condition
    (no infinite loops), and a condition its body computes without the
    loop-carried values (so that it is known when the graph is built)"""
    ins = list(node.input) + [""] * 2
    if not ins[0] and not ins[1]:
        return "a Loop with neither trip count nor condition (an endless loop)"
    body = next(a.g for a in node.attribute if a.name == "body")
    if len(body.input) < 2 or len(body.output) < 1:
        return "a Loop body without iteration number and condition"
    carried = set(vi.name for vi in body.input[2:])
    producer = {}
    for n in body.node:
        for o in n.output:
            producer[o] = n
    need, stack, seen = set(), [body.output[0].name], set()
    while stack:
        v = stack.pop()
        if v in seen:
            continue
        seen.add(v)
        if v in carried:
            need.add(v)
            continue
        n = producer.get(v)
        if n is not None:
            stack.extend(_reads(n))
    if need:
        return ("a Loop whose condition is computed from its loop-carried values (%s), so that its iteration "
                "count depends on the data (smelt unrolls a Loop, which needs its trip count and condition known "
                "when the graph is built)" % ", ".join(sorted(need)))
    return None


def _reads(node):
    """every value a node reads, its subgraphs' outer reads included"""
    import onnx
    r = [x for x in node.input if x]
    for a in node.attribute:
        gs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
        for g in gs:
            for n in g.node:
                r += _reads(n)
            r += [o.name for o in g.output]
    return r


@control("Loop", ["body"], _loop_check, outputs=None)
def _loop(fx, ins, A, env, label):
    body = A["body"]
    ins = list(ins) + [None] * max(0, 2 - len(ins))
    m = None if ins[0] is None else int(_known_scalar(ins[0], label, "trip count"))
    cond = True if ins[1] is None else bool(_known_scalar(ins[1], label, "condition"))
    states = list(ins[2:])
    n_state = len(states)
    scans = []
    i = 0
    while (m is None or i < m) and cond:
        if i >= MAX_UNROLL:
            raise UnsupportedError(-10, "%s: the Loop runs more than %d iterations; smelt unrolls Loops and stops "
                                   "there" % (label, MAX_UNROLL))
        outs = run_sub(fx, body, env, [np.array(i, np.int64), np.array(cond)] + states)
        c = outs[0]
        if is_traced(c):
            raise UnsupportedError(-10, "%s: the Loop's condition is computed from the inputs at iteration %d; "
                                   "smelt unrolls Loops whose condition is known when the graph is built" % (label, i))
        cond = bool(np.asarray(c).reshape(-1)[0])
        states = outs[1:1 + n_state]
        scans.append(outs[1 + n_state:])
        i += 1
    n_scan = len(body.outs) - 1 - n_state
    res = list(states)
    for k in range(n_scan):
        parts = [s[k] for s in scans]
        res.append(_stack(parts, 0, label, "scan output %d" % k, body.out_types[1 + n_state + k]))
    return res


def _known_scalar(v, label, what):
    if is_traced(v):
        raise UnsupportedError(-10, "%s: the Loop's %s is computed from the inputs; smelt needs it known when the "
                               "graph is built" % (label, what))
    return np.asarray(v).reshape(-1)[0]


def _take(x, axis, i):
    """x's slice i along axis, that axis dropped"""
    idx = [slice(None)] * x.ndim
    idx[axis] = slice(i, i + 1)
    y = x[tuple(idx)]
    return y.reshape(tuple(s for k, s in enumerate(x.shape) if k != axis))


def _scan_core(fx, env, body, states, xs, in_axes, in_dirs, out_axes, out_dirs, label):
    n_state = len(states)
    if xs:
        lens = {int(x.shape[a]) for x, a in zip(xs, in_axes)}
        if len(lens) != 1:
            raise ValueError("%s: the scan inputs' lengths differ along their scan axes (%s)"
                             % (label, sorted(lens)))
        t_len = lens.pop()
    else:
        t_len = 0
    if t_len > MAX_UNROLL:
        raise UnsupportedError(-10, "%s: %d iterations; smelt unrolls Scan up to %d" % (label, t_len, MAX_UNROLL))
    per = []
    for t in range(t_len):
        slices = [_take(x, a, t_len - 1 - t if d else t) for x, a, d in zip(xs, in_axes, in_dirs)]
        outs = run_sub(fx, body, env, list(states) + slices)
        states = outs[:n_state]
        per.append(outs[n_state:])
    res = list(states)
    for k in range(len(body.outs) - n_state):
        parts = [p[k] for p in per]
        if out_dirs[k]:
            parts = parts[::-1]
        t = body.out_types[n_state + k]
        rank = len(parts[0].shape) + 1 if parts else (len(_static_shape(t)[0]) + 1 if _static_shape(t) else 1)
        res.append(_stack(parts, norm_axis(out_axes[k], rank), label, "scan output %d" % k, t))
    return res


def _scan_check(node, A, opset):
    if opset < 9 and node.input and node.input[0]:
        return "Scan-8's sequence_lens"
    return None


@control("Scan", ["body", "num_scan_inputs", "directions", "scan_input_axes", "scan_input_directions",
                  "scan_output_axes", "scan_output_directions"], _scan_check, outputs=None)
def _scan(fx, ins, A, env, label):
    body = A["body"]
    m = int(A["num_scan_inputs"])
    n_out = len(body.outs)
    if fx.opset < 9:  # Scan-8: a batch axis first; inputs (sequence_lens, states..., scan inputs...)
        ins = list(ins[1:])
        n_state = len(ins) - m
        states, xs = ins[:n_state], ins[n_state:]
        dirs = list(A.get("directions", [0] * m))
        batch = int((states + xs)[0].shape[0])
        per = []
        for b in range(batch):
            per.append(_scan_core(fx, env, body, [_take(s, 0, b) for s in states], [_take(x, 0, b) for x in xs],
                                  [0] * m, dirs, [0] * (n_out - n_state), [0] * (n_out - n_state), label))
        return [np.stack([p[k] for p in per], axis=0) for k in range(n_out)]
    n_state = len(ins) - m
    states, xs = list(ins[:n_state]), list(ins[n_state:])
    in_axes = [norm_axis(a, x.ndim) for a, x in zip(A.get("scan_input_axes", [0] * m), xs)]
    in_dirs = list(A.get("scan_input_directions", [0] * m))
    k = n_out - n_state
    return _scan_core(fx, env, body, states, xs, in_axes, in_dirs, list(A.get("scan_output_axes", [0] * k)),
                      list(A.get("scan_output_directions", [0] * k)), label)


@control("SequenceMap", ["body"], outputs=None)
def _sequence_map(fx, ins, A, env, label):
    body = A["body"]
    seqs = [v for v in ins if isinstance(v, list)]
    if not isinstance(ins[0], list):
        raise TypeError("%s: the first input is not a sequence" % label)
    n = len(ins[0])
    if any(len(s) != n for s in seqs):
        raise ValueError("%s: the sequences have different lengths (%s)" % (label, [len(s) for s in seqs]))
    res = [[] for _ in body.outs]
    for i in range(n):
        outs = run_sub(fx, body, env, [v[i] if isinstance(v, list) else v for v in ins])
        for r, o in zip(res, outs):
            r.append(o)
    return res


# ---- sequences ----------------------------------------------------------------------------------------
def _seq(v, label, what="input sequence"):
    if not isinstance(v, list):
        raise TypeError("%s: the %s is %s, not a sequence" % (label, what, _describe(v)))
    return v


def _position(v, n, label, lo, hi):
    """a known position, negative counting from the end, in [lo, hi] (before the wrap)"""
    p = int(np.asarray(known(v, "the position")).reshape(-1)[0])
    if not lo <= p <= hi:
        raise IndexError("%s: position %d is out of range for a sequence of %d tensor%s (valid: %d to %d)"
                         % (label, p, n, "" if n == 1 else "s", lo, hi))
    return p + n if p < 0 else p


@control("SequenceEmpty", ["dtype"])
def _sequence_empty(fx, ins, A, env, label):
    return []


@control("SequenceConstruct")
def _sequence_construct(fx, ins, A, env, label):
    return list(ins)


@control("SequenceAt")
def _sequence_at(fx, ins, A, env, label):
    s = _seq(ins[0], label)
    return s[_position(ins[1], len(s), label, -len(s), len(s) - 1)]


@control("SequenceInsert")
def _sequence_insert(fx, ins, A, env, label):
    s = list(_seq(ins[0], label))
    if len(ins) > 2 and ins[2] is not None:
        p = _position(ins[2], len(s), label, -len(s), len(s))
    else:
        p = len(s)
    s.insert(p, ins[1])
    return s


@control("SequenceErase")
def _sequence_erase(fx, ins, A, env, label):
    s = list(_seq(ins[0], label))
    if len(ins) > 1 and ins[1] is not None:
        p = _position(ins[1], len(s), label, -len(s), len(s) - 1)
    else:
        if not s:
            raise IndexError("%s: erasing from an empty sequence" % label)
        p = len(s) - 1
    del s[p]
    return s


@control("SequenceLength")
def _sequence_length(fx, ins, A, env, label):
    return np.array(len(_seq(ins[0], label)), np.int64)


@control("SplitToSequence", ["axis", "keepdims"])
def _split_to_sequence(fx, ins, A, env, label):
    x = ins[0]
    axis = norm_axis(A.get("axis", 0), x.ndim)
    n = int(x.shape[axis])
    if len(ins) > 1 and ins[1] is not None:
        sp = np.asarray(known(ins[1], "SplitToSequence's split"))
        if sp.ndim == 0:
            step = int(sp)
            if step <= 0:
                raise ValueError("%s: split %d is not positive" % (label, step))
            sizes = [min(step, n - i) for i in range(0, n, step)]
        else:
            sizes = [int(s) for s in sp]
            if sum(sizes) != n or any(s < 0 for s in sizes):
                raise ValueError("%s: split sizes %s do not add up to the axis' length %d" % (label, sizes, n))
        keep = True
    else:
        sizes = [1] * n
        keep = bool(A.get("keepdims", 1))
    out, start = [], 0
    for s in sizes:
        idx = [slice(None)] * x.ndim
        idx[axis] = slice(start, start + s)
        y = x[tuple(idx)]
        if not keep:
            y = y.reshape(tuple(d for k, d in enumerate(x.shape) if k != axis))
        out.append(y)
        start += s
    return out


@control("ConcatFromSequence", ["axis", "new_axis"])
def _concat_from_sequence(fx, ins, A, env, label):
    s = _seq(ins[0], label)
    if not s:
        raise ValueError("%s: an empty sequence has nothing to concatenate" % label)
    rank = s[0].ndim
    if A.get("new_axis", 0):
        return np.stack(s, axis=norm_axis(A["axis"], rank + 1)) if len(s) > 1 else \
            np.expand_dims(s[0], norm_axis(A["axis"], rank + 1))
    axis = norm_axis(A["axis"], rank)
    return np.concatenate(s, axis=axis) if len(s) > 1 else s[0]


@control("Identity")
def _identity(fx, ins, A, env, label):  # a tensor, a sequence or an optional
    return ins[0]


# ---- optionals ----------------------------------------------------------------------------------------
@control("Optional", ["type"])
def _optional(fx, ins, A, env, label):
    return ins[0] if ins and ins[0] is not None else EMPTY


@control("OptionalHasElement")
def _optional_has_element(fx, ins, A, env, label):
    return np.array(bool(ins) and ins[0] is not None and ins[0] is not EMPTY)


@control("OptionalGetElement")
def _optional_get_element(fx, ins, A, env, label):
    if not ins or ins[0] is None or ins[0] is EMPTY:
        raise ValueError("%s: the optional is empty" % label)
    return ins[0]


# operators that read their inputs' structure only (a length, whether an optional holds a value), as Shape
# reads a shape: what they read need not be known for their result to be
_SHAPE_ONLY.update({"SequenceLength", "OptionalHasElement"})
# the inputs whose values (positions, sizes, trip counts) are read when the graph is built
KNOWN_INPUTS.update({"SequenceAt": (1,), "SequenceInsert": (2,), "SequenceErase": (1,), "SplitToSequence": (1,),
                     "Loop": (0, 1)})


def known_names(node):
    """Further values of an ONNX node that must be known when the graph is
    built: a Loop body's condition output; an If's condition when its
    branches return optionals, or values of other kinds (an empty optional
    and a tensor cannot be selected when the model runs; sequences can, when
    their lengths agree)."""
    import onnx
    if node.op_type == "Loop":
        for a in node.attribute:
            if a.name == "body" and a.type == onnx.AttributeProto.GRAPH and a.g.output:
                return [a.g.output[0].name]
    if node.op_type == "If" and node.input:
        kinds = [[vi.type.WhichOneof("value") for vi in a.g.output] for a in node.attribute
                 if a.type == onnx.AttributeProto.GRAPH]
        if len(kinds) == 2 and (kinds[0] != kinds[1] or "optional_type" in kinds[0]):
            return [node.input[0]]
    return []


class _Link:
    """A subgraph input in the static-input analysis: the values that feed it
    (the node's inputs, and for loop-carried values the body's outputs)."""
    __slots__ = ("name", "reads")
    op_type = "(subgraph input)"

    def __init__(self, name, reads):
        self.name, self.reads = name, [r for r in reads if r]


def body_links(node):
    """The inputs of node's body (Loop, Scan, SequenceMap) with what feeds
    each, so that a value the body needs known reaches the graph input it
    comes from."""
    import onnx
    if node.op_type not in ("Loop", "Scan", "SequenceMap"):
        return []
    body = next((a.g for a in node.attribute if a.name == "body" and a.type == onnx.AttributeProto.GRAPH), None)
    if body is None:
        return []
    bi, bo, ni = [vi.name for vi in body.input], [vi.name for vi in body.output], list(node.input)
    links = []
    if node.op_type == "Loop":  # (iteration, condition, carried...) <- (M, cond, initial...) and (cond, carried...)
        for k in range(1, len(bi)):
            links.append(_Link(bi[k], [ni[k] if k < len(ni) else "", bo[k - 1] if k - 1 < len(bo) else ""]))
    elif node.op_type == "Scan":  # (states..., slices...) <- the node's inputs (Scan-8: after sequence_lens)
        off = len(ni) - len(bi)
        m = next((a.i for a in node.attribute if a.name == "num_scan_inputs"), 0)
        for k in range(len(bi)):
            links.append(_Link(bi[k], [ni[k + off] if 0 <= k + off < len(ni) else "",
                                       bo[k] if k < len(bi) - m and k < len(bo) else ""]))
    else:
        for k in range(min(len(bi), len(ni))):
            links.append(_Link(bi[k], [ni[k]]))
    return links
