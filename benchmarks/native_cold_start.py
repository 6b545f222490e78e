"""Cold start of the native runner vs the Python agent on a lab board: process exec -> first result.

    python benchmarks/native_cold_start.py                       # lab board lab1, newest tuned build, MLP
    python benchmarks/native_cold_start.py --host lab1 --skip-setup --launches 10 --rounds 3

Setup (unless --skip-setup): `orch lab up --boards 1`, then `orch deploy --host HOST` of the artifact
(default: the newest tuned build, which carries the native runner) with the 128-feature MLP of
orchestrator.lab.sample_models. Then one `orch bench --host HOST --runner both --cold-starts N` and,
from its stored results, per runner: the launches measured (n), the median and IQR of exec -> first
result, exec -> main, and peak RSS; then native/python as a ratio of medians with both sample counts.
Emulated boards run ~700x slower than real ones: the ratio is the figure to read, not the milliseconds.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

from orch_cli import orch, require

from orchestrator.bench import native
from orchestrator.lab.sample_models import mlp, write_model


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="lab1")
    parser.add_argument("--skip-setup", action="store_true", help="use the board's current release as it is")
    parser.add_argument("--artifact", help="artifact directory to deploy (default: the newest tuned build)")
    parser.add_argument("--launches", type=int, default=5, help="process launches per runner and round")
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()

    if not args.skip_setup:
        require(orch("lab", "up", "--boards", "1", timeout=1800), "orch lab up")
        model = write_model(mlp(), Path(tempfile.mkdtemp(prefix="orch-cold-")) / "mlp.onnx")
        deploy = ["deploy", "--host", args.host, "--model", str(model)]
        deploy += ["--artifact", args.artifact] if args.artifact else ["--variant", "tuned"]
        require(orch(*deploy, timeout=7200), "orch deploy")

    done = orch(
        "bench", "--host", args.host, "--runner", "both", "--model", "mlp", "--quick",
        "--rounds", str(args.rounds), "--cold-starts", str(args.launches), "--json", timeout=7200,
    )  # fmt: skip
    require(done, "orch bench")
    run = json.loads(done.stdout)
    results = Path(os.environ.get("ORCH_RESULTS") or "results")
    board = json.loads((results / run["run_id"] / f"{args.host}.json").read_text())
    found = native.cold_starts([board])
    print(f"cold start on {args.host} (run {run['run_id']}; emulated: relative figures only)")
    print(
        f"{'runner':<8}{'n':>4}{'exec->first result p50':>26}{'IQR':>14}{'exec->main p50':>18}{'peak RSS':>11}"
    )
    for item in found:
        first, to_main = item.first_result(), item.to_main()
        rss = max(item.peak_rss_kb) / 1e3 if item.peak_rss_kb else float("nan")
        print(
            f"{item.key['runner']:<8}{first.n:>4}{first.p50:>23.1f} ms{first.iqr:>11.1f} ms"
            f"{(to_main.p50 if to_main else float('nan')):>15.1f} ms{rss:>8.0f} MB"
        )
    pairs = native.pair_runners(found)
    if not pairs:
        sys.stderr.write("no native/python pair measured\n")
        return 1
    for native_side, python_side in pairs:
        print(
            f"native/python cold start = {native.ratio(native_side, python_side):.3f}"
            f" (median of {native_side.first_result().n} native vs {python_side.first_result().n} Python launches)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
