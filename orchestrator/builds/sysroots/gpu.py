"""What a sysroot has for NVIDIA GPUs: the versions of CUDA, cuDNN and TensorRT, read from its files.

Pure: reads a sysroot's tree (links resolved inside it, ``contents.resolve_inside``) and runs nothing.

* CUDA: ``usr/local/cuda`` first (the link JetPack points at its toolkit, perhaps through
  ``etc/alternatives``), then each ``usr/local/cuda-X.Y``, newest first: its ``version.json``
  (``{"cuda": {"version": "12.6.1"}}``), else ``CUDART_VERSION`` of its ``cuda_runtime_api.h``
  (``12040`` -> ``12.4``); last, a ``cuda_runtime_api.h`` in ``usr/include``.
* cuDNN: ``CUDNN_MAJOR``, ``CUDNN_MINOR``, ``CUDNN_PATCHLEVEL`` of ``cudnn_version.h`` (JetPack's
  ``cudnn_version_v9.h``; ``cudnn.h`` before cuDNN 8) in ``usr/include/<triplet>``, ``usr/include``
  or CUDA's own headers.
* TensorRT: ``NV_TENSORRT_MAJOR``, ``_MINOR``, ``_PATCH`` of ``NvInferVersion.h`` (TensorRT 10 defines
  them through ``TRT_MAJOR_ENTERPRISE`` and the like; older releases only ``NV_TENSORRT_SONAME_*``).

Each is None when the sysroot has no such file, or none that says a version.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from orchestrator.builds.sysroots.contents import SysrootError, resolve_inside

_CUDA_DIR = re.compile(r"^cuda-(\d+(?:\.\d+)*)$")
_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+(\w+)", re.MULTILINE)
# Macros that name macros (TensorRT 10's NV_TENSORRT_MAJOR -> TRT_MAJOR_ENTERPRISE -> 10): a few levels.
_MAX_INDIRECTION = 8
# A header is read only this far: version headers are small (cuDNN 7's whole cudnn.h is ~100 KB).
_MAX_HEADER_BYTES = 1 << 20


@dataclass(frozen=True, kw_only=True)
class GpuStack:
    """The versions a sysroot's files say (None: not there)."""

    cuda: str | None = None  # "12.6.1" from version.json, "12.4" from CUDART_VERSION
    cudnn: str | None = None  # "9.3.0"
    tensorrt: str | None = None  # "10.3.0"

    @property
    def summary(self) -> str:
        """``CUDA 12.4, cuDNN 9.3.0, TensorRT 10.3.0`` (what is there), or ``-`` for nothing."""
        named = [
            f"{label} {version}"
            for label, version in (("CUDA", self.cuda), ("cuDNN", self.cudnn), ("TensorRT", self.tensorrt))
            if version
        ]
        return ", ".join(named) or "-"


def read_gpu_stack(root: Path, triplet: str | None = None) -> GpuStack:
    """The GPU stack of the sysroot at ``root`` (``triplet``: its multiarch directory, for headers)."""
    cuda_dirs = _cuda_dirs(root)
    include_dirs = [*([f"usr/include/{triplet}"] if triplet else []), "usr/include"]
    for cuda in cuda_dirs:
        include_dirs += _cuda_include_dirs(root, cuda)
    return GpuStack(
        cuda=_cuda_version(root, cuda_dirs),
        cudnn=_cudnn_version(root, include_dirs),
        tensorrt=_tensorrt_version(root, include_dirs),
    )


# -- the macros of a header ----------------------------------------------------------------------------


def header_defines(text: str) -> dict[str, str]:
    """Each ``#define NAME VALUE`` whose value is one word (a number or another macro's name)."""
    return {name: value for name, value in _DEFINE.findall(text)}


def define_number(defines: dict[str, str], name: str) -> int | None:
    """``name``'s value as a number, following macros that name other macros; None when it is none."""
    value = defines.get(name)
    for _ in range(_MAX_INDIRECTION):
        if value is None or value.isdigit():
            break
        value = defines.get(value)
    return int(value) if value is not None and value.isdigit() else None


def _dotted(defines: dict[str, str], *names: str) -> str | None:
    numbers = [define_number(defines, name) for name in names]
    return ".".join(str(n) for n in numbers) if all(n is not None for n in numbers) else None


def cudart_version(defines: dict[str, str]) -> str | None:
    """``CUDART_VERSION`` as CUDA's release: ``12040`` -> ``12.4`` (major * 1000 + minor * 10)."""
    number = define_number(defines, "CUDART_VERSION")
    return f"{number // 1000}.{number % 1000 // 10}" if number else None


def cudnn_version(defines: dict[str, str]) -> str | None:
    return _dotted(defines, "CUDNN_MAJOR", "CUDNN_MINOR", "CUDNN_PATCHLEVEL")


def tensorrt_version(defines: dict[str, str]) -> str | None:
    return _dotted(defines, "NV_TENSORRT_MAJOR", "NV_TENSORRT_MINOR", "NV_TENSORRT_PATCH") or _dotted(
        defines, "NV_TENSORRT_SONAME_MAJOR", "NV_TENSORRT_SONAME_MINOR", "NV_TENSORRT_SONAME_PATCH"
    )


def version_json_cuda(text: str) -> str | None:
    """``{"cuda": {"version": "12.6.1"}, ...}`` (CUDA's ``version.json``) -> ``12.6.1``."""
    try:
        document = json.loads(text)
    except ValueError:
        return None
    cuda = document.get("cuda") if isinstance(document, dict) else None
    version = cuda.get("version") if isinstance(cuda, dict) else None
    return version if isinstance(version, str) and version else None


# -- where the files are -------------------------------------------------------------------------------


def _real(root: Path, path: str) -> PurePosixPath | None:
    """``path`` resolved inside the sysroot; None when it is not there (or its link leaves the sysroot)."""
    try:
        return resolve_inside(root, path)
    except SysrootError:
        return None


def _read(root: Path, path: str) -> str | None:
    found = _real(root, path)
    if found is None or not (root / found).is_file():
        return None
    with (root / found).open("rb") as handle:
        return handle.read(_MAX_HEADER_BYTES).decode("utf-8", errors="replace")


def _cuda_dirs(root: Path) -> list[PurePosixPath]:
    """The real CUDA directories, ``usr/local/cuda``'s first, then ``cuda-X.Y`` newest first."""
    found: list[PurePosixPath] = []
    local = root / "usr" / "local"
    versioned = []
    if local.is_dir() and not local.is_symlink():
        for entry in local.iterdir():
            match = _CUDA_DIR.match(entry.name)
            if match:
                versioned.append((tuple(int(n) for n in match.group(1).split(".")), entry.name))
    for name in ["cuda", *(name for _, name in sorted(versioned, reverse=True))]:
        real = _real(root, f"usr/local/{name}")
        if real is not None and (root / real).is_dir() and real not in found:
            found.append(real)
    return found


def _cuda_include_dirs(root: Path, cuda: PurePosixPath) -> list[str]:
    """A CUDA directory's headers: ``targets/<t>/include`` (what its ``include`` link points at)."""
    dirs = [f"{cuda}/include"]
    targets = root / cuda / "targets"
    if targets.is_dir() and not targets.is_symlink():
        dirs += [f"{cuda}/targets/{t.name}/include" for t in sorted(targets.iterdir())]
    return dirs


def _cuda_version(root: Path, cuda_dirs: list[PurePosixPath]) -> str | None:
    for cuda in cuda_dirs:
        text = _read(root, f"{cuda}/version.json")
        version = version_json_cuda(text) if text is not None else None
        if version:
            return version
        for include in _cuda_include_dirs(root, cuda):
            text = _read(root, f"{include}/cuda_runtime_api.h")
            version = cudart_version(header_defines(text)) if text is not None else None
            if version:
                return version
    text = _read(root, "usr/include/cuda_runtime_api.h")  # a distribution's own CUDA packages
    return cudart_version(header_defines(text)) if text is not None else None


def _headers_named(root: Path, directory: str, stem: str) -> list[str]:
    """``stem_vN.h`` in ``directory``, highest N first (JetPack's ``cudnn_version_v9.h``)."""
    real = _real(root, directory)
    if real is None or not (root / real).is_dir():
        return []
    pattern = re.compile(rf"{re.escape(stem)}_v(\d+)\.h")
    numbered = []
    for entry in (root / real).iterdir():
        match = pattern.fullmatch(entry.name)
        if match:
            numbered.append((int(match.group(1)), entry.name))
    return [f"{directory}/{name}" for _, name in sorted(numbered, reverse=True)]


def _cudnn_version(root: Path, include_dirs: list[str]) -> str | None:
    candidates = [f"{d}/cudnn_version.h" for d in include_dirs]
    candidates += [path for d in include_dirs for path in _headers_named(root, d, "cudnn_version")]
    candidates += [f"{d}/cudnn.h" for d in include_dirs]  # before cuDNN 8 the version was in cudnn.h
    candidates += [path for d in include_dirs for path in _headers_named(root, d, "cudnn")]
    for path in dict.fromkeys(candidates):
        text = _read(root, path)
        version = cudnn_version(header_defines(text)) if text is not None else None
        if version:
            return version
    return None


def _tensorrt_version(root: Path, include_dirs: list[str]) -> str | None:
    for directory in dict.fromkeys(include_dirs):
        text = _read(root, f"{directory}/NvInferVersion.h")
        version = tensorrt_version(header_defines(text)) if text is not None else None
        if version:
            return version
    return None
