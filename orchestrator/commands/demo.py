"""`orch demo`: the whole job on the lab, as a newcomer runs it.

It is a plain sequence of the real sub-commands (no private shortcuts), each run as its own
``orch`` process, so what the demo shows is exactly what a user gets by typing them one by one.
Every build is ONNX Runtime 1.21.0 (the release whose source this machine's Debian mirror serves),
so each comparison measures one thing: stock -> upstream is the toolchain alone (orch builds the
official wheel's own options: Release, LTO, build.py's hardening), upstream -> tuned is orch's
flags alone, and with ``--pgo`` tuned -> pgo is the profile trained on the first board. The boards
emulate a Raspberry Pi 5 (Cortex-A76): the official 1.21.0 wheel dies of SIGILL on a Cortex-A72
(upstream's fp16 bug), which `orch build --target lab --variant stock --ort-version 1.21.0` shows
by itself.

    orch lab up --board rpi5:2
    orch build --target rpi5 --variant stock|upstream|tuned
    orch deploy --group rpi5 --variant stock|upstream|tuned
    orch bench --group rpi5 --variant stock,upstream --quick   (tiny run lengths: emulated boards are slow)
    orch bench --group rpi5 --variant stock,upstream --metric instructions   (the same A/B by count)
    orch bench --group rpi5 --variant upstream,tuned --quick
    orch bench --group rpi5 --variant upstream,tuned --metric instructions
    with --pgo: orch build --target rpi5 --variant pgo --train-on rpi5-1 --model <the demo model>,
                orch deploy --group rpi5 --variant pgo, orch bench --group rpi5 --variant tuned,pgo --quick
    orch verify --group rpi5 --variant stock,tuned --subset 60
    orch report latest~1 latest --counts latest~1 latest --html <path>
                (with --pgo: latest~2 latest~1 latest, tuned -> pgo being timed only)

The report is one page that tells the demo in its order: stock -> upstream and upstream -> tuned by
wall time (each with its plots), then the same two A/Bs by instruction count, then conformance.
"""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from orchestrator.adapters import process
from orchestrator.builds.stock import default_version
from orchestrator.commands import options
from orchestrator.console import console, duration_text
from orchestrator.errors import OrchError
from orchestrator.lab.boards import parse_board_option
from orchestrator.lab.sample_models import write_tiny_convnet
from orchestrator.targets import resolve_target

NAME = "demo"
HELP = "the whole job on the lab: lab up, build stock/upstream/tuned (and pgo), deploy, bench, verify, report"
TARGET = "rpi5"
VARIANTS = ("stock", "upstream", "tuned")
MODEL = "models/demo_conv.onnx"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--boards", type=options.positive_int, default=2, help="number of emulated boards (default 2)"
    )
    parser.add_argument(
        "--report", type=options.path_arg, default=Path("report.html"), help="where to write the HTML report"
    )
    parser.add_argument(
        "--pgo",
        action="store_true",
        help="also a profile-guided build trained on the first board, benched against tuned (one more"
        " instrumented and one more optimised build)",
    )
    parser.add_argument("--dry-run", action="store_true", help="print the steps and stop")


@dataclass(frozen=True, kw_only=True)
class DemoRequest:
    """`orch demo`'s options, as parsed."""

    boards: int
    report: Path
    pgo: bool
    dry_run: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> DemoRequest:
        return cls(boards=args.boards, report=args.report, pgo=args.pgo, dry_run=args.dry_run)


def steps(request: DemoRequest) -> list[list[str]]:
    group = ["--group", TARGET]
    boards = f"{TARGET}:{request.boards}"
    # The profile is trained with the tuned release's interpreter on the first board: after the deploys.
    trainer = parse_board_option(boards).names[0]
    pgo = [
        ["build", "--target", TARGET, "--variant", "pgo", "--train-on", trainer, "--model", MODEL],
        ["deploy", *group, "--variant", "pgo", "--model", MODEL],
        ["bench", *group, "--variant", "tuned,pgo", "--quick"],
    ]
    timed_runs = ["latest~2", "latest~1", "latest"] if request.pgo else ["latest~1", "latest"]
    return [
        ["lab", "up", "--board", boards],
        *(["build", "--target", TARGET, "--variant", variant] for variant in VARIANTS),
        *(["deploy", *group, "--variant", variant, "--model", MODEL] for variant in VARIANTS),
        # Each wall-time A/B beside the instruction-count A/B of the same builds on the same boards:
        # emulated time says "no significant change", the count tells the builds apart.
        ["bench", *group, "--variant", "stock,upstream", "--quick"],
        ["bench", *group, "--variant", "stock,upstream", "--metric", "instructions"],
        ["bench", *group, "--variant", "upstream,tuned", "--quick"],
        ["bench", *group, "--variant", "upstream,tuned", "--metric", "instructions"],
        *(pgo if request.pgo else []),
        ["verify", *group, "--variant", "stock,tuned", "--subset", "60"],
        # Every timed A/B in the order run (the newest last), then both count A/Bs: the whole demo.
        ["report", *timed_runs, "--counts", "latest~1", "latest", "--html", str(request.report)],
    ]


def run(args: argparse.Namespace) -> int:
    request = DemoRequest.from_args(args)
    plan = steps(request)
    release = default_version(resolve_target(TARGET))
    console.rule("orch demo: the whole job on the lab")
    console.print(
        f"every build is ONNX Runtime {release} (the release the {TARGET} builds compile by default),"
        " so each comparison measures one thing"
    )
    for number, argv in enumerate(plan, 1):
        console.print(f"  {number}. orch {' '.join(argv)}")
    if request.dry_run:
        return 0
    _ensure_demo_model(Path(MODEL))
    took: list[float] = []
    for number, argv in enumerate(plan, 1):
        console.rule(f"step {number}/{len(plan)}: orch {' '.join(argv)}")
        started = time.monotonic()
        # Each step is the real command in a process of its own, exactly as a user would type it.
        code = process.run_attached([sys.executable, "-m", "orchestrator", *argv])
        took.append(time.monotonic() - started)
        console.print(
            f"step {number}/{len(plan)} {'done' if code == 0 else 'failed'} after {duration_text(took[-1])}"
        )
        if code != 0:
            _print_times(plan, took)
            raise OrchError(f"demo step {number} failed (exit code {code}): orch {' '.join(argv)}")
    _print_times(plan, took)
    console.print(f"[bold green]done.[/] report: {request.report.resolve()}")
    return 0


def _print_times(plan: list[list[str]], took: list[float]) -> None:
    """Where the demo's time went, step by step (wall clock of each step's process)."""
    console.print("time per step (wall clock):")
    for number, (argv, seconds) in enumerate(zip(plan, took, strict=False), 1):
        console.print(f"  {number:>2}. {duration_text(seconds):>9}  orch {' '.join(argv)}")
    console.print(f"  total {duration_text(sum(took))} for {len(took)} of {len(plan)} steps")


def _ensure_demo_model(path: Path) -> None:
    if path.exists():
        return

    path.parent.mkdir(parents=True, exist_ok=True)
    write_tiny_convnet(path)
    console.print(f"wrote the demo model {path} (a tiny conv net: emulated boards are slow)")
