"""orch's own settings file: what a team or a CI machine sets once instead of on every command.

Found at ``$ORCH_CONFIG``, else ``./orch.yaml``, else ``$ORCH_HOME/config.yaml`` (the first
that is set or exists; none is fine). Small on purpose::

    build:
      cache: redis://127.0.0.1:6379     # ccache remote storage shared by every build (--cache)
      remote_cache_only: false          # true: no local ccache volume at all (--remote-cache-only)
      engines:                          # build on these engines in parallel (--docker-host, repeatable)
        - local
        - ssh://me@bigbox

Command-line options win over the file. A mistake is reported as ``FILE:LINE: build.cahce:
unknown key (did you mean 'cache'?)`` with exit code 2, like the inventory's.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from orchestrator.builds.endpoints import check_docker_host, parse_cache_url
from orchestrator.common.textfiles import TEXT_FILE_LIMIT, read_capped
from orchestrator.errors import UsageError
from orchestrator.paths import orch_home

FILE_NAME = "orch.yaml"
HOME_FILE_NAME = "config.yaml"
# The name of this machine's own Docker engine in an engines list.
LOCAL_ENGINE = "local"


@dataclass(frozen=True, kw_only=True)
class BuildSettings:
    cache: str | None = None
    remote_cache_only: bool = False
    engines: tuple[str, ...] = ()


@dataclass(frozen=True, kw_only=True)
class Config:
    """The settings file's contents (defaults when there is no file); ``path`` says where from."""

    path: Path | None = None
    build: BuildSettings = BuildSettings()


class _Reader:
    def __init__(self, path: Path) -> None:
        self.path = path

    def error(self, node: yaml.Node | None, key: str, message: str) -> UsageError:
        line = f":{node.start_mark.line + 1}" if node is not None else ""
        return UsageError(f"{self.path}{line}: {key}: {message}", hint=f"see `orch build --help`; {_HINT}")

    def mapping(self, node: yaml.Node, key: str, known: dict[str, Any]) -> dict[str, tuple[yaml.Node, Any]]:
        """``{key: (value node, value)}`` of a mapping whose keys must be in ``known``."""
        if not isinstance(node, yaml.MappingNode):
            raise self.error(node, key, "must be a mapping of settings")
        found: dict[str, tuple[yaml.Node, Any]] = {}
        for key_node, value_node in node.value:
            name = key_node.value if isinstance(key_node, yaml.ScalarNode) else None
            full = f"{key}.{name}" if key else str(name)
            if name not in known:
                close = difflib.get_close_matches(str(name), list(known), n=1)
                hint = f" (did you mean '{close[0]}'?)" if close else ""
                raise self.error(key_node, full, f"unknown key{hint}; known: {', '.join(known)}")
            if name in found:
                raise self.error(key_node, full, "given twice")
            found[name] = (value_node, known[name](self, value_node, full))
        return found

    def string(self, node: yaml.Node, key: str) -> str:
        if not isinstance(node, yaml.ScalarNode) or node.tag != "tag:yaml.org,2002:str" or not node.value:
            raise self.error(node, key, f"must be a non-empty string, not {_shown(node)}")
        return str(node.value)

    def boolean(self, node: yaml.Node, key: str) -> bool:
        if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:bool":
            return bool(yaml.safe_load(node.value))
        raise self.error(node, key, f"must be true or false, not {_shown(node)}")

    def strings(self, node: yaml.Node, key: str) -> tuple[str, ...]:
        if not isinstance(node, yaml.SequenceNode) or not node.value:
            raise self.error(node, key, "must be a non-empty list of strings")
        values = tuple(self.string(item, f"{key}[{i}]") for i, item in enumerate(node.value))
        for i, value in enumerate(values):
            if value in values[:i]:
                raise self.error(node.value[i], f"{key}[{i}]", f"'{value}' is listed twice")
        return values

    def cache(self, node: yaml.Node, key: str) -> str:
        value = self.string(node, key)
        try:
            parse_cache_url(value, option="value")
        except UsageError as error:
            raise self.error(node, key, error.message) from None
        return value

    def engines(self, node: yaml.Node, key: str) -> tuple[str, ...]:
        values = self.strings(node, key)
        for i, value in enumerate(values):
            try:
                if value != LOCAL_ENGINE:
                    check_docker_host(value)
            except UsageError as error:
                raise self.error(
                    node.value[i],
                    f"{key}[{i}]",
                    f"{error.message} ('{LOCAL_ENGINE}' is this machine's engine)",
                ) from None
        return values

    def build(self, node: yaml.Node, key: str) -> BuildSettings:
        found = self.mapping(node, key, _BUILD_KEYS)
        return BuildSettings(**{name: value for name, (_, value) in found.items()})


_HINT = "orch's settings file is documented in docs/configuration.md (Settings: orch.yaml)"
_Parse = Callable[[_Reader, yaml.Node, str], Any]
_BUILD_KEYS: dict[str, _Parse] = {
    "cache": _Reader.cache,
    "remote_cache_only": _Reader.boolean,
    "engines": _Reader.engines,
}
_TOP_KEYS: dict[str, _Parse] = {"build": _Reader.build}


def _shown(node: yaml.Node) -> str:
    if isinstance(node, yaml.ScalarNode):
        return repr(node.value) if node.value else "an empty value"
    return "a list" if isinstance(node, yaml.SequenceNode) else "a mapping"


def config_path() -> Path | None:
    """The settings file in use, or None."""
    explicit = os.environ.get("ORCH_CONFIG")
    if explicit:
        return Path(explicit)
    for candidate in (Path(FILE_NAME), orch_home() / HOME_FILE_NAME):
        if candidate.exists():
            return candidate
    return None


def load_config(path: Path | None = None) -> Config:
    """The settings file (``config_path()`` when not given), validated; defaults without one."""
    path = path or config_path()
    if path is None:
        return Config()
    try:
        raw, more = read_capped(path)
    except OSError as error:
        raise UsageError(f"{path}: cannot read orch's settings file: {error.strerror or error}") from None
    if more:
        raise UsageError(f"{path}: larger than {TEXT_FILE_LIMIT >> 20} MiB: not orch's settings file")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as error:
        line = raw.count(b"\n", 0, error.start) + 1
        raise UsageError(f"{path}:{line}: byte {raw[error.start]:#04x} is not UTF-8") from None
    try:
        root = yaml.compose(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        problem = ", ".join(part for part in (error.context, error.problem) if part)
        raise UsageError(f"{where}: not valid YAML: {problem}") from None
    except (yaml.YAMLError, ValueError, RecursionError) as error:
        raise UsageError(f"{path}: not valid YAML: {error}") from None
    if root is None:
        return Config(path=path)
    reader = _Reader(path)
    found = reader.mapping(root, "", _TOP_KEYS)
    build = found["build"][1] if "build" in found else BuildSettings()
    return Config(path=path, build=build)
