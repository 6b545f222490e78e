"""The levers as variants: xnnpack, nchwc, KleidiAI set explicitly, and reduced builds from the
user's models (plans and operator configs; no Docker)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from orchestrator.builds.plan import BuildOptions, make_plan
from orchestrator.builds.reduced_ops import operator_config
from orchestrator.builds.sources.ort_spec import SourceSpec
from orchestrator.builds.variants import load_variants, resolve_variant
from orchestrator.builds.workspace import build_volume_name
from orchestrator.errors import TargetError, UsageError
from orchestrator.lab.sample_models import mlp, write_model
from orchestrator.targets import resolve_target


def source(version: str) -> SourceSpec:
    return SourceSpec(kind="debian", location="trixie", ref=None, version=version)


def plan_for(variant: str, version: str = "1.21.0", target: str = "lab", **options):
    return make_plan(
        resolve_target(target), resolve_variant(variant), BuildOptions(source=source(version), **options)
    )


def branchy_model(path: Path) -> Path:
    """An If whose branches hold the only Sigmoid and Tanh: found only by looking into subgraphs."""
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])

    def branch(op: str) -> onnx.GraphProto:
        out = helper.make_tensor_value_info(f"{op}_out", TensorProto.FLOAT, [1, 4])
        return helper.make_graph([helper.make_node(op, ["x"], [f"{op}_out"])], f"{op}_branch", [], [out])

    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node(
            "Constant", [], ["zero"], value=helper.make_tensor("z", TensorProto.FLOAT, [], [0.0])
        ),
        helper.make_node("Greater", ["s", "zero"], ["positive"]),
        helper.make_node(
            "If", ["positive"], ["y"], then_branch=branch("Sigmoid"), else_branch=branch("Tanh")
        ),
    ]
    graph = helper.make_graph(nodes, "branchy", [x], [y])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return write_model(model, path)


def test_the_levers_are_shipped_variants_with_their_flags() -> None:
    variants = load_variants()
    assert "--use_xnnpack" in variants["xnnpack"].build_args
    assert "--enable_arm_neon_nchwc" in variants["nchwc"].build_args
    assert variants["nchwc"].min_ort == (1, 24)
    assert variants["kleidiai-off"].kleidiai is False
    assert variants["reduced"].reduce_to_models and variants["reduced"].lto


def test_a_variant_for_a_later_release_is_refused_naming_both_releases() -> None:
    with pytest.raises(UsageError) as refused:
        plan_for("nchwc", "1.21.0")
    assert "variant 'nchwc' needs ONNX Runtime >= 1.24; this build is 1.21.0" in refused.value.message
    plan = plan_for("nchwc", "1.24.0")
    assert "--enable_arm_neon_nchwc" in plan.build_args


def test_kleidiai_is_set_explicitly_where_mlas_has_it_and_refused_where_not() -> None:
    # 1.21.0: no switch in MLAS, nothing to set, and the plan says why.
    old = plan_for("default", "1.21.0")
    assert "onnxruntime_USE_KLEIDIAI" not in dict(old.defines)
    assert old.kleidiai == "not in this release"
    assert any("KleidiAI: ORT 1.21.0's MLAS does not use it" in note for note in old.notes)
    # Later: on, as upstream's own aarch64 wheels, whatever build.py would guess from an x86 host.
    new = plan_for("default", "1.23.2")
    assert dict(new.defines)["onnxruntime_USE_KLEIDIAI"] == "ON" and new.kleidiai == "on"
    off = plan_for("kleidiai-off", "1.23.2")
    assert dict(off.defines)["onnxruntime_USE_KLEIDIAI"] == "OFF" and off.kleidiai == "off"
    # The define comes after build.py's own -D (CMake keeps the last): it is in the tail of the argv.
    tail = off.build_argv[off.build_argv.index("--cmake_extra_defines") + 1 :]
    assert "onnxruntime_USE_KLEIDIAI=OFF" in tail
    with pytest.raises(UsageError, match=re.escape("needs ONNX Runtime >= 1.22")):
        plan_for("kleidiai-off", "1.21.0")


def test_a_user_variant_setting_kleidiai_on_an_old_release_is_refused(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("ORCH_HOME", str(tmp_path))
    (tmp_path / "variants.yaml").write_text("mine:\n  kleidiai: true\n")
    with pytest.raises(UsageError, match=re.escape("sets KleidiAI, which ORT 1.21.0's MLAS does not use")):
        plan_for("mine", "1.21.0")
    (tmp_path / "variants.yaml").write_text("mine:\n  min_ort: one point two\n")
    with pytest.raises(TargetError, match=re.escape("'min_ort' is an ONNX Runtime release like '1.24'")):
        resolve_variant("mine")


def test_xnnpack_variant_asks_build_py_for_the_provider_once() -> None:
    plan = plan_for("xnnpack", execution_provider="xnnpack")
    assert plan.build_args.count("--use_xnnpack") == 1
    # Another provider is another build: its own directory and artifact, never the cpu one's.
    default_xnnpack = plan_for("default", execution_provider="xnnpack")
    assert default_xnnpack.artifact_variant == "default-xnnpack"
    assert "-default-xnnpack-1.21.0-" in build_volume_name(default_xnnpack)
    assert "-default-1.21.0-" in build_volume_name(plan_for("default"))


def test_operator_config_of_a_model_holds_its_operators_the_fusions_and_the_preflight_ones(
    tmp_path: Path,
) -> None:
    model = write_model(mlp(), tmp_path / "mlp.onnx")
    config = operator_config([model])
    lines = {line.split(";")[0]: line for line in config.text.splitlines() if not line.startswith("#")}
    onnx_ops = set(lines["ai.onnx"].split(";")[2].split(","))
    mlp_ops = {node.op_type for node in onnx.load(model).graph.node}
    assert mlp_ops <= onnx_ops
    # The pre-flight model's operators, so the pre-flight can still run on the reduced wheel.
    assert {"Conv", "GlobalAveragePool"} <= onnx_ops
    # Conv+Relu of the pre-flight model becomes FusedConv at level extended (what an ARM board runs).
    assert "FusedConv" in lines["com.microsoft"]
    assert config.models[0].path == str(model) and len(config.models[0].sha256) == 64
    assert config.operators == len(onnx_ops) + sum(
        len(line.split(";")[2].split(",")) for domain, line in lines.items() if domain != "ai.onnx"
    )


def test_operator_config_looks_into_subgraphs(tmp_path: Path) -> None:
    config = operator_config([branchy_model(tmp_path / "branchy.onnx")])
    onnx_line = next(line for line in config.text.splitlines() if line.startswith("ai.onnx;13;"))
    assert {"If", "Sigmoid", "Tanh", "Greater", "ReduceSum"} <= set(onnx_line.split(";")[2].split(","))


def test_reduced_plan_passes_the_config_named_by_its_content(tmp_path: Path) -> None:
    config = operator_config([write_model(mlp(), tmp_path / "mlp.onnx")])
    plan = plan_for("reduced", operator_config=config)
    flag = plan.build_args.index("--include_ops_by_config")
    assert (
        plan.build_args[flag + 1] == f"/orch/reduced/{config.sha256[:12]}.config" == plan.operator_config_path
    )
    assert plan.as_dict()["operator_config"]["text"] == config.text
    other = operator_config([branchy_model(tmp_path / "branchy.onnx")])
    assert plan_for("reduced", operator_config=other).operator_config_path != plan.operator_config_path


def test_reduced_needs_models_and_models_need_reduced(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="name them with --model"):
        plan_for("reduced")
    config = operator_config([write_model(mlp(), tmp_path / "mlp.onnx")])
    with pytest.raises(
        UsageError, match="--model is for a reduced build; variant 'tuned' keeps every kernel"
    ):
        plan_for("tuned", operator_config=config)


def test_cli_dry_run_of_a_reduced_build_shows_the_operators(
    tmp_path: Path, orch_env: dict[str, str], orch_cli
) -> None:
    model = write_model(mlp(), tmp_path / "mlp.onnx")
    result = orch_cli(
        orch_env, "build", "--target", "lab", "--variant", "reduced", "--model", str(model),
        "--dry-run", "--json", check=True,
    )  # fmt: skip
    plan = json.loads(result.stdout)
    assert "--include_ops_by_config" in plan["build_argv"]
    assert "MatMul" in plan["operator_config"]["text"] or "Gemm" in plan["operator_config"]["text"]
    assert any(note.startswith("reduced: ") and "mlp.onnx" in note for note in plan["notes"])


def test_cli_refuses_what_is_not_a_model_naming_the_file(
    tmp_path: Path, orch_env: dict[str, str], orch_cli
) -> None:
    garbage = tmp_path / "notes.onnx"
    garbage.write_bytes(np.arange(64, dtype=np.uint8).tobytes())
    for model, expected in (
        (garbage, f"argument --model: '{garbage}': not an ONNX model"),
        (tmp_path / "gone.onnx", "no such file"),
    ):
        result = orch_cli(
            orch_env, "build", "--target", "lab", "--variant", "reduced", "--model", str(model), "--dry-run"
        )
        assert result.returncode == 2, result.stderr
        assert expected in result.stderr and "Traceback" not in result.stderr
    nchwc = orch_cli(orch_env, "build", "--target", "lab", "--variant", "nchwc", "--dry-run")
    assert nchwc.returncode == 2 and "needs ONNX Runtime >= 1.24; this build is 1.21.0" in nchwc.stderr
