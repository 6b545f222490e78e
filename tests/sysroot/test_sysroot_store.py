"""The sysroot store and `orch sysroot add/list/check`, on real tarballs and directories.

What a user notices: only headers, libraries and the board's Python interpreter with its standard
library are kept (symlinks as symlinks; never the board's Python packages), a second add
of the same tree stores nothing new, a tarball cannot write outside the store, and `check`
exits 0 or 5 naming what is missing.
"""

from __future__ import annotations

import io
import json
import os
import re
import tarfile
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from subprocess import CompletedProcess

import pytest
from sysroot_elves import TRIPLET, Elves, make_wheel

from orchestrator.builds.sysroots.contents import Sysroot
from orchestrator.builds.sysroots.staging import wanted
from orchestrator.builds.sysroots.store import IndexEntry, list_sysroots, record_from_json
from orchestrator.commands.sysroot import _headers_note
from orchestrator.common.json_fields import JsonFields, JsonSource
from orchestrator.errors import UsageError

BANNER = "GNU C Library (Test GLIBC 2.41-1) stable release version 2.41."

Orch = Callable[..., CompletedProcess[str]]


@pytest.mark.parametrize(
    ("path", "kind", "kept"),
    [
        ("usr/include/stdio.h", "file", True),
        (f"usr/include/{TRIPLET}/bits/types.h", "file", True),
        (f"usr/lib/{TRIPLET}/libc.so.6", "file", True),
        (f"usr/lib/{TRIPLET}/libc.so", "file", True),
        (f"usr/lib/{TRIPLET}/libstdc++.so.6.0.33", "file", True),
        (f"usr/lib/{TRIPLET}/libc_nonshared.a", "file", True),
        (f"usr/lib/{TRIPLET}/crt1.o", "file", True),
        (f"usr/lib/{TRIPLET}/pkgconfig/zlib.pc", "file", True),
        (f"usr/lib/{TRIPLET}/libz.so", "link", True),
        (f"lib/{TRIPLET}/libm.so.6", "file", True),
        (f"usr/lib/gcc/{TRIPLET}/14/crtbeginS.o", "file", True),
        (f"usr/lib/gcc/{TRIPLET}/14/libgcc.a", "file", True),
        ("lib", "link", True),
        ("usr/lib/ld-linux-aarch64.so.1", "link", True),
        ("usr/lib/python3.13", "dir", True),
        ("usr/lib/python3.13/_sysconfigdata__aarch64-linux-gnu.py", "file", True),
        ("etc/os-release", "link", True),
        # The board's interpreter and its standard library (run under emulation by cross builds):
        ("usr/bin/python3.13", "file", True),
        ("usr/bin/python3.13", "link", True),
        ("usr/lib/python3.13/os.py", "file", True),
        ("usr/lib/python3.13/encodings/utf_8.py", "file", True),
        ("usr/lib/python3.13/lib-dynload/_ssl.cpython-313-aarch64-linux-gnu.so", "file", True),
        ("usr/lib/python3.13/config-3.13-aarch64-linux-gnu/libpython3.13.so", "link", True),
        ("usr/lib/python3.13/test", "link", True),  # a link named test, not a directory's contents
        (f"usr/lib/{TRIPLET}/libpython3.13.so.1.0", "file", True),
        # GBs a Jetson has beside its libraries, and what a rootfs has elsewhere:
        (f"usr/lib/{TRIPLET}/nvidia/firmware.bin", "file", False),
        (f"usr/lib/{TRIPLET}/gconv/gconv-modules", "file", False),
        (f"usr/lib/gcc/{TRIPLET}/14/cc1plus", "file", False),
        ("usr/share/doc/libc6/copyright", "file", False),
        # Of Python: no byte code, test suites, GUI tools, other programs, nor the board's packages.
        ("usr/lib/python3.13/__pycache__/os.cpython-313.pyc", "file", False),
        ("usr/lib/python3.13/json/__pycache__/decoder.cpython-313.pyc", "file", False),
        ("usr/lib/python3.13/site-packages/numpy/__init__.py", "file", False),
        ("usr/lib/python3.13/dist-packages/yaml/__init__.py", "file", False),
        ("usr/lib/python3.13/test/test_os.py", "file", False),
        ("usr/lib/python3.13/unittest/test/test_case.py", "file", False),
        ("usr/lib/python3.13/ctypes/tests/test_bytes.py", "file", False),
        ("usr/lib/python3.13/idlelib/idle.py", "file", False),
        ("usr/lib/python3.13/turtledemo/clock.py", "file", False),
        ("usr/lib/python3.13/tkinter/__init__.py", "file", False),
        ("usr/lib/python3.13/ensurepip/__init__.py", "file", False),
        ("usr/lib/python3.13/lib2to3/main.py", "file", False),
        ("usr/lib/python3.13/encodings", "dir", False),
        ("usr/lib/python3/dist-packages/yaml/__init__.py", "file", False),
        ("usr/lib/python2.7/os.py", "file", False),
        ("usr/bin/python3.13-config", "file", False),
        ("usr/bin/python3.13m", "file", False),
        ("usr/bin/python3", "link", False),
        ("usr/bin/perl", "file", False),
        ("usr/bin/python3.13", "dir", False),
        ("usr/local/lib/python3.13/dist-packages/x.py", "file", False),
        ("etc/passwd", "file", False),
        ("lib", "dir", False),
    ],
)
def test_only_headers_libraries_and_the_python_interpreter_are_kept(path: str, kind: str, kept: bool) -> None:
    assert wanted(PurePosixPath(path), kind=kind) is kept


def _rootfs(
    root: Path, elves: Elves, *, glibc_versions: tuple[str, ...] = ("GLIBC_2.17", "GLIBC_2.41")
) -> Path:
    """A small merged-/usr root file system, with things a sysroot must leave out."""
    multiarch = root / "usr" / "lib" / TRIPLET
    multiarch.mkdir(parents=True)
    (root / "lib").symlink_to("usr/lib")
    elves.library("libc.so.6", glibc_versions, banner=BANNER).rename(multiarch / "libc.so.6")
    elves.library("libz.so.1.3", ("ZLIB_1.2.0",)).rename(multiarch / "libz.so.1.3")
    (multiarch / "libz.so.1").symlink_to("libz.so.1.3")
    (multiarch / "libz.so").symlink_to("libz.so.1")
    (multiarch / "gconv").mkdir()
    (multiarch / "gconv" / "gconv-modules").write_text("x" * 10000)
    python_lib = root / "usr" / "lib" / "python3.13"
    (python_lib / "__pycache__").mkdir(parents=True)
    (python_lib / "os.py").write_text("# the standard library\n")
    (python_lib / "encodings").mkdir()
    (python_lib / "encodings" / "utf_8.py").write_text("# a package of the standard library\n")
    (python_lib / "__pycache__" / "os.cpython-313.pyc").write_bytes(b"\x00" * 1000)
    (python_lib / "site-packages" / "numpy").mkdir(parents=True)
    (python_lib / "site-packages" / "numpy" / "__init__.py").write_text("# the board's own package\n")
    (root / "usr" / "bin").mkdir()
    for program in ("python3.13", "python3.13-config", "perl"):
        (root / "usr" / "bin" / program).write_text("#!/bin/sh\n")
        (root / "usr" / "bin" / program).chmod(0o755)
    (root / "usr" / "share" / "doc").mkdir(parents=True)
    (root / "usr" / "share" / "doc" / "README").write_text("docs\n")
    (root / "usr" / "lib" / "os-release").write_text('ID=debian\nVERSION_ID="13"\nPRETTY_NAME="Debian 13"\n')
    (root / "etc").mkdir()
    (root / "etc" / "os-release").symlink_to("../usr/lib/os-release")
    return root


def _tar(source: Path, tarball: Path) -> Path:
    with tarfile.open(tarball, "w:gz") as archive:
        for entry in sorted(source.iterdir()):
            archive.add(entry, arcname=f"./{entry.name}")
    return tarball


def _home(env: dict[str, str]) -> Path:
    return Path(env["ORCH_HOME"]) / "sysroots"


def test_add_keeps_the_libraries_and_a_second_add_stores_nothing_new(
    elves: Elves, tmp_path: Path, orch_env: dict[str, str], orch_cli: Orch
) -> None:
    rootfs = _rootfs(tmp_path / "rootfs", elves)
    tarball = _tar(rootfs, tmp_path / "rootfs.tar.gz")
    first = orch_cli(orch_env, "sysroot", "add", str(tarball), "--name", "trixie-fs", "--json", check=True)
    document = json.loads(first.stdout)
    assert document["new"] is True
    tree = Path(document["path"]) / "root"
    multiarch = tree / "usr" / "lib" / TRIPLET
    assert (multiarch / "libc.so.6").is_file()
    assert os.readlink(multiarch / "libz.so") == "libz.so.1" and os.readlink(tree / "lib") == "usr/lib"
    assert not (multiarch / "gconv").exists() and not (tree / "usr" / "share").exists()
    # The board's interpreter and standard library, without byte code, packages or other programs.
    assert (tree / "usr/lib/python3.13/os.py").is_file() and (tree / "usr/bin/python3.13").is_file()
    assert (tree / "usr/lib/python3.13/encodings/utf_8.py").is_file()
    assert not (tree / "usr/lib/python3.13/__pycache__").exists()
    assert not (tree / "usr/lib/python3.13/site-packages").exists()
    assert sorted(p.name for p in (tree / "usr" / "bin").iterdir()) == ["python3.13"]
    assert Sysroot(tree).python_executable == "usr/bin/python3.13"
    record = document["record"]
    assert (record["glibc"], record["python"], record["triplet"]) == ("2.41", "3.13", TRIPLET)
    # 2 libraries, 3 links, os-release + its link, the interpreter, os.py and encodings/utf_8.py
    assert record["os"]["name"] == "Debian 13" and record["files"] == 10
    assert record["missing_dev_packages"][:2] == ["libc6-dev", "python3-dev"]
    assert (Path(document["path"]) / "sysroot.json").is_file()

    # The same tree again, this time as a directory: same digest, nothing new, and it says so.
    again = orch_cli(orch_env, "sysroot", "add", str(rootfs), "--name", "trixie-fs", check=True)
    assert f"trixie-fs: unchanged, same digest {document['digest'][:12]}" in again.stderr
    assert "nothing new stored" in again.stderr
    # Under another name: one tree, two names, each with its own provenance.
    other = orch_cli(orch_env, "sysroot", "add", str(tarball), "--name", "copy", "--json", check=True)
    assert (
        json.loads(other.stdout)["new"] is False and json.loads(other.stdout)["digest"] == document["digest"]
    )
    assert [p.name for p in _home(orch_env).iterdir() if len(p.name) == 64] == [document["digest"]]
    # It says what it cannot do: compile (no headers), ending with the command that installs them
    # (no libstdc++ to tell the GCC by: g++ brings the default GCC's C++ headers).
    assert (
        "lacks headers (libc6-dev, python3-dev, libstdc++-dev (of the board's GCC) not installed)"
        in again.stderr
    )
    assert any(
        line.endswith("; in that root file system: sudo apt install libc6-dev python3-dev g++")
        for line in again.stderr.splitlines()
    ), again.stderr

    # A changed library: a new digest, and the name now points at it.
    (multiarch_src := rootfs / "usr" / "lib" / TRIPLET / "libc.so.6").unlink()
    elves.library("libc.so.6", ("GLIBC_2.17", "GLIBC_2.42"), banner=BANNER).rename(multiarch_src)
    changed = json.loads(
        orch_cli(orch_env, "sysroot", "add", str(rootfs), "--name", "trixie-fs", "--json", check=True).stdout
    )
    assert changed["new"] and changed["digest"] != document["digest"]
    assert changed["previous_digest"] == document["digest"]
    listing = json.loads(orch_cli(orch_env, "sysroot", "list", "--json", check=True).stdout)
    assert [(s["name"], s["digest"]) for s in listing] == [
        ("copy", document["digest"]),
        ("trixie-fs", changed["digest"]),
    ]
    sources = {s["name"]: s["record"]["source"] for s in listing}
    assert sources == {"copy": str(tarball), "trixie-fs": str(rootfs)}

    # Removing a name deletes its tree only when no other name shares it.
    orch_cli(orch_env, "sysroot", "add", str(tarball), "--name", "copy2", check=True)
    shared = orch_cli(orch_env, "sysroot", "remove", "copy", check=True)
    assert "its files" in shared.stderr and "stay: another name uses them" in shared.stderr
    assert (_home(orch_env) / document["digest"]).is_dir()
    orch_cli(orch_env, "sysroot", "remove", "copy2", check=True)
    assert not (_home(orch_env) / document["digest"]).exists()
    listing = json.loads(orch_cli(orch_env, "sysroot", "list", "--json", check=True).stdout)
    assert [s["name"] for s in listing] == ["trixie-fs"]
    gone = orch_cli(orch_env, "sysroot", "remove", "copy")
    assert gone.returncode == 2 and "no sysroot called 'copy'" in gone.stderr


def test_a_tarball_cannot_write_outside_the_store(
    tmp_path: Path, orch_env: dict[str, str], orch_cli: Orch
) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    tarball = tmp_path / "evil.tar"
    with tarfile.open(tarball, "w") as archive:
        link = tarfile.TarInfo("usr/include/sneaky")
        link.type, link.linkname = tarfile.SYMTYPE, str(outside)
        archive.addfile(link)
        data = b"owned\n"
        header = tarfile.TarInfo("usr/include/sneaky/stdio.h")
        header.size = len(data)
        archive.addfile(header, io.BytesIO(data))
    result = orch_cli(orch_env, "sysroot", "add", str(tarball), "--name", "evil")
    assert result.returncode == 2, result.stdout + result.stderr
    assert "usr/include/sneaky/stdio.h: lies under usr/include/sneaky, which is a link" in result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    assert list(outside.iterdir()) == []
    # Nothing half-made is left in the store either.
    assert [p.name for p in _home(orch_env).iterdir() if p.name.startswith(".staging")] == []


def test_a_directory_that_is_no_root_file_system_is_refused(
    tmp_path: Path, orch_env: dict[str, str], orch_cli: Orch
) -> None:
    (tmp_path / "photos").mkdir()
    (tmp_path / "photos" / "cat.jpg").write_bytes(b"\xff\xd8")
    result = orch_cli(orch_env, "sysroot", "add", str(tmp_path / "photos"), "--name", "cats")
    assert result.returncode == 2
    assert (
        "no libc.so.6 under lib/<triplet>" in result.stderr
        and "not a Linux root file system" in result.stderr
    )
    missing = orch_cli(orch_env, "sysroot", "add", str(tmp_path / "nowhere"), "--name", "x")
    assert missing.returncode == 2 and "no such file or directory" in missing.stderr
    bad_name = orch_cli(orch_env, "sysroot", "add", str(tmp_path), "--name", "../up")
    assert bad_name.returncode == 2 and "sysroot name '../up'" in bad_name.stderr


def test_check_exits_5_naming_each_missing_version_and_0_when_it_fits(
    elves: Elves, tmp_path: Path, orch_env: dict[str, str], orch_cli: Orch
) -> None:
    orch_cli(orch_env, "sysroot", "add", str(_rootfs(tmp_path / "old", elves)), "--name", "old", check=True)
    new_rootfs = _rootfs(tmp_path / "new", elves, glibc_versions=("GLIBC_2.17", "GLIBC_2.41", "GLIBC_2.99"))
    orch_cli(orch_env, "sysroot", "add", str(new_rootfs), "--name", "new", check=True)
    libc = new_rootfs / "usr" / "lib" / TRIPLET / "libc.so.6"
    consumer = elves.consumer("_demo.so", {libc: ("GLIBC_2.17", "GLIBC_2.99")})
    wheel = make_wheel(tmp_path, {"demo/_demo.so": consumer})

    refused = orch_cli(orch_env, "sysroot", "check", "--sysroot-from", "old", "--wheel", str(wheel))
    assert refused.returncode == 5, refused.stdout + refused.stderr
    assert "does not fit sysroot old" in refused.stderr
    assert (
        "demo/_demo.so needs GLIBC_2.99 from libc.so.6 (the sysroot's newest: GLIBC_2.41)" in refused.stderr
    )
    fits = orch_cli(orch_env, "sysroot", "check", "--sysroot-from", "new", "--wheel", str(wheel))
    assert fits.returncode == 0, fits.stdout + fits.stderr
    assert f"{wheel.name} fits sysroot new" in fits.stderr
    assert "GLIBC_2.99" in fits.stderr  # the needs are printed beside what the sysroot defines

    # An artifact directory works the same, and --json says the same as the text.
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    (artifact / wheel.name).write_bytes(wheel.read_bytes())
    manifest = {"target": "lab", "variant": "tuned", "ort_version": "1.0", "wheel": wheel.name}
    (artifact / "manifest.json").write_text(json.dumps(manifest))
    as_json = orch_cli(
        orch_env, "sysroot", "check", "--sysroot-from", "old", "--artifact", str(artifact), "--json"
    )
    assert as_json.returncode == 5
    document = json.loads(as_json.stdout)
    assert not document["ok"] and document["needs"] == {"libc.so.6": ["GLIBC_2.17", "GLIBC_2.99"]}
    assert [(p["shared_object"], p["missing"]) for p in document["problems"]] == [
        ("demo/_demo.so", ["GLIBC_2.99"])
    ]

    unknown = orch_cli(orch_env, "sysroot", "check", "--sysroot-from", "nano01", "--wheel", str(wheel))
    assert unknown.returncode == 2
    assert (
        "no sysroot called 'nano01'" in unknown.stderr and "orch sysroot pull --host nano01" in unknown.stderr
    )


def test_the_pull_note_ends_with_the_command_to_run_on_the_board() -> None:
    record = {"missing_dev_packages": ["libc6-dev", "python3-dev", "libstdc++-12-dev"]}
    note = _headers_note("nano01", record, where="on the board", again="pull it again")
    assert note is not None and note.startswith(
        "nano01 lacks headers (libc6-dev, python3-dev, libstdc++-12-dev not installed)"
    )
    assert note.endswith("; on the board: sudo apt install libc6-dev python3-dev libstdc++-12-dev")
    # An Ubuntu 18.04 board: its libstdc++ names no GCC orch knows, g++ brings the default GCC's headers.
    unknown = {"missing_dev_packages": ["libstdc++-dev (of the board's GCC)"]}
    note = _headers_note("nano02", unknown, where="on the board", again="pull it again")
    assert note is not None and note.endswith("; on the board: sudo apt install g++")
    assert _headers_note("orin01", {"missing_dev_packages": []}, where="on the board", again="") is None


# -- the stored records, read back ---------------------------------------------------------------------

DIGEST = "ab" * 32
RECORD = {
    "name": "nano01",
    "kind": "board",
    "source": "nano01 (10.0.0.7)",
    "stored_at": "2026-12-01T10:00:00+00:00",
    "board": "nano01",
    "pulled_at": "2026-12-01T10:00:00+00:00",
    "board_facts": {"glibc": "2.27", "python_version": "3.6.9"},
    "glibc": "2.27",
    "python": "3.6",
    "triplet": TRIPLET,
    "os": {"id": "ubuntu", "version": "18.04", "name": "Ubuntu 18.04.6 LTS"},
    "headers": {"libc": True, "python": False, "c++": True},
    "missing_dev_packages": ["python3-dev"],
    "files": 1200,
    "size": 300 << 20,
    "digest": DIGEST,
}


def _stored(root: Path, record: dict[str, object], entries: dict[str, object]) -> None:
    (root / DIGEST).mkdir(parents=True)
    (root / DIGEST / "sysroot.json").write_text(json.dumps(record))
    (root / "index.json").write_text(json.dumps({"sysroots": entries}))


def test_a_sysroot_record_and_its_index_entry_round_trip(tmp_path: Path) -> None:
    assert record_from_json(json.loads(json.dumps(RECORD)), source="sysroot.json") == RECORD
    entry = {"digest": DIGEST, "kind": "rootfs", "source": "/l4t.tbz2", "added_at": "t1", "stored_at": "t0"}
    # A key a newer orch writes is kept when this one writes the index back.
    assert IndexEntry.read(JsonFields({**entry, "newer": 1}, SOURCE)).as_json() == {**entry, "newer": 1}
    _stored(tmp_path, RECORD, {"l4t": entry})
    (stored,) = list_sysroots(tmp_path)
    # Under its own name: the tree's facts with this name's provenance on top.
    assert stored.record == {**RECORD, "name": "l4t", "kind": "rootfs", "source": "/l4t.tbz2"} | {
        "added_at": "t1",
        "stored_at": "t0",
    }


SOURCE = JsonSource(where="index.json", error=UsageError, hint="", not_object_hint="")


@pytest.mark.parametrize("key", ["size", "digest", "os", "stored_at"])
def test_a_sysroot_record_without_a_key_names_the_file_and_the_key(tmp_path: Path, key: str) -> None:
    _stored(tmp_path, {k: v for k, v in RECORD.items() if k != key}, {"nano01": {**RECORD, "digest": DIGEST}})
    path = tmp_path / DIGEST / "sysroot.json"
    with pytest.raises(UsageError, match=re.escape(f"{path}: missing key '{key}'")) as raised:
        list_sysroots(tmp_path)
    assert raised.value.hint == "pull or add that sysroot again (orch sysroot pull / add)"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"digest": DIGEST, "source": "x"}, "missing key 'sysroots.nano01.kind'"),
        ({"kind": "board", "source": "x"}, "missing key 'sysroots.nano01.digest'"),
        ({"digest": "abc", "kind": "board", "source": "x"}, "key 'sysroots.nano01.digest' must be a sha256"),
        ([], "key 'sysroots.nano01' must be a JSON object, not a list"),
    ],
)
def test_an_index_entry_without_a_key_names_the_file_and_the_key(
    tmp_path: Path, entry: object, message: str
) -> None:
    _stored(tmp_path, RECORD, {"nano01": entry})
    with pytest.raises(UsageError, match=re.escape(f"{tmp_path / 'index.json'}: {message}")):
        list_sysroots(tmp_path)
