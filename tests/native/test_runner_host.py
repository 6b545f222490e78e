"""The native runner's C source, built for this workstation and run against the workstation's real
onnxruntime library: the document it prints, its outputs next to onnxruntime's Python API, its
refusals (another release's library, bad arguments, bad inputs). The same source is cross-built for
the boards (tests/native/test_native_lab.py runs that one on an emulated board)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import time
from pathlib import Path

import numpy as np
import onnxruntime
import pytest

from orchestrator.bench.native import cold_sample, runner_problems
from orchestrator.board_side import read_text
from orchestrator.lab.sample_models import mlp, tiny_convnet, write_model
from tests.native.conftest import compile_host_runner


@pytest.fixture
def models(tmp_path: Path) -> dict[str, Path]:
    return {
        "mlp": write_model(mlp(), tmp_path / "mlp.onnx"),
        "convnet": write_model(tiny_convnet(), tmp_path / "tiny.onnx"),
    }


def test_the_document_follows_the_schema_and_names_what_was_measured(host_runner, models) -> None:
    code, document = host_runner.run(
        "--model", str(models["mlp"]), "--warmup", "2", "--min-runs", "7", "--min-duration", "0"
    )
    assert code == 0, document
    assert runner_problems(document) == []
    assert document["ok"] is True
    assert document["ort"]["version"] == onnxruntime.__version__
    assert document["runner"]["built_for"] == onnxruntime.__version__
    assert document["model"]["sha256"] == hashlib.sha256(models["mlp"].read_bytes()).hexdigest()
    # The 128-feature MLP: its free batch dimension becomes 1, as in the Python agent.
    (feature,) = document["model"]["inputs"]
    assert feature["name"] == "features" and feature["shape"] == [1, 128]
    assert feature["model_shape"] == ["batch", 128] and feature["source"] == "model-metadata"
    timing = document["timing"]
    assert timing["runs"] == 7 and len(timing["latencies_ms"]) == 7 and timing["warmup_runs"] == 2
    assert document["stats"]["n"] == 7
    assert document["stats"]["p50_ms"] == pytest.approx(float(np.percentile(timing["latencies_ms"], 50)))
    assert document["stats"]["std_ms"] == pytest.approx(float(np.std(timing["latencies_ms"], ddof=1)))
    # Without a launcher the process start comes from the kernel (/proc/self/stat).
    assert timing["launch_source"] == "proc-stat"
    assert (
        0
        <= timing["launch_to_main_ms"]
        <= timing["launch_to_session_ms"]
        <= timing["launch_to_first_result_ms"]
    )
    assert document["memory"]["peak_rss_kb"] > 1000
    assert document["session"]["providers"] == ["CPUExecutionProvider"]
    assert document["session"]["xnnpack_threads"] is None


def test_min_duration_keeps_the_runner_measuring_past_min_runs(host_runner, models) -> None:
    code, document = host_runner.run(
        "--model", str(models["convnet"]), "--warmup", "0", "--min-runs", "1", "--min-duration", "0.3"
    )
    assert code == 0, document
    assert document["timing"]["duration_s"] >= 0.3
    assert document["timing"]["runs"] > 1


@pytest.mark.parametrize("opt_level,threads", [("all", "1"), ("disable", "2"), ("basic", "0")])
def test_outputs_equal_onnxruntime_python_for_the_same_inputs_and_settings(
    host_runner, models, tmp_path: Path, opt_level: str, threads: str
) -> None:
    rng = np.random.default_rng(7)
    cases = {
        "mlp": ("features", rng.standard_normal((4, 128)).astype(np.float32)),
        "convnet": ("input", rng.standard_normal((1, 3, 32, 32)).astype(np.float32)),
    }
    for name, (input_name, array) in cases.items():
        npy = tmp_path / f"{name}-in.npy"
        np.save(npy, array)
        out = tmp_path / f"{name}-out"
        out.mkdir()
        code, document = host_runner.run(
            "--model", str(models[name]), "--input", f"{input_name}={npy}", "--save-outputs", str(out),
            "--opt-level", opt_level, "--intra-op-threads", threads,
            "--warmup", "0", "--min-runs", "1", "--min-duration", "0",
        )  # fmt: skip
        assert code == 0, document
        assert document["model"]["inputs"][0]["source"] == "npy"
        assert document["session"]["opt_level"] == opt_level
        options = onnxruntime.SessionOptions()
        options.graph_optimization_level = {
            "all": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_ALL,
            "disable": onnxruntime.GraphOptimizationLevel.ORT_DISABLE_ALL,
            "basic": onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        }[opt_level]
        options.intra_op_num_threads = int(threads)
        session = onnxruntime.InferenceSession(str(models[name]), options)
        (expected,) = session.run(None, {input_name: array})
        output_name = session.get_outputs()[0].name
        got = np.load(out / f"{output_name}.npy")
        assert got.shape == expected.shape and got.dtype == expected.dtype
        np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-7)


def test_a_library_of_another_release_is_refused_before_any_session(make_host_runner, models) -> None:
    runner = make_host_runner("1.21.0")
    code, document = runner.run("--model", str(models["mlp"]))
    assert code == 1
    assert document["ok"] is False and document["stage"] == "version"
    assert "built for ONNX Runtime 1.21.0" in document["error"]
    assert f"ONNX Runtime {onnxruntime.__version__}" in document["error"]
    assert "model" not in document and "timing" not in document
    assert runner_problems(document) == []


def test_a_missing_library_is_one_document_naming_the_library(c_api_header, models, tmp_path) -> None:
    runner = compile_host_runner(c_api_header, tmp_path / "runner", onnxruntime.__version__)
    (runner.path.parent / "lib" / "libonnxruntime.so.1").unlink()
    code, document = runner.run("--model", str(models["mlp"]))
    assert code == 1
    assert document["ok"] is False and document["stage"] == "library"
    assert document["error"].startswith(
        f"cannot load libonnxruntime.so.1 (ONNX Runtime {onnxruntime.__version__})"
    )
    assert runner_problems(document) == []


@pytest.mark.parametrize(
    "args,code,stage,words",
    [
        ((), 2, "arguments", "--model is required"),
        (("--model", "MODEL", "--warmup", "lots"), 2, "arguments", "--warmup lots"),
        (("--model", "MODEL", "--opt-level", "max"), 2, "arguments", "--opt-level max"),
        (("--model", "MODEL", "--frobnicate", "1"), 2, "arguments", "unknown option --frobnicate"),
        (("--model", "/nonexistent/m.onnx"), 1, "model", "model file not found: /nonexistent/m.onnx"),
        (("--model", "MODEL", "--ep", "cuda"), 1, "session", "CUDAExecutionProvider is not in this build"),
        (("--model", "MODEL", "--ep", "xnnpack", "--affinity", "2"), 2, "arguments", "with xnnpack that pool has 1 thread"),
        (("--model", "MODEL", "--shape", "other=1x2"), 1, "inputs", "no input 'other'"),
        (("--model", "MODEL", "--shape", "features=1x2x3"), 1, "inputs", "3 dims given, the model has 2"),
        (("--model", "MODEL", "--input", "features=BADNPY"), 1, "inputs", "holds int64, input 'features' is tensor(float)"),
    ],
)  # fmt: skip
def test_failures_are_one_document_naming_the_cause(
    host_runner, models, tmp_path: Path, args, code: int, stage: str, words: str
) -> None:
    bad = tmp_path / "ints.npy"
    np.save(bad, np.zeros((1, 128), dtype=np.int64))
    argv = [str(models["mlp"]) if a == "MODEL" else a.replace("BADNPY", str(bad)) for a in args]
    exit_code, document = host_runner.run(*argv)
    assert exit_code == code
    assert document["ok"] is False and document["stage"] == stage
    assert words in document["error"]
    assert runner_problems(document) == []


def test_the_launch_time_from_the_launcher_orders_main_session_and_first_result(host_runner, models) -> None:
    env = {**os.environ, "ORCH_LAUNCH_T0_NS": str(time.time_ns())}
    code, document = host_runner.run(
        "--model", str(models["mlp"]), "--warmup", "0", "--min-runs", "1", "--min-duration", "0", env=env
    )
    assert code == 0, document
    timing = document["timing"]
    assert timing["launch_source"] == "launcher"
    sample = cold_sample(document)
    assert sample is not None
    assert 0 < sample.launch_to_main_ms <= sample.launch_to_session_ms <= sample.launch_to_first_result_ms
    # The first result comes after the session and the first inference, measured on the same clock.
    assert sample.launch_to_first_result_ms >= timing["first_inference_ms"]


def test_cold_launch_runs_n_fresh_processes_each_with_its_own_launch_time(host_runner, models) -> None:
    argv = [str(host_runner.path), "--model", str(models["mlp"]), "--warmup", "0", "--min-runs", "1",
            "--min-duration", "0"]  # fmt: skip
    done = subprocess.run(
        ["sh", "-c", read_text("cold_launch.sh"), "cold_launch.sh", "4", *argv],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    documents = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(documents) == 4
    samples = [cold_sample(d) for d in documents]
    assert all(s is not None and s.launch_to_first_result_ms > 0 for s in samples)
    assert all(d["timing"]["launch_source"] == "launcher" for d in documents)


def test_pinned_cores_reach_the_process_and_onnxruntime_as_for_the_agent(host_runner, models) -> None:
    args = (
        "--model",
        str(models["mlp"]),
        "--intra-op-threads",
        "2",
        "--min-runs",
        "2",
        "--min-duration",
        "0",
    )
    code, document = host_runner.run(*args, "--main-cpu", "0", "--affinity", "2")
    assert code == 0 and document["ok"], document
    assert (document["session"]["main_cpu"], document["session"]["intra_op_thread_affinities"]) == (0, "2")
    code, document = host_runner.run(*args, "--main-cpu", "4096")
    assert code == 1 and document["stage"] == "arguments"
    assert "--pin-cores: CPU 4096 is not one this process may use here" in document["error"]
