"""`orch exec` on the real lab: emulated arm64 boards behind real sshd, as a user would check them."""

from __future__ import annotations

import json
import shlex

from orchestrator.adapters import ssh
from orchestrator.targets import resolve_target

# Reads AT_HWCAP (auxv type 16) as the kernel (here: qemu) hands it to the process.
# Bits 9 and 10 are HWCAP_FPHP and HWCAP_ASIMDHP: ARMv8.2 half-precision arithmetic.
HWCAP_PROBE = """
import struct
auxv = dict(struct.iter_unpack("<QQ", open("/proc/self/auxv", "rb").read()))
hwcap = auxv[16]
print("fphp", (hwcap >> 9) & 1, "asimdhp", (hwcap >> 10) & 1)
"""

# Runs one machine instruction from an executable page: an ARMv8.0 core executes the
# single-precision add and dies with SIGILL on the half-precision one (ARMv8.2 fp16),
# exactly what a wheel built with -march=armv8.2-a+fp16 does on a Pi 4 or a Jetson Nano.
INSTRUCTION_PROBE = """
import ctypes, mmap, struct, sys
words = {"fp32": 0x1E222820, "fp16": 0x1EE22820}  # fadd s0,s1,s2 / fadd h0,h1,h2
page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(struct.pack("<II", words[sys.argv[1]], 0xD65F03C0))  # ...; ret
ctypes.CFUNCTYPE(None)(ctypes.addressof(ctypes.c_char.from_buffer(page)))()
print(sys.argv[1], "ran")
"""


def board_names(lab) -> set[str]:
    return {board.name for board in lab.boards}


def test_every_lab_board_is_aarch64(lab):
    human = lab.orch("exec", "--group", "lab", "--", "uname", "-m", timeout=300)
    assert human.returncode == 0, human.stderr
    assert human.stderr.count("aarch64") == len(lab.boards)
    assert f"{len(lab.boards)} boards: {len(lab.boards)} ok" in human.stderr
    assert "first contact" not in human.stderr, "lab host keys are recorded by `orch lab up`, never learnt"
    document = json.loads(
        lab.orch("exec", "--group", "lab", "--json", "--", "uname", "-m", timeout=300).stdout
    )
    assert {name: entry["stdout"] for name, entry in document.items()} == dict.fromkeys(
        board_names(lab), "aarch64\n"
    )


def test_lab_python_is_the_profiles(lab):
    expected = tuple(int(part) for part in resolve_target("lab").os.python.split("."))
    result = lab.orch(
        "exec",
        "--group",
        "lab",
        "--json",
        "--",
        "python3",
        "-c",
        "import sys; print(sys.version_info[:2])",
        timeout=300,
    )
    document = json.loads(result.stdout)
    assert result.returncode == 0, result.stderr
    assert {name: entry["stdout"].strip() for name, entry in document.items()} == dict.fromkeys(
        board_names(lab), str(expected)
    )


def test_ssh_sessions_see_a_cortex_a72_without_fp16(lab):
    """QEMU_CPU=cortex-a72 holds inside SSH sessions: the CPU reports itself and lacks ARMv8.2 fp16."""
    cpuinfo = json.loads(
        lab.orch(
            "exec",
            "--group",
            "lab",
            "--json",
            "--",
            "grep",
            "-m2",
            "-E",
            "^(Features|CPU part)",
            "/proc/cpuinfo",
        ).stdout
    )
    hwcap = json.loads(
        lab.orch("exec", "--group", "lab", "--json", "--", "python3", "-c", HWCAP_PROBE).stdout
    )
    for name in board_names(lab):
        lines = dict(line.split(":", 1) for line in cpuinfo[name]["stdout"].splitlines())
        assert lines["CPU part\t"].strip() == "0xd08", "0xd08 is Arm's part number of the Cortex-A72"
        features = lines["Features\t"].split()
        assert "asimd" in features and "fphp" not in features and "asimdhp" not in features
        assert hwcap[name]["stdout"] == "fphp 0 asimdhp 0\n"


def test_an_fp16_instruction_dies_with_sigill_on_the_lab(lab):
    board = lab.boards[0]
    # One command line through the login shell so the shell reports the signal as 128+4.
    probe = shlex.quote(INSTRUCTION_PROBE)
    with ssh.connect(board, connect_timeout=60) as session:
        fp32 = session.run_command_line(f"python3 -c {probe} fp32; echo status=$?", timeout=300)
        fp16 = session.run_command_line(f"python3 -c {probe} fp16; echo status=$?", timeout=300)
    assert fp32.stdout == "fp32 ran\nstatus=0\n", "the probe itself must work (an ARMv8.0 instruction)"
    assert fp16.stdout == "status=132\n", f"fp16 must be an illegal instruction here: {fp16.stderr}"
