"""Orchestration overhead of `orch bench`: orch's wall time vs the time the agents themselves measured.

    python benchmarks/bench_overhead.py                 # lab of 4 boards, deploy if needed, one quick bench
    python benchmarks/bench_overhead.py --boards 2 --skip-setup

Setup (unless --skip-setup): `orch lab up --boards N`, then `orch deploy --all-devices` with the
given --artifact/--model (an unchanged re-deploy transfers nothing). Then one
`orch bench --all-devices --quick --json` is timed, and its stored results are read back.

Printed, per board and overall:
- orch wall time (the whole command, as a user waits for it),
- the board's time inside orch (connect, list releases, every agent run, storing),
- the agents' own time (``agent_wall_s``: import + session + inference, as measured on the board),
- the pure inference time (sum of the timed latencies),
and the ratios orch wall / slowest board's agent time and agent time / inference time.
Figures, not asserts: emulated boards make everything slow, and the ratio is what to watch.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from orch_cli import orch, require


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--boards", type=int, default=4)
    parser.add_argument(
        "--skip-setup", action="store_true", help="use the running lab and its releases as they are"
    )
    parser.add_argument(
        "--artifact", help="artifact directory for the deploy step (default: the newest build)"
    )
    parser.add_argument("--model", action="append", default=[], help="model(s) for the deploy step")
    parser.add_argument("--rounds", default="2")
    args = parser.parse_args()

    if not args.skip_setup:
        require(orch("lab", "up", "--boards", str(args.boards), timeout=1800), "orch lab up")
        deploy = ["deploy", "--all-devices"]
        if args.artifact:
            deploy += ["--artifact", args.artifact]
        for model in args.model:
            deploy += ["--model", model]
        require(orch(*deploy, timeout=7200), "orch deploy")

    started = time.monotonic()
    done = orch("bench", "--all-devices", "--quick", "--rounds", args.rounds, "--json", timeout=7200)
    wall = time.monotonic() - started
    require(done, "orch bench")
    run = json.loads(done.stdout)
    results_root = Path(os.environ.get("ORCH_RESULTS") or "results")
    meta = json.loads((results_root / run["run_id"] / "run.json").read_text())

    print(f"orch bench --all-devices on {len(run['boards'])} boards: run {run['run_id']}")
    print(
        f"{'board':<10}{'in orch s':>12}{'agents s':>12}{'inference s':>14}{'agent runs':>12}{'orch/agents':>13}"
    )
    slowest_agents = 0.0
    total_agents = total_inference = command_s = 0.0
    for board, outcome in meta["boards"].items():
        stored = json.loads((results_root / run["run_id"] / f"{board}.json").read_text())
        agents = [m["agent"] for m in stored["measurements"]]
        agent_s = sum(a["agent_wall_s"] for a in agents)
        command_s += sum(m.get("remote_duration_s", 0.0) for m in stored["measurements"])
        inference_s = sum(sum(a["timing"]["latencies_ms"]) for a in agents) / 1000.0
        slowest_agents = max(slowest_agents, agent_s)
        total_agents += agent_s
        total_inference += inference_s
        in_orch = outcome["duration_s"]
        print(
            f"{board:<10}{in_orch:>12.1f}{agent_s:>12.1f}{inference_s:>14.2f}{len(agents):>12}"
            f"{in_orch / agent_s if agent_s else float('nan'):>13.2f}"
        )
    print(
        f"orch wall time: {wall:.1f} s; slowest board's agents: {slowest_agents:.1f} s;"
        f" all agents: {total_agents:.1f} s; all timed inference: {total_inference:.2f} s"
    )
    if command_s:
        print(
            f"agent commands as seen over SSH: {command_s:.1f} s, of which the agents measured {total_agents:.1f} s"
            " (the rest: interpreter start-up before the agent's clock starts, SSH)"
        )
    if slowest_agents:
        print(f"overhead ratio (orch wall / slowest board's agent time): {wall / slowest_agents:.2f}")
    if total_inference:
        print(
            f"agent time / timed inference time: {total_agents / total_inference:.1f}"
            " (start-up, session creation, warm-up: large under emulation)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
