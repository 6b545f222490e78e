"""Fixtures for the deploy tests: wheels made wrong on purpose (another architecture, a too-new
glibc, another Python), as artifacts that must be refused at deploy time.

``stock_wheel`` and ``stock_build`` (the official wheel, and the real ``orch build --variant
stock`` artifact made of it) are shared with the bench tests: see tests/conftest.py.
``make_artifact`` writes a manifest by hand, only for wheels that must be refused.
"""

from __future__ import annotations

import hashlib
import shutil
import zipfile
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path

import pytest
from plan_files import make_files
from stock_baseline import LAB_PLATFORM, wheel_version

from orchestrator.artifacts.store import Artifact, Manifest, artifact_dir, write_manifest


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


@pytest.fixture
def files(tmp_path: Path) -> dict[str, object]:
    """The release files of a small artifact (a fake wheel, pip, numpy, a tiny model), for plans."""
    return make_files(tmp_path)


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
    import onnxruntime  # noqa: PLC0415 -- heavy, and only this fixture needs it

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
