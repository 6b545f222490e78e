"""`orch bench --quantize static` on a real lab board: the user's calibration .npy, a QDQ S8S8
per-channel int8 model pushed next to the fp32 one, both timed, and their agreement measured on
the board's (emulated Cortex-A72) CPU."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from stock_baseline import StockBuild

from orchestrator.adapters import ssh
from orchestrator.lab.sample_models import tiny_convnet, write_model

# The board, wheel and model tests/verify/test_verify_lab.py deploys too: the second deploy of the
# same content is a no-op (same release id), so the two tests pay for one install under emulation.
BOARD = "lab2"


@pytest.mark.timeout(3600)  # a deploy (pip under emulation) and a bench run, on a busy machine
def test_static_int8_is_int8_and_its_agreement_is_shown_beside_its_speed(
    lab, stock_build: StockBuild, tmp_path: Path
) -> None:
    model = write_model(tiny_convnet(), tmp_path / "tiny.onnx")
    done = lab.orch(
        "deploy",
        "--host",
        BOARD,
        "--artifact",
        str(stock_build.artifact.directory),
        "--model",
        str(model),
        timeout=1800,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    samples = tmp_path / "calibration.npy"
    np.save(samples, np.random.default_rng(7).standard_normal((8, 3, 32, 32)).astype(np.float32))
    bench = lab.orch(
        "bench",
        "--host",
        BOARD,
        "--model",
        "tiny",
        "--quantize",
        "static",
        "--calibration",
        f"input={samples}",
        "--quick",
        "--rounds",
        "1",
        "--min-runs",
        "4",
        "--json",
        timeout=1800,
    )
    assert bench.returncode == 0, f"{bench.stdout[-2000:]}\n{bench.stderr[-4000:]}"
    document = json.loads(bench.stdout)
    assert [(s["quant"], s["n"]) for s in document["series"]] == [("fp32", 4), ("int8-static", 4)]
    (made,) = document["quantization"][BOARD].values()
    info = made["tiny.onnx"]
    assert info["mode"] == "static" and info["calibration"]["source"] == "user"
    assert info["calibration"]["samples"] == 8 and info["warnings"] == []
    assert info["ops"]["QuantizeLinear"] >= 2 and info["ops"]["int8 initializers"] >= 2
    (output,) = info["agreement"]["outputs"]
    assert info["agreement"]["samples"] == 8 and output["classifier"] and output["top1_rows"] == 8
    assert 0 < output["max_abs_diff"] < output["max_abs_fp32"]
    assert 0.0 <= output["top1_agreement"] <= 1.0
    # The table puts speed and agreement side by side.
    assert "fp32 vs int8: speed and agreement" in bench.stderr and "% of 8" in bench.stderr
    print(
        f"int8 static on {BOARD}: max |diff| {output['max_abs_diff']:.3g}, top-1 {output['top1_agreement']:.3f}"
        f" over 8 samples; p50 "
        + ", ".join(f"{s['quant']} {s['p50_ms']:.3g} ms (n={s['n']})" for s in document["series"])
    )

    # What the board ran is int8: the int8 file on the board has int8 activations and weights.
    board = lab.board(BOARD)
    with ssh.connect(board) as session:
        local = tmp_path / "on-board.int8.onnx"
        session.get(f"{board.workdir}/current/models/{info['int8_file']}", local)
    int8 = onnx.load(str(local))
    inits = {init.name: init for init in int8.graph.initializer}
    zero_points = [inits[n.input[2]] for n in int8.graph.node if n.op_type == "QuantizeLinear"]
    assert zero_points and {z.data_type for z in zero_points} == {onnx.TensorProto.INT8}
    weights = [
        inits[n.input[0]] for n in int8.graph.node if n.op_type == "DequantizeLinear" and n.input[0] in inits
    ]
    assert any(w.data_type == onnx.TensorProto.INT8 and len(w.dims) == 4 for w in weights)
