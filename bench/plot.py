#!/usr/bin/python3
"""Draw smelt-bench's rows as a chart: per workload, the unfused and fused
time of each backend and the peers' times (numpy, numexpr; on the GPU
PyTorch, torch.compile, CuPy, JAX), as speed-ups over the slowest of them.

    plot.py ROWS.json OUT.svg|OUT.png [--title TEXT]

ROWS.json: smelt-bench's JSON lines (--json or --json-file).  Uses Debian's
python3-matplotlib (scripts/bench --plot installs it).
"""
import argparse
import json
import math
import sys

PEERS = [("numpy_ms", "numpy"), ("numexpr_ms", "numexpr"), ("torch_eager_ms", "PyTorch eager"),
         ("torch_compile_ms", "torch.compile"), ("cupy_ms", "CuPy"), ("jax_ms", "JAX")]


def series(rows):
    """[(label, {workload: ms})] in the order of the bars."""
    out = {}
    order = []

    def put(label, wl, ms):
        if ms is None or not (isinstance(ms, (int, float)) and math.isfinite(ms) and ms > 0):
            return
        if label not in out:
            out[label] = {}
            order.append(label)
        out[label].setdefault(wl, ms)

    for r in rows:
        bk = r.get("backend", "?")
        put("unfused (%s)" % bk, r["workload"], r.get("unfused_ms"))
        put("fused (%s)" % bk, r["workload"], r.get("fused_ms"))
    for key, label in PEERS:
        for r in rows:
            put(label, r["workload"], r.get(key))
    return [(label, out[label]) for label in order]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("rows")
    ap.add_argument("out")
    ap.add_argument("--title", default=None)
    a = ap.parse_args()
    if not a.out.endswith((".svg", ".png")):
        sys.exit("plot.py: the chart is FILE.svg or FILE.png, not %r" % a.out)
    rows = []
    with open(a.rows) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                rows.append(json.loads(line))
    if not rows:
        sys.exit("plot.py: no benchmark rows in %s" % a.rows)
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        sys.exit("plot.py: matplotlib is missing (apt-get install python3-matplotlib)")

    workloads = []
    for r in rows:
        if r["workload"] not in workloads:
            workloads.append(r["workload"])
    ser = series(rows)
    # speed-up of each bar over the slowest bar of its workload
    slowest = {w: max(s[w] for _, s in ser if w in s) for w in workloads}
    width = 0.8 / max(1, len(ser))
    fig, ax = plt.subplots(figsize=(max(7, 1.6 * len(workloads) + 2), 4.5))
    for i, (label, s) in enumerate(ser):
        xs = [k + (i - (len(ser) - 1) / 2) * width for k, w in enumerate(workloads) if w in s]
        ys = [slowest[w] / s[w] for w in workloads if w in s]
        bars = ax.bar(xs, ys, width, label=label)
        for b, w in zip(bars, [w for w in workloads if w in s]):
            ax.annotate("%.3g" % s[w], (b.get_x() + b.get_width() / 2, b.get_height()), ha="center",
                        va="bottom", fontsize=5, rotation=90, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(range(len(workloads)))
    ax.set_xticklabels(["%s\n(n=%d)" % (w, next(r["n"] for r in rows if r["workload"] == w)) for w in workloads],
                       fontsize=8)
    ax.set_ylabel("speed-up over the slowest (higher is better)\nbar labels: ms per run")
    threads = rows[0].get("threads")
    where = rows[0].get("device") or ("%d threads" % threads if threads else "CPU")
    ax.set_title(a.title or "smelt: fused vs unfused vs peers, f32, %s (medians)" % where, fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(a.out)
    print("plot.py: wrote %s (%d workloads, %d series)" % (a.out, len(workloads), len(ser)))


if __name__ == "__main__":
    main()
