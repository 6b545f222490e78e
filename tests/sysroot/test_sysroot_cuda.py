"""A sysroot with CUDA: what of JetPack's toolkit is kept, and the GPU stack its record names.

What a user notices: a Jetson's sysroot holds CUDA's headers, shared libraries and the driver's
stub (never the static libraries, nvcc or the samples), ``usr/local/cuda`` resolves inside it as on
the board (through ``etc/alternatives``), and ``orch sysroot list`` says which CUDA, cuDNN and
TensorRT it has, from their own version files; a sysroot stored before orch read them says "?".
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from subprocess import CompletedProcess

import pytest
from sysroot_elves import TRIPLET, Elves
from test_sysroot_store import _rootfs

from orchestrator.builds.sysroots.contents import resolve_inside
from orchestrator.builds.sysroots.gpu import (
    GpuStack,
    cudart_version,
    cudnn_version,
    header_defines,
    read_gpu_stack,
    tensorrt_version,
    version_json_cuda,
)
from orchestrator.builds.sysroots.staging import StagingTree, stage_directory, wanted
from orchestrator.builds.sysroots.store import gpu_stack, list_sysroots

Orch = Callable[..., CompletedProcess[str]]

CUDA = "usr/local/cuda-12.4"
TARGET = f"{CUDA}/targets/aarch64-linux"
# The macros as NVIDIA's headers spell them (cuDNN 9's cudnn_version_v9.h, CUDA 12.4's runtime API).
CUDART_H = "#define CUDART_VERSION  12040\n#define __CUDART_API_VERSION CUDART_VERSION\n"
CUDNN_H = "#define CUDNN_MAJOR 9\n#define CUDNN_MINOR 3\n#define CUDNN_PATCHLEVEL 0\n" + (
    "#define CUDNN_VERSION (CUDNN_MAJOR * 10000 + CUDNN_MINOR * 100 + CUDNN_PATCHLEVEL)\n"
)
# TensorRT 10's NvInferVersion.h names the numbers through other macros.
TENSORRT_H = (
    "#define TRT_MAJOR_ENTERPRISE 10\n#define TRT_MINOR_ENTERPRISE 3\n#define TRT_PATCH_ENTERPRISE 0\n"
    "#define NV_TENSORRT_MAJOR TRT_MAJOR_ENTERPRISE //!< TensorRT major version.\n"
    "#define NV_TENSORRT_MINOR TRT_MINOR_ENTERPRISE //!< TensorRT minor version.\n"
    "#define NV_TENSORRT_PATCH TRT_PATCH_ENTERPRISE //!< TensorRT patch version.\n"
)
VERSION_JSON = json.dumps(
    {"cuda": {"name": "CUDA SDK", "version": "12.4.1"}, "cuda_cudart": {"version": "12.4.127"}}
)

# JetPack's layout: path -> content, and links (path -> target) as its packages make them.
CUDA_KEPT_FILES = {
    f"{CUDA}/version.json": VERSION_JSON,
    f"{TARGET}/include/cuda_runtime_api.h": CUDART_H,
    f"{TARGET}/include/cuda.h": "/* the driver API */\n",
    f"{TARGET}/include/crt/host_config.h": "/* nvcc's host checks */\n",
    f"{TARGET}/lib/libcudart.so.12.4.127": "ELF",
    f"{TARGET}/lib/libcublas.so.12.4.5.8": "ELF",
    f"{TARGET}/lib/stubs/libcuda.so": "ELF",
    f"{TARGET}/lib/stubs/libcublas.so": "ELF",
    # The two archives nvcc links into every program (CMake's check of the CUDA compiler links one).
    f"{TARGET}/lib/libcudart_static.a": "!<arch>",
    f"{TARGET}/lib/libcudadevrt.a": "!<arch>",
}
CUDA_DROPPED_FILES = {
    f"{TARGET}/lib/libcublas_static.a": "!<arch>",
    f"{TARGET}/lib/stubs/libcuda.so.1": "ELF",  # only the stubs' *.so
    f"{TARGET}/lib/cmake/thrust/thrust-config.cmake": "# cmake\n",
    f"{CUDA}/bin/nvcc": "ELF",
    f"{CUDA}/bin/ptxas": "ELF",
    f"{CUDA}/nvvm/lib64/libnvvm.so.4.0.0": "ELF",
    f"{CUDA}/extras/CUPTI/lib64/libcupti.so.12": "ELF",
    f"{CUDA}/samples/README.md": "samples\n",
    f"{CUDA}/doc/man/man1/nvcc.1": "docs\n",
    f"{CUDA}/EULA.txt": "licence\n",
    "usr/local/cuda-samples/README.md": "not a CUDA directory\n",
    "usr/local/lib/libthing.so": "not CUDA's\n",
}
NVCC_LINKED = {"libcudart_static.a", "libcudadevrt.a"}
CUDA_KEPT_LINKS = {
    "usr/local/cuda": "/etc/alternatives/cuda",
    "usr/local/cuda-12": "/etc/alternatives/cuda-12",
    "etc/alternatives/cuda": f"/{CUDA}",
    "etc/alternatives/cuda-12": f"/{CUDA}",
    f"{CUDA}/include": "targets/aarch64-linux/include",
    f"{CUDA}/lib64": "targets/aarch64-linux/lib",
    f"{TARGET}/lib/libcudart.so.12": "libcudart.so.12.4.127",
    f"{TARGET}/lib/libcudart.so": "libcudart.so.12",
    f"{TARGET}/include/cudart_alias.h": "cuda_runtime_api.h",
}
CUDA_DROPPED_LINKS = {
    f"{TARGET}/lib/libcublas_static_link.a": "libcublas_static.a",
    f"{CUDA}/bin/nvcc.profile.link": "nvcc",
    "etc/alternatives/editor": "/usr/bin/vim.basic",
}


def _cudnn(triplet: str) -> tuple[dict[str, str], dict[str, str]]:
    """cuDNN as its Debian packages install it: headers kept (usr/include), links through alternatives."""
    files = {
        f"usr/include/{triplet}/cudnn_version_v9.h": CUDNN_H,
        f"usr/lib/{triplet}/libcudnn.so.9.3.0": "ELF",
    }
    kept_links = {
        "usr/include/cudnn_version.h": "/etc/alternatives/cudnn_version_h",
        "etc/alternatives/cudnn_version_h": f"/usr/include/{triplet}/cudnn_version_v9.h",
        f"usr/lib/{triplet}/libcudnn.so": "/etc/alternatives/libcudnn_so",
        "etc/alternatives/libcudnn_so": f"/usr/lib/{triplet}/libcudnn.so.9.3.0",
    }
    return files, kept_links


def jetpack_tree(root: Path, *, triplet: str = "aarch64-linux-gnu") -> Path:
    """JetPack's CUDA and cuDNN (no TensorRT) under ``root``, with what a sysroot must leave out."""
    cudnn_files, cudnn_links = _cudnn(triplet)
    files = {**CUDA_KEPT_FILES, **CUDA_DROPPED_FILES, **cudnn_files}
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    for name, target in {**CUDA_KEPT_LINKS, **CUDA_DROPPED_LINKS, **cudnn_links}.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        os.symlink(target, root / name)
    return root


@pytest.mark.parametrize(
    ("path", "kind", "kept"),
    [
        *((name, "file", True) for name in CUDA_KEPT_FILES),
        *((name, "link", True) for name in CUDA_KEPT_LINKS),
        *((name, "file", False) for name in CUDA_DROPPED_FILES),
        *((name, "link", False) for name in CUDA_DROPPED_LINKS),
        (f"{CUDA}/version.json", "link", True),
        (f"{CUDA}/include", "dir", False),  # a real include directory is no JetPack layout
        (f"{CUDA}/lib64/libcudart.so", "file", False),  # under the link, never stored twice
        (f"{TARGET}/lib/stubs/libcuda.so", "link", True),
        (f"{TARGET}/lib/libcufft.so.11", "link", True),
        ("usr/local/cuda", "file", False),
        ("usr/local/cuda", "dir", False),
        ("usr/local/cuda-12.4", "dir", False),
        ("usr/local/cuda/version.json", "file", True),  # usr/local/cuda as a real directory
        ("usr/local/cuda-samples", "link", False),
        ("etc/alternatives/cuda", "file", False),
        ("etc/alternatives/libcudnn", "link", True),
    ],
)
def test_the_cuda_toolkit_keeps_headers_shared_libraries_and_links(path: str, kind: str, kept: bool) -> None:
    assert wanted(PurePosixPath(path), kind=kind) is kept


def test_a_jetpack_tree_keeps_exactly_the_headers_shared_libraries_and_the_stub(tmp_path: Path) -> None:
    source = jetpack_tree(tmp_path / "rootfs")
    tree = StagingTree(root=tmp_path / "staged")
    tree.root.mkdir()
    stage_directory(source, tree)
    cudnn_files, cudnn_links = _cudnn("aarch64-linux-gnu")
    assert set(tree.entries) == {*CUDA_KEPT_FILES, *CUDA_KEPT_LINKS, *cudnn_files, *cudnn_links}
    staged = tree.root
    assert {a.name for a in staged.rglob("*.a")} == NVCC_LINKED and not (staged / CUDA / "bin").exists()
    assert (staged / TARGET / "lib/stubs/libcuda.so").is_file()
    # The board's links as the board has them, resolved inside the sysroot: /usr/local/cuda leads
    # through /etc/alternatives/cuda to cuda-12.4, its include and lib64 links to targets/.
    assert os.readlink(staged / "usr/local/cuda") == "/etc/alternatives/cuda"
    assert resolve_inside(staged, "usr/local/cuda/include/cuda_runtime_api.h") == PurePosixPath(
        f"{TARGET}/include/cuda_runtime_api.h"
    )
    assert resolve_inside(staged, "/usr/local/cuda-12/lib64/stubs/libcuda.so") == PurePosixPath(
        f"{TARGET}/lib/stubs/libcuda.so"
    )
    assert resolve_inside(staged, "usr/include/cudnn_version.h") == PurePosixPath(
        "usr/include/aarch64-linux-gnu/cudnn_version_v9.h"
    )


def test_the_versions_come_from_nvidias_own_macros_and_files() -> None:
    assert cudart_version(header_defines(CUDART_H)) == "12.4"
    assert cudart_version(header_defines("#define CUDART_VERSION 11080\n")) == "11.8"
    assert cudart_version(header_defines("#define CUDART_VERSION 10020\n")) == "10.2"
    assert cudnn_version(header_defines(CUDNN_H)) == "9.3.0"
    assert cudnn_version(header_defines("#define CUDNN_MAJOR 8\n#define CUDNN_MINOR 6\n")) is None
    assert tensorrt_version(header_defines(TENSORRT_H)) == "10.3.0"
    old = "#define NV_TENSORRT_SONAME_MAJOR 8\n#define NV_TENSORRT_SONAME_MINOR 5\n#define NV_TENSORRT_SONAME_PATCH 2\n"
    assert tensorrt_version(header_defines(old)) == "8.5.2"
    loop = "#define NV_TENSORRT_MAJOR A\n#define A NV_TENSORRT_MAJOR\n#define NV_TENSORRT_MINOR 1\n"
    assert tensorrt_version(header_defines(loop + "#define NV_TENSORRT_PATCH 0\n")) is None
    assert version_json_cuda(VERSION_JSON) == "12.4.1"
    assert version_json_cuda('{"cuda": "12"}') is None and version_json_cuda("not json") is None


def test_the_gpu_stack_is_read_from_the_tree(tmp_path: Path) -> None:
    root = jetpack_tree(tmp_path / "jetson")
    assert read_gpu_stack(root, "aarch64-linux-gnu") == GpuStack(cuda="12.4.1", cudnn="9.3.0")
    (root / CUDA / "version.json").unlink()  # CUDA's runtime header says its release too
    include = root / "usr/include/aarch64-linux-gnu"
    (include / "NvInferVersion.h").write_text(TENSORRT_H)
    stack = read_gpu_stack(root, "aarch64-linux-gnu")
    assert stack == GpuStack(cuda="12.4", cudnn="9.3.0", tensorrt="10.3.0")
    assert stack.summary == "CUDA 12.4, cuDNN 9.3.0, TensorRT 10.3.0"
    # No usr/local/cuda link: the newest cuda-X.Y directory.
    (root / "usr/local/cuda").unlink()
    assert read_gpu_stack(root, "aarch64-linux-gnu").cuda == "12.4"
    plain = tmp_path / "plain"
    (plain / "usr/include").mkdir(parents=True)
    assert read_gpu_stack(plain, "aarch64-linux-gnu") == GpuStack() and GpuStack().summary == "-"


def test_add_keeps_jetpacks_cuda_and_list_names_the_gpu_stack(
    elves: Elves, tmp_path: Path, orch_env: dict[str, str], orch_cli: Orch
) -> None:
    rootfs = jetpack_tree(_rootfs(tmp_path / "rootfs", elves), triplet=TRIPLET)
    added = orch_cli(orch_env, "sysroot", "add", str(rootfs), "--name", "standin", "--json", check=True)
    document = json.loads(added.stdout)
    tree = Path(document["path"]) / "root"
    for name in [*CUDA_KEPT_FILES, f"usr/include/{TRIPLET}/cudnn_version_v9.h"]:
        assert (tree / name).is_file(), name
    for name in CUDA_KEPT_LINKS:
        assert (tree / name).is_symlink(), name
    assert {a.name for a in tree.rglob("*.a")} == NVCC_LINKED and not (tree / CUDA / "bin").exists()
    assert not (tree / CUDA / "nvvm").exists() and not (tree / CUDA / "samples").exists()
    assert not (tree / "usr/local/cuda-samples").exists() and not (tree / "usr/local/lib").exists()
    assert resolve_inside(tree, "usr/local/cuda/lib64/stubs/libcuda.so") == PurePosixPath(
        f"{TARGET}/lib/stubs/libcuda.so"
    )
    assert resolve_inside(tree, "usr/local/cuda/include/cuda_runtime_api.h") == PurePosixPath(
        f"{TARGET}/include/cuda_runtime_api.h"
    )
    record = document["record"]
    assert (record["cuda"], record["cudnn"], record["tensorrt"]) == ("12.4.1", "9.3.0", None)

    # An older toolkit without version.json: CUDART_VERSION of its runtime header.
    older = tmp_path / "older"
    shutil.copytree(rootfs, older, symlinks=True)
    (older / CUDA / "version.json").unlink()
    added = orch_cli(orch_env, "sysroot", "add", str(older), "--name", "older", check=True)
    assert "CUDA 12.4, cuDNN 9.3.0; " in added.stderr, added.stderr  # beside glibc, Python, triplet
    listing = json.loads(orch_cli(orch_env, "sysroot", "list", "--json", check=True).stdout)
    assert {
        s["name"]: (s["record"]["cuda"], s["record"]["cudnn"], s["record"]["tensorrt"]) for s in listing
    } == {
        "older": ("12.4", "9.3.0", None),
        "standin": ("12.4.1", "9.3.0", None),
    }
    text = orch_cli(orch_env, "sysroot", "list", check=True).stderr
    assert "GPU" in text and "CUDA 12.4.1, cuDNN 9.3.0" in text and "CUDA 12.4, cuDNN 9.3.0" in text


def test_a_sysroot_without_cuda_says_none_and_one_stored_before_says_unknown(
    elves: Elves, tmp_path: Path, orch_env: dict[str, str], orch_cli: Orch
) -> None:
    orch_cli(
        orch_env, "sysroot", "add", str(_rootfs(tmp_path / "plain", elves)), "--name", "plain", check=True
    )
    (stored,) = list_sysroots(Path(orch_env["ORCH_HOME"]) / "sysroots")
    assert gpu_stack(stored.record) == GpuStack()
    # A sysroot.json written before orch read the GPU stack: it loads, and the stack is unknown.
    record_path = stored.directory / "sysroot.json"
    old = {
        k: v for k, v in json.loads(record_path.read_text()).items() if k not in ("cuda", "cudnn", "tensorrt")
    }
    record_path.write_text(json.dumps(old))
    (stored,) = list_sysroots(Path(orch_env["ORCH_HOME"]) / "sysroots")
    assert gpu_stack(stored.record) is None and "cuda" not in stored.record
    listing = json.loads(orch_cli(orch_env, "sysroot", "list", "--json", check=True).stdout)
    assert "cuda" not in listing[0]["record"]
    row = next(
        line
        for line in orch_cli(orch_env, "sysroot", "list", check=True).stderr.splitlines()
        if "plain" in line
    )
    assert " ? " in row, row


def test_a_cuda_build_against_the_sysroot_is_planned_for_its_gpu_and_a_lacking_one_refused_alike(
    elves: Elves, tmp_path: Path, orch_env: dict[str, str], orch_cli: Orch
) -> None:
    """`--ep cuda --sysroot-from` a JetPack-like sysroot: the dry run shows build.py's CUDA arguments,
    all inside the sysroot, for the Orin's sm_87, and the packaging's check of the board's GPU
    libraries and of the provider's SASS. A sysroot that lacks what the provider needs is refused by
    the dry run and the real run alike before any plan, naming what to install."""
    rootfs = jetpack_tree(_rootfs(tmp_path / "rootfs", elves), triplet=TRIPLET)
    for header in ("usr/include/stdio.h", "usr/include/c++/14/vector", "usr/include/python3.13/Python.h"):
        (rootfs / header).parent.mkdir(parents=True, exist_ok=True)
        (rootfs / header).write_text("/* what a cross build includes */\n")
    orch_cli(orch_env, "sysroot", "add", str(rootfs), "--name", "orin", check=True)
    args = ("build", "--target", "jetson", "--sysroot-from", "orin", "--ep", "cuda")
    dry = orch_cli(orch_env, *args, "--dry-run", timeout=300)
    assert dry.returncode == 0, dry.stderr
    said = " ".join(dry.stderr.split())
    assert "--use_cuda --cuda_home /opt/orch-cuda --cudnn_home /sysroot/usr --cuda_version 12.4" in said
    assert "CMAKE_CUDA_ARCHITECTURES=87" in said and "sm_87 (SASS and PTX) by nvcc 12.4" in said
    assert "--libdir=/sysroot/usr/local/cuda/targets/aarch64-linux/lib --gpu-arch=87" in said
    as_json = json.loads(orch_cli(orch_env, *args, "--dry-run", "--json", timeout=300).stdout)
    assert as_json["cuda"]["architectures"] == ["sm_87"] and as_json["cuda"]["cudnn"] == "9.3.0"

    for provider, message in (("tensorrt", "has no TensorRT"),):
        dry = orch_cli(orch_env, *args[:-1], provider, "--dry-run", timeout=300)
        real = orch_cli(orch_env, *args[:-1], provider, timeout=300)
        assert dry.returncode == real.returncode == 2 and message in dry.stderr and message in real.stderr
    without_cudnn = tmp_path / "without-cudnn"
    shutil.copytree(rootfs, without_cudnn, symlinks=True)
    for header in without_cudnn.rglob("cudnn*"):
        header.unlink()
    orch_cli(orch_env, "sysroot", "add", str(without_cudnn), "--name", "no-cudnn", check=True)
    lacking = ("build", "--target", "jetson", "--sysroot-from", "no-cudnn", "--ep", "cuda")
    dry, real = (orch_cli(orch_env, *lacking, *extra, timeout=300) for extra in (("--dry-run",), ()))
    assert dry.returncode == real.returncode == 2
    assert "has CUDA 12.4.1 but no cuDNN" in dry.stderr and "libcudnn9-dev-cuda-12" in real.stderr
