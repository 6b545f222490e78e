"""The counting qemu: a plugin-enabled, dynamically linked qemu-aarch64 and its instruction-counting
plugin, built offline from Debian's own qemu source package (docker/counting-qemu.Dockerfile), kept as
an image on the engine and as a bundle (a .tar.gz) in ``$ORCH_HOME/counting-qemu/<tag>/``, which
``orch bench --metric instructions`` sends to emulated boards. Made once per input: the tag hashes
the Dockerfile, its scripts and the base image's id."""

from __future__ import annotations

import hashlib
import shutil
import tarfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.lab.base_images import ensure_base_image
from orchestrator.paths import DOCKER_DIR, orch_home

if TYPE_CHECKING:
    from orchestrator.adapters.engine import Engine

DOCKERFILE = DOCKER_DIR / "counting-qemu.Dockerfile"
_INPUT_FILES = (
    DOCKERFILE,
    DOCKER_DIR / "counting_qemu" / "build.sh",
    DOCKER_DIR / "build" / "fetch_debian_source.sh",
)
IMAGE_REPO = "orch/counting-qemu"
BUNDLE_IN_IMAGE = "/opt/orch-counting-qemu"
# The workstation's Debian release the qemu source comes from (10.0: plugins, the insn plugin's totals).
SUITE = "trixie"
BUNDLE_NAME = "counting-qemu.tar.gz"


@dataclass(frozen=True, kw_only=True)
class CountingQemu:
    """The bundle on the workstation: its tarball, the tag it was made from, qemu's version line."""

    tarball: Path
    tag: str
    version: str

    @property
    def digest(self) -> str:
        """What names the bundle on a board (the image tag's hash)."""
        return self.tag.rsplit(":", 1)[-1]


def image_tag(base_image_id: str) -> str:
    digest = hashlib.sha256(base_image_id.encode() + b"\0")
    for path in _INPUT_FILES:
        digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return f"{IMAGE_REPO}:{digest.hexdigest()[:12]}"


def ensure_counting_qemu(engine: Engine, arch: str, on_log: Callable[[str], None]) -> CountingQemu:
    """The bundle for the workstation's ``arch`` (x86_64): taken from ``$ORCH_HOME`` when made
    before, else from the image (built when missing: the qemu source from the base image's apt
    sources, about 3 minutes on 2 cores)."""
    base = ensure_base_image(engine, SUITE, arch, on_log=on_log)
    tag = image_tag(engine.image_id(base) or base)
    home = orch_home() / "counting-qemu" / tag.rsplit(":", 1)[-1]
    tarball = home / BUNDLE_NAME
    if not tarball.is_file():
        if engine.image_id(tag) is None:
            on_log(f"building the counting qemu {tag} from Debian's qemu source package on {base}")
            engine.build_image(
                DOCKER_DIR,
                DOCKERFILE,
                tag,
                buildargs={"BASE_IMAGE": base},
                labels={"orch.role": "counting-qemu"},
                on_log=on_log,
            )
        _extract(engine, tag, home)
    return CountingQemu(tarball=tarball, tag=tag, version=_version(tarball))


def _extract(engine: Engine, tag: str, home: Path) -> None:
    """The image's bundle as a tarball, written under a temporary name then renamed (a crash leaves none)."""
    staging = home.with_name(home.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    engine.run(tag, ["true"], copy_out=[(BUNDLE_IN_IMAGE, staging)])
    unpacked = staging / Path(BUNDLE_IN_IMAGE).name
    with tarfile.open(staging / BUNDLE_NAME, "w:gz") as tar:
        tar.add(unpacked, arcname=".")
    shutil.rmtree(unpacked)
    shutil.rmtree(home, ignore_errors=True)
    staging.rename(home)


def _version(tarball: Path) -> str:
    with tarfile.open(tarball) as tar:
        member = tar.extractfile("./VERSION")
        text = member.read().decode() if member else ""
    return " / ".join(line for line in text.splitlines() if line)
