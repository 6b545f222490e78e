"""The on-board route's pure steps (``orch build --on-board``), without a board: what the board's
tools script reports and how its facts are judged, the plan's build.py command with the board's
paths, CUDA's arguments for a Jetson, and what the route refuses. The board-side scripts run here
for real (POSIX sh on the workstation).

tests/builds/test_on_board_route.py builds MLAS on an emulated lab board.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from orchestrator.board_side import read_text
from orchestrator.builds.on_board.plan import OnBoardRequest, make_on_board_plan
from orchestrator.builds.on_board.requirements import (
    BoardBuildFacts,
    install_hint,
    read_facts,
    refuse_unmet,
    unmet_requirements,
)
from orchestrator.builds.preflight import compare, reference_run, stage_model
from orchestrator.builds.sources.dependency_table import load_table
from orchestrator.builds.variants import resolve_variant
from orchestrator.errors import BuildError, UsageError
from orchestrator.targets import resolve_target

pytestmark = pytest.mark.unit

ROOT = "/home/nvidia/orch/build"
# What build_facts.sh prints on a Jetson Orin with JetPack 6.0 and its development packages
# (Ubuntu 22.04's CMake 3.22, GCC 11.4, Python 3.10; CUDA 12.2, cuDNN 8.9).
ORIN_FACTS = """\
machine=aarch64
cores=8
memory_kb=31853456
free_kb=41943040
cmake=3.22.1
ninja=1.10.1
ccache=4.5.1
gcc=11.4.0
cxx=c++ (Ubuntu 11.4.0-1ubuntu1~22.04) 11.4.0
python=3.10.12
python_headers=True
boost_mp11=True
packaging=21.3
numpy=1.21.5
setuptools=59.6.0
nvcc=12.2
cudnn=8.9
"""


def _request(**changes: object) -> OnBoardRequest:
    request = OnBoardRequest(
        board="orin01",
        profile=resolve_target("jetson-orin"),
        variant=resolve_variant("tuned"),
        version="1.21.0",
        scope="wheel",
        provider="cuda",
    )
    return replace(request, **changes)  # type: ignore[arg-type]


def _defines(argv: list[str]) -> dict[str, str]:
    at = argv.index("--cmake_extra_defines")
    return dict(item.split("=", 1) for item in argv[at + 1 :])


def test_the_facts_script_reads_this_machine_and_the_check_names_what_it_lacks_for_an_on_board_build(
    tmp_path: Path,
) -> None:
    printed = subprocess.run(
        ["sh", "-s", "--", str(tmp_path / "work")],
        input=read_text("build_facts.sh"),
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    facts = read_facts(printed)
    assert facts.machine == "x86_64"
    assert facts.cores >= 1 and facts.memory_kib > 0 and facts.free_kib > 0
    assert facts.python.startswith("3.")
    assert (tmp_path / "work").is_dir()  # the work directory is made, so its free space can be read
    unmet = unmet_requirements(facts, version="1.21.0", scope="mlas-test", provider="cpu")
    assert any("not aarch64" in item.what for item in unmet)


def test_a_jetpack_6_orin_lacks_only_a_newer_cmake_and_is_told_how_to_get_it() -> None:
    facts = read_facts(ORIN_FACTS)
    assert facts.nvcc == "12.2" and facts.cudnn == "8.9" and facts.python_headers
    unmet = unmet_requirements(facts, version="1.21.0", scope="wheel", provider="cuda")
    assert [item.what.split(",")[0] for item in unmet] == ["CMake is 3.22.1"]
    assert "3.28" in unmet[0].what and "cmake/CMakeLists.txt" in unmet[0].what
    with pytest.raises(BuildError) as refused:
        refuse_unmet("orin01", unmet, version="1.21.0", scope="wheel")
    assert "orin01 cannot build ORT 1.21.0 (wheel) on itself" in refused.value.message
    assert refused.value.hint == "on the board: python3 -m pip install --user 'cmake>=3.28'"


def test_everything_missing_is_said_at_once_with_one_apt_line() -> None:
    bare = read_facts("machine=aarch64\ncores=4\nmemory_kb=4000000\nfree_kb=1000\npython=3.10.12\n")
    unmet = unmet_requirements(bare, version="1.21.0", scope="wheel", provider="cuda")
    said = " | ".join(item.what for item in unmet)
    for lacking in ("CMake is missing", "no C++ compiler", "no ninja", "no ccache", "no Boost", "Python.h",
                    "numpy", "setuptools", "CUDA toolkit", "cuDNN", "GiB free"):  # fmt: skip
        assert lacking in said
    hint = install_hint(unmet)
    assert hint.startswith("on the board: sudo apt install ")
    apt_line = hint.split(";")[0]
    for package in ("cmake", "g++", "ninja-build", "ccache", "libboost-dev", "python3-dev", "nvidia-jetpack"):
        assert f" {package}" in apt_line
    assert apt_line.count("nvidia-jetpack") == 1


def test_the_mlas_scope_needs_no_python_headers_and_the_cpu_provider_no_cuda() -> None:
    facts = replace(read_facts(ORIN_FACTS), cmake="3.31.6", python_headers=False, numpy="", nvcc="", cudnn="")
    assert unmet_requirements(facts, version="1.21.0", scope="mlas-test", provider="cpu") == []
    wheel = unmet_requirements(facts, version="1.21.0", scope="wheel", provider="cpu")
    assert {item.apt for item in wheel} == {"python3-dev", "python3-numpy"}


def test_a_cuda_wheel_for_the_orin_is_built_with_jetpacks_paths_for_its_gpu_only() -> None:
    plan = make_on_board_plan(_request(), load_table("1.21.0"), read_facts(ORIN_FACTS), ROOT)
    argv = plan.build_argv
    assert argv[:2] == ["python3", f"{ROOT}/inputs/src-1.21.0/tools/ci_build/build.py"]
    assert argv[argv.index("--build_dir") + 1] == f"{ROOT}/tuned-cuda-1.21.0-wheel"
    at = argv.index("--use_cuda")
    assert argv[at : at + 7] == [
        "--use_cuda", "--cuda_home", "/usr/local/cuda", "--cudnn_home", "/usr/lib/aarch64-linux-gnu",
        "--cuda_version", "12.2",
    ]  # fmt: skip
    defines = _defines(argv)
    assert defines["CMAKE_CUDA_ARCHITECTURES"] == "87"
    # The board builds for itself: no cross toolchain file, no image's protoc, LTO off with nvcc.
    assert "CMAKE_TOOLCHAIN_FILE" not in defines
    assert "--path_to_protoc_exe" not in argv
    assert "--enable_lto" not in argv
    assert any("LTO is off for CUDA builds" in note for note in plan.notes)
    assert "-mcpu=cortex-a78ae+nofp16" in defines["CMAKE_CXX_FLAGS"]
    assert "--build_wheel" in argv and "--build_shared_lib" in argv
    # Every dependency and shim is the board's copy under the work directory.
    fetch = {k: v for k, v in defines.items() if k.startswith("FETCHCONTENT_SOURCE_DIR_")}
    assert fetch and all(v.startswith(f"{ROOT}/inputs/deps-1.21.0/") for v in fetch.values())
    assert defines["CMAKE_PROJECT_INCLUDE"] == f"{ROOT}/inputs/shims/eigen-compat.cmake"
    assert plan.outputs == ((f"{ROOT}/tuned-cuda-1.21.0-wheel/Release/dist", "*.whl"),)
    assert plan.artifact_variant == "tuned-cuda"
    assert any("real inference on the board's GPU" in note for note in plan.notes)


def test_a_cpu_build_keeps_lto_and_the_jobs_fit_the_boards_memory() -> None:
    small = replace(read_facts(ORIN_FACTS), cores=8, memory_kib=4 << 20)  # 4 GiB: two ~2 GiB compiles
    plan = make_on_board_plan(_request(provider="cpu"), load_table("1.21.0"), small, ROOT)
    argv = plan.build_argv
    assert "--enable_lto" in argv and "--use_cuda" not in argv
    assert argv[argv.index("--parallel") + 1] == "2"
    assert "CMAKE_CUDA_ARCHITECTURES" not in _defines(argv)
    given = make_on_board_plan(_request(provider="cpu", parallel=1), load_table("1.21.0"), small, ROOT)
    assert given.build_argv[given.build_argv.index("--parallel") + 1] == "1"


def test_the_mlas_scope_brings_back_its_test_executable() -> None:
    plan = make_on_board_plan(
        _request(scope="mlas-test", provider="cpu", variant=resolve_variant("default")),
        load_table("1.21.0"),
        read_facts(ORIN_FACTS),
        ROOT,
    )
    assert plan.build_argv[plan.build_argv.index("--target") + 1] == "onnxruntime_mlas_test"
    assert plan.outputs == ((f"{ROOT}/default-1.21.0-mlas-test/Release", "onnxruntime_mlas_test"),)
    assert _defines(plan.build_argv)["onnxruntime_BUILD_UNIT_TESTS"] == "ON"


@pytest.mark.parametrize(
    ("changes", "said"),
    [
        ({"scope": "library"}, "--scope wheel or mlas-test"),
        ({"variant": resolve_variant("stock")}, "it is the official wheel"),
        ({"variant": resolve_variant("pgo")}, "it needs a training or models"),
        ({"profile": resolve_target("rpi5"), "provider": "cuda"}, "has no execution provider 'cuda'"),
    ],
)
def test_what_the_on_board_route_does_not_build_is_refused_before_the_board_is_asked(
    changes: dict[str, object], said: str
) -> None:
    with pytest.raises(UsageError) as refused:
        make_on_board_plan(_request(**changes), load_table("1.21.0"), read_facts(ORIN_FACTS), ROOT)
    assert said in refused.value.message


def test_a_release_without_a_dependency_table_is_refused() -> None:
    with pytest.raises(UsageError) as refused:
        make_on_board_plan(_request(version="1.23.2"), None, read_facts(ORIN_FACTS), ROOT)
    assert "none for this release" in refused.value.message


def test_the_board_script_runs_the_build_wrapper_and_ends_with_the_builds_status(tmp_path: Path) -> None:
    """build_on_board.sh with the build container's run_build.sh beside it, as orch places them."""
    work = tmp_path / "work"
    (work / "scripts").mkdir(parents=True)
    (work / "scripts" / "run_build.sh").write_text((Path("docker/build/run_build.sh")).read_text())
    (work / "scripts" / "build_on_board.sh").write_text(read_text("build_on_board.sh"))
    build = work / "tree"
    ran = subprocess.run(
        ["sh", str(work / "scripts" / "build_on_board.sh"), str(work), str(build), str(build / "Release"),
         "stamp", "--", "sh", "-c", "echo '[1/2] compiling'; echo oops >&2; exit 3"],
        capture_output=True, text=True, check=True, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )  # fmt: skip
    lines = ran.stdout.splitlines()
    assert "[1/2] compiling" in lines and "oops" in lines  # stderr joins stdout: one stream to the log
    assert lines[-1] == "orch-on-board: status 3"
    assert (build / "orch-report" / "configure.txt").read_text().strip() == "ran"
    assert (work / "ccache").is_dir()


def test_facts_with_garbage_values_read_as_missing() -> None:
    facts = read_facts("cores=many\nmemory_kb=\nno equals sign\ncmake=\n")
    assert isinstance(facts, BoardBuildFacts)
    assert facts.cores == 0 and facts.memory_kib == 0 and facts.cmake == ""


@pytest.mark.parametrize(
    ("provider", "status", "said"),
    [
        ("CPUExecutionProvider", 0, None),
        # This workstation's onnxruntime has no CUDA: the session falls back to the CPU, which the
        # pre-flight must not pass (as on a Jetson whose CUDA libraries are missing).
        (
            "CUDAExecutionProvider",
            3,
            "CUDAExecutionProvider did not load: the session runs on ['CPUExecutionProvider']",
        ),
    ],
)
def test_the_board_preflight_runs_the_model_with_the_provider_alone_and_fails_a_fallback(
    tmp_path: Path, provider: str, status: int, said: str | None
) -> None:
    model, inputs = stage_model(tmp_path)
    script = tmp_path / "check.py"
    script.write_text(read_text("preflight_on_board.py"))
    ran = subprocess.run(
        [sys.executable, str(script), str(model), str(tmp_path / "input.npy"), str(tmp_path / "out.npy"), provider],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert ran.returncode == status, ran.stderr
    report = json.loads(
        next(x for x in ran.stdout.splitlines() if x.startswith("ORCH-PREFLIGHT ")).split(" ", 1)[1]
    )
    assert report["session_providers"][0] == "CPUExecutionProvider"
    if said is None:
        assert compare(np.load(tmp_path / "out.npy"), reference_run(model, inputs))["match"]
    else:
        assert report["error"] == said
        assert not (tmp_path / "out.npy").exists()
