"""`orch lab up --board PROFILE[:N] [--build-tools]`: which boards a request means and what they are
made with (pure planning, no engine)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from orchestrator import lab_state
from orchestrator.cli import build_parser
from orchestrator.commands.lab import LabRequest
from orchestrator.errors import TargetError, UsageError
from orchestrator.lab.base_images import base_image_tag
from orchestrator.lab.boards import (
    LAB_PACKAGES,
    MAX_BOARDS,
    board_image_inputs,
    board_image_tag,
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


TOOLCHAIN = {"cmake", "ninja-build", "g++", "ccache", "python3-dev", "python3-numpy", "patch", "make", "file"}


def test_a_builder_board_carries_a_native_toolchain_and_gets_its_own_images() -> None:
    lab = resolve_target("lab")
    plain = board_packages(lab)
    builder = board_packages(lab, build_tools=True)
    assert builder[: len(plain)] == plain and set(builder) >= TOOLCHAIN
    plain_inputs = board_image_inputs("orch/debian-trixie-arm64:x", "sha256:1", lab.qemu_cpu, plain)
    builder_inputs = board_image_inputs("orch/debian-trixie-arm64:x", "sha256:1", lab.qemu_cpu, builder)
    assert "cmake" in builder_inputs["PACKAGES"].split() and "cmake" not in plain_inputs["PACKAGES"].split()
    # Its own board image and its own debootstrapped base: a plain board never gets the toolchain.
    assert board_image_tag(builder_inputs) != board_image_tag(plain_inputs)
    assert base_image_tag("trixie", lab.arch, builder) != base_image_tag("trixie", lab.arch, plain)


def test_older_suites_get_the_same_tool_names_and_a_stand_in_keeps_its_development_files() -> None:
    # bookworm's and bullseye's CMake is older than ORT needs: the board gets it anyway, as a real
    # board of that release would have it, and the build's requirement check on the board says so.
    assert set(board_packages(resolve_target("rpi4-bookworm"), build_tools=True)) >= TOOLCHAIN
    nano = board_packages(resolve_target("nano"), build_tools=True)
    assert TOOLCHAIN | {"libc6-dev", "libstdc++-10-dev"} <= set(nano)
    assert nano.count("python3-dev") == 1  # the stand-in's and the toolchain's, listed once


def test_lab_up_build_tools_is_off_unless_asked_and_works_with_boards_and_board() -> None:
    def request(*argv: str) -> bool:
        args = build_parser(["lab", "up", *argv]).parse_args(["lab", "up", *argv])
        up = LabRequest.from_args(args).up
        assert up is not None
        return up.build_tools

    assert request("--board", "lab:1") is False
    assert request("--board", "lab:1", "--build-tools") is True
    assert request("--boards", "3", "--build-tools") is True


def test_the_state_file_says_which_boards_have_build_tools_and_an_older_one_reads_as_none(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("ORCH_HOME", str(tmp_path))
    boards = (
        lab_state.LabBoardRecord(name="lab1", port=22001, container="c1"),
        lab_state.LabBoardRecord(name="lab-1", port=22002, container="c2", build_tools=True),
    )
    lab_state.write_state(lab_state.LabState(user="root", identity_file=tmp_path / "key", boards=boards))
    written = json.loads(lab_state.state_path().read_text())
    assert [board["build_tools"] for board in written["boards"]] == [False, True]
    assert lab_state.read_state() == lab_state.LabState(
        user="root", identity_file=tmp_path / "key", boards=boards
    )
    # A state file written before --build-tools existed has no such key: its boards have none.
    for board in written["boards"]:
        del board["build_tools"]
    lab_state.state_path().write_text(json.dumps(written))
    state = lab_state.read_state()
    assert state is not None and not any(board.build_tools for board in state.boards)
