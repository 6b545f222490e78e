"""ONNX Runtime release numbers as orch accepts them (``--ort-version``). Pure, ground floor: the
build, deploy and bench commands check a release the same way."""

from __future__ import annotations

import re

from orchestrator.errors import UsageError

_VERSION = re.compile(r"\d+\.\d+(\.\d+)?((a|b|rc)\d+)?(\.post\d+)?(\.dev\d+)?")


def check_ort_version(version: str | None) -> str | None:
    """``--ort-version`` must be a release number (1.21.0, 1.22.0rc1): it becomes a git tag, a pip
    requirement and part of directory names."""
    if version is not None and not _VERSION.fullmatch(version):
        raise UsageError(
            f"--ort-version {version!r} is not an ONNX Runtime version",
            hint="e.g. --ort-version 1.21.0 (see the releases of onnxruntime)",
        )
    return version
