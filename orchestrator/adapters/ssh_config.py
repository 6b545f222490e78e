"""The user's OpenSSH client config as a source of inventory defaults.

Boards the inventory leaves partly described take HostName, User, Port,
IdentityFile and ProxyJump from ``$ORCH_SSH_CONFIG`` (default ``~/.ssh/config``),
the way ``ssh NAME`` would. Read-only: orch never writes the user's SSH config. paramiko's
ssh_config *parser* does the reading (Host/Match rules, first value wins, %-token and ~
expansion); it opens no connection.

``Match exec "COMMAND"`` lines are OpenSSH's: the command runs only when orch connects to a board
(``resolve_on_connect``, called by the connection code), never while the inventory is read, listed
or shown. Reading the inventory looks the board up as if every ``Match exec`` block did not apply,
and records on the board what the lookup at connection time needs (``SSHConfigOnConnect``).
"""

from __future__ import annotations

import dataclasses
import fnmatch
import os
import shlex
import stat
import subprocess
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

from paramiko import SSHConfig
from paramiko.ssh_exception import ConfigParseError

from orchestrator.adapters.ssh_addresses import hostname_problem, parse_proxy_jump, port_problem
from orchestrator.board import Board, SSHConfigOnConnect
from orchestrator.common.textfiles import TEXT_FILE_LIMIT, read_capped
from orchestrator.errors import InventoryError

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


# OpenSSH sets no limit; a Match exec command that hangs would hang every connection.
MATCH_EXEC_TIMEOUT = 60.0


class _MatchExec(SSHConfig):
    """paramiko's parser, with ``Match exec`` evaluated by orch: each criterion of a Match line in
    turn, stopping at the first that fails (as OpenSSH does: a command runs only when the criteria
    before it matched); the command's stdin and stdout are /dev/null, as OpenSSH gives it (paramiko
    would hand it orch's own stdin)."""

    run_exec = True

    def lookup(self, hostname: str) -> Any:
        # paramiko looks the file up twice (a first pass, then the "final" one); ssh without
        # canonicalization or `Match final` once: each command runs once per lookup.
        self._exec_results: dict[str, bool] = {}
        return super().lookup(hostname)

    def _does_match(
        self,
        match_list: list[dict[str, Any]],
        target_hostname: str,
        canonical: bool,
        final: bool,
        options: dict[str, Any],
    ) -> Any:
        matched: list[dict[str, Any]] = []
        for candidate in match_list:
            if candidate["type"] == "exec":
                if not self.run_exec:
                    return False  # the block is left to the connection: its command does not run
                command = self._tokenize(options, target_hostname, "match-exec", candidate["param"])  # type: ignore[attr-defined]
                if command not in self._exec_results:
                    self._exec_results[command] = run_match_exec(command)
                if self._exec_results[command] == candidate["negate"]:
                    return False
            else:
                result = super()._does_match([candidate], target_hostname, canonical, final, options)  # type: ignore[misc]
                if result is True:  # `Match all`
                    return True
                if not result:
                    return False
            matched.append(candidate)
        return matched


class _WithoutExec(_MatchExec):
    """The file as read for the inventory: a ``Match`` block with an ``exec`` criterion (negated or
    not) does not apply, and its command never runs."""

    run_exec = False


def run_match_exec(command: str) -> bool:
    """A ``Match exec`` command run as OpenSSH runs it (``sh -c``, stdin and stdout /dev/null, its
    stderr shown); whether it exited 0."""
    try:
        completed = subprocess.run(
            ["/bin/sh", "-c", command],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            check=False,
            timeout=MATCH_EXEC_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        raise InventoryError(
            f"ssh_config: `Match exec {command}` did not finish within {MATCH_EXEC_TIMEOUT:g}s",
            hint="fix the command (it runs each time orch connects to a board it may apply to)",
        ) from None
    except OSError as error:
        raise InventoryError(f"ssh_config: `Match exec {command}` cannot run: {error}") from None
    return completed.returncode == 0


@dataclass(frozen=True, kw_only=True)
class SSHDefaults:
    """What ssh_config says about one board: Board field -> value (only options it really sets)."""

    values: dict[str, object] = field(default_factory=dict)
    source: str = ""
    key: str = ""  # the name the board was looked up by
    exec_lines: tuple[int, ...] = ()  # `Match exec` lines left to the connection (not run)


def _regular_file_problem(path: Path) -> str | None:
    """A FIFO with no writer would block ``open`` for ever, a device may never end: only regular files."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None  # open() names the error
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return None
    kind = "a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else "a device"
    return f"is {kind}, not a regular file"


class SSHConfigFile:
    """One parsed ssh_config file; ``defaults_for`` answers per board."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.source = f"ssh_config ({display_path(path)})"
        self.shown = display_path(path)
        lines = self._read_lines()
        self.exec_lines = tuple(self._check_lines(lines))
        try:
            self._config = _MatchExec.from_text("\n".join(lines))
            self._listing = _WithoutExec.from_text("\n".join(lines))
        except (ConfigParseError, ValueError) as error:
            line = _failing_line(lines)
            where = f"{self.shown}:{line}" if line else self.shown
            raise InventoryError(f"{where}: cannot read ssh_config: {error}") from error
        # Patterns naming hosts specifically; a bare '*' block applies to every host and does not
        # decide which name ssh would be called with. (Read from the Host lines themselves:
        # paramiko's get_hostnames() fails on a file with Match blocks.)
        self._patterns = [p for p in _host_patterns(lines) if p.strip("*?") and not p.startswith("!")]

    def _read_lines(self) -> list[str]:
        problem = _regular_file_problem(self.path)
        if problem:
            raise InventoryError(
                f"{self.shown}: {problem}: not an ssh_config",
                hint="point $ORCH_SSH_CONFIG at a file (a pipe or device is never read)",
            )
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

    def _check_lines(self, lines: list[str]) -> list[int]:
        """What paramiko would accept silently but ssh refuses: Match criteria it does not know.
        Returns the numbers of the Match lines with an ``exec`` criterion."""
        exec_lines: list[int] = []
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
            if self._check_criteria(number, tokens):
                exec_lines.append(number)
        return exec_lines

    def _check_criteria(self, number: int, tokens: list[str]) -> bool:
        """Refuses an unknown criterion; says whether the line has an ``exec`` one."""
        expect_keyword = True
        has_exec = False
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
            has_exec = has_exec or keyword == "exec"
            expect_keyword = keyword in ("all", "canonical", "final")
        return has_exec

    def _names(self, name: str) -> bool:
        return any(fnmatch.fnmatchcase(name, pattern) for pattern in self._patterns)

    def key_for(self, name: str, hostname: str | None) -> str:
        """The name a board is looked up by: its name when a Host block names it, else its hostname.

        That is ``ssh NAME`` for a board the user aliased in ssh_config, and ``ssh HOSTNAME``
        for a board the inventory gives an address.
        """
        return name if hostname is None or self._names(name) else hostname

    def defaults_for(self, name: str, hostname: str | None, *, run_exec: bool = True) -> SSHDefaults:
        """Options for a board (see ``key_for``). ``run_exec=False`` (reading the inventory): the
        ``Match exec`` blocks do not apply and their commands do not run; the result says which
        lines were left for the connection."""
        key = self.key_for(name, hostname)
        config = self._config if run_exec else self._listing
        try:
            options = config.lookup(key)
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
            values[board_field] = self._value(key, option, text)
        return SSHDefaults(
            values=values, source=self.source, key=key, exec_lines=() if run_exec else self.exec_lines
        )

    def _value(self, key: str, option: str, text: object) -> object:
        """One option's value as a Board field, checked as the inventory checks its own."""
        if option == "identityfile":
            return Path(str(text[0])).expanduser()  # type: ignore[index]  # a list: first wins
        problem: str | None = None
        if option == "port":
            problem = port_problem(str(text))
            if problem:
                raise InventoryError(
                    f"{self.shown}: Port for '{key}' must be an integer in 1..65535, not {text!r}"
                )
            return int(str(text))
        if option == "hostname":
            problem = hostname_problem(str(text))
        elif option == "proxyjump":
            try:
                parse_proxy_jump(str(text))
            except ValueError as error:
                problem = str(error)
        if problem:
            raise InventoryError(
                f"{self.shown}: {option_name(option)} for '{key}' is not usable: {problem}",
                hint=f"fix it in {self.shown}",
            )
        return text


def option_name(option: str) -> str:
    return {"hostname": "HostName", "proxyjump": "ProxyJump"}.get(option, option)


def on_connect(board: Board, found: SSHDefaults, fields: tuple[str, ...], path: Path) -> Board:
    """``board`` with what the connection must look up again (nothing when no `Match exec`)."""
    if not found.exec_lines or not fields:
        return board
    deferred = SSHConfigOnConnect(path=path, key=found.key, fields=fields, lines=found.exec_lines)
    return dataclasses.replace(board, ssh_config_on_connect=deferred)


def resolve_on_connect(board: Board) -> Board:
    """The board as ssh would see it now that orch connects: its ssh_config looked up again with
    the ``Match exec`` commands run (as OpenSSH runs them, on connection only)."""
    deferred = board.ssh_config_on_connect
    if deferred is None:
        return board
    config = SSHConfigFile(deferred.path)
    found = config.defaults_for(deferred.key, None, run_exec=True)
    changes = {name: found.values[name] for name in deferred.fields if name in found.values}
    sources = dict(board.sources)
    for name in changes:
        sources[name] = f"{config.source}, on connection"
    return dataclasses.replace(board, **changes, sources=sources, ssh_config_on_connect=None)  # type: ignore[arg-type]


@cache
def _load(path: Path, mtime_ns: int) -> SSHConfigFile:
    return SSHConfigFile(path)


def load_ssh_config() -> SSHConfigFile | None:
    """The user's ssh_config, or None when there is none (no file is not an error)."""
    path = ssh_config_path()
    try:
        stat_result = path.stat()
    except OSError:
        return None
    return _load(path, stat_result.st_mtime_ns)
