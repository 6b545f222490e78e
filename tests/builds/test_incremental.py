"""Incremental rebuilds: run_build.sh skips CMake's configure step only when the kept build
directory was configured with the very same inputs (the real script, run by a real `sh`), the
stamp that says so, what the build reports, and the compiler-cache column of `orch build list`."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from test_manifest import BUILT

from orchestrator.builds.build_report import IncrementalBuild, configure_stamp, read_incremental
from orchestrator.builds.plan import BuildOptions, make_plan
from orchestrator.builds.sources.ort_spec import parse_source
from orchestrator.builds.variants import resolve_variant
from orchestrator.paths import DOCKER_DIR
from orchestrator.targets import resolve_target

RUN_BUILD = DOCKER_DIR / "build" / "run_build.sh"


def _run(tmp_path: Path, stamp: str, *, fail: bool = False) -> tuple[list[str], str]:
    """run_build.sh around a stand-in for build.py that records the arguments it got."""
    config = tmp_path / "Release"
    config.mkdir(exist_ok=True)
    (config / "build.ninja").touch()
    seen = tmp_path / "argv"
    stand_in = f'printf "%s\\n" "$@" > {seen}; exit {1 if fail else 0}'
    env = {
        **os.environ,
        "ORCH_CONFIG_DIR": str(config),
        "ORCH_CONFIGURE_STAMP": stamp,
        "ORCH_REPORT_DIR": str(tmp_path / "report"),
        "CCACHE_DIR": str(tmp_path / "ccache"),
    }
    result = subprocess.run(
        [
            "sh",
            str(RUN_BUILD),
            "sh",
            "-c",
            stand_in,
            "build.py",
            "--build_dir",
            "/build",
            "--update",
            "--build",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == (1 if fail else 0), result.stderr
    return seen.read_text().split(), (tmp_path / "report" / "configure.txt").read_text().strip()


def test_configure_runs_once_per_set_of_inputs(tmp_path: Path) -> None:
    assert _run(tmp_path, "a" * 64) == (["--build_dir", "/build", "--update", "--build"], "ran")
    # The same inputs: build.py gets no --update (CMake does not run again), ninja does the rest.
    assert _run(tmp_path, "a" * 64) == (["--build_dir", "/build", "--build"], "reused")
    # Another flag, image, source or toolchain file: configured again.
    assert _run(tmp_path, "b" * 64) == (["--build_dir", "/build", "--update", "--build"], "ran")
    # A failed build leaves no stamp: the next one configures again.
    _run(tmp_path, "b" * 64, fail=True)
    assert _run(tmp_path, "b" * 64)[1] == "ran"
    assert _run(tmp_path, "b" * 64)[1] == "reused"


def test_configuring_again_forgets_the_defines_of_the_last_configure(tmp_path: Path) -> None:
    """CMake's cache keeps a -D the new arguments no longer give: configuring again starts without it."""
    config = tmp_path / "Release"
    config.mkdir()
    cache = config / "CMakeCache.txt"
    env = {
        **os.environ,
        "ORCH_CONFIG_DIR": str(config),
        "ORCH_REPORT_DIR": str(tmp_path / "report"),
        "CCACHE_DIR": str(tmp_path / "ccache"),
    }
    # The fake build.py: "configures" by writing the cache and build.ninja, as CMake would.
    build = f"echo CMAKE_CXX_FLAGS_RELEASE:STRING=-O2 >> {cache}; touch {config / 'build.ninja'}"
    subprocess.run(
        ["sh", str(RUN_BUILD), "sh", "-c", build], env={**env, "ORCH_CONFIGURE_STAMP": "a" * 64}, check=True
    )
    # Same inputs: nothing configured, the cache as it was.
    subprocess.run(["sh", str(RUN_BUILD), "true"], env={**env, "ORCH_CONFIGURE_STAMP": "a" * 64}, check=True)
    assert cache.read_text().count("-O2") == 1
    # Other inputs (the -D taken out): configured from an empty cache, the old value gone.
    subprocess.run(
        ["sh", str(RUN_BUILD), "sh", "-c", f"test ! -e {cache}"],
        env={**env, "ORCH_CONFIGURE_STAMP": "b" * 64},
        check=True,
    )


def test_a_stamp_without_a_build_tree_means_configuring(tmp_path: Path) -> None:
    """A build directory whose build.ninja is gone (emptied by hand) is configured again."""
    config = tmp_path / "Release"
    config.mkdir()
    (config / "orch-configure.stamp").write_text("a" * 64 + "\n")
    env = {
        **os.environ,
        "ORCH_CONFIG_DIR": str(config),
        "ORCH_CONFIGURE_STAMP": "a" * 64,
        "ORCH_REPORT_DIR": str(tmp_path / "report"),
        "CCACHE_DIR": str(tmp_path / "ccache"),
    }
    subprocess.run(["sh", str(RUN_BUILD), "true", "--update"], env=env, check=True, timeout=60)
    assert (tmp_path / "report" / "configure.txt").read_text().strip() == "ran"


def _plan(defines: tuple[tuple[str, str], ...] = ()):
    return make_plan(
        resolve_target("lab"),
        resolve_variant("tuned"),
        BuildOptions(
            source=parse_source(None, version=None, suite="trixie"), scope="mlas-test", extra_defines=defines
        ),
    )


def test_the_stamp_follows_every_configure_input(tmp_path: Path) -> None:
    toolchains = tmp_path / "toolchains"
    toolchains.mkdir()
    (toolchains / "aarch64.cmake").write_text("set(CMAKE_SYSTEM_NAME Linux)\n")
    plan = _plan()
    base = configure_stamp(plan, "sha256:1", "orch-src-1", toolchains)
    assert configure_stamp(_plan(), "sha256:1", "orch-src-1", toolchains) == base
    assert (
        configure_stamp(_plan((("CMAKE_CXX_FLAGS_RELEASE", "-O2"),)), "sha256:1", "orch-src-1", toolchains)
        != base
    )
    assert configure_stamp(plan, "sha256:2", "orch-src-1", toolchains) != base
    assert configure_stamp(plan, "sha256:1", "orch-src-2", toolchains) != base
    (toolchains / "aarch64.cmake").write_text("set(CMAKE_SYSTEM_NAME Linux)\nset(X 1)\n")
    assert configure_stamp(plan, "sha256:1", "orch-src-1", toolchains) != base


def test_the_report_says_what_ninja_had_to_do(tmp_path: Path) -> None:
    (tmp_path / "configure.txt").write_text("reused\n")
    assert read_incremental(tmp_path, ["orch: ...", "ninja: no work to do."]) == IncrementalBuild(
        configure="reused", ninja_steps=0
    )
    # ninja checks CMake's globs before every build of ORT's tree: that is no step of the build.
    unchanged = ["[0/2] Re-checking globbed directories...", "ninja: no work to do."]
    assert read_incremental(tmp_path, unchanged).ninja_steps == 0
    lines = [
        "[1/3] Building CXX object a.o",
        "[2/3] Building CXX object b.o",
        "[3/3] Linking CXX executable t",
    ]
    assert read_incremental(tmp_path, lines).ninja_steps == 3
    assert read_incremental(tmp_path / "missing", []).configure is None


@pytest.mark.parametrize(
    ("ccache", "shown"),
    [
        ({"hits": 812, "misses": 3, "hit_rate": 0.9963}, "812 hits, 3 misses (99.6%)"),
        (None, "-"),
    ],
)
def test_build_list_shows_the_compiler_cache(tmp_path: Path, ccache: dict | None, shown: str) -> None:
    manifest = {**BUILT, "ccache": ccache} if ccache else {k: v for k, v in BUILT.items() if k != "ccache"}
    directory = tmp_path / "artifacts" / "lab" / "tuned" / "1.21.0"
    directory.mkdir(parents=True)
    (directory / "manifest.json").write_text(json.dumps(manifest))
    (directory / manifest["wheel"]).write_bytes(b"wheel")
    env = {
        **os.environ,
        "ORCH_ARTIFACTS": str(tmp_path / "artifacts"),
        "ORCH_HOME": str(tmp_path / "home"),
        "COLUMNS": "250",
    }
    result = subprocess.run(
        [sys.executable, "-m", "orchestrator", "build", "list"],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    # The build's own cell under "ccache" (a bare "-" is in any table: other empty cells, the date).
    lines = result.stderr.splitlines()
    columns = [cell.strip() for cell in next(line for line in lines if "┃ ccache" in line).split("┃")]
    row = [cell.strip() for cell in next(line for line in lines if line.startswith("│ lab ")).split("│")]
    assert dict(zip(columns, row, strict=True))["ccache"] == shown, result.stderr
