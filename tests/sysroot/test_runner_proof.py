"""The native runner of a sysroot-route wheel is proved against the board's libraries before the
artifact is published: a runner needing a GLIBC_ version the board lacks fails the build and leaves
nothing to deploy. Small real ELF files (sysroot_elves.py) stand in for the runner; the compile in
the build image is replaced by copying one of them."""

from __future__ import annotations

import json
import shutil
import zipfile
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from sysroot_elves import Elves, make_sysroot

from orchestrator.artifacts.store import Artifact, BuildRecord, NativeRunner, list_artifacts
from orchestrator.builds.native_runner import library
from orchestrator.builds.native_runner.execute import CompileIn
from orchestrator.builds.native_runner.library import proved_runner
from orchestrator.builds.record import MadeWheel, finish_artifact
from orchestrator.builds.sysroots.target import SysrootRef
from orchestrator.errors import BuildError
from orchestrator.targets import BoardOS, resolve_target


def _wheel(directory: Path) -> Path:
    """A wheel for the lab target's Python with no machine code of its own (the runner is the test)."""
    directory.mkdir(parents=True, exist_ok=True)
    wheel = directory / "onnxruntime-1.21.0-cp313-cp313-linux_aarch64.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        archive.writestr(
            "onnxruntime-1.21.0.dist-info/WHEEL", "Wheel-Version: 1.0\nTag: cp313-cp313-linux_aarch64\n"
        )
    return wheel


def _build(tmp_path: Path, elves: Elves, monkeypatch: pytest.MonkeyPatch, *, runner_needs: str) -> Artifact:
    """A wheel finished on the sysroot route of a board whose glibc defines up to GLIBC_2.31, with a
    runner needing ``runner_needs``."""
    board_libc = elves.library("libc.so.6", ("GLIBC_2.17", "GLIBC_2.31"))
    root = make_sysroot(tmp_path / "bullseye", {"libc.so.6": board_libc})
    sysroot = SysrootRef(
        name="bullseye-board",
        digest="0" * 64,
        root=root,
        board="b1",
        os=BoardOS(distro="debian", release="11", codename="bullseye", glibc="2.31", python="3.9"),
    )
    newer_libc = elves.library("libc.so.6", ("GLIBC_2.17", "GLIBC_2.31", "GLIBC_2.34"))
    runner = elves.consumer("orch-runner", {newer_libc: (runner_needs,)})

    def compiled(artifact: Artifact, *args: Any, **kwargs: Any) -> Artifact:
        shutil.copy(runner, artifact.directory / "orch-runner")
        made = NativeRunner(file="orch-runner", ort_version="1.21.0")
        return replace(artifact, manifest=replace(artifact.manifest, native_runner=made))

    monkeypatch.setattr(library, "add_runner", compiled)
    profile = resolve_target("lab")
    where = CompileIn(engine=None, image_id="image", image_tag="orch/build:test")  # type: ignore[arg-type]
    made = MadeWheel(
        profile=profile,
        variant="tuned",
        ort_version="1.21.0",
        wheel=_wheel(tmp_path / "out"),
        record=BuildRecord(),
    )
    return finish_artifact(
        made,
        root=tmp_path / "artifacts",
        engine=None,  # type: ignore[arg-type]  # no pre-flight here
        log=lambda line: None,
        preflight=False,
        before_publish=proved_runner(profile, where, header=b"", sysroot=sysroot, log=lambda line: None),
    )


def test_a_runner_the_board_can_load_is_published_with_the_wheel(
    tmp_path: Path, elves: Elves, monkeypatch: pytest.MonkeyPatch
) -> None:
    artifact = _build(tmp_path, elves, monkeypatch, runner_needs="GLIBC_2.17")
    assert artifact.directory == tmp_path / "artifacts" / "lab" / "tuned" / "1.21.0"
    assert (artifact.directory / "orch-runner").is_file()
    assert (
        json.loads((artifact.directory / "manifest.json").read_text())["native_runner"]["file"]
        == "orch-runner"
    )


def test_a_runner_needing_a_newer_glibc_than_the_board_fails_the_build_with_nothing_published(
    tmp_path: Path, elves: Elves, monkeypatch: pytest.MonkeyPatch
) -> None:
    with pytest.raises(BuildError) as failed:
        _build(tmp_path, elves, monkeypatch, runner_needs="GLIBC_2.34")
    assert "does not fit sysroot bullseye-board" in failed.value.message
    assert (
        "orch-runner needs GLIBC_2.34 from libc.so.6 (the sysroot's newest: GLIBC_2.31)"
        in failed.value.message
    )
    # No artifact a deploy could take, and no half-made one beside it.
    assert list_artifacts(tmp_path / "artifacts") == []
    assert list((tmp_path / "artifacts" / "lab" / "tuned").iterdir()) == []
