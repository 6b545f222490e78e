"""The HTML report of one run: tables, the three PNG plots, and the CSV/JSON files beside it."""

from __future__ import annotations

import html
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from orchestrator.bench import stats
from orchestrator.bench.report.export import export_rows, to_csv
from orchestrator.bench.report.native_tables import cold_start_rows
from orchestrator.bench.report.plots import PLOT_PIXELS, plot_distribution, plot_over_runs, plot_p50_ci
from orchestrator.bench.report.sections import (
    cold_start_section,
    quantisation_section,
    tuning_section,
    verify_section,
)
from orchestrator.bench.report.tables import (
    board_facts,
    comparison_caption,
    comparison_warnings,
    fmt_ms,
    side_label,
    version_note,
)
from orchestrator.bench.results import RunRecord
from orchestrator.bench.series import Pairing


def _html_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    head = "".join(f"<th>{html.escape(str(h))}</th>" for h in headers)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


_CSS = """
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 0.3em 0.6em; text-align: right; }
th { background: #f0f0f0; } td:first-child, th:first-child { text-align: left; }
.faster { color: #080; font-weight: bold; } .slower { color: #b00; font-weight: bold; }
.failed, .mismatch { color: #b00; } .mismatch { font-weight: bold; } img { max-width: 100%; border: 1px solid #ddd; margin: 0.5em 0; }
"""


def write_html(record: RunRecord, pairings: Sequence[Pairing], path: Path) -> dict[str, Path]:
    """The HTML report plus its PNG plots (in ``<name>_files/``) and CSV/JSON exports next to it."""
    path = Path(path)
    assets = path.parent / f"{path.stem}_files"
    assets.mkdir(parents=True, exist_ok=True)
    series = record.series()
    written: dict[str, Path] = {}
    if series:
        written["distribution"] = plot_distribution(series, assets / "latency_distribution.png")
        written["p50_ci"] = plot_p50_ci(series, assets / "p50_ci.png")
        written["over_runs"] = plot_over_runs(series, assets / "latency_over_runs.png")
    rows = export_rows([record])
    written["csv"] = assets / "series.csv"
    written["csv"].write_text(to_csv(rows))
    written["samples_csv"] = assets / "samples.csv"
    written["samples_csv"].write_text(to_csv(export_rows([record], samples=True)))
    written["json"] = assets / "report.json"
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

    parts = [
        (
            f"<!doctype html><html><head><meta charset='utf-8'><title>orch bench {html.escape(record.run_id)}"
            f"</title><style>{_CSS}</style></head><body>"
        ),
        f"<h1>Benchmark run {html.escape(record.run_id)}</h1>",
        (
            f"<p>Command: <code>{html.escape(str(record.meta.get('command', '')))}</code><br>"
            f"Stored in <code>{html.escape(str(record.path))}</code></p>"
        ),
    ]
    note = version_note(series)
    if note:
        parts.append(f"<p class='mismatch'>{html.escape(note)}</p>")
    if record.failed:
        parts.append(
            "<h2 class='failed'>Failed boards</h2><ul>"
            + "".join(
                f"<li class='failed'><b>{html.escape(b)}</b>: {html.escape(e)}</li>"
                for b, e in record.failed.items()
            )
            + "</ul>"
        )
    parts.append("<h2>Boards</h2>")
    facts = [(name, doc.get("status"), *board_facts(doc).values()) for name, doc in record.boards.items()]
    parts.append(
        _html_table(
            [
                "board",
                "status",
                "ORT versions that ran (variants)",
                "kernel",
                "CPU",
                "cores",
                "governor",
                "temp °C before→after",
                "clocks pinned",
            ],
            facts,
        )
    )
    parts += tuning_section(record, _html_table)
    parts.append("<h2>P50 / P99 latency per board and build</h2>")
    if note:
        parts.append(f"<p class='mismatch'>{html.escape(note)}</p>")
    parts.append(
        _html_table(
            [
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
            ],
            [
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
            ],
        )
    )
    if pairings:
        parts.append("<h2>Comparisons (B vs baseline A)</h2>")
        if any(pair.version_mismatch for pair in pairings):
            parts.append(f"<p class='mismatch'>{html.escape(note)}</p>")
        comparison_rows = []
        for pair in pairings:
            c = pair.comparison
            ci = "-" if math.isnan(c.ci_low) else f"[{c.ci_low:.3f}, {c.ci_high:.3f}]"
            comparison_rows.append(
                (
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
            )
        table = _html_table(
            [
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
            ],
            comparison_rows,
        )
        for verdict, css in ((stats.FASTER, "faster"), (stats.SLOWER, "slower")):
            table = table.replace(f"<td>{verdict}</td>", f"<td class='{css}'>{verdict}</td>")
        parts.append(table)
        parts.append(f"<p>{html.escape(comparison_caption(pairings))}</p>")
        warnings = comparison_warnings(pairings)
        if warnings:
            parts.append(
                "<ul>" + "".join(f"<li class='mismatch'>{html.escape(w)}</li>" for w in warnings) + "</ul>"
            )
    parts += quantisation_section(record, series, _html_table)
    parts += cold_start_section(record, _html_table) + verify_section(record, _html_table)
    for key, title in (
        ("distribution", "Latency distribution"),
        ("p50_ci", "P50 with 95% CI"),
        ("over_runs", "Latency over the run"),
    ):
        if key in written:
            parts.append(
                f"<h2>{title}</h2><img src='{html.escape(assets.name)}/{written[key].name}' alt='{title}' "
                f"width='{PLOT_PIXELS[0]}' height='{PLOT_PIXELS[1]}'>"
            )
    folder = html.escape(assets.name)
    parts.append(
        f"<p>Data: <a href='{folder}/series.csv'>series.csv</a>, "
        f"<a href='{folder}/samples.csv'>samples.csv</a> (every latency), "
        f"<a href='{folder}/report.json'>report.json</a>.</p></body></html>"
    )
    path.write_text("\n".join(parts))
    written["html"] = path
    return written
