"""The fetch route for real, offline: `--ort-source <git URL>@<tag> --dependencies fetch`, ORT's own
FetchContent downloads of ``cmake/deps.txt``, against servers this test starts on 127.0.0.1.

* a git repository of Debian's ORT 1.21.0 source, served over git's smart HTTP protocol
  (``git http-backend`` behind Python's http.server) and tagged ``v1.21.0``; its last commit
  points ``cmake/deps.txt`` at
* a mirror of ORT's dependency archives on 127.0.0.1: the unpatched Debian orig sources of the
  releases ORT pins (``toolchains/deps/1.21.0.yaml``; FetchContent applies ORT's patches itself
  on this route), each entry with the SHA1 of the archive the mirror serves. Every other entry
  points at a path the mirror does not serve, so a download nobody expected fails on loopback
  instead of leaving the machine.

The build container reaches them through the host's network (the plan chooses it because every
download is a loopback address). Every CI run builds ``tuned`` at the MLAS scope for ``lab`` (the
lab boards' trixie, whose base image the other CI tests make too) and runs a shard of
``onnxruntime_mlas_test`` on an emulated Cortex-A72; the same command again compiles nothing. A
mirror archive whose SHA1 is not deps.txt's, or one the mirror lacks, fails the configure step with
ORT's error in orch's message. How the option, the route's image and the container's network are
planned is checked without Docker.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
import subprocess
import tarfile
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from http.server import BaseHTTPRequestHandler, SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from board_checks import aarch64_elf, compile_commands, mlas_commands, mlas_shard, unchanged_rebuild
from test_release_sources import make_tarball

from orchestrator.builds.sources.dependencies import download
from orchestrator.builds.sources.dependency_table import Dependency, load_table
from orchestrator.lab.base_images import ensure_base_image

CACHE = Path(os.environ.get("ORCH_TEST_CACHE") or "/var/tmp/orch-test-cache")
BUILD_TIMEOUT = 3600
SHARDS, SHARD = 80, 1
TAG = "v1.21.0"
BAD_BRANCH = "abseil-sha1-mismatch"
MISSING_BRANCH = "abseil-not-on-the-mirror"
MISNAMED = "v1.22.0"
# deps.txt name -> (the table's dependency, what of its Debian file the mirror serves): None serves
# the orig tarball as it is; a path makes a tarball of that directory of it (utf8_range is inside
# protobuf 21.12's source, SafeInt's header inside Debian's -dev package).
NEEDED_AT_MLAS_SCOPE = {
    "abseil_cpp": ("abseil_cpp", None),
    "re2": ("re2", None),
    "googletest": ("googletest", None),
    "utf8_range": ("Protobuf", "third_party/utf8_range"),
    "protobuf": ("Protobuf", None),
    "date": ("date", None),
    "json": ("nlohmann_json", None),
    "pytorch_cpuinfo": ("pytorch_cpuinfo", None),
    "microsoft_gsl": ("GSL", None),
    "safeint": ("safeint", "usr/include/safeint"),
    "flatbuffers": ("flatbuffers", None),
    "onnx": ("onnx", None),
    "eigen": ("eigen", None),
}
_GIT_DATE = {"GIT_AUTHOR_DATE": "2025-03-07T00:00:00Z", "GIT_COMMITTER_DATE": "2025-03-07T00:00:00Z"}
_GIT_ID = ["-c", "user.name=orch tests", "-c", "user.email=tests@orch.invalid"]


# -- the servers -----------------------------------------------------------------------------------


@dataclass
class Server:
    """An HTTP server in a thread on 127.0.0.1, with the requests it answered: (path, status)."""

    httpd: ThreadingHTTPServer
    requests: list[tuple[str, int]] = field(default_factory=list)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"


def _serve(handler: Callable[..., BaseHTTPRequestHandler]) -> tuple[Server, threading.Thread]:
    server = Server(httpd=ThreadingHTTPServer(("127.0.0.1", 0), handler))
    server.httpd.log = server.requests  # type: ignore[attr-defined]
    thread = threading.Thread(target=server.httpd.serve_forever, daemon=True)
    thread.start()
    return server, thread


class _MirrorHandler(SimpleHTTPRequestHandler):
    """Static files; every answered request is kept (the mirror's access log)."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        self.server.log.append((self.path, int(code)))  # type: ignore[attr-defined]


class _GitHandler(BaseHTTPRequestHandler):
    """git's smart HTTP protocol (a shallow clone needs it): each request through `git http-backend`."""

    root = ""

    def do_GET(self) -> None:
        self._backend()

    def do_POST(self) -> None:
        self._backend()

    def _backend(self) -> None:
        path, _, query = self.path.partition("?")
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        env = {
            "PATH": os.environ["PATH"],
            "GIT_PROJECT_ROOT": self.root,
            "GIT_HTTP_EXPORT_ALL": "1",
            "PATH_INFO": path,
            "QUERY_STRING": query,
            "REQUEST_METHOD": self.command,
            "CONTENT_TYPE": self.headers.get("Content-Type") or "",
            "CONTENT_LENGTH": str(len(body)),
            "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding") or "",
            "GIT_PROTOCOL": self.headers.get("Git-Protocol") or "",
            "REMOTE_ADDR": "127.0.0.1",
        }
        out = subprocess.run(
            ["git", "http-backend"], check=False, input=body, env=env, capture_output=True
        ).stdout
        # CGI: headers, an empty line, the body.
        ends = [(i, len(sep)) for sep in (b"\r\n\r\n", b"\n\n") if (i := out.find(sep)) >= 0]
        end, size = min(ends) if ends else (len(out), 0)
        head, payload = out[:end], out[end + size :]
        headers = [line.split(":", 1) for line in head.decode().splitlines() if ":" in line]
        status = next((int(v.split()[0]) for k, v in headers if k.lower() == "status"), 200)
        self.send_response(status)
        for key, value in headers:
            if key.lower() != "status":
                self.send_header(key, value.strip())
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        self.server.log.append((self.path, int(code)))  # type: ignore[attr-defined]


# -- the mirror's archives and the repository -----------------------------------------------------------


def _debian_files(engine: object) -> dict[str, Path]:
    """The Debian files of the dependencies the MLAS scope needs (downloaded once per machine)."""
    table = load_table("1.21.0")
    assert table is not None
    wanted = {name for name, _ in NEEDED_AT_MLAS_SCOPE.values()}
    fetched: tuple[Dependency, ...] = tuple(d for d in table.fetched() if d.name in wanted)
    base = ensure_base_image(engine, "trixie", "amd64")  # type: ignore[arg-type]
    return download(engine, base, fetched, lambda line: None, dest=CACHE / "deps-1.21.0")  # type: ignore[arg-type]


def _tar_of(members: list[tuple[str, bytes]], path: Path) -> Path:
    """A .tar.gz with one top directory, as upstream archives have (reproducible: no times)."""
    with tarfile.open(path, "w:gz") as archive:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o644
            archive.addfile(info, io.BytesIO(data))
    return path


def _part_of(debian_file: Path, inside: str, top: str, dest: Path) -> Path:
    """A directory of a Debian orig tarball or -dev package, as an archive of its own."""
    members: list[tuple[str, bytes]] = []
    if debian_file.name.endswith(".deb"):
        unpacked = dest.parent / f"{top}.unpacked"
        subprocess.run(["dpkg-deb", "-x", str(debian_file), str(unpacked)], check=True)
        for file in sorted((unpacked / inside).rglob("*")):
            if file.is_file():
                members.append((f"{top}/{file.relative_to(unpacked / inside)}", file.read_bytes()))
    else:
        with tarfile.open(debian_file) as archive:
            for member in archive:
                relative = member.name.split("/", 1)[-1]
                if member.isfile() and relative.startswith(inside + "/"):
                    data = archive.extractfile(member)
                    assert data is not None
                    members.append((f"{top}/{relative[len(inside) + 1 :]}", data.read()))
    assert members, f"nothing under {inside} in {debian_file.name}"
    return _tar_of(members, dest)


@dataclass(frozen=True)
class Upstream:
    """The loopback world: the mirror (its archives by deps.txt name) and the git server."""

    mirror: Server
    git: Server
    archives: dict[str, str]  # deps.txt name -> path on the mirror
    repo_url: str
    commit: str  # what TAG names


def _sha1(path: Path) -> str:
    return hashlib.sha1(path.read_bytes()).hexdigest()


def _deps_txt(original: str, mirror: str, served: dict[str, tuple[str, str]]) -> str:
    """ORT's deps.txt with every entry on the mirror: the served ones with their archive's SHA1, the
    others at a path the mirror does not serve (a download nobody expected fails on loopback)."""
    lines = []
    for line in original.splitlines():
        fields = line.split(";")
        if line.startswith("#") or len(fields) < 3:
            lines.append(line)
        elif fields[0] in served:
            path, sha1 = served[fields[0]]
            lines.append(f"{fields[0]};{mirror}{path};{sha1}")
        else:
            lines.append(f"{fields[0]};{mirror}/not-served/{fields[0]}.zip;{fields[2]}")
    return "\n".join(lines) + "\n"


def _git(*args: str, cwd: Path, env: dict[str, str] | None = None, stdin: str | None = None) -> str:
    result = subprocess.run(
        ["git", *_GIT_ID, *args],
        cwd=cwd,
        env={**os.environ, **_GIT_DATE, **(env or {})},
        input=stdin,
        capture_output=True,
        text=True,
        check=True,
    )
    return result.stdout.strip()


def _base_repository(ort_tarball: Path) -> Path:
    """A bare repository whose one commit is Debian's 1.21.0 tree (made once per machine)."""
    bare = CACHE / "git" / "onnxruntime-1.21.0-debian.git"
    if (bare / "orch-complete").is_file():
        return bare
    work = CACHE / "git" / "work"
    shutil.rmtree(work, ignore_errors=True)
    shutil.rmtree(bare, ignore_errors=True)
    work.mkdir(parents=True)
    with tarfile.open(ort_tarball) as archive:
        archive.extractall(work, filter="data")
    (tree,) = list(work.iterdir())
    _git("init", "-q", "-b", "main", cwd=tree)
    _git("add", "--all", "--force", cwd=tree)
    _git("commit", "-q", "-m", "ONNX Runtime 1.21.0 (Debian's orig source)", cwd=tree)
    _git("clone", "-q", "--bare", str(tree), str(bare), cwd=work)
    shutil.rmtree(work)
    # Packed once (deltas found once), not by every clone the server answers.
    _git("repack", "-a", "-d", "-q", cwd=bare)
    (bare / "orch-complete").write_text("")
    return bare


def _commit_deps(repo: Path, parent: str, text: str, message: str) -> str:
    """A commit on ``parent`` whose cmake/deps.txt is ``text`` (made in the bare repository)."""
    index = {"GIT_INDEX_FILE": str(repo / "orch-index")}
    _git("read-tree", parent, cwd=repo, env=index)
    blob = _git("hash-object", "-w", "--stdin", cwd=repo, stdin=text)
    _git("update-index", "--cacheinfo", f"100644,{blob},cmake/deps.txt", cwd=repo, env=index)
    tree = _git("write-tree", cwd=repo, env=index)
    return _git("commit-tree", tree, "-p", parent, "-m", message, cwd=repo)


@pytest.fixture(scope="module")
def upstream(
    engine: object, ort_tarball: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Upstream]:
    root = tmp_path_factory.mktemp("fetch-upstream")
    mirror_dir, git_dir = root / "mirror", root / "git"
    (mirror_dir / "archives").mkdir(parents=True)
    git_dir.mkdir()
    files = _debian_files(engine)
    served: dict[str, tuple[str, str]] = {}
    for name, (dependency, inside) in NEEDED_AT_MLAS_SCOPE.items():
        source = files[dependency]
        archive = (
            mirror_dir / "archives" / source.name
            if inside is None
            else _part_of(source, inside, f"{name}-debian", mirror_dir / "archives" / f"{name}-debian.tar.gz")
        )
        if inside is None:
            shutil.copyfile(source, archive)
        served[name] = (f"/archives/{archive.name}", _sha1(archive))
    mirror, mirror_thread = _serve(partial(_MirrorHandler, directory=str(mirror_dir)))
    _GitHandler.root = str(git_dir)
    git, git_thread = _serve(_GitHandler)
    repo = git_dir / "onnxruntime.git"
    _git("clone", "-q", "--bare", "--shared", str(_base_repository(ort_tarball)), str(repo), cwd=root)
    base = _git("rev-parse", "main", cwd=repo)
    original = _git("show", f"{base}:cmake/deps.txt", cwd=repo) + "\n"
    deps = _deps_txt(original, mirror.url, served)
    commit = _commit_deps(repo, base, deps, "cmake/deps.txt: the dependencies from the loopback mirror")
    _git("tag", TAG, commit, cwd=repo)
    _git("tag", MISNAMED, commit, cwd=repo)  # a tag whose name is not the release it holds
    wrong = dict(served, abseil_cpp=(served["abseil_cpp"][0], "0" * 40))
    bad = _commit_deps(
        repo, base, _deps_txt(original, mirror.url, wrong), "abseil_cpp: a SHA1 the archive has not"
    )
    _git("branch", BAD_BRANCH, bad, cwd=repo)
    absent = {name: entry for name, entry in served.items() if name != "abseil_cpp"}
    missing = _commit_deps(
        repo, base, _deps_txt(original, mirror.url, absent), "abseil_cpp: an archive the mirror lacks"
    )
    _git("branch", MISSING_BRANCH, missing, cwd=repo)
    _git("update-server-info", cwd=repo)
    try:
        yield Upstream(
            mirror=mirror,
            git=git,
            archives={name: path for name, (path, _) in served.items()},
            repo_url=f"{git.url}/onnxruntime.git",
            commit=commit,
        )
    finally:
        for server, thread in ((mirror, mirror_thread), (git, git_thread)):
            server.httpd.shutdown()
            server.httpd.server_close()
            thread.join(timeout=10)


# -- the plan (no Docker) ----------------------------------------------------------------------------


def _plan(orch_cli: Any, env: dict[str, str], *args: str) -> dict[str, Any]:
    result = orch_cli(env, "build", *args, "--dry-run", "--json", check=True)
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def _deps(*urls: str) -> str:
    return "#Name;Url;SHA1\n" + "".join(f"dep{i};{url};{'a' * 40}\n" for i, url in enumerate(urls))


def test_dependencies_fetch_forces_orts_downloads_and_refuses_debians_source(
    tmp_path: Path, orch_env: dict[str, str], orch_cli: Any
) -> None:
    # 1.21.0 for a trixie board: the system route unless the option asks for ORT's own downloads.
    local = ("http://127.0.0.1:8081/a.zip", "http://localhost/b.tar.gz", "http://[::1]:9/c.zip")
    tarball = make_tarball(tmp_path / "onnxruntime-1.21.0.tar.gz", "1.21.0", deps=_deps(*local))
    auto = _plan(orch_cli, orch_env, "--target", "lab", "--ort-source", str(tarball))
    assert auto["dependencies"] == "system" and auto["network"] == "none"
    fetch = _plan(
        orch_cli, orch_env, "--target", "lab", "--ort-source", str(tarball), "--dependencies", "fetch"
    )
    assert fetch["dependencies"] == "fetch" and fetch["dependencies_option"] == "fetch"
    assert [d["url"] for d in fetch["needs_network"]["downloads"]] == list(local)
    # Every download on loopback: the container on the host's network, and the plan says so.
    assert fetch["network"] == "host"
    assert any("the build container runs on the host's network" in note for note in fetch["notes"])
    shown = orch_cli(
        orch_env, "build", "--target", "lab", "--ort-source", str(tarball), "--dependencies", "fetch",
        "--dry-run",
    )  # fmt: skip
    assert "dependencies: fetch (--dependencies fetch)" in shown.stderr and "network: host" in shown.stderr
    # One download elsewhere: the engine's default network.
    (tmp_path / "mixed").mkdir()
    elsewhere = _deps(local[0], "https://example.invalid/d.zip")
    mixed = make_tarball(tmp_path / "mixed" / "onnxruntime-1.21.0.tar.gz", "1.21.0", deps=elsewhere)
    other = _plan(
        orch_cli, orch_env, "--target", "lab", "--ort-source", str(mixed), "--dependencies", "fetch"
    )
    assert other["network"] == "default"
    # Debian's source package is the offline route's: refused with the option, in the dry run too.
    for args in (("--ort-source", "debian"), ()):
        refused = orch_cli(
            orch_env, "build", "--target", "lab", "--dependencies", "fetch", *args, "--dry-run"
        )
        assert refused.returncode == 2 and "Traceback" not in refused.stderr
        assert "--dependencies fetch downloads ORT's dependencies (cmake/deps.txt)" in refused.stderr
        assert "--ort-source debian" in refused.stderr


def test_the_fetch_route_for_bookworm_takes_the_self_contained_image(
    tmp_path: Path, orch_env: dict[str, str], orch_cli: Any
) -> None:
    """Both routes compile every dependency: bookworm's fetch route gets CMake 3.31 from backports."""
    tarball = make_tarball(
        tmp_path / "onnxruntime-1.21.0.tar.gz", "1.21.0", deps=_deps("http://127.0.0.1/a.zip")
    )
    source = _plan(orch_cli, orch_env, "--target", "rpi4-bookworm")
    fetch = _plan(
        orch_cli,
        orch_env,
        "--target",
        "rpi4-bookworm",
        "--ort-source",
        str(tarball),
        "--dependencies",
        "fetch",
    )
    assert source["dependencies"] == "source" and fetch["dependencies"] == "fetch"
    assert fetch["image"]["tag"] == source["image"]["tag"]
    assert fetch["ccache_volume"] == "orch-ccache-rpi4-bookworm"
    assert (
        "ORT 1.21.0's minimums against the build container: CMake 3.31 >= 3.28; Python 3.11 >= 3.10"
        in fetch["notes"]
    )


# -- the build, for real ----------------------------------------------------------------------------------


def _fetch_build(orch_cli: Any, env: dict[str, str], source: str, *extra: str, dry: bool = False) -> Any:
    args = ["build", "--target", "lab", "--variant", "tuned", "--scope", "mlas-test"]
    args += ["--dependencies", "fetch", "--ort-source", source, *extra]
    if dry:
        return orch_cli(env, *args, "--dry-run", "--json", check=True)
    return orch_cli(env, *args, "--json", timeout=BUILD_TIMEOUT)


# The one build of ORT's own route: tuned flags, abseil and the rest compiled from the downloads. In
# `full` since the cold CI budget (about 7 minutes on a new machine); CI keeps the route's plan, its
# refusals and the configure that stops on a wrong or missing archive.
@pytest.mark.full
@pytest.mark.timeout(2 * BUILD_TIMEOUT + 1800)
def test_a_git_tag_with_fetchcontent_downloads_from_loopback_builds_and_runs_on_an_emulated_cortex_a72(
    upstream: Upstream, orch_env: dict[str, str], orch_cli: Any, engine: object
) -> None:
    source = f"{upstream.repo_url}@{TAG}"
    plan = json.loads(_fetch_build(orch_cli, orch_env, source, dry=True).stdout)
    assert plan["dependencies"] == "fetch" and plan["dependencies_option"] == "fetch"
    needs = plan["needs_network"]
    assert needs["needed"] and needs["downloads"] == [
        {"what": f"ORT source: git clone @ {TAG}", "url": upstream.repo_url}
    ]
    assert "read once the source is fetched" in needs["pending"]

    before = len(upstream.mirror.requests)  # the mirror's log is shared with the other tests
    result = _fetch_build(orch_cli, orch_env, source)
    assert result.returncode == 0, result.stderr[-4000:]
    log = result.stderr
    # After the clone, the build lists deps.txt's downloads and takes the host's network for them.
    assert "needs the network: yes (cmake/deps.txt of the fetched source" in log
    for path in upstream.archives.values():
        assert f"{upstream.mirror.url}{path}" in log
    assert "the build container runs on the host's network" in log
    document = json.loads(result.stdout)
    build_dir = Path(document["build_dir"])
    manifest = document["manifest"]
    assert manifest == json.loads((build_dir / "manifest.json").read_text())
    assert manifest["dependencies"] == "fetch"
    assert manifest["source"]["kind"] == "git" and manifest["source"]["ref"] == TAG
    assert manifest["source"]["sha256"] == upstream.commit  # the clone's commit
    recorded = {entry["name"]: entry["url"] for entry in manifest["dependency_sources"]}
    assert recorded["abseil_cpp"] == f"{upstream.mirror.url}{upstream.archives['abseil_cpp']}"

    # abseil was compiled from FetchContent's download, in the build directory.
    commands = compile_commands(build_dir)
    assert any(
        c["file"].startswith("/build/") and "/_deps/abseil_cpp-src/absl/" in c["file"] for c in commands
    )
    # C and C++ sources get the tuned flags.
    assert all("-mcpu=cortex-a72" in c for c in mlas_commands(commands))
    # Each served archive was downloaded from the mirror, nothing else was asked of it.
    requests = upstream.mirror.requests[before:]
    answered = dict(requests)
    assert {path: answered.get(path) for path in upstream.archives.values()} == {
        path: 200 for path in upstream.archives.values()
    }
    assert not [path for path, _ in requests if not path.startswith("/archives/")]

    bundle = build_dir / "out"
    exe = bundle / "onnxruntime_mlas_test"
    aarch64_elf(exe)
    code, text, passed = mlas_shard(engine, "lab", bundle, shards=SHARDS, shard=SHARD)
    assert code == 0 and passed > 100 and "[  FAILED  ]" not in text, text[-3000:]
    print(f"fetch route MLAS build {document['duration_s']} s; shard: {passed} passed")

    # The same command again (the clone is the same commit) compiles nothing.
    rebuilt = unchanged_rebuild(_fetch_build(orch_cli, orch_env, source))
    assert exe.is_file() and rebuilt["build_dir"] == document["build_dir"]
    print(f"unchanged rebuild: {rebuilt['duration_s']} s")


@pytest.mark.timeout(BUILD_TIMEOUT)
def test_an_archive_whose_sha1_is_not_deps_txts_or_a_missing_one_stops_the_configure_naming_it(
    upstream: Upstream, orch_env: dict[str, str], orch_cli: Any
) -> None:
    abseil = f"{upstream.mirror.url}{upstream.archives['abseil_cpp']}"
    for branch, expected in (
        (
            BAD_BRANCH,
            ["download of abseil_cpp is not the archive cmake/deps.txt names: its SHA1 is", "0" * 40, abseil],
        ),
        (MISSING_BRANCH, [f"could not download abseil_cpp: {upstream.mirror.url}/not-served/abseil_cpp.zip"]),
    ):
        result = _fetch_build(orch_cli, orch_env, f"{upstream.repo_url}@{branch}", "--ort-version", "1.21.0")
        assert result.returncode != 0 and "Traceback" not in result.stderr
        message = result.stderr[result.stderr.rfind("error:") :]
        for text in expected:
            assert text in message, message
    assert ("/not-served/abseil_cpp.zip", 404) in upstream.mirror.requests


def test_a_tag_holding_another_release_stops_the_build_after_the_clone(
    upstream: Upstream, orch_env: dict[str, str], orch_cli: Any
) -> None:
    source = f"{upstream.repo_url}@{MISNAMED}"
    plan = json.loads(_fetch_build(orch_cli, orch_env, source, dry=True).stdout)
    assert plan["ort_version"] == "1.22.0"  # the ref's claim, checked once the clone is there
    result = _fetch_build(orch_cli, orch_env, source)
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert "holds ORT 1.21.0, but the build was planned for 1.22.0 (from git ref)" in result.stderr
    assert "needs the network: yes (cmake/deps.txt" not in result.stderr  # stopped before the build
