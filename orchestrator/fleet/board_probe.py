"""A board's facts read through a session: ``board_side/board_facts.sh`` run on the board, its output
parsed by ``orchestrator.fleet.board_facts`` (pure, without a board)."""

from __future__ import annotations

from orchestrator.adapters.session import BoardSession
from orchestrator.board import Board
from orchestrator.board_side import read_text
from orchestrator.fleet.board_facts import BoardFacts, parse_facts


def read_facts(session: BoardSession, board: Board, workdir: str) -> BoardFacts:
    """Run board_facts.sh through a board session (``BoardSession``) and parse it."""
    result = session.run_script(read_text("board_facts.sh"), (board.python, workdir), timeout=120)
    return parse_facts(result.stdout, board=board.name, python=board.python)
