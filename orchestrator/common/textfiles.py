"""Reading the user's small text files (inventory, ssh_config, known_hosts, variants) safely.

A path may name something that never ends (``-i /dev/zero``, a FIFO) or a huge file by mistake:
``read_capped`` reads at most ``limit`` bytes and says whether there was more, so the caller can
refuse it by name instead of reading until memory runs out. ``read_pipe_capped`` reads a named
pipe the same way (``-i <(cmd)``, ``/dev/stdin`` fed by a pipe) without waiting for ever for a
writer that never comes.
"""

from __future__ import annotations

import os
import select
from pathlib import Path

# Far larger than any inventory, ssh_config or known_hosts written by hand (a 10,000-board
# inventory is about 1 MB).
TEXT_FILE_LIMIT = 64 << 20


def read_capped(path: Path, limit: int = TEXT_FILE_LIMIT) -> tuple[bytes, bool]:
    """(the first ``limit`` bytes, whether the file holds more). Raises OSError like ``open``."""
    with Path(path).open("rb") as handle:
        data = handle.read(limit + 1)
    return data[:limit], len(data) > limit


def read_pipe_capped(path: Path, wait: float, limit: int = TEXT_FILE_LIMIT) -> tuple[bytes, bool] | None:
    """A named pipe's contents as ``read_capped`` gives a file's, or None when no writer wrote to it
    (or closed it) within ``wait`` seconds. Opened without blocking: opening a pipe that has no writer
    waits for one, for ever. Once its first bytes came, it is read to its end (the writer's close).
    Raises OSError like ``open``."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        if not poller.poll(max(0, int(wait * 1000))):  # a pipe no writer opened yet: no POLLHUP
            return None
        os.set_blocking(fd, True)
        chunks: list[bytes] = []
        size = 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    data = b"".join(chunks)
    return data[:limit], len(data) > limit
