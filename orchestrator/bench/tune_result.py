"""`orch tune`'s result: the winner of the search with its interval, its ratio to its variant's
default settings and to stock's, and the `orch bench` command that measures them again."""

from __future__ import annotations

import shlex
from collections.abc import Mapping, Sequence
from typing import cast

import numpy as np

from orchestrator.bench import stats
from orchestrator.bench.plan import BenchPlan, Combination
from orchestrator.bench.records import Against, TuneResult
from orchestrator.bench.tune import Run, Search
from orchestrator.errors import BenchError


def _against(
    winner: Combination, baseline: Combination, runs: Mapping[Combination, Sequence[Run]], threshold: float
) -> Against:
    if baseline == winner:
        return {"baseline": baseline.as_dict(), "label": baseline.label(), "same": True}
    c = stats.compare_runs(runs[baseline], runs[winner], threshold=threshold)
    # An Against is a comparison's record with its baseline beside it.
    return cast(
        Against, {"baseline": baseline.as_dict(), "label": baseline.label(), "same": False, **c.as_dict()}
    )


def final_result(
    search: Search, runs: Mapping[Combination, Sequence[Run]], *, no_stock: str = "no stock release deployed"
) -> TuneResult:
    """The winner (median, its interval, runs, n) and its ratio to the default settings and to stock."""
    winner = search.winner
    if winner is None:
        raise BenchError("the search ended before any rung was judged")
    mine = runs[winner]
    pooled = np.concatenate([np.asarray(r, dtype=float) for r in mine])
    low, high = stats.median_ci_runs(mine)
    default, stock = search.references()
    assert default is not None  # a winner has a variant
    return {
        "winner": winner.as_dict(),
        "label": winner.label(),
        "median_ms": float(np.median(pooled)),
        "ci_low": low,
        "ci_high": high,
        "runs": len(mine),
        "n": int(pooled.size),
        "vs_default": _against(winner, default, runs, search.threshold),
        "vs_stock": _against(winner, stock, runs, search.threshold) if stock else {"missing": no_stock},
        "ties": [c.label() for c in search.alive if c != winner],
    }


def reproduce_command(
    plan: BenchPlan, board: str, model: str, result: TuneResult, versions: Mapping[str, str]
) -> str:
    """The `orch bench` line that measures the winner next to the default settings and stock's (the
    baselines first, so bench compares against them), interleaved, with the tune's run lengths."""
    winner = Combination.from_dict(result["winner"])
    sides = [
        Combination.from_dict(against["baseline"])
        for against in (result["vs_stock"], result["vs_default"])
        if "baseline" in against
    ]
    sides.append(winner)
    variants = list(dict.fromkeys(c.variant for c in sides))
    argv = ["orch", "bench", "--host", board, "--model", model, "--variant", ",".join(variants)]
    chosen = {versions[v] for v in variants if v in versions}
    if len(chosen) == 1:
        argv += ["--ort-version", chosen.pop()]
    elif chosen:
        argv += [f"--ort-version={v}={versions[v]}" for v in variants if v in versions]
        argv.append("--allow-version-mismatch")
    for option, values in (
        ("--threads", [str(c.setting.intra_threads) for c in sides]),
        ("--opt-level", [c.setting.opt_level for c in sides]),
        ("--ep", [c.setting.ep for c in sides]),
    ):
        unique = list(dict.fromkeys(values))
        if unique != [{"--threads": "0", "--opt-level": "all", "--ep": "cpu"}[option]]:
            argv += [option, ",".join(unique)]
    if winner.setting.inter_threads:
        argv += ["--inter-threads", str(winner.setting.inter_threads)]
    if winner.quant != "fp32" and plan.quantize:
        argv += ["--quantize", plan.quantize]
        argv += [
            f"--calibration={name}={path}" if name else f"--calibration={path}"
            for name, path in plan.calibration.files
        ]
    agent = plan.agent
    argv += ["--rounds", str(plan.rounds), "--warmup", str(agent.warmup), "--min-runs", str(agent.min_runs)]
    argv += ["--min-duration", f"{agent.min_duration:g}", "--cooldown", f"{plan.cooldown_s:g}"]
    if agent.max_runs != 100000:
        argv += ["--max-runs", str(agent.max_runs)]
    for shape in agent.shapes:
        argv += ["--shape", shape]
    if agent.sysfs_root:
        argv += ["--sysfs-root", agent.sysfs_root]
    if plan.pin_clocks:
        argv.append("--pin-clocks")
    if plan.threshold != stats.DEFAULT_THRESHOLD:
        argv += ["--threshold", f"{plan.threshold:g}"]
    return shlex.join(argv)
