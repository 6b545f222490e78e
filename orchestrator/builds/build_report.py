"""What the build container reports back (run_build.sh leaves it in ``orch-report``, package_wheel.py
prints it to the log): the compiler cache's statistics, whether CMake configured again and how many
steps ninja ran, the flags each key source really got, the compiler, and the packaged wheel."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, TypedDict

from orchestrator.builds.build_log import ninja_step
from orchestrator.builds.plan import BuildPlan
from orchestrator.errors import BuildError
from orchestrator.paths import TOOLCHAINS_DIR

# What run_build.sh leaves in the build volume for orch to copy out (see docker/build/run_build.sh).
REPORT_NAME = "orch-report"
# Sources whose compile command must show the variant's flags: the MLAS kernels and the session.
READBACK_SOURCES = {
    "mlas": "onnxruntime/core/mlas/lib/sgemm.cpp",
    "session": "onnxruntime/core/session/inference_session.cc",
}
ConfigureStep = Literal["ran", "reused"]
_CONFIGURE_STEPS: dict[str, ConfigureStep] = {"ran": "ran", "reused": "reused"}


@dataclass(frozen=True, kw_only=True)
class CcacheStats:
    """``ccache --print-stats`` of one build: hits, misses, hit rate, and where the hits came from."""

    hits: int
    misses: int
    hit_rate: float | None
    direct_hits: int
    uncacheable: int
    # Where the hits came from: the engine's ccache volume, or the shared remote storage (--cache).
    local_hits: int
    local_misses: int
    remote_hits: int
    remote_misses: int
    remote_writes: int
    remote_errors: int


@dataclass(frozen=True, kw_only=True)
class CompilerCacheUse:
    """What the compiler cache did for one build: ccache's statistics (None: the build left none)
    and, with a shared cache (--cache), its address and whether its relay reached it."""

    stats: CcacheStats | None = None
    remote_storage: str | None = None
    remote_reachable: bool = False

    @property
    def recorded(self) -> bool:
        return self.stats is not None or self.remote_storage is not None

    @property
    def hits(self) -> int | None:
        return None if self.stats is None else self.stats.hits

    @property
    def misses(self) -> int | None:
        return None if self.stats is None else self.stats.misses

    def as_dict(self) -> dict[str, Any]:
        """The manifest's and --json's ``ccache`` document."""
        document = dataclasses.asdict(self.stats) if self.stats is not None else {}
        if self.remote_storage is not None:
            document.update(remote_storage=self.remote_storage, remote_reachable=self.remote_reachable)
        return document


@dataclass(frozen=True, kw_only=True)
class IncrementalBuild:
    """What the compile step had to do in the kept build directory (0 ninja steps: an unchanged
    rebuild, nothing compiled or linked)."""

    configure: ConfigureStep | None  # None: the build left no record of its configure step
    ninja_steps: int

    def as_dict(self) -> dict[str, Any]:
        return {"configure": self.configure, "ninja_steps": self.ninja_steps}


class SourceReadback(TypedDict, total=False):
    """What compile_commands.json says of one key source (the manifest's ``compile_commands_readback``)."""

    file: str  # the source, relative to the ORT tree
    found: bool  # False: the source was not compiled at all
    flags: dict[str, bool]  # each expected flag: did the compiler get it
    march_override: list[str]  # -march= options the source's own CMake added


@dataclass(frozen=True, kw_only=True)
class PackageReport:
    """What package_wheel.py reported: the wheel's file name and the system libraries it bundled."""

    wheel: str
    bundled: tuple[str, ...]
    # A CUDA build: the board's GPU libraries the wheel links (name -> the sysroot's file, never
    # bundled) and the provider's GPU code (cuobjdump's SASS and PTX architectures).
    board_libraries: dict[str, str] | None = None
    gpu_code: dict[str, object] | None = None


def configure_stamp(
    plan: BuildPlan, image_id: str, source_volume: str, toolchains: Path = TOOLCHAINS_DIR
) -> str:
    """A digest of what the configure step depends on and ninja does not watch: build.py's
    arguments (every -D and flag), the build image, the source volume (named by its content), and
    the toolchain files copied into the container. Equal digests: CMake need not run again."""
    digest = hashlib.sha256(json.dumps([plan.build_argv, image_id, source_volume]).encode())
    for path in sorted(toolchains.rglob("*")):
        if path.is_file():
            digest.update(str(path.relative_to(toolchains)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def parse_ccache_stats(text: str) -> CcacheStats:
    """``ccache --print-stats`` (tab-separated) -> hits, misses, hit rate."""
    values: dict[str, int] = {}
    for line in text.splitlines():
        key, _, value = line.partition("\t")
        if value.strip().isdigit():
            values[key.strip()] = int(value)
    hits = values.get("direct_cache_hit", 0) + values.get("preprocessed_cache_hit", 0)
    misses = values.get("cache_miss", 0)
    total = hits + misses
    return CcacheStats(
        hits=hits,
        misses=misses,
        hit_rate=round(hits / total, 4) if total else None,
        direct_hits=values.get("direct_cache_hit", 0),
        uncacheable=values.get("uncacheable_call", 0),
        local_hits=values.get("local_storage_hit", 0),
        local_misses=values.get("local_storage_miss", 0),
        remote_hits=values.get("remote_storage_hit", 0),
        remote_misses=values.get("remote_storage_miss", 0),
        remote_writes=values.get("remote_storage_write", 0),
        remote_errors=values.get("remote_storage_error", 0) + values.get("remote_storage_timeout", 0),
    )


def read_ccache_stats(report: Path) -> CcacheStats | None:
    """This build's compiler cache statistics (zeroed before it), when run_build.sh left them."""
    stats_file = report / "ccache-stats.tsv"
    return parse_ccache_stats(stats_file.read_text()) if stats_file.is_file() else None


def read_incremental(report: Path, lines: list[str]) -> IncrementalBuild:
    """Whether CMake configured again (run_build.sh's configure.txt) and how many steps ninja ran
    (its last ``[n/N]``; 0 when it printed none: "no work to do"). ninja's check of CMake's
    CONFIGURE_DEPENDS globs (``[0/2] Re-checking globbed directories...``, before every build of such
    a tree) is no build step: an unchanged rebuild prints only that."""
    marker = report / "configure.txt"
    configure = _CONFIGURE_STEPS.get(marker.read_text().strip()) if marker.is_file() else None
    steps = 0
    for line in reversed(lines):
        match = ninja_step(line)
        if match:
            steps = int(match.group(2))
            break
    return IncrementalBuild(configure=configure, ninja_steps=steps)


def readback_flags(compile_commands: Path, expected: list[str]) -> dict[str, SourceReadback]:
    """Which of the expected flags each key source really got, from compile_commands.json."""
    try:
        entries = json.loads(compile_commands.read_text())
    except (OSError, json.JSONDecodeError) as error:
        raise BuildError(f"cannot read {compile_commands}: {error}") from error
    found: dict[str, SourceReadback] = {}
    for key, suffix in READBACK_SOURCES.items():
        entry = next((e for e in entries if e.get("file", "").endswith(suffix)), None)
        if entry is None:
            found[key] = {"file": suffix, "found": False}
            continue
        argv = entry.get("arguments") or shlex.split(entry.get("command", ""))
        present = {flag: any(arg == flag or arg.startswith(flag) for arg in argv) for flag in expected}
        found[key] = {
            "file": suffix,
            "found": True,
            "flags": present,
            "march_override": [a for a in argv if a.startswith("-march=")],
        }
    return found


def expected_flags(plan: BuildPlan) -> list[str]:
    flags = [f for f in plan.compiler_flags if f.startswith(("-mcpu", "-march", "-finline-limit", "-O"))]
    if "--enable_lto" in plan.build_args:
        flags.append("-flto")
    return flags


def require_flags(readback: dict[str, SourceReadback], log_path: Path) -> None:
    """Refuse a build whose key sources did not get every flag of the variant."""
    missing = [
        f"{key} ({info['file']}): {', '.join(f for f, ok in info.get('flags', {}).items() if not ok)}"
        for key, info in readback.items()
        if not info.get("found") or not all(info.get("flags", {}).values())
    ]
    if missing:
        raise BuildError(
            "the compiler did not get the variant's flags: " + "; ".join(missing),
            hint=f"see {log_path.parent / REPORT_NAME / 'compile_commands.json'}; log: {log_path}",
        )


def compiler_version(report_dir: Path) -> str | None:
    """The C++ compiler and version CMake identified (its CMakeCXXCompiler.cmake, copied out of the build)."""
    path = report_dir / "CMakeCXXCompiler.cmake"
    if not path.is_file():
        return None
    text = path.read_text()
    match = re.search(r'set\(CMAKE_CXX_COMPILER_VERSION "([^"]+)"\)', text)
    compiler = re.search(r'set\(CMAKE_CXX_COMPILER "([^"]+)"\)', text)
    if not match:
        return None
    return f"{Path(compiler.group(1)).name if compiler else 'g++'} {match.group(1)}"


def read_package_report(log_path: Path) -> PackageReport:
    """The packaging step's (last) ``ORCH-PACKAGE {json}`` line of the build log."""
    hint = f"full log: {log_path}"
    lines = reversed(log_path.read_text().splitlines())
    line = next((x for x in lines if x.startswith("ORCH-PACKAGE ")), None)
    if line is None:
        raise BuildError("the packaging step reported no wheel", hint=hint)
    try:
        document = json.loads(line.removeprefix("ORCH-PACKAGE "))
    except json.JSONDecodeError as error:
        raise BuildError(f"the packaging step's report is not JSON: {error}", hint=hint) from error
    wheel = document.get("wheel") if isinstance(document, dict) else None
    bundled = document.get("bundled", []) if isinstance(document, dict) else None
    if (
        not isinstance(wheel, str)
        or not isinstance(bundled, list)
        or not all(isinstance(b, str) for b in bundled)
    ):
        raise BuildError(f"the packaging step's report is malformed: {line}", hint=hint)
    board = document.get("board_libraries")
    gpu = document.get("gpu_code")
    return PackageReport(
        wheel=wheel,
        bundled=tuple(bundled),
        board_libraries={str(k): str(v) for k, v in board.items()} if isinstance(board, dict) else None,
        gpu_code=gpu if isinstance(gpu, dict) else None,
    )
