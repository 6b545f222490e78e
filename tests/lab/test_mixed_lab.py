"""A lab that looks like a fleet: boards per profile, each with its profile's OS and emulated CPU.

`orch lab up --board rpi5:1 --board rpi4:1 --board rpi4-bookworm:1` in its own ORCH_HOME: a
Cortex-A76 Debian 13 board, a Cortex-A72 Debian 13 board and a Cortex-A72 Debian 12 board. What
each board reports over SSH is what the profile says; deploy refuses a build whose -mcpu needs CPU
features a board lacks, before any byte is sent, and lets the same wheel through where it fits.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from board_checks import exec_count

from orchestrator.artifacts.store import BuildRecord, Manifest, Preflight, write_manifest
from tests.conftest import Lab, profile_lab
from tests.stock_baseline import wheel_version

pytestmark = pytest.mark.integration

BOARDS = {"rpi5-1": "rpi5", "rpi4-1": "rpi4", "rpi4-bookworm-1": "rpi4-bookworm"}


@pytest.fixture(scope="module")
def mixed_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    specs = [f"{profile}:1" for profile in dict.fromkeys(BOARDS.values())]
    with profile_lab(tmp_path_factory.mktemp("mixed-lab"), *specs) as the_lab:
        yield the_lab


def _facts(lab: Lab, board: str) -> dict[str, str]:
    script = Path("orchestrator/board_side/board_facts.sh").read_text()
    result = lab.orch("exec", "--host", board, "--json", "--", "sh", "-c", script, "sh", "python3", "orch")
    assert result.returncode == 0, result.stderr
    stdout = json.loads(result.stdout)[board]["stdout"]
    return dict(line.partition("=")[::2] for line in stdout.splitlines())


def test_each_board_has_its_profiles_os_and_cpu(mixed_lab: Lab) -> None:
    assert {board.name: board.target for board in mixed_lab.boards} == BOARDS
    facts = {board: _facts(mixed_lab, board) for board in BOARDS}
    assert "asimddp" in facts["rpi5-1"]["cpu_features"].split()  # Cortex-A76: dot product, fp16
    assert "fphp" in facts["rpi5-1"]["cpu_features"].split()
    for a72 in ("rpi4-1", "rpi4-bookworm-1"):
        assert not {"asimddp", "fphp", "atomics"} & set(facts[a72]["cpu_features"].split())
    assert facts["rpi4-1"]["os_version"] == "13" and facts["rpi4-1"]["python_raw"].startswith("Python 3.13")
    bookworm = facts["rpi4-bookworm-1"]
    assert (bookworm["os_version"], bookworm["glibc_raw"]) == ("12", "glibc 2.36")
    assert bookworm["python_raw"].startswith("Python 3.11")
    listing = json.loads(mixed_lab.orch("inventory", "list", "--group", "rpi5", "--json", check=True).stdout)
    assert [board["name"] for board in listing["boards"]] == ["rpi5-1"]


def _a76_artifact(stock_wheel: Path, root: Path) -> Path:
    """A real wheel whose manifest says it was compiled with -mcpu=cortex-a76 (what `orch build
    --target rpi5` records). The refusal is decided from the manifest and the board's
    /proc/cpuinfo before anything is sent, so the wheel's own code does not matter here."""
    directory = root / "rpi5-a76"
    directory.mkdir()
    shutil.copy2(stock_wheel, directory / stock_wheel.name)
    write_manifest(
        directory,
        Manifest(
            target="rpi5",
            variant="tuned",
            ort_version=wheel_version(stock_wheel),
            wheel=stock_wheel.name,
            wheel_sha256=hashlib.sha256(stock_wheel.read_bytes()).hexdigest(),
            wheel_size=stock_wheel.stat().st_size,
            preflight=Preflight(ok=True),
            build=BuildRecord(compiler_flags=("-O3", "-mcpu=cortex-a76")),
        ),
    )
    return directory


def test_an_a76_build_is_refused_for_the_a72_board_before_anything_is_sent(
    mixed_lab: Lab, stock_wheel: Path, tmp_path: Path
) -> None:
    artifact = _a76_artifact(stock_wheel, tmp_path)
    refused = mixed_lab.orch("deploy", "--host", "rpi4-1", "--artifact", str(artifact), "--dry-run")
    assert refused.returncode != 0
    assert "refused, nothing was sent" in refused.stderr
    assert "-mcpu=cortex-a76" in refused.stderr and "asimddp" in refused.stderr and "SIGILL" in refused.stderr
    assert "Traceback" not in refused.stderr
    # Nothing reached the board: no release directory was made.
    listing = mixed_lab.orch(
        "exec", "--host", "rpi4-1", "--json", "--", "sh", "-c", "ls orch/releases 2>/dev/null | wc -l"
    )
    assert exec_count(listing, "rpi4-1") == 0
    fits = mixed_lab.orch("deploy", "--host", "rpi5-1", "--artifact", str(artifact), "--dry-run")
    assert fits.returncode == 0, fits.stderr
    assert "SIGILL" not in fits.stderr


def test_a_sysroot_pulled_from_a_board_without_development_files_is_refused_with_the_pulls_apt_line(
    mixed_lab: Lab,
) -> None:
    # The lab's Debian 12 board has the runtime only (no libc6-dev, libstdc++-12-dev, python3-dev):
    # the pull says what the board lacks, and a build against that sysroot is refused before any
    # image or container is made, naming the same packages in the same apt line.
    pulled = mixed_lab.orch("sysroot", "pull", "--host", "rpi4-bookworm-1", timeout=900)
    assert pulled.returncode == 0, pulled.stderr
    apt_line = "sudo apt install libc6-dev python3-dev libstdc++-12-dev"
    assert apt_line in pulled.stdout + pulled.stderr
    # The MLAS scope needs no Python from the board, so its line names the C and C++ headers only.
    for scope, wanted in (("wheel", apt_line), ("mlas-test", "sudo apt install libc6-dev libstdc++-12-dev)")):
        refused = mixed_lab.orch(
            "build", "--target", "jetson", "--sysroot-from", "rpi4-bookworm-1", "--scope", scope, "--dry-run"
        )
        assert refused.returncode == 2, refused.stderr
        assert "sysroot 'rpi4-bookworm-1' lacks what a cross build needs" in refused.stderr
        assert wanted in refused.stderr and "board rpi4-bookworm-1" in refused.stderr
        assert "Traceback" not in refused.stderr
