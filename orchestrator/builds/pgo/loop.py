"""`orch build --variant pgo --train-on BOARD`: a profile-guided build in one call.

1. The variant compiled with counters (its own build, ``<variant>-instrumented``, never deployed).
2. Run on the board from a scratch directory (``builds.pgo.boards``, ``builds.pgo.training``); the
   counters come back and are stored with the key of the build that measured them
   ($ORCH_HOME/profiles/..., ``builds.pgo.stored``).
3. Compiled again with what they measured. The record says where the profile was trained, what its
   counters covered, and how many compiled sources had counters (GCC names each that had none;
   clang each function without data): a profile that reached no source fails the build instead of
   passing for one.

GCC's loop for a board's own distribution, clang's on the sysroot route (``builds.pgo.flavour``):
clang's raw profiles are always merged into one indexed profile with llvm-profdata, one board's too.

``--profile DIR`` takes a stored profile instead of steps 1 and 2, only for the very build that
measured it (its key, the source's content included: ``builds.pgo.stored``) and trained on the
build's CPU (``builds.pgo.cpu``); any difference is refused, naming it. The loop prints nothing:
each build runs through the caller's ``execute_build(plan, engine, options)`` (``builds.run``'s,
with the build's log and progress), each step is told to its ``note``, and what it made comes back
as a ``PgoResult`` for the command to print.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.markup import escape

from orchestrator.adapters.engine import Engine
from orchestrator.artifacts.store import BuildRecord, write_manifest
from orchestrator.board import Board
from orchestrator.builds.execute import BuildResult, ExecuteOptions
from orchestrator.builds.pgo.boards import NewProfile, check_training_cpus, train, training_boards
from orchestrator.builds.pgo.cpu import refuse_other_cpus
from orchestrator.builds.pgo.flavour import Flavour, flavour_of
from orchestrator.builds.pgo.profile import (
    Coverage,
    ProfileKey,
    ProfileUse,
    Training,
    profile_dir_in_container,
)
from orchestrator.builds.pgo.stored import (
    ReadyProfile,
    counters_digest,
    profile_key,
    read_stored,
    source_identity_now,
    stored_profile_dir,
)
from orchestrator.builds.plan import BuildPlan
from orchestrator.builds.request import BuildRequest, PlanContext, TrainRequest, plan_build
from orchestrator.builds.variants import Variant
from orchestrator.errors import BuildError, UsageError
from orchestrator.targets import TargetProfile

# One build run with the caller's progress display: ``execute_build(plan, engine, options)``.
ExecuteBuild = Callable[[BuildPlan, Engine, ExecuteOptions], BuildResult]
_COMPILED = re.compile(r"Building (?:C|CXX) object ")


@dataclass(frozen=True, kw_only=True)
class PgoPlan:
    """The loop planned: the base build (whose key the profile has), the instrumented build, the
    training boards and, with ``--profile``, the stored profile already read and checked."""

    request: BuildRequest
    profile: TargetProfile
    variant: Variant
    context: PlanContext
    base: BuildPlan
    instrumented: BuildPlan
    key: ProfileKey
    flavour: Flavour
    boards: tuple[Board, ...]
    stored: ReadyProfile | None

    @property
    def profile_dir(self) -> Path:
        """Where the profile is read from (``--profile``) or stored."""
        return self.request.train.profile or stored_profile_dir(self.key)

    @property
    def workload(self) -> str:
        train = self.request.train
        return train.mlas.describe() if self.request.scope == "mlas-test" else train.models.describe()


@dataclass(frozen=True, kw_only=True)
class PgoResult:
    """What the loop made: the profile (its key, where it is stored, its trainings and coverage),
    the two builds (no instrumented one when a stored profile was taken) and the optimised build's
    record with the profile in it."""

    key: ProfileKey
    counters_digest: str
    stored: Path
    trainings: tuple[Training, ...]
    coverage: Coverage
    use: ProfileUse
    instrumented: BuildResult | None
    optimised: BuildResult
    record: dict[str, Any]
    total_s: float  # all three steps


def plan_profile_guided(
    request: BuildRequest, profile: TargetProfile, variant: Variant, context: PlanContext
) -> PgoPlan:
    """The loop's plans; a stored profile is read and checked against this build before anything
    else, dry run or not."""
    base = plan_build(request, profile, variant, context, None)
    key = profile_key(base)
    flavour = flavour_of(base.toolchain)
    train = request.train
    instrumented = plan_build(
        request,
        profile,
        with_flags(variant, flavour.instrument_flags(profile.mcpu), suffix="-instrumented"),
        context,
        None,
    )
    boards = tuple(training_boards(train)) if train.boards else ()
    stored = None
    if train.profile:
        stored = read_stored(train.profile, replace(key, source_sha256=source_identity_now(base)), flavour)
        trained_on = {training.board: training.core for training in stored.trainings}
        refuse_other_cpus(
            trained_on,
            profile,
            force=train.force_profile,
            what=f"the profile in {train.profile}",
        )
    return PgoPlan(
        request=request,
        profile=profile,
        variant=variant,
        context=context,
        base=base,
        instrumented=instrumented,
        key=key,
        flavour=flavour,
        boards=boards,
        stored=stored,
    )


def run_profile_guided(
    plan: PgoPlan, *, execute_build: ExecuteBuild, note: Callable[[str], None]
) -> PgoResult:
    """The planned loop, each build run by ``execute_build``, each step told to ``note`` before it
    starts (console markup). A dry run shows the plan instead."""
    request, profile, variant, context = plan.request, plan.profile, plan.variant, plan.context
    if request.dry_run:
        raise ValueError("a dry run shows the loop's plan and runs nothing")
    started = time.monotonic()
    engine = Engine()
    options = ExecuteOptions(force_flags=request.force_flags, preflight=request.preflight)
    first = None
    if plan.stored is not None:
        ready = plan.stored
    else:
        check_training_cpus(plan.boards, profile, force=request.train.force_profile)
        flags = " ".join(plan.flavour.instrument_flags(profile.mcpu))
        note(f"[bold]1/3[/] the instrumented build ({escape(flags)})")
        first = execute_build(plan.instrumented, engine, options)
        names = ", ".join(board.name for board in plan.boards)
        note(f"[bold]2/3[/] training on {names}: {plan.workload}")
        key = replace(plan.key, source_sha256=source_identity(first.record, build_dir=first.build_dir))
        ready = train(
            request, plan.boards, first, NewProfile(where=plan.profile_dir, key=key, flavour=plan.flavour)
        )
    digest = counters_digest(ready.counters, plan.flavour.profile_glob)
    optimised = replace(
        plan_build(request, profile, with_flags(variant, plan.flavour.optimise_flags(digest)), context, None),
        profile_input=(ready.counters, profile_dir_in_container(digest)),
    )
    note(f"[bold]3/3[/] the optimised build (profile {digest[:12]})")
    result = execute_build(optimised, engine, options)
    compiled = source_identity(result.record, build_dir=result.build_dir)
    refuse_another_source(ready, compiled, build_dir=result.build_dir)
    use = _used(result, plan.flavour)
    return PgoResult(
        key=ready.key,
        counters_digest=digest,
        stored=ready.where,
        trainings=ready.trainings,
        coverage=ready.coverage,
        use=use,
        instrumented=first,
        optimised=result,
        record=_record_with_profile(result, digest, ready, use),
        total_s=time.monotonic() - started,
    )


def with_flags(variant: Variant, flags: tuple[str, ...], *, suffix: str = "") -> Variant:
    """The variant with the profile flags of one step (and its own name for the instrumented one)."""
    args = variant.build_args
    if "--compile_no_warning_as_error" not in args:
        # GCC's -Wmissing-profile names sources without counters: a report, not a failure.
        args = (*args, "--compile_no_warning_as_error")
    return replace(variant, name=variant.name + suffix, cflags=(*variant.cflags, *flags), build_args=args)


def refuse_what_cannot_train(request: BuildRequest, variant: Variant, train: TrainRequest) -> None:
    """What the real run would refuse before compiling anything (the dry run refuses it too)."""
    if not variant.profile_guided:
        if train.boards or train.profile:
            raise UsageError(
                f"--train-on and --profile are for a profile-guided variant; {variant.name!r} is not one",
                hint="orch build --variant pgo --train-on BOARD",
            )
        return
    if request.is_batch:
        raise UsageError("a profile-guided build is one target and one variant", hint="build them one by one")
    if request.docker_host:
        raise UsageError(
            "a profile-guided build runs on this machine's engine (its three steps share the profile here)",
            hint="leave out --docker-host",
        )
    if train.boards and train.profile:
        raise UsageError(
            "--train-on measures a new profile, --profile takes a stored one: give one of them",
            hint="--profile DIR skips the instrumented build and the training",
        )
    example = f"orch build --target {request.targets[0]} --variant {variant.name}"
    if not train.boards and not train.profile:
        raise UsageError(
            f"variant {variant.name!r} is trained on a board: name it with --train-on BOARD",
            hint=f"{example} --train-on BOARD --model m.onnx (or --profile DIR for a profile measured before)",
        )
    models = train.models.models
    if request.scope == "wheel" and train.boards and not models:
        raise UsageError(
            "a profile-guided wheel is trained on your models: name them with --model",
            hint=f"{example} --train-on {train.boards[0]} --model m.onnx",
        )
    if request.scope == "mlas-test" and models:
        raise UsageError(
            "--scope mlas-test trains on ORT's MLAS tests (--train-shard), not on models",
            hint="leave out --model, or build the wheel",
        )


def source_identity(record: BuildRecord | None, *, build_dir: Path) -> str:
    """The source's identity as a build's record holds it (a tarball's sha256, a checkout's commit)."""
    source = record.source if record is not None else None
    identity = source.sha256 if source is not None else None
    if not identity:
        raise BuildError(
            f"the build in {build_dir} recorded no identity of its source: a profile is keyed by it"
        )
    return identity


def refuse_another_source(ready: ReadyProfile, compiled: str, *, build_dir: Path) -> None:
    """The optimised build compiled the source the profile was measured on, by content (a checkout
    edited during the training, or behind a stored profile, is another source: its counters
    describe other code)."""
    if compiled != ready.key.source_sha256:
        differences = ready.key.differences(replace(ready.key, source_sha256=compiled))
        raise BuildError(
            f"the optimised build in {build_dir} is not the build the profile in {ready.where}"
            f" was measured on: {'; '.join(differences)}",
            hint="train the profile again on this source (orch build --variant pgo --train-on BOARD)",
        )


def _used(result: BuildResult, flavour: Flavour) -> ProfileUse:
    lines = result.log_path.read_text(errors="replace").splitlines()
    use = flavour.profile_use(lines, compiled=sum(1 for line in lines if _COMPILED.search(line)))
    if use.compiled and not use.with_counters:
        found = (
            "found no counters for any" if flavour.compiler == "gcc" else "lacked data for a function in each"
        )
        raise BuildError(
            f"the profile reached none of the {use.compiled} compiled sources ({flavour.name} {found})",
            hint=f"full log: {result.log_path}",
        )
    return use


def _record_with_profile(
    result: BuildResult, digest: str, ready: ReadyProfile, use: ProfileUse
) -> dict[str, Any]:
    """The optimised build's record with its profile: in the artifact's manifest (a wheel), or
    beside the build's output."""
    assert result.record is not None
    profile: dict[str, object] = {
        "key_digest": ready.key.digest,
        "source_sha256": ready.key.source_sha256,
        "counters_digest": digest,
        "stored": str(ready.where),
        "trainings": [training.as_dict() for training in ready.trainings],
        "merged": ready.merged,
        "coverage": ready.coverage.as_dict(),
        "use": use.as_dict(),
    }
    if result.artifact is not None:
        manifest = result.artifact.manifest
        manifest = replace(manifest, build=replace(manifest.build, profile=profile))
        write_manifest(result.artifact.directory, manifest)
        return manifest.to_json()
    record = replace(result.record, profile=profile).to_json()
    (result.build_dir / "manifest.json").write_text(json.dumps(record, indent=2) + "\n")
    return record
