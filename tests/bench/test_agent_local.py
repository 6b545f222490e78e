"""The on-device agent run for real on the workstation (x86 onnxruntime) as a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from bench_models import conv_model

AGENT = Path(__file__).resolve().parents[2] / "orchestrator" / "board_side" / "bench_agent.py"


def run_agent(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict]:
    done = subprocess.run(
        [sys.executable, str(AGENT), *args], capture_output=True, text=True, timeout=120, check=False, env=env
    )
    return done.returncode, json.loads(done.stdout)  # exactly one JSON document, whatever happened


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return conv_model(tmp_path_factory.mktemp("models") / "tiny.onnx")


def fake_sysfs(root: Path) -> Path:
    """A sysfs tree with two cores, cpufreq and one thermal zone, like a Raspberry Pi's."""
    (root / "devices/system/cpu").mkdir(parents=True)
    (root / "devices/system/cpu/online").write_text("0-1\n")
    for cpu, khz in ((0, 1500000), (1, 600000)):
        freq = root / f"devices/system/cpu/cpu{cpu}/cpufreq"
        freq.mkdir(parents=True)
        (freq / "scaling_governor").write_text("ondemand\n")
        (freq / "scaling_cur_freq").write_text(f"{khz}\n")
        (freq / "cpuinfo_max_freq").write_text("1800000\n")
    zone = root / "class/thermal/thermal_zone0"
    zone.mkdir(parents=True)
    (zone / "type").write_text("cpu-thermal\n")
    (zone / "temp").write_text("48250\n")
    return root


def test_agent_measures_until_min_runs_and_min_duration(model, tmp_path):
    code, doc = run_agent(
        "--model",
        str(model),
        "--warmup",
        "2",
        "--min-runs",
        "7",
        "--min-duration",
        "0",
        "--sysfs-root",
        str(fake_sysfs(tmp_path / "sys")),
    )
    assert code == 0 and doc["ok"] is True, doc.get("error")
    timing = doc["timing"]
    assert timing["runs"] == 7 and len(timing["latencies_ms"]) == 7
    assert timing["session_create_s"] > 0 and timing["first_inference_ms"] > 0 and timing["warmup_runs"] == 2
    s = doc["stats"]
    assert s["n"] == 7
    assert s["p50_ms"] == pytest.approx(float(np.percentile(timing["latencies_ms"], 50)))
    assert s["min_ms"] <= s["p50_ms"] <= s["p90_ms"] <= s["p99_ms"] <= s["max_ms"]
    assert s["throughput_ips"] > 0
    assert doc["memory"]["peak_rss_kb"] > 10_000
    # settings actually used, ORT identity, model identity and inputs from metadata (free batch dim -> 1)
    assert doc["session"]["providers"] == ["CPUExecutionProvider"]
    assert doc["session"]["graph_optimization_level"] == "ORT_ENABLE_ALL"
    assert doc["ort"]["version"].count(".") == 2
    assert doc["model"]["sha256"] == __import__("hashlib").sha256(model.read_bytes()).hexdigest()
    assert doc["model"]["inputs"] == [
        {
            "name": "input",
            "model_type": "tensor(float)",
            "model_shape": ["N", 3, 32, 32],
            "dtype": "float32",
            "shape": [1, 3, 32, 32],
            "source": "model-metadata",
        }
    ]
    # board state read from the (fake) sysfs root
    before = doc["board"]["before"]
    assert before["online_cores"] == 2
    assert before["cpufreq"]["cpu0"] == {
        "governor": "ondemand",
        "cur_khz": 1500000,
        "min_khz": None,
        "max_khz": None,
        "hw_max_khz": 1800000,
    }
    assert before["thermal"] == [{"zone": "thermal_zone0", "type": "cpu-thermal", "temp_c": 48.25}]
    assert doc["board"]["after"]["thermal"][0]["temp_c"] == 48.25
    assert before["kernel"] and before["loadavg"] is not None


def test_min_duration_keeps_running_past_min_runs(model):
    code, doc = run_agent("--model", str(model), "--warmup", "0", "--min-runs", "1", "--min-duration", "0.3")
    assert code == 0
    assert doc["timing"]["duration_s"] >= 0.3
    assert doc["timing"]["runs"] > 1


def test_missing_sysfs_gives_nulls_not_a_crash(model, tmp_path):
    code, doc = run_agent(
        "--model",
        str(model),
        "--min-runs",
        "2",
        "--min-duration",
        "0",
        "--warmup",
        "0",
        "--sysfs-root",
        str(tmp_path / "nothing"),
        "--proc-root",
        str(tmp_path / "noproc"),
    )
    assert code == 0, doc
    before = doc["board"]["before"]
    assert before["online_cpus"] is None and before["thermal"] == []
    assert all(core["governor"] is None for core in before["cpufreq"].values())
    assert before["nvpmodel"] is None


def test_settings_shape_and_npy_inputs(model, tmp_path):
    data = tmp_path / "x.npy"
    np.save(data, np.ones((2, 3, 32, 32), np.float32))
    code, doc = run_agent(
        "--model",
        str(model),
        "--min-runs",
        "2",
        "--min-duration",
        "0",
        "--warmup",
        "0",
        "--opt-level",
        "disable",
        "--intra-op-threads",
        "1",
        "--input",
        f"input={data}",
    )
    assert code == 0, doc
    assert doc["session"]["graph_optimization_level"] == "ORT_DISABLE_ALL"
    assert doc["session"]["intra_op_num_threads"] == 1 and doc["session"]["xnnpack_threads"] is None
    assert (
        doc["model"]["inputs"][0]["shape"] == [2, 3, 32, 32] and doc["model"]["inputs"][0]["source"] == "npy"
    )
    code, doc = run_agent(
        "--model",
        str(model),
        "--min-runs",
        "2",
        "--min-duration",
        "0",
        "--warmup",
        "0",
        "--shape",
        "input=4x3x32x32",
    )
    assert code == 0 and doc["model"]["inputs"][0]["shape"] == [4, 3, 32, 32]


@pytest.mark.parametrize(
    ("args", "stage", "words"),
    [
        (["--model", "/nonexistent/m.onnx"], "model", "model file not found"),
        (["--shape", "input=1x3"], "inputs", "2 dims given"),
        (["--shape", "other=1x3x4x4"], "inputs", "no input 'other'"),
        (["--shape", "input=abc"], "arguments", "expected NAME=DxDxD"),
        (["--ep", "cuda"], "session", "not in this build"),
        (["--ep", "xnnpack", "--affinity", "2"], "arguments", "with xnnpack that pool has 1 thread"),
    ],
)
def test_failures_are_a_json_document_naming_the_cause(model, args, stage, words):
    argv = ["--model", str(model), "--min-runs", "1", "--min-duration", "0", *args]
    code, doc = run_agent(*argv)
    assert code == 1
    assert doc["ok"] is False and doc["stage"] == stage and words in doc["error"]


def test_a_provider_onnxruntime_cannot_create_is_not_timed_as_the_cpu(model, gpu_onnxruntime):
    """`orch bench --ep cuda` with a CUDA wheel on a board without an NVIDIA driver (here: the official
    x86 onnxruntime-gpu, no driver): onnxruntime would quietly run the session on the CPU."""
    env = {**os.environ, "PYTHONPATH": str(gpu_onnxruntime)}
    argv = ["--model", str(model), "--min-runs", "1", "--min-duration", "0", "--ep", "cuda"]
    code, doc = run_agent(*argv, env=env)
    assert "CUDAExecutionProvider" in doc["ort"]["available_providers"]  # the GPU build, as on the board
    assert code == 1 and doc["ok"] is False and doc["stage"] == "session"
    assert doc["error"].startswith(
        "CUDAExecutionProvider is in this build but onnxruntime could not create it"
    )
    assert "the session got CPUExecutionProvider" in doc["error"] and "no NVIDIA driver" in doc["error"]
    assert "latency" not in json.dumps(doc.get("results", {}))  # nothing measured


def test_corrupt_model_fails_at_session_creation(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"not a model")
    code, doc = run_agent("--model", str(bad), "--min-runs", "1", "--min-duration", "0")
    assert code == 1 and doc["stage"] == "session" and "bad.onnx" in doc["error"]


def test_pinned_cores_reach_onnxruntime_and_the_process_and_are_recorded(model):
    # 2 intra-op threads: the calling one on CPU 0, the pool's one on CPU 1 (ORT's "2": it counts from 1).
    args = ("--model", str(model), "--intra-op-threads", "2", "--min-runs", "2", "--min-duration", "0")
    code, doc = run_agent(*args, "--main-cpu", "0", "--affinity", "2")
    assert code == 0 and doc["ok"] is True, doc.get("error")
    assert (doc["session"]["main_cpu"], doc["session"]["intra_op_thread_affinities"]) == (0, "2")
    # ORT itself refuses processor 0: the spec really reached it (and its complaint is the error).
    done = subprocess.run(
        [sys.executable, str(AGENT), *args, "--affinity", "0"], capture_output=True, text=True, check=False
    )
    doc = json.loads(done.stdout.strip().splitlines()[-1])  # ORT prints its own EP error line first
    assert done.returncode == 1 and doc["ok"] is False and doc["stage"] == "session"
    assert "must start from 1" in doc["error"]
    code, doc = run_agent(*args, "--main-cpu", "4096")
    assert (
        code == 1
        and doc["stage"] == "arguments"
        and "CPU 4096 is not one this process may use" in doc["error"]
    )
