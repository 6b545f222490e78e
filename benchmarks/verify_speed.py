"""How fast `orch verify` gets through ONNX's node cases on a board: cases per second per build, and
the share of orch's wall time that the board-side runner itself took.

    python benchmarks/verify_speed.py --host lab1                      # every node case, current release
    python benchmarks/verify_speed.py --host lab1 --variant stock,tuned --subset 520

Uses the boards and releases already there (`orch lab up`, `orch deploy` first). One
`orch verify --json` is timed; printed per build: cases, wall time of its runner process(es),
cases/s, and the ratio orch wall / sum of the builds' runner time (the overhead of connecting,
pushing the cases once, and the x86 reference). Figures from one run, not asserts; emulated
boards are slow, the ratios are what to watch.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", required=True)
    parser.add_argument("--variant", default="")
    parser.add_argument("--subset", default="")
    args = parser.parse_args()
    argv = [sys.executable, "-m", "orchestrator", "verify", "--host", args.host, "--json", "--no-models"]
    if args.variant:
        argv += ["--variant", args.variant]
    if args.subset:
        argv += ["--subset", args.subset]
    started = time.monotonic()
    done = subprocess.run(argv, capture_output=True, text=True, timeout=7200, check=False)
    wall = time.monotonic() - started
    if done.returncode not in (0, 1):
        sys.stderr.write(f"orch verify failed ({done.returncode}):\n{done.stderr[-3000:]}\n")
        return 1
    document = json.loads(done.stdout)
    runner_total = 0.0
    for board, entry in document["boards"].items():
        for build in entry.get("builds", []):
            runner_total += build["wall_s"]
            rate = build["cases"] / build["wall_s"] if build["wall_s"] else float("nan")
            print(
                f"{board} {build['release']}: {build['cases']} cases in {build['wall_s']:.1f} s "
                f"({build['processes']} process(es)) = {rate:.1f} cases/s, {build['case_s']:.1f} s inside the "
                f"cases (the rest: interpreter + import onnxruntime); {build['counts']}"
            )
        print(f"{board}: sent {entry.get('sent_bytes', 0) / 1e6:.1f} MB of cases")
    print(f"orch verify wall {wall:.1f} s; wall / runner time = {wall / runner_total:.2f} (1 run)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
