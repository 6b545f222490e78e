"""Pulling a sysroot from a board: pack on the board, fetch the tarball, store it by content.

The board runs ``board_side/sysroot_pack.sh`` (values only as quoted positional arguments), which
writes one tarball of its headers and libraries into orch's working directory there; the
workstation fetches it over the same SSH session, removes it from the board and hands it to
the sysroot store (``sysroots.store``). The board's facts (read by the caller with
``fleet.board_facts``) are recorded with it: a sysroot pulled from a board is the truth about that
board.
"""

from __future__ import annotations

import contextlib
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.adapters.session import BoardSession
from orchestrator.board_side import read_text
from orchestrator.builds.sysroots.store import StoreOutcome, now, store_tarball
from orchestrator.errors import OrchError, RemoteError

if TYPE_CHECKING:
    from orchestrator.fleet.board_facts import BoardFacts

# Packing a Jetson's headers and libraries reads a few GB; an emulated board is slow at gzip.
PACK_TIMEOUT = 1800.0


@dataclass(frozen=True, kw_only=True)
class PullResult:
    outcome: StoreOutcome
    facts: BoardFacts
    tarball_bytes: int
    pack_seconds: float
    fetch_seconds: float
    store_seconds: float

    @property
    def glibc_mismatch(self) -> str | None:
        """The board says one glibc and its libc.so.6 another: worth a line (a chroot, an odd image)."""
        found = self.outcome.stored.record.get("glibc")
        if found and found != self.facts.glibc:
            return f"the board reports glibc {self.facts.glibc}, its libc.so.6 says {found}"
        return None


def _values(text: str) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            values[key.strip()] = value.strip()
    return values


def pull(session: BoardSession, facts: BoardFacts, *, compress: bool = True) -> PullResult:
    """Pack, fetch and store the sysroot of the board behind ``session`` (``facts``: its board facts)."""
    board = session.board
    start = time.monotonic()
    packed = session.run_script(
        read_text("sysroot_pack.sh"), (board.workdir, "gzip" if compress else "none"), timeout=PACK_TIMEOUT
    )
    pack_seconds = time.monotonic() - start
    values = _values(packed.stdout)
    remote = values.get("tarball", "")
    if not remote.startswith("/"):
        raise RemoteError(
            f"{session.label}: the sysroot pack printed no tarball path: {packed.tail()!r}",
            hint="the board needs find, tar (GNU) and gzip",
        )
    try:
        with tempfile.TemporaryDirectory(prefix="orch-sysroot-") as scratch:
            local = Path(scratch) / "sysroot.tar"
            start = time.monotonic()
            session.get(remote, local)
            fetch_seconds = time.monotonic() - start
            start = time.monotonic()
            outcome = store_tarball(
                board.name,
                local,
                kind="board",
                source=f"{board.name} ({board.address})",
                extra={"board": board.name, "pulled_at": now(), "board_facts": facts.as_dict()},
            )
            store_seconds = time.monotonic() - start
            size = local.stat().st_size
    finally:
        # The tarball is orch's scratch on the board: never left behind, even when the fetch failed.
        with contextlib.suppress(OrchError):
            session.run(["rm", "-f", "--", remote], timeout=60, check=False)
    return PullResult(
        outcome=outcome,
        facts=facts,
        tarball_bytes=size,
        pack_seconds=pack_seconds,
        fetch_seconds=fetch_seconds,
        store_seconds=store_seconds,
    )
