import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(ROOT, "python"))
# TCC unless a test says otherwise: no background compiles, deterministic;
# the build's own kernel cache
os.environ.setdefault("SMELT_JIT_BACKEND", "TCC")
os.environ.setdefault("SMELT_CACHE_DIR", os.path.join(ROOT, "build", "kernel-cache"))
