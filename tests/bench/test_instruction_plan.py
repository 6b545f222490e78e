"""The instruction count's pure parts: the difference method's k, the command run under the counting
qemu, the plugin's output, and the verdict rule the docs state."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from orchestrator.bench.counting.plan import (
    MAX_EXTRA,
    MIN_EXTRA,
    TARGET_INSTRUCTIONS,
    CountPlan,
    count_argv,
    extra_from_children,
    extra_inferences,
    parse_total,
    parse_totals,
)
from orchestrator.bench.counting.store import SCHEMA, CountRunDocument, load_counts, write_counts
from orchestrator.bench.counting.verdict import MIN_CHANGE, NOISE_MARGIN, CountSeries, comparisons
from orchestrator.bench.plan import ReleaseRef
from orchestrator.bench.results import ResultStore
from orchestrator.commands.options import percentage
from orchestrator.errors import UsageError

pytestmark = pytest.mark.unit


def _series(variant: str, values: tuple[float, ...], model: str = "m.onnx", board: str = "b") -> CountSeries:
    return CountSeries(
        board=board,
        model=model,
        release=f"{variant}-1.21.0-x",
        variant=variant,
        ort_version="1.21.0",
        per_inference=values,
    )


def test_k_makes_the_difference_large_enough_to_drown_start_up_jitter() -> None:
    k = extra_inferences(680_000)
    assert k * 680_000 >= TARGET_INSTRUCTIONS
    assert (k - 1) * 680_000 < TARGET_INSTRUCTIONS
    assert extra_inferences(10**12) == MIN_EXTRA  # a huge model still repeats
    assert extra_inferences(1) == MAX_EXTRA  # a trivial one is bounded
    assert extra_inferences(0) == MAX_EXTRA


def test_the_count_runs_the_release_python_under_the_counting_qemu_with_one_thread() -> None:
    release = ReleaseRef(
        id="stock-1",
        variant="stock",
        path="orch/releases/stock-1",
        python="orch/releases/stock-1/venv/bin/python",
        models=("m.onnx",),
    )
    argv = count_argv(
        kit="orch/counting-qemu/abc",
        cpu="cortex-a76",
        log_file="orch/counting-qemu/abc/count.log",
        release=release,
        model="m.onnx",
        extra=21,
        agent_text="print()",
        plan=CountPlan(opt_level="basic"),
    )
    qemu = argv.index("orch/counting-qemu/abc/run")
    assert "PYTHONHASHSEED=0" in argv[:qemu] and "OPENBLAS_NUM_THREADS=1" in argv[:qemu]
    assert argv[argv.index("-cpu") + 1] == "cortex-a76"
    assert argv[argv.index("-R") + 1] == "0x4000000000"  # guest addresses repeat from process to process
    assert argv[argv.index("-plugin") + 1] == "orch/counting-qemu/abc/plugins/libinsn.so,inline=on"
    assert argv[argv.index("-D") + 1] == "orch/counting-qemu/abc/count.log"
    python = argv.index("orch/releases/stock-1/venv/bin/python")
    # One process per round, its forked children running 0, k and 0 inferences after the first.
    assert argv[python + 1 : python + 8] == [
        "-c",
        "print()",
        "orch/releases/stock-1/agent",
        "orch/releases/stock-1/models/m.onnx",
        "0",
        "21",
        "0",
    ]
    assert "--fork" in argv[python:]
    assert argv[argv.index("--opt-level") + 1] == "basic"


def test_the_plugin_total_is_read_and_its_absence_is_seen() -> None:
    text = "cpu 0 insns: 484447295\ncpu 1 insns: 11\ntotal insns: 484447306\n"
    assert parse_total(text) == 484447306
    assert parse_total("cpu 0 insns: 5\n") is None
    assert parse_total("") is None


def test_the_k_childs_inferences_are_its_total_less_the_mean_of_the_zero_childrens() -> None:
    """Totals as the counting qemu printed them for one round's process (the children's, then the
    parent's; fold.onnx under ORT 1.32.0, 1175 inferences): the parent's fork between the children
    cancels, the parent's own total and its threads' instructions play no part."""
    text = (
        "cpu 0 insns: 485162960\ncpu 1 insns: 542051\ntotal insns: 485899384\n"
        "cpu 0 insns: 1682428629\ncpu 1 insns: 542051\ntotal insns: 1683165053\n"
        "cpu 0 insns: 485248334\ncpu 1 insns: 1354592\ntotal insns: 485984758\n"
        "cpu 0 insns: 541703466\ncpu 1 insns: 1379593\ntotal insns: 543741042\n"
    )
    totals = parse_totals(text)
    assert totals == [485899384, 1683165053, 485984758, 543741042]
    assert extra_from_children(totals) == 1683165053 - (485899384 + 485984758) / 2
    assert extra_from_children(totals[:3]) is None  # a child or the parent printed nothing
    assert extra_from_children([]) is None


def test_identical_builds_are_no_change_and_a_larger_count_beyond_the_noise_is_called() -> None:
    a = _series("upstream", (680_100.0, 680_400.0, 680_250.0))
    same = _series("tuned", (680_300.0, 680_000.0, 680_200.0))
    worse = _series("o0", (2_100_000.0, 2_100_900.0, 2_100_400.0))
    better = _series("lto", (660_000.0, 660_100.0, 659_900.0))
    verdicts = {c.candidate.variant: c for c in comparisons([a, same, worse, better])}
    assert verdicts["tuned"].verdict == "no significant change"
    assert verdicts["o0"].verdict == "more instructions"
    assert verdicts["o0"].regression_above(0.05)
    assert not verdicts["o0"].regression_above(3.0)  # +209%: not above a 300% limit
    assert verdicts["lto"].verdict == "fewer instructions"
    assert not verdicts["lto"].regression_above(0.0)
    assert all(c.baseline.variant == "upstream" for c in verdicts.values())


def test_the_threshold_grows_with_the_noise_seen_between_rounds() -> None:
    calm = comparisons([_series("a", (1000.0, 1000.0, 1000.0)), _series("b", (1005.0, 1005.0, 1005.0))])[0]
    assert calm.noise == 0 and calm.threshold == MIN_CHANGE
    assert calm.verdict == "more instructions"  # +0.5% > the 0.2% floor with no noise
    noisy = comparisons([_series("a", (990.0, 1000.0, 1010.0)), _series("b", (1030.0, 1030.0, 1030.0))])[0]
    assert noisy.noise == pytest.approx(0.02)
    assert noisy.threshold == pytest.approx(NOISE_MARGIN * 0.02)
    assert noisy.verdict == "no significant change"  # +3% < 3 x 2% of noise


def test_comparisons_stay_within_one_board_and_model() -> None:
    series = [
        _series("a", (1.0,), board="b1"),
        _series("b", (2.0,), board="b1"),
        _series("a", (1.0,), board="b2"),
        _series("a", (1.0,), model="other.onnx", board="b1"),
    ]
    pairs = comparisons(series)
    assert [(c.baseline.board, c.baseline.model, c.candidate.variant) for c in pairs] == [
        ("b1", "m.onnx", "b")
    ]


@pytest.mark.parametrize(("text", "fraction"), [("2", 0.02), ("2%", 0.02), ("0.5", 0.005), ("0", 0.0)])
def test_fail_above_takes_a_percentage(text: str, fraction: float) -> None:
    assert percentage(text) == pytest.approx(fraction)


def test_fail_above_refuses_a_negative_or_a_word() -> None:
    for text in ("-1", "five"):
        with pytest.raises(argparse.ArgumentTypeError):
            percentage(text)


def _document(run_id: str) -> CountRunDocument:
    return {
        "schema": SCHEMA, "run_id": run_id, "created": "2026-12-06T09:00:00Z", "command": "orch bench",
        "metric": "instructions", "note": "not cycles", "counter": {"qemu": "q", "plugin": "insn", "bundle": "b"},
        "boards": {"b": {"status": "ok", "cpu": "cortex-a76", "extra_inferences": {"m.onnx": 20}}},
        "series": [_series("a", (1.0, 1.0, 1.0)).as_json()], "comparisons": [],
    }  # fmt: skip


def test_count_runs_are_stored_once_and_found_as_timed_runs_are(tmp_path: Path) -> None:
    for run_id in ("20261206-090000-aaaa", "20261206-100000-bbbb"):
        write_counts(_document(run_id), tmp_path)
    assert load_counts("latest", tmp_path)["run_id"] == "20261206-100000-bbbb"
    assert load_counts("latest~1", tmp_path)["run_id"] == "20261206-090000-aaaa"
    assert load_counts("20261206-09", tmp_path)["run_id"] == "20261206-090000-aaaa"
    with pytest.raises(UsageError, match="never overwritten"):
        write_counts(_document("20261206-100000-bbbb"), tmp_path)
    with pytest.raises(UsageError, match="matches several"):
        load_counts("20261206", tmp_path)
    with pytest.raises(UsageError, match="only 2"):
        load_counts("latest~2", tmp_path)


def test_a_damaged_count_run_is_named_with_what_is_wrong(tmp_path: Path) -> None:
    path = write_counts(_document("20261206-090000-aaaa"), tmp_path)
    document = json.loads(path.read_text())
    del document["series"]
    path.write_text(json.dumps(document))
    with pytest.raises(
        UsageError, match=r"20261206-090000-aaaa\.json: not an instruction-count run: key 'series'"
    ):
        load_counts("latest", tmp_path)
    path.write_text("{truncated")
    with pytest.raises(UsageError, match="not a readable instruction-count run"):
        load_counts("latest", tmp_path)
    with pytest.raises(UsageError, match="no instruction-count runs"):
        load_counts("latest", tmp_path / "elsewhere")


def test_a_count_run_named_where_a_timed_run_is_expected_is_pointed_to_the_report(tmp_path: Path) -> None:
    write_counts(_document("20261206-090000-aaaa"), tmp_path)
    (tmp_path / "20261206-080000-bbbb").mkdir()  # a timed run, so that the store is not empty
    with pytest.raises(UsageError, match="is an instruction-count run") as raised:
        ResultStore(tmp_path).resolve("20261206-09")
    assert raised.value.hint == "put it on a report page: orch report RUN --counts 20261206-09"
    # ... and the counts' folder is never taken for a timed run.
    assert ResultStore(tmp_path).resolve("latest") == "20261206-080000-bbbb"
