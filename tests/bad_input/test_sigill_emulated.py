"""A wheel that dies of SIGILL under emulation is reported within seconds, never hangs.

qemu-user writing the core of a multi-threaded guest that died of SIGILL stalls (the official
ORT 1.21.0 wheel on an emulated Cortex-A72 did: a pre-flight container alive for half an hour).
Every container orch runs has core dumps off and the pre-flight a time limit; the pre-flight's
SIGILL guard names the instruction. Here a Python one-liner in the lab's arm64 image executes an
ARMv8.2 half-precision instruction (``fadd h0, h0, h0``) from four threads under
``QEMU_CPU=cortex-a72``: the real failure, in a few seconds.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from orchestrator.board_side import read_text
from orchestrator.builds.preflight import describe_sigill, sigill_report
from orchestrator.common import aarch64_isa
from orchestrator.errors import ContainerTimeout
from orchestrator.lab.base_images import ensure_base_image
from orchestrator.lab.boards import LAB_PACKAGES
from orchestrator.targets import resolve_target

FADD_H0 = 0x1EE02800  # fadd h0, h0, h0 (FEAT_FP16)
RET = 0xD65F03C0

# Threads first (a multi-threaded guest is what made qemu's core dump stall), then the fp16 code.
FP16_PROGRAM = f"""
import ctypes, mmap, threading, time
for _ in range(3):
    threading.Thread(target=time.sleep, args=(60,), daemon=True).start()
code = ({FADD_H0:#x}).to_bytes(4, "little") + ({RET:#x}).to_bytes(4, "little")
page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(code)
print("running fp16 code", flush=True)
ctypes.CFUNCTYPE(None)(ctypes.addressof(ctypes.c_char.from_buffer(page)))()
print("the CPU ran it")
"""


@pytest.fixture(scope="module")
def arm64_image(engine: object) -> str:
    # The image the pre-flight runs in (and the lab boards are made from).
    return ensure_base_image(engine, "trixie", "arm64", LAB_PACKAGES)


def _run(engine: object, image: str, tmp_path: Path, script: str, **kwargs: object) -> tuple[int, list[str]]:
    work = tmp_path / "pf"
    work.mkdir(parents=True)
    (work / "sigill_guard.py").write_text(read_text("sigill_guard.py"))
    (work / "program.py").write_text(script)
    lines: list[str] = []
    code = engine.run(  # type: ignore[attr-defined]
        image,
        ["python3", "/pf/program.py"],
        environment={"QEMU_CPU": "cortex-a72"},
        copy_in=[(work, "/pf")],
        network="none",
        labels={"orch.test": "sigill"},
        on_log=lines.append,
        **kwargs,
    )
    return code, lines


def test_sigill_of_a_threaded_guest_ends_within_seconds(
    engine: object, arm64_image: str, tmp_path: Path
) -> None:
    # No guard: the default action, a core dump, which the container's core limit (0) turns off;
    # the engine's init is PID 1, so qemu's re-raised SIGILL really ends the program.
    started = time.monotonic()
    code, lines = _run(engine, arm64_image, tmp_path, FP16_PROGRAM, timeout=120)
    assert time.monotonic() - started < 60, "SIGILL under qemu-user must not stall on a core dump"
    assert code == 132, lines
    assert "running fp16 code" in lines and "the CPU ran it" not in lines
    code, lines = _run(engine, arm64_image, tmp_path / "again", "print(open('/proc/self/limits').read())")
    core = [line.split() for line in lines if line.startswith("Max core file size")]
    assert code == 0 and core and core[0][4:6] == ["0", "0"], lines


def test_the_guard_names_the_instruction_and_the_cpu(
    engine: object, arm64_image: str, tmp_path: Path
) -> None:
    started = time.monotonic()
    code, lines = _run(engine, arm64_image, tmp_path, "import sigill_guard\n" + FP16_PROGRAM, timeout=120)
    assert time.monotonic() - started < 60
    assert code == 132, lines
    report = sigill_report(lines)
    assert report is not None, lines
    assert report["word"] == FADD_H0
    assert report["python"] and "program.py" in report["python"][0]
    message = describe_sigill(report, resolve_target("lab"))
    assert "SIGILL (illegal instruction)" in message
    assert "cortex-a72" in message
    assert "0x1ee02800" in message and "FEAT_FP16, ARMv8.2-A" in message


def test_a_container_past_its_time_limit_is_killed(engine: object, arm64_image: str, tmp_path: Path) -> None:
    started = time.monotonic()
    with pytest.raises(ContainerTimeout) as caught:
        _run(
            engine,
            arm64_image,
            tmp_path,
            "import time\nprint('sleeping', flush=True)\ntime.sleep(300)\n",
            timeout=3,
        )
    assert time.monotonic() - started < 60
    assert "ran longer than 3 s" in caught.value.message
    assert not engine.containers({"orch.test": "sigill"}), "the killed container is removed"  # type: ignore[attr-defined]


def test_known_instruction_classes() -> None:
    assert "FEAT_FP16" in aarch64_isa.describe(FADD_H0)
    assert "FEAT_FP16" in aarch64_isa.describe(0x1EE01000)  # fmov h0, #2.0
    assert aarch64_isa.classify(0x1EE24000) is None  # fcvt s0, h0: ARMv8.0
    assert "FEAT_DotProd" in aarch64_isa.describe(0x4E829420)  # sdot v0.4s, v1.16b, v2.16b
    assert "FEAT_LSE" in aarch64_isa.describe(0xB8200020)  # ldadd w0, w0, [x1]
    assert "FEAT_LSE" in aarch64_isa.describe(0x88A07C41)  # cas w0, w1, [x2]
    assert "FEAT_FP16" in aarch64_isa.describe(0x4E401420)  # fadd v0.8h, v1.8h, v0.8h
    assert "does not implement" in aarch64_isa.describe(0x00000000)
    assert aarch64_isa.classify(0x1E222800) is None  # fadd s0, s0, s2 (single precision)


def test_sigill_report_lines() -> None:
    line = f'ORCH-SIGILL {{"word": {FADD_H0}, "object": "/venv/lib/libonnxruntime.so", "offset": 4096}}'
    report = sigill_report(["pip says nothing", line])
    assert report == {"word": FADD_H0, "object": "/venv/lib/libonnxruntime.so", "offset": 4096}
    message = describe_sigill(report, resolve_target("rpi4"))
    assert message.startswith("SIGILL (illegal instruction): a cortex-a72 (target rpi4) cannot run")
    assert "in /venv/lib/libonnxruntime.so at offset 0x1000" in message
    assert sigill_report(["ORCH-SIGILL not json"]) == {}
    assert sigill_report(["nothing"]) is None


def test_lab_boards_run_without_core_dumps(lab) -> None:  # type: ignore[no-untyped-def]
    # Everything run on a lab board (deploy's verification, bench agents, exec) is an emulated
    # process that inherits the container's core limit: 0, so a SIGILL there cannot stall either.
    result = lab.orch(
        "exec", "--group", "lab", "--json", "--", "sh -c 'ulimit -c; ulimit -H -c'", timeout=300
    )
    assert result.returncode == 0, result.stderr
    for board, outcome in json.loads(result.stdout).items():
        assert outcome["stdout"].split() == ["0", "0"], (board, outcome)
