"""`orch results`: list, show, compare and export stored benchmark results."""

from __future__ import annotations

import argparse

from orchestrator.errors import UsageError

NAME = "results"
HELP = "list, show, compare and export stored benchmark results"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    raise UsageError("`orch results` is not built yet")
