"""The board-side case runner, run for real on the workstation (x86 onnxruntime) as a subprocess,
and its comparison rules (ONNX's backend runner's: shapes, dtypes, strings, rtol/atol, NaN)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from orchestrator.verify import cases, outcome

RUNNER = Path(__file__).resolve().parents[2] / "orchestrator" / "board_side" / "verify_cases.py"


def load_runner() -> ModuleType:
    spec = importlib.util.spec_from_file_location("verify_cases", RUNNER)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


runner = load_runner()


def one_node_model(op: str, *, opset: int = 13, domain: str = "", ir: int = 7) -> onnx.ModelProto:
    node = helper.make_node(op, ["x"], ["y"], domain=domain)
    graph = helper.make_graph(
        [node],
        op,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_operatorsetid(domain, opset)])
    model.ir_version = ir
    return model


def write_bundle(root: Path, entries: list[tuple[str, onnx.ModelProto, np.ndarray, np.ndarray]]) -> Path:
    root.mkdir(parents=True)
    written = []
    for name, model, x, y in entries:
        (root / name).mkdir()
        (root / name / "model.onnx").write_bytes(model.SerializeToString())
        np.save(root / name / "input_0.npy", x)
        np.save(root / name / "output_0.npy", y)
        written.append(
            cases.Case(
                name=name,
                kind="node",
                op=model.graph.node[0].op_type,
                model=f"{name}/model.onnx",
                inputs=(("x", f"{name}/input_0.npy"),),
                outputs=(("y", f"{name}/output_0.npy"),),
                rtol=1e-3,
                atol=1e-7,
            )
        )
    cases.write_cases_file(root, written)
    return root


def run(
    bundle: Path, names: list[str], *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(RUNNER), "--bundle", str(bundle), *extra],
        input=json.dumps(names),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        env=env,
    )


def test_pass_fail_and_unsupported_come_out_one_line_per_case(tmp_path: Path) -> None:
    x = np.array([[-1.0, 2.0, -3.0], [4.0, -5.0, 6.0]], dtype=np.float32)
    bundle = write_bundle(
        tmp_path / "b",
        [
            ("abs_right", one_node_model("Abs"), x, np.abs(x)),
            # An expected value off by 1e-2 on one element: outside rtol 1e-3.
            (
                "abs_wrong",
                one_node_model("Abs"),
                x,
                np.abs(x) + np.array([[0, 0, 0.01], [0] * 3], np.float32),
            ),
            ("no_such_op", one_node_model("NoSuchOperator", domain="org.example", opset=1), x, x),
            ("opset_from_the_future", one_node_model("Abs", opset=999, ir=99), x, np.abs(x)),
        ],
    )
    done = run(bundle, ["abs_right", "abs_wrong", "no_such_op", "opset_from_the_future", "not_there"])
    assert done.returncode == 0, done.stderr
    parsed = outcome.parse_run(done.stdout)
    assert parsed.done and parsed.hello and parsed.hello["version"]
    by = {r.case: r for r in parsed.results}
    assert [r.case for r in parsed.results] == [
        "abs_right",
        "abs_wrong",
        "no_such_op",
        "opset_from_the_future",
        "not_there",
    ]
    assert by["abs_right"].status == "pass"
    assert by["abs_wrong"].status == "fail" and by["abs_wrong"].stage == "compare"
    assert "1 of 6 values outside rtol 0.001" in by["abs_wrong"].detail
    assert by["no_such_op"].status == "unsupported" and by["no_such_op"].stage == "load"
    assert by["opset_from_the_future"].status == "unsupported"
    assert by["not_there"].status == "fail" and by["not_there"].stage == "bundle"


def test_a_provider_that_is_not_there_or_cannot_be_created_runs_no_case_and_says_why(
    tmp_path: Path, gpu_onnxruntime: Path
) -> None:
    """`orch verify --ep cuda`: onnxruntime quietly makes a session without a provider it cannot
    create, so the runner checks first; cases run on the CPU would verify the CPU under the GPU's name."""
    x = np.ones((2, 3), np.float32)
    bundle = write_bundle(tmp_path / "b", [("abs", one_node_model("Abs"), x, x)])
    on_cpu = run(bundle, ["abs"])
    assert outcome.parse_run(on_cpu.stdout).hello["providers"] == ["CPUExecutionProvider"]  # type: ignore[index]
    cpu_only = run(bundle, ["abs"], "--ep", "cuda")
    parsed = outcome.parse_run(cpu_only.stdout)
    assert cpu_only.returncode == 1 and parsed.hello is None and not parsed.results
    assert parsed.error.startswith("CUDAExecutionProvider is not in this build (it has ")
    # The official x86 onnxruntime-gpu: the CUDA provider is in the build, but this machine has no driver.
    gpu = run(bundle, ["abs"], "--ep", "cuda", env={**os.environ, "PYTHONPATH": str(gpu_onnxruntime)})
    parsed = outcome.parse_run(gpu.stdout)
    assert gpu.returncode == 1 and parsed.hello is None and not parsed.results, gpu.stderr[-2000:]
    assert parsed.error == (
        "CUDAExecutionProvider is in this build but onnxruntime could not create it on this board"
        " (no NVIDIA driver or GPU here?): nothing verified"
    )


def test_a_runner_that_dies_is_resumed_after_the_case_it_died_in(tmp_path: Path) -> None:
    x = np.ones((2, 3), np.float32)
    bundle = write_bundle(tmp_path / "b", [(f"c{i}", one_node_model("Abs"), x, x) for i in range(4)])
    output = run(bundle, ["c0", "c1", "c2", "c3"]).stdout.splitlines()
    # What a process killed in c2 leaves: hello, c0, c1 and half a line.
    cut = "\n".join(output[:3]) + '\n{"case": "c2", "sta'
    parsed = outcome.parse_run(cut)
    assert not parsed.done and [r.case for r in parsed.results] == ["c0", "c1"]
    left = outcome.remaining(["c0", "c1", "c2", "c3"], parsed.results)
    assert left == ["c2", "c3"]
    died = outcome.crashed(left[0], -11, "Segmentation fault")
    assert died.status == "fail" and died.stage == "crash" and "SIGSEGV" in died.detail
    assert "SIGILL" in outcome.crashed("c2", 132, "").detail
    # The next process starts after the case that killed the last one.
    again = outcome.parse_run(run(bundle, left[1:]).stdout)
    assert again.done and [r.case for r in again.results] == ["c3"]


def test_write_expected_keeps_the_reference_outputs(tmp_path: Path) -> None:
    x = np.array([[-1.0, 2.0, -3.0], [4.0, -5.0, 6.0]], dtype=np.float32)
    bundle = tmp_path / "m"
    (bundle / "m").mkdir(parents=True)
    (bundle / "m" / "model.onnx").write_bytes(one_node_model("Abs").SerializeToString())
    np.save(bundle / "m" / "input_0.npy", x)
    case = cases.Case(
        name="model:m.onnx",
        kind="model",
        model="m/model.onnx",
        inputs=(("x", "m/input_0.npy"),),
        outputs=(),
        rtol=1e-3,
        atol=1e-5,
    )
    cases.write_cases_file(bundle, [case])
    done = subprocess.run(
        [sys.executable, str(RUNNER), "--bundle", str(bundle), "--write-expected"],
        input=json.dumps([case.name]),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    (result,) = outcome.parse_run(done.stdout).results
    assert result.status == "pass" and result.outputs == (("y", "m/output_0.npy"),)
    np.testing.assert_array_equal(np.load(bundle / "m" / "output_0.npy"), np.abs(x))


@pytest.mark.parametrize(
    ("expected", "got", "problem"),
    [
        (np.float32([1, 2]), np.float32([1, 2.0015]), None),  # within rtol 1e-3
        (np.float32([1, 2]), np.float32([1, 2.003]), "1 of 2 values outside"),
        (np.float32([0.0]), np.float32([2e-7]), "outside rtol"),  # atol 1e-7 is tight at zero
        (np.float32([np.nan, 1]), np.float32([np.nan, 1]), None),  # NaN equals NaN, as assert_allclose
        (np.float32([1, 2]), np.float64([1, 2]), "dtype float64, expected float32"),
        (np.float32([1, 2]), np.float32([[1, 2]]), "shape [1, 2], expected [2]"),
        (np.array(["a", "b"]), np.array(["a", "b"], dtype=object), None),
        (np.array(["a", "b"]), np.array(["a", "c"], dtype=object), "strings differ"),
        (np.array([True, False]), np.array([True, True]), "values differ"),
        (np.int64([3]), np.int64([3]), None),
    ],
)
def test_comparison_follows_onnx_backend_rules(
    expected: np.ndarray, got: np.ndarray, problem: str | None
) -> None:
    found = runner.compare_outputs([expected], [got], 1e-3, 1e-7)
    if problem is None:
        assert found is None
    else:
        assert found is not None and problem in found


def test_output_count_must_match() -> None:
    assert runner.compare_outputs([np.zeros(1)], [], 1e-3, 1e-7) == "0 outputs, expected 1"


@pytest.mark.parametrize(
    ("message", "status"),
    [
        ("NOT_IMPLEMENTED : Could not find an implementation for Foo(23) node", "unsupported"),
        ("Unsupported model IR version: 11, max supported IR version: 10", "unsupported"),
        ("Opset 24 is under development and support for this is limited", "unsupported"),
        ("Fatal error: ai.onnx.preview.training:Adagrad(-1) is not a registered function/op", "unsupported"),
        ("INVALID_ARGUMENT : Got invalid dimensions for input: x", "fail"),
        ("[ShapeInferenceError] Inferred shape and existing shape differ", "fail"),
    ],
)
def test_errors_are_classified(message: str, status: str) -> None:
    assert runner.classify_error(message) == status
