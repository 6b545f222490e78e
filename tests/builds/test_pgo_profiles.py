"""What a stored profile promises, with real files: the CPU its boards reported (a profile of another
CPU is refused unless --force-profile), the source it was measured on by content (an edited tarball
behind the same name is refused, naming it), and the models and settings it was trained with (the
model's real sha256, the settings given), as a training on this machine records them.

The training runs orch's own code end to end on this machine through ``LocalBoard`` (a board
session whose commands run here instead of over SSH): the board-side script, orch's benchmark
agent, a "wheel" whose onnxruntime is this environment's, imported from the scratch directory.
The loop itself runs with a stored profile, its one build run by ``_Builds`` (a stand-in for the
build container, handed to the loop as ``builds.run`` hands it orch's own), and leaves the record
a real build leaves beside its output.
"""

from __future__ import annotations

import hashlib
import io
import json
import shutil
import subprocess
import sys
import tarfile
import time
import zipfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import pytest

from orchestrator.adapters.session import CommandResult, Stream
from orchestrator.board import Board
from orchestrator.builds.build_report import CompilerCacheUse, IncrementalBuild
from orchestrator.builds.execute import BuildResult
from orchestrator.builds.network import planned_needs
from orchestrator.builds.pgo.cpu import NOT_REPORTED, parse_cpuinfo, read_cpu, refuse_other_cpus
from orchestrator.builds.pgo.flavour import GCC
from orchestrator.builds.pgo.loop import (
    plan_profile_guided,
    refuse_another_source,
    run_profile_guided,
    source_identity,
)
from orchestrator.builds.pgo.profile import Coverage, ProfileKey, Training
from orchestrator.builds.pgo.stored import PROFILE_FILE, ReadyProfile, profile_key, read_stored, write_profile
from orchestrator.builds.pgo.training import CountersInto, ModelWorkload, train_wheel
from orchestrator.builds.plan import BuildPlan
from orchestrator.builds.record import build_record
from orchestrator.builds.request import PlanContext, plan_build, read_build_request
from orchestrator.builds.sources.ort import SourceTree
from orchestrator.builds.variants import resolve_variant
from orchestrator.cli import build_parser
from orchestrator.errors import BuildError, UsageError
from orchestrator.lab.sample_models import tiny_convnet, write_model
from orchestrator.targets import resolve_target

pytestmark = pytest.mark.unit

# /proc/cpuinfo as the boards print it (first core; the rest repeat it).
PI4 = """processor\t: 0
BogoMIPS\t: 108.00
Features\t: fp asimd evtstrm crc32 cpuid
CPU implementer\t: 0x41
CPU architecture: 8
CPU variant\t: 0x0
CPU part\t: 0xd08
CPU revision\t: 3
"""
PI5 = PI4.replace("0xd08", "0xd0b").replace(
    "crc32 cpuid", "crc32 atomics fphp asimdhp cpuid asimdrdm lrcpc dcpop asimddp"
)
ORIN = PI4.replace("0xd08", "0xd42")
X86 = "processor\t: 0\nvendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R)\n"


def test_the_cpu_a_board_reports_is_read_from_its_cpuinfo() -> None:
    assert parse_cpuinfo(PI4).core == "cortex-a72" and parse_cpuinfo(PI4).part == "0x41:0xd08"
    assert parse_cpuinfo(PI5).core == "cortex-a76"
    assert parse_cpuinfo(ORIN).core == "cortex-a78ae"
    unknown = parse_cpuinfo(PI4.replace("0xd08", "0xd99"))
    assert unknown.core == "arm part 0x41:0xd99" and unknown.part == "0x41:0xd99"
    assert parse_cpuinfo(X86).core == NOT_REPORTED and parse_cpuinfo(X86).part == ""


def test_a_training_board_of_another_cpu_is_refused_unless_forced() -> None:
    lab = resolve_target("lab")
    refuse_other_cpus({"lab1": "cortex-a72", "lab2": "cortex-a72"}, lab, force=False, what="a training board")
    with pytest.raises(UsageError) as refused:
        refuse_other_cpus(
            {"lab1": "cortex-a72", "pi5": "cortex-a76"}, lab, force=False, what="a training board"
        )
    assert refused.value.message == (
        "a training board is of another CPU (pi5: a cortex-a76); the build is for a cortex-a72 (lab):"
        " a profile is measured for one CPU"
    )
    assert "--force-profile" in str(refused.value.hint)
    refuse_other_cpus({"pi5": "cortex-a76"}, lab, force=True, what="a training board")
    # The Orin's lab stand-in is emulated as a Cortex-A76 (its qemu_cpu): it trains the Orin's build.
    orin = resolve_target("jetson-orin")
    refuse_other_cpus(
        {"orin-1": "cortex-a76", "orin": "cortex-a78ae"}, orin, force=False, what="a training board"
    )
    with pytest.raises(
        UsageError,
        match=r"\(nano: a cortex-a57\); the build is for a cortex-a78ae \(jetson-orin, emulated as a cortex-a76\)",
    ):
        refuse_other_cpus({"nano": "cortex-a57"}, orin, force=False, what="a training board")


# -- a board that is this machine ---------------------------------------------------------------------


class LocalBoard:
    """A board session whose commands run on this machine (a stand-in for SSH, not for orch)."""

    def __init__(self, workdir: Path) -> None:
        self.board = Board(name="here", hostname="127.0.0.1", workdir=str(workdir))
        self.label = "here"

    def close(self) -> None:
        pass

    def run(
        self,
        argv: Sequence[str],
        *,
        timeout: float | None = None,
        check: bool = True,
        stdin: bytes | None = None,
    ) -> CommandResult:
        return self._run(list(argv), timeout=timeout, stdin=stdin)

    def run_command_line(
        self, command_line: str, *, timeout: float | None = None, check: bool = True
    ) -> CommandResult:
        return self._run(["sh", "-c", command_line], timeout=timeout)

    def run_script(
        self, script: str, args: Sequence[str] = (), *, timeout: float | None = None, check: bool = True
    ) -> CommandResult:
        return self._run(["sh", "-s", "--", *args], timeout=timeout, stdin=script.encode())

    def _run(self, argv: list[str], *, timeout: float | None, stdin: bytes | None = None) -> CommandResult:
        started = time.monotonic()
        done = subprocess.run(argv, input=stdin, capture_output=True, timeout=timeout, check=False)
        return CommandResult(
            exit_code=done.returncode,
            stdout=done.stdout.decode(errors="replace"),
            stderr=done.stderr.decode(errors="replace"),
            duration=time.monotonic() - started,
        )

    def open_stream(self, argv: Sequence[str]) -> Stream:
        raise NotImplementedError

    def put(
        self, local: Path, remote_path: str, *, progress: Callable[[int, int], None] | None = None
    ) -> None:
        shutil.copyfile(local, remote_path)

    def get(self, remote_path: str, local: Path) -> None:
        shutil.copyfile(remote_path, local)

    def rename(self, src: str, dst: str) -> None:
        Path(src).rename(dst)

    def stat(self, path: str) -> int | None:
        return Path(path).stat().st_size if Path(path).exists() else None

    def mkdir_p(self, path: str) -> None:
        Path(path).mkdir(parents=True, exist_ok=True)

    def home(self) -> str:
        return str(Path.home())


def test_the_cpu_is_asked_of_the_board_itself(tmp_path: Path) -> None:
    reported = read_cpu(LocalBoard(tmp_path))  # type: ignore[arg-type]  # the session's methods it uses
    expected = parse_cpuinfo(Path("/proc/cpuinfo").read_text())
    assert reported == expected


# A "wheel" whose onnxruntime is this environment's, imported from wherever the wheel is unpacked:
# the training checks that the agent imported the wheel's, not the release's.
_ONNXRUNTIME = """import os as _os
import sysconfig as _sysconfig
_real = _os.path.join(_sysconfig.get_paths()["purelib"], "onnxruntime")
__path__.append(_real)
with open(_os.path.join(_real, "__init__.py")) as _file:
    exec(compile(_file.read(), _os.path.join(_real, "__init__.py"), "exec"))
"""


def _wheel(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("onnxruntime/__init__.py", _ONNXRUNTIME)
    return path


def _release(workdir: Path) -> None:
    """A release's interpreter where the training looks for one: this environment's Python."""
    python = workdir / "current" / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(f'#!/bin/sh\nexec "{sys.executable}" "$@"\n')
    python.chmod(0o755)


@dataclass(frozen=True)
class _Trained:
    training: Training
    model: Path
    workload: ModelWorkload
    workdir: Path


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> _Trained:
    """A wheel's training on this machine, as orch runs one on a board: two runs of a tiny model."""
    tmp_path = tmp_path_factory.mktemp("training")
    workdir = tmp_path / "board"
    _release(workdir)
    model = write_model(tiny_convnet(), tmp_path / "conv.onnx")
    workload = ModelWorkload(models=(model,), runs=2, inferences=3, threads=1, opt_level="basic")
    training = train_wheel(
        LocalBoard(workdir),  # type: ignore[arg-type]  # the session's methods it uses
        _wheel(tmp_path / "onnxruntime-1.21.0-cp311-cp311-linux_x86_64.whl"),
        workload=workload,
        cpu="cortex-a72; features: fp asimd",
        into=CountersInto(tmp_path / "counters", "gcc"),
    )
    return _Trained(training=training, model=model, workload=workload, workdir=workdir)


def test_a_stored_profile_records_the_models_real_sha256_and_the_settings_it_was_trained_with(
    tmp_path: Path, trained: _Trained
) -> None:
    training, model, workload, workdir = trained.training, trained.model, trained.workload, trained.workdir
    assert not list((workdir / "pgo").iterdir()), "the scratch directory is left on the board"
    key = ProfileKey.from_dict({**_KEY, "source_sha256": "ab" * 32})
    (tmp_path / "profile").mkdir()
    stored = ReadyProfile(
        where=tmp_path / "profile",
        key=key,
        flavour=GCC,
        trainings=(training,),
        coverage=Coverage(files=0, functions=0, functions_run=0, runs=0),
    )
    write_profile(stored)

    document = json.loads((tmp_path / "profile" / PROFILE_FILE).read_text())
    (trained,) = document["trainings"]
    assert trained["models"] == [
        {"name": "conv.onnx", "sha256": hashlib.sha256(model.read_bytes()).hexdigest()}
    ]
    assert trained["settings"] == {"threads": 1, "opt_level": "basic", "inferences": 3}
    assert trained["runs"] == 2 and trained["workload"] == workload.describe()
    assert ProfileKey.from_dict(document["key"]) == key
    # Read back as a --profile is: the same models and settings.
    (read,) = read_stored(tmp_path / "profile", key, GCC).trainings
    assert (read.models, read.settings) == (training.models, training.settings)


_KEY = {
    "target": "lab",
    "mcpu": "cortex-a72",
    "ort_version": "1.21.0",
    "source": "tarball /src/onnxruntime.tar.gz",
    "scope": "mlas-test",
    "toolchain": "system-gcc",
    "image": "orch/build:x",
    "variant": "pgo",
    "compiler_flags": ["-O3"],
    "build_args": [],
}


# -- a stored profile for a build ---------------------------------------------------------------------


def _tarball(path: Path, readme: str = "onnxruntime\n") -> Path:
    """A source tarball as upstream's: one top directory, the files orch reads before a build."""
    files = {"VERSION_NUMBER": "1.21.0\n", "tools/ci_build/build.py": "# build.py\n", "README.md": readme}
    with tarfile.open(path, "w:gz") as archive:
        for name, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(f"onnxruntime-1.21.0/{name}")
            info.size = len(data)
            archive.addfile(info, io.BytesIO(data))
    return path


def _args(tarball: Path, profile: Path) -> list[str]:
    return [
        "build", "--target", "lab", "--variant", "pgo", "--scope", "mlas-test",
        "--ort-source", str(tarball), "--profile", str(profile), "--dry-run",
    ]  # fmt: skip


def _orch(args: Sequence[str], home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        capture_output=True,
        text=True,
        env={"ORCH_HOME": str(home), "PATH": "/usr/bin:/bin"},
        timeout=120,
        check=False,
    )


def _plan(tarball: Path, profile: Path) -> BuildPlan:
    """The base build of ``orch build`` with these arguments (its key is the profile's)."""
    request = read_build_request(build_parser().parse_args(_args(tarball, profile)))
    context = PlanContext(docker_host=None, cache=None)
    return plan_build(request, resolve_target("lab"), resolve_variant("pgo"), context, None)


def _store(
    where: Path, tarball: Path, home: Path, monkeypatch: pytest.MonkeyPatch, *, cpu: str = "cortex-a72"
) -> ProfileKey:
    """A profile as a training of this build on a board reporting ``cpu`` stores it."""
    monkeypatch.setenv("ORCH_HOME", str(home))
    key = replace(
        profile_key(_plan(tarball, where)), source_sha256=hashlib.sha256(tarball.read_bytes()).hexdigest()
    )
    training = Training(
        board="lab1", cpu=f"{cpu}; features: fp asimd", workload="shard 2/80", runs=1, seconds=1.0
    )
    (where / "counters").mkdir(parents=True)
    coverage = Coverage(files=0, functions=0, functions_run=0, runs=0)
    write_profile(ReadyProfile(where=where, key=key, flavour=GCC, trainings=(training,), coverage=coverage))
    return key


def test_a_profile_trained_on_another_cpu_is_refused_for_the_build_unless_forced(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tarball = _tarball(tmp_path / "onnxruntime.tar.gz")
    home, profile = tmp_path / "home", tmp_path / "profile"
    _store(profile, tarball, home, monkeypatch, cpu="cortex-a76")
    refused = _orch(_args(tarball, profile), home)
    assert refused.returncode == 2, refused.stderr
    message = refused.stderr.replace("\n", " ")
    assert f"the profile in {profile} is of another CPU (lab1: a cortex-a76)" in message
    forced = _orch([*_args(tarball, profile), "--force-profile", "--json"], home)
    assert forced.returncode == 0, forced.stderr
    assert json.loads(forced.stdout)["profile_guided"]["profile"] == str(profile)


def test_a_profile_is_refused_for_an_edited_source_behind_the_same_name(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tarball = _tarball(tmp_path / "onnxruntime.tar.gz")
    home, profile = tmp_path / "home", tmp_path / "profile"
    key = _store(profile, tarball, home, monkeypatch)
    taken = _orch(_args(tarball, profile), home)
    assert taken.returncode == 0, taken.stderr
    _tarball(tarball, readme="onnxruntime, edited\n")
    edited = hashlib.sha256(tarball.read_bytes()).hexdigest()
    refused = _orch(_args(tarball, profile), home)
    assert refused.returncode == 2, refused.stderr
    assert (
        f"source: tarball {tarball} is not the source this profile was measured on"
        f" (its content: {str(key.source_sha256)[:16]} -> {edited[:16]})"
    ) in refused.stderr.replace("\n", " ")


def test_a_profile_stored_without_its_sources_content_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tarball = _tarball(tmp_path / "onnxruntime.tar.gz")
    home, profile = tmp_path / "home", tmp_path / "profile"
    _store(profile, tarball, home, monkeypatch)
    document = json.loads((profile / PROFILE_FILE).read_text())
    del document["key"]["source_sha256"]
    (profile / PROFILE_FILE).write_text(json.dumps(document))
    refused = _orch(_args(tarball, profile), home)
    assert refused.returncode == 2
    assert "does not say which source it was measured on" in refused.stderr.replace("\n", " ")


def test_an_optimised_build_of_another_source_than_the_profiles_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkout edited while its profile was trained (or behind a stored profile) is known by
    content only once the build has prepared it: the build's record is checked."""
    tarball = _tarball(tmp_path / "onnxruntime.tar.gz")
    home, profile = tmp_path / "home", tmp_path / "profile"
    key = _store(profile, tarball, home, monkeypatch)
    ready = read_stored(profile, key, GCC)
    record = build_record(_plan(tarball, profile), None)
    assert record.source is not None
    with pytest.raises(BuildError, match="recorded no identity of its source"):
        source_identity(record, build_dir=tmp_path)  # a record of no prepared source
    record = replace(record, source=replace(record.source, sha256=key.source_sha256))
    refuse_another_source(ready, source_identity(record, build_dir=tmp_path), build_dir=tmp_path)
    with pytest.raises(BuildError) as refused:
        refuse_another_source(ready, "git:" + "c" * 40, build_dir=tmp_path)
    assert (
        f"source: tarball {tarball} is not the source this profile was measured on" in refused.value.message
    )
    assert f"(its content: {str(key.source_sha256)[:16]} -> git:{'c' * 16})" in refused.value.message


# -- the loop with a stored profile -------------------------------------------------------------------


class _Builds:
    """The loop's ``execute_build``: stands in for the build container (Docker), as ``builds.run``
    hands the loop orch's own; leaves what a build leaves: its directory, its log, its record,
    whose source is ``compiled`` by content."""

    def __init__(self, root: Path, compiled: str) -> None:
        self.root, self.compiled = root, compiled
        self.plans: list[BuildPlan] = []

    def __call__(self, plan: BuildPlan, engine: object, options: object) -> BuildResult:
        self.plans.append(plan)
        build_dir = self.root / plan.artifact_variant
        build_dir.mkdir(parents=True)
        log = build_dir / "build.log"
        log.write_text("[1/3] Building CXX object a.cpp.o\n[2/3] Building CXX object b.cpp.o\n")
        tree = SourceTree(
            path=self.root, version="1.21.0", spec=plan.source, source_sha256=self.compiled, patches=()
        )
        return BuildResult(
            plan=plan,
            network=planned_needs(plan.network_needs, plan.network),
            build_dir=build_dir,
            log_path=log,
            duration_s=1.0,
            ccache=CompilerCacheUse(),
            artifact=None,
            incremental=IncrementalBuild(configure=None, ninja_steps=2),
            record=build_record(plan, tree),
        )


def _stored_with(
    trained: _Trained, tarball: Path, profile: Path, home: Path, monkeypatch: pytest.MonkeyPatch
) -> ProfileKey:
    key = _store(profile, tarball, home, monkeypatch)
    document = json.loads((profile / PROFILE_FILE).read_text())
    document["trainings"] = [trained.training.as_dict()]
    (profile / PROFILE_FILE).write_text(json.dumps(document))
    return key


def test_the_optimised_builds_record_keeps_the_stored_profiles_source_models_and_settings(
    tmp_path: Path, trained: _Trained, monkeypatch: pytest.MonkeyPatch
) -> None:
    tarball = _tarball(tmp_path / "onnxruntime.tar.gz")
    home, profile = tmp_path / "home", tmp_path / "profile"
    key = _stored_with(trained, tarball, profile, home, monkeypatch)
    request = read_build_request(
        build_parser().parse_args([a for a in _args(tarball, profile) if a != "--dry-run"])
    )
    planned = plan_profile_guided(
        request, resolve_target("lab"), resolve_variant("pgo"), PlanContext(docker_host=None, cache=None)
    )
    builds, notes = _Builds(tmp_path / "builds", compiled=str(key.source_sha256)), []
    result = run_profile_guided(planned, execute_build=builds, note=notes.append)

    (optimised,) = builds.plans  # the stored profile replaces the instrumented build and the training
    assert f"-fprofile-use=/orch-profile/{result.counters_digest[:16]}" in optimised.compiler_flags
    assert optimised.profile_input == (
        profile / "counters" / "orch-profile",
        f"/orch-profile/{result.counters_digest[:16]}",
    )
    assert notes == [f"[bold]3/3[/] the optimised build (profile {result.counters_digest[:12]})"]
    manifest = json.loads((result.optimised.build_dir / "manifest.json").read_text())
    assert manifest == result.record
    recorded = manifest["profile"]
    assert recorded["source_sha256"] == hashlib.sha256(tarball.read_bytes()).hexdigest()
    assert recorded["key_digest"] == key.digest and recorded["stored"] == str(profile)
    (training,) = recorded["trainings"]
    assert training["models"] == [
        {"name": "conv.onnx", "sha256": hashlib.sha256(trained.model.read_bytes()).hexdigest()}
    ]
    assert training["settings"] == {"threads": 1, "opt_level": "basic", "inferences": 3}
    assert recorded["use"]["sources_compiled"] == 2 and recorded["use"]["sources_with_counters"] == 2


def test_an_optimised_build_that_compiled_another_source_is_refused_and_keeps_no_profile(
    tmp_path: Path, trained: _Trained, monkeypatch: pytest.MonkeyPatch
) -> None:
    tarball = _tarball(tmp_path / "onnxruntime.tar.gz")
    home, profile = tmp_path / "home", tmp_path / "profile"
    _stored_with(trained, tarball, profile, home, monkeypatch)
    request = read_build_request(
        build_parser().parse_args([a for a in _args(tarball, profile) if a != "--dry-run"])
    )
    planned = plan_profile_guided(
        request, resolve_target("lab"), resolve_variant("pgo"), PlanContext(docker_host=None, cache=None)
    )
    builds = _Builds(tmp_path / "builds", compiled="f" * 64)  # the tarball changed after the plan read it
    with pytest.raises(BuildError, match="is not the source this profile was measured on"):
        run_profile_guided(planned, execute_build=builds, note=lambda _: None)
    assert not (tmp_path / "builds" / "pgo" / "manifest.json").exists()
