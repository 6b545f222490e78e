"""`orch deploy` against real lab boards (arm64 containers under emulation, real sshd).

The two boards are reached through this module's own inventory (``d1``, ``d2`` on the lab's
ports) whose ``workdir`` and ``tags`` are hostile on purpose (spaces, quotes, ``;``, ``$()``,
backticks): every deploy below also proves that inventory values never reach a shell.
Tests run in file order and build on each other to keep full installs (minutes under
emulation) to one per board: first deploy, unchanged re-deploy, models-only deploy, rollback,
interruptions, a dead board, then the marker-file checks.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest

from orchestrator import lab_state
from orchestrator.adapters import ssh
from orchestrator.adapters.engine import Engine
from orchestrator.board import Board
from orchestrator.common.digests import file_sha256
from orchestrator.deploy.releases import Layout, list_releases, read_listing
from orchestrator.fleet.inventory import load_inventory
from orchestrator.lab.sample_models import wide_matmul, write_model, write_tiny_convnet

MARKER = f"/tmp/orch-deploy-pwned-{os.getpid()}"
HOSTILE_WORKDIR = f"""deploy tests/it's "odd"; $(touch {MARKER}-dollar) `touch {MARKER}-tick` & x"""
HOSTILE_TAGS = ["a b", "x;y", f"$(touch {MARKER}-tag)", "'q'"]
FULL_DEPLOY_TIMEOUT = 2400


class State:
    """What earlier tests left for later ones (the tests run in file order)."""

    first: ClassVar[dict[str, Any]] = {}
    first_release: ClassVar[str] = ""


@pytest.fixture(scope="module")
def world(
    lab: Any, stock_build: Any, artifact_maker: Callable[..., Any], tmp_path_factory: pytest.TempPathFactory
) -> dict[str, Any]:
    root = tmp_path_factory.mktemp("deploy-lab")
    # The artifact `orch build --target lab --variant stock` made and pre-flighted (session fixture):
    # `orch deploy` without --artifact finds it there, as it would on a workstation.
    artifacts = Path(stock_build.env["ORCH_ARTIFACTS"])
    stock = stock_build.artifact
    models = root / "models"
    tiny = write_tiny_convnet(models / "tiny.onnx")
    tiny2 = write_tiny_convnet(models / "tiny2.onnx", seed=1)
    # 40 MB of weights: an upload long enough to be cut in the middle; inference stays cheap.
    big = write_model(wide_matmul(features=2500, outputs=4000), root / "big" / "big.onnx")
    inventory = root / "inventory.yaml"
    env = {**lab.env, "ORCH_ARTIFACTS": str(artifacts), "ORCH_INVENTORY": str(inventory)}
    world = {
        "root": root,
        "env": env,
        "inventory": inventory,
        "stock": stock,
        "tiny": tiny,
        "tiny2": tiny2,
        "big": big,
        "lab": lab,
        "make_artifact": artifact_maker,
    }
    write_inventory(world)
    return world


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def write_inventory(world: dict[str, Any]) -> None:
    """d1/d2 = the lab's boards (their current ports), ghost = a closed port on 127.0.0.1."""
    lab = world["lab"]
    lab.refresh()
    hosts = {}
    for name, board in (("d1", lab.board("lab1")), ("d2", lab.board("lab2"))):
        hosts[name] = {
            "hostname": "127.0.0.1",
            "port": board.port,
            "user": board.user,
            "identity_file": str(board.identity_file),
            "target": "lab",
            "workdir": HOSTILE_WORKDIR,
            "tags": HOSTILE_TAGS,
        }
    ghost = lab.board("lab1")
    hosts["ghost"] = {
        "hostname": "127.0.0.1",
        "port": closed_port(),
        "user": ghost.user,
        "identity_file": str(ghost.identity_file),
        "target": "lab",
    }
    # JSON is YAML: every odd character arrives exactly as written.
    world["inventory"].write_text(json.dumps({"all": {"hosts": hosts}}, indent=2))


def board(world: dict[str, Any], name: str) -> Board:
    return load_inventory(world["inventory"]).board(name)


def orch(
    world: dict[str, Any], *args: str, timeout: float = 900
) -> tuple[subprocess.CompletedProcess[str], dict]:
    result = subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        env=world["env"],
        cwd=world["root"],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    try:
        document = json.loads(result.stdout) if result.stdout.strip() else {}
    except json.JSONDecodeError:
        document = {}
    return result, document


def explain(result: subprocess.CompletedProcess[str]) -> str:
    return (
        f"exit {result.returncode}\n--- stdout\n{result.stdout[-4000:]}\n--- stderr\n{result.stderr[-4000:]}"
    )


def test_incompatible_wheels_are_refused_before_any_byte_is_sent(
    world: dict[str, Any], bad_wheels: dict[str, Path]
) -> None:
    expected = {
        "glibc": "wheel needs GLIBC_2.99, d1 has 2.41",
        "python": "wheel is for Python cp310 (ABI cp310), d1 runs cp313",
        "arch": "wheel is built for x86_64 (platform tag manylinux_2_28_x86_64), d1 is aarch64",
    }
    shas = set()
    for kind, sentence in expected.items():
        artifact = world["make_artifact"](
            world["root"] / "bad-artifacts", bad_wheels[kind], variant=f"bad-{kind}"
        )
        shas.add(file_sha256(artifact.wheel_path))
        result, doc = orch(
            world,
            "deploy",
            "--host",
            "d1",
            "--artifact",
            str(artifact.directory),
            "--model",
            str(world["tiny"]),
            "--json",
        )
        assert result.returncode == 6, explain(result)
        error = doc["boards"]["d1"]["error"]
        assert "refused, nothing was sent" in error and sentence in error, error
        assert sentence in result.stderr
    with ssh.connect(board(world, "d1")) as session:
        layout = Layout(workdir=HOSTILE_WORKDIR)
        found = session.run(
            ["sh", "-c", 'ls -a -- "$1" 2>/dev/null || true', "sh", layout.store]
        ).stdout.split()
    assert not shas & set(found), "a refused wheel reached the board's store"
    assert not [name for name in found if name.startswith(".upload-")], found


def test_first_deploy_installs_and_runs_a_model_on_both_boards(world: dict[str, Any]) -> None:
    result, doc = orch(
        world,
        "deploy",
        "--host",
        "d1",
        "--host",
        "d2",
        "--model",
        str(world["tiny"]),
        "--json",
        timeout=FULL_DEPLOY_TIMEOUT,
    )
    assert result.returncode == 0, explain(result)
    version = world["stock"].ort_version
    releases = set()
    for name in ("d1", "d2"):
        report = doc["boards"][name]
        assert report["ok"] and report["action"] == "deployed", report
        assert report["bytes_sent"] > 30_000_000 and report["files_sent"] >= 5
        verification = report["verification"]
        assert verification["version"] == version
        assert verification["models"]["tiny.onnx"]["ok"] and verification["models"]["tiny.onnx"][
            "outputs"
        ] == [[1, 10]]
        assert report["python"].endswith(
            f"/{HOSTILE_WORKDIR}/releases/{report['release_id']}/venv/bin/python"
        )
        releases.add(report["release_id"])
    assert len(releases) == 1, "same content, same Python: both boards get the same release id"
    State.first.update(doc)
    State.first_release = releases.pop()  # type: ignore[misc]
    # The on-board layout, as a script would read it.
    with ssh.connect(board(world, "d1")) as session:
        infos = list_releases(session, board(world, "d1"))
        link = session.run(["readlink", "--", f"{HOSTILE_WORKDIR}/current"]).stdout.strip()
    assert link == f"releases/{State.first_release}"
    (info,) = infos
    assert info.current and info.variant == "stock" and info.ort_version == version
    assert info.models == {"tiny.onnx": file_sha256(world["tiny"])}
    print(f"first deploy: {doc['boards']['d1']['seconds']:.0f} s, {doc['boards']['d2']['seconds']:.0f} s")


def test_unchanged_redeploy_sends_no_bytes_and_installs_nothing(world: dict[str, Any]) -> None:
    # How much faster this is than the first deploy is measured by benchmarks/deploy_transfer.py;
    # here: nothing travels, nothing is installed, nothing is verified again: one listing of the
    # board answers "already current, verified" (with the first deploy's verification).
    assert State.first, "needs the first deploy"
    result, doc = orch(
        world, "deploy", "--host", "d1", "--host", "d2", "--model", str(world["tiny"]), "--json"
    )
    assert result.returncode == 0, explain(result)
    for name in ("d1", "d2"):
        report = doc["boards"][name]
        first = State.first["boards"][name]
        assert (report["action"], report["bytes_sent"], report["files_sent"]) == ("unchanged", 0, 0), report
        assert report["release_id"] == State.first_release
        # Every file the first deploy sent is found on the board; no venv or pip step ran.
        assert report["files_skipped"] == first["files_sent"] + first["files_skipped"] > 0, report
        assert "install" in first["phases"] and "install" not in report["phases"], report["phases"]
        assert report["remote_calls"] == 1 and "verify" not in report["phases"], report
        assert report["verification_recorded"] and report["verified_at"] == first["verified_at"], report
        assert report["verification"]["models"]["tiny.onnx"]["ok"]
        print(f"{name}: first {first['seconds']:.0f} s, unchanged re-deploy {report['seconds']:.0f} s")
    # --verify runs the verification on the board again, and records it anew.
    result, doc = orch(world, "deploy", "--host", "d1", "--model", str(world["tiny"]), "--verify", "--json")
    assert result.returncode == 0, explain(result)
    report = doc["boards"]["d1"]
    assert report["action"] == "unchanged" and "verify" in report["phases"], report
    assert (
        not report["verification_recorded"]
        and report["verified_at"] != State.first["boards"]["d1"]["verified_at"]
    )
    assert report["verification"]["models"]["tiny.onnx"]["ok"]


def test_new_model_sends_only_the_model_then_rollback_restores_the_previous_release(
    world: dict[str, Any],
) -> None:
    assert State.first_release, "needs the first deploy"
    result, doc = orch(
        world,
        "deploy",
        "--host",
        "d1",
        "--model",
        str(world["tiny"]),
        "--model",
        str(world["tiny2"]),
        "--json",
        timeout=FULL_DEPLOY_TIMEOUT,
    )
    assert result.returncode == 0, explain(result)
    report = doc["boards"]["d1"]
    assert report["action"] == "deployed" and report["release_id"] != State.first_release
    assert (report["files_sent"], report["bytes_sent"]) == (1, world["tiny2"].stat().st_size)
    assert set(report["verification"]["models"]) == {"tiny.onnx", "tiny2.onnx"}
    second = report["release_id"]

    result, doc = orch(world, "deploy", "--host", "d1", "--rollback", "--json")
    assert result.returncode == 0, explain(result)
    back = doc["boards"]["d1"]
    assert (back["action"], back["previous"], back["release_id"]) == (
        "rolled back",
        second,
        State.first_release,
    )
    assert back["verification"]["models"]["tiny.onnx"]["ok"] and back["verification"]["version"]
    with ssh.connect(board(world, "d1")) as session:
        current = [r.id for r in list_releases(session, board(world, "d1")) if r.current]
    assert current == [State.first_release]


def _run_python(session: ssh.RemoteSession, code: str) -> str:
    python = f"{HOSTILE_WORKDIR}/current/venv/bin/python"
    return session.run(
        [python, "-c", code, f"{HOSTILE_WORKDIR}/current/models/tiny.onnx"], timeout=600
    ).stdout


PREVIOUS_RUNS = (
    "import sys, numpy as np, onnxruntime as ort\n"
    "s = ort.InferenceSession(sys.argv[1])\n"
    "print(ort.__version__, s.run(None, {'input': np.ones((1, 3, 32, 32), np.float32)})[0].shape)"
)


def _partial_uploads(session: ssh.RemoteSession, sha: str) -> list[int]:
    """Sizes of the temporary upload files of one content: the evidence of a transfer cut short."""
    script = 'for f in "$1"/.upload-"$2"-*; do [ -f "$f" ] && wc -c < "$f"; done; true'
    out = session.run(["sh", "-c", script, "sh", Layout(workdir=HOSTILE_WORKDIR).store, sha[:16]]).stdout
    return [int(n) for n in out.split()]


def _start_deploy(world: dict[str, Any], host: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "orchestrator",
            "deploy",
            "--host",
            host,
            "--model",
            str(world["tiny"]),
            "--model",
            str(world["big"]),
            "--json",
        ],
        env=world["env"],
        cwd=world["root"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _wait_for_upload(process: subprocess.Popen[str], host: str, seen: list[str]) -> None:
    assert process.stderr is not None
    deadline = time.monotonic() + 600
    for line in process.stderr:
        seen.append(line)
        if line.startswith(f"{host}: sending"):
            return
        if time.monotonic() > deadline:
            break
    pytest.fail("the deploy never started sending:\n" + "".join(seen), pytrace=False)


def _wait_for_partial_upload(board_name: str, sha: str) -> None:
    """Return once the big model's temporary upload file exists on the board and is partly written.

    A fixed sleep raced the transfer: on an idle machine the whole file could land before it ended.
    Looking at the board's disk directly (docker exec, not the SSH connection under test) makes the
    interruption land mid-transfer for sure.
    """
    state = lab_state.read_state()
    assert state is not None
    container = next(b.container for b in state.boards if b.name == board_name)
    store = "/root/" + Layout(workdir=HOSTILE_WORKDIR).store
    script = 'for f in "$1"/.upload-"$2"-*; do [ -s "$f" ] && echo partial; done; true'
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        _, out = Engine().exec(container, ["sh", "-c", script, "sh", store, sha[:16]])
        if "partial" in out:
            return
        time.sleep(0.2)
    pytest.fail(f"no partial upload of {sha[:16]} appeared on {board_name}", pytrace=False)


def test_board_killed_mid_upload_keeps_the_previous_release(world: dict[str, Any]) -> None:
    assert State.first_release, "needs the first deploy"
    big_sha = file_sha256(world["big"])
    process = _start_deploy(world, "d2")
    seen: list[str] = []
    _wait_for_upload(process, "d2", seen)
    _wait_for_partial_upload("lab2", big_sha)
    state = lab_state.read_state()
    assert state is not None
    container = next(b.container for b in state.boards if b.name == "lab2")
    Engine().kill(container)
    stdout, stderr = process.communicate(timeout=600)
    assert process.returncode != 0, stdout + stderr
    doc = json.loads(stdout)
    assert not doc["boards"]["d2"]["ok"] and "d2" in doc["boards"]["d2"]["error"]

    up = world["lab"].orch("lab", "up", timeout=600)  # starts the stopped container again (new port)
    assert up.returncode == 0, explain(up)
    write_inventory(world)
    with ssh.connect(board(world, "d2"), connect_timeout=60) as session:
        listing = read_listing(session, Layout(workdir=HOSTILE_WORKDIR))
        assert listing.current == State.first_release
        assert "(1, 10)" in _run_python(session, PREVIOUS_RUNS)
        store = session.run(["ls", "-a", "--", Layout(workdir=HOSTILE_WORKDIR).store]).stdout.split()
        partial = _partial_uploads(session, big_sha)
    assert big_sha not in store, "a cut upload must never appear under its content name"
    big_size = world["big"].stat().st_size
    assert len(partial) == 1 and 0 < partial[0] < big_size, f"the kill should land mid-transfer: {partial}"

    # The next deploy finishes the job: only the big model travels again.
    result, doc = orch(
        world,
        "deploy",
        "--host",
        "d2",
        "--model",
        str(world["tiny"]),
        "--model",
        str(world["big"]),
        "--json",
        timeout=FULL_DEPLOY_TIMEOUT,
    )
    assert result.returncode == 0, explain(result)
    report = doc["boards"]["d2"]
    assert report["bytes_sent"] == world["big"].stat().st_size and report["files_sent"] == 1
    assert report["verification"]["models"]["big.onnx"]["outputs"] == [[1, 4000]]
    # ... and the part the killed board kept is gone: nothing piles up on the board.
    with ssh.connect(board(world, "d2"), connect_timeout=60) as session:
        assert _partial_uploads(session, big_sha) == [], "the cut transfer's part is still in the store"


def test_deploy_process_killed_mid_upload_keeps_the_previous_release(world: dict[str, Any]) -> None:
    assert State.first_release, "needs the first deploy"
    process = _start_deploy(world, "d1")
    seen: list[str] = []
    _wait_for_upload(process, "d1", seen)
    _wait_for_partial_upload("lab1", file_sha256(world["big"]))
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=60)
    with ssh.connect(board(world, "d1")) as session:
        listing = read_listing(session, Layout(workdir=HOSTILE_WORKDIR))
        assert listing.current == State.first_release
        assert "(1, 10)" in _run_python(session, PREVIOUS_RUNS)
        partial = _partial_uploads(session, file_sha256(world["big"]))
    assert partial and all(0 < n < world["big"].stat().st_size for n in partial), partial


def test_a_dead_board_is_named_and_the_other_board_still_deploys(world: dict[str, Any]) -> None:
    assert State.first_release, "needs the first deploy"
    result, doc = orch(
        world, "deploy", "--host", "d1", "--host", "ghost", "--model", str(world["tiny"]), "--json"
    )
    assert result.returncode == 8, explain(result)  # partial failure
    assert doc["boards"]["d1"]["ok"] and doc["boards"]["d1"]["release_id"] == State.first_release
    ghost = doc["boards"]["ghost"]
    assert not ghost["ok"] and "ghost" in ghost["error"] and "connection refused" in ghost["error"]
    assert "ghost" in result.stderr and "1 succeeded, 1 failed (ghost)" in result.stderr


def test_hostile_inventory_values_execute_nothing(world: dict[str, Any]) -> None:
    # Every deploy above ran with the hostile workdir and tags: nothing they contain ran anywhere.
    leftovers = [p for p in Path("/tmp").glob(Path(MARKER).name + "*")]
    assert leftovers == [], "an inventory value was executed on the workstation"
    with ssh.connect(board(world, "d1")) as session:
        on_board = session.run(["sh", "-c", 'ls -d -- "$1"* 2>/dev/null || true', "sh", MARKER]).stdout
        assert on_board.strip() == "", f"an inventory value was executed on the board: {on_board}"
        # The workdir exists with its exact name: the values were used, as data.
        listing = read_listing(session, Layout(workdir=HOSTILE_WORKDIR))
    assert listing.workdir_abs.endswith("/" + HOSTILE_WORKDIR)
    # A hostile board *name* is refused by the inventory with a clear error, before anything runs.
    bad = world["root"] / "hostile-name.yaml"
    bad.write_text(
        json.dumps({"all": {"hosts": {f"x; touch {MARKER}-name $(id)": {"hostname": "127.0.0.1"}}}})
    )
    result, _ = orch(world, "deploy", "-i", str(bad), "--all-devices", "--model", str(world["tiny"]))
    assert result.returncode == 2, explain(result)
    assert "is not valid" in result.stderr and "Traceback" not in result.stderr
    assert not list(Path("/tmp").glob(Path(MARKER).name + "*"))
