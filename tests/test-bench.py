#!/usr/bin/env python3
"""The benchmark's front door: smelt-bench honours the backend variables,
says what its columns are, reports the copy limit, shows progress.

    test-bench.py PATH/TO/smelt-bench [PATH/TO/libsmelt-fakecuda.so]

Tiny instances (--n 4096 --runs 1): this checks behaviour, not speed.
"""
import json
import os
import pty
import subprocess
import sys
import tempfile

BENCH = os.path.abspath(sys.argv[1])
FAKECUDA = os.path.abspath(sys.argv[2]) if len(sys.argv) > 2 else None  # a stand-in GPU (tests/fakecuda.c)
TMP = tempfile.mkdtemp(prefix="smelt-bench-test-")
from checks import check, done  # noqa: E402 (tests/checks.py)


def bench(*args, env=None, tty=False):
    e = dict(os.environ)
    for k in ("SMELT_JIT_BACKEND", "MGB_JIT_BACKEND"):
        e.pop(k, None)
    e["SMELT_CACHE_DIR"] = os.path.join(TMP, "cache")
    e.update(env or {})
    if not tty:
        p = subprocess.run([BENCH] + list(args), capture_output=True, text=True, env=e)
        return p.returncode, p.stdout, p.stderr
    # stderr on a terminal: the progress line
    master, slave = pty.openpty()
    p = subprocess.Popen([BENCH] + list(args), stdout=subprocess.PIPE, stderr=slave, env=e)
    os.close(slave)
    err = b""
    while True:
        try:
            chunk = os.read(master, 4096)
        except OSError:
            break
        if not chunk:
            break
        err += chunk
    out = p.stdout.read().decode()
    p.wait()
    os.close(master)
    return p.returncode, out, err.decode(errors="replace")


SMALL = ("--n", "4096", "--runs", "1")


def rows(out):
    return [json.loads(l) for l in out.splitlines() if l.startswith("{")]


# an invalid value is the library's error, listing the valid names; exit status != 0
for var in ("SMELT_JIT_BACKEND", "MGB_JIT_BACKEND"):
    rc, so, se = bench("--workload", "add", *SMALL, env={var: "bogus"})
    check(rc != 0 and var in se and "bogus" in se and "TCC, CC, NVRTC, AUTO" in se and not so,
          "%s=bogus: exit %d, %r %r" % (var, rc, se, so[:200]))
rc, so, se = bench("--workload", "add", *SMALL, "--backend", "bogus")
check(rc != 0 and "--backend" in se and "TCC, CC, NVRTC, AUTO" in se, "--backend bogus: %d %r" % (rc, se))

# the variable picks the one backend timed; --backend overrides it
rc, so, se = bench("--workload", "add", "--json", *SMALL, env={"SMELT_JIT_BACKEND": "TCC"})
r = rows(so)
check(rc == 0 and [x["backend"] for x in r] == ["TCC"], "SMELT_JIT_BACKEND=TCC runs TCC only: %r %s" % (so, se))
rc, so, se = bench("--workload", "add", "--json", *SMALL, env={"MGB_JIT_BACKEND": "tcc"})
check(rc == 0 and [x["backend"] for x in rows(so)] == ["TCC"], "MGB_JIT_BACKEND=tcc: %r %s" % (so, se))
rc, so, se = bench("--workload", "add", "--json", *SMALL, "--backend", "CC", env={"SMELT_JIT_BACKEND": "TCC"})
check(rc == 0 and [x["backend"] for x in rows(so)] == ["CC"], "--backend CC overrides: %r %s" % (so, se))
# --unfused-opt: 0 or 2; with 2 the unfused plan shares an arena (chain8: its 7 intermediates in place in one buffer)
rc, so, se = bench("--workload", "add", *SMALL, "--unfused-opt", "1")
check(rc == 2 and "--unfused-opt" in se and not so, "--unfused-opt 1: %d %r" % (rc, se))
rc, so, se = bench("--workload", "chain8", "--json", *SMALL, "--backend", "TCC", "--unfused-opt", "2")
u2 = rows(so)
check(rc == 0 and len(u2) == 1 and u2[0].get("unfused_opt_level") == 2 and
      abs(u2[0].get("unfused_mem_mb", -1) - 1 * 4096 * 4 / 1048576) < 1e-3, "--unfused-opt 2: %r %s" % (so, se))
# the plans' intermediates: chain8 unfused keeps 7 of 4096 f32 (one buffer each), fused none
rc, so, se = bench("--workload", "chain8", "--json", *SMALL, "--backend", "TCC")
c8 = rows(so)
check(rc == 0 and len(c8) == 1 and abs(c8[0].get("unfused_mem_mb", -1) - 7 * 4096 * 4 / 1048576) < 1e-3 and
      c8[0].get("fused_mem_mb") == 0, "chain8's intermediates in JSON: %r %s" % (so, se))
if r:
    x = r[0]
    check(all(k in x for k in ("memcpy_gbps", "nt_copy_gbps", "copy_gbps", "fraction_of_copy")),
          "JSON rows carry both copies and the fraction: %r" % x)
    if all(k in x for k in ("memcpy_gbps", "nt_copy_gbps", "copy_gbps")):
        check(abs(x["copy_gbps"] - max(x["memcpy_gbps"], x["nt_copy_gbps"])) < 0.11,
              "copy limit = the better copy: %r" % x)

# --cols: the row workloads' rows that long (it must divide --n); the JSON row gives the first input's shape
rc, so, se = bench("--workload", "softmax", "--json", *SMALL, "--backend", "TCC", "--cols", "64")
sm = rows(so)
check(rc == 0 and len(sm) == 1 and sm[0].get("shape") == [64, 64], "--cols 64: %r %s" % (so, se))
rc, so, se = bench("--workload", "softmax", "--json", *SMALL, "--backend", "TCC", "--cols", "256")
sm = rows(so)
check(rc == 0 and len(sm) == 1 and sm[0].get("shape") == [16, 256], "--cols 256: %r %s" % (so, se))
rc, so, se = bench("--workload", "softmax", *SMALL, "--cols", "100")
check(rc == 2 and "--cols 100 does not divide" in se and not so, "--cols 100: %d %r" % (rc, se))

# every row: the memory a call holds and the allocations it makes (none: outputs given);
# adam also runs with param, m and v donated and given back as its outputs: in place
rc, so, se = bench("--workload", "adam", "--json", *SMALL, "--backend", "TCC")
ad = rows(so)
keys = ("peak_mb", "unfused_peak_mb", "peak_lower_mb", "alloc_per_call", "unfused_alloc_per_call", "donated_ms")
check(rc == 0 and len(ad) == 1 and all(k in ad[0] for k in keys), "adam's JSON keys: %r %s" % (so, se))
if rc == 0 and len(ad) == 1 and all(k in ad[0] for k in keys):
    x = ad[0]
    out_mb = 3 * 4096 * 4 / 1048576
    check(x["alloc_per_call"] == 0 and x["unfused_alloc_per_call"] == 0 and x["donated_alloc_per_call"] == 0,
          "no allocation per call: %r" % x)
    check(x["donated_inplace"] == 3, "adam donated: param, m and v in place: %r" % x)
    check(abs(x["peak_mb"] - (x["fused_mem_mb"] + out_mb)) < 1e-3 and x["peak_lower_mb"] <= x["peak_mb"] + 1e-9 and
          abs(x["unfused_peak_mb"] - (x["unfused_mem_mb"] + out_mb)) < 1e-3, "peak = intermediates + outputs: %r" % x)
# without --unfused-opt, layers100 keeps opt_level 0 where its buffers fit
rc, so, se = bench("--workload", "layers100", "--json", *SMALL, "--backend", "TCC")
l1 = rows(so)
check(rc == 0 and len(l1) == 1 and l1[0].get("unfused_opt_level") == 0 and l1[0].get("n") == 4096 and
      l1[0].get("kernels_unfused") == 700, "layers100 at 4096: %r %s" % (so, se))

# NVRTC without a GPU is a clear error, not a CPU run
probe = subprocess.run([BENCH, "--device", "cuda", *SMALL, "--workload", "add"], capture_output=True, text=True)
if probe.returncode != 0 and "not available" in probe.stderr:
    rc, so, se = bench("--workload", "add", *SMALL, env={"SMELT_JIT_BACKEND": "NVRTC"})
    check(rc == 1 and "NVRTC" in se and "no GPU" in se and not so,
          "SMELT_JIT_BACKEND=NVRTC without a GPU: exit %d, %r %r" % (rc, se, so[:200]))

# with a GPU (the stand-in), SMELT_JIT_BACKEND=NVRTC runs the GPU benchmark, row by row
if FAKECUDA:
    gpu_env = {"SMELT_JIT_BACKEND": "NVRTC", "SMELT_CUDA_DRIVER_LIB": FAKECUDA, "SMELT_NVRTC_LIB": FAKECUDA}
    rc, so, se = bench("--workload", "add", *SMALL, "--json", env=gpu_env)
    r = rows(so)
    check(rc == 0 and len(r) == 1 and r[0]["backend"] == "NVRTC" and "device" in r[0] and
          "peak_mb" in r[0] and r[0].get("alloc_per_call") == 0,
          "SMELT_JIT_BACKEND=NVRTC with a GPU: %r %s" % (so, se))
    rc, so, se = bench("--workload", "add", *SMALL, env=gpu_env)
    check(rc == 0 and so.startswith("device: ") and "legend: " in so and "device-to-device" in so,
          "GPU table and its legend: %r %s" % (so, se))

# usage errors say what is missing
rc, so, se = bench("--workload")
check(rc == 2 and "--workload needs a workload name" in se, "--workload without a name: %d %r" % (rc, se))
rc, so, se = bench("--workload", "nope")
check(rc == 2 and "no workload named 'nope'" in se and "chain8" in se, "unknown workload: %r" % se)
rc, so, se = bench("--runs", "x")
check(rc == 2 and "--runs needs a whole number" in se, "--runs x: %r" % se)

# the table explains itself: --help and a legend line
rc, so, se = bench("--help")
for word in ("1st_call", "kern u/f", "max_rel_err", "float64 reference", "copy_GBs", "streaming-store",
             "SMELT_JIT_BACKEND", "%copy"):
    check(rc == 0 and word in so, "--help explains %r" % word)
rc, so, se = bench("--workload", "chain8", *SMALL, env={"SMELT_JIT_BACKEND": "TCC"})
lines = so.splitlines()
check(rc == 0 and lines and "%copy" in lines[0] and any(l.startswith("legend:") and "max_rel_err" in l
                                                          and "float64 reference" in l for l in lines),
      "table header and legend: %r" % so)
check(not se, "no progress when stderr is not a terminal: %r" % se)

# progress on a terminal: workload, backend, step
rc, so, se = bench("--workload", "add", *SMALL, env={"SMELT_JIT_BACKEND": "TCC"}, tty=True)
check(rc == 0 and "[1/1] add TCC: " in se and "timing" in se, "progress on a terminal: %r" % se[:300])

# --json-file: the rows as JSON beside the table; bench/plot.py draws them
jf = os.path.join(TMP, "rows.json")
NP = {"SMELT_JIT_BACKEND": "TCC", "SMELT_BENCH_PEERS": "numpy,numexpr"}  # Debian's: no install, quick
rc, so, se = bench("--workload", "swish", *SMALL, "--peers", "--json-file", jf, env=NP)
jr = [json.loads(l) for l in open(jf)] if os.path.exists(jf) else []
check(rc == 0 and "swish" in so and len(jr) == 1 and jr[0]["workload"] == "swish" and jr[0].get("numpy_ms") is not None,
      "--json-file writes the rows: %r %r" % (jr, se))
# both modes: smelt allocating its outputs and given them; the peers' ordinary
# call and into preallocated outputs; the table of both modes after the main one
check(len(jr) == 1 and jr[0].get("fused_alloc_ms", 0) > 0 and jr[0].get("numpy_out_ms", 0) > 0 and
      jr[0].get("numexpr_out_ms", 0) > 0 and jr[0].get("peers", {}).get("numpy", {}).get("version"),
      "both modes in the JSON: %r" % jr)
pl = [l.split() for l in so.splitlines() if l.startswith(("swish ", "      "))]
check(any(l[:2] == ["swish", "alloc"] for l in pl) and any(l[:1] == ["out"] for l in pl) and "alloc_ms" in so,
      "the peers' table, both modes: %r" % so)
# a workload a peer cannot express (NumPy and numexpr have no erf): "-" in
# the table, null in the JSON, and the row still there
rc, so, se = bench("--workload", "gelu", *SMALL, "--peers", env=NP)
row = [l for l in so.splitlines() if l.startswith("gelu ") and l.split()[1] == "alloc"]
check(rc == 0 and len(row) == 1 and row[0].split()[3:5] == ["-", "-"] and "nan" not in so
      and "rror" not in se, "gelu with --peers: no numpy or numexpr figure: %r %r" % (so, se))
# the peer script itself: exit 0, a JSON row without the two times (not a crash)
pp = subprocess.run(["/usr/bin/python3", os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench",
                                                       "peers", "peers.py"), "--workload", "gelu", "--n", "4096",
                     "--runs", "1"], capture_output=True, text=True)
pj = json.loads(pp.stdout) if pp.returncode == 0 and pp.stdout.startswith("{") else {}
check(pj.get("workload") == "gelu" and "numpy_ms" not in pj and "numexpr_ms" not in pj,
      "peers.py --workload gelu: %d %r %r" % (pp.returncode, pp.stdout, pp.stderr))
rc, so, se = bench("--workload", "gelu", *SMALL, "--peers", "--json", env=NP)
jr2 = [json.loads(l) for l in so.splitlines() if l.startswith("{")]
check(rc == 0 and len(jr2) == 1 and jr2[0]["numpy_ms"] is None and jr2[0]["numexpr_ms"] is None
      and jr2[0]["fused_ms"] > 0, "gelu with --peers --json: numpy_ms and numexpr_ms null: %r %r" % (so, se))
PLOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "plot.py")
try:
    import matplotlib  # noqa: F401 (Debian's python3-matplotlib; scripts/test installs it)
    have_mpl = True
except ImportError:
    have_mpl = False
    print("test-bench: matplotlib is missing: the chart is not checked")
if have_mpl and jr:
    for ext in ("svg", "png"):
        out = os.path.join(TMP, "chart." + ext)
        p = subprocess.run(["/usr/bin/python3", PLOT, jf, out], capture_output=True, text=True)
        head = open(out, "rb").read(600) if os.path.exists(out) else b""
        ok = (b"<svg" in head) if ext == "svg" else head.startswith(b"\x89PNG")
        check(p.returncode == 0 and ok, "plot.py draws a .%s chart: %s" % (ext, p.stderr))
    p = subprocess.run(["/usr/bin/python3", PLOT, jf, os.path.join(TMP, "chart.txt")], capture_output=True, text=True)
    check(p.returncode != 0 and "FILE.svg or FILE.png" in p.stderr, "plot.py refuses other formats: %r" % p.stderr)

# bench/cpu/softmax-states: the CC tier's softmax kernel called as the executor calls it; its
# own check against double fails it when that calling convention changes
if subprocess.call("gcc --version", shell=True, stdout=subprocess.DEVNULL) == 0:
    st = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "bench", "cpu", "softmax-states")
    p = subprocess.run(["bash", st, "4"], capture_output=True, text=True,
                       env=dict(os.environ, BUILD=os.path.dirname(os.path.dirname(BENCH)),
                                SMELT_CACHE_DIR=os.path.join(TMP, "cache")))
    check(p.returncode == 0 and "results within" in p.stdout and "copy <  70 GB/s:" in p.stdout
          and "copy >= 70 GB/s:" in p.stdout,
          "bench/cpu/softmax-states 4: %d %r %r" % (p.returncode, p.stdout, p.stderr))
done("test-bench")
