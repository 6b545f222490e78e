"""The agent host (board_side/agent_host.py) and its workstation side (bench/agent_host.py), run for
real on the workstation: the host is the workstation's Python, the agent the real bench_agent.py on
the x86 onnxruntime. Only the transport differs from a board: a local process's pipes instead of an
SSH channel (the lab tests of `orch bench` run it over sshd)."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from bench_models import conv_model

from orchestrator.adapters.ssh import CommandTimeout
from orchestrator.bench.agent_host import AgentHosts
from orchestrator.errors import RemoteError
from tests.bench.test_agent_local import AGENT

PROBE = """\
import json, os, sys, time
if sys.argv[1:] == ["sigill"]:
    os.kill(os.getpid(), __import__("signal").SIGILL)
if sys.argv[1:] == ["sleep"]:
    time.sleep(30)
print(json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "argv": sys.argv[1:],
                  "preloaded": [m for m in ("numpy", "onnxruntime") if m in sys.modules]}))
print("to stderr", file=sys.stderr)
sys.exit(3 if sys.argv[1:] == ["exit3"] else 0)
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
    label = "workstation"

    def __init__(self) -> None:
        self.streams: list[LocalStream] = []

    def open_stream(self, argv: Sequence[str]) -> LocalStream:
        self.streams.append(LocalStream(argv))
        return self.streams[-1]


@pytest.fixture()
def hosts() -> Iterator[tuple[AgentHosts, LocalSession]]:
    session = LocalSession()
    agent_hosts = AgentHosts(session)  # type: ignore[arg-type]  # the two methods it uses
    yield agent_hosts, session
    agent_hosts.close()


@pytest.fixture()
def probe(tmp_path: Path) -> str:
    path = tmp_path / "probe.py"
    path.write_text(PROBE)
    return str(path)


def test_each_run_is_a_fresh_process_of_one_host_with_nothing_preloaded(hosts, probe) -> None:
    agent_hosts, session = hosts
    first = agent_hosts.run(sys.executable, probe, ["a", "b c"], timeout=60)
    second = agent_hosts.run(sys.executable, probe, ["exit3"], timeout=60)
    assert first.exit_code == 0 and second.exit_code == 3
    one, two = json.loads(first.stdout), json.loads(second.stdout)
    assert one["argv"] == ["a", "b c"] and one["preloaded"] == [] == two["preloaded"]
    assert one["pid"] != two["pid"] and one["ppid"] == two["ppid"] == session.streams[0].process.pid
    assert first.stderr == "to stderr\n"
    assert len(session.streams) == 1, "one host for both runs"


def test_the_real_agent_measures_through_the_host_as_it_does_on_its_own(hosts, tmp_path) -> None:
    agent_hosts, _ = hosts
    model = conv_model(tmp_path / "tiny.onnx")
    args = ["--model", str(model), "--warmup", "1", "--min-runs", "4", "--min-duration", "0"]
    for _ in range(2):
        result = agent_hosts.run(sys.executable, str(AGENT), args, timeout=120)
        document = json.loads(result.stdout)
        assert result.exit_code == 0 and document["ok"] is True, document.get("error")
        assert document["stats"]["n"] == 4 and document["timing"]["import_s"] > 0  # imported by the run


def test_a_run_killed_by_sigill_reads_as_the_shell_says_and_the_host_serves_on(hosts, probe) -> None:
    agent_hosts, _ = hosts
    killed = agent_hosts.run(sys.executable, probe, ["sigill"], timeout=60)
    assert killed.exit_code == 128 + signal.SIGILL
    assert agent_hosts.run(sys.executable, probe, [], timeout=60).exit_code == 0


def test_a_hung_run_times_out_and_a_dead_host_is_an_error_naming_the_board(hosts, probe) -> None:
    agent_hosts, session = hosts
    with pytest.raises(CommandTimeout, match="workstation: timed out after 0.5s"):
        agent_hosts.run(sys.executable, probe, ["sleep"], timeout=0.5)
    agent_hosts.run(sys.executable, probe, [], timeout=60)  # a new host after the failed one
    session.streams[-1].process.kill()
    with pytest.raises(RemoteError, match="workstation: connection lost during an agent run"):
        agent_hosts.run(sys.executable, probe, [], timeout=60)
