"""Profile-guided builds: the flags of the instrumented and the optimised build, what a profile is
valid for, and what its counter files say. Pure: no Docker, no SSH; reads only the files it is given.

The loop (``orch build --variant pgo --train-on BOARD``): the base variant is compiled once with
counters (``-fprofile-generate``), run on the board, and compiled again with what the counters
measured (``-fprofile-use``). GCC makes a profile from other sources or flags a hard error or, worse,
quietly half-uses it; so a profile carries the key of the build that measured it, and a build whose
key differs is refused before anything is compiled. Both builds see the same container paths
(/build/...), and ``-fprofile-prefix-path`` keeps the counter files' names relative to them.

Counter files (``.gcda``) are read here to say what the training covered: how many functions ran at
least once, and how many runs the counters add up. Their format is GCC's (``gcov-io.h``): 32-bit
little-endian words; since GCC 12 record lengths are in bytes and a counter record of zeros is
written as its negative length.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from orchestrator.builds.container_paths import BUILD
from orchestrator.common.aarch64_isa import features_for_flags
from orchestrator.errors import UsageError

# Where the counters are named in the instrumented build, and where a profile is copied for the
# optimised one; on the board GCOV_PREFIX puts the first under a scratch directory.
PROFILE_ROOT = "/orch-profile"
# Whose counters an instrumented build writes: GCC's .gcda files (GCOV_PREFIX redirects them on the
# board) or clang's raw profiles (LLVM_PROFILE_FILE names them); board_side/pgo_train.sh sets either.
Compiler = Literal["gcc", "clang"]


def atomic_counters(mcpu: str) -> bool:
    """Whether counters can be updated atomically on this CPU. MLAS compiles some kernels with its
    own ``-march=armv8.2-a+...``, where GCC makes an atomic counter update an LSE instruction
    (``ldadd``) inline, also in functions every CPU runs: an ARMv8.0 core (Cortex-A72, A57) has no
    LSE and dies of SIGILL (the instrumented MLAS test did, on an emulated Cortex-A72). There the
    counters are plain: updates from several threads may be lost, which ``-fprofile-correction``
    absorbs in the optimised build."""
    need = features_for_flags([f"-mcpu={mcpu}"])
    return need is not None and "atomics" in need.features


def instrument_flags(mcpu: str) -> tuple[str, ...]:
    """GCC's counters, atomic where the CPU has LSE (ORT runs thread pools), named relative to the
    build directory."""
    return (
        f"-fprofile-generate={PROFILE_ROOT}",
        f"-fprofile-update={'prefer-atomic' if atomic_counters(mcpu) else 'single'}",
        f"-fprofile-prefix-path={BUILD}",
    )


def profile_dir_in_container(digest: str) -> str:
    """The optimised build reads its profile here: the digest in the path makes every compiler
    cache entry specific to one profile (ccache hashes the command line)."""
    return f"{PROFILE_ROOT}/{digest[:16]}"


def optimise_flags(digest: str) -> tuple[str, ...]:
    """The profile used; code the training never ran keeps its normal optimisation
    (``-fprofile-partial-training``), counters of a threaded run that disagree slightly are mended
    (``-fprofile-correction``), and each source without counters is named (``-Wmissing-profile``,
    a warning: the variants that take a profile build with warnings not as errors)."""
    return (
        f"-fprofile-use={profile_dir_in_container(digest)}",
        f"-fprofile-prefix-path={BUILD}",
        "-fprofile-partial-training",
        "-fprofile-correction",
        "-Wmissing-profile",
    )


@dataclass(frozen=True, kw_only=True)
class ProfileKey:
    """What a profile is valid for: the build that measured it, without the profile flags. A build
    is given a profile only when its key is equal, field by field."""

    target: str
    mcpu: str
    ort_version: str
    source: str  # the source as the plan names it (e.g. Debian's source package and its release)
    scope: str
    toolchain: str
    image: str  # the build image's tag: its compiler, by content
    variant: str  # the base variant (its flags are in compiler_flags and build_args)
    compiler_flags: tuple[str, ...]
    build_args: tuple[str, ...]
    # The sysroot route's: the board's sysroot by content (its headers are compiled in). Left out of
    # the key's document when there is none, so a GCC build's key (and its digest) is as it was.
    sysroot: str | None = None
    # The source by content, as the build record identifies it (a tarball's sha256, a checkout's
    # commit): edited sources behind the same name are another build. Known once the source is
    # prepared (a build's record), so a plan's key has none.
    source_sha256: str | None = None

    @property
    def digest(self) -> str:
        text = json.dumps(self.as_dict(), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()

    def as_dict(self) -> dict[str, Any]:
        return {
            "target": self.target,
            "mcpu": self.mcpu,
            "ort_version": self.ort_version,
            "source": self.source,
            "scope": self.scope,
            "toolchain": self.toolchain,
            "image": self.image,
            "variant": self.variant,
            "compiler_flags": list(self.compiler_flags),
            "build_args": list(self.build_args),
            **({"sysroot": self.sysroot} if self.sysroot is not None else {}),
            **({"source_sha256": self.source_sha256} if self.source_sha256 is not None else {}),
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProfileKey:
        return cls(
            target=str(data["target"]),
            mcpu=str(data["mcpu"]),
            ort_version=str(data["ort_version"]),
            source=str(data["source"]),
            scope=str(data["scope"]),
            toolchain=str(data["toolchain"]),
            image=str(data["image"]),
            variant=str(data["variant"]),
            compiler_flags=tuple(str(flag) for flag in data["compiler_flags"]),
            build_args=tuple(str(arg) for arg in data["build_args"]),
            sysroot=None if data.get("sysroot") is None else str(data["sysroot"]),
            source_sha256=None if data.get("source_sha256") is None else str(data["source_sha256"]),
        )

    def differences(self, other: ProfileKey) -> list[str]:
        """Each field that differs: 'field: profile's -> build's', or for lists the items only one has."""
        mine, theirs = self.as_dict(), other.as_dict()
        found = []
        for name in dict.fromkeys([*mine, *theirs]):
            value = mine.get(name)
            if value == theirs.get(name):
                continue
            if name == "source_sha256":
                found.append(
                    f"source: {other.source} is not the source this profile was measured on"
                    f" (its content: {_short(value)} -> {_short(theirs.get(name))})"
                )
            elif isinstance(value, list):
                gone = [f"-{item}" for item in value if item not in theirs[name]]
                added = [f"+{item}" for item in theirs[name] if item not in value]
                found.append(f"{name}: {' '.join(gone + added) or 'the same items in another order'}")
            else:
                found.append(f"{name}: {value!r} -> {theirs.get(name)!r}")
        return found


def _short(identity: object) -> str:
    """A source identity in a message: a digest's first 16 characters (after its kind, if any)."""
    if not isinstance(identity, str):
        return "unknown"
    kind, sep, digest = identity.rpartition(":")
    return f"{kind}{sep}{digest[:16]}"


@dataclass(frozen=True, kw_only=True)
class Coverage:
    """What one training's counters say."""

    files: int  # counter files (one per compiled source linked into what ran)
    functions: int  # functions with counters
    functions_run: int  # of those, the ones that ran at least once
    runs: int  # program runs the counters add up (the largest count any file reports)

    @property
    def share(self) -> float:
        return self.functions_run / self.functions if self.functions else 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "counter_files": self.files,
            "functions": self.functions,
            "functions_run": self.functions_run,
            "share_of_functions_run": round(self.share, 4),
            "runs": self.runs,
        }


_MAGIC = 0x67636461  # "gcda"
_TAG_FUNCTION = 0x01000000
_TAG_COUNTER_BASE = 0x01A10000  # arc counters; other counter kinds follow at 0x01a30000, ...
_TAG_OBJECT_SUMMARY = 0xA1000000


class CounterFileError(ValueError):
    """A file that is not a GCC counter file of a format orch reads (GCC 12 or newer)."""


def _gcc_version(word: int) -> tuple[int, int]:
    """GCC writes its version as 4 characters, e.g. 'B42*' for 14.2 (major: 'A' + 10s digit)."""
    text = word.to_bytes(4, "big").decode("ascii", errors="replace")
    major = (ord(text[0]) - ord("A")) * 10 + int(text[1]) if text[1].isdigit() else 0
    minor = int(text[2]) if text[2].isdigit() else 0
    return major, minor


def read_counters(data: bytes, *, name: str = "counter file") -> tuple[int, int, int]:
    """(functions, functions that ran, runs) of one ``.gcda`` file."""
    if len(data) < 16 or struct.unpack_from("<I", data, 0)[0] != _MAGIC:
        raise CounterFileError(f"{name}: not a GCC counter file (no 'gcda' magic)")
    major, _ = _gcc_version(struct.unpack_from("<I", data, 4)[0])
    if major < 12:
        raise CounterFileError(f"{name}: written by GCC {major}; orch reads the format of GCC 12 and newer")
    offset = 16  # magic, version, stamp, checksum
    functions = ran = runs = 0
    current: bool | None = None  # the function being read: has any of its arcs run?
    while offset + 8 <= len(data):
        tag, length = struct.unpack_from("<Ii", data, offset)
        offset += 8
        if tag == 0:
            break
        if length < 0:
            continue  # a counter record of zeros: its length, negated, and no payload
        if offset + length > len(data):
            raise CounterFileError(f"{name}: cut short (a record runs past the end of the file)")
        if tag == _TAG_FUNCTION:
            ran += bool(current)
            current = False if length else None  # length 0: a function that was not emitted
            functions += length > 0
        elif tag == _TAG_COUNTER_BASE and current is not None:
            current = current or any(struct.unpack_from(f"<{length // 8}q", data, offset))
        elif tag == _TAG_OBJECT_SUMMARY and length >= 4:
            runs = max(runs, struct.unpack_from("<I", data, offset)[0])
        offset += length
    ran += bool(current)
    return functions, ran, runs


def coverage_of(directory: Path) -> Coverage:
    files = sorted(directory.rglob("*.gcda"))
    functions = ran = runs = 0
    for path in files:
        f, r, n = read_counters(path.read_bytes(), name=str(path))
        functions, ran, runs = functions + f, ran + r, max(runs, n)
    return Coverage(files=len(files), functions=functions, functions_run=ran, runs=runs)


_MISSING = re.compile(r"profile count data file not found \[-Wmissing-profile\]")


@dataclass(frozen=True, kw_only=True)
class ProfileUse:
    """What the optimised build's compiler said: sources compiled, and those it had no counters for
    (GCC: no counter file; clang: a function without data, or with data its code no longer fits,
    which clang names one function at a time, so it counts them too)."""

    compiled: int
    without_counters: int
    functions_without_data: int | None = None  # clang only
    functions_stale: int | None = None  # clang only

    @property
    def with_counters(self) -> int:
        return max(self.compiled - self.without_counters, 0)

    def as_dict(self) -> dict[str, Any]:
        functions = {
            name: value
            for name, value in (
                ("functions_without_data", self.functions_without_data),
                ("functions_stale", self.functions_stale),
            )
            if value is not None
        }
        return {
            "sources_compiled": self.compiled,
            "sources_with_counters": self.with_counters,
            "sources_without_counters": self.without_counters,
            **functions,
        }


def profile_use(log_lines: Iterable[str], compiled: int) -> ProfileUse:
    """GCC names each source it found no counters for (``-Wmissing-profile``)."""
    missing = sum(1 for line in log_lines if _MISSING.search(line))
    return ProfileUse(compiled=compiled, without_counters=missing)


@dataclass(frozen=True, kw_only=True)
class Training:
    """Where and how the counters were measured."""

    board: str
    cpu: str  # the board's CPU as it reports it, and its features: "cortex-a72; features: fp asimd ..."
    workload: str  # what ran: "onnxruntime_mlas_test shard 2/80", or the models
    runs: int
    seconds: float
    models: tuple[dict[str, str], ...] = ()  # {"name", "sha256"} of each model trained on
    settings: dict[str, Any] = field(default_factory=dict)
    cpu_part: str = ""  # /proc/cpuinfo's "implementer:part" (0x41:0xd08); "" in older profiles

    @property
    def core(self) -> str:
        """The core the counters were measured on (``cpu`` without its features)."""
        return self.cpu.partition(";")[0].strip()

    def as_dict(self) -> dict[str, Any]:
        return {
            "board": self.board,
            "cpu": self.cpu,
            "cpu_part": self.cpu_part,
            "workload": self.workload,
            "runs": self.runs,
            "seconds": round(self.seconds, 1),
            "models": list(self.models),
            "settings": self.settings,
        }


def refuse_unless_fits(profile_key: ProfileKey, build_key: ProfileKey, *, where: Path) -> None:
    """A profile measured on other sources, flags, compiler or CPU is refused, naming what differs:
    its counters describe other object code (GCC would stop at the mismatch, or half-use them)."""
    differences = profile_key.differences(build_key)
    if differences:
        raise UsageError(
            f"the profile in {where} was measured on another build: " + "; ".join(differences),
            hint="train it for this build (orch build --variant pgo --train-on BOARD)",
        )
