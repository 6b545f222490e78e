"""`orch verify` on a real lab board: stock and tuned releases deployed with `orch deploy`, ONNX's
node cases and a deployed model run on the emulated Cortex-A72, judged against the x86-64 stock
wheel of each release on the workstation."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from stock_baseline import StockBuild

from orchestrator.adapters import ssh
from orchestrator.deploy.releases import list_releases
from orchestrator.lab.sample_models import tiny_convnet, write_model

BOARD = "lab2"
# At least 500 node cases per build, as a subset spread over the operators (all ~1,500 take 2-5
# minutes per build under emulation; the subset keeps CI short).
SUBSET = 520

# A release that computes wrong: a copy of the stock release whose InferenceSession.run adds 1 %
# to every float output (as a miscompiled kernel would), so verify must name the cases stock passes
# and it fails. $1 = workdir, $2 = source release id, $3 = new release id.
BREAK_RELEASE = r"""
w="$1"; src="$w/releases/$2"; dst="$w/releases/$3"
rm -rf -- "$dst"
cp -a -- "$src" "$dst"
python3 - "$dst/release.json" "$3" <<'PY'
import json, sys
path, new_id = sys.argv[1], sys.argv[2]
doc = json.load(open(path))
doc.update(id=new_id, variant="broken")
json.dump(doc, open(path, "w"))
PY
set -- "$dst"/venv/lib/python3*/site-packages
echo "import orch_miscompiled" > "$1/orch_miscompiled.pth"
cat > "$1/orch_miscompiled.py" <<'PY'
import numpy as _np
import onnxruntime as _ort

_run = _ort.InferenceSession.run


def _wrong(self, *args, **kwargs):
    return [o * 1.01 + 0.01 if isinstance(o, _np.ndarray) and o.dtype.kind == "f" else o for o in _run(self, *args, **kwargs)]


_ort.InferenceSession.run = _wrong
PY
"""


def deploy(lab, artifact: Path, model: Path) -> None:
    done = lab.orch(
        "deploy", "--host", BOARD, "--artifact", str(artifact), "--model", str(model), timeout=1800
    )
    assert done.returncode == 0, f"orch deploy failed:\n{done.stdout}\n{done.stderr}"


@pytest.mark.timeout(3600)  # two deploys and two builds' cases under emulation, on a busy machine
# Needs the whole tuned wheel (tuned_artifact builds it when no earlier test did): `pytest -m full`.
@pytest.mark.full
def test_stock_and_tuned_pass_what_stock_passes_on_the_board(
    lab, stock_build: StockBuild, tuned_artifact: Path, tmp_path: Path
) -> None:
    model = write_model(tiny_convnet(), tmp_path / "tiny.onnx")
    deploy(lab, stock_build.artifact.directory, model)
    deploy(lab, tuned_artifact, model)
    done = lab.orch(
        "verify", "--host", BOARD, "--variant", "stock,tuned", "--subset", str(SUBSET), "--json", timeout=3600
    )
    assert done.returncode == 0, (
        f"orch verify exited {done.returncode}\n{done.stdout[-3000:]}\n{done.stderr[-5000:]}"
    )
    document = json.loads(done.stdout)
    board = document["boards"][BOARD]
    assert board["status"] == "ok"
    builds = {build["variant"]: build for build in board["builds"]}
    assert set(builds) == {"stock", "tuned"}
    for variant, build in builds.items():
        counted = build["counts"]
        node = [name for name in build["results"] if not name.startswith("model:")]
        assert len(node) == SUBSET >= 500, variant
        assert sum(counted.values()) == build["cases"] == SUBSET + 1
        # Stock 1.32 passes ~94 % of the cases; 1.21 knows no opset after 22, so ~60 %.
        assert counted["pass"] >= (450 if variant == "stock" else 250), (variant, counted)
        # Same release on x86-64: the reference says which release it is and where it came from.
        reference = build["onnxruntime"]["reference"]
        assert reference["version"] == build["ort_version"] == build["onnxruntime"]["version"]
        assert build["regressions"] == [], (variant, build["regressions"][:3])
        # The deployed model gives the x86 stock outputs of its release.
        assert build["results"]["model:tiny.onnx"]["status"] == "pass"
        print(
            f"{variant} {build['ort_version']}: {counted} in {build['wall_s']} s "
            f"({build['processes']} process(es)); x86 stock {build['reference_counts']}"
        )
    # The official aarch64 wheel does on the board exactly what the x86 wheel of its release does.
    assert builds["stock"]["gaps"] == [] and builds["stock"]["counts"] == builds["stock"]["reference_counts"]
    # The tuned build leaves the ML operators out (--disable_ml_ops): those are its only gaps.
    assert all(gap["case"].startswith("test_ai_onnx_ml_") for gap in builds["tuned"]["gaps"])
    # Every case whose status differs between the two builds is named, in the JSON and on screen.
    differing = board["pass_set_differences"]
    for case, statuses in differing.items():
        assert set(statuses) == {builds["stock"]["release"], builds["tuned"]["release"]}
        assert len(set(statuses.values())) == 2, case
    if differing:
        assert f"{len(differing)} case(s) differ between the builds" in done.stderr
        assert next(iter(differing)) in done.stderr
    else:
        assert "every build has the same pass set" in done.stderr
    assert "conformance per build" in done.stderr

    # The cases are on the board now: a second run sends nothing.
    again = lab.orch(
        "verify", "--host", BOARD, "--variant", "stock", "--subset", "5", "--no-models", "--json"
    )
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout)["boards"][BOARD]["sent_bytes"] == 0


def test_a_build_that_computes_wrong_fails_verify_naming_the_cases(
    lab, stock_build: StockBuild, tmp_path: Path
) -> None:
    board = lab.board(BOARD)
    with ssh.connect(board) as session:
        mine = [r for r in list_releases(session, board) if r.variant == "stock"]
        if not mine:
            deploy(lab, stock_build.artifact.directory, write_model(tiny_convnet(), tmp_path / "tiny.onnx"))
            mine = [r for r in list_releases(session, board) if r.variant == "stock"]
        stock = mine[-1]
        session.run_script(
            BREAK_RELEASE, (board.workdir, stock.id, stock.id.replace("stock-", "broken-", 1)), timeout=300
        )
    done = lab.orch(
        "verify", "--host", BOARD, "--variant", "broken", "--subset", "30", "--no-models", "--json"
    )
    assert done.returncode == 1, f"{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
    build = json.loads(done.stdout)["boards"][BOARD]["builds"][0]
    assert len(build["regressions"]) >= 10
    first = build["regressions"][0]
    assert first["reference"]["status"] == "pass" and first["build"]["stage"] == "compare"
    assert f"{BOARD} {build['release']}: FAILS where stock passes: {first['case']}" in done.stderr
    assert "fail on a build where stock onnxruntime of its release passes" in done.stderr
