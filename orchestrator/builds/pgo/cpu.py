"""The CPU a training board reports, and whether a profile measured there fits a build.

One profile is measured for one CPU: its counters say which code ran how often on that core. The
CPU compared is the one the board reports (``/proc/cpuinfo``'s implementer and part, the number
the kernel reads from the core itself), not the target its inventory entry declares. A board
fits a build when it reports the target's CPU, or the CPU orch emulates the target as (its
``qemu_cpu``: the lab's stand-in for that board). Anything else is refused unless
``--force-profile``; a stored profile keeps each board's CPU, and is refused the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from orchestrator.adapters.session import BoardSession
from orchestrator.errors import UsageError
from orchestrator.targets import TargetProfile

# /proc/cpuinfo's "CPU implementer" and "CPU part" of the cores orch's targets name, as the targets
# name them (toolchains/targets/*.yaml: cpu, qemu_cpu).
_PARTS = {
    ("0x41", "0xd03"): "cortex-a53",
    ("0x41", "0xd04"): "cortex-a35",
    ("0x41", "0xd05"): "cortex-a55",
    ("0x41", "0xd07"): "cortex-a57",
    ("0x41", "0xd08"): "cortex-a72",
    ("0x41", "0xd09"): "cortex-a73",
    ("0x41", "0xd0a"): "cortex-a75",
    ("0x41", "0xd0b"): "cortex-a76",
    ("0x41", "0xd0c"): "neoverse-n1",
    ("0x41", "0xd41"): "cortex-a78",
    ("0x41", "0xd42"): "cortex-a78ae",
    ("0x4e", "0x004"): "carmel",
}
NOT_REPORTED = "not reported"


@dataclass(frozen=True, kw_only=True)
class ReportedCpu:
    """A board's CPU as it reports it: the core's name when orch knows the part, its numbers."""

    core: str  # "cortex-a72"; "arm part 0x41:0xd99" for a part orch does not know; NOT_REPORTED
    part: str  # "0x41:0xd08" (implementer:part), "" when /proc/cpuinfo has neither


def parse_cpuinfo(text: str) -> ReportedCpu:
    """The first core's implementer and part in ``/proc/cpuinfo`` (a big.LITTLE board lists several
    kinds; the first is the one the kernel booted on)."""
    fields: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip().lower(), value.strip().lower())
    implementer, part = fields.get("cpu implementer", ""), fields.get("cpu part", "")
    if not implementer or not part:
        return ReportedCpu(core=NOT_REPORTED, part="")
    name = _PARTS.get((implementer, part), f"arm part {implementer}:{part}")
    return ReportedCpu(core=name, part=f"{implementer}:{part}")


def read_cpu(session: BoardSession) -> ReportedCpu:
    """The CPU the board reports (a board without /proc/cpuinfo reports none)."""
    return parse_cpuinfo(session.run(["cat", "/proc/cpuinfo"], check=False, timeout=60).stdout)


def fits(core: str, profile: TargetProfile) -> bool:
    """A core the build's counters can be measured on: the target's own, or its emulated stand-in's."""
    return core in (profile.cpu, profile.qemu_cpu)


def refuse_other_cpus(cores: Mapping[str, str], profile: TargetProfile, *, force: bool, what: str) -> None:
    """Refuses, naming each board and its CPU, when a board's core (board name -> core) does not
    fit the build, unless ``force``. ``what`` names whose CPU it is: "a training board", "the
    profile in DIR"."""
    others = {board: core for board, core in cores.items() if not fits(core, profile)}
    if not others or force:
        return
    boards = ", ".join(f"{board}: a {core}" for board, core in others.items())
    emulated = f", emulated as a {profile.qemu_cpu}" if profile.qemu_cpu != profile.cpu else ""
    raise UsageError(
        f"{what} is of another CPU ({boards}); the build is for a {profile.cpu} ({profile.name}{emulated}):"
        " a profile is measured for one CPU",
        hint=f"train on a {profile.cpu} board, or pass --force-profile",
    )
