"""A board of the fleet, fully resolved: what every adapter needs to reach and use it.

Produced by ``orchestrator.fleet.inventory`` (YAML + group/all variables + ``~/.ssh/config`` + the
lab), consumed by ``orchestrator.adapters.ssh`` (connection), deploy and bench. Pure data.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path


@dataclass(frozen=True, kw_only=True)
class SSHConfigOnConnect:
    """What ssh_config decides only when orch connects: its ``Match exec`` lines run then, as
    OpenSSH runs them, never while the inventory is read or listed."""

    path: Path  # the ssh_config file
    key: str  # the name the board is looked up by (``ssh KEY``)
    fields: tuple[str, ...]  # the Board fields the inventory left to ssh_config
    lines: tuple[int, ...]  # the file's `Match ... exec` lines


@dataclass(frozen=True, kw_only=True)
class Board:
    name: str
    hostname: str
    port: int = 22
    user: str | None = None
    identity_file: Path | None = None
    proxy_jump: str | None = None
    target: str = "lab"
    # The board's own interpreter, used to create release venvs (not the release's python).
    python: str = "python3"
    # Where orch keeps releases on the board; relative paths are relative to the login home.
    workdir: str = "orch"
    tags: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    # Anything else the inventory set (host/group/all vars), for user templates and reports.
    extra: dict[str, object] = field(default_factory=dict, compare=False)
    # Where each resolved value came from: key -> "host nano01 (inventory.yaml:12)", "group jetsons", "ssh_config", "default".
    sources: dict[str, str] = field(default_factory=dict, compare=False)
    # Set when the user's ssh_config has `Match exec` lines: they are looked up on connection.
    ssh_config_on_connect: SSHConfigOnConnect | None = field(default=None, compare=False)

    @property
    def address(self) -> str:
        """host:port as shown to users (never passed to a shell)."""
        return f"{self.hostname}:{self.port}"
