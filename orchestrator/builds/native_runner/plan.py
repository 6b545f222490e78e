"""The native runner's build plan: how ``board_side/native_runner.c`` is compiled for a target. Pure.

One runner per (target, ORT release): compiled with the target's cross compiler in the target's
build image, against the C API header of that release (``onnxruntime_c_api.h`` of its source
tree); at run time it loads the ``libonnxruntime.so.<version>`` of the wheel it is deployed with
(the official wheel ships it; orch's own builds add ``--build_shared_lib``) with dlopen. Only
``OrtGetApiBase`` is looked up in the library: everything else goes through the API struct, so
the runner depends on nothing of a build's internals.

On the board the runner lives in ``<release>/native/`` with ``lib/`` beside it (the wheel's
``onnxruntime/capi`` libraries), found through ``RPATH=$ORIGIN/lib``: the directory can be copied
off the board as it is (``cp -rL``) into a product.
"""

from __future__ import annotations

import posixpath
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.errors import BuildError
from orchestrator.targets import TargetProfile

SOURCE_NAME = "native_runner.c"  # in orchestrator/board_side (orchestrator.board_side.read_text)
RUNNER_NAME = "orch-runner"
# The schema of the JSON document the runner prints (its SCHEMA), read by bench and by deploy's
# verification of a C library release.
RUNNER_SCHEMA = "orch-native-runner/1"
# Where the C API header sits in an ORT source tree (the same path in every release since 1.0).
HEADER_IN_TREE = "include/onnxruntime/core/session/onnxruntime_c_api.h"
HEADER_NAME = "onnxruntime_c_api.h"
# ORT's shared library keeps SONAME libonnxruntime.so.1 across 1.x; the wheel holds the file as
# libonnxruntime.so.<version>. The runner's DT_NEEDED is the SONAME: a link of that name in lib/.
SONAME = "libonnxruntime.so.1"
_LIBRARY = re.compile(r"^onnxruntime/capi/(libonnxruntime\.so\.\d+\.\d+\.\d+)$")

CLANG_TARGET = "aarch64-linux-gnu"  # clang's --target on the sysroot route (toolchains/clang-sysroot.cmake)

# Paths inside the build container.
WORK = "/runner"
OUT = f"{WORK}/out"


@dataclass(frozen=True, kw_only=True)
class RunnerPlan:
    """Everything compiling the runner takes: image, compiler argv, and what it is linked against."""

    target: str
    ort_version: str
    compiler: str
    library: str  # the file name in the wheel, e.g. libonnxruntime.so.1.21.0
    argv: tuple[str, ...]
    output: str  # the runner's path in the container

    def as_dict(self, *, beside_library: bool = False) -> dict[str, Any]:
        """``beside_library``: a C library build's (``--scope library``), whose out/ holds the library."""
        if beside_library:
            library = f"lib/{self.library} of the build's out/ (loaded as {SONAME})"
            layout = {"runner": f"out/{RUNNER_NAME}", "library": f"out/lib/{SONAME} -> {self.library}"}
        else:
            library = f"onnxruntime/capi/{self.library} of the wheel (loaded as {SONAME})"
            layout = {
                "runner": f"<release>/native/{RUNNER_NAME}",
                "library": f"<release>/native/lib/{SONAME} -> the release's onnxruntime/capi/{self.library}",
            }
        return {
            "target": self.target,
            "ort_version": self.ort_version,
            "compiler": self.compiler,
            "source": f"orchestrator/board_side/{SOURCE_NAME}",
            "header": f"{HEADER_IN_TREE} of ONNX Runtime {self.ort_version}",
            "library": library,
            "argv": list(self.argv),
            "output": self.output,
            "board_layout": layout,
        }


def library_name(ort_version: str) -> str:
    return f"libonnxruntime.so.{ort_version}"


def runner_plan(profile: TargetProfile, ort_version: str, *, sysroot: str | None = None) -> RunnerPlan:
    """The compile of the runner for one target and ORT release: with the target's cross GCC, or on
    the sysroot route (``sysroot``: where the board's sysroot is mounted) with clang and lld against
    that sysroot, so that it needs nothing newer than the board's glibc (as the wheel)."""
    compiler = "clang" if sysroot else f"{profile.cross_prefix}gcc"
    toolchain = (f"--target={CLANG_TARGET}", f"--sysroot={sysroot}", "-fuse-ld=lld") if sysroot else ()
    argv = (
        compiler,
        *toolchain,
        "-std=c11",
        "-O2",
        "-Wall",
        "-Wextra",
        # The runner's own code is not hot: the architecture baseline runs on every board of the target.
        f"-march={profile.march}",
        # The release it is built for: the runner refuses a library of any other (see the C source).
        f'-DORCH_ORT_VERSION="{ort_version}"',
        f"-I{WORK}/include",
        f"{WORK}/{SOURCE_NAME}",
        "-o",
        f"{OUT}/{RUNNER_NAME}",
        f'-DORCH_ORT_SONAME="{SONAME}"',
        # The library is loaded with dlopen (see the C source: the runner's own version check), so
        # nothing of it is linked; libdl is part of libc since glibc 2.34, separate before (JetPack 4).
        "-ldl",
        "-lm",
        # DT_RPATH (not RUNPATH): dlopen finds lib/ through it, and it also serves the libraries
        # libonnxruntime itself needs (an orch-built one links the distribution's protobuf, onnx,
        # abseil... bundled beside it).
        "-Wl,--disable-new-dtags,-rpath,$ORIGIN/lib",
        "-s",
    )
    return RunnerPlan(
        target=profile.name,
        ort_version=ort_version,
        compiler=compiler,
        library=library_name(ort_version),
        argv=argv,
        output=posixpath.join(OUT, RUNNER_NAME),
    )


def wheel_library(wheel: Path, ort_version: str) -> tuple[str, int] | None:
    """(member name, uncompressed size) of ORT's C library in a wheel, or None when it has none
    (a wheel built without --build_shared_lib)."""
    try:
        with zipfile.ZipFile(wheel) as archive:
            for info in archive.infolist():
                match = _LIBRARY.match(info.filename)
                if match and match.group(1) == library_name(ort_version):
                    return info.filename, info.file_size
    except (OSError, zipfile.BadZipFile) as error:
        raise BuildError(f"{wheel}: cannot read the wheel: {error}") from error
    return None
