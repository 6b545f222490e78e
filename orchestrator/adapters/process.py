"""The one runner of local processes (pip, git, debootstrap, tar, qemu --version, ssh-add, umount).

Every call returns a ``ProcessResult`` instead of raising: a program that cannot be started reads
as exit code 127 and one that outlives its time limit as 124 (the shell's and coreutils'
conventions), with the reason in ``stderr``. Callers turn a failed result into their own error
type with ``result.tail()``, so every message quotes the same last lines of output.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from orchestrator.adapters.session import CommandResult

if TYPE_CHECKING:
    from typing_extensions import Self

NOT_STARTED = 127
# How long an interrupted child is given to clean up (a build container stopped, boards' commands
# ended: seconds) before it is killed.
CHILD_CLEANUP_S = 120.0
TIMED_OUT = 124


@dataclass(frozen=True, kw_only=True)
class ProcessResult(CommandResult):
    """A finished local process: a board command's result plus the argv that ran."""

    argv: tuple[str, ...]


def run(
    argv: Sequence[str],
    *,
    cwd: Path | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
) -> ProcessResult:
    """Run ``argv`` to completion, text output captured."""
    started = time.monotonic()
    command = tuple(str(part) for part in argv)
    try:
        done = subprocess.run(
            command,
            cwd=cwd,
            env=dict(env) if env is not None else None,
            capture_output=True,
            text=True,
            errors="replace",
            timeout=timeout,
            check=False,
        )
    except OSError as error:
        return _failed(command, NOT_STARTED, f"{command[0]}: {error.strerror or error}", started)
    except subprocess.TimeoutExpired as expired:
        return ProcessResult(
            argv=command,
            exit_code=TIMED_OUT,
            stdout=_text(expired.stdout),
            stderr=_text(expired.stderr) + f"\n{command[0]}: timed out after {timeout:g} s",
            duration=time.monotonic() - started,
        )
    return ProcessResult(
        argv=command,
        exit_code=done.returncode,
        stdout=done.stdout,
        stderr=done.stderr,
        duration=time.monotonic() - started,
    )


def run_streaming(argv: Sequence[str], on_line: Callable[[str], None], *, keep: int = 15) -> ProcessResult:
    """Run ``argv`` with stderr merged into stdout, handing each line to ``on_line`` as it comes.

    Only the last ``keep`` lines are kept in the result (long tools such as debootstrap print
    thousands)."""
    started = time.monotonic()
    command = tuple(str(part) for part in argv)
    try:
        process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
        )
    except OSError as error:
        return _failed(command, NOT_STARTED, f"{command[0]}: {error.strerror or error}", started)
    assert process.stdout is not None
    tail: list[str] = []
    for raw in process.stdout:
        line = raw.rstrip()
        tail = [*tail, line][-keep:]
        on_line(line)
    code = process.wait()
    return ProcessResult(
        argv=command, exit_code=code, stdout="\n".join(tail), stderr="", duration=time.monotonic() - started
    )


def run_attached(argv: Sequence[str]) -> int:
    """Run ``argv`` on this terminal (its output is the user's to read, live) and return its exit
    code. When orch is interrupted (Ctrl-C, SIGTERM), the child is interrupted once and given time to
    clean up (stop its build container, its boards' commands) before orch goes on stopping.

    The child runs in a process group of its own, so a Ctrl-C reaches it only through orch: exactly
    once, whether the terminal or a ``kill`` of orch alone stopped it (``subprocess.run`` would kill
    it 0.25 s after the interruption, leaving its containers running)."""
    command = tuple(str(part) for part in argv)
    try:
        child = subprocess.Popen(command, preexec_fn=os.setpgrp)  # noqa: PLW1509 -- only setpgrp, async-signal-safe
    except OSError as error:
        print(f"{command[0]}: {error.strerror or error}", file=sys.stderr)
        return NOT_STARTED
    try:
        return child.wait()
    except KeyboardInterrupt:
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signal.SIGINT)
        try:
            child.wait(timeout=CHILD_CLEANUP_S)
        except subprocess.TimeoutExpired:
            child.kill()
            child.wait()
        raise


class Producer:
    """A process whose stdout the caller consumes as a byte stream (``tar -c`` into an upload).

    ``with Producer(argv) as producer: consume(producer.stdout)``; after the block, ``result``
    holds how it ended (stdout is closed first, so a producer blocked on a full pipe ends too).
    A program that cannot be started raises ``FileNotFoundError`` naming it."""

    def __init__(self, argv: Sequence[str]) -> None:
        self.argv = tuple(str(part) for part in argv)
        self.result: ProcessResult | None = None
        self._started = time.monotonic()
        try:
            self._process = subprocess.Popen(self.argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        except OSError as error:
            raise FileNotFoundError(f"{self.argv[0]}: {error.strerror or error}") from error
        assert self._process.stdout is not None
        self.stdout: IO[bytes] = self._process.stdout

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stdout.close()
        _, stderr = self._process.communicate()
        self.result = ProcessResult(
            argv=self.argv,
            exit_code=self._process.returncode,
            stdout="",
            stderr=stderr.decode(errors="replace"),
            duration=time.monotonic() - self._started,
        )


def _failed(argv: tuple[str, ...], code: int, reason: str, started: float) -> ProcessResult:
    return ProcessResult(
        argv=argv, exit_code=code, stdout="", stderr=reason, duration=time.monotonic() - started
    )


def _text(data: str | bytes | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data
