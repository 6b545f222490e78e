"""A JetPack-like stand-in, made offline: the target's lab board image (its stand-in OS, e.g. Debian
12 for a Jetson Orin) with CUDA for arm64 from Debian's contrib/non-free packages and cuDNN from its
aarch64 wheel, laid out as JetPack lays them (docker/gpu_stack/stage.sh). ``orch sysroot stand-in``
stores its file system as a sysroot, which ``orch build --ep cuda --sysroot-from`` builds against.

Three images, each named by its inputs and made once: the GPU stack (``orch/gpu-stack``, for the
workstation, named by its script, its base image and the cuDNN release; the wheel is fetched through
the workstation's own pip sources only to build it, and its sha256 kept as a label), the target's
board image, and the board image with the stack copied in (``orch/lab-board-gpu``).
"""

from __future__ import annotations

import hashlib
import shutil
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.adapters import process
from orchestrator.common.digests import file_sha256
from orchestrator.errors import OrchError, UsageError
from orchestrator.lab.base_images import ensure_base_image
from orchestrator.lab.boards import ensure_board_image
from orchestrator.paths import DOCKER_DIR, orch_home
from orchestrator.targets import TargetProfile

if TYPE_CHECKING:
    from orchestrator.adapters.engine import Engine

Log = Callable[[str], None]
STACK_DOCKERFILE = DOCKER_DIR / "gpu-stack.Dockerfile"
STAGE_SCRIPT = DOCKER_DIR / "gpu_stack" / "stage.sh"
BOARD_DOCKERFILE = DOCKER_DIR / "board-gpu.Dockerfile"
STACK_REPO = "orch/gpu-stack"
BOARD_REPO = "orch/lab-board-gpu"
# cuDNN 9 for CUDA 12 on aarch64 (ORT 1.21's CUDA provider links cuDNN 9), one release, so that two
# stand-ins made months apart hold the same library.
CUDNN_REQUIREMENT = "nvidia-cudnn-cu12==9.28.0.42"
CUDNN_PLATFORM = "manylinux_2_27_aarch64"
LABEL_WHEEL, LABEL_WHEEL_SHA256 = "orch.cudnn-wheel", "orch.cudnn-sha256"
SUITE = "trixie"  # the Debian release whose non-free arm64 CUDA packages the stack takes (12.4)


@dataclass(frozen=True, kw_only=True)
class StandInImage:
    """The stand-in board image and what it was made of."""

    tag: str
    board_image: str
    stack_image: str
    cudnn_wheel: str  # file name
    cudnn_sha256: str


def make_stand_in_image(engine: Engine, profile: TargetProfile, log: Log) -> StandInImage:
    """The target's board image with the GPU stack, built when missing."""
    if not profile.cuda_architectures:
        raise UsageError(
            f"target '{profile.name}' has no NVIDIA GPU: a GPU stand-in is for a Jetson target",
            hint="e.g. orch sysroot stand-in --target jetson-orin --name orin-cuda",
        )
    stack = _ensure_stack_image(engine, log)
    wheel, wheel_sha256 = _cudnn_of(engine, stack)
    board = ensure_board_image(engine, profile, log)
    digest = hashlib.sha256(f"{board}\0{stack}\0".encode() + BOARD_DOCKERFILE.read_bytes()).hexdigest()
    tag = f"{BOARD_REPO}:{digest[:12]}"
    if engine.image_id(tag) is None:
        log(f"building {tag}: {board} with the GPU stack {stack}")
        with tempfile.TemporaryDirectory(prefix="orch-board-gpu-") as context:
            engine.build_image(
                Path(context),
                BOARD_DOCKERFILE,
                tag,
                buildargs={"BOARD_IMAGE": board, "GPU_STACK_IMAGE": stack},
                labels={"orch.role": "lab-board-gpu", "orch.target": profile.name},
                on_log=log,
            )
    return StandInImage(
        tag=tag, board_image=board, stack_image=stack, cudnn_wheel=wheel, cudnn_sha256=wheel_sha256
    )


def _cudnn_wheel(log: Log) -> Path:
    """The cuDNN wheel, fetched once into ``$ORCH_HOME/gpu-stack/downloads`` by this Python's pip,
    with the workstation's own index settings (pip.conf, PIP_* variables)."""
    downloads = orch_home() / "gpu-stack" / "downloads"
    name = CUDNN_REQUIREMENT.split("==")[0].replace("-", "_")
    version = CUDNN_REQUIREMENT.split("==")[1]
    found = sorted(downloads.glob(f"{name}-{version}-*-{CUDNN_PLATFORM}.whl"))
    if found:
        return found[-1]
    downloads.mkdir(parents=True, exist_ok=True)
    log(f"fetching {CUDNN_REQUIREMENT} for {CUDNN_PLATFORM} through pip's configured sources (~720 MB, once)")
    argv = [
        sys.executable, "-m", "pip", "download", CUDNN_REQUIREMENT, "--no-deps", "--only-binary=:all:",
        "--platform", CUDNN_PLATFORM, "--python-version", "3.11", "--dest", str(downloads),
    ]  # fmt: skip
    done = process.run(argv)
    found = sorted(downloads.glob(f"{name}-{version}-*-{CUDNN_PLATFORM}.whl"))
    if not done.ok or not found:
        raise OrchError(
            f"pip could not fetch {CUDNN_REQUIREMENT} for {CUDNN_PLATFORM}: {done.stderr.strip()[-600:]}",
            hint="a package index with NVIDIA's aarch64 cuDNN wheel in pip's configuration (pip config list),"
            f" or put the wheel in {downloads}",
        )
    return found[-1]


def _ensure_stack_image(engine: Engine, log: Log) -> str:
    """The GPU stack's image, named by its Dockerfile, script, base image and the cuDNN release (the
    wheel is fetched only to build it; its sha256 is kept as a label)."""
    arch = str(engine.info().get("Architecture", "x86_64"))  # the stack's tools run on the engine's machine
    base = ensure_base_image(engine, SUITE, arch, on_log=log)
    digest = hashlib.sha256(
        f"{engine.image_id(base) or base}\0{CUDNN_REQUIREMENT}\0{CUDNN_PLATFORM}\0".encode()
    )
    for path in (STACK_DOCKERFILE, STAGE_SCRIPT):
        digest.update(path.read_bytes() + b"\0")
    tag = f"{STACK_REPO}:{digest.hexdigest()[:12]}"
    if engine.image_id(tag) is not None:
        return tag
    wheel = _cudnn_wheel(log)
    log(f"building {tag}: CUDA for arm64 from {SUITE}'s contrib/non-free packages, cuDNN from {wheel.name}")
    with tempfile.TemporaryDirectory(prefix="orch-gpu-stack-") as directory:
        context = Path(directory)
        shutil.copytree(STAGE_SCRIPT.parent, context / STAGE_SCRIPT.parent.name)
        try:
            (context / wheel.name).hardlink_to(wheel)
        except OSError:  # another file system
            shutil.copy2(wheel, context / wheel.name)
        engine.build_image(
            context,
            STACK_DOCKERFILE,
            tag,
            buildargs={"BASE_IMAGE": base, "CUDNN_WHEEL": wheel.name},
            labels={
                "orch.role": "gpu-stack",
                LABEL_WHEEL: wheel.name,
                LABEL_WHEEL_SHA256: file_sha256(wheel),
            },
            on_log=log,
        )
    return tag


def _cudnn_of(engine: Engine, stack: str) -> tuple[str, str]:
    """The cuDNN wheel's file name and sha256 the stack image was made with (its labels)."""
    labels = engine.image_labels(stack)
    return labels.get(LABEL_WHEEL, "?"), labels.get(LABEL_WHEEL_SHA256, "?")
