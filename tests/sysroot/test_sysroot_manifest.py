"""What a sysroot-route wheel's manifest says of how it was made: the compiler CMake found (the
toolchain file's clang, at the version it reported) and the stored sysroot it was built and
checked for (name, digest, the board's OS), from the plan, on a sysroot of small real ELF files."""

from __future__ import annotations

import json
import re
import zipfile
from dataclasses import replace
from pathlib import Path

from sysroot_elves import Elves, make_sysroot

from orchestrator.builds.plan import BuildOptions, BuildPlan, make_plan
from orchestrator.builds.record import MadeWheel, build_record, finish_artifact
from orchestrator.builds.sources.ort_spec import parse_source
from orchestrator.builds.sysroots.target import SysrootRef
from orchestrator.builds.variants import resolve_variant
from orchestrator.targets import BoardOS, resolve_target

BOOKWORM = BoardOS(distro="debian", release="12", codename="bookworm", glibc="2.36", python="3.11")
# What the sysroot route's plan needs of the board's development files.
DEVELOPMENT = (
    "usr/include/stdio.h",
    "usr/include/c++/12/vector",
    "usr/include/python3.11/Python.h",
    "usr/bin/python3.11",
    "usr/lib/python3.11/os.py",
)


def _plan(tmp_path: Path, elves: Elves) -> BuildPlan:
    root = make_sysroot(
        tmp_path / "orin01",
        {"libc.so.6": elves.library("libc.so.6", ("GLIBC_2.17", "GLIBC_2.36"))},
        python=None,
    )
    for name in DEVELOPMENT:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    ref = SysrootRef(name="orin01", digest="5e" * 32, root=root, board="orin01", os=BOOKWORM)
    profile = replace(resolve_target("jetson-orin"), os=ref.os, bootstrap_suite=ref.os.codename)
    source = parse_source(None, version=None, suite="trixie")
    return make_plan(profile, resolve_variant("default"), BuildOptions(source=source, sysroot=ref))


def _report(tmp_path: Path, plan: BuildPlan, version: str) -> Path:
    """The build's report directory as CMake leaves it for the plan's toolchain file: its C++ compiler
    (the file's CMAKE_CXX_COMPILER, the wrapper directory expanded) and the version it identified."""
    text = plan.toolchain_file.read_text()
    wrappers = re.search(r'set\(ORCH_CLANG_BIN "([^"]+)"\)', text)
    compiler = re.search(r'set\(CMAKE_CXX_COMPILER "([^"]+)"\)', text)
    assert wrappers and compiler, plan.toolchain_file
    report = tmp_path / "orch-report"
    report.mkdir()
    (report / "CMakeCXXCompiler.cmake").write_text(
        f'set(CMAKE_CXX_COMPILER "{compiler.group(1).replace("${ORCH_CLANG_BIN}", wrappers.group(1))}")\n'
        'set(CMAKE_CXX_COMPILER_ID "Clang")\n'
        f'set(CMAKE_CXX_COMPILER_VERSION "{version}")\n'
    )
    return report


def _wheel(directory: Path) -> Path:
    """A wheel for the board's Python with no machine code (what it needs is the ELF tests' matter)."""
    directory.mkdir(parents=True)
    wheel = directory / "onnxruntime-1.21.0-cp311-cp311-linux_aarch64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(
            "onnxruntime-1.21.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: cp311-cp311-linux_aarch64\n"
        )
    return wheel


def test_the_manifest_names_the_toolchains_compiler_and_the_sysroots_digest(
    tmp_path: Path, elves: Elves
) -> None:
    plan = _plan(tmp_path, elves)
    assert plan.toolchain == "clang-sysroot" and plan.sysroot is not None
    made = MadeWheel(
        profile=plan.target,
        variant=plan.artifact_variant,
        ort_version=plan.ort_version,
        wheel=_wheel(tmp_path / "out"),
        record=build_record(plan, None, report=_report(tmp_path, plan, "19.1.7")),
        sysroot=plan.sysroot,
    )
    artifact = finish_artifact(
        made, root=tmp_path / "artifacts", engine=None, log=lambda line: None, preflight=False
    )  # type: ignore[arg-type]
    manifest = json.loads((artifact.directory / "manifest.json").read_text())
    assert manifest["toolchain"] == "clang-sysroot"
    assert manifest["compiler"] == "aarch64-linux-gnu-clang++ 19.1.7"
    recorded = manifest["sysroot"]
    assert (recorded["name"], recorded["digest"], recorded["board"]) == ("orin01", "5e" * 32, "orin01")
    assert recorded["os"] == "debian 12 (bookworm)" and recorded["glibc"] == "2.36"
    assert recorded["check"]["ok"] is True
