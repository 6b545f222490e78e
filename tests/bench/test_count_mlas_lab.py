"""Instruction counts flag a real worse build of the same source (every CI run).

`orch build --target lab --scope mlas-test` twice from ORT 1.21.0's Debian source: `tuned` (LTO, -O3
-mcpu=cortex-a72) and a user's variant `o0` (the Debug config: -O0), both through the lab target's
compiler cache. `orch bench --metric instructions --workload mlas-test --variant tuned,o0` then counts
each build's MLAS kernel tests under the counting qemu on lab1: identical rounds agree (spread under
0.1%), the -O0 build counts several times more, called "more instructions", and --fail-above turns
that into exit 7, the stored document being what --json printed. A variant not built, or builds of
two releases, is refused before anything runs, saying what to build.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.integration

MLAS_TIMEOUT = 3600
# A user's variant, as $ORCH_HOME/variants.yaml holds it: tuned's target and ML-ops choice, no
# optimisation (build.py --config Debug: CMake's -g, GCC's default -O0).
O0_VARIANT = """\
o0:
  description: the Debug config (-O0), to see what optimisation is worth in instructions
  config: Debug
  cflags: ["-mcpu={mcpu}"]
  build_args: ["--disable_ml_ops", "--compile_no_warning_as_error"]
"""
COUNT = ("bench", "--host", "lab1", "--metric", "instructions", "--workload", "mlas-test")


def _build(lab, variant: str) -> dict[str, Any]:
    started = time.monotonic()
    done = lab.orch(
        "build",
        "--target",
        "lab",
        "--scope",
        "mlas-test",
        "--variant",
        variant,
        "--json",
        timeout=MLAS_TIMEOUT,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    document: dict[str, Any] = json.loads(done.stdout)
    print(f"{variant}: built in {time.monotonic() - started:.0f} s, ccache {document['ccache']}")
    return document


@pytest.mark.timeout(2 * MLAS_TIMEOUT + 1800)  # two MLAS builds and the counts
def test_an_o0_build_of_the_same_source_counts_more_and_fails_the_guard(lab, ort_tarball: Path) -> None:
    sources = lab.home / "sources" / "debian"
    sources.mkdir(parents=True, exist_ok=True)
    shutil.copy2(ort_tarball, sources / ort_tarball.name)
    variants = lab.home / "variants.yaml"
    assert not variants.exists(), "the lab's home has variants of its own"
    variants.write_text(O0_VARIANT)
    try:
        _counts_of_a_real_o0_build(lab)
    finally:
        variants.unlink()


def _counts_of_a_real_o0_build(lab) -> None:
    tuned = _build(lab, "tuned")
    # A variant not built yet: refused by the dry run and the real run alike, saying what to build.
    for dry_run in (["--dry-run"], []):
        refused = lab.orch(*COUNT, "--variant", "tuned,o0", *dry_run)
        said = " ".join(refused.stderr.split())
        assert refused.returncode == 2, refused.stderr
        assert "no mlas-test build of variant 'o0' for target 'lab' (board lab1)" in said, said
        assert "build it first: orch build --target lab --scope mlas-test --variant o0" in said, said
    o0 = _build(lab, "o0")
    assert "--enable_lto" in tuned["manifest"]["build_argv"] and "Debug" in o0["manifest"]["build_argv"]

    started = time.monotonic()
    done = lab.orch(*COUNT, "--variant", "tuned,o0", "--fail-above", "5", "--json", timeout=1800)
    took = time.monotonic() - started
    assert done.returncode == 7, f"{done.stdout}\n{done.stderr}"
    said = " ".join(done.stderr.split())
    assert "instruction count regression above 5.0%: lab1 onnxruntime_mlas_test: o0 +" in said, said
    document = json.loads(done.stdout)
    stored = Path(lab.env["ORCH_RESULTS"]) / "instructions" / f"{document['run_id']}.json"
    assert json.loads(stored.read_text()) == document
    _check_counts(document, tuned, o0, took)
    _refused_for_two_releases(lab, o0)


def _check_counts(document: dict[str, Any], tuned: dict[str, Any], o0: dict[str, Any], took: float) -> None:
    """The stored document: the workload and its builds, the boards, the series and the verdict."""
    # The document names the workload: the executable, the filter, and each build by id and flags.
    workload = document["workload"]
    assert workload["name"] == "mlas-test" and workload["executable"] == "onnxruntime_mlas_test"
    assert "Threaded" not in workload["filter"] and "--gtest_print_time=0" in workload["arguments"]
    builds = {build["variant"]: build for build in workload["builds"]}
    assert list(builds) == ["tuned", "o0"]
    assert builds["tuned"]["config"] == "Release" and builds["tuned"]["lto"]
    assert "-O3" in builds["tuned"]["compiler_flags"]
    assert builds["o0"]["config"] == "Debug" and not builds["o0"]["lto"]
    assert {build["ort_version"] for build in builds.values()} == {"1.21.0"}
    assert builds["tuned"]["directory"] == tuned["build_dir"] and builds["o0"]["directory"] == o0["build_dir"]

    board = document["boards"]["lab1"]
    assert board["status"] == "ok" and board["cpu"] == "cortex-a72"
    k = board["extra_inferences"]["onnxruntime_mlas_test"]
    series = {one["variant"]: one for one in document["series"]}
    assert [series[v]["release"] for v in ("tuned", "o0")] == [builds["tuned"]["id"], builds["o0"]["id"]]
    for one in series.values():
        assert one["rounds"] == 3 and one["ort_version"] == "1.21.0"
        # Identical processes agree: the spread between rounds is far under 0.1%.
        assert one["spread"] < 0.001, one
    # k repetitions of the tuned build retire the 300 M instructions the difference method asks for.
    assert k * series["tuned"]["median"] >= 300_000_000, (k, series["tuned"])
    [comparison] = document["comparisons"]
    assert (comparison["baseline"], comparison["candidate"]) == (builds["tuned"]["id"], builds["o0"]["id"])
    assert comparison["verdict"] == "more instructions", comparison
    assert comparison["ratio"] > 2.0, comparison  # -O0 is several times the instructions, not a few %
    print(
        f"counted in {took:.0f} s: tuned {series['tuned']['per_inference']}, o0 {series['o0']['per_inference']}"
        f" per repetition (k = {k}); ratio {comparison['ratio']:.4f}; spreads"
        f" {series['tuned']['spread']:.6%} / {series['o0']['spread']:.6%}"
    )


def _refused_for_two_releases(lab, o0: dict[str, Any]) -> None:
    """Builds of two releases are not one comparison: an o0 build named 1.20.0 (a copy, newer) is refused."""
    other = Path(o0["build_dir"]).with_name("1.20.0-mlas-test")
    shutil.copytree(str(o0["build_dir"]), other, symlinks=True)
    (other / "manifest.json").touch()  # written after the 1.21.0 build's
    try:
        refused = lab.orch(*COUNT, "--variant", "tuned,o0", "--dry-run")
        said = " ".join(refused.stderr.split())
        assert refused.returncode == 2, refused.stderr
        assert "compares builds of one ORT release" in said and "o0 is ORT 1.20.0" in said, said
        assert "orch build --target lab --scope mlas-test --variant o0 --ort-version 1.21.0" in said, said
    finally:
        shutil.rmtree(other)
