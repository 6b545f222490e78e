"""`orch doctor`: check Docker, aarch64 emulation, SSH keys and disk space."""

from __future__ import annotations

import argparse

from orchestrator.errors import UsageError

NAME = "doctor"
HELP = "check Docker, aarch64 emulation, SSH keys and disk space"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    raise UsageError("`orch doctor` is not built yet")
