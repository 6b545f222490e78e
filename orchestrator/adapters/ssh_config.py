"""The user's OpenSSH client config as a source of inventory defaults.

Boards the inventory leaves partly described take HostName, User, Port,
IdentityFile and ProxyJump from ``$ORCH_SSH_CONFIG`` (default ``~/.ssh/config``),
the way ``ssh NAME`` would. Read-only: orch never writes the user's SSH config. paramiko's
ssh_config *parser* does the reading (Host/Match rules, first value wins, %-token and ~
expansion); it opens no connection.
"""

from __future__ import annotations

import fnmatch
import os
import shlex
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from paramiko import SSHConfig
from paramiko.ssh_exception import ConfigParseError

from orchestrator.errors import InventoryError
from orchestrator.textfiles import TEXT_FILE_LIMIT, read_capped

# ssh_config option (lower case, as the parser reports it) -> Board field.
OPTIONS = {
    "hostname": "hostname",
    "user": "user",
    "port": "port",
    "identityfile": "identity_file",
    "proxyjump": "proxy_jump",
}


# Match criteria paramiko's parser evaluates (ssh has more; a file using them is refused, not misread).
MATCH_KEYWORDS = ("all", "canonical", "final", "exec", "host", "originalhost", "user", "localuser")


def _host_patterns(lines: list[str]) -> list[str]:
    patterns: list[str] = []
    for line in lines:
        words = line.strip().replace("=", " ", 1).split()
        if len(words) > 1 and words[0].lower() == "host":
            patterns.extend(words[1:])
    return patterns


def _failing_line(lines: list[str]) -> int | None:
    """The first line at which paramiko's parser gives up (it does not say; files are short)."""
    for end in range(1, len(lines) + 1):
        try:
            SSHConfig.from_text("\n".join(lines[:end]))
        except Exception:  # noqa: BLE001 -- whatever it raised for the whole file, it raises here
            return end
    return None


def ssh_config_path() -> Path:
    return Path(os.environ.get("ORCH_SSH_CONFIG") or Path.home() / ".ssh" / "config")


def display_path(path: Path) -> str:
    """The path as users write it: ``~/.ssh/config`` rather than ``/root/.ssh/config``."""
    try:
        return "~/" + str(path.relative_to(Path.home()))
    except ValueError:
        return str(path)


@dataclass(frozen=True, kw_only=True)
class SSHDefaults:
    """What ssh_config says about one board: Board field -> value (only options it really sets)."""

    values: dict[str, object] = field(default_factory=dict)
    source: str = ""


class SSHConfigFile:
    """One parsed ssh_config file; ``defaults_for`` answers per board."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.source = f"ssh_config ({display_path(path)})"
        self.shown = display_path(path)
        lines = self._read_lines()
        self._check_lines(lines)
        try:
            self._config = SSHConfig.from_text("\n".join(lines))
        except (ConfigParseError, ValueError) as error:
            line = _failing_line(lines)
            where = f"{self.shown}:{line}" if line else self.shown
            raise InventoryError(f"{where}: cannot read ssh_config: {error}") from error
        # Patterns naming hosts specifically; a bare '*' block applies to every host and does not
        # decide which name ssh would be called with. (Read from the Host lines themselves:
        # paramiko's get_hostnames() fails on a file with Match blocks.)
        self._patterns = [p for p in _host_patterns(lines) if p.strip("*?") and not p.startswith("!")]

    def _read_lines(self) -> list[str]:
        try:
            data, more = read_capped(self.path)
        except OSError as error:
            raise InventoryError(
                f"{self.shown}: cannot read ssh_config: {error.strerror or error}",
                hint="fix its permissions, or point $ORCH_SSH_CONFIG at another file",
            ) from error
        if more:
            raise InventoryError(
                f"{self.shown}: larger than {TEXT_FILE_LIMIT >> 20} MiB (or endless): not an ssh_config"
            )
        lines = data.split(b"\n")
        for number, raw in enumerate(lines, start=1):
            if b"\x00" in raw:
                raise InventoryError(f"{self.shown}:{number}: ssh_config holds a NUL byte")
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as error:
                raise InventoryError(
                    f"{self.shown}:{number}: ssh_config is not UTF-8 text"
                    f" (byte {raw[error.start]:#04x} at column {error.start + 1})"
                ) from None
        return [raw.decode("utf-8").rstrip("\r") for raw in lines]

    def _check_lines(self, lines: list[str]) -> None:
        """What paramiko would accept silently but ssh refuses: Match criteria it does not know."""
        for number, line in enumerate(lines, start=1):
            words = line.strip().replace("=", " ", 1).split(None, 1)
            if not words or words[0].startswith("#") or words[0].lower() != "match":
                continue
            try:
                tokens = shlex.split(words[1]) if len(words) > 1 else []
            except ValueError as error:
                raise InventoryError(f"{self.shown}:{number}: Match line: {error}") from None
            if not tokens:
                raise InventoryError(
                    f"{self.shown}:{number}: Match needs a criterion (e.g. `Match host pi*`)"
                )
            expect_keyword = True
            for token in tokens:
                if not expect_keyword:
                    expect_keyword = True
                    continue
                keyword = token.removeprefix("!").lower()
                if keyword not in MATCH_KEYWORDS:
                    raise InventoryError(
                        f"{self.shown}:{number}: Match criterion '{token}' is not supported"
                        f" (orch reads: {', '.join(MATCH_KEYWORDS)})",
                        hint="put the options in a `Host` block, or point $ORCH_SSH_CONFIG at another file",
                    )
                expect_keyword = keyword in ("all", "canonical", "final")

    def _names(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self._patterns)

    def defaults_for(self, name: str, hostname: str | None) -> SSHDefaults:
        """Options for a board: looked up by its name when a Host block names it, else by its hostname.

        That is ``ssh NAME`` for a board the user aliased in ssh_config, and ``ssh HOSTNAME``
        for a board the inventory gives an address.
        """
        key = name if hostname is None or self._names(name) else hostname
        try:
            options = self._config.lookup(key)
        except (ConfigParseError, ValueError, KeyError, OSError) as error:
            raise InventoryError(
                f"{self.shown}: looking up '{key}' failed: {type(error).__name__}: {error}"
            ) from error
        values: dict[str, object] = {}
        for option, board_field in OPTIONS.items():
            if option not in options:
                continue
            text = options[option]
            if option == "hostname" and text == key:
                continue  # the parser fills HostName with the looked-up name when the file sets none
            value: object = text
            if option == "identityfile":
                value = Path(text[0]).expanduser()  # a list at run time: every IdentityFile, first wins
            elif option == "port":
                try:
                    port = int(text)
                except ValueError:
                    port = -1
                if not 1 <= port <= 65535:
                    raise InventoryError(
                        f"{display_path(self.path)}: Port for '{key}' must be an integer in 1..65535,"
                        f" not {options['port']!r}"
                    )
                value = port
            values[board_field] = value
        return SSHDefaults(values=values, source=self.source)


@cache
def _load(path: Path, mtime_ns: int) -> SSHConfigFile:
    return SSHConfigFile(path)


def load_ssh_config() -> SSHConfigFile | None:
    """The user's ssh_config, or None when there is none (no file is not an error)."""
    path = ssh_config_path()
    try:
        stat = path.stat()
    except OSError:
        return None
    return _load(path, stat.st_mtime_ns)
