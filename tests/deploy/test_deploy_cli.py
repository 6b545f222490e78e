"""`orch deploy` argument and input errors: clear messages, non-zero exits, no traceback (no lab needed)."""

from __future__ import annotations

import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from orchestrator.lab.sample_models import write_tiny_convnet


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def env(orch_env: dict[str, str]) -> dict[str, str]:
    Path(orch_env["ORCH_INVENTORY"]).write_text(
        json.dumps(
            {"all": {"hosts": {"ghost": {"hostname": "127.0.0.1", "port": closed_port(), "target": "lab"}}}}
        )
    )
    write_tiny_convnet(Path(orch_env["ORCH_TEST_CWD"]) / "models" / "tiny.onnx")
    return orch_env


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--keep", "0"], "--keep must be at least 1"),
        (["--parallel", "0"], "--parallel must be at least 1"),
        (["--timeout", "0"], "--timeout must be positive"),
        (["--rollback", "--model", "models/tiny.onnx"], "--rollback switches to the previous release"),
        (["--model", "models/missing.onnx"], "models/missing.onnx"),
        (["--artifact", "nowhere"], "nowhere: no manifest.json: not an artifact directory"),
        (["--host", "nano99"], "nano99"),
    ],
)
def test_bad_arguments_are_refused_clearly(
    env: dict[str, str], orch_cli: Callable[..., Any], args: list[str], message: str
) -> None:
    selection = [] if "--host" in args else ["--host", "ghost"]
    result = orch_cli(env, "deploy", *selection, *args)
    assert result.returncode in (2, 6), result.stderr
    assert message in result.stderr and "Traceback" not in result.stderr


def test_no_artifact_for_the_board_target_names_the_fix(
    env: dict[str, str], orch_cli: Callable[..., Any]
) -> None:
    # Refused before any board is contacted (ghost's port is closed: trying would fail otherwise).
    result = orch_cli(env, "deploy", "--host", "ghost", "--json")
    assert result.returncode == 2 and not result.stdout, result.stderr
    assert "no pre-flighted artifact for target 'lab' in" in result.stderr
    assert "orch build --target lab" in result.stderr and "Traceback" not in result.stderr


def test_artifact_changed_after_build_is_refused(
    env: dict[str, str], orch_cli: Callable[..., Any], stock_wheel: Path, artifact_maker: Callable[..., Any]
) -> None:
    artifact = artifact_maker(Path(env["ORCH_ARTIFACTS"]), stock_wheel)
    manifest = json.loads((artifact.directory / "manifest.json").read_text())
    manifest["wheel_sha256"] = "0" * 64
    (artifact.directory / "manifest.json").write_text(json.dumps(manifest))
    result = orch_cli(env, "deploy", "--host", "ghost")
    assert result.returncode == 6, result.stderr
    assert "differs from the manifest" in result.stderr


def _artifact_dir(root: Path, preflight: dict[str, Any] | None) -> Path:
    """An artifact directory (a small file as its wheel) whose manifest records ``preflight``."""
    directory = root / "lab" / "stock" / "1.21.0"
    directory.mkdir(parents=True)
    wheel = directory / "onnxruntime-1.21.0-cp313-cp313-manylinux_2_28_aarch64.whl"
    wheel.write_bytes(b"not a wheel: refused before it is opened")
    manifest: dict[str, Any] = {
        "target": "lab",
        "variant": "stock",
        "ort_version": "1.21.0",
        "wheel": wheel.name,
    }
    if preflight is not None:
        manifest["preflight"] = preflight
    (directory / "manifest.json").write_text(json.dumps(manifest))
    return directory


@pytest.mark.parametrize(
    ("preflight", "reason"),
    [
        (
            {"ok": False, "error": "SIGILL: fcvtzs h0 (fp16) in libonnxruntime"},
            "its pre-flight failed: SIGILL",
        ),
        (None, "it has no pre-flight record"),
        ({"ok": False, "skipped": "disabled"}, "its pre-flight did not run (disabled)"),
    ],
    ids=["failed", "none", "skipped"],
)
def test_an_artifact_without_a_passed_preflight_is_refused_by_path_in_a_dry_run_too(
    env: dict[str, str], orch_cli: Callable[..., Any], tmp_path: Path, preflight: Any, reason: str
) -> None:
    directory = _artifact_dir(tmp_path, preflight)
    for dry in (["--dry-run"], []):
        result = orch_cli(env, "deploy", "--host", "ghost", "--artifact", str(directory), *dry)
        # Refused before any board is contacted (ghost's port is closed: trying would say so).
        assert result.returncode == 2, result.stderr
        assert f"--artifact {directory} (stock 1.21.0" in result.stderr and reason in result.stderr
        assert "--skip-preflight-check" in result.stderr and "connection refused" not in result.stderr
        assert "Traceback" not in result.stderr
    # Forced, it goes on (to the board, whose closed port ends it) and says what it skipped.
    forced = orch_cli(
        env, "deploy", "--host", "ghost", "--artifact", str(directory), "--dry-run", "--skip-preflight-check"
    )
    assert "deployed anyway: --skip-preflight-check skips this check" in forced.stderr, forced.stderr
    assert forced.returncode != 2 and "Traceback" not in forced.stderr
