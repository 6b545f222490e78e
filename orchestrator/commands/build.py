"""`orch build`: cross-compile ONNX Runtime for a target in a Docker build container."""

from __future__ import annotations

import argparse

from orchestrator.errors import UsageError

NAME = "build"
HELP = "cross-compile ONNX Runtime for a target in a Docker build container"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    pass


def run(args: argparse.Namespace) -> int:
    raise UsageError("`orch build` is not built yet")
