"""The deploy plan tests' shared parts: a board, its facts, the release files of a small artifact
(``make_files``; the ``files`` fixture in conftest.py) and ``plan`` (a plan made from them)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from orchestrator.artifacts.store import Artifact, Manifest
from orchestrator.board import Board
from orchestrator.deploy.plan import BoardPlan, plan_board
from orchestrator.deploy.release_files import ReleaseFiles, agent_files, model_files, wheel_files
from orchestrator.deploy.releases import parse_listing
from orchestrator.deploy.survey import Survey
from orchestrator.fleet.board_facts import BoardFacts
from orchestrator.lab.sample_models import write_tiny_convnet

BOARD = Board(name="nano01", hostname="127.0.0.1", port=2222, python="python3")
FACTS = BoardFacts(
    board="nano01",
    home="/root",
    arch="aarch64",
    kernel="k",
    glibc="2.41",
    python_version="3.13.5",
    free_bytes=10**9,
)


def make_files(tmp_path: Path) -> dict[str, object]:
    wheel = tmp_path / "onnxruntime-1.32.0-cp313-cp313-manylinux_2_28_aarch64.whl"
    wheel.write_bytes(b"w" * 1000)
    pip = tmp_path / "pip-26.3-py3-none-any.whl"
    pip.write_bytes(b"p" * 100)
    numpy = tmp_path / "numpy-2.5.5-cp313-cp313-manylinux_2_28_aarch64.whl"
    numpy.write_bytes(b"n" * 500)
    models = [write_tiny_convnet(tmp_path / "models" / "tiny.onnx")]
    artifact = Artifact(
        directory=tmp_path,
        manifest=Manifest(target="lab", variant="tuned", ort_version="1.32.0", wheel=wheel.name),
    )
    return {
        "artifact": artifact,
        "wheels": wheel_files(wheel, [pip, numpy]),
        "models": model_files(models),
        "agent": agent_files(),
        "tmp": tmp_path,
    }


def plan(
    files: dict[str, object],
    *,
    store: set[str] = frozenset(),
    listing: str = "workdir\t/root/orch\n",
    keep: int = 3,
    models: list | None = None,
) -> BoardPlan:
    release = ReleaseFiles(
        artifact=files["artifact"],
        wheels=files["wheels"],
        models=files["models"] if models is None else models,
        agent=files["agent"],
    )
    survey = Survey(facts=FACTS, listing=replace(parse_listing(listing), store=frozenset(store)))
    return plan_board(BOARD, survey, release, keep=keep, created="now")
