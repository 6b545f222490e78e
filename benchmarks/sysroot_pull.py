"""Sysroot pull benchmark: gzip vs an uncompressed tarball, on one lab board.

Pulls the board's sysroot ``--rounds`` times with each setting, alternating (so a change of load
on the machine hits both alike), and prints, per setting, the pack, fetch and total wall times
(sample count, median, min-max) and the tarball size, then the ratio of the medians. An emulated
board runs gzip under qemu: its figures are relative only, and a real board over a real network
can rank the two the other way round. Asserts nothing. Usage::

    python benchmarks/sysroot_pull.py [--board lab1] [--rounds 3] [--json]

Uses the current ORCH_HOME's lab (``orch lab up`` first); every pull after the first stores
nothing new, so the store is not what is measured.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.bench.stats import summarize

MODES = {"gzip": (), "none": ("--no-compress",)}


def pull(board: str, extra: tuple[str, ...]) -> dict[str, float]:
    start = time.monotonic()
    result = subprocess.run(
        [sys.executable, "-m", "orchestrator", "sysroot", "pull", "--host", board, "--json", *extra],
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.monotonic() - start
    if result.returncode != 0:
        sys.exit(f"orch sysroot pull --host {board} failed ({result.returncode}):\n{result.stderr[-3000:]}")
    done = json.loads(result.stdout)[board]
    return {**done["seconds"], "total": wall, "bytes": done["tarball_bytes"]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--board", default="lab1")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    samples: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    for round_number in range(args.rounds):
        for mode, extra in MODES.items():
            samples[mode].append(pull(args.board, extra))
            print(f"round {round_number + 1}/{args.rounds} {mode}: {samples[mode][-1]}", file=sys.stderr)
    figures: dict[str, dict[str, dict[str, float]]] = {}
    for mode, runs in samples.items():
        figures[mode] = {}
        for key in ("pack", "fetch", "total"):
            summary = summarize([run[key] for run in runs])
            figures[mode][key] = {"n": summary.n, "p50": summary.p50, "min": summary.min, "max": summary.max}
    sizes = {mode: runs[-1]["bytes"] for mode, runs in samples.items()}
    ratio = figures["gzip"]["total"]["p50"] / figures["none"]["total"]["p50"]
    if args.json:
        document = {"board": args.board, "modes": figures, "tarball_bytes": sizes, "gzip_over_none": ratio}
        print(json.dumps(document, indent=2))
        return 0
    print(f"sysroot pull of {args.board} (emulated: relative figures only), {args.rounds} pulls per setting")
    for mode, by_key in figures.items():
        print(f"  {mode}: tarball {sizes[mode] / (1 << 20):.1f} MiB")
        for key, f in by_key.items():
            print(
                f"    {key:5}  n={f['n']:.0f}  median {f['p50']:.1f} s  (min {f['min']:.1f}, max {f['max']:.1f})"
            )
    print(f"  total time, gzip / uncompressed (ratio of medians): {ratio:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
