"""`orch build --target lab --variant stock` for real: the official wheel, checked and pre-flighted.

The build runs once per session (the ``stock_build`` fixture); the lab deploy tests deploy the
artifact it makes. Here: what that artifact is, checked against things orch did not compute
(the wheel pip gave the test fixture on its own, the ELF headers read from the wheel's bytes).
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
import subprocess
import sys
import zipfile
from pathlib import Path

from stock_baseline import StockBuild

EM_AARCH64 = 183  # ELF e_machine of arm64


def elf_machines(wheel: Path) -> dict[str, int]:
    """e_machine of every shared object in the wheel, from its ELF header (64-bit little endian)."""
    machines = {}
    with zipfile.ZipFile(wheel) as archive:
        for name in archive.namelist():
            if name.endswith(".so") or ".so." in name:
                header = archive.open(name).read(20)
                assert header[:4] == b"\x7fELF" and header[4] == 2 and header[5] == 1, (name, header[:6])
                machines[name] = struct.unpack_from("<H", header, 18)[0]
    return machines


def test_the_stock_artifact_is_the_official_aarch64_wheel(stock_build: StockBuild, stock_wheel: Path) -> None:
    manifest = stock_build.manifest
    version = stock_wheel.name.split("-")[1]
    assert (manifest["target"], manifest["variant"], manifest["ort_version"]) == ("lab", "stock", version)
    wheel = stock_build.artifact.directory / manifest["wheel"]
    assert wheel.is_file() and wheel.name == stock_wheel.name
    assert re.fullmatch(
        rf"onnxruntime-{re.escape(version)}-cp313-cp313-manylinux_2_\d+_aarch64\.whl", wheel.name
    )
    digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
    # The same bytes pip gave the fixture on its own: the official wheel, untouched.
    assert digest == manifest["wheel_sha256"] == hashlib.sha256(stock_wheel.read_bytes()).hexdigest()
    assert manifest["wheel_size"] == wheel.stat().st_size
    machines = elf_machines(wheel)
    assert any("libonnxruntime.so" in name for name in machines), machines
    assert set(machines.values()) == {EM_AARCH64}, machines
    check = manifest["wheel_check"]
    assert check["ok"] and check["problems"] == [] and check["machines"] == ["aarch64"]
    assert stock_build.output["manifest"] == manifest  # --json shows what the directory holds


def test_the_stock_artifact_passed_a_real_preflight(stock_build: StockBuild) -> None:
    preflight = stock_build.manifest["preflight"]
    assert preflight["ok"] is True and preflight["exit_code"] == 0, preflight
    # What only a real run in an emulated board can report: the board's CPU model, the version the
    # wheel imported as, how long import and inference took, the output shape of the sample model
    # and how close it came to the workstation's x86 onnxruntime.
    assert preflight["qemu_cpu"] == "cortex-a72"  # toolchains/targets/lab.yaml
    assert preflight["ort_version"] == stock_build.manifest["ort_version"]
    assert "CPUExecutionProvider" in preflight["providers"]
    assert preflight["import_s"] > 0 and preflight["run_s"] > 0
    assert preflight["duration_s"] >= preflight["import_s"] + preflight["run_s"]
    assert preflight["shape"] == [1, 10]
    comparison = preflight["comparison"]
    assert comparison["match"] is True and 0 <= comparison["max_abs_diff"] <= comparison["atol"], comparison


def test_build_list_shows_the_stock_artifact(stock_build: StockBuild) -> None:
    def orch(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "orchestrator", *args],
            env=stock_build.env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )

    listed = orch("build", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    [entry] = json.loads(listed.stdout)
    assert Path(entry["directory"]) == stock_build.artifact.directory
    assert entry["wheel_sha256"] == stock_build.manifest["wheel_sha256"] and entry["preflight"]["ok"] is True
    table = orch("build", "list")
    assert table.returncode == 0, table.stderr
    version = stock_build.manifest["ort_version"]
    shown = table.stdout + table.stderr  # orch's human output goes to stderr
    row = next((line for line in shown.splitlines() if stock_build.manifest["wheel"] in line), "")
    cells = [cell.strip() for cell in re.split(r"[│┃|]", row) if cell.strip()]
    assert cells[:4] == ["lab", "stock", version, stock_build.manifest["wheel"]], shown
    assert cells[4] == f"{stock_build.manifest['wheel_size'] / 1e6:.1f} MB" and cells[5] == "ok", shown
