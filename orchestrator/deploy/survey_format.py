"""One round trip to a board before a deploy: the script that reads its facts and its releases, and
that script's output parsed. Pure: the session that sends it is ``orchestrator.deploy.survey``'s.

``board_facts.sh`` and ``list_releases.sh`` stay two files (each is read on its own elsewhere:
the lab's health check, ``orch bench``'s release lookup); a deploy sends them as one script,
the facts first, then a marker line, then the listing, and splits the output at the marker.
An unchanged re-deploy then needs nothing else from the board: the listing holds the current
release and the record of its verification (``verified.json``).
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.board import Board
from orchestrator.board_side import read_text
from orchestrator.deploy.release_listing import Layout, Listing, parse_listing
from orchestrator.errors import RemoteError
from orchestrator.fleet.board_facts import BoardFacts, parse_facts

MARK = "--- orch releases ---"


@dataclass(frozen=True, kw_only=True)
class Survey:
    """What one script read from the board."""

    facts: BoardFacts
    listing: Listing


def survey_script() -> str:
    """board_facts.sh ($1 = python, $2 = workdir, kept in $workdir), the marker, list_releases.sh
    with its $1 set to that workdir."""
    return "\n".join(
        (
            read_text("board_facts.sh"),
            f"printf '%s\\n' '{MARK}'",
            'set -- "$workdir"',
            read_text("list_releases.sh"),
        )
    )


def parse_survey(text: str, *, board: str, python: str = "python3") -> Survey:
    """Pure: the script's output -> facts and listing."""
    facts_text, mark, listing_text = text.partition(f"\n{MARK}\n")
    if not mark:
        raise RemoteError(f"{board}: the board's survey ended early (no release listing): {text[-300:]!r}")
    return Survey(
        facts=parse_facts(facts_text, board=board, python=python), listing=parse_listing(listing_text)
    )


def survey_args(board: Board, layout: Layout) -> tuple[str, str]:
    """The survey script's positional args: the board's python and workdir."""
    return (board.python, layout.workdir)
