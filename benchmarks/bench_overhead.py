"""Orchestration overhead of `orch bench`: orch's wall time vs the time the agents themselves measured.

    python benchmarks/bench_overhead.py                 # lab of 4 boards, deploy if needed, one quick bench
    python benchmarks/bench_overhead.py --boards 2 --skip-setup --rounds 2

Setup (unless --skip-setup): `orch lab up --boards N`, then `orch deploy --all-devices` with the
given --artifact/--model (an unchanged re-deploy transfers nothing). Then one
`orch bench --all-devices --quick --json` (its own 5 rounds unless --rounds) is timed, and its
stored results are read back.

Printed, per board and overall:
- orch wall time (the whole command, as a user waits for it),
- the board's time inside orch (connect, list releases, the agent host's start, every agent run, storing),
  and the part of it outside the agent runs (connect, list releases, the agent host's start),
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
    parser.add_argument("--rounds", help="passed to orch bench (default: --quick's own, 5)")
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
    rounds = ["--rounds", args.rounds] if args.rounds else []
    done = orch("bench", "--all-devices", "--quick", *rounds, "--json", timeout=7200)
    wall = time.monotonic() - started
    require(done, "orch bench")
    run = json.loads(done.stdout)
    results_root = Path(os.environ.get("ORCH_RESULTS") or "results")
    meta = json.loads((results_root / run["run_id"] / "run.json").read_text())

    print(f"orch bench --all-devices on {len(run['boards'])} boards: run {run['run_id']}")
    print(
        f"{'board':<10}{'in orch s':>12}{'outside runs s':>16}{'agents s':>12}{'inference s':>14}"
        f"{'agent runs':>12}{'orch/agents':>13}"
    )
    fallbacks: list[str] = []
    slowest_agents = 0.0
    total_agents = total_inference = command_s = 0.0
    for board, outcome in meta["boards"].items():
        stored = json.loads((results_root / run["run_id"] / f"{board}.json").read_text())
        agents = [m["agent"] for m in stored["measurements"]]
        agent_s = sum(a["agent_wall_s"] for a in agents)
        runs_s = sum(m.get("remote_duration_s", 0.0) for m in stored["measurements"])
        command_s += runs_s
        fallbacks += [f"{board}: {message}" for message in stored.get("agent_host_fallbacks", [])]
        inference_s = sum(sum(a["timing"]["latencies_ms"]) for a in agents) / 1000.0
        slowest_agents = max(slowest_agents, agent_s)
        total_agents += agent_s
        total_inference += inference_s
        in_orch = outcome["duration_s"]
        print(
            f"{board:<10}{in_orch:>12.1f}{in_orch - runs_s:>16.1f}{agent_s:>12.1f}{inference_s:>14.2f}{len(agents):>12}"
            f"{in_orch / agent_s if agent_s else float('nan'):>13.2f}"
        )
    print(
        f"orch wall time: {wall:.1f} s; slowest board's agents: {slowest_agents:.1f} s;"
        f" all agents: {total_agents:.1f} s; all timed inference: {total_inference:.2f} s"
    )
    if command_s:
        print(
            f"agent runs as seen from the workstation: {command_s:.1f} s, of which the agents measured"
            f" {total_agents:.1f} s (the rest: the agent host's fork and reply, SSH)"
        )
    for fallback in fallbacks:
        print(f"agent host fallback (those runs were commands of their own): {fallback}")
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
