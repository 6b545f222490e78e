"""board_facts: the parser, from sample outputs of board_side/board_facts.sh (lab boards' and others)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from orchestrator.errors import RemoteError
from orchestrator.fleet.board_facts import BoardFacts, parse_facts

FACTS = Path(__file__).parent / "facts"


def facts_of(name: str, **kwargs: str) -> BoardFacts:
    return parse_facts((FACTS / name).read_text(), board=name.split(".")[0], **kwargs)


def test_lab_board() -> None:
    facts = facts_of("lab-debian13.txt")
    assert (facts.arch, facts.glibc, facts.python_version) == ("aarch64", "2.41", "3.13.5")
    assert (facts.python_tag, facts.python_short) == ("cp313", "3.13")
    assert facts.free_bytes == 77806380 * 1024
    assert facts.home == "/root" and facts.os_name == "Debian GNU/Linux 13 (trixie)"


def test_jetson_nano_glibc_from_ldd() -> None:
    facts = facts_of("jetson-nano-ubuntu1804.txt")
    assert (facts.glibc, facts.python_tag, facts.free_bytes) == ("2.27", "cp36", 10240 * 1024)


def test_musl_board_is_refused_with_the_reason() -> None:
    with pytest.raises(RemoteError, match=r"no glibc found .*musl libc"):
        facts_of("alpine-musl.txt")


def test_missing_python_names_the_interpreter_and_how_to_fix_it() -> None:
    with pytest.raises(
        RemoteError, match=re.escape("Python interpreter 'python3.11' does not run there")
    ) as caught:
        facts_of("no-python.txt", python="python3.11")
    assert "python:" in (caught.value.hint or "")


def test_empty_output_is_an_error_not_a_guess() -> None:
    with pytest.raises(RemoteError, match="could not read the architecture"):
        parse_facts("", board="nano01")
