"""releases: listing parser, rollback choice, pruning, ids and workdir rules (pure parts)."""

from __future__ import annotations

import json

import pytest

from orchestrator.deploy.releases import (
    Layout,
    choose_rollback,
    make_release_id,
    normalize_workdir,
    parse_listing,
    releases_to_prune,
)
from orchestrator.errors import DeployError


def release_line(release_id: str, created: str, variant: str = "stock") -> str:
    doc = {
        "id": release_id,
        "variant": variant,
        "target": "lab",
        "ort_version": "1.32.0",
        "created": created,
        "models": {"tiny.onnx": "ab" * 32},
    }
    return f"release\t{release_id}\t{json.dumps(doc)}"


LISTING = "\n".join(
    [
        "workdir\t/root/my orch",
        "current\treleases/tuned-1.21.0-bbbbbbbb",
        "history\t2026-11-29T10:00:00Z stock-1.32.0-aaaaaaaa",
        "history\t2026-11-29T11:00:00Z tuned-1.21.0-bbbbbbbb",
        "history\t2026-11-29T12:00:00Z stock-1.32.0-aaaaaaaa",
        "history\t2026-11-29T13:00:00Z tuned-1.21.0-bbbbbbbb",
        release_line("stock-1.32.0-aaaaaaaa", "2026-11-29T10:00:00Z"),
        release_line("tuned-1.21.0-bbbbbbbb", "2026-11-29T11:00:00Z", "tuned"),
        release_line("old-1.20.0-cccccccc", "2026-11-28T09:00:00Z", "old"),
        "release\tbroken-1-dddddddd\t{not json",
        "incomplete\tstock-1.32.0-eeeeeeee",
        "blob\t" + "a" * 64,
        "blob\t.upload-aaaa-1234",
    ]
)


def test_listing_marks_current_and_orders_by_last_use() -> None:
    listing = parse_listing(LISTING)
    assert listing.current == "tuned-1.21.0-bbbbbbbb"
    assert [r.id for r in listing.releases] == [
        "old-1.20.0-cccccccc",
        "stock-1.32.0-aaaaaaaa",
        "tuned-1.21.0-bbbbbbbb",
    ]
    tuned = listing.get("tuned-1.21.0-bbbbbbbb")
    assert tuned is not None and tuned.current and tuned.variant == "tuned"
    assert tuned.python == "/root/my orch/releases/tuned-1.21.0-bbbbbbbb/venv/bin/python"
    assert tuned.models == {"tiny.onnx": "ab" * 32}
    assert listing.store == {"a" * 64}  # temporary upload names are not contents
    # A damaged release.json counts as incomplete: never switched to, pruned.
    assert set(listing.incomplete) == {"broken-1-dddddddd", "stock-1.32.0-eeeeeeee"}


def test_a_release_json_is_read_as_the_board_keeps_it_and_odd_models_are_left_out() -> None:
    document = {"id": "x-1-00000000", "variant": "x", "models": {"a.onnx": "ab" * 32, "b.onnx": 3}}
    listing = parse_listing(
        f"workdir\t/w\nrelease\tx-1-00000000\t{json.dumps(document)}\nrelease\ty-1-00000000\t[]"
    )
    (release,) = listing.releases
    assert release.document == document  # what readers of its other keys (native, manifest) get
    assert release.models == {"a.onnx": "ab" * 32} and release.ort_version == ""
    assert listing.incomplete == ("y-1-00000000",)  # JSON, but not a release.json: as good as none


def test_rollback_goes_to_the_most_recently_used_other_release() -> None:
    assert choose_rollback(parse_listing(LISTING), board="nano01").id == "stock-1.32.0-aaaaaaaa"


def test_rollback_never_goes_to_a_release_that_failed_before_it_was_ever_current() -> None:
    # A deploy whose verification failed leaves its (complete, newer) release on the board, never
    # current: "back" is the release that was current before, not that one.
    failed = release_line("stock-1.32.0-ffffffff", "2026-11-30T09:00:00Z")
    listing = parse_listing(LISTING + "\n" + failed)
    assert listing.releases[-1].id == "stock-1.32.0-ffffffff"  # the newest by creation
    assert choose_rollback(listing, board="nano01").id == "stock-1.32.0-aaaaaaaa"
    # A board that has no history (releases made before it) still rolls back to something.
    bare = "\n".join(line for line in LISTING.splitlines() if not line.startswith("history"))
    assert choose_rollback(parse_listing(bare), board="nano01").id == "stock-1.32.0-aaaaaaaa"


def test_rollback_without_a_previous_release_says_so() -> None:
    only = "workdir\t/root/orch\ncurrent\treleases/a-1-aaaaaaaa\n" + release_line("a-1-aaaaaaaa", "t")
    with pytest.raises(
        DeployError, match="nano01: nothing to roll back to: a-1-aaaaaaaa is the only release"
    ):
        choose_rollback(parse_listing(only), board="nano01")
    with pytest.raises(DeployError, match="no release is current"):
        choose_rollback(parse_listing("workdir\t/root/orch\n"), board="nano01")


def test_prune_keeps_current_and_newest_and_drops_leftovers() -> None:
    listing = parse_listing(LISTING)
    assert releases_to_prune(listing, keep=2) == [
        "old-1.20.0-cccccccc",
        "broken-1-dddddddd",
        "stock-1.32.0-eeeeeeee",
    ]
    assert releases_to_prune(listing, keep=1) == [
        "old-1.20.0-cccccccc",
        "stock-1.32.0-aaaaaaaa",
        "broken-1-dddddddd",
        "stock-1.32.0-eeeeeeee",
    ]
    assert releases_to_prune(listing, keep=5)[:1] == ["broken-1-dddddddd"]
    with pytest.raises(DeployError, match="--keep must be at least 1"):
        releases_to_prune(listing, keep=0)


def test_release_id_is_content_addressed_and_safe() -> None:
    a = make_release_id("tuned", "1.21.0", ["wheel:x:1", "model:y:2"])
    assert a == make_release_id("tuned", "1.21.0", ["model:y:2", "wheel:x:1"])  # order does not matter
    assert a != make_release_id("tuned", "1.21.0", ["wheel:x:1", "model:y:3"])
    assert a.startswith("tuned-1.21.0-") and len(a.rsplit("-", 1)[1]) == 8
    assert "/" not in make_release_id("../x;$(y)", "1/2", [])


def test_workdir_rules() -> None:
    assert normalize_workdir("~/orch") == "orch" and normalize_workdir("/opt/orch/") == "/opt/orch"
    assert Layout(workdir="w").python("r") == "w/releases/r/venv/bin/python"
    with pytest.raises(DeployError, match="single-line"):
        normalize_workdir("a\nb")
