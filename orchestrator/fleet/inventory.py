"""The inventory: ``inventory.yaml`` + ssh_config + the lab, resolved into ``Board`` objects.

The file is read and checked by ``orchestrator.fleet.inventory_yaml`` (text, limits, node tree)
and ``orchestrator.fleet.inventory_parser`` (groups and hosts, as written). Here each board's
settings are resolved with this precedence, and ``Board.sources`` records where each value came
from:

    host > nearest group > parent groups > all > ssh_config > defaults

then the lab's boards join (group ``lab``, and any group that lists ``lab`` as a child).
"""

from __future__ import annotations

import dataclasses
import difflib
import gc
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.adapters.ssh_addresses import hostname_problem
from orchestrator.adapters.ssh_config import OPTIONS as SSH_OPTIONS
from orchestrator.adapters.ssh_config import SSHConfigFile, SSHDefaults, load_ssh_config, on_connect
from orchestrator.board import Board
from orchestrator.errors import InventoryError, UsageError
from orchestrator.fleet.inventory_parser import ROOT_GROUP, SETTINGS, Host, InventoryParser
from orchestrator.fleet.inventory_yaml import compose, read_inventory_text
from orchestrator.fleet.selection import Wanted, describe_inventory, select_names
from orchestrator.lab_state import LAB_GROUP, lab_boards, state_path


def _check_cycles(parser: InventoryParser) -> None:
    """A group may not contain itself through its children. Depth-first, with an explicit stack:
    a chain of 1,000 nested groups is fine."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    for start in parser.groups:
        if start in state:
            continue
        state[start] = 1
        path = [start]
        pending = [iter(parser.groups[start].children.items())]
        while pending:
            step = next(pending[-1], None)
            if step is None:
                pending.pop()
                state[path.pop()] = 2
                continue
            child, line = step
            if state.get(child) == 1:
                cycle = [*path[path.index(child) :], child]
                raise parser.error(
                    line,
                    f"group '{path[-1]}'",
                    f"child '{child}' makes a cycle of groups: {' -> '.join(cycle)}",
                )
            if child not in state:
                state[child] = 1
                path.append(child)
                pending.append(iter(parser.groups[child].children.items()))


def _children_first(parser: InventoryParser) -> list[str]:
    """Every group after all of its children (the groups have no cycle), without recursion."""
    order: list[str] = []
    done: set[str] = set()
    for start in parser.groups:
        if start in done:
            continue
        done.add(start)
        stack = [(start, iter(parser.groups[start].children))]
        while stack:
            name, children = stack[-1]
            child = next(children, None)
            if child is None:
                stack.pop()
                order.append(name)
            elif child not in done:
                done.add(child)
                stack.append((child, iter(parser.groups[child].children)))
    return order


def _members(parser: InventoryParser) -> dict[str, list[str]]:
    """Group -> board names (nested groups flattened), in inventory order."""
    order = {name: index for index, name in enumerate(parser.hosts)}
    found: dict[str, set[str]] = {}
    for name in _children_first(parser):
        group = parser.groups[name]
        members = set(group.hosts)
        for child in group.children:
            members |= found[child]
        found[name] = members
    return {name: sorted(found[name], key=lambda host: order.get(host, len(order))) for name in parser.groups}


def _depths(parser: InventoryParser) -> dict[str, int]:
    """Distance from ``all`` along the longest path: deeper groups are "nearer" to a host and win."""
    depths: dict[str, int] = {}
    for name in reversed(_children_first(parser)):  # parents before their children
        parents = parser.groups[name].parents
        depths[name] = 0 if name == ROOT_GROUP else 1 + max((depths.get(p, 0) for p in parents), default=0)
    return depths


@dataclass(frozen=True, kw_only=True)
class _Layers:
    """What a set of groups gives each of its boards: values, their sources, the group names shown."""

    values: dict[str, Any]
    sources: dict[str, str]
    member_of: tuple[str, ...]


def _layers(
    parser: InventoryParser, groups: tuple[str, ...], depths: dict[str, int], position: dict[str, int]
) -> _Layers:
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for group_name in sorted(groups, key=lambda g: (depths[g], position[g])):
        group = parser.groups[group_name]
        for key, setting in group.settings.items():
            values[key] = setting.value
            label = "all" if group_name == ROOT_GROUP else f"group {group_name}"
            sources[key] = f"{label} ({parser.file}:{setting.line})"
    member_of = tuple(sorted((g for g in groups if g != ROOT_GROUP), key=position.__getitem__))
    return _Layers(values=values, sources=sources, member_of=member_of)


_BOARD_SETTINGS = tuple(f.name for f in dataclasses.fields(Board) if f.name in SETTINGS)


def _resolve(parser: InventoryParser, host: Host, layers: _Layers, ssh: SSHConfigFile | None) -> Board:
    values = dict(layers.values)
    sources = dict(layers.sources)
    for key, setting in host.settings.items():
        values[key] = setting.value
        sources[key] = f"host {host.name} ({parser.file}:{setting.line})"
    left_to_ssh = tuple(f for f in SSH_OPTIONS.values() if f not in values)
    found: SSHDefaults | None = None
    if ssh is not None and left_to_ssh:
        # Never runs a `Match exec` command: those blocks are looked up when orch connects.
        found = ssh.defaults_for(host.name, values.get("hostname"), run_exec=False)
        for key, value in found.values.items():
            if key not in values:
                values[key] = value
                sources[key] = found.source
    if "hostname" not in values:
        problem = hostname_problem(host.name)
        if problem:
            raise parser.error(
                host.line,
                f"host '{host.name}'",
                f"the board has no 'hostname' and its name is not one: {problem}",
                hint="set `hostname:` for it",
            )
        values["hostname"] = host.name
        sources["hostname"] = "default (the board name)"
    for name in _BOARD_SETTINGS:
        if name not in sources:
            sources[name] = "default"
    if found is not None and found.exec_lines:
        lines = ", ".join(map(str, found.exec_lines))
        for name in left_to_ssh:
            sources[name] += f"; `Match exec` ({ssh.shown if ssh else ''}:{lines}) decides on connection"
    for key in host.extra:
        sources[f"vars.{key}"] = f"host {host.name} ({parser.file}:{host.line})"
    board = Board(name=host.name, groups=layers.member_of, extra=dict(host.extra), sources=sources, **values)
    if found is not None and ssh is not None:
        board = on_connect(board, found, left_to_ssh, ssh.path)
    return board


def _lab() -> list[Board]:
    try:
        return lab_boards()
    except (ValueError, KeyError, TypeError, OSError) as error:
        raise InventoryError(
            f"{state_path()}: the lab's state file is unreadable: {error}",
            hint="run `orch lab down` and `orch lab up` to rewrite it",
        ) from error


@dataclass(frozen=True, kw_only=True)
class Inventory:
    """Resolved boards (inventory order, lab boards last) and groups (flattened, without ``all``)."""

    path: Path
    boards: dict[str, Board]
    groups: dict[str, list[str]]

    def board(self, name: str) -> Board:
        if name not in self.boards:
            close = difflib.get_close_matches(name, list(self.boards), n=1)
            suggestion = f" (did you mean '{close[0]}'?)" if close else ""
            raise UsageError(
                f"no board named '{name}'{suggestion}; {describe_inventory(list(self.boards), self.groups)}"
            )
        return self.boards[name]

    def select(
        self,
        hosts: Sequence[str] = (),
        groups: Sequence[str] = (),
        all_devices: bool = False,
        limit: str | None = None,
    ) -> list[Board]:
        """--host/--group/--all-devices united, then --limit (or --limit alone); never empty."""
        wanted = Wanted(hosts=hosts or (), groups=groups or (), all_devices=all_devices, limit=limit)
        names = select_names(boards=list(self.boards), groups=self.groups, wanted=wanted)
        return [self.boards[name] for name in names]


def load_inventory(path: Path) -> Inventory:
    """Read, validate and resolve an inventory file, then add the lab's boards (group ``lab``)."""
    # Reading a large inventory allocates hundreds of thousands of small objects (YAML nodes,
    # settings, boards) that all stay alive until it ends; each allocation burst would start a
    # garbage collection that walks all of them again, for nothing (they hold no cycles to free).
    # A 10,000-board file: 1.6 s of YAML composition with collections, 0.4 s without.
    enabled = gc.isenabled()
    gc.disable()
    try:
        return _load(Path(path))
    finally:
        if enabled:
            gc.enable()


def _load(path: Path) -> Inventory:
    parser = InventoryParser(path)
    root, limits = compose(path, read_inventory_text(path))
    parser.parse(root, limits)
    _check_cycles(parser)
    lab = _lab()
    _check_names(parser, {board.name for board in lab})
    members = _members(parser)
    boards = _resolve_hosts(parser, members)
    groups = {name: list(names) for name, names in members.items() if name not in (ROOT_GROUP, LAB_GROUP)}
    _add_lab(parser, lab, boards, groups)
    return Inventory(path=path, boards=boards, groups=groups)


def _check_names(parser: InventoryParser, lab_names: set[str]) -> None:
    """A board's name is not a group's nor a running lab board's; group ``lab`` is the lab's."""
    for name, host in parser.hosts.items():
        if name in parser.groups:
            parser.problem(
                parser.error(host.line, f"host '{name}'", f"'{name}' is both a board and a group; rename one")
            )
        if name in lab_names:
            parser.problem(
                parser.error(
                    host.line,
                    f"host '{name}'",
                    f"the name '{name}' belongs to a running lab board; rename this board (or `orch lab down`)",
                )
            )
    lab_group = parser.groups.get(LAB_GROUP)
    if lab_group is not None and (lab_group.hosts or lab_group.settings or lab_group.children):
        parser.problem(
            parser.error(
                lab_group.line,
                f"group '{LAB_GROUP}'",
                f"group '{LAB_GROUP}' is reserved for the lab's boards;"
                f" it may be referenced (`{LAB_GROUP}: {{}}`) but not given hosts, vars or children",
            )
        )
    parser.raise_problems()


def _resolve_hosts(parser: InventoryParser, members: dict[str, list[str]]) -> dict[str, Board]:
    """Every host of the file as a board, its settings merged from its groups and ssh_config."""
    depths = _depths(parser)
    ssh = load_ssh_config() if parser.hosts else None
    position = {name: index for index, name in enumerate(parser.groups)}
    groups_of: dict[str, list[str]] = {name: [] for name in parser.hosts}
    for group_name, names in members.items():
        for name in names:
            groups_of[name].append(group_name)
    boards: dict[str, Board] = {}
    # Boards of the same groups get the same group values: merged once per set of groups.
    layers: dict[tuple[str, ...], _Layers] = {}
    for name, host in parser.hosts.items():
        key = tuple(groups_of[name])
        if key not in layers:
            layers[key] = _layers(parser, key, depths, position)
        try:
            boards[name] = _resolve(parser, host, layers[key], ssh)
        except InventoryError as error:
            parser.problem(error)  # every board is resolved: all bad values are named in one run
    parser.raise_problems()
    return boards


def _add_lab(
    parser: InventoryParser, lab: list[Board], boards: dict[str, Board], groups: dict[str, list[str]]
) -> None:
    """Lab boards are complete already; they join group 'lab' and any user group that lists 'lab'
    as a child."""
    extra_groups = [g for g in parser.groups if g != ROOT_GROUP and LAB_GROUP in _descendants(parser, g)]
    for board in lab:
        boards[board.name] = dataclasses.replace(
            board, groups=(*board.groups, *[g for g in extra_groups if g not in board.groups])
        )
    if lab or LAB_GROUP in parser.groups:
        for board in lab:
            for group_name in boards[board.name].groups:
                if group_name != LAB_GROUP:
                    groups.setdefault(group_name, []).append(board.name)
        groups[LAB_GROUP] = [board.name for board in lab]


def _descendants(parser: InventoryParser, group: str) -> set[str]:
    """Groups reachable downwards from ``group`` (itself included)."""
    found = {group}
    pending = [group]
    while pending:
        for child in parser.groups[pending.pop()].children:
            if child not in found:
                found.add(child)
                pending.append(child)
    return found
