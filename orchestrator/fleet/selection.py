"""Board selection: --host / --group / --all-devices / --limit over board and group names.

Pure name matching, no files: the inventory hands in its board names (in inventory
order) and its groups (group -> member board names, nested groups flattened).

``--limit`` speaks Ansible's pattern language: terms separated by ``:`` (or ``,``);
a term is a board name, a group name or an fnmatch glob over both; ``&term``
intersects, ``!term`` excludes; ``all`` and ``*`` mean every board. As in Ansible,
plain terms are united first, then intersections apply, then exclusions, whatever
their order in the pattern; a pattern made only of ``&``/``!`` terms starts from all.
"""

from __future__ import annotations

import difflib
import fnmatch
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from orchestrator.errors import UsageError

ALL_NAMES = ("all", "*")
_GLOB_CHARS = re.compile(r"[*?\[]")
_HINT = "choose with --host NAME, --group NAME, --all-devices or --limit PATTERN (see `orch inventory list`)"


def _suggest(name: str, choices: Sequence[str]) -> str:
    close = difflib.get_close_matches(name, list(choices), n=1)
    return f" (did you mean '{close[0]}'?)" if close else ""


# Names listed after a selection that found nothing: enough to spot a typo, not a 10,000-line wall.
MAX_LISTED = 20


def _listed(names: Sequence[str]) -> str:
    if not names:
        return "(none)"
    if len(names) <= MAX_LISTED:
        return ", ".join(names)
    return f"{', '.join(names[:MAX_LISTED])} ... and {len(names) - MAX_LISTED:,} more"


def describe_inventory(boards: Sequence[str], groups: Mapping[str, Sequence[str]]) -> str:
    """'the inventory has boards: a, b; groups: x (2), y (0)' -- said whenever a selection finds
    nothing; a long list is cut ('a, b, ... and 9,980 more'), `orch inventory list` shows it all."""
    board_text = _listed(boards)
    group_text = _listed([f"{name} ({len(members)})" for name, members in groups.items()])
    text = f"the inventory has boards: {board_text}; groups: {group_text}"
    if len(boards) > MAX_LISTED or len(groups) > MAX_LISTED:
        text += " (`orch inventory list` shows them all)"
    return text


def _nothing(message: str, boards: Sequence[str], groups: Mapping[str, Sequence[str]]) -> UsageError:
    return UsageError(f"{message}; {describe_inventory(boards, groups)}", hint=_HINT)


def match_term(term: str, boards: Sequence[str], groups: Mapping[str, Sequence[str]]) -> set[str]:
    """The boards one pattern term names. An unknown plain name is an error, a glob may match nothing."""
    if term in ALL_NAMES:
        return set(boards)
    if term in groups:
        return set(groups[term])
    if term in boards:
        return {term}
    if _GLOB_CHARS.search(term):
        matched = {name for name in boards if fnmatch.fnmatchcase(name, term)}
        for group, members in groups.items():
            if fnmatch.fnmatchcase(group, term):
                matched.update(members)
        return matched
    suggestion = _suggest(term, [*boards, *groups])
    raise _nothing(f"--limit: '{term}' is neither a board nor a group{suggestion}", boards, groups)


def match_pattern(pattern: str, boards: Sequence[str], groups: Mapping[str, Sequence[str]]) -> set[str]:
    """The boards an Ansible-style pattern selects (a set; callers restore inventory order)."""
    terms = [term.strip() for term in re.split(r"[:,]", pattern) if term.strip()]
    if not terms:
        raise UsageError(
            f"--limit {pattern!r}: the pattern names no board or group", hint="e.g. --limit 'rpis:!pi01'"
        )
    for term in terms:
        if term[0] in "&!" and not term[1:].strip():
            operation = "intersect with" if term[0] == "&" else "exclude"
            raise UsageError(
                f"--limit {pattern!r}: '{term[0]}' must be followed by the board or group to {operation}",
                hint="e.g. --limit 'rpis:&fast' or --limit 'rpis:!pi01'",
            )
        if term[0] in "&!" and term[1] in "&!":
            raise UsageError(
                f"--limit {pattern!r}: '{term}' has two operators; use one per term",
                hint="e.g. --limit 'rpis:&fast:!pi01'",
            )
    terms = [term[0] + term[1:].strip() if term[0] in "&!" else term for term in terms]
    plain = [term for term in terms if term[0] not in "&!"]
    selected: set[str] = set()
    for term in plain:
        selected |= match_term(term, boards, groups)
    if not plain:
        selected = set(boards)
    for term in terms:
        if term.startswith("&"):
            selected &= match_term(term[1:], boards, groups)
    for term in terms:
        if term.startswith("!"):
            selected -= match_term(term[1:], boards, groups)
    return selected


@dataclass(frozen=True, kw_only=True)
class Wanted:
    """The selection options as given: --host, --group, --all-devices, --limit."""

    hosts: Sequence[str] = ()
    groups: Sequence[str] = ()
    all_devices: bool = False
    limit: str | None = None

    @property
    def named(self) -> bool:
        """Boards were named by --host, --group or --all-devices (--limit then narrows them)."""
        return bool(self.hosts or self.groups or self.all_devices)

    def shown(self) -> str:
        return " ".join(
            [*(f"--host {h}" for h in self.hosts), *(f"--group {g}" for g in self.groups)]
            + (["--all-devices"] if self.all_devices else [])
            + ([f"--limit '{self.limit}'"] if self.limit is not None else [])
        )


def select_names(*, boards: Sequence[str], groups: Mapping[str, Sequence[str]], wanted: Wanted) -> list[str]:
    """Union of hosts, groups and all_devices, restricted by limit (or chosen by it alone).

    Returns board names in inventory order without duplicates; selecting nothing is a
    ``UsageError`` that lists the boards and groups that exist.
    """
    if not wanted.named and wanted.limit is None:
        raise _nothing("no boards selected", boards, groups)
    chosen = _named(boards, groups, wanted)
    if wanted.limit is not None:
        limited = match_pattern(wanted.limit, boards, groups)
        chosen = chosen & limited if wanted.named else limited
    if not chosen:
        raise _nothing(f"{wanted.shown()} selects no board", boards, groups)
    return [name for name in boards if name in chosen]


def _named(boards: Sequence[str], groups: Mapping[str, Sequence[str]], wanted: Wanted) -> set[str]:
    """The boards --host, --group and --all-devices name; an unknown name is an error."""
    chosen: set[str] = set()
    for name in wanted.hosts:
        if name not in boards:
            raise _nothing(f"--host: no board named '{name}'{_suggest(name, boards)}", boards, groups)
        chosen.add(name)
    for name in wanted.groups:
        if name in ALL_NAMES:
            chosen.update(boards)
            continue
        if name not in groups:
            raise _nothing(f"--group: no group named '{name}'{_suggest(name, list(groups))}", boards, groups)
        chosen.update(groups[name])
    if wanted.all_devices:
        chosen.update(boards)
    return chosen
