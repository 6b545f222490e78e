"""The results store's index (``index.sqlite``): its schema, one transaction per ``with`` block,
and the check that an existing file is still orch's index. The JSON files are the record; the
index only ever holds what they hold (``results.ResultStore.reindex`` rebuilds it)."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

# SQLite serialises writers itself; the lock keeps this process's threads from racing on schema setup.
index_lock = threading.Lock()

SCHEMA_SQL = """
CREATE TABLE IF NOT EXISTS runs (
    run_id TEXT PRIMARY KEY, created TEXT, command TEXT, status TEXT,
    boards_ok INTEGER DEFAULT 0, boards_failed INTEGER DEFAULT 0
);
CREATE TABLE IF NOT EXISTS boards (
    run_id TEXT, board TEXT, status TEXT, error TEXT, path TEXT, ort_version TEXT, kernel TEXT,
    PRIMARY KEY (run_id, board)
);
CREATE TABLE IF NOT EXISTS series (
    run_id TEXT, board TEXT, label TEXT, variant TEXT, release TEXT, model TEXT, quant TEXT, ep TEXT,
    opt_level TEXT, intra_threads INTEGER, inter_threads INTEGER, n INTEGER, p50_ms REAL, p90_ms REAL,
    p99_ms REAL, mean_ms REAL, std_ms REAL
);
CREATE INDEX IF NOT EXISTS series_run ON series (run_id, board);
CREATE TABLE IF NOT EXISTS damaged (path TEXT PRIMARY KEY, reason TEXT);
"""


class IndexConnection:
    """``with`` block = one transaction on the index, committed on success."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __enter__(self) -> sqlite3.Connection:
        index_lock.acquire()
        try:
            self.db = sqlite3.connect(self.path, timeout=30)
            self.db.executescript(SCHEMA_SQL)
        except BaseException:
            index_lock.release()
            raise
        return self.db

    def __exit__(self, kind: object, value: object, tb: object) -> None:
        try:
            if kind is None:
                self.db.commit()
            self.db.close()
        finally:
            index_lock.release()


TABLE_COLUMNS = {
    "runs": {"run_id", "created", "command", "status", "boards_ok", "boards_failed"},
    "boards": {"run_id", "board", "status", "error", "path", "ort_version", "kernel"},
    "damaged": {"path", "reason"},
    "series": {
        "run_id", "board", "label", "variant", "release", "model", "quant", "ep", "opt_level",
        "intra_threads", "inter_threads", "n", "p50_ms", "p90_ms", "p99_ms", "mean_ms", "std_ms",
    },
}  # fmt: skip


def index_problem(index: Path) -> str | None:
    """Why index.sqlite cannot serve as orch's index, or None."""
    try:
        db = sqlite3.connect(f"file:{index}?mode=ro", uri=True, timeout=30)
        try:
            if db.execute("PRAGMA quick_check").fetchone() != ("ok",):
                return "the SQLite file fails its integrity check"
            for table, columns in TABLE_COLUMNS.items():
                found = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
                if found and found != columns:
                    return f"table '{table}' has other columns than orch's ({', '.join(sorted(found))})"
        finally:
            db.close()
    except sqlite3.DatabaseError as error:
        return f"not a usable SQLite database ({error})"
    return None


def free_name(path: Path) -> Path:
    candidate, number = path, 1
    while candidate.exists():
        number += 1
        candidate = path.with_name(f"{path.name}.{number}")
    return candidate
