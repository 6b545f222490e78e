"""The sha256 of a file: how orch names wheels, models, patches and sources by content."""

from __future__ import annotations

import hashlib
import threading
from pathlib import Path

_hash_cache: dict[tuple[str, int, int], str] = {}


_hash_lock = threading.Lock()


def file_sha256(path: Path) -> str:
    """sha256 of a file, remembered by (path, size, mtime): big wheels are hashed once per run."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    with _hash_lock:
        if key in _hash_cache:
            return _hash_cache[key]
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    with _hash_lock:
        _hash_cache[key] = digest.hexdigest()
    return digest.hexdigest()
