"""Target profiles: what a board is (CPU, OS, glibc, Python) and how to build for it.

Profiles are data files in ``toolchains/targets/*.yaml`` (users may add their own in
``$ORCH_HOME/targets``). This module loads and validates them and resolves aliases
(``jetson`` -> ``jetson-orin``). Pure: no Docker, no SSH.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from orchestrator.errors import TargetError
from orchestrator.paths import TOOLCHAINS_DIR, orch_home


@dataclass(frozen=True, kw_only=True)
class BoardOS:
    distro: str
    release: str
    codename: str
    glibc: str
    python: str

    @property
    def python_tag(self) -> str:
        """The wheel tag of the board's Python, e.g. ``cp313``."""
        return "cp" + self.python.replace(".", "")

    @property
    def glibc_tuple(self) -> tuple[int, ...]:
        return tuple(int(part) for part in self.glibc.split("."))


@dataclass(frozen=True, kw_only=True)
class TargetProfile:
    name: str
    description: str
    aliases: tuple[str, ...]
    arch: str
    cpu: str
    qemu_cpu: str
    mcpu: str
    march: str
    os: BoardOS
    base_image: str
    bootstrap_suite: str | None
    cross_prefix: str
    execution_providers: tuple[str, ...]
    cuda_version: str | None
    source: Path
    # The GPU's compute capability as CMAKE_CUDA_ARCHITECTURES takes it (87: Orin, 53: the Nano's
    # Maxwell): a CUDA build compiles kernels for this one GPU only, not for every architecture.
    cuda_architectures: str | None = None

    @property
    def pip_platform(self) -> str:
        """The manylinux platform tag pip can download for this board's glibc."""
        major, minor = self.os.glibc_tuple[:2]
        # Official ORT aarch64 wheels are manylinux_2_28 (or 2_17 before 1.19); pip accepts any tag <= board glibc.
        return f"manylinux_{major}_{minor}_{self.arch}"


_PROFILE_KEYS = {
    "name": str,
    "description": str,
    "aliases": list,
    "arch": str,
    "cpu": str,
    "qemu_cpu": str,
    "cflags": dict,
    "os": dict,
    "build": dict,
    "execution_providers": list,
    "cuda": dict,
}
_REQUIRED = ("name", "arch", "cpu", "qemu_cpu", "cflags", "os", "build")


def _profile_dirs() -> list[Path]:
    return [TOOLCHAINS_DIR / "targets", orch_home() / "targets"]


def _require(mapping: dict[str, Any], key: str, where: str) -> Any:
    if key not in mapping:
        raise TargetError(f"{where}: missing key '{key}'")
    return mapping[key]


def _parse_profile(path: Path) -> TargetProfile:
    try:
        data = yaml.safe_load(path.read_text())
    except yaml.YAMLError as error:
        raise TargetError(f"{path}: not valid YAML: {error}") from error
    if not isinstance(data, dict):
        raise TargetError(f"{path}: a target profile is a mapping of keys")
    for key, value in data.items():
        if key not in _PROFILE_KEYS:
            raise TargetError(f"{path}: unknown key '{key}' (known: {', '.join(sorted(_PROFILE_KEYS))})")
        if not isinstance(value, _PROFILE_KEYS[key]):
            raise TargetError(f"{path}: key '{key}' must be a {_PROFILE_KEYS[key].__name__}")
    for key in _REQUIRED:
        _require(data, key, str(path))
    os_data, cflags, build = data["os"], data["cflags"], data["build"]
    return TargetProfile(
        name=data["name"],
        description=str(data["description"] if "description" in data else data["name"]),
        aliases=tuple(data.get("aliases", ())),
        arch=data["arch"],
        cpu=data["cpu"],
        qemu_cpu=data["qemu_cpu"],
        mcpu=_require(cflags, "mcpu", f"{path}: cflags"),
        march=_require(cflags, "march", f"{path}: cflags"),
        os=BoardOS(
            **{
                key: str(_require(os_data, key, f"{path}: os"))
                for key in ("distro", "release", "codename", "glibc", "python")
            }
        ),
        base_image=_require(build, "base_image", f"{path}: build"),
        bootstrap_suite=build.get("bootstrap_suite"),
        cross_prefix=build.get("cross_prefix", f"{data['arch']}-linux-gnu-"),
        execution_providers=tuple(data.get("execution_providers", ("cpu",))),
        cuda_version=(data.get("cuda") or {}).get("version"),
        cuda_architectures=_optional_text((data.get("cuda") or {}).get("architectures")),
        source=path,
    )


def _optional_text(value: object) -> str | None:
    return None if value is None else str(value)


@cache
def load_profiles() -> dict[str, TargetProfile]:
    """All profiles by name; a user profile with the same name overrides the shipped one."""
    profiles: dict[str, TargetProfile] = {}
    for directory in _profile_dirs():
        for path in sorted(directory.glob("*.yaml")):
            profile = _parse_profile(path)
            profiles[profile.name] = profile
    return profiles


def known_target_names() -> list[str]:
    return sorted(load_profiles())


def resolve_target(name: str) -> TargetProfile:
    """A profile by name or alias; an unknown name lists the known ones."""
    profiles = load_profiles()
    if name in profiles:
        return profiles[name]
    for profile in profiles.values():
        if name in profile.aliases:
            return profile
    choices = sorted(set(profiles) | {alias for p in profiles.values() for alias in p.aliases})
    close = difflib.get_close_matches(name, choices, n=1)
    suggestion = f" Did you mean '{close[0]}'?" if close else ""
    raise TargetError(
        f"unknown target '{name}'.{suggestion} Known targets: {', '.join(known_target_names())}"
        f" (aliases: {', '.join(f'{a}={p.name}' for p in profiles.values() for a in p.aliases)})"
    )
