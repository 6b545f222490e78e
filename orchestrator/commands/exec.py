"""`orch exec`: run a command on the selected boards in parallel."""

from __future__ import annotations

import argparse

from orchestrator.errors import UsageError

NAME = "exec"
HELP = "run a command on the selected boards in parallel"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    raise UsageError("`orch exec` is not built yet")
