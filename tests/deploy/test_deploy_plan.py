"""The deploy plan: what a board gets, decided from the workstation's files and what the board has."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from plan_files import BOARD, plan

from orchestrator.commands.deploy import _board_json, _print_plan, _sent
from orchestrator.console import console
from orchestrator.deploy.plan import RollbackPlan
from orchestrator.deploy.release_files import agent_files, local_file, model_files
from orchestrator.deploy.report import BoardReport
from orchestrator.errors import UsageError
from orchestrator.fleet.parallel import Outcome
from orchestrator.lab.sample_models import write_tiny_convnet


def test_first_deploy_sends_everything_once(files: dict[str, object]) -> None:
    p = plan(files)
    assert {f.name for f in p.to_send} >= {
        "wheels/onnxruntime-1.32.0-cp313-cp313-manylinux_2_28_aarch64.whl",
        "wheels/pip-26.3-py3-none-any.whl",
        "models/tiny.onnx",
        "agent/bench_agent.py",
    }
    assert p.already_there == () and not p.release_exists and p.reuse_from is None
    assert p.release_id.startswith("tuned-1.32.0-")
    assert p.python == f"orch/releases/{p.release_id}/venv/bin/python"
    # pip runs from its own wheel inside the release dir; everything comes from wheels/, never an index.
    assert p.install_argv[:10] == (
        "sh",
        "-c",
        'cd -- "$1" && shift && exec "$@"',
        "sh",
        p.release_dir,
        "venv/bin/python",
        "wheels/pip-26.3-py3-none-any.whl/pip",
        "install",
        "--no-index",
        "--find-links",
    )
    assert p.install_argv[10] == "wheels"
    assert p.install_argv[-1] == "wheels/onnxruntime-1.32.0-cp313-cp313-manylinux_2_28_aarch64.whl"
    assert p.venv_argv == ("python3", "-m", "venv", "--without-pip", f"{p.release_dir}/venv")
    assert p.release_document["models"] == {"tiny.onnx": files["models"][0].sha256}
    assert p.space_needed > p.bytes_to_send


def test_contents_already_in_the_store_are_not_sent(files: dict[str, object]) -> None:
    every = {f.sha256 for f in plan(files).files}
    p = plan(files, store=every)
    assert p.to_send == () and p.bytes_to_send == 0 and len(p.already_there) == len(every)


def test_same_content_same_release_id_and_a_new_model_changes_it(files: dict[str, object]) -> None:
    first = plan(files)
    assert plan(files).release_id == first.release_id
    other = model_files([write_tiny_convnet(files["tmp"] / "more" / "other.onnx", seed=3)])
    assert plan(files, models=[*files["models"], *other]).release_id != first.release_id


def test_identical_files_are_sent_once(files: dict[str, object]) -> None:
    twin = files["tmp"] / "copy" / "twin.onnx"
    twin.parent.mkdir()
    twin.write_bytes(files["models"][0].path.read_bytes())
    p = plan(files, models=[*files["models"], *model_files([twin])])
    assert [f.name for f in p.to_send if f.role == "model"] == ["models/tiny.onnx"]


def test_existing_release_and_package_reuse(files: dict[str, object]) -> None:
    first = plan(files)
    doc = first.release_document
    listing = (
        f"workdir\t/root/orch\ncurrent\treleases/{first.release_id}\n"
        f"release\t{first.release_id}\t{json.dumps(doc)}\n"
    )
    again = plan(files, listing=listing, store={f.sha256 for f in first.files})
    assert again.release_exists and again.unchanged and again.space_needed == 0
    other = model_files([write_tiny_convnet(files["tmp"] / "more" / "other.onnx", seed=3)])
    models_changed = plan(files, listing=listing, models=other)
    assert models_changed.reuse_from == first.release_id and not models_changed.release_exists


def test_prune_forecast_keeps_the_new_release(files: dict[str, object]) -> None:
    lines = ["workdir\t/root/orch", "current\treleases/a-1-aaaaaaaa"]
    for i, rid in enumerate(["a-1-aaaaaaaa", "b-1-bbbbbbbb"]):
        lines.append(f"release\t{rid}\t{json.dumps({'created': f'2026-01-0{i + 1}'})}")
    p = plan(files, listing="\n".join(lines), keep=2)
    assert p.prune == ("b-1-bbbbbbbb",)


def test_bad_models_are_usage_errors(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="model not found"):
        model_files([tmp_path / "nope.onnx"])
    text = tmp_path / "notes.txt"
    text.write_text("x")
    with pytest.raises(UsageError, match=re.escape("must be an .onnx file")):
        model_files([text])
    a, b = tmp_path / "a" / "m.onnx", tmp_path / "b" / "m.onnx"
    for path in (a, b):
        write_tiny_convnet(path)
    with pytest.raises(UsageError, match=re.escape("two models are both named m.onnx")):
        model_files([a, b])
    with pytest.raises(UsageError, match="cannot be used inside a release"):
        local_file("model", a, "../escape.onnx")


def test_agent_files_are_the_release_list_only() -> None:
    # The stdin scripts and the loader of board_side/ stay out of releases.
    assert {f.name for f in agent_files()} == {"agent/README.md", "agent/bench_agent.py"}
    assert all(f.role == "agent" and f.path.is_file() for f in agent_files())


def test_agent_files_refuse_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="agent file not found"):
        agent_files(tmp_path, ("bench_agent.py",))


def test_dry_run_output_reads_the_typed_plans(files: dict[str, object]) -> None:
    p = plan(files)
    report = BoardReport(
        board="nano01", action="planned", release_id=p.release_id, previous=None, python="py", plan=p
    )
    assert _sent(report, rollback=False) == f"would send {p.bytes_to_send / 1000:.1f} kB"
    # --json keeps the plan's dictionary form.
    document = _board_json(Outcome(board=BOARD, value=report), None)
    assert document["ok"] and document["plan"] == p.as_dict()
    with console.capture() as captured:
        _print_plan("nano01", p)
        _print_plan("nano01", RollbackPlan(board="nano01", rollback_from="a", rollback_to="b"))
    text = captured.get()
    assert f"nano01 release {p.release_id} in {p.release_dir}" in text
    assert "send models/tiny.onnx" in text and "already there: 0 file(s)" in text
    assert "then switch current, verify" in text
    assert "nano01 would switch current from a back to b" in text
