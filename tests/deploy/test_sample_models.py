"""sample_models: valid, deterministic, and small enough for an emulated board."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnxruntime as ort

from orchestrator.lab.sample_models import wide_matmul, write_model, write_tiny_convnet


def test_tiny_convnet_runs_and_is_byte_identical_each_time(tmp_path: Path) -> None:
    a = write_tiny_convnet(tmp_path / "a.onnx")
    b = write_tiny_convnet(tmp_path / "b.onnx")
    assert a.read_bytes() == b.read_bytes()
    assert a.stat().st_size < 20_000
    session = ort.InferenceSession(str(a), providers=["CPUExecutionProvider"])
    (logits,) = session.run(None, {"input": np.ones((1, 3, 32, 32), np.float32)})
    assert logits.shape == (1, 10) and np.isfinite(logits).all()
    assert write_tiny_convnet(tmp_path / "c.onnx", seed=1).read_bytes() != a.read_bytes()


def test_wide_matmul_size_is_chosen_by_its_shape(tmp_path: Path) -> None:
    path = write_model(wide_matmul(features=500, outputs=1000), tmp_path / "w.onnx")
    assert 2_000_000 < path.stat().st_size < 2_100_000
    (out,) = ort.InferenceSession(str(path)).run(None, {"input": np.ones((1, 500), np.float32)})
    assert out.shape == (1, 1000)
