"""Counting agent: runs one ONNX model a fixed number of times, so that the instructions it retires can
be counted from outside (``orch bench --metric instructions``).

Sent for each use, never stored: run as ``<release>/venv/bin/python -c <this text> AGENT_DIR MODEL
INFERENCES [--opt-level L] [--ep EP] [--shape NAME=DxD]...`` under the counting qemu, which counts every
instruction of the process. It imports the release's own benchmark agent from AGENT_DIR
(``<release>/agent``), so the inputs and the session are made as a timed run makes them, then runs
the first inference and INFERENCES more. orch runs it twice per round (N and N+k inferences): the
difference is k inferences' instructions, start-up, import and model loading cancelled.

One intra-op thread and spinning off: a spinning pool thread retires instructions for as long as it
waits, which would make the count depend on timing. Prints one JSON line.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import sys
import traceback
from typing import Any


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="count_agent")
    parser.add_argument("agent_dir")
    parser.add_argument("model")
    parser.add_argument("inferences", type=int)
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
    session.run(None, feeds)  # the first inference: one-time work, the same in both processes
    for _ in range(args.inferences):
        session.run(None, feeds)
    return {
        "ok": True,
        "inferences": args.inferences,
        "ort_version": ort.__version__,
        "providers": session.get_providers(),
    }


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
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
