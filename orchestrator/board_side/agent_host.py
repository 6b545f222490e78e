"""orch bench: one Python per board and release for a whole bench run, forking one agent per run.

Started once per release by orchestrator/bench/agent_host.py as ``<release python> -c <this file's
text> <bench_agent.py>`` (sent as an argument: nothing new to deploy) and spoken to on stdin/stdout,
one JSON document per line:

    greeting:   {"ready": true, "executable": "..."}   once bench_agent.py is loaded
    request:    {"args": ["--model", "...", ...], "stall_s": 120}   (bench_agent.py's arguments)
    heartbeat:  {"alive": true, "cpu_s": S}        every HEARTBEAT_S (at most) while a run goes on
    reply:      {"exit": N, "stdout": "...", "stderr": "...", "duration_s": S}
    or          {"exit": null, "stalled": true, "cpu_s": S, ...}   the run was killed, see below

The host loads bench_agent.py once as a module (its bytecode cached beside it, its standard-library
imports made): that is start-up cost, before the agent's clock, the same for every run. Each request
is one agent run in a process of its own, forked from this one before anything of numpy or
onnxruntime is imported, so the child imports them, makes its session and measures exactly as a
freshly started agent would, and a run stays the statistics' independent unit. What is saved per
run is the interpreter's start, loading the agent and one SSH command: about a second under
emulation.

A run whose process used no CPU time for ``stall_s`` seconds is stuck, not slow (a busy machine
still gives it some CPU): it is killed and reported as stalled, and the workstation runs it again as
a command of its own. The heartbeats tell the workstation that this host itself still answers.
``exit`` follows the shell's convention (128 + N for a run killed by signal N, e.g. 132 = SIGILL),
as when the agent ran as its own command. Standard library only; ends at end of input.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import select
import signal
import sys
import tempfile
import time
import types

HEARTBEAT_S = 10.0


def _load(agent: str) -> types.ModuleType:
    """bench_agent.py as a module, as ``import`` would load it (bytecode cached in __pycache__)."""
    spec = importlib.util.spec_from_file_location("bench_agent", agent)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot load {agent}")
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_agent"] = module
    spec.loader.exec_module(module)
    return module


def _agent(module: types.ModuleType, agent: str, args: list[str], out: int, err: int) -> None:
    """In the forked child: the agent's ``main()`` with ``args`` as its command line; never returns."""
    status = 1
    try:
        os.dup2(out, 1)
        os.dup2(err, 2)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        sys.argv = [agent, *args]
        sys.path[0] = os.path.dirname(os.path.abspath(agent))  # as `python bench_agent.py` sets it
        status = int(module.main() or 0)
    except SystemExit as done:
        status = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except BaseException as error:  # noqa: BLE001 - the host must get a reply, whatever the agent did
        print(f"agent host: the agent failed to start: {type(error).__name__}: {error}", file=sys.stderr)
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # nothing else can be done in a dying child
                stream.flush()
        os._exit(status)


def _cpu_s(pid: int) -> float:
    """User + system CPU time of a process and its threads so far (0 when it is gone)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _send(document: dict[str, object]) -> None:
    sys.stdout.write(json.dumps(document) + "\n")
    sys.stdout.flush()


def _run(module: types.ModuleType, agent: str, args: list[str], stall_s: float) -> dict[str, object]:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        begin = time.monotonic()
        done_read, done_write = os.pipe()  # the child holds the write end: EOF when it has ended
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            os.close(done_read)
            _agent(module, agent, args, out.fileno(), err.fileno())
        os.close(done_write)
        cpu, cpu_changed = 0.0, time.monotonic()
        stalled = False
        while not select.select([done_read], [], [], min(HEARTBEAT_S, stall_s / 4))[0]:
            now_cpu = _cpu_s(pid)
            if now_cpu > cpu:
                cpu, cpu_changed = now_cpu, time.monotonic()
            elif time.monotonic() - cpu_changed >= stall_s:
                os.kill(pid, signal.SIGKILL)
                stalled = True
                break
            _send({"alive": True, "cpu_s": cpu})
        os.close(done_read)
        _, status = os.waitpid(pid, 0)
        duration = time.monotonic() - begin
        out.seek(0)
        err.seek(0)
        reply: dict[str, object] = {
            "stdout": out.read().decode(errors="replace"),
            "stderr": err.read().decode(errors="replace"),
            "duration_s": duration,
        }
        if stalled:
            return {**reply, "exit": None, "stalled": True, "cpu_s": cpu}
        code_ = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
        return {**reply, "exit": code_}


def main() -> int:
    agent = sys.argv[1]
    module = _load(agent)
    _send({"ready": True, "executable": sys.executable})
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        _send(_run(module, agent, list(request["args"]), float(request.get("stall_s", 120))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
