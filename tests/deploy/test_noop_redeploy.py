"""A no-op re-deploy: the survey script (facts + releases + verification records, one round trip)
run by a real `sh` over a real release tree, and the plan that says "already current, verified"."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from plan_files import plan

from orchestrator.commands.deploy import _print_plan
from orchestrator.deploy.board_steps import recorded_verification
from orchestrator.deploy.survey import MARK, parse_survey, survey_script
from orchestrator.errors import RemoteError

RELEASE = "stock-1.32.0-aaaaaaaa"
OTHER = "stock-1.32.0-bbbbbbbb"
VERIFICATION = {
    "ok": True,
    "version": "1.32.0",
    "file": "/x/onnxruntime/__init__.py",
    "providers": ["CPUExecutionProvider"],
    "models": {"tiny.onnx": {"ok": True, "load_ms": 5.0, "run_ms": 1.0, "outputs": [[1, 8]]}},
}


def _board_tree(home: Path) -> None:
    """What a deploy leaves under <home>/orch: two releases, one current and verified."""
    work = home / "orch"
    for release in (RELEASE, OTHER):
        directory = work / "releases" / release
        directory.mkdir(parents=True)
        (directory / "release.json").write_text(json.dumps({"id": release, "variant": "stock"}, indent=2))
    record = {"release": RELEASE, "verified_at": "2026-12-01T10:00:00+00:00", "verification": VERIFICATION}
    (work / "releases" / RELEASE / "verified.json").write_text(json.dumps(record) + "\n")
    # A record copied into the wrong release proves nothing about it.
    (work / "releases" / OTHER / "verified.json").write_text(json.dumps(record) + "\n")
    (work / "current").symlink_to(f"releases/{RELEASE}")
    (work / "store" / "sha256").mkdir(parents=True)
    (work / "store" / "sha256" / ("a" * 64)).write_bytes(b"x")


def _survey(home: Path) -> str:
    result = subprocess.run(
        ["sh", "-s", "--", "python3", "orch"],
        input=survey_script(),
        cwd=home,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return result.stdout


def test_one_script_reads_facts_releases_and_verification_records(tmp_path: Path) -> None:
    _board_tree(tmp_path)
    survey = parse_survey(_survey(tmp_path), board="pi01")
    assert survey.facts.home == str(tmp_path) and survey.facts.arch and survey.facts.python_version
    listing = survey.listing
    assert listing.current == RELEASE and listing.workdir_abs == str(tmp_path / "orch")
    assert listing.store == frozenset({"a" * 64})
    current, other = listing.get(RELEASE), listing.get(OTHER)
    assert current is not None and other is not None
    assert current.verified is not None and current.verified.verified_at == "2026-12-01T10:00:00+00:00"
    assert other.verified is None


def test_a_survey_cut_short_is_an_error_naming_the_board() -> None:
    with pytest.raises(RemoteError, match="pi01: the board's survey ended early"):
        parse_survey("home=/root\narch=aarch64\n", board="pi01")
    assert MARK not in "home=/root"


def _listing(release_id: str, document: dict[str, object], verified: bool) -> str:
    lines = [
        "workdir\t/root/orch",
        f"current\treleases/{release_id}",
        f"release\t{release_id}\t{json.dumps(document)}",
    ]
    if verified:
        record = {
            "release": release_id,
            "verified_at": "2026-12-01T10:00:00+00:00",
            "verification": VERIFICATION,
        }
        lines.append(f"verified\t{release_id}\t{json.dumps(record)}")
    return "\n".join(lines) + "\n"


def test_the_plan_says_already_current_and_verified(files: dict[str, object]) -> None:
    first = plan(files)
    store = {f.sha256 for f in first.files}
    verified = plan(files, listing=_listing(first.release_id, first.release_document, True), store=store)
    assert verified.already_verified and verified.unchanged and not verified.to_send
    assert verified.as_dict()["already_verified"] is True
    recorded = recorded_verification(verified, board="nano01")
    assert recorded is not None and recorded.version == "1.32.0" and recorded.models["tiny.onnx"].ok

    # Current but never verified here (a release made before records existed): verified again.
    unverified = plan(files, listing=_listing(first.release_id, first.release_document, False), store=store)
    assert unverified.unchanged and not unverified.already_verified
    # A verified release that is not the one this deploy makes: a real deploy.
    other = plan(files, listing=_listing(OTHER, first.release_document, True), store=store)
    assert not other.already_verified and not other.unchanged


def test_a_damaged_record_means_verifying_again(files: dict[str, object]) -> None:
    first = plan(files)
    listing = _listing(first.release_id, first.release_document, True).replace('"ok": true', '"ok": "yes"', 1)
    again = plan(files, listing=listing, store={f.sha256 for f in first.files})
    assert again.already_verified  # the record is there ...
    assert recorded_verification(again, board="nano01") is None  # ... but says nothing usable


def test_the_dry_run_prints_nothing_to_do(
    files: dict[str, object],
    capsys: pytest.CaptureFixture[str],
) -> None:
    first = plan(files)
    verified = plan(
        files,
        listing=_listing(first.release_id, first.release_document, True),
        store={f.sha256 for f in first.files},
    )
    _print_plan("nano01", verified)
    text = capsys.readouterr().err
    assert "already current, verified (at 2026-12-01T10:00:00+00:00): nothing to do" in text
    assert "venv" not in text
