"""The build's log: every line written to a file, ninja's ``[n/N]`` fed to a progress callback,
and the first line of a failed build's log that names the error."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TextIO

Log = Callable[[str], None]
Progress = Callable[[int, int], None]
NINJA_PROGRESS = re.compile(r"^\[(\d+)/(\d+)\]")
# What ninja prints when it checks CMake's CONFIGURE_DEPENDS globs before building ORT's tree: no
# build step (an unchanged rebuild prints only this, then "no work to do").
GLOB_CHECK = "Re-checking globbed directories..."


def ninja_step(line: str) -> re.Match[str] | None:
    """ninja's ``[n/N]`` of a build step, None for any other line (the glob check included)."""
    match = NINJA_PROGRESS.match(line)
    return None if match is None or line.endswith(GLOB_CHECK) else match


# The first line that names the failure, in the order a human would look for it.
_ERROR_PATTERNS = (
    re.compile(r"(?:^|\s)(?:fatal )?error:", re.IGNORECASE),
    re.compile(r"^CMake Error"),
    re.compile(r"^FAILED:"),
    re.compile(r"undefined reference to"),
    re.compile(r"^Traceback"),
)


def first_error(lines: list[str]) -> str | None:
    """The first line of a failed build's log that names the error (compiler, CMake, ninja, Python)."""
    for pattern in _ERROR_PATTERNS:
        for index, line in enumerate(lines):
            if pattern.search(line):
                # A CMake error's text is on the following lines.
                extra = (
                    [x for x in lines[index + 1 : index + 4] if x.strip()]
                    if line.startswith("CMake Error")
                    else []
                )
                return "\n".join([line.strip(), *(x.strip() for x in extra)])
    return None


class LogSink:
    """Writes every line to the log file, feeds ninja's [n/N] to a progress callback, keeps a tail."""

    def __init__(self, handle: TextIO, progress: Progress | None, echo: Log | None) -> None:
        self.handle = handle
        self.progress = progress
        self.echo = echo
        self.lines: list[str] = []

    def __call__(self, line: str) -> None:
        self.handle.write(line + "\n")
        self.handle.flush()
        self.lines.append(line)
        match = ninja_step(line)
        if match and self.progress:
            self.progress(int(match.group(1)), int(match.group(2)))
        elif self.echo and not match:
            self.echo(line)
