"""`orch demo --dry-run`: the steps a newcomer's first command will take, and the one release they share."""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.commands import demo
from orchestrator.errors import OrchError

pytestmark = pytest.mark.unit


def _orch(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args], env=env, capture_output=True, text=True, check=False
    )


def test_the_dry_run_names_the_release_every_build_of_the_demo_compiles(orch_env: dict[str, str]) -> None:
    demo = _orch(orch_env, "demo", "--dry-run")
    assert demo.returncode == 0, demo.stderr
    shown = demo.stdout + demo.stderr  # steps and notes are progress: stderr
    named = re.search(r"ONNX\s+Runtime\s+(\d+\.\d+\.\d+)", shown)
    assert named, shown
    # The release the demo announces is the one its compiled builds really plan.
    for variant in ("upstream", "tuned"):
        planned = _orch(orch_env, "build", "--target", "rpi5", "--variant", variant, "--dry-run", "--json")
        assert planned.returncode == 0, planned.stderr
        assert json.loads(planned.stdout)["ort_version"] == named.group(1)
    steps = re.findall(r"^\s*\d+\. orch (.+)$", shown, flags=re.MULTILINE)
    assert steps[0] == "lab up --board rpi5:2"
    assert [s for s in steps if s.startswith("build ")] == [
        f"build --target rpi5 --variant {v}" for v in ("stock", "upstream", "tuned")
    ]
    # stock -> upstream is the toolchain alone, upstream -> tuned orch's flags alone; each timed
    # A/B is followed by the same A/B counted in instructions, which emulation cannot blur.
    assert [s for s in steps if s.startswith("bench ")] == [
        f"bench --group rpi5 --variant {pair} {how}"
        for pair in ("stock,upstream", "upstream,tuned")
        for how in ("--quick", "--metric instructions")
    ]
    # The report tells the whole demo: both timed A/Bs in the order run, then both count A/Bs.
    assert steps[-1] == "report latest~1 latest --counts latest~1 latest --html report.html"
    # A dry run starts nothing: no lab state, no model written.
    assert not (Path(orch_env["ORCH_HOME"]) / "lab").exists()


def test_the_pgo_demo_trains_on_the_first_board_after_tuned_is_there_and_benches_tuned_against_pgo(
    orch_env: dict[str, str],
) -> None:
    demo = _orch(orch_env, "demo", "--dry-run", "--pgo", "--boards", "3")
    assert demo.returncode == 0, demo.stderr
    # The steps as one text (the console wraps long lines), cut at each "N. orch".
    shown = " ".join((demo.stdout + demo.stderr).split())
    steps = re.split(r" \d+\. orch ", shown)[1:]
    train = steps.index("build --target rpi5 --variant pgo --train-on rpi5-1 --model models/demo_conv.onnx")
    # The training runs with the tuned release's interpreter on that board: tuned is deployed first.
    assert steps.index("deploy --group rpi5 --variant tuned --model models/demo_conv.onnx") < train
    assert steps[train + 1 : train + 3] == [
        "deploy --group rpi5 --variant pgo --model models/demo_conv.onnx",
        "bench --group rpi5 --variant tuned,pgo --quick",
    ]
    # Three timed A/Bs now (stock -> upstream, upstream -> tuned, tuned -> pgo), still two counted.
    assert steps[-1] == "report latest~2 latest~1 latest --counts latest~1 latest --html report.html"
    without = _orch(orch_env, "demo", "--dry-run")
    assert "pgo" not in without.stdout + without.stderr


def _cheap_steps(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, env: dict[str, str], plan: list[list[str]]
) -> None:
    for key, value in env.items():  # the steps' processes get the test's own ORCH_HOME
        monkeypatch.setenv(key, value)
    monkeypatch.chdir(tmp_path)  # the demo model is written under the working directory
    monkeypatch.setattr(demo, "steps", lambda request: plan)


def test_the_demo_says_how_long_each_step_took_and_the_total(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    orch_env: dict[str, str],
) -> None:
    # Real orch processes, each quick: the timing around them is what is checked.
    plan = [["doctor", "--help"], ["build", "--help"]]
    _cheap_steps(monkeypatch, tmp_path, orch_env, plan)
    assert demo.run(argparse.Namespace(boards=2, report=tmp_path / "r.html", pgo=False, dry_run=False)) == 0
    shown = capsys.readouterr().err
    assert "step 1/2 done after" in shown and "step 2/2 done after" in shown
    assert re.search(r"^\s+1\.\s+\d+ s  orch doctor --help$", shown, flags=re.MULTILINE), shown
    assert re.search(r"^\s+2\.\s+\d+ s  orch build --help$", shown, flags=re.MULTILINE), shown
    assert re.search(r"total \d+ s for 2 of 2 steps", shown), shown


def test_a_failed_step_stops_the_demo_with_the_times_so_far(
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    orch_env: dict[str, str],
) -> None:
    plan = [["doctor", "--help"], ["build", "--target", "no-such-board", "--dry-run"], ["build", "--help"]]
    _cheap_steps(monkeypatch, tmp_path, orch_env, plan)
    with pytest.raises(OrchError, match="demo step 2 failed"):
        demo.run(argparse.Namespace(boards=2, report=tmp_path / "r.html", pgo=False, dry_run=False))
    shown = capsys.readouterr().err
    assert "step 2/3 failed after" in shown
    assert re.search(r"total \d+ s for 2 of 3 steps", shown), shown
    assert "orch build --help" not in shown.split("time per step")[-1]  # step 3 never ran
