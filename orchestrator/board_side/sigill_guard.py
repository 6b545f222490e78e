"""SIGILL guard: name the illegal instruction instead of dying silently (or hanging) on it.

Imported first by the pre-flight check (copied in as ``/pf/sigill_guard.py``; standard library
only). It installs a SIGILL handler through libc's ``sigaction`` with ``SA_SIGINFO``: when an
instruction the (emulated) CPU lacks runs -- ORT 1.21's fp16 code on a Cortex-A72 -- the handler
prints one line ``ORCH-SIGILL {json}`` on stdout with the faulting address (``pc``), the
instruction word (``word``), the file it was loaded from (``object``) and its offset there
(``offset``), plus the Python frames that were running (``python``), then exits with status 132
(128 + SIGILL) at once. Exiting from the handler also means qemu-user never gets to write the
core of a multi-threaded guest, which stalls.

``orchestrator.builds.preflight`` reads the line and names the instruction class
(``orchestrator.common.aarch64_isa``). Where ``sigaction`` is unavailable the guard does nothing.
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import sys
from types import FrameType
from typing import Any

SA_SIGINFO = 0x4
SA_RESETHAND = 0x80000000  # a second SIGILL inside the handler takes the default action
SI_ADDR_OFFSET = 16  # offsetof(siginfo_t, si_addr) on 64-bit Linux

_HANDLER = ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)


class _SigAction(ctypes.Structure):
    """glibc's ``struct sigaction`` on 64-bit Linux (aarch64 and x86-64 alike)."""

    _fields_ = [
        ("handler", _HANDLER),
        ("mask", ctypes.c_ulong * 16),
        ("flags", ctypes.c_int),
        ("restorer", ctypes.c_void_p),
    ]


def _where(pc: int) -> dict[str, Any]:
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                parts = line.split()
                low, high = (int(x, 16) for x in parts[0].split("-"))
                if low <= pc < high:
                    return {
                        "object": parts[5] if len(parts) > 5 else "[anonymous]",
                        "offset": pc - low + int(parts[2], 16),
                    }
    except (OSError, ValueError, IndexError):
        pass
    return {}


def _python_frames() -> list[str]:
    frames: list[str] = []
    frame: FrameType | None = sys._getframe(2)  # the frame that was running when the signal came
    while frame is not None and len(frames) < 8:
        code = frame.f_code
        if not code.co_filename.startswith("<frozen"):
            frames.append(f"{code.co_filename}:{frame.f_lineno} {code.co_name}")
        frame = frame.f_back
    return frames


def _on_sigill(signum: int, info: int | None, context: int | None) -> None:
    report: dict[str, Any] = {"signal": signum}
    try:
        pc = ctypes.c_void_p.from_address((info or 0) + SI_ADDR_OFFSET).value or 0
        report["pc"] = pc
        report["word"] = ctypes.c_uint32.from_address(pc).value
        report.update(_where(pc))
        report["python"] = _python_frames()
    except (ValueError, OSError):
        pass
    finally:
        os.write(1, ("\nORCH-SIGILL " + json.dumps(report) + "\n").encode())
        os._exit(128 + signal.SIGILL)


def install() -> Any:
    """Install the handler; returns what must stay referenced (the ctypes callback), or None."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        handler = _HANDLER(_on_sigill)
        action = _SigAction(handler=handler, flags=SA_SIGINFO | SA_RESETHAND)
        if libc.sigaction(signal.SIGILL, ctypes.byref(action), None) != 0:
            return None
    except (OSError, AttributeError):
        return None
    return handler


_KEEP = install()
