"""`orch bench`: run on-device benchmarks on boards in parallel and compare."""

from __future__ import annotations

import argparse

from orchestrator.errors import UsageError

NAME = "bench"
HELP = "run on-device benchmarks on boards in parallel and compare"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    raise UsageError("`orch bench` is not built yet")
