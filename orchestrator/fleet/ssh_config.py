"""The user's OpenSSH client config as a source of inventory defaults.

Boards the inventory leaves partly described take HostName, User, Port,
IdentityFile and ProxyJump from ``$ORCH_SSH_CONFIG`` (default ``~/.ssh/config``),
the way ``ssh NAME`` would. Read-only: orch never writes the user's SSH config.
"""

from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from orchestrator.errors import InventoryError

# ssh_config option (lower case, as the parser reports it) -> Board field.
OPTIONS = {
    "hostname": "hostname",
    "user": "user",
    "port": "port",
    "identityfile": "identity_file",
    "proxyjump": "proxy_jump",
}


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
        # The only paramiko use outside orchestrator.adapters.ssh: its ssh_config *parser* (Host/Match
        # rules, first value wins, %-token and ~ expansion). It opens no connection.
        from paramiko import SSHConfig
        from paramiko.ssh_exception import ConfigParseError

        try:
            self._config = SSHConfig.from_path(str(path))
        except (ConfigParseError, OSError, ValueError) as error:
            raise InventoryError(f"{display_path(path)}: cannot read ssh_config: {error}") from error
        # Patterns naming hosts specifically; a bare '*' block applies to every host and does not
        # decide which name ssh would be called with.
        self._patterns = [p for p in self._config.get_hostnames() if p.strip("*?") and not p.startswith("!")]

    def _names(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self._patterns)

    def defaults_for(self, name: str, hostname: str | None) -> SSHDefaults:
        """Options for a board: looked up by its name when a Host block names it, else by its hostname.

        That is ``ssh NAME`` for a board the user aliased in ssh_config, and ``ssh HOSTNAME``
        for a board the inventory gives an address.
        """
        key = name if hostname is None or self._names(name) else hostname
        options = self._config.lookup(key)
        values: dict[str, object] = {}
        for option, board_field in OPTIONS.items():
            if option not in options:
                continue
            value = options[option]
            if option == "hostname" and value == key:
                continue  # the parser fills HostName with the looked-up name when the file sets none
            if option == "identityfile":
                value = Path(value[0]).expanduser()
            elif option == "port":
                try:
                    value = int(value)
                except ValueError:
                    value = -1
                if not 1 <= value <= 65535:
                    raise InventoryError(
                        f"{display_path(self.path)}: Port for '{key}' must be an integer in 1..65535,"
                        f" not {options['port']!r}"
                    )
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
