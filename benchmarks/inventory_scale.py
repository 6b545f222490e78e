"""Inventory benchmark: `orch inventory list / show / --limit` on a generated 10,000-board inventory.

Writes an Ansible-style inventory of 10,000 boards in 100 groups (10 regions of 9 racks each;
every board with its own address, port, tags and free-form vars: about 4.3 MB of YAML) to a
temporary directory, then runs each command once as a real `orch` process and prints its wall
time, CPU time (user + system) and peak memory (maximum resident set size), and whether the
goal (each under 2 s) is met. One run of each, nothing asserted; the machine's other load shows
in the wall times, which is why the CPU times are printed beside them. Usage::

    python benchmarks/inventory_scale.py [--boards 10000] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

GOAL_SECONDS = 2.0
REGIONS = 10
RACKS_PER_REGION = 9  # 10 regions + 90 racks = 100 groups


def write_inventory(path: Path, boards: int) -> None:
    """10 region groups (each sets a target) with 9 rack groups each (each sets a user); boards
    are spread over the racks in order."""
    racks = REGIONS * RACKS_PER_REGION
    per_rack = -(-boards // racks)
    lines = ["all:", "  vars: {workdir: orch, python: python3}", "  children:"]
    for region in range(REGIONS):
        lines += [
            f"    r{region}:",
            f"      vars: {{target: {'rpi4' if region % 2 else 'rpi5'}}}",
            "      children:",
        ]
        for rack in range(RACKS_PER_REGION):
            first = (region * RACKS_PER_REGION + rack) * per_rack
            numbers = range(first, min(first + per_rack, boards))
            lines += [
                f"        rack-{region}-{rack}:",
                f"          vars: {{user: ops{rack}}}",
                "          hosts:",
            ]
            for n in numbers:
                lines += [
                    f"            h{n:05d}:",
                    f"              hostname: 10.{n >> 16}.{(n >> 8) & 255}.{n & 255}",
                    f"              port: {2200 + n % 100}",
                    f"              tags: [camera, shelf-{n % 40:02d}, row-{n % 7}]",
                    "              vars:",
                    f"                slot: {n % 100}",
                    f"                owner: team-{n % 12}",
                    f"                serial: SN{n:010d}",
                    f"                location: building-{n % 5}/floor-{n % 3}/room-{n % 17}",
                    f"                purchased: batch {n // 500} of the fleet, order {n * 7 % 1000:03d}",
                    f"                note: board number {n} of the fleet, kept in rack {region}-{rack}",
                ]
    path.write_text("\n".join(lines) + "\n")


def run(env: dict[str, str], args: list[str]) -> dict[str, float]:
    """One `orch` process: wall time, CPU time and peak RSS (from wait4's resource usage)."""
    start = time.monotonic()
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", *args],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    assert process.stderr is not None
    errors = process.stderr.read()
    _, status, usage = os.wait4(process.pid, 0)
    wall = time.monotonic() - start
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode != 0:
        sys.exit(f"orch {' '.join(args)} failed ({process.returncode}):\n{errors.decode()[-2000:]}")
    return {"wall_s": wall, "cpu_s": usage.ru_utime + usage.ru_stime, "peak_rss_mb": usage.ru_maxrss / 1024}


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--boards", type=int, default=10_000)
    parser.add_argument("--json", action="store_true", help="print the figures as one JSON document")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="orch-inventory-scale-") as scratch:
        root = Path(scratch)
        inventory = root / "inventory.yaml"
        write_inventory(inventory, options.boards)
        for name in ("home", "userhome"):
            (root / name).mkdir()
        env = {
            **os.environ,
            "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
            "ORCH_HOME": str(root / "home"),  # no lab: only the file's boards
            "ORCH_SSH_CONFIG": str(root / "ssh_config"),  # none: the file alone
            "HOME": str(root / "userhome"),
            "COLUMNS": "200",
        }
        middle = f"h{options.boards // 2:05d}"
        commands = {
            "list (table)": ["inventory", "list", "-i", str(inventory)],
            "list --json": ["inventory", "list", "--json", "-i", str(inventory)],
            f"show {middle}": ["inventory", "show", middle, "-i", str(inventory)],
            "list --limit 'r3:!h0300*'": ["inventory", "list", "--limit", "r3:!h0300*", "-i", str(inventory)],
        }
        size_mb = inventory.stat().st_size / 1e6
        empty = root / "empty.yaml"
        empty.write_text("all: {}\n")
        startup = run(env, ["inventory", "list", "-i", str(empty)])  # what any inventory command costs
        figures = {label: run(env, args) for label, args in commands.items()}
    if options.json:
        print(
            json.dumps(
                {"boards": options.boards, "yaml_mb": size_mb, "startup": startup, "commands": figures}
            )
        )
        return 0
    print(
        f"inventory: {options.boards:,} boards, {REGIONS + REGIONS * RACKS_PER_REGION} groups,"
        f" {size_mb:.1f} MB of YAML; one run of each command"
    )
    print(
        f"  {'list of an empty inventory':34} wall {startup['wall_s']:5.2f} s  cpu {startup['cpu_s']:5.2f} s"
    )
    for label, figure in figures.items():
        verdict = "ok" if figure["wall_s"] < GOAL_SECONDS else f"over {GOAL_SECONDS:.0f} s"
        print(
            f"  {label:34} wall {figure['wall_s']:5.2f} s  cpu {figure['cpu_s']:5.2f} s"
            f"  peak {figure['peak_rss_mb']:5.0f} MB  ({verdict})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
