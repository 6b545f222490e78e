"""The profile-guided build's plan, step by step: the instrumented and the optimised build's flags,
the key a profile is valid for, the refusals before anything is compiled, and what counter files say.

The counter files here are written in GCC's documented format (``gcov-io.h``, GCC 12 and newer);
tests/builds/test_pgo_loop.py reads the ones a real training on a lab board wrote.
"""

from __future__ import annotations

import argparse
import struct
import subprocess
import sys
from pathlib import Path

import pytest

from orchestrator.builds.pgo.loop import with_flags
from orchestrator.builds.pgo.profile import (
    CounterFileError,
    coverage_of,
    instrument_flags,
    optimise_flags,
    profile_use,
    read_counters,
    refuse_unless_fits,
)
from orchestrator.builds.pgo.stored import profile_key
from orchestrator.builds.plan import BuildOptions, make_plan
from orchestrator.builds.request import read_train_request
from orchestrator.builds.sources.ort_spec import SourceSpec
from orchestrator.builds.variants import resolve_variant
from orchestrator.errors import UsageError
from orchestrator.lab.sample_models import tiny_convnet, write_model
from orchestrator.targets import resolve_target

pytestmark = pytest.mark.unit

SOURCE = SourceSpec(kind="debian", location="trixie", ref=None, version="1.21.0")


def _plan(flags: tuple[str, ...] = (), *, suffix: str = "", target: str = "lab", defines=()):
    variant = resolve_variant("pgo")
    if flags:
        variant = with_flags(variant, flags, suffix=suffix)
    options = BuildOptions(
        source=SOURCE, scope="mlas-test", cpus=2, memory_bytes=24 << 30, extra_defines=defines
    )
    return make_plan(resolve_target(target), variant, options)


def test_the_instrumented_and_the_optimised_build_are_the_variant_plus_the_profile_flags_only() -> None:
    base, instrumented = _plan(), _plan(instrument_flags("cortex-a72"), suffix="-instrumented")
    optimised = _plan(optimise_flags("ab" * 32))
    cflags = dict(base.defines)["CMAKE_CXX_FLAGS"]
    assert cflags == "-O3 -mcpu=cortex-a72 -finline-limit=600"
    assert dict(instrumented.defines)["CMAKE_CXX_FLAGS"] == (
        "-O3 -mcpu=cortex-a72 -fprofile-generate=/orch-profile -fprofile-update=single"
        " -fprofile-prefix-path=/build -finline-limit=600"
    )
    assert dict(optimised.defines)["CMAKE_CXX_FLAGS"].startswith(
        f"-O3 -mcpu=cortex-a72 -fprofile-use=/orch-profile/{'ab' * 8} -fprofile-prefix-path=/build"
    )
    assert "-fprofile-partial-training" in optimised.compiler_flags
    # The same build otherwise: arguments, image, toolchain; the instrumented one stored apart.
    strip = {"--cmake_extra_defines"}
    assert [a for a in base.build_argv if "FLAGS=" not in a and a not in strip] == [
        a for a in optimised.build_argv if "FLAGS=" not in a and a not in strip
    ]
    assert instrumented.artifact_variant == "pgo-instrumented" and optimised.artifact_variant == "pgo"
    assert base.image.tag == instrumented.image.tag == optimised.image.tag
    # Sources without counters are reported by GCC as warnings, never fatal.
    assert "--compile_no_warning_as_error" in optimised.build_argv


def test_counters_are_atomic_only_on_cpus_with_lse() -> None:
    # MLAS's own -march=armv8.2-a files would inline LSE atomics (ldadd), which an A72/A57 lacks.
    assert "-fprofile-update=single" in instrument_flags("cortex-a72")
    assert "-fprofile-update=single" in instrument_flags("cortex-a57")
    assert "-fprofile-update=prefer-atomic" in instrument_flags("cortex-a76+nofp16")
    assert "-fprofile-update=prefer-atomic" in instrument_flags("cortex-a78ae")


def test_a_profile_is_valid_only_for_the_build_that_measured_it(tmp_path: Path) -> None:
    key = profile_key(_plan())
    assert profile_key(_plan()) == key and profile_key(_plan()).digest == key.digest
    refuse_unless_fits(key, profile_key(_plan()), where=tmp_path)
    # Another CMake define: another build, named by what it adds.
    other = profile_key(_plan(defines=(("onnxruntime_USE_KLEIDIAI", "OFF"),)))
    with pytest.raises(UsageError) as refused:
        refuse_unless_fits(key, other, where=tmp_path)
    assert refused.value.message == (
        f"the profile in {tmp_path} was measured on another build: build_args: +onnxruntime_USE_KLEIDIAI=OFF"
    )
    # Another CPU's build: other object code (-mcpu), whatever the board that trained it.
    with pytest.raises(UsageError) as refused:
        refuse_unless_fits(key, profile_key(_plan(target="rpi5")), where=tmp_path)
    assert "mcpu: 'cortex-a72' -> 'cortex-a76+nofp16'" in refused.value.message
    assert "compiler_flags: --mcpu=cortex-a72 +-mcpu=cortex-a76+nofp16;" in refused.value.message


def _orch(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        capture_output=True,
        text=True,
        env={"ORCH_HOME": str(home), "PATH": "/usr/bin:/bin"},
        timeout=120,
        check=False,
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--variant", "pgo", "--scope", "mlas-test"), "is trained on a board: name it with --train-on"),
        (("--variant", "pgo", "--train-on", "b1"), "a profile-guided wheel is trained on your models"),
        (
            ("--variant", "pgo", "--scope", "mlas-test", "--train-on", "b1", "--model", "{model}"),
            "not on models",
        ),
        (("--variant", "tuned", "--train-on", "b1"), "'tuned' is not one"),
        (("--variant", "pgo,tuned", "--train-on", "b1"), "one target and one variant"),
        (("--variant", "pgo", "--train-on", "b1", "--profile", "{model}"), "give one of them"),
        (
            ("--variant", "pgo", "--train-on", "b1", "--docker-host", "ssh://me@127.0.0.1"),
            "this machine's engine",
        ),
        (("--variant", "pgo", "--scope", "mlas-test", "--train-shard", "3/2", "--train-on", "b1"), "not K/N"),
    ],
)
@pytest.mark.parametrize("dry", [True, False])
def test_what_a_profile_guided_build_cannot_do_is_refused_before_anything_runs(
    tmp_path: Path, args: tuple[str, ...], message: str, dry: bool
) -> None:
    model = write_model(tiny_convnet(), tmp_path / "m.onnx")
    args = tuple(arg.format(model=model) for arg in args)
    refused = _orch("build", "--target", "lab", *args, *(["--dry-run"] if dry else []), home=tmp_path)
    assert refused.returncode == 2, refused.stderr
    assert message in refused.stderr and "Traceback" not in refused.stderr


def test_a_stored_profile_that_is_not_one_is_refused_by_the_dry_run_too(tmp_path: Path) -> None:
    args = (
        "build",
        "--target",
        "lab",
        "--variant",
        "pgo",
        "--scope",
        "mlas-test",
        "--profile",
        str(tmp_path),
    )
    for extra in (["--dry-run"], []):
        refused = _orch(*args, *extra, home=tmp_path)
        assert (
            refused.returncode == 2
            and f"{tmp_path}/profile.json: not a profile orch stored" in refused.stderr
        )


# -- counter files ---------------------------------------------------------------------------------------

_VERSION = int.from_bytes(b"B42*", "big")  # GCC 14.2


def _gcda(functions: list[list[int] | None], runs: int, *, version: int = _VERSION) -> bytes:
    """A counter file: per function its arc counts (None: a function that was not emitted)."""
    data = struct.pack("<4I", 0x67636461, version, 0x1234, 0x5678)
    for counts in functions:
        if counts is None:
            data += struct.pack("<Ii", 0x01000000, 0)
            continue
        data += struct.pack("<Ii3I", 0x01000000, 12, 1, 2, 3)
        if any(counts):
            data += struct.pack(f"<Ii{len(counts)}q", 0x01A10000, 8 * len(counts), *counts)
        else:  # GCC 12+: a counter record of zeros is only its negative length
            data += struct.pack("<Ii", 0x01A10000, -8 * len(counts))
    return data + struct.pack("<IiII", 0xA1000000, 8, runs, 99)


def test_counter_files_say_which_functions_ran_and_how_many_runs_they_add_up(tmp_path: Path) -> None:
    assert read_counters(_gcda([[0, 5], [0, 0, 0], None, [7]], runs=3)) == (3, 2, 3)
    (tmp_path / "orch-profile").mkdir()
    (tmp_path / "orch-profile" / "a.gcda").write_bytes(_gcda([[1], [0]], runs=2))
    (tmp_path / "orch-profile" / "b.gcda").write_bytes(_gcda([[0]], runs=2))
    coverage = coverage_of(tmp_path)
    assert (coverage.files, coverage.functions, coverage.functions_run, coverage.runs) == (2, 3, 1, 2)
    assert coverage.as_dict()["share_of_functions_run"] == round(1 / 3, 4)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"not a counter file at all", "no 'gcda' magic"),
        (_gcda([[1]], runs=1, version=int.from_bytes(b"B15*", "big")), "written by GCC 11"),
        (_gcda([[1, 2, 3]], runs=1)[:-30], "cut short"),
    ],
)
def test_a_file_that_is_no_counter_file_orch_reads_is_named(data: bytes, message: str) -> None:
    with pytest.raises(CounterFileError, match=message):
        read_counters(data, name="x.gcda")


def test_gcc_names_each_source_it_had_no_counters_for() -> None:
    lines = [
        "[3/9] Building CXX object CMakeFiles/x.dir/a.cpp.o",
        (
            "/src/a.cpp: warning: '/orch-profile/0123/Release#a.cpp.gcda' profile count data file not found"
            " [-Wmissing-profile]"
        ),
        "[4/9] Building CXX object CMakeFiles/x.dir/b.cpp.o",
    ]
    use = profile_use(lines, compiled=2)
    assert (use.compiled, use.with_counters, use.without_counters) == (2, 1, 1)


def test_several_training_boards_are_named_by_repeating_the_option_or_with_commas() -> None:
    args = argparse.Namespace(
        train_on=["lab1,lab2", "lab2", "lab3"],
        profile=None,
        train_shard="2/80",
        train_runs=1,
        train_inferences=1,
        train_threads=0,
        model=[],
        force_profile=False,
        inventory=None,
    )
    # In the order given, each board once: their counters are added up into one profile.
    assert read_train_request(args).boards == ("lab1", "lab2", "lab3")
