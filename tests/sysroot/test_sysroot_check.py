"""The wheel check against a sysroot, on small real ELF files: verneed vs verdef, per library.

Each test compiles a fake ``libc.so.6`` / ``libstdc++.so.6`` with symbol versions from a
linker version script, a consumer that needs some of them, a wheel holding the consumer, and
a sysroot holding the fake libraries; then asks what a user would ask: does it fit, and if not,
which version of which library does which shared object miss?
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
from sysroot_elves import TRIPLET, Elves, make_sysroot, make_wheel

from orchestrator.artifacts.wheel import inspect_wheel
from orchestrator.builds.sysroots.contents import Sysroot, SysrootError, check_wheel_against, sysroot_problems

BANNER_241 = "GNU C Library (Test GLIBC 2.41-1) stable release version 2.41."


def _libc(elves: Elves, versions: tuple[str, ...], banner: str | None = BANNER_241) -> Path:
    return elves.library("libc.so.6", versions, banner=banner)


def test_a_version_the_sysroot_lacks_is_named_with_library_and_shared_object(
    elves: Elves, tmp_path: Path
) -> None:
    new_libc = _libc(elves, ("GLIBC_2.17", "GLIBC_2.99"))
    consumer = elves.consumer("libdemo.so", {new_libc: ("GLIBC_2.17", "GLIBC_2.99")})
    wheel = inspect_wheel(make_wheel(tmp_path, {"demo/libdemo.so": consumer}))
    assert wheel.shared_objects[0].needs == {"libc.so.6": ("GLIBC_2.17", "GLIBC_2.99")}

    old = make_sysroot(tmp_path / "old", {"libc.so.6": _libc(elves, ("GLIBC_2.17", "GLIBC_2.41"))})
    problems = sysroot_problems(wheel, Sysroot(old, "bookworm01"))
    assert [(p.shared_object, p.library, p.versions) for p in problems] == [
        ("demo/libdemo.so", "libc.so.6", ("GLIBC_2.99",))
    ]
    assert str(problems[0]) == (
        "demo/libdemo.so needs GLIBC_2.99 from libc.so.6 (the sysroot's newest: GLIBC_2.41)"
    )

    fits = make_sysroot(tmp_path / "new", {"libc.so.6": new_libc})
    check = check_wheel_against(wheel, Sysroot(fits, "trixie01"))
    assert check.ok and check.problems == () and check.needs() == {"libc.so.6": ("GLIBC_2.17", "GLIBC_2.99")}


def test_every_checked_family_is_proved_and_a_missing_library_is_named(elves: Elves, tmp_path: Path) -> None:
    libc = _libc(elves, ("GLIBC_2.17",))
    libstdcxx = elves.library("libstdc++.so.6", ("GLIBCXX_3.4", "GLIBCXX_3.4.99", "CXXABI_1.3.99"))
    libgcc = elves.library("libgcc_s.so.1", ("GCC_3.0", "GCC_99.0.0"))
    consumer = elves.consumer(
        "_core.so",
        {
            libc: ("GLIBC_2.17",),
            libstdcxx: ("GLIBCXX_3.4.99", "CXXABI_1.3.99"),
            libgcc: ("GCC_99.0.0",),
        },
    )
    wheel = inspect_wheel(make_wheel(tmp_path, {"demo/_core.so": consumer}))
    old_cxx = elves.library("libstdc++.so.6", ("GLIBCXX_3.4", "GLIBCXX_3.4.30", "CXXABI_1.3.13"))
    root = make_sysroot(tmp_path / "old", {"libc.so.6": libc, "libstdc++.so.6": old_cxx})
    messages = [str(p) for p in sysroot_problems(wheel, Sysroot(root))]
    assert sorted(messages) == [
        (
            "demo/_core.so needs CXXABI_1.3.99, GLIBCXX_3.4.99 from libstdc++.so.6"
            " (the sysroot's newest: CXXABI_1.3.13, GLIBCXX_3.4.30)"
        ),
        "demo/_core.so needs libgcc_s.so.1, which the sysroot does not have",
    ]


def test_a_library_the_wheel_bundles_is_satisfied_by_the_wheel(elves: Elves, tmp_path: Path) -> None:
    libc = _libc(elves, ("GLIBC_2.17",))
    own_cxx = elves.library("libstdc++.so.6", ("GLIBCXX_3.4", "GLIBCXX_3.4.99"))
    consumer = elves.consumer("_core.so", {libc: ("GLIBC_2.17",), own_cxx: ("GLIBCXX_3.4.99",)})
    root = make_sysroot(
        tmp_path / "root",
        {"libc.so.6": libc, "libstdc++.so.6": elves.library("libstdc++.so.6", ("GLIBCXX_3.4",))},
    )
    alone = inspect_wheel(make_wheel(tmp_path, {"demo/_core.so": consumer}, name="alone"))
    assert [p.versions for p in sysroot_problems(alone, Sysroot(root))] == [("GLIBCXX_3.4.99",)]
    # auditwheel's way: the library travels inside the wheel, the board's is never asked.
    bundled = inspect_wheel(
        make_wheel(tmp_path, {"demo/_core.so": consumer, "demo.libs/libstdc++.so.6": own_cxx}, name="bundled")
    )
    assert sysroot_problems(bundled, Sysroot(root)) == []


def test_sysroot_facts_come_from_its_files(elves: Elves, tmp_path: Path) -> None:
    root = make_sysroot(
        tmp_path / "root",
        {
            "libc.so.6": _libc(elves, ("GLIBC_2.17", "GLIBC_2.34")),
            "libstdc++.so.6.0.33": elves.library("libstdc++.so.6", ("GLIBCXX_3.4", "GLIBCXX_3.4.33")),
        },
        python="3.13",
    )
    (root / "usr" / "lib" / TRIPLET / "libstdc++.so.6").symlink_to("libstdc++.so.6.0.33")
    (root / "usr" / "lib" / "python3.11").mkdir()
    sysroot = Sysroot(root)
    # The banner wins over the newest GLIBC_ version (a release may add no symbol of its own).
    assert sysroot.glibc == "2.41"
    assert sysroot.triplet == TRIPLET
    assert sysroot.python_versions == ("3.13", "3.11") and sysroot.python_version == "3.13"
    assert sysroot.library("libstdc++.so.6").path == f"usr/lib/{TRIPLET}/libstdc++.so.6.0.33"
    # A minimal board: no headers, so the sysroot checks wheels but cannot compile one.
    assert sysroot.missing_dev_packages() == ("libc6-dev", "python3-dev", "libstdc++-14-dev")
    headers = root / "usr" / "include"
    (headers / "python3.11").mkdir(parents=True)
    (headers / "python3.11" / "Python.h").write_text("")
    (headers / "stdio.h").write_text("")
    (headers / "c++" / "14").mkdir(parents=True)
    # The Python with headers is the one a build compiles for.
    assert Sysroot(root).python_version == "3.11" and Sysroot(root).missing_dev_packages() == ()

    no_banner = make_sysroot(
        tmp_path / "plain", {"libc.so.6": _libc(elves, ("GLIBC_2.17", "GLIBC_2.36"), None)}
    )
    assert Sysroot(no_banner).glibc == "2.36"


def test_absolute_links_resolve_inside_the_sysroot_never_on_the_workstation(
    elves: Elves, tmp_path: Path
) -> None:
    root = make_sysroot(tmp_path / "root", {})
    real = root / "usr" / "lib" / TRIPLET / "libc-2.99.so"
    _libc(elves, ("GLIBC_2.17", "GLIBC_2.99")).rename(real)
    # As old glibc releases ship it: libc.so.6 -> /lib/<triplet>/libc-2.99.so, through lib -> usr/lib.
    (root / "usr" / "lib" / TRIPLET / "libc.so.6").symlink_to(f"/lib/{TRIPLET}/libc-2.99.so")
    # The workstation has this file; the sysroot does not: it must count as missing.
    host_libm = elves.library("libm.so.6", ("GLIBC_2.17",))
    assert host_libm.is_absolute() and host_libm.exists()
    (root / "usr" / "lib" / TRIPLET / "libm.so.6").symlink_to(host_libm)
    sysroot = Sysroot(root)
    libc = sysroot.library("libc.so.6")
    assert libc is not None and libc.path == f"usr/lib/{TRIPLET}/libc-2.99.so"
    assert "GLIBC_2.99" in libc.versions
    assert sysroot.library("libm.so.6") is None


def test_a_link_leading_out_of_the_sysroot_is_refused(elves: Elves, tmp_path: Path) -> None:
    root = make_sysroot(tmp_path / "root", {})
    depth = len((root / "usr" / "lib" / TRIPLET).relative_to(tmp_path.anchor).parts)
    escape = "../" * (depth + 2) + f"usr/lib/{TRIPLET}/libc.so.6"  # the workstation's own libc
    (root / "usr" / "lib" / TRIPLET / "libc.so.6").symlink_to(escape)
    consumer = elves.consumer("_core.so", {_libc(elves, ("GLIBC_2.17",)): ("GLIBC_2.17",)})
    wheel = inspect_wheel(make_wheel(tmp_path, {"demo/_core.so": consumer}))
    with pytest.raises(SysrootError, match="leads outside the sysroot"):
        check_wheel_against(wheel, Sysroot(root, "evil"))


def test_a_sysroot_of_another_machine_is_refused(elves: Elves, tmp_path: Path) -> None:
    consumer = elves.consumer("_core.so", {_libc(elves, ("GLIBC_2.17",)): ("GLIBC_2.17",)})
    wheel = make_wheel(tmp_path, {"demo/_core.so": consumer})
    info = inspect_wheel(wheel)
    # The same wheel as if its code were aarch64 (the machine the lab's boards run).
    aarch64 = replace(
        info, shared_objects=tuple(replace(so, machine="aarch64") for so in info.shared_objects)
    )
    root = make_sysroot(tmp_path / "root", {"libc.so.6": _libc(elves, ("GLIBC_2.17",))})
    with pytest.raises(SysrootError, match=r"is for x86_64 .* holds aarch64 code"):
        check_wheel_against(aarch64, Sysroot(root, "pc"))


def test_the_wheels_python_must_be_the_sysroots(elves: Elves, tmp_path: Path) -> None:
    libc = _libc(elves, ("GLIBC_2.17",))
    wheel = make_wheel(tmp_path, {"demo/_core.so": elves.consumer("_core.so", {libc: ("GLIBC_2.17",)})})
    root = make_sysroot(tmp_path / "root", {"libc.so.6": libc}, python="3.11")
    check = check_wheel_against(wheel, Sysroot(root, "bookworm01"))
    assert not check.ok and check.problems == ()
    assert check.messages == [f"{wheel.name} is for Python cp313, sysroot bookworm01 has Python 3.11"]


def test_the_sysroot_names_its_interpreter_only_with_its_standard_library(tmp_path: Path) -> None:
    root = make_sysroot(tmp_path / "root", {}, python="3.13")
    # A sysroot pulled before sysroots carried the interpreter: the empty usr/lib/python3.13.
    assert Sysroot(root).python_version == "3.13" and Sysroot(root).python_executable is None
    (root / "usr" / "bin").mkdir(parents=True)
    (root / "usr" / "bin" / "python3.13").write_bytes(b"\x7fELF")
    assert Sysroot(root).python_executable is None  # no os.py: it could not find its prefix
    (root / "usr" / "lib" / "python3.13" / "os.py").write_text("# the standard library\n")
    assert Sysroot(root).python_executable == "usr/bin/python3.13"
    # A link, resolved inside the sysroot, is the interpreter too.
    (root / "usr" / "bin" / "python3.13").rename(root / "usr" / "bin" / "python3.13-real")
    (root / "usr" / "bin" / "python3.13").symlink_to("/usr/bin/python3.13-real")
    assert Sysroot(root).python_executable == "usr/bin/python3.13"
    # The interpreter of the Python the build compiles for (the one with headers), not another.
    (root / "usr" / "lib" / "python3.11").mkdir()
    (root / "usr" / "include" / "python3.11").mkdir(parents=True)
    (root / "usr" / "include" / "python3.11" / "Python.h").write_text("")
    assert Sysroot(root).python_version == "3.11" and Sysroot(root).python_executable is None
    (root / "usr" / "bin" / "python3.11").write_bytes(b"\x7fELF")
    (root / "usr" / "lib" / "python3.11" / "os.py").write_text("")
    assert Sysroot(root).python_executable == "usr/bin/python3.11"
    # Nothing outside the sysroot counts: a link to the workstation's interpreter is no interpreter.
    (root / "usr" / "bin" / "python3.11").unlink()
    (root / "usr" / "bin" / "python3.11").symlink_to("../" * 10 + "usr/bin/python3")
    with pytest.raises(SysrootError, match="leads outside the sysroot"):
        _ = Sysroot(root).python_executable
