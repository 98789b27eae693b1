#!/bin/bash
# One device call's worth of GPU checks (2026-11-27, 92f5a01): the CUDA
# tests and the standard workloads with their PyTorch peers
# (bench/cuda/device-run, the default form only), bias_relu over rows a
# multiple of 4 long and not at three sizes (an nd kernel's vectors and
# its element-by-element fallback), and softmax and layernorm over rows of
# 5120; the convolution rows (conv_bn_relu, conv1d_gelu: a cuBLAS product
# per tap, 2026-11-28; the cuda_gpu tests include conv_through_cublas,
# conv_of_strided_operands and scans_same_bits_as_cpu); then the extra
# rows' table.  Run from the repository root on the
# device machine after bench/cuda/device-prepare, with gpu/ carried:
#   bash bench/cuda/gpu-checks.sh        (about 140 s on an H200 before the conv rows)
set -u
export OUT=${OUT:-/tmp/smelt-device}
FORMS=default bash bench/cuda/device-run 2>&1 | tail -30
for n in 1048576 1047552 4194304 4186116 67108864 67076100; do
    N=$n TESTS=0 PEERS_WORKLOADS= WORKLOADS=bias_relu FORMS=default bash bench/cuda/device-run >/dev/null 2>&1
done
N=83886080 COLS=5120 TESTS=0 WORKLOADS="softmax layernorm" PEERS_WORKLOADS="softmax,layernorm" FORMS=default \
    bash bench/cuda/device-run 2>&1 | tail -4
TESTS=0 WORKLOADS="conv_bn_relu conv1d_gelu" PEERS_WORKLOADS= FORMS=default bash bench/cuda/device-run >/dev/null 2>&1
python3 - "$OUT" <<'PY'
import json, sys
for l in open(sys.argv[1] + "/bench.jsonl"):
    if l.startswith("{"):
        r = json.loads(l)
        if r["workload"] in ("bias_relu", "conv_bn_relu", "conv1d_gelu") or "c5120" in r["form"]:
            print(r["workload"], r["form"], r.get("shape"), "fused %.4f unfused %.4f copy %.0f%%" % (
                r["fused_ms"], r["unfused_ms"], 100 * r["fused_gbps"] / r["copy_gbps"]))
PY
