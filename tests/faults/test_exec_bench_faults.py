"""Remote work ends with orch, an interrupted bench keeps what it measured, and bench holds the board
lock: faults provoked for real on the lab's boards (``f1`` = lab1, ``f2`` = lab2 of the session's
lab), checked afterwards on the board itself (its container's processes, independently of orch's
connection) and in what orch printed and stored.

Each signal is sent once the board is seen in the state the test is about (the command itself
running there, round 1 measured and round 2's run measuring): a machine busy with other tests
slows every step, and a signal sent on a timer could land before the command started or after it
ended. The exec tests need no release; the bench tests deploy the stock artifact (one tiny model).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

import pytest
from deploy_world import Faults, make_faults, signal_a_thread
from stock_baseline import download_stock

# The agent host's text is in its argv (`python -c`): every agent process of a bench carries it.
AGENT_MARK = "one Python per board and release"
# Each agent run measures this long at least: round 2's run is still measuring when the signal comes.
RUN_S = "15"


@pytest.fixture(scope="session")
def stock_wheel() -> Path:
    """The official wheel (as the shared fixture gives it), kept where a run without pytest's cache finds it."""
    cache = Path(os.environ.get("ORCH_TEST_CACHE") or "/var/tmp/orch-test-cache")
    return download_stock(cache / "stock-wheel")


@pytest.fixture(scope="module")
def faults(lab: Any, stock_build: Any, tmp_path_factory: pytest.TempPathFactory) -> Faults:
    return make_faults(lab, stock_build, tmp_path_factory.mktemp("exec-bench-faults"))


@pytest.fixture(scope="module")
def deployed(faults: Faults) -> Faults:
    """The faults' world with the stock artifact and one tiny model deployed on f1."""
    result, _ = faults.orch("deploy", "--host", "f1", "--model", str(faults.tiny))
    assert result.returncode == 0, result.stdout + result.stderr
    return faults


class Output:
    """A running orch's stdout and stderr, read as they come."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.text: list[str] = []
        self.lock = threading.Lock()
        self.readers = [
            threading.Thread(target=self._read, args=(stream,), daemon=True)
            for stream in (process.stdout, process.stderr)
        ]
        for reader in self.readers:
            reader.start()

    def _read(self, stream: IO[str] | None) -> None:
        assert stream is not None
        for line in stream:
            with self.lock:
                self.text.append(line)

    def all(self) -> str:
        with self.lock:
            return "".join(self.text)

    def finish(self) -> str:
        """Everything orch wrote, once it has exited: both streams read to their end."""
        for reader in self.readers:
            reader.join(60)
        return self.all()

    def wait_for(self, words: str, process: subprocess.Popen[str], timeout: float = 900) -> None:
        deadline = time.monotonic() + timeout
        while words not in self.all():
            if process.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"{words!r} never came (exit {process.poll()}):\n{self.all()}", pytrace=False)
            time.sleep(0.2)


def _wait_on_board(
    faults: Faults, seen: Callable[[], bool], what: str, process: subprocess.Popen[str], timeout: float
) -> None:
    """Until ``seen()`` (the board's container in the state the test is about) or orch ended."""
    deadline = time.monotonic() + timeout
    while not seen():
        if process.poll() is not None or time.monotonic() > deadline:
            there = "\n".join(" ".join(argv)[:200] for argv in faults.container_argvs().values())
            pytest.fail(f"{what} never seen on f1 (orch: {process.poll()}); there:\n{there}", pytrace=False)
        time.sleep(0.1)


def _command_running(faults: Faults, argv: list[str], process: subprocess.Popen[str]) -> None:
    """Until the board runs ``argv`` itself (not only the guard or shell whose arguments hold it)."""
    _wait_on_board(faults, lambda: bool(faults.running(*argv)), " ".join(argv), process, 120)


def _stop(process: subprocess.Popen[str], sig: signal.Signals) -> int:
    if sig == signal.SIGINT:
        os.killpg(process.pid, sig)  # what Ctrl-C in a terminal does: the whole group
    else:
        process.send_signal(sig)  # kill, timeout(1), a service manager: orch alone
    return process.wait(timeout=120)


# (signal, exit code, what orch says last)
STOPS = pytest.mark.parametrize(
    ("sig", "code", "word"),
    [(signal.SIGINT, 130, "interrupted"), (signal.SIGTERM, 143, "terminated (SIGTERM)")],
    ids=["ctrl-c", "sigterm"],
)


@STOPS
def test_ctrl_c_or_sigterm_during_exec_stops_the_command_on_the_board(
    faults: Faults, sig: signal.Signals, code: int, word: str
) -> None:
    sleep = ["sleep", "47" if sig == signal.SIGINT else "43"]
    process = faults.start("exec", "--host", "f1", "--", " ".join(sleep))
    output = Output(process)
    _command_running(faults, sleep, process)
    assert _stop(process, sig) == code, output.finish()
    said = output.finish()
    assert "stopped the command on f1" in said and said.rstrip().splitlines()[-1] == word, said
    assert faults.board_processes(" ".join(sleep)) == [], "the board's sleep outlived orch"


def test_a_ctrl_c_taken_by_another_thread_of_orch_during_exec_stops_the_command_at_once(
    faults: Faults,
) -> None:
    # The kernel may hand a signal sent to orch to any of its threads; Python's handler runs in the
    # main thread, which must not sleep until the board's command has ended (then exit 0).
    sleep = ["sleep", "41"]
    process = faults.start("exec", "--host", "f1", "--", " ".join(sleep))
    output = Output(process)
    _command_running(faults, sleep, process)
    start = time.monotonic()
    signal_a_thread(process.pid, signal.SIGINT)
    code = process.wait(timeout=120)
    said = output.finish()
    assert code == 130, said
    assert time.monotonic() - start < 25, f"orch waited for the command to end:\n{said}"
    assert "stopped the command on f1" in said and said.rstrip().splitlines()[-1] == "interrupted", said
    assert faults.board_processes(" ".join(sleep)) == [], "the board's sleep outlived orch"


def test_exec_timeout_stops_the_command_on_the_board(faults: Faults) -> None:
    result, _ = faults.orch("exec", "--host", "f1", "--timeout", "3", "--", "sleep", "53", timeout=120)
    output = result.stdout + result.stderr
    assert result.returncode == 4, output
    assert "timed out after 3s (--timeout)" in output and "stopped the command on f1" in output, output
    assert faults.board_processes("sleep 53") == [], "the board's sleep outlived the timeout"


def test_sigkill_of_orch_during_exec_ends_the_command_on_the_board(faults: Faults) -> None:
    process = faults.start("exec", "--host", "f1", "--", "sleep", "59")
    _command_running(faults, ["sleep", "59"], process)
    process.kill()
    process.wait(timeout=30)
    gone = faults.gone_within("sleep 59", 20)
    assert gone is not None, "the board's sleep outlived a killed orch"


def _bench(faults: Faults, rounds: int = 4) -> tuple[subprocess.Popen[str], Output, str]:
    process = faults.start(
        "bench",
        "--host",
        "f1",
        "--quick",
        "--rounds",
        str(rounds),
        "--min-runs",
        "6",
        "--min-duration",
        RUN_S,
    )
    output = Output(process)
    output.wait_for("bench run ", process, timeout=120)
    run_id = output.all().split("bench run ", 1)[1].split()[0]
    return process, output, run_id


def _agent_processes(faults: Faults) -> int:
    """The agent host's processes on f1: the host, and while a run measures, that run (forked)."""
    return sum(
        1
        for argv in faults.container_argvs().values()
        if argv and argv[0].endswith("/venv/bin/python") and AGENT_MARK in " ".join(argv)
    )


def _round_two_measuring(faults: Faults, process: subprocess.Popen[str], output: Output) -> None:
    """Until round 1 is measured (orch says round 2 starts once round 1's run is in the board's
    document) and round 2's run process measures on the board."""
    output.wait_for("round 2/4", process)
    _wait_on_board(faults, lambda: _agent_processes(faults) >= 2, "round 2's agent run", process, 300)


@STOPS
def test_ctrl_c_or_sigterm_during_bench_keeps_the_rounds_measured_and_marks_the_run_interrupted(
    deployed: Faults, sig: signal.Signals, code: int, word: str
) -> None:
    faults = deployed
    process, output, run_id = _bench(faults)
    _round_two_measuring(faults, process, output)
    assert _stop(process, sig) == code, output.finish()
    said = output.finish()
    assert "stopped the command on f1" in said and f"run {run_id} interrupted" in said, said
    assert said.rstrip().splitlines()[-1] == word, said
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


def test_a_bench_whose_orch_was_killed_is_abandoned_not_running(deployed: Faults) -> None:
    faults = deployed
    process, output, run_id = _bench(faults)
    _round_two_measuring(faults, process, output)
    process.kill()
    process.wait(timeout=30)
    assert faults.gone_within(AGENT_MARK, 20) is not None, "an agent process outlived a killed orch"
    _, runs = faults.orch("results", "list", "--json")
    assert {run["run_id"]: run["status"] for run in runs}[run_id] == "abandoned"


def test_a_board_whose_lock_another_orch_holds_is_refused_by_bench_naming_it_the_others_measured(
    deployed: Faults,
) -> None:
    faults = deployed
    result, _ = faults.orch("deploy", "--host", "f2", "--model", str(faults.tiny))
    assert result.returncode == 0, result.stdout + result.stderr
    here = socket.gethostname()
    holder = {"command": "deploy", "host": here, "pid": os.getpid(), "started": "2026-12-02T07:00:00+00:00"}
    with faults.holding_lock(holder):  # f1's lock, as a deploy holds it
        bench, document = faults.orch(
            "bench",
            "--host",
            "f1",
            "--host",
            "f2",
            "--quick",
            "--rounds",
            "1",
            "--lock-timeout",
            "1",
            "--json",
        )
    said = " ".join(bench.stderr.split())
    assert bench.returncode == 8, (
        bench.stdout + bench.stderr
    )  # some boards failed, the others' results stored
    busy = (
        f"f1: the board is busy: orch deploy (pid {os.getpid()} on {here}, since 2026-12-02T07:00:00+00:00)"
        " holds its lock; waited 1s, nothing was measured"
    )
    assert busy in said and "--lock-timeout" in said, said
    assert document["boards"]["f1"]["status"] == "failed" and busy in document["boards"]["f1"]["error"]
    assert document["boards"]["f2"]["status"] == "ok", document["boards"]
    assert {series["board"] for series in document["series"]} == {"f2"}, document["series"]


def test_a_deploy_while_bench_measures_waits_for_its_lock_then_is_refused_naming_it(deployed: Faults) -> None:
    faults = deployed
    process, output, run_id = _bench(faults, rounds=3)
    output.wait_for("round 1/3", process)  # the bench holds f1's lock from before it measures
    refused, document = faults.orch(
        "deploy", "--host", "f1", "--model", str(faults.tiny2), "--lock-timeout", "1", "--json"
    )
    assert refused.returncode == 6, refused.stdout + refused.stderr
    error = document["boards"]["f1"]["error"]
    assert f"f1: the board is busy: orch bench (pid {process.pid} on {socket.gethostname()}, since " in error
    assert "holds its lock; waited 1s, nothing was changed" in error, error
    assert process.wait(timeout=900) == 0, output.finish()  # the bench went on, undisturbed
    stored = json.loads((Path(faults.env["ORCH_RESULTS"]) / run_id / "f1.json").read_text())
    assert stored["status"] == "ok" and len(stored["measurements"]) == 3, stored["status"]
