"""Checks several tests run on boards: one inference on a deployed release (and a deploy that
matches x86 onnxruntime), a shard of MLAS's tests; and on what a build brought back: MLAS's compile
commands, an unchanged rebuild."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from subprocess import CompletedProcess
from typing import Any
from unittest import mock

import numpy as np
import onnxruntime

from orchestrator.adapters import ssh
from orchestrator.artifacts.wheel import SharedObjectInfo, _inspect_elf
from orchestrator.board import Board
from orchestrator.builds.preflight import board_image
from orchestrator.lab.sample_models import tiny_convnet, write_model
from orchestrator.targets import resolve_target

_INFER = (
    "import sys, json, numpy as np, onnxruntime as ort\n"
    "x = np.array(json.loads(sys.stdin.read()), dtype=np.float32)\n"
    "s = ort.InferenceSession(sys.argv[1])\n"
    "print(ort.__version__, json.dumps(s.run(None, {'input': x})[0].tolist()))"
)


def infer_on_board(home: Path, board: Board, model_name: str, inputs: np.ndarray) -> tuple[str, np.ndarray]:
    """(onnxruntime version, output) of the board's current release on ``models/<model_name>``.

    ``home`` is the lab's ORCH_HOME: its known_hosts holds the board's host key (the default home's
    would record it on first contact, in the user's ~/.orch)."""
    with mock.patch.dict(os.environ, {"ORCH_HOME": str(home)}), ssh.connect(board) as session:
        out = session.run(
            [
                f"{board.workdir}/current/venv/bin/python",
                "-c",
                _INFER,
                f"{board.workdir}/current/models/{model_name}",
            ],
            stdin=json.dumps(inputs.tolist()).encode(),
            timeout=900,
        ).stdout
    version, _, values = out.strip().splitlines()[-1].partition(" ")
    return version, np.array(json.loads(values), dtype=np.float32)


def deploy_and_match_x86(lab: Any, board: str, variant: str, scratch: Path, *, seed: int = 5) -> None:
    """Deploy ``variant`` with a tiny conv net to ``board`` (orch deploy), then one inference there
    must be ORT 1.21.0's and match x86 onnxruntime's on the same inputs."""
    model = write_model(tiny_convnet(), scratch / "tiny.onnx")
    deploy = lab.orch("deploy", "--host", board, "--variant", variant, "--model", str(model), timeout=1800)
    assert deploy.returncode == 0, deploy.stderr[-3000:]
    inputs = np.random.default_rng(seed).standard_normal((1, 3, 32, 32)).astype(np.float32)
    version, output = infer_on_board(lab.home, lab.board(board), "tiny.onnx", inputs)
    assert version == "1.21.0"
    reference = onnxruntime.InferenceSession(str(model)).run(None, {"input": inputs})[0]
    np.testing.assert_allclose(output, reference, rtol=1e-4, atol=1e-5)


def mlas_shard(engine: object, target: str, bundle: Path, *, shards: int, shard: int) -> tuple[int, str, int]:
    """Run one shard of ``onnxruntime_mlas_test`` (and its libraries, in ``bundle``) in an arm64 image
    of ``target``'s OS on its emulated CPU: (exit code, output, tests passed)."""
    profile = resolve_target(target)
    output: list[str] = []
    code = engine.run(  # type: ignore[attr-defined]
        board_image(engine, profile),  # type: ignore[arg-type]
        ["sh", "-c", "cd /t && ./onnxruntime_mlas_test"],
        environment={
            "QEMU_CPU": profile.qemu_cpu,
            "LD_LIBRARY_PATH": "/t",
            "GTEST_TOTAL_SHARDS": str(shards),
            "GTEST_SHARD_INDEX": str(shard),
        },
        volumes={str(bundle): {"bind": "/t", "mode": "ro"}},
        network="none",
        on_log=output.append,
        timeout=1500,  # an emulated test executable that hangs is killed, not waited for
    )
    text = "\n".join(output)
    passed = re.search(r"\[  PASSED  \] (\d+) test", text)
    return code, text, int(passed.group(1)) if passed else 0


def exec_count(result: CompletedProcess[str], board: str) -> int:
    """The count a ``... | wc -l`` printed on ``board``, read from `orch exec --json`'s document:
    the command's own output, checked to be one number (orch's human output names the exit status,
    ``exit 0``, so a "0" is always somewhere in it)."""
    assert result.returncode == 0, result.stderr[-3000:]
    entry = json.loads(result.stdout)[board]
    assert entry["exit_code"] == 0, entry
    words = entry["stdout"].split()
    assert len(words) == 1 and words[0].isdigit(), f"{board}: one count expected, got {entry['stdout']!r}"
    return int(words[0])


def aarch64_elf(path: Path) -> SharedObjectInfo:
    """What orch reads of the ELF file at ``path`` (as the wheel check does), checked to be aarch64."""
    info = _inspect_elf(path.name, path.read_bytes())
    assert info is not None and info.machine == "aarch64", f"{path}: an aarch64 ELF file expected, got {info}"
    return info


def built_mlas_test(build_stdout: str, *, max_glibc: tuple[int, int]) -> tuple[Path, bytes]:
    """The build directory of an `orch build --scope mlas-test --json` and its test executable's
    bytes, checked to be an aarch64 ELF needing no glibc newer than ``max_glibc``."""
    build_dir = Path(json.loads(build_stdout)["build_dir"])
    path = build_dir / "out" / "onnxruntime_mlas_test"
    info = aarch64_elf(path)
    exe = path.read_bytes()
    assert info.glibc is not None and tuple(map(int, info.glibc.split("."))) <= max_glibc, info.glibc
    return build_dir, exe


def compile_commands(build_dir: Path) -> list[dict[str, Any]]:
    """The build's compile_commands.json, as orch brought it back (``orch-report/``)."""
    commands: list[dict[str, Any]] = json.loads(
        (build_dir / "orch-report" / "compile_commands.json").read_text()
    )
    return commands


def mlas_commands(
    commands: list[dict[str, Any]], *, suffixes: tuple[str, ...] = (".c", ".cpp", ".cc")
) -> list[str]:
    """The compile commands of MLAS's C and C++ sources (its hand-written .S kernels name their own
    architecture); at least one, or the check fails."""
    mlas = [c["command"] for c in commands if "/core/mlas/lib/" in c["file"] and c["file"].endswith(suffixes)]
    assert mlas, "no MLAS source in compile_commands.json"
    return mlas


def unchanged_rebuild(result: CompletedProcess[str]) -> dict[str, Any]:
    """The document of an `orch build --json` run again on unchanged inputs, checked: the kept build
    directory is configured with these very inputs, so CMake does not run and not one call reaches
    the compiler cache."""
    assert result.returncode == 0, result.stderr[-3000:]
    rebuilt: dict[str, Any] = json.loads(result.stdout)
    assert rebuilt["incremental"]["configure"] == "reused", rebuilt
    assert (rebuilt["ccache"]["hits"], rebuilt["ccache"]["misses"]) == (0, 0), rebuilt["ccache"]
    return rebuilt
