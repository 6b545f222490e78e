"""Options shared by sub-commands, defined once: inventory, board selection, --json, --dry-run."""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from pathlib import Path

from orchestrator.adapters.ssh import check_local_files
from orchestrator.artifacts.model_file import onnx_file_problem
from orchestrator.board import Board
from orchestrator.fleet.inventory import load_inventory
from orchestrator.paths import default_inventory_path


# Types for numeric options: argparse reports a refused value as
# "orch exec: error: argument --timeout: must be a number > 0, not '0'" (exit code 2).
def _number(text: str, kind: type[int | float]) -> float:
    try:
        value = kind(text)
    except ValueError:
        word = "a whole number" if kind is int else "a number"
        raise argparse.ArgumentTypeError(f"must be {word}, not {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, not {text!r}")
    return value


def positive_int(text: str) -> int:
    value = int(_number(text, int))
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 1, not {text!r}")
    return value


def non_negative_int(text: str) -> int:
    value = int(_number(text, int))
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a whole number >= 0, not {text!r}")
    return value


def positive_float(text: str) -> float:
    value = _number(text, float)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number > 0, not {text!r}")
    return value


def non_negative_float(text: str) -> float:
    value = _number(text, float)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, not {text!r}")
    return value


def percentage(text: str) -> float:
    """``2`` or ``2%`` -> 0.02: a percentage >= 0, as a fraction."""
    value = _number(text.strip().removesuffix("%"), float)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be a percentage >= 0, not {text!r}")
    return value / 100


def path_arg(text: str) -> Path:
    """A local path option: not empty, no NUL byte, no component longer than the file system takes."""
    if not text:
        raise argparse.ArgumentTypeError("must be a path, not ''")
    if "\x00" in text:
        raise argparse.ArgumentTypeError(f"a path cannot hold a NUL byte: {text!r}")
    if any(len(part.encode(errors="surrogateescape")) > 255 for part in text.split("/")):
        raise argparse.ArgumentTypeError(f"a path component is longer than 255 bytes: {text[:60]!r}...")
    return Path(text)


def onnx_model_file(text: str) -> Path:
    """A --model FILE option: an ONNX model on the workstation (refused here, in --dry-run too,
    when it is a directory, a device, a pipe, or a file that is not ONNX)."""
    path = path_arg(text)
    problem = onnx_file_problem(path.expanduser())
    if problem:
        raise argparse.ArgumentTypeError(f"{text!r}: {problem}")
    return path


def model_name_or_file(text: str) -> str:
    """A --model NAME option (comma-separated names allowed): a deployed model's name, or the path
    of its file. A value naming a file that exists must be an ONNX model; a name is left to the
    command (it is looked up on the boards)."""
    for part in text.split(","):
        path = Path(part.strip()).expanduser()
        if not part.strip() or "\x00" in part:
            continue  # the command names an empty entry; the CLI refuses NUL bytes
        if ("/" in part or part.endswith(".onnx")) and (path.exists() or path.is_symlink()):
            problem = onnx_file_problem(path)
            if problem:
                raise argparse.ArgumentTypeError(f"{part.strip()!r}: {problem}")
    return text


def add_inventory_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "-i",
        "--inventory",
        type=path_arg,
        default=None,
        metavar="PATH",
        help="inventory file (default: ./inventory.yaml or $ORCH_INVENTORY)",
    )


def add_selection_options(parser: argparse.ArgumentParser) -> None:
    add_inventory_option(parser)
    group = parser.add_argument_group("board selection")
    group.add_argument(
        "--host", action="append", default=[], metavar="NAME", help="a board by name (repeatable)"
    )
    group.add_argument(
        "--group", action="append", default=[], metavar="NAME", help="every board of a group (repeatable)"
    )
    group.add_argument("--all-devices", action="store_true", help="every board of the inventory")
    group.add_argument(
        "--limit",
        metavar="PATTERN",
        help="Ansible-style pattern: globs, 'a:b' union, 'a:&b' intersection, 'a:!b' exclusion",
    )


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print one JSON document on stdout")


def add_dry_run_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--dry-run", action="store_true", help="print the plan and stop")


@dataclass(frozen=True, kw_only=True)
class Selection:
    """Which boards a command is for: the inventory file and --host/--group/--all-devices/--limit."""

    inventory: Path | None = None
    hosts: tuple[str, ...] = ()
    groups: tuple[str, ...] = ()
    all_devices: bool = False
    limit: str | None = None

    @classmethod
    def from_args(cls, args: argparse.Namespace) -> Selection:
        """The options ``add_selection_options`` defined, as parsed."""
        return cls(
            inventory=args.inventory,
            hosts=tuple(args.host),
            groups=tuple(args.group),
            all_devices=args.all_devices,
            limit=args.limit,
        )

    @property
    def inventory_path(self) -> Path:
        return self.inventory or default_inventory_path()


def selected_boards(selection: Selection) -> list[Board]:
    """Load the inventory and apply the selection; selecting nothing is an error."""
    inventory = load_inventory(selection.inventory_path)
    boards = inventory.select(
        hosts=list(selection.hosts),
        groups=list(selection.groups),
        all_devices=selection.all_devices,
        limit=selection.limit,
    )
    check_local_files(boards)
    return boards
