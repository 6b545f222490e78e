"""One round trip to a board before a deploy, through a session: ``read_survey`` sends the survey
script and parses what it printed. The script, its marker and its parser are pure and live in
``orchestrator.deploy.survey_format`` (what the deploy plan reads).
"""

from __future__ import annotations

from orchestrator.adapters.session import BoardSession
from orchestrator.board import Board
from orchestrator.deploy.release_listing import Layout
from orchestrator.deploy.survey_format import MARK, Survey, parse_survey, survey_args, survey_script

# The pure names (orchestrator.deploy.survey_format) stay importable from here, beside read_survey.
__all__ = ["MARK", "Survey", "parse_survey", "read_survey", "survey_args", "survey_script"]


def read_survey(session: BoardSession, board: Board, layout: Layout) -> Survey:
    result = session.run_script(survey_script(), survey_args(board, layout), timeout=120)
    return parse_survey(result.stdout, board=board.name, python=board.python)
