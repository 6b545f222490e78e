"""The local process runner: what a caller sees for success, failure, a missing program, a time-out."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

from orchestrator.adapters import process


def test_output_exit_code_and_tail() -> None:
    result = process.run(
        [sys.executable, "-c", "import sys; print('a'); print('b', file=sys.stderr); sys.exit(3)"]
    )
    assert not result.ok and result.exit_code == 3
    assert result.stdout == "a\n" and result.stderr == "b\n"
    assert result.tail() == "a\nb"
    assert result.argv[0] == sys.executable


def test_a_missing_program_reads_as_exit_127_naming_it(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-tool"
    result = process.run([str(missing), "--version"])
    assert result.exit_code == process.NOT_STARTED
    assert str(missing) in result.stderr and "No such file" in result.stderr


def test_a_time_out_reads_as_exit_124_and_keeps_partial_output() -> None:
    code = "import sys, time; print('started', flush=True); time.sleep(30)"
    result = process.run([sys.executable, "-c", code], timeout=1)
    assert result.exit_code == process.TIMED_OUT
    assert "started" in result.stdout and "timed out after 1 s" in result.stderr
    assert result.duration < 20


def test_streaming_hands_over_every_line_and_keeps_the_last(tmp_path: Path) -> None:
    seen: list[str] = []
    code = "import sys\nfor i in range(40): print(f'line {i}', file=sys.stderr if i % 2 else sys.stdout, flush=True)"
    result = process.run_streaming([sys.executable, "-c", code], seen.append, keep=5)
    assert result.ok and seen == [f"line {i}" for i in range(40)]
    assert result.stdout.splitlines() == [f"line {i}" for i in range(35, 40)]


def test_a_producer_streams_stdout_and_reports_its_exit(tmp_path: Path) -> None:
    (tmp_path / "f.txt").write_text("x" * 100_000)
    with process.Producer(["tar", "-C", str(tmp_path), "-c", "f.txt"]) as archive:
        size = len(archive.stdout.read())
    assert archive.result is not None and archive.result.ok and size > 100_000
    with process.Producer(["tar", "-C", str(tmp_path / "missing"), "-c", "."]) as failing:
        failing.stdout.read()
    assert failing.result is not None and not failing.result.ok and "missing" in failing.result.stderr


def test_an_interrupted_parent_lets_its_attached_child_clean_up_before_it_stops(tmp_path: Path) -> None:
    """`orch demo` runs each step with run_attached: a Ctrl-C (or a kill of orch alone) must reach the
    step once and let it stop its build container, not kill it 0.25 s later."""

    child = (
        "import signal, sys, time, pathlib\n"
        f"done = pathlib.Path({str(tmp_path / 'cleaned')!r})\n"
        f"pathlib.Path({str(tmp_path / 'started')!r}).touch()\n"
        "try:\n"
        "    time.sleep(60)\n"
        "except KeyboardInterrupt:\n"
        "    time.sleep(1.5)  # the clean-up: seconds, as stopping a container takes\n"
        "    done.write_text('interrupted once')\n"
        "    sys.exit(130)\n"
    )
    parent = (
        "import sys\n"
        "from orchestrator.adapters import process\n"
        "try:\n"
        f"    process.run_attached([sys.executable, '-c', {child!r}])\n"
        "except KeyboardInterrupt:\n"
        "    sys.exit(130)\n"
    )
    running = subprocess.Popen([sys.executable, "-c", parent])
    deadline = time.monotonic() + 30
    while not (tmp_path / "started").exists() and time.monotonic() < deadline:
        time.sleep(0.1)
    running.send_signal(signal.SIGINT)  # to orch alone, as `kill -INT` does
    assert running.wait(timeout=30) == 130
    assert (tmp_path / "cleaned").read_text() == "interrupted once"
