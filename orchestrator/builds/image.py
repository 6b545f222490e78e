"""The build image: planned from the base image, the Dockerfile and the package lists (tagged by a
hash of them all), and made on an engine: found there, sent from the workstation's engine, or
built on its base image (bootstrapped offline when possible)."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.builds.toolchain import CLANG_SUITE, SYSROOT_WAYS, Toolchain
from orchestrator.errors import BuildError
from orchestrator.lab.base_images import (
    base_image_tag,
    base_image_variable,
    ensure_base_image,
    registry_override,
)
from orchestrator.paths import DOCKER_DIR
from orchestrator.targets import TargetProfile

if TYPE_CHECKING:
    from orchestrator.adapters.engine import Engine
    from orchestrator.builds.plan import BuildPlan
    from orchestrator.builds.routes import DependencyRoute

Log = Callable[[str], None]

DOCKERFILE = DOCKER_DIR / "build.Dockerfile"
PACKAGES_DIR = DOCKER_DIR / "build" / "packages"
DEFAULT_PACKAGES = PACKAGES_DIR / "default.txt"
CLANG_PACKAGES = PACKAGES_DIR / "clang-sysroot.txt"  # the sysroot route's one build container


@dataclass(frozen=True, kw_only=True)
class ImagePlan:
    """The build image: base + Dockerfile + package lists, tagged by a hash of them all."""

    tag: str
    base_image: str
    base_suite: str | None
    base_arch: str
    dockerfile: Path
    context: Path
    buildargs: tuple[tuple[str, str], ...]
    inputs_sha256: str


@dataclass(frozen=True, kw_only=True)
class ImagePackages:
    """A build image's package lists (docker/build/packages/*.txt)."""

    host: tuple[str, ...]
    target: tuple[str, ...]
    suites: tuple[str, ...]  # further suites of the mirror the packages come from


def packages_file(codename: str, route: DependencyRoute) -> Path:
    """``<codename>.txt`` (system route), ``<codename>-source.txt`` (self-contained), else default.txt."""
    name = {"system": f"{codename}.txt", "source": f"{codename}-source.txt"}.get(route, "default.txt")
    path = PACKAGES_DIR / name
    return path if path.is_file() else DEFAULT_PACKAGES


def read_packages(codename: str, route: DependencyRoute) -> ImagePackages:
    """The build image's packages for a distribution release and dependency route."""
    return read_package_list(packages_file(codename, route))


def read_package_list(path: Path) -> ImagePackages:
    """One package list: ``host:``, ``target:`` and ``suites:`` lines, ``#`` comments."""
    lists: dict[str, list[str]] = {"host": [], "target": [], "suites": []}
    for line in path.read_text().splitlines():
        key, sep, value = line.split("#", 1)[0].strip().partition(":")
        if sep and key in lists:
            lists[key] += value.split()
    return ImagePackages(
        host=tuple(lists["host"]), target=tuple(lists["target"]), suites=tuple(lists["suites"])
    )


def plan_image(
    profile: TargetProfile,
    route: DependencyRoute,
    build_arch: str = "amd64",
    toolchain: Toolchain = "gcc-multiarch",
) -> ImagePlan:
    """The build image of a target, dependency route and toolchain, named by what its layers hold:
    the board's distribution (gcc-multiarch), or the one clang image for every board (clang-sysroot)."""
    if toolchain == "clang-sysroot":
        suite: str | None = CLANG_SUITE
        packages = read_package_list(CLANG_PACKAGES)
        name = "orch/build-clang-sysroot"
    else:
        suite = profile.bootstrap_suite
        packages = read_packages(profile.os.codename, route)
        name = f"orch/build-{profile.os.codename}{'-source' if route == 'source' else ''}"
    if suite:
        base = registry_override(suite) or base_image_tag(suite, build_arch)
    else:
        base = os.environ.get(base_image_variable(profile.os.codename)) or profile.base_image
    buildargs = (
        ("BASE_IMAGE", base),
        ("TARGET_ARCH", "arm64" if profile.arch == "aarch64" else profile.arch),
        ("CROSS_TRIPLET", profile.cross_prefix.rstrip("-")),
        ("HOST_PACKAGES", " ".join(packages.host)),
        ("TARGET_PACKAGES", " ".join(packages.target)),
        *((("EXTRA_SUITES", " ".join(packages.suites)),) if packages.suites else ()),
    )
    inputs = _inputs_sha256(buildargs)
    return ImagePlan(
        tag=f"{name}:{inputs[:12]}",
        base_image=base,
        base_suite=suite,
        base_arch=build_arch,
        dockerfile=DOCKERFILE,
        context=DOCKER_DIR,
        buildargs=buildargs,
        inputs_sha256=inputs,
    )


def _inputs_sha256(buildargs: tuple[tuple[str, str], ...]) -> str:
    digest = hashlib.sha256()
    # The scripts under docker/build are mounted at run time (always current); the image is
    # named by what its layers hold: the Dockerfile and the build arguments (the package lists
    # are among them, so another target's list does not rename this image).
    digest.update(json.dumps(buildargs).encode())
    digest.update(DOCKERFILE.read_bytes())
    return digest.hexdigest()


def ensure_build_image(engine: Engine, plan: BuildPlan, log: Log, *, local: Engine | None = None) -> str:
    """The build image's id on ``engine``: sent from ``local`` when that has it (same tag = same
    inputs), else built there on the base image (bootstrapped offline when possible)."""
    image = plan.image
    existing = engine.image_id(image.tag) or _sent_from(local, engine, image.tag, log)
    if existing:
        return existing
    ensure_base_image_on(engine, plan, log, local=local)
    log(f"building image {image.tag} from {image.dockerfile.name} on {image.base_image}")
    return engine.build_image(
        context=image.context,
        dockerfile=image.dockerfile,
        tag=image.tag,
        buildargs=dict(image.buildargs),
        labels={"orch.role": "build", "orch.inputs": image.inputs_sha256, "orch.target": plan.target.name},
        on_log=log,
    )


def ensure_base_image_on(engine: Engine, plan: BuildPlan, log: Log, *, local: Engine | None = None) -> str:
    """The base image of the build image on ``engine``: bootstrapped offline, sent from ``local``, or
    (registry images) already there; a clear error when it cannot be had."""
    image = plan.image
    if engine.image_id(image.base_image) or _sent_from(local, engine, image.base_image, log):
        return image.base_image
    if made_offline(plan):
        base = ensure_base_image(engine, str(image.base_suite), image.base_arch, on_log=log)
        if base != image.base_image:
            raise BuildError(f"base image tag changed while planning ({image.base_image} vs {base})")
        return base
    raise missing_base_image(plan, engine.label)


def made_offline(plan: BuildPlan) -> bool:
    """Whether orch makes the plan's base image itself (debootstrap), so no engine must have it."""
    suite = plan.image.base_suite
    return bool(suite) and not registry_override(str(suite))


def base_image_refusal(engine: Engine, plan: BuildPlan, *, local: Engine | None = None) -> BuildError | None:
    """What the real run refuses before any download when the build image cannot be made: its base
    image is a registry image that neither ``engine`` nor ``local`` has. Asked by ``--dry-run`` too,
    so that both refuse alike (None: the image is there, or orch makes it offline)."""
    image = plan.image
    engines = [engine] if local is None or local is engine else [engine, local]
    if made_offline(plan) or any(e.image_id(image.tag) or e.image_id(image.base_image) for e in engines):
        return None
    return missing_base_image(plan, engine.label)


def missing_base_image(plan: BuildPlan, engine_label: str) -> BuildError:
    """The one message naming every way to get the base image that really works for this target."""
    image, target = plan.image, plan.target
    variable = base_image_variable(target.os.codename)
    ways = [
        (
            f"pull it where a registry is reachable (docker pull {image.base_image}) or point {variable}"
            " at an image you have"
        ),
        f"load a saved one (docker load -i {image.base_image.replace(':', '_').replace('/', '_')}.tar)",
    ]
    if image.base_suite:
        # Only a registry override stops orch from making a Debian image offline.
        ways.append(f"unset {variable}: orch makes the {image.base_suite} image offline with debootstrap")
    else:
        ways.append(SYSROOT_WAYS)
    listed = "; ".join(f"({number}) {way}" for number, way in enumerate(ways, start=1))
    return BuildError(
        f"the build image for target '{target.name}' needs the base image '{image.base_image}', "
        f"which {engine_label} does not have and cannot pull without a registry",
        hint=f"{len(ways)} ways: {listed}. `--dry-run` shows the plan and this same refusal",
    )


def _sent_from(local: Engine | None, engine: Engine, tag: str, log: Log) -> str | None:
    """``tag`` sent to ``engine`` from the workstation's engine when only that one has it (same tag,
    same inputs); its id there, or None."""
    if local is None or local is engine or not local.image_id(tag):
        return None
    return local.ship_image(tag, engine, on_log=log)
