"""The board-side guard (board_side/guard.sh) and the command line the SSH adapter builds for it.

The guard runs here, in this machine's POSIX sh, exactly as sshd's shell runs it on a board: the
command's output and exit status come through as they are, its input is exactly the bytes orch
sends first, and once its stdin ends (orch stopped it, exited or lost the connection) the command's
whole process group is gone.
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import time
import uuid

import pytest

from orchestrator.adapters.ssh import guarded_command
from orchestrator.board_side import read_text

GUARD = read_text("guard.sh")


def test_the_command_line_is_the_guard_then_every_value_as_a_quoted_argument() -> None:
    hostile = ["printf", "%s\\n", "$(touch /tmp/pwned)", "a b", "'", "`id`", ";rm -rf ~", ""]
    words = shlex.split(guarded_command("run", hostile))
    assert words == ["sh", "-c", GUARD, "orch-guard", "run", "-", *hostile]
    assert shlex.split(guarded_command("run", ["sh", "-s", "--", "x"], input_size=42))[4:6] == ["run", "42"]
    assert shlex.split(guarded_command("line", ["uname -a | cut -c1-5"]))[4:] == [
        "line",
        "-",
        "uname -a | cut -c1-5",
    ]
    assert shlex.split(guarded_command("stream", ["python3", "-c", "x"]))[4:6] == ["stream", "-"]


@pytest.mark.parametrize(
    ("mode", "argv", "size"),
    [("run", [], 0), ("line", ["a", "b"], 0), ("stream", ["cat"], 5), ("run", ["cat"], -1)],
)
def test_impossible_guard_commands_are_refused(mode: str, argv: list[str], size: int) -> None:
    with pytest.raises(ValueError):
        guarded_command(mode, argv, input_size=size)  # type: ignore[arg-type]


def _start(mode: str, size: str, *argv: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        ["sh", "-c", GUARD, "orch-guard", mode, size, *argv],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )


def _argvs() -> dict[str, list[str]]:
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as handle:
                found[pid] = handle.read().decode(errors="replace").split("\0")[:-1]
        except OSError:
            continue
    return found


def _processes(mark: str) -> list[str]:
    """Every process whose command line holds ``mark`` (the guard and the shell too)."""
    return [pid for pid, argv in _argvs().items() if mark in " ".join(argv) and pid != str(os.getpid())]


def _wait_for_two_sleeps(mark: str) -> None:
    # The sleeps themselves, by their exact argv: the guard's and the shell's command lines hold the
    # mark too, and so does, for an instant, each subshell the guard forks.
    def sleeps() -> int:
        return sum(argv == ["sleep", mark] for argv in _argvs().values())

    deadline = time.monotonic() + 10
    while sleeps() < 2 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert sleeps() >= 2, "the command did not start"


def test_output_input_and_exit_status_are_the_commands_own() -> None:
    script = b'printf "%s|" "$@"; cat >&2; exit 7\n'
    guard = _start("run", str(len(script)), "sh", "-c", "sh -s -- one 'two three' <&0", "sh")
    assert guard.stdin is not None
    guard.stdin.write(script + b"not the script's: orch never sends more")
    guard.stdin.flush()
    out, err = guard.stdout.read(), guard.stderr.read()  # type: ignore[union-attr]
    assert guard.wait(10) == 7
    assert out == b"one|two three|" and err == b""
    guard.stdin.close()


def test_a_command_that_ends_at_once_on_a_busy_board_leaves_its_stderr_as_it_was() -> None:
    # The guard tells its watcher that the command ended with USR1; on a busy CPU that can come
    # before the watcher has set its trap, and its shell then printed "User defined signal 1" into
    # the command's stderr. Two busy processes on the one CPU the guards run on make that moment
    # likely (about 8 runs in 100 before the fix); the loop runs in sh, as sshd's shell runs a guard.
    each_run = 'err=$(sh -c "$0" orch-guard run - sh -c "echo oops >&2; exit 7" 2>&1); echo "$?:$err" | tr "\\n" /; echo'
    busy = [subprocess.Popen(["taskset", "-c", "0", "yes"], stdout=subprocess.DEVNULL) for _ in range(2)]
    try:
        runs = subprocess.Popen(
            ["taskset", "-c", "0", "sh", "-c", f"for _ in $(seq 300); do {each_run}; done", GUARD],
            stdin=subprocess.PIPE,  # kept open, as orch keeps the channel open while a command runs
            stdout=subprocess.PIPE,
            text=True,
        )
        outcomes = runs.stdout.read().splitlines()  # type: ignore[union-attr]
        runs.wait(60)
        runs.stdin.close()  # type: ignore[union-attr]
    finally:
        for each in busy:
            each.kill()
            each.wait()
    assert len(outcomes) == 300
    assert set(outcomes) == {"7:oops/"}


@pytest.mark.parametrize("sent", [signal.SIGKILL, signal.SIGUSR1, signal.SIGTERM])
def test_a_command_killed_by_a_signal_ends_the_guard_by_that_signal(sent: signal.Signals) -> None:
    guard = _start("run", "-", "sh", "-c", f"kill -{sent.name.removeprefix('SIG')} $$")
    assert guard.wait(10) == -sent
    guard.stdin.close()  # type: ignore[union-attr]


def test_input_cut_short_never_runs_the_command() -> None:
    mark = uuid.uuid4().hex
    guard = _start("run", "100", "sh", "-c", f"touch /tmp/{mark}")
    _, err = guard.communicate(b"echo only part of it", timeout=10)
    assert guard.returncode == 125 and b"cut short" in err
    assert not os.path.exists(f"/tmp/{mark}")


@pytest.mark.parametrize("mode", ["run", "line", "stream"])
def test_the_end_of_stdin_ends_the_whole_process_group(mode: str) -> None:
    mark = f"{time.time_ns() % 10**9}.5"  # sleep takes a fraction: a mark no other process has
    command = f"sleep {mark} & sleep {mark}; echo never"
    argv = [command] if mode == "line" else ["sh", "-c", command]
    guard = _start(mode, "-", *argv)
    _wait_for_two_sleeps(mark)
    guard.stdin.close()  # type: ignore[union-attr]
    guard.wait(15)
    out = guard.stdout.read()  # type: ignore[union-attr]
    assert out == b""
    assert _processes(f"sleep {mark}") == [], "a process of the command outlived the guard"
    # A stream's command gets 3 s to end at its input's end; a command's group ends at once.
    assert guard.returncode == -signal.SIGTERM


def test_a_stream_passes_its_input_on_and_ends_cleanly() -> None:
    guard = _start("stream", "-", "sh", "-c", 'while read -r line; do echo "got $line"; done; echo done')
    out, err = guard.communicate(b"a\nb\n", timeout=15)
    assert (guard.returncode, out, err) == (0, b"got a\ngot b\ndone\n", b"")


def test_a_member_that_ignores_sigterm_is_killed_before_the_guard_exits() -> None:
    # The command's own process ends at the TERM; its child ignores it: the KILL five seconds later
    # still comes, because the guard waits for the group to be gone instead of cancelling that.
    mark = f"{time.time_ns() % 10**9}.25"
    command = f"sh -c 'trap \"\" TERM; sleep {mark}; sleep {mark}' & sleep {mark}"
    guard = _start("run", "-", "sh", "-c", command)
    _wait_for_two_sleeps(mark)
    guard.stdin.close()  # type: ignore[union-attr]
    guard.wait(20)
    assert _processes(f"sleep {mark}") == [], "a member that ignores SIGTERM outlived the guard"
