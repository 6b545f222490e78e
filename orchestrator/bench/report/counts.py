"""The report's section of an instruction-count run (`orch bench --metric instructions`): the
instructions per inference of every release, the A/B verdicts by count with the rule that called
them, and what a count is and is not (the run's own note, word for word). Pure: a stored document in
(``bench/counting/store.py``'s CountRunDocument), HTML out; the plot is drawn and placed by html.py."""

from __future__ import annotations

import html
from collections.abc import Callable, Sequence
from typing import Any

from orchestrator.bench.counting.store import CountRunDocument, counter_text
from orchestrator.bench.counting.verdict import RULE, ComparisonDocument
from orchestrator.bench.report.plots import PLOT_PIXELS
from orchestrator.bench.report.tables import a_to_b

Table = Callable[[Sequence[str], Sequence[Sequence[Any]]], str]

SERIES_HEADERS = (
    "board",
    "model",
    "variant",
    "release",
    "ORT",
    "median",  # of what: measured_per(document), said in the section's heading
    "rounds",
    "spread between rounds",
)
COMPARISON_HEADERS = (
    "board",
    "model",
    "baseline A",
    "candidate B",
    "B/A",
    "change",
    "noise (larger spread)",
    "threshold",
    "rounds A/B",
    "verdict",
)
BOARD_HEADERS = ("board", "status", "emulated CPU", "k (extra inferences per round)", "error")
# The verdicts' colours: fewer instructions is the good news, as "faster" is for a time.
VERDICT_CLASSES = {
    "fewer instructions": "fewer",
    "more instructions": "more",
    "fewer cycles": "fewer",
    "more cycles": "more",
}


def compared_label(document: CountRunDocument) -> str:
    """What the count run compares, baseline first: "stock -> upstream"."""
    return a_to_b([one["variant"] for one in document["series"]])


def title(document: CountRunDocument) -> str:
    compared = compared_label(document)
    return f"Instruction counts {document['run_id']}" + (f": {compared}" if compared else "")


def measured_per(document: CountRunDocument) -> str:
    """What one value counts: "instructions per inference", "instructions per repetition of the
    filtered tests (--gtest_repeat)" (an MLAS count), "cycles per inference"."""
    unit = document.get("workload", {}).get("unit", "one inference")
    return f"{document['metric']} per {unit.removeprefix('one ')}"


def anchor(document: CountRunDocument) -> str:
    return f"counts-{document['run_id']}"


def count_section(document: CountRunDocument, table: Table, plot: str | None = None) -> list[str]:
    """The run's heading, command and counter, its boards, series and comparisons, the rule, the note,
    and its plot (``plot``: the image's address relative to the page, when one was drawn)."""
    counter = document["counter"]
    parts = [
        f"<h2 id='{html.escape(anchor(document))}'>{html.escape(title(document))}</h2>",
        (
            f"<p>Command: <code>{html.escape(document['command'])}</code><br>"
            f"Counted {html.escape(document['created'])} by {html.escape(counter_text(counter))}</p>"
        ),
        f"<p>Note: {html.escape(document['note'])}</p>",
        "<h3>Boards</h3>",
        _boards_table(document, table),
        f"<h3>{html.escape(measured_per(document).capitalize())}, per board and release</h3>",
        table(SERIES_HEADERS, _series_rows(document)),
    ]
    if document["comparisons"]:
        verdicts = table(COMPARISON_HEADERS, _comparison_rows(document))
        for verdict, css in VERDICT_CLASSES.items():
            verdicts = verdicts.replace(f"<td>{verdict}</td>", f"<td class='{css}'>{verdict}</td>")
        parts += [f"<h3>A/B by {html.escape(document['metric'])} (B vs baseline A)</h3>", verdicts]
    parts.append(f"<p>The rule: {html.escape(RULE)}.</p>")
    if plot:
        alt = html.escape(f"Median {measured_per(document)}")
        parts.append(
            f"<h3>{alt}</h3><img src='{html.escape(plot)}' alt='{alt}' "
            f"width='{PLOT_PIXELS[0]}' height='{PLOT_PIXELS[1]}'>"
        )
    return parts


def _boards_table(document: CountRunDocument, table: Table) -> str:
    """Each board's status, emulated CPU and k; the error column only when a board failed."""
    rows = [
        (
            name,
            board.get("status", "?"),
            board.get("cpu", "-"),
            ", ".join(f"{model}: {k}" for model, k in board.get("extra_inferences", {}).items()) or "-",
            board.get("error", "") or "",
        )
        for name, board in document["boards"].items()
    ]
    if any(row[-1] for row in rows):
        return table(BOARD_HEADERS, rows)
    return table(BOARD_HEADERS[:-1], [row[:-1] for row in rows])


def _series_rows(document: CountRunDocument) -> list[tuple[str, ...]]:
    return [
        (
            one["board"],
            one["model"],
            one["variant"],
            one["release"],
            one["ort_version"] or "?",
            f"{one['median']:,.0f}",
            str(one["rounds"]),
            f"{one['spread']:.3%}",
        )
        for one in document["series"]
    ]


def _variant(document: CountRunDocument, comparison: ComparisonDocument, release: str) -> str:
    """A side of a comparison by its variant (the stored comparison names releases)."""
    wanted = (comparison["board"], comparison["model"], release)
    for one in document["series"]:
        if (one["board"], one["model"], one["release"]) == wanted:
            return f"{one['variant']} ({release})"
    return release


def _comparison_rows(document: CountRunDocument) -> list[tuple[str, ...]]:
    return [
        (
            c["board"],
            c["model"],
            _variant(document, c, c["baseline"]),
            _variant(document, c, c["candidate"]),
            f"{c['ratio']:.4f}",
            f"{c['change']:+.3%}",
            f"{c['noise']:.3%}",
            f"{c['threshold']:.3%}",
            "/".join(str(n) for n in c["rounds"]),
            c["verdict"],
        )
        for c in document["comparisons"]
    ]
