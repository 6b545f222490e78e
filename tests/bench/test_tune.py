"""`orch tune` without boards: the candidate space, the successive-halving search on synthetic runs
(known answers), the budget, the result and its `orch bench` line, the CLI's dry run and the stored
run's tables and HTML section."""

from __future__ import annotations

import json
import shlex
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import pytest

from orchestrator import cli
from orchestrator.bench import results, tune, tune_result, tune_space
from orchestrator.bench.plan import QUICK, Combination, ReleaseRef, Setting
from orchestrator.bench.plan_options import make_plan
from orchestrator.bench.steps import board_steps
from orchestrator.board import Board
from orchestrator.errors import BenchError, UsageError

BOARD = Board(name="pi01", hostname="127.0.0.1", port=1)
STOCK = default = tune_space.default_of("stock")
TUNED = tune_space.default_of("tuned")


def cand(variant: str, opt: str = "all", threads: int = 0, quant: str = "fp32") -> Combination:
    return Combination(variant=variant, quant=quant, setting=Setting(opt_level=opt, intra_threads=threads))


def release(
    variant: str, version: str = "1.21.0", *, current: bool = False, providers=(), created="2026-01-01"
) -> ReleaseRef:
    rid = f"{variant}-{version}-0000000{len(variant)}"
    path = f"/home/u/orch/releases/{rid}"
    return ReleaseRef(
        id=rid,
        variant=variant,
        path=path,
        python=f"{path}/venv/bin/python",
        models=("fold.onnx",),
        ort_version=version,
        current=current,
        created=created,
        providers=tuple(providers),
    )


class Lab:
    """Synthetic measurements: each candidate's runs have a known median, a little noise within a
    run and between runs; every run costs ``run_s`` seconds of a fake clock."""

    def __init__(
        self, medians: Mapping[Combination, float], *, noise: float = 0.01, run_s: float = 10.0, seed: int = 0
    ):
        self.medians = dict(medians)
        self.noise, self.run_s = noise, run_s
        self.rng = np.random.default_rng(seed)
        self.now = 0.0
        self.runs: dict[Combination, list[tuple[float, ...]]] = {}
        self.rungs: list[tune.Rung] = []

    def clock(self) -> float:
        return self.now

    def measure(self, rung: tune.Rung, first_round: int) -> dict[Combination, tuple[tuple[float, ...], ...]]:
        self.rungs.append(rung)
        for _ in range(rung.runs):
            for candidate in rung.candidates:
                centre = self.medians[candidate] * (1 + self.rng.normal(0, self.noise))
                values = centre * (1 + self.rng.normal(0, self.noise, 6))
                self.runs.setdefault(candidate, []).append(tuple(float(v) for v in values))
                self.now += self.run_s
        return {c: tuple(r) for c, r in self.runs.items()}


def search(lab: Lab, *, budget_s: float = 10_000, threshold: float = 0.05) -> tuple[tune.Search, Mapping]:
    found = tune.Search(tuple(lab.medians), budget_s=budget_s, threshold=threshold)
    runs = tune.run_search(found, lab.measure, run_guess_s=lab.run_s, clock=lab.clock)
    return found, runs


def dropped(found: tune.Search, rung: int) -> set[str]:
    return {item["label"] for item in found.rungs[rung - 1]["dropped"]}


# --------------------------------------------------------------------------- the search


def test_a_clearly_slower_candidate_is_dropped_at_rung_1_and_close_ones_survive():
    lab = Lab(
        {
            cand("stock"): 10.0,
            cand("stock", "disable"): 31.0,
            cand("stock", threads=1): 10.1,
            cand("stock", threads=2): 10.2,
        }
    )
    found, _ = search(lab)
    first = lab.rungs[0]
    assert (first.number, first.kind, first.runs, len(first.candidates)) == (1, tune.HALVING, 2, 4)
    assert dropped(found, 1) == {"stock fp32 cpu opt=disable threads=default"}
    why = found.rungs[0]["dropped"][0]
    assert why["runs"] == 2 and why["ratio_to_best"] > 2.5 and why["ci_low"] > 1.05, why
    # The close ones (1-2 % apart, under the 5 % threshold) all go on to rung 2, with twice the runs.
    second = lab.rungs[1]
    assert (second.kind, second.runs) == (tune.HALVING, 4)
    assert set(second.candidates) == {cand("stock"), cand("stock", threads=1), cand("stock", threads=2)}
    assert not dropped(found, 2)
    assert "within 5% of the best" in found.stopped, found.stopped
    assert found.winner in set(second.candidates)


def test_close_contenders_get_twice_the_runs_each_rung_up_to_the_cap():
    # Identical constant runs and no threshold: never separable, never proven equal: the full schedule.
    lab = Lab({cand("stock"): 10.0, cand("stock", threads=1): 10.0, cand("stock", "basic"): 40.0}, noise=0.0)
    found, runs = search(lab, threshold=0.0)
    assert [(r.kind, r.runs, len(r.candidates)) for r in lab.rungs] == [
        (tune.HALVING, 2, 3),
        (tune.HALVING, 4, 2),
        (tune.HALVING, 8, 2),
        (tune.HALVING, 16, 2),
    ]
    assert dropped(found, 1) == {"stock fp32 cpu opt=basic threads=default"}
    assert sum(r.runs for r in lab.rungs) == tune.MAX_RUNS
    assert found.stopped == "every candidate left has 30 runs: 2 stay within the threshold of each other"
    assert len(runs[cand("stock")]) == 30 and len(runs[cand("stock", "basic")]) == 2
    assert found.confirm_note == ""  # the winner is stock's default: nothing to compare it with


def test_the_budget_cuts_a_rung_then_ends_the_search():
    # 10 s a run, 100 s: rung 1 costs 3 x 2 runs = 60 s; rung 2 wants 4 runs of the 2 close ones
    # (80 s) and gets what fits in the 40 s left: 2 each. Then nothing fits.
    lab = Lab(
        {cand("stock"): 10.0, cand("stock", threads=1): 10.05, cand("stock", "disable"): 30.0}, noise=0.05
    )
    found, _ = search(lab, budget_s=100)
    assert [(r.runs, r.wanted, len(r.candidates)) for r in lab.rungs] == [(2, 2, 3), (2, 4, 2)]
    assert found.stopped == "budget spent (2 candidates left)"
    assert all(r.kind == tune.HALVING for r in lab.rungs)  # no budget left for a confirm rung either
    assert found.per_run_s == pytest.approx(10.0) and found.elapsed_s == pytest.approx(100.0)
    assert found.rungs[1]["rounds"] == [3, 4]  # rounds are numbered on across rungs


def test_the_confirm_rung_tops_up_the_winner_and_its_baselines_for_a_verdict():
    lab = Lab(
        {
            STOCK: 10.0,
            cand("stock", "disable"): 30.0,
            TUNED: 9.0,
            cand("tuned", threads=1): 6.0,
            cand("tuned", "disable"): 27.0,
        }
    )
    found, runs = search(lab)
    assert dropped(found, 1) == {
        "stock fp32 cpu opt=all threads=default",
        "stock fp32 cpu opt=disable threads=default",
        "tuned fp32 cpu opt=all threads=default",
        "tuned fp32 cpu opt=disable threads=default",
    }
    assert found.stopped == "one candidate left" and found.winner == cand("tuned", threads=1)
    confirm = lab.rungs[-1]
    assert confirm.kind == tune.CONFIRM and confirm.runs == 2  # 2 runs each so far, 4 needed
    assert confirm.candidates == (STOCK, TUNED, cand("tuned", threads=1))  # baselines first
    assert not found.rungs[-1]["dropped"]  # a confirm rung drops nothing
    result = tune_result.final_result(found, runs)
    assert result["label"] == "tuned fp32 cpu opt=all threads=1" and (result["runs"], result["n"]) == (4, 24)
    assert result["ci_low"] <= result["median_ms"] <= result["ci_high"]
    for key, ratio in (("vs_default", 6 / 9), ("vs_stock", 6 / 10)):
        against = result[key]
        assert against["ratio"] == pytest.approx(ratio, rel=0.05), against
        assert (against["runs_a"], against["runs_b"]) == (4, 4) and against["verdict"] == "faster", against
        assert against["ci_high"] < 1.0


def test_the_default_winner_and_a_missing_stock_are_said_plainly():
    lab = Lab({TUNED: 5.0, cand("tuned", "disable"): 20.0})
    found, runs = search(lab)
    result = tune_result.final_result(found, runs, no_stock="no stock release deployed")
    assert result["vs_default"]["same"] is True
    assert result["vs_stock"] == {"missing": "no stock release deployed"}
    # Nothing to compare, but the winner's interval gets the runs a verdict would need.
    confirm = lab.rungs[-1]
    assert (confirm.kind, confirm.candidates, confirm.runs) == (tune.CONFIRM, (TUNED,), 2)
    assert result["runs"] == 4 and found.confirm_note == ""


def test_fit_and_the_budget_check():
    assert tune.fit(8, 2, 10.0, 100.0) == 5
    assert tune.fit(4, 2, 10.0, 100.0) == 4
    assert tune.fit(4, 3, 10.0, 25.0) == 0
    assert tune.fit(4, 3, 10.0, -5.0) == 0
    tune.check_budget(200, 9, 10.0)  # 9 x 2 x 10 s = 180 s: fits
    with pytest.raises(UsageError) as refused:
        tune.check_budget(120, 9, 10.0)
    assert (
        "--budget 2 min: the first rung alone runs each of the 9 candidates 2 times, about 3 min"
        in refused.value.message
    )
    assert "--budget 4m or more" in (refused.value.hint or "")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90), ("90", 90), ("20m", 1200), ("1h30m", 5400), ("1.5h", 5400), ("2m30s", 150), (" 5M ", 300)],
)
def test_budgets(text, seconds):
    assert tune.parse_budget(text) == seconds


@pytest.mark.parametrize("text", ["", "20x", "m", "0s", "0", "-5m", "1m1h", "20 m", "nan", "1e3"])
def test_bad_budgets(text):
    with pytest.raises(ValueError, match="must be"):
        tune.parse_budget(text)


def test_expected_schedule_halves_and_stops_within_the_budget():
    assert tune.expected_schedule(9, 10_000, 10.0) == [
        {"rung": 1, "candidates": 9, "runs_each": 2, "estimated_s": 180.0},
        {"rung": 2, "candidates": 5, "runs_each": 4, "estimated_s": 200.0},
        {"rung": 3, "candidates": 3, "runs_each": 8, "estimated_s": 240.0},
        {"rung": 4, "candidates": 2, "runs_each": 16, "estimated_s": 320.0},
    ]
    assert [r["runs_each"] for r in tune.expected_schedule(9, 300, 10.0)] == [2, 2]


# --------------------------------------------------------------------------- the space


def test_the_space_puts_each_variants_defaults_first_and_xnnpack_only_where_offered():
    space = tune_space.space_from_options(threads=[], opt_levels=[], eps=[], inter_threads=0, quantize=None)
    plain = release("stock", providers=("CPUExecutionProvider",))
    xnn = release("tuned", providers=("XnnpackExecutionProvider", "CPUExecutionProvider"))
    found = space.candidates([plain, xnn])
    stock = [c for c in found if c.variant == "stock"]
    tuned = [c for c in found if c.variant == "tuned"]
    assert stock[0] == STOCK and tuned[0] == TUNED
    assert len(stock) == 9  # threads 1, 2, default x disable, basic, all; cpu
    assert {c.setting.ep for c in stock} == {"cpu"} and len(tuned) == 18
    assert {c.setting.intra_threads for c in stock} == {0, 1, 2}
    assert {c.setting.opt_level for c in stock} == {"disable", "basic", "all"}
    unknown = release("default")  # never verified: nothing is known of its providers
    assert {c.setting.ep for c in space.candidates([unknown])} == {"cpu"}


def test_asked_values_int8_and_eps_a_release_lacks():
    space = tune_space.space_from_options(
        threads=[4], opt_levels=["disable"], eps=["cpu", "xnnpack"], inter_threads=0, quantize="dynamic"
    )
    plain = release("stock", providers=("CPUExecutionProvider",))
    found = space.candidates([plain])
    # The default settings stay a candidate; xnnpack is left out where the release is known to lack it.
    assert found == (STOCK, cand("stock", "disable", 4), cand("stock", "disable", 4, quant="int8"))
    assert {c.setting.ep for c in space.candidates([release("stock")])} == {
        "cpu",
        "xnnpack",
    }  # not known: asked


def test_releases_of_the_current_ort_version_and_stock_as_the_reference():
    plan = make_plan([BOARD], models=["fold"])
    stock, tuned, lto = release("stock"), release("tuned", current=True), release("lto")
    other = release("default", "1.22.0")
    chosen = tune_space.choose_releases(plan, [stock, tuned, lto, other], BOARD.name)
    assert [r.variant for r in chosen] == ["tuned", "lto", "stock"]  # the current one first
    assert tune_space.stock_note([stock, tuned], chosen) == ""
    # --variant: as bench picks it, and stock of that release joins as the reference.
    asked = make_plan([BOARD], variants=["lto"], models=["fold"])
    assert [r.variant for r in tune_space.choose_releases(asked, [stock, tuned, lto], BOARD.name)] == [
        "lto",
        "stock",
    ]
    # Stock only of another release: not compared (an A/B across releases), and said so.
    old_stock = release("stock", "1.20.0")
    chosen = tune_space.choose_releases(plan, [old_stock, tuned], BOARD.name)
    assert [r.variant for r in chosen] == ["tuned"]
    assert tune_space.stock_note([old_stock, tuned], chosen) == (
        "no stock release of ORT 1.21.0 deployed (stock 1.20.0 is: another release)"
    )
    assert tune_space.stock_note([tuned], [tuned]) == "no stock release deployed"
    with pytest.raises(BenchError, match="no release is current"):
        tune_space.choose_releases(plan, [stock], BOARD.name)


def test_a_profile_guided_release_is_one_more_build_searched_beside_tuned():
    # orch build --variant pgo deployed beside tuned: tune searches both with the same settings,
    # each from its own defaults, and stock of that release is the reference.
    plan = make_plan([BOARD], models=["fold"])
    stock, tuned, pgo = release("stock"), release("tuned", current=True), release("pgo")
    chosen = tune_space.choose_releases(plan, [stock, tuned, pgo], BOARD.name)
    assert [r.variant for r in chosen] == ["tuned", "pgo", "stock"]
    space = tune_space.space_from_options(threads=[], opt_levels=[], eps=[], inter_threads=0, quantize=None)
    found = space.candidates(chosen)
    of = {variant: [c for c in found if c.variant == variant] for variant in ("tuned", "pgo")}
    assert of["pgo"][0] == tune_space.default_of("pgo")
    assert [c.setting for c in of["pgo"]] == [c.setting for c in of["tuned"]]


def test_a_rung_is_a_bench_plan_of_just_its_candidates_interleaved():
    base = tune_space.pinned(
        make_plan([BOARD], models=["fold"], quantize="dynamic"),
        [release("stock"), release("tuned")],
    )
    rung = [cand("tuned", threads=1), STOCK, cand("tuned", threads=1, quant="int8")]
    plan = tune_space.rung_plan(base, rung, 3)
    steps = board_steps(plan, [release("stock"), release("tuned")], ["fold.onnx"])
    measured = [(s.round, s.release.variant, s.quant, s.setting.intra_threads) for s in steps]
    assert measured == [
        (r, variant, quant, threads)
        for r in (1, 2, 3)
        for variant, quant, threads in (("tuned", "fp32", 1), ("tuned", "int8", 1), ("stock", "fp32", 0))
    ]
    assert plan.as_dict()["only"][0] == {
        "variant": "tuned",
        "quant": "fp32",
        **vars(Setting(intra_threads=1)),
    }
    assert tune_space.rung_plan(base, [STOCK], 2).quantize is None  # no int8 candidate: nothing to quantise


def test_the_reproducing_command_is_a_valid_bench_line_with_the_baselines_first():
    lab = Lab({STOCK: 10.0, TUNED: 9.0, cand("tuned", "basic", 1): 6.0})
    found, runs = search(lab)
    result = tune_result.final_result(found, runs)
    plan = make_plan([BOARD], models=["fold"], rounds=5, cooldown_s=0, agent=QUICK)
    line = tune_result.reproduce_command(
        plan, "pi01", "fold.onnx", result, {"stock": "1.21.0", "tuned": "1.21.0"}
    )
    argv = shlex.split(line)
    assert argv[:2] == ["orch", "bench"]
    args = cli.build_parser(argv[1:]).parse_args(argv[1:])
    assert (args.host, args.model, args.variant, args.ort_version) == (
        ["pi01"],
        ["fold.onnx"],
        ["stock,tuned"],
        ["1.21.0"],
    )
    assert (args.threads, args.opt_level, args.ep) == (["0,1"], ["all,basic"], [])
    assert (args.rounds, args.min_runs, args.warmup, args.cooldown) == (5, 5, 1, 0.0)


# --------------------------------------------------------------------------- the command


INVENTORY = "all:\n  hosts:\n    pi01: {hostname: 127.0.0.1, port: 1}\n"


def test_dry_run_prints_the_space_and_the_schedule(orch_env, orch_cli):
    Path(orch_env["ORCH_INVENTORY"]).write_text(INVENTORY)
    done = orch_cli(orch_env, "tune", "--host", "pi01", "--model", "fold", "--dry-run", "--json")
    assert done.returncode == 0, done.stderr
    document = json.loads(done.stdout)
    found = document["tune"]
    assert found["budget_s"] == 1200 and len(found["candidates_per_variant"]) == 9
    assert found["candidates_per_variant"][0] == "fp32 cpu opt=all threads=default"
    assert [r["runs_each"] for r in found["schedule_if_half_dropped_each_rung"]] == [2, 4, 8, 16]
    assert document["plan"]["models"] == ["fold"] and document["plan"]["boards"] == ["pi01"]
    human = orch_cli(
        orch_env,
        "tune",
        "--host",
        "pi01",
        "--model",
        "fold",
        "--dry-run",
        "--opt-level",
        "disable,all",
        "--threads",
        "0",
    )
    assert human.returncode == 0, human.stderr
    said = " ".join(human.stderr.split())
    assert "2 candidates per variant" in said and "rung 1: 2 candidates x 2 runs" in said, said


@pytest.mark.parametrize(
    ("argv", "words"),
    [
        (("--budget", "20x"), "argument --budget: must be a duration such as 90s, 20m or 1h30m, not '20x'"),
        (("--budget", "0s"), "argument --budget: must be longer than 0 s"),
        (
            ("--budget", "30s", "--quick"),
            "--budget 30 s: the first rung alone runs each of the 9 candidates 2 times",
        ),
        (("--model", "a,b"), "orch tune tunes one model at a time"),
        (("--ep", "cpux"), "--ep 'cpux': not an execution provider"),
        (("--threads", "1,1"), "the same setting is listed twice"),
    ],
)
@pytest.mark.parametrize("dry", [True, False])
def test_bad_input_is_refused_alike_by_the_dry_and_the_real_run(orch_env, orch_cli, argv, words, dry):
    Path(orch_env["ORCH_INVENTORY"]).write_text(INVENTORY)
    line = ["tune", "--host", "pi01", "--model", "fold", *argv, *(["--dry-run"] if dry else [])]
    done = orch_cli(orch_env, *line)
    assert done.returncode == 2, done.stderr
    assert words in " ".join(done.stderr.split()), done.stderr
    assert "Traceback" not in done.stderr


def _stored_tune(root: Path) -> str:
    """A tune run as tune_execute stores it, made by the real search on synthetic runs."""
    lab = Lab({STOCK: 10.0, cand("stock", "disable"): 30.0, cand("stock", threads=1): 8.0})
    found, runs = search(lab)
    result = tune_result.final_result(found, runs)
    plan = make_plan([BOARD], models=["fold"], rounds=5)
    result["command"] = tune_result.reproduce_command(plan, "pi01", "fold.onnx", result, {"stock": "1.21.0"})
    measurements = [
        {
            "key": {
                "variant": c.variant,
                "release": "stock-1.21.0-00000001",
                "model": "fold.onnx",
                "quant": c.quant,
                **vars(c.setting),
            },
            "round": index + 1,
            "step": index,
            "agent": {"timing": {"latencies_ms": list(values)}, "ort": {"version": "1.21.0"}},
        }
        for c, its_runs in runs.items()
        for index, values in enumerate(its_runs)
    ]
    store = results.ResultStore(root)
    run_id = "20260101-000000-tune"
    store.begin_run(run_id, command="orch tune --host pi01 --model fold")
    record = {**found.as_dict(), "model": "fold.onnx", "stock_note": "", "result": result}
    store.write_board(
        run_id,
        {
            "schema": results.BOARD_SCHEMA,
            "run_id": run_id,
            "board": "pi01",
            "status": "ok",
            "error": None,
            "board_info": {"tags": ["lab", "emulated"]},
            "releases": [{"id": "stock-1.21.0-00000001", "ort_version": "1.21.0", "route": "official"}],
            "measurements": measurements,
            "tune": record,
        },
    )
    store.finish_run(
        run_id,
        {
            "run_id": run_id,
            "command": "orch tune",
            "boards": {},
            "kind": "tune",
            "tune": {"boards": {"pi01": record}},
        },
    )
    return run_id


def test_a_stored_tune_run_shows_its_rungs_result_and_command(orch_env, orch_cli, tmp_path):
    run_id = _stored_tune(Path(orch_env["ORCH_RESULTS"]))
    shown = orch_cli(orch_env, "results", "show", run_id)
    assert shown.returncode == 0, shown.stderr
    said = " ".join(shown.stderr.split())
    assert "Tuning: rungs" in said and "Tuning: the best configuration" in said, said
    assert "stock fp32 cpu opt=disable threads=default:" in said  # dropped, with why
    assert "stock fp32 cpu opt=all threads=1" in said
    assert "timings are for relative comparison only" in said
    assert "the comparison again: orch bench --host pi01 --model fold.onnx --variant stock" in said
    as_json = json.loads(orch_cli(orch_env, "results", "show", run_id, "--json", check=True).stdout)
    assert as_json["meta"]["kind"] == "tune"
    page = tmp_path / "report.html"
    orch_cli(orch_env, "report", run_id, "--html", str(page), check=True)
    text = page.read_text()
    assert "<h2>Tuning</h2>" in text and "stock fp32 cpu opt=all threads=1" in text
    assert "relative comparison only" in text and "orch bench --host pi01" in text
