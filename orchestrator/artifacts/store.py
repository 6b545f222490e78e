"""The artifact store on the workstation: built (or fetched) wheels with their manifests.

Layout: ``artifacts/<target>/<variant>/<ort-version>/`` holding one ``*.whl`` and
``manifest.json``. ``orch build`` writes it; ``orch deploy`` and ``orch build list`` read
it. A manifest always has at least::

    {"target": "lab", "variant": "tuned", "ort_version": "1.21.0",
     "wheel": "onnxruntime-1.21.0-cp313-cp313-linux_aarch64.whl",
     "wheel_sha256": "...", "wheel_size": 12345, "created": "2026-11-29T20:00:00+00:00",
     "preflight": {"ok": true, ...}}

and the build adds everything else it knows (flags, compiler, image id, timings...).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.errors import UsageError
from orchestrator.paths import artifacts_dir


@dataclass(frozen=True, kw_only=True)
class Artifact:
    directory: Path
    manifest: dict[str, Any]

    @property
    def wheel_path(self) -> Path:
        return self.directory / self.manifest["wheel"]

    @property
    def target(self) -> str:
        return self.manifest["target"]

    @property
    def variant(self) -> str:
        return self.manifest["variant"]

    @property
    def ort_version(self) -> str:
        return self.manifest["ort_version"]

    @property
    def created(self) -> str:
        return self.manifest.get("created", "")


def artifact_dir(target: str, variant: str, ort_version: str, root: Path | None = None) -> Path:
    return (root or artifacts_dir()) / target / variant / ort_version


def write_manifest(directory: Path, manifest: dict[str, Any]) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "manifest.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(manifest, indent=2, sort_keys=True, default=str))
    tmp.replace(path)
    return path


def list_artifacts(root: Path | None = None) -> list[Artifact]:
    """Every artifact whose manifest and wheel exist, oldest first."""
    base = root or artifacts_dir()
    found = []
    for manifest_path in sorted(base.glob("*/*/*/manifest.json")):
        manifest = json.loads(manifest_path.read_text())
        artifact = Artifact(directory=manifest_path.parent, manifest=manifest)
        if artifact.wheel_path.exists():
            found.append(artifact)
    return sorted(found, key=lambda a: a.created)


def find_artifact(target: str, variant: str | None = None, root: Path | None = None) -> Artifact:
    """The newest good artifact for a target (and variant); a clear error when there is none."""
    candidates = [
        a
        for a in list_artifacts(root)
        if a.target == target
        and (variant is None or a.variant == variant)
        and a.manifest.get("preflight", {}).get("ok", False)
    ]
    if not candidates:
        what = f"target '{target}'" + (f", variant '{variant}'" if variant else "")
        raise UsageError(
            f"no built artifact for {what} in {root or artifacts_dir()}",
            hint=f"build one first: orch build --target {target}"
            + (f" --variant {variant}" if variant else ""),
        )
    return candidates[-1]
