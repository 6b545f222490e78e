"""Faults provoked for real while `orch deploy` works on a lab board, each checked afterwards on
the board itself: `current` is the previous verified release, which imports onnxruntime and runs
its model; no `.current.*` temporary link and no verification or lock process is left; and what
orch printed and exited with is true.

The tests run in file order on one board (``f1`` = lab1): the first deploy makes release A (one
model); the faults then hit deploys of release B (A's wheel and model plus a second model: its
packages are reused from A, so its install makes a venv and links A's packages), or of B' (B with
the same wheel repacked, so its bytes differ: pip installs it), in the step named.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar

import pytest
from deploy_world import LOCK_MARK, PIP_MARK, VENV_MARK, VERIFY_MARK, Faults, make_faults, signal_a_thread

from orchestrator.artifacts.store import Manifest, write_manifest
from orchestrator.common.digests import file_sha256
from orchestrator.lab.sample_models import wide_matmul, write_model, write_tiny_convnet


class State:
    """What earlier tests left for later ones (the tests run in file order)."""

    a: ClassVar[str] = ""


@pytest.fixture(scope="module")
def faults(lab: Any, stock_build: Any, tmp_path_factory: pytest.TempPathFactory) -> Faults:
    return make_faults(lab, stock_build, tmp_path_factory.mktemp("faults"))


@pytest.fixture(scope="module")
def repacked(stock_build: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The stock artifact with its wheel repacked (a zip comment added): the same packages in other
    bytes, so no release on the board has its wheel and the deploy runs pip."""
    good = Path(stock_build.artifact.directory)
    manifest = json.loads((good / "manifest.json").read_text())
    directory = tmp_path_factory.mktemp("repacked") / "lab" / "stock" / manifest["ort_version"]
    directory.mkdir(parents=True)
    wheel = directory / manifest["wheel"]
    shutil.copyfile(good / manifest["wheel"], wheel)
    with zipfile.ZipFile(wheel, "a") as archive:
        archive.comment = b"repacked by orch's fault tests"
    write_manifest(
        directory, Manifest.from_json({**manifest, "wheel_sha256": file_sha256(wheel)}, source="test")
    )
    return directory


# The step a fault lands in: the mark of its board process, and the deploy that gets there.
STEPS = {"verification": VERIFY_MARK, "venv": VENV_MARK, "pip": PIP_MARK}


def step_args(step: str, repacked: Path) -> tuple[str, ...]:
    return ("--artifact", str(repacked)) if step == "pip" else ()


def explain(result: subprocess.CompletedProcess[str] | tuple[int | None, str, str]) -> str:
    if isinstance(result, tuple):
        code, out, err = result
    else:
        code, out, err = result.returncode, result.stdout, result.stderr
    return f"exit {code}\n--- stdout\n{out[-3000:]}\n--- stderr\n{err[-5000:]}"


def deploy_b(faults: Faults, *extra: str) -> tuple[str, ...]:
    return ("deploy", "--host", "f1", "--model", str(faults.tiny), "--model", str(faults.tiny2), *extra)


def assert_board_on_a(faults: Faults, what: str) -> None:
    """The board after a fault: A current and working, no temporary link, nothing of orch running."""
    current, temporary, runs = faults.board_state()
    assert current == State.a, f"{what}: the board is on {current}, not on the verified {State.a}"
    assert "(1, 10)" in runs, f"{what}: the current release does not run its model: {runs}"
    assert temporary == [], f"{what}: temporary links left: {temporary}"
    for step, mark in STEPS.items():
        gone = faults.gone_within(mark, 60)
        assert gone is not None, f"{what}: the {step} step still runs on the board a minute later"
    assert faults.gone_within(LOCK_MARK, 30) is not None, f"{what}: the lock process outlived orch"


def test_first_deploy_makes_the_verified_release_the_faults_start_from(faults: Faults) -> None:
    result, doc = faults.orch("deploy", "--host", "f1", "--model", str(faults.tiny), "--json")
    assert result.returncode == 0, explain(result)
    report = doc["boards"]["f1"]
    assert report["action"] == "deployed" and report["verification"]["models"]["tiny.onnx"]["ok"]
    State.a = report["release_id"]
    assert_board_on_a(faults, "after the first deploy")


def _interrupt_in(
    faults: Faults, step: str, sig: signal.Signals, *, group: bool, args: tuple[str, ...]
) -> tuple[int | None, str, str]:
    # The board is frozen inside the step when the signal comes: a step that ends before the
    # signal (it can be short on a quiet machine) would make the test about another step.
    process = _pause_in(faults, STEPS[step], *args)
    try:
        if group:
            os.killpg(process.pid, sig)  # what Ctrl-C in a terminal does
        else:
            process.send_signal(sig)
        out, err = process.communicate(timeout=120)
    finally:
        subprocess.run(["docker", "unpause", faults.container], check=True, capture_output=True)
    return process.returncode, out, err


# How orch is stopped: the signal, sent to its process group (as a terminal does) or to it alone,
# and the exit status that follows.
STOPS = {
    "ctrl-c": (signal.SIGINT, True, 130),
    "sigterm": (signal.SIGTERM, False, 128 + signal.SIGTERM),
    "sigkill": (signal.SIGKILL, False, -signal.SIGKILL),
}


@pytest.mark.parametrize(
    ("step", "sig", "group", "code"),
    [
        pytest.param(step, *stop, id=f"{step}-{name}")
        for step, stops in (
            ("verification", ("ctrl-c", "sigterm", "sigkill")),
            ("venv", ("ctrl-c", "sigterm", "sigkill")),
            ("pip", ("ctrl-c", "sigkill")),  # orch's side of the install step is the venv's
        )
        for name in stops
        for stop in [STOPS[name]]
    ],
)
def test_orch_stopped_while_the_board_installs_or_verifies_the_new_release_leaves_the_previous_one(
    faults: Faults, repacked: Path, step: str, sig: signal.Signals, group: bool, code: int
) -> None:
    assert State.a, "needs the first deploy"
    returned = _interrupt_in(faults, step, sig, group=group, args=step_args(step, repacked))
    assert returned[0] == code, explain(returned)
    if sig != signal.SIGKILL:
        # SIGTERM is an interruption like Ctrl-C: what orch says on the way out is what the board is on.
        word = "interrupted" if sig == signal.SIGINT else "terminated (SIGTERM)"
        assert word in returned[2] and f"f1: current release: {State.a}" in returned[2], explain(returned)
    assert_board_on_a(faults, f"after {sig.name} during the {step} step")


# The board thaws this long after the signal (a busy board, a network hiccup), which is sent to one
# of orch's threads other than the main one, or to orch's process group (as a terminal does). The
# kernel may hand a signal sent to orch to any of its threads; the main thread then hears of it only
# once it runs again: sent to another thread, the case is made every time instead of now and then.
# Every step gets two delays; the verification also the terminal's way, at two more.
THAWS = {
    "verification": (("thread", 0.2), ("thread", 1.0), ("group", 0.5), ("group", 2.0)),
    "venv": (("thread", 0.2), ("thread", 1.0)),
    "pip": (("thread", 0.2), ("thread", 1.0)),
}
_IN_CI = {("thread", 0.2), ("group", 0.5)}


def _signal(process: subprocess.Popen[str], sig: signal.Signals, to: str) -> None:
    if to == "group":
        os.killpg(process.pid, sig)
    else:
        signal_a_thread(process.pid, sig)


def _assert_stopped_on_a(returned: tuple[int | None, str, str], sig: signal.Signals, what: str) -> None:
    code, _, err = returned
    assert code == 128 + sig, explain(returned)
    word = "interrupted" if sig == signal.SIGINT else "terminated (SIGTERM)"
    assert word in err and f"f1: current release: {State.a}" in err, explain(returned)
    assert "f1: deployed " not in err, explain(returned)


@pytest.mark.parametrize(
    ("step", "sig", "to", "delay"),
    [
        pytest.param(
            step,
            signal.SIGINT,
            to,
            delay,
            id=f"{step}-ctrl-c-to-{to}-thaw-{delay:g}s",
            # CI keeps the first case of each step (and the terminal's way for the verification);
            # the longer thaws run in the full suite, which CI's budget has no room for.
            marks=() if (to, delay) in _IN_CI else pytest.mark.full,
        )
        for step, thaws in THAWS.items()
        for to, delay in thaws
    ]
    + [
        pytest.param(
            "verification",
            signal.SIGTERM,
            "thread",
            0.5,
            id="verification-sigterm-to-thread-thaw-0.5s",
            marks=pytest.mark.full,
        )
    ],
)
def test_a_signal_while_the_board_is_frozen_in_a_step_is_honoured_when_it_thaws(
    faults: Faults, repacked: Path, step: str, sig: signal.Signals, to: str, delay: float
) -> None:
    assert State.a, "needs the first deploy"
    process = _pause_in(faults, STEPS[step], *step_args(step, repacked))
    try:
        _signal(process, sig, to)
        time.sleep(delay)
    finally:
        subprocess.run(["docker", "unpause", faults.container], check=True, capture_output=True)
    out, err = process.communicate(timeout=300)
    what = f"{sig.name} to the {to} during the {step} step, the board thawed {delay:g} s later"
    _assert_stopped_on_a((process.returncode, out, err), sig, what)
    assert_board_on_a(faults, f"after {what}")


def _pause_in(faults: Faults, mark: str, *args: str) -> subprocess.Popen[str]:
    """A deploy of B with the board's container paused while the board process of one step
    (``mark``) runs."""

    def deploy() -> tuple[str, ...]:
        # An install step runs only for a release the board does not have: a model of new bytes.
        models = () if mark == VERIFY_MARK else ("--model", str(_fresh_model(faults)))
        return deploy_b(faults, *models, *args)

    return _paused_when(faults, deploy, lambda: bool(faults.frozen_processes(mark)), f"{mark!r} ran")


def _paused_when(
    faults: Faults, deploy: Callable[[], tuple[str, ...]], in_step: Callable[[], bool], step: str
) -> subprocess.Popen[str]:
    """orch running ``deploy()`` with the board's container paused while ``in_step()`` holds. A pause
    that lands after the step ended (it can be short) is undone: that deploy finishes, the board is
    rolled back to A, and it is tried again (``deploy()`` gives each try its argv)."""
    for _ in range(5):
        process = faults.start(*deploy())
        deadline = time.monotonic() + 900
        while process.poll() is None and not in_step():
            if time.monotonic() > deadline:
                process.kill()
                pytest.fail(f"the deploy never got to where {step} in 900 s", pytrace=False)
            time.sleep(0.02)
        subprocess.run(["docker", "pause", faults.container], check=True, capture_output=True)
        if in_step():
            return process
        subprocess.run(["docker", "unpause", faults.container], check=True, capture_output=True)
        out, err = process.communicate(timeout=900)
        assert process.returncode == 0, f"orch ended before {step}:\n" + explain(
            (process.returncode, out, err)
        )
        rolled, _ = faults.orch("deploy", "--host", "f1", "--rollback")
        assert rolled.returncode == 0, explain(rolled)
    pytest.fail(f"the pause never landed while {step}", pytrace=False)


_fresh_seeds = itertools.count(100)


def _fresh_model(faults: Faults) -> Path:
    """A model no release on the board has (its weights from a seed not used before)."""
    seed = next(_fresh_seeds)
    return write_tiny_convnet(faults.root / "fresh" / str(seed) / "fresh.onnx", seed=seed)


@pytest.mark.parametrize("step", ["verification", "venv"])
def test_timeout_while_the_board_is_paused_in_a_step(faults: Faults, step: str) -> None:
    # The connection is stalled (the board's container frozen) in the step; --timeout runs out;
    # the board is thawed after orch has exited.
    assert State.a, "needs the first deploy"
    process = _pause_in(faults, STEPS[step], "--timeout", "45", "--json")
    try:
        out, err = process.communicate(timeout=300)
    finally:
        subprocess.run(["docker", "unpause", faults.container], check=True, capture_output=True)
    _assert_timed_out_on_a(
        faults, (process.returncode, out, err), f"a --timeout while paused in the {step} step"
    )


def _assert_timed_out_on_a(faults: Faults, returned: tuple[int | None, str, str], what: str) -> None:
    code, out, err = returned
    assert code == 4, explain(returned)
    report = json.loads(out)["boards"]["f1"]
    assert not report["ok"] and report["timed_out"], report
    # It names what the board is on: the release it did not switch to is nowhere reported.
    assert (report["current"], report["current_known"]) == (State.a, True), explain(returned)
    assert f"current: {State.a}" in err and "f1: current release: " + State.a in err, explain(returned)
    assert_board_on_a(faults, f"after {what}")


@pytest.mark.parametrize("stop", ["timeout", "ctrl-c"])
def test_orch_stopped_while_a_model_is_sent_leaves_a_part_that_the_next_deploy_clears(
    faults: Faults, tmp_path: Path, stop: str
) -> None:
    # A 40 MB model; the board's container is frozen while it arrives; --timeout runs out, or Ctrl-C.
    assert State.a, "needs the first deploy"
    store = faults.store_on_disk()
    timeout = ("--timeout", "60") if stop == "timeout" else ()
    big = tmp_path / "big.onnx"
    models = ("--model", str(faults.tiny), "--model", str(big))

    def deploy() -> tuple[str, ...]:
        seed = next(_fresh_seeds)  # bytes the store does not have: they are sent
        write_model(wide_matmul(features=2500, outputs=4000, seed=seed), big)
        return ("deploy", "--host", "f1", *models, *timeout, "--json")

    process = _paused_when(faults, deploy, lambda: any(faults.partial_uploads(store)), "the model was sent")
    try:
        if stop == "ctrl-c":
            os.killpg(process.pid, signal.SIGINT)
        out, err = process.communicate(timeout=300)
    finally:
        subprocess.run(["docker", "unpause", faults.container], check=True, capture_output=True)
    returned = (process.returncode, out, err)
    if stop == "timeout":
        _assert_timed_out_on_a(faults, returned, "a --timeout while a model was sent")
    else:
        assert process.returncode == 130, explain(returned)
        assert "interrupted" in err and f"f1: current release: {State.a}" in err, explain(returned)
        assert_board_on_a(faults, "after Ctrl-C while a model was sent")
    parts = faults.partial_uploads(store)
    assert parts and all(0 < size < big.stat().st_size for size in parts), parts
    assert file_sha256(big) not in {path.name for path in store.iterdir()}, "a part under its content name"

    # The next deploy sends the model whole, and its prune clears the part (a store file that no
    # release links); back to A after it.
    again, doc = faults.orch("deploy", "--host", "f1", *models, "--json")
    assert again.returncode == 0, explain(again)
    assert doc["boards"]["f1"]["bytes_sent"] == big.stat().st_size, doc["boards"]["f1"]
    assert faults.partial_uploads(store) == [], "the part of the cut transfer is still in the store"
    rolled, doc = faults.orch("deploy", "--host", "f1", "--rollback", "--json")
    assert rolled.returncode == 0 and doc["boards"]["f1"]["release_id"] == State.a, explain(rolled)
    assert_board_on_a(faults, "after the deploy that followed the cut transfer")


@pytest.mark.parametrize(
    ("to", "delay"), [("thread", 0.5), pytest.param("group", 1.0, marks=pytest.mark.full)]
)
def test_ctrl_c_while_a_model_is_sent_to_a_frozen_board_is_honoured_when_it_thaws(
    faults: Faults, tmp_path: Path, to: str, delay: float
) -> None:
    # As above, and the board thaws after the Ctrl-C: the rest of the transfer must not go on to
    # an install, a verification and a switch. (The part left in the store is cleared by the next
    # deploy's prune, as the test above shows.)
    assert State.a, "needs the first deploy"
    store = faults.store_on_disk()
    big = tmp_path / "big.onnx"

    def deploy() -> tuple[str, ...]:
        write_model(wide_matmul(features=2500, outputs=4000, seed=next(_fresh_seeds)), big)
        return ("deploy", "--host", "f1", "--model", str(faults.tiny), "--model", str(big))

    # A part an earlier cut transfer left in the store is not this one.
    earlier = set(store.glob(".upload-*"))
    process = _paused_when(
        faults, deploy, lambda: bool(set(store.glob(".upload-*")) - earlier), "the model was sent"
    )
    try:
        _signal(process, signal.SIGINT, to)
        time.sleep(delay)
    finally:
        subprocess.run(["docker", "unpause", faults.container], check=True, capture_output=True)
    out, err = process.communicate(timeout=300)
    what = f"Ctrl-C to the {to} while a model was sent, the board thawed {delay:g} s later"
    _assert_stopped_on_a((process.returncode, out, err), signal.SIGINT, what)
    assert_board_on_a(faults, f"after {what}")


def test_timeout_while_the_board_verifies_a_model_whose_inference_never_ends(faults: Faults) -> None:
    # The board answers all along; its verification runs a model whose inference never ends, and
    # --timeout runs out during it (orch sees the verification run on the board first).
    assert State.a, "needs the first deploy"
    models = ("--model", str(faults.tiny), "--model", str(faults.endless))
    process = faults.start("deploy", "--host", "f1", *models, "--timeout", "120", "--json")
    faults.wait_for_process(VERIFY_MARK, process)
    out, err = process.communicate(timeout=300)
    returned = (process.returncode, out, err)
    assert process.returncode == 4, explain(returned)
    report = json.loads(out)["boards"]["f1"]
    assert not report["ok"] and report["timed_out"] and "timed out after 120s" in report["error"], report
    assert (report["current"], report["current_known"]) == (State.a, True), explain(returned)
    assert f"f1: current release: {State.a}" in err, explain(returned)
    assert_board_on_a(faults, "after a --timeout during an endless verification")


def test_a_release_whose_model_the_board_cannot_load_never_becomes_current(faults: Faults) -> None:
    assert State.a, "needs the first deploy"
    result, doc = faults.orch(
        "deploy", "--host", "f1", "--model", str(faults.tiny), "--model", str(faults.garbage), "--json"
    )
    if result.returncode == 2:  # refused on the workstation (not ONNX): nothing was sent
        assert "garbage.onnx" in result.stderr, explain(result)
        bad = faults.unloadable  # then a model that only the board's onnxruntime refuses
    else:
        bad = faults.garbage
    result, doc = faults.orch(
        "deploy", "--host", "f1", "--model", str(faults.tiny), "--model", str(bad), "--json"
    )
    assert result.returncode == 6, explain(result)
    report = doc["boards"]["f1"]
    assert bad.name in report["error"] and f"{State.a} stays current" in report["error"], report
    assert report["current"] == State.a, report
    # ... and interrupted in its verification, too.
    process = faults.start("deploy", "--host", "f1", "--model", str(faults.tiny), "--model", str(bad))
    faults.wait_for_process(VERIFY_MARK, process)
    process.send_signal(signal.SIGKILL)
    process.communicate(timeout=60)
    assert_board_on_a(faults, f"after deploying a model the board cannot load ({bad.name})")


def test_a_paused_and_thawed_board_finishes_and_rollback_verifies_before_it_switches(faults: Faults) -> None:
    assert State.a, "needs the first deploy"
    process = _pause_in(faults, VERIFY_MARK, "--json")
    time.sleep(5)
    subprocess.run(["docker", "unpause", faults.container], check=True, capture_output=True)
    out, err = process.communicate(timeout=900)
    assert process.returncode == 0, explain((process.returncode, out, err))
    b = json.loads(out)["boards"]["f1"]["release_id"]
    current, temporary, _ = faults.board_state()
    assert (current, temporary) == (b, [])

    rolled, doc = faults.orch("deploy", "--host", "f1", "--rollback", "--json")
    assert rolled.returncode == 0, explain(rolled)
    report = doc["boards"]["f1"]
    assert (report["action"], report["previous"], report["release_id"]) == ("rolled back", b, State.a)
    assert report["verification"]["models"]["tiny.onnx"]["ok"]
    assert_board_on_a(faults, "after the rollback")


def test_two_deploys_at_once_the_second_waits_and_the_board_ends_on_the_release_reported(
    faults: Faults,
) -> None:
    assert State.a, "needs the first deploy"
    first = faults.start(*deploy_b(faults, "--json"))
    faults.wait_for_process(VERIFY_MARK, first)  # it holds the board lock now
    second = faults.start(
        "deploy", "--host", "f1", "--model", str(faults.tiny), "--lock-timeout", "900", "--json"
    )
    out, err = first.communicate(timeout=900)
    assert first.returncode == 0, explain((first.returncode, out, err))
    first_report = json.loads(out)["boards"]["f1"]
    out2, err2 = second.communicate(timeout=900)
    assert second.returncode == 0, explain((second.returncode, out2, err2))
    second_report = json.loads(out2)["boards"]["f1"]
    assert f"waiting for the board lock, held by orch deploy (pid {first.pid} on " in err2, explain(
        (second.returncode, out2, err2)
    )
    # Each reported the release it made current, in turn; the board is on the last one reported.
    assert first_report["action"] == "deployed" and first_report["release_id"] != State.a
    assert set(first_report["verification"]["models"]) == {"tiny.onnx", "tiny2.onnx"}
    assert second_report["action"] == "deployed" and set(second_report["verification"]["models"]) == {
        "tiny.onnx"
    }
    _follow_a(second_report["release_id"])
    assert_board_on_a(faults, "after two deploys at once")


def _follow_a(release_id: str) -> None:
    """A's content deployed again is A, unless the agent files shipped in every release changed
    while the tests ran (the tree is shared): then it is a new release of the same models."""
    State.a = release_id


def test_a_busy_board_is_refused_naming_the_holder_and_a_dead_holder_is_broken(faults: Faults) -> None:
    assert State.a, "needs the first deploy"
    here = socket.gethostname()
    alive = {"command": "bench", "host": here, "pid": os.getpid(), "started": "2026-12-02T07:00:00+00:00"}
    with faults.holding_lock(alive):
        refused, doc = faults.orch(
            "deploy", "--host", "f1", "--model", str(faults.tiny), "--lock-timeout", "3", "--json"
        )
    assert refused.returncode == 6, explain(refused)
    error = doc["boards"]["f1"]["error"]
    assert (
        f"orch bench (pid {os.getpid()} on {here}, since 2026-12-02T07:00:00+00:00) holds its lock" in error
    )
    assert "waited 3s, nothing was changed" in error and "--lock-timeout" in refused.stderr

    gone = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True, check=True
    )
    dead = {**alive, "command": "deploy", "pid": int(gone.stdout)}
    with faults.holding_lock(dead):
        broke, doc = faults.orch("deploy", "--host", "f1", "--model", str(faults.tiny), "--json")
    assert broke.returncode == 0, explain(broke)
    assert f"f1: warning: broke the board lock of orch deploy (pid {dead['pid']} on {here}" in broke.stderr
    report = doc["boards"]["f1"]
    assert report["action"] in ("deployed", "unchanged") and set(report["verification"]["models"]) == {
        "tiny.onnx"
    }
    _follow_a(report["release_id"])
    assert_board_on_a(faults, "after the lock tests")


def test_a_default_model_that_is_no_onnx_model_is_refused_before_anything_is_sent(
    faults: Faults, tmp_path: Path
) -> None:
    # A project whose ./models/ (deploy's default models, no --model given) holds random bytes
    # named .onnx beside a good model.
    assert State.a, "needs the first deploy"
    models = tmp_path / "project" / "models"
    models.mkdir(parents=True)
    shutil.copyfile(faults.tiny, models / "tiny.onnx")
    (models / "broken.onnx").write_bytes(random.Random(22).randbytes(4096))
    before = faults.board_files()
    for dry in (("--dry-run",), ()):
        result, _ = faults.orch("deploy", "--host", "f1", *dry, cwd=models.parent)
        assert result.returncode == 2, explain(result)
        said = " ".join(result.stderr.split())
        assert "models/broken.onnx: not an ONNX model (" in said, explain(result)
        assert "deploy's default models are models/*.onnx" in said and "--model" in said, explain(result)
        assert "Traceback" not in result.stderr
    assert faults.board_files() == before, "the refused deploy changed the board"
    assert_board_on_a(faults, "after the refused default model")


def _bad_artifacts(root: Path, good: Path) -> dict[str, Path]:
    """Copies of the good stock artifact whose manifest records a failed pre-flight, or none."""
    made = {}
    manifest = json.loads((good / "manifest.json").read_text())
    for kind, preflight in (
        ("failed", {"ok": False, "error": "SIGILL in the emulated Cortex-A72"}),
        ("none", None),
    ):
        directory = root / kind / "lab" / "stock" / manifest["ort_version"]
        directory.mkdir(parents=True)
        (directory / manifest["wheel"]).symlink_to(good / manifest["wheel"])
        document = {k: v for k, v in manifest.items() if k != "preflight"}
        if preflight is not None:
            document["preflight"] = preflight
        write_manifest(directory, Manifest.from_json(document, source="test"))
        made[kind] = directory
    return made


def test_an_artifact_without_a_passed_preflight_is_refused_by_path_dry_run_and_real(
    faults: Faults, stock_build: Any, tmp_path: Path
) -> None:
    assert State.a, "needs the first deploy"
    bad = _bad_artifacts(tmp_path, Path(stock_build.artifact.directory))
    for kind, directory in bad.items():
        for dry in (("--dry-run",), ()):
            result, _ = faults.orch(
                "deploy", "--host", "f1", "--artifact", str(directory), "--model", str(faults.tiny), *dry
            )
            assert result.returncode == 2, explain(result)
            reason = "pre-flight failed: SIGILL" if kind == "failed" else "no pre-flight record"
            assert f"--artifact {directory}" in result.stderr and reason in result.stderr, explain(result)
            assert "--skip-preflight-check" in result.stderr and "Traceback" not in result.stderr
    # Forced: it goes, and the output says what was skipped.
    forced, doc = faults.orch(
        "deploy",
        "--host",
        "f1",
        "--artifact",
        str(bad["failed"]),
        "--model",
        str(faults.tiny),
        "--dry-run",
        "--skip-preflight-check",
        "--json",
    )
    assert forced.returncode == 0, explain(forced)
    assert "--skip-preflight-check skips this check" in forced.stderr
    assert doc["preflight_check_skipped"] and "pre-flight failed" in doc["preflight_check_skipped"][0]
    assert_board_on_a(faults, "after the refused artifacts")
