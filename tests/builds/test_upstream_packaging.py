"""The variant upstream takes its options from the release being built: its packaging script and
build.py, read from the source (tree, tarball, Debian package); a release orch cannot read or does
not understand is refused with the reason, in the dry run as in the real run."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from upstream_sources import (
    BUILD_PY_1_21,
    CFLAGS_1_21,
    LDFLAGS_1_21,
    SCRIPT_1_21,
    write_tarball,
    write_tree,
)

from orchestrator.builds.plan import BuildOptions, make_plan
from orchestrator.builds.sources import release_packaging
from orchestrator.builds.sources.ort_spec import SourceSpec, parse_source
from orchestrator.builds.sources.packaging import PackagingError, packaging_options
from orchestrator.builds.sources.release_packaging import read_options, release_variant
from orchestrator.builds.variants import BrokenVariant, load_variants, resolve_variant
from orchestrator.errors import BuildError
from orchestrator.targets import resolve_target

WITHOUT_LTO = SCRIPT_1_21.replace(
    'if [ "$BUILD_CONFIG" != "Debug" ]; then\n    BUILD_ARGS+=("--enable_lto")\nfi\n', ""
)
WITH_AZURE = SCRIPT_1_21.replace('"--use_vcpkg")', '"--use_vcpkg" "--use_azure")')


def _plan(source: SourceSpec) -> Any:
    variant = release_variant(resolve_variant("upstream"), source, fetch=None)
    return make_plan(resolve_target("lab"), variant, BuildOptions(source=source))


def _dry_run(orch_cli: Any, env: dict[str, str], source: Path) -> Any:
    return orch_cli(
        env,
        "build",
        "--target",
        "lab",
        "--variant",
        "upstream",
        "--ort-source",
        str(source),
        "--dry-run",
        "--json",
    )


def test_two_releases_whose_scripts_differ_give_different_upstream_options(tmp_path: Path) -> None:
    lto_tree = write_tree(tmp_path / "a")
    plain = write_tarball(tmp_path / "b.tar.gz", write_tree(tmp_path / "b", script=WITHOUT_LTO))
    with_lto = _plan(parse_source(str(lto_tree), version=None, suite=None))
    without = _plan(parse_source(str(plain), version=None, suite=None))
    assert "--enable_lto" in with_lto.build_argv and "--enable_lto" not in without.build_argv
    # The hardening both scripts ask for (--use_binskim_compliant_compile_flags), written out as
    # build.py's compliance branch sets it on aarch64 (not its x86-only flags, not the flag itself).
    for plan in (with_lto, without):
        flags = dict(plan.defines)
        assert flags["CMAKE_C_FLAGS"] == flags["CMAKE_CXX_FLAGS"] == " ".join(CFLAGS_1_21)
        assert all(
            flags[f"CMAKE_{kind}_LINKER_FLAGS"] == " ".join(LDFLAGS_1_21)
            for kind in ("EXE", "SHARED", "MODULE")
        )
        assert "--use_binskim_compliant_compile_flags" not in plan.build_argv
        assert (
            "read from ORT 1.21.0's build_linux_python_package.sh and build.py"
            in plan.as_dict()["variant_description"]
        )
    # A flag the official build passes that orch leaves out is named, with why.
    azure = packaging_options(WITH_AZURE, BUILD_PY_1_21, release="1.21.0")
    assert dict(azure.left_out)["--use_azure"] == "the remote Azure execution provider: no CPU kernel"


def test_build_pys_compliance_branch_is_read_not_assumed() -> None:
    # Another release's build.py with one more Release flag: upstream gets it.
    more = BUILD_PY_1_21.replace(
        '"-pipe",\n', '"-pipe",\n                        "-fzero-call-used-regs=used-gpr",\n'
    )
    options = packaging_options(SCRIPT_1_21, more, release="1.99.0")
    assert options.cflags == (*CFLAGS_1_21, "-fzero-call-used-regs=used-gpr")
    # On the build host's x86-64 build.py would add these; the packaging's aarch64 machine does not.
    assert not {"-fcf-protection", "-fstack-clash-protection"} & set(options.cflags)
    # A statement on the flags orch does not follow refuses the release, naming its line.
    odd = BUILD_PY_1_21.replace("cxxflags = cflags.copy()", "cxxflags = sorted(cflags)")
    with pytest.raises(
        PackagingError, match=r"build\.py: line \d+: .*sorted\(cflags\).*orch does not follow"
    ):
        packaging_options(SCRIPT_1_21, odd, release="1.99.0")


@pytest.mark.parametrize(
    ("script", "said"),
    [
        (SCRIPT_1_21.replace('"--use_vcpkg")', '"--use_vcpkg" "--use_foo")'), "passes --use_foo to build.py"),
        (
            SCRIPT_1_21.replace("ARCH=$(uname -m)", 'CFLAGS="-O2"\nARCH=$(uname -m)'),
            "sets compiler flags itself (CFLAGS)",
        ),
        (
            SCRIPT_1_21.replace('[ "$ARCH" == "x86_64" ]', '[ "$(nproc)" -gt 4 ]'),
            'runs under `if [ "$(nproc)" -gt 4 ]; then`, which orch cannot decide',
        ),
        ("#!/bin/sh\nexec build.py\n", "no BUILD_ARGS=(...) line"),
    ],
)
def test_a_script_orch_does_not_understand_is_refused_with_the_reason(script: str, said: str) -> None:
    with pytest.raises(PackagingError, match=re.escape(said)):
        packaging_options(script, BUILD_PY_1_21, release="1.99.0")


def test_an_unreadable_release_is_refused_in_the_dry_run_as_in_the_real_run(
    tmp_path: Path, orch_env: dict[str, str], orch_cli: Any
) -> None:
    tree = write_tree(tmp_path / "tree", script=None)
    for source in (tree, write_tarball(tmp_path / "tree.tar.gz", tree)):
        refused = _dry_run(orch_cli, orch_env, source)
        assert refused.returncode == 2, refused.stderr
        assert f"no {release_packaging.SCRIPT} in the source" in " ".join(refused.stderr.split())
        assert "Traceback" not in refused.stderr
        # The real run is refused by the same reading, before anything is fetched or built.
        with pytest.raises(PackagingError, match="upstream's build options cannot be read"):
            release_variant(
                resolve_variant("upstream"), parse_source(str(source), version=None, suite=None), fetch=print
            )
    readable = _dry_run(orch_cli, orch_env, write_tarball(tmp_path / "r.tar.gz", write_tree(tmp_path / "r")))
    assert readable.returncode == 0, readable.stderr
    assert json.loads(readable.stdout)["linker_flags"] == list(LDFLAGS_1_21)


def test_a_source_not_here_yet_is_fetched_by_the_real_run_and_named_by_the_dry_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORCH_HOME", str(tmp_path / "home"))
    debian = SourceSpec(kind="debian", location="trixie", ref=None, version="1.21.0")
    pending = release_variant(resolve_variant("upstream"), debian, fetch=None)
    assert pending.pending and "is not on this machine yet" in pending.description
    assert pending.compiler_flags(mcpu="cortex-a72", march="armv8-a") == ()
    fetched: list[SourceSpec] = []

    def fetch(source: SourceSpec, log: object) -> Path:
        fetched.append(source)
        return write_tree(tmp_path / "fetched")

    monkeypatch.setattr(release_packaging, "fetch_release", fetch)
    real = release_variant(resolve_variant("upstream"), debian, fetch=print)
    assert fetched == [debian] and (real.config, real.lto, real.cflags) == ("Release", True, CFLAGS_1_21)
    # Once downloaded (where the Debian route keeps it), the dry run reads it too.
    kept = tmp_path / "home" / "sources" / "debian" / "onnxruntime_1.21.0+dfsg.orig.tar.gz"
    kept.parent.mkdir(parents=True)
    write_tarball(kept, write_tree(tmp_path / "debian"))
    assert release_variant(resolve_variant("upstream"), debian, fetch=None).ldflags == LDFLAGS_1_21
    # A route that does not read them does not build something else under the name upstream.
    with pytest.raises(BuildError, match="has not read them"):
        resolve_variant("upstream").compiler_flags(mcpu="cortex-a72", march="armv8-a")


def test_a_variant_from_the_release_has_no_options_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORCH_HOME", str(tmp_path))
    (tmp_path / "variants.yaml").write_text("mine:\n  from_release: true\n  cflags: [-O2]\n  lto: false\n")
    broken = load_variants()["mine"]
    assert isinstance(broken, BrokenVariant)
    assert [p.split(": ", 2)[-1] for p in broken.problems] == [
        "'cflags' comes from the release's packaging script with from_release: true",
        "'lto' comes from the release's packaging script with from_release: true",
    ]


@pytest.mark.integration
def test_the_real_1_21_0_release_gives_the_official_wheels_options(ort_tarball: Path) -> None:
    """Debian's orig tarball of ORT 1.21.0 (the offline route's source), read as a build reads it."""
    options = read_options(ort_tarball, release="1.21.0")
    assert (options.config, options.lto) == ("Release", True)
    assert options.cflags == CFLAGS_1_21 and options.ldflags == LDFLAGS_1_21
    assert [flag for flag, _ in options.left_out] == ["--use_vcpkg", "--use_vcpkg_ms_internal_asset_cache"]
