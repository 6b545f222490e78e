"""The one rich Console of the project.

Human output (progress, tables, messages) goes to stderr so that ``--json`` can
print exactly one JSON document on stdout.
"""

from __future__ import annotations

import json
import os
import sys
from typing import Any, TextIO

from rich.console import Console


class _Console(Console):
    def on_broken_pipe(self) -> None:
        """The reader of stderr went away (``orch inventory list 2>&1 | head -1``): end as for a
        closed stdout (``cli.main`` exits 141), not with rich's own exit status 1."""
        quiet_stdout()
        _to_devnull(sys.stderr)
        raise BrokenPipeError


console = _Console(stderr=True, highlight=False)


def quiet_stdout() -> None:
    """After a broken pipe: stdout goes to /dev/null, so nothing (not the interpreter's last flush)
    complains about the reader that went away."""
    _to_devnull(sys.stdout)


def _to_devnull(stream: TextIO) -> None:
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, stream.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass  # already closed or not a real file: nothing left to quiet


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
