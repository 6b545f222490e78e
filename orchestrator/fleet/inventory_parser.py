"""The inventory's parser: one walk over the composed YAML node tree, validating as it goes.

The file format is Ansible's YAML inventory (``all`` / ``hosts`` / ``children`` / ``vars``,
groups merged by name, nested groups). Every error names the file, the line and the key; keys
that look like secrets are refused; each setting is checked (a port is a port, a target exists,
a path cannot start an option). The result is the groups and hosts as written
(``InventoryParser.groups``, ``.hosts``); ``orchestrator.fleet.inventory`` resolves them into boards.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from orchestrator.adapters.ssh_addresses import hostname_problem, parse_proxy_jump
from orchestrator.errors import InventoryError, TargetError
from orchestrator.fleet.inventory_yaml import (
    CONSTRUCTOR_ERRORS,
    MAX_DEPTH,
    MAX_EXPANDED,
    NULL_TAG,
    Limits,
    construct_or_none,
)
from orchestrator.targets import resolve_target

# Settings a host (and group/all ``vars``) may set; ``vars`` is the host's free-form dict.
SETTINGS = ("hostname", "port", "user", "identity_file", "proxy_jump", "target", "python", "workdir", "tags")
HOST_KEYS = (*SETTINGS, "vars")
GROUP_KEYS = ("hosts", "vars", "children")
ROOT_GROUP = "all"
# Ansible spellings users bring along: pointed at orch's name instead of a fuzzy guess.
ANSIBLE_NAMES = {
    "ansible_host": "hostname",
    "ansible_port": "port",
    "ansible_user": "user",
    "ansible_ssh_private_key_file": "identity_file",
    "ansible_python_interpreter": "python",
    "ansible_ssh_host": "hostname",
    "ansible_ssh_port": "port",
    "ansible_ssh_user": "user",
}
# A file with a typo on every board names the first ones and counts the rest.
MAX_SHOWN_PROBLEMS = 50
_SECRET = re.compile(r"passw(or)?d|passphrase|(^|[_-])(pass|secret|token)$", re.IGNORECASE)
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


@dataclass(frozen=True, kw_only=True)
class Setting:
    """One value set in the file, with the line that set it."""

    value: Any
    line: int


@dataclass(kw_only=True)
class Group:
    name: str
    line: int
    settings: dict[str, Setting] = field(default_factory=dict)
    hosts: list[str] = field(default_factory=list)
    children: dict[str, int] = field(default_factory=dict)  # child -> line of the reference
    parents: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class Host:
    name: str
    line: int
    settings: dict[str, Setting] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    raw: Any = None  # the constructed YAML value, to compare repeated definitions


class InventoryParser:
    """Walks the composed node tree once, validating as it goes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file = str(path)
        self.groups: dict[str, Group] = {}
        self.hosts: dict[str, Host] = {}
        self._open: list[int] = []  # group nodes being walked: guards against recursive YAML aliases
        self.tree = False  # the document has no anchors: no node is shared
        self._plain_keys: set[tuple[str, int]] = set()  # (key, id(known) or 0 for any) that passed check_key
        self.problems: list[InventoryError] = []  # every bad key found so far, in file order
        self._seen_problems: set[str] = set()

    # -- error helpers -------------------------------------------------------------------------
    def error(
        self, node: yaml.Node | int, where: str, message: str, hint: str | None = None
    ) -> InventoryError:
        line = node if isinstance(node, int) else node.start_mark.line + 1
        prefix = f"{self.file}:{line}: {where}: " if where else f"{self.file}:{line}: "
        return InventoryError(prefix + message, hint=hint)

    def problem(self, error: InventoryError) -> None:
        """Note a bad key and go on: one run names all of them (``raise_problems``)."""
        if error.message not in self._seen_problems:
            self._seen_problems.add(error.message)
            self.problems.append(error)

    def raise_problems(self) -> None:
        """One error naming every problem noted, each with its line (nothing when there is none)."""
        if not self.problems:
            return
        if len(self.problems) == 1:
            raise self.problems[0]
        shown = self.problems[:MAX_SHOWN_PROBLEMS]
        lines = [f"{len(self.problems)} problems in {self.file}:"]
        lines += [f"  {problem.message}" for problem in shown]
        if len(self.problems) > len(shown):
            lines.append(f"  ... and {len(self.problems) - len(shown)} more (fix these and run again)")
        hints = list(dict.fromkeys(problem.hint for problem in shown if problem.hint))
        raise InventoryError("\n".join(lines), hint="; ".join(hints) or None)

    def check_key(self, key_node: yaml.Node, where: str, known: Sequence[str]) -> str:
        key = self.scalar_key(key_node, where)
        if (key, id(known)) in self._plain_keys:  # the same names recur on every board
            return key
        if _SECRET.search(key):
            raise self.error(
                key_node,
                where,
                f"key '{key}' looks like a secret; orch never reads passwords or passphrases from the"
                " inventory: it authenticates only with ssh-agent or key files",
                hint="remove it; load your key with `ssh-add` or point identity_file at a key file",
            )
        if key not in known:
            if key in ANSIBLE_NAMES and ANSIBLE_NAMES[key] in known:
                suggestion = f" (orch calls it '{ANSIBLE_NAMES[key]}')"
            else:
                close = difflib.get_close_matches(key, list(known), n=1)
                suggestion = (
                    f" (did you mean '{close[0]}'?)" if close else f" (known keys: {', '.join(known)})"
                )
            raise self.error(key_node, where, f"unknown key '{key}'{suggestion}")
        if known is HOST_KEYS or known is SETTINGS or known is GROUP_KEYS:
            self._plain_keys.add((key, id(known)))
        return key

    def scalar_key(self, key_node: yaml.Node, where: str) -> str:
        if not isinstance(key_node, yaml.ScalarNode):
            raise self.error(key_node, where, "a key must be a plain name, not a list or mapping")
        if key_node.value == "<<":
            raise self.error(
                key_node, where, "key '<<': YAML merge keys are not supported; use group vars instead"
            )
        text: str = key_node.value  # a scalar node's value is its text (untyped in the yaml stubs)
        return text

    def pairs(self, node: yaml.Node, where: str, what: str) -> list[tuple[yaml.Node, yaml.Node]]:
        """The (key, value) nodes of a mapping, or none for an empty value; anything else is an error."""
        if isinstance(node, yaml.ScalarNode) and (node.tag == NULL_TAG or node.value == ""):
            return []
        if not isinstance(node, yaml.MappingNode):
            kind = "a list" if isinstance(node, yaml.SequenceNode) else f"'{node.value}'"
            raise self.error(node, where, f"{what} must be a mapping, not {kind}")
        # A mapping node's value: its (key, value) nodes (untyped in the yaml stubs).
        pairs: list[tuple[yaml.Node, yaml.Node]] = node.value
        return pairs

    def name(self, key_node: yaml.Node, where: str, kind: str) -> str:
        name = self.scalar_key(key_node, where)
        if not _NAME.match(name):
            raise self.error(
                key_node,
                where,
                f"{kind} name '{name}' is not valid: use letters, digits, '_', '.', '-' (not first)",
            )
        return name

    # -- duplicate keys ----------------------------------------------------------------------------
    def check_duplicates(self, root: yaml.Node, limits: Limits | None = None) -> None:
        """No mapping may repeat a key. A quick pass compares key sets (almost no mapping repeats a
        key); only when one does is the document searched again in file order, so that the first
        duplicate is the one named.

        ``limits`` is given when the document has no anchors and its limits were not checked yet:
        then its nodes are a tree, this pass counts them and measures the nesting, and when either
        is beyond the limit ``limits()`` names it exactly (from the event stream)."""
        tree = limits is not None
        seen_nodes: set[int] = set()  # with anchors, an alias may point back at a node already seen
        pending: list[tuple[yaml.Node, int]] = [(root, 1)]
        count = deepest = 0
        duplicate = False
        while pending:
            node, depth = pending.pop()
            if not tree:
                if id(node) in seen_nodes:
                    continue
                seen_nodes.add(id(node))
            count += 1
            deepest = max(deepest, depth)
            if isinstance(node, yaml.MappingNode):
                keys = [key.value for key, _ in node.value if isinstance(key, yaml.ScalarNode)]
                duplicate = duplicate or len(set(keys)) != len(keys)
                children = [item for pair in node.value for item in pair]
            elif isinstance(node, yaml.SequenceNode):
                children = node.value
            else:
                continue
            for child in children:
                if isinstance(child, yaml.ScalarNode):
                    count += 1
                else:
                    pending.append((child, depth + 1))
        if limits is not None and (count > MAX_EXPANDED or deepest > MAX_DEPTH):
            limits()
        if duplicate:
            self._report_first_duplicate(root)

    def _report_first_duplicate(self, root: yaml.Node) -> None:
        """Depth first, in file order (a key, then everything under its value, then the next key)."""
        seen_nodes: set[int] = set()
        stack: list[tuple[dict[str, int] | None, Any]] = []

        def enter(node: yaml.Node) -> None:
            if id(node) in seen_nodes:
                return
            seen_nodes.add(id(node))
            if isinstance(node, yaml.MappingNode):
                stack.append(({}, iter(node.value)))
            elif isinstance(node, yaml.SequenceNode):
                stack.append((None, iter(node.value)))

        enter(root)
        while stack:
            first, items = stack[-1]
            item = next(items, None)
            if item is None:
                stack.pop()
                continue
            if first is None:
                enter(item)
                continue
            key_node, value_node = item
            if isinstance(key_node, yaml.ScalarNode):
                if key_node.value in first:
                    raise self.error(
                        key_node,
                        "",
                        f"duplicate key '{key_node.value}' (first at line {first[key_node.value]});"
                        " YAML would silently keep only the last one",
                    )
                first[key_node.value] = key_node.start_mark.line + 1
            enter(value_node)

    # -- structure -----------------------------------------------------------------------------------
    def parse(self, root: yaml.Node | None, limits: Limits | None = None) -> None:
        self.groups[ROOT_GROUP] = Group(name=ROOT_GROUP, line=1)
        if root is None:
            return
        self.check_duplicates(root, limits)
        self.tree = limits is not None
        for key_node, value_node in self.pairs(root, "", "the inventory"):
            key = self.scalar_key(key_node, "top level")
            if key != ROOT_GROUP:
                close = difflib.get_close_matches(key, [ROOT_GROUP], n=1)
                raise self.error(
                    key_node,
                    "top level",
                    f"unknown key '{key}'" + (f" (did you mean '{close[0]}'?)" if close else ""),
                    hint="an inventory starts with `all:`; put groups under `all: children:`",
                )
            self.groups[ROOT_GROUP].line = key_node.start_mark.line + 1
            try:
                self.group(ROOT_GROUP, value_node, key_node.start_mark.line + 1)
            except InventoryError as error:
                self.problem(error)
        self.raise_problems()

    def group(self, name: str, node: yaml.Node, line: int) -> None:
        where = "all" if name == ROOT_GROUP else f"group '{name}'"
        if id(node) in self._open:
            raise self.error(node, where, "a YAML alias makes this group contain itself")
        self._open.append(id(node))
        group = self.groups.setdefault(name, Group(name=name, line=line))
        try:
            for key_node, value_node in self.pairs(node, where, where):
                try:
                    self._group_key(name, where, group, key_node, value_node)
                except InventoryError as error:
                    self.problem(error)
        finally:
            self._open.pop()

    def _group_key(
        self, name: str, where: str, group: Group, key_node: yaml.Node, value_node: yaml.Node
    ) -> None:
        key = self.check_key(key_node, where, GROUP_KEYS)
        if key == "vars":
            for var_key, var_node in self.pairs(value_node, f"{where} vars", "vars"):
                try:
                    self._group_var(where, group, var_key, var_node)
                except InventoryError as error:
                    self.problem(error)
        elif key == "hosts":
            if isinstance(value_node, yaml.SequenceNode):
                raise self.error(
                    value_node,
                    where,
                    "key 'hosts' must be a mapping of board name -> settings, not a list",
                    hint="write `hosts: {pi01: {}, pi02: {}}` or one `pi01:` line per board",
                )
            for host_key, host_node in self.pairs(value_node, where, "hosts"):
                try:
                    self.host(self.name(host_key, where, "board"), host_key, host_node, group)
                except InventoryError as error:
                    self.problem(error)
        else:
            for child_key, child_node in self.pairs(value_node, where, "children"):
                try:
                    self._child(name, where, group, child_key, child_node)
                except InventoryError as error:
                    self.problem(error)

    def _group_var(self, where: str, group: Group, var_key: yaml.Node, var_node: yaml.Node) -> None:
        setting = self.setting(var_key, var_node, f"{where} vars", SETTINGS)
        previous = group.settings.get(setting[0])
        if previous is not None and previous.value != setting[1].value:
            raise self.error(
                var_key,
                f"{where} vars",
                f"key '{setting[0]}' is set twice with different values"
                f" (line {previous.line} and line {setting[1].line})",
            )
        group.settings[setting[0]] = setting[1]

    def _child(
        self, name: str, where: str, group: Group, child_key: yaml.Node, child_node: yaml.Node
    ) -> None:
        child = self.name(child_key, where, "group")
        if child == ROOT_GROUP:
            raise self.error(child_key, where, "group 'all' cannot be a child: it contains every group")
        group.children.setdefault(child, child_key.start_mark.line + 1)
        child_group = self.groups.get(child)
        if child_group is None:
            child_group = self.groups[child] = Group(name=child, line=child_key.start_mark.line + 1)
        if name not in child_group.parents:
            child_group.parents.append(name)
        self.group(child, child_node, child_key.start_mark.line + 1)

    def host(self, name: str, key_node: yaml.Node, node: yaml.Node, group: Group) -> None:
        where = f"host '{name}'"
        line = key_node.start_mark.line + 1
        host = Host(name=name, line=line)
        # The host's value is constructed once, and its settings are taken from it; when that fails,
        # each setting is constructed on its own so that the first error in file order is the one
        # reported, as it would be one by one.
        whole = construct_or_none(node, self.tree)
        built = whole if isinstance(whole, dict) else None
        for setting_key, setting_node in self.pairs(node, where, where):
            try:
                key = self.check_key(setting_key, where, HOST_KEYS)
                if key == "vars":
                    host.extra = self.free_vars(setting_node, f"{where} vars", built)
                else:
                    host.settings[key] = self.setting(setting_key, setting_node, where, SETTINGS, built)[1]
            except InventoryError as error:
                self.problem(error)  # the next keys are checked too: every bad key is named at once
        # Constructed only after the walk: construction resolves (and removes) YAML merge keys.
        raw = host.raw = whole if whole is not None else _construct(node, self)
        previous = self.hosts.get(name)
        if previous is None:
            self.hosts[name] = host
        elif raw and previous.raw and raw != previous.raw:
            raise self.error(
                key_node,
                where,
                f"board '{name}' is defined twice with different settings"
                f" (line {previous.line} and line {line});"
                f" define it once and list it elsewhere as `{name}:` with no settings",
            )
        elif raw and not previous.raw:
            host.line = line
            self.hosts[name] = host  # the first mention was a bare reference; this one describes it
        if name not in group.hosts:
            group.hosts.append(name)

    def free_vars(self, node: yaml.Node, where: str, built: dict[Any, Any] | None = None) -> dict[str, Any]:
        """A host's free-form ``vars``: any names, but no secrets at any depth."""
        self.check_secrets(node, where)
        self.pairs(node, where, "key 'vars'")
        value = built["vars"] if built is not None and "vars" in built else _construct(node, self)
        return dict(value or {})

    def check_secrets(self, node: yaml.Node, where: str) -> None:
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                key = self.scalar_key(key_node, where)
                if (key, 0) not in self._plain_keys:
                    self.check_key(key_node, where, [key])  # any name, but not a secret's
                    self._plain_keys.add((key, 0))
                if not isinstance(value_node, yaml.ScalarNode):
                    self.check_secrets(value_node, where)
        elif isinstance(node, yaml.SequenceNode):
            for item in node.value:
                if not isinstance(item, yaml.ScalarNode):
                    self.check_secrets(item, where)

    # -- values --------------------------------------------------------------------------------------
    def setting(
        self,
        key_node: yaml.Node,
        node: yaml.Node,
        where: str,
        known: Sequence[str],
        built: dict[Any, Any] | None = None,
    ) -> tuple[str, Setting]:
        """One setting, validated; ``built`` is the enclosing mapping when it is constructed already."""
        key = self.check_key(key_node, where, known)
        value = built[key] if built is not None and key in built else _construct(node, self)
        line = key_node.start_mark.line + 1

        def bad(expected: str) -> InventoryError:
            # Quote what the user wrote (`yes`), not what YAML made of it (True).
            written = node.value if isinstance(node, yaml.ScalarNode) else value
            return self.error(key_node, where, f"key '{key}' must be {expected}, not {written!r}")

        if key == "port":
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
                raise bad("an integer in 1..65535")
        elif key == "tags":
            if not isinstance(value, list) or not all(isinstance(tag, str) and tag for tag in value):
                raise bad("a list of strings, e.g. [camera, lab-a]")
            value = tuple(value)
        elif not isinstance(value, str) or not value.strip():
            raise bad("a non-empty string")
        elif key in ("hostname", "user", "proxy_jump") and (re.search(r"\s", value) or value.startswith("-")):
            # These end up as connection parameters: no spaces and no leading '-' (never an option).
            raise bad("a name without spaces that does not start with '-'")
        elif key in ("hostname", "proxy_jump") and _address_problem(key, value):
            raise self.error(key_node, where, f"key '{key}': {_address_problem(key, value)}")
        elif key in ("python", "workdir", "identity_file") and (
            "\x00" in value or "\n" in value or value.startswith("-")
        ):
            raise bad("a path without NUL bytes or newlines that does not start with '-'")
        elif key == "target":
            try:
                value = resolve_target(value).name
            except TargetError as error:
                raise self.error(key_node, where, f"key 'target': {error.message}") from error
        elif key == "identity_file":
            value = Path(value).expanduser()
            if not value.is_absolute():
                value = self.path.parent / value  # relative to the inventory, not to wherever orch runs
        return key, Setting(value=value, line=line)


def _address_problem(key: str, value: str) -> str | None:
    """Why a hostname or proxy_jump value cannot name a host (None when it can)."""
    if key == "hostname":
        problem = hostname_problem(value)
        return f"{value!r} is not a hostname or IP address: {problem}" if problem else None
    try:
        parse_proxy_jump(value)
    except ValueError as error:
        return f"{error} (expected [user@]host[:port], comma-separated)"
    return None


def _construct(node: yaml.Node, parser: InventoryParser) -> Any:
    constructor = yaml.constructor.SafeConstructor()
    try:
        return constructor.construct_document(node)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        raise parser.error(
            mark.line + 1 if mark else node.start_mark.line + 1, "", f"YAML: {error.problem}"
        ) from error
    except CONSTRUCTOR_ERRORS as error:
        culprit = _failing_scalar(node) or node
        raise parser.error(culprit, "", f"YAML value {_shown(culprit)} cannot be read: {error}") from error


def _failing_scalar(node: yaml.Node) -> yaml.Node | None:
    """The scalar inside ``node`` whose construction fails (to name its line and text)."""
    pending, seen = [node], set()
    while pending:
        current = pending.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, yaml.ScalarNode):
            try:
                yaml.constructor.SafeConstructor().construct_object(current)
            except Exception:  # noqa: BLE001 -- any failure marks the culprit
                return current
        elif isinstance(current, yaml.MappingNode):
            pending.extend(item for pair in reversed(current.value) for item in reversed(pair))
        elif isinstance(current, yaml.SequenceNode):
            pending.extend(reversed(current.value))
    return None


def _shown(node: yaml.Node) -> str:
    if isinstance(node, yaml.ScalarNode):
        return repr(node.value if len(node.value) <= 60 else node.value[:57] + "...")
    return "here"
