"""Sysroots from real boards: `orch sysroot pull` from the lab's Debian 13 boards over SSH, a Debian 12
rootfs added from the bookworm base image, and the real stock onnxruntime wheel checked against both.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest

from orchestrator.adapters.engine import Engine
from orchestrator.builds.sysroots.contents import Sysroot
from orchestrator.lab.base_images import ensure_base_image

# What orch's other lab tests give a bookworm board: the same package list makes the same image.
BOOKWORM_PACKAGES = ("ca-certificates", "openssh-server", "python3", "python3-venv")


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def world(lab: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The lab's environment with an inventory that adds `ghost` (a closed port) beside the lab boards."""
    root = tmp_path_factory.mktemp("sysroot-lab")
    lab.refresh()
    template = lab.board("lab1")
    inventory = root / "inventory.yaml"
    ghost = {
        "hostname": "127.0.0.1",
        "port": _closed_port(),
        "user": template.user,
        "identity_file": str(template.identity_file),
    }
    inventory.write_text(json.dumps({"all": {"hosts": {"ghost": ghost}}}))
    return {"env": {**lab.env, "ORCH_INVENTORY": str(inventory)}, "root": root, "lab": lab}


def orch(world: dict[str, Any], *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        env=world["env"],
        cwd=world["root"],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


@pytest.fixture(scope="module")
def pulled(world: dict[str, Any]) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    """Two boards pulled in parallel, and one that is down.

    Uncompressed (gzip under emulation is slower than the loopback link); the second pull gzips."""
    args = ("--host", "lab1", "--host", "lab2", "--host", "ghost", "--no-compress", "--json")
    result = orch(world, "sysroot", "pull", *args)
    return result, json.loads(result.stdout)


def test_pull_from_a_lab_board_matches_what_the_board_reports(
    world: dict[str, Any], pulled: tuple[subprocess.CompletedProcess[str], dict[str, Any]], stock_wheel: Path
) -> None:
    # The board that is down is named, the others are stored: exit 8, as for every fleet command.
    result, document = pulled
    assert result.returncode == 8, result.stdout + result.stderr
    assert not document["ghost"]["ok"] and "connection refused" in document["ghost"]["error"]
    lab1, lab2 = document["lab1"], document["lab2"]
    assert lab1["ok"] and lab2["ok"]
    record = lab1["record"]
    facts = record["board_facts"]
    # The tree's own libc.so.6 and python3.X directory say what the board said over SSH.
    assert (record["glibc"], facts["glibc"]) == ("2.41", "2.41")
    assert record["python"] == "3.13" and facts["python_version"].startswith("3.13.")
    assert record["triplet"] == "aarch64-linux-gnu" and record["os"]["version"] == "13"
    assert record["board"] == "lab1" and record["pulled_at"] and "asimd" in facts["cpu_features"]
    # The lab's boards are the same image: the same tree, stored once, each with its own facts.
    assert lab2["digest"] == lab1["digest"] and [lab1["new"], lab2["new"]].count(True) == 1
    assert lab2["record"]["board"] == "lab2" and lab2["record"]["board_facts"]["home"]
    sysroot = Sysroot(Path(lab1["path"]) / "root")
    libstdcxx = sysroot.library("libstdc++.so.6")
    assert libstdcxx is not None and libstdcxx.machine == "EM_AARCH64"
    assert libstdcxx.highest("GLIBCXX_") == "GLIBCXX_3.4.33"  # GCC 14's libstdc++, as trixie ships
    # The board's interpreter and standard library, for cross builds to run; never its packages.
    python_lib = sysroot.root / "usr" / "lib" / "python3.13"
    assert sysroot.python_executable == "usr/bin/python3.13"
    assert (python_lib / "encodings" / "utf_8.py").is_file() and (python_lib / "lib-dynload").is_dir()
    assert not list(python_lib.rglob("__pycache__")) and not (sysroot.root / "usr/lib/python3").exists()
    # A minimal board: no -dev packages, so wheel checks only, and the packages are named.
    assert record["missing_dev_packages"] == ["libc6-dev", "python3-dev", "libstdc++-14-dev"]

    again = orch(world, "sysroot", "pull", "--host", "lab1")
    assert again.returncode == 0, again.stdout + again.stderr
    assert f"lab1: unchanged, same digest {lab1['digest'][:12]}" in again.stderr
    assert "nothing new stored" in again.stderr
    assert "lab1 lacks headers (libc6-dev, python3-dev, libstdc++-14-dev not installed)" in again.stderr
    assert any(
        line.endswith("; on the board: sudo apt install libc6-dev python3-dev libstdc++-14-dev")
        for line in again.stderr.splitlines()
    ), again.stderr
    # Nothing left behind on the board: the tarball was orch's scratch.
    leftovers = orch(world, "exec", "--host", "lab1", "--json", "--", "ls -A orch | grep -c sysroot- || true")
    assert json.loads(leftovers.stdout)["lab1"]["stdout"].strip() == "0", leftovers.stdout

    listing = json.loads(orch(world, "sysroot", "list", "--json").stdout)
    assert {s["name"]: s["digest"] for s in listing if s["name"].startswith("lab")} == {
        "lab1": lab1["digest"],
        "lab2": lab1["digest"],
    }

    check = orch(world, "sysroot", "check", "--sysroot-from", "lab1", "--wheel", str(stock_wheel))
    assert check.returncode == 0, check.stdout + check.stderr
    assert f"{stock_wheel.name} fits sysroot lab1" in check.stderr
    assert "libstdc++.so.6" in check.stderr and "GLIBCXX_3.4.33" in check.stderr


def _wheel_of(directory: Path, members: dict[str, Path]) -> Path:
    wheel = directory / "native-1.0-cp313-cp313-linux_aarch64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for member, path in members.items():
            archive.write(path, member)
    return wheel


def test_debian_12_rootfs_refuses_what_debian_13_libraries_need(
    world: dict[str, Any], pulled: tuple[subprocess.CompletedProcess[str], dict[str, Any]], stock_wheel: Path
) -> None:
    image = ensure_base_image(Engine(), "bookworm", "aarch64", BOOKWORM_PACKAGES)
    tarball = world["root"] / "bookworm-rootfs.tar"
    container = subprocess.run(
        ["docker", "create", image, "/bin/true"], capture_output=True, text=True, check=True
    ).stdout.strip()
    try:
        subprocess.run(["docker", "export", "-o", str(tarball), container], check=True)
    finally:
        subprocess.run(["docker", "rm", "-f", container], capture_output=True, check=False)
    added = orch(world, "sysroot", "add", str(tarball), "--name", "bookworm", "--json")
    assert added.returncode == 0, added.stdout + added.stderr
    record = json.loads(added.stdout)["record"]
    assert (record["glibc"], record["python"], record["os"]["version"]) == ("2.36", "3.11", "12")

    check = orch(
        world, "sysroot", "check", "--sysroot-from", "bookworm", "--wheel", str(stock_wheel), "--json"
    )
    document = json.loads(check.stdout)
    # manylinux_2_28 needs nothing Debian 12's glibc 2.36 and GCC 12 libstdc++ lack...
    assert document["problems"] == []
    assert document["sysroot"]["libraries"]["libstdc++.so.6"]["newest"]["GLIBCXX"] == "GLIBCXX_3.4.30"
    # ...but a cp313 wheel does not install on a board whose Python is 3.11: refused, and said.
    assert check.returncode == 5
    assert document["tag_problems"] == [
        f"{stock_wheel.name} is for Python cp313, sysroot bookworm has Python 3.11"
    ]

    # Native code built on Debian 13 (two of the trixie board's own libraries, as a wheel's
    # extensions): it fits the board it came from and is refused for Debian 12, naming each need.
    trixie = Path(pulled[1]["lab1"]["path"]) / "root" / "usr" / "lib" / "aarch64-linux-gnu"
    native = _wheel_of(
        world["root"],
        {
            "native/_sqlite.so": trixie / "libsqlite3.so.0.8.6",
            "native/_apt.so": trixie / "libapt-private.so.0.0.0",
        },
    )
    fits = orch(world, "sysroot", "check", "--sysroot-from", "lab1", "--wheel", str(native))
    assert fits.returncode == 0, fits.stdout + fits.stderr
    refused = orch(world, "sysroot", "check", "--sysroot-from", "bookworm", "--wheel", str(native))
    assert refused.returncode == 5, refused.stdout + refused.stderr
    text = " ".join(refused.stderr.split())
    assert "native/_sqlite.so needs GLIBC_2.38 from libm.so.6 (the sysroot's newest: GLIBC_2.35)" in text
    assert "native/_apt.so needs GLIBC_2.38 from libc.so.6 (the sysroot's newest: GLIBC_2.36)" in text
    assert (
        "native/_apt.so needs GLIBCXX_3.4.32 from libstdc++.so.6 (the sysroot's newest: GLIBCXX_3.4.30)"
        in text
    )
