"""The native runner with the official wheel: stock ONNX Runtime 1.21.0 on an emulated Raspberry Pi 5
(Cortex-A76, Raspberry Pi OS trixie), side by side with the Python agent.

Stock 1.21.0 is the release whose C API header is offline (Debian's source package), so orch can
build its runner; on the lab's Cortex-A72 boards that wheel dies of SIGILL (upstream's fp16 bug), on
the A76 it runs. With test_native_lab.py (the tuned build on the lab's A72 boards) this covers
`--runner both` for stock and tuned. Emulated timings: relative comparisons only.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from orchestrator.artifacts.store import read_manifest
from orchestrator.lab.sample_models import mlp, write_model
from tests.conftest import Lab, profile_lab

pytestmark = pytest.mark.integration

BOARD = "rpi5-1"
RELEASE = "1.21.0"


@pytest.fixture(scope="module")
def pi5_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with profile_lab(tmp_path_factory.mktemp("native-stock-lab"), "rpi5:1") as the_lab:
        yield the_lab


@pytest.fixture(scope="module")
def stock(pi5_lab: Lab) -> Path:
    built = pi5_lab.orch(
        "build", "--target", "rpi5", "--variant", "stock", "--ort-version", RELEASE, "--json", timeout=1800
    )
    assert built.returncode == 0, built.stderr[-3000:]
    return Path(pi5_lab.env["ORCH_ARTIFACTS"]) / "rpi5" / "stock" / RELEASE


@pytest.fixture(scope="module")
def deployed(pi5_lab: Lab, stock: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    model = write_model(mlp(), tmp_path_factory.mktemp("native-stock-models") / "mlp.onnx")
    result = pi5_lab.orch(
        "deploy", "--host", BOARD, "--artifact", str(stock), "--model", str(model), "--json", timeout=1800
    )
    assert result.returncode == 0, result.stderr[-3000:]
    return model


def test_the_stock_build_carries_a_runner_for_the_official_library(stock: Path) -> None:
    runner = read_manifest(stock / "manifest.json").native_runner
    assert runner is not None and runner.file == "orch-runner" and runner.ort_version == RELEASE
    assert runner.library == f"onnxruntime/capi/libonnxruntime.so.{RELEASE}"
    assert runner.library_size and runner.library_size > 1_000_000
    assert (stock / "orch-runner").read_bytes()[:4] == b"\x7fELF"


def test_bench_runner_both_on_stock_shows_native_and_python_per_board(pi5_lab: Lab, deployed: Path) -> None:
    result = pi5_lab.orch(
        "bench", "--host", BOARD, "--runner", "both", "--model", "mlp", "--quick",
        "--rounds", "2", "--cold-starts", "2", "--json", timeout=1800,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    document = json.loads(result.stdout)
    rows = document["series"]
    assert {row["runner"] for row in rows} == {"python", "native"}
    assert {(row["variant"], row["ort_version"]) for row in rows} == {("stock", RELEASE)}
    cold = {row["runner"]: row for row in document["cold_starts"]}
    assert cold["native"]["launch_to_first_result"]["n"] == cold["python"]["launch_to_first_result"]["n"] == 4
    native_p50 = cold["native"]["launch_to_first_result"]["p50_ms"]
    python_p50 = cold["python"]["launch_to_first_result"]["p50_ms"]
    assert native_p50 < python_p50, (native_p50, python_p50)
    assert cold["native"]["peak_rss_kb"] < cold["python"]["peak_rss_kb"]
    assert cold["native"]["library_bytes"] > 1_000_000
    # What a user reads: both runners' cold start with its sample count, and the footprint.
    assert "Cold start and footprint" in result.stderr and "stock" in result.stderr
