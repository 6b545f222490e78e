"""`orch bench --metric cycles`' perf command and how its CSV is read (pure).

The unsupported case is this machine's own perf 6.x output (a VM without a PMU); the counted one
is the same format (``-x ,``: value, unit, event, run time, percentage, ...) with numbers in it."""

from __future__ import annotations

import pytest

from orchestrator.bench.counting.perf_counters import (
    CYCLES,
    INSTRUCTIONS,
    parse_perf_csv,
    perf_argv,
    unread_events,
)
from orchestrator.bench.counting.verdict import CountSeries, comparisons

pytestmark = pytest.mark.unit

NOT_SUPPORTED = """# started on Sun Dec  6 13:26:48 2026

<not supported>,,instructions:u,0,100.00,,
<not supported>,,cycles:u,0,100.00,,
"""
COUNTED = """# started on Sun Dec  6 13:30:00 2026

548212377,,instructions:u,401233110,100.00,1.61,insn per cycle
340512906,,cycles:u,401233110,100.00,,
"""


def test_perf_stat_counts_user_space_instructions_and_cycles_of_the_whole_command() -> None:
    argv = perf_argv("/usr/bin/perf", "/w/perf.csv", ["env", "A=1", "python3", "-c", "x"])
    assert argv[:9] == [
        "/usr/bin/perf", "stat", "-x", ",", "--no-big-num", "-e", "instructions:u,cycles:u", "-o", "/w/perf.csv",
    ]  # fmt: skip
    assert argv[9:] == ["--", "env", "A=1", "python3", "-c", "x"]


def test_counted_values_are_read_by_event_and_comments_are_skipped() -> None:
    reading = parse_perf_csv(COUNTED)
    assert reading.value(INSTRUCTIONS) == 548_212_377 and reading.value(CYCLES) == 340_512_906
    assert unread_events(reading) == []


def test_a_board_without_a_pmu_reads_nothing_and_says_which_events() -> None:
    reading = parse_perf_csv(NOT_SUPPORTED)
    assert reading.value(CYCLES) is None and reading.value(INSTRUCTIONS) is None
    assert unread_events(reading) == [INSTRUCTIONS, CYCLES]
    assert unread_events(parse_perf_csv("")) == [INSTRUCTIONS, CYCLES]  # perf wrote nothing


def test_cycles_are_compared_by_the_counts_rule_and_named_as_cycles() -> None:
    def series(release: str, values: tuple[float, ...]) -> CountSeries:
        return CountSeries(
            board="pi5",
            model="m.onnx",
            release=release,
            variant=release,
            ort_version="1.21.0",
            per_inference=values,
        )

    # Cycles spread more than instructions: 1% between rounds makes 3% the threshold.
    [same] = comparisons(
        [series("a", (100.0, 101.0, 100.5)), series("b", (102.0, 101.5, 102.5))], metric="cycles"
    )
    assert same.verdict == "no significant change" and same.threshold == pytest.approx(0.03, rel=0.01)
    [slower] = comparisons(
        [series("a", (100.0, 100.2, 100.1)), series("b", (110.0, 110.1, 110.2))], metric="cycles"
    )
    assert slower.verdict == "more cycles" and slower.as_json()["verdict"] == "more cycles"
