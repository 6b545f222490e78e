"""The build stage's entry, ``builds.run.run_build``: the route a request takes and what comes back
of its dry run, with nothing printed by the stage itself (what is shown reaches the view)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

from orchestrator.builds.batch import BatchBuild
from orchestrator.builds.build_log import Progress
from orchestrator.builds.on_board.plan import OnBoardPlan
from orchestrator.builds.plan import BuildPlan
from orchestrator.builds.request import read_build_request
from orchestrator.builds.run import ContainerBuild, StockWheel, run_build
from orchestrator.cli import build_parser
from orchestrator.errors import UsageError

pytestmark = pytest.mark.unit


class RecordingView:
    """A ``BuildView`` that keeps what it is told, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, object]] = []

    def log(self, line: str) -> None:
        self.events.append(("log", line))

    def note(self, text: str) -> None:
        self.events.append(("note", text))

    @contextmanager
    def compile_progress(self) -> Iterator[Progress]:
        self.events.append(("progress", None))
        yield lambda done, total: None

    def dry_run_plan(self, plan: BuildPlan) -> None:
        self.events.append(("plan", plan))

    def on_board_plan(self, plan: OnBoardPlan) -> None:
        self.events.append(("on-board plan", plan))

    def batch_starting(self, builds: Sequence[str], engines: Sequence[str]) -> None:
        self.events.append(("batch", (tuple(builds), tuple(engines))))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("ORCH_HOME", str(tmp_path / "home"))
    return tmp_path / "home"


def _run(*argv: str) -> tuple[object, RecordingView]:
    request = read_build_request(build_parser().parse_args(["build", *argv]))
    view = RecordingView()
    return run_build(request, view), view


def test_a_dry_run_hands_its_plan_to_the_view_and_builds_nothing(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built, view = _run("--target", "lab", "--variant", "tuned", "--dry-run")

    assert isinstance(built, ContainerBuild)
    assert built.result is None and built.engine is None
    assert built.plan.target.name == "lab" and built.plan.variant.name == "tuned"
    assert view.events == [("plan", built.plan)]  # no log line, no progress: nothing ran
    assert capsys.readouterr() == ("", "")  # the stage prints nothing of its own


def test_the_stock_dry_run_notes_the_release_it_chose_and_plans_the_download(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built, view = _run("--target", "lab", "--variant", "stock", "--dry-run")

    assert isinstance(built, StockWheel)
    assert built.artifact is None
    note = (
        f"stock baseline: ONNX Runtime {built.version}, the release orch builds for lab"
        " (--ort-version to choose another)"
    )
    assert view.events == [("note", note)]
    document = built.plan_document()
    assert f"onnxruntime=={built.version}" in document["download_argv"]
    assert document["native_runner"]["argv"]
    assert capsys.readouterr() == ("", "")

    # A release given on the command line is not noted.
    built, view = _run("--target", "lab", "--variant", "stock", "--ort-version", "1.20.1", "--dry-run")
    assert isinstance(built, StockWheel) and built.version == "1.20.1"
    assert view.events == []


def test_a_batch_dry_run_plans_every_build_for_its_engines(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built, view = _run("--target", "lab,rpi4", "--variant", "tuned,default", "--dry-run")

    assert isinstance(built, BatchBuild)
    assert built.result is None
    assert built.engines == ("local",)
    assert [b.name for b in built.plans] == ["lab/tuned", "lab/default", "rpi4/tuned", "rpi4/default"]
    assert [p["target"] for p in built.plan_document()["builds"]] == ["lab", "lab", "rpi4", "rpi4"]
    assert view.events == []  # a dry run starts no batch
    assert capsys.readouterr() == ("", "")


def test_an_on_board_batch_is_refused_before_any_board_is_read(home: Path) -> None:
    with pytest.raises(UsageError, match="--on-board builds one target and one variant"):
        _run("--target", "lab,rpi4", "--on-board", "no-such-board", "--dry-run")
