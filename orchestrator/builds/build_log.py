"""The build's log: every line written to a file, ninja's ``[n/N]`` fed to a progress callback,
and the first line of a failed build's log that names the error."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import TextIO

from orchestrator.errors import BuildError

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


# ORT's configure drops `--enable_lto` with nothing but this warning when CMake's IPO check fails
# (cmake/adjust_global_compile_flags.cmake): the compile would then run for an hour without LTO.
IPO_UNSUPPORTED = "IPO is not supported by this compiler"


def lto_dropped(line: str) -> str | None:
    """Why a build of an LTO variant stops at this configure line, or None."""
    if IPO_UNSUPPORTED not in line:
        return None
    return (
        "CMake's IPO check failed in ORT's configure, so ORT would build this variant without the LTO"
        " it asks for (--enable_lto): stopped before compiling"
    )


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
    """Writes every line to the log file, feeds ninja's [n/N] to a progress callback, keeps a tail;
    ``stop_at`` ends the build at a line that makes the rest pointless."""

    def __init__(
        self,
        handle: TextIO,
        progress: Progress | None,
        echo: Log | None,
        stop_at: Callable[[str], str | None] | None = None,
    ) -> None:
        self.handle = handle
        self.progress = progress
        self.echo = echo
        self.stop_at = stop_at  # a line that makes the rest of the build pointless: why, or None
        self.lines: list[str] = []

    def __call__(self, line: str) -> None:
        self.handle.write(line + "\n")
        self.handle.flush()
        self.lines.append(line)
        reason = self.stop_at(line) if self.stop_at else None
        if reason:
            # Raised while the engine streams: the engine kills and removes the build container.
            raise BuildError(reason, hint=f"full log: {getattr(self.handle, 'name', 'the build log')}")
        match = ninja_step(line)
        if match and self.progress:
            self.progress(int(match.group(1)), int(match.group(2)))
        elif self.echo and not match:
            self.echo(line)
