"""A C library build (`orch build --scope library`) deployed as a "native release": recorded as an
artifact of its own kind beside the wheel's, chosen by `--scope` when both are built, planned with
no venv and no pip, installed and verified by its native runner, and the board-side steps of that
run here by the workstation's sh on a directory standing in for the board (no board, no sshd)."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import onnxruntime
import pytest
from library_build import FAKE_RUNNER, LIBRARY, TARGET, VERSION, make_library_artifact
from local_board import LocalBoard
from plan_files import FACTS, make_files
from plan_files import plan as wheel_plan

from orchestrator.adapters.session import CommandResult
from orchestrator.artifacts.store import (
    Artifact,
    Manifest,
    ManifestError,
    Preflight,
    artifact_dir,
    list_artifacts,
    read_manifest,
    write_manifest,
)
from orchestrator.bench.plan import ReleaseRef
from orchestrator.bench.plan_options import make_plan as make_bench_plan
from orchestrator.bench.steps import board_steps, check_runners
from orchestrator.board import Board
from orchestrator.commands.deploy import _print_plan
from orchestrator.console import console
from orchestrator.deploy.artifact_choice import ArtifactCache, ArtifactChoice, artifact_label, select_artifact
from orchestrator.deploy.counted_session import CountedSession
from orchestrator.deploy.execute import (
    DeployRequest,
    _BoardRun,
    _Clock,
    _install_and_verify,
    _survey_and_plan,
)
from orchestrator.deploy.library_choice import ChosenLibrary, check_library_compatible, checked_library
from orchestrator.deploy.native_plan import plan_native_board
from orchestrator.deploy.native_verification import native_verification
from orchestrator.deploy.plan import BoardPlan
from orchestrator.deploy.release_files import ReleaseFiles, agent_files, model_files
from orchestrator.deploy.releases import layout_for, parse_listing, read_listing
from orchestrator.deploy.report import BoardReport
from orchestrator.deploy.survey import Survey, read_survey
from orchestrator.deploy.switch_gate import SwitchGate
from orchestrator.deploy.transfer_view import TransferView
from orchestrator.deploy.verification import parse_verification
from orchestrator.errors import BenchError, DeployError, UsageError
from orchestrator.lab.sample_models import write_tiny_convnet

NANO = Board(name="nano01", hostname="127.0.0.1", port=2222, python="python3", target=TARGET)
RELEASE = "/home/nvidia/orch/releases/default-1.21.0-0a1b2c3d"


@pytest.fixture
def library(tmp_path: Path) -> Artifact:
    return make_library_artifact(tmp_path / "artifacts", tmp_path / "work")


def wheel_artifact(root: Path, *, variant: str = "default", version: str = VERSION) -> Artifact:
    """A pre-flighted wheel artifact of the same target, as `orch build` leaves one."""
    directory = artifact_dir(TARGET, variant, version, root=root)
    directory.mkdir(parents=True)
    wheel = f"onnxruntime-{version}-cp39-cp39-linux_aarch64.whl"
    (directory / wheel).write_bytes(b"PK\x05\x06" + b"\0" * 18)
    manifest = Manifest(
        target=TARGET,
        variant=variant,
        ort_version=version,
        wheel=wheel,
        kind="wheel",
        created="2026-12-01T00:00:00+00:00",
        preflight=Preflight(ok=True),
    )
    write_manifest(directory, manifest)
    return Artifact(directory=directory, manifest=manifest)


def native_files(library: Artifact, models: list[Path]) -> ReleaseFiles:
    chosen = checked_library(library)
    return ReleaseFiles(
        artifact=library,
        wheels=(),
        models=model_files(models),
        agent=agent_files(names=("README.md",)),
        native=chosen.files,
    )


def survey(listing: str = "workdir\t/home/nvidia/orch\n", store: frozenset[str] = frozenset()) -> Survey:
    facts = replace(FACTS, board="nano01", home="/home/nvidia", glibc="2.31", python_version="3.8.10")
    return Survey(facts=facts, listing=replace(parse_listing(listing), store=store))


# --------------------------------------------------------------------------- the artifact's kind


def test_a_library_build_is_an_artifact_of_kind_library_beside_the_wheel_of_its_release(
    tmp_path: Path, library: Artifact
) -> None:
    root = tmp_path / "artifacts"
    wheel = wheel_artifact(root)
    found = {a.kind: a for a in list_artifacts(root)}
    assert set(found) == {"wheel", "library"}
    # Beside the wheel of the same release, never in its place: each keeps its own directory.
    assert found["library"].directory == root / TARGET / "default" / f"{VERSION}-library"
    assert found["wheel"].directory == wheel.directory == root / TARGET / "default" / VERSION
    on_disk = json.loads((library.directory / "manifest.json").read_text())
    assert on_disk["kind"] == "library" and "wheel" not in on_disk and on_disk["preflight"]["ok"] is True
    assert sorted(on_disk["library"]["files"]) == [
        "include/onnxruntime_c_api.h",
        "lib/libonnxruntime.so.1.21.0",
        "lib/libprotobuf-lite.so.32",
        "orch-runner",
    ]
    assert on_disk["library"]["soname"] == "lib/libonnxruntime.so.1"
    assert on_disk["sysroot"]["name"] == "nano01" and on_disk["native_runner"]["library"] == LIBRARY
    # The build's out/ as it was, its SONAME link a link, and the build's log beside it.
    assert (library.directory / "lib" / "libonnxruntime.so.1").is_symlink()
    assert (library.directory / "build.log").read_text().startswith("# orch build")
    # Read back, it is the same manifest; a wheel's `wheel_path` is not one of its files.
    assert read_manifest(library.directory / "manifest.json") == library.manifest
    with pytest.raises(UsageError, match="is a C library build"):
        _ = found["library"].wheel_path
    # A library build missing one of its files is not offered.
    (library.directory / "lib" / "libprotobuf-lite.so.32").unlink()
    assert [a.kind for a in list_artifacts(root)] == ["wheel"]


def test_a_manifest_without_a_kind_is_a_wheel_and_reads_back_unchanged() -> None:
    older = {"target": "lab", "variant": "stock", "ort_version": "1.21.0", "wheel": "w.whl"}
    manifest = Manifest.from_json(older, source="m.json")
    assert manifest.kind is None and manifest.artifact_kind == "wheel"
    assert manifest.to_json() == older


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"kind": "tarball"}, "m.json: key 'kind' must be wheel or library, not a string"),
        ({"kind": "library"}, "m.json: missing key 'library' (a C library build lists its files there)"),
        ({"kind": "library", "library": {"files": {}}}, "m.json: key 'library.files' must list the build's files"),
        ({"kind": "wheel", "wheel": None}, "m.json: missing key 'wheel'"),
    ],
)  # fmt: skip
def test_a_kind_that_does_not_fit_its_manifest_is_refused(change: dict[str, Any], message: str) -> None:
    document = {"target": "lab", "variant": "default", "ort_version": "1.21.0", "wheel": "w.whl", **change}
    with pytest.raises(ManifestError) as refused:
        Manifest.from_json({k: v for k, v in document.items() if v is not None}, source="m.json")
    assert refused.value.message == message


def test_a_wheel_and_a_library_build_of_one_release_are_never_guessed(
    tmp_path: Path, library: Artifact
) -> None:
    root = tmp_path / "artifacts"
    wheel_artifact(root)
    found = list_artifacts(root)
    with pytest.raises(UsageError) as refused:
        select_artifact(found, target=TARGET, variant="default", ort_version=None, where="ARTS")
    message = refused.value.message
    assert message.startswith("2 artifacts match target 'jetson-nano' with --variant default: ")
    assert f"default 1.21.0 source C library ({library.directory})" in message
    assert refused.value.hint == "choose with --scope (library or wheel), or give --artifact DIR"
    chosen = select_artifact(
        found, target=TARGET, variant="default", ort_version=None, where="ARTS", kind="library"
    )
    assert (
        chosen.directory == library.directory and artifact_label(chosen) == "default 1.21.0 source C library"
    )
    assert (
        select_artifact(found, target=TARGET, variant=None, ort_version=None, where="ARTS", kind="wheel").kind
        == "wheel"
    )
    with pytest.raises(UsageError) as missing:
        select_artifact(found, target=TARGET, variant="tuned", ort_version=None, where="ARTS", kind="library")
    assert (
        missing.value.hint
        == "build one first: orch build --target jetson-nano --variant tuned --scope library"
    )


@pytest.fixture
def env(orch_env: dict[str, str]) -> dict[str, str]:
    """A Jetson Nano in the inventory whose port is closed: the deploy fails once it connects."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    hosts = {"nano01": {"hostname": "127.0.0.1", "port": port, "target": TARGET}}
    Path(orch_env["ORCH_INVENTORY"]).write_text(json.dumps({"all": {"hosts": hosts}}))
    return orch_env


def test_deploy_chooses_the_library_build_by_scope_and_refuses_it_without_a_model(
    env: dict[str, str], orch_cli: Callable[..., Any], tmp_path: Path
) -> None:
    root = Path(env["ORCH_ARTIFACTS"])
    wheel = wheel_artifact(root)
    library = make_library_artifact(root, tmp_path / "work")
    both = orch_cli(env, "deploy", "--host", "nano01", "--variant", "default", "--dry-run")
    said = " ".join(both.stderr.split())
    assert both.returncode == 2 and "--scope (library or wheel)" in said, said
    assert "nano01" not in said and "Traceback" not in said  # no board was contacted
    # No model: a native release could not be verified anywhere; refused before any board.
    bare = orch_cli(env, "deploy", "--host", "nano01", "--scope", "library")
    said = " ".join(bare.stderr.split())
    assert (
        bare.returncode == 2 and "is a C library build: its release is verified by its native runner" in said
    )
    model = write_tiny_convnet(tmp_path / "tiny.onnx")
    chosen = orch_cli(
        env, "deploy", "--host", "nano01", "--scope", "library", "--model", str(model), "--json"
    )
    assert "jetson-nano: default 1.21.0 source C library from " in " ".join(chosen.stderr.split())
    assert json.loads(chosen.stdout)["artifacts"][TARGET] == {
        "variant": "default",
        "ort_version": VERSION,
        "route": "source",
        "directory": str(library.directory),
        "kind": "library",
    }
    assert chosen.returncode == 4, chosen.stderr  # then the board's closed port
    crossed = orch_cli(
        env, "deploy", "--host", "nano01", "--artifact", str(wheel.directory), "--scope", "library"
    )
    assert crossed.returncode == 2 and "is a wheel, not --scope library" in " ".join(crossed.stderr.split())


# --------------------------------------------------------------------------- the plan


def test_the_plan_of_a_native_release_sends_the_runner_and_library_and_installs_nothing(
    tmp_path: Path, library: Artifact
) -> None:
    model = write_tiny_convnet(tmp_path / "models" / "tiny.onnx")
    plan = plan_native_board(NANO, survey(), native_files(library, [model]), keep=3, created="now")
    assert {f.name for f in plan.files} == {
        "native/orch-runner",
        "native/lib/libonnxruntime.so.1.21.0",
        "native/lib/libprotobuf-lite.so.32",
        "native/include/onnxruntime_c_api.h",
        "models/tiny.onnx",
        "agent/README.md",
    }
    # No venv, no pip, no wheel, no interpreter: the release runs no Python.
    assert (
        plan.venv_argv == () and plan.install_argv == () and plan.python is None and plan.reuse_from is None
    )
    assert plan.space_needed == plan.bytes_to_send
    release_dir = f"orch/releases/{plan.release_id}"
    assert plan.release_dir == release_dir and plan.release_id.startswith("default-1.21.0-")
    # Verified by its runner: one inference of each model, by the release's own paths.
    assert plan.verify_argv == (
        (
            f"{release_dir}/native/orch-runner", "--model", f"{release_dir}/models/tiny.onnx",
            "--warmup", "0", "--min-runs", "1", "--min-duration", "0", "--max-runs", "1",
        ),
    )  # fmt: skip
    document = plan.release_document
    assert document["kind"] == "library" and "wheel" not in document and "python_version" not in document
    assert document["native"]["runner"] == "native/orch-runner"
    assert (
        document["native"]["library"] == "libonnxruntime.so.1.21.0"
        and document["native"]["library_size"] == 5000
    )
    assert set(document["libraries"]) == {
        "lib/libonnxruntime.so.1.21.0", "lib/libprotobuf-lite.so.32", "include/onnxruntime_c_api.h",
    }  # fmt: skip
    as_json = plan.as_dict()
    assert as_json["kind"] == "library" and as_json["venv_argv"] == [] and as_json["install_argv"] == []
    assert as_json["verify_argv"] == [list(plan.verify_argv[0])] and as_json["python"] is None
    # A wheel's release of the same variant, release and model is another release.
    (tmp_path / "wheel").mkdir()
    files = make_files(tmp_path / "wheel")
    files["artifact"] = Artifact(
        directory=tmp_path,
        manifest=Manifest(target=TARGET, variant="default", ort_version=VERSION, wheel="w.whl"),
    )
    files["models"] = model_files([model])
    assert wheel_plan(files).release_id != plan.release_id
    # The dry run says what happens: no venv, no pip, the runner's verification.
    with console.capture() as captured:
        _print_plan("nano01", plan)
    text = " ".join(captured.get().split())
    assert (
        "no venv, no pip" in text
        and "link native/lib/libonnxruntime.so.1 -> libonnxruntime.so.1.21.0" in text
    )
    assert f"run: {release_dir}/native/orch-runner --model {release_dir}/models/tiny.onnx --warmup 0" in text
    assert "venv/bin/python" not in text and " install " not in text


def test_a_native_release_without_a_model_cannot_be_planned(library: Artifact) -> None:
    with pytest.raises(UsageError, match="verified by its native runner running each of its models"):
        plan_native_board(NANO, survey(), native_files(library, []), keep=3, created="now")


def test_a_library_build_the_board_cannot_run_is_refused_before_anything_is_sent(tmp_path: Path) -> None:
    # The workstation's own x86-64 library in place of the aarch64 one.
    x86 = (Path(onnxruntime.__file__).parent / "capi" / "libonnxruntime_providers_shared.so").read_bytes()
    artifact = make_library_artifact(tmp_path / "artifacts", tmp_path / "work", library=x86)
    chosen = checked_library(artifact)
    with pytest.raises(DeployError) as refused:
        check_library_compatible(chosen, survey().facts, ())
    assert "nothing was sent" in refused.value.message
    assert f"contains x86_64 machine code ({LIBRARY}), nano01 is aarch64" in refused.value.message
    # A file changed after the build is refused by its sha256, as a wheel is.
    (artifact.directory / "orch-runner").write_text("changed")
    with pytest.raises(DeployError, match="changed after it was built"):
        checked_library(artifact)


# --------------------------------------------------------------------------- the verification


def runner_result(
    *, ok: bool = True, version: str = VERSION, library: str = f"{RELEASE}/native/lib/libonnxruntime.so.1",
    stage: str = "", error: str = "", exit_code: int | None = None,
) -> CommandResult:  # fmt: skip
    """What one run of the runner returned: its one JSON line (the runner's own document's keys)."""
    document: dict[str, Any] = {
        "schema": "orch-native-runner/1",
        "runner": {"built_for": VERSION, "api_version": 21},
        "argv": ["--model", "m.onnx"],
        "ort": {"version": version, "library": library},
        "ok": ok,
        "memory": {"peak_rss_kb": 9000},
    }
    if ok:
        document["session"] = {"providers": ["CPUExecutionProvider"]}
        document["timing"] = {"session_create_s": 0.0125, "first_inference_ms": 0.5}
    else:
        document.update(stage=stage, error=error)
    code = exit_code if exit_code is not None else (0 if ok else 1)
    return CommandResult(exit_code=code, stdout=json.dumps(document) + "\n", stderr="", duration=0.1)


def problems(results: dict[str, CommandResult]) -> list[str]:
    verification = native_verification(results)
    return verification.problems(expected_version=VERSION, release_dir=RELEASE, expected_build_info=None)


def test_every_model_run_by_the_releases_own_library_verifies_it_and_is_recorded_so() -> None:
    verification = native_verification({"tiny.onnx": runner_result(), "mlp.onnx": runner_result()})
    assert verification.ok and verification.version == VERSION and verification.native
    assert verification.file == f"{RELEASE}/native/lib/libonnxruntime.so.1"
    assert verification.models["tiny.onnx"].load_ms == 12.5 and verification.models["tiny.onnx"].run_ms == 0.5
    assert problems({"tiny.onnx": runner_result()}) == []
    # verified.json holds it as a wheel's verification, marked as the runner's, and reads back so.
    recorded = verification.as_dict()
    assert recorded["runner"] == "native" and recorded["version"] == VERSION
    again = parse_verification(json.dumps(recorded), where="nano01: verified.json")
    assert again == verification


def test_a_library_of_another_release_is_named_with_both_versions() -> None:
    refused = runner_result(
        ok=False,
        version="1.20.0",
        stage="version",
        error="this runner was built for ONNX Runtime 1.21.0 but loaded the library of ONNX Runtime 1.20.0",
    )
    failed_model = (
        "tiny.onnx: version: this runner was built for ONNX Runtime 1.21.0 but loaded the library of ONNX"
        " Runtime 1.20.0"
    )
    assert problems({"tiny.onnx": refused}) == [
        failed_model,
        "the native runner loaded ONNX Runtime 1.20.0, expected 1.21.0",
    ]


def test_a_library_outside_the_release_does_not_pass_for_its_own() -> None:
    elsewhere = runner_result(library="/usr/lib/aarch64-linux-gnu/libonnxruntime.so.1")
    assert problems({"tiny.onnx": elsewhere}) == [
        f"the native runner loaded /usr/lib/aarch64-linux-gnu/libonnxruntime.so.1, not the release's own (under {RELEASE})"
    ]


def test_a_model_that_fails_fails_the_verification_by_name() -> None:
    failed = runner_result(
        ok=False, stage="session", error="Load model from broken.onnx failed: protobuf parsing"
    )
    crashed = CommandResult(
        exit_code=132, stdout="", stderr="Illegal instruction (core dumped)\n", duration=0.1
    )
    verification = native_verification({"tiny.onnx": runner_result(), "broken.onnx": failed})
    assert not verification.ok and verification.models["tiny.onnx"].ok
    assert problems({"tiny.onnx": runner_result(), "broken.onnx": failed}) == [
        "broken.onnx: session: Load model from broken.onnx failed: protobuf parsing"
    ]
    assert problems({"tiny.onnx": crashed}) == [
        "tiny.onnx: the native runner exited 132 without a result: Illegal instruction (core dumped)",
        "the native runner reported no ONNX Runtime version (its library did not load)",
    ]


# --------------------------------------------------------------------------- on a stand-in board


def deploy_on(board: LocalBoard, artifact: Artifact, model: Path) -> tuple[BoardReport, BoardPlan]:
    """The deploy's own steps for one board (survey, plan, upload, install, verify, switch, prune),
    as ``deploy_board`` runs them under the board lock; the board reports a Jetson's CPU."""
    request = DeployRequest(
        artifact=artifact, variant=None, models=tuple(model_files([model])), agent=tuple(agent_files())
    )
    with TransferView([NANO], enabled=False) as view:
        run = _BoardRun(
            board=NANO, request=request, view=view, session=CountedSession(board), layout=layout_for(NANO),
            clock=_Clock(), started=time.monotonic(), gate=SwitchGate(),
        )  # fmt: skip
        found = read_survey(run.session, NANO, run.layout)
        # The workstation is x86_64: the stand-in board says what a Jetson would.
        found = replace(found, facts=replace(found.facts, arch="aarch64"))
        plan, listing = _survey_and_plan(run, checked_library(artifact), found)
        return _install_and_verify(run, plan, listing, artifact, None), plan


def test_a_native_release_is_sent_installed_verified_and_switched_by_the_board_side_scripts(
    tmp_path: Path,
) -> None:
    """The deploy's own steps (survey, plan, upload, stage, SONAME link, seal, the runner's
    verification, verified.json, the switch) on a directory standing in for the board; then bench
    reads the release back from the board as a native one."""
    artifact = make_library_artifact(tmp_path / "artifacts", tmp_path / "work", runner=FAKE_RUNNER)
    board = LocalBoard(NANO, tmp_path / "board-home")
    report, plan = deploy_on(board, artifact, write_tiny_convnet(tmp_path / "models" / "tiny.onnx"))
    release = board.home_dir / "orch" / "releases" / plan.release_id
    assert report.action == "deployed" and report.verification is not None and report.verification.ok
    assert report.verification.file == f"{release}/native/lib/libonnxruntime.so.1"
    assert (release / "native" / "lib" / "libonnxruntime.so.1").resolve() == (
        release / "native" / "lib" / "libonnxruntime.so.1.21.0"
    )
    assert not (release / "venv").exists() and not (release / "wheels").exists()
    assert sorted(p.name for p in (release / "agent").iterdir()) == ["README.md"]
    assert json.loads((release / "verified.json").read_text())["verification"]["runner"] == "native"
    assert (board.home_dir / "orch" / "current").resolve() == release
    # What bench reads of the board: a native release, measured by its runner only.
    (info,) = read_listing(board, layout_for(NANO)).releases
    ref = ReleaseRef.from_info(info)
    assert ref.kind == "library" and ref.runner == f"{release}/native/orch-runner"
    steps = board_steps(make_bench_plan([NANO], runner="native"), [ref], ["tiny.onnx"])
    assert steps and all(
        step.argv[0] == f"{release}/native/orch-runner" for step in steps if not step.launches
    )
    with pytest.raises(BenchError, match="--runner native"):
        check_runners(make_bench_plan([NANO], runner="python"), [ref], NANO.name)


def test_a_native_release_whose_runner_loads_another_library_is_never_made_current(tmp_path: Path) -> None:
    # A runner that finds a libonnxruntime.so.1 outside its release (the board's /usr/lib, say).
    elsewhere = FAKE_RUNNER.replace(
        '\\"library\\":\\"$lib\\"', '\\"library\\":\\"/usr/lib/aarch64-linux-gnu/libonnxruntime.so.1\\"'
    )
    assert elsewhere != FAKE_RUNNER
    artifact = make_library_artifact(tmp_path / "artifacts", tmp_path / "work", runner=elsewhere)
    board = LocalBoard(NANO, tmp_path / "board-home")
    with pytest.raises(DeployError) as failed:
        deploy_on(board, artifact, write_tiny_convnet(tmp_path / "models" / "tiny.onnx"))
    message = failed.value.message
    assert "loaded /usr/lib/aarch64-linux-gnu/libonnxruntime.so.1, not the release's own" in message
    assert message.endswith("no release stays current (nothing was switched)")
    assert not (board.home_dir / "orch" / "current").exists()
    assert not list((board.home_dir / "orch" / "releases").glob("*/verified.json"))


def test_chosen_library_is_what_the_cache_hands_a_board(library: Artifact) -> None:
    cache = ArtifactCache(ArtifactChoice(artifact=library, by_target={}, variant=None, ort_version=None))
    chosen = cache.for_board(NANO)
    assert isinstance(chosen, ChosenLibrary) and chosen.artifact is library
    assert {f.name for f in chosen.files} >= {"native/orch-runner", "native/lib/libonnxruntime.so.1.21.0"}


def test_build_list_shows_the_library_build_beside_the_wheel(
    orch_env: dict[str, str], orch_cli: Callable[..., Any], tmp_path: Path
) -> None:
    root = Path(orch_env["ORCH_ARTIFACTS"])
    wheel_artifact(root)
    library = make_library_artifact(root, tmp_path / "work")
    listed = json.loads(orch_cli(orch_env, "build", "list", "--json", check=True).stdout)
    kinds = {entry["directory"]: entry.get("kind") for entry in listed}
    assert kinds == {str(library.directory): "library", str(root / TARGET / "default" / VERSION): "wheel"}
    done = orch_cli(orch_env, "build", "list", check=True)
    shown = done.stdout + done.stderr
    assert "none: C library build" in shown and "onnxruntime-1.21.0-cp39-cp39-linux_aarch64.whl" in shown
