"""`orch deploy`: push a wheel and models to boards over SSH and install them."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from rich.markup import escape
from rich.table import Table

from orchestrator.commands.options import (
    add_dry_run_option,
    add_json_option,
    add_selection_options,
    selected_boards,
)
from orchestrator.console import console, emit_json
from orchestrator.deploy.execute import DeployRequest, load_artifact_dir, run_deploy
from orchestrator.deploy.plan import agent_files, default_model_paths, model_files
from orchestrator.errors import UsageError
from orchestrator.fleet.parallel import print_failures

NAME = "deploy"
HELP = "push a wheel and models to boards over SSH and install them"

DEFAULT_PARALLEL = 4
DEFAULT_KEEP = 3
DEFAULT_TIMEOUT = 3600.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_selection_options(parser)
    parser.add_argument(
        "--variant", metavar="V", help="which build variant to deploy (default: the newest build)"
    )
    parser.add_argument(
        "--artifact",
        type=Path,
        metavar="DIR",
        help="deploy this artifact directory (artifacts/<target>/<variant>/<version>/)",
    )
    parser.add_argument(
        "--model",
        action="append",
        type=Path,
        default=[],
        metavar="PATH",
        help="an .onnx model to deploy (repeatable; default: ./models/*.onnx)",
    )
    parser.add_argument(
        "--parallel",
        type=int,
        default=DEFAULT_PARALLEL,
        metavar="N",
        help=f"boards deployed at once (default {DEFAULT_PARALLEL})",
    )
    parser.add_argument(
        "--keep",
        type=int,
        default=DEFAULT_KEEP,
        metavar="N",
        help=f"releases kept on each board (default {DEFAULT_KEEP})",
    )
    parser.add_argument("--rollback", action="store_true", help="switch back to the previous release")
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="S",
        help=f"per-board time limit in seconds (default {DEFAULT_TIMEOUT:g})",
    )
    add_dry_run_option(parser)
    add_json_option(parser)


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


def run(args: argparse.Namespace) -> int:

    if args.parallel < 1:
        raise UsageError(f"--parallel must be at least 1 (got {args.parallel})")
    if args.keep < 1:
        raise UsageError(f"--keep must be at least 1 (got {args.keep})")
    if args.timeout <= 0:
        raise UsageError(f"--timeout must be positive (got {args.timeout:g})")
    if args.rollback and (args.artifact or args.model or args.variant):
        raise UsageError(
            "--rollback switches to the previous release; it takes no --artifact/--model/--variant"
        )
    artifact = load_artifact_dir(args.artifact) if args.artifact else None
    if artifact and args.variant and artifact.variant != args.variant:
        raise UsageError(f"--artifact {args.artifact} is variant '{artifact.variant}', not '{args.variant}'")
    boards = selected_boards(args)
    model_paths = args.model or default_model_paths()
    request = DeployRequest(
        artifact=artifact,
        variant=args.variant,
        models=tuple(model_files(model_paths)) if not args.rollback else (),
        agent=tuple(agent_files()) if not args.rollback else (),
        keep=args.keep,
        dry_run=args.dry_run,
        rollback=args.rollback,
    )
    if not args.rollback and not request.models:
        console.print(
            "[yellow]no models to deploy (none given, ./models/*.onnx is empty): deploying the wheel alone[/]"
        )
    result = run_deploy(boards, request, parallel=args.parallel, timeout=args.timeout)

    if args.json:
        emit_json(
            {
                "command": "deploy",
                "rollback": args.rollback,
                "dry_run": args.dry_run,
                "exit_code": result.exit_code,
                "boards": {
                    name: (
                        {"ok": True, **o.value.as_dict()}
                        if o.ok and o.value
                        else {
                            "ok": False,
                            "error": o.message,
                            "timed_out": o.timed_out,
                            "hint": getattr(o.error, "hint", None),
                        }
                    )
                    for name, o in result.outcomes.items()
                },
            }
        )
    table = Table(title="deploy" + (" (dry run)" if args.dry_run else ""), title_justify="left")
    for column in ("board", "result", "release", "sent", "rate", "verified", "time"):
        table.add_column(column)
    for name, outcome in result.outcomes.items():
        if outcome.ok and outcome.value is not None:
            r = outcome.value
            models = r.verification.get("models", {})
            verified = (
                f"ort {r.verification.get('version')}, {len(models)} model(s)" if r.verification else "-"
            )
            if args.rollback:
                sent = "-"
            elif args.dry_run:
                sent = f"would send {_size(r.plan.get('bytes_to_send', 0))}"
            else:
                sent = f"{r.files_sent} files, {_size(r.bytes_sent)}"
            table.add_row(
                escape(name),
                f"[green]{r.action}[/]",
                escape(r.release_id),
                sent,
                f"{_size(r.rate)}/s" if r.bytes_sent else "-",
                verified,
                f"{r.seconds:.1f}s",
            )
        else:
            table.add_row(
                escape(name),
                "[red]timed out[/]" if outcome.timed_out else "[red]failed[/]",
                "-",
                "-",
                "-",
                "-",
                f"{outcome.duration:.1f}s",
            )
    console.print(table)
    if args.dry_run and not args.json:
        for outcome in result.succeeded.values():
            plan = outcome.value.plan if outcome.value else {}
            if "rollback_to" in plan:
                console.print(
                    f"[bold]{escape(outcome.board.name)}[/] would switch current from"
                    f" {escape(str(plan['rollback_from']))} back to {escape(plan['rollback_to'])}"
                )
            if plan.get("send") is not None:
                console.print(
                    f"[bold]{escape(outcome.board.name)}[/] release {escape(plan['release_id'])}"
                    f" in {escape(plan['release_dir'])}"
                )
                for item in plan["send"]:
                    console.print(f"  send {escape(item['name'])} ({_size(item['size'])})")
                console.print(f"  already there: {len(plan['already_there'])} file(s)")
                if plan["unchanged"]:
                    console.print("  already the current release: nothing to install, verification only")
                elif plan["release_exists"]:
                    console.print("  release already on the board: switch current to it, then verify")
                else:
                    console.print(f"  run: {escape(shlex.join(plan['venv_argv']))}")
                    if plan["reuse_from"]:
                        console.print(
                            f"  reuse the installed packages of {escape(plan['reuse_from'])} (same wheels)"
                        )
                    else:
                        console.print(f"  run: {escape(shlex.join(plan['install_argv']))}")
                    console.print("  then switch current, verify")
                for release in plan["prune"]:
                    console.print(f"  remove release {escape(release)}")
    print_failures(result)  # type: ignore[arg-type]
    console.print(result.summary())
    return result.exit_code
