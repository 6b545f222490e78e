"""The build image, planned: its base image, the Dockerfile and the package lists of its route
(``docker/build/packages/*.txt``), tagged by a hash of them all. Pure: reads only orch's own
files under docker/; making the image on an engine is ``image``'s."""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path

from orchestrator.builds.routes import PACKAGES_DIR, DependencyRoute, packages_file
from orchestrator.builds.toolchain import CLANG_SUITE, Toolchain
from orchestrator.lab.base_image_tags import base_image_tag, base_image_variable, registry_override
from orchestrator.paths import DOCKER_DIR
from orchestrator.targets import TargetProfile

DOCKERFILE = DOCKER_DIR / "build.Dockerfile"
# --ep cuda on the sysroot route: the clang image plus Debian's CUDA toolkit, one layer above it.
CUDA_DOCKERFILE = DOCKER_DIR / "build-cuda.Dockerfile"
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
    # The build image this one is a layer on (its base_image), made first: the CUDA image's clang one.
    under: ImagePlan | None = None

    @property
    def base_made_offline(self) -> bool:
        """Whether orch makes the base image itself (debootstrap, or the image it is a layer on), so
        no engine must have it: a Debian suite's, unless a registry image is configured for that suite."""
        if self.under is not None:
            return self.under.base_made_offline
        return bool(self.base_suite) and not registry_override(str(self.base_suite))


@dataclass(frozen=True, kw_only=True)
class ImagePackages:
    """A build image's package lists (docker/build/packages/*.txt)."""

    host: tuple[str, ...]
    target: tuple[str, ...]
    suites: tuple[str, ...]  # further suites of the mirror the packages come from


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
    *,
    cuda: bool = False,
) -> ImagePlan:
    """The build image of a target, dependency route and toolchain, named by what its layers hold:
    the board's distribution (gcc-multiarch), or the one clang image for every board (clang-sysroot),
    with ``cuda`` the CUDA toolkit's layer on that clang image."""
    if cuda:
        return _cuda_layer(plan_image(profile, route, build_arch, toolchain))
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


def _cuda_layer(under: ImagePlan) -> ImagePlan:
    """The CUDA toolkit's layer on ``under``, named by ``under``'s tag and its own Dockerfile."""
    buildargs = (("BASE_IMAGE", under.tag),)
    inputs = _inputs_sha256(buildargs, CUDA_DOCKERFILE)
    return ImagePlan(
        tag=f"{under.tag.split(':')[0]}-cuda:{inputs[:12]}",
        base_image=under.tag,
        base_suite=None,
        base_arch=under.base_arch,
        dockerfile=CUDA_DOCKERFILE,
        context=DOCKER_DIR,
        buildargs=buildargs,
        inputs_sha256=inputs,
        under=under,
    )


def _inputs_sha256(buildargs: tuple[tuple[str, str], ...], dockerfile: Path = DOCKERFILE) -> str:
    digest = hashlib.sha256()
    # The scripts under docker/build are mounted at run time (always current); the image is
    # named by what its layers hold: the Dockerfile and the build arguments (the package lists
    # are among them, so another target's list does not rename this image).
    digest.update(json.dumps(buildargs).encode())
    digest.update(dockerfile.read_bytes())
    return digest.hexdigest()
