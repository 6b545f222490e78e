"""How a stored bench run stands: finished (``ok``, ``failed``), ``interrupted`` (orch was stopped and
stored what it had measured), still ``running``, or ``abandoned`` (the orch that ran it is gone
without finishing it: killed, or its machine went down).

A run in progress has a ``running`` file in its directory naming the orch process (host, pid and the
process's start time, so that a pid the system gave to another process since is not taken for it).
``finish_run`` removes it. A run without ``run.json`` whose process is gone is ``abandoned``; one
whose process runs on another machine cannot be checked and stays ``running``, saying where.
Only ``ok`` and ``failed`` runs are complete: the others' data is partial, and a comparison uses
it only when asked to (``--allow-partial``).
"""

from __future__ import annotations

import json
import os
import socket
from pathlib import Path
from typing import Literal, cast

from orchestrator.bench.reading import check
from orchestrator.bench.records import Owner

RUNNING_FILE = "running"  # no .json: never read as a board's record
RunStatus = Literal["ok", "failed", "interrupted", "running", "abandoned"]
COMPLETE: frozenset[str] = frozenset({"ok", "failed"})


def _start_ticks(pid: int) -> int | None:
    """When process ``pid`` started (clock ticks after boot, /proc), or None where that is unknown."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat:
            return int(stat.read().rsplit(")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


def owner_document() -> Owner:
    """This orch process, as a run in progress records it."""
    pid = os.getpid()
    return {"host": socket.gethostname(), "pid": pid, "start_ticks": _start_ticks(pid)}


def write_owner(run_dir: Path) -> None:
    (run_dir / RUNNING_FILE).write_text(json.dumps(owner_document()) + "\n", encoding="utf-8")


def remove_owner(run_dir: Path) -> None:
    (run_dir / RUNNING_FILE).unlink(missing_ok=True)


def read_owner(run_dir: Path) -> Owner | None:
    """The run's owner, or None when the file is gone or not one (a malformed owner is no owner)."""
    try:
        document = json.loads((run_dir / RUNNING_FILE).read_text(encoding="utf-8"))
        kinds = (("host", "text"), ("pid", "integer"), ("start_ticks", "integer?"))
        return cast(Owner, check(document, RUNNING_FILE, (), kinds))
    except (OSError, ValueError):  # Malformed is a ValueError, as JSON's errors are
        return None


def owner_alive(owner: Owner | None) -> bool | None:
    """Whether the recorded orch process still runs: None when it runs elsewhere (cannot be told)."""
    if owner is None:
        return False
    if owner.get("host") != socket.gethostname():
        return None
    pid = owner.get("pid", 0)
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass  # another user's process: it exists
    recorded = owner.get("start_ticks")
    return recorded is None or _start_ticks(pid) in (None, recorded)


def unfinished_status(run_dir: Path) -> RunStatus:
    """The status of a run without ``run.json``: running while its orch runs, else abandoned."""
    return "abandoned" if owner_alive(read_owner(run_dir)) is False else "running"


def describe_owner(run_dir: Path) -> str:
    """Where a run in progress runs ("" when unknown)."""
    owner = read_owner(run_dir)
    if owner is None:
        return ""
    return f"orch pid {owner.get('pid')} on {owner.get('host')}"
