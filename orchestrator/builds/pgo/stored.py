"""A profile as orch stores it under ``$ORCH_HOME/profiles/<target>/<variant>/<key>/``: the key of
the build that measured it, how and where it was trained, what its counters cover (``profile.json``),
and the counters the optimised build reads (``counters/``; with several boards, or clang's loop,
each board's own under ``boards/``). Reads and writes files only: no Docker, no SSH.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from orchestrator.builds.pgo import clang
from orchestrator.builds.pgo.flavour import Flavour
from orchestrator.builds.pgo.profile import (
    PROFILE_ROOT,
    Coverage,
    ProfileKey,
    Training,
    coverage_of,
    refuse_unless_fits,
)
from orchestrator.builds.plan import BuildPlan
from orchestrator.common.digests import file_sha256
from orchestrator.errors import UsageError
from orchestrator.paths import orch_home

PROFILE_FILE = "profile.json"
# Under a stored profile: what the build uses (GCC's counter files as GCOV_PREFIX laid them out; clang's
# merged profile with llvm-profdata's words about it).
COUNTERS = "counters"
# Under a stored profile trained on several boards (clang: on any): each board's own counters.
BOARD_COUNTERS = "boards"
PROFILE_ROOT_NAME = PROFILE_ROOT.strip("/")  # the counters' top directory under GCOV_PREFIX


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


def source_identity_now(plan: BuildPlan) -> str | None:
    """The source's identity as the build record will hold it, where it is known before the source
    is prepared: a tarball's sha256. A checkout's, a clone's or Debian's is known once the build has
    prepared it (its record), and is checked then."""
    if plan.source.kind == "tarball":
        return file_sha256(Path(plan.source.location))
    return None


def stored_profile_dir(key: ProfileKey) -> Path:
    """Where a build's profile is stored: by the plan's key (a training of edited sources behind
    the same name replaces the profile of the old ones)."""
    key = replace(key, source_sha256=None)
    return orch_home() / "profiles" / key.target / key.variant / key.digest[:16]


def counters_digest(directory: Path, pattern: str = "*.gcda") -> str:
    """One hash of every counter file (or merged profile), names included: the optimised build's cache key."""
    digest = hashlib.sha256()
    for path in sorted(directory.rglob(pattern)):
        digest.update(path.relative_to(directory).as_posix().encode() + b"\0")
        digest.update(hashlib.sha256(path.read_bytes()).digest())
    return digest.hexdigest()


@dataclass(frozen=True, kw_only=True)
class ReadyProfile:
    """A profile ready for the optimised build: where it is stored, how it was trained, what it covers."""

    where: Path
    key: ProfileKey  # of the build that measured it, its source by content included
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


def stored_coverage(where: Path, flavour: Flavour) -> Coverage:
    """What the counters the optimised build uses cover: read from GCC's counter files, or from what
    llvm-profdata said of the merged profile and the boards' raw profiles."""
    if flavour.compiler == "gcc":
        return coverage_of(where / COUNTERS)
    boards = where / BOARD_COUNTERS
    trees = sorted(path for path in boards.iterdir() if path.is_dir()) if boards.is_dir() else []
    return clang.coverage_of(where / COUNTERS, trees)


def write_profile(profile: ReadyProfile) -> None:
    """``profile.json`` beside the counters: what ``read_stored`` reads back."""
    document = {
        "key": profile.key.as_dict(),
        "trainings": [training.as_dict() for training in profile.trainings],
        "merged": profile.merged,
        "coverage": profile.coverage.as_dict(),
    }
    (profile.where / PROFILE_FILE).write_text(json.dumps(document, indent=2) + "\n")


def read_stored(where: Path, key: ProfileKey, flavour: Flavour) -> ReadyProfile:
    """A stored profile, refused (naming each difference) unless it was measured on this very build.
    ``key`` is the build's; without its source's content (not known yet) the profile's is taken
    here and checked against the build's record once the source is prepared."""
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
    if stored_key.source_sha256 is None:
        raise UsageError(
            f"the profile in {where} does not say which source it was measured on by content"
            " (stored before orch keyed profiles by the source's content)",
            hint="train it again for this build (orch build --variant pgo --train-on BOARD)",
        )
    if key.source_sha256 is None:
        key = replace(key, source_sha256=stored_key.source_sha256)
    # Another toolchain's profile differs in its key (toolchain, image): refused before it is read.
    refuse_unless_fits(stored_key, key, where=where)
    coverage = stored_coverage(where, flavour)
    return ReadyProfile(
        where=where, key=stored_key, flavour=flavour, trainings=trainings, coverage=coverage, merged=merged
    )
