"""The inventory: ``inventory.yaml`` + ssh_config + the lab, resolved into ``Board`` objects.

The file format is Ansible's YAML inventory (``all`` / ``hosts`` / ``children`` /
``vars``, groups merged by name, nested groups). Each board's settings are resolved
with this precedence, and ``Board.sources`` records where each value came from:

    host > nearest group > parent groups > all > ssh_config > defaults

The file is read with ``yaml.compose`` rather than ``safe_load`` because the node tree
keeps line numbers (every error names file, line and key) and shows duplicate mapping
keys, which ``safe_load`` silently collapses to the last one.
"""

from __future__ import annotations

import dataclasses
import difflib
import gc
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from orchestrator.adapters.ssh_config import OPTIONS as SSH_OPTIONS
from orchestrator.adapters.ssh_config import load_ssh_config
from orchestrator.board import Board
from orchestrator.errors import InventoryError, TargetError, UsageError
from orchestrator.fleet.selection import describe_inventory, select_names
from orchestrator.lab_state import LAB_GROUP, lab_boards, state_path
from orchestrator.targets import resolve_target
from orchestrator.textfiles import TEXT_FILE_LIMIT, read_capped

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
_SECRET = re.compile(r"passw(or)?d|passphrase|(^|[_-])(pass|secret|token)$", re.IGNORECASE)
_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")
_NULL_TAG = "tag:yaml.org,2002:null"
_STR_TAG = "tag:yaml.org,2002:str"
_INT_TAG = "tag:yaml.org,2002:int"
_SEQ_TAG = "tag:yaml.org,2002:seq"
_MAP_TAG = "tag:yaml.org,2002:map"
# Scalars that PyYAML's SafeConstructor builds on their own, never touching other nodes.
_SCALAR_TAGS = frozenset(
    f"tag:yaml.org,2002:{name}" for name in ("null", "bool", "int", "float", "binary", "timestamp", "str")
)
# libyaml's parser and composer where the machine has it (it keeps line numbers, and reads a
# 10,000-board inventory many times faster); the pure-Python ones otherwise.
_C_LOADER: Any = getattr(yaml, "CSafeLoader", None)
_LOADER: Any = _C_LOADER or yaml.SafeLoader
# Far beyond any real inventory; what lies beyond is an accident or an attack.
MAX_DEPTH = 64
MAX_EXPANDED = 2_000_000
# What YAML's reader refuses (its own error gives only a character position).
_UNPRINTABLE = re.compile("[^\x09\x0a\x0d\x20-\x7e\x85\xa0-\ud7ff\ue000-\ufffd\U00010000-\U0010ffff]")


class _ComposeLoader(_LOADER):  # type: ignore[misc]  # a loader class chosen at import time
    """The loader that composes inventories: ``resolve``, which libyaml's composer calls back for
    every scalar, answers "string" at once for a plain scalar whose first character starts none
    of YAML's implicit types (``hostname``, ``h00042``, ``camera``), without trying the regular
    expressions one by one; every other scalar is resolved as usual, so the tags are the same."""

    _RESOLVED_FIRST = frozenset(key for key in _LOADER.yaml_implicit_resolvers if key is not None)
    _FAST = None not in _LOADER.yaml_implicit_resolvers and not _LOADER.yaml_path_resolvers

    def resolve(self, kind: Any, value: Any, implicit: Any) -> Any:
        if (
            kind is yaml.ScalarNode
            and self._FAST
            and implicit[0]
            and value
            and value[0] not in self._RESOLVED_FIRST
        ):
            return _STR_TAG
        return super().resolve(kind, value, implicit)


@dataclass(frozen=True, kw_only=True)
class Setting:
    """One value set in the file, with the line that set it."""

    value: Any
    line: int


@dataclass(kw_only=True)
class _Group:
    name: str
    line: int
    settings: dict[str, Setting] = field(default_factory=dict)
    hosts: list[str] = field(default_factory=list)
    children: dict[str, int] = field(default_factory=dict)  # child -> line of the reference
    parents: list[str] = field(default_factory=list)


@dataclass(kw_only=True)
class _Host:
    name: str
    line: int
    settings: dict[str, Setting] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)
    raw: Any = None  # the constructed YAML value, to compare repeated definitions


class _Parser:
    """Walks the composed node tree once, validating as it goes."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file = str(path)
        self.groups: dict[str, _Group] = {}
        self.hosts: dict[str, _Host] = {}
        self._open: list[int] = []  # group nodes being walked: guards against recursive YAML aliases
        self.tree = False  # the document has no anchors: no node is shared
        self._plain_keys: set[tuple[str, int]] = set()  # (key, id(known) or 0 for any) that passed check_key

    # -- error helpers -------------------------------------------------------------------------
    def error(
        self, node: yaml.Node | int, where: str, message: str, hint: str | None = None
    ) -> InventoryError:
        line = node if isinstance(node, int) else node.start_mark.line + 1
        prefix = f"{self.file}:{line}: {where}: " if where else f"{self.file}:{line}: "
        return InventoryError(prefix + message, hint=hint)

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
        if isinstance(node, yaml.ScalarNode) and (node.tag == _NULL_TAG or node.value == ""):
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
    def check_duplicates(self, root: yaml.Node, limits: Callable[[], None] | None = None) -> None:
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
    def parse(self, root: yaml.Node | None, limits: Callable[[], None] | None = None) -> None:
        self.groups[ROOT_GROUP] = _Group(name=ROOT_GROUP, line=1)
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
            self.group(ROOT_GROUP, value_node, key_node.start_mark.line + 1)

    def group(self, name: str, node: yaml.Node, line: int) -> None:
        where = "all" if name == ROOT_GROUP else f"group '{name}'"
        if id(node) in self._open:
            raise self.error(node, where, "a YAML alias makes this group contain itself")
        self._open.append(id(node))
        group = self.groups.setdefault(name, _Group(name=name, line=line))
        self._group_body(name, node, where, group)
        self._open.pop()

    def _group_body(self, name: str, node: yaml.Node, where: str, group: _Group) -> None:
        for key_node, value_node in self.pairs(node, where, where):
            key = self.check_key(key_node, where, GROUP_KEYS)
            if key == "vars":
                for var_key, var_node in self.pairs(value_node, f"{where} vars", "vars"):
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
            elif key == "hosts":
                if isinstance(value_node, yaml.SequenceNode):
                    raise self.error(
                        value_node,
                        where,
                        "key 'hosts' must be a mapping of board name -> settings, not a list",
                        hint="write `hosts: {pi01: {}, pi02: {}}` or one `pi01:` line per board",
                    )
                for host_key, host_node in self.pairs(value_node, where, "hosts"):
                    self.host(self.name(host_key, where, "board"), host_key, host_node, group)
            else:
                for child_key, child_node in self.pairs(value_node, where, "children"):
                    child = self.name(child_key, where, "group")
                    if child == ROOT_GROUP:
                        raise self.error(
                            child_key, where, "group 'all' cannot be a child: it contains every group"
                        )
                    group.children.setdefault(child, child_key.start_mark.line + 1)
                    child_group = self.groups.get(child)
                    if child_group is None:
                        child_group = self.groups[child] = _Group(
                            name=child, line=child_key.start_mark.line + 1
                        )
                    if name not in child_group.parents:
                        child_group.parents.append(name)
                    self.group(child, child_node, child_key.start_mark.line + 1)

    def host(self, name: str, key_node: yaml.Node, node: yaml.Node, group: _Group) -> None:
        where = f"host '{name}'"
        line = key_node.start_mark.line + 1
        host = _Host(name=name, line=line)
        # The host's value is constructed once, and its settings are taken from it; when that fails,
        # each setting is constructed on its own so that the first error in file order is the one
        # reported, as it would be one by one.
        whole = _construct_or_none(node, self.tree)
        built = whole if isinstance(whole, dict) else None
        for setting_key, setting_node in self.pairs(node, where, where):
            key = self.check_key(setting_key, where, HOST_KEYS)
            if key == "vars":
                host.extra = self.free_vars(setting_node, f"{where} vars", built)
            else:
                host.settings[key] = self.setting(setting_key, setting_node, where, SETTINGS, built)[1]
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


def _check_limits(path: Path, text: str) -> None:
    """Refuse documents whose size after alias expansion, or whose nesting, is out of all proportion
    to an inventory (a "billion laughs" alias bomb, 10,000 nested brackets), before anything walks them.

    One pass over libyaml's event stream, without recursion: every value counts one, an alias
    counts the expanded size of its anchor (each collection's size is known when it closes)."""
    sizes: dict[str, int] = {}  # anchor -> expanded node count
    open_anchors: set[str] = set()
    stack: list[tuple[int, str | None]] = []  # (expanded count so far, anchor) of each open collection
    total = 0
    for event in yaml.parse(text, Loader=_LOADER):
        if isinstance(event, yaml.CollectionStartEvent):
            if len(stack) >= MAX_DEPTH:
                raise InventoryError(
                    f"{path}:{_event_line(event)}: YAML nested more than {MAX_DEPTH} levels deep;"
                    " an inventory needs a few"
                )
            size = 1
        elif isinstance(event, yaml.CollectionEndEvent):
            count, anchor = stack.pop()
            if anchor:
                sizes[anchor] = count
                open_anchors.discard(anchor)
            if stack:
                outer, outer_anchor = stack[-1]
                stack[-1] = (outer + count, outer_anchor)
            continue
        elif isinstance(event, yaml.ScalarEvent):
            size = 1
            if event.anchor:
                sizes[event.anchor] = 1
        elif isinstance(event, yaml.AliasEvent):
            if event.anchor in open_anchors:
                raise InventoryError(
                    f"{path}:{_event_line(event)}: YAML alias '*{event.anchor}' is used inside"
                    f" the node it names (&{event.anchor}): that makes an endless structure"
                )
            size = sizes.get(event.anchor or "", 1)
        else:
            continue
        total += size
        if total > MAX_EXPANDED:
            raise InventoryError(
                f"{path}:{_event_line(event)}: YAML aliases expand this document to more than {MAX_EXPANDED:,} values"
                " (an alias bomb?); write the values out or use group vars",
            )
        if isinstance(event, yaml.CollectionStartEvent):
            stack.append((1, event.anchor))
            if event.anchor:
                open_anchors.add(event.anchor)
        elif stack:
            count, anchor = stack[-1]
            stack[-1] = (count + size, anchor)


def _event_line(event: yaml.Event) -> int:
    return event.start_mark.line + 1 if event.start_mark is not None else 1


_CONSTRUCTOR_ERRORS = (ValueError, TypeError, OverflowError)  # e.g. `2001-13-45` as a timestamp


def _construct_or_none(node: yaml.Node, tree: bool) -> Any:
    """The value of ``node`` built at once, or None: then the caller constructs its parts one by
    one through ``_construct`` (which reports the first failure in file order), and the whole
    after its walk (PyYAML's constructor rewrites merge keys in the node tree it walks).

    Only for an anchor-free document (``tree``: no node is shared) whose values are strings,
    decimal integers, lists and mappings with string keys, which are built here directly, as
    PyYAML's SafeConstructor would build them but without its several method calls per value
    (0.3 s for 10,000 boards)."""
    if not tree:
        return None
    try:
        return _plain(node, yaml.constructor.SafeConstructor())
    except (_NotPlain, yaml.YAMLError, *_CONSTRUCTOR_ERRORS):
        return None


class _NotPlain(Exception):
    """A value ``_plain`` leaves to PyYAML's constructor (merge keys, sets, unhashable keys...)."""


def _plain(node: yaml.Node, constructor: yaml.constructor.SafeConstructor) -> Any:
    """What PyYAML's SafeConstructor makes of a node of an anchor-free document (the same values)."""
    tag = node.tag
    if isinstance(node, yaml.ScalarNode):
        text: str = node.value
        if tag == _STR_TAG:
            return text
        if tag == _INT_TAG and text.isascii() and text.isdigit() and (text == "0" or text[0] != "0"):
            return int(text)  # PyYAML reads a leading 0 as octal: that is left to it
        if tag in _SCALAR_TAGS:  # null, bool, float, timestamp...: built by PyYAML's own rules
            return constructor.construct_object(node)
        raise _NotPlain
    if isinstance(node, yaml.SequenceNode) and tag == _SEQ_TAG:
        return [_plain(item, constructor) for item in node.value]
    if isinstance(node, yaml.MappingNode) and tag == _MAP_TAG:
        mapping: dict[Any, Any] = {}
        for key_node, value_node in node.value:
            if key_node.tag != _STR_TAG:  # merge keys, numbers, lists as keys: PyYAML's rules
                raise _NotPlain
            mapping[key_node.value] = _plain(value_node, constructor)
        return mapping
    raise _NotPlain


def _construct(node: yaml.Node, parser: _Parser) -> Any:
    constructor = yaml.constructor.SafeConstructor()
    try:
        return constructor.construct_document(node)
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        raise parser.error(
            mark.line + 1 if mark else node.start_mark.line + 1, "", f"YAML: {error.problem}"
        ) from error
    except _CONSTRUCTOR_ERRORS as error:
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


def _check_cycles(parser: _Parser) -> None:
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


def _children_first(parser: _Parser) -> list[str]:
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


def _members(parser: _Parser) -> dict[str, list[str]]:
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


def _depths(parser: _Parser) -> dict[str, int]:
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
    parser: _Parser, groups: tuple[str, ...], depths: dict[str, int], position: dict[str, int]
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


def _resolve(parser: _Parser, host: _Host, layers: _Layers, ssh: Any) -> Board:
    values = dict(layers.values)
    sources = dict(layers.sources)
    for key, setting in host.settings.items():
        values[key] = setting.value
        sources[key] = f"host {host.name} ({parser.file}:{setting.line})"
    if ssh is not None and any(f not in values for f in SSH_OPTIONS.values()):
        found = ssh.defaults_for(host.name, values.get("hostname"))
        for key, value in found.values.items():
            if key not in values:
                values[key] = value
                sources[key] = found.source
    if "hostname" not in values:
        values["hostname"] = host.name
        sources["hostname"] = "default (the board name)"
    for name in _BOARD_SETTINGS:
        if name not in sources:
            sources[name] = "default"
    for key in host.extra:
        sources[f"vars.{key}"] = f"host {host.name} ({parser.file}:{host.line})"
    return Board(name=host.name, groups=layers.member_of, extra=dict(host.extra), sources=sources, **values)


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
        names = select_names(
            boards=list(self.boards),
            groups=self.groups,
            hosts=hosts or (),
            group_names=groups or (),
            all_devices=all_devices,
            limit=limit,
        )
        return [self.boards[name] for name in names]


def _line_col(text: str, index: int) -> tuple[int, int]:
    line = text.count("\n", 0, index) + 1
    return line, index - (text.rfind("\n", 0, index) + 1) + 1


def _decode(path: Path, data: bytes) -> str:
    """The file as text; a NUL byte, bytes that are not UTF-8 or a character YAML refuses are named
    by line and column (YAML's own reader would only give a position)."""
    nul = data.find(b"\x00")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        column = nul - (data.rfind(b"\n", 0, nul) + 1) + 1
        raise InventoryError(
            f"{path}:{line}:{column}: a NUL byte (\\x00): an inventory is YAML text",
            hint="was a binary file passed as the inventory, or the file damaged?",
        )
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as error:
        line = data.count(b"\n", 0, error.start) + 1
        column = error.start - (data.rfind(b"\n", 0, error.start) + 1) + 1
        raise InventoryError(
            f"{path}:{line}:{column}: byte {data[error.start]:#04x} is not UTF-8: an inventory is UTF-8 text"
        ) from None
    bad = _UNPRINTABLE.search(text)
    if bad:
        line, column = _line_col(text, bad.start())
        raise InventoryError(
            f"{path}:{line}:{column}: character U+{ord(bad.group()):04X} is not allowed in YAML"
            ' (a control character); quote it as an escape ("\\t") or remove it'
        )
    return text.removeprefix("\ufeff")


def _read(path: Path) -> str:
    try:
        data, more = read_capped(path)
        if more:
            raise InventoryError(
                f"{path}: larger than {TEXT_FILE_LIMIT >> 20} MiB (or endless, like a device): not an inventory"
            )
        return _decode(path, data)
    except FileNotFoundError:
        raise InventoryError(
            f"{path}: inventory file not found",
            hint="create it (see the inventory.yaml shipped with orch), pass -i PATH or set $ORCH_INVENTORY;"
            " `all: {}` is a valid empty inventory (lab boards are added to it)",
        ) from None
    except IsADirectoryError:
        raise InventoryError(
            f"{path}: is a directory, not an inventory file", hint="pass -i PATH/inventory.yaml"
        ) from None
    except OSError as error:
        raise InventoryError(f"{path}: cannot read the inventory: {error.strerror or error}") from error


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
    parser = _Parser(path)
    text = _read(path)
    # Alias expansion can only be counted on the event stream. A document without anchors is
    # composed at once instead (libyaml bounds its nesting at 1,000 levels), and its nodes, a plain
    # tree, are counted on the way (one pass fewer over a large inventory); the event stream
    # is read only when a limit is crossed, or to name a limit reached before a syntax error.
    exact = _C_LOADER is None or "&" in text
    try:
        if exact:
            _check_limits(path, text)
        try:
            root = yaml.compose(text, Loader=_ComposeLoader)
        except yaml.YAMLError:
            if not exact:
                _check_limits(path, text)
            raise
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = ", ".join(part for part in (error.context, error.problem) if part) or "invalid YAML"
        raise InventoryError(f"{where}: YAML syntax error: {problem}") from error
    except yaml.YAMLError as error:
        raise InventoryError(f"{path}: YAML error: {error}") from error
    parser.parse(root, None if exact else lambda: _check_limits(path, text))
    _check_cycles(parser)
    lab = _lab()
    lab_names = {board.name for board in lab}
    for name, host in parser.hosts.items():
        if name in parser.groups:
            raise parser.error(
                host.line, f"host '{name}'", f"'{name}' is both a board and a group; rename one"
            )
        if name in lab_names:
            raise parser.error(
                host.line,
                f"host '{name}'",
                f"the name '{name}' belongs to a running lab board; rename this board (or `orch lab down`)",
            )
    lab_group = parser.groups.get(LAB_GROUP)
    if lab_group is not None and (lab_group.hosts or lab_group.settings or lab_group.children):
        raise parser.error(
            lab_group.line,
            f"group '{LAB_GROUP}'",
            f"group '{LAB_GROUP}' is reserved for the lab's boards;"
            f" it may be referenced (`{LAB_GROUP}: {{}}`) but not given hosts, vars or children",
        )
    members = _members(parser)
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
        boards[name] = _resolve(parser, host, layers[key], ssh)
    # Lab boards are complete already; they join group 'lab' and any user group that lists 'lab' as a child.
    extra_groups = [g for g in parser.groups if g != ROOT_GROUP and LAB_GROUP in _descendants(parser, g)]
    for board in lab:
        boards[board.name] = dataclasses.replace(
            board, groups=(*board.groups, *[g for g in extra_groups if g not in board.groups])
        )
    groups = {name: list(names) for name, names in members.items() if name not in (ROOT_GROUP, LAB_GROUP)}
    if lab or LAB_GROUP in parser.groups:
        for board in lab:
            for group_name in boards[board.name].groups:
                if group_name != LAB_GROUP:
                    groups.setdefault(group_name, []).append(board.name)
        groups[LAB_GROUP] = [board.name for board in lab]
    return Inventory(path=path, boards=boards, groups=groups)


def _descendants(parser: _Parser, group: str) -> set[str]:
    """Groups reachable downwards from ``group`` (itself included)."""
    found = {group}
    pending = [group]
    while pending:
        for child in parser.groups[pending.pop()].children:
            if child not in found:
                found.add(child)
                pending.append(child)
    return found
