"""The sysroot route for real, offline: `orch build --target jetson --sysroot-from <board>`.

Two lab stand-ins, each with its development files:

* the Jetson Nano's (and JetPack 5's OS): Debian 11 (glibc 2.31, libstdc++ of GCC 10, Python 3.9)
  emulating a Cortex-A57 (ARMv8.0): in CI;
* the Jetson Orin's: Debian 12 (glibc 2.36, libstdc++ of GCC 12 as on JetPack 6, Python 3.11)
  emulating a Cortex-A76 (dot product): in the full suite, beside the whole Jetson wheel built the
  same way (``test_full_wheels.py``).

orch pulls the board's sysroot over SSH, then builds ORT 1.21.0's MLAS scope (MLAS, ORT's common
code with abseil from source, googletest and ``onnxruntime_mlas_test``) with clang against that
sysroot, in the one clang build container (Debian 13, CMake 3.31, glibc 2.41, GCC 14's libstdc++),
every dependency from a Debian source package, no network. The executable needs nothing newer than
the board's glibc and libstdc++, and runs a shard of MLAS's tests on the board it was built for.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
from board_checks import built_mlas_test

from orchestrator.builds.sysroots.contents import Sysroot
from orchestrator.lab.sample_models import tiny_convnet, write_model
from tests.conftest import Lab, profile_lab

pytestmark = pytest.mark.integration

BUILD_TIMEOUT = 3600
# 1 of 80 shards (~400 of MLAS's 32,447 cases): every kernel family, a few minutes emulated.
SHARDS, SHARD = 80, 1


@dataclass(frozen=True)
class StandIn:
    """A target's lab stand-in and the newest glibc and libstdc++ symbol versions its OS has."""

    target: str
    max_glibc: tuple[int, int]
    glibcxx: int  # GLIBCXX_3.4.N of the stand-in's libstdc++

    @property
    def board(self) -> str:
        return f"{self.target}-1"


STAND_INS = [
    # Debian 11: glibc 2.31; GCC 10's libstdc++ ends at GLIBCXX_3.4.28.
    pytest.param(StandIn("jetson-nano", (2, 31), 28), id="debian11-cortex-a57"),
    # Debian 12: glibc 2.36; GCC 12's libstdc++ ends at GLIBCXX_3.4.30.
    pytest.param(StandIn("jetson-orin", (2, 36), 30), id="debian12-cortex-a76", marks=pytest.mark.full),
]


@pytest.fixture(scope="module", params=STAND_INS)
def stand_in(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[StandIn, Lab]]:
    chosen: StandIn = request.param
    with profile_lab(tmp_path_factory.mktemp(f"{chosen.target}-lab"), f"{chosen.target}:1") as the_lab:
        yield chosen, the_lab


def _container(lab: Lab, board: str) -> str:
    boards = json.loads(lab.orch("lab", "status", "--json").stdout)["boards"]
    return str(next(b["container"] for b in boards if b["name"] == board))


def _copy_to_board(lab: Lab, board: str, directory: Path, dest: str) -> str:
    """``directory``'s files onto the board's container at ``dest`` (as scp would put them)."""
    name = _container(lab, board)
    subprocess.run(["docker", "exec", name, "rm", "-rf", dest], check=True)
    subprocess.run(["docker", "cp", f"{directory}/.", f"{name}:{dest}"], check=True)
    return name


def _run_on_board(lab: Lab, board: str, bundle: Path) -> tuple[int, str]:
    """Copy the test executable and its libraries onto the board's container and run one shard there."""
    _copy_to_board(lab, board, bundle, "/tmp/mlas")
    shard = lab.orch(
        "exec",
        "--host",
        board,
        "--timeout",
        "1500",
        "--",
        f"cd /tmp/mlas && GTEST_TOTAL_SHARDS={SHARDS} GTEST_SHARD_INDEX={SHARD} LD_LIBRARY_PATH=/tmp/mlas"
        " ./onnxruntime_mlas_test",
        timeout=1800,
    )
    return shard.returncode, shard.stdout + shard.stderr


def _pull(lab: Lab, board: str) -> Path:
    """``orch sysroot pull`` from the stand-in: the root of the stored sysroot."""
    pulled = lab.orch("sysroot", "pull", "--host", board, "--no-compress", "--json", timeout=1800)
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    record = json.loads(pulled.stdout)[board]["record"]
    assert record["missing_dev_packages"] == [], record  # the stand-in carries its development files
    return Path(json.loads(pulled.stdout)[board]["path"]) / "root"


def _build_args(board: StandIn, scope: str) -> tuple[str, ...]:
    return ("--target", board.target, "--sysroot-from", board.board, "--variant", "default", "--scope", scope)


# A CMake project that asks, as ORT's configure does, what the toolchain file's compiler targets
# (cmake/onnxruntime_common.cmake runs `${CMAKE_C_COMPILER} -dumpmachine`) and whether it can build
# with IPO (cmake/adjust_global_compile_flags.cmake: without it, `--enable_lto` is dropped).
_TOOLCHAIN_PROBE = """cmake_minimum_required(VERSION 3.28)
project(probe C CXX)
execute_process(COMMAND ${CMAKE_C_COMPILER} -dumpmachine OUTPUT_VARIABLE machine OUTPUT_STRIP_TRAILING_WHITESPACE)
include(CheckIPOSupported)
check_ipo_supported(RESULT ipo OUTPUT why LANGUAGES C CXX)
message("machine=${machine}")
message("ipo=${ipo}")
message("why=${why}")
"""


def _probe_toolchain(image: str, sysroot: Path, scratch: Path) -> dict[str, str]:
    """What ORT's configure would learn from the toolchain file, in the build image, against the
    sysroot: ``machine`` (-dumpmachine), ``ipo`` (YES or NO) and ``why`` (CMake's output when NO)."""
    (scratch / "CMakeLists.txt").write_text(_TOOLCHAIN_PROBE)
    toolchains = Path(__file__).resolve().parents[2] / "toolchains"
    volumes = [
        "-v",
        f"{toolchains}:/toolchains:ro",
        "-v",
        f"{scratch}:/probe:ro",
        "-v",
        f"{sysroot}:/sysroot:ro",
    ]
    configure = ["cmake", "-S", "/probe", "-B", "/tmp/probe", "-G", "Ninja"]
    configure.append("-DCMAKE_TOOLCHAIN_FILE=/toolchains/clang-sysroot.cmake")
    probe = ["docker", "run", "--rm", "--network", "none", *volumes, image, *configure]
    printed = subprocess.run(probe, capture_output=True, text=True, check=True).stderr
    found = dict(re.findall(r"^(machine|ipo)=(.*)$", printed, re.MULTILINE))
    return {**found, "why": printed.split("why=", 1)[-1]}


@pytest.mark.timeout(BUILD_TIMEOUT + 2400)
def test_a_jetson_build_against_the_sysroot_pulled_from_its_stand_in_runs_there(
    stand_in: tuple[StandIn, Lab], seed_ort_source, tmp_path: Path
) -> None:
    board, lab = stand_in
    seed_ort_source(lab.home)
    sysroot = Sysroot(_pull(lab, board.board))

    args = _build_args(board, "mlas-test")
    dry = lab.orch("build", *args, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["toolchain"] == "clang-sysroot" and plan["dependencies"] == "source"
    assert plan["network"] == "none" and plan["image"]["tag"].startswith("orch/build-clang-sysroot:")

    result = lab.orch("build", *args, "--json", timeout=BUILD_TIMEOUT)
    assert result.returncode == 0, result.stderr[-3000:]
    document = json.loads(result.stdout)
    # Linked against the sysroot's glibc and libstdc++, not the build container's (Debian 13: glibc
    # 2.41, GCC 14's GLIBCXX_3.4.33).
    build_dir, exe = built_mlas_test(result.stdout, max_glibc=board.max_glibc)
    libstdcxx = sysroot.library("libstdc++.so.6")
    assert libstdcxx is not None and libstdcxx.highest("GLIBCXX_") == f"GLIBCXX_3.4.{board.glibcxx}"
    needed = re.findall(rb"GLIBCXX_3\.4\.(\d+)", exe)
    assert needed and max(int(n) for n in needed) <= board.glibcxx
    # Every compile was clang's, for aarch64, against the sysroot; abseil came from the Debian source.
    commands = json.loads((build_dir / "orch-report" / "compile_commands.json").read_text())
    assert all("clang" in c["command"] and "--sysroot=/sysroot" in c["command"] for c in commands)
    assert any(c["file"].startswith("/deps/abseil_cpp/absl/") for c in commands)

    # ORT tells the CPU of its common library (and so whether cpuinfo is linked into libonnxruntime)
    # from `${CMAKE_C_COMPILER} -dumpmachine` alone: the toolchain file's compiler names the board's.
    # And it keeps `--enable_lto` (tuned, upstream, pgo) only where CMake's IPO check passes.
    probe = _probe_toolchain(plan["image"]["tag"], sysroot.root, tmp_path)
    assert probe["machine"].startswith("aarch64-"), "ORT would take it for another CPU"
    assert probe["ipo"] == "YES", f"ORT would build LTO variants without LTO: {probe['why'][-2000:]}"

    code, text = _run_on_board(lab, board.board, build_dir / "out")
    passed = re.search(r"\[  PASSED  \] (\d+) test", text)
    assert code == 0 and passed and int(passed.group(1)) > 100 and "[  FAILED  ]" not in text, text[-3000:]
    print(
        f"sysroot-route MLAS build {document['duration_s']} s; shard on {board.board}: {passed.group(1)} passed"
    )


def _deploy_library(lab: Lab, board: str, model: Path) -> str:
    """``orch deploy --scope library`` of the C library build with ``model``: deployed and verified
    by its runner, with the release's own library; the release's directory on the board."""
    deployed = lab.orch(
        "deploy", "--host", board, "--variant", "default", "--scope", "library", "--model", str(model),
        "--json", timeout=1800,
    )  # fmt: skip
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr[-3000:]
    report = json.loads(deployed.stdout)["boards"][board]
    assert report["ok"] and report["action"] == "deployed" and report["python"] is None, report
    release_dir = str(report["runner"]).removesuffix("/native/orch-runner")
    verification = report["verification"]
    assert verification["ok"] and verification["runner"] == "native", verification
    assert verification["version"] == "1.21.0" and verification["models"]["tiny.onnx"]["ok"], verification
    assert verification["file"] == f"{release_dir}/native/lib/libonnxruntime.so.1", verification
    return release_dir


def _bench_native(lab: Lab, board: str) -> None:
    """``orch bench --runner native`` measures the native release; the Python agent, which has no
    onnxruntime there, is refused naming the native runner."""
    bench = lab.orch("bench", "--host", board, "--runner", "native", "--quick", "--json", timeout=3600)
    assert bench.returncode == 0, bench.stdout + bench.stderr[-3000:]
    measured = json.loads(bench.stdout)
    (series,) = measured["series"]
    assert series["runner"] == "native" and series["ort_version"] == "1.21.0" and series["n"] > 0, series
    assert {row["runner"] for row in measured["cold_starts"]} == {"native"}
    python = lab.orch("bench", "--host", board, "--runner", "python", "--quick", timeout=600)
    assert python.returncode != 0 and "--runner native" in " ".join(python.stderr.split()), python.stderr


@pytest.mark.full
@pytest.mark.timeout(2 * BUILD_TIMEOUT + 2400)
@pytest.mark.parametrize("stand_in", [STAND_INS[0]], indirect=True)
def test_the_c_library_and_runner_built_for_the_debian_11_stand_in_compute_there_as_x86_does(
    stand_in: tuple[StandIn, Lab], seed_ort_source, tmp_path: Path
) -> None:
    """JetPack 4 and 5 boards: ORT 1.21's Python package cannot target their Python, its C library
    with orch's native runner can run there: deployed by orch deploy as a native release, verified
    and benched there by its runner, computing as x86 does."""
    board, lab = stand_in
    seed_ort_source(lab.home)
    _pull(lab, board.board)
    args = _build_args(board, "library")
    result = lab.orch("build", *args, "--json", timeout=2 * BUILD_TIMEOUT)
    assert result.returncode == 0, result.stderr[-3000:]
    document = json.loads(result.stdout)
    library = document["library"]
    assert (
        library["checked_against_sysroot"] == board.board
        and library["library"] == "lib/libonnxruntime.so.1.21.0"
    )
    # Every glibc library's needs (libm's too), and libstdc++'s, within the stand-in's.
    glibc = [
        tuple(map(int, v.removeprefix("GLIBC_").split(".")))
        for versions in library["needs"].values()
        for v in versions
        if v.startswith("GLIBC_")
    ]
    assert max(glibc) <= board.max_glibc, library["needs"]
    glibcxx = [
        int(v.rsplit(".", 1)[1])
        for v in library["needs"].get("libstdc++.so.6", [])
        if v.startswith("GLIBCXX_")
    ]
    assert glibcxx and max(glibcxx) <= board.glibcxx, library["needs"]
    # Pre-flighted in the build image under qemu-user as the board's CPU, with the sysroot's loader.
    preflight = library["preflight"]
    assert preflight["ok"] and preflight["sysroot"] and preflight["qemu_cpu"] == "cortex-a57", preflight
    assert preflight["ort_version"] == "1.21.0" and preflight["comparison"]["max_abs_diff"] < 1e-4

    # Recorded as an artifact of its own kind, which `orch deploy --scope library` takes: a native
    # release (no venv, no pip), verified on the board by its runner before the switch.
    assert document["artifact"].endswith("/jetson-nano/default/1.21.0-library"), document["artifact"]
    assert document["artifact_manifest"]["kind"] == "library"
    model = write_model(tiny_convnet(), tmp_path / "models" / "tiny.onnx")
    release_dir = _deploy_library(lab, board.board, model)
    _bench_native(lab, board.board)

    # The deployed runner computes the model as x86 onnxruntime does, for the same input.
    stage = tmp_path / "stage"
    stage.mkdir()
    inputs = np.random.default_rng(7).standard_normal((1, 3, 32, 32)).astype(np.float32)
    np.save(stage / "input.npy", inputs)
    container = _copy_to_board(lab, board.board, stage, "/tmp/ortc")
    ran = lab.orch(
        "exec", "--host", board.board, "--timeout", "900", "--json", "--",
        "mkdir -p /tmp/ortc/o && orch/current/native/orch-runner --model orch/current/models/tiny.onnx"
        " --input input=/tmp/ortc/input.npy --save-outputs /tmp/ortc/o"
        " --intra-op-threads 1 --warmup 0 --min-runs 1 --min-duration 0",
        timeout=1200,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    run = json.loads(json.loads(ran.stdout)[board.board]["stdout"].strip().splitlines()[-1])
    assert run["ok"] and run["ort"]["version"] == "1.21.0", run
    assert run["ort"]["library"] == f"{release_dir}/native/lib/libonnxruntime.so.1", run
    subprocess.run(
        ["docker", "cp", f"{container}:/tmp/ortc/o/logits.npy", str(tmp_path / "logits.npy")], check=True
    )
    reference = onnxruntime.InferenceSession(str(model)).run(None, {"input": inputs})[0]
    np.testing.assert_allclose(np.load(tmp_path / "logits.npy"), reference, rtol=1e-4, atol=1e-5)
    print(f"C library build for {board.board}: {document['duration_s']} s; needs {library['needs']}")
