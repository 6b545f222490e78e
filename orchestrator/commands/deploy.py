"""`orch deploy`: push a wheel and models to boards over SSH and install them."""

from __future__ import annotations

import argparse

from orchestrator.errors import UsageError

NAME = "deploy"
HELP = "push a wheel and models to boards over SSH and install them"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    raise UsageError("`orch deploy` is not built yet")
