"""The names of orch's Debian base images, and of the variables that replace them with a registry's
(``ORCH_BASE_IMAGE_<SUITE>``). Pure: a build plan names its base image without the machinery that
makes one (``base_images``: debootstrap, ``docker import``)."""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Sequence

from orchestrator.errors import ContainerError

# Debian's names for the architectures orch speaks of in target profiles.
_DEBIAN_ARCH = {"aarch64": "arm64", "arm64": "arm64", "x86_64": "amd64", "amd64": "amd64", "armhf": "armhf"}


def debian_arch(arch: str) -> str:
    try:
        return _DEBIAN_ARCH[arch]
    except KeyError:
        raise ContainerError(
            f"no Debian architecture known for '{arch}' (known: {', '.join(sorted(_DEBIAN_ARCH))})"
        ) from None


def packages_hash(packages: Sequence[str]) -> str:
    """8 hex digits naming a package selection (order and duplicates do not matter)."""
    return hashlib.sha256(",".join(sorted(set(packages))).encode()).hexdigest()[:8]


def base_image_tag(suite: str, arch: str, packages: Sequence[str] = ()) -> str:
    return f"orch/debian-{suite}-{debian_arch(arch)}:{packages_hash(packages)}"


def base_image_variable(codename: str) -> str:
    """The environment variable naming a registry base image for a distribution release
    (``ORCH_BASE_IMAGE_TRIXIE``, ``ORCH_BASE_IMAGE_JAMMY``): every message that names one names this."""
    return f"ORCH_BASE_IMAGE_{re.sub(r'[^A-Za-z0-9]', '_', codename).upper()}"


def registry_override(suite: str) -> str | None:
    """The registry base image configured for a suite (``ORCH_BASE_IMAGE_TRIXIE``), if any."""
    return os.environ.get(base_image_variable(suite)) or None
