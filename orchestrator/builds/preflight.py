"""Pre-flight: does the wheel import and compute correctly on the board's exact CPU model?

Before an artifact is marked good (stock wheels included), orch installs it in an arm64
container of the board's OS and runs one inference there under qemu-user with
``QEMU_CPU=<the board's CPU>`` (cortex-a57, cortex-a72, cortex-a76...). qemu's default CPU
has every ARMv8.x feature and hides code that a Pi 4 or a Jetson Nano cannot run (ORT 1.21's
fp16 constants in a global constructor: SIGILL at import). The outputs are compared with the
workstation's x86 onnxruntime on the same model and inputs. What runs in the container is
``orchestrator/board_side/preflight_install.sh`` and ``preflight_check.py``.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, TypedDict

import numpy as np

from orchestrator.artifacts.dependencies import resolve_dependencies
from orchestrator.artifacts.store import Preflight
from orchestrator.board_side import read_text
from orchestrator.common import aarch64_isa
from orchestrator.common.digests import file_sha256
from orchestrator.errors import BuildError, ContainerTimeout, DeployError
from orchestrator.lab.base_images import base_image_variable, ensure_base_image
from orchestrator.lab.boards import LAB_PACKAGES  # the lab board's package set: one offline image serves both
from orchestrator.lab.sample_models import preflight_model, write_model
from orchestrator.targets import TargetProfile

if TYPE_CHECKING:
    from orchestrator.adapters.engine import Engine

RTOL = 1e-4
ATOL = 1e-5
_SIGNALS = {132: "SIGILL (illegal instruction)", 134: "SIGABRT", 135: "SIGBUS", 139: "SIGSEGV"}
# Installing the wheel and one tiny inference take a minute or two under qemu on a busy 2-core
# machine; a pre-flight still running after this is hung (and is killed).
PREFLIGHT_TIMEOUT_S = 900.0
_SIGILL_LINE = "ORCH-SIGILL "


# Where the build container sees the sysroot (the paths package_wheel.py reports are under it).
_SYSROOT = PurePosixPath("/sysroot")
GPU_NOT_RUN = "GPU path not run"


@dataclass(frozen=True, kw_only=True)
class GpuLibraries:
    """A CUDA wheel's pre-flight: the board's GPU libraries its provider links (soname -> the file
    under /sysroot, as the build resolved it) and the stored sysroot that holds them."""

    sysroot: Path
    files: Mapping[str, str]

    @property
    def runtime(self) -> dict[str, str]:
        """The CUDA runtime's soname the check asks for its GPUs (``libcudart.so.12``)."""
        runtime = next((name for name in self.files if name.startswith("libcudart.so")), None)
        return {"ORCH_CUDA_RUNTIME": runtime} if runtime else {}

    def links(self, directory: Path) -> None:
        """``directory``/<soname> -> the sysroot's file, as the board's loader would find it."""
        directory.mkdir()
        for soname, path in self.files.items():
            if PurePosixPath(path).is_relative_to(_SYSROOT):
                (directory / soname).symlink_to(path)


class _ComparisonKeys(TypedDict):
    match: bool


class Comparison(_ComparisonKeys, total=False):
    """The board's outputs against x86 onnxruntime's, as the pre-flight's details keep it
    (``comparison`` in the manifest's ``preflight``)."""

    reason: str  # the shapes differ (nothing else is compared then)
    max_abs_diff: float
    rtol: float
    atol: float


def board_image(engine: Engine, profile: TargetProfile) -> str:
    """An arm64 image of the board's OS with python3 (offline bootstrap, or a registry base)."""

    if profile.bootstrap_suite:
        return ensure_base_image(engine, profile.bootstrap_suite, "arm64", LAB_PACKAGES)
    # The build image's variable names an image of the build machine's architecture; the arm64 one
    # may be told apart with the _ARM64 suffix (one local tag holds one architecture).
    variable = base_image_variable(profile.os.codename)
    names = (f"{variable}_ARM64", variable)
    given = next(((name, os.environ[name]) for name in names if os.environ.get(name)), None)
    if given is not None and engine.image_id(given[1]):
        return given[1]
    state = f" ({given[0]}={given[1]}: {engine.label} does not have it)" if given else ""
    raise BuildError(
        f"no arm64 image of {profile.os.distro} {profile.os.release} for the pre-flight of"
        f" '{profile.name}'{state}",
        hint=f"set {names[0]} (or {names[1]}) to an arm64 {profile.os.distro} {profile.os.release} image"
        " with python3 that the engine has",
    )


def reference_run(model: Path, inputs: np.ndarray) -> np.ndarray:
    """The workstation's onnxruntime on the same model and inputs."""
    import onnxruntime

    session = onnxruntime.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    return np.asarray(session.run(None, {"input": inputs})[0])


def compare(board: np.ndarray, reference: np.ndarray) -> Comparison:
    if board.shape != reference.shape:
        return Comparison(match=False, reason=f"shape {board.shape} vs {reference.shape}")
    diff = (
        float(np.max(np.abs(board.astype(np.float64) - reference.astype(np.float64)))) if board.size else 0.0
    )
    return Comparison(
        match=bool(np.allclose(board, reference, rtol=RTOL, atol=ATOL)),
        max_abs_diff=diff,
        rtol=RTOL,
        atol=ATOL,
    )


def preflight_report(lines: list[str]) -> dict[str, object] | None:
    """The first ``ORCH-PREFLIGHT {json}`` line's document (None: no such line, or not a JSON object)."""
    for line in lines:
        if line.startswith("ORCH-PREFLIGHT "):
            try:
                report = json.loads(line.split(" ", 1)[1])
            except json.JSONDecodeError:
                return None
            return report if isinstance(report, dict) else None
    return None


def exit_reason(code: int) -> str:
    return _SIGNALS.get(code, f"exit status {code}")


def sigill_report(lines: list[str]) -> dict[str, object] | None:
    """The board side's ``ORCH-SIGILL {json}`` line (see board_side/sigill_guard.py), if any."""
    for line in lines:
        if line.startswith(_SIGILL_LINE):
            try:
                report = json.loads(line[len(_SIGILL_LINE) :])
            except json.JSONDecodeError:
                return {}
            return report if isinstance(report, dict) else {}
    return None


def describe_sigill(report: Mapping[str, object], profile: TargetProfile) -> str:
    """'SIGILL (illegal instruction): a cortex-a72 cannot run 0x1ee02800: half-precision ... in LIB at ...'"""
    text = f"SIGILL (illegal instruction): a {profile.qemu_cpu} (target {profile.name}) cannot run"
    word = report.get("word")
    text += f" instruction {aarch64_isa.describe(word)}" if isinstance(word, int) else " an instruction"
    obj, offset = report.get("object"), report.get("offset")
    if isinstance(obj, str):
        text += f" in {obj}" + (f" at offset {offset:#x}" if isinstance(offset, int) else "")
    python = report.get("python")
    frames = [f for f in python if isinstance(f, str)] if isinstance(python, list) else []
    if frames:
        text += f", while running {frames[0]}"
    return text


def run_preflight(  # noqa: PLR0913 -- the wheel and its board; log, timeout, a CUDA wheel's GPU libraries
    engine: Engine,
    profile: TargetProfile,
    wheel: Path,
    *,
    log: Callable[[str], object] = print,
    timeout: float = PREFLIGHT_TIMEOUT_S,
    gpu: GpuLibraries | None = None,
) -> Preflight:
    """Install ``wheel`` on an emulated ``profile.qemu_cpu`` board, run a model, compare with x86 ORT.

    The verdict's details keep the run (qemu_cpu, image, exit code, duration), the container's
    report and the comparison. A wheel that dies of SIGILL is named with the instruction; a run
    past ``timeout`` seconds is killed and fails the pre-flight. With ``gpu`` (a CUDA wheel) the
    board's GPU libraries are there (the sysroot's, read-only) and the check also tries the CUDA
    provider alone: where it cannot run, that is its own verdict, never a pass."""
    started = time.monotonic()
    image = board_image(engine, profile)
    deps = _dependencies(wheel, profile)
    work = Path(tempfile.mkdtemp(prefix="orch-preflight-"))
    try:
        model, inputs = _stage(work, [wheel, *deps])
        lines: list[str] = []
        result: dict[str, object] = {"qemu_cpu": profile.qemu_cpu, "image": image}
        environment = {"QEMU_CPU": profile.qemu_cpu, "ORCH_WHEEL": wheel.name}
        if gpu is not None:
            gpu.links(work / "gpu-libs")
            environment |= {"ORCH_PREFLIGHT_GPU": "1", "LD_LIBRARY_PATH": "/pf/gpu-libs", **gpu.runtime}
        try:
            code = engine.run(
                image,
                ["sh", "-c", read_text("preflight_install.sh")],
                environment=environment,
                volumes={str(gpu.sysroot): {"bind": str(_SYSROOT), "mode": "ro"}} if gpu else None,
                copy_in=[(work, "/pf")],
                copy_out=[("/pf/output.npy", work), ("/pf/output_gpu.npy", work)],
                network="none",
                labels={"orch.role": "preflight"},
                on_log=lines.append,
                timeout=timeout,
            )
        except ContainerTimeout:
            tail = [x for x in lines if x.strip()][-3:]
            result.update(exit_code=None, timed_out=True, duration_s=round(time.monotonic() - started, 1))
            reason = (
                f"no result within {timeout:g} s on an emulated {profile.qemu_cpu}; the container was killed"
                + (": " + " | ".join(tail) if tail else "")
            )
            return Preflight(ok=False, error=reason, details=result)
        result.update(exit_code=code, duration_s=round(time.monotonic() - started, 1))
        sigill = sigill_report(lines)
        if sigill is not None or code == 132:
            result["sigill"] = sigill or {}
            return Preflight(ok=False, error=describe_sigill(sigill or {}, profile), details=result)
        report = preflight_report(lines)
        if code != 0 or report is None:
            tail = [x for x in lines if x.strip()][-5:]
            reason = f"{exit_reason(code)} on an emulated {profile.qemu_cpu}" + (
                ": " + " | ".join(tail) if tail else ""
            )
            return Preflight(ok=False, error=reason, details=result)
        reference = reference_run(model, inputs)
        comparison = compare(np.load(work / "output.npy"), reference)
        result.update(report)
        result["comparison"] = comparison
        log(
            f"pre-flight on {profile.qemu_cpu}: import {report['import_s']} s, max |diff| "
            f"{comparison.get('max_abs_diff')}"
        )
        if gpu is None:
            return verdict(comparison, result)
        gpu_result = gpu_verdict(report.get("gpu"), work / "output_gpu.npy", reference)
        result["gpu"] = gpu_result
        log(f"pre-flight, CUDA provider: {gpu_result['verdict']}")
        return verdict(comparison, result, gpu=gpu_result)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _dependencies(wheel: Path, profile: TargetProfile) -> list[Path]:
    """The wheels the board needs beside ``wheel`` (numpy, ...), for its Python and glibc."""
    try:
        return resolve_dependencies(
            wheel,
            wheel_sha256=file_sha256(wheel),
            arch=profile.arch,
            glibc=profile.os.glibc,
            python_version=profile.os.python,
        )
    except DeployError as error:
        raise BuildError(f"pre-flight: {error.message}", hint=error.hint) from error


def _stage(work: Path, wheels: list[Path]) -> tuple[Path, np.ndarray]:
    """What the container gets in /pf: the wheels, the model and its input, the check scripts."""
    directory = work / "wheels"
    directory.mkdir()
    for path in wheels:
        shutil.copy2(path, directory / path.name)
    model, inputs = stage_model(work)
    (work / "check.py").write_text(read_text("preflight_check.py"))
    (work / "sigill_guard.py").write_text(read_text("sigill_guard.py"))
    return model, inputs


def stage_model(work: Path) -> tuple[Path, np.ndarray]:
    """The pre-flight's model and its input, written into ``work`` (``model.onnx``, ``input.npy``)."""
    model = write_model(preflight_model(), work / "model.onnx")
    inputs = np.random.default_rng(7).standard_normal((1, 3, 16, 16)).astype(np.float32)
    np.save(work / "input.npy", inputs)
    return model, inputs


def gpu_verdict(report: object, output: Path, reference: np.ndarray) -> dict[str, object]:
    """The CUDA provider's part of the pre-flight, from the check's ``gpu`` report: listed, loaded
    (every library it needs found), and run and compared with x86 where there is a GPU; where it
    could not run, ``verdict`` says "GPU path not run (why)"."""
    found = dict(report) if isinstance(report, dict) else {}
    if not found:
        return {"verdict": "the check reported nothing of the CUDA provider", "ok": False}
    if not found.get("provider_listed") or not found.get("provider_loads"):
        why = found.get("load_error") or "CUDAExecutionProvider is not among the wheel's providers"
        return {**found, "ok": False, "verdict": f"the CUDA provider does not load: {why}"}
    if not found.get("ran"):
        return {**found, "ok": True, "verdict": f"{GPU_NOT_RUN} ({found.get('reason')})"}
    comparison = compare(np.load(output), reference)
    said = "matches x86" if comparison["match"] else "differs from x86"
    return {**found, "comparison": comparison, "ok": comparison["match"], "verdict": f"GPU result {said}"}


def verdict(
    comparison: Comparison, result: Mapping[str, object], *, gpu: Mapping[str, object] | None = None
) -> Preflight:
    """Passed when the board's outputs match x86's (and a CUDA wheel's provider loads, and matches
    where it ran); the details keep the run and the comparisons."""
    match = bool(comparison["match"])
    error = None if match else f"outputs differ from x86 onnxruntime: {comparison}"
    if match and gpu is not None and not gpu.get("ok"):
        error = f"CUDA provider: {gpu.get('verdict')}"
    return Preflight(ok=error is None, error=error, details=result)
