"""The artifact manifest: manifest.json <-> Manifest, compatible both ways, clear errors (pure)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from orchestrator.artifacts.store import (
    Artifact,
    BuildRecord,
    Manifest,
    ManifestError,
    Preflight,
    Source,
    find_artifact,
    list_artifacts,
    read_manifest,
    write_manifest,
)
from orchestrator.errors import UsageError

# A manifest as `orch build` writes it (abridged lists, every key kind present).
BUILT = {
    "target": "lab",
    "variant": "tuned",
    "variant_description": "-mcpu=cortex-a72 -O3 -flto",
    "ort_version": "1.21.0",
    "execution_provider": "cpu",
    "source": {
        "kind": "debian",
        "location": "trixie",
        "ref": None,
        "description": "Debian trixie source package",
        "sha256": "a" * 64,
    },
    "patches": [{"name": "0001-mlas-fp16-constants-on-first-use.patch", "sha256": "b" * 64}],
    "dependencies": "system",
    "image": "orch-build:lab-1",
    "image_id": "sha256:" + "c" * 64,
    "engine": "local",
    "build_argv": ["python3", "tools/ci_build/build.py"],
    "defines": ["onnxruntime_USE_MIMALLOC=OFF"],
    "compiler_flags": ["-mcpu=cortex-a72"],
    "parallel": 8,
    "target_profile": {
        "cpu": "cortex-a72",
        "mcpu": "cortex-a72",
        "glibc": "2.41",
        "python": "3.13",
        "distro": "debian 13",
    },
    "compiler": "aarch64-linux-gnu-g++ 14.2.0",
    "compile_commands_readback": {"mlas": {"file": "sgemm.cpp", "found": True, "flags": {"-flto": True}}},
    "bundled_libraries": ["libre2.so.11"],
    "ccache": {"hits": 10, "misses": 2, "hit_rate": 0.83},
    "build_duration_s": 1234.5,
    "flag_warnings": [],
    "wheel": "onnxruntime-1.21.0-cp313-cp313-linux_aarch64.whl",
    "wheel_sha256": "d" * 64,
    "wheel_size": 12345,
    "created": "2026-11-29T20:00:00+00:00",
    "wheel_check": {"ok": True, "problems": [], "machines": ["aarch64"], "glibc_required": "2.38"},
    "preflight": {"ok": True, "qemu_cpu": "cortex-a72", "comparison": {"match": True, "max_abs_diff": 1e-7}},
}


def test_a_built_manifest_reads_typed_and_writes_back_the_same_json() -> None:
    manifest = Manifest.from_json(BUILT, source="m.json")
    assert manifest.wheel_sha256 == "d" * 64 and manifest.wheel_size == 12345
    assert manifest.preflight_ok and manifest.preflight is not None
    assert manifest.preflight.details["qemu_cpu"] == "cortex-a72"
    assert manifest.wheel_check is not None and manifest.wheel_check.details["machines"] == ["aarch64"]
    assert manifest.build.source == Source(
        kind="debian",
        location="trixie",
        description="Debian trixie source package",
        sha256="a" * 64,
    )
    assert manifest.build.compiler == "aarch64-linux-gnu-g++ 14.2.0"
    assert manifest.build.build_duration_s == 1234.5 and manifest.build.parallel == 8
    assert manifest.build.target_profile is not None and manifest.build.target_profile.glibc == "2.41"
    # null = not recorded: not written back ("ref": null above); everything else is.
    expected = {**BUILT, "source": {k: v for k, v in BUILT["source"].items() if v is not None}}
    assert manifest.to_json() == expected


def test_a_minimal_manifest_loads_and_unknown_keys_are_kept() -> None:
    document = {
        "target": "lab",
        "variant": "stock",
        "ort_version": "1.23.2",
        "wheel": "onnxruntime-1.23.2-cp313-cp313-manylinux_2_27_aarch64.whl",
        "preflight": {"ok": True, "by": "a fixture"},
        "written_by_a_newer_orch": {"x": 1},
    }
    manifest = Manifest.from_json(document, source="m.json")
    assert manifest.wheel_sha256 is None and manifest.build == BuildRecord()
    assert manifest.extra == {"written_by_a_newer_orch": {"x": 1}}
    assert manifest.preflight == Preflight(ok=True, details={"by": "a fixture"})
    assert manifest.to_json() == document


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"wheel": None}, "m.json: missing key 'wheel'"),
        ({"target": 3}, "m.json: key 'target' must be a non-empty string, not a number"),
        ({"wheel_size": "big"}, "m.json: key 'wheel_size' must be an integer, not a string"),
        ({"preflight": {"error": "x"}}, "m.json: missing key 'preflight.ok'"),
        ({"preflight": {"ok": "yes"}}, "m.json: key 'preflight.ok' must be true or false, not a string"),
        ({"preflight": []}, "m.json: key 'preflight' must be a JSON object, not a list"),
        ({"source": {"description": "?"}}, "m.json: missing key 'source.kind'"),
        ({"defines": "A=1"}, "m.json: key 'defines' must be a list of strings, not a string"),
    ],
)
def test_a_malformed_manifest_names_the_file_and_the_key(change: dict[str, object], message: str) -> None:
    document = {**BUILT, **change}
    document = {k: v for k, v in document.items() if v is not None}
    with pytest.raises(ManifestError) as caught:
        Manifest.from_json(document, source="m.json")
    assert caught.value.message == message


def test_a_manifest_that_is_not_an_object_or_not_json_is_refused(tmp_path: Path) -> None:
    with pytest.raises(
        ManifestError, match=re.escape("m.json: the manifest must be a JSON object, not a list")
    ):
        Manifest.from_json([], source="m.json")
    path = tmp_path / "manifest.json"
    path.write_text("{not json")
    with pytest.raises(ManifestError, match=f"{path}: not valid JSON"):
        read_manifest(path)


def test_the_store_round_trips_and_offers_only_preflighted_artifacts(tmp_path: Path) -> None:
    good = Manifest.from_json(BUILT, source="m.json")
    directory = tmp_path / "lab" / "tuned" / "1.21.0"
    write_manifest(directory, good)
    (directory / good.wheel).write_bytes(b"wheel")
    assert json.loads((directory / "manifest.json").read_text()) == good.to_json()
    assert list_artifacts(tmp_path) == [Artifact(directory=directory, manifest=good)]
    assert find_artifact("lab", "tuned", tmp_path).manifest == good

    failed = Manifest(
        target="lab",
        variant="default",
        ort_version="1.21.0",
        wheel=good.wheel,
        preflight=Preflight(ok=False, skipped="disabled"),
    )
    other = tmp_path / "lab" / "default" / "1.21.0"
    write_manifest(other, failed)
    (other / good.wheel).write_bytes(b"wheel")
    assert read_manifest(other / "manifest.json") == failed
    with pytest.raises(UsageError, match="no built artifact for target 'lab', variant 'default'"):
        find_artifact("lab", "default", tmp_path)
