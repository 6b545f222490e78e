"""Flag validation against the real ORT 1.21.0 tree (Debian's source package, fetched with apt)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator.builds.flags import check_flags, flags_of, known_names, validate_or_raise
from orchestrator.builds.plan import BuildOptions, make_plan
from orchestrator.builds.sources.ort_spec import SourceSpec
from orchestrator.builds.variants import resolve_variant
from orchestrator.errors import UsageError
from orchestrator.targets import known_target_names, resolve_target


def test_the_tree_declares_the_real_options(ort_tree: Path) -> None:
    names = known_names(ort_tree)
    for name in (
        "onnxruntime_ENABLE_LTO",
        "onnxruntime_DISABLE_ML_OPS",
        "onnxruntime_USE_XNNPACK",
        "onnxruntime_BUILD_UNIT_TESTS",
        "onnxruntime_CROSS_COMPILING",
    ):
        assert name in names.cmake
    for flag in (
        "--enable_lto",
        "--disable_ml_ops",
        "--cmake_extra_defines",
        "--use_cuda",
        "--cuda_home",
        "--cudnn_home",
        "--compile_no_warning_as_error",
        "--skip_submodule_sync",
    ):
        assert flag in names.build_py


@pytest.mark.parametrize(
    ("wrong", "right"),
    [
        ("ONNXRUNTIME_ENABLE_LTO", "onnxruntime_ENABLE_LTO"),
        ("onnxruntime_USE_XNNPAK", "onnxruntime_USE_XNNPACK"),
        ("onnxruntime_DISABLE_ML_OP", "onnxruntime_DISABLE_ML_OPS"),
    ],
)
def test_misspelled_defines_are_rejected_with_the_right_suggestion(
    ort_tree: Path, wrong: str, right: str
) -> None:
    (problem,) = check_flags(ort_tree, [wrong], [])
    assert problem.suggestion == right
    assert f"did you mean '{right}'" in problem.sentence()


def test_names_that_only_look_right_are_explained(ort_tree: Path) -> None:
    problems = {
        p.name: p.sentence()
        for p in check_flags(ort_tree, ["ONNX_ML", "ONNXRUNTIME_CROSS_COMPILING"], ["--arm64"])
    }
    assert "--disable_ml_ops" in problems["ONNX_ML"]
    assert "wrong case" in problems["ONNXRUNTIME_CROSS_COMPILING"]
    assert "Windows only" in problems["--arm64"]


def test_misspelled_build_py_flag(ort_tree: Path) -> None:
    (problem,) = check_flags(ort_tree, [], ["--enable-lto"])
    assert problem.suggestion == "--enable_lto"


def test_cmake_and_package_variables_are_accepted(ort_tree: Path) -> None:
    assert (
        check_flags(
            ort_tree,
            [
                "CMAKE_CXX_FLAGS",
                "FETCHCONTENT_FULLY_DISCONNECTED",
                "Protobuf_USE_STATIC_LIBS",
                "safeint_SOURCE_DIR",
                "Eigen3_DIR",
            ],
            [],
        )
        == []
    )


# The targets ORT 1.21.0 can be planned for: the Jetsons' distributions are below its minimums
# (tests/builds/test_release_checks.py shows that refusal).
PLANNABLE_AT_1_21 = [t for t in known_target_names() if resolve_target(t).bootstrap_suite]


@pytest.mark.parametrize("target", PLANNABLE_AT_1_21)
@pytest.mark.parametrize("variant", ["default", "lto", "tuned"])
def test_every_shipped_plan_passes_validation(ort_tree: Path, target: str, variant: str) -> None:
    source = SourceSpec(kind="debian", location="trixie", ref=None, version="1.21.0")
    plan = make_plan(resolve_target(target), resolve_variant(variant), BuildOptions(source=source))
    assert check_flags(ort_tree, [k for k, _ in plan.defines], flags_of(plan.build_args)) == []


def test_unknown_names_stop_the_build_unless_forced(ort_tree: Path) -> None:
    with pytest.raises(UsageError) as caught:
        validate_or_raise(ort_tree, ["ONNXRUNTIME_ENABLE_LTO"], ["--enable_lto"], force=False)
    assert "onnxruntime_ENABLE_LTO" in caught.value.message and "--force-flags" in (caught.value.hint or "")
    warnings = validate_or_raise(ort_tree, ["ONNXRUNTIME_ENABLE_LTO"], [], force=True)
    assert len(warnings) == 1


def test_cli_dry_run_validates_a_local_tree(ort_tree: Path, orch_env: dict[str, str], orch_cli) -> None:
    # A name the tree does not know (and no rule knows to be wrong without the tree): --dry-run
    # refuses it as the real build would, and --force-flags lists it instead.
    args = ["build", "--target", "lab", "--variant", "tuned", "--ort-source", str(ort_tree)]
    args += ["--cmake-define", "onnxruntime_USE_TURBO_MODE=ON", "--dry-run", "--json"]
    bad = orch_cli(orch_env, *args)
    assert bad.returncode == 2 and bad.stdout == ""
    assert "'onnxruntime_USE_TURBO_MODE' is not known to this ORT source tree" in bad.stderr
    assert "--force-flags" in bad.stderr and "Traceback" not in bad.stderr
    forced = orch_cli(orch_env, *args, "--force-flags")
    assert forced.returncode == 0, forced.stderr
    validation = json.loads(forced.stdout)["flag_validation"]
    assert validation["checked"] is True
    [problem] = validation["problems"]
    assert problem.startswith(
        "CMake define 'onnxruntime_USE_TURBO_MODE' is not known to this ORT source tree"
    )


def test_cli_build_refuses_unknown_define_before_building(
    ort_tree: Path, orch_env: dict[str, str], orch_cli
) -> None:
    result = orch_cli(
        orch_env,
        "build",
        "--target",
        "lab",
        "--variant",
        "tuned",
        "--ort-source",
        str(ort_tree),
        "--cmake-define",
        "ONNXRUNTIME_ENABLE_LTO=ON",
        timeout=300,
    )
    assert result.returncode == 2, result.stderr
    assert "did you mean 'onnxruntime_ENABLE_LTO'" in result.stderr
    assert "--force-flags" in result.stderr
    assert "Traceback" not in result.stderr
