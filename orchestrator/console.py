"""The one rich Console of the project.

Human output (progress, tables, messages) goes to stderr so that ``--json`` can
print exactly one JSON document on stdout.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any

from rich.console import Console


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """The reader of stderr went away (``orch inventory list 2>&1 | head -1``): end as for a
        closed stdout (``cli.main`` exits 141), not with rich's own exit status 1."""
        quiet_stdout()
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stderr.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass
        raise BrokenPipeError


console = _Console(stderr=True, highlight=False)


def quiet_stdout() -> None:
    """After a broken pipe: stdout goes to /dev/null, so nothing (not the interpreter's last flush)
    complains about the reader that went away."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass


def emit_json(document: Any) -> None:
    """Print one JSON document on stdout (the machine-readable result of a command).

    A reader that closes the pipe early (``| head``) raises BrokenPipeError, which ``cli.main``
    turns into the quiet exit status a shell expects (141)."""
    text = json.dumps(document, indent=2, sort_keys=True, default=str)
    try:
        sys.stdout.write(text + "\n")
        sys.stdout.flush()
    except BrokenPipeError:
        quiet_stdout()
        raise
