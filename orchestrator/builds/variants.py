"""Build variants: named sets of ORT build flags (stock, default, lto, tuned, user-defined).

Variants are data in ``toolchains/variants.yaml``; users add or replace variants in
``$ORCH_HOME/variants.yaml``. A variant's ``cflags`` may name ``{mcpu}`` and ``{march}``,
filled in from the target profile. Pure: no Docker, no files other than the YAML.
"""

from __future__ import annotations

import difflib
import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from orchestrator.errors import TargetError
from orchestrator.paths import TOOLCHAINS_DIR, orch_home
from orchestrator.textfiles import TEXT_FILE_LIMIT, read_capped

_KEYS = {
    "description": str,
    "build": bool,
    "config": str,
    "build_args": list,
    "defines": dict,
    "cflags": list,
    "lto": bool,
    "inline_limit": int,
    "min_ort": str,
    "kleidiai": bool,
    "reduce_to_models": bool,
}
_CONFIGS = ("Release", "RelWithDebInfo", "MinSizeRel", "Debug")


@dataclass(frozen=True, kw_only=True)
class Variant:
    name: str
    description: str
    build: bool
    config: str
    build_args: tuple[str, ...]
    defines: tuple[tuple[str, str], ...]
    cflags: tuple[str, ...]
    lto: bool
    inline_limit: int | None
    source: Path
    min_ort: tuple[int, ...] | None = None  # the first ORT release that has what the variant asks for
    kleidiai: bool | None = None  # None: the release's own choice, made explicit by the plan
    reduce_to_models: bool = False  # only the kernels of the --model files (ORT's --include_ops_by_config)

    def compiler_flags(self, *, mcpu: str, march: str) -> tuple[str, ...]:
        """The C/C++ flags this variant adds for a board with that CPU."""
        flags = [flag.format(mcpu=mcpu, march=march) for flag in self.cflags]
        if self.inline_limit is not None:
            flags.append(f"-finline-limit={self.inline_limit}")
        return tuple(flags)


def _parse(name: str, data: Any, path: Path) -> Variant:
    where = f"{path}: variant '{name}'"
    if not isinstance(data, dict):
        raise TargetError(f"{where} must be a mapping of keys")
    for key, value in data.items():
        if key not in _KEYS:
            close = difflib.get_close_matches(key, list(_KEYS), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            raise TargetError(f"{where}: unknown key '{key}'{hint}; known keys: {', '.join(sorted(_KEYS))}")
        if not isinstance(value, _KEYS[key]) or (_KEYS[key] is int and isinstance(value, bool)):
            raise TargetError(f"{where}: '{key}' must be a {_KEYS[key].__name__}")
    config = data.get("config", "Release")
    if config not in _CONFIGS:
        raise TargetError(f"{where}: config '{config}' is not one of {', '.join(_CONFIGS)}")
    for arg in data.get("build_args", []):
        if not isinstance(arg, str) or not arg.startswith("--"):
            raise TargetError(
                f"{where}: build_args entries are build.py flags like '--disable_ml_ops', got {arg!r}"
            )
    for flag in data.get("cflags", []):
        _check_cflag(where, flag)
    for key, value in (data.get("defines") or {}).items():
        if not isinstance(key, str) or not key or isinstance(value, (dict, list)) or value is None:
            raise TargetError(f"{where}: defines must map CMake names to values, got {key!r}: {value!r}")
    if data.get("inline_limit") is not None and data["inline_limit"] < 0:
        raise TargetError(f"{where}: 'inline_limit' must be >= 0, not {data['inline_limit']}")
    min_ort = data.get("min_ort")
    if min_ort is not None and not _RELEASE.fullmatch(min_ort):
        raise TargetError(f"{where}: 'min_ort' is an ONNX Runtime release like '1.24', not {min_ort!r}")
    return Variant(
        name=name,
        description=str(data.get("description", name)),
        build=bool(data.get("build", True)),
        config=config,
        build_args=tuple(data.get("build_args", [])),
        defines=tuple((str(k), _define_value(v)) for k, v in (data.get("defines") or {}).items()),
        cflags=tuple(str(flag) for flag in data.get("cflags", [])),
        lto=bool(data.get("lto", False)),
        inline_limit=data.get("inline_limit"),
        source=path,
        min_ort=release_tuple(min_ort) if min_ort is not None else None,
        kleidiai=data.get("kleidiai"),
        reduce_to_models=bool(data.get("reduce_to_models", False)),
    )


_RELEASE = re.compile(r"\d+(\.\d+){1,2}")


def release_tuple(version: str) -> tuple[int, ...]:
    """``"1.21.0"`` -> ``(1, 21, 0)``, for comparing releases."""
    return tuple(int(part) for part in version.split("."))


PLACEHOLDERS = ("mcpu", "march")


def _check_cflag(where: str, flag: Any) -> None:
    """A cflags entry is a string whose only placeholders are {mcpu} and {march} (``{{`` for a brace)."""
    if not isinstance(flag, str):
        raise TargetError(f"{where}: cflags entries are compiler flags (strings), got {flag!r}")
    try:
        fields = [field for _, field, _, _ in string.Formatter().parse(flag) if field is not None]
    except ValueError as error:
        raise TargetError(
            f"{where}: cflags entry {flag!r}: {error}; write a literal brace as '{{{{' or '}}}}'"
        ) from None
    for field in fields:
        if field not in PLACEHOLDERS:
            raise TargetError(
                f"{where}: cflags entry {flag!r} names the unknown placeholder {{{field}}};"
                f" known: {', '.join('{' + name + '}' for name in PLACEHOLDERS)}"
            )


def _define_value(value: Any) -> str:
    if isinstance(value, bool):
        return "ON" if value else "OFF"
    return str(value)


def _load_file(path: Path) -> dict[str, Variant]:
    try:
        raw, more = read_capped(path)
    except OSError as error:
        raise TargetError(f"{path}: cannot read the variants file: {error.strerror or error}") from error
    if more:
        raise TargetError(
            f"{path}: larger than {TEXT_FILE_LIMIT >> 20} MiB (or endless): not a variants file"
        )
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        raise TargetError(
            f"{path}:{line}: byte {raw[error.start]:#04x} is not UTF-8: a variants file is UTF-8 text"
        ) from None
    try:
        data = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader)) or {}
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = ", ".join(part for part in (error.context, error.problem) if part)
        raise TargetError(f"{where}: not valid YAML: {problem}") from None
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as error:
        raise TargetError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(data, dict):
        raise TargetError(f"{path}: a variants file maps variant names to their settings")
    return {str(name): _parse(str(name), body, path) for name, body in data.items()}


def variant_files() -> list[Path]:
    return [TOOLCHAINS_DIR / "variants.yaml", orch_home() / "variants.yaml"]


def load_variants() -> dict[str, Variant]:
    """Shipped variants, then the user's (a user variant with a shipped name replaces it)."""
    variants: dict[str, Variant] = {}
    for path in variant_files():
        if path.exists():  # a directory or a device there is an error, not "no variants file"
            variants.update(_load_file(path))
    return variants


def resolve_variant(name: str) -> Variant:
    variants = load_variants()
    if name in variants:
        return variants[name]
    close = difflib.get_close_matches(name, list(variants), n=1)
    suggestion = f" Did you mean '{close[0]}'?" if close else ""
    raise TargetError(
        f"unknown variant '{name}'.{suggestion} Known variants: {', '.join(sorted(variants))}",
        hint=f"add your own in {orch_home() / 'variants.yaml'}",
    )
