"""The self-contained route's dependency table: what it names, what the plan makes of it (pure)."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.builds.plan import BuildOptions, make_plan
from orchestrator.builds.sources.dependency_table import describe, load_table
from orchestrator.builds.sources.ort_spec import parse_source
from orchestrator.builds.variants import resolve_variant
from orchestrator.errors import BuildError
from orchestrator.targets import resolve_target


def test_the_1_21_0_table_names_every_compiled_dependency_with_its_pinned_release() -> None:
    table = load_table("1.21.0")
    assert table is not None
    by_name = {d.name: d for d in table.dependencies}
    # The libraries ORT links into the wheel, each from the Debian source of the release ORT pins.
    assert by_name["abseil_cpp"].upstream_version == "20240722.0" == by_name["abseil_cpp"].pins
    assert by_name["Protobuf"].upstream_version == "3.21.12" and by_name["Protobuf"].pins == "v21.12"
    assert by_name["onnx"].upstream_version == "1.17.0" and by_name["onnx"].patch == "onnx/onnx.patch"
    assert by_name["flatbuffers"].upstream_version == "23.5.26"
    assert by_name["utf8_range"].within == "Protobuf"
    defines = dict(table.defines())
    assert defines["FETCHCONTENT_SOURCE_DIR_ABSEIL_CPP"] == "/deps/abseil_cpp"
    assert defines["FETCHCONTENT_SOURCE_DIR_UTF8_RANGE"] == "/deps/Protobuf/third_party/utf8_range"
    # FetchContent's find_package(pybind11_project NAMES pybind11) reads <first name>_DIR.
    assert defines["pybind11_project_DIR"] == "/deps/pybind11_project/usr/lib/cmake/pybind11"
    # The Python module links dlpack::dlpack: its source, as FetchContent would have downloaded it.
    assert defines["FETCHCONTENT_SOURCE_DIR_DLPACK"] == "/deps/dlpack"
    assert by_name["pybind11_project"].apt_spec == "deb:pybind11-dev=2.13.6-2"
    assert load_table("0.1.0") is None


def plan_for(target: str, version: str = "1.21.0", scope: str = "wheel"):  # type: ignore[no-untyped-def]
    profile = resolve_target(target)
    source = parse_source(None, version=version, suite=profile.bootstrap_suite)
    return make_plan(profile, resolve_variant("tuned"), BuildOptions(source=source, scope=scope))


def test_bookworm_boards_take_the_self_contained_route_offline_and_trixie_keeps_the_system_one() -> None:
    bookworm = plan_for("rpi5-bookworm")
    assert bookworm.dependencies == "source" and bookworm.network == "none"
    # The ORT tree is the same upstream tarball, served by trixie's source package.
    assert bookworm.source.kind == "debian" and bookworm.source.location == "trixie"
    assert bookworm.image.tag.startswith("orch/build-bookworm-source:")
    buildargs = dict(bookworm.image.buildargs)
    assert "cmake/bookworm-backports" in buildargs["HOST_PACKAGES"].split()
    assert buildargs["EXTRA_SUITES"] == "bookworm-backports"
    assert "libonnx-dev" not in buildargs["TARGET_PACKAGES"]  # nothing compiled comes from bookworm
    defines = dict(bookworm.defines)
    assert defines["FETCHCONTENT_FULLY_DISCONNECTED"] == "ON"
    assert "Protobuf_USE_STATIC_LIBS" not in defines and "--use_full_protobuf" not in bookworm.build_argv
    assert any("self-contained" in note and "bookworm" in note for note in bookworm.notes)
    trixie = plan_for("rpi5")
    assert trixie.dependencies == "system"
    assert not any(name.startswith("FETCHCONTENT_SOURCE_DIR") for name, _ in trixie.defines)


def test_a_release_without_table_or_debian_source_falls_back_to_ort_fetchcontent() -> None:
    plan = plan_for("rpi5-bookworm", version="1.20.1")
    assert plan.dependencies == "fetch" and plan.network is None and plan.source.kind == "git"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("dependencies: {abseil_cpp: {package: abseil, version: 1-1}}\n", "missing key 'pins'"),
        ("dependencies: {abseil_cpp: {package: abseil, pins: x}}\n", "missing key 'version'"),
        ("dependencies: {a: {package: p, version: 1-1, pins: x, colour: red}}\n", "unknown key 'colour'"),
        ("dependencies: {a: {within: b, subdir: x, pins: y}}\n", "names no dependency"),
        ("dependencies: {a: {package: p, version: 1-1, pins: x, define: X=/etc}}\n", "relative/path"),
        ("dependencies: [1]\n", "needs a mapping"),
    ],
)
def test_a_broken_table_names_the_file_and_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, text: str, message: str
) -> None:
    (tmp_path / "9.9.9.yaml").write_text(text)
    monkeypatch.setattr("orchestrator.builds.sources.dependency_table.TABLES_DIR", tmp_path)
    with pytest.raises(BuildError, match=message) as caught:
        load_table("9.9.9")
    assert "9.9.9.yaml" in caught.value.message


def test_describe_names_package_version_hash_and_patch() -> None:
    lines = describe(
        (
            {
                "name": "onnx",
                "pins": "v1.17.0",
                "package": "onnx",
                "version": "1.17.0-3",
                "suite": "trixie",
                "sha256": "ab" * 32,
                "patch": "onnx/onnx.patch",
            },
            {
                "name": "utf8_range",
                "pins": "72c943d",
                "within": "Protobuf",
                "subdir": "third_party/utf8_range",
            },
        )
    )
    assert (
        lines[0]
        == "onnx: Debian trixie onnx 1.17.0-3 (ORT pins v1.17.0; sha256 abababababab), ORT patch onnx/onnx.patch"
    )
    assert lines[1] == "utf8_range: inside Protobuf (third_party/utf8_range)"


def test_a_cuda_build_adds_the_providers_header_only_dependencies_from_nvidias_wheels_at_orts_pins() -> None:
    cpu, gpu = load_table("1.21.0"), load_table("1.21.0", gpu=True)
    assert cpu is not None and gpu is not None
    by_name = {d.name: d for d in gpu.dependencies}
    # ORT 1.21.0's cmake/deps.txt pins CUTLASS v3.5.1 and the cuDNN frontend v1.7.0.
    assert (by_name["cutlass"].package, by_name["cutlass"].version, by_name["cutlass"].kind) == (
        "nvidia-cutlass",
        "3.5.1.0",
        "wheel",
    )
    assert (
        by_name["cudnn_frontend"].version == "1.7.0" and by_name["cudnn_frontend"].project == "cudnn_frontend"
    )
    assert dict(gpu.defines())["FETCHCONTENT_SOURCE_DIR_CUTLASS"] == "/deps/cutlass/cutlass_library/source"
    # A CPU build's table (and so its prepared tree's name) is unchanged by them.
    assert "cutlass" not in {d.name for d in cpu.dependencies} and cpu.digest != gpu.digest
    assert cpu.digest == load_table("1.21.0").digest  # type: ignore[union-attr]


def test_a_release_without_a_cuda_table_and_a_missing_project_are_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "9.9.9.yaml").write_text("dependencies: {a: {package: p, version: 1-1, pins: x}}\n")
    (tmp_path / "cuda").mkdir()
    monkeypatch.setattr("orchestrator.builds.sources.dependency_table.TABLES_DIR", tmp_path)
    monkeypatch.setattr("orchestrator.builds.sources.dependency_table.GPU_TABLES_DIR", tmp_path / "cuda")
    with pytest.raises(BuildError, match=r"no table of the CUDA provider.s dependencies for ORT 9\.9\.9"):
        load_table("9.9.9", gpu=True)
    (tmp_path / "cuda" / "9.9.9.yaml").write_text(
        "dependencies: {b: {package: q, version: '1.0', kind: wheel, pins: v1, project: nowhere}}\n"
    )
    with pytest.raises(BuildError, match="project 'nowhere'") as caught:
        load_table("9.9.9", gpu=True)
    assert "cuda/9.9.9.yaml" in caught.value.message
