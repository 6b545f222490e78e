"""Full wheels that do not fit CI's budget (marked ``full``; run them with ``pytest -m full``).

Each builds a complete ORT wheel from an empty compiler cache (about an hour on 2 cores), pre-flights
it on the board's emulated CPU, installs it on a lab board of the board's own OS and compares one
inference with x86 onnxruntime on the same inputs.
"""

from __future__ import annotations

import json
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime
import pytest
from board_checks import deploy_and_match_x86, infer_on_board

from orchestrator.bench.results import ResultStore
from orchestrator.lab.sample_models import tiny_convnet, write_model
from tests.conftest import Lab, profile_lab

pytestmark = [pytest.mark.integration, pytest.mark.full]

FULL_TIMEOUT = 3 * 3600


@pytest.fixture(scope="module")
def bookworm_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    # A Pi 5 (Cortex-A76): the official 1.21.0 wheel, the reference of `orch verify`, runs there
    # (on a Pi 4's A72 it dies of SIGILL, upstream's fp16 bug).
    with profile_lab(tmp_path_factory.mktemp("bookworm-lab"), "rpi5-bookworm:1") as the_lab:
        yield the_lab


@pytest.mark.timeout(FULL_TIMEOUT + 3600)
def test_self_contained_bookworm_wheel_runs_on_a_debian_12_board_and_verifies_against_stock(
    bookworm_lab: Lab, tmp_path: Path, seed_ort_source
) -> None:
    seed_ort_source(bookworm_lab.home)
    result = bookworm_lab.orch("build", "--target", "rpi5-bookworm", "--json", timeout=FULL_TIMEOUT)
    assert result.returncode == 0, result.stderr[-3000:]
    manifest = json.loads(result.stdout)["manifest"]
    assert manifest["dependencies"] == "source"
    assert manifest["wheel"].endswith("-cp311-cp311-linux_aarch64.whl")
    assert manifest["preflight"]["ok"] and manifest["preflight"]["comparison"]["max_abs_diff"] < 1e-4
    # Self-contained: nothing from the build distribution's libraries is bundled; every dependency
    # is named with its Debian package, version and hash.
    assert not manifest.get("bundled_libraries")
    sources = {entry["name"]: entry for entry in manifest["dependency_sources"]}
    assert sources["Protobuf"]["version"].startswith("3.21.12") and len(sources["onnx"]["sha256"]) == 64

    board = "rpi5-bookworm-1"
    deploy_and_match_x86(bookworm_lab, board, "tuned", tmp_path)

    verify = bookworm_lab.orch("verify", "--host", board, "--subset", "500", "--json", timeout=3600)
    assert verify.returncode == 0, verify.stdout[-3000:] + verify.stderr[-3000:]
    (checked,) = json.loads(verify.stdout)["boards"][board]["builds"]
    assert checked["onnxruntime"]["reference"]["version"] == "1.21.0" and checked["regressions"] == []
    print(f"self-contained bookworm: {json.loads(result.stdout)['duration_s']} s; verify {checked['counts']}")


@pytest.fixture(scope="module")
def pi5_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with profile_lab(tmp_path_factory.mktemp("levers-lab"), "rpi5:1") as the_lab:
        yield the_lab


@pytest.mark.timeout(3 * FULL_TIMEOUT)
def test_lever_variants_xnnpack_and_reduced_build_deploy_and_run(
    pi5_lab: Lab, tmp_path: Path, seed_ort_source
) -> None:
    """`xnnpack` carries the XNNPACK provider and benches with it; `reduced` keeps only the kernels
    of the named model, is smaller than `tuned`, and still computes that model as x86 does."""
    seed_ort_source(pi5_lab.home)
    model = write_model(tiny_convnet(), tmp_path / "tiny.onnx")
    libraries = {}
    for variant, extra in (("tuned", []), ("reduced", ["--model", str(model)]), ("xnnpack", [])):
        build = pi5_lab.orch(
            "build", "--target", "rpi5", "--variant", variant, *extra, "--json", timeout=FULL_TIMEOUT
        )
        assert build.returncode == 0, build.stderr[-3000:]
        manifest = json.loads(build.stdout)["manifest"]
        assert manifest["preflight"]["ok"], manifest["preflight"]
        assert manifest["kleidiai"] == "not in this release"
        libraries[variant] = manifest["native_runner"]["library_size"]
        if variant == "reduced":
            assert "Conv" in manifest["operator_config"]["text"]
            assert manifest["operator_config"]["models"][0]["path"] == str(model)
    assert libraries["reduced"] < libraries["tuned"], libraries

    inputs = np.random.default_rng(5).standard_normal((1, 3, 32, 32)).astype(np.float32)
    reference = onnxruntime.InferenceSession(str(model)).run(None, {"input": inputs})[0]
    deploy = pi5_lab.orch(
        "deploy", "--host", "rpi5-1", "--variant", "reduced", "--model", str(model), timeout=1800
    )
    assert deploy.returncode == 0, deploy.stderr[-3000:]
    _, output = infer_on_board(pi5_lab.home, pi5_lab.board("rpi5-1"), "tiny.onnx", inputs)
    np.testing.assert_allclose(output, reference, rtol=1e-4, atol=1e-5)

    deploy = pi5_lab.orch(
        "deploy", "--host", "rpi5-1", "--variant", "xnnpack", "--model", str(model), timeout=1800
    )
    assert deploy.returncode == 0, deploy.stderr[-3000:]
    bench = pi5_lab.orch(
        "bench", "--host", "rpi5-1", "--variant", "xnnpack", "--ep", "xnnpack", "--threads", "2",
        "--model", "tiny.onnx", "--quick", "--json", timeout=1800,
    )  # fmt: skip
    assert bench.returncode == 0, bench.stderr[-3000:]
    run = ResultStore(Path(pi5_lab.env["ORCH_RESULTS"])).load(json.loads(bench.stdout)["run_id"])
    session = run.boards["rpi5-1"]["measurements"][0]["agent"]["session"]
    assert session["providers"][0] == "XnnpackExecutionProvider"
    # The EP's advice: ORT's own pool 1 thread, XNNPACK's pool the threads asked for.
    assert session["intra_op_num_threads"] == 1 and session["xnnpack_threads"] == 2


def _elf_facts(wheel: Path, tmp_path: Path) -> dict[str, bool]:
    """What `readelf` says of the wheel's Python extension: hardened links and stripped symbols."""
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [n for n in archive.namelist() if "onnxruntime_pybind11_state" in n and n.endswith(".so")]
        extension = Path(archive.extract(name, tmp_path))
    dynamic = subprocess.run(
        ["readelf", "-d", str(extension)], capture_output=True, text=True, check=True
    ).stdout
    headers = subprocess.run(
        ["readelf", "-lS", str(extension)], capture_output=True, text=True, check=True
    ).stdout
    return {
        "bind_now": "BIND_NOW" in dynamic,
        "relro": "GNU_RELRO" in headers,
        "stripped": ".symtab" not in headers,
    }


@pytest.mark.timeout(FULL_TIMEOUT + 1800)
def test_upstream_wheel_has_the_official_options_preflights_and_runs_on_an_emulated_pi5(
    pi5_lab: Lab, tmp_path: Path, seed_ort_source
) -> None:
    """`upstream`: the official wheel's own build options (Release, LTO, build.py's hardening) with
    orch's toolchain; the extension is linked with RELRO and BIND_NOW and stripped, as upstream's is,
    the wheel pre-flights on the Cortex-A76 and computes a model there as x86 does."""
    seed_ort_source(pi5_lab.home)
    build = pi5_lab.orch("build", "--target", "rpi5", "--variant", "upstream", "--json", timeout=FULL_TIMEOUT)
    assert build.returncode == 0, build.stderr[-3000:]
    manifest = json.loads(build.stdout)["manifest"]
    assert manifest["preflight"]["ok"] and manifest["preflight"]["comparison"]["max_abs_diff"] < 1e-4
    assert {"-Wp,-D_FORTIFY_SOURCE=2", "-fstack-protector-strong", "-O3"} <= set(manifest["compiler_flags"])
    assert "--enable_lto" in manifest["build_argv"]
    wheel = Path(pi5_lab.env["ORCH_ARTIFACTS"]) / "rpi5" / "upstream" / "1.21.0" / manifest["wheel"]
    assert _elf_facts(wheel, tmp_path) == {"bind_now": True, "relro": True, "stripped": True}

    deploy_and_match_x86(pi5_lab, "rpi5-1", "upstream", tmp_path)
    print(f"upstream wheel: {manifest.get('build_duration_s')} s; ccache {manifest.get('ccache')}")


@pytest.fixture(scope="module")
def orin_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with profile_lab(tmp_path_factory.mktemp("orin-lab"), "jetson-orin:1") as the_lab:
        yield the_lab


@pytest.mark.timeout(FULL_TIMEOUT + 3600)
def test_jetson_wheel_built_against_its_stand_ins_sysroot_runs_and_verifies_there(
    orin_lab: Lab, tmp_path: Path, seed_ort_source
) -> None:
    """`orch build --target jetson --sysroot-from jetson-orin-1`: clang against the sysroot pulled from
    the Jetson Orin's stand-in (Debian 12, Cortex-A76); the wheel pre-flights on that CPU, installs on
    the board, computes a model as x86 does, and `orch verify` finds no regression against stock."""
    seed_ort_source(orin_lab.home)
    board = "jetson-orin-1"
    pulled = orin_lab.orch("sysroot", "pull", "--host", board, "--no-compress", timeout=1800)
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    build = orin_lab.orch(
        "build", "--target", "jetson", "--sysroot-from", board, "--variant", "default", "--json",
        timeout=FULL_TIMEOUT,
    )  # fmt: skip
    assert build.returncode == 0, build.stderr[-3000:]
    manifest = json.loads(build.stdout)["manifest"]
    assert manifest["toolchain"] == "clang-sysroot" and manifest["dependencies"] == "source"
    assert manifest["wheel"].endswith("-cp311-cp311-linux_aarch64.whl")
    assert manifest["preflight"]["ok"] and manifest["preflight"]["comparison"]["max_abs_diff"] < 1e-4
    assert not manifest.get("bundled_libraries")

    deploy_and_match_x86(orin_lab, board, "default", tmp_path)

    verify = orin_lab.orch("verify", "--host", board, "--subset", "500", "--json", timeout=3600)
    assert verify.returncode == 0, verify.stdout[-3000:] + verify.stderr[-3000:]
    (checked,) = json.loads(verify.stdout)["boards"][board]["builds"]
    assert checked["onnxruntime"]["reference"]["version"] == "1.21.0" and checked["regressions"] == []
    print(f"jetson via sysroot: {manifest.get('duration_s')} s; verify {checked['counts']}")


def _pgo_against_tuned(lab: Lab, board: str, target: list[str], tmp_path: Path) -> dict[str, Any]:
    """`--variant pgo --train-on BOARD --model m.onnx` for ``target``: the tuned wheel with counters,
    trained on the board with its release's interpreter, built again with the profile, pre-flighted,
    deployed and benched against tuned of the same release built the same way; the pgo manifest."""
    model = write_model(tiny_convnet(), tmp_path / "tiny.onnx")
    # The training runs with a release's interpreter, so the board gets one first: the official wheel
    # (minutes), so that the instrumented build, the one never built whole before, runs first.
    stock = lab.orch("build", *target, "--variant", "stock", "--json", timeout=1800)
    assert stock.returncode == 0, stock.stderr[-3000:]
    deploy = lab.orch("deploy", "--host", board, "--variant", "stock", "--model", str(model), timeout=1800)
    assert deploy.returncode == 0, deploy.stderr[-3000:]
    pgo = lab.orch(
        "build", *target, "--variant", "pgo", "--train-on", board, "--model", str(model),
        "--train-runs", "2", "--json", timeout=2 * FULL_TIMEOUT,
    )  # fmt: skip
    assert pgo.returncode == 0, pgo.stderr[-3000:]
    manifest: dict[str, Any] = json.loads(pgo.stdout)["manifest"]
    profile = manifest["profile"]
    assert manifest["preflight"]["ok"] and profile["trainings"][0]["models"][0]["name"] == "tiny.onnx"
    assert profile["coverage"]["runs"] == 2 and profile["use"]["sources_with_counters"] > 0
    print(
        f"pgo wheel: trainings {profile['trainings']}; coverage {profile['coverage']}; use {profile['use']}"
    )

    tuned = lab.orch("build", *target, "--variant", "tuned", "--json", timeout=FULL_TIMEOUT)
    assert tuned.returncode == 0, tuned.stderr[-3000:]
    assert json.loads(tuned.stdout)["manifest"].get("toolchain") == manifest.get("toolchain")
    for variant in ("tuned", "pgo"):
        deploy = lab.orch(
            "deploy", "--host", board, "--variant", variant, "--model", str(model), timeout=1800
        )
        assert deploy.returncode == 0, deploy.stderr[-3000:]
    bench = lab.orch(
        "bench", "--host", board, "--variant", "tuned,pgo", "--model", "tiny.onnx", "--quick", "--json",
        timeout=3600,
    )  # fmt: skip
    assert bench.returncode == 0, bench.stderr[-3000:]
    print(f"tuned -> pgo on {board} ({manifest.get('toolchain')}): {bench.stdout[-2000:]}")
    return manifest


@pytest.mark.timeout(3 * FULL_TIMEOUT)
def test_pgo_wheel_trained_on_an_emulated_pi5_against_tuned_of_the_same_release(
    pi5_lab: Lab, tmp_path: Path, seed_ort_source
) -> None:
    """GCC's loop: the rpi5 wheel trained on an emulated Pi 5 and benched against tuned (emulated:
    relative figures only)."""
    seed_ort_source(pi5_lab.home)
    _pgo_against_tuned(pi5_lab, "rpi5-1", ["--target", "rpi5"], tmp_path)


@pytest.mark.timeout(3 * FULL_TIMEOUT)
def test_clang_pgo_wheel_trained_on_the_orin_stand_in_against_clang_tuned_of_the_same_release(
    orin_lab: Lab, tmp_path: Path, seed_ort_source
) -> None:
    """clang's loop on the sysroot route: the Jetson Orin wheel, built against the sysroot pulled from
    its stand-in (Debian 12, Cortex-A76), trained there and benched against a clang tuned wheel of the
    same release and sysroot, never against a GCC build (emulated: relative figures only)."""
    seed_ort_source(orin_lab.home)
    board = "jetson-orin-1"
    pulled = orin_lab.orch("sysroot", "pull", "--host", board, "--no-compress", timeout=1800)
    assert pulled.returncode == 0, pulled.stdout + pulled.stderr
    manifest = _pgo_against_tuned(orin_lab, board, ["--target", "jetson", "--sysroot-from", board], tmp_path)
    assert manifest["toolchain"] == "clang-sysroot"
    assert manifest["profile"]["merged"]["tool"] == "llvm-profdata-19"
