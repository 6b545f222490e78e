"""The workstation's side of ``board_side/agent_host.py``: one agent host per release on a board.

``orch bench`` used to start every agent run as its own SSH command, paying a Python interpreter
start and a command round trip each time (about a second per run under emulation, a third of the
orchestration overhead). The host is started once per release and forks one agent process per
run, so each run still imports onnxruntime and makes its session in a process of its own (the
run-level statistics' unit is unchanged), and what a run returns is the ``CommandResult`` a
command would have returned. Cold-start steps keep their own command: a cold start *is* an exec.

A host that stops answering (no heartbeat), or a run that the host finds stuck (no CPU time used
for ``STALL_S``), is not waited for until the step's timeout: ``AgentRunner`` makes that run again
as a command of its own and uses commands for the board's remaining runs, saying so.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Sequence
from typing import ClassVar, Literal, cast

from orchestrator.adapters import ssh
from orchestrator.adapters.session import BoardSession, CommandResult, Stream
from orchestrator.adapters.ssh import CommandTimeout
from orchestrator.bench.plan import Step
from orchestrator.bench.reading import Malformed, check
from orchestrator.board_side import read_text
from orchestrator.errors import RemoteError

_CHUNK = 1 << 16
STALL_S = 120.0  # a run that used no CPU time for this long is stuck (a loaded machine still gives some)
SILENT_S = 120.0  # the host sends a heartbeat every 10 s while a run goes on; this long without: stuck


# How a run's process was started: forked by the release's agent host, or as a command of its own.
StartedAs = Literal["fork of the agent host", "command"]


class AgentHostFailed(RemoteError):
    """The agent host could not give a run a process that measured it: run it as a command instead."""


class AgentHost:
    """One running host: ``run(args)`` is one agent run with bench_agent.py's ``args``."""

    def __init__(self, session: BoardSession, python: str, agent: str) -> None:
        self.label = session.label
        self.argv = (python, "-c", read_text("agent_host.py"), agent)
        self.stream: Stream = session.open_stream(self.argv)
        self.buffer = bytearray()
        self.ready = False

    def wait_ready(self) -> None:
        """Wait for the greeting the host sends once it has loaded the agent."""
        if self.ready:
            return
        try:
            greeting = self._reply(time.monotonic() + SILENT_S)
        except (OSError, EOFError) as error:
            raise AgentHostFailed(f"{self.label}: the agent host did not start: {error}") from error
        if greeting is None or not greeting.get("ready"):
            raise AgentHostFailed(f"{self.label}: the agent host did not start: {str(greeting)[:200]!r}")
        self.ready = True

    def run(self, args: Sequence[str], *, timeout: float, stall_s: float) -> CommandResult:
        start = time.monotonic()
        request = json.dumps({"args": list(args), "stall_s": stall_s}).encode() + b"\n"
        self.wait_ready()
        try:
            self.stream.send(request)
            reply = self._reply(start + timeout)
        except (OSError, EOFError) as error:
            raise AgentHostFailed(
                f"{self.label}: the agent host ended during an agent run: {error}"
            ) from error
        if reply is None:
            raise CommandTimeout(
                f"{self.label}: timed out after {timeout:g}s in an agent run",
                stdout="",
                stderr="",
                duration=time.monotonic() - start,
            )
        try:
            if reply.get("stalled"):
                cpu_s = check(reply, self.label, (("cpu_s", "figure"),))["cpu_s"]
                raise AgentHostFailed(
                    f"{self.label}: an agent run used no CPU time for {stall_s:g}s"
                    f" (after {cast(float, cpu_s):.1f} s of CPU) and was killed as stuck"
                )
            done = check(reply, self.label, (("exit", "integer"), ("stdout", "text"), ("stderr", "text")))
        except Malformed as error:
            raise AgentHostFailed(
                f"{self.label}: the agent host answered something else than a reply: {str(reply)[:200]!r}"
            ) from error
        return CommandResult(
            exit_code=cast(int, done["exit"]),
            stdout=cast(str, done["stdout"]),
            stderr=cast(str, done["stderr"]),
            duration=time.monotonic() - start,
        )

    def _reply(self, deadline: float) -> dict[str, object] | None:
        """The run's reply as the board sent it (heartbeats read and dropped), or None at the deadline;
        ``run`` checks its keys."""
        while True:
            line = self._line(min(deadline, time.monotonic() + SILENT_S))
            if line is None:
                if time.monotonic() >= deadline:
                    return None
                raise AgentHostFailed(f"{self.label}: the agent host sent nothing for {SILENT_S:g}s")
            try:
                document = json.loads(line)
            except ValueError:
                document = None
            if not isinstance(document, dict):
                raise AgentHostFailed(f"{self.label}: the agent host answered {line[:200]!r}")
            if not document.get("alive"):
                return document

    def _line(self, deadline: float) -> str | None:
        """The next line, or None at the deadline; EOFError when the host ended."""
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
                raise EOFError("the board stopped, or its Python failed to start")
            self.buffer += chunk
        line, _, rest = bytes(self.buffer).partition(b"\n")
        self.buffer = bytearray(rest)
        return line.decode(errors="replace")

    def close(self) -> None:
        with contextlib.suppress(OSError, EOFError):
            self.stream.shutdown_write()  # end of input: the host exits after the current run
        self.stream.close()


class AgentRunner:
    """How one board's bench steps are started: Python agent runs as forks of one host per
    (python, agent), everything else (native runner, cold starts) as commands. After a host failed,
    that run and the board's remaining runs are commands; ``warn`` is told once, and ``fallbacks``
    keeps what happened for the board's document."""

    FORKED: ClassVar[StartedAs] = "fork of the agent host"
    COMMAND: ClassVar[StartedAs] = "command"

    def __init__(self, session: BoardSession, warn: Callable[[str], None]) -> None:
        self.session = session
        self.warn = warn
        self.hosts: dict[tuple[str, str], AgentHost] = {}
        self.fallbacks: list[str] = []

    def start(self, steps: Sequence[Step]) -> None:
        """Start the hosts these steps need, all at once, and wait until each is ready: none is still
        starting (and taking CPU time) while a run measures."""
        try:
            for step in steps:
                if self._forked(step):
                    self._host(step.argv[0], step.argv[1])
            for host in self.hosts.values():
                host.wait_ready()
        except AgentHostFailed as error:
            self._fall_back(error, "the board's runs")

    def run(self, step: Step, *, timeout: float) -> tuple[CommandResult, StartedAs]:
        """The step's result, and how its process was started (FORKED or COMMAND)."""
        if self._forked(step):
            python, agent, *args = step.argv  # agent_argv: python, bench_agent.py, its options
            try:
                return self._host(python, agent).run(args, timeout=timeout, stall_s=STALL_S), self.FORKED
            except AgentHostFailed as error:
                if ssh.stopping():  # orch stopped the host: nothing is run again
                    raise ssh.CommandStopped(f"{self.session.label}: stopped the agent host") from error
                self._fall_back(error, "this run and the next ones")
        return self.session.run(step.argv, timeout=timeout, check=False), self.COMMAND

    def _host(self, python: str, agent: str) -> AgentHost:
        """The host of (python, agent), started when it is first needed."""
        if (python, agent) not in self.hosts:
            self.hosts[(python, agent)] = AgentHost(self.session, python, agent)
        return self.hosts[(python, agent)]

    def _forked(self, step: Step) -> bool:
        return step.runner == "python" and not step.launches and not self.fallbacks

    def _fall_back(self, error: AgentHostFailed, which: str) -> None:
        self.fallbacks.append(error.message)
        self.warn(f"{error.message}; {which} start as commands of their own")
        self.close()

    def close(self) -> None:
        for host in self.hosts.values():
            with contextlib.suppress(OSError, EOFError, RemoteError):
                host.close()
        self.hosts.clear()
