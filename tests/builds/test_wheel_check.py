"""The wheel check on real ELF files: compiled in the test with the aarch64 cross compiler of
the build image (and the workstation's own gcc for an x86-64 one), packed into wheels."""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest

from orchestrator.artifacts.store import BuildRecord, find_artifact, list_artifacts
from orchestrator.builds.record import MadeWheel, finish_artifact
from orchestrator.errors import BuildError, UsageError
from orchestrator.targets import resolve_target

PLAIN = "int orch_answer(void) { return 42; }\n"
# strlcpy appeared in glibc 2.38: the object needs GLIBC_2.38, more than Debian 12 (2.36) has.
NEW_GLIBC = (
    "#include <string.h>\nsize_t orch_copy(char *d, const char *s, size_t n) { return strlcpy(d, s, n); }\n"
)


@pytest.fixture(scope="module")
def elves(tmp_path_factory: pytest.TempPathFactory, engine, build_image: str) -> dict[str, Path]:
    work = tmp_path_factory.mktemp("elves")
    (work / "plain.c").write_text(PLAIN)
    (work / "newglibc.c").write_text(NEW_GLIBC)
    script = (
        "aarch64-linux-gnu-gcc -shared -fPIC -O2 -o /w/plain_aarch64.so /w/plain.c && "
        "aarch64-linux-gnu-gcc -shared -fPIC -O2 -o /w/newglibc_aarch64.so /w/newglibc.c"
    )
    lines: list[str] = []
    code = engine.run(
        build_image,
        ["sh", "-c", script],
        volumes={str(work): {"bind": "/w", "mode": "rw"}},
        network="none",
        on_log=lines.append,
    )
    assert code == 0, "\n".join(lines)
    gcc = shutil.which("gcc") or shutil.which("cc")
    assert gcc, "the workstation needs gcc (apt-get install gcc) to make an x86-64 test object"
    subprocess.run(
        [gcc, "-shared", "-fPIC", "-o", str(work / "plain_x86_64.so"), str(work / "plain.c")], check=True
    )
    return {p.stem: p for p in work.glob("*.so")}


def make_wheel(
    directory: Path, shared_object: Path, *, python: str = "cp313", platform: str = "linux_aarch64"
) -> Path:
    """A minimal valid wheel holding one shared object in onnxruntime/capi/."""
    name = f"onnxruntime-1.21.0-{python}-{python}-{platform}.whl"
    files = {
        "onnxruntime/__init__.py": b"",
        f"onnxruntime/capi/{shared_object.name}": shared_object.read_bytes(),
        "onnxruntime-1.21.0.dist-info/METADATA": b"Metadata-Version: 2.1\nName: onnxruntime\nVersion: 1.21.0\n",
        "onnxruntime-1.21.0.dist-info/WHEEL": f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: {python}-{python}-"
        f"{platform}\n".encode(),
    }
    record = []
    for path, data in files.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append("onnxruntime-1.21.0.dist-info/RECORD,,")
    files["onnxruntime-1.21.0.dist-info/RECORD"] = ("\n".join(record) + "\n").encode()
    directory.mkdir(parents=True, exist_ok=True)
    wheel = directory / name
    with zipfile.ZipFile(wheel, "w") as archive:
        for path, data in files.items():
            archive.writestr(path, data)
    return wheel


def check(tmp_path: Path, engine, target: str, wheel: Path):
    made = MadeWheel(
        profile=resolve_target(target),
        variant="tuned",
        ort_version="1.21.0",
        wheel=wheel,
        record=BuildRecord(),
    )
    return finish_artifact(
        made,
        root=tmp_path / "artifacts",
        engine=engine,
        log=lambda line: None,
        preflight=False,
    )


def test_aarch64_wheel_passes_and_records_what_it_needs(tmp_path: Path, engine, elves) -> None:
    artifact = check(tmp_path, engine, "lab", make_wheel(tmp_path / "in", elves["plain_aarch64"]))
    manifest = json.loads((artifact.directory / "manifest.json").read_text())
    assert manifest["wheel_check"]["ok"] is True
    assert manifest["wheel_check"]["machines"] == ["aarch64"]
    assert manifest["wheel_sha256"] == hashlib.sha256(artifact.wheel_path.read_bytes()).hexdigest()
    assert artifact.directory == tmp_path / "artifacts" / "lab" / "tuned" / "1.21.0"


def test_x86_code_in_an_aarch64_wheel_fails_the_build(tmp_path: Path, engine, elves) -> None:
    with pytest.raises(BuildError, match="x86_64 machine code"):
        check(tmp_path, engine, "lab", make_wheel(tmp_path / "in", elves["plain_x86_64"]))


def test_newer_glibc_than_the_board_fails_the_build(tmp_path: Path, engine, elves) -> None:
    wheel = make_wheel(tmp_path / "in", elves["newglibc_aarch64"], python="cp311")
    with pytest.raises(BuildError, match=r"needs GLIBC_2\.38, target rpi4-bookworm has 2\.36"):
        check(tmp_path, engine, "rpi4-bookworm", wheel)
    # The failed artifact is kept for inspection but never offered to deploy.
    assert list_artifacts(tmp_path / "artifacts")[0].manifest.wheel_check.ok is False
    with pytest.raises(UsageError, match="no built artifact"):
        find_artifact("rpi4-bookworm", "tuned", tmp_path / "artifacts")


def test_wrong_python_tag_fails_the_build(tmp_path: Path, engine, elves) -> None:
    with pytest.raises(BuildError, match="cp313"):
        check(tmp_path, engine, "lab", make_wheel(tmp_path / "in", elves["plain_aarch64"], python="cp311"))
