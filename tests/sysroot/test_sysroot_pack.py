"""The board-side pack script, run here on a small root file system exactly as a board runs it
(``sh -s -- ARGS`` with the script on stdin): it packs what the store keeps, and nothing the store
would throw away after the transfer -- the board's Python interpreter and standard library
included, its byte code, test suites and packages not; of JetPack's CUDA, the headers, the shared
libraries and the driver's stub, never the static libraries or the programs.
"""

from __future__ import annotations

import os
import subprocess
import tarfile
from pathlib import Path, PurePosixPath

from orchestrator.board_side import read_text
from orchestrator.builds.sysroots.staging import wanted

T = "aarch64-linux-gnu"
FILES = [
    "usr/include/stdio.h",
    f"usr/include/{T}/bits/types.h",
    "usr/include/python3.13/Python.h",
    f"usr/lib/{T}/libc.so.6",
    f"usr/lib/{T}/libc_nonshared.a",
    f"usr/lib/{T}/crt1.o",
    f"usr/lib/{T}/libstdc++.so.6.0.33",
    f"usr/lib/{T}/pkgconfig/zlib.pc",
    f"usr/lib/{T}/tegra/libnvos.so",
    f"usr/lib/{T}/gconv/gconv-modules",
    f"usr/lib/{T}/nvidia/firmware.bin",
    f"usr/lib/gcc/{T}/14/crtbeginS.o",
    f"usr/lib/gcc/{T}/14/libgcc.a",
    f"usr/lib/gcc/{T}/14/cc1plus",
    f"usr/lib/gcc/{T}/14/include/stddef.h",
    f"usr/lib/{T}/libpython3.13.so.1.0",
    "usr/lib/python3.13/os.py",
    "usr/lib/python3.13/_sysconfigdata__aarch64-linux-gnu.py",
    "usr/lib/python3.13/encodings/utf_8.py",
    f"usr/lib/python3.13/lib-dynload/_ssl.cpython-313-{T}.so",
    "usr/lib/python3.13/__pycache__/os.cpython-313.pyc",
    "usr/lib/python3.13/encodings/__pycache__/utf_8.cpython-313.pyc",
    "usr/lib/python3.13/site-packages/numpy/__init__.py",
    "usr/lib/python3.13/dist-packages/yaml/__init__.py",
    "usr/lib/python3.13/test/test_os.py",
    "usr/lib/python3.13/unittest/test/test_case.py",
    "usr/lib/python3.13/ctypes/tests/test_bytes.py",
    "usr/lib/python3.13/idlelib/idle.py",
    "usr/lib/python3.13/turtledemo/clock.py",
    "usr/lib/python3.13/tkinter/__init__.py",
    "usr/lib/python3.13/ensurepip/__init__.py",
    "usr/lib/python3.13/lib2to3/main.py",
    "usr/lib/python3/dist-packages/yaml/__init__.py",
    "usr/lib/python2.7/os.py",
    "usr/lib/os-release",
    "usr/share/doc/libc6/copyright",
    "usr/bin/python3.13",
    "usr/bin/python3.13-config",
    "usr/bin/python3.13m",
    "usr/bin/perl",
    "etc/passwd",
    "etc/debian_version",
]
CUDA = "usr/local/cuda-12.6"
CUDA_TARGET = f"{CUDA}/targets/aarch64-linux"
CUDA_FILES = [
    f"{CUDA}/version.json",
    f"{CUDA_TARGET}/include/cuda_runtime_api.h",
    f"{CUDA_TARGET}/include/crt/host_config.h",
    f"{CUDA_TARGET}/lib/libcudart.so.12.6.68",
    f"{CUDA_TARGET}/lib/libcublas.so.12.6.1.4",
    f"{CUDA_TARGET}/lib/stubs/libcuda.so",
    f"{CUDA_TARGET}/lib/libcublas_static.a",
    f"{CUDA_TARGET}/lib/libcudadevrt.a",
    f"{CUDA_TARGET}/lib/stubs/libcuda.so.1",
    f"{CUDA_TARGET}/lib/cmake/thrust/thrust-config.cmake",
    f"{CUDA}/bin/nvcc",
    f"{CUDA}/nvvm/lib64/libnvvm.so",
    f"{CUDA}/samples/README.md",
    f"{CUDA}/doc/man/man1/nvcc.1",
    "usr/local/cuda-samples/README.md",
    f"usr/include/{T}/cudnn_version_v9.h",
]
LINKS = {
    "lib": "usr/lib",
    "etc/os-release": "../usr/lib/os-release",
    f"usr/lib/{T}/libstdc++.so.6": "libstdc++.so.6.0.33",
    "usr/lib/ld-linux-aarch64.so.1": f"{T}/ld-linux-aarch64.so.1",
    f"usr/lib/{T}/libdangling.so": "/opt/vendor/libdangling.so.1",
    "usr/bin/python3": "python3.13",
    f"usr/lib/python3.13/config-3.13-{T}/libpython3.13.so": f"../../{T}/libpython3.13.so.1.0",
    "usr/lib/python3.13/sitecustomize.py": "/etc/python3.13/sitecustomize.py",
    # JetPack's links to its CUDA and cuDNN, through update-alternatives:
    "usr/local/cuda": "/etc/alternatives/cuda",
    "usr/local/cuda-12": "/etc/alternatives/cuda-12",
    "etc/alternatives/cuda": f"/{CUDA}",
    "etc/alternatives/cuda-12": f"/{CUDA}",
    "etc/alternatives/cudnn_version_h": f"/usr/include/{T}/cudnn_version_v9.h",
    "etc/alternatives/editor": "/usr/bin/vim.basic",
    "usr/include/cudnn_version.h": "/etc/alternatives/cudnn_version_h",
    f"{CUDA}/include": "targets/aarch64-linux/include",
    f"{CUDA}/lib64": "targets/aarch64-linux/lib",
    f"{CUDA_TARGET}/lib/libcudart.so": "libcudart.so.12.6.68",
    f"{CUDA_TARGET}/lib/libcudart_static_link.a": "libcudadevrt.a",
}
# Of CUDA, what a sysroot holds: headers, shared libraries, the driver's stub, the archives nvcc links
# into every program, version.json, links.
CUDA_KEPT = {
    f"{CUDA_TARGET}/lib/libcudadevrt.a",  # one of the two archives nvcc links into every program
    "usr/local/cuda",
    "usr/local/cuda-12",
    "etc/alternatives/cuda",
    "etc/alternatives/cuda-12",
    f"{CUDA}/version.json",
    f"{CUDA}/include",
    f"{CUDA}/lib64",
    f"{CUDA_TARGET}/include/cuda_runtime_api.h",
    f"{CUDA_TARGET}/include/crt/host_config.h",
    f"{CUDA_TARGET}/lib/libcudart.so.12.6.68",
    f"{CUDA_TARGET}/lib/libcudart.so",
    f"{CUDA_TARGET}/lib/libcublas.so.12.6.1.4",
    f"{CUDA_TARGET}/lib/stubs/libcuda.so",
}
# Of Python, what a sysroot holds: the interpreter, the standard library, the shared libpython.
PYTHON_KEPT = {
    "usr/bin/python3.13",
    f"usr/lib/{T}/libpython3.13.so.1.0",
    "usr/lib/python3.13",
    "usr/lib/python3.13/os.py",
    "usr/lib/python3.13/_sysconfigdata__aarch64-linux-gnu.py",
    "usr/lib/python3.13/encodings/utf_8.py",
    f"usr/lib/python3.13/lib-dynload/_ssl.cpython-313-{T}.so",
    f"usr/lib/python3.13/config-3.13-{T}/libpython3.13.so",
    "usr/lib/python3.13/sitecustomize.py",
}


def _rootfs(root: Path) -> Path:
    for name in [*FILES, *CUDA_FILES]:
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(name)
    for name, target in LINKS.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, root / name)
    return root


def _pack(tmp_path: Path, root: Path, compress: str) -> tuple[dict[str, str], tarfile.TarFile]:
    workdir = tmp_path / "orch"
    result = subprocess.run(
        ["sh", "-s", "--", str(workdir), compress, str(root)],
        input=read_text("sysroot_pack.sh"),
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    values = dict(line.split("=", 1) for line in result.stdout.splitlines())
    return values, tarfile.open(values["tarball"])


def _kind(member: tarfile.TarInfo) -> str:
    return "link" if member.issym() else "dir" if member.isdir() else "file"


def test_the_script_packs_exactly_what_the_store_keeps(tmp_path: Path) -> None:
    root = _rootfs(tmp_path / "rootfs")
    values, archive = _pack(tmp_path, root, "none")
    with archive:
        members = {m.name: m for m in archive.getmembers()}
    packed = {name for name, m in members.items()}
    kept = {name for name, m in members.items() if wanted(PurePosixPath(name), kind=_kind(m))}
    assert packed == kept, f"packed but thrown away by the store: {sorted(packed - kept)}"
    expected = {
        name
        for name in [*FILES, *CUDA_FILES, *LINKS]
        if wanted(PurePosixPath(name), kind="link" if name in LINKS else "file")
    } | {"usr/lib/python3.13"}
    assert packed == expected
    # Links stay links (a dangling one too: the board's own business), and bulk stays home.
    assert members["lib"].issym() and members["lib"].linkname == "usr/lib"
    assert members[f"usr/lib/{T}/libdangling.so"].linkname == "/opt/vendor/libdangling.so.1"
    assert f"usr/lib/{T}/nvidia/firmware.bin" not in packed
    assert {name for name in packed if "python" in name and not name.startswith("usr/include")} == PYTHON_KEPT
    assert members[f"usr/lib/python3.13/config-3.13-{T}/libpython3.13.so"].issym()
    # CUDA: no other static library, no program, nvvm, sample or doc; its links as links.
    assert {name for name in packed if "cuda" in name and "cudnn" not in name} == CUDA_KEPT
    assert members["usr/local/cuda"].linkname == "/etc/alternatives/cuda" and members[f"{CUDA}/lib64"].issym()
    assert {"etc/alternatives/cudnn_version_h", "usr/include/cudnn_version.h"} <= packed
    assert "etc/alternatives/editor" not in packed
    assert (
        int(values["entries"]) == len(packed)
        and int(values["bytes"]) == Path(values["tarball"]).stat().st_size
    )


def test_gzip_gives_the_same_members_and_only_the_tarball_is_left(tmp_path: Path) -> None:
    root = _rootfs(tmp_path / "rootfs")
    values, archive = _pack(tmp_path, root, "gzip")
    with archive:
        names = sorted(archive.getnames())
    assert Path(values["tarball"]).read_bytes()[:2] == b"\x1f\x8b"
    assert "usr/include/stdio.h" in names and f"usr/lib/{T}/libc.so.6" in names
    # The file list the script made is gone; the tarball is what orch fetches and removes.
    assert sorted(p.name for p in (tmp_path / "orch").iterdir()) == [Path(values["tarball"]).name]
