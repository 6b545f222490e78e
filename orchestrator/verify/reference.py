"""The reference every board build is judged against: the official x86-64 onnxruntime wheel of the
*same release*, run on the workstation with the same runner and the same cases.

Where it comes from: the workstation's own onnxruntime when its version is that release; otherwise
the release's official wheel for this interpreter, fetched once with ``pip download --no-deps
--only-binary=:all: onnxruntime==X`` through the machine's configured pip sources and unpacked
into ``$ORCH_HOME/cache/x86-onnxruntime/<X>/site`` (a private directory put first on
``PYTHONPATH``: nothing is installed into orch's environment). Which one was used, its path and
its wheel's sha256 are part of every verify result.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import zipfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from orchestrator.adapters import process
from orchestrator.artifacts.pip_download import pip_download_argv
from orchestrator.errors import VerifyError
from orchestrator.paths import orch_home
from orchestrator.verify.cases import cache_file

# Where the reference onnxruntime comes from: the workstation's own, or a stock wheel downloaded for it.
ReferenceSource = Literal["workstation", "downloaded"]


@dataclass(frozen=True, kw_only=True)
class Reference:
    version: str
    source: ReferenceSource
    site: Path | None  # None: the workstation's own onnxruntime
    wheel: str = ""
    wheel_sha256: str = ""

    def as_dict(self) -> dict[str, str]:
        return {
            "version": self.version,
            "source": self.source,
            "site": str(self.site) if self.site else "",
            "wheel": self.wheel,
            "wheel_sha256": self.wheel_sha256,
        }

    def describe(self) -> str:
        if self.site is None:
            return f"x86-64 onnxruntime {self.version} (the workstation's own)"
        return f"x86-64 onnxruntime {self.version} ({self.wheel}, sha256 {self.wheel_sha256[:12]})"


def download_argv(version: str, dest: Path) -> list[str]:
    """pip fetching the official wheel of ``version`` for the running interpreter and machine. Pure."""
    return pip_download_argv([f"onnxruntime=={version}"], dest=dest, with_dependencies=False)


def _workstation_version() -> str | None:
    try:
        import onnxruntime
    except ImportError:
        return None
    return str(onnxruntime.__version__)


def ensure_reference(version: str, cache: Path | None = None) -> Reference:
    """The x86 stock onnxruntime of ``version``, fetched and unpacked once."""
    if _workstation_version() == version:
        return Reference(version=version, source="workstation", site=None)
    root = (cache or orch_home() / "cache" / "x86-onnxruntime") / version
    record = root / "reference.json"
    if record.exists():
        data = cache_file(record)
        return Reference(
            version=version,
            source="downloaded",
            site=root / "site",
            wheel=data.required_text("wheel"),
            wheel_sha256=data.required_text("wheel_sha256"),
        )
    downloads = root / "download"
    downloads.mkdir(parents=True, exist_ok=True)
    result = process.run(download_argv(version, downloads), timeout=900)
    wheels = sorted(downloads.glob(f"onnxruntime-{version}-*.whl"))
    if not result.ok or not wheels:
        raise VerifyError(
            f"cannot fetch the x86-64 onnxruntime {version} wheel to compare with: {result.tail(3)}",
            hint="the reference is the official wheel of the same release; pip needs the machine's "
            "configured package sources (or install onnxruntime=="
            f"{version} into orch's environment)",
        )
    wheel = wheels[-1]
    partial = root / "site.partial"
    shutil.rmtree(partial, ignore_errors=True)
    with zipfile.ZipFile(wheel) as archive:
        archive.extractall(partial)
    shutil.rmtree(root / "site", ignore_errors=True)
    partial.rename(root / "site")
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    record.write_text(json.dumps({"wheel": wheel.name, "wheel_sha256": digest}) + "\n", encoding="utf-8")
    return Reference(
        version=version, source="downloaded", site=root / "site", wheel=wheel.name, wheel_sha256=digest
    )


def run_reference(
    reference: Reference,
    bundle: Path,
    names: Sequence[str],
    *,
    timeout: float = 1800,
    write_expected: bool = False,
) -> process.ProcessResult:
    """The runner (bundle/verify_cases.py) under the reference onnxruntime, on the workstation."""
    names_file = (
        bundle.parent / f".names-{os.getpid()}-{hashlib.sha256(''.join(names).encode()).hexdigest()[:8]}.json"
    )
    names_file.write_text(json.dumps(list(names)), encoding="utf-8")
    env = dict(os.environ)
    if reference.site is not None:
        env["PYTHONPATH"] = os.pathsep.join(
            [str(reference.site), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
        )
    argv = [
        sys.executable,
        str(bundle / "verify_cases.py"),
        "--bundle",
        str(bundle),
        "--names",
        str(names_file),
    ]
    try:
        return process.run(
            argv + (["--write-expected"] if write_expected else []),
            env=env,
            timeout=timeout,
        )
    finally:
        names_file.unlink(missing_ok=True)
