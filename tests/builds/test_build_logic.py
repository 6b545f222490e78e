"""Build bookkeeping on real inputs: first error of a log, ccache statistics, the compile_commands
read-back, and the CLI's plan/refusal paths."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from orchestrator.builds.build_log import LogSink, first_error, lto_dropped
from orchestrator.builds.build_report import parse_ccache_stats, readback_flags
from orchestrator.console import PlainProgress
from orchestrator.errors import BuildError
from orchestrator.targets import known_target_names, resolve_target

FAILED_LOG = """\
[12/529] Building CXX object CMakeFiles/onnxruntime_common.dir/src/onnxruntime/core/common/status.cc.o
In file included from /src/onnxruntime/core/providers/cpu/math/element_wise_ops.cc:4:
/src/onnxruntime/core/providers/cpu/math/element_wise_ops.cc:816:47: error: no matching function for call to 'min'
FAILED: CMakeFiles/onnxruntime_providers.dir/src/onnxruntime/core/providers/cpu/math/element_wise_ops.cc.o
ninja: build stopped: subcommand failed.
Traceback (most recent call last):
"""

STATS = (
    "stats_updated_timestamp\t1764440000\ndirect_cache_hit\t480\npreprocessed_cache_hit\t12\ncache_miss\t37\n"
)


def test_first_error_is_the_compiler_line_not_the_noise_after_it() -> None:
    assert first_error(FAILED_LOG.splitlines()) == (
        "/src/onnxruntime/core/providers/cpu/math/element_wise_ops.cc:816:47: error: no matching function for call "
        "to 'min'"
    )
    cmake = [
        "-- Configuring",
        "CMake Error at external/eigen.cmake:6 (onnxruntime_fetchcontent_declare):",
        '  Could not find a package configuration file provided by "eigen"',
    ]
    assert "Could not find a package configuration" in first_error(cmake)
    assert first_error(["[1/2] ok", "[2/2] ok"]) is None


def test_ccache_statistics() -> None:
    stats = parse_ccache_stats(STATS)
    assert (stats.hits, stats.misses, stats.hit_rate) == (492, 37, round(492 / 529, 4))
    assert parse_ccache_stats("").hit_rate is None


def test_readback_proves_flags_reached_mlas_and_the_session(tmp_path: Path) -> None:
    entries = [
        {
            "file": "/src/onnxruntime/core/mlas/lib/sgemm.cpp",
            "directory": "/build/Release",
            "command": "/usr/bin/aarch64-linux-gnu-g++ -O3 -mcpu=cortex-a72 -finline-limit=600 -flto=auto -c x.cpp",
        },
        {
            "file": "/src/onnxruntime/core/session/inference_session.cc",
            "directory": "/build/Release",
            "arguments": ["g++", "-O3", "-mcpu=cortex-a72", "-finline-limit=600", "-c", "y.cc"],
        },
    ]
    path = tmp_path / "compile_commands.json"
    path.write_text(json.dumps(entries))
    found = readback_flags(path, ["-mcpu=cortex-a72", "-finline-limit=600", "-flto"])
    assert all(found["mlas"]["flags"].values())
    assert found["session"]["flags"] == {"-mcpu=cortex-a72": True, "-finline-limit=600": True, "-flto": False}


# Targets whose build image orch makes offline: their dry run needs no engine. The others (the
# Ubuntu-based Jetsons) are refused before a plan or by the engine's images: test_dry_run_refusals.py.
@pytest.mark.parametrize("target", [t for t in known_target_names() if resolve_target(t).bootstrap_suite])
def test_cli_dry_run_json_for_every_target(target: str, orch_env: dict[str, str], orch_cli) -> None:
    result = orch_cli(
        orch_env, "build", "--target", target, "--variant", "tuned", "--dry-run", "--json", check=True
    )
    plan = json.loads(result.stdout)
    assert plan["target"] == target and plan["variant"] == "tuned"
    assert plan["command"].startswith("python3 /src/tools/ci_build/build.py")
    assert "set(CMAKE_SYSTEM_PROCESSOR aarch64)" in plan["toolchain_file_text"]


def test_cli_dry_run_human_output_shows_image_flags_and_command(orch_env: dict[str, str], orch_cli) -> None:
    result = orch_cli(orch_env, "build", "--target", "rpi4-bookworm", "--dry-run", check=True)
    for text in (
        "orch/build-bookworm-source:",
        "-mcpu=cortex-a72",
        "--enable_lto",
        "aarch64-linux-gnu.cmake",
        "QEMU_CPU=cortex-a72",
        "GLIBC <= 2.36",
    ):
        assert text in result.stderr


def test_cli_stock_dry_run_shows_the_pip_download(orch_env: dict[str, str], orch_cli) -> None:
    result = orch_cli(
        orch_env,
        "build",
        "--target",
        "rpi5-bookworm",
        "--variant",
        "stock",
        "--dry-run",
        "--json",
        check=True,
    )
    argv = json.loads(result.stdout)["download_argv"]
    assert "--only-binary=:all:" in argv and "manylinux_2_28_aarch64" in argv and "3.11" in argv
    assert "manylinux_2_37_aarch64" not in argv  # never newer than the board's glibc 2.36


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--target", "pi9"], "unknown target 'pi9'"),
        (["--target", "lab", "--variant", "turbo"], "unknown variant 'turbo'"),
        (["--target", "lab", "--cmake-define", "NOEQUALS", "--dry-run"], "NAME=VALUE"),
        (["--target", "lab", "--parallel", "0"], "--parallel"),
        (["--target", "lab", "--ort-source", "/nonexistent/ort", "--dry-run"], "neither"),
        ([], "needs --target"),
    ],
)
def test_cli_bad_input_is_a_clear_error(
    args: list[str], message: str, orch_env: dict[str, str], orch_cli
) -> None:
    result = orch_cli(orch_env, "build", *args)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr


def test_ninjas_glob_check_is_no_build_step_on_the_progress_bar() -> None:
    """An unchanged rebuild of ORT's tree prints only the glob check and "no work to do": no
    progress of 0/2 steps, and every line still in the log."""
    steps: list[tuple[int, int]] = []
    log = io.StringIO()
    sink = LogSink(log, lambda done, total: steps.append((done, total)), None)
    for line in ("[0/2] Re-checking globbed directories...", "ninja: no work to do."):
        sink(line)
    assert steps == []
    sink("[1/3] Building CXX object a.o")
    assert steps == [(1, 3)]
    assert log.getvalue().count("\n") == 3


def test_a_build_of_an_lto_variant_stops_where_orts_configure_drops_lto() -> None:
    """CMake's IPO check failing is only a warning in ORT's configure, which then compiles without
    LTO: an LTO variant's build stops at that line (the container route passes ``lto_dropped``
    when the plan has ``--enable_lto``), with the line kept in the log."""
    log = io.StringIO()
    sink = LogSink(log, None, None, lto_dropped)
    sink("-- Detecting CXX compile features - done")
    with pytest.raises(BuildError, match="without the LTO it asks for"):
        sink("  IPO is not supported by this compiler")
    assert log.getvalue().endswith("IPO is not supported by this compiler\n")
    other = LogSink(io.StringIO(), None, None)  # a variant without LTO: the warning is no reason to stop
    other("  IPO is not supported by this compiler")
    assert other.lines == ["  IPO is not supported by this compiler"]


def test_build_progress_in_a_plain_log_is_a_line_a_minute_and_one_at_the_end() -> None:
    """Not a terminal (CI logs, `| tee`): the bar draws nothing, so lines say how far ninja is."""
    lines: list[str] = []
    now = [0.0]
    progress = PlainProgress("compiling (ninja steps)", say=lines.append, clock=lambda: now[0])
    for step in range(1, 601):  # 600 steps, one every 0.5 s: 300 s in all
        now[0] = step * 0.5
        progress(step, 600)
    progress(600, 600)  # ninja's last line seen twice: still one final line
    assert lines[0] == "compiling (ninja steps): 1/600 (0%) after 0m00s"
    assert lines[1] == "compiling (ninja steps): 121/600 (20%) after 1m00s"
    assert lines[-1] == "compiling (ninja steps): 600/600 (100%) after 4m59s"
    assert len(lines) == 6  # at 0, 1, 2, 3, 4 minutes, and the end


def test_cli_dry_run_of_several_builds_plans_each_one(orch_env: dict[str, str], orch_cli) -> None:
    """Several variants (or engines) go through the batch path: planned like single builds."""
    result = orch_cli(
        orch_env, "build", "--target", "lab", "--variant", "tuned,default", "--dry-run", "--json", check=True
    )
    plans = json.loads(result.stdout)["builds"]
    assert [(p["target"], p["variant"]) for p in plans] == [("lab", "tuned"), ("lab", "default")]
    refused = orch_cli(
        orch_env, "build", "--target", "lab", "--variant", "tuned,default", "--sysroot-from", "x", "--dry-run"
    )
    assert refused.returncode == 2 and "--sysroot-from builds for one board's OS" in refused.stderr
