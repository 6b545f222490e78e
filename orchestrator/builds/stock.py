"""The ``stock`` variant: the official ONNX Runtime wheel for the board, no build.

``pip download --only-binary=:all: --platform <manylinux tags the board accepts>
--python-version <board Python> onnxruntime`` fetches it; it then goes through the same wheel
check and pre-flight as a built wheel, so the baseline of every comparison is proven too.
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.adapters import process
from orchestrator.artifacts.dependencies import pip_platforms
from orchestrator.artifacts.pip_download import pip_download_argv
from orchestrator.artifacts.store import Artifact, BuildRecord, Source
from orchestrator.builds.build_log import Log
from orchestrator.builds.image import ensure_base_image_on, ensure_build_image
from orchestrator.builds.native_runner.execute import CompileIn, add_runner, stock_header
from orchestrator.builds.plan import BuildOptions, make_plan
from orchestrator.builds.record import MadeWheel, finish_artifact
from orchestrator.builds.sources.ort_spec import DEBIAN_ORT_VERSIONS, DEFAULT_ORT_VERSION, parse_source
from orchestrator.builds.variants import resolve_variant
from orchestrator.errors import BuildError
from orchestrator.paths import TOOLCHAINS_DIR
from orchestrator.targets import TargetProfile

if TYPE_CHECKING:
    from orchestrator.adapters.engine import Engine


def default_version(profile: TargetProfile) -> str:
    """The ORT release a stock baseline defaults to: the one ``orch build`` compiles for this target
    when no --ort-version is given (the build plan's own default), so that stock and the builds it
    is compared with are one release and an A/B measures the build, not upstream's changes."""
    return parse_source(None, version=None, suite=profile.bootstrap_suite).version


def download_argv(profile: TargetProfile, version: str | None, dest: Path) -> list[str]:
    """The pip command that fetches the official wheel for this board (pure)."""
    # Manylinux tags only: a linux_<arch> wheel on the index would not be an official build.
    platforms = [p for p in pip_platforms(profile.arch, profile.os.glibc) if p.startswith("manylinux")]
    return pip_download_argv(
        [f"onnxruntime=={version}" if version else "onnxruntime"],
        dest=dest,
        python_version=profile.os.python,
        platforms=platforms,
        with_dependencies=False,
    )


def plan_dict(profile: TargetProfile, version: str | None) -> dict[str, Any]:
    return {
        "target": profile.name,
        "variant": "stock",
        "ort_version": version or "latest",
        "ort_version_default": default_version(profile),
        "download_argv": download_argv(profile, version, Path("<download-dir>")),
        "preflight": {"qemu_cpu": profile.qemu_cpu},
        "wheel": {
            "python_tag": profile.os.python_tag,
            "max_glibc": profile.os.glibc,
            "machine": "EM_AARCH64",
        },
    }


def fetch_stock(
    engine: Engine,
    profile: TargetProfile,
    version: str | None,
    *,
    log: Log,
    preflight: bool = True,
) -> Artifact:
    """The official wheel for the board, checked, pre-flighted and stored under the home's artifacts."""
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="orch-stock-") as tmp:
        dest = Path(tmp)
        argv = download_argv(profile, version, dest)
        log(
            f"downloading the official onnxruntime wheel for {profile.name} (Python {profile.os.python}, "
            f"glibc <= {profile.os.glibc})"
        )
        result = process.run(argv)
        wheels = sorted(dest.glob("onnxruntime-*.whl"))
        if not result.ok or not wheels:
            tail = result.tail(4)
            raise BuildError(
                f"no official onnxruntime{'==' + version if version else ''} wheel for {profile.name} "
                f"(Python {profile.os.python}, glibc {profile.os.glibc}, {profile.arch}):\n{tail}",
                hint="official aarch64 wheels need manylinux_2_28 or newer and a Python the release supports",
            )
        wheel = wheels[0]
        found_version = wheel.name.split("-")[1]
        record = BuildRecord(
            variant_description="official ONNX Runtime wheel from the package index (no build)",
            source=Source(kind="index", description="official wheel", download_argv=tuple(argv[1:])),
            build_duration_s=round(time.monotonic() - started, 1),
        )
        made = MadeWheel(
            profile=profile, variant="stock", ort_version=found_version, wheel=wheel, record=record
        )
        try:
            artifact = finish_artifact(made, root=None, engine=engine, log=log, preflight=preflight)
        except BuildError as error:
            raise _with_way_out(error, profile, found_version) from None
    return _with_runner(engine, profile, artifact, log)


# Official wheels that die on some boards, the first release that does not, and why (upstream's words).
KNOWN_STOCK_FAILURES = {
    "1.21.0": (
        "1.21.1",
        (
            "MLAS runs fp16 instructions in a global constructor: SIGILL at import on ARMv8.0 cores such as"
            " the Cortex-A72 and A57 (upstream issues #23957/#24112, fixed by PR #23978, in 1.21.1 by PR #24188)"
        ),
    ),
}


def _with_way_out(error: BuildError, profile: TargetProfile, version: str) -> BuildError:
    """A failed pre-flight of a known-broken official wheel, with what to do instead."""
    known = KNOWN_STOCK_FAILURES.get(version)
    if known is None or "SIGILL" not in error.message:
        return error
    fixed, why = known
    patched = (TOOLCHAINS_DIR / "patches" / version / "series").is_file()
    own = (
        f"; orch's own {version} builds (--variant default or tuned) carry the fix"
        f" (toolchains/patches/{version})"
        if patched
        else ""
    )
    return BuildError(
        f"{error.message}\n  the official {version} wheel is known to fail there: {why}",
        hint=(
            f"use the nearest release that runs there: orch build --target {profile.name} --variant stock"
            f" --ort-version {fixed}{own}. {error.hint or ''}"
        ).strip(),
    )


def _with_runner(engine: Engine, profile: TargetProfile, artifact: Artifact, log: Log) -> Artifact:
    """The official wheel's native runner, when the release's C API header is available offline."""
    # The build image of the target (the one its own builds use): it has the cross compiler.
    plan = make_plan(
        profile,
        resolve_variant("default"),
        BuildOptions(source=parse_source(None, version=DEFAULT_ORT_VERSION, suite=profile.bootstrap_suite)),
    )
    version = artifact.ort_version
    offline = DEBIAN_ORT_VERSIONS.get(profile.bootstrap_suite or "") == version
    base = ensure_base_image_on(engine, plan, log) if offline else None
    header = stock_header(engine, profile, version, base, log)
    image_id = ensure_build_image(engine, plan, log) if not isinstance(header, str) else ""
    where = CompileIn(engine=engine, image_id=image_id, image_tag=plan.image.tag)
    return add_runner(artifact, profile, where, header=header, log=log)
