"""`orch lab`: start, inspect and stop the lab of emulated aarch64 boards."""

from __future__ import annotations

import argparse

from orchestrator.errors import UsageError

NAME = "lab"
HELP = "start, inspect and stop the lab of emulated aarch64 boards"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    raise UsageError("`orch lab` is not built yet")
