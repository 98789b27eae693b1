#!/usr/bin/env python3
"""A short, fixed run of scripts/fuzz-layout for the test suite:

    test-fuzz-layout.py PATH/TO/smelt [PATH/TO/libsmelt-fakecuda.so]

40 random expressions of layout operations (transposes, reshapes, slices, ...)
with elementwise operators and reductions, from one fixed seed, against NumPy
(scripts/fuzz-layout --quick; a longer soak: scripts/fuzz-layout --count 300),
and with the fake CUDA library (where the host has a C++ compiler for it) on
NVRTC too: its kernels compiled and run on the CPU, the bits of the others.
Needs NumPy in the interpreter that runs it (meson uses /usr/bin/python3);
without it the test is skipped (exit status 77).
"""
import os
import subprocess
import sys

SEED = 1  # fixed: the same 40 cases on every run (two of them read a view of a cast)

try:
    import numpy  # noqa: F401 (fuzz-layout needs it)
except ImportError:
    print("test-fuzz-layout: skipped: numpy is not installed for %s" % sys.executable)
    sys.exit(77)

script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts", "fuzz-layout")
cmd = [sys.executable, script, "--quick", "--seed", str(SEED), "--smelt", os.path.abspath(sys.argv[1])]
if len(sys.argv) > 2 and subprocess.call("c++ --version", shell=True, stdout=subprocess.DEVNULL) == 0:
    cmd += ["--cuda", os.path.abspath(sys.argv[2])]
sys.exit(subprocess.call(cmd))
