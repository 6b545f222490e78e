"""`orch lab up --board PROFILE[:N]`: which boards a request means (pure planning, no engine)."""

from __future__ import annotations

import pytest

from orchestrator.errors import TargetError, UsageError
from orchestrator.lab.boards import (
    LAB_PACKAGES,
    MAX_BOARDS,
    board_packages,
    lab_suite,
    os_stand_in_note,
    parse_board_option,
    wanted_boards,
)
from orchestrator.targets import resolve_target


def test_board_option_takes_a_profile_or_alias_and_a_count() -> None:
    request = parse_board_option("pi5:2")
    assert request.profile.name == "rpi5" and request.names == ["rpi5-1", "rpi5-2"]
    assert parse_board_option("rpi4-bookworm").names == ["rpi4-bookworm-1"]


@pytest.mark.parametrize(
    ("text", "error", "message"),
    [
        ("rpi9:1", TargetError, "unknown target 'rpi9'. Did you mean"),
        ("rpi5:two", UsageError, "must be a number"),
        ("rpi5:0", UsageError, "between 1 and"),
    ],
)
def test_bad_board_options_say_what_is_wrong(text: str, error: type[Exception], message: str) -> None:
    with pytest.raises(error, match=message):
        parse_board_option(text)


def test_an_empty_lab_with_only_profile_boards_gets_no_default_boards() -> None:
    wanted = wanted_boards(None, [parse_board_option("rpi5"), parse_board_option("nano")], {})
    assert wanted == {"jetson-nano-1": "jetson-nano", "rpi5-1": "rpi5"}


def test_default_boards_and_running_boards_keep_their_profiles() -> None:
    assert wanted_boards(None, [], {}) == {"lab1": "lab", "lab2": "lab"}
    running = {"lab1": "lab", "rpi5-1": "rpi5"}
    # A running board keeps the profile it was started with; --boards 3 adds lab2 and lab3.
    assert wanted_boards(3, [parse_board_option("rpi4-bookworm")], running) == {
        "lab1": "lab",
        "lab2": "lab",
        "lab3": "lab",
        "rpi4-bookworm-1": "rpi4-bookworm",
        "rpi5-1": "rpi5",
    }
    assert wanted_boards(None, [], running) == running  # nothing added, nothing removed


def test_too_many_boards_are_refused() -> None:
    with pytest.raises(UsageError, match="at most"):
        wanted_boards(MAX_BOARDS, [parse_board_option("rpi5:4")], {})


def test_each_profile_gets_its_own_os_or_says_it_is_a_cpu_stand_in() -> None:
    assert lab_suite(resolve_target("rpi4")) == "trixie"
    assert lab_suite(resolve_target("rpi5-bookworm")) == "bookworm"
    assert os_stand_in_note(resolve_target("rpi5")) is None
    nano = resolve_target("nano")
    # The closest glibc the lab makes at or below the board's: Debian 11 for Ubuntu 18.04 (2.31 is
    # the oldest Debian orch bootstraps), Debian 12 (2.36) for Ubuntu 22.04 (2.35).
    assert lab_suite(nano) == "bullseye"
    assert lab_suite(resolve_target("jetson-orin")) == "bookworm"
    assert "ubuntu 18.04" in (os_stand_in_note(nano) or "") and "cortex-a57" in (os_stand_in_note(nano) or "")
    # A stand-in carries the development files a sysroot pulled from it needs; a Debian board does not.
    assert {"libc6-dev", "libstdc++-10-dev", "python3-dev"} <= set(board_packages(nano))
    assert board_packages(resolve_target("rpi4")) == LAB_PACKAGES
