"""Releases on a board, through a session: listing them, the atomic `current` switch, pruning.

Each function runs one of the fixed board-side scripts (``orchestrator/board_side/*.sh``) through
``orchestrator.adapters.session``, its values passed as quoted positional args. The on-board layout,
the listing's parser and the choices (rollback, prune) are pure and live in
``orchestrator.deploy.release_listing``.
"""

from __future__ import annotations

import posixpath
import secrets
from collections.abc import Iterable
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from orchestrator.adapters.session import BoardSession
from orchestrator.board_side import read_text
from orchestrator.deploy.release_listing import (
    RELEASE_JSON,
    Layout,
    Listing,
    ReleaseInfo,
    ReleaseSummary,
    VerifiedRecord,
    choose_rollback,
    layout_for,
    make_release_id,
    normalize_workdir,
    parse_listing,
    recency,
    releases_to_prune,
)
from orchestrator.errors import DeployError

if TYPE_CHECKING:
    from orchestrator.board import Board

# The pure names (orchestrator.deploy.release_listing) stay importable from here, beside the
# functions that reach the board.
__all__ = [
    "RELEASE_JSON",
    "Layout",
    "Listing",
    "ReleaseInfo",
    "ReleaseSummary",
    "VerifiedRecord",
    "choose_rollback",
    "layout_for",
    "list_releases",
    "make_release_id",
    "normalize_workdir",
    "parse_listing",
    "prune",
    "read_listing",
    "recency",
    "releases_to_prune",
    "switch_current",
]


def read_listing(session: BoardSession, layout: Layout) -> Listing:
    result = session.run_script(read_text("list_releases.sh"), (layout.workdir,), timeout=120)
    return parse_listing(result.stdout)


def list_releases(session: BoardSession, board: Board) -> list[ReleaseInfo]:
    """Complete releases on a board, least recently used first; ``current`` marks the live one."""
    return list(read_listing(session, layout_for(board)).releases)


def switch_current(session: BoardSession, layout: Layout, release_id: str) -> None:
    """Point ``current`` at a complete, verified release atomically (under the board lock), and
    record the switch for rollback.

    The link is made under a temporary name and renamed over ``current``: rename(2) replaces it
    atomically, so a reader sees the old release or the new one, never neither. The board-side
    script refuses a release without ``verified.json`` and removes the temporary links of an
    interrupted earlier switch."""
    tmp_name = f".current.{secrets.token_hex(4)}"
    result = session.run_script(
        read_text("switch_current.sh"), (layout.workdir, release_id, tmp_name), timeout=60, check=False
    )
    if result.exit_code != 0:
        raise DeployError(f"cannot switch to {release_id}: {result.stderr.strip() or result.stdout.strip()}")
    session.rename(posixpath.join(layout.workdir, tmp_name), layout.current)
    now = datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    session.run_script(read_text("record_switch.sh"), (layout.workdir, release_id, now), timeout=60)


def prune(session: BoardSession, layout: Layout, release_ids: Iterable[str]) -> None:
    """Delete ``release_ids``, then the store contents that no release links any more."""
    session.run_script(read_text("prune_releases.sh"), (layout.workdir, *release_ids), timeout=600)
