"""Offline base images: tag naming, mirror derivation from apt sources, debootstrap argv, reuse, registry override."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.adapters.engine import Engine
from orchestrator.errors import ContainerError
from orchestrator.lab import base_images
from orchestrator.lab.boards import LAB_PACKAGES

ARCHIVE = "http://archive.example.invalid/debian"


def test_tag_names_suite_arch_and_package_set() -> None:
    tag = base_images.base_image_tag("trixie", "aarch64", ["python3", "openssh-server"])
    assert tag.startswith("orch/debian-trixie-arm64:") and len(tag.split(":")[1]) == 8
    # Order and duplicates do not make another image; another package set does.
    assert tag == base_images.base_image_tag("trixie", "arm64", ["openssh-server", "python3", "python3"])
    assert tag != base_images.base_image_tag("trixie", "arm64", ["openssh-server"])
    with pytest.raises(ContainerError, match="no Debian architecture known for 'sparc'"):
        base_images.base_image_tag("trixie", "sparc")


def test_mirror_comes_from_the_machines_debian_source_not_security_or_others(tmp_path: Path) -> None:
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "sources.list").write_text(
        f"deb http://ports.example.invalid/ubuntu jammy main\ndeb {ARCHIVE}-security bookworm-security main\n"
    )
    (tmp_path / "sources.list.d" / "debian.sources").write_text(
        f"Types: deb-src\nURIs: {ARCHIVE}-src\nSuites: bookworm\n\n"
        f"Types: deb\nURIs: {ARCHIVE}/\nSuites: bookworm bookworm-updates\nComponents: main\n"
    )
    assert base_images.debian_mirror(tmp_path) == ARCHIVE
    empty = tmp_path / "empty"
    empty.mkdir()
    assert base_images.debian_mirror(empty) is None  # debootstrap then uses its own default


def test_debootstrap_argv() -> None:
    argv = base_images.debootstrap_argv(
        "trixie", "aarch64", Path("/t/rootfs"), ["python3", "ca-certificates"], ARCHIVE
    )
    assert argv == [
        "debootstrap",
        "--variant=minbase",
        "--arch=arm64",
        "--include=ca-certificates,python3",
        "trixie",
        "/t/rootfs",
        ARCHIVE,
    ]
    assert base_images.debootstrap_argv("trixie", "amd64", Path("/t"), [], None)[-2:] == ["trixie", "/t"]


def test_existing_image_is_reused_and_a_registry_base_wins(lab, monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine()
    # The lab's base image exists once the lab fixture or `orch lab up` ran; reusing it takes no debootstrap.
    tag = base_images.ensure_base_image(engine, "trixie", "arm64", LAB_PACKAGES)
    assert tag == base_images.base_image_tag("trixie", "arm64", LAB_PACKAGES)
    assert engine.image_id(tag)
    monkeypatch.setenv("ORCH_BASE_IMAGE_TRIXIE", "debian:trixie")
    assert base_images.ensure_base_image(engine, "trixie", "arm64", LAB_PACKAGES) == "debian:trixie"
