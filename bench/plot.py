#!/usr/bin/python3
"""Draw smelt-bench's rows as a chart: one panel per mode (outputs allocated
per call; outputs given), in each, per workload, smelt's fused time of each
backend (and, outputs given, the unfused one) and the peers' times in that
mode (numpy, numexpr, numba, JAX, onnxruntime, PyTorch eager, torch.compile;
on the GPU PyTorch, torch.compile, CuPy, JAX), as speed-ups over the slowest
bar of the workload in that panel: no ratio crosses modes.

    plot.py ROWS.json OUT.svg|OUT.png [--title TEXT]

ROWS.json: smelt-bench's JSON lines (--json or --json-file).  Uses Debian's
python3-matplotlib (scripts/bench --plot installs it).
"""
import argparse
import json
import math
import sys

PEERS = [("numpy", "numpy"), ("numexpr", "numexpr"), ("numba", "numba"), ("jax", "JAX"),
         ("ort", "onnxruntime"), ("torch_eager", "PyTorch eager"), ("torch_compile", "torch.compile"),
         ("cupy", "CuPy")]
COLOURS = {"smelt unfused": "#9ecae1", "smelt fused": "#08519c", "numpy": "#ff7f0e", "numexpr": "#2ca02c",
           "numba": "#d62728", "JAX": "#9467bd", "onnxruntime": "#8c564b", "PyTorch eager": "#e377c2",
           "torch.compile": "#7f7f7f", "CuPy": "#bcbd22"}  # the same colour in both panels
# the two modes, each its own panel: ratios only within one
MODES = [("outputs allocated per call (as users call them)", "fused_alloc_ms", "_ms"),
         ("outputs given (written in place)", "fused_ms", "_out_ms")]


def series(rows, mode):
    """[(label, {workload: ms})] in the order of the bars, for one mode"""
    _, smelt_key, suffix = MODES[mode]
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
        if mode == 1:
            put("smelt unfused (%s)" % bk, r["workload"], r.get("unfused_ms"))
        put("smelt fused (%s)" % bk, r["workload"], r.get(smelt_key))
    for key, label in PEERS:
        for r in rows:
            put(label, r["workload"], r.get(key + suffix))
    return [(label, out[label]) for label in order]


def panel(ax, rows, workloads, ser, title):
    # speed-up of each bar over the slowest bar of its workload, in this mode
    slowest = {w: max([s[w] for _, s in ser if w in s] or [1]) for w in workloads}
    width = 0.8 / max(1, len(ser))
    for i, (label, s) in enumerate(ser):
        xs = [k + (i - (len(ser) - 1) / 2) * width for k, w in enumerate(workloads) if w in s]
        ys = [slowest[w] / s[w] for w in workloads if w in s]
        bars = ax.bar(xs, ys, width, label=label, color=COLOURS.get(label.split(" (")[0]))
        for b, w in zip(bars, [w for w in workloads if w in s]):
            ax.annotate("%.3g" % s[w], (b.get_x() + b.get_width() / 2, b.get_height()), ha="center",
                        va="bottom", fontsize=4, rotation=90, xytext=(0, 2), textcoords="offset points")
    ax.set_xticks(range(len(workloads)))
    ax.set_xticklabels(workloads, fontsize=7, rotation=45, ha="right")
    ax.set_yscale("log")
    ax.set_ylabel("speed-up over the slowest, log scale\n(higher is better; labels: ms)", fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=6, ncol=3)
    ax.grid(axis="y", alpha=0.3)


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
    sers = [series(rows, m) for m in range(2)]
    modes = [m for m in range(2) if sers[m]]
    fig, axes = plt.subplots(len(modes), 1, figsize=(max(8, 0.75 * len(workloads) + 2), 4.2 * len(modes)),
                             squeeze=False)
    for ax, m in zip(axes[:, 0], modes):
        panel(ax, rows, workloads, sers[m], MODES[m][0])
    threads = rows[0].get("threads")
    where = rows[0].get("device") or ("%d threads" % threads if threads else "CPU")
    fig.suptitle(a.title or "smelt against its peers, f32, n=%d, %s (medians); ratios only within a panel"
                 % (rows[0]["n"], where), fontsize=10)
    fig.tight_layout()
    fig.savefig(a.out)
    print("plot.py: wrote %s (%d workloads, %d modes)" % (a.out, len(workloads), len(modes)))


if __name__ == "__main__":
    main()
