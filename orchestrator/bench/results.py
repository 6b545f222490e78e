"""The results store: every bench run's raw samples and metadata, on the workstation, never overwritten.

Layout (root = ``orchestrator.paths.results_dir()``, ``./results`` by default)::

    results/
      index.sqlite              runs, per-board outcomes and per-series summaries, for listing and queries
      <run-id>/
        <board>.json            one per board: raw latencies of every agent run + all metadata (or the error)
        run.json                the run's command line, options and per-board outcome (written at the end,
                                or when orch is interrupted: status "interrupted")
        running                 while the run goes on: which orch process runs it (``run_state``)

The JSON files are the record; the index is derived from them (``reindex()`` rebuilds it) so a
lost or damaged index loses nothing. Each file is read in one place, ``_read``: its JSON, then its
format (``records``, checked by ``reading``); a file that is neither is a ``Damaged`` one, named with
what is wrong in it (``measurements[0].key: key 'release' is missing``), and left as it is. Files are created with mode ``x``: a name that exists is an
error, never an overwrite.
"""

from __future__ import annotations

import glob
import json
import re
import secrets
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import TypedDict, TypeVar

from orchestrator.bench import reading, run_state, stats
from orchestrator.bench.records import (
    BOARD_SCHEMA,  # noqa: F401  (the tag, known to scripts as results.BOARD_SCHEMA)
    BoardRecord,
    RunMeta,
    SummaryRecord,
)
from orchestrator.bench.results_index import IndexConnection, free_name, index_problem
from orchestrator.bench.series import KeyColumns, Series, series_of
from orchestrator.errors import UsageError
from orchestrator.paths import results_dir

RUN_FILE = "run.json"
# Instruction-count runs (`orch bench --metric instructions`): one JSON file each, in this folder.
COUNTS_DIR = "instructions"
INDEX_FILE = "index.sqlite"


def new_run_id(now: datetime | None = None) -> str:
    """Sortable and unique: ``20261129-201530-3f2a`` (UTC time + random suffix)."""
    now = now or datetime.now(timezone.utc)
    return f"{now:%Y%m%d-%H%M%S}-{secrets.token_hex(2)}"


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def board_file_name(board: str) -> str:
    """A board name made safe as a file name (inventory names may hold anything)."""
    safe = re.sub(r"[^A-Za-z0-9._-]", "_", board).lstrip(".") or "board"
    return f"{safe}.json" if safe != "run" else "board_run.json"


class RunListing(TypedDict):
    """A run as `orch results list` shows it (from the index)."""

    run_id: str
    created: str
    command: str
    status: str
    boards_ok: int
    boards_failed: int
    boards: list[str]
    series: int


_Stored = TypeVar("_Stored")


@dataclass(frozen=True, kw_only=True)
class Damaged:
    """A file of the store that could not be used; it is left exactly as it is."""

    path: Path
    reason: str
    skipped: bool = True  # False: repaired without losing anything (a rebuilt index)

    def sentence(self) -> str:
        if self.skipped:
            return f"{self.path}: {self.reason}; skipped (the file is left as it is)"
        return f"{self.path}: {self.reason}"


@dataclass(frozen=True, kw_only=True)
class RunRecord:
    run_id: str
    path: Path
    meta: RunMeta
    boards: dict[str, BoardRecord]  # board name -> its record
    damaged: tuple[Damaged, ...] = ()  # files of this run that were skipped

    def series(self) -> list[Series]:
        found: list[Series] = []
        for doc in self.boards.values():
            found.extend(series_of(doc))
        return found

    @property
    def status(self) -> str:
        return str(self.meta.get("status") or "incomplete")

    @property
    def complete(self) -> bool:
        """A finished run (ok or failed): not interrupted, abandoned or still running."""
        return self.status in run_state.COMPLETE

    def partial_note(self) -> str:
        """Why this run's data is partial ("" for a complete run)."""
        if self.complete:
            return ""
        rounds = self.meta.get("rounds_complete")
        planned = self.meta.get("plan", {}).get("rounds")
        measured = f": {rounds} of {planned} rounds complete" if rounds is not None and planned else ""
        return f"run {self.run_id} is {self.status}{measured}; its data is partial"

    @property
    def failed(self) -> dict[str, str]:
        return {
            name: doc["error"] or "failed"
            for name, doc in self.boards.items()
            if doc["status"] not in ("ok", "interrupted")
        }


class ResultStore:
    """Writes and reads ``results/``; safe to use from the fleet's worker threads."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root is not None else results_dir()
        # Damaged files met so far (reported by the commands; a skipped one makes the exit code non-zero).
        self.damaged: list[Damaged] = []
        self._index_checked = False

    def _damaged(self, path: Path, reason: str, *, skipped: bool = True) -> Damaged:
        found = Damaged(path=path, reason=reason, skipped=skipped)
        if found not in self.damaged:
            self.damaged.append(found)
        return found

    # --- writing ------------------------------------------------------------------------
    def run_dir(self, run_id: str) -> Path:
        if not re.fullmatch(r"[A-Za-z0-9._-]+", run_id) or run_id.startswith("."):
            raise UsageError(f"not a run id: {run_id!r}")
        return self.root / run_id

    def begin_run(self, run_id: str, *, command: str) -> Path:
        path = self.run_dir(run_id)
        path.mkdir(parents=True, exist_ok=False)  # a run id is never reused
        run_state.write_owner(path)
        with self._index() as db:
            db.execute(
                "INSERT INTO runs (run_id, created, command, status) VALUES (?, ?, ?, 'running')",
                (run_id, utc_now(), command),
            )
        return path

    def write_board(self, run_id: str, document: BoardRecord) -> Path:
        """Store one board's record (status ok or failed) and index it."""
        path = self.run_dir(run_id) / board_file_name(document["board"])
        _write_new(path, document)
        try:  # indexed as it will be read back
            record = reading.board_record(document)
        except reading.Malformed as error:  # stored, but unreadable: named as every damaged file is
            self._damaged(path, str(error))
            return path
        self._index_board(run_id, record, path)
        return path

    def finish_run(self, run_id: str, meta: RunMeta) -> Path:
        path = self.run_dir(run_id) / RUN_FILE
        _write_new(path, meta)
        outcomes = [outcome.get("status") for outcome in meta.get("boards", {}).values()]
        ok = outcomes.count("ok")
        failed = len(outcomes) - ok - outcomes.count("interrupted")
        status = (
            meta.get("status") if meta.get("status") == "interrupted" else ("ok" if failed == 0 else "failed")
        )
        with self._index() as db:
            db.execute(
                "UPDATE runs SET status = ?, boards_ok = ?, boards_failed = ? WHERE run_id = ?",
                (status, ok, failed, run_id),
            )
        run_state.remove_owner(path.parent)
        return path

    # --- reading ------------------------------------------------------------------------
    def list_runs(self) -> list[RunListing]:
        if not self.root.is_dir():
            return []
        if not (self.root / INDEX_FILE).exists():
            self.reindex()
        with self._index() as db:
            # Files skipped when the index was rebuilt, still damaged: said every time, not only once.
            for path, reason in db.execute("SELECT path, reason FROM damaged ORDER BY path").fetchall():
                if Path(path).exists() and _read_problem(Path(path)) is not None:
                    self._damaged(Path(path), reason)
            rows = db.execute(
                "SELECT run_id, created, command, status, boards_ok, boards_failed FROM runs ORDER BY run_id"
            ).fetchall()
            result: list[RunListing] = []
            for run_id, created, command, stored, ok, failed in rows:
                # A run still "running" in the index whose orch is gone was abandoned.
                status = run_state.unfinished_status(self.root / run_id) if stored == "running" else stored
                boards = [
                    b
                    for (b,) in db.execute(
                        "SELECT board FROM boards WHERE run_id = ? ORDER BY board", (run_id,)
                    )
                ]
                n_series = db.execute("SELECT COUNT(*) FROM series WHERE run_id = ?", (run_id,)).fetchone()[0]
                result.append(
                    {
                        "run_id": run_id,
                        "created": created,
                        "command": command,
                        "status": status,
                        "boards_ok": ok,
                        "boards_failed": failed,
                        "boards": boards,
                        "series": n_series,
                    }
                )
        return result

    def resolve(self, ref: str) -> str:
        """A run id from 'latest', 'latest~1' (the one before), a full id or a unique prefix."""
        if not ref.strip():
            raise UsageError(
                "RUN is empty: name a run",
                hint="give a run id, a unique prefix of one, 'latest' or 'latest~N' (see `orch results list`)",
            )
        runs = sorted(p.name for p in self.root.glob("*") if _is_run(p)) if self.root.is_dir() else []
        if not runs:
            raise UsageError(f"no benchmark runs in {self.root}", hint="run `orch bench` first")
        match = re.fullmatch(r"latest(?:~(\d+))?", ref)
        if match:
            back = int(match.group(1) or 0)
            if back >= len(runs):
                raise UsageError(f"{ref}: there are only {len(runs)} runs")
            return runs[-1 - back]
        if ref in runs:
            return ref
        candidates = [run for run in runs if run.startswith(ref)]
        if len(candidates) == 1:
            return candidates[0]
        shown = ", ".join(runs[-5:])
        if not candidates:
            if any((self.root / COUNTS_DIR).glob(f"{glob.escape(ref)}*.json")):
                raise UsageError(
                    f"{ref!r} is an instruction-count run (in {self.root / COUNTS_DIR}), not a timed one",
                    hint=f"put it on a report page: orch report RUN --counts {ref}",
                )
            raise UsageError(
                f"no run {ref!r} in {self.root}", hint=f"recent runs: {shown} (see `orch results list`)"
            )
        raise UsageError(f"{ref!r} matches several runs: {', '.join(candidates)}")

    def load(self, ref: str) -> RunRecord:
        """A run's JSON files. A file that cannot be read, is not JSON or is not orch's (truncated,
        foreign, damaged) is skipped and recorded in ``damaged``; the others are used."""
        run_id = self.resolve(ref)
        path = self.run_dir(run_id)
        boards: dict[str, BoardRecord] = {}
        damaged: list[Damaged] = []
        for board_file in sorted(path.glob("*.json")):
            if board_file.name == RUN_FILE:
                continue
            board, problem = _read(board_file, reading.board_record)
            if board is None:
                damaged.append(self._damaged(board_file, problem))
                continue
            boards[board["board"]] = board
        meta_file = path / RUN_FILE
        meta: RunMeta = {"run_id": run_id, "status": run_state.unfinished_status(path)}
        if meta_file.exists():
            stored, problem = _read(meta_file, reading.run_meta)
            if stored is None:
                damaged.append(self._damaged(meta_file, problem))
                meta = {"run_id": run_id, "status": "damaged"}
            elif "status" not in stored:  # run.json of older orch: finished, its status from the boards
                ok = all(doc["status"] == "ok" for doc in boards.values())
                meta = {**stored, "status": "ok" if ok else "failed"}
            else:
                meta = stored
        return RunRecord(run_id=run_id, path=path, meta=meta, boards=boards, damaged=tuple(damaged))

    def reindex(self) -> None:
        """Rebuild index.sqlite from the JSON files (the record); damaged files are skipped."""
        index = self.root / INDEX_FILE
        index.unlink(missing_ok=True)
        self._index_checked = True
        for run_dir in sorted(p for p in self.root.glob("*") if p.is_dir()):
            if not _is_run(run_dir):
                continue  # not a run (a folder someone put here, the instruction counts)
            record = self.load(run_dir.name)
            with self._index() as db:
                db.execute(
                    "INSERT INTO runs (run_id, created, command, status) VALUES (?, ?, ?, ?)",
                    (
                        record.run_id,
                        record.meta.get("created", ""),
                        record.meta.get("command", ""),
                        record.meta.get("status", "incomplete"),
                    ),
                )
            for document in record.boards.values():
                self._index_board(record.run_id, document, run_dir / board_file_name(document["board"]))
            if RUN_FILE in {p.name for p in run_dir.iterdir()}:
                statuses = [d["status"] for d in record.boards.values()]
                ok = statuses.count("ok")
                failed = len(statuses) - ok - statuses.count("interrupted")
                # run.json does not hold the status: finish_run derived it from the outcomes.
                status = record.meta.get("status") or ("ok" if failed == 0 else "failed")
                with self._index() as db:
                    db.execute(
                        "UPDATE runs SET status = ?, boards_ok = ?, boards_failed = ? WHERE run_id = ?",
                        (status, ok, failed, record.run_id),
                    )
            if record.damaged:
                with self._index() as db:
                    db.executemany(
                        "INSERT OR REPLACE INTO damaged VALUES (?, ?)",
                        [(str(d.path), d.reason) for d in record.damaged],
                    )

    # --- index internals ----------------------------------------------------------------
    def _index(self) -> IndexConnection:
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise UsageError(
                f"{self.root}: cannot create the results directory: {error.strerror or error}",
                hint="point $ORCH_RESULTS at a writable directory",
            ) from error
        if not self._index_checked:
            self._index_checked = True
            self._check_index()
        return IndexConnection(self.root / INDEX_FILE)

    def _check_index(self) -> None:
        """A damaged index (not SQLite, truncated, another schema) is moved aside, never deleted,
        and rebuilt from the JSON files: it only ever holds what they hold."""
        index = self.root / INDEX_FILE
        if not index.exists():
            return
        problem = index_problem(index)
        if problem is None:
            return
        kept = free_name(index.with_name(INDEX_FILE + ".damaged"))
        try:
            index.rename(kept)
        except OSError as error:
            raise UsageError(
                f"{index}: the results index is damaged ({problem}) and cannot be moved aside: {error}",
                hint=f"move it away yourself; orch rebuilds it from the JSON files in {self.root}",
            ) from error
        self._damaged(index, f"{problem}; kept as {kept.name}, rebuilt from the run files", skipped=False)
        self.reindex()

    def _index_board(self, run_id: str, document: BoardRecord, path: Path) -> None:
        first = document["measurements"][0]["agent"] if document["measurements"] else {}
        ort_version = first.get("ort", {}).get("version")
        kernel = first.get("board", {}).get("before", {}).get("kernel")
        rows = []
        for series in series_of(document):
            summary = series.summary()
            key = series.key
            rows.append(
                (
                    run_id,
                    series.board,
                    series.label,
                    key.variant,
                    key.release,
                    key.model,
                    key.quant,
                    key.ep,
                    key.opt_level,
                    key.intra_threads,
                    key.inter_threads,
                    summary.n,
                    summary.p50,
                    summary.p90,
                    summary.p99,
                    summary.mean,
                    summary.std,
                )
            )
        with self._index() as db:
            db.execute(
                "INSERT OR REPLACE INTO boards VALUES (?, ?, ?, ?, ?, ?, ?)",
                (
                    run_id,
                    document["board"],
                    document["status"],
                    document["error"],
                    str(path),
                    ort_version,
                    kernel,
                ),
            )
            db.executemany(f"INSERT INTO series VALUES ({', '.join('?' * 17)})", rows)


_RUN_ID = re.compile(r"[A-Za-z0-9._-]+")


def _is_run(path: Path) -> bool:
    """A run's directory, not another folder of the store."""
    name = path.name
    return path.is_dir() and bool(_RUN_ID.fullmatch(name)) and not name.startswith(".") and name != COUNTS_DIR


def _read_problem(path: Path) -> str | None:
    """Why a run file is unusable now, or None (it was repaired)."""
    if path.name == RUN_FILE:
        return _read(path, reading.run_meta)[1] or None
    return _read(path, reading.board_record)[1] or None


def _read(path: Path, parse: Callable[[object], _Stored]) -> tuple[_Stored, str] | tuple[None, str]:
    """(the stored file read as its format, "") or (None, why the file is unusable): the only place
    the store reads a run's JSON (``reading`` says what is wrong with a document)."""
    document, problem = _read_json(path)
    if problem is not None:
        return None, problem
    try:
        return parse(document), ""
    except reading.Malformed as error:
        return None, str(error)


def _read_json(path: Path) -> tuple[object, str | None]:
    """(document, None) or (None, why the file is unusable)."""
    try:
        return json.loads(path.read_bytes().decode("utf-8")), None
    except OSError as error:
        return None, f"cannot be read ({error.strerror or error})"
    except UnicodeDecodeError as error:
        return None, f"not UTF-8 text (byte {error.start})"
    except json.JSONDecodeError as error:
        return None, _json_problem(error)
    except RecursionError:
        return None, "JSON nested too deeply"


def _json_problem(error: json.JSONDecodeError) -> str:
    """What is wrong with a file's JSON: empty, cut off, or not JSON at all."""
    text = error.doc.rstrip()
    if not text:
        return "empty file"
    if text[:1] in "{[" and text[-1:] not in "}]":
        return f"truncated JSON (it breaks off at line {text.count(chr(10)) + 1})"
    return f"not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})"


def _write_new(path: Path, document: Mapping[str, object]) -> None:
    """Write a JSON file that must not exist yet (results are never overwritten)."""
    try:
        with path.open("x") as handle:
            json.dump(document, handle, indent=1, sort_keys=True, default=str)
            handle.write("\n")
    except FileExistsError:
        raise UsageError(f"{path} exists already; results are never overwritten") from None


class SeriesRow(KeyColumns, SummaryRecord):
    """One series as an export row."""

    run_id: str
    board: str
    ort_version: str
    route: str
    rounds: int
    run_spread: float


def flatten_series(records: Iterable[RunRecord]) -> list[SeriesRow]:
    """One row per series (for CSV/JSON export and `results show --json`)."""
    rows: list[SeriesRow] = []
    for record in records:
        for series in record.series():
            rows.append(
                {
                    "run_id": record.run_id,
                    "board": series.board,
                    **series.key.as_dict(),
                    "ort_version": series.ort_version,
                    "route": series.route,
                    "rounds": len(series.rounds),
                    "run_spread": stats.run_spread(series.runs),
                    **series.summary().as_dict(),
                }
            )
    return rows
