"""`orch bench` on a C library build's release (`orch deploy --scope library`): read from its
release.json as a release without Python, measured by its native runner alone; the Python agent
(and --quantize, which needs the release's onnxruntime tools) refused naming `--runner native`."""

from __future__ import annotations

import json
import re

import pytest

from orchestrator.bench import reading
from orchestrator.bench.native import cold_starts
from orchestrator.bench.plan import ReleaseRef
from orchestrator.bench.plan_options import make_plan
from orchestrator.bench.records import BOARD_SCHEMA
from orchestrator.bench.steps import board_steps, check_runners
from orchestrator.board import Board
from orchestrator.deploy.releases import parse_listing
from orchestrator.errors import BenchError

BOARD = Board(name="nano01", hostname="127.0.0.1", port=2222, target="jetson-nano")
RID = "default-1.21.0-0a1b2c3d"
PATH = f"/home/nvidia/orch/releases/{RID}"
# release.json of a C library build's release, as orch deploy writes it (deploy/native_plan.py).
NATIVE = {
    "id": RID,
    "kind": "library",
    "variant": "default",
    "target": "jetson-nano",
    "ort_version": "1.21.0",
    "models": {"tiny.onnx": "a" * 64},
    "libraries": {"lib/libonnxruntime.so.1.21.0": "b" * 64},
    "agent": {"README.md": "c" * 64},
    "native": {
        "runner": "native/orch-runner",
        "runner_sha256": "d" * 64,
        "runner_size": 70_000,
        "library": "libonnxruntime.so.1.21.0",
        "library_size": 21_600_000,
        "ort_version": "1.21.0",
    },
    "created": "2026-12-05T00:00:00+00:00",
    "manifest": {"kind": "library", "dependencies": "source", "variant": "default"},
}


def native_release() -> ReleaseRef:
    listing = parse_listing(
        f"workdir\t/home/nvidia/orch\ncurrent\treleases/{RID}\nrelease\t{RID}\t{json.dumps(NATIVE)}\n"
    )
    (info,) = listing.releases
    return ReleaseRef.from_info(info)


def test_a_c_library_release_is_read_as_one_without_python() -> None:
    release = native_release()
    assert release.kind == "library" and not release.has_python
    assert release.runner == f"{PATH}/native/orch-runner" and release.route == "source"
    wheel = {**NATIVE, "kind": None, "wheel": "onnxruntime-1.21.0-cp311-cp311-linux_aarch64.whl"}
    listing = parse_listing(f"workdir\t/home/u/orch\nrelease\tw\t{json.dumps(wheel)}\n")
    assert ReleaseRef.from_info(listing.releases[0]).has_python  # no kind: a wheel's release


@pytest.mark.parametrize("runner", ["python", "both"])
def test_the_python_agent_on_a_c_library_release_is_refused_naming_the_native_runner(runner: str) -> None:
    with pytest.raises(BenchError) as refused:
        check_runners(make_plan([BOARD], runner=runner), [native_release()], BOARD.name)
    assert refused.value.message == (
        f"nano01: release {RID} is a C library build (no Python, no onnxruntime wheel): the Python agent"
        " cannot run there; measure it with --runner native"
    )
    assert refused.value.hint == "orch bench --host nano01 --runner native"


def test_quantising_on_a_c_library_release_is_refused() -> None:
    with pytest.raises(
        BenchError, match=re.escape("--quantize makes the int8 copy with onnxruntime's Python")
    ):
        check_runners(make_plan([BOARD], runner="native", quantize="dynamic"), [native_release()], BOARD.name)


def test_the_native_runner_measures_it_warm_and_cold_without_the_releases_venv() -> None:
    plan = make_plan([BOARD], runner="native", cold_starts=3, rounds=2)
    release = native_release()
    check_runners(plan, [release], BOARD.name)
    steps = board_steps(plan, [release], ["tiny.onnx"])
    assert [(s.runner, s.launches) for s in steps] == [("native", 0), ("native", 3)] * 2
    assert steps[0].argv[:3] == (f"{PATH}/native/orch-runner", "--model", f"{PATH}/models/tiny.onnx")
    # Nothing of a venv: the warm run is the runner itself, the cold starts launch it through sh.
    assert not any("venv" in part or "bench_agent" in part for step in steps for part in step.argv)
    # Its footprint in the tables: the runner and the C library, from release.json.
    document = {
        "schema": BOARD_SCHEMA,
        "board": BOARD.name,
        "releases": [{"id": RID, "native": NATIVE["native"]}],
        "cold_starts": [
            {
                "key": steps[1].key(),
                "launches": [
                    {"timing": {"launch_to_first_result_ms": 40.0}, "memory": {"peak_rss_kb": 9000}}
                ],
            }
        ],
    }
    (found,) = cold_starts([reading.board_record(document)])
    assert (found.runner_bytes, found.library_bytes) == (70_000, 21_600_000)
