"""`orch demo`: the whole job on the lab: lab up, build, deploy stock+tuned, bench A/B, report."""

from __future__ import annotations

import argparse

from orchestrator.errors import UsageError

NAME = "demo"
HELP = "the whole job on the lab: lab up, build, deploy stock+tuned, bench A/B, report"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    raise UsageError("`orch demo` is not built yet")
