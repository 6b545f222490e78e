"""--pin-clocks: set the cpufreq governor (and jetson_clocks) for a run, and put it back afterwards.

Runs on the board through its session (orchestrator/board_side/pin_clocks.sh and restore_clocks.sh);
what was done is recorded in the run's results."""

from __future__ import annotations

from dataclasses import dataclass, field

from orchestrator.adapters.session import BoardSession
from orchestrator.bench.records import ClocksRecord
from orchestrator.board_side import read_text


@dataclass(kw_only=True)
class ClockState:
    """What --pin-clocks did on one board (recorded in the results)."""

    requested: bool = True
    pinned: bool = False
    previous: dict[str, str] = field(default_factory=dict)
    jetson_state: str | None = None
    restored: bool | None = None
    messages: list[str] = field(default_factory=list)

    def as_dict(self) -> ClocksRecord:
        return {
            "requested": self.requested,
            "pinned": self.pinned,
            "previous": self.previous,
            "jetson_clocks": self.jetson_state,
            "restored": self.restored,
            "messages": self.messages,
        }


def pin_clocks(session: BoardSession, sysfs_root: str) -> ClockState:
    state = ClockState()
    script = read_text("pin_clocks.sh")
    result = session.run_script(script, (sysfs_root, "performance"), timeout=120, check=False)
    denied = []
    for line in result.stdout.splitlines():
        parts = line.split("\t")
        if parts[0] == "none":
            state.messages.append(f"no cpufreq governor under {sysfs_root}: clocks not pinned")
        elif parts[0] == "saved" and len(parts) == 3:
            state.previous[parts[1]] = parts[2]
        elif parts[0] == "set" and len(parts) == 3 and parts[2] != "ok":
            denied.append(parts[1])
        elif parts[0] == "jetson" and len(parts) == 3:
            if parts[2] == "ok":
                state.jetson_state = parts[1]
            else:
                state.messages.append("jetson_clocks was not permitted")
    if denied:
        state.messages.append(
            f"setting the governor was not permitted ({len(denied)} cores); run as root to pin"
        )
    state.pinned = bool(state.previous) and not denied
    return state


def restore_clocks(session: BoardSession, state: ClockState) -> None:
    args: list[str] = []
    for path, governor in state.previous.items():
        args += [path, governor]
    if state.jetson_state:
        args += ["--jetson", state.jetson_state]
    if not args:
        state.restored = None
        return
    result = session.run_script(read_text("restore_clocks.sh"), args, timeout=120, check=False)
    state.restored = result.exit_code == 0
    if not state.restored:
        state.messages.append("restoring the clocks failed: " + " ".join(result.stdout.split()))
