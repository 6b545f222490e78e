"""Build plans for every target x variant: exact argv, defines, toolchain file, image (no Docker)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from upstream_sources import options_1_21

from orchestrator.builds.plan import (
    BuildOptions,
    choose_parallel,
    make_plan,
    parse_define,
)
from orchestrator.builds.sources.ort_spec import SourceSpec, parse_source
from orchestrator.builds.variants import load_variants, resolve_variant, with_release_options
from orchestrator.common.aarch64_isa import features_for_flags
from orchestrator.errors import TargetError, UsageError
from orchestrator.targets import known_target_names, resolve_target

BUILT_VARIANTS = ["default", "upstream", "lto", "tuned"]
SOURCE = SourceSpec(kind="debian", location="trixie", ref=None, version="1.21.0")


# A release below the first one orch knows CMake/Python/GCC minimums for: the Ubuntu-based Jetsons'
# own CMake (3.22, 3.10) is below ORT 1.21's, so their plans are shown for an older release.
OLDER = SourceSpec(kind="git", location="https://example.invalid/ort.git", ref="v1.20.0", version="1.20.0")
# The targets whose distribution meets ORT 1.21.0's minimums (the others are refused: test_release_checks).
PLANNABLE = [t for t in known_target_names() if resolve_target(t).bootstrap_suite]


def plan_for(target: str, variant: str, source: SourceSpec = SOURCE, **options):
    chosen = resolve_variant(variant)
    if chosen.from_release:  # upstream: as a release shaped as 1.21.0 says (test_upstream_packaging)
        chosen = with_release_options(chosen, options_1_21())
    return make_plan(resolve_target(target), chosen, BuildOptions(source=source, **options))


def defines(plan) -> dict[str, str]:
    return dict(plan.defines)


@pytest.mark.parametrize("target", PLANNABLE)
@pytest.mark.parametrize("variant", BUILT_VARIANTS)
def test_every_plan_runs_build_py_with_the_fixed_arguments(target: str, variant: str) -> None:
    plan = plan_for(target, variant, cpus=2, memory_bytes=24 << 30)
    argv = plan.build_argv
    assert argv[:2] == ["python3", "/src/tools/ci_build/build.py"]
    for flag in (
        "--build_wheel",
        "--skip_tests",
        "--allow_running_as_root",
        "--skip_submodule_sync",
        "--update",
        "--build",
    ):
        assert flag in argv
    assert argv[argv.index("--config") + 1] == "Release"
    assert argv[argv.index("--parallel") + 1] == "2"
    assert argv[argv.index("--cmake_generator") + 1] == "Ninja"
    assert argv[argv.index("--path_to_protoc_exe") + 1] == "/usr/bin/protoc"
    # The defines are the tail of the argv, after --cmake_extra_defines, exactly as planned.
    tail = argv[argv.index("--cmake_extra_defines") + 1 :]
    assert tail == [f"{k}={v}" for k, v in plan.defines]
    d = defines(plan)
    assert d["CMAKE_TOOLCHAIN_FILE"] == "/orch/toolchains/aarch64-linux-gnu.cmake"
    assert d["CMAKE_EXPORT_COMPILE_COMMANDS"] == "ON"
    assert d["CMAKE_CXX_COMPILER_LAUNCHER"] == "ccache"
    assert plan.ccache_volume == f"orch-ccache-{plan.target.name}"
    # Never the Windows-only flag, never host-only hardening flags.
    assert "--arm64" not in argv and "--use_binskim_compliant_compile_flags" not in argv
    assert plan.wheel_platform == "linux_aarch64"


@pytest.mark.parametrize("target", known_target_names())
def test_tuned_plan_carries_the_boards_cpu_and_lto(target: str) -> None:
    profile = resolve_target(target)
    plan = plan_for(target, "tuned", SOURCE if target in PLANNABLE else OLDER)
    flags = f"-O3 -mcpu={profile.mcpu} -finline-limit=600"
    assert defines(plan)["CMAKE_C_FLAGS"] == flags
    assert defines(plan)["CMAKE_CXX_FLAGS"] == flags
    for flag in ("--enable_lto", "--disable_ml_ops", "--compile_no_warning_as_error"):
        assert plan.build_argv.count(flag) == 1
    # Nothing that only looks like an ORT option.
    assert not any(
        k in defines(plan) for k in ("ONNXRUNTIME_ENABLE_LTO", "ONNX_ML", "ONNXRUNTIME_CROSS_COMPILING")
    )


def test_default_and_lto_differ_only_in_lto() -> None:
    default, lto = plan_for("rpi4", "default"), plan_for("rpi4", "lto")
    assert "--enable_lto" not in default.build_argv
    assert "--enable_lto" in lto.build_argv
    assert "CMAKE_CXX_FLAGS" not in defines(default) and "CMAKE_CXX_FLAGS" not in defines(lto)
    assert [a for a in lto.build_argv if a != "--enable_lto"] == default.build_argv


def test_lab_builds_offline_from_system_packages() -> None:
    plan = plan_for("lab", "tuned")
    d = defines(plan)
    assert plan.dependencies == "system" and plan.network == "none"
    assert d["FETCHCONTENT_TRY_FIND_PACKAGE_MODE"] == "ALWAYS"
    assert d["FETCHCONTENT_FULLY_DISCONNECTED"] == "ON"
    assert d["CMAKE_PREFIX_PATH"] == "/orch/toolchains/cmake-shims"
    assert d["Protobuf_USE_STATIC_LIBS"] == "OFF"
    assert d["CMAKE_PROJECT_INCLUDE"] == "/orch/toolchains/cmake-shims/eigen-compat.cmake"
    assert "--use_full_protobuf" in plan.build_argv
    assert plan.image.tag.startswith("orch/build-trixie:")
    assert plan.image.base_image.startswith("orch/debian-trixie-amd64:")
    assert "libonnx-dev" in dict(plan.image.buildargs)["TARGET_PACKAGES"]


def test_raspberry_pi_os_trixie_boards_take_the_offline_system_route() -> None:
    for target, mcpu in (("rpi4", "cortex-a72"), ("rpi5", "cortex-a76+nofp16")):
        plan = plan_for(target, "tuned")
        assert plan.dependencies == "system" and plan.network == "none"
        assert plan.image.tag.startswith("orch/build-trixie:")
        assert f"-mcpu={mcpu}" in plan.compiler_flags
        assert plan.target.os.glibc == "2.41" and plan.target.os.python_tag == "cp313"


def test_a_distribution_without_a_self_contained_build_image_uses_ort_fetchcontent() -> None:
    plan = plan_for("jetson", "tuned", OLDER)  # Ubuntu 22.04: orch has no self-contained image for it
    assert plan.dependencies == "fetch" and plan.network is None
    assert "FETCHCONTENT_FULLY_DISCONNECTED" not in defines(plan)
    assert any("FetchContent" in note for note in plan.notes)


def test_jetson_image_comes_from_its_ubuntu_base() -> None:
    plan = plan_for("jetson", "default", OLDER)
    assert plan.image.base_image == "ubuntu:22.04"
    assert plan.image.tag.startswith("orch/build-jammy:")


def test_unsupported_execution_provider_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="target 'rpi4' has no NVIDIA GPU"):
        plan_for("rpi4", "default", execution_provider="cuda")


def test_image_tag_changes_with_its_inputs(monkeypatch: pytest.MonkeyPatch) -> None:
    first = plan_for("lab", "default").image
    assert first.tag == plan_for("lab", "tuned").image.tag  # variants share the image
    monkeypatch.setenv("ORCH_BASE_IMAGE_TRIXIE", "debian:trixie")
    other = plan_for("lab", "default").image
    assert other.base_image == "debian:trixie" and other.tag != first.tag


def test_mlas_test_scope_builds_the_ort_mlas_unit_test() -> None:
    plan = plan_for("lab", "tuned", scope="mlas-test")
    argv = plan.build_argv
    assert argv[argv.index("--target") + 1] == "onnxruntime_mlas_test"
    assert "--build_wheel" not in argv
    assert defines(plan)["onnxruntime_BUILD_UNIT_TESTS"] == "ON"


@pytest.mark.parametrize(
    ("cpus", "gib", "jobs"), [(2, 24, 2), (16, 8, 4), (8, 1, 1), (1, 64, 1), (32, 64, 32)]
)
def test_parallel_jobs_follow_cores_and_memory(cpus: int, gib: int, jobs: int) -> None:
    assert choose_parallel(cpus, gib << 30) == jobs


def test_user_parallel_and_extra_defines_reach_the_argv() -> None:
    plan = plan_for("lab", "default", parallel=7, extra_defines=(parse_define("onnxruntime_USE_XNNPACK=ON"),))
    assert plan.build_argv[plan.build_argv.index("--parallel") + 1] == "7"
    assert plan.build_argv[-1] == "onnxruntime_USE_XNNPACK=ON"


@pytest.mark.parametrize("bad", ["NOVALUE", "=ON", ""])
def test_malformed_define_is_rejected(bad: str) -> None:
    with pytest.raises(UsageError, match="NAME=VALUE"):
        parse_define(bad)


def test_toolchain_file_cross_compiles_with_multiarch_and_gcc_ar() -> None:
    text = plan_for("lab", "lto").toolchain_file.read_text()
    for line in (
        "set(CMAKE_SYSTEM_PROCESSOR aarch64)",
        "set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)",
        "set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)",
        'set(CMAKE_C_COMPILER "${ORCH_CROSS_PREFIX}gcc")',
    ):
        assert line in text
    assert "gcc-ar" in text and "gcc-ranlib" in text


def test_shipped_variants_and_a_user_variant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ORCH_HOME", str(tmp_path))
    assert {"stock", "default", "lto", "tuned"} <= set(load_variants())
    assert resolve_variant("stock").build is False
    (tmp_path / "variants.yaml").write_text(
        "small:\n  description: size first\n  config: MinSizeRel\n  build_args: [--disable_contrib_ops]\n"
    )
    plan = plan_for("lab", "small")
    assert plan.build_argv[plan.build_argv.index("--config") + 1] == "MinSizeRel"
    assert "--disable_contrib_ops" in plan.build_argv


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("x:\n  lto: yes-please\n", "'lto' must be a bool"),
        ("x:\n  ltto: true\n", "did you mean 'lto'"),
        ("x:\n  config: Fast\n", "not one of"),
        ("x:\n  build_args: [disable_ml_ops]\n", "build.py flags"),
        ("x:\n  ldflags: [Wl,-z,now]\n", "linker flags as the compiler driver takes them"),
    ],
)
def test_malformed_user_variants_are_clear_errors(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, message: str
) -> None:
    monkeypatch.setenv("ORCH_HOME", str(tmp_path))
    (tmp_path / "variants.yaml").write_text(text)
    with pytest.raises(TargetError, match=message) as refused:
        resolve_variant("x")
    assert f"{tmp_path / 'variants.yaml'}:2: variant 'x'" in refused.value.message


def test_a_variants_file_that_is_no_mapping_is_refused_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORCH_HOME", str(tmp_path))
    (tmp_path / "variants.yaml").write_text("- a\n- b\n")
    with pytest.raises(TargetError, match="maps variant names"):
        load_variants()


def test_every_mistake_of_a_user_variant_is_named_with_its_line_and_the_others_stay_usable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORCH_HOME", str(tmp_path))
    (tmp_path / "variants.yaml").write_text(
        "good:\n  lto: true\nbad:\n  ltto: true\n  config: Fast\n  cflags: ['-mcpu={cpu}']\n"
    )
    path = tmp_path / "variants.yaml"
    with pytest.raises(TargetError) as refused:
        resolve_variant("bad")
    message = refused.value.message
    assert f"{path}:4: variant 'bad': unknown key 'ltto' (did you mean 'lto'?)" in message
    assert f"{path}:5: variant 'bad': config 'Fast' is not one of" in message
    assert f"{path}:6: variant 'bad': cflags entry '-mcpu={{cpu}}' names the unknown placeholder" in message
    # The user's other variant and the shipped ones still build.
    assert resolve_variant("good").lto is True
    assert resolve_variant("tuned").lto is True
    with pytest.raises(TargetError, match=r"bad: defined with mistakes"):
        resolve_variant("nosuch")


@pytest.mark.parametrize("target", ["lab", "rpi4", "rpi5"])
def test_upstream_builds_with_the_official_wheels_own_flags_and_nothing_of_orchs(target: str) -> None:
    # The options a release's packaging gives (read in test_upstream_packaging; 1.21.0's: Linux
    # Release with --use_binskim_compliant_compile_flags on an aarch64 machine, with --enable_lto)
    # reach the plan as they are, and nothing of orch's is added.
    plan = plan_for(target, "upstream")
    cflags = "-DNDEBUG -Wp,-D_FORTIFY_SOURCE=2 -Wp,-D_GLIBCXX_ASSERTIONS -fstack-protector-strong -O3 -pipe"
    ldflags = "-Wl,-Bsymbolic-functions -Wl,-z,relro -Wl,-z,now -Wl,-z,noexecstack -Wl,--strip-all"
    assert defines(plan)["CMAKE_C_FLAGS"] == defines(plan)["CMAKE_CXX_FLAGS"] == cflags
    for kind in ("EXE", "SHARED", "MODULE"):
        assert defines(plan)[f"CMAKE_{kind}_LINKER_FLAGS"] == ldflags
    assert (
        "--enable_lto" in plan.build_argv
        and plan.build_argv[plan.build_argv.index("--config") + 1] == "Release"
    )
    # Nothing the official build lacks: no CPU-specific code, no inlining limit, the ML ops kept;
    # and not the build.py flag itself, which on an x86-64 build host adds x86-only -fcf-protection.
    assert not any(flag.startswith(("-mcpu", "-march", "-finline-limit")) for flag in plan.compiler_flags)
    assert "--disable_ml_ops" not in plan.build_argv
    assert "--use_binskim_compliant_compile_flags" not in plan.build_argv and "-fcf-protection" not in cflags
    assert plan.as_dict()["linker_flags"] == ldflags.split()
    assert not any(name.endswith("_LINKER_FLAGS") for name in defines(plan_for(target, "default")))


def test_unknown_variant_suggests_the_close_one() -> None:
    with pytest.raises(TargetError, match="Did you mean 'tuned'"):
        resolve_variant("tunned")


def test_source_routes(tmp_path: Path) -> None:
    assert parse_source(None, version=None, suite="trixie").kind == "debian"
    upstream = parse_source(None, version="1.22.0", suite="trixie")
    assert (upstream.kind, upstream.ref) == ("git", "v1.22.0")
    pinned = parse_source("https://example.invalid/onnxruntime.git@main", version="1.21.0", suite=None)
    assert (pinned.kind, pinned.location, pinned.ref) == (
        "git",
        "https://example.invalid/onnxruntime.git",
        "main",
    )
    with pytest.raises(UsageError, match=re.escape("carries ORT 1.21.0, not 1.20.0")):
        parse_source("debian", version="1.20.0", suite="trixie")
    with pytest.raises(UsageError, match="not an ONNX Runtime source tree"):
        parse_source(str(tmp_path), version=None, suite=None)
    with pytest.raises(UsageError, match="neither"):
        parse_source(str(tmp_path / "missing"), version=None, suite=None)


def test_tuned_builds_for_fp16_cores_leave_fp16_out_of_the_global_flags() -> None:
    """Debian's Eigen 3.4.0 fails on ORT's contrib_ops/cpu/inverse.cc with fp16 scalar arithmetic
    on ('invalid initialization of reference of type const Eigen::half&', seen on rpi5 tuned)."""
    for target in ("rpi5", "rpi5-bookworm", "jetson-orin"):
        plan = plan_for(target, "tuned", SOURCE if target != "jetson-orin" else OLDER)
        need = features_for_flags(plan.compiler_flags)
        assert need is not None and need.flag.endswith("+nofp16"), target
        assert "asimddp" in need.features and not {"fphp", "asimdhp"} & need.features, target
