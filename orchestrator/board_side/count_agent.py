"""Counting agent: runs one ONNX model a fixed number of times, so that the instructions it retires can
be counted from outside (``orch bench --metric instructions``).

Sent for each use, never stored: run as ``<release>/venv/bin/python -c <this text> AGENT_DIR MODEL
INFERENCES... [--fork] [--opt-level L] [--ep EP] [--shape NAME=DxD]...``. It imports the release's
own benchmark agent from AGENT_DIR (``<release>/agent``), so the inputs and the session are made as a
timed run makes them, then runs the first inference. Without ``--fork`` it runs INFERENCES (one
number) more in this process: a board's perf counts two such processes, N and N+k, and takes the
difference. With ``--fork`` each number runs in a child forked from this process in turn, which
then exits; the counting qemu prints one total per process (each child's includes everything its
parent did before the fork), so the children of one process share their start-up exactly.

One intra-op thread and spinning off: a spinning pool thread retires instructions for as long as it
waits, which would make the count depend on timing. A fork's child has only the thread that forked,
so threads a release starts by itself (onnxruntime 1.32 starts some at import, with timed waits)
count in the parent, never in a child. Prints one JSON line, from the parent.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import os
import sys
import traceback
from typing import Any


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="count_agent")
    parser.add_argument("agent_dir")
    parser.add_argument("model")
    parser.add_argument("inferences", type=int, nargs="+")
    parser.add_argument("--fork", action="store_true")
    parser.add_argument("--opt-level", default="all")
    parser.add_argument("--ep", default="cpu")
    parser.add_argument("--shape", action="append", default=[])
    return parser


def _run(args: argparse.Namespace) -> dict[str, Any]:
    sys.path.insert(0, args.agent_dir)
    bench_agent: Any = importlib.import_module("bench_agent")  # the release's own agent, in AGENT_DIR
    import numpy as np  # noqa: PLC0415 -- imported under the counter, like everything the process runs
    import onnxruntime as ort

    plan = bench_agent.session_plan(args.ep, 1, None, ort.get_available_providers(), 1)
    spinning_off = {"session.intra_op.allow_spinning": "0", "session.inter_op.allow_spinning": "0"}
    plan = dataclasses.replace(plan, config={**plan.config, **spinning_off})
    args.inter_op_threads = 1
    options = bench_agent.session_options(ort, args, plan)  # the opt level, as a timed run sets it
    session = ort.InferenceSession(args.model, sess_options=options, providers=plan.providers)
    feeds, _ = bench_agent.make_inputs(np, session, bench_agent.parse_shapes(args.shape), {})
    session.run(None, feeds)  # the first inference: one-time work, the same in every count
    if args.fork:
        for inferences in args.inferences:
            _infer_in_child(session, feeds, inferences)
    else:
        [inferences] = args.inferences
        _infer(session, feeds, inferences)
    return {
        "ok": True,
        "inferences": args.inferences,
        "ort_version": ort.__version__,
        "providers": session.get_providers(),
    }


def _infer(session: Any, feeds: Any, inferences: int) -> None:
    for _ in range(inferences):
        session.run(None, feeds)


def _infer_in_child(session: Any, feeds: Any, inferences: int) -> None:
    child = os.fork()
    if child == 0:
        code = 0
        try:
            _infer(session, feeds, inferences)
        except BaseException:  # noqa: BLE001 -- the parent reports it; the child only ends
            traceback.print_exc()
            code = 1
        os._exit(code)  # no interpreter shutdown: the child's total is its inferences and its exit
    _, status = os.waitpid(child, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        raise RuntimeError(f"the child running {inferences} inferences failed (wait status {status:#x})")


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if len(args.inferences) > 1 and not args.fork:
        parser.error("several INFERENCES run in forked children: add --fork")
    try:
        document = _run(args)
    except Exception as error:  # noqa: BLE001 - orch must always get a JSON document
        document = {
            "ok": False,
            "error": f"{type(error).__name__}: {error}",
            "traceback": traceback.format_exc(),
        }
    print(json.dumps(document))
    return 0 if document["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
