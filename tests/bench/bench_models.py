"""Tiny ONNX models for bench tests: fast under emulation, and with work that graph optimisation removes;
and the agent document a local run of the real bench agent gives on one of them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

AGENT = Path(__file__).resolve().parents[2] / "orchestrator" / "board_side" / "bench_agent.py"


def agent_doc(model: Path, opt_level: str) -> dict:
    done = subprocess.run(
        [
            sys.executable,
            str(AGENT),
            "--model",
            str(model),
            "--opt-level",
            opt_level,
            "--warmup",
            "3",
            "--min-runs",
            "20",
            "--min-duration",
            "0",
            "--intra-op-threads",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout)


def conv_model(
    path: Path, *, layers: int = 4, channels: int = 8, size: int = 32, folded_chain: int = 0
) -> Path:
    """Conv+BatchNorm+Relu stack on a 1x3xSxS input (free batch dim named N).

    ``folded_chain`` adds a chain of MatMuls over constant 64x64 matrices whose result is added to the
    output: with graph optimisation on, constant folding computes it once at session creation; with
    optimisation disabled every inference pays for it. That gives an A/B of optimisation levels a
    difference that survives the noise of an emulated board.
    """
    rng = np.random.default_rng(0)
    inits, nodes = [], []
    previous, in_channels = "input", 3
    for layer in range(layers):
        weight = rng.standard_normal((channels, in_channels, 3, 3)).astype(np.float32) * 0.2
        inits.append(numpy_helper.from_array(weight, f"w{layer}"))
        inits.append(numpy_helper.from_array(np.zeros(channels, np.float32), f"b{layer}"))
        for name, value in (("scale", 1.0), ("bias", 0.0), ("mean", 0.0), ("var", 1.0)):
            inits.append(numpy_helper.from_array(np.full(channels, value, np.float32), f"bn{layer}_{name}"))
        nodes.append(
            helper.make_node("Conv", [previous, f"w{layer}", f"b{layer}"], [f"c{layer}"], pads=[1, 1, 1, 1])
        )
        nodes.append(
            helper.make_node(
                "BatchNormalization",
                [f"c{layer}", f"bn{layer}_scale", f"bn{layer}_bias", f"bn{layer}_mean", f"bn{layer}_var"],
                [f"n{layer}"],
            )
        )
        nodes.append(helper.make_node("Relu", [f"n{layer}"], [f"r{layer}"]))
        previous, in_channels = f"r{layer}", channels
    nodes.append(helper.make_node("ReduceMean", [previous], ["pooled"], axes=[2, 3], keepdims=0))
    output = "pooled"
    if folded_chain:
        matrix = (rng.standard_normal((64, 64)) * 0.1).astype(np.float32)
        inits.append(numpy_helper.from_array(matrix, "m0"))
        current = "m0"
        for step in range(folded_chain):
            nodes.append(helper.make_node("MatMul", [current, "m0"], [f"mm{step}"]))
            current = f"mm{step}"
        inits.append(numpy_helper.from_array(np.array([0], np.int64), "zero"))
        inits.append(numpy_helper.from_array(np.array([channels], np.int64), "width"))
        nodes.append(helper.make_node("ReduceSum", [current, "zero"], ["colsum"], keepdims=0))
        nodes.append(helper.make_node("Slice", ["colsum", "zero", "width"], ["offset"]))
        nodes.append(helper.make_node("Add", ["pooled", "offset"], ["out"]))
        output = "out"
    graph = helper.make_graph(
        nodes,
        "tiny",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, ["N", 3, size, size])],
        [helper.make_tensor_value_info(output, TensorProto.FLOAT, ["N", channels])],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path
