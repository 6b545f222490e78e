"""Build variants: named sets of ORT build flags (stock, default, lto, tuned, user-defined).

Variants are data in ``toolchains/variants.yaml``; users add or replace variants in
``$ORCH_HOME/variants.yaml``. A variant's ``cflags`` may name ``{mcpu}`` and ``{march}``,
filled in from the target profile. A variant ``from_release`` (upstream) has no options of its
own: they are read from the release's packaging (``sources.packaging``) before the build is
planned. Pure: no Docker, no files other than the YAML.
"""

from __future__ import annotations

import difflib
import re
import string
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from orchestrator.builds.sources.packaging import PackagingOptions
from orchestrator.common.textfiles import TEXT_FILE_LIMIT, read_capped
from orchestrator.errors import BuildError, TargetError
from orchestrator.paths import TOOLCHAINS_DIR, orch_home

_KEYS = {
    "description": str,
    "build": bool,
    "config": str,
    "build_args": list,
    "defines": dict,
    "cflags": list,
    "ldflags": list,
    "lto": bool,
    "inline_limit": int,
    "min_ort": str,
    "kleidiai": bool,
    "reduce_to_models": bool,
    "profile_guided": bool,
    "from_release": bool,
}
# What a variant taken from the release's packaging may say besides: the rest is the release's.
_WITH_FROM_RELEASE = {"description", "build", "min_ort", "from_release"}
_CONFIGS = ("Release", "RelWithDebInfo", "MinSizeRel", "Debug")
_RELEASE = re.compile(r"\d+(\.\d+){1,2}")


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
    ldflags: tuple[str, ...] = ()  # added to the executable, shared and module linker flags
    # Built twice around a training on a board (--train-on): with counters, then with what they measured.
    profile_guided: bool = False
    # The options (config, lto, cflags, ldflags) are the release's own packaging's (upstream):
    # read_from names what they were read from; pending, why a dry run planned without them.
    from_release: bool = False
    read_from: str | None = None
    pending: str | None = None

    def compiler_flags(self, *, mcpu: str, march: str) -> tuple[str, ...]:
        """The C/C++ flags this variant adds for a board with that CPU."""
        if self.from_release and self.read_from is None and self.pending is None:
            # Every route reads them first (release_packaging); a plan without them would build
            # something else under the name upstream.
            raise BuildError(
                f"variant '{self.name}' takes its options from the release's packaging script, and"
                " this build route has not read them (release_packaging.release_variant)"
            )
        flags = [flag.format(mcpu=mcpu, march=march) for flag in self.cflags]
        if self.inline_limit is not None:
            flags.append(f"-finline-limit={self.inline_limit}")
        return tuple(flags)


@dataclass(frozen=True, kw_only=True)
class BrokenVariant:
    """A user variant with mistakes: refused when asked for, without blocking the other variants."""

    name: str
    problems: tuple[str, ...]  # each "FILE:LINE: variant 'NAME': what is wrong"

    def error(self) -> TargetError:
        more = f" (and {len(self.problems) - 1} more below)" if len(self.problems) > 1 else ""
        return TargetError(
            self.problems[0] + more + "".join(f"\n  {problem}" for problem in self.problems[1:]),
            hint="fix the variant in that file; the other variants stay usable",
        )


@dataclass(frozen=True)
class _Lines:
    """Where a variant and each of its keys are written (1-based lines), for messages."""

    path: Path
    variant: int | None
    keys: dict[str, int]

    def where(self, name: str, key: str | None = None) -> str:
        line = self.keys.get(key, self.variant) if key is not None else self.variant
        return f"{self.path}:{line}: variant '{name}'" if line else f"{self.path}: variant '{name}'"


def _parse(name: str, data: Any, lines: _Lines) -> Variant | BrokenVariant:
    if not isinstance(data, dict):
        return BrokenVariant(name=name, problems=(f"{lines.where(name)} must be a mapping of keys",))
    problems = [f"{lines.where(name, key)}: {problem}" for key, problem in _key_problems(data)]
    if problems:
        return BrokenVariant(name=name, problems=tuple(problems))
    min_ort = data.get("min_ort")
    return Variant(
        name=name,
        description=str(data.get("description", name)),
        build=bool(data.get("build", True)),
        config=data.get("config", "Release"),
        build_args=tuple(data.get("build_args", [])),
        defines=tuple((str(k), _define_value(v)) for k, v in (data.get("defines") or {}).items()),
        cflags=tuple(str(flag) for flag in data.get("cflags", [])),
        lto=bool(data.get("lto", False)),
        inline_limit=data.get("inline_limit"),
        source=lines.path,
        min_ort=release_tuple(min_ort) if min_ort is not None else None,
        kleidiai=data.get("kleidiai"),
        reduce_to_models=bool(data.get("reduce_to_models", False)),
        ldflags=tuple(str(flag) for flag in data.get("ldflags", [])),
        profile_guided=bool(data.get("profile_guided", False)),
        from_release=bool(data.get("from_release", False)),
    )


def _key_problems(data: dict[Any, Any]) -> list[tuple[str, str]]:
    """Every mistake of one variant's settings, as (key, what is wrong): all of them, not the first."""
    problems: list[tuple[str, str]] = []
    if data.get("from_release") is True:
        problems += [
            (key, f"'{key}' comes from the release's packaging script with from_release: true")
            for key in data
            if key in _KEYS and key not in _WITH_FROM_RELEASE
        ]
    for key, value in data.items():
        if key not in _KEYS:
            close = difflib.get_close_matches(str(key), list(_KEYS), n=1)
            hint = f" (did you mean '{close[0]}'?)" if close else ""
            problems.append((key, f"unknown key '{key}'{hint}; known keys: {', '.join(sorted(_KEYS))}"))
        elif not isinstance(value, _KEYS[key]) or (_KEYS[key] is int and isinstance(value, bool)):
            problems.append((key, f"'{key}' must be a {_KEYS[key].__name__}"))
        else:
            problems += [(key, problem) for problem in _value_problems(key, value)]
    return problems


def _value_problems(key: str, value: Any) -> list[str]:
    """What is wrong with one setting whose type is right."""
    check = _VALUE_CHECKS.get(key)
    return check(value) if check is not None else []


def _bad_build_args(value: list[Any]) -> list[str]:
    return [
        f"build_args entries are build.py flags like '--disable_ml_ops', got {arg!r}"
        for arg in value
        if not isinstance(arg, str) or not arg.startswith("--")
    ]


def _bad_defines(value: dict[Any, Any]) -> list[str]:
    return [
        f"defines must map CMake names to values, got {name!r}: {setting!r}"
        for name, setting in value.items()
        if not isinstance(name, str) or not name or isinstance(setting, (dict, list)) or setting is None
    ]


_VALUE_CHECKS: dict[str, Callable[[Any], list[str]]] = {
    "config": lambda v: [] if v in _CONFIGS else [f"config '{v}' is not one of {', '.join(_CONFIGS)}"],
    "build_args": _bad_build_args,
    "cflags": lambda v: [problem for flag in v if (problem := _cflag_problem(flag)) is not None],
    "defines": _bad_defines,
    "ldflags": lambda v: [
        f"ldflags entries are linker flags as the compiler driver takes them ('-Wl,-z,now'), got {flag!r}"
        for flag in v
        if not isinstance(flag, str) or not flag.startswith("-")
    ],
    "inline_limit": lambda v: [f"'inline_limit' must be >= 0, not {v}"] if v < 0 else [],
    "min_ort": lambda v: (
        [] if _RELEASE.fullmatch(v) else [f"'min_ort' is an ONNX Runtime release like '1.24', not {v!r}"]
    ),
}


def release_tuple(version: str) -> tuple[int, ...]:
    """``"1.21.0"`` -> ``(1, 21, 0)``, for comparing releases."""
    return tuple(int(part) for part in version.split("."))


PLACEHOLDERS = ("mcpu", "march")


def _cflag_problem(flag: Any) -> str | None:
    """A cflags entry is a string whose only placeholders are {mcpu} and {march} (``{{`` for a brace)."""
    if not isinstance(flag, str):
        return f"cflags entries are compiler flags (strings), got {flag!r}"
    try:
        fields = [field for _, field, _, _ in string.Formatter().parse(flag) if field is not None]
    except ValueError as error:
        return f"cflags entry {flag!r}: {error}; write a literal brace as '{{{{' or '}}}}'"
    for field in fields:
        if field not in PLACEHOLDERS:
            return (
                f"cflags entry {flag!r} names the unknown placeholder {{{field}}};"
                f" known: {', '.join('{' + name + '}' for name in PLACEHOLDERS)}"
            )
    return None


def _define_value(value: Any) -> str:
    if isinstance(value, bool):
        return "ON" if value else "OFF"
    return str(value)


def _load_file(path: Path) -> dict[str, Variant | BrokenVariant]:
    text = _read_text(path)
    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    try:
        data = yaml.load(text, Loader=loader) or {}
        root = yaml.compose(text, Loader=loader)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = ", ".join(part for part in (error.context, error.problem) if part)
        raise TargetError(f"{where}: not valid YAML: {problem}") from None
    except (yaml.YAMLError, ValueError, TypeError, RecursionError) as error:
        raise TargetError(f"{path}: not valid YAML: {error}") from None
    if not isinstance(data, dict):
        raise TargetError(f"{path}: a variants file maps variant names to their settings")
    lines = _variant_lines(root)
    return {
        str(name): _parse(str(name), body, _Lines(path, *lines.get(str(name), (None, {}))))
        for name, body in data.items()
    }


def _read_text(path: Path) -> str:
    try:
        raw, more = read_capped(path)
    except OSError as error:
        raise TargetError(f"{path}: cannot read the variants file: {error.strerror or error}") from error
    if more:
        raise TargetError(
            f"{path}: larger than {TEXT_FILE_LIMIT >> 20} MiB (or endless): not a variants file"
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        raise TargetError(
            f"{path}:{line}: byte {raw[error.start]:#04x} is not UTF-8: a variants file is UTF-8 text"
        ) from None


def _variant_lines(root: yaml.Node | None) -> dict[str, tuple[int, dict[str, int]]]:
    """Each variant's line and the lines of its keys, read from the YAML node tree."""
    found: dict[str, tuple[int, dict[str, int]]] = {}
    if not isinstance(root, yaml.MappingNode):
        return found
    for name_node, body in root.value:
        keys: dict[str, int] = {}
        if isinstance(body, yaml.MappingNode):
            keys = {str(key.value): key.start_mark.line + 1 for key, _ in body.value}
        found[str(name_node.value)] = (name_node.start_mark.line + 1, keys)
    return found


def variant_files() -> list[Path]:
    return [TOOLCHAINS_DIR / "variants.yaml", orch_home() / "variants.yaml"]


def load_variants() -> dict[str, Variant | BrokenVariant]:
    """Shipped variants, then the user's (a user variant with a shipped name replaces it). A variant
    with mistakes is kept as a BrokenVariant: refused when used, while the others stay usable."""
    variants: dict[str, Variant | BrokenVariant] = {}
    for path in variant_files():
        if path.exists():  # a directory or a device there is an error, not "no variants file"
            variants.update(_load_file(path))
    return variants


def resolve_variant(name: str) -> Variant:
    variants = load_variants()
    found = variants.get(name)
    if isinstance(found, BrokenVariant):
        raise found.error()
    if found is not None:
        return found
    close = difflib.get_close_matches(name, list(variants), n=1)
    suggestion = f" Did you mean '{close[0]}'?" if close else ""
    broken = sorted(v.name for v in variants.values() if isinstance(v, BrokenVariant))
    unusable = f" ({', '.join(broken)}: defined with mistakes)" if broken else ""
    raise TargetError(
        f"unknown variant '{name}'.{suggestion} Known variants: {', '.join(sorted(variants))}{unusable}",
        hint=f"add your own in {orch_home() / 'variants.yaml'}",
    )


def with_release_options(variant: Variant, options: PackagingOptions) -> Variant:
    """A ``from_release`` variant with the options its release's packaging says."""
    left_out = "; left out: " + ", ".join(flag for flag, _ in options.left_out) if options.left_out else ""
    return replace(
        variant,
        config=options.config,
        lto=options.lto,
        cflags=options.cflags,
        ldflags=options.ldflags,
        read_from=options.read_from,
        description=f"{variant.description} (read from {options.read_from}{left_out})",
    )


def pending_release(variant: Variant, why: str) -> Variant:
    """A ``from_release`` variant planned without its options (a dry run: ``why`` they are not read)."""
    return replace(
        variant,
        pending=why,
        description=f"{variant.description} (read from the release's packaging script once the source is"
        f" fetched: {why}, so this plan has none of them)",
    )


def artifact_variant(variant: Variant, provider: str) -> str:
    """The name a build is stored and deployed under: another execution provider is another build
    (``default-xnnpack``), never a silent replacement of the cpu one."""
    return variant.name if provider == "cpu" else f"{variant.name}-{provider}"
