"""`orch bench` against the real lab: two emulated arm64 boards over SSH, a real deploy, real agents.

Runs are tiny (a 2-conv model with a small constant chain, a few inferences per agent run): every
agent run costs ~15-30 s under emulation, mostly Python and onnxruntime start-up.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import onnxruntime
import pytest
from bench_models import conv_model

from orchestrator.adapters import ssh as remote
from orchestrator.artifacts.store import Manifest, write_manifest
from orchestrator.bench.results import ResultStore

QUICK = ("--quick", "--min-runs", "6")
WHEEL_CACHE = Path(tempfile.gettempdir()) / "orch-bench-test-wheels"
FAKE_SYSFS = "/tmp/orch-fake-sysfs"


def stock_artifact(root: Path) -> Path:
    """The stock aarch64 onnxruntime wheel for the lab's Python (3.13), as a build artifact directory."""
    version = onnxruntime.__version__
    WHEEL_CACHE.mkdir(exist_ok=True)
    wheels = sorted(WHEEL_CACHE.glob(f"onnxruntime-{version}-cp313-*aarch64.whl"))
    if not wheels:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
                "--platform",
                "manylinux_2_28_aarch64",
                "--python-version",
                "3.13",
                "--implementation",
                "cp",
                "--dest",
                str(WHEEL_CACHE),
                f"onnxruntime=={version}",
            ],
            check=True,
            timeout=900,
        )
        wheels = sorted(WHEEL_CACHE.glob(f"onnxruntime-{version}-cp313-*aarch64.whl"))
    assert wheels, f"pip download did not produce an aarch64 onnxruntime {version} wheel in {WHEEL_CACHE}"
    directory = root / "lab" / "stock" / version
    directory.mkdir(parents=True, exist_ok=True)
    target = directory / wheels[0].name
    if not target.exists():
        shutil.copyfile(wheels[0], target)
    write_manifest(
        directory,
        Manifest.from_json(
            {
                "target": "lab",
                "variant": "stock",
                "ort_version": version,
                "wheel": target.name,
                "preflight": {"ok": True, "source": "PyPI wheel"},
            },
            source="bench lab fixture",
        ),
    )
    return directory


# Makes a "tuned" release as a copy of the stock one, by hand and following the on-board layout
# (releases/<id>/ with release.json, venv/, models/, agent/). A second real deploy would install
# the same wheel again for ~6 minutes of pip under emulation; the copy gives the A/B machinery two
# releases of different variants in seconds (an A/A comparison: same bytes under two names).
# $1 = workdir, $2 = source release id, $3 = new release id.
COPY_RELEASE = r"""
w="$1"; src="$w/releases/$2"; dst="$w/releases/$3"
rm -rf -- "$dst"
cp -a -- "$src" "$dst"
python3 - "$dst/release.json" "$3" <<'PY'
import json, sys
path, new_id = sys.argv[1], sys.argv[2]
doc = json.load(open(path))
doc.update(id=new_id, variant="tuned")
json.dump(doc, open(path, "w"))
PY
"""

# $1 = fake sysfs root. Real boards have cpufreq under /sys; the emulated lab has none and /sys is
# read-only in the containers, so --pin-clocks is exercised on a real, writable tree on the board.
FAKE_CPUFREQ = r"""
root="$1"
rm -rf -- "$root"
for cpu in 0 1; do
  d="$root/devices/system/cpu/cpu$cpu/cpufreq"
  mkdir -p "$d"
  echo ondemand > "$d/scaling_governor"
  echo 1500000 > "$d/scaling_cur_freq"
  echo 1800000 > "$d/cpuinfo_max_freq"
done
echo 0-1 > "$root/devices/system/cpu/online"
"""


@pytest.fixture(scope="module")
def deployed(lab):
    """The stock wheel + a tiny model deployed to both lab boards with `orch deploy`, plus a hand-made
    'tuned' copy of the release on lab1."""
    model = conv_model(lab.root / "models" / "fold.onnx", layers=2, size=16, folded_chain=8)
    artifact = stock_artifact(Path(lab.env["ORCH_ARTIFACTS"]))
    done = lab.orch(
        "deploy", "--all-devices", "--artifact", str(artifact), "--model", str(model), timeout=1500
    )
    assert done.returncode == 0, f"orch deploy failed:\n{done.stdout}\n{done.stderr}"
    from orchestrator.deploy.releases import list_releases

    board = lab.board("lab1")
    with remote.connect(board) as session:
        [stock] = list_releases(session, board)
        session.run_script(
            COPY_RELEASE, (board.workdir, stock.id, stock.id.replace("stock-", "tuned-", 1)), timeout=300
        )
        session.run_script(FAKE_CPUFREQ, (FAKE_SYSFS,), timeout=60)
    return lab


def bench(lab, *args: str, timeout: float = 1200) -> tuple[subprocess.CompletedProcess[str], dict]:
    done = lab.orch("bench", *args, "--json", timeout=timeout)
    document = json.loads(done.stdout) if done.stdout.strip() else {}
    return done, document


def read_governors(board) -> list[str]:
    with remote.connect(board) as session:
        out = session.run(
            ["sh", "-c", f"cat {FAKE_SYSFS}/devices/system/cpu/cpu*/cpufreq/scaling_governor"]
        ).stdout
    return out.split()


def test_bench_two_boards_ab_of_optimisation_levels(deployed):
    lab = deployed
    done, doc = bench(lab, "--all-devices", "--opt-level", "disable,all", *QUICK)
    assert done.returncode == 0, done.stderr
    assert {name: b["status"] for name, b in doc["boards"].items()} == {"lab1": "ok", "lab2": "ok"}
    # Human output: the seed-style P50/P99 table and the comparison with its verdict, per board.
    assert "P50 / P99 latency" in done.stderr and "A/B comparisons" in done.stderr
    record = ResultStore(Path(lab.env["ORCH_RESULTS"])).load(doc["run_id"])
    assert sorted(p.name for p in record.path.iterdir()) == ["lab1.json", "lab2.json", "run.json"]
    for board in ("lab1", "lab2"):
        stored = record.boards[board]
        keys = [(m["round"], m["key"]["opt_level"]) for m in stored["measurements"]]
        assert keys == [(1, "disable"), (1, "all"), (2, "disable"), (2, "all")]  # interleaved rounds
        agent = stored["measurements"][0]["agent"]
        assert len(agent["timing"]["latencies_ms"]) == 6 and agent["timing"]["session_create_s"] > 0
        assert agent["ort"]["version"] == onnxruntime.__version__
        assert agent["board"]["before"]["machine"] == "aarch64" and agent["board"]["before"]["kernel"]
        assert agent["session"]["graph_optimization_level"] == "ORT_DISABLE_ALL"
        assert agent["model"]["inputs"][0]["shape"] == [1, 3, 16, 16]
    comparisons = {c["board"]: c for c in doc["comparisons"]}
    assert set(comparisons) == {"lab1", "lab2"}
    for c in comparisons.values():
        assert (
            c["dimension"] == "opt_level"
            and c["a"]["opt_level"] == "disable"
            and c["b"]["opt_level"] == "all"
        )
        assert c["n_a"] == c["n_b"] == 12
        assert c["ci_low"] <= c["ratio"] <= c["ci_high"]
        # Constant folding removes the MatMul chain: several times faster, even under emulation noise.
        assert c["ratio"] < 0.7 and c["verdict"] == "faster", c
    listed = lab.orch("results", "list", "--json", check=True)
    assert doc["run_id"] in [run["run_id"] for run in json.loads(listed.stdout)]


def test_variant_ab_is_interleaved_and_pin_clocks_without_cpufreq_is_recorded(deployed):
    lab = deployed
    done, doc = bench(lab, "--host", "lab1", "--variant", "stock,tuned", "--pin-clocks", *QUICK)
    assert done.returncode == 0, done.stderr
    assert "clocks not pinned" in done.stderr  # the lab has no cpufreq: warned, not fatal
    stored = ResultStore(Path(lab.env["ORCH_RESULTS"])).load(doc["run_id"]).boards["lab1"]
    assert [m["key"]["variant"] for m in stored["measurements"]] == ["stock", "tuned", "stock", "tuned"]
    assert stored["clocks"]["pinned"] is False and stored["clocks"]["requested"] is True
    [comparison] = doc["comparisons"]
    assert comparison["dimension"] == "variant" and comparison["verdict"] in (
        "faster",
        "slower",
        "no significant change",
    )
    assert comparison["ci_low"] <= comparison["ratio"] <= comparison["ci_high"]


def test_pin_clocks_restores_the_governor_also_when_the_run_fails(deployed):
    lab = deployed
    board = lab.board("lab1")
    assert read_governors(board) == ["ondemand", "ondemand"]
    done, doc = bench(
        lab, "--host", "lab1", "--pin-clocks", "--sysfs-root", FAKE_SYSFS, *QUICK, "--rounds", "1"
    )
    assert done.returncode == 0, done.stderr
    stored = ResultStore(Path(lab.env["ORCH_RESULTS"])).load(doc["run_id"]).boards["lab1"]
    seen = stored["measurements"][0]["agent"]["board"]["before"]["cpufreq"]
    assert {core["governor"] for core in seen.values()} == {"performance"}  # pinned while measuring
    assert stored["clocks"]["pinned"] is True and stored["clocks"]["restored"] is True
    assert read_governors(board) == ["ondemand", "ondemand"]

    # Provoke a failure after pinning: a shape the model cannot take makes the agent fail on the board.
    done, doc = bench(
        lab,
        "--host",
        "lab1",
        "--pin-clocks",
        "--sysfs-root",
        FAKE_SYSFS,
        "--shape",
        "input=1x3",
        *QUICK,
        "--rounds",
        "1",
    )
    assert done.returncode == 7, done.stderr
    assert "lab1" in done.stderr and "2 dims given" in done.stderr
    stored = ResultStore(Path(lab.env["ORCH_RESULTS"])).load(doc["run_id"]).boards["lab1"]
    assert stored["status"] == "failed" and stored["clocks"]["restored"] is True
    assert read_governors(board) == ["ondemand", "ondemand"]


def test_quantize_dynamic_compares_fp32_with_int8(deployed):
    lab = deployed
    done, doc = bench(lab, "--host", "lab2", "--quantize", "dynamic", *QUICK, "--rounds", "1")
    assert done.returncode == 0, done.stderr
    assert [(s["quant"], s["n"]) for s in doc["series"]] == [("fp32", 6), ("int8", 6)]
    [comparison] = doc["comparisons"]
    assert comparison["dimension"] == "quant" and comparison["b"]["quant"] == "int8"


def test_a_board_stopped_mid_run_is_named_and_the_other_is_kept(deployed):
    lab = deployed
    from orchestrator.adapters.engine import Engine

    victim = next(record for record in _lab_records(lab) if record["name"] == "lab2")
    process = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "bench", "--all-devices", *QUICK, "--rounds", "3", "--json"],
        env=lab.env,
        cwd=lab.env["ORCH_TEST_CWD"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Stop lab2 once it has finished one agent run: mid-run, with results already in flight.
        deadline = time.monotonic() + 600
        seen = ""
        while time.monotonic() < deadline:
            line = process.stderr.readline()
            seen += line
            if re.search(r"lab2\s+p50", line):
                break
            assert line or process.poll() is None, f"bench ended before lab2 measured anything:\n{seen}"
        else:
            pytest.fail(f"lab2 never finished an agent run:\n{seen}")
        Engine().stop(victim["container"], timeout=1)
        out, err = process.communicate(timeout=900)
    finally:
        if process.poll() is None:
            process.kill()
        lab.orch("lab", "up", timeout=600)  # bring lab2 back for whatever runs next
        lab.refresh()
    err = seen + err
    assert process.returncode == 8, err  # PartialFailure
    assert re.search(r"bench failed on lab2", err), err
    doc = json.loads(out)
    assert doc["boards"]["lab1"]["status"] == "ok" and doc["boards"]["lab2"]["status"] == "failed"
    assert "lab2" in doc["boards"]["lab2"]["error"]
    record = ResultStore(Path(lab.env["ORCH_RESULTS"])).load(doc["run_id"])
    assert len(record.boards["lab1"]["measurements"]) == 3  # every round of the healthy board
    assert 1 <= len(record.boards["lab2"]["measurements"]) < 3  # what lab2 finished before it died is kept


def _lab_records(lab) -> list[dict]:
    return json.loads((lab.home / "lab" / "state.json").read_text())["boards"]
