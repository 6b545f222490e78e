"""A ``BoardSession`` that counts what it sends to the board: a deploy report's ``remote_calls``
(an unchanged re-deploy should need one)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from orchestrator.adapters.session import BoardSession, CommandResult, Stream


class CountedSession:
    """Passes every call on to ``session`` and counts it."""

    def __init__(self, session: BoardSession) -> None:
        self._session = session
        self.board = session.board
        self.label = session.label
        self.calls = 0

    def close(self) -> None:
        self._session.close()

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        check: bool = True,
        stdin: bytes | None = None,
    ) -> CommandResult:
        self.calls += 1
        return self._session.run(argv, timeout=timeout, check=check, stdin=stdin)

    def run_command_line(
        self, command_line: str, *, timeout: float | None = None, check: bool = True
    ) -> CommandResult:
        self.calls += 1
        return self._session.run_command_line(command_line, timeout=timeout, check=check)

    def run_script(
        self, script: str, args: Sequence[str] = (), *, timeout: float | None = None, check: bool = True
    ) -> CommandResult:
        self.calls += 1
        return self._session.run_script(script, args, timeout=timeout, check=check)

    def open_stream(self, argv: Sequence[str]) -> Stream:
        self.calls += 1
        return self._session.open_stream(argv)

    def put(
        self, local: Path, remote_path: str, *, progress: Callable[[int, int], None] | None = None
    ) -> None:
        self.calls += 1
        self._session.put(local, remote_path, progress=progress)

    def get(self, remote_path: str, local: Path) -> None:
        self.calls += 1
        self._session.get(remote_path, local)

    def rename(self, src: str, dst: str) -> None:
        self.calls += 1
        self._session.rename(src, dst)

    def stat(self, path: str) -> int | None:
        self.calls += 1
        return self._session.stat(path)

    def mkdir_p(self, path: str) -> None:
        self.calls += 1
        self._session.mkdir_p(path)

    def home(self) -> str:
        self.calls += 1
        return self._session.home()
