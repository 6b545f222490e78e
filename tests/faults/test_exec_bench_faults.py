"""Remote work ends with orch, and an interrupted bench keeps what it measured: faults provoked for
real on a lab board (``f1`` = lab1 of the session's lab), checked afterwards on the board itself (its
container's /proc, independently of orch's connection) and in what orch printed and stored.

The exec tests need no release; the bench tests deploy the stock artifact once (one tiny model)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from pathlib import Path
from typing import IO, Any

import pytest
from deploy_world import Faults, make_faults
from stock_baseline import download_stock

from orchestrator.adapters.engine import Engine

# The agent host's text is in its argv (`python -c`): every agent process of a bench carries it.
AGENT_MARK = "one Python per board and release"


@pytest.fixture(scope="session")
def stock_wheel() -> Path:
    """The official wheel (as the shared fixture gives it), kept where a run without pytest's cache finds it."""
    cache = Path(os.environ.get("ORCH_TEST_CACHE") or "/var/tmp/orch-test-cache")
    return download_stock(cache / "stock-wheel")


@pytest.fixture(scope="module")
def faults(lab: Any, stock_build: Any, tmp_path_factory: pytest.TempPathFactory) -> Faults:
    return make_faults(lab, stock_build, tmp_path_factory.mktemp("exec-bench-faults"))


class Output:
    """A running orch's stdout and stderr, read as they come."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.text: list[str] = []
        self.lock = threading.Lock()
        for stream in (process.stdout, process.stderr):
            threading.Thread(target=self._read, args=(stream,), daemon=True).start()

    def _read(self, stream: IO[str] | None) -> None:
        assert stream is not None
        for line in stream:
            with self.lock:
                self.text.append(line)

    def all(self) -> str:
        with self.lock:
            return "".join(self.text)

    def wait_for(self, words: str, process: subprocess.Popen[str], timeout: float = 900) -> None:
        deadline = time.monotonic() + timeout
        while words not in self.all():
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"{words!r} never came (exit {process.poll()}):\n{self.all()}", pytrace=False)
            time.sleep(0.2)


def _wait_on_board(faults: Faults, mark: str, process: subprocess.Popen[str], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while not faults.board_processes(mark):
        if process.poll() is not None or time.monotonic() > deadline:
            pytest.fail(
                f"{mark!r} never seen in {faults.container} (orch: {process.poll()}); there:\n"
                + Engine().exec(faults.container, ["ps", "-eo", "pid,args"])[1][-4000:],
                pytrace=False,
            )
        time.sleep(0.2)


def _ctrl_c(process: subprocess.Popen[str]) -> int:
    os.killpg(process.pid, signal.SIGINT)  # what Ctrl-C in a terminal does: the whole group
    return process.wait(timeout=120)


def test_ctrl_c_during_exec_stops_the_command_on_the_board(faults: Faults) -> None:
    process = faults.start("exec", "--host", "f1", "--", "sleep 47")
    output = Output(process)
    _wait_on_board(faults, "sleep 47", process, 120)
    assert _ctrl_c(process) == 130, output.all()
    time.sleep(0.5)  # the reader threads take the last lines
    assert "stopped the command on f1" in output.all(), output.all()
    assert faults.board_processes("sleep 47") == [], "the board's sleep outlived orch"


def test_exec_timeout_stops_the_command_on_the_board(faults: Faults) -> None:
    result, _ = faults.orch("exec", "--host", "f1", "--timeout", "3", "--", "sleep", "53", timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode == 4, output
    assert "timed out after 3s (--timeout)" in output and "stopped the command on f1" in output, output
    assert faults.board_processes("sleep 53") == [], "the board's sleep outlived the timeout"


def test_sigkill_of_orch_during_exec_ends_the_command_on_the_board(faults: Faults) -> None:
    process = faults.start("exec", "--host", "f1", "--", "sleep", "59")
    _wait_on_board(faults, "sleep 59", process, 120)
    process.kill()
    process.wait(timeout=30)
    gone = faults.gone_within("sleep 59", 20)
    assert gone is not None, "the board's sleep outlived a killed orch"


def _bench(faults: Faults) -> tuple[subprocess.Popen[str], Output, str]:
    process = faults.start("bench", "--host", "f1", "--quick", "--rounds", "4", "--min-runs", "6")
    output = Output(process)
    output.wait_for("bench run ", process, timeout=120)
    run_id = output.all().split("bench run ", 1)[1].split()[0]
    return process, output, run_id


def test_ctrl_c_during_bench_keeps_the_rounds_measured_and_marks_the_run_interrupted(faults: Faults) -> None:
    deployed, _ = faults.orch("deploy", "--host", "f1", "--model", str(faults.tiny))
    assert deployed.returncode == 0, deployed.stdout + deployed.stderr
    process, output, run_id = _bench(faults)
    output.wait_for("round 2/4", process)  # round 1 measured, round 2's agent starts
    _wait_on_board(faults, AGENT_MARK, process, 300)
    assert _ctrl_c(process) == 130, output.all()
    time.sleep(0.5)
    said = output.all()
    assert "stopped the command on f1" in said and f"run {run_id} interrupted" in said, said
    assert faults.gone_within(AGENT_MARK, 5) is not None, "an agent process outlived orch"

    stored = json.loads((Path(faults.env["ORCH_RESULTS"]) / run_id / "f1.json").read_text())
    assert stored["status"] == "interrupted" and stored["interrupted"]["rounds_complete"] >= 1
    assert len(stored["measurements"]) >= 1
    assert stored["measurements"][0]["agent"]["timing"]["latencies_ms"], "round 1's samples are lost"

    listed, runs = faults.orch("results", "list", "--json")
    assert {run["run_id"]: run["status"] for run in runs}[run_id] == "interrupted", listed.stdout
    shown, _ = faults.orch("results", "show", run_id)
    assert f"run {run_id} is interrupted" in shown.stdout + shown.stderr
    refused, _ = faults.orch("results", "compare", run_id, run_id)
    assert refused.returncode == 2 and "--allow-partial" in refused.stderr, refused.stderr
    allowed, document = faults.orch("results", "compare", run_id, run_id, "--allow-partial", "--json")
    assert allowed.returncode == 0 and document["partial"] == [run_id], allowed.stderr


def test_a_bench_whose_orch_was_killed_is_abandoned_not_running(faults: Faults) -> None:
    process, _, run_id = _bench(faults)
    _wait_on_board(faults, AGENT_MARK, process, 600)
    process.kill()
    process.wait(timeout=30)
    assert faults.gone_within(AGENT_MARK, 20) is not None, "an agent process outlived a killed orch"
    _, runs = faults.orch("results", "list", "--json")
    assert {run["run_id"]: run["status"] for run in runs}[run_id] == "abandoned"
