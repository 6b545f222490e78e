"""The agent host (board_side/agent_host.py) and its workstation side (bench/agent_host.py), run for
real on the workstation: the host is the workstation's Python, the agent the real bench_agent.py on
the x86 onnxruntime. Only the transport differs from a board: a local process's pipes instead of an
SSH channel (the lab tests of `orch bench` run it over sshd)."""

from __future__ import annotations

import json
import os
import re
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from bench_models import conv_model

from orchestrator.adapters.session import CommandResult
from orchestrator.adapters.ssh import CommandTimeout
from orchestrator.bench import agent_host
from orchestrator.bench.agent_host import AgentRunner
from orchestrator.bench.plan import ReleaseRef, Setting, Step
from tests.bench.test_agent_local import AGENT

PROBE = """\
import json, os, sys, time

def main():
    args = sys.argv[1:]
    if args == ["sigill"]:
        os.kill(os.getpid(), __import__("signal").SIGILL)
    if args == ["sleep"]:
        time.sleep(30)
    if args[:1] == ["stuck-once"] and not os.path.exists(args[1]):
        open(args[1], "w").close()
        time.sleep(30)  # no CPU time: stuck, the first time only
    print(json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "argv": args, "path0": sys.path[0],
                      "preloaded": [m for m in ("numpy", "onnxruntime") if m in sys.modules]}))
    print("to stderr", file=sys.stderr)
    return 3 if args == ["exit3"] else 0

if __name__ == "__main__":
    sys.exit(main())
"""


class LocalStream:
    """A local process's stdin/stdout as the byte stream an SSH channel gives."""

    def __init__(self, argv: Sequence[str]) -> None:
        self.process = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        self.timeout: float | None = None

    def send(self, data: bytes) -> int:
        assert self.process.stdin is not None
        self.process.stdin.write(data)
        self.process.stdin.flush()
        return len(data)

    def recv(self, size: int) -> bytes:
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], self.timeout)
        if not ready:
            raise TimeoutError("recv timed out")
        return os.read(self.process.stdout.fileno(), size)

    def settimeout(self, timeout: float | None) -> None:
        self.timeout = timeout

    def shutdown_write(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()

    def close(self) -> None:
        self.process.kill()
        self.process.wait()


class LocalSession:
    """The two ways a step starts: a stream for the host, a command for everything else."""

    label = "workstation"

    def __init__(self) -> None:
        self.streams: list[LocalStream] = []
        self.commands: list[tuple[str, ...]] = []

    def open_stream(self, argv: Sequence[str]) -> LocalStream:
        self.streams.append(LocalStream(argv))
        return self.streams[-1]

    def run(self, argv: Sequence[str], *, timeout: float | None = None, check: bool = True) -> CommandResult:
        self.commands.append(tuple(argv))
        start = time.monotonic()
        done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
        return CommandResult(
            exit_code=done.returncode,
            stdout=done.stdout,
            stderr=done.stderr,
            duration=time.monotonic() - start,
        )


def step(script: str, *args: str, runner: str = "python") -> Step:
    release = ReleaseRef(id="r", variant="stock", path="/r", python=sys.executable, models=("m.onnx",))
    return Step(
        index=0,
        round=1,
        release=release,
        model="m.onnx",
        model_file="m.onnx",
        quant="fp32",
        setting=Setting(),
        cooldown_s=0,
        argv=(sys.executable, script, *args),
        runner=runner,
    )


@pytest.fixture()
def runner() -> Iterator[tuple[AgentRunner, LocalSession, list[str]]]:
    session = LocalSession()
    warnings: list[str] = []
    agent_runner = AgentRunner(session, warnings.append)  # type: ignore[arg-type]  # what it uses
    yield agent_runner, session, warnings
    agent_runner.close()


@pytest.fixture()
def probe(tmp_path: Path) -> str:
    path = tmp_path / "probe.py"
    path.write_text(PROBE)
    return str(path)


def test_each_run_is_a_fresh_process_of_one_host_with_nothing_preloaded(runner, probe) -> None:
    agent_runner, session, warnings = runner
    first, how = agent_runner.run(step(probe, "a", "b c"), timeout=60)
    second, _ = agent_runner.run(step(probe, "exit3"), timeout=60)
    assert how == AgentRunner.FORKED and first.exit_code == 0 and second.exit_code == 3
    one, two = json.loads(first.stdout), json.loads(second.stdout)
    assert one["argv"] == ["a", "b c"] and one["preloaded"] == [] == two["preloaded"]
    assert one["path0"] == str(Path(probe).parent)
    assert one["pid"] != two["pid"] and one["ppid"] == two["ppid"] == session.streams[0].process.pid
    assert first.stderr == "to stderr\n"
    assert len(session.streams) == 1 and not session.commands and not warnings


def test_the_real_agent_measures_through_the_host_as_it_does_on_its_own(runner, tmp_path) -> None:
    agent_runner, _, _ = runner
    model = conv_model(tmp_path / "tiny.onnx")
    args = ["--model", str(model), "--warmup", "1", "--min-runs", "4", "--min-duration", "0"]
    for _ in range(2):
        result, how = agent_runner.run(step(str(AGENT), *args), timeout=120)
        document = json.loads(result.stdout)
        assert result.exit_code == 0 and document["ok"] is True, document.get("error")
        assert document["stats"]["n"] == 4 and document["timing"]["import_s"] > 0  # imported by the run
        assert how == AgentRunner.FORKED


def test_a_run_killed_by_sigill_reads_as_the_shell_says_and_the_host_serves_on(runner, probe) -> None:
    agent_runner, _, _ = runner
    killed, _ = agent_runner.run(step(probe, "sigill"), timeout=60)
    assert killed.exit_code == 128 + signal.SIGILL
    assert agent_runner.run(step(probe), timeout=60)[0].exit_code == 0


def test_native_and_cold_start_steps_are_commands(runner, probe) -> None:
    agent_runner, session, _ = runner
    _, how = agent_runner.run(step(probe, runner="native"), timeout=60)
    assert how == AgentRunner.COMMAND and len(session.commands) == 1 and not session.streams


def test_a_run_slower_than_its_timeout_is_a_timeout_naming_the_board(runner, probe) -> None:
    agent_runner, _, warnings = runner
    with pytest.raises(CommandTimeout, match=re.escape("workstation: timed out after 0.5s")):
        agent_runner.run(step(probe, "sleep"), timeout=0.5)
    assert not warnings


def test_a_stuck_run_is_killed_and_made_again_as_a_command_and_so_are_the_next(
    runner, probe, monkeypatch, tmp_path
) -> None:
    agent_runner, session, warnings = runner
    monkeypatch.setattr(agent_host, "STALL_S", 1.0)
    started = time.monotonic()
    result, how = agent_runner.run(step(probe, "stuck-once", str(tmp_path / "once")), timeout=60)
    assert how == AgentRunner.COMMAND and result.exit_code == 0
    assert time.monotonic() - started < 20, "not waited for until the run's end or its timeout"
    assert (
        len(warnings) == 1 and "used no CPU time for 1s" in warnings[0] and "killed as stuck" in warnings[0]
    )
    assert agent_runner.fallbacks == [warnings[0].split("; ")[0]]
    assert agent_runner.run(step(probe), timeout=60)[1] == AgentRunner.COMMAND
    assert len(session.commands) == 2


def test_a_host_that_stops_answering_or_dies_is_not_waited_for(runner, probe, monkeypatch) -> None:
    agent_runner, session, warnings = runner
    agent_runner.run(step(probe), timeout=60)
    monkeypatch.setattr(agent_host, "SILENT_S", 1.0)
    os.kill(session.streams[0].process.pid, signal.SIGSTOP)  # no heartbeat, no reply
    try:
        result, how = agent_runner.run(step(probe), timeout=60)
    finally:
        if session.streams[0].process.poll() is None:
            os.kill(session.streams[0].process.pid, signal.SIGCONT)
    assert how == AgentRunner.COMMAND and result.exit_code == 0
    assert "the agent host sent nothing for 1s" in warnings[0]


def test_a_dead_host_falls_back_to_a_command(runner, probe) -> None:
    agent_runner, session, warnings = runner
    agent_runner.run(step(probe), timeout=60)
    session.streams[0].process.kill()
    session.streams[0].process.wait()
    result, how = agent_runner.run(step(probe), timeout=60)
    assert how == AgentRunner.COMMAND and result.exit_code == 0
    assert "workstation: the agent host ended during an agent run" in warnings[0]


def test_start_readies_one_host_per_release_before_the_first_run(runner, probe, tmp_path) -> None:
    agent_runner, session, warnings = runner
    other = tmp_path / "other.py"
    other.write_text(PROBE)
    agent_runner.start([step(probe), step(str(other)), step(probe), step(probe, runner="native")])
    assert len(session.streams) == 2 and all(host.ready for host in agent_runner.hosts.values())
    assert agent_runner.run(step(str(other)), timeout=60)[1] == AgentRunner.FORKED
    assert len(session.streams) == 2 and not warnings


def test_an_agent_the_host_cannot_load_is_run_as_a_command_that_shows_why(runner, tmp_path) -> None:
    agent_runner, _, warnings = runner
    broken = tmp_path / "broken.py"
    broken.write_text("def main(:\n")
    agent_runner.start([step(str(broken))])
    assert "the agent host did not start" in warnings[0]
    result, how = agent_runner.run(step(str(broken)), timeout=60)
    assert how == AgentRunner.COMMAND and result.exit_code != 0 and "SyntaxError" in result.stderr
