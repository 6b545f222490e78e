"""The native runner without a board or a compiler: its document's schema, its build plan for every
target, the bench steps and the deploy's release document that carry it, the cold-start summary and
its tables in `orch results show` and the HTML report."""

from __future__ import annotations

import copy
import json
import re
import zipfile
from pathlib import Path

import numpy as np
import onnxruntime
import pytest
from rich.console import Console

from orchestrator.artifacts.store import Artifact, Manifest, NativeRunner
from orchestrator.bench import native
from orchestrator.bench.plan import AgentOptions, ReleaseRef
from orchestrator.bench.plan_options import make_plan
from orchestrator.bench.report.html import write_html
from orchestrator.bench.report.native_tables import EMULATED_NOTE, cold_start_table, runner_ratio_table
from orchestrator.bench.results import BOARD_SCHEMA, ResultStore, new_run_id
from orchestrator.bench.steps import board_steps, check_runners
from orchestrator.board import Board
from orchestrator.builds.native_runner.plan import SONAME, runner_plan, wheel_library
from orchestrator.deploy.release_files import native_files
from orchestrator.errors import BenchError
from orchestrator.lab.sample_models import mlp
from orchestrator.targets import known_target_names, resolve_target

DATA = Path(__file__).parent / "data"
BOARD = Board(name="lab1", hostname="127.0.0.1", port=2222)


def document(name: str) -> dict:
    return json.loads((DATA / name).read_text())


# --------------------------------------------------------------------------- the document's schema


def test_a_real_runner_document_has_no_schema_problem() -> None:
    assert native.runner_problems(document("runner_ok.json")) == []
    assert native.runner_problems(document("runner_failed.json")) == []


@pytest.mark.parametrize(
    "change,words",
    [
        (lambda d: d.pop("schema"), "schema is None"),
        (lambda d: d.update(schema="orch-bench-agent/1"), "a runner of another orch"),
        (lambda d: d["timing"].pop("latencies_ms"), "key 'timing.latencies_ms' is missing"),
        (lambda d: d["timing"].update(latencies_ms=[1.0, "x"]), "key 'timing.latencies_ms' must be numbers"),
        (lambda d: d["stats"].update(n="5"), "key 'stats.n' must be integer"),
        (lambda d: d["timing"].update(launch_to_first_result_ms="soon"), "launch_to_first_result_ms' must be number or null"),
        (lambda d: d["memory"].update(peak_rss_kb=None), "key 'memory.peak_rss_kb' must be integer"),
        (lambda d: d["runner"].pop("built_for"), "key 'runner.built_for' is missing"),
        (lambda d: d["timing"].update(runs=99), "timing.runs, stats.n and the number of timing.latencies_ms differ"),
    ],
)  # fmt: skip
def test_a_malformed_document_is_named_by_its_key(change, words: str) -> None:
    broken = copy.deepcopy(document("runner_ok.json"))
    change(broken)
    problems = native.runner_problems(broken)
    assert any(words in problem for problem in problems), problems


def test_a_failed_document_must_say_why_and_where() -> None:
    failed = document("runner_failed.json")
    del failed["stage"]
    assert native.runner_problems(failed) == ["key 'stage' is missing"]
    assert native.runner_problems([]) == ["the runner's output is not a JSON object"]


def test_a_launch_without_a_launcher_time_is_no_cold_sample() -> None:
    ok = document("runner_ok.json")
    sample = native.cold_sample(ok)
    assert (
        sample is not None and sample.launch_to_first_result_ms == ok["timing"]["launch_to_first_result_ms"]
    )
    ok["timing"]["launch_to_first_result_ms"] = None  # the Python agent run without cold_launch.sh
    assert native.cold_sample(ok) is None


# --------------------------------------------------------------------------- the build plan


@pytest.mark.parametrize("target", known_target_names())
def test_every_target_compiles_the_runner_with_its_cross_compiler_against_one_release(target: str) -> None:
    profile = resolve_target(target)
    plan = runner_plan(profile, "1.21.0")
    argv = plan.argv
    assert argv[0] == f"{profile.cross_prefix}gcc"
    assert f"-march={profile.march}" in argv
    assert '-DORCH_ORT_VERSION="1.21.0"' in argv
    # Loaded with dlopen by its SONAME, found in lib/ through the RPATH; nothing of ORT is linked.
    assert f'-DORCH_ORT_SONAME="{SONAME}"' in argv and "-ldl" in argv
    assert "-Wl,--disable-new-dtags,-rpath,$ORIGIN/lib" in argv
    assert not any(arg.startswith(("-l:", "-L")) for arg in argv)
    assert plan.library == "libonnxruntime.so.1.21.0"
    assert plan.as_dict()["board_layout"]["runner"] == "<release>/native/orch-runner"


def test_on_the_sysroot_route_the_runner_is_clangs_against_the_boards_sysroot() -> None:
    # As the wheel: linked against the board's glibc, not the build container's (a runner of the
    # container's cross GCC needed GLIBC_2.38 on the Jetson stand-in's glibc 2.36).
    argv = runner_plan(resolve_target("jetson-orin"), "1.21.0", sysroot="/sysroot").argv
    assert argv[:4] == ("clang", "--target=aarch64-linux-gnu", "--sysroot=/sysroot", "-fuse-ld=lld")
    assert '-DORCH_ORT_SONAME="libonnxruntime.so.1"' in argv and "-s" in argv


# The targets whose distribution meets ORT 1.21.0's minimums (the Jetsons' are refused before a plan:
# tests/builds/test_release_checks.py).
@pytest.mark.parametrize("target", [t for t in known_target_names() if resolve_target(t).bootstrap_suite])
def test_build_dry_run_shows_the_runner_build_and_the_shared_library_flag(orch_env, orch_cli, target) -> None:
    result = orch_cli(orch_env, "build", "--target", target, "--variant", "tuned", "--dry-run", "--json")
    assert result.returncode == 0, result.stderr
    plan = json.loads(result.stdout)
    assert "--build_shared_lib" in plan["build_argv"]
    runner = plan["native_runner"]
    assert runner["argv"][0].endswith("-gcc") and runner["ort_version"] == plan["ort_version"]
    text = orch_cli(orch_env, "build", "--target", target, "--variant", "tuned", "--dry-run").stderr
    assert "native runner:" in text and "onnxruntime_c_api.h" in text


def test_the_mlas_scope_builds_no_shared_library_and_no_runner(orch_env, orch_cli) -> None:
    result = orch_cli(
        orch_env,
        "build",
        "--target",
        "lab",
        "--variant",
        "tuned",
        "--scope",
        "mlas-test",
        "--dry-run",
        "--json",
    )
    plan = json.loads(result.stdout)
    assert "--build_shared_lib" not in plan["build_argv"] and "native_runner" not in plan


def test_the_wheels_c_library_is_found_by_its_release(tmp_path: Path) -> None:
    wheel = tmp_path / "onnxruntime-1.21.0-cp313-cp313-linux_aarch64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr("onnxruntime/capi/libonnxruntime.so.1.21.0", b"\x7fELF" + b"\0" * 96)
        archive.writestr("onnxruntime/capi/onnxruntime_pybind11_state.so", b"\x7fELF")
    assert wheel_library(wheel, "1.21.0") == ("onnxruntime/capi/libonnxruntime.so.1.21.0", 100)
    assert wheel_library(wheel, "1.22.0") is None


# --------------------------------------------------------------------------- deploy and bench


def artifact_with_runner(tmp_path: Path) -> Artifact:
    (tmp_path / "orch-runner").write_bytes(b"\x7fELF runner")
    manifest = Manifest(
        target="lab",
        variant="tuned",
        ort_version="1.21.0",
        wheel="onnxruntime-1.21.0-cp313-cp313-linux_aarch64.whl",
        native_runner=NativeRunner(
            file="orch-runner",
            size=11,
            ort_version="1.21.0",
            library="onnxruntime/capi/libonnxruntime.so.1.21.0",
            library_size=14_000_000,
        ),
    )
    return Artifact(directory=tmp_path, manifest=manifest)


def test_the_manifest_keeps_the_runner_record_through_json(tmp_path: Path) -> None:
    artifact = artifact_with_runner(tmp_path)
    again = Manifest.from_json(json.loads(json.dumps(artifact.manifest.to_json())), source="manifest.json")
    assert again.native_runner == artifact.manifest.native_runner
    assert Artifact(directory=tmp_path, manifest=again).runner_path == tmp_path / "orch-runner"


def test_deploy_ships_the_runner_under_native(tmp_path: Path) -> None:
    (runner,) = native_files(artifact_with_runner(tmp_path))
    assert runner.role == "runner" and runner.name == "native/orch-runner" and runner.size == 11
    bare = Artifact(
        directory=tmp_path, manifest=Manifest(target="lab", variant="stock", ort_version="1", wheel="w")
    )
    assert native_files(bare) == []


def release(rid: str, variant: str, *, runner: bool) -> ReleaseRef:
    path = f"/home/u/orch/releases/{rid}"
    return ReleaseRef(
        id=rid,
        variant=variant,
        path=path,
        python=f"{path}/venv/bin/python",
        models=("mlp.onnx",),
        created="2026-12-01T00:00:00Z",
        current=True,
        native={"runner": "native/orch-runner", "runner_size": 70_000, "library": "libonnxruntime.so.1.21.0",
                "library_size": 14_000_000} if runner else None,
    )  # fmt: skip


def test_both_runners_interleave_and_each_warm_run_is_followed_by_its_cold_starts() -> None:
    plan = make_plan(
        [BOARD], rounds=2, runner="both", cold_starts=3, agent=AgentOptions(sysfs_root="/fake/sys")
    )
    tuned = release("tuned-1.21.0-aaaa0000", "tuned", runner=True)
    steps = board_steps(plan, [tuned], ["mlp.onnx"])
    assert [(s.round, s.runner, s.launches) for s in steps] == [
        (1, "python", 0), (1, "python", 3), (1, "native", 0), (1, "native", 3),
        (2, "python", 0), (2, "python", 3), (2, "native", 0), (2, "native", 3),
    ]  # fmt: skip
    warm_native = steps[2].argv
    assert warm_native[0] == "/home/u/orch/releases/tuned-1.21.0-aaaa0000/native/orch-runner"
    assert warm_native[1:3] == ("--model", "/home/u/orch/releases/tuned-1.21.0-aaaa0000/models/mlp.onnx")
    assert "--sysfs-root" not in warm_native  # the runner reads no sysfs
    cold = steps[3].argv
    assert cold[:2] == ("sh", "-c") and cold[3:5] == ("cold_launch.sh", "3")
    launched = list(cold[5:])
    # Each launch is one process to its first result: no warm-up, one timed run, no minimum time.
    assert (
        launched[launched.index("--warmup") + 1] == "0" and launched[launched.index("--min-runs") + 1] == "1"
    )
    assert steps[0].key()["runner"] == "python" and steps[2].key()["runner"] == "native"


def test_native_needs_a_release_with_a_runner() -> None:
    plan = make_plan([BOARD], runner="native")
    old = release("stock-1.32.0-bbbb0000", "stock", runner=False)
    with pytest.raises(BenchError, match=re.escape("stock-1.32.0-bbbb0000 has no native runner")):
        check_runners(plan, [old], BOARD.name)
    check_runners(make_plan([BOARD]), [old], BOARD.name)  # python: fine


def test_bench_cli_refuses_an_unknown_runner_and_dry_runs_both(orch_env, orch_cli) -> None:
    bad = orch_cli(orch_env, "bench", "--all-devices", "--runner", "rust")
    assert bad.returncode == 2 and "--runner" in bad.stderr
    (Path(orch_env["ORCH_INVENTORY"])).write_text(
        "all:\n  hosts:\n    lab9: {hostname: 127.0.0.1, port: 1}\n"
    )
    dry = orch_cli(orch_env, "bench", "--host", "lab9", "--runner", "both", "--quick", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    plan = json.loads(dry.stdout)
    assert plan["runners"] == ["python", "native"] and plan["cold_starts"] == 3
    assert plan["steps_per_board"] == plan["rounds"] * 2 * 2  # rounds x runners x (warm + cold)


def board_document() -> dict:
    """A stored board document of `--runner both` (two launches each), as bench writes it."""
    ok = document("runner_ok.json")

    def launched(ms: float, runner: str) -> dict:
        doc = copy.deepcopy(ok)
        doc["timing"].update(
            launch_to_first_result_ms=ms, launch_to_main_ms=ms / 10, launch_source="launcher"
        )
        if runner == "python":
            doc["schema"] = "orch-bench-agent/1"
        return doc

    key = {"variant": "tuned", "release": "tuned-1.21.0-aaaa0000", "model": "mlp.onnx", "quant": "fp32",
           "ep": "cpu", "opt_level": "all", "intra_threads": 0, "inter_threads": 0}  # fmt: skip
    release_doc = vars(release("tuned-1.21.0-aaaa0000", "tuned", runner=True)) | {"wheel_size": 10_700_000}
    return {
        "board": "lab1",
        "releases": [release_doc],
        "measurements": [
            {"key": {**key, "runner": "python"}, "round": 1, "step": 0, "agent": launched(3000, "python")},
            {"key": {**key, "runner": "native"}, "round": 1, "step": 2, "agent": launched(300, "native")},
        ],
        "cold_starts": [
            {"key": {**key, "runner": "python"}, "round": 1, "step": 1,
             "launches": [launched(2900, "python"), launched(3100, "python")]},
            {"key": {**key, "runner": "native"}, "round": 1, "step": 3,
             "launches": [launched(250, "native"), launched(350, "native")]},
        ],
    }  # fmt: skip


def test_cold_starts_are_summarised_per_runner_with_their_footprint() -> None:
    found = native.cold_starts([board_document()])
    by_runner = {c.key["runner"]: c for c in found}
    assert by_runner["python"].first_result().n == 2 and by_runner["python"].first_result().p50 == 3000
    assert by_runner["native"].first_result().p50 == 300
    assert by_runner["native"].runner_bytes == 70_000 and by_runner["native"].library_bytes == 14_000_000
    assert by_runner["python"].library_bytes == 10_700_000
    # RSS of every process measured: two launches and the warm run.
    assert len(by_runner["native"].peak_rss_kb) == 3
    ((native_side, python_side),) = native.pair_runners(found)
    assert native.ratio(native_side, python_side) == pytest.approx(0.1)


def test_the_tables_show_counts_spread_and_the_ratio() -> None:
    found = native.cold_starts([board_document()])
    console = Console(width=200, record=True)
    console.print(cold_start_table(found))
    ratios = runner_ratio_table(found)
    assert ratios is not None
    console.print(ratios)
    text = console.export_text()
    assert "Cold start and footprint" in text and "relative comparison only" in text
    assert "70 kB + 14.0 MB" in text and "wheel 10.7 MB" in text
    assert "2/2" in text and "0.10" in text


def stored_run(env: dict[str, str], doc: dict) -> str:
    """``doc`` stored as one board's record of a finished run, where ``orch results`` looks."""
    store, run_id = ResultStore(Path(env["ORCH_RESULTS"])), new_run_id()
    store.begin_run(run_id, command="orch bench --runner both")
    store.write_board(run_id, {**doc, "schema": BOARD_SCHEMA, "run_id": run_id, "status": "ok"})
    store.finish_run(run_id, {"run_id": run_id, "boards": {doc["board"]: {"status": "ok"}}})
    return run_id


def python_only_document() -> dict:
    """The same board with the Python agent alone and no launches (`--runner python`)."""
    doc = board_document()
    doc["measurements"] = [m for m in doc["measurements"] if m["key"]["runner"] == "python"]
    del doc["cold_starts"]
    return doc


def row(*cells: str) -> str:
    """A pattern of consecutive cells of one row of a terminal table."""
    return r"\s*│\s*".join(re.escape(cell) for cell in cells)


def test_results_show_prints_the_cold_starts_of_both_runners_with_their_n(orch_env, orch_cli) -> None:
    run_id = stored_run(orch_env, board_document())
    text = orch_cli(orch_env, "results", "show", run_id, check=True).stderr
    # Each runner's row: n launches, then the median cold start (ms); then the ratio of the medians.
    assert re.search(row("lab1", "tuned", "mlp", "native", "2", "300", "50", "250-350"), text), text
    assert re.search(row("lab1", "tuned", "mlp", "python", "2", "3000", "100", "2900-3100"), text), text
    assert "70 kB + 14.0 MB" in text and "32 MB (n=3)" in text
    assert re.search(row("lab1", "tuned", "mlp", "2/2", "300→3000", "0.10"), text), text
    shown = json.loads(orch_cli(orch_env, "results", "show", run_id, "--json", check=True).stdout)
    by_runner = {item["runner"]: item for item in shown["cold_starts"]}
    assert by_runner["native"]["launch_to_first_result"]["n"] == 2
    assert by_runner["python"]["launch_to_first_result"]["p50_ms"] == 3000
    assert (
        by_runner["native"]["runner_bytes"] == 70_000 and by_runner["python"]["library_bytes"] == 10_700_000
    )


def test_the_html_report_has_the_cold_start_section(orch_env, tmp_path: Path, monkeypatch) -> None:
    # The report's verify section reads the results directory: the test's, not the user's.
    monkeypatch.setenv("ORCH_RESULTS", orch_env["ORCH_RESULTS"])
    record = ResultStore().load(stored_run(orch_env, board_document()))
    written = write_html(record, [], tmp_path / "report.html")
    page = written["html"].read_text()
    assert "<h2>Cold start and footprint</h2>" in page and EMULATED_NOTE in page
    # n, median, IQR, min-max of each runner, then the footprint.
    assert "<td>native</td><td>2</td><td>300</td><td>50</td><td>250-350</td>" in page, page
    assert "<td>python</td><td>2</td><td>3000</td><td>100</td><td>2900-3100</td>" in page, page
    assert "<td>70 kB + 14.0 MB</td>" in page and "<td>wheel 10.7 MB + Python, numpy</td>" in page
    assert "<td>2/2</td><td>300→3000</td><td>0.10</td>" in page
    report = json.loads(written["json"].read_text())
    assert sorted(item["runner"] for item in report["cold_starts"]) == ["native", "python"]


def test_a_python_only_run_without_launches_has_no_cold_start_section(
    orch_env, orch_cli, tmp_path: Path
) -> None:
    run_id = stored_run(orch_env, python_only_document())
    text = orch_cli(orch_env, "results", "show", run_id, check=True).stderr
    assert "P50 / P99 latency" in text and "Cold start" not in text
    shown = json.loads(orch_cli(orch_env, "results", "show", run_id, "--json", check=True).stdout)
    assert shown["cold_starts"] == []
    page = tmp_path / "report.html"
    orch_cli(orch_env, "report", run_id, "--html", str(page), check=True)
    assert "<h1>Benchmark run" in page.read_text() and "Cold start" not in page.read_text()
    report = json.loads((tmp_path / "report_files" / "report.json").read_text())
    assert report["cold_starts"] == []


def test_the_sample_mlp_takes_128_features_and_is_the_same_bytes_every_time() -> None:
    model = mlp()
    assert model.SerializeToString() == mlp().SerializeToString()  # idempotent deploys
    (features,) = model.graph.input
    assert [d.dim_param or d.dim_value for d in features.type.tensor_type.shape.dim] == ["batch", 128]
    session = onnxruntime.InferenceSession(model.SerializeToString())
    (scores,) = session.run(None, {"features": np.ones((2, 128), dtype=np.float32)})
    assert scores.shape == (2, 10) and np.isfinite(scores).all()
