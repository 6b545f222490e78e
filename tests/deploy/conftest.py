"""Fixtures for the deploy tests: the official aarch64 ORT wheel, the `stock` artifact that
``orch build`` makes of it, and wheels made wrong on purpose (another architecture, a too-new
glibc, another Python).

``stock_wheel`` is fetched once with ``pip download`` (the package index through pip's own
client) into pytest's cache directory and reused by later runs; the wheel-level tests read it.
``stock_build`` runs the real ``orch build --target lab --variant stock`` once per session (its
own pip download, the wheel check, and the pre-flight in an emulated cortex-a72 container): the
lab deploy tests deploy that artifact, so the baseline they install is the one orch vouched for.
``make_artifact`` still writes a manifest by hand for wheels that must be refused at deploy time.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from orchestrator.artifacts.store import Artifact, Manifest, artifact_dir, read_manifest, write_manifest

# The lab boards: Debian 13, Python 3.13, glibc 2.41, aarch64.
LAB_PYTHON = "3.13"
LAB_PLATFORM = "manylinux_2_28_aarch64"


def _download_stock(dest: Path) -> Path:
    found = sorted(dest.glob("onnxruntime-*-cp313-cp313-*aarch64*.whl"))
    if found:
        return found[-1]
    dest.mkdir(parents=True, exist_ok=True)
    argv = [
        sys.executable,
        "-m",
        "pip",
        "download",
        "--disable-pip-version-check",
        "--no-deps",
        "--only-binary=:all:",
        "--platform",
        LAB_PLATFORM,
        "--python-version",
        LAB_PYTHON,
        "--implementation",
        "cp",
        "--abi",
        "cp313",
        "-d",
        str(dest),
        "onnxruntime",
    ]
    result = subprocess.run(argv, capture_output=True, text=True, check=False)
    found = sorted(dest.glob("onnxruntime-*-cp313-cp313-*aarch64*.whl"))
    if result.returncode != 0 or not found:
        pytest.fail(
            "could not download the official aarch64 onnxruntime wheel (pip needs the package index):\n"
            + result.stdout[-2000:]
            + result.stderr[-2000:],
            pytrace=False,
        )
    return found[-1]


@pytest.fixture(scope="session")
def stock_wheel(request: pytest.FixtureRequest) -> Path:
    """The official onnxruntime wheel for cp313 manylinux aarch64 (the lab's boards)."""
    return _download_stock(Path(request.config.cache.mkdir("orch-deploy-stock-wheel")))


def wheel_version(wheel: Path) -> str:
    return wheel.name.split("-")[1]


# Pip download, wheel check and one emulated pre-flight: ~1 min on an idle machine.
STOCK_BUILD_TIMEOUT = 1200


@dataclass(frozen=True)
class StockBuild:
    """What ``orch build --target lab --variant stock --json`` made, and the environment it ran in."""

    env: dict[str, str]  # ORCH_HOME / ORCH_ARTIFACTS of the build (orch build list reads the same)
    artifact: Artifact
    manifest: dict[str, Any]  # manifest.json as written, read as plain JSON
    output: dict[str, Any]  # the command's --json document


@pytest.fixture(scope="session")
def stock_build(stock_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> StockBuild:
    """The real stock baseline, built once per session in its own ORCH_HOME and artifacts directory.

    Same release as ``stock_wheel`` (so the two downloads can be compared byte for byte)."""
    root = tmp_path_factory.mktemp("stock-build")
    for name in ("home", "artifacts", "results"):
        (root / name).mkdir()
    (root / "inventory.yaml").write_text("all: {}\n")
    env = {
        **os.environ,
        "ORCH_HOME": str(root / "home"),
        "ORCH_ARTIFACTS": str(root / "artifacts"),
        "ORCH_RESULTS": str(root / "results"),
        "ORCH_INVENTORY": str(root / "inventory.yaml"),
        "COLUMNS": "200",
    }
    argv = ["build", "--target", "lab", "--variant", "stock", "--ort-version", wheel_version(stock_wheel)]
    result = subprocess.run(
        [sys.executable, "-m", "orchestrator", *argv, "--json"],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
        timeout=STOCK_BUILD_TIMEOUT,
        check=False,
    )
    if result.returncode != 0:
        pytest.fail(
            f"orch {' '.join(argv)} exited {result.returncode}\n--- stdout\n{result.stdout[-4000:]}"
            f"\n--- stderr\n{result.stderr[-4000:]}",
            pytrace=False,
        )
    output = json.loads(result.stdout)
    directory = Path(output["artifact"])
    return StockBuild(
        env=env,
        artifact=Artifact(directory=directory, manifest=read_manifest(directory / "manifest.json")),
        manifest=json.loads((directory / "manifest.json").read_text()),
        output=output,
    )


def make_artifact(
    root: Path, wheel: Path, *, target: str = "lab", variant: str = "stock", name: str | None = None
) -> Artifact:
    """An artifact directory holding ``wheel`` (renamed to ``name``) and a hand-written manifest
    that claims a passed pre-flight: for wheels the deploy-time checks must refuse on their own."""
    version = wheel_version(wheel)
    directory = artifact_dir(target, variant, version, root=root)
    directory.mkdir(parents=True, exist_ok=True)
    dest = directory / (name or wheel.name)
    if not dest.exists():
        shutil.copyfile(wheel, dest)
    document = {
        "target": target,
        "variant": variant,
        "ort_version": version,
        "wheel": dest.name,
        "wheel_sha256": hashlib.sha256(dest.read_bytes()).hexdigest(),
        "wheel_size": dest.stat().st_size,
        "created": datetime.now(timezone.utc).isoformat(),
        # Set by this fixture: the official wheel is trusted as built upstream, not pre-flighted by orch.
        "preflight": {"ok": True, "by": "tests/deploy fixture (official wheel, not built by orch)"},
    }
    manifest = Manifest.from_json(document, source="tests/deploy fixture")
    write_manifest(directory, manifest)
    return Artifact(directory=directory, manifest=manifest)


@pytest.fixture(scope="session")
def artifact_maker() -> Callable[..., Artifact]:
    """``make_artifact(root, wheel, target=, variant=, name=)`` for tests."""
    return make_artifact


def rewrite_wheel(
    source: Path,
    dest: Path,
    patch: dict[bytes, bytes] | None = None,
    extra: dict[str, bytes] | None = None,
    only_shared_objects: bool = False,
) -> Path:
    """Copy a wheel under a new name, byte-patching its shared objects (same-length patches keep ELF offsets)."""
    with zipfile.ZipFile(source) as src, zipfile.ZipFile(dest, "w", zipfile.ZIP_STORED) as out:
        for item in src.infolist():
            is_so = item.filename.endswith(".so") or ".so." in item.filename
            if only_shared_objects and not is_so:
                continue
            data = src.read(item.filename)
            if is_so and patch:
                for old, new in patch.items():
                    assert len(old) == len(new)
                    data = data.replace(old, new)
            out.writestr(item.filename, data)
        for name, data in (extra or {}).items():
            out.writestr(name, data)
    return dest


@pytest.fixture(scope="session")
def bad_wheels(stock_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Wheels a lab board must refuse, each wrong in one way:

    - ``glibc``: the stock wheel whose shared objects ask for GLIBC_2.99 (version string patched);
    - ``python``: the stock wheel tagged for CPython 3.10;
    - ``arch``: a wheel tagged x86_64 holding the workstation's x86-64 ORT libraries;
    - ``elf``: the same x86-64 libraries in a wheel that *claims* aarch64 (only the ELF check catches it).
    """
    root = tmp_path_factory.mktemp("bad-wheels")
    version = wheel_version(stock_wheel)
    made = {}
    (root / "glibc").mkdir()
    made["glibc"] = rewrite_wheel(
        stock_wheel,
        root / "glibc" / stock_wheel.name,
        patch={b"GLIBC_2.28\0": b"GLIBC_2.99\0", b"GLIBC_2.27\0": b"GLIBC_2.99\0"},
    )
    (root / "python").mkdir()
    made["python"] = rewrite_wheel(
        stock_wheel,
        root / "python" / f"onnxruntime-{version}-cp310-cp310-{LAB_PLATFORM}.whl",
        only_shared_objects=True,
    )
    import onnxruntime

    capi = Path(onnxruntime.__file__).parent / "capi"
    x86 = {f"onnxruntime/capi/{p.name}": p.read_bytes() for p in sorted(capi.glob("*.so*"))}
    if not x86:
        pytest.fail(f"no shared objects in {capi}: the workstation's onnxruntime install is incomplete")
    for kind, platform in (("arch", "manylinux_2_28_x86_64"), ("elf", LAB_PLATFORM)):
        (root / kind).mkdir()
        path = root / kind / f"onnxruntime-{version}-cp313-cp313-{platform}.whl"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as out:
            for name, data in x86.items():
                out.writestr(name, data)
        made[kind] = path
    return made
