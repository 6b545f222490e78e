"""A C library build's output (``--scope library``): packaged with its SONAME link and the
libraries it needs, and every ELF file in it proved against the board's sysroot, on small real ELF
files (see sysroot_elves.py)."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path
from types import ModuleType

import pytest
from sysroot_elves import Elves, make_sysroot

from orchestrator.artifacts.wheel import inspect_directory
from orchestrator.builds.sysroots.contents import Sysroot, check_wheel_against
from orchestrator.paths import DOCKER_DIR


def _package_script() -> ModuleType:
    """docker/build/package_wheel.py, the script the build container runs."""
    spec = importlib.util.spec_from_file_location("package_wheel", DOCKER_DIR / "build" / "package_wheel.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_library_is_packaged_with_its_soname_link_and_what_it_needs(elves: Elves, tmp_path: Path) -> None:
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.fail("readelf is needed: apt-get install binutils", pytrace=False)
    libs = tmp_path / "board-libs"
    libs.mkdir()
    helper = elves.library("libhelper.so.2", ("HELPER_1",), into=libs)
    libc = elves.library("libc.so.6", ("GLIBC_2.17",), into=libs)
    built = elves.consumer(
        "libonnxruntime.so.1.21.0",
        {helper: ("HELPER_1",), libc: ("GLIBC_2.17",)},
        soname="libonnxruntime.so.1",
    )
    out = tmp_path / "out"
    bundled = _package_script().bundle_library(built, out, readelf, [libs])
    lib = out / "lib"
    # What a program linked against the library loads (its SONAME) is there, as a link to the file.
    assert (lib / "libonnxruntime.so.1").is_symlink()
    assert (lib / "libonnxruntime.so.1").resolve() == (lib / "libonnxruntime.so.1.21.0").resolve()
    # A library the board's distribution would not have is bundled; glibc never is.
    assert bundled == ["libhelper.so.2"] and (lib / "libhelper.so.2").is_file()
    assert not (lib / "libc.so.6").exists()


def test_only_objects_needing_a_library_beside_them_are_given_an_rpath(elves: Elves, tmp_path: Path) -> None:
    """The wheel's objects that need nothing beside them are left as the linker wrote them (patchelf
    would move their notes, and clang's profile runtime then crashes at exit reading them)."""
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.fail("readelf is needed: apt-get install binutils", pytrace=False)
    capi = tmp_path / "capi"
    capi.mkdir()
    libc = elves.library("libc.so.6", ("GLIBC_2.17",), into=tmp_path / "board-libs")
    helper = elves.library("libhelper.so.2", ("HELPER_1",), into=capi)  # bundled beside the extension
    extension = elves.consumer(
        "onnxruntime_pybind11_state.so", {helper: ("HELPER_1",), libc: ("GLIBC_2.17",)}
    )
    shared = elves.consumer("libonnxruntime_providers_shared.so", {libc: ("GLIBC_2.17",)})
    own = [shutil.copy(path, capi / path.name) for path in (extension, shared)]
    chosen = _package_script().needing_origin(sorted(map(Path, own)), capi, readelf)
    assert [path.name for path in chosen] == ["onnxruntime_pybind11_state.so"]


def test_every_elf_file_of_the_output_is_proved_against_the_sysroot(elves: Elves, tmp_path: Path) -> None:
    new_libc = elves.library("libc.so.6", ("GLIBC_2.17", "GLIBC_2.34"))
    out = tmp_path / "out"
    (out / "lib").mkdir(parents=True)
    library = elves.consumer(
        "libonnxruntime.so.1.21.0", {new_libc: ("GLIBC_2.34",)}, soname="libonnxruntime.so.1"
    )
    shutil.copy(library, out / "lib" / library.name)
    (out / "lib" / "libonnxruntime.so.1").symlink_to(library.name)
    shutil.copy(elves.consumer("orch-runner", {new_libc: ("GLIBC_2.17",)}), out / "orch-runner")
    (out / "include").mkdir()
    (out / "include" / "onnxruntime_c_api.h").write_text("/* not an ELF file */\n")

    info = inspect_directory(out, name="onnxruntime", version="1.21.0")
    # Each file once (the SONAME link is not a second copy), the header skipped.
    assert sorted(so.path for so in info.shared_objects) == ["lib/libonnxruntime.so.1.21.0", "orch-runner"]

    bullseye = make_sysroot(
        tmp_path / "bullseye", {"libc.so.6": elves.library("libc.so.6", ("GLIBC_2.17", "GLIBC_2.31"))}
    )
    check = check_wheel_against(info, Sysroot(root=bullseye, name="nano01"))
    assert [str(problem) for problem in check.problems] == [
        "lib/libonnxruntime.so.1.21.0 needs GLIBC_2.34 from libc.so.6 (the sysroot's newest: GLIBC_2.31)"
    ]
    assert check.needs() == {"libc.so.6": ("GLIBC_2.17", "GLIBC_2.34")}
