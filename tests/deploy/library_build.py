"""The deploy tests' C library build (``orch build --scope library``), recorded the way the build
records one (``publish_library`` of a real Jetson Nano plan against a small sysroot), from an
``out/`` laid out as the build's: the runner, lib/ with ORT's C library, its SONAME link and a
library it needs, include/ with the header. ``fake_runner`` is an ``orch-runner`` stand-in (POSIX
sh) that prints the runner's JSON document, for the board-side scripts run on the workstation.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from orchestrator.artifacts.store import Artifact, Preflight
from orchestrator.builds.library_record import publish_library
from orchestrator.builds.native_runner.library import LibraryOutput
from orchestrator.builds.plan import BuildOptions, BuildPlan, make_plan
from orchestrator.builds.record import build_record
from orchestrator.builds.sources.ort_spec import parse_source
from orchestrator.builds.sysroots.target import SysrootRef
from orchestrator.builds.variants import resolve_variant
from orchestrator.common.digests import file_sha256
from orchestrator.targets import BoardOS, resolve_target

TARGET = "jetson-nano"
VERSION = "1.21.0"
LIBRARY = f"lib/libonnxruntime.so.{VERSION}"
# JetPack 5's OS as the Debian 11 stand-in has it: glibc 2.31, GCC 10's libstdc++, Python 3.9.
BULLSEYE = BoardOS(distro="debian", release="11", codename="bullseye", glibc="2.31", python="3.9")

# A stand-in for orch-runner: --version as the runner prints it; else one runner document for the
# model after --model, naming the library it would load: lib/libonnxruntime.so.1 beside it (the
# SONAME link deploy makes), its real path. No link, or no model file: a failed document, as the
# runner's own failures read.
FAKE_RUNNER = r"""#!/bin/sh
if [ "$1" = "--version" ]; then echo "orch-runner for ONNX Runtime 1.21.0 (C API 21)"; exit 0; fi
here=$(cd "$(dirname "$0")" && pwd -P)
lib="$here/lib/libonnxruntime.so.1"
head='{"schema":"orch-native-runner/1","runner":{"built_for":"1.21.0","api_version":21},"argv":[]'
if [ ! -L "$lib" ]; then
  printf '%s,"ok":false,"stage":"library","error":"cannot load libonnxruntime.so.1","memory":{"peak_rss_kb":1}}\n' "$head"
  exit 1
fi
ort="\"ort\":{\"version\":\"1.21.0\",\"library\":\"$lib\"}"
if [ ! -f "$2" ]; then
  printf '%s,%s,"ok":false,"stage":"model","error":"model file not found: %s","memory":{"peak_rss_kb":1}}\n' "$head" "$ort" "$2"
  exit 1
fi
printf '%s,%s,"session":{"providers":["CPUExecutionProvider"]},"timing":{"session_create_s":0.012,"first_inference_ms":0.5},"ok":true,"memory":{"peak_rss_kb":9000}}\n' "$head" "$ort"
"""


def library_plan(sysroot_root: Path) -> BuildPlan:
    """``orch build --target jetson-nano --sysroot-from nano01 --scope library``'s plan (pure)."""
    for name in ("usr/include/stdio.h", "usr/include/c++/10/vector"):
        (sysroot_root / name).parent.mkdir(parents=True, exist_ok=True)
        (sysroot_root / name).write_text("")
    ref = SysrootRef(name="nano01", digest="ab" * 32, root=sysroot_root, board="nano01", os=BULLSEYE)
    profile = replace(resolve_target(TARGET), os=BULLSEYE, bootstrap_suite="bullseye")
    source = parse_source(None, version=None, suite="trixie")
    return make_plan(
        profile, resolve_variant("default"), BuildOptions(source=source, sysroot=ref, scope="library")
    )


def make_out(
    out: Path, *, runner: str = "not an ELF file: the runner", library: bytes = b"C library " * 500
) -> Path:
    """A C library build's out/ as package_wheel.py --library and the runner's compile leave it."""
    (out / "lib").mkdir(parents=True)
    (out / "include").mkdir()
    (out / "orch-runner").write_text(runner)
    (out / "orch-runner").chmod(0o755)
    (out / LIBRARY).write_bytes(library)
    (out / "lib" / "libonnxruntime.so.1").symlink_to(Path(LIBRARY).name)
    (out / "lib" / "libprotobuf-lite.so.32").write_bytes(b"protobuf " * 100)
    (out / "include" / "onnxruntime_c_api.h").write_text("/* ORT's C API */\n")
    return out


def make_library_artifact(
    root: Path,
    work: Path,
    *,
    runner: str = "not an ELF file: the runner",
    library: bytes = b"C library " * 500,
) -> Artifact:
    """The artifact ``orch build --scope library`` records, under ``root`` (the artifacts directory)."""
    plan = library_plan(work / "sysroot")
    out = make_out(work / "out", runner=runner, library=library)
    log = work / "build.log"
    log.write_text("# orch build jetson-nano/default ORT 1.21.0\n")
    output = LibraryOutput(
        directory=out,
        library=LIBRARY,
        library_sha256=file_sha256(out / LIBRARY),
        library_size=(out / LIBRARY).stat().st_size,
        runner_sha256=file_sha256(out / "orch-runner"),
        runner_argv=("clang", "--target=aarch64-linux-gnu", "-o", "/runner/out/orch-runner"),
        needs={"libc.so.6": ("GLIBC_2.17",)},
        sysroot="nano01",
        preflight=Preflight(ok=True, details={"qemu_cpu": "cortex-a57", "ort_version": VERSION}),
    )
    return publish_library(output, plan, build_record(plan, None), log_path=log, root=root)
