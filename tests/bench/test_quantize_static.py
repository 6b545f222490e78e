"""Static int8 on the workstation: calibration data (the user's .npy or generated), QDQ S8S8 with
per-channel weights by onnxruntime's real quantiser, and the board-side agreement check run with
the workstation's onnxruntime."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest

from orchestrator.bench import calibration
from orchestrator.bench.plan import int8_name
from orchestrator.bench.plan_options import make_plan
from orchestrator.bench.quantise import quantisation_ops, quantise_static
from orchestrator.board import Board
from orchestrator.errors import UsageError
from orchestrator.lab.sample_models import tiny_convnet, write_model

AGREEMENT = Path(__file__).resolve().parents[2] / "orchestrator" / "board_side" / "quant_agreement.py"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_model(tiny_convnet(), tmp_path_factory.mktemp("q") / "tiny.onnx")


def test_user_samples_are_split_along_the_batch_axis_or_a_leading_axis(model: Path, tmp_path: Path) -> None:
    inputs = calibration.model_inputs(model)
    assert [(i.name, i.shape) for i in inputs] == [("input", (1, 3, 32, 32))]
    batch = tmp_path / "batch.npy"
    np.save(batch, np.random.default_rng(1).random((6, 3, 32, 32), dtype=np.float32))
    feeds = calibration.samples(calibration.parse_specs([str(batch)]), inputs, "tiny.onnx")
    assert len(feeds) == 6 and feeds[0]["input"].shape == (1, 3, 32, 32)
    leading = tmp_path / "leading.npy"
    np.save(leading, np.zeros((4, 1, 3, 32, 32), dtype=np.float64))
    feeds = calibration.samples(calibration.parse_specs([f"input={leading}"]), inputs, "tiny.onnx")
    assert len(feeds) == 4 and feeds[0]["input"].dtype == np.float32  # cast to the input's type


def test_calibration_mistakes_name_the_file_and_the_input(model: Path, tmp_path: Path) -> None:
    inputs = calibration.model_inputs(model)
    wrong = tmp_path / "wrong.npy"
    np.save(wrong, np.zeros((2, 3, 16, 16), dtype=np.float32))
    with pytest.raises(
        UsageError,
        match=r"wrong.npy: shape \[2, 3, 16, 16\] does not fit input 'input' \[1, 3, 32, 32\]|a sample of shape \[1, 3, 16, 16\] does not fit input 'input'",
    ):
        calibration.samples(calibration.parse_specs([str(wrong)]), inputs, "tiny.onnx")
    with pytest.raises(UsageError, match="no such file"):
        calibration.parse_specs([str(tmp_path / "missing.npy")])
    pickled = tmp_path / "objects.npy"
    np.save(pickled, np.array([{"a": 1}], dtype=object), allow_pickle=True)
    with pytest.raises(UsageError, match="without pickles"):
        calibration.parse_specs([str(pickled)])
    with pytest.raises(UsageError, match="no input named other"):
        calibration.samples(calibration.parse_specs([f"other={wrong}"]), inputs, "tiny.onnx")


def test_the_int8_file_name_follows_the_calibration_data(tmp_path: Path) -> None:
    a, b = tmp_path / "a.npy", tmp_path / "b.npy"
    np.save(a, np.zeros((2, 3, 32, 32), np.float32))
    np.save(b, np.ones((2, 3, 32, 32), np.float32))
    first, second = calibration.parse_specs([str(a)]), calibration.parse_specs([str(b)])
    assert first.id != second.id and calibration.CalibrationSpec().id == "gen"
    assert int8_name("m.onnx", "static", first.id) == f"m.static-{first.id}.int8.onnx"
    assert int8_name("m.onnx") == "m.int8.onnx"
    board = Board(name="b", hostname="127.0.0.1")
    plan = make_plan([board], quantize="static", calibration=first)
    assert plan.as_dict()["calibration"]["source"] == "user"
    with pytest.raises(UsageError, match="--calibration is for --quantize static"):
        make_plan([board], quantize="dynamic", calibration=first)


def test_static_quantisation_makes_a_qdq_s8s8_model_with_per_channel_weights(
    model: Path, tmp_path: Path
) -> None:
    feeds = calibration.samples(calibration.CalibrationSpec(), calibration.model_inputs(model), "tiny.onnx")
    assert len(feeds) == calibration.GENERATED_SAMPLES
    out = tmp_path / "tiny.int8.onnx"
    quantise_static(model, out, feeds)
    int8 = onnx.load(str(out))
    ops = quantisation_ops(out)
    assert ops["QuantizeLinear"] >= 2 and ops["DequantizeLinear"] >= 4 and ops["int8 initializers"] >= 2
    inits = {init.name: init for init in int8.graph.initializer}
    # Activations int8 (S8S8): every QuantizeLinear's zero point is int8, none uint8.
    zero_points = [inits[node.input[2]] for node in int8.graph.node if node.op_type == "QuantizeLinear"]
    assert zero_points and all(z.data_type == onnx.TensorProto.INT8 for z in zero_points)
    # Per-channel weights: a conv weight's scale has one value per output channel.
    conv_weights = [
        node
        for node in int8.graph.node
        if node.op_type == "DequantizeLinear"
        and inits.get(node.input[0]) is not None
        and len(inits[node.input[0]].dims) == 4
    ]
    assert conv_weights
    for node in conv_weights:
        weight, scale = inits[node.input[0]], inits[node.input[1]]
        assert weight.data_type == onnx.TensorProto.INT8
        assert list(scale.dims) == [weight.dims[0]] and weight.dims[0] > 1


def test_the_agreement_check_reports_max_difference_and_top1(model: Path, tmp_path: Path) -> None:
    feeds = calibration.samples(calibration.CalibrationSpec(), calibration.model_inputs(model), "tiny.onnx")
    int8 = tmp_path / "tiny.int8.onnx"
    quantise_static(model, int8, feeds)
    samples = tmp_path / "samples.npz"
    np.savez(samples, **calibration.stacked(feeds))
    done = subprocess.run(
        [sys.executable, "-c", AGREEMENT.read_text(), str(model), str(int8), str(samples)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    document = json.loads(done.stdout)
    assert done.returncode == 0 and document["ok"], document
    (output,) = document["outputs"]
    assert document["samples"] == 16 and output["classifier"] and output["top1_rows"] == 16
    assert 0 < output["max_abs_diff"] < output["max_abs_fp32"]
    assert 0.5 <= output["top1_agreement"] <= 1.0
    # The same model on both sides agrees exactly: the figure measures the quantisation, nothing else.
    same = subprocess.run(
        [sys.executable, "-c", AGREEMENT.read_text(), str(model), str(model), str(samples)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    exact = json.loads(same.stdout)["outputs"][0]
    assert exact["max_abs_diff"] == 0.0 and exact["top1_agreement"] == 1.0
