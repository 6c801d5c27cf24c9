"""A QDQ-quantized ONNX graph as float32: built here from a small float model by
onnxruntime's own quantizer, then folded back and run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnxruntime.quantization import (
    CalibrationDataReader,
    QuantFormat,
    QuantType,
    quantize_dynamic,
    quantize_static,
)

from omnicall.engine.dequantize import NotQdq, dequantize

RNG = np.random.default_rng(7)
W = RNG.standard_normal((16, 8)).astype(np.float32)
B = RNG.standard_normal(8).astype(np.float32)
INPUTS = [RNG.standard_normal((4, 16)).astype(np.float32) for _ in range(8)]


def float_model(path: Path) -> Path:
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["xw"]),
         helper.make_node("Add", ["xw", "b"], ["y"]), helper.make_node("Tanh", ["y"], ["out"])],
        "tiny", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 16])],
        [helper.make_tensor_value_info("out", TensorProto.FLOAT, [4, 8])],
        [numpy_helper.from_array(W, "w"), numpy_helper.from_array(B, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, path)
    return path


class Inputs(CalibrationDataReader):
    def __init__(self) -> None:
        self._it = iter({"x": x} for x in INPUTS)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self._it, None)


def run(model: onnx.ModelProto | Path, x: np.ndarray) -> np.ndarray:
    source = model.SerializeToString() if isinstance(model, onnx.ModelProto) else str(model)
    session = onnxruntime.InferenceSession(source, providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, {"x": x})[0])


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("qdq")
    fp32 = float_model(folder / "fp32.onnx")
    qdq = folder / "qdq.onnx"
    quantize_static(str(fp32), str(qdq), Inputs(), quant_format=QuantFormat.QDQ,
                    activation_type=QuantType.QUInt8, weight_type=QuantType.QInt8)
    return fp32, qdq


def test_the_float_graph_computes_the_quantized_weights_in_float(
        models: tuple[Path, Path]) -> None:
    fp32, qdq = models
    quantized = onnx.load(str(qdq))
    assert {n.op_type for n in quantized.graph.node} >= {"QuantizeLinear", "DequantizeLinear"}
    folded = dequantize(quantized)
    assert {n.op_type for n in folded.graph.node} <= {"MatMul", "Add", "Tanh", "Identity"}
    weights = {i.name: numpy_helper.to_array(i) for i in folded.graph.initializer}
    w = next(v for v in weights.values() if v.shape == W.shape)
    scale = np.abs(W).max() / 127
    assert np.abs(w - W).max() <= scale / 2 + 1e-6  # the int8 weight, dequantized
    assert not np.array_equal(w, W)  # ... not the original float
    for x in INPUTS:
        b = next(v for v in weights.values() if v.shape == B.shape)
        expected = np.tanh(x @ w + b)
        assert np.allclose(run(folded, x), expected, atol=1e-5)  # float math, no rounding
        # near the float model: each weight is within half a step, and tanh is 1-Lipschitz
        bound = np.abs(x).sum(axis=1, keepdims=True) * scale / 2 + 1e-5
        assert np.all(np.abs(run(folded, x) - run(fp32, x)) <= bound)
    assert quantized.graph.node[0].op_type in ("QuantizeLinear", "DequantizeLinear")  # a copy


def test_a_graph_that_computes_in_8_bits_is_refused(models: tuple[Path, Path],
                                                    tmp_path: Path) -> None:
    fp32, _ = models
    dynamic = tmp_path / "dynamic.onnx"
    quantize_dynamic(str(fp32), str(dynamic), weight_type=QuantType.QInt8)
    with pytest.raises(NotQdq, match="8 bits"):
        dequantize(onnx.load(str(dynamic)))
