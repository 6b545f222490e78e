"""The HTML report: per timed run its tables, the three PNG plots and the CSV/JSON files beside it;
per instruction-count run its counts and verdicts (counts.py); the page's head and style once."""

from __future__ import annotations

import html
import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.bench import stats
from orchestrator.bench.counting.store import CountRunDocument
from orchestrator.bench.report import counts as count_report
from orchestrator.bench.report.export import export_rows, to_csv
from orchestrator.bench.report.native_tables import cold_start_rows
from orchestrator.bench.report.plots import (
    PLOT_PIXELS,
    plot_count_medians,
    plot_distribution,
    plot_over_runs,
    plot_p50_ci,
)
from orchestrator.bench.report.sections import (
    boards_verify_section,
    cold_start_section,
    quantisation_section,
    tuning_section,
    verify_section,
)
from orchestrator.bench.report.tables import (
    board_facts,
    compared_label,
    comparison_caption,
    comparison_warnings,
    fmt_ms,
    side_label,
    version_note,
)
from orchestrator.bench.results import RunRecord
from orchestrator.bench.series import Pairing, Series


def html_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }
th { background: #f0f0f0; } td:first-child, th:first-child { text-align: left; }
.faster, .fewer { color: #080; font-weight: bold; } .slower, .more { color: #b00; font-weight: bold; }
.failed, .mismatch { color: #b00; } .mismatch { font-weight: bold; } img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0; }
"""

BOARD_HEADERS = (
    "board",
    "status",
    "ORT versions that ran (variants)",
    "kernel",
    "CPU",
    "cores",
    "governor",
    "temp °C before→after",
    "clocks pinned",
)
LATENCY_HEADERS = (
    "board",
    "variant",
    "ORT",
    "route",
    "model",
    "quant",
    "setting",
    "runs",
    "n",
    "run spread",
    "p50 ms",
    "p90 ms",
    "p99 ms",
    "mean ms",
    "std ms",
    "IQR ms",
)
COMPARISON_HEADERS = (
    "board",
    "model",
    "compared",
    "A (variant ORT route)",
    "B (variant ORT route)",
    "runs A/B",
    "n A/B",
    "run spread A / B",
    "p50 A ms",
    "p50 B ms",
    "B/A",
    "95% CI (hierarchical)",
    "change",
    "p (U test of run medians)",
    "verdict",
)
PLOTS = (
    ("distribution", "Latency distribution"),
    ("p50_ci", "P50 with 95% CI"),
    ("over_runs", "Latency over the run"),
)


@dataclass(frozen=True, kw_only=True)
class TimedRun:
    """A timed run in the report, with the comparisons shown for it."""

    record: RunRecord
    pairings: Sequence[Pairing]


@dataclass(frozen=True, kw_only=True)
class WrittenReport:
    """What a report wrote: the page, and per run (by id, in the order given) its files."""

    html: Path
    runs: dict[str, dict[str, Path]]  # timed run -> its plots and CSV/JSON files
    counts: dict[str, dict[str, Path]]  # instruction-count run -> its plot ({} without series)


def write_html(
    record: RunRecord, pairings: Sequence[Pairing], path: Path, counts: Sequence[CountRunDocument] = ()
) -> dict[str, Path]:
    """The HTML report of one run plus its PNG plots (in ``<name>_files/``) and CSV/JSON exports next
    to it; ``counts``' sections after the run's."""
    written = write_report([TimedRun(record=record, pairings=pairings)], path, counts=counts)
    return {**written.runs[record.run_id], "html": written.html}


def write_report(
    runs: Sequence[TimedRun], path: Path, *, counts: Sequence[CountRunDocument] = ()
) -> WrittenReport:
    """One page: each timed run's section in the order given, then each instruction-count run's.

    One timed run is that run's page, its files in ``<name>_files/``. Several get a heading each
    (the run and what it compares, e.g. "stock -> upstream") with their files in
    ``<name>_files/<run id>/``, so no run's plot overwrites another's; the conformance section, the
    same for every run of the same boards, comes once at the end. A count run's plot is
    ``<name>_files/instructions-<id>.png``.
    """
    if not runs:
        raise ValueError("a report needs at least one timed run")
    path = Path(path)
    assets = path.parent / f"{path.stem}_files"
    assets.mkdir(parents=True, exist_ok=True)
    several = len(runs) > 1
    written_runs: dict[str, dict[str, Path]] = {}
    body: list[str] = []
    for run in runs:
        folder = assets / run.record.run_id if several else assets
        written_runs[run.record.run_id], parts = _run_parts(run, folder, path.parent, own_heading=several)
        body += parts
    written_counts: dict[str, dict[str, Path]] = {}
    for document in counts:
        written_counts[document["run_id"]] = _count_plot(document, assets)
        plot = written_counts[document["run_id"]].get("plot")
        body += count_report.count_section(
            document, html_table, _address(plot, path.parent) if plot else None
        )
    if several:
        boards = sorted({board for run in runs for board in run.record.boards})
        body += boards_verify_section(boards, html_table)
        head = _page_head(runs, counts)
    else:
        record = runs[0].record
        head = [
            _page_start(f"orch bench {record.run_id}"),
            f"<h1>{html.escape(_run_title(record))}</h1>",
        ]
    path.write_text("\n".join([*head, *body]) + "</body></html>")
    return WrittenReport(html=path, runs=written_runs, counts=written_counts)


def _run_title(record: RunRecord) -> str:
    compared = compared_label(record.series())
    return f"Benchmark run {record.run_id}" + (f": {compared}" if compared else "")


def _run_parts(
    run: TimedRun, folder: Path, base: Path, *, own_heading: bool
) -> tuple[dict[str, Path], list[str]]:
    """A timed run's files (in ``folder``) and its part of the page. With ``own_heading`` the part opens
    with an <h2> naming the run, and its sections sit one heading level below it."""
    record, pairings = run.record, run.pairings
    folder.mkdir(parents=True, exist_ok=True)
    series = record.series()
    written = _plots(series, folder)
    written.update(_exports(record, pairings, folder))
    note = version_note(series)
    parts = [
        *_run_intro(record, note),
        *_boards_section(record),
        *tuning_section(record, html_table),
        *_latency_section(series, note),
        *_comparison_section(pairings, note),
        *quantisation_section(record, series, html_table),
        *cold_start_section(record, html_table),
        *([] if own_heading else verify_section(record, html_table)),
        *_plot_sections(written, base),
        _data_links(folder, base),
    ]
    if own_heading:
        anchor = html.escape(f"run-{record.run_id}")
        parts = [f"<h2 id='{anchor}'>{html.escape(_run_title(record))}</h2>", *_demoted(parts)]
    return written, parts


_HEADING = re.compile(r"<(/?)h([1-5])(?=[\s>])")


def _demoted(parts: Sequence[str]) -> list[str]:
    """The parts with every heading one level lower (<h2> -> <h3>): sections of a run under its <h2>."""
    return [_HEADING.sub(lambda m: f"<{m.group(1)}h{int(m.group(2)) + 1}", part) for part in parts]


def _address(file: Path, base: Path) -> str:
    """A file's address from the page in ``base``."""
    return file.relative_to(base).as_posix()


def _count_plot(document: CountRunDocument, assets: Path) -> dict[str, Path]:
    if not document["series"]:
        return {}
    return {"plot": plot_count_medians(document["series"], assets / f"instructions-{document['run_id']}.png")}


def _plots(series: Sequence[Series], assets: Path) -> dict[str, Path]:
    if not series:
        return {}
    return {
        "distribution": plot_distribution(series, assets / "latency_distribution.png"),
        "p50_ci": plot_p50_ci(series, assets / "p50_ci.png"),
        "over_runs": plot_over_runs(series, assets / "latency_over_runs.png"),
    }


def _exports(record: RunRecord, pairings: Sequence[Pairing], assets: Path) -> dict[str, Path]:
    """series.csv, samples.csv (every latency) and report.json beside the report."""
    rows = export_rows([record])
    written = {
        "csv": assets / "series.csv",
        "samples_csv": assets / "samples.csv",
        "json": assets / "report.json",
    }
    written["csv"].write_text(to_csv(rows))
    written["samples_csv"].write_text(to_csv(export_rows([record], samples=True)))
    written["json"].write_text(
        json.dumps(
            {
                "run_id": record.run_id,
                "series": rows,
                "comparisons": [p.as_dict() for p in pairings],
                "failed": record.failed,
                "cold_starts": cold_start_rows(record.boards),
            },
            indent=1,
            default=str,
        )
    )
    return written


def _mismatch(note: str) -> str:
    return f"<p class='mismatch'>{html.escape(note)}</p>"


def _page_start(title: str) -> str:
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}"
        f"</title><style>{_CSS}</style></head><body>"
    )


def _page_head(runs: Sequence[TimedRun], counts: Sequence[CountRunDocument]) -> list[str]:
    """The head of a page of several runs: its title, and what it holds, in order, linked."""
    ids = [run.record.run_id for run in runs]
    listed = [(f"run-{run.record.run_id}", _run_title(run.record)) for run in runs]
    listed += [(count_report.anchor(doc), count_report.title(doc)) for doc in counts]
    what = f"{len(runs)} timed runs" + (f", {len(counts)} instruction-count runs" if counts else "")
    return [
        _page_start(f"orch report {', '.join(ids)}"),
        f"<h1>Benchmark report: {what}</h1>",
        "<ul>"
        + "".join(f"<li><a href='#{html.escape(a)}'>{html.escape(t)}</a></li>" for a, t in listed)
        + "</ul>",
    ]


def _run_intro(record: RunRecord, note: str) -> list[str]:
    """The run's command and where it is stored, and what went wrong."""
    parts = [
        (
            f"<p>Command: <code>{html.escape(str(record.meta.get('command', '')))}</code><br>"
            f"Stored in <code>{html.escape(str(record.path))}</code></p>"
        ),
    ]
    if note:
        parts.append(_mismatch(note))
    if record.failed:
        parts.append(
            "<h2 class='failed'>Failed boards</h2><ul>"
            + "".join(
                f"<li class='failed'><b>{html.escape(b)}</b>: {html.escape(e)}</li>"
                for b, e in record.failed.items()
            )
            + "</ul>"
        )
    return parts


def _boards_section(record: RunRecord) -> list[str]:
    facts = [(name, doc.get("status"), *board_facts(doc).values()) for name, doc in record.boards.items()]
    return ["<h2>Boards</h2>", html_table(BOARD_HEADERS, facts)]


def _latency_section(series: Sequence[Series], note: str) -> list[str]:
    rows = [
        (
            s.board,
            s.key.variant,
            s.ort_version or "?",
            s.route or "?",
            s.key.model,
            s.key.quant,
            f"{s.key.ep} opt={s.key.opt_level} threads={s.key.intra_threads or 'default'}",
            len(s.runs),
            summary.n,
            f"{stats.run_spread(s.runs):.1%}" if len(s.runs) > 1 else "-",
            fmt_ms(summary.p50),
            fmt_ms(summary.p90),
            fmt_ms(summary.p99),
            fmt_ms(summary.mean),
            fmt_ms(summary.std),
            fmt_ms(summary.iqr),
        )
        for s in series
        for summary in [s.summary()]
    ]
    parts = ["<h2>P50 / P99 latency per board and build</h2>"]
    if note:
        parts.append(_mismatch(note))
    parts.append(html_table(LATENCY_HEADERS, rows))
    return parts


def _comparison_row(pair: Pairing) -> tuple[str, ...]:
    c = pair.comparison
    ci = "-" if math.isnan(c.ci_low) else f"[{c.ci_low:.3f}, {c.ci_high:.3f}]"
    return (
        pair.board,
        pair.b.key.model,
        pair.dimension,
        side_label(pair.a, pair.dimension),
        side_label(pair.b, pair.dimension),
        f"{c.runs_a}/{c.runs_b}",
        f"{c.n_a}/{c.n_b}",
        f"{c.spread_a:.1%} / {c.spread_b:.1%}",
        fmt_ms(c.median_a),
        fmt_ms(c.median_b),
        f"{c.ratio:.3f}",
        ci,
        f"{c.change_percent:+.1f}%",
        "-" if math.isnan(c.p_value) else f"{c.p_value:.2g}",
        c.verdict + (" (ORT versions differ)" if pair.version_mismatch else ""),
    )


def _comparison_section(pairings: Sequence[Pairing], note: str) -> list[str]:
    """Every comparison with its verdict coloured, how to read them, and what weakens them."""
    if not pairings:
        return []
    parts = ["<h2>Comparisons (B vs baseline A)</h2>"]
    if any(pair.version_mismatch for pair in pairings):
        parts.append(_mismatch(note))
    table = html_table(COMPARISON_HEADERS, [_comparison_row(pair) for pair in pairings])
    for verdict, css in ((stats.FASTER, "faster"), (stats.SLOWER, "slower")):
        table = table.replace(f"<td>{verdict}</td>", f"<td class='{css}'>{verdict}</td>")
    parts.append(table)
    parts.append(f"<p>{html.escape(comparison_caption(pairings))}</p>")
    warnings = comparison_warnings(pairings)
    if warnings:
        parts.append(
            "<ul>" + "".join(f"<li class='mismatch'>{html.escape(w)}</li>" for w in warnings) + "</ul>"
        )
    return parts


def _plot_sections(written: dict[str, Path], base: Path) -> list[str]:
    return [
        f"<h2>{title}</h2><img src='{html.escape(_address(written[key], base))}' alt='{title}' "
        f"width='{PLOT_PIXELS[0]}' height='{PLOT_PIXELS[1]}'>"
        for key, title in PLOTS
        if key in written
    ]


def _data_links(folder: Path, base: Path) -> str:
    where = html.escape(_address(folder, base))
    return (
        f"<p>Data: <a href='{where}/series.csv'>series.csv</a>, "
        f"<a href='{where}/samples.csv'>samples.csv</a> (every latency), "
        f"<a href='{where}/report.json'>report.json</a>.</p>"
    )
