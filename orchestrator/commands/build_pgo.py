"""`orch build --variant pgo --train-on BOARD`: a profile-guided build in one command.

1. The variant compiled with counters (its own build, ``<variant>-instrumented``, never deployed).
2. Run on the board from a scratch directory (``builds.pgo_training``); the counters come back and
   are stored with the key of the build that measured them ($ORCH_HOME/profiles/...).
3. Compiled again with what they measured. The record says where the profile was trained, what its
   counters covered, and how many compiled sources had counters (GCC names each that had none;
   clang each function without data): a profile that reached no source fails the build instead of
   passing for one.

GCC's loop for a board's own distribution, clang's on the sysroot route (``builds.pgo_flavour``):
clang's raw profiles are always merged into one indexed profile with llvm-profdata, one board's too.

``--profile DIR`` takes a stored profile instead of steps 1 and 2, only for the very build that
measured it (its key); any difference is refused, naming it. One profile per CPU: a board whose
CPU is not the target's trains nothing unless ``--force-profile``.
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from rich.markup import escape

from orchestrator.adapters.engine import Engine
from orchestrator.adapters.ssh import connect
from orchestrator.artifacts.store import write_manifest
from orchestrator.board import Board
from orchestrator.builds import pgo_clang
from orchestrator.builds.execute import BuildResult, ExecuteOptions
from orchestrator.builds.pgo import (
    PROFILE_ROOT,
    Coverage,
    ProfileKey,
    ProfileUse,
    Training,
    coverage_of,
    profile_dir_in_container,
    refuse_unless_fits,
)
from orchestrator.builds.pgo_flavour import Flavour, flavour_of
from orchestrator.builds.pgo_merge import gcov_tool, merge_counters, merge_raw_profiles
from orchestrator.builds.pgo_training import CountersInto, train_mlas_test, train_wheel
from orchestrator.builds.plan import BuildPlan, refused_error
from orchestrator.builds.request import BuildRequest, PlanContext, TrainRequest, plan_build
from orchestrator.builds.variants import Variant
from orchestrator.commands.options import Selection, selected_boards
from orchestrator.console import console, emit_json
from orchestrator.errors import BuildError, UsageError
from orchestrator.fleet.board_facts import read_facts
from orchestrator.paths import orch_home
from orchestrator.targets import TargetProfile, resolve_target

PROFILE_FILE = "profile.json"
# Under a stored profile: what the build uses (GCC's counter files as GCOV_PREFIX laid them out; clang's
# merged profile with llvm-profdata's words about it).
COUNTERS = "counters"
# Under a stored profile trained on several boards (clang: on any): each board's own counters.
BOARD_COUNTERS = "boards"
PROFILE_ROOT_NAME = PROFILE_ROOT.strip("/")  # the counters' top directory under GCOV_PREFIX
_COMPILED = re.compile(r"Building (?:C|CXX) object ")


def profile_key(plan: BuildPlan) -> ProfileKey:
    """The key of the build (without profile flags) a profile is measured on and valid for."""
    args = list(plan.build_args)
    if "--parallel" in args:  # the job count changes no object code
        index = args.index("--parallel")
        del args[index : index + 2]
    return ProfileKey(
        target=plan.target.name,
        mcpu=plan.target.mcpu,
        ort_version=plan.ort_version,
        source=plan.source.describe(),
        scope=plan.scope,
        toolchain=plan.toolchain,
        image=plan.image.tag,
        variant=plan.variant.name,
        compiler_flags=plan.compiler_flags,
        build_args=tuple(args),
        sysroot=plan.sysroot.digest if plan.sysroot is not None else None,
    )


def stored_profile_dir(key: ProfileKey) -> Path:
    return orch_home() / "profiles" / key.target / key.variant / key.digest[:16]


def counters_digest(directory: Path, pattern: str = "*.gcda") -> str:
    """One hash of every counter file (or merged profile), names included: the optimised build's cache key."""
    digest = hashlib.sha256()
    for path in sorted(directory.rglob(pattern)):
        digest.update(path.relative_to(directory).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


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


def _training_boards(train: TrainRequest, profile: TargetProfile) -> list[Board]:
    """The training boards, each of the target's CPU: one profile is measured for one CPU."""
    boards = selected_boards(Selection(inventory=train.inventory, hosts=train.boards))
    for board in boards:
        trained_for = resolve_target(board.target)
        if trained_for.mcpu != profile.mcpu and not train.force_profile:
            raise UsageError(
                f"board {board.name} is a {trained_for.cpu} ({trained_for.mcpu}); the build is for a"
                f" {profile.cpu} ({profile.mcpu}): a profile is measured for one CPU",
                hint=f"train on {profile.name} boards, or pass --force-profile",
            )
    return boards


@dataclass(frozen=True, kw_only=True)
class _Profile:
    """A profile ready for the optimised build: where it is stored, how it was trained, what it covers."""

    where: Path
    flavour: Flavour
    trainings: tuple[Training, ...]  # one per board
    coverage: Coverage  # of the counters the build uses (the boards' added up)
    merged: dict[str, Any] | None = None  # how several boards' counters (clang: any) were added up

    @property
    def counters(self) -> Path:
        """What the optimised build reads: GCC's counter tree, or clang's merged profile with
        llvm-profdata's words about it."""
        counters = self.where / COUNTERS
        return counters / PROFILE_ROOT_NAME if self.flavour.compiler == "gcc" else counters


def run_profile_guided(
    request: BuildRequest,
    profile: TargetProfile,
    variant: Variant,
    context: PlanContext,
    *,
    execute_build: Callable[[BuildPlan, Engine, ExecuteOptions], BuildResult],
) -> int:
    """The loop; ``execute_build(plan, engine, options)`` runs one build with progress."""
    started = time.monotonic()
    train = request.train
    base = plan_build(request, profile, variant, context, None)
    key = profile_key(base)
    flavour = flavour_of(base.toolchain)
    boards = _training_boards(train, profile) if train.boards else []
    instrumented = plan_build(
        request,
        profile,
        _with_flags(variant, flavour.instrument_flags(profile.mcpu), suffix="-instrumented"),
        context,
        None,
    )
    # A stored profile is read and checked against this build before anything else, dry run or not.
    stored = _read_stored(train.profile, key, flavour) if train.profile else None
    if request.dry_run:
        _show_dry_run(request, (base, instrumented), key, boards)
        return 0
    for plan in (instrumented, base):
        refusal = refused_error(plan)
        if refusal is not None:
            raise refusal
    engine = Engine()
    options = ExecuteOptions(force_flags=request.force_flags, preflight=request.preflight)
    if stored is not None:
        ready = stored
    else:
        flags = " ".join(flavour.instrument_flags(profile.mcpu))
        console.print(f"[bold]1/3[/] the instrumented build ({escape(flags)})")
        first = execute_build(instrumented, engine, options)
        names = ", ".join(board.name for board in boards)
        console.print(f"[bold]2/3[/] training on {names}: {_workload(request)}")
        ready = _train(
            request, boards, first, _Stored(where=stored_profile_dir(key), key=key, flavour=flavour)
        )
    digest = counters_digest(ready.counters, flavour.profile_glob)
    optimised = replace(
        plan_build(request, profile, _with_flags(variant, flavour.optimise_flags(digest)), context, None),
        profile_input=(ready.counters, profile_dir_in_container(digest)),
    )
    console.print(f"[bold]3/3[/] the optimised build (profile {digest[:12]})")
    result = execute_build(optimised, engine, options)
    use = _used(result, flavour)
    record = _record_with_profile(result, key, digest, ready, use)
    if request.json:
        emit_json(
            {
                "target": optimised.target.name,
                "variant": optimised.artifact_variant,
                "scope": optimised.scope,
                "build_dir": str(result.build_dir),
                "duration_s": round(result.duration_s, 1),  # the optimised build
                "total_s": round(time.monotonic() - started, 1),  # all three steps
                "manifest": record,
                "manifest_path": str(result.build_dir / "manifest.json"),
            }
        )
        return 0
    console.print(
        f"[green]built[/] {optimised.target.name}/{optimised.artifact_variant} with the profile of"
        f" {', '.join(t.board for t in ready.trainings)} ({ready.trainings[0].workload}):"
        f" {use.with_counters} of {use.compiled}"
        f" compiled sources had counters; {ready.coverage.functions_run} of {ready.coverage.functions}"
        f" instrumented functions ran -> {result.build_dir}"
    )
    return 0


def _with_flags(variant: Variant, flags: tuple[str, ...], *, suffix: str = "") -> Variant:
    args = variant.build_args
    if "--compile_no_warning_as_error" not in args:
        # GCC's -Wmissing-profile names sources without counters: a report, not a failure.
        args = (*args, "--compile_no_warning_as_error")
    return replace(variant, name=variant.name + suffix, cflags=(*variant.cflags, *flags), build_args=args)


def _workload(request: BuildRequest) -> str:
    train = request.train
    return train.mlas.describe() if request.scope == "mlas-test" else train.models.describe()


@dataclass(frozen=True, kw_only=True)
class _Stored:
    """Where a new profile is stored, the key of the build that measures it, and whose loop it is."""

    where: Path
    key: ProfileKey
    flavour: Flavour


def _train(request: BuildRequest, boards: list[Board], first: BuildResult, stored: _Stored) -> _Profile:
    """The instrumented build run on each board; with several boards (clang: any) their counters are
    added up by the compiler's own tool; the profile is stored with the build's key."""
    where, flavour = stored.where, stored.flavour
    shutil.rmtree(where, ignore_errors=True)
    merges = flavour.merges(len(boards))
    trainings = []
    for board in boards:
        into = where / BOARD_COUNTERS / board.name if merges else where / COUNTERS
        trainings.append(_train_on(request, board, first, into, flavour))
        if merges and flavour.compiler == "gcc":  # one board's counters are the profile's, checked below
            _require_counters(coverage_of(into), board.name)
        elif merges and not pgo_clang.raw_profiles(into):
            raise _no_counters(board.name, 0)
    merged = (
        _merge(first.plan, [where / BOARD_COUNTERS / board.name for board in boards], stored)
        if merges
        else None
    )
    coverage = _coverage(where, flavour)
    _require_counters(coverage, ", ".join(board.name for board in boards))
    document = {
        "key": stored.key.as_dict(),
        "trainings": [training.as_dict() for training in trainings],
        "merged": merged,
        "coverage": coverage.as_dict(),
    }
    (where / PROFILE_FILE).write_text(json.dumps(document, indent=2) + "\n")
    return _Profile(
        where=where, flavour=flavour, trainings=tuple(trainings), coverage=coverage, merged=merged
    )


def _merge(plan: BuildPlan, boards: list[Path], stored: _Stored) -> dict[str, Any]:
    """The boards' counters added up in the instrumented build's image: GCC's counter trees with
    gcov-tool, clang's raw profiles into one indexed profile with llvm-profdata."""
    if stored.flavour.compiler == "clang":
        return merge_raw_profiles(Engine(), plan.image.tag, boards, stored.where / COUNTERS).as_dict()
    files = merge_counters(
        Engine(),
        plan.image.tag,
        [tree / PROFILE_ROOT_NAME for tree in boards],
        stored.where / COUNTERS / PROFILE_ROOT_NAME,
        cross_prefix=plan.target.cross_prefix,
    )
    return {"tool": gcov_tool(plan.target.cross_prefix), "image": plan.image.tag, "counter_files": files}


def _coverage(where: Path, flavour: Flavour) -> Coverage:
    """What the counters the optimised build uses cover: read from GCC's counter files, or from what
    llvm-profdata said of the merged profile and the boards' raw profiles."""
    if flavour.compiler == "gcc":
        return coverage_of(where / COUNTERS)
    boards = where / BOARD_COUNTERS
    trees = sorted(path for path in boards.iterdir() if path.is_dir()) if boards.is_dir() else []
    return pgo_clang.coverage_of(where / COUNTERS, trees)


def _train_on(
    request: BuildRequest, board: Board, first: BuildResult, into: Path, flavour: Flavour
) -> Training:
    """One board's training: the instrumented build run there, its counters brought into ``into``."""
    with connect(board) as session:
        facts = read_facts(session, board, board.workdir)
        features = " ".join(facts.cpu_features) or "not reported"
        cpu = f"{resolve_target(board.target).cpu}; features: {features}"
        counters = CountersInto(into, flavour.compiler)
        if first.artifact is None:
            return train_mlas_test(
                session, first.build_dir / "out", workload=request.train.mlas, cpu=cpu, into=counters
            )
        return train_wheel(
            session, first.artifact.wheel_path, workload=request.train.models, cpu=cpu, into=counters
        )


def _require_counters(coverage: Coverage, where: str) -> None:
    if not coverage.files or not coverage.functions_run:
        raise _no_counters(where, coverage.files)


def _no_counters(where: str, files: int) -> BuildError:
    return BuildError(
        f"the training on {where} wrote no counters that ran ({files} counter files)",
        hint="the instrumented program must exit normally on the board; see its output above",
    )


def _read_stored(where: Path, key: ProfileKey, flavour: Flavour) -> _Profile:
    path = where / PROFILE_FILE
    try:
        document = json.loads(path.read_text())
        stored_key = ProfileKey.from_dict(document["key"])
        # A profile stored by an orch that trained on one board only has "training".
        trained = document["trainings"] if "trainings" in document else [document["training"]]
        trainings = tuple(Training(**{**t, "models": tuple(t.get("models", ()))}) for t in trained)
        merged = document.get("merged")
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise UsageError(
            f"{path}: not a profile orch stored ({error})",
            hint="a profile directory holds profile.json and counters/, as orch build --train-on leaves it",
        ) from None
    # Another toolchain's profile differs in its key (toolchain, image): refused before it is read.
    refuse_unless_fits(stored_key, key, where=where)
    coverage = _coverage(where, flavour)
    return _Profile(where=where, flavour=flavour, trainings=trainings, coverage=coverage, merged=merged)


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
    result: BuildResult, key: ProfileKey, digest: str, ready: _Profile, use: ProfileUse
) -> dict[str, Any]:
    """The optimised build's record with its profile: in the artifact's manifest (a wheel), or
    beside the build's output."""
    assert result.record is not None
    profile = {
        "key_digest": key.digest,
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


def _show_dry_run(
    request: BuildRequest, plans: tuple[BuildPlan, BuildPlan], key: ProfileKey, boards: list[Board]
) -> None:
    """The three steps with the flags of the toolchain's loop (GCC's, or clang's on the sysroot
    route) and the tool that adds the boards' counters up."""
    base, instrumented = plans
    train = request.train
    flavour = flavour_of(base.toolchain)
    optimise = [*base.compiler_flags, *flavour.optimise_flags("0" * 64)[1:], "-fprofile-use=..."]
    merges = flavour.merges(len(boards))
    merge = f"{flavour.merge_tool(base.target.cross_prefix)} merge" if merges else None
    steps: dict[str, Any] = {
        "instrument": None if train.profile else {"compiler_flags": list(instrumented.compiler_flags)},
        "train": None
        if not boards
        else {
            "boards": [board.name for board in boards],
            "workload": _workload(request),
            "merge": merge,
        },
        "optimise": {"compiler_flags": optimise},
        "profile": str(train.profile or stored_profile_dir(key)),
        "key_digest": key.digest,
    }
    if request.json:
        emit_json({**base.as_dict(), "profile_guided": steps})
        return
    console.print(f"[bold]orch build plan[/] -- {base.target.name}/{base.variant.name}, profile-guided")
    if boards:
        console.print(f"1. instrumented build: {escape(' '.join(instrumented.compiler_flags))}")
        added_up = f", counters added up with {merge}" if merge else ""
        console.print(
            f"2. training on {', '.join(board.name for board in boards)}: {_workload(request)}{added_up}"
        )
    else:
        console.print(f"1-2. the stored profile {train.profile} (checked against this build's key)")
    console.print(f"3. optimised build: {escape(' '.join(optimise))}")
    console.print(f"profile stored in {steps['profile']}")
