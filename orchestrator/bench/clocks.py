"""--pin-clocks: set the cpufreq governor (and jetson_clocks) for a run, and put it back afterwards.

Runs on the board through its session; what was done is recorded in the run's results."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from orchestrator.adapters.session import BoardSession

#
# $1 = sysfs root, $2 = governor to set. Prints "saved<TAB>path<TAB>old" per core, then
# "set<TAB>path<TAB>ok|denied". The sysfs root is a parameter because tests need a writable fake
# tree: the emulated lab boards have no cpufreq at all.
PIN_SCRIPT = r"""
root="$1"; want="$2"; found=0
for f in "$root"/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor; do
  [ -f "$f" ] || continue
  found=1
  printf 'saved\t%s\t%s\n' "$f" "$(cat "$f")"
done
[ "$found" = 1 ] || { printf 'none\n'; exit 0; }
for f in "$root"/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor; do
  [ -f "$f" ] || continue
  if (printf '%s\n' "$want" > "$f") 2>/dev/null && [ "$(cat "$f")" = "$want" ]; then
    printf 'set\t%s\tok\n' "$f"
  else
    printf 'set\t%s\tdenied\n' "$f"
  fi
done
if [ "$root" = /sys ] && command -v jetson_clocks >/dev/null 2>&1; then
  state="${HOME:-/tmp}/.orch-jetson-clocks.state"
  if jetson_clocks --store "$state" >/dev/null 2>&1 && jetson_clocks >/dev/null 2>&1; then
    printf 'jetson\t%s\tok\n' "$state"
  else
    printf 'jetson\t%s\tdenied\n' "$state"
  fi
fi
"""

# Pairs of args: path governor path governor ... ; then optionally "--jetson STATEFILE".
RESTORE_SCRIPT = r"""
status=0
while [ "$#" -ge 2 ]; do
  if [ "$1" = --jetson ]; then
    jetson_clocks --restore "$2" >/dev/null 2>&1 || { printf 'failed\tjetson_clocks\n'; status=1; }
  elif (printf '%s\n' "$2" > "$1") 2>/dev/null && [ "$(cat "$1")" = "$2" ]; then
    printf 'restored\t%s\t%s\n' "$1" "$2"
  else
    printf 'failed\t%s\n' "$1"; status=1
  fi
  shift 2
done
exit "$status"
"""


@dataclass(kw_only=True)
class ClockState:
    """What --pin-clocks did on one board (recorded in the results)."""

    requested: bool = True
    pinned: bool = False
    previous: dict[str, str] = field(default_factory=dict)
    jetson_state: str | None = None
    restored: bool | None = None
    messages: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
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
    result = session.run_script(PIN_SCRIPT, (sysfs_root, "performance"), timeout=120, check=False)
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
    result = session.run_script(RESTORE_SCRIPT, args, timeout=120, check=False)
    state.restored = result.exit_code == 0
    if not state.restored:
        state.messages.append("restoring the clocks failed: " + " ".join(result.stdout.split()))
