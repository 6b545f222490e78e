"""A board that is a directory of the workstation: a ``BoardSession`` whose commands and board-side
scripts run with the local ``sh`` (``sh -s -- ARGS``, as the SSH session sends them) and whose
login home is that directory, so a deploy's board steps run for real without a board or sshd."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from orchestrator.adapters.session import CommandResult
from orchestrator.adapters.ssh import CommandFailed
from orchestrator.board import Board


class LocalBoard:
    """Every path relative to ``home`` (the login home), every command run there."""

    def __init__(self, board: Board, home: Path) -> None:
        self.board = board
        self.label = board.name
        self.home_dir = Path(os.path.realpath(home))  # as `pwd -P` on the board names it
        self.home_dir.mkdir(parents=True, exist_ok=True)

    def _path(self, path: str) -> Path:
        return self.home_dir / path

    def _done(
        self, argv: Sequence[str], done: subprocess.CompletedProcess[str], start: float, check: bool
    ) -> CommandResult:
        result = CommandResult(
            exit_code=done.returncode,
            stdout=done.stdout,
            stderr=done.stderr,
            duration=time.monotonic() - start,
        )
        if check and done.returncode != 0:
            raise CommandFailed(
                f"{self.label}: {argv[0]} exited {done.returncode}: {done.stderr}", result=result
            )
        return result

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        check: bool = True,
        stdin: bytes | None = None,
    ) -> CommandResult:
        start = time.monotonic()
        done = subprocess.run(
            list(argv), cwd=self.home_dir, capture_output=True, text=True, timeout=timeout, check=False
        )
        return self._done(argv, done, start, check)

    def run_script(
        self, script: str, args: Sequence[str] = (), *, timeout: float | None = None, check: bool = True
    ) -> CommandResult:
        start = time.monotonic()
        done = subprocess.run(
            ["sh", "-s", "--", *args],
            input=script,
            cwd=self.home_dir,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        return self._done(["sh -s"], done, start, check)

    def put(
        self, local: Path, remote_path: str, *, progress: Callable[[int, int], None] | None = None
    ) -> None:
        shutil.copyfile(local, self._path(remote_path))
        if progress is not None:
            size = local.stat().st_size
            progress(size, size)

    def rename(self, src: str, dst: str) -> None:
        os.replace(self._path(src), self._path(dst))

    def stat(self, path: str) -> int | None:
        target = self._path(path)
        return target.stat().st_size if target.exists() else None

    def mkdir_p(self, path: str) -> None:
        self._path(path).mkdir(parents=True, exist_ok=True)

    def home(self) -> str:
        return str(self.home_dir)

    def close(self) -> None:
        pass
