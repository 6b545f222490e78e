"""The workstation's side of ``board_side/agent_host.py``: one agent host per release on a board.

``orch bench`` used to start every agent run as its own SSH command, paying a Python interpreter
start and a command round trip each time (about a second per run under emulation, a third of the
orchestration overhead). The host is started once per release and forks one agent process per
run, so each run still imports onnxruntime and makes its session in a process of its own (the
run-level statistics' unit is unchanged), and what a run returns is the ``CommandResult`` a
command would have returned. Cold-start steps keep their own command: a cold start *is* an exec.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence

from orchestrator.adapters.session import BoardSession, CommandResult, Stream
from orchestrator.adapters.ssh import CommandTimeout
from orchestrator.board_side import read_text
from orchestrator.errors import RemoteError

_CHUNK = 1 << 16


class AgentHost:
    """One running host: ``run(args)`` is one agent run with bench_agent.py's ``args``."""

    def __init__(self, session: BoardSession, python: str, agent: str) -> None:
        self.label = session.label
        self.argv = (python, "-c", read_text("agent_host.py"), agent)
        self.stream: Stream = session.open_stream(self.argv)
        self.buffer = bytearray()

    def run(self, args: Sequence[str], *, timeout: float) -> CommandResult:
        start = time.monotonic()
        request = json.dumps({"args": list(args)}).encode() + b"\n"
        try:
            self.stream.send(request)
            line = self._line(start + timeout)
        except (OSError, EOFError) as error:
            raise RemoteError(f"{self.label}: connection lost during an agent run: {error}") from error
        if line is None:
            raise CommandTimeout(
                f"{self.label}: timed out after {timeout:g}s in an agent run",
                stdout="",
                stderr="",
                duration=time.monotonic() - start,
            )
        try:
            reply = json.loads(line)
            return CommandResult(
                exit_code=int(reply["exit"]),
                stdout=str(reply["stdout"]),
                stderr=str(reply["stderr"]),
                duration=time.monotonic() - start,
            )
        except (ValueError, KeyError, TypeError) as error:
            raise RemoteError(
                f"{self.label}: the agent host answered something else than a reply: {line[:200]!r}"
            ) from error

    def _line(self, deadline: float) -> str | None:
        """The next reply line, or None at the deadline; EOFError when the host ended."""
        while b"\n" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return None
            self.stream.settimeout(remaining)
            try:
                chunk = self.stream.recv(_CHUNK)
            except TimeoutError:
                return None
            if not chunk:
                raise EOFError("the agent host ended (the board stopped, or its Python failed to start)")
            self.buffer += chunk
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer = bytearray(rest)
        return line.decode(errors="replace")

    def close(self) -> None:
        try:
            self.stream.shutdown_write()  # end of input: the host exits after the current run
        except (OSError, EOFError):
            pass
        self.stream.close()


class AgentHosts:
    """The hosts of one board's bench run, started on first use, one per (python, agent)."""

    def __init__(self, session: BoardSession) -> None:
        self.session = session
        self.hosts: dict[tuple[str, str], AgentHost] = {}

    def run(self, python: str, agent: str, args: Sequence[str], *, timeout: float) -> CommandResult:
        key = (python, agent)
        if key not in self.hosts:
            self.hosts[key] = AgentHost(self.session, python, agent)
        try:
            return self.hosts[key].run(args, timeout=timeout)
        except RemoteError:
            self.hosts.pop(key).close()  # a host that failed once is not trusted with the next run
            raise

    def close(self) -> None:
        for host in self.hosts.values():
            try:
                host.close()
            except (OSError, EOFError, RemoteError):
                pass
        self.hosts.clear()
