"""The cross-built native runner on an emulated board (lab, Cortex-A72): shipped with the tuned
release, the same outputs as the Python agent's onnxruntime for the same inputs, `orch bench
--runner both` side by side with cold starts, and the refusal of another release's library.

The tuned wheel comes from the lab's artifacts when this session built it already (the full build
test does, in the same lab); otherwise it is built here (the long part: about 15 min with a warm
compiler cache). Emulated timings: relative comparisons only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest

from orchestrator.adapters import ssh as remote
from orchestrator.artifacts.store import read_manifest
from orchestrator.lab.sample_models import mlp, write_model

# The whole tuned wheel with its runner is a full build (`pytest -m full`); CI runs the native runner
# on a board with the official library (test_native_stock_lab.py).
pytestmark = pytest.mark.full

BOARD = "lab2"
BUILD_TIMEOUT = 5400


@pytest.fixture(scope="module")
def tuned(lab, ort_tarball: Path) -> Path:
    """The lab's tuned 1.21.0 artifact with its native runner (``ORCH_TEST_TUNED_ARTIFACT`` names an
    artifact directory made earlier, to re-run these tests without building again)."""
    given = os.environ.get("ORCH_TEST_TUNED_ARTIFACT")
    directory = Path(given) if given else Path(lab.env["ORCH_ARTIFACTS"]) / "lab" / "tuned" / "1.21.0"
    manifest = directory / "manifest.json"
    if not (
        manifest.is_file() and read_manifest(manifest).native_runner and read_manifest(manifest).preflight_ok
    ):
        sources = lab.home / "sources" / "debian"
        sources.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ort_tarball, sources / ort_tarball.name)
        built = lab.orch("build", "--target", "lab", "--variant", "tuned", "--json", timeout=BUILD_TIMEOUT)
        assert built.returncode == 0, built.stderr[-3000:]
    return directory


@pytest.fixture(scope="module")
def deployed(lab, tuned: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    models = tmp_path_factory.mktemp("native-models")
    model = write_model(mlp(), models / "mlp.onnx")
    result = lab.orch(
        "deploy", "--host", BOARD, "--artifact", str(tuned), "--model", str(model), "--json", timeout=1800
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return model


def test_the_build_records_the_runner_and_the_c_library(tuned: Path, lab, orch_cli) -> None:
    runner = read_manifest(tuned / "manifest.json").native_runner
    assert runner is not None and runner.file == "orch-runner" and runner.ort_version == "1.21.0"
    assert runner.library == "onnxruntime/capi/libonnxruntime.so.1.21.0"
    assert runner.library_size and runner.library_size > 1_000_000
    binary = (tuned / "orch-runner").read_bytes()
    assert binary[:4] == b"\x7fELF" and binary[18:20] == (183).to_bytes(2, "little"), "an aarch64 executable"
    assert runner.size == len(binary)
    # `orch build list` shows the footprint per variant: the C library's size and the runner's.
    env = {**lab.env, "ORCH_ARTIFACTS": str(tuned.parent.parent.parent)}
    listing = orch_cli(env, "build", "list", check=True)
    row = next(line for line in listing.stderr.splitlines() if "tuned" in line and "1.21.0" in line)
    assert f"{runner.library_size / 1e6:.1f} MB" in row and f"{runner.size / 1e3:.0f} kB" in row


def test_deploy_ships_the_runner_next_to_its_library_and_it_starts(lab, deployed: Path) -> None:
    board = lab.board(BOARD)
    with remote.connect(board) as session:
        current = f"{board.workdir}/current"
        release = json.loads(session.run(["cat", f"{current}/release.json"]).stdout)
        assert release["native"]["runner"] == "native/orch-runner"
        assert release["native"]["library"] == "libonnxruntime.so.1.21.0"
        link = session.run(["readlink", f"{current}/native/lib/libonnxruntime.so.1"]).stdout.strip()
        assert link == "libonnxruntime.so.1.21.0"
        version = session.run([f"{current}/native/orch-runner", "--version"], timeout=300).stdout
        assert "ONNX Runtime 1.21.0" in version


def test_native_and_python_give_the_same_outputs_for_the_same_inputs(
    lab, deployed: Path, tmp_path: Path
) -> None:
    board = lab.board(BOARD)
    features = np.random.default_rng(11).standard_normal((3, 128)).astype(np.float32)
    local_in = tmp_path / "features.npy"
    np.save(local_in, features)
    python = (
        "import sys, numpy as np, onnxruntime as ort\n"
        "o = ort.SessionOptions(); o.intra_op_num_threads = 1\n"
        "o.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL\n"
        "s = ort.InferenceSession(sys.argv[1], o)\n"
        "np.save(sys.argv[3], s.run(None, {'features': np.load(sys.argv[2])})[0])\n"
    )
    with remote.connect(board) as session:
        current = f"{board.workdir}/current"
        work = f"{board.workdir}/native-test"
        session.mkdir_p(f"{work}/out")
        session.put(local_in, f"{work}/features.npy")
        model = f"{current}/models/mlp.onnx"
        ran = session.run(
            [f"{current}/native/orch-runner", "--model", model, "--input", f"features={work}/features.npy",
             "--save-outputs", f"{work}/out", "--intra-op-threads", "1", "--opt-level", "all",
             "--warmup", "0", "--min-runs", "1", "--min-duration", "0"],
            timeout=600, check=False,
        )  # fmt: skip
        document = json.loads(ran.stdout.strip().splitlines()[-1])
        assert ran.exit_code == 0 and document["ok"], document
        assert document["ort"]["version"] == "1.21.0"
        session.run([f"{current}/venv/bin/python", "-c", python, model, f"{work}/features.npy",
                     f"{work}/python.npy"], timeout=900)  # fmt: skip
        session.get(f"{work}/out/scores.npy", tmp_path / "native.npy")
        session.get(f"{work}/python.npy", tmp_path / "python.npy")
    got, expected = np.load(tmp_path / "native.npy"), np.load(tmp_path / "python.npy")
    assert got.shape == (3, 10)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_bench_runner_both_stores_both_and_native_starts_faster(lab, deployed: Path) -> None:
    result = lab.orch(
        "bench",
        "--host",
        BOARD,
        "--runner",
        "both",
        "--model",
        "mlp",
        "--quick",
        "--rounds",
        "2",
        "--cold-starts",
        "2",
        "--json",
        timeout=1800,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    document = json.loads(result.stdout)
    runners = {row["runner"] for row in document["series"]}
    assert runners == {"python", "native"}
    cold = {row["runner"]: row for row in document["cold_starts"]}
    assert cold["native"]["launch_to_first_result"]["n"] == 2 * 2  # 2 rounds x 2 launches
    assert cold["python"]["launch_to_first_result"]["n"] == 4
    native_p50 = cold["native"]["launch_to_first_result"]["p50_ms"]
    python_p50 = cold["python"]["launch_to_first_result"]["p50_ms"]
    assert native_p50 < python_p50, (native_p50, python_p50)
    assert cold["native"]["runner_bytes"] > 0 and cold["native"]["library_bytes"] > 1_000_000
    assert cold["native"]["peak_rss_kb"] < cold["python"]["peak_rss_kb"]
    # The table a user reads: both runners' cold start, the ratio, the footprint.
    assert "Cold start: native runner vs Python agent" in result.stderr
    assert "Cold start and footprint" in result.stderr
    stored = json.loads((Path(document["path"]) / f"{BOARD}.json").read_text())
    assert (
        len(stored["cold_starts"]) == 2 * 2
        and {m["key"]["runner"] for m in stored["measurements"]} == runners
    )


# Another release than the runner's, given explicitly (the stock fixtures follow the project's stock
# default, which may become the runner's own release): 1.22.0 runs on a Cortex-A72.
OTHER_RELEASE = "1.22.0"


@pytest.fixture(scope="module")
def other_wheel() -> Path:
    # Kept with the tests' other downloads (ORCH_TEST_CACHE), fetched once per machine.
    dest = Path(os.environ.get("ORCH_TEST_CACHE") or "/var/tmp/orch-test-cache") / "wheels"
    dest.mkdir(parents=True, exist_ok=True)
    found = sorted(dest.glob(f"onnxruntime-{OTHER_RELEASE}-*.whl"))
    if found:
        return found[0]
    argv = [sys.executable, "-m", "pip", "download", "--disable-pip-version-check", "--no-deps",
            "--only-binary=:all:", "--platform", "manylinux_2_28_aarch64", "--python-version", "3.13",
            "--implementation", "cp", "--abi", "cp313", "-d", str(dest), f"onnxruntime=={OTHER_RELEASE}"]  # fmt: skip
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    found = sorted(dest.glob(f"onnxruntime-{OTHER_RELEASE}-*.whl"))
    if done.returncode != 0 or not found:
        pytest.fail(
            f"pip download onnxruntime=={OTHER_RELEASE} failed:\n{done.stderr[-2000:]}", pytrace=False
        )
    return found[0]


def test_the_runner_refuses_the_library_of_another_release(
    lab, deployed: Path, other_wheel: Path, tmp_path: Path
) -> None:
    """The official wheel's C library of another release next to a 1.21.0 runner."""
    with zipfile.ZipFile(other_wheel) as archive:
        (member,) = [n for n in archive.namelist() if "/capi/libonnxruntime.so." in n]
        other_version = member.rsplit("libonnxruntime.so.", 1)[1]
        assert other_version == OTHER_RELEASE
        (tmp_path / "libonnxruntime.so.1").write_bytes(archive.read(member))
    board = lab.board(BOARD)
    with remote.connect(board) as session:
        work = f"{board.workdir}/native-mismatch"
        session.mkdir_p(f"{work}/lib")
        session.put(tmp_path / "libonnxruntime.so.1", f"{work}/lib/libonnxruntime.so.1")
        session.run(["cp", f"{board.workdir}/current/native/orch-runner", f"{work}/orch-runner"])
        ran = session.run(
            [f"{work}/orch-runner", "--model", f"{board.workdir}/current/models/mlp.onnx"],
            timeout=600,
            check=False,
        )
    # The runner loads the library itself (dlopen), so ORT's per-release symbol versions do not stop
    # it before main: its own check names both releases, before any session is made.
    assert ran.exit_code == 1
    document = json.loads(ran.stdout.strip().splitlines()[-1])
    assert document["ok"] is False and document["stage"] == "version"
    both = f"built for ONNX Runtime 1.21.0 but loaded the library of ONNX Runtime {OTHER_RELEASE}"
    assert both in document["error"]
    assert "model" not in document and "timing" not in document
