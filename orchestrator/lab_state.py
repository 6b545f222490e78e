"""The lab's record of its running boards, and the boards it adds to every inventory.

``orch lab up`` writes ``$ORCH_HOME/lab/state.json``; the inventory reads it so lab
boards appear in a ``lab`` group without the user editing files. Pure file I/O: no
Docker here, so loading an inventory never needs the Docker engine.

state.json::

    {"user": "root", "identity_file": "/root/.orch/lab/id_ed25519",
     "boards": [{"name": "lab1", "port": 22001, "container": "orch-lab-1a2b-lab1",
                 "target": "lab", "workdir": "orch", "build_tools": false}]}
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from orchestrator.board import Board
from orchestrator.paths import orch_home

LAB_GROUP = "lab"
LAB_HOSTNAME = "127.0.0.1"


@dataclass(frozen=True, kw_only=True)
class LabBoardRecord:
    name: str
    port: int
    container: str
    target: str = "lab"
    workdir: str = "orch"
    # Made with `orch lab up --build-tools`: it carries a native C++ toolchain (CMake, Ninja, g++).
    build_tools: bool = False


@dataclass(frozen=True, kw_only=True)
class LabState:
    user: str
    identity_file: Path
    boards: tuple[LabBoardRecord, ...]


def lab_dir() -> Path:
    path = orch_home() / "lab"
    path.mkdir(parents=True, exist_ok=True)
    return path


def state_path() -> Path:
    return lab_dir() / "state.json"


def read_state() -> LabState | None:
    path = state_path()
    if not path.exists():
        return None
    data = json.loads(path.read_text())
    return LabState(
        user=data["user"],
        identity_file=Path(data["identity_file"]),
        boards=tuple(LabBoardRecord(**board) for board in data["boards"]),
    )


def write_state(state: LabState) -> None:
    """Write atomically: a reader never sees half a file."""
    path = state_path()
    document = {
        "user": state.user,
        "identity_file": str(state.identity_file),
        "boards": [vars(board) for board in state.boards],
    }
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(document, indent=2))
    os.replace(tmp, path)


def clear_state() -> None:
    state_path().unlink(missing_ok=True)


def lab_boards() -> list[Board]:
    """The running lab's boards as inventory boards (empty when no lab is up)."""
    state = read_state()
    if state is None:
        return []
    origin = f"lab ({state_path()})"
    return [
        Board(
            name=record.name,
            hostname=LAB_HOSTNAME,
            port=record.port,
            user=state.user,
            identity_file=state.identity_file,
            target=record.target,
            workdir=record.workdir,
            # A board emulating a profile (``orch lab up --board rpi5:1``) is also in the profile's group.
            groups=(LAB_GROUP,) if record.target == LAB_GROUP else (LAB_GROUP, record.target),
            tags=("lab", "emulated"),
            sources={
                key: origin for key in ("hostname", "port", "user", "identity_file", "target", "workdir")
            },
        )
        for record in state.boards
    ]
