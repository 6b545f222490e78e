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


# The lines board_facts.sh prints about hardware counters, after the lab board's own facts. The
# variations are built from the script's format (no real Pi 5 or Jetson is reachable here).
def counters_of(extra: str) -> BoardFacts:
    return parse_facts((FACTS / "lab-debian13.txt").read_text() + extra, board="b")


def test_counters_usable_with_a_cpu_pmu_a_permissive_kernel_and_perf() -> None:
    facts = counters_of(
        "uid=1000\nemulated_cpu=\nperf_event_paranoid=2\ncpu_pmus= armv8_cortex_a76\nperf=/usr/bin/perf\n"
    )
    assert facts.counters.usable
    assert facts.counters.summary() == (
        "instructions and cycles: PMU armv8_cortex_a76, perf_event_paranoid 2, /usr/bin/perf"
    )
    assert facts.as_dict()["hardware_counters"] == facts.counters.summary()


@pytest.mark.parametrize(
    ("extra", "reason"),
    [
        (
            "uid=0\nemulated_cpu=cortex-a76\nperf_event_paranoid=2\ncpu_pmus=\nperf=\n",
            "an emulated board (cortex-a76",
        ),
        (
            "uid=1000\nemulated_cpu=\nperf_event_paranoid=2\ncpu_pmus=\nperf=/usr/bin/perf\n",
            "exposes no CPU PMU",
        ),
        (
            "uid=1000\nemulated_cpu=\nperf_event_paranoid=3\ncpu_pmus= armv8_pmuv3_0\nperf=/usr/bin/perf\n",
            "perf_event_paranoid is 3 and orch's user is not root",
        ),
        (
            "uid=1000\nemulated_cpu=\nperf_event_paranoid=1\ncpu_pmus= armv8_pmuv3_0\nperf=\n",
            "apt install linux-perf",
        ),
        ("", "exposes no CPU PMU"),  # the output of an older script: nothing known, nothing assumed
    ],
)
def test_counters_not_usable_say_why_in_one_line(extra: str, reason: str) -> None:
    counters = counters_of(extra).counters
    assert not counters.usable
    assert reason in counters.summary() and counters.summary().startswith("none: ")
    assert "\n" not in counters.summary()


def test_root_reads_counters_whatever_perf_event_paranoid_says() -> None:
    facts = counters_of(
        "uid=0\nemulated_cpu=\nperf_event_paranoid=4\ncpu_pmus= armv8_cortex_a72\nperf=/usr/bin/perf\n"
    )
    assert facts.counters.usable
