"""`orch report`: write an HTML report with plots for a benchmark run."""

from __future__ import annotations

import argparse

from orchestrator.errors import UsageError

NAME = "report"
HELP = "write an HTML report with plots for a benchmark run"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    raise UsageError("`orch report` is not built yet")
