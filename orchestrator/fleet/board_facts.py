"""Facts about a board that decide whether a wheel fits it: the pure parser of what a board reported.

``board_side/board_facts.sh`` is a POSIX sh script sent to the board (values reach it only as
quoted positional arguments); it prints ``key=value`` lines. ``parse_facts`` turns that text into
``BoardFacts`` and is tested from sample outputs, without a board. ``orchestrator.fleet.board_probe``
runs the script through a session (``read_facts``); a deploy sends it together with the release
listing instead, in one round trip (``orchestrator.deploy.survey``). No session here: the deploy
plan reads these facts and stays apart from the adapters.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from orchestrator.common.aarch64_isa import features_for_flags
from orchestrator.errors import RemoteError


@dataclass(frozen=True, kw_only=True)
class HardwareCounters:
    """Whether the board can count its own instructions and cycles (``perf stat -e
    instructions:u,cycles:u``): probed, never assumed. A Raspberry Pi 5's kernel may lack the PMU
    node in its device tree; an emulated board has no PMU of its own; a kernel with
    perf_event_paranoid 3 (Debian's and Ubuntu's patch) refuses unprivileged counters."""

    emulated_cpu: str = ""  # the CPU qemu emulates (the lab's boards); empty on real hardware
    cpu_pmus: tuple[str, ...] = ()
    perf_event_paranoid: int | None = None
    perf: str = ""  # the perf tool's path on the board
    root: bool = False

    @property
    def usable(self) -> bool:
        return not self.reason

    @property
    def reason(self) -> str:
        """Why counters cannot be read on this board ("" when they can)."""
        if self.emulated_cpu:
            return (
                f"an emulated board ({self.emulated_cpu} under qemu) has no PMU of its own: count instructions"
                " with --metric instructions"
            )
        if not self.cpu_pmus:
            return (
                "the kernel exposes no CPU PMU (nothing like armv8_* in /sys/bus/event_source/devices; a"
                " Raspberry Pi 5 needs a device tree with the PMU node)"
            )
        if not self.root and (self.perf_event_paranoid is None or self.perf_event_paranoid > 2):
            return (
                f"perf_event_paranoid is {self.perf_event_paranoid} and orch's user is not root: user-space"
                " counters need 2 or less (sysctl kernel.perf_event_paranoid=2)"
            )
        if not self.perf:
            return "the perf tool is not installed (Debian: apt install linux-perf)"
        return ""

    def summary(self) -> str:
        if self.usable:
            return (
                f"instructions and cycles: PMU {', '.join(self.cpu_pmus)}, perf_event_paranoid"
                f" {self.perf_event_paranoid}, {self.perf}"
            )
        return f"none: {self.reason}"


@dataclass(frozen=True, kw_only=True)
class BoardFacts:
    board: str
    home: str
    arch: str
    kernel: str
    glibc: str
    python_version: str
    free_bytes: int | None
    os_id: str = ""
    os_version: str = ""
    os_name: str = ""
    # /proc/cpuinfo's Features (fp asimd ... asimddp); empty when the board does not say.
    cpu_features: tuple[str, ...] = ()
    counters: HardwareCounters = HardwareCounters()

    @property
    def python_tag(self) -> str:
        """The wheel tag of the board's Python: ``3.13.5`` -> ``cp313``."""
        major, minor = self.python_version.split(".")[:2]
        return f"cp{major}{minor}"

    @property
    def python_short(self) -> str:
        """``3.13``: what ``pip download --python-version`` takes."""
        return ".".join(self.python_version.split(".")[:2])

    def as_dict(self) -> dict[str, object]:
        return {
            "home": self.home,
            "arch": self.arch,
            "kernel": self.kernel,
            "glibc": self.glibc,
            "python_version": self.python_version,
            "python_tag": self.python_tag,
            "free_bytes": self.free_bytes,
            "os_id": self.os_id,
            "os_version": self.os_version,
            "os_name": self.os_name,
            "cpu_features": list(self.cpu_features),
            "hardware_counters": self.counters.summary(),
        }


_GLIBC = re.compile(r"(?:glibc|GLIBC|GNU libc)[^0-9]*(\d+\.\d+(?:\.\d+)?)")
_PYTHON = re.compile(r"^Python (\d+\.\d+(?:\.\d+)?)")


def parse_facts(text: str, *, board: str, python: str = "python3") -> BoardFacts:
    """Parse board_facts.sh's output; anything the deploy cannot do without is a clear error."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key and key not in values:
            values[key] = value.strip()
    arch = values.get("arch", "")
    if not arch:
        raise RemoteError(f"{board}: could not read the architecture (`uname -m` printed nothing)")
    glibc_match = _GLIBC.search(values.get("glibc_raw", ""))
    if not glibc_match:
        raise RemoteError(
            f"{board}: no glibc found (getconf/ldd said {values.get('glibc_raw', '')!r});"
            " ONNX Runtime wheels need a glibc-based Linux",
        )
    python_match = _PYTHON.match(values.get("python_raw", ""))
    if not python_match:
        raise RemoteError(
            f"{board}: Python interpreter '{python}' does not run there ({values.get('python_raw', '')!r})",
            hint="install python3 (and python3-venv) on the board, or set `python:` for it in the inventory",
        )
    free_kib = values.get("free_kib", "")
    return BoardFacts(
        board=board,
        home=values.get("home", ""),
        arch=arch,
        kernel=values.get("kernel", ""),
        glibc=glibc_match.group(1),
        python_version=python_match.group(1),
        free_bytes=int(free_kib) * 1024 if free_kib.isdigit() else None,
        os_id=values.get("os_id", ""),
        os_version=values.get("os_version", ""),
        os_name=values.get("os_name", ""),
        cpu_features=tuple(values.get("cpu_features", "").split()),
        counters=_counters(values),
    )


def _counters(values: dict[str, str]) -> HardwareCounters:
    paranoid = values.get("perf_event_paranoid", "")
    return HardwareCounters(
        emulated_cpu=values.get("emulated_cpu", ""),
        cpu_pmus=tuple(values.get("cpu_pmus", "").split()),
        perf_event_paranoid=int(paranoid) if re.fullmatch(r"-?\d+", paranoid) else None,
        perf=values.get("perf", ""),
        root=values.get("uid") == "0",
    )


def cpu_problems(compiler_flags: Sequence[str], facts: BoardFacts) -> list[str]:
    """Why code built with ``compiler_flags`` would die of SIGILL on this board (empty: it fits or
    cannot be judged: no -mcpu/-march, or a board that does not list its CPU features)."""
    need = features_for_flags(list(compiler_flags))
    if need is None or not facts.cpu_features:
        return []
    missing = sorted(need.features - set(facts.cpu_features))
    if not missing:
        return []
    problem = (
        f"built with {need.flag}, which lets the compiler use CPU features {facts.board} lacks"
        f" ({', '.join(missing)}; its /proc/cpuinfo lists {' '.join(facts.cpu_features)}):"
        " it would die of SIGILL there"
    )
    return [problem]
