"""A QDQ-quantized ONNX graph as float32: the same weights, computed in float.

A statically quantized graph (``QuantizeLinear`` / ``DequantizeLinear`` pairs, as
onnxruntime's quantizer writes them) runs in onnxruntime's int8 kernels, which are chosen by
CPU feature (AVX2, AVX-512 VNNI, AMX) and do not round alike: the AVX2 u8s8 path can saturate
its 16-bit partial sums, VNNI does not, so one graph gives another output on another CPU.
Here every constant weight behind a ``DequantizeLinear`` becomes a float32 initializer holding
its dequantized value, and every activation ``QuantizeLinear -> DequantizeLinear`` pair is
removed (the float activation flows on). The pairs' clipping to their calibrated ranges goes
with them, as in the float model; so would a ``Relu`` or ``Clip`` that a quantizer folded into
a pair's range, so this is for graphs without folded activations (Smart Turn v3.2's GELUs
are kept as ``Erf`` nodes: its pairs only clip; clipping its GELUs' negative lobe at zero, as
its int8 ranges do, moved 6 of 8 cut utterances above 0.5). The result is the float model
the quantized one approximates: float32 kernels agree across CPUs to rounding (~1e-6). Pure:
model in, model out.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import numpy_helper

#: operators that compute in 8 bits themselves (dynamic or operator-oriented quantization)
INTEGER_OPS = ("MatMulInteger", "ConvInteger", "QLinearMatMul", "QLinearConv", "QGemm",
               "DynamicQuantizeLinear", "DynamicQuantizeMatMul", "QAttention")


class NotQdq(ValueError):
    """The graph has quantized parts this conversion does not handle."""


def _attribute(node: onnx.NodeProto, name: str, default: int) -> int:
    return next((int(a.i) for a in node.attribute if a.name == name), default)


def _dequantized(node: onnx.NodeProto, constants: dict[str, np.ndarray]) -> np.ndarray:
    """The float value of a ``DequantizeLinear`` of a constant: (x - zero_point) * scale."""
    x = constants[node.input[0]].astype(np.float32)
    scale = constants[node.input[1]].astype(np.float32)
    zero = (constants[node.input[2]].astype(np.float32)
            if len(node.input) > 2 and node.input[2] else np.zeros_like(scale))
    if scale.ndim == 1 and scale.size > 1:  # per-channel: along ``axis``
        shape = [1] * x.ndim
        shape[_attribute(node, "axis", 1)] = -1
        scale, zero = scale.reshape(shape), zero.reshape(shape)
    return np.asarray((x - zero) * scale, dtype=np.float32)


def dequantize(model: onnx.ModelProto) -> onnx.ModelProto:
    """A copy of ``model`` with its QDQ pairs folded away (see the module's docstring)."""
    out = onnx.ModelProto()
    out.CopyFrom(model)
    graph = out.graph
    constants = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    producer = {name: node for node in graph.node for name in node.output}
    alias: dict[str, str] = {}  # a removed DequantizeLinear's output -> the float it stood for
    folded: list[onnx.TensorProto] = []
    kept: list[onnx.NodeProto] = []
    for node in graph.node:
        if node.op_type == "DequantizeLinear" and node.input[0] in constants:
            folded.append(numpy_helper.from_array(_dequantized(node, constants), node.output[0]))
        elif node.op_type == "DequantizeLinear":
            quantize = producer.get(node.input[0])
            if quantize is None or quantize.op_type != "QuantizeLinear":
                raise NotQdq(f"{node.name}: dequantizes {node.input[0]!r}, which no "
                             f"QuantizeLinear makes")
            alias[node.output[0]] = quantize.input[0]
        elif node.op_type != "QuantizeLinear":
            kept.append(node)

    def resolve(name: str) -> str:
        while name in alias:
            name = alias[name]
        return name

    for node in kept:
        for i, name in enumerate(node.input):
            node.input[i] = resolve(name)
        eight_bit = [n for n in node.input if n in constants and constants[n].dtype in
                     (np.int8, np.uint8)]
        if eight_bit or node.op_type in INTEGER_OPS:
            raise NotQdq(f"{node.name}: a {node.op_type} computing in 8 bits "
                         f"({', '.join(eight_bit) or 'its own kernel'})")
    for output in graph.output:  # a dequantized graph output: the float it stood for
        if output.name in alias:
            kept.append(onnx.helper.make_node("Identity", [resolve(output.name)], [output.name]))
    used = {name for node in kept for name in node.input} | {o.name for o in graph.output}
    initializers = [i for i in graph.initializer if i.name in used] + \
        [t for t in folded if t.name in used]
    del graph.node[:]
    graph.node.extend(kept)
    del graph.initializer[:]
    graph.initializer.extend(initializers)
    del graph.value_info[:]  # shapes of removed tensors; onnxruntime infers them again
    onnx.checker.check_model(out)
    return out
