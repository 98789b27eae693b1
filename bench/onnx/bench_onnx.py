#!/usr/bin/env python3
"""The ONNX bench rows (scripts/bench --onnx [--peers]): models written with
onnx.helper (bench/onnx/models.py) run through smelt.onnx.load, and with
--peers through onnxruntime's CPU provider (default session options, the
same thread count as smelt's).

mlp        bench.c's mlp: x [n / 8192, 1024] (2048 rows at 16M), 1024-4096-1024,
           gelu_tanh, residual, layernorm
attention  bench.c's attention: q, k, v [n / 2M, 16, 512, 64] (8 at 16M)
encoder    a transformer encoder layer [batch 8, seq 128, d 384, 6 heads]:
           embedding Gather + masked attention + GELU(erf) MLP + layernorms;
           when smelt.onnx refuses Gather of computed indices, the row is the
           layer without the embedding (its input the embedded x) and says so
conv_block bench.c's conv_bn_relu as an ONNX model: Conv(64 -> 64, 3x3, pads 1,
           bias) + BatchNormalization + Relu on x [8, 64, 56, 56], the weights and
           the batch-norm's parameters initializers (folded into the conv's weights)

Per row: the median per-inference time over --runs timed calls (after a
warm-up call that traces and compiles, and smelt's background tier is
waited for), smelt's kernels per inference, onnxruntime's time and the
ratio, and whether the outputs agree (max |smelt - ort| over the output's
scale).  --json prints one JSON object per row.
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "python"))
sys.path.insert(0, HERE)
import smelt  # noqa: E402  (before NumPy: it chooses OpenBLAS's kernels)
import smelt.onnx  # noqa: E402
import numpy as np  # noqa: E402
import models  # noqa: E402


def count(s):
    """16M, 2M, 65536, 1e6"""
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(s[-1:].upper(), 1)
    return int(float(s[:-1] if mult > 1 else s) * mult)


def timed(fn, runs):
    ts = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        ts.append(time.perf_counter() - t)
    return statistics.median(ts), min(ts)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--workload", action="append", help="mlp, attention, encoder, conv_block (default: all)")
    ap.add_argument("--backend", default=None, help="smelt's backend: TCC, CC, AUTO (default: SMELT_JIT_BACKEND, "
                    "else AUTO)")
    ap.add_argument("--peers", action="store_true", help="add onnxruntime (CPU)")
    ap.add_argument("--n", type=count, default=16 << 20, help="elements (mlp, attention sizes)")
    ap.add_argument("--runs", type=int, default=9)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--threads", type=int, default=0, help="threads for both (default: smelt's, all cores)")
    a, rest = ap.parse_known_args()
    if rest:
        print("bench_onnx: ignoring options %s" % " ".join(rest), file=sys.stderr)
    if a.threads:
        smelt.set_threads(a.threads)
    threads = smelt.get_threads()
    ort = None
    if a.peers:
        try:
            import onnxruntime as ort
        except ImportError as e:
            print("bench_onnx: no onnxruntime peer (%s; scripts/onnx-conformance --setup-ort)" % e, file=sys.stderr)
    rng = np.random.default_rng(0)
    n = a.n
    work = {
        "mlp": lambda: models.make_mlp(rng, rows=max(n // (8 * 1024), 1)),
        "attention": lambda: models.make_attention(rng, batch=max(n >> 21, 1)),
        "encoder": lambda: models.make_encoder(rng, batch=8, seq=128, d=384, heads=6, gather=True),
        "conv_block": lambda: models.make_conv_block(rng, batch=8, c=64, hw=56),
    }
    names = a.workload or list(work)
    if not a.json:
        print("ONNX models through smelt.onnx%s; %d threads; backend %s; median of %d runs"
              % (" vs onnxruntime %s (CPU, default session options, intra_op_num_threads %d)"
                 % (ort.__version__, threads) if ort else "", threads, a.backend or
                 os.environ.get("SMELT_JIT_BACKEND") or "AUTO", a.runs))
        print("%-22s %-24s %8s %10s %10s %8s %10s" % ("workload", "shape", "kernels", "smelt ms", "ort ms",
                                                     "ort/smelt", "max diff"))
    for name in names:
        if name not in work:
            print("bench_onnx: unknown workload %r (%s)" % (name, ", ".join(work)), file=sys.stderr)
            return 2
        m, feeds = work[name]()
        note = ""
        try:
            f = smelt.onnx.load(m, backend=a.backend)
        except smelt.onnx.UnsupportedOperator as e:
            if name != "encoder":
                raise
            note = "without the embedding Gather (%s)" % str(e).split(":")[0]
            m, feeds = models.make_encoder(rng, batch=8, seq=128, d=384, heads=6, gather=False)
            name = "encoder_nogather"
            f = smelt.onnx.load(m, backend=a.backend)
        t0 = time.perf_counter()
        ys = f(**feeds)
        first = time.perf_counter() - t0
        f._fn.wait()  # the optimising tier's kernels, where AUTO compiles them in the background
        f(**feeds)
        ts, tmin = timed(lambda: f(**feeds), a.runs)
        kernels = f.stats()["last"]["kernels"]
        chains = f.stats()["last"]["batch_chains"]
        shape = "x".join(str(d) for d in next(iter(feeds.values())).shape)
        row = {"workload": "onnx_" + name, "shape": shape, "kernels": kernels, "batch_chains": chains,
               "smelt_ms": ts * 1e3,
               "smelt_min_ms": tmin * 1e3, "first_call_ms": first * 1e3, "threads": threads,
               "backend": f.stats()["last"]["backend"]}
        if note:
            row["note"] = note
        if ort is not None:
            so = ort.SessionOptions()
            so.intra_op_num_threads = threads
            s = ort.InferenceSession(m.SerializeToString(), so, providers=["CPUExecutionProvider"])
            yo = s.run(None, feeds)
            to, tomin = timed(lambda: s.run(None, feeds), a.runs)
            scale = max(float(np.max(np.abs(yo[0]))), 1e-30)
            row.update(ort_ms=to * 1e3, ort_min_ms=tomin * 1e3, ort_version=ort.__version__,
                       ratio_ort_over_smelt=to / ts,
                       max_rel_diff=float(np.max(np.abs(ys[0] - yo[0]))) / scale)
        if a.json:
            print(json.dumps(row), flush=True)
        else:
            print("%-22s %-24s %8d %10.2f %10s %8s %10s%s" % (
                row["workload"], shape, kernels, row["smelt_ms"],
                "%.2f" % row["ort_ms"] if "ort_ms" in row else "-",
                "%.2f" % row["ratio_ort_over_smelt"] if "ort_ms" in row else "-",
                "%.1e" % row["max_rel_diff"] if "ort_ms" in row else "-",
                "   " + note if note else ""), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
