"""Build-time benchmarks of `orch build`, in one run:

1. incremental rebuilds: the ``tuned`` MLAS + onnxruntime_mlas_test build of ORT 1.21.0 for
   ``lab`` from an empty build directory and a fresh, empty ccache volume (cold); the same build
   again in the kept build directory, unchanged (CMake does not configure again, ninja has
   nothing to do: goal under 10% of the cold build); with a changed flag
   (``CMAKE_CXX_FLAGS_RELEASE=-O2 -DNDEBUG``: configured again, every object recompiled through
   ccache, all misses); back to the original flags (configured again, every object a ccache hit).
2. cold vs warm compiler cache: the build once more from an empty build directory, with the
   ccache volume warm. Each line: time, ccache hits/misses, whether CMake ran, ninja's steps.
3. cross vs emulated native: the same MLAS sources (the exact commands of that build's
   compile_commands.json) compiled by the x86-64 cross compiler and by a native aarch64 g++ in
   an arm64 Debian container under qemu-user (``--skip-emulated`` leaves it out).

One run of each build; run it under ``flock /tmp/orch-docker-build.lock`` on a shared machine.

    .venv/bin/python benchmarks/build_cache.py [--files 6] [--skip-emulated] [--json]

Needs the Docker engine; uses its own ORCH_HOME (a temp dir) and a throwaway ccache volume.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from orchestrator.adapters.engine import Engine
from orchestrator.builds.execute import ExecuteOptions, execute
from orchestrator.builds.plan import BuildOptions, machine_resources, make_plan
from orchestrator.builds.sources.ort import prepare_source
from orchestrator.builds.sources.ort_spec import parse_source
from orchestrator.builds.variants import resolve_variant
from orchestrator.builds.workspace import build_volume_name, source_volume_name
from orchestrator.lab.base_images import ensure_base_image
from orchestrator.targets import resolve_target

# An unchanged rebuild in the kept build directory, against the cold build: the goal.
NOOP_GOAL = 0.10


def timed_build(engine: Engine, plan, label: str, *, empty_build_dir: bool = True) -> dict:
    if empty_build_dir:
        engine.remove_volume(build_volume_name(plan))  # only the cache differs
    started = time.monotonic()
    result = execute(plan, engine, log=lambda line: None, options=ExecuteOptions(preflight=False))
    seconds = time.monotonic() - started
    print(
        f"{label}: {seconds:.0f} s, ccache {result.ccache.as_dict()}, {result.incremental.as_dict()}",
        file=sys.stderr,
    )
    return {
        "seconds": round(seconds, 1),
        "ccache": result.ccache.as_dict(),
        "incremental": result.incremental.as_dict(),
        "build_dir": str(result.build_dir),
    }


def tuned_mlas_plan(extra_defines: tuple[tuple[str, str], ...] = ()):
    cpus, memory = machine_resources()
    return make_plan(
        resolve_target("lab"),
        resolve_variant("tuned"),
        BuildOptions(
            source=parse_source(None, version=None, suite="trixie"),
            scope="mlas-test",
            cpus=cpus,
            memory_bytes=memory,
            extra_defines=extra_defines,
        ),
    )


def _line(label: str, figure: dict) -> str:
    cache, steps = figure["ccache"], figure["incremental"]
    return (
        f"  {label:34} {figure['seconds']:6.1f} s  ccache {cache.get('hits')} hits / {cache.get('misses')} misses,"
        f" configure {steps.get('configure')}, {steps.get('ninja_steps')} ninja steps"
    )


def compile_commands(build_dir: Path, count: int) -> list[dict]:
    entries = json.loads((build_dir / "orch-report" / "compile_commands.json").read_text())
    mlas = [e for e in entries if "/core/mlas/lib/" in e["file"] and e["file"].endswith(".cpp")]
    return sorted(mlas, key=lambda e: e["file"])[:count]


def native_packages(plan) -> list[str]:
    """g++ and the -dev packages the build image has (host and board side): what MLAS includes."""
    arguments = dict(plan.image.buildargs)
    names = (arguments["HOST_PACKAGES"] + " " + arguments["TARGET_PACKAGES"]).split()
    return ["g++", *sorted({name.split(":")[0] for name in names if name.split(":")[0].endswith("-dev")})]


def script_for(entries: list[dict], compiler: str) -> str:
    """A shell script compiling each entry with ``compiler`` instead of ccache + cross g++."""
    lines = ["set -e", "mkdir -p /tmp/objs"]
    for index, entry in enumerate(entries):
        argv = shlex.split(entry["command"])
        while argv and (argv[0].endswith("ccache") or argv[0].endswith("g++")):
            argv.pop(0)
        if "-o" in argv:
            argv[argv.index("-o") + 1] = f"/tmp/objs/{index}.o"
        # Dependency files would be written next to the build's objects: not needed here.
        argv = [
            a
            for i, a in enumerate(argv)
            if a not in ("-MD", "-MT", "-MF") and argv[i - 1] not in ("-MT", "-MF")
        ]
        lines.append(f"cd {shlex.quote(entry['directory'])} && {compiler} {shlex.join(argv)}")
    return "\n".join(lines) + "\n"


def timed_compile(engine: Engine, image: str, script: str, volumes: dict, label: str) -> float:
    output: list[str] = []
    started = time.monotonic()
    code = engine.run(image, ["sh", "-c", script], volumes=volumes, network="none", on_log=output.append)
    seconds = time.monotonic() - started
    if code != 0:
        raise SystemExit(f"{label} failed:\n" + "\n".join(output[-20:]))
    print(f"{label}: {seconds:.1f} s", file=sys.stderr)
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--files", type=int, default=6, help="MLAS sources for the cross vs emulated comparison"
    )
    parser.add_argument("--skip-emulated", action="store_true", help="leave out the emulated compile")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    os.environ["ORCH_HOME"] = tempfile.mkdtemp(prefix="orch-bench-build-")
    engine = Engine()
    cache_volume = f"orch-ccache-bench-{os.getpid()}"
    plan = dataclasses.replace(tuned_mlas_plan(), ccache_volume=cache_volume)
    changed = dataclasses.replace(
        tuned_mlas_plan((("CMAKE_CXX_FLAGS_RELEASE", "-O2 -DNDEBUG"),)), ccache_volume=cache_volume
    )
    report: dict = {
        "plan": {"target": "lab", "variant": "tuned", "scope": "mlas-test", "parallel": plan.parallel}
    }
    try:
        report["cold"] = timed_build(engine, plan, "cold ccache")
        report["unchanged"] = timed_build(engine, plan, "unchanged rebuild", empty_build_dir=False)
        report["changed_flag"] = timed_build(engine, changed, "changed flag", empty_build_dir=False)
        report["flag_back"] = timed_build(engine, plan, "flag changed back", empty_build_dir=False)
        report["unchanged_over_cold"] = round(report["unchanged"]["seconds"] / report["cold"]["seconds"], 3)
        report["warm"] = timed_build(engine, plan, "warm ccache")  # an empty build directory again
        report["cold_over_warm"] = round(report["cold"]["seconds"] / report["warm"]["seconds"], 2)
        if args.skip_emulated:
            return _print(report, args.json)

        build_dir = Path(report["warm"]["build_dir"])
        entries = compile_commands(build_dir, args.files)
        # The same volumes the build used: its source tree and its build directory.
        source = prepare_source(
            plan.source, engine=engine, base_image=plan.image.base_image, log=lambda line: None
        )
        volumes = {
            source_volume_name(source): {"bind": "/src", "mode": "ro"},
            build_volume_name(plan): {"bind": "/build", "mode": "ro"},
            str(Path(__file__).resolve().parents[1] / "toolchains"): {
                "bind": "/orch/toolchains",
                "mode": "ro",
            },
        }
        cross = timed_compile(
            engine,
            plan.image.tag,
            script_for(entries, "aarch64-linux-gnu-g++"),
            volumes,
            f"cross g++ ({len(entries)} MLAS files)",
        )
        native_image = ensure_base_image(engine, "trixie", "arm64", native_packages(plan))
        native = timed_compile(
            engine,
            native_image,
            script_for(entries, "g++"),
            volumes,
            f"emulated native g++ ({len(entries)} MLAS files)",
        )
        report["cross_vs_emulated"] = {
            "files": [e["file"] for e in entries],
            "cross_s": round(cross, 1),
            "emulated_native_s": round(native, 1),
            "emulated_over_cross": round(native / cross, 1),
        }
    finally:
        engine.remove_volume(plan.ccache_volume)
        engine.remove_volume(build_volume_name(plan))
    return _print(report, args.json)


def _print(report: dict, as_json: bool) -> int:
    if as_json:
        print(json.dumps(report, indent=2))
        return 0
    print(
        f"tuned MLAS + onnxruntime_mlas_test for lab, {report['plan']['parallel']} jobs; one run of each build"
    )
    print(_line("cold ccache, empty build dir", report["cold"]))
    print(_line("warm ccache, empty build dir", report["warm"]))
    print(_line("unchanged, kept build dir", report["unchanged"]))
    print(_line("changed flag (-O2), kept build dir", report["changed_flag"]))
    print(_line("flag changed back, kept build dir", report["flag_back"]))
    ratio = report["unchanged_over_cold"]
    verdict = "met" if ratio < NOOP_GOAL else "NOT met"
    print(f"cold / warm = {report['cold_over_warm']}x")
    print(f"unchanged / cold = {ratio:.3f} (goal: under {NOOP_GOAL:.2f}, {verdict})")
    emulated = report.get("cross_vs_emulated")
    if emulated:
        print(
            f"cross {emulated['cross_s']} s vs emulated native {emulated['emulated_native_s']} s"
            f" ({emulated['emulated_over_cross']}x)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
