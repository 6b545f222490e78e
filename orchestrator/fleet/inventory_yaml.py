"""The YAML layer of the inventory: the file read as text (every bad byte named by line and column),
its size after alias expansion and its nesting bounded, its node tree composed (with line numbers),
and plain values built fast.

The file is read with ``yaml.compose`` rather than ``safe_load`` because the node tree keeps line
numbers (every error names file, line and key) and shows duplicate mapping keys, which
``safe_load`` silently collapses to the last one.
"""

from __future__ import annotations

import re
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from orchestrator.common.textfiles import TEXT_FILE_LIMIT, read_capped, read_pipe_capped
from orchestrator.errors import InventoryError

NULL_TAG = "tag:yaml.org,2002:null"
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
# How long a named pipe given as the inventory (`-i <(cmd)`) may take to bring its first bytes.
PIPE_WAIT_S = 10.0
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


def check_limits(path: Path, text: str) -> None:
    """Refuse documents whose size after alias expansion, or whose nesting, is out of all proportion
    to an inventory (a "billion laughs" alias bomb, 10,000 nested brackets), before anything walks them.

    One pass over libyaml's event stream, without recursion: every value counts one, an alias
    counts the expanded size of its anchor (each collection's size is known when it closes)."""
    counter = _ExpansionCounter(path)
    for event in yaml.parse(text, Loader=_LOADER):
        counter.add(event)


class _ExpansionCounter:
    """The expanded size of the document so far, fed one event at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.sizes: dict[str, int] = {}  # anchor -> expanded node count
        self.open_anchors: set[str] = set()
        self.stack: list[
            tuple[int, str | None]
        ] = []  # (expanded count so far, anchor) of each open collection
        self.total = 0

    def add(self, event: yaml.Event) -> None:
        if isinstance(event, yaml.CollectionEndEvent):
            self._close()
            return
        size = self._size(event)
        if size is None:
            return
        self.total += size
        if self.total > MAX_EXPANDED:
            raise InventoryError(
                f"{self.path}:{_event_line(event)}: YAML aliases expand this document to more than"
                f" {MAX_EXPANDED:,} values (an alias bomb?); write the values out or use group vars",
            )
        if isinstance(event, yaml.CollectionStartEvent):
            self.stack.append((1, event.anchor))
            if event.anchor:
                self.open_anchors.add(event.anchor)
        elif self.stack:
            count, anchor = self.stack[-1]
            self.stack[-1] = (count + size, anchor)

    def _size(self, event: yaml.Event) -> int | None:
        """What the event adds to the expanded document (None: nothing, it is no value)."""
        if isinstance(event, yaml.CollectionStartEvent):
            if len(self.stack) >= MAX_DEPTH:
                raise InventoryError(
                    f"{self.path}:{_event_line(event)}: YAML nested more than {MAX_DEPTH} levels deep;"
                    " an inventory needs a few"
                )
            return 1
        if isinstance(event, yaml.ScalarEvent):
            if event.anchor:
                self.sizes[event.anchor] = 1
            return 1
        if isinstance(event, yaml.AliasEvent):
            if event.anchor in self.open_anchors:
                raise InventoryError(
                    f"{self.path}:{_event_line(event)}: YAML alias '*{event.anchor}' is used inside"
                    f" the node it names (&{event.anchor}): that makes an endless structure"
                )
            return self.sizes.get(event.anchor or "", 1)
        return None

    def _close(self) -> None:
        count, anchor = self.stack.pop()
        if anchor:
            self.sizes[anchor] = count
            self.open_anchors.discard(anchor)
        if self.stack:
            outer, outer_anchor = self.stack[-1]
            self.stack[-1] = (outer + count, outer_anchor)


def _event_line(event: yaml.Event) -> int:
    return event.start_mark.line + 1 if event.start_mark is not None else 1


CONSTRUCTOR_ERRORS = (ValueError, TypeError, OverflowError)  # e.g. `2001-13-45` as a timestamp


def construct_or_none(node: yaml.Node, tree: bool) -> Any:
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
    except (_NotPlain, yaml.YAMLError, *CONSTRUCTOR_ERRORS):
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


def _special_file(path: Path) -> str | None:
    """What ``path`` is when it is neither a regular file nor a named pipe: a device may never end."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return None  # opening it names the error
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode) or stat.S_ISFIFO(mode):
        return None
    return "a socket" if stat.S_ISSOCK(mode) else "a device"


def _is_pipe(path: Path) -> bool:
    try:
        return stat.S_ISFIFO(path.stat().st_mode)
    except OSError:
        return False


def _read(path: Path) -> tuple[bytes, bool]:
    """The file's first TEXT_FILE_LIMIT bytes and whether it holds more. A named pipe (``-i <(cmd)``,
    ``/dev/stdin`` fed by a pipe) is read once its writer writes, within PIPE_WAIT_S seconds."""
    if not _is_pipe(path):
        return read_capped(path)
    read = read_pipe_capped(path, PIPE_WAIT_S)
    if read is None:
        raise InventoryError(
            f"{path}: is a named pipe (FIFO) that nothing wrote to within {PIPE_WAIT_S:g}s: not an inventory",
            hint="pass -i PATH of an inventory file, or a pipe that a command writes it to (-i <(cat FILE))",
        )
    return read


def read_inventory_text(path: Path) -> str:
    special = _special_file(path)
    if special:
        raise InventoryError(
            f"{path}: is {special}, not a regular file: not an inventory",
            hint="pass -i PATH of an inventory file (copy what the device holds into one, or pipe it: -i <(cmd))",
        )
    try:
        data, more = _read(path)
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


Limits = Callable[[], None]


def compose(path: Path, text: str) -> tuple[yaml.Node | None, Limits | None]:
    """The document's node tree, and, when its limits were not checked yet, what checks them
    (``InventoryParser.check_duplicates`` calls it when its count of the tree crosses one)."""
    # Alias expansion can only be counted on the event stream. A document without anchors is
    # composed at once instead (libyaml bounds its nesting at 1,000 levels), and its nodes, a plain
    # tree, are counted on the way (one pass fewer over a large inventory); the event stream
    # is read only when a limit is crossed, or to name a limit reached before a syntax error.
    exact = _C_LOADER is None or "&" in text
    try:
        if exact:
            check_limits(path, text)
        try:
            root = yaml.compose(text, Loader=_ComposeLoader)
        except yaml.YAMLError:
            if not exact:
                check_limits(path, text)
            raise
    except yaml.MarkedYAMLError as error:
        mark = error.problem_mark or error.context_mark
        where = f"{path}:{mark.line + 1}:{mark.column + 1}" if mark else str(path)
        problem = ", ".join(part for part in (error.context, error.problem) if part) or "invalid YAML"
        raise InventoryError(f"{where}: YAML syntax error: {problem}") from error
    except yaml.YAMLError as error:
        raise InventoryError(f"{path}: YAML error: {error}") from error
    return root, None if exact else lambda: check_limits(path, text)
