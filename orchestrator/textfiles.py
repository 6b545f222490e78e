"""Reading the user's small text files (inventory, ssh_config, known_hosts, variants) safely.

A path may name something that never ends (``-i /dev/zero``, a FIFO) or a huge file by mistake:
``read_capped`` reads at most ``limit`` bytes and says whether there was more, so the caller can
refuse it by name instead of reading until memory runs out.
"""

from __future__ import annotations

from pathlib import Path

# Far larger than any inventory, ssh_config or known_hosts written by hand (a 10,000-board
# inventory is about 1 MB).
TEXT_FILE_LIMIT = 64 << 20


def read_capped(path: Path, limit: int = TEXT_FILE_LIMIT) -> tuple[bytes, bool]:
    """(the first ``limit`` bytes, whether the file holds more). Raises OSError like ``open``."""
    with Path(path).open("rb") as handle:
        data = handle.read(limit + 1)
    return data[:limit], len(data) > limit
