"""How a stored run stands, as `orch results` shows it: complete (ok, failed), interrupted (what was
measured kept), running, or abandoned (its orch is gone without finishing it); partial data is used
by a comparison or a report only with --allow-partial; an empty RUN is bad input."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from bench_models import agent_doc, conv_model
from test_results_report import board_doc

from orchestrator.bench import results, run_state
from orchestrator.bench.results import ResultStore


def _begin(store: ResultStore, model: Path, *, rounds: int) -> str:
    run_id = results.new_run_id()
    store.begin_run(run_id, command="orch bench --opt-level disable,all")
    agents = [(opt, r, agent_doc(model, opt)) for r in range(1, rounds + 1) for opt in ("disable", "all")]
    store.write_board(run_id, board_doc(run_id, "labA", agents))
    return run_id


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return conv_model(tmp_path_factory.mktemp("model") / "fold.onnx", folded_chain=8)


def _interrupted(store: ResultStore, model: Path) -> str:
    """A run orch stored when interrupted: labA interrupted after 4 whole rounds of the planned 6."""
    run_id = results.new_run_id()
    store.begin_run(run_id, command="orch bench --opt-level disable,all --rounds 6")
    agents = [(opt, r, agent_doc(model, opt)) for r in range(1, 5) for opt in ("disable", "all")]
    document = board_doc(run_id, "labA", agents)
    document.update(status="interrupted", error="orch was interrupted; what was measured before is kept")
    document["interrupted"] = {"steps_done": 8, "steps_planned": 12, "rounds_complete": 4}
    store.write_board(run_id, document)
    store.finish_run(
        run_id,
        {
            "run_id": run_id,
            "command": "orch bench --rounds 6",
            "plan": {"rounds": 6},
            "boards": {"labA": {"status": "interrupted"}},
            "status": "interrupted",
            "rounds_complete": 4,
        },
    )
    return run_id


def _dead_pid() -> int:
    process = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], check=True, capture_output=True, text=True
    )
    return int(process.stdout)


def test_an_unfinished_run_is_running_while_its_orch_lives_and_abandoned_once_it_is_gone(
    tmp_path: Path, model: Path
) -> None:
    store = ResultStore(tmp_path / "results")
    alive = _begin(store, model, rounds=2)
    gone = _begin(store, model, rounds=2)
    owner = json.loads((store.root / gone / run_state.RUNNING_FILE).read_text())
    owner["pid"] = _dead_pid()
    (store.root / gone / run_state.RUNNING_FILE).write_text(json.dumps(owner))
    # A pid given to another process since: the start time differs, so it is not taken for orch.
    reused = _begin(store, model, rounds=2)
    owner = json.loads((store.root / reused / run_state.RUNNING_FILE).read_text())
    owner["start_ticks"] = (owner["start_ticks"] or 0) + 1
    (store.root / reused / run_state.RUNNING_FILE).write_text(json.dumps(owner))
    statuses = {run["run_id"]: run["status"] for run in store.list_runs()}
    assert statuses == {alive: "running", gone: "abandoned", reused: "abandoned"}
    assert store.load(gone).status == "abandoned" and not store.load(gone).complete
    assert store.load(alive).status == "running"
    # A rebuilt index says the same (the JSON files are the record).
    store.reindex()
    assert {run["run_id"]: run["status"] for run in store.list_runs()}[gone] == "abandoned"


def test_an_interrupted_run_keeps_its_rounds_and_is_never_taken_for_a_complete_one(
    tmp_path: Path, model: Path
) -> None:
    store = ResultStore(tmp_path / "results")
    run_id = _interrupted(store, model)
    record = store.load(run_id)
    assert record.status == "interrupted" and not record.complete
    assert [len(series.rounds) for series in record.series()] == [4, 4]
    assert record.failed == {}  # interrupted is not failed: its measurements are good
    assert "interrupted: 4 of 6 rounds complete" in record.partial_note()
    assert not (store.root / run_id / run_state.RUNNING_FILE).exists()
    listed = {run["run_id"]: run for run in store.list_runs()}[run_id]
    assert listed["status"] == "interrupted" and listed["boards_failed"] == 0


def test_results_cli_says_interrupted_and_uses_partial_data_only_when_asked(
    tmp_path: Path, model: Path, orch_env: dict[str, str], orch_cli
) -> None:
    store = ResultStore(tmp_path / "results")
    complete = _begin(store, model, rounds=4)
    store.finish_run(complete, {"run_id": complete, "boards": {"labA": {"status": "ok"}}, "status": "ok"})
    partial = _interrupted(store, model)
    env = {**orch_env, "ORCH_RESULTS": str(store.root)}

    listing = orch_cli(env, "results", "list")
    assert listing.returncode == 0 and "interrupted (partial)" in listing.stderr + listing.stdout
    shown = orch_cli(env, "results", "show", partial)
    out = shown.stdout + shown.stderr
    assert shown.returncode == 0 and f"run {partial} is interrupted: 4 of 6 rounds complete" in out
    assert "interrupted" in out and "comparisons are shown only with --allow-partial" in out
    shown_json = json.loads(orch_cli(env, "results", "show", partial, "--json").stdout)
    assert shown_json["status"] == "interrupted" and shown_json["complete"] is False
    assert shown_json["comparisons"] == []

    refused = orch_cli(env, "results", "compare", complete, partial)
    assert refused.returncode == 2 and "--allow-partial" in refused.stderr
    assert f"run {partial} is interrupted" in refused.stderr and "Traceback" not in refused.stderr
    allowed = orch_cli(env, "results", "compare", complete, partial, "--allow-partial", "--json")
    assert allowed.returncode == 0, allowed.stderr
    document = json.loads(allowed.stdout)
    assert document["partial"] == [partial] and document["comparisons"]
    report = orch_cli(env, "report", partial, "--html", str(tmp_path / "r.html"))
    assert report.returncode == 2 and "--allow-partial" in report.stderr


@pytest.mark.parametrize("ref", ["", "  "])
def test_an_empty_run_is_refused_as_bad_input(
    tmp_path: Path, model: Path, orch_env: dict[str, str], orch_cli, ref: str
) -> None:
    store = ResultStore(tmp_path / "results")
    run_id = _begin(store, model, rounds=1)
    store.finish_run(run_id, {"run_id": run_id, "boards": {"labA": {"status": "ok"}}, "status": "ok"})
    env = {**orch_env, "ORCH_RESULTS": str(store.root)}
    shown = orch_cli(env, "results", "show", ref)
    assert shown.returncode == 2 and "RUN is empty" in shown.stderr and "Traceback" not in shown.stderr
    assert run_id not in shown.stdout + shown.stderr.split("hint")[0]
