"""The command line of smelt.onnx (what `smelt run model.onnx` and `smelt
explain model.onnx` run):

    python -m smelt.onnx run MODEL.onnx name=file.npy ... [--out DIR] [options]
    python -m smelt.onnx explain MODEL.onnx [name=file.npy | name=DTYPE[SHAPE]] ... [options]

run: loads the model, runs it on the .npy inputs (by the model's input
names; a model with one input also takes a bare file.npy) and writes each
output as DIR/<output name>.npy (--out), or prints them.  explain: the
model's inputs and outputs, then the plan smelt makes for these input
signatures (clusters, kernels, fusion reasons; --source adds each kernel's
code).  Nothing runs: an input given as DTYPE[SHAPE] (f32[8,128]) only
gives its signature; inputs left out take the model's declared shape when
it has no symbolic dimension.

Exit status: 0 success, 1 bad input (files, the model, an unsupported
operator, a run error), 2 bad usage.  Errors are one line on stderr
starting with "smelt: error: ".
"""
import os
import re
import sys

EXIT_INPUT, EXIT_USAGE = 1, 2

USAGE = """usage: smelt run MODEL.onnx name=file.npy ... [--out DIR] [options]
       smelt explain MODEL.onnx [name=file.npy | name=DTYPE[SHAPE]] ... [options]

run      run an ONNX model on .npy inputs (by the model's input names); write
         each output as DIR/<output name>.npy with --out DIR, else print them
explain  the model's inputs and outputs and the plan smelt makes for them:
         clusters, kernels, fusion reasons (nothing runs; DTYPE[SHAPE] inputs,
         e.g. x=f32[8,128], give only a signature)

options:
  --out DIR            (run) write the outputs as DIR/<output name>.npy
  --opt-level N        0 unfused ... 3 fused (default 3)
  --backend NAME       TCC, CC or AUTO (default: SMELT_JIT_BACKEND, else AUTO)
  --threads N          worker threads (default: all cores)
  --source             (explain) each kernel's generated source too
  --time               (run) the first call's and a second call's times on stderr
exit status: 0 success, 1 bad input, 2 bad usage (docs/onnx.md).
"""


class Usage(Exception):
    pass


class Bad(Exception):
    pass


_DT = {"f16": "float16", "f32": "float32", "f64": "float64", "i32": "int32", "i64": "int64", "u8": "uint8",
       "bool": "bool"}


def _spec(s):
    """DTYPE[SHAPE] -> (dtype, shape), or None when s is not one."""
    import numpy as np
    m = re.fullmatch(r"([a-z0-9]+)\[([0-9, ]*)\]", s)
    if not m:
        return None
    dt = _DT.get(m.group(1), m.group(1))
    try:
        dt = np.dtype(dt)
    except TypeError:
        raise Bad("%r: unknown dtype %r (f16 f32 f64 i32 i64 u8 bool)" % (s, m.group(1)))
    dims = [d for d in m.group(2).replace(" ", "").split(",") if d]
    return dt, tuple(int(d) for d in dims)


def parse(argv):
    if not argv or argv[0] in ("-h", "--help", "help"):
        raise Usage(None)
    cmd = argv[0]
    if cmd not in ("run", "explain"):
        raise Usage("unknown command %r (run or explain)" % cmd)
    o = {"cmd": cmd, "out": None, "opt_level": 3, "backend": None, "threads": None, "source": False,
         "time": False, "pos": []}
    it = iter(argv[1:])
    for a in it:
        if a in ("-h", "--help"):
            raise Usage(None)
        name, eq, val = a.partition("=")
        if a.startswith("--") and name in ("--out", "--opt-level", "--backend", "--threads"):
            if not eq:
                val = next(it, None)
                if val is None or (val.startswith("--") and name != "--out"):
                    raise Usage("%s needs a value" % name)
            if name == "--out":
                if cmd != "run":
                    raise Usage("--out is an option of run")
                o["out"] = val
            elif name == "--backend":
                o["backend"] = val
            else:
                try:
                    v = int(val)
                except ValueError:
                    raise Usage("%s takes a number, not %r" % (name, val)) from None
                if name == "--opt-level" and not 0 <= v <= 3:
                    raise Usage("--opt-level is 0, 1, 2 or 3, not %d" % v)
                if name == "--threads" and v < 0:
                    raise Usage("--threads takes a count >= 0, not %d" % v)
                o["opt_level" if name == "--opt-level" else "threads"] = v
        elif a == "--source":
            if cmd != "explain":
                raise Usage("--source is an option of explain")
            o["source"] = True
        elif a == "--time":
            if cmd != "run":
                raise Usage("--time is an option of run")
            o["time"] = True
        elif a.startswith("-") and len(a) > 1:
            raise Usage("unknown option %r" % a)
        else:
            o["pos"].append(a)
    if not o["pos"]:
        raise Usage("no model file given")
    return o


def _load_model(path):
    try:
        import onnx
    except ImportError:
        raise Bad("reading %s needs the onnx package (onnx==1.17.0 from PyPI) in %s: scripts/onnx-conformance "
                  "--setup makes build/onnx-venv with it; SMELT_PYTHON names another Python"
                  % (path, sys.executable)) from None
    if not os.path.exists(path):
        raise Bad("%s: no such file" % path)
    try:
        return onnx.load(path)
    except Exception as e:
        raise Bad("%s: not an ONNX model (%s)" % (path, str(e).splitlines()[0] if str(e) else type(e).__name__))


def _inputs(f, model, pos, cmd):
    """The arguments of f by the model's input names, from name=file.npy
    (or name=DTYPE[SHAPE] for explain)."""
    import numpy as np
    given = {}
    for p in pos:
        name, eq, val = p.partition("=")
        if not eq:
            if len(f.input_names) != 1 or given:
                raise Usage("input %r: give inputs as name=file.npy (the model's inputs: %s)"
                            % (p, ", ".join(f.input_names) or "none"))
            name, val = f.input_names[0], p
        if name not in f.input_names:
            raise Bad("the model has no input %r (its inputs: %s)" % (name, ", ".join(f.input_names) or "none"))
        if name in given:
            raise Usage("input %r given twice" % name)
        sp = _spec(val)
        if sp is not None:
            if cmd != "explain":
                raise Usage("input %s=%s: run needs a .npy file (DTYPE[SHAPE] is for explain)" % (name, val))
            given[name] = sp
            continue
        try:
            given[name] = np.load(val, allow_pickle=False)
        except FileNotFoundError:
            raise Bad("input %s: %s: no such file" % (name, val)) from None
        except Exception as e:
            raise Bad("input %s: %s: not a .npy file (%s)" % (name, val, e)) from None
    declared = {}
    for vi in model.graph.input:
        tt = vi.type.tensor_type
        if tt.HasField("shape"):
            declared[vi.name] = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in tt.shape.dim]
    args = []
    for n, dt, t in zip(f.input_names, f.input_dtypes, f._input_types):
        if t is not None:  # a sequence or an optional: smelt.onnx.load takes them from Python
            raise Bad("input %r is a %s: the command line takes tensor inputs only (call smelt.onnx.load "
                      "from Python)" % (n, t.WhichOneof("value").split("_")[0]))
        v = given.get(n)
        if v is None:
            dims = declared.get(n)
            if cmd == "explain" and dims is not None and all(isinstance(d, int) for d in dims) and dt is not None:
                v = (dt, tuple(dims))
            else:
                shape = "[%s]" % ", ".join(str(d) for d in dims) if dims is not None else "unknown"
                raise Bad("input %r (%s%s) is not given: add %s=file.npy%s" % (
                    n, dt, shape, n, " or %s=DTYPE[SHAPE]" % n if cmd == "explain" else ""))
        if type(v) is tuple:  # a signature only
            if f.input_names.index(n) in f.static_inputs:
                raise Bad("input %r: its values shape the graph (a shape, axes, sizes): give it as a .npy file" % n)
            v = np.zeros(v[1], v[0])
        if dt is not None and v.dtype != dt:
            raise Bad("input %r is %s, the model wants %s" % (n, v.dtype, dt))
        args.append(v)
    return args


def _describe_io(f, model):
    lines = []
    g = model.graph
    ops = {}
    for n in g.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    opset = ", ".join("%s %d" % (o.domain or "ai.onnx", o.version) for o in model.opset_import)
    prod = " ".join(x for x in (model.producer_name, model.producer_version) if x)
    lines.append("model: %s (%s%s; %d nodes, %d initializers)" % (
        g.name or "unnamed", "opset " + opset, ", made by " + prod if prod else "", len(g.node),
        len(g.initializer)))
    lines.append("operators: " + ", ".join("%s %d" % kv for kv in sorted(ops.items())))
    return lines


def _fmt_sig(a):
    return "%s%s" % (a.dtype, list(a.shape))


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    try:
        o = parse(argv)
    except Usage as e:
        if e.args[0] is None:
            sys.stdout.write(USAGE)
            return 0
        sys.stderr.write("smelt: error: %s (see 'smelt %s --help')\n" % (e.args[0], argv[0] if argv else "run"))
        return EXIT_USAGE
    try:
        try:
            import numpy  # noqa: F401
            import cffi  # noqa: F401
        except ImportError as e:
            raise Bad("%s cannot import %s, which smelt.onnx needs (SMELT_PYTHON names a Python that has it; "
                      "scripts/onnx-conformance --setup makes build/onnx-venv)" % (sys.executable, e.name)) from None
        return _main(o)
    except Usage as e:
        sys.stderr.write("smelt: error: %s (see 'smelt %s --help')\n" % (e.args[0], o["cmd"]))
        return EXIT_USAGE
    except Bad as e:
        sys.stderr.write("smelt: error: %s\n" % e)
        return EXIT_INPUT


def _main(o):
    import time
    import numpy as np
    import smelt
    path = o["pos"][0]
    if not path.endswith(".onnx") and not os.path.isfile(path):
        raise Bad("%s: no such file" % path)
    model = _load_model(path)
    import smelt.onnx
    if o["threads"] is not None:
        smelt.set_threads(o["threads"])
    try:
        f = smelt.onnx.load(model, opt_level=o["opt_level"], backend=o["backend"])
    except smelt.Error as e:
        raise Bad("%s: %s" % (path, e)) from None
    except (ValueError, TypeError) as e:
        raise Bad("%s: %s" % (path, e)) from None
    args = _inputs(f, model, o["pos"][1:], o["cmd"])
    try:
        if o["cmd"] == "explain":
            from ._convert import _Static
            call = [_Static(a) if i in f.static_inputs else a for i, a in enumerate(args)]
            e = f._fn._entry(call, {})
            text = f._fn.explain(*call, source=o["source"])
            out = _describe_io(f, model)
            out.append("inputs: " + ", ".join("%s %s" % (n, _fmt_sig(a)) for n, a in zip(f.input_names, args)))
            out.append("outputs: " + ", ".join(f.output_names))
            from .._jit import plan_stats
            out.append("kernels per inference: %d" % plan_stats(e.plan)["kernels"])
            sys.stdout.write("\n".join(out) + "\n\n" + text + ("" if text.endswith("\n") else "\n"))
            return 0
        t0 = time.perf_counter()
        res = f(*args)
        t1 = time.perf_counter()
        if o["time"]:
            f(*args)
            t2 = time.perf_counter()
            sys.stderr.write("smelt: first call (trace, compile, run) %.3f ms, second call %.3f ms, %d kernel(s)\n"
                             % ((t1 - t0) * 1e3, (t2 - t1) * 1e3, f.stats()["last"]["kernels"]))
    except smelt.Error as e:
        raise Bad("%s: %s" % (path, e)) from None
    except (ValueError, TypeError, NotImplementedError) as e:
        notes = getattr(e, "__notes__", [])
        raise Bad("%s: %s%s" % (path, e, "".join(" (%s)" % n for n in notes))) from None
    if o["out"] is not None:
        try:
            os.makedirs(o["out"], exist_ok=True)
        except OSError as e:
            raise Bad("--out %s: %s" % (o["out"], e.strerror or e)) from None
        for n, r in zip(f.output_names, res):
            fn = os.path.join(o["out"], re.sub(r"[^A-Za-z0-9_.-]", "_", n) + ".npy")
            try:
                np.save(fn, np.asarray(r))
            except OSError as e:
                raise Bad("%s: %s" % (fn, e.strerror or e)) from None
            print("%s: %s -> %s" % (n, _fmt_sig(np.asarray(r)), fn))
    else:
        with np.printoptions(threshold=200, edgeitems=3):
            for n, r in zip(f.output_names, res):
                r = np.asarray(r)
                print("%s: %s\n%s" % (n, _fmt_sig(r), np.array2string(r)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
