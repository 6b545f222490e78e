"""The counting agent run for real on the workstation (x86 onnxruntime) as a subprocess: the count's
process and its forked children, without the counter around them."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from bench_models import conv_model

BOARD_SIDE = Path(__file__).resolve().parents[2] / "orchestrator" / "board_side"


def run_count_agent(model: Path, *args: str) -> subprocess.CompletedProcess[str]:
    text = (BOARD_SIDE / "count_agent.py").read_text()
    argv = [sys.executable, "-c", text, str(BOARD_SIDE), str(model), *args]
    return subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> Path:
    return conv_model(tmp_path_factory.mktemp("models") / "tiny.onnx")


def test_a_forked_count_runs_each_number_in_a_child_and_reports_once(model):
    done = run_count_agent(model, "0", "3", "0", "--fork", "--opt-level", "basic")
    assert done.returncode == 0, done.stderr
    [line] = done.stdout.splitlines()  # the parent's document only: a child prints nothing
    document = json.loads(line)
    assert document["ok"] and document["inferences"] == [0, 3, 0], document
    assert document["providers"] == ["CPUExecutionProvider"]


def test_a_failing_count_is_a_json_document_and_several_numbers_need_fork(model, tmp_path):
    missing = tmp_path / "missing.onnx"
    done = run_count_agent(missing, "0", "3", "0", "--fork")
    assert done.returncode == 1
    assert not json.loads(done.stdout)["ok"] and "missing.onnx" in json.loads(done.stdout)["error"]
    refused = run_count_agent(model, "0", "3")
    assert refused.returncode == 2 and "add --fork" in refused.stderr
