"""Tiny ONNX models for tests and the demo, made with ``onnx.helper`` (no downloads).

They are small on purpose: an emulated board runs ~700x slower than a real one, so the
conv net below (1x3x32x32 -> 10 classes) stays well under a second per inference there.
Weights come from a seeded generator: the same call always writes the same bytes, which
keeps content-addressed deploys of these models idempotent. onnx is imported by the functions
that build or write a model: importing this module costs nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    import onnx

# Opset 13 and IR 8 load on every ORT release the project targets (>= 1.10), old Jetsons included.
OPSET = 13
IR_VERSION = 8


def _initializer(name: str, array: np.ndarray) -> onnx.TensorProto:
    from onnx import numpy_helper

    return numpy_helper.from_array(array.astype(np.float32), name=name)


def tiny_convnet(*, size: int = 32, channels: int = 8, classes: int = 10, seed: int = 0) -> onnx.ModelProto:
    """Conv-ReLU-Conv-ReLU-GlobalAveragePool-Flatten-Gemm on 1x3x<size>x<size>."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)
    inits = [
        _initializer("w1", rng.standard_normal((channels, 3, 3, 3)) * 0.2),
        _initializer("b1", np.zeros(channels)),
        _initializer("w2", rng.standard_normal((channels, channels, 3, 3)) * 0.1),
        _initializer("b2", np.zeros(channels)),
        _initializer("wf", rng.standard_normal((classes, channels)) * 0.3),
        _initializer("bf", np.zeros(classes)),
    ]
    nodes = [
        helper.make_node("Conv", ["input", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("GlobalAveragePool", ["r2"], ["pooled"]),
        helper.make_node("Flatten", ["pooled"], ["flat"], axis=1),
        helper.make_node("Gemm", ["flat", "wf", "bf"], ["logits"], transB=1),
    ]
    graph = helper.make_graph(
        nodes,
        "tiny_convnet",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, size, size])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, classes])],
        initializer=inits,
    )
    return _finish(graph)


def preflight_model() -> onnx.ModelProto:
    """The model `orch build`'s pre-flight runs on an emulated board (a reduced build keeps its operators)."""
    return tiny_convnet(size=16, channels=4)


def wide_matmul(*, features: int = 256, outputs: int = 64, seed: int = 1) -> onnx.ModelProto:
    """One MatMul whose weight is ``features x outputs`` floats: a model whose size is chosen freely
    (e.g. 2500 x 4000 = 40 MB) while its inference stays one cheap matrix-vector product."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["input", "w"], ["output"])],
        "wide_matmul",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, features])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, outputs])],
        initializer=[_initializer("w", rng.standard_normal((features, outputs)) * 0.01)],
    )
    return _finish(graph)


def mlp(*, features: int = 128, hidden: int = 64, classes: int = 10, seed: int = 2) -> onnx.ModelProto:
    """A 128-feature MLP (Gemm-ReLU-Gemm-ReLU-Gemm, ~13k weights): the size of model a controller asks
    a decision of within tens of milliseconds, for quick cold-start checks of a runner."""
    from onnx import TensorProto, helper

    rng = np.random.default_rng(seed)
    inits = [
        _initializer("w1", rng.standard_normal((features, hidden)) * (2.0 / features) ** 0.5),
        _initializer("b1", rng.standard_normal(hidden) * 0.01),
        _initializer("w2", rng.standard_normal((hidden, hidden)) * (2.0 / hidden) ** 0.5),
        _initializer("b2", rng.standard_normal(hidden) * 0.01),
        _initializer("w3", rng.standard_normal((hidden, classes)) * (1.0 / hidden) ** 0.5),
        _initializer("b3", np.zeros(classes)),
    ]
    nodes = [
        helper.make_node("Gemm", ["features", "w1", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["a1"]),
        helper.make_node("Gemm", ["a1", "w2", "b2"], ["h2"]),
        helper.make_node("Relu", ["h2"], ["a2"]),
        helper.make_node("Gemm", ["a2", "w3", "b3"], ["scores"]),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp128",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, ["batch", features])],
        [helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["batch", classes])],
        initializer=inits,
    )
    return _finish(graph)


def _finish(graph: onnx.GraphProto) -> onnx.ModelProto:
    import onnx
    from onnx import helper

    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="orch")
    model.ir_version = IR_VERSION
    onnx.checker.check_model(model)
    return model


def write_model(model: onnx.ModelProto, path: Path) -> Path:
    import onnx

    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save_model(model, str(path))
    return path


def write_tiny_convnet(path: Path, **kwargs: int) -> Path:
    return write_model(tiny_convnet(**kwargs), path)
