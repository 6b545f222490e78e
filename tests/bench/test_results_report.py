"""Results store, comparisons, CLI listing/export and the HTML report, on documents made by the real agent
run locally (x86 onnxruntime), so no board is needed."""

from __future__ import annotations

import csv
import html
import io
import json
import random
import re
import sqlite3
import struct
from pathlib import Path

import pytest
from bench_models import agent_doc, conv_model

from orchestrator.bench import results, stats
from orchestrator.bench.counting import store as count_store
from orchestrator.bench.counting.store import CountRunDocument
from orchestrator.bench.counting.verdict import CountSeries
from orchestrator.bench.counting.verdict import comparisons as count_comparisons
from orchestrator.bench.report import plots
from orchestrator.bench.report.html import write_html
from orchestrator.bench.results import ResultStore
from orchestrator.bench.series import Series, SeriesKey, pairings_between, pairings_within
from orchestrator.commands.bench_count import WHAT_A_COUNT_IS
from orchestrator.errors import UsageError


def board_doc(run_id: str, board: str, agents: list[tuple[str, int, dict]]) -> dict:
    measurements = [
        {
            "key": {
                "variant": "stock",
                "release": "stock-1.32.0-00000000",
                "model": "fold.onnx",
                "quant": "fp32",
                "ep": "cpu",
                "opt_level": opt,
                "intra_threads": 1,
                "inter_threads": 0,
            },
            "round": round_,
            "step": index,
            "agent": agent,
        }
        for index, (opt, round_, agent) in enumerate(agents)
    ]
    return {
        "schema": results.BOARD_SCHEMA,
        "run_id": run_id,
        "board": board,
        "status": "ok",
        "error": None,
        "measurements": measurements,
        "clocks": None,
    }


@pytest.fixture(scope="module")
def stored(tmp_path_factory) -> tuple[ResultStore, str]:
    """One run of two 'boards': opt-level disable vs all, 6 interleaved rounds each (each round its
    own agent process; 4 is the fewest a verdict can rest on, 6 keeps one run disturbed by a busy
    machine from deciding it), on a model where constant folding
    removes most of the work."""
    root = tmp_path_factory.mktemp("store")
    model = conv_model(root / "fold.onnx", folded_chain=24)
    store = ResultStore(root / "results")
    run_id = results.new_run_id()
    store.begin_run(run_id, command="orch bench --opt-level disable,all")
    for board in ("labA", "labB"):
        agents = [
            (opt, round_, agent_doc(model, opt)) for round_ in range(1, 7) for opt in ("disable", "all")
        ]
        store.write_board(run_id, board_doc(run_id, board, agents))
    store.write_board(
        run_id,
        {
            "schema": results.BOARD_SCHEMA,
            "run_id": run_id,
            "board": "labC",
            "status": "failed",
            "error": "labC: connection refused",
            "measurements": [],
        },
    )
    store.finish_run(
        run_id,
        {
            "run_id": run_id,
            "command": "orch bench --opt-level disable,all",
            "boards": {"labA": {"status": "ok"}, "labB": {"status": "ok"}, "labC": {"status": "failed"}},
        },
    )
    return store, run_id


def test_series_comparisons_and_index(stored):
    store, run_id = stored
    record = store.load("latest")
    assert record.run_id == run_id
    assert record.failed == {"labC": "labC: connection refused"}
    series = record.series()
    assert [(s.board, s.key.opt_level, len(s.latencies_ms), len(s.rounds)) for s in series] == [
        ("labA", "disable", 120, 6),
        ("labA", "all", 120, 6),
        ("labB", "disable", 120, 6),
        ("labB", "all", 120, 6),
    ]
    pairings = pairings_within(series)
    assert [(p.board, p.dimension, p.a.key.opt_level, p.b.key.opt_level) for p in pairings] == [
        ("labA", "opt_level", "disable", "all"),
        ("labB", "opt_level", "disable", "all"),
    ]
    for pair in pairings:
        c = pair.comparison
        assert c.ratio < 0.8, "constant folding should remove most of the work"
        assert c.ci_low <= c.ratio <= c.ci_high < 1
        assert c.verdict == stats.FASTER
    with sqlite3.connect(store.root / results.INDEX_FILE) as db:
        rows = db.execute(
            "SELECT board, opt_level, n FROM series WHERE run_id = ? ORDER BY board, opt_level", (run_id,)
        ).fetchall()
        status = db.execute("SELECT status, boards_ok, boards_failed FROM runs").fetchone()
    assert rows == [
        ("labA", "all", 120),
        ("labA", "disable", 120),
        ("labB", "all", 120),
        ("labB", "disable", 120),
    ]
    assert status == ("failed", 2, 1)


def test_results_are_never_overwritten_and_the_index_can_be_rebuilt(stored):
    store, run_id = stored
    before = (store.root / run_id / "labA.json").read_bytes()
    with pytest.raises(UsageError, match="never overwritten"):
        store.write_board(run_id, {"board": "labA", "measurements": []})
    assert (store.root / run_id / "labA.json").read_bytes() == before
    with pytest.raises(UsageError, match="no run 'nope'"):
        store.load("nope")
    store.reindex()
    [listed] = store.list_runs()
    assert (
        listed["run_id"] == run_id and listed["boards"] == ["labA", "labB", "labC"] and listed["series"] == 4
    )


def test_compare_two_runs_matches_boards_and_settings(stored):
    store, _ = stored
    series = store.load("latest").series()
    pairs = pairings_between(series, series)
    assert len(pairs) == 4
    assert all(
        p.comparison.ratio == pytest.approx(1.0) and p.comparison.verdict == stats.NO_CHANGE for p in pairs
    )


def _png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


def test_html_report_with_plots_of_the_expected_size(stored, tmp_path):
    store, run_id = stored
    record = store.load(run_id)
    written = write_html(record, pairings_within(record.series()), tmp_path / "out" / "report.html")
    page = written["html"].read_text()
    assert f"Benchmark run {run_id}" in page and "labC: connection refused" in page
    # The verdict cells, one per board ("faster" alone is in the style sheet and the caption of any page).
    assert page.count("<td class='faster'>faster</td>") == 2, page
    for name in ("latency_distribution.png", "p50_ci.png", "latency_over_runs.png"):
        png = tmp_path / "out" / "report_files" / name
        assert f"report_files/{name}" in page
        assert png.stat().st_size > 10_000, "a plot with data is not a tiny PNG"
        assert _png_size(png) == plots.PLOT_PIXELS == (1000, 500)
    samples = list(csv.DictReader(io.StringIO(written["samples_csv"].read_text())))
    assert len(samples) == 480 and {"board", "opt_level", "round", "latency_ms"} <= set(samples[0])


def _long_named_series() -> list[Series]:
    """Eight series with names as long as real runs give them (board, variant, model, int8), 5 runs each."""
    rng = random.Random(3)
    found = []
    for board in ("rpi4-shelf", "rpi5-desk"):
        for variant in ("stock", "tuned"):
            for quant in ("fp32", "int8-static"):
                key = SeriesKey(
                    variant=variant,
                    release=f"{variant}-1.32.0-3f9c2a1b",
                    model="mobilenetv2-12.onnx",
                    quant=quant,
                )
                rounds = tuple(
                    (r, tuple(rng.lognormvariate(1.5, 0.05) for _ in range(20))) for r in range(1, 6)
                )
                latencies = tuple(v for _, values in rounds for v in values)
                found.append(Series(board=board, key=key, latencies_ms=latencies, rounds=rounds))
    return found


def plot_count_medians(series: list[Series], path: Path) -> Path:
    """The count plot of as many releases with names as long (board, variant, model)."""
    counted = [
        CountSeries(
            board=s.board,
            model=s.key.model,
            release=s.key.release,
            variant=f"{s.key.variant}-{s.key.quant}",
            ort_version="1.32.0",
            per_inference=tuple(v * 1e8 for v in s.latencies_ms[:3]),
        ).as_json()
        for s in series
    ]
    return plots.plot_count_medians(counted, path)


@pytest.mark.parametrize(
    "plot",
    [plots.plot_distribution, plots.plot_p50_ci, plots.plot_over_runs, plot_count_medians],
    ids=lambda plot: plot.__name__,
)
def test_no_text_of_a_plot_is_cut_at_its_edges(plot, tmp_path, monkeypatch):
    """Tick labels, axis labels and titles stay inside the fixed-size PNG, with long series names too."""
    drawn = []
    save = plots._save

    def measured(fig, path, plt):
        fig.canvas.draw()
        drawn.append((fig.get_tightbbox(fig.canvas.get_renderer()), tuple(fig.get_size_inches())))
        return save(fig, path, plt)

    monkeypatch.setattr(plots, "_save", measured)
    png = plot(_long_named_series(), tmp_path / "plot.png")
    assert _png_size(png) == plots.PLOT_PIXELS
    [(box, (width, height))] = drawn
    dpi = plots.DPI
    assert box.x0 >= 0 and box.y0 >= 0 and box.x1 <= width and box.y1 <= height, (
        f"{plot.__name__}: text reaches {box.x0 * dpi:.0f}..{box.x1 * dpi:.0f} x "
        f"{box.y0 * dpi:.0f}..{box.y1 * dpi:.0f} px of a {width * dpi:.0f} x {height * dpi:.0f} px figure"
    )


def test_cli_list_show_compare_export_report(stored, orch_env, orch_cli, tmp_path):
    store, run_id = stored
    env = {**orch_env, "ORCH_RESULTS": str(store.root)}
    listing = orch_cli(env, "results", "list", "--json", check=True)
    assert [r["run_id"] for r in json.loads(listing.stdout)] == [run_id]
    shown = orch_cli(env, "results", "show", run_id[:15], check=True)
    assert "P50 / P99 latency" in shown.stderr and "labC: connection refused" in shown.stderr
    # The comparison row of each board names side A's build and setting and ends in its verdict
    # ("faster" alone is in every table's caption).
    for board in ("labA", "labB"):
        assert re.search(rf"{board} +A stock 1\.32\.0 .* faster \(-\d+%\)", shown.stderr), shown.stderr
    compared = orch_cli(env, "results", "compare", "latest", run_id, "--json", check=True)
    assert len(json.loads(compared.stdout)["comparisons"]) == 4
    exported = orch_cli(env, "results", "export", "--csv", check=True)
    rows = list(csv.DictReader(io.StringIO(exported.stdout)))
    assert len(rows) == 4 and float(rows[0]["p50_ms"]) > 0 and rows[0]["n"] == "120"
    html = tmp_path / "r.html"
    made = orch_cli(env, "report", run_id, "--html", str(html), check=True)
    assert str(html) in made.stderr.replace("\n", "") and html.exists()
    missing = orch_cli(env, "results", "show", "doesnotexist")
    assert (
        missing.returncode == 2
        and "no run 'doesnotexist'" in missing.stderr
        and "Traceback" not in missing.stderr
    )


def _unchanged_copy(
    store: ResultStore, run_id: str, board: str = "rpi5-bookworm-1", model: str = "demo_convolution"
) -> str:
    """A stored run whose 'all' side is the 'disable' side's agent documents again, on a board and a
    model with longer names: nothing changed, the longest verdict ("no significant change") to wrap
    in a narrow column."""
    record = store.load(run_id)
    new_id = results.new_run_id()
    store.begin_run(new_id, command="orch bench --opt-level disable,all")
    doc = json.loads(json.dumps(record.boards["labA"]))
    doc.update(run_id=new_id, board=board)
    disabled = {m["round"]: m["agent"] for m in doc["measurements"] if m["key"]["opt_level"] == "disable"}
    for measurement in doc["measurements"]:
        measurement["agent"] = disabled[measurement["round"]]
        measurement["key"]["model"] = f"{model}.onnx"
    store.write_board(new_id, doc)
    store.finish_run(new_id, {"run_id": new_id, "command": "orch bench", "boards": {board: {"status": "ok"}}})
    return new_id


@pytest.mark.parametrize("columns", range(70, 84))
def test_a_verdict_wraps_between_words_at_any_width(stored, orch_env, orch_cli, columns):
    """As in the demo's log: short names leave the verdict a narrow column, which must not split
    "significant" over two lines."""
    store, run_id = stored
    run = _unchanged_copy(store, run_id, board="rpi5-1", model="demo_conv")
    env = {**orch_env, "ORCH_RESULTS": str(store.root), "COLUMNS": str(columns)}
    text = orch_cli(env, "results", "show", run, check=True).stderr
    section = text[text.index("A/B comparisons") : text.index("B/A = median")]
    assert re.search(r"(?<![\w-])significant(?![\w-])", section), section
    assert "rpi5-1" in section and "demo_conv" in section, section


def _mismatched_copy(store: ResultStore, run_id: str) -> str:
    """A stored run whose labA 'all' series ran another ORT release (as `--variant stock,tuned
    --allow-version-mismatch` stores it): the same agent documents under another variant and version."""
    record = store.load(run_id)
    new_id = results.new_run_id()
    store.begin_run(new_id, command="orch bench --variant stock,tuned --allow-version-mismatch")
    doc = json.loads(json.dumps(record.boards["labA"]))
    doc["run_id"] = new_id
    doc["releases"] = [
        {"id": "stock-1.32.0-00000000", "variant": "stock", "ort_version": "1.32.0", "route": "official"},
        {"id": "tuned-1.21.0-11111111", "variant": "tuned", "ort_version": "1.21.0", "route": "system"},
    ]
    for measurement in doc["measurements"]:
        if measurement["key"]["opt_level"] == "all":
            measurement["key"].update(variant="tuned", release="tuned-1.21.0-11111111", opt_level="disable")
            measurement["agent"]["ort"]["version"] = "1.21.0"
    store.write_board(new_id, doc)
    store.finish_run(
        new_id, {"run_id": new_id, "command": "orch bench", "boards": {"labA": {"status": "ok"}}}
    )
    return new_id


@pytest.mark.parametrize("columns", ["80", None], ids=["COLUMNS=80", "pipe"])
def test_tables_cut_no_number_or_version_at_80_columns_or_in_a_pipe(
    stored, orch_env, orch_cli, tmp_path, columns
):
    store, run_id = stored
    mixed = _mismatched_copy(store, run_id)
    unchanged = _unchanged_copy(store, run_id)
    env = {**orch_env, "ORCH_RESULTS": str(store.root)}
    env.pop("COLUMNS")
    if columns:
        env["COLUMNS"] = columns
    for run in (unchanged, run_id, mixed):
        shown = orch_cli(env, "results", "show", run, check=True)  # stderr is a pipe here
        text = shown.stderr
        assert "\u2026" not in text, text  # rich's mark of a cut cell
        assert max(len(line) for line in text.splitlines()) <= 80, text
        # The figures the table must show, as `results show --json` gives them (computed here in-process).
        comparisons = [p.as_dict() for p in pairings_within(store.load(run).series())]
        assert comparisons
        if run == unchanged:
            assert {c["verdict"] for c in comparisons} == {stats.NO_CHANGE}, comparisons
            section = text[text.index("A/B comparisons") : text.index("B/A = median")]
            assert "rpi5-bookworm-1" in section and "demo_convolution" in section, section  # never folded
        for c in comparisons:
            digits = 3 if c["ci_high"] - c["ci_low"] < 0.02 else 2
            # Every figure whole: the ratio, both CI bounds, the p-value, the versions and runs.
            assert (
                f"{c['ratio']:.{digits}f}" in text
                and f"[{c['ci_low']:.{digits}f},{c['ci_high']:.{digits}f}]" in text
            )
            assert f"{c['p_value']:.2g}" in text and f"{c['runs_a']} ({c['n_a']})" in text
            # The verdict wraps between its words, never inside one ("significan" / "t change").
            for word in c["verdict"].split():
                assert re.search(rf"(?<![\w-]){re.escape(word)}(?![\w-])", text), (word, text)
            for side in ("a", "b"):
                build = f"{side.upper()} {c[side]['variant']} {c[side]['ort_version']}"
                assert build in text and f"  {c[side]['route'] or '?'}" in text
    # The cross-release run says so in each of its tables, and names both builds with their routes.
    # (the route on the side's second line)
    assert re.search(r"A stock 1\.32\.0 [^\n]*\n\s+official", text), text
    assert re.search(r"B tuned 1\.21\.0 [^\n]*\n\s+system", text), text
    assert text.count("ORT VERSION MISMATCH") == 3, text  # boards, latency, comparisons
    # The verdict's "ORT versions differ" wraps in its column; the boards table lists both releases.
    assert "differ" in text and "1.32.0 (stock)" in text and "1.21.0 (tuned)" in text
    assert "warning:" in text and "A ran ORT 1.32.0, B ran 1.21.0" in " ".join(text.split())
    page = tmp_path / "mixed.html"
    orch_cli(env, "report", mixed, "--html", str(page), check=True)
    html_text = page.read_text()
    assert html_text.count("ORT VERSION MISMATCH") == 3, html_text
    assert "<td>1.32.0 (stock), 1.21.0 (tuned)</td>" in html_text


DEMO_RELEASES = {v: f"{v}-1.21.0-{i:08x}" for i, v in enumerate(("stock", "upstream", "tuned"))}


def _variant_run(
    source: ResultStore, run_id: str, store: ResultStore, variants: tuple[str, str], new_id: str
) -> str:
    """A stored A/B of two builds (as `orch bench --variant A,B` stores it): labA's 'disable' agent
    documents as variant A's, its 'all' ones as B's, on one board."""
    command = f"orch bench --group rpi5 --variant {','.join(variants)} --quick"
    store.begin_run(new_id, command=command)
    doc = json.loads(json.dumps(source.load(run_id).boards["labA"]))
    doc.update(run_id=new_id, board="rpi5-1")
    doc["releases"] = [
        {"id": DEMO_RELEASES[v], "variant": v, "ort_version": "1.21.0", "route": "system"} for v in variants
    ]
    for measurement in doc["measurements"]:
        variant = variants[0] if measurement["key"]["opt_level"] == "disable" else variants[1]
        measurement["key"].update(variant=variant, release=DEMO_RELEASES[variant], opt_level="all")
    store.write_board(new_id, doc)
    store.finish_run(new_id, {"run_id": new_id, "command": command, "boards": {"rpi5-1": {"status": "ok"}}})
    return new_id


def _count_run(run_id: str, rounds: dict[str, tuple[float, ...]]) -> CountRunDocument:
    """An instruction-count A/B on one board, its series and verdicts computed as `orch bench
    --metric instructions` computes them."""
    series = [
        CountSeries(
            board="rpi5-1",
            model="demo_conv.onnx",
            release=DEMO_RELEASES[variant],
            variant=variant,
            ort_version="1.21.0",
            per_inference=values,
        )
        for variant, values in rounds.items()
    ]
    return {
        "schema": count_store.SCHEMA,
        "run_id": run_id,
        "created": "2026-12-06T09:00:00Z",
        "command": f"orch bench --group rpi5 --variant {','.join(rounds)} --metric instructions",
        "metric": "instructions",
        "note": WHAT_A_COUNT_IS,
        "counter": {"qemu": "qemu-aarch64 version 10.0.2", "plugin": "insn (inline)", "bundle": "b"},
        "boards": {
            "rpi5-1": {"status": "ok", "cpu": "cortex-a76", "extra_inferences": {"demo_conv.onnx": 40}}
        },
        "series": [one.as_json() for one in series],
        "comparisons": [c.as_json() for c in count_comparisons(series)],
    }


@pytest.fixture
def demo_store(stored, orch_env, tmp_path) -> tuple[dict[str, str], str, str, list[CountRunDocument]]:
    """What `orch demo` stores: stock -> upstream and upstream -> tuned timed, then both counted (one
    board of the second count failed); the environment that points orch at it, the two timed runs'
    ids and the count documents."""
    source, run_id = stored
    store = ResultStore(tmp_path / "results")
    # Ids a minute apart (two ids made in the same second sort by their random suffix).
    first = _variant_run(source, run_id, store, ("stock", "upstream"), "20261206-085900-ffff")
    second = _variant_run(source, run_id, store, ("upstream", "tuned"), "20261206-095900-0000")
    counted = [
        _count_run("20261206-090000-aaaa", {"stock": (1.012e8, 1.0125e8, 1.0118e8), "upstream": (9.8e7, 9.802e7, 9.799e7)}),
        _count_run("20261206-100000-bbbb", {"upstream": (9.8e7, 9.802e7, 9.799e7), "tuned": (9.801e7, 9.8e7, 9.803e7)}),
    ]  # fmt: skip
    counted[1]["boards"]["rpi5-2"] = {"status": "failed", "error": "rpi5-2 is not emulated (no QEMU_CPU)"}
    for document in counted:
        count_store.write_counts(document, store.root)
    return {**orch_env, "ORCH_RESULTS": str(store.root)}, first, second, counted


@pytest.mark.unit
def test_one_report_tells_two_timed_ab_runs_and_their_instruction_counts(demo_store, orch_cli, tmp_path):
    """The demo's page: stock -> upstream and upstream -> tuned by time, each its section and plots,
    then both A/Bs by instruction count with their verdicts, the rule and what a count is."""
    env, first, second, counted = demo_store
    page = tmp_path / "out" / "report.html"
    page.parent.mkdir()
    made = orch_cli(
        env, "report", "latest~1", "latest", "--counts", "latest~1", "latest", "--html", str(page), "--json",
        check=True,
    )  # fmt: skip
    text = html.unescape(page.read_text())
    # Each timed run under a heading naming it and its A/B, in the order given, then the counts.
    headings = [
        f"Benchmark run {first}: stock -> upstream",
        f"Benchmark run {second}: upstream -> tuned",
        "Instruction counts 20261206-090000-aaaa: stock -> upstream",
        "Instruction counts 20261206-100000-bbbb: upstream -> tuned",
    ]
    at = [text.find(f">{heading}</h2>") for heading in headings]
    assert -1 not in at and at == sorted(at), (at, text)
    assert text.count("<style>") == 1 and text.count("<!doctype html>") == 1
    # Each timed run's own comparison, under its own heading.
    assert text.count("<h3>Comparisons (B vs baseline A)</h3>") == 2
    assert re.search(r"<td>stock \S+ system</td><td>upstream \S+ system</td>", text[at[0] : at[1]])
    assert re.search(r"<td>upstream \S+ system</td><td>tuned \S+ system</td>", text[at[1] : at[2]])
    # The count tables: every series' median and rounds, every comparison's ratio and verdict.
    counts_part = text[at[2] :]
    for document in counted:
        for one in document["series"]:
            assert f"<td>{one['variant']}</td><td>{one['release']}</td>" in counts_part
            assert f"<td>{one['median']:,.0f}</td><td>3</td><td>{one['spread']:.3%}</td>" in counts_part
        for c in document["comparisons"]:
            assert f"<td>{c['ratio']:.4f}</td>" in counts_part
    verdicts = [c["verdict"] for document in counted for c in document["comparisons"]]
    assert verdicts == ["fewer instructions", "no significant change"]
    assert "<td class='fewer'>fewer instructions</td>" in text[at[2] : at[3]]
    assert "<td>no significant change</td>" in text[at[3] :]
    assert "<td>cortex-a76</td>" in counts_part and "qemu-aarch64 version 10.0.2" in counts_part
    assert "<td>failed</td><td>-</td><td>-</td><td>rpi5-2 is not emulated (no QEMU_CPU)</td>" in text[at[3] :]
    # What a count is, word for word, and the rule that called the verdicts, once per count run.
    assert text.count(f"Note: {WHAT_A_COUNT_IS}") == 2
    rule = "a change is called when |ratio - 1| > max(0.2%, 3 x the larger spread between rounds)"
    assert text.count(rule) == 2
    # Plots: each timed run's own files, none overwriting another's; a count plot per count run.
    files = page.parent / "report_files"
    for run in (first, second):
        for name in ("latency_distribution.png", "p50_ci.png", "latency_over_runs.png"):
            assert f"src='report_files/{run}/{name}'" in text
            assert _png_size(files / run / name) == plots.PLOT_PIXELS
        assert (files / run / "report.json").exists() and f"report_files/{run}/series.csv" in text
    assert (files / first / "p50_ci.png").read_bytes() != (files / second / "p50_ci.png").read_bytes()
    for document in counted:
        name = f"instructions-{document['run_id']}.png"
        assert f"src='report_files/{name}'" in text and _png_size(files / name) == plots.PLOT_PIXELS
    # --json: the page, each timed run's files, each count run's plot.
    shown = json.loads(made.stdout)
    assert shown["html"] == str(page)
    assert [r["run_id"] for r in shown["runs"]] == [first, second]
    assert shown["runs"][0]["p50_ci"] == str(files / first / "p50_ci.png")
    assert shown["counts"] == [
        {"run_id": d["run_id"], "plot": str(files / f"instructions-{d['run_id']}.png")} for d in counted
    ]


@pytest.mark.unit
def test_one_run_keeps_its_page_and_json_with_counts_added_and_a_run_is_named_once(
    demo_store, orch_cli, tmp_path
):
    env, _, second, _ = demo_store
    # One run keeps its page and its --json document (the files beside the page), counts added.
    single = tmp_path / "single.html"
    one = json.loads(orch_cli(env, "report", "--counts", "latest", "--html", str(single), "--json").stdout)
    assert one["run_id"] == second and one["html"] == str(single)
    assert one["p50_ci"] == str(tmp_path / "single_files" / "p50_ci.png")
    assert [c["run_id"] for c in one["counts"]] == ["20261206-100000-bbbb"]
    alone = html.unescape(single.read_text())
    assert f"<h1>Benchmark run {second}: upstream -> tuned</h1>" in alone and "Instruction counts" in alone
    # The same run twice is a slip, refused.
    twice = orch_cli(env, "report", "latest", second, "--html", str(tmp_path / "twice.html"))
    assert twice.returncode == 2 and f"'latest' and '{second}' are the same run" in twice.stderr
