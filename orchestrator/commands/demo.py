"""`orch demo`: the whole job on the lab, as a newcomer runs it.

It is a plain sequence of the real sub-commands (no private shortcuts), so what the
demo shows is exactly what a user gets by typing them one by one:

    orch lab up --boards 2
    orch build --target lab --variant stock
    orch build --target lab --variant tuned
    orch deploy --group lab --variant stock
    orch deploy --group lab --variant tuned
    orch bench --group lab --variant stock,tuned   (tiny run lengths: emulated boards are slow)
    orch report <run> --html <path>
"""

from __future__ import annotations

import argparse
from pathlib import Path

from orchestrator.cli import main
from orchestrator.commands import options
from orchestrator.console import console
from orchestrator.errors import OrchError
from orchestrator.lab.sample_models import write_tiny_convnet

NAME = "demo"
HELP = "the whole job on the lab: lab up, build, deploy stock+tuned, bench A/B, report"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--boards", type=options.positive_int, default=2, help="number of emulated boards (default 2)"
    )
    parser.add_argument(
        "--report", type=options.path_arg, default=Path("report.html"), help="where to write the HTML report"
    )
    parser.add_argument("--dry-run", action="store_true", help="print the steps and stop")


def steps(args: argparse.Namespace) -> list[list[str]]:
    model = "models/demo_conv.onnx"
    return [
        ["lab", "up", "--boards", str(args.boards)],
        ["build", "--target", "lab", "--variant", "stock"],
        ["build", "--target", "lab", "--variant", "tuned"],
        ["deploy", "--group", "lab", "--variant", "stock", "--model", model],
        ["deploy", "--group", "lab", "--variant", "tuned", "--model", model],
        ["bench", "--group", "lab", "--variant", "stock,tuned", "--quick"],
        ["report", "latest", "--html", str(args.report)],
    ]


def run(args: argparse.Namespace) -> int:

    plan = steps(args)
    console.rule("orch demo: the whole job on the lab")
    for number, argv in enumerate(plan, 1):
        console.print(f"  {number}. orch {' '.join(argv)}")
    if args.dry_run:
        return 0
    _ensure_demo_model(Path("models/demo_conv.onnx"))
    for number, argv in enumerate(plan, 1):
        console.rule(f"step {number}/{len(plan)}: orch {' '.join(argv)}")
        code = main(argv)
        if code != 0:
            raise OrchError(f"demo step {number} failed (exit code {code}): orch {' '.join(argv)}")
    console.print(f"[bold green]done.[/] report: {args.report.resolve()}")
    return 0


def _ensure_demo_model(path: Path) -> None:
    if path.exists():
        return

    path.parent.mkdir(parents=True, exist_ok=True)
    write_tiny_convnet(path)
    console.print(f"wrote the demo model {path} (a tiny conv net: emulated boards are slow)")
