"""Showing results: rich tables for the terminal, an HTML report with PNG plots, CSV/JSON export.

Tables always print the sample count and the spread next to every figure (a p50 without its n
and IQR invites over-reading). Plots are drawn with matplotlib's Agg backend (no display needed)
at a fixed size, so a report is the same whatever machine renders it.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.markup import escape
from rich.table import Table

from orchestrator.bench import stats
from orchestrator.bench.records import BoardRecord, BoardState
from orchestrator.bench.results import RunRecord
from orchestrator.bench.series import Pairing, Series
from orchestrator.console import compact_table

_SHORT = {
    "opt_level": "opt",
    "intra_threads": "threads",
    "inter_threads": "inter",
    "quant": "",
    "variant": "",
}
_VERDICT_STYLE = {stats.FASTER: "bold green", stats.SLOWER: "bold red"}


def fmt_ms(value: float) -> str:
    if math.isnan(value):
        return "-"
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def varying_dimensions(series: Sequence[Series]) -> list[str]:
    """Dimensions whose value differs between the series: the only ones worth a column."""
    return [
        d
        for d in ("variant", "model", "quant", "ep", "opt_level", "intra_threads", "inter_threads", "runner")
        if len({getattr(s.key, d) for s in series}) > 1
    ]


def _value(dimension: str, value: object) -> str:
    if dimension.endswith("threads") and value == 0:
        return "default"
    return str(value)


def a_to_b(values: Sequence[str]) -> str:
    """A baseline and what is compared with it, in the order given: "stock -> upstream" (each of
    several candidates against the first one: "A -> B, C"); one value alone is itself."""
    ordered = list(dict.fromkeys(values))
    if len(ordered) < 2:
        return "".join(ordered)
    return f"{ordered[0]} -> {', '.join(ordered[1:])}"


def compared_label(series: Sequence[Series]) -> str:
    """What a run compares, baseline first as it was measured: "stock -> upstream" for variants,
    "opt disable -> all" for a setting ("" when the run compares nothing)."""
    found = []
    for dimension in varying_dimensions(series):
        if dimension == "model":  # models are measured side by side, never compared
            continue
        label = a_to_b([_value(dimension, getattr(s.key, dimension)) for s in series])
        name = _SHORT.get(dimension, dimension)
        found.append(f"{name} {label}" if name else label)
    return "; ".join(found)


def _constant_caption(series: Sequence[Series]) -> str:
    """The dimensions every series shares, said once under the table instead of in every row."""
    if not series:
        return ""
    varying = set(varying_dimensions(series))
    key = series[0].key
    names = {
        "variant": "variant",
        "model": "model",
        "quant": "quant",
        "ep": "EP",
        "opt_level": "opt",
        "intra_threads": "threads",
        "inter_threads": "inter-op threads",
        "runner": "runner",
    }
    return "all rows: " + ", ".join(
        f"{names[d]}={_value(d, getattr(key, d))}" for d in names if d not in varying
    )


def version_note(series: Sequence[Series]) -> str:
    """'' for a same-release run; else the label every table of the run carries: which boards ran
    which ORT releases side by side (only with --allow-version-mismatch)."""
    mixed = []
    for board in dict.fromkeys(s.board for s in series):
        versions = list(dict.fromkeys(s.ort_version or "?" for s in series if s.board == board))
        if len(versions) > 1:
            mixed.append(f"{board} {' vs '.join(versions)}")
    if not mixed:
        return ""
    return "ORT VERSION MISMATCH (--allow-version-mismatch): " + "; ".join(mixed)


def _titled(title: str, note: str) -> str:
    return f"{title}\n[bold red]{escape(note)}[/]" if note else title


def _spread(value: float) -> str:
    return "-" if math.isnan(value) else f"{value * 100:.1f}%"


def summary_table(series: Sequence[Series], *, title: str = "P50 / P99 latency per board and build") -> Table:
    varying = [d for d in varying_dimensions(series) if d != "variant"]
    table = compact_table(
        title=_titled(title, version_note(series)),
        title_justify="left",
        caption=_constant_caption(series)
        + "; build = variant, ORT release, route; run spread = range of per-run medians / their median",
        caption_justify="left",
        show_lines=True,
    )
    table.add_column("board", style="bold", overflow="fold")
    table.add_column("build", no_wrap=True)
    for dimension in varying:
        table.add_column(dimension.replace("intra_threads", "threads").replace("_", "\n"), no_wrap=True)
    # Pairs of figures share a column, one above the other, so a board's row fits 80 columns.
    for column in ("runs\nn", "p50\np99 ms", "mean\n±std", "IQR\nms", "run\nspread", "inf/s"):
        table.add_column(column, justify="right", no_wrap=True)
    for item in series:
        summary = item.summary()
        throughput = [
            a["stats"]["throughput_ips"] for a in item.agents if "throughput_ips" in a.get("stats", {})
        ]
        runs = item.runs
        table.add_row(
            escape(item.board),
            escape(f"{item.key.variant} {item.ort_version or '?'}\n{item.route or '?'}"),
            *(escape(_value(d, getattr(item.key, d))) for d in varying),
            f"{len(runs)}\n{summary.n}",
            f"{fmt_ms(summary.p50)}\n{fmt_ms(summary.p99)}",
            f"{fmt_ms(summary.mean)}\n±{fmt_ms(summary.std)}",
            fmt_ms(summary.iqr),
            _spread(stats.run_spread(runs)) if len(runs) > 1 else "-",
            fmt_ms(sum(throughput) / len(throughput)) if throughput else "-",
        )
    return table


def _setting(series: Series, dimension: str) -> str:
    """What a side of a pairing set apart from the other, besides its build."""
    if dimension in ("variant", "release"):
        return ""
    if dimension == "run":
        key = series.key
        threads = "default" if key.intra_threads == 0 else str(key.intra_threads)
        return f"{key.quant} {key.ep} opt={key.opt_level} threads={threads}"
    if dimension == "quant":
        return _value(dimension, getattr(series.key, dimension))
    return f"{_SHORT.get(dimension) or dimension}={_value(dimension, getattr(series.key, dimension))}"


def side_label(series: Series, dimension: str) -> str:
    """One side of a comparison: its build (variant, ORT release, route) and what the comparison varied."""
    return " ".join(part for part in (series.build, _setting(series, dimension)) if part)


def _side_lines(letter: str, series: Series, dimension: str) -> str:
    """A side's build on short lines that are never wrapped: variant and version, then the route,
    then what the comparison varied."""
    lines = [f"{letter} {series.key.variant} {series.ort_version or '?'}", f"  {series.route or '?'}"]
    setting = _setting(series, dimension)
    return "\n".join([*lines, *(f"  {part}" for part in setting.split())] if setting else lines)


def _ratio(c: stats.Comparison) -> tuple[str, str]:
    """B/A and its interval, with a third digit when the interval is narrower than 0.02."""
    if math.isnan(c.ci_low):
        return f"{c.ratio:.2f}", "[-]"
    digits = 3 if c.ci_high - c.ci_low < 0.02 else 2
    return f"{c.ratio:.{digits}f}", f"[{c.ci_low:.{digits}f},{c.ci_high:.{digits}f}]"


def comparison_table(
    pairings: Sequence[Pairing], *, title: str = "A/B comparisons (B vs baseline A)"
) -> Table:
    series = [s for pair in pairings for s in (pair.a, pair.b)]
    note = version_note(series) if any(p.version_mismatch for p in pairings) else ""
    table = compact_table(
        title=_titled(title, note),
        title_justify="left",
        caption=comparison_caption(pairings),
        caption_justify="left",
    )
    # Names whole: a board or model folded mid-name is misread; rather stacked than cut.
    names = [name for pair in pairings for name in (pair.board, pair.b.key.model.removesuffix(".onnx"))]
    table.add_column("board\nmodel", style="bold", no_wrap=True, min_width=max(map(len, names), default=5))
    table.add_column("A, B: variant\nORT, route", no_wrap=True)
    for column in ("runs\n(n)", "p50\nms", "run\nspread", "B/A\n95% CI", "p"):
        table.add_column(column, justify="right", no_wrap=True)
    # Not a name that may fold: a verdict wraps between its words, never inside one (console.fit).
    table.add_column("verdict")
    for pair in pairings:
        c = pair.comparison
        style = _VERDICT_STYLE.get(c.verdict, "")
        verdict = f"{c.verdict} ({c.change_percent:+.0f}%)"
        verdict = f"[{style}]{verdict}[/]" if style else verdict
        if pair.version_mismatch:
            verdict += "\n[bold red]ORT versions differ[/]"
        # One line per side: A's figures on A's row, B's below, the pair's own figures split over both.
        ratio, interval = _ratio(c)
        table.add_row(
            escape(pair.board),
            escape(_side_lines("A", pair.a, pair.dimension)),
            f"{len(pair.a.runs)} ({c.n_a})",
            fmt_ms(c.median_a),
            _spread(c.spread_a),
            ratio,
            "-" if math.isnan(c.p_value) else f"{c.p_value:.2g}",
            verdict,
        )
        table.add_row(
            f"[not bold]{escape(pair.b.key.model.removesuffix('.onnx'))}[/]",
            escape(_side_lines("B", pair.b, pair.dimension)),
            f"{len(pair.b.runs)} ({c.n_b})",
            fmt_ms(c.median_b),
            _spread(c.spread_b),
            interval,
            "",
            "",
            end_section=True,
        )
    return table


def comparison_caption(pairings: Sequence[Pairing]) -> str:
    if not pairings:
        return ""
    c = pairings[0].comparison
    return (
        f"B/A = median(B)/median(A) of every inference (below 1: B is faster); its 95% CI from a hierarchical"
        f" bootstrap (runs, then inferences within a run); p = two-sided U test of the per-run medians; runs ="
        f" agent processes, n = inferences. Called faster/slower only when p < {c.alpha:g}, the CI excludes 1"
        f" and the change exceeds {c.threshold:.0%} (at least {stats.runs_needed(c.alpha)} runs per side)."
        f" Run spread = range of per-run medians / their median."
    )


def comparison_warnings(pairings: Sequence[Pairing]) -> list[str]:
    """What a reader of the comparison table must not miss, one sentence each."""
    out = []
    for pair in pairings:
        c = pair.comparison
        what = (
            f"{pair.board} {pair.b.key.model.removesuffix('.onnx')}: "
            f"{side_label(pair.a, pair.dimension)} -> {side_label(pair.b, pair.dimension)}"
        )
        if pair.version_mismatch:
            out.append(
                f"{what}: A ran ORT {pair.a.ort_version or '?'}, B ran {pair.b.ort_version or '?'}: the change mixes"
                " upstream changes between the releases with the effect of the build"
            )
        if c.verdict == stats.TOO_FEW_RUNS:
            needed = stats.runs_needed(c.alpha)
            out.append(
                f"{what}: {c.runs_a} and {c.runs_b} runs; a verdict needs at least {needed} runs per side"
                f" (--rounds {needed})"
            )
        if c.runs_disagree:
            spread = max(c.spread_a, c.spread_b)
            out.append(
                f"{what}: its runs disagree by up to {spread:.0%} (range of per-run medians), more than the"
                f" {abs(c.change_percent):.0f}% effect: the processes differ more than the builds do; use more"
                " --rounds, --pin-clocks or a quieter board"
            )
    return out


def failures_table(failed: dict[str, str]) -> Table:
    table = Table(title="Failed boards", title_justify="left", title_style="bold red")
    table.add_column("board", style="bold", overflow="fold")
    table.add_column("error", overflow="fold")
    for board, error in failed.items():
        table.add_row(escape(board), escape(error))
    return table


def run_tables(series: Sequence[Series], pairings: Sequence[Pairing], failed: dict[str, str]) -> list[Table]:
    """The tables a run is shown with, after `orch bench` and in `orch results show`: what exists of them."""
    tables = []
    if series:
        tables.append(summary_table(series))
    if pairings:
        tables.append(comparison_table(pairings))
    if failed:
        tables.append(failures_table(failed))
    return tables


def board_state_table(record: RunRecord) -> Table:
    note = version_note(record.series())
    table = compact_table(title=_titled("Boards", note), title_justify="left")
    # Names and free text may fold; versions and figures are never wrapped (a table that cannot hold
    # them is printed stacked instead: orchestrator.console.print_whole).
    for column, fold in (
        ("board", True),
        ("status", False),
        ("ORT (variants)", False),
        ("kernel\nCPU", False),
        ("cores\ngovernor", False),
        ("°C before\n→after", False),
        ("clocks\npinned", True),
    ):
        table.add_column(column, overflow="fold", no_wrap=not fold)
    for name, doc in record.boards.items():
        facts = board_facts(doc)
        table.add_row(
            escape(name),
            doc["status"] or "?",
            escape(facts["ort"].replace("), ", ")\n")),
            escape(f"{facts['kernel']}\n{facts['cpu']}"),
            escape(f"{facts['cores']}\n{facts['governor']}"),
            escape(facts["temperature"]),
            escape(facts["pinned"]),
        )
    return table


def ort_versions(doc: BoardRecord) -> str:
    """Every ORT version that ran on a board, with the variants that ran it: ``1.21.0 (stock, tuned)``."""
    seen: dict[str, list[str]] = {}
    for measurement in doc["measurements"]:
        version = measurement["agent"].get("ort", {}).get("version") or "?"
        variant = measurement["key"]["variant"] or "?"
        if variant not in seen.setdefault(version, []):
            seen[version].append(variant)
    return ", ".join(f"{version} ({', '.join(variants)})" for version, variants in seen.items()) or "-"


def board_facts(doc: BoardRecord) -> dict[str, str]:
    """Readable board state from the first and last agent runs of a board record."""
    measurements = doc["measurements"]
    before: BoardState = measurements[0]["agent"].get("board", {}).get("before", {}) if measurements else {}
    after: BoardState = measurements[-1]["agent"].get("board", {}).get("after", {}) if measurements else {}
    governors = sorted(
        {governor for core in before.get("cpufreq", {}).values() if (governor := core.get("governor"))}
    )

    def temp(state: BoardState) -> str:
        values = [temp_c for zone in state.get("thermal", []) if (temp_c := zone.get("temp_c")) is not None]
        return f"{max(values):.1f}" if values else "n/a"

    clocks = doc["clocks"]
    pinned = "-" if not clocks else ("yes" if clocks.get("pinned") else "no")
    if clocks and clocks.get("restored") is False:
        pinned += " (NOT restored)"
    return {
        "ort": ort_versions(doc),
        "kernel": before.get("kernel", "-"),
        "cpu": before.get("cpu_model") or "-",
        "cores": str(before.get("online_cores", "-")),
        "governor": ",".join(governors) if governors else "n/a",
        "temperature": "n/a" if temp(before) == temp(after) == "n/a" else f"{temp(before)}→{temp(after)}",
        "pinned": pinned,
    }
