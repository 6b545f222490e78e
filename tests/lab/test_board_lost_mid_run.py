"""A board that dies in the middle of a fleet run: the others' results are kept, the dead one is named.

Its own lab of three boards (a private ORCH_HOME): one board's container is killed while every
board is running a command; orch must finish the other two, print their output, name the dead
board with its cause, and exit 8 (some boards failed).
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

BOARDS = 3
VICTIM = "lab2"
TIMEOUT = 90


@pytest.fixture
def three_boards(orch_env: dict[str, str], orch_cli) -> Iterator[dict[str, str]]:
    up = orch_cli(orch_env, "lab", "up", "--boards", str(BOARDS), timeout=900)
    assert up.returncode == 0, up.stderr[-3000:]
    try:
        yield orch_env
    finally:
        orch_cli(orch_env, "lab", "down", timeout=300)


@pytest.mark.integration
def test_a_board_killed_mid_run_is_named_and_the_others_results_kept(three_boards, orch_cli) -> None:
    env = three_boards
    status = json.loads(orch_cli(env, "lab", "status", "--json", check=True).stdout)
    victim = next(board["container"] for board in status["boards"] if board["name"] == VICTIM)
    started = time.monotonic()
    run = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "orchestrator",
            "exec",
            "--group",
            "lab",
            "--timeout",
            str(TIMEOUT),
            "--json",
            "--",
            "sh",
            "-c",
            "echo started; sleep 20; echo finished",
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(10)  # every board connected and sleeping (SSH under emulation takes a few seconds)
    assert run.poll() is None, "the command ended before the board could be killed"
    subprocess.run(["docker", "kill", victim], check=True, capture_output=True)
    stdout, stderr = run.communicate(timeout=TIMEOUT + 60)
    elapsed = time.monotonic() - started
    assert run.returncode == 8, stderr[-3000:]
    results = json.loads(stdout)
    assert set(results) == {f"lab{i}" for i in range(1, BOARDS + 1)}
    for name, result in results.items():
        if name == VICTIM:
            assert result["error"] and result["stdout"].split() != ["started", "finished"], result
        else:
            assert result["exit_code"] == 0 and result["stdout"].split() == ["started", "finished"], result
    assert "connection lost" in results[VICTIM]["error"], "the cause must be said"
    print(f"board lost mid-run: {VICTIM}: {results[VICTIM]['error']!r}; run took {elapsed:.0f} s")
