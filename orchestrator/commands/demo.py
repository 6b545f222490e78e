"""`orch demo`: the whole job on the lab, as a newcomer runs it.

It is a plain sequence of the real sub-commands (no private shortcuts), each run as its own
``orch`` process, so what the demo shows is exactly what a user gets by typing them one by one. Every build is ONNX Runtime
1.21.0 (the release whose source this machine's Debian mirror serves), so each comparison measures
one thing: stock -> default is the build environment (Debian's toolchain, orch's patch), default ->
tuned is the flags. The boards emulate a Raspberry Pi 5 (Cortex-A76): the official 1.21.0 wheel
dies of SIGILL on a Cortex-A72 (upstream's fp16 bug), which `orch build --target lab --variant
stock --ort-version 1.21.0` shows by itself.

    orch lab up --board rpi5:2
    orch build --target rpi5 --variant stock|default|tuned
    orch deploy --group rpi5 --variant stock|default|tuned
    orch bench --group rpi5 --variant stock,default --quick   (tiny run lengths: emulated boards are slow)
    orch bench --group rpi5 --variant default,tuned --quick
    orch verify --group rpi5 --variant stock,tuned --subset 60
    orch report latest --html <path>
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

from orchestrator.adapters import process
from orchestrator.builds.stock import default_version
from orchestrator.commands import options
from orchestrator.console import console
from orchestrator.errors import OrchError
from orchestrator.lab.sample_models import write_tiny_convnet
from orchestrator.targets import resolve_target

NAME = "demo"
HELP = "the whole job on the lab: lab up, build stock/default/tuned, deploy, bench, verify, report"
TARGET = "rpi5"
VARIANTS = ("stock", "default", "tuned")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--boards", type=options.positive_int, default=2, help="number of emulated boards (default 2)"
    )
    parser.add_argument(
        "--report", type=options.path_arg, default=Path("report.html"), help="where to write the HTML report"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the steps and stop")


@dataclass(frozen=True, kw_only=True)
class DemoRequest:
    """`orch demo`'s options, as parsed."""

    boards: int
    report: Path
    dry_run: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> DemoRequest:
        return cls(boards=args.boards, report=args.report, dry_run=args.dry_run)


def steps(request: DemoRequest) -> list[list[str]]:
    model = "models/demo_conv.onnx"
    group = ["--group", TARGET]
    return [
        ["lab", "up", "--board", f"{TARGET}:{request.boards}"],
        *(["build", "--target", TARGET, "--variant", variant] for variant in VARIANTS),
        *(["deploy", *group, "--variant", variant, "--model", model] for variant in VARIANTS),
        ["bench", *group, "--variant", "stock,default", "--quick"],
        ["bench", *group, "--variant", "default,tuned", "--quick"],
        ["verify", *group, "--variant", "stock,tuned", "--subset", "60"],
        ["report", "latest", "--html", str(request.report)],
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
    _ensure_demo_model(Path("models/demo_conv.onnx"))
    for number, argv in enumerate(plan, 1):
        console.rule(f"step {number}/{len(plan)}: orch {' '.join(argv)}")
        # Each step is the real command in a process of its own, exactly as a user would type it.
        code = process.run_attached([sys.executable, "-m", "orchestrator", *argv])
        if code != 0:
            raise OrchError(f"demo step {number} failed (exit code {code}): orch {' '.join(argv)}")
    console.print(f"[bold green]done.[/] report: {request.report.resolve()}")
    return 0


def _ensure_demo_model(path: Path) -> None:
    if path.exists():
        return

    path.parent.mkdir(parents=True, exist_ok=True)
    write_tiny_convnet(path)
    console.print(f"wrote the demo model {path} (a tiny conv net: emulated boards are slow)")
