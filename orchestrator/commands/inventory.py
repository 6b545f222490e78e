"""`orch inventory`: list the boards of the inventory or show one board's resolved variables."""

from __future__ import annotations

import argparse

from orchestrator.errors import UsageError

NAME = "inventory"
HELP = "list the boards of the inventory or show one board's resolved variables"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    raise UsageError("`orch inventory` is not built yet")
