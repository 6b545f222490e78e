"""The HTML report's conformance section: each board's newest stored `orch verify` result."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

from orchestrator.bench.report.html import html_table
from orchestrator.bench.report.sections import latest_verify, verify_section


def stored(directory: Path, run_id: str, board: str, regressions: list[str], status: str = "ok") -> None:
    build = {
        "release": f"tuned-1.21.0-{run_id[-4:]}",
        "ort_version": "1.21.0",
        "cases": 10,
        "counts": {"pass": 8, "fail": 1, "unsupported": 1},
        "reference_counts": {"pass": 9, "fail": 0, "unsupported": 1},
        "regressions": [{"case": name} for name in regressions],
        "gaps": [],
    }
    document = {
        "schema": "orch-verify/1",
        "run_id": run_id,
        "onnx": "1.23.2",
        "boards": {board: {"status": status, "builds": [build]}},
    }
    (directory / f"verify-{run_id}.json").write_text(json.dumps(document))


def test_the_newest_verify_of_each_board_is_shown_with_its_regressions(tmp_path: Path) -> None:
    stored(tmp_path, "20261201-100000-aaaa", "lab1", ["test_old"])
    stored(tmp_path, "20261201-110000-bbbb", "lab1", ["test_abs"])
    stored(tmp_path, "20261201-120000-cccc", "lab1", [], status="failed")  # a failed board is no result
    stored(tmp_path, "20261201-100000-dddd", "lab9", [])  # not a board of the run
    (tmp_path / "verify-20261201-130000-eeee.json").write_text("{ damaged")
    found = latest_verify(["lab1", "lab2"], tmp_path)
    assert list(found) == ["lab1"] and found["lab1"]["run_id"] == "20261201-110000-bbbb"
    parts = "\n".join(verify_section(SimpleNamespace(boards={"lab1": {}, "lab2": {}}), html_table, tmp_path))
    assert "<h2>Conformance (orch verify)</h2>" in parts
    assert "<td>tuned-1.21.0-bbbb</td>" in parts and "test_old" not in parts
    assert "lab1 tuned-1.21.0-bbbb: test_abs fails, stock passes" in parts


def test_no_verify_result_means_no_section(tmp_path: Path) -> None:
    assert verify_section(SimpleNamespace(boards={"lab1": {}}), html_table, tmp_path) == []
