"""smelt.onnx.backend: ONNX's backend interface (onnx.backend.base.Backend)
over smelt.onnx.load, so the `onnx` package's test runner and tools can
drive smelt:

    import smelt.onnx.backend as backend
    rep = backend.prepare(model, "CPU")
    outputs = rep.run([x])
"""
from onnx.backend.base import Backend, BackendRep, Device, DeviceType

from ._convert import OnnxFunction, UnsupportedOperator


class SmeltRep(BackendRep):
    """A prepared model: run(inputs) -> the outputs as a tuple."""

    def __init__(self, fn):
        self.fn = fn

    def run(self, inputs, **kwargs):
        if isinstance(inputs, dict):
            return self.fn(**inputs)
        if not isinstance(inputs, (list, tuple)):
            inputs = [inputs]
        return self.fn(*inputs)


class SmeltBackend(Backend):
    """smelt as an ONNX backend: the CPU (TinyCC and the C compiler tiers);
    CUDA models go through the C API (docs/cuda.md)."""

    @classmethod
    def is_compatible(cls, model, device="CPU", **kwargs):
        try:
            OnnxFunction(model, **_opts(kwargs))
        except UnsupportedOperator:
            return False
        return True

    @classmethod
    def prepare(cls, model, device="CPU", **kwargs):
        if not cls.supports_device(device):
            raise RuntimeError("smelt.onnx.backend runs on the CPU, not %r" % device)
        super().prepare(model, device, **kwargs)
        return SmeltRep(OnnxFunction(model, **_opts(kwargs)))

    @classmethod
    def run_model(cls, model, inputs, device="CPU", **kwargs):
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node, inputs, device="CPU", outputs_info=None, **kwargs):
        import onnx
        from onnx import helper
        import numpy as np
        ins = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.asarray(x).dtype),
                                             np.asarray(x).shape) for n, x in zip(node.input, inputs) if n]
        outs = [helper.make_empty_tensor_value_info(n) for n in node.output if n]
        graph = helper.make_graph([node], "node", ins, outs)
        model = helper.make_model(graph)
        return SmeltRep(OnnxFunction(model, **_opts(kwargs))).run([x for n, x in zip(node.input, inputs) if n])

    @classmethod
    def supports_device(cls, device):
        return Device(device).type == DeviceType.CPU


def _opts(kwargs):
    return {k: kwargs[k] for k in ("opt_level", "backend") if k in kwargs}


prepare = SmeltBackend.prepare
run_model = SmeltBackend.run_model
run_node = SmeltBackend.run_node
supports_device = SmeltBackend.supports_device
is_compatible = SmeltBackend.is_compatible
