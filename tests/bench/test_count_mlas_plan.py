"""`--workload mlas-test`'s pure parts: the builds found on the workstation and chosen per target, the
refusals (a missing build, builds of two releases, an inference's options), the command counted
under the counting qemu, k, and the stored document that names the workload."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from orchestrator.artifacts.mlas_tests import MLAS_TEST_EXE, list_mlas_test_builds, read_mlas_test_build
from orchestrator.bench.counting.mlas_plan import (
    FILTER,
    MAX_EXTRA,
    MIN_EXTRA,
    bundle_path,
    choose_builds,
    extra_repeats,
    mlas_count_argv,
)
from orchestrator.bench.counting.plan import TARGET_INSTRUCTIONS, counter_argv
from orchestrator.bench.counting.store import SCHEMA, CountRunDocument, load_counts, write_counts
from orchestrator.bench.plan import Setting
from orchestrator.bench.plan_options import make_plan
from orchestrator.board import Board
from orchestrator.commands.bench_count import refuse_for_mlas
from orchestrator.errors import UsageError

pytestmark = pytest.mark.unit

TUNED_ARGV = ["python3", "build.py", "--config", "Release", "--enable_lto", "--target", MLAS_TEST_EXE]
O0_ARGV = ["python3", "build.py", "--config", "Debug", "--target", MLAS_TEST_EXE]


def _build(
    root: Path,
    variant: str,
    version: str = "1.21.0",
    *,
    argv: list[str] = TUNED_ARGV,
    exe: bytes = b"\x7fELF tuned",
    mtime: float = 1_000_000.0,
    target: str = "lab",
) -> Path:
    directory = root / target / variant / f"{version}-mlas-test"
    (directory / "out").mkdir(parents=True)
    (directory / "out" / MLAS_TEST_EXE).write_bytes(exe)
    (directory / "out" / "libgtest.so.1.16.0").write_bytes(b"gtest")
    manifest = directory / "manifest.json"
    manifest.write_text(
        json.dumps(
            {
                "build_argv": argv,
                "compiler_flags": ["-O3", "-mcpu=cortex-a72"],
                "linker_flags": [],
                "compiler": "aarch64-linux-gnu-g++ 14.2.0",
            }
        )
    )
    os.utime(manifest, (mtime, mtime))
    return directory


def _listing(root: Path):  # type: ignore[no-untyped-def]
    return lambda target, variant: list_mlas_test_builds(target, variant, root)


def test_a_build_is_read_from_its_record_and_named_by_its_content(tmp_path: Path) -> None:
    build = read_mlas_test_build(_build(tmp_path, "tuned"))
    assert build is not None
    assert (build.target, build.variant, build.ort_version) == ("lab", "tuned", "1.21.0")
    assert build.config == "Release" and build.lto and build.compiler_flags == ("-O3", "-mcpu=cortex-a72")
    assert build.id == f"lab/tuned/1.21.0-mlas-test@{build.digest}" and len(build.digest) == 16
    assert [name for name, _ in build.files] == ["libgtest.so.1.16.0", MLAS_TEST_EXE]
    other = read_mlas_test_build(_build(tmp_path / "b", "tuned", exe=b"\x7fELF other"))
    assert other is not None and other.digest != build.digest  # new bytes, a new id
    o0 = read_mlas_test_build(_build(tmp_path, "o0", argv=O0_ARGV))
    assert o0 is not None and o0.config == "Debug" and not o0.lto


def test_an_unfinished_build_or_another_scope_is_not_a_build(tmp_path: Path) -> None:
    failed = _build(tmp_path, "tuned")
    (failed / "out" / MLAS_TEST_EXE).unlink()
    assert read_mlas_test_build(failed) is None
    (tmp_path / "lab" / "tuned" / "1.21.0-library").mkdir()
    assert list_mlas_test_builds("lab", "tuned", tmp_path) == []
    assert list_mlas_test_builds("lab", "nothing", tmp_path) == []


def test_the_newest_build_of_each_variant_is_chosen_per_target_baseline_first(tmp_path: Path) -> None:
    _build(tmp_path, "tuned", "1.20.0", mtime=1_000)
    _build(tmp_path, "tuned", "1.21.0", mtime=2_000)
    _build(tmp_path, "o0", "1.21.0", argv=O0_ARGV, mtime=3_000)
    _build(tmp_path, "tuned", "1.21.0", target="rpi5", mtime=4_000)
    _build(tmp_path, "o0", "1.21.0", target="rpi5", mtime=5_000)
    chosen = choose_builds(
        [("lab1", "lab"), ("pi", "rpi5"), ("lab2", "lab")], ["tuned", "o0"], _listing(tmp_path)
    )
    assert [(one.target, one.boards) for one in chosen] == [("lab", ("lab1", "lab2")), ("rpi5", ("pi",))]
    lab = chosen[0].builds
    assert [(b.variant, b.ort_version, b.config) for b in lab] == [
        ("tuned", "1.21.0", "Release"),
        ("o0", "1.21.0", "Debug"),
    ]
    # --ort-version picks the release, not the newest.
    _build(tmp_path, "o0", "1.20.0", argv=O0_ARGV, mtime=6_000)
    [older] = choose_builds(
        [("lab1", "lab")], ["tuned", "o0"], _listing(tmp_path), ort_versions=[("", "1.20.0")]
    )
    assert [b.ort_version for b in older.builds] == ["1.20.0", "1.20.0"]


def test_a_missing_build_is_refused_saying_what_to_build(tmp_path: Path) -> None:
    _build(tmp_path, "tuned")
    with pytest.raises(UsageError) as refused:
        choose_builds([("lab1", "lab")], ["tuned", "o0"], _listing(tmp_path), where="/h/builds")
    assert str(refused.value) == (
        "--workload mlas-test: no mlas-test build of variant 'o0' for target 'lab' (board lab1) in /h/builds;"
        " build it first: orch build --target lab --scope mlas-test --variant o0"
    )
    with pytest.raises(UsageError, match=r"--ort-version 1\.22\.0"):
        choose_builds([("lab1", "lab")], ["tuned"], _listing(tmp_path), ort_versions=[("tuned", "1.22.0")])
    with pytest.raises(UsageError, match="give one or more, baseline first"):
        choose_builds([("lab1", "lab")], [], _listing(tmp_path))


def test_builds_of_two_releases_are_refused(tmp_path: Path) -> None:
    _build(tmp_path, "tuned", "1.21.0", mtime=1_000)
    _build(tmp_path, "o0", "1.22.0", argv=O0_ARGV, mtime=2_000)
    with pytest.raises(UsageError) as refused:
        choose_builds([("lab1", "lab")], ["tuned", "o0"], _listing(tmp_path))
    said = str(refused.value)
    assert said.startswith("--workload mlas-test compares builds of one ORT release, and for target 'lab'")
    assert "tuned is ORT 1.21.0 (lab/tuned/1.21.0-mlas-test@" in said and "o0 is ORT 1.22.0" in said
    assert said.endswith("orch build --target lab --scope mlas-test --variant o0 --ort-version 1.21.0")


def test_the_count_runs_the_filtered_tests_under_the_counting_qemu_with_the_bundle_libraries() -> None:
    bundle = bundle_path("orch", "0123456789abcdef")
    assert bundle == "orch/mlas-tests/0123456789abcdef"
    argv = mlas_count_argv(
        kit="orch/counting-qemu/abc", cpu="cortex-a72", log_file="l", bundle=bundle, repeats=4
    )
    prefix = counter_argv(kit="orch/counting-qemu/abc", cpu="cortex-a72", log_file="l")
    assert argv[: len(prefix)] == prefix  # the model count's qemu, -R, -L /, -cpu and plugin
    assert argv[len(prefix) :] == [
        "-E",
        f"LD_LIBRARY_PATH={bundle}",  # for the guest alone, not for qemu's own loader
        f"{bundle}/{MLAS_TEST_EXE}",
        f"--gtest_filter={FILTER}",
        "--gtest_repeat=4",
        "--gtest_print_time=0",
        "--gtest_brief=1",
        "--gtest_color=no",
    ]
    # Timing- and seed-dependent tests stay out.
    assert all(word not in FILTER for word in ("Threaded", "HGemm", "Fp16"))


def test_k_repetitions_retire_enough_instructions() -> None:
    assert extra_repeats(120_000_000) == 3
    assert extra_repeats(10**12) == MIN_EXTRA
    assert extra_repeats(1) == MAX_EXTRA and extra_repeats(0) == MAX_EXTRA
    assert TARGET_INSTRUCTIONS <= 3 * 120_000_000


def test_an_inference_option_is_refused_for_the_mlas_tests() -> None:
    board = Board(name="lab1", hostname="127.0.0.1")
    refuse_for_mlas(make_plan([board], variants=["tuned", "o0"]))
    for options, said in (
        ({"models": ["m.onnx"]}, "leave --model out"),
        ({"runner": "native"}, "leave --runner out"),
        ({"settings": [Setting(opt_level="basic")]}, "leave --threads, --opt-level, --ep"),
        ({"quantize": "dynamic"}, "leave --quantize out"),
    ):
        with pytest.raises(UsageError, match=said):
            refuse_for_mlas(make_plan([board], variants=["tuned", "o0"], **options))  # type: ignore[arg-type]


def test_a_stored_count_names_its_workload_and_older_ones_still_load(tmp_path: Path) -> None:
    document: CountRunDocument = {
        "schema": SCHEMA, "run_id": "20261206-090000-aaaa", "created": "x", "command": "orch bench",
        "metric": "instructions", "note": "not cycles", "counter": {"qemu": "q", "plugin": "insn", "bundle": "b"},
        "boards": {}, "series": [], "comparisons": [],
    }  # fmt: skip
    write_counts(document, tmp_path)  # as an orch before workloads wrote it
    assert "workload" not in load_counts("latest", tmp_path)
    document = {
        **document,
        "run_id": "20261206-100000-bbbb",
        "workload": {"name": "mlas-test", "unit": "one repetition", "filter": FILTER, "builds": []},
    }
    write_counts(document, tmp_path)
    assert load_counts("latest", tmp_path).get("workload", {}).get("filter") == FILTER


def test_the_command_refuses_the_mlas_tests_untimed_or_unbuilt(orch_env, orch_cli, tmp_path: Path) -> None:
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text("all:\n  hosts:\n    pi01: {hostname: 127.0.0.1, port: 1, target: rpi5}\n")
    bench = ("bench", "-i", str(inventory), "--host", "pi01", "--workload", "mlas-test", "--dry-run")
    done = orch_cli(orch_env, *bench, "--variant", "tuned")
    assert done.returncode == 2 and "add --metric instructions" in done.stderr, done.stderr
    done = orch_cli(orch_env, *bench, "--metric", "instructions", "--variant", "tuned,o0")
    said = " ".join(done.stderr.split())
    assert done.returncode == 2, done.stderr
    assert "no mlas-test build of variants 'tuned', 'o0' for target 'rpi5' (board pi01)" in said, said
    assert (
        "build it first: orch build --target rpi5 --scope mlas-test --variant tuned;"
        " orch build --target rpi5 --scope mlas-test --variant o0" in said
    ), said
    done = orch_cli(orch_env, *bench, "--metric", "instructions", "--variant", "tuned", "--model", "m")
    assert done.returncode == 2 and "leave --model out" in done.stderr, done.stderr
