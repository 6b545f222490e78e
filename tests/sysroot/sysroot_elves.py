"""Small real ELF files for the sysroot tests, compiled with the machine's gcc (fixture ``elves``).

A fake ``libc.so.6`` defines symbol versions through a linker version script (``GLIBC_2.17``,
``GLIBC_2.99``, ...), carries glibc's banner, and a consumer linked against it (``-nostdlib``, so
the real libc adds nothing) needs exactly the versions the test asks for. x86-64 code is fine:
the checks read ELF version sections, whatever the machine.
"""

from __future__ import annotations

import shutil
import subprocess
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest

TRIPLET = "x86_64-linux-gnu"


def _gcc(args: Sequence[str], cwd: Path) -> None:
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.fail("gcc is needed to compile the test's ELF files: apt-get install gcc", pytrace=False)
    result = subprocess.run([gcc, *args], cwd=cwd, capture_output=True, text=True, check=False)
    if result.returncode != 0:
        pytest.fail(f"gcc {' '.join(args)} failed:\n{result.stderr}", pytrace=False)


@dataclass
class Elves:
    """Compiles fake libraries (with symbol versions) and consumers of them into ``workdir``."""

    workdir: Path

    def library(
        self, soname: str, versions: Sequence[str], *, banner: str | None = None, into: Path | None = None
    ) -> Path:
        """A shared object called ``soname`` defining one function per version (``f_GLIBC_2_99``)."""
        directory = into or self.workdir / f"lib-{len(list(self.workdir.iterdir()))}"
        directory.mkdir(parents=True, exist_ok=True)
        source = directory / f"{soname}.c"
        script = directory / f"{soname}.map"
        lines = [f"int {_symbol(v)}(void) {{ return {i}; }}" for i, v in enumerate(versions)]
        if banner:
            # What glibc's libc.so.6 carries and prints when run.
            lines.append(f'const char orch_test_banner[] = "{banner}";')
        source.write_text("\n".join(lines) + "\n")
        blocks, previous = [], None
        for version in versions:
            tail = f" {previous};" if previous else ";"
            blocks.append(f"{version} {{ global: {_symbol(version)}; }}{tail}")
            previous = version
        script.write_text("\n".join(blocks) + "\n")
        out = directory / soname
        _gcc(
            [
                "-shared",
                "-fPIC",
                "-nostdlib",
                f"-Wl,-soname,{soname}",
                f"-Wl,--version-script={script}",
                "-o",
                str(out),
                str(source),
            ],
            cwd=directory,
        )
        return out

    def consumer(self, name: str, needs: dict[Path, Sequence[str]], *, soname: str | None = None) -> Path:
        """A shared object calling one versioned function per ``needs`` entry (library -> versions)."""
        directory = self.workdir / f"use-{name}"
        directory.mkdir(parents=True, exist_ok=True)
        calls = [_symbol(v) for versions in needs.values() for v in versions]
        body = "".join(f"int {c}(void);\n" for c in calls)
        body += "int use(void) { return 0" + "".join(f" + {c}()" for c in calls) + "; }\n"
        source = directory / "use.c"
        source.write_text(body)
        out = directory / name
        args = ["-shared", "-fPIC", "-nostdlib", "-o", str(out), str(source), *map(str, needs)]
        if soname:
            args.insert(0, f"-Wl,-soname,{soname}")
        _gcc(args, cwd=directory)
        return out


def _symbol(version: str) -> str:
    return "f_" + version.replace(".", "_")


def make_wheel(directory: Path, members: dict[str, Path], *, name: str = "demo") -> Path:
    """A wheel (a zip with the right file name) holding ``members`` (archive path -> file)."""
    wheel = directory / f"{name}-1.0-cp313-cp313-linux_x86_64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for member, path in members.items():
            archive.write(path, member)
        archive.writestr(f"{name}-1.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: cp313-cp313-linux_x86_64\n")
    return wheel


def make_sysroot(root: Path, libraries: dict[str, Path], *, python: str | None = "3.13") -> Path:
    """A merged-/usr sysroot: ``lib -> usr/lib``, the libraries in ``usr/lib/<triplet>``."""
    multiarch = root / "usr" / "lib" / TRIPLET
    multiarch.mkdir(parents=True)
    (root / "lib").symlink_to("usr/lib")
    for name, path in libraries.items():
        shutil.copy(path, multiarch / name)
    if python:
        (root / "usr" / "lib" / f"python{python}").mkdir()
    (root / "etc").mkdir()
    (root / "etc" / "os-release").write_text('ID=debian\nVERSION_ID="13"\nPRETTY_NAME="Test OS 13"\n')
    return root
