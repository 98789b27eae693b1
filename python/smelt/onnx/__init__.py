"""smelt.onnx: ONNX models in, fused kernels out.

    import smelt.onnx
    f = smelt.onnx.load("model.onnx")       # or a ModelProto
    y, = f(x)                                # NumPy arrays in and out
    y, = f(input_name=x)                     # inputs by name

The graph becomes a Python function over smelt's traced arrays (one ONNX
node, a few NumPy-style calls on them) compiled by smelt.jit, one plan per
input signature.  Initializers are constants; every node whose inputs are
all known at load or trace time (shape arithmetic: Shape, Concat of
shapes, ConstantOfShape, Range, Reshape's target) is computed with NumPy
and never reaches the graph.  An operator, attribute or dtype smelt cannot
express is an UnsupportedOperator error at load naming the node.

Parsing needs the `onnx` package (scripts/onnx-conformance installs a
pinned one into build/onnx-venv).  docs/onnx.md documents it.
"""
from ._convert import OnnxFunction, UnsupportedOperator, load, supported_ops

__all__ = ["load", "OnnxFunction", "UnsupportedOperator", "supported_ops"]
