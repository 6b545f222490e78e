"""The one rich Console of the project.

Human output (progress, tables, messages) goes to stderr so that ``--json`` can
print exactly one JSON document on stdout.
"""

from __future__ import annotations

import json
import sys
from typing import Any

from rich.console import Console

console = Console(stderr=True, highlight=False)


def emit_json(document: Any) -> None:
    """Print one JSON document on stdout (the machine-readable result of a command)."""
    json.dump(document, sys.stdout, indent=2, sort_keys=True, default=str)
    sys.stdout.write("\n")
    sys.stdout.flush()
