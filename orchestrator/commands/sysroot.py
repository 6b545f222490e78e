"""`orch sysroot`: pull boards' headers and libraries, add root file systems, check wheels against them.

``pull`` packs each selected board's sysroot over SSH (boards in parallel) and stores it by
content hash; ``add`` stores a rootfs tarball or directory the same way (NVIDIA's L4T sample
root file system, an exported image); ``list`` shows the store (each sysroot's OS, glibc, Python
and GPU stack); ``check`` proves a wheel's symbol version needs against a stored sysroot's real
libraries.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, TypedDict

from rich.markup import escape
from rich.table import Table

from orchestrator.adapters.engine import Engine
from orchestrator.adapters.ssh import connect
from orchestrator.artifacts.store import Artifact, read_manifest
from orchestrator.board import Board
from orchestrator.builds.sysroots.contents import (
    CHECKED_PREFIXES,
    LibraryVersions,
    apt_install_command,
    check_wheel_against,
)
from orchestrator.builds.sysroots.pull import PullResult, pull
from orchestrator.builds.sysroots.store import (
    StoreOutcome,
    SysrootRecord,
    check_name,
    find_sysroot,
    gpu_stack,
    list_sysroots,
    now,
    remove_sysroot,
    store_directory,
    store_root,
    store_tarball,
)
from orchestrator.commands import options
from orchestrator.commands.options import Selection, add_json_option, add_selection_options, selected_boards
from orchestrator.console import console, emit_json
from orchestrator.errors import BuildError, UsageError
from orchestrator.fleet.board_probe import read_facts
from orchestrator.fleet.parallel import print_failures, run_on_boards
from orchestrator.lab.gpu_stand_in import make_stand_in_image
from orchestrator.paths import orch_home
from orchestrator.targets import resolve_target

NAME = "sysroot"
HELP = "pull sysroots from boards, add root file systems, check wheels against them"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="sysroot_command", metavar="ACTION")
    pull = sub.add_parser(
        "pull",
        help="pack the selected boards' headers and libraries over SSH and store them",
        description="Pack the selected boards' headers and libraries over SSH and store them by content"
        " hash. Exit code: 0 when every board was pulled; 8 when some were and others not; 4 when none.",
    )
    add_selection_options(pull)
    pull.add_argument(
        "--parallel", type=options.positive_int, default=4, metavar="N", help="boards at once (default 4)"
    )
    pull.add_argument(
        "--timeout",
        type=options.positive_float,
        default=None,
        metavar="S",
        help="seconds per board, packing and fetching included (default: none)",
    )
    pull.add_argument(
        "--no-compress",
        action="store_true",
        help="send the tarball uncompressed (faster on a slow board with a fast link)",
    )
    add_json_option(pull)
    add = sub.add_parser(
        "add",
        help="store a root file system (a tarball or a directory) as a sysroot",
        description="Store the headers and libraries of a root file system (a tarball in any compression"
        " tar reads, or a directory) as a sysroot called NAME, e.g. NVIDIA's L4T sample rootfs.",
    )
    add.add_argument("path", type=options.path_arg, metavar="PATH", help="a rootfs tarball or directory")
    add.add_argument("--name", required=True, metavar="NAME", help="what to call it (--sysroot-from NAME)")
    add_json_option(add)
    stand_in = sub.add_parser(
        "stand-in",
        help="make a JetPack-like sysroot offline (a Jetson target's stand-in OS with CUDA and cuDNN)",
        description="Make, offline, the sysroot of a Jetson stand-in and store it as NAME: the target's lab"
        " stand-in OS (Debian 12 for jetson-orin) with CUDA 12.4 for arm64 from Debian's contrib/non-free"
        " packages and cuDNN 9 from NVIDIA's aarch64 wheel (through pip's configured sources), laid out as"
        " JetPack lays them. For `orch build --ep cuda --sysroot-from NAME` without a Jetson at hand. It"
        " is not L4T: no NVIDIA driver, no TensorRT.",
    )
    stand_in.add_argument(
        "--target",
        default="jetson-orin",
        metavar="NAME",
        help="a Jetson target profile (default jetson-orin)",
    )
    stand_in.add_argument(
        "--name", required=True, metavar="NAME", help="what to call it (--sysroot-from NAME)"
    )
    add_json_option(stand_in)
    listing = sub.add_parser(
        "list", help="the stored sysroots: OS, glibc, Python, GPU stack (CUDA, cuDNN, TensorRT), size"
    )
    add_json_option(listing)
    remove = sub.add_parser(
        "remove", help="forget a stored sysroot (its files go when no other name shares them)"
    )
    remove.add_argument("name", metavar="NAME")
    check = sub.add_parser(
        "check",
        help="prove a wheel's GLIBC_/GLIBCXX_/CXXABI_/GCC_ needs against a stored sysroot",
        description="Print what the wheel's shared objects need from each library and what the sysroot's"
        " libraries define. Exit code: 0 when the wheel fits, 5 naming each missing version otherwise.",
    )
    check.add_argument(
        "--sysroot-from", required=True, metavar="NAME", help="a stored sysroot (a board's name, or --name)"
    )
    what = check.add_mutually_exclusive_group(required=True)
    what.add_argument("--wheel", type=options.path_arg, metavar="PATH", help="a .whl file")
    what.add_argument(
        "--artifact",
        type=options.path_arg,
        metavar="DIR",
        help="an artifact directory (manifest.json + wheel)",
    )
    add_json_option(check)


def run(args: argparse.Namespace) -> int:
    action = getattr(args, "sysroot_command", None)
    if not action:
        raise UsageError(
            "say what to do: `orch sysroot pull --host NAME`, `orch sysroot add PATH --name NAME`,"
            " `orch sysroot list`, `orch sysroot check --sysroot-from NAME --wheel PATH`, `orch sysroot remove NAME`"
        )
    if action == "pull":
        return _pull(
            PullRequest(
                selection=Selection.from_args(args),
                parallel=args.parallel,
                timeout=args.timeout,
                compress=not args.no_compress,
                json=args.json,
            )
        )
    if action == "add":
        return _add(AddRequest(name=args.name, path=Path(args.path), json=args.json))
    if action == "stand-in":
        return _stand_in(StandInRequest(name=args.name, target=args.target, json=args.json))
    if action == "list":
        return _list(as_json=args.json)
    if action == "check":
        return _check(
            CheckRequest(
                sysroot_from=args.sysroot_from, wheel=args.wheel, artifact=args.artifact, json=args.json
            )
        )
    return _remove(args.name)


@dataclass(frozen=True, kw_only=True)
class PullRequest:
    selection: Selection
    parallel: int  # boards at once
    timeout: float | None  # seconds per board
    compress: bool
    json: bool


@dataclass(frozen=True, kw_only=True)
class AddRequest:
    name: str
    path: Path  # a rootfs tarball or directory
    json: bool


@dataclass(frozen=True, kw_only=True)
class StandInRequest:
    name: str
    target: str  # a Jetson target profile
    json: bool


@dataclass(frozen=True, kw_only=True)
class CheckRequest:
    sysroot_from: str
    wheel: Path | None  # the wheel, or
    artifact: Path | None  # the artifact directory that holds it
    json: bool


# -- shared output -------------------------------------------------------------------------------------


def _size(count: int) -> str:
    if count >= 1 << 30:
        return f"{count / (1 << 30):.2f} GiB"
    return f"{count / (1 << 20):.1f} MiB"


def _describe(record: SysrootRecord) -> str:
    parts = [
        record["os"]["name"] or "unknown OS",
        f"glibc {record['glibc'] or '?'}",
        f"Python {record['python'] or 'none'}",
        record["triplet"] or "no triplet",
    ]
    gpu = gpu_stack(record)
    if gpu is not None and gpu.summary != "-":
        parts.append(gpu.summary)
    return ", ".join(parts) + f"; {record['files']} files, {_size(record['size'])}"


def _gpu_cell(record: SysrootRecord) -> str:
    """``CUDA 12.4, cuDNN 9.3.0``, ``-`` for none, ``?`` for a sysroot stored before orch read them."""
    gpu = gpu_stack(record)
    return "?" if gpu is None else gpu.summary


def _headers_note(name: str, record: SysrootRecord, *, where: str, again: str) -> str | None:
    """Say what a sysroot cannot do yet, ending with the command that installs what it lacks ``where``
    (``on the board``): a minimal board has no -dev packages."""
    missing = [str(package) for package in record.get("missing_dev_packages") or []]
    if not missing:
        return None
    return (
        f"{name} lacks headers ({', '.join(missing)} not installed): this sysroot serves wheel checks, not"
        f" compiling; to compile against it, install them and {again}; {where}: {apt_install_command(missing)}"
    )


def _stored_text(outcome: StoreOutcome) -> str:
    """What a pull or add did to the store, in words: new tree, the same tree again, or a shared one."""
    stored = outcome.stored
    short = stored.digest[:12]
    if outcome.previous_digest == stored.digest:
        return f"unchanged, same digest {short} as stored {stored.entry.stored_at or ''}; nothing new stored"
    if outcome.new:
        text = f"stored sysroot {short} ({_describe(stored.record)})"
    else:
        text = f"sysroot {short} ({_describe(stored.record)}): the same tree is already stored, nothing new written"
    if outcome.previous_digest:
        text += f"; the name now points at it (was {outcome.previous_digest[:12]}: its libraries changed)"
    return text


# -- pull ------------------------------------------------------------------------------------------------


class _PullSeconds(TypedDict):
    pack: float
    fetch: float
    store: float


class PulledDocument(TypedDict):
    """A board's pull in ``orch sysroot pull --json``."""

    ok: Literal[True]
    new: bool
    digest: str
    path: str
    previous_digest: str | None
    tarball_bytes: int
    seconds: _PullSeconds
    record: SysrootRecord


class FailedPullDocument(TypedDict):
    ok: Literal[False]
    error: str


def _pulled_document(done: PullResult) -> PulledDocument:
    return PulledDocument(
        ok=True,
        new=done.outcome.new,
        digest=done.outcome.stored.digest,
        path=str(done.outcome.stored.directory),
        previous_digest=done.outcome.previous_digest,
        tarball_bytes=done.tarball_bytes,
        seconds={
            "pack": round(done.pack_seconds, 2),
            "fetch": round(done.fetch_seconds, 2),
            "store": round(done.store_seconds, 2),
        },
        record=done.outcome.stored.record,
    )


def _pull_one(board: Board, compress: bool) -> PullResult:
    with connect(board) as session:
        facts = read_facts(session, board, board.workdir)
        return pull(session, facts, compress=compress)


def _pull(request: PullRequest) -> int:
    boards = selected_boards(request.selection)
    started = time.monotonic()
    result = run_on_boards(
        boards,
        lambda board: _pull_one(board, request.compress),
        parallel=request.parallel,
        timeout=request.timeout,
        label="sysroot pull",
        progress=None if not request.json else False,
    )
    pulled: dict[str, PullResult] = result.values()
    if request.json:
        document: dict[str, PulledDocument | FailedPullDocument] = {}
        for name, outcome in result.outcomes.items():
            if outcome.ok and name in pulled:
                document[name] = _pulled_document(pulled[name])
            else:
                document[name] = FailedPullDocument(ok=False, error=outcome.message)
        emit_json(document)
        return result.exit_code
    for name, done in pulled.items():
        stored = done.outcome.stored
        timing = f"packed {done.pack_seconds:.1f} s, fetched {_size(done.tarball_bytes)} in {done.fetch_seconds:.1f} s"
        console.print(
            f"[green]✓[/] {escape(name)}: {escape(_stored_text(done.outcome))} ({timing})", soft_wrap=True
        )
        if done.glibc_mismatch:
            console.print(f"  [yellow]note:[/] {escape(done.glibc_mismatch)}", soft_wrap=True)
        note = _headers_note(name, stored.record, where="on the board", again="pull it again")
        if note:
            console.print(f"  [yellow]note:[/] {escape(note)}", soft_wrap=True)
    print_failures(result)
    style = "green" if result.exit_code == 0 else "red"
    console.print(
        f"[{style}]{escape(result.summary())} in {time.monotonic() - started:.1f} s[/]", soft_wrap=True
    )
    return result.exit_code


# -- add -------------------------------------------------------------------------------------------------


def _add(request: AddRequest) -> int:
    name = check_name(request.name)
    path = request.path
    started = time.monotonic()
    if path.is_dir():
        outcome = store_directory(name, path, source=str(path.resolve()))
    elif path.is_file():
        outcome = store_tarball(
            name, path, kind="rootfs", source=str(path.resolve()), extra={"added_at": now()}
        )
    else:
        raise UsageError(f"{path}: no such file or directory", hint="give a rootfs tarball or directory")
    if _said_stored(name, outcome, started, as_json=request.json):
        return 0
    note = _headers_note(name, outcome.stored.record, where="in that root file system", again="add it again")
    if note:
        console.print(f"  [yellow]note:[/] {escape(note)}", soft_wrap=True)
    return 0


def _said_stored(name: str, outcome: StoreOutcome, started: float, *, as_json: bool, **extra: str) -> bool:
    """What `add` and `stand-in` print of a stored tree (``extra``: more keys of the JSON document);
    True when that was the JSON document, which nothing may follow."""
    stored = outcome.stored
    if as_json:
        emit_json(
            {
                "name": name,
                "new": outcome.new,
                "digest": stored.digest,
                "path": str(stored.directory),
                "previous_digest": outcome.previous_digest,
                **extra,
                "record": stored.record,
            }
        )
        return True
    console.print(
        f"[green]✓[/] {escape(name)}: {escape(_stored_text(outcome))} in {time.monotonic() - started:.1f} s",
        soft_wrap=True,
    )
    return False


def _stand_in(request: StandInRequest) -> int:
    name = check_name(request.name)
    profile = resolve_target(request.target)
    started = time.monotonic()
    engine = Engine()

    def log(line: str) -> None:
        console.print(f"  {escape(line)}", soft_wrap=True, highlight=False)

    image = make_stand_in_image(engine, profile, log)
    scratch = orch_home() / "tmp"
    scratch.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=scratch, prefix="stand-in-") as directory:
        tarball = Path(directory) / "rootfs.tar"
        size = engine.export_filesystem(image.tag, tarball)
        log(f"exported {image.tag}'s file system ({size / 1e9:.2f} GB)")
        outcome = store_tarball(
            name,
            tarball,
            kind="stand-in",
            source=f"orch sysroot stand-in --target {profile.name} ({image.tag}; cuDNN {image.cudnn_wheel}"
            f" sha256 {image.cudnn_sha256[:12]})",
            extra={"added_at": now()},
        )
    if _said_stored(name, outcome, started, as_json=request.json, image=image.tag):
        return 0
    console.print(
        f"  a stand-in for {escape(profile.name)}, not L4T: no NVIDIA driver; build with"
        f" orch build --target {escape(profile.name)} --sysroot-from {escape(name)} --ep cuda",
        soft_wrap=True,
    )
    return 0


# -- list ------------------------------------------------------------------------------------------------


def _list(*, as_json: bool) -> int:
    stored = list_sysroots()
    if as_json:
        emit_json(
            [
                {"name": s.name, "digest": s.digest, "path": str(s.directory), "record": s.record}
                for s in stored
            ]
        )
        return 0
    if not stored:
        console.print(
            f"no sysroots in {escape(str(store_root()))}: `orch sysroot pull --host NAME` or"
            " `orch sysroot add PATH --name NAME`"
        )
        return 0
    table = Table(title=f"sysroots in {escape(str(store_root()))}", title_justify="left")
    columns = (
        "name",
        "kind",
        "digest",
        "OS",
        "glibc",
        "Python",
        "triplet",
        "GPU",
        "files",
        "size",
        "headers",
    )
    for column in columns:
        table.add_column(column, justify="right" if column in ("files", "size") else "left")
    for s in stored:
        record = s.record
        missing = record["missing_dev_packages"]
        table.add_row(
            escape(s.name),
            escape(s.entry.kind),
            s.digest[:12],
            escape(record["os"]["name"] or "?"),
            escape(record["glibc"] or "?"),
            escape(record["python"] or "none"),
            escape(record["triplet"] or "?"),
            escape(_gpu_cell(record)),
            str(record["files"]),
            _size(record["size"]),
            "complete" if not missing else escape("lacks " + ", ".join(missing)),
        )
    console.print(table)
    return 0


# -- remove ----------------------------------------------------------------------------------------------


def _remove(name: str) -> int:
    stored = find_sysroot(name)
    deleted = remove_sysroot(name)
    if deleted:
        console.print(
            f"removed sysroot {escape(name)} and its files ({stored.digest[:12]}, {_size(stored.tree['size'])})"
        )
    else:
        console.print(
            f"removed the name {escape(name)}; its files ({stored.digest[:12]}) stay: another name uses them"
        )
    return 0


# -- check -----------------------------------------------------------------------------------------------


def _wheel_path(request: CheckRequest) -> Path:
    if request.wheel is not None:
        return request.wheel
    directory = request.artifact
    assert directory is not None, "argparse requires --wheel or --artifact"
    manifest_path = directory / "manifest.json"
    if not manifest_path.is_file():
        raise UsageError(
            f"{directory}: no manifest.json: not an artifact directory",
            hint="point --artifact at artifacts/<target>/<variant>/<version>/",
        )
    # A C library build has no wheel: refused by wheel_path with what to do instead.
    wheel = Artifact(directory=directory, manifest=read_manifest(manifest_path)).wheel_path
    if not wheel.is_file():
        raise UsageError(f"{manifest_path} names {wheel.name}, which is not in {directory}")
    return wheel


def _newest(versions: tuple[str, ...] | list[str], prefix: str) -> str | None:
    return LibraryVersions(name="", path="", machine="", versions=frozenset(versions)).highest(prefix)


def _check(request: CheckRequest) -> int:
    stored = find_sysroot(request.sysroot_from)
    wheel = _wheel_path(request)
    check = check_wheel_against(wheel, stored.sysroot)
    if request.json:
        emit_json({**check.as_dict(), "digest": stored.digest})
        return 0 if check.ok else BuildError.exit_code
    sysroot = stored.sysroot
    console.print(
        f"[bold]{escape(wheel.name)}[/] against sysroot [bold]{escape(stored.name)}[/] {stored.digest[:12]}"
        f" ({escape(_describe(stored.record))})",
        soft_wrap=True,
    )
    table = Table(show_edge=False)
    table.add_column("library")
    table.add_column("the wheel needs (newest)")
    table.add_column("the sysroot defines (newest)")
    table.add_column("")
    missing_by_library: dict[str, set[str]] = {}
    for problem in check.problems:
        missing_by_library.setdefault(problem.library, set()).update(problem.versions or ("(library)",))
    for library_name, versions in check.needs().items():
        library = sysroot.library(library_name)
        families = [p for p in CHECKED_PREFIXES if _newest(versions, p)]
        needed = [n for p in families if (n := _newest(versions, p))]
        # Only the families the wheel asks of this library (libgcc_s also defines old GLIBC_ names).
        has = [h for p in families if library and (h := library.highest(p))]
        missing = missing_by_library.get(library_name)
        table.add_row(
            escape(library_name),
            escape(", ".join(needed)),
            escape(", ".join(has) if library else "(not in the sysroot)"),
            "[red]✗ " + escape(", ".join(sorted(missing))) + "[/]" if missing else "[green]✓[/]",
        )
    console.print(table)
    if check.ok:
        console.print(
            f"[green]✓ {escape(wheel.name)} fits sysroot {escape(stored.name)}: every GLIBC_/GLIBCXX_/CXXABI_/GCC_"
            " version its shared objects need is defined there[/]",
            soft_wrap=True,
        )
        return 0
    lines = "\n".join(f"  - {message}" for message in check.messages)
    raise BuildError(
        f"{wheel.name} does not fit sysroot {stored.name} ({len(check.messages)} problem"
        f"{'s' if len(check.messages) != 1 else ''}):\n{lines}",
        hint="build the wheel for this board's OS release (its glibc and libstdc++), or pick one made for it",
    )
