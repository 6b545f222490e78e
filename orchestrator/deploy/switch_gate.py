"""Which release is current on each board as far as this orch knows, and the gate every switch
of ``current`` passes through.

A board whose ``--timeout`` ran out is reported while its thread may still be working (threads
cannot be killed: ``orchestrator.fleet.parallel``). Closing its gate first means that thread can
no longer switch the board: what the report says is current stays true until orch exits. The
same holds on Ctrl-C: the gates close before the interruption is reported, and a gate asks whether
orch received Ctrl-C or SIGTERM before each switch (``stopped``), as the board's thread may hear
of it before the main thread has run its handler.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from orchestrator.errors import DeployError

# How long closing a gate waits for a switch under way (one rename and one history line).
CLOSE_WAIT_S = 15.0


@dataclass(frozen=True, kw_only=True)
class KnownCurrent:
    """A board's current release as this orch knows it (``None``: none, or never read)."""

    release: str | None
    sure: bool = True  # False: a switch to ``switching_to`` was under way and did not finish
    switching_to: str | None = None
    read: bool = True  # False: the board was never read (what is current is not known)

    def describe(self) -> str:
        if not self.read:
            return "not known (the board was not read)"
        if not self.sure:
            return f"{self.release or 'none'} or {self.switching_to} (a switch was under way)"
        return self.release or "none"


class SwitchGate:
    """Per board: the current release seen or made, and whether switching is still allowed."""

    def __init__(self, *, stopped: Callable[[], bool] = lambda: False) -> None:
        self._stopped = stopped  # True once orch received a signal that stops it
        self._guard = threading.Lock()
        self._locks: dict[str, threading.Lock] = {}
        self._closed: set[str] = set()
        self._current: dict[str, str | None] = {}
        self._switching: dict[str, str] = {}

    def _lock(self, board: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault(board, threading.Lock())

    def seen(self, board: str, current: str | None) -> None:
        """What the board said was current (read under its lock)."""
        with self._guard:
            self._current[board] = current

    def switch(self, board: str, release_id: str, switch: Callable[[], None]) -> None:
        """Run ``switch`` unless the board's gate is closed (DeployError naming what stays current)."""
        with self._lock(board):
            with self._guard:
                if board in self._closed or self._stopped():
                    self._closed.add(board)
                    current = self._current.get(board)
                    raise DeployError(
                        f"{board}: stopped before switching to {release_id}:"
                        f" {current or 'no release'} stays current"
                    )
                self._switching[board] = release_id
            try:
                switch()
                with self._guard:
                    self._current[board] = release_id
            finally:
                with self._guard:
                    self._switching.pop(board, None)

    def close(self, board: str) -> KnownCurrent:
        """No more switches on ``board``; what is current there now."""
        lock = self._lock(board)
        finished = lock.acquire(timeout=CLOSE_WAIT_S)
        try:
            with self._guard:
                self._closed.add(board)
                return KnownCurrent(
                    release=self._current.get(board),
                    sure=finished,
                    switching_to=None if finished else self._switching.get(board),
                    read=board in self._current,
                )
        finally:
            if finished:
                lock.release()
