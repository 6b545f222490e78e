"""--pin-clocks' shell scripts run for real by the workstation's `sh` on a fake sysfs tree.

The lab test runs them on a board over SSH; this one runs the same scripts through `sh -s -- ARGS`
locally (the way RemoteSession.run_script sends them), so the parsing and restore logic are
checked in a second, without a lab.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

from orchestrator.adapters.ssh import CommandResult
from orchestrator.bench.clocks import pin_clocks, restore_clocks


class LocalShell:
    """Runs a script like RemoteSession.run_script does, but with the local `sh`."""

    def run_script(self, script: str, args=(), *, timeout=None, check=True) -> CommandResult:
        start = time.monotonic()
        done = subprocess.run(
            ["sh", "-s", "--", *args],
            input=script,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=check,
        )
        return CommandResult(
            exit_code=done.returncode,
            stdout=done.stdout,
            stderr=done.stderr,
            duration=time.monotonic() - start,
        )


def governors(root: Path) -> list[str]:
    return [
        p.read_text().strip() for p in sorted(root.glob("devices/system/cpu/cpu*/cpufreq/scaling_governor"))
    ]


def make_tree(root: Path, values: list[str]) -> Path:
    for cpu, value in enumerate(values):
        path = root / f"devices/system/cpu/cpu{cpu}/cpufreq"
        path.mkdir(parents=True)
        (path / "scaling_governor").write_text(value + "\n")
    return root


def test_pin_then_restore_each_core_to_its_own_governor(tmp_path):
    root = make_tree(tmp_path / "sys", ["ondemand", "schedutil", "ondemand", "powersave"])
    state = pin_clocks(LocalShell(), str(root))
    assert state.pinned and governors(root) == ["performance"] * 4
    assert sorted(state.previous.values()) == ["ondemand", "ondemand", "powersave", "schedutil"]
    restore_clocks(LocalShell(), state)
    assert state.restored is True
    assert governors(root) == ["ondemand", "schedutil", "ondemand", "powersave"]


def test_no_cpufreq_is_a_warning_not_a_failure(tmp_path):
    state = pin_clocks(LocalShell(), str(tmp_path / "empty"))
    assert state.pinned is False and state.previous == {}
    assert "clocks not pinned" in state.messages[0]


def test_a_failed_restore_is_reported(tmp_path):
    root = make_tree(tmp_path / "sys", ["ondemand"])
    state = pin_clocks(LocalShell(), str(root))
    # The core disappears (a hot-unplugged CPU): its governor cannot be written back.
    state.previous[str(root / "devices/system/cpu/cpu7/cpufreq/scaling_governor")] = "ondemand"
    restore_clocks(LocalShell(), state)
    assert state.restored is False and "cpu7" in state.messages[-1]
    assert governors(root) == ["ondemand"]
