"""The board lock: one writer per board (deploy, rollback, prune; bench and tune hold it while they
measure), held for as long as orch's SSH channel to this process is open.

Sent as ``python3 -c <this file's text> WORKDIR HOLDER WAIT [SCRIPT [ARG...]]`` by
``orchestrator.deploy.board_lock`` on a channel whose stdin stays open. Standard library only.
WORKDIR: the board's orch directory (made if missing); HOLDER: a JSON object describing orch (the
command, the workstation's host name and pid, the start time); WAIT: seconds to wait for a busy
lock. SCRIPT, when given, runs as ``sh -c SCRIPT sh ARG...`` once the lock is held (a deploy reads
the board under the lock in the same round trip).

The lock is ``flock(2)`` on ``WORKDIR/.orch.lock``: the kernel releases it when this process ends,
however it ends. The process ends when its stdin reaches EOF, which is when orch closes the
channel, exits, is killed or loses the connection, so a lock never outlives its holder's channel.
The holder's description is kept beside it in ``.orch.lock.holder`` (written by rename, removed on
a clean release) for the messages of those who wait.

Prints one JSON object per line: ``{"event": "held", "holder": {...}}`` while another holds the
lock (again when the holder changes), then ``{"event": "acquired", "previous": {...} | null}``
(``previous``: the description a holder that ended without releasing left behind) and, with a
SCRIPT, ``{"event": "then", "exit": N, "stdout": "...", "stderr": "..."}``; or
``{"event": "busy", "holder": {...}}`` and exit 3 when WAIT ran out. On stdin, ``break`` ends a
holder orch found dead (its board-side process, by pid) and ``release`` (or EOF) releases the lock.
"""

import contextlib
import errno
import fcntl
import json
import os
import select
import signal
import subprocess
import sys
import time
from typing import Any

POLL_S = 0.25


def say(event: str, **fields: Any) -> None:
    sys.stdout.write(json.dumps({"event": event, **fields}) + "\n")
    sys.stdout.flush()


def read_holder(path: str) -> "dict[str, Any] | None":
    try:
        with open(path, encoding="utf-8") as handle:
            holder = json.load(handle)
    except (OSError, ValueError):
        return None
    return holder if isinstance(holder, dict) else None


def write_holder(path: str, holder: "dict[str, Any]") -> None:
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(holder, handle)
    os.replace(tmp, path)


def read_stdin(timeout: float) -> "str | None":
    """One chunk of stdin ('' at EOF), or None when nothing came within ``timeout``."""
    ready, _, _ = select.select([0], [], [], timeout)
    if not ready:
        return None
    return os.read(0, 4096).decode(errors="replace")


def try_lock(fd: int) -> bool:
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as error:
        if error.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return False
        raise
    return True


def end_holder(holder: "dict[str, Any] | None") -> None:
    """Orch found this holder's workstation process gone: end its board-side process (the lock
    is released with it)."""
    pid = holder.get("board_pid") if holder else None
    if isinstance(pid, int) and pid > 1:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def wait_for_lock(fd: int, holder_path: str, wait: float) -> "bool | None":
    """True once the lock is held, False when ``wait`` ran out, None when orch went away."""
    deadline = time.monotonic() + wait
    told: object = object()
    while not try_lock(fd):
        holder = read_holder(holder_path)
        if holder != told:
            say("held", holder=holder)
            told = holder
        if time.monotonic() >= deadline:
            say("busy", holder=holder)
            return False
        chunk = read_stdin(POLL_S)
        if chunk == "":
            return None
        if chunk and "break" in chunk:
            end_holder(holder)
    return True


def run_then(argv: "list[str]") -> None:
    # Not capture_output: it came in Python 3.7, and JetPack 4's python3 is 3.6.
    result = subprocess.run(  # noqa: UP022
        ["sh", "-c", argv[0], "sh", *argv[1:]],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        check=False,
    )
    say(
        "then",
        exit=result.returncode,
        stdout=result.stdout.decode(errors="replace"),
        stderr=result.stderr.decode(errors="replace"),
    )


def main() -> int:
    workdir, holder_text, wait = sys.argv[1], sys.argv[2], float(sys.argv[3])
    os.makedirs(workdir, exist_ok=True)
    path = os.path.join(workdir, ".orch.lock")
    holder_path = path + ".holder"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    got = wait_for_lock(fd, holder_path, wait)
    if got is None:
        return 0
    if not got:
        return 3
    previous = read_holder(holder_path)
    mine = {**json.loads(holder_text), "board_pid": os.getpid()}
    write_holder(holder_path, mine)
    say("acquired", previous=previous)
    if len(sys.argv) > 4:
        run_then(sys.argv[4:])
    while True:
        chunk = read_stdin(3600.0)
        if chunk == "" or (chunk and "release" in chunk):
            break
    if read_holder(holder_path) == mine:
        os.unlink(holder_path)
    return 0


sys.exit(main())
