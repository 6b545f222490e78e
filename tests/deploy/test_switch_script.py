"""switch_current.sh and prune_releases.sh run by a real `sh` on a real release tree: only a
verified release gets the temporary link, and the links an interrupted switch left are removed."""

from __future__ import annotations

import subprocess
from pathlib import Path

from orchestrator.board_side import read_text


def _sh(script: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", "-s", "--", *args],
        input=read_text(script),
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )


def _tree(home: Path) -> Path:
    work = home / "orch"
    for release in ("a", "b", "half"):
        (work / "releases" / release).mkdir(parents=True)
    for release in ("a", "b"):
        (work / "releases" / release / "release.json").write_text("{}\n")
    (work / "releases" / "a" / "verified.json").write_text("{}\n")
    (work / "current").symlink_to("releases/a")
    (work / ".current.dead1234").symlink_to("releases/pruned-long-ago")  # an interrupted switch's
    return work


def test_only_a_complete_verified_release_gets_the_link_and_old_links_go(tmp_path: Path) -> None:
    work = _tree(tmp_path)
    unverified = _sh("switch_current.sh", "orch", "b", ".current.new1", cwd=tmp_path)
    assert unverified.returncode == 3 and "release b is not verified on this board" in unverified.stderr
    half = _sh("switch_current.sh", "orch", "half", ".current.new1", cwd=tmp_path)
    assert half.returncode == 3 and "release half is not complete" in half.stderr
    assert sorted(p.name for p in work.glob(".current.*")) == [".current.dead1234"]  # nothing made

    made = _sh("switch_current.sh", "orch", "a", ".current.new2", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    assert [p.name for p in work.glob(".current.*")] == [".current.new2"]
    assert (work / ".current.new2").readlink() == Path("releases/a")


def test_prune_removes_the_links_an_interrupted_switch_left(tmp_path: Path) -> None:
    work = _tree(tmp_path)
    pruned = _sh("prune_releases.sh", "orch", "half", cwd=tmp_path)
    assert pruned.returncode == 0, pruned.stderr
    assert not list(work.glob(".current.*")) and not (work / "releases" / "half").exists()
    assert (work / "current").readlink() == Path("releases/a")
