"""Which artifact a deploy uses: exactly one, named by variant, ORT release and route, chosen
before any board is touched; several matches refused with the list. And the stock baseline's
default release: the one the build plan builds for the target."""

from __future__ import annotations

import io
import json
import socket
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from orchestrator.artifacts.store import (
    Artifact,
    BuildRecord,
    Manifest,
    Preflight,
    Source,
    list_artifacts,
    write_manifest,
)
from orchestrator.board import Board
from orchestrator.builds.sources import ort_spec
from orchestrator.builds.stock import default_version
from orchestrator.commands.deploy import _table
from orchestrator.console import print_whole
from orchestrator.deploy.artifact_choice import artifact_label, select_artifact
from orchestrator.deploy.execute import DeployResult
from orchestrator.deploy.report import BoardReport
from orchestrator.deploy.verification import Verification
from orchestrator.errors import UsageError
from orchestrator.fleet.parallel import FleetResult, Outcome
from orchestrator.lab.sample_models import write_tiny_convnet
from orchestrator.targets import resolve_target


def make_artifact(root: Path, variant: str, version: str, *, ok: bool = True, created: str = "") -> Artifact:
    """An artifact directory as `orch build` leaves it: manifest.json and the wheel file it names."""
    directory = root / "lab" / variant / version
    wheel = f"onnxruntime-{version}-cp313-cp313-linux_aarch64.whl"
    directory.mkdir(parents=True)
    (directory / wheel).write_bytes(b"PK\x05\x06" + b"\0" * 18)
    stock = variant == "stock"
    manifest = Manifest(
        target="lab",
        variant=variant,
        ort_version=version,
        wheel=wheel,
        created=created or f"2026-12-01T00:00:0{len(list(root.rglob('manifest.json')))}Z",
        preflight=Preflight(ok=ok),
        build=BuildRecord(
            source=Source(kind="index") if stock else Source(kind="debian", location="trixie"),
            dependencies=None if stock else "system",
        ),
    )
    write_manifest(directory, manifest)
    return Artifact(directory=directory, manifest=manifest)


def test_one_artifact_per_target_several_are_refused_with_the_list(tmp_path: Path) -> None:
    make_artifact(tmp_path, "stock", "1.32.0")
    make_artifact(tmp_path, "stock", "1.21.0")  # built last: once, deploy silently took this one
    make_artifact(tmp_path, "tuned", "1.21.0")
    make_artifact(tmp_path, "tuned", "1.23.2", ok=False)  # its pre-flight failed: never offered
    found = list_artifacts(tmp_path)
    with pytest.raises(UsageError) as refused:
        select_artifact(found, target="lab", variant="stock", ort_version=None, where="ARTS")
    assert refused.value.message == (
        "2 artifacts match target 'lab' with --variant stock: "
        f"stock 1.32.0 official ({tmp_path}/lab/stock/1.32.0); stock 1.21.0 official ({tmp_path}/lab/stock/1.21.0);"
        " which one to deploy is not guessed"
    )
    assert refused.value.hint == "choose with --ort-version (1.21.0 or 1.32.0), or give --artifact DIR"
    for version in ("1.21.0", "1.32.0"):
        chosen = select_artifact(found, target="lab", variant="stock", ort_version=version, where="ARTS")
        assert (chosen.variant, chosen.ort_version) == ("stock", version)
    tuned = select_artifact(found, target="lab", variant="tuned", ort_version=None, where="ARTS")
    assert artifact_label(tuned) == "tuned 1.21.0 system"
    with pytest.raises(UsageError) as several:
        select_artifact(found, target="lab", variant=None, ort_version="1.21.0", where="ARTS")
    assert several.value.hint == "choose with --variant (stock or tuned), or give --artifact DIR"
    with pytest.raises(UsageError) as missing:
        select_artifact(found, target="lab", variant="tuned", ort_version="1.23.2", where="ARTS")
    assert missing.value.message.startswith(
        "no pre-flighted artifact for target 'lab', --variant tuned --ort-version 1.23.2 in ARTS (there are: "
    )
    assert (
        missing.value.hint == "build one first: orch build --target lab --variant tuned --ort-version 1.23.2"
    )


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


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "real"])
def test_deploy_refuses_two_stock_releases_before_touching_a_board(
    env: dict[str, str], orch_cli: Callable[..., Any], dry_run: bool
) -> None:
    root = Path(env["ORCH_ARTIFACTS"])
    make_artifact(root, "stock", "1.32.0")
    make_artifact(root, "stock", "1.21.1")
    result = orch_cli(
        env, "deploy", "--host", "ghost", "--variant", "stock", *(["--dry-run"] if dry_run else [])
    )
    assert result.returncode == 2, result.stderr
    said = " ".join(result.stderr.split())
    assert "2 artifacts match target 'lab' with --variant stock: stock 1.32.0 official" in said, said
    assert "stock 1.21.1 official" in said and "--ort-version (1.21.1 or 1.32.0)" in said, said
    assert "ghost" not in said and "Traceback" not in said  # no board was contacted
    # Naming the release chooses it, and the deploy says which artifact it uses before connecting
    # (the board's closed port then fails the deploy itself: exit 4).
    chosen = orch_cli(
        env, "deploy", "--host", "ghost", "--variant", "stock", "--ort-version", "1.21.1", "--json"
    )
    assert "lab: stock 1.21.1 official from " in " ".join(chosen.stderr.split()), chosen.stderr
    assert json.loads(chosen.stdout)["artifacts"]["lab"] == {
        "variant": "stock",
        "ort_version": "1.21.1",
        "route": "official",
        "directory": str(root / "lab" / "stock" / "1.21.1"),
    }
    assert chosen.returncode == 4, chosen.stderr


def test_the_stock_baseline_defaults_to_the_release_the_build_plan_builds(
    orch_env: dict[str, str], orch_cli: Callable[..., Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    profile = resolve_target("lab")
    built = ort_spec.parse_source(None, version=None, suite=profile.bootstrap_suite).version
    result = orch_cli(
        orch_env, "build", "--target", "lab", "--variant", "stock", "--dry-run", "--json", check=True
    )
    document = json.loads(result.stdout)
    assert document["ort_version"] == built == default_version(profile)
    assert document["download_argv"][-1] == f"onnxruntime=={built}"
    chosen = orch_cli(
        orch_env,
        "build",
        "--target",
        "lab",
        "--variant",
        "stock",
        "--ort-version",
        "1.32.0",
        "--dry-run",
        "--json",
    )
    assert json.loads(chosen.stdout)["download_argv"][-1] == "onnxruntime==1.32.0"
    # Read from the build plan's default, not a number of its own: when the default moves, so does stock.
    monkeypatch.setattr(ort_spec, "DEFAULT_ORT_VERSION", "1.23.2")
    assert default_version(resolve_target("rpi4")) == "1.23.2"


@pytest.mark.parametrize("width", [80, 60])
def test_the_deploy_table_keeps_release_ids_and_versions_whole(width: int) -> None:
    # At 80 columns (any log) the release id was cut to "stock-1.2…": here it must stay whole, with
    # the verified version, however the other cells wrap; at 60 the table is printed stacked.
    outcomes = {}
    for name in ("rpi4-livingroom-01", "nano01"):
        report = BoardReport(
            board=name,
            action="deployed",
            release_id="stock-1.21.0-0a1b2c3d",
            previous=None,
            python="/home/orch/orch/releases/stock-1.21.0-0a1b2c3d/venv/bin/python",
            files_sent=12,
            bytes_sent=15_300_000,
            transfer_seconds=4.2,
            seconds=312.4,
            verification=Verification(ok=True, version="1.21.0", models={}),
            verified_at="2026-12-01T12:00:00+00:00",
            verification_recorded=True,
        )
        outcomes[name] = Outcome(board=Board(name=name, hostname="192.0.2.1"), value=report, duration=312.4)
    buffer = io.StringIO()
    print_whole(
        _table(DeployResult(fleet=FleetResult(outcomes=outcomes), current={}), dry_run=False, rollback=False),
        Console(width=width, file=buffer, color_system=None),
    )
    text = buffer.getvalue()
    assert "\u2026" not in text and max(len(line) for line in text.splitlines()) <= width, text
    assert text.count("stock-1.21.0-0a1b2c3d") == 2 and text.count("1.21.0,") == 2, text
    assert text.count("312.4s") == 2 and text.count("MB/s") == 2, text
