"""A build's -mcpu/-march against a board's /proc/cpuinfo: what deploy refuses before sending anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from orchestrator.common.aarch64_isa import features_for_flags
from orchestrator.fleet.board_facts import BoardFacts, cpu_problems, parse_facts

FACTS = Path(__file__).parent / "facts"


def facts_of(name: str) -> BoardFacts:
    return parse_facts((FACTS / name).read_text(), board=name.split(".")[0])


def test_facts_carry_the_emulated_cpus_features() -> None:
    a72 = facts_of("lab-rpi4-bookworm.txt")
    a76 = facts_of("lab-rpi5.txt")
    assert "asimddp" not in a72.cpu_features and "fphp" not in a72.cpu_features
    assert {"asimddp", "fphp", "asimdhp", "atomics"} <= set(a76.cpu_features)
    assert (a72.glibc, a72.python_tag) == ("2.36", "cp311")


@pytest.mark.parametrize(
    ("flags", "flag", "has", "lacks"),
    [
        (["-O3", "-mcpu=cortex-a76"], "-mcpu=cortex-a76", {"asimddp", "fphp"}, set()),
        (["-mcpu=cortex-a72"], "-mcpu=cortex-a72", {"crc32"}, {"fphp", "atomics"}),
        (["-march=armv8.2-a+fp16+dotprod"], "-march=armv8.2-a+fp16+dotprod", {"fphp", "asimddp"}, set()),
        (["-march=armv8.2-a+fp16+nofp16"], "-march=armv8.2-a+fp16+nofp16", {"atomics"}, {"fphp"}),
        # Both given: GCC takes the architecture from -march and only tunes for -mcpu.
        (["-mcpu=cortex-a76", "-march=armv8-a+crc"], "-march=armv8-a+crc", {"crc32"}, {"fphp"}),
    ],
)
def test_flags_name_what_the_code_may_use(
    flags: list[str], flag: str, has: set[str], lacks: set[str]
) -> None:
    need = features_for_flags(flags)
    assert need is not None and need.flag == flag
    assert has <= need.features and not (lacks & need.features)


def test_unknown_or_absent_cpu_flags_cannot_be_judged() -> None:
    assert features_for_flags(["-O3"]) is None
    assert features_for_flags(["-mcpu=some-future-core"]) is None


def test_an_a76_build_is_refused_for_an_a72_board_and_fits_an_a76_board() -> None:
    a72, a76 = facts_of("lab-rpi4-bookworm.txt"), facts_of("lab-rpi5.txt")
    [problem] = cpu_problems(["-O3", "-mcpu=cortex-a76"], a72)
    assert (
        "-mcpu=cortex-a76" in problem and "asimddp" in problem and "fphp" in problem and "SIGILL" in problem
    )
    assert cpu_problems(["-O3", "-mcpu=cortex-a76"], a76) == []
    assert cpu_problems(["-mcpu=cortex-a72"], a72) == []
    # A board that does not list its features (or a build without -mcpu) is not refused on a guess.
    assert cpu_problems(["-mcpu=cortex-a76"], facts_of("lab-debian13.txt")) == []
