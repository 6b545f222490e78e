"""Whether orch received Ctrl-C (SIGINT) or SIGTERM, known to every thread at once.

Python runs a signal's handler (KeyboardInterrupt, or the CLI's ``Terminated``) in the main thread
only, once that thread runs again; the kernel may hand a signal sent to orch to any of its threads.
The board threads of a deploy must not act on an interruption they have not heard of yet: before
``current`` is switched, the switch gate asks ``SignalWatch.received``. It reads the wakeup fd, to
which the signal module's C handler writes each signal's number at once, in whichever thread it runs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterator

# The signals that stop orch (the CLI turns them into exit 130 and 143).
STOPPING = frozenset({signal.SIGINT, signal.SIGTERM})


class SignalWatch:
    """The signals received since ``watch_signals`` began (none when it could not watch)."""

    def __init__(self) -> None:
        self._read, self.write_fd = os.pipe()
        os.set_blocking(self._read, False)
        os.set_blocking(self.write_fd, False)  # the signal module requires it
        self._lock = threading.Lock()
        self._seen: list[int] = []  # in the order they came

    def received(self) -> bool:
        """True once SIGINT or SIGTERM came (its Python handler may not have run yet)."""
        return self._first() is not None

    def _first(self) -> int | None:
        with self._lock:
            if self._read >= 0:
                with contextlib.suppress(BlockingIOError):
                    while data := os.read(self._read, 256):
                        self._seen.extend(number for number in data if number in STOPPING)
            return self._seen[0] if self._seen else None

    def raise_received(self) -> None:
        """In the main thread, once the boards' work is over: a SIGINT or SIGTERM that came while
        its handler has not run raises here what the handler raises (KeyboardInterrupt, ...), so
        that the command ends as interrupted, never as done."""
        first = self._first()
        if first is not None:
            signal.raise_signal(first)

    def close(self) -> None:
        """Stop reading (what was seen stays known)."""
        self.received()
        with self._lock:
            for fd in (self._read, self.write_fd):
                os.close(fd)
            self._read = self.write_fd = -1


class _Watching:
    """The watch of the outermost ``watch_signals`` block under way (one wakeup fd per process)."""

    current: SignalWatch | None = None


@contextlib.contextmanager
def watch_signals() -> Iterator[SignalWatch]:
    """Watch for SIGINT and SIGTERM while the block runs; a block inside another shares its watch.
    Only the main thread can watch (elsewhere the watch never sees a signal: the caller is not the
    one orch's signals stop)."""
    if _Watching.current is not None:
        yield _Watching.current
        return
    watch = SignalWatch()
    if threading.current_thread() is not threading.main_thread():
        try:
            yield watch
        finally:
            watch.close()
        return
    previous = signal.set_wakeup_fd(watch.write_fd, warn_on_full_buffer=False)
    _Watching.current = watch
    try:
        yield watch
    finally:
        _Watching.current = None
        signal.set_wakeup_fd(previous)
        watch.close()
