"""orch bench: one Python per board and release for a whole bench run, forking one agent per run.

Started once per release by orchestrator/bench/agent_host.py as ``<release python> -c <this file's
text> <bench_agent.py>`` (sent as an argument: nothing new to deploy) and spoken to on stdin/stdout:

    request, one JSON line:  {"args": ["--model", "...", ...]}   (bench_agent.py's arguments)
    reply, one JSON line:    {"exit": N, "stdout": "...", "stderr": "...", "duration_s": S}

Each request is one agent run in a process of its own: forked from this one before anything of
numpy or onnxruntime is imported, so the child imports them, makes its session and measures exactly
as a freshly started agent would, and a run stays the statistics' independent unit. What is saved
per run is the interpreter's start and one SSH command: under emulation about a second each.
``exit`` follows the shell's convention (128 + N for a run killed by signal N, e.g. 132 = SIGILL),
as when the agent ran as its own command. Standard library only; ends at end of input.
"""

from __future__ import annotations

import json
import os
import runpy
import sys
import tempfile
import time


def _agent(agent: str, args: list[str], out: int, err: int) -> None:
    """In the forked child: run bench_agent.py as its own ``__main__`` with ``args``; never returns."""
    code = 1
    try:
        os.dup2(out, 1)
        os.dup2(err, 2)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        sys.argv = [agent, *args]
        runpy.run_path(agent, run_name="__main__")
        code = 0
    except SystemExit as done:
        code = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    except BaseException as error:  # noqa: BLE001 - the host must get a reply, whatever the agent did
        print(f"agent host: the agent failed to start: {type(error).__name__}: {error}", file=sys.stderr)
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001, S110 - nothing else can be done in a dying child
                pass
        os._exit(code)


def _run(agent: str, args: list[str]) -> dict[str, object]:
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        begin = time.monotonic()
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _agent(agent, args, out.fileno(), err.fileno())
        _, status = os.waitpid(pid, 0)
        duration = time.monotonic() - begin
        code = os.WEXITSTATUS(status) if os.WIFEXITED(status) else 128 + os.WTERMSIG(status)
        out.seek(0)
        err.seek(0)
        return {
            "exit": code,
            "stdout": out.read().decode(errors="replace"),
            "stderr": err.read().decode(errors="replace"),
            "duration_s": duration,
        }


def main() -> int:
    agent = sys.argv[1]
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = _run(agent, list(json.loads(line)["args"]))
        sys.stdout.write(json.dumps(reply) + "\n")
        sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
