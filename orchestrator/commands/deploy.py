"""`orch deploy`: push a wheel (or a C library build) and models to boards over SSH and install them."""

from __future__ import annotations

import argparse
import math
import shlex
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypedDict

from rich.markup import escape
from rich.table import Table

from orchestrator.artifacts.identity import route_of
from orchestrator.artifacts.store import ARTIFACT_KINDS, Artifact, ArtifactKind, list_artifacts
from orchestrator.board import Board
from orchestrator.builds.native_runner.plan import SONAME
from orchestrator.commands.options import (
    Selection,
    add_dry_run_option,
    add_json_option,
    add_selection_options,
    onnx_model_file,
    path_arg,
    selected_boards,
)
from orchestrator.common.ort_versions import check_ort_version
from orchestrator.console import compact_table, console, emit_json, print_whole
from orchestrator.deploy.artifact_choice import (
    SKIP_PREFLIGHT_OPTION,
    artifact_label,
    check_preflight,
    load_artifact_dir,
    select_artifact,
)
from orchestrator.deploy.execute import DeployRequest, DeployResult, run_deploy
from orchestrator.deploy.lock_settings import DEFAULT_LOCK_TIMEOUT
from orchestrator.deploy.plan import BoardPlan, RollbackPlan
from orchestrator.deploy.release_files import LocalFile, agent_files, default_model_paths, model_files
from orchestrator.deploy.report import BoardReport, BoardReportDocument
from orchestrator.deploy.switch_gate import KnownCurrent
from orchestrator.errors import UsageError
from orchestrator.fleet.parallel import Outcome, print_failures
from orchestrator.paths import artifacts_dir

NAME = "deploy"
HELP = "push a wheel and models to boards over SSH and install them"

DEFAULT_PARALLEL = 4
DEFAULT_KEEP = 3
DEFAULT_TIMEOUT = 3600.0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_selection_options(parser)
    parser.add_argument(
        "--variant",
        metavar="V",
        help="which build variant to deploy (default: the target's only artifact; several are refused)",
    )
    parser.add_argument(
        "--ort-version",
        metavar="X.Y.Z",
        help="which ONNX Runtime release to deploy, when artifacts of several are built",
    )
    parser.add_argument(
        "--scope",
        choices=ARTIFACT_KINDS,
        help="a wheel, or a C library build (orch build --scope library: its native runner, no Python);"
        " needed only when both are built for the same variant and release",
    )
    parser.add_argument(
        "--artifact",
        type=path_arg,
        metavar="DIR",
        help="deploy this artifact directory (artifacts/<target>/<variant>/<version>/)",
    )
    parser.add_argument(
        "--model",
        action="append",
        type=onnx_model_file,
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
        "--verify",
        action="store_true",
        help="verify on the board even when the release is current and was verified there already",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="S",
        help=f"per-board time limit in seconds (default {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument(
        "--lock-timeout",
        type=float,
        default=DEFAULT_LOCK_TIMEOUT,
        metavar="S",
        help="how long to wait for a board another orch is deploying to (its lock) before refusing"
        f" (default {DEFAULT_LOCK_TIMEOUT:g})",
    )
    parser.add_argument(
        SKIP_PREFLIGHT_OPTION,
        action="store_true",
        help="deploy an artifact whose pre-flight failed or never ran (said in the output)",
    )
    add_dry_run_option(parser)
    add_json_option(parser)


def _size(n: float) -> str:
    for unit in ("B", "kB", "MB", "GB"):
        if n < 1000 or unit == "GB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} GB"


@dataclass(frozen=True, kw_only=True)
class DeployOptions:
    """`orch deploy`'s options as parsed."""

    selection: Selection
    variant: str | None
    ort_version: str | None
    kind: ArtifactKind | None  # --scope
    artifact: Path | None
    models: tuple[Path, ...]
    parallel: int
    keep: int
    rollback: bool
    verify: bool
    timeout: float
    lock_timeout: float
    skip_preflight_check: bool
    dry_run: bool
    json: bool

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> DeployOptions:
        return cls(
            selection=Selection.from_args(args),
            variant=args.variant,
            ort_version=args.ort_version,
            kind=next((kind for kind in ARTIFACT_KINDS if kind == args.scope), None),
            artifact=args.artifact,
            models=tuple(args.model),
            parallel=args.parallel,
            keep=args.keep,
            rollback=args.rollback,
            verify=args.verify,
            timeout=args.timeout,
            lock_timeout=args.lock_timeout,
            skip_preflight_check=args.skip_preflight_check,
            dry_run=args.dry_run,
            json=args.json,
        )


def run(args: argparse.Namespace) -> int:
    options = DeployOptions.from_args(args)
    _check_options(options)
    artifact = _artifact(options)
    boards = selected_boards(options.selection)
    files = _release_files(options)  # the local files first: a missing model is the first error
    by_target = _chosen(options, artifact, boards)
    _check_library_models(by_target, files)
    skipped = _preflight_skipped(options, by_target)
    request = DeployRequest(
        artifact=artifact,
        ort_version=options.ort_version,
        variant=options.variant,
        models=files.models,
        agent=files.agent,
        keep=options.keep,
        dry_run=options.dry_run,
        rollback=options.rollback,
        verify=options.verify,
        by_target=by_target,
        lock_timeout=options.lock_timeout,
        skip_preflight_check=options.skip_preflight_check,
        kind=options.kind,
    )
    if not options.rollback and not request.models:
        console.print(
            "[yellow]no models to deploy (none given, ./models/*.onnx is empty): deploying the wheel alone[/]"
        )
    deployed = run_deploy(
        boards,
        request,
        parallel=options.parallel,
        timeout=options.timeout,
        on_interrupt=_print_current,
    )
    result = deployed.fleet
    if options.json:
        emit_json(_json_document(options, deployed, request.by_target, skipped))
    print_whole(_table(deployed, dry_run=options.dry_run, rollback=options.rollback))
    if options.dry_run and not options.json:
        for outcome in result.succeeded.values():
            if outcome.value is not None and outcome.value.plan is not None:
                _print_plan(outcome.board.name, outcome.value.plan)
    print_failures(result)
    if not options.dry_run:
        _print_current({name: deployed.current[name] for name in result.failed})
    console.print(result.summary())
    return result.exit_code


def _print_current(current: Mapping[str, KnownCurrent]) -> None:
    """What is current on boards whose deploy did not finish (failed, timed out, interrupted)."""
    for name, known in current.items():
        console.print(f"{escape(name)}: current release: {escape(known.describe())}")


def _preflight_skipped(options: DeployOptions, chosen: Mapping[str, Artifact]) -> list[str]:
    """The artifacts that go without a passed pre-flight (only with --skip-preflight-check), said."""
    warnings = []
    for target, picked in chosen.items():
        named = (
            f"--artifact {options.artifact}" if options.artifact else f"the artifact for target '{target}'"
        )
        warning = check_preflight(picked, skip=options.skip_preflight_check, named_as=named)
        if warning is not None and warning not in warnings:
            warnings.append(warning)
    for warning in warnings:
        console.print(f"[yellow]warning: {escape(warning)}[/]", soft_wrap=True)
    return warnings


def _check_library_models(chosen: Mapping[str, Artifact], files: _LocalFiles) -> None:
    """A C library build's release is verified by its runner running each model: without one it
    could not be verified on any board, so it is refused here, before any board is touched."""
    library = next((a for a in chosen.values() if a.kind == "library"), None)
    if library is not None and not files.models:
        raise UsageError(
            f"{artifact_label(library)} ({library.directory}) is a C library build: its release is verified by"
            " its native runner running each of its models, and there is none (no --model, ./models/*.onnx empty)",
            hint="give the models to deploy with --model PATH",
        )


def _check_options(options: DeployOptions) -> None:
    if options.parallel < 1:
        raise UsageError(f"--parallel must be at least 1 (got {options.parallel})")
    if options.keep < 1:
        raise UsageError(f"--keep must be at least 1 (got {options.keep})")
    if not 0 < options.timeout < math.inf:  # NaN and infinity too
        raise UsageError(f"--timeout must be positive (got {options.timeout:g})")
    if not 0 <= options.lock_timeout < math.inf:
        raise UsageError(f"--lock-timeout must be 0 or more seconds (got {options.lock_timeout:g})")
    if options.rollback and (
        options.artifact
        or options.models
        or options.variant
        or options.ort_version
        or options.skip_preflight_check
        or options.kind
    ):
        raise UsageError(
            "--rollback switches to the previous release; it takes no"
            f" --artifact/--model/--variant/--ort-version/--scope/{SKIP_PREFLIGHT_OPTION}"
        )
    check_ort_version(options.ort_version)


def _artifact(options: DeployOptions) -> Artifact | None:
    """The --artifact directory's artifact (None: each board's newest good one is looked up)."""
    if not options.artifact:
        return None
    artifact = load_artifact_dir(options.artifact)
    # Refused here, before any board is read, whatever the other options (--dry-run too).
    check_preflight(artifact, skip=options.skip_preflight_check, named_as=f"--artifact {options.artifact}")
    if options.variant and artifact.variant != options.variant:
        raise UsageError(
            f"--artifact {options.artifact} is variant '{artifact.variant}', not '{options.variant}'"
        )
    if options.ort_version and artifact.ort_version != options.ort_version:
        raise UsageError(
            f"--artifact {options.artifact} is ORT {artifact.ort_version}, not {options.ort_version}"
        )
    if options.kind and artifact.kind != options.kind:
        what = "a C library build" if artifact.kind == "library" else "a wheel"
        raise UsageError(f"--artifact {options.artifact} is {what}, not --scope {options.kind}")
    return artifact


def _chosen(
    options: DeployOptions, artifact: Artifact | None, boards: Sequence[Board]
) -> dict[str, Artifact]:
    """The one artifact each target of the selected boards gets, chosen (or refused, when several
    match) before any board is touched, and named: variant, ORT release, route, directory."""
    if options.rollback:
        return {}
    targets = list(dict.fromkeys(board.target for board in boards if board.target))
    if artifact is not None:
        chosen = dict.fromkeys(targets, artifact)
    else:
        artifacts = list_artifacts()
        chosen = {
            target: select_artifact(
                artifacts,
                target=target,
                variant=options.variant,
                ort_version=options.ort_version,
                where=str(artifacts_dir()),
                skip_preflight_check=options.skip_preflight_check,
                kind=options.kind,
            )
            for target in targets
        }
    for target, picked in chosen.items():
        console.print(
            f"{escape(target)}: {escape(artifact_label(picked))} from {escape(str(picked.directory))}"
        )
    return chosen


@dataclass(frozen=True, kw_only=True)
class _LocalFiles:
    models: tuple[LocalFile, ...]
    agent: tuple[LocalFile, ...]


def _release_files(options: DeployOptions) -> _LocalFiles:
    """The models and agent files a deploy sends (none for a rollback)."""
    if options.rollback:
        return _LocalFiles(models=(), agent=())
    return _LocalFiles(
        models=tuple(model_files(options.models or default_model_paths())), agent=tuple(agent_files())
    )


class _ArtifactKeys(TypedDict):
    variant: str
    ort_version: str
    route: str
    directory: str


class ArtifactEntry(_ArtifactKeys, total=False):
    kind: ArtifactKind  # said of a C library build only: a wheel's entry reads as it always did


class DeployedBoard(BoardReportDocument):
    ok: Literal[True]


class FailedBoard(TypedDict):
    ok: Literal[False]
    error: str
    timed_out: bool
    hint: str | None
    # What the board was left on, as far as orch knows (null: none, or the board was not read).
    current: str | None
    current_known: bool


class DeployDocument(TypedDict):
    """``orch deploy --json``."""

    command: Literal["deploy"]
    artifacts: dict[str, ArtifactEntry]  # target -> the artifact deployed to its boards
    rollback: bool
    dry_run: bool
    preflight_check_skipped: list[str]
    exit_code: int
    boards: dict[str, DeployedBoard | FailedBoard]


def _artifact_json(artifact: Artifact) -> ArtifactEntry:
    entry = ArtifactEntry(
        variant=artifact.variant,
        ort_version=artifact.ort_version,
        route=route_of(artifact.manifest.to_json()),
        directory=str(artifact.directory),
    )
    if artifact.kind == "library":
        entry["kind"] = artifact.kind
    return entry


def _json_document(
    options: DeployOptions, deployed: DeployResult, chosen: Mapping[str, Artifact], skipped: Sequence[str]
) -> DeployDocument:
    result = deployed.fleet
    return DeployDocument(
        command="deploy",
        artifacts={target: _artifact_json(a) for target, a in chosen.items()},
        rollback=options.rollback,
        dry_run=options.dry_run,
        preflight_check_skipped=list(skipped),
        exit_code=result.exit_code,
        boards={
            name: _board_json(outcome, deployed.current.get(name))
            for name, outcome in result.outcomes.items()
        },
    )


def _board_json(outcome: Outcome[BoardReport], known: KnownCurrent | None) -> DeployedBoard | FailedBoard:
    if outcome.ok and outcome.value:
        return DeployedBoard(ok=True, **outcome.value.as_dict())
    hint = getattr(outcome.error, "hint", None)
    return FailedBoard(
        ok=False,
        error=outcome.message,
        timed_out=outcome.timed_out,
        hint=hint if isinstance(hint, str) else None,
        current=known.release if known is not None and known.sure else None,
        current_known=known is not None and known.read and known.sure,
    )


def _table(deployed: DeployResult, *, dry_run: bool, rollback: bool) -> Table:
    result = deployed.fleet
    table = compact_table(title="deploy" + (" (dry run)" if dry_run else ""), title_justify="left")
    for column in ("board", "result", "release", "sent", "rate", "verified", "time"):
        # The release id (variant-version-hash) and figures stay whole; names and sentences wrap.
        table.add_column(column, no_wrap=column in ("release", "rate", "time"), overflow="fold")
    for name, outcome in result.outcomes.items():
        report = outcome.value
        if outcome.ok and report is not None:
            table.add_row(
                escape(name),
                f"[green]{report.action}[/]",
                escape(report.release_id),
                _sent(report, rollback=rollback),
                f"{_size(report.rate)}/s" if report.bytes_sent else "-",
                _verified(report),
                f"{report.seconds:.1f}s",
            )
        else:
            failed = "[red]timed out[/]" if outcome.timed_out else "[red]failed[/]"
            known = deployed.current.get(name)
            # A board that failed shows what it was left on: never the release that was not made current.
            release = "-" if dry_run or known is None else f"current: {known.describe()}"
            table.add_row(escape(name), failed, escape(release), "-", "-", "-", f"{outcome.duration:.1f}s")
    return table


def _sent(report: BoardReport, *, rollback: bool) -> str:
    if rollback:
        return "-"
    if isinstance(report.plan, BoardPlan):  # a dry run: what it would send
        return f"would send {_size(report.plan.bytes_to_send)}"
    return f"{report.files_sent} files, {_size(report.bytes_sent)}"


def _verified(report: BoardReport) -> str:
    if report.verification is None:
        return "-"
    text = f"ort {report.verification.version}, {len(report.verification.models)} model(s)"
    if report.verification_recorded:
        text += f" (at {report.verified_at or 'an earlier deploy'})"
    return text


def _print_plan(board: str, plan: BoardPlan | RollbackPlan) -> None:
    """A dry run's plan for one board, step by step."""
    if isinstance(plan, RollbackPlan):
        console.print(
            f"[bold]{escape(board)}[/] would switch current from"
            f" {escape(str(plan.rollback_from))} back to {escape(plan.rollback_to)}"
        )
        return
    console.print(f"[bold]{escape(board)}[/] release {escape(plan.release_id)} in {escape(plan.release_dir)}")
    for item in plan.to_send:
        console.print(f"  send {escape(item.name)} ({_size(item.size)})")
    console.print(f"  already there: {len(plan.already_there)} file(s)")
    if plan.already_verified:
        when = (plan.verified.verified_at if plan.verified else None) or "an earlier deploy"
        console.print(
            f"  already current, verified (at {escape(str(when))}): nothing to do"
            " (--verify verifies it again)"
        )
    elif plan.unchanged:
        console.print("  already the current release: nothing to install, verification only")
    elif plan.release_exists:
        console.print("  release already on the board: switch current to it, then verify")
    elif plan.kind == "library":
        _print_native_install(plan)
    else:
        console.print(f"  run: {escape(shlex.join(plan.venv_argv))}")
        if plan.reuse_from:
            console.print(f"  reuse the installed packages of {escape(plan.reuse_from)} (same wheels)")
        else:
            console.print(f"  run: {escape(shlex.join(plan.install_argv))}")
        console.print("  then switch current, verify")
    for release in plan.prune:
        console.print(f"  remove release {escape(release)}")


def _print_native_install(plan: BoardPlan) -> None:
    """A C library build's release: staged and linked, no venv, no pip; verified by its runner."""
    native = plan.release_document.get("native")
    library = native.get("library") if isinstance(native, dict) else "?"
    console.print(
        f"  stage the C library build's files (native/), link native/lib/{escape(str(SONAME))} ->"
        f" {escape(str(library))}: no venv, no pip (the release runs no Python)"
    )
    console.print("  verify with its native runner, one inference per model:")
    for argv in plan.verify_argv:
        console.print(f"  run: {escape(shlex.join(argv))}")
    console.print("  then switch current")
