"""clang's profile-guided loop on the sysroot route, step by step and without Docker or boards: the
flags of the instrumented and the optimised build, the key that refuses another toolchain's or
another sysroot's profile, what llvm-profdata and clang print (real output, captured by
``pgo_clang_probe/probe.sh`` in the sysroot route's build image against a Debian 11 sysroot), the
merge's plan, the board-side script's clang mode and the dry run.

tests/builds/test_pgo_clang_loop.py runs the whole loop for the Debian 11 stand-in.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from orchestrator.board_side import read_text
from orchestrator.builds.pgo.clang import (
    ProfileShowError,
    coverage_of,
    functions_run,
    functions_with_counters,
    instrument_flags,
    optimise_flags,
    profile_use,
    raw_runs,
    tool_version,
)
from orchestrator.builds.pgo.flavour import CLANG, GCC, flavour_of
from orchestrator.builds.pgo.loop import plan_profile_guided, with_flags
from orchestrator.builds.pgo.merge import CLANG_SCRIPT, merge_raw_profiles
from orchestrator.builds.pgo.profile import ProfileUse, refuse_unless_fits
from orchestrator.builds.pgo.stored import profile_key
from orchestrator.builds.plan import BuildOptions, BuildPlan, make_plan
from orchestrator.builds.plan_view import show_profile_guided_plan
from orchestrator.builds.request import PlanContext, read_build_request
from orchestrator.builds.sources.ort_spec import parse_source
from orchestrator.builds.sysroots.target import SysrootRef
from orchestrator.builds.variants import resolve_variant
from orchestrator.cli import build_parser
from orchestrator.errors import UsageError
from orchestrator.targets import BoardOS, resolve_target

pytestmark = pytest.mark.unit

PROBE = Path(__file__).parent / "pgo_clang_probe"
BULLSEYE = BoardOS(distro="debian", release="11", codename="bullseye", glibc="2.31", python="3.9")
BOOKWORM = BoardOS(distro="debian", release="12", codename="bookworm", glibc="2.36", python="3.11")
HEADERS = ("usr/include/stdio.h", "usr/include/c++/10/vector")


def _sysroot(root: Path, board_os: BoardOS = BULLSEYE, digest: str = "ab" * 32) -> SysrootRef:
    for name in HEADERS:
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("")
    return SysrootRef(name="nano01", digest=digest, root=root, board="nano01", os=board_os)


def _plan(ref: SysrootRef | None, flags: tuple[str, ...] = (), *, target: str = "jetson-nano") -> BuildPlan:
    profile = resolve_target(target)
    if ref is not None:
        profile = replace(profile, os=ref.os, bootstrap_suite=ref.os.codename)
    variant = resolve_variant("pgo")
    if flags:
        variant = with_flags(variant, flags)
    options = BuildOptions(
        source=parse_source(None, version=None, suite="trixie"),
        scope="mlas-test",
        cpus=2,
        memory_bytes=24 << 30,
        sysroot=ref,
    )
    return make_plan(profile, variant, options)


# -- flags ------------------------------------------------------------------------------------------------


def test_the_sysroot_routes_instrumented_build_is_the_variant_plus_clangs_ir_instrumentation(
    tmp_path: Path,
) -> None:
    ref = _sysroot(tmp_path)
    base = _plan(ref)
    assert base.toolchain == "clang-sysroot" and flavour_of(base.toolchain) is CLANG
    instrumented = _plan(ref, CLANG.instrument_flags(base.target.mcpu))
    # clang ignores GCC's -finline-limit (the plan drops it); GCC's -fprofile-prefix-path has no
    # clang counterpart to pass: both builds compile at the same container paths.
    assert dict(instrumented.defines)["CMAKE_CXX_FLAGS"] == (
        "-O3 -mcpu=cortex-a57 -fprofile-generate=/orch-profile -fprofile-update=single"
    )
    assert [a for a in base.build_argv if "FLAGS=" not in a] == [
        a for a in instrumented.build_argv if "FLAGS=" not in a
    ]
    assert base.image.tag == instrumented.image.tag and base.image.tag.startswith("orch/build-clang-sysroot:")


def test_clangs_counters_are_atomic_only_on_cpus_with_lse_as_gccs_are() -> None:
    # With MLAS's own -march=armv8.2-a, clang 19 too makes an atomic counter update an inline LSE
    # `ldadd` (the probe's `-S` output), which a Cortex-A57 or A72 cannot run.
    assert instrument_flags("cortex-a57")[1] == "-fprofile-update=single"
    assert instrument_flags("cortex-a72")[1] == "-fprofile-update=single"
    assert instrument_flags("cortex-a76+nofp16")[1] == "-fprofile-update=prefer-atomic"
    assert instrument_flags("cortex-a78ae")[1] == "-fprofile-update=prefer-atomic"
    assert GCC.instrument_flags("cortex-a57")[1] == "-fprofile-update=single"


def test_the_optimised_build_reads_the_merged_profile_and_stale_data_never_fails_it(tmp_path: Path) -> None:
    digest = "cd" * 32
    flags = optimise_flags(digest)
    assert flags[0] == f"-fprofile-use=/orch-profile/{'cd' * 8}/merged.profdata"
    # clang names a function whose code no longer fits the profile as a -Wbackend-plugin warning:
    # with -Werror alone that compile failed in the probe, with this flag it warned.
    assert "-Wno-error=backend-plugin" in flags
    # Each function without data named, through -Xclang: a bare -mllvm would make the link warn
    # "argument unused during compilation", which fails CMake's compiler-flag checks.
    assert " ".join(flags).endswith("-Xclang -mllvm -Xclang -pgo-warn-missing-function")
    assert "-mllvm" not in [flag for index, flag in enumerate(flags) if flags[index - 1] != "-Xclang"]
    optimised = _plan(_sysroot(tmp_path), flags)
    assert dict(optimised.defines)["CMAKE_CXX_FLAGS"] == "-O3 -mcpu=cortex-a57 " + " ".join(flags)
    assert "--compile_no_warning_as_error" in optimised.build_argv


# -- the key ----------------------------------------------------------------------------------------------


def test_a_gcc_profile_is_refused_for_the_clang_build_of_the_same_board_and_back(tmp_path: Path) -> None:
    gcc = profile_key(_plan(None, target="rpi4-bookworm"))
    clang = profile_key(_plan(_sysroot(tmp_path, BOOKWORM), target="rpi4-bookworm"))
    assert gcc.toolchain == "gcc-multiarch" and clang.toolchain == "clang-sysroot"
    for stored, build in ((gcc, clang), (clang, gcc)):
        with pytest.raises(UsageError) as refused:
            refuse_unless_fits(stored, build, where=tmp_path)
        message = refused.value.message
        assert f"toolchain: {stored.toolchain!r} -> {build.toolchain!r}" in message
        assert "image: 'orch/build-" in message and "sysroot: " in message
    # A GCC key has no sysroot: its document (and digest) is what it was before clang's loop.
    assert "sysroot" not in gcc.as_dict() and clang.as_dict()["sysroot"] == "ab" * 32


def test_a_profile_trained_against_another_sysroot_is_refused(tmp_path: Path) -> None:
    one = profile_key(_plan(_sysroot(tmp_path / "a")))
    assert profile_key(_plan(_sysroot(tmp_path / "a"))).digest == one.digest
    other = profile_key(_plan(_sysroot(tmp_path / "b", digest="ef" * 32)))
    with pytest.raises(UsageError) as refused:
        refuse_unless_fits(one, other, where=tmp_path)
    assert refused.value.message.endswith(f"sysroot: {'ab' * 32!r} -> {'ef' * 32!r}")
    assert type(one).from_dict(json.loads(json.dumps(one.as_dict()))) == one


# -- what llvm-profdata and clang print -------------------------------------------------------------------


def test_llvm_profdata_show_says_which_functions_have_counters_and_which_ran() -> None:
    assert functions_with_counters((PROBE / "show.txt").read_text()) == 4
    assert functions_run((PROBE / "covered.txt").read_text()) == 3  # main, work, cold_path
    assert tool_version((PROBE / "version.txt").read_text()) == "Debian LLVM version 19.1.7"
    with pytest.raises(ProfileShowError, match="IR-level"):
        functions_with_counters("Instrumentation level: Front-end\nTotal functions: 3\n")
    with pytest.raises(ProfileShowError, match="not the summary"):
        functions_with_counters("error: merged.profdata: No such file or directory\n")


def _boards(root: Path) -> list[Path]:
    """The probe's raw profiles laid out as orch stores them: one tree per board."""
    for name in (PROBE / "raw_profiles.txt").read_text().split():
        (root / "boards" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "boards" / name).write_bytes(b"")
    return sorted((root / "boards").iterdir())


def test_the_runs_are_counted_from_the_raw_profiles_one_per_binary_and_process(tmp_path: Path) -> None:
    # IR profiles hold no run count: each run of a binary writes <signature>_<pool>-<pid>.profraw.
    boards = _boards(tmp_path)
    assert [raw_runs(p.name for p in board.iterdir()) for board in boards] == [2, 2]
    assert raw_runs(["1_0-5.profraw", "1_0-6.profraw", "2_0-5.profraw", "x.gcda"]) == 2
    assert raw_runs([]) == 0
    merged = tmp_path / "counters"
    merged.mkdir()
    for name in ("show.txt", "covered.txt"):
        shutil.copy(PROBE / name, merged / name)
    coverage = coverage_of(merged, boards)
    assert (coverage.files, coverage.functions, coverage.functions_run, coverage.runs) == (4, 4, 3, 4)


def test_clang_names_each_function_without_data_and_each_whose_code_changed() -> None:
    # The probe's optimised compiles of hot.c, cold.c and other.c (never run anywhere).
    use = profile_use((PROBE / "optimised.log").read_text().splitlines(), compiled=3)
    assert (use.compiled, use.with_counters, use.without_counters) == (3, 2, 1)
    assert use.as_dict() == {
        "sources_compiled": 3,
        "sources_with_counters": 2,
        "sources_without_counters": 1,
        "functions_without_data": 1,
        "functions_stale": 0,
    }
    # hot.c against another program's profile: main's code changed, work() is not in it.
    other = profile_use((PROBE / "optimised-other-program.log").read_text().splitlines(), compiled=1)
    assert (other.functions_stale, other.functions_without_data, other.with_counters) == (1, 1, 0)
    # -Werror without -Wno-error=backend-plugin: the same lines as errors, still counted.
    errors = [
        "error: /src/a.cpp: no profile data available for function f Hash = 1 [-Werror,-Wbackend-plugin]"
    ]
    assert profile_use(errors, compiled=1).functions_without_data == 1
    # GCC's record is what it was: no function counts.
    assert "functions_stale" not in ProfileUse(compiled=2, without_counters=1).as_dict()


# -- the merge --------------------------------------------------------------------------------------------


class _Engine:
    """Stands in for the engine: records the container it is asked to run and writes what
    llvm-profdata would (the probe's own words)."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []

    def run(self, image: str, argv: list[str], **kwargs: Any) -> int:
        staged = kwargs["copy_in"][0][0]
        self.calls.append(
            {
                "image": image,
                "argv": argv,
                "network": kwargs["network"],
                "staged": sorted(p.relative_to(staged).as_posix() for p in staged.rglob("*") if p.is_file()),
            }
        )
        out = kwargs["copy_out"][0][1] / "out"
        out.mkdir()
        for name in ("show.txt", "covered.txt", "version.txt"):
            shutil.copy(PROBE / name, out / name)
        (out / "merged.profdata").write_bytes(b"indexed")
        return 0


def test_the_boards_raw_profiles_are_merged_by_the_compilers_own_llvm_profdata(tmp_path: Path) -> None:
    boards = _boards(tmp_path)
    engine = _Engine()
    merged = merge_raw_profiles(engine, "orch/build-clang-sysroot:x", boards, tmp_path / "counters")
    (call,) = engine.calls
    assert call["argv"] == [
        "sh",
        f"/merge/in/{CLANG_SCRIPT.name}",
        "llvm-profdata-19",
        "/merge/in/0",
        "/merge/in/1",
    ]
    assert call["network"] == "none" and call["image"] == "orch/build-clang-sysroot:x"
    assert (
        "merge_profiles.sh" in call["staged"] and len([n for n in call["staged"] if n.startswith("0/")]) == 2
    )
    assert merged.as_dict() == {
        "tool": "llvm-profdata-19",
        "version": "Debian LLVM version 19.1.7",
        "image": "orch/build-clang-sysroot:x",
        "raw_profiles": 4,
        "boards": 2,
    }
    assert (tmp_path / "counters" / "merged.profdata").read_bytes() == b"indexed"
    # One board too: the optimised build reads an indexed profile, never raw ones.
    assert CLANG.merges(1) and not GCC.merges(1) and GCC.merges(2)
    assert CLANG.merge_tool("aarch64-linux-gnu-") == "llvm-profdata-19"


# -- the board-side script --------------------------------------------------------------------------------

# A stand-in for an instrumented program: writes the raw profile LLVM_PROFILE_FILE names (%m: one
# binary, %p: this process) and the counter file under GCOV_PREFIX, as the runtimes do at exit.
_PROGRAM = (
    'if [ -n "${LLVM_PROFILE_FILE:-}" ]; then'
    ' f=$(printf %s "$LLVM_PROFILE_FILE" | sed "s/%m/77_0/; s/%p/$$/"); : > "$f"; fi;'
    ' if [ -n "${GCOV_PREFIX:-}" ]; then mkdir -p "$GCOV_PREFIX/orch-profile"; : > "$GCOV_PREFIX/orch-profile/a.gcda"; fi'
)


def _train(tmp_path: Path, compiler: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", "-s", "--", str(tmp_path / "scratch"), "3", compiler, "X=1", "sh", "-c", _PROGRAM],
        input=read_text("pgo_train.sh"),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_the_board_script_names_clangs_raw_profiles_per_binary_and_run(tmp_path: Path) -> None:
    ran = _train(tmp_path, "clang")
    assert ran.returncode == 0, ran.stderr
    assert "files=3" in ran.stdout.splitlines()
    names = [p.name for p in (tmp_path / "scratch" / "counters").iterdir()]
    assert raw_runs(names) == 3 and all(name.startswith("77_0-") for name in names)
    gcc = _train(tmp_path / "gcc", "gcc")
    assert gcc.returncode == 0 and "files=1" in gcc.stdout.splitlines()
    assert not list((tmp_path / "gcc" / "scratch" / "counters").glob("*.profraw"))
    unknown = _train(tmp_path / "x", "icc")
    assert unknown.returncode == 2 and "unknown compiler 'icc'" in unknown.stderr


# -- the dry run ------------------------------------------------------------------------------------------


def test_the_dry_run_on_the_sysroot_route_shows_clangs_flags_and_the_llvm_profdata_merge(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ORCH_HOME", str(tmp_path / "home"))
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text("all:\n  hosts:\n    nano01: {hostname: 127.0.0.1, target: jetson-nano}\n")
    argv = ["build", "--target", "jetson-nano", "--variant", "pgo", "--scope", "mlas-test"]
    argv += ["--train-on", "nano01", "--inventory", str(inventory), "--sysroot-from", "nano01"]
    request = read_build_request(build_parser().parse_args([*argv, "--dry-run", "--json"]))
    ref = _sysroot(tmp_path / "sysroot")
    profile = replace(resolve_target("jetson-nano"), os=ref.os, bootstrap_suite=ref.os.codename)
    context = PlanContext(docker_host=None, cache=None, sysroot=ref)

    show_profile_guided_plan(
        plan_profile_guided(request, profile, resolve_variant("pgo"), context), as_json=request.json
    )
    document = json.loads(capsys.readouterr().out)
    steps = document["profile_guided"]
    assert document["toolchain"] == "clang-sysroot"
    instrument = steps["instrument"]["compiler_flags"]
    assert instrument == [
        "-O3",
        "-mcpu=cortex-a57",
        "-fprofile-generate=/orch-profile",
        "-fprofile-update=single",
    ]
    assert steps["train"] == {
        "boards": ["nano01"],
        "workload": "onnxruntime_mlas_test shard 2/80, 1 run(s)",
        "merge": "llvm-profdata-19 merge",
    }
    optimise = steps["optimise"]["compiler_flags"]
    assert optimise[:2] == ["-O3", "-mcpu=cortex-a57"] and optimise[-1] == "-fprofile-use=..."
    assert "-Wno-error=backend-plugin" in optimise and "-pgo-warn-missing-function" in optimise
    assert not any(flag.startswith(("-finline-limit", "-fprofile-prefix-path")) for flag in optimise)
    assert steps["key_digest"] == profile_key(_plan(ref)).digest
