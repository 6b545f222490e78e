"""Property tests: random inventories and --limit patterns never raise anything but orch's own errors.

Whatever a user (or a damaged disk) puts in the inventory file, ``load_inventory`` either returns
an inventory or raises an ``OrchError`` (a message naming the file, exit code 2) -- never a
KeyError, RecursionError or any other traceback. The same for ``--limit`` over any board and
group names.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.errors import OrchError
from orchestrator.fleet.inventory import load_inventory
from orchestrator.fleet.selection import Wanted, select_names

# Derandomised: CI runs the same examples every time (a red run is reproducible, not luck), and
# no example database is written into the checkout. Explore further locally by raising max_examples.
SETTINGS = settings(
    max_examples=150,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)

# Words an inventory is made of, and some that are almost right.
KEYS = [
    "all", "hosts", "children", "vars", "hostname", "port", "user", "identity_file", "proxy_jump",
    "target", "python", "workdir", "tags", "lab", "pi01", "pi02", "rpis", "fast", "<<", "password",
    "ansible_host", "prot", "", "-x", "a b", "über",
]  # fmt: skip
SCALARS = st.one_of(
    st.sampled_from(["rpi4", "lab", "jetson", "127.0.0.1", "~/.ssh/id", "-oProxyCommand", "yes", "null"]),
    st.text(max_size=12),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True),
    st.booleans(),
    st.none(),
)
KEY = st.one_of(st.sampled_from(KEYS), st.text(max_size=8))
DOCUMENT = st.recursive(
    SCALARS,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(KEY, inner, max_size=5)),
    max_leaves=40,
)


@pytest.fixture(scope="module")
def workdir() -> Iterator[Path]:
    """A private ORCH_HOME (no lab of the user's) and no ssh_config, for the whole module."""
    with tempfile.TemporaryDirectory(prefix="orch-props-") as tmp, pytest.MonkeyPatch.context() as patch:
        root = Path(tmp)
        patch.setenv("ORCH_HOME", str(root / "home"))
        patch.setenv("ORCH_SSH_CONFIG", str(root / "no-ssh-config"))
        yield root


def _load(path: Path, data: bytes) -> None:
    path.write_bytes(data)
    try:
        inventory = load_inventory(path)
    except OrchError as error:
        assert str(path) in error.message, error.message
        return
    # A loaded inventory can be selected from and printed (the JSON of `inventory list`).
    for board in inventory.boards.values():
        assert board.name and board.hostname


@SETTINGS
@given(document=st.dictionaries(st.just("all"), DOCUMENT, min_size=1) | DOCUMENT)
def test_random_documents_load_or_fail_cleanly(workdir: Path, document: Any) -> None:
    text = yaml.safe_dump(document, allow_unicode=True)
    _load(workdir / "inventory.yaml", text.encode())


INVENTORY = Path(__file__).parent.parent.parent / "inventory.yaml"
YAML_NOISE = st.sampled_from(
    ["&a ", "*a", "*b", "!!binary ", "!!python/object:os.system ", "<<: *a", "? ", "- ", ": ", "{", "}",
     "[", "]", "'", '"', "\t", "\n", "  ", "%TAG ! x\n", "---\n", "...\n", "\x00", "\x07", "\ufeff",
     "2001-13-45", "0x_", "!!int x", "|-\n", ">\n", "#", "~", ",", "@", "`"]
)  # fmt: skip


@SETTINGS
@given(
    edits=st.lists(
        st.tuples(st.floats(min_value=0, max_value=1), st.one_of(YAML_NOISE, st.text(max_size=4))),
        min_size=1,
        max_size=6,
    )
)
def test_damaged_inventories_load_or_fail_cleanly(workdir: Path, edits: list[tuple[float, str]]) -> None:
    text = INVENTORY.read_text()
    for where, piece in edits:
        at = int(where * len(text))
        text = text[:at] + piece + text[at:]
    _load(workdir / "inventory.yaml", text.encode("utf-8", errors="surrogatepass"))


@SETTINGS
@given(data=st.binary(max_size=200))
def test_random_bytes_load_or_fail_cleanly(workdir: Path, data: bytes) -> None:
    _load(workdir / "inventory.yaml", data)


BOARDS = ["pi01", "pi02", "nano01", "lab1", "a.b", "x-y"]
GROUPS = {"rpis": ["pi01", "pi02"], "fast": ["pi02"], "empty": [], "jet*": ["nano01"]}
PATTERN = st.lists(
    st.one_of(
        st.sampled_from([*BOARDS, *GROUPS, "all", "*", "pi*", "[", "]", "?", "&", "!", ":", ",", " ", "~"]),
        st.text(max_size=3),
    ),
    max_size=8,
).map("".join)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(
    limit=PATTERN,
    hosts=st.lists(st.sampled_from([*BOARDS, "nope"]), max_size=2),
    groups=st.lists(st.sampled_from([*GROUPS, "all", "nope"]), max_size=2),
    all_devices=st.booleans(),
)
def test_limit_patterns_select_or_fail_cleanly(
    limit: str, hosts: list[str], groups: list[str], all_devices: bool
) -> None:
    try:
        wanted = Wanted(hosts=hosts, groups=groups, all_devices=all_devices, limit=limit)
        chosen = select_names(boards=BOARDS, groups=GROUPS, wanted=wanted)
    except OrchError as error:
        assert error.exit_code == 2
        # An empty term is named for what it is, never "'' is neither a board nor a group".
        assert "--limit: '' is neither" not in error.message
        return
    assert chosen and set(chosen) <= set(BOARDS)
    assert chosen == [name for name in BOARDS if name in chosen]  # inventory order, no duplicates


def test_the_environment_is_private(workdir: Path) -> None:
    assert os.environ["ORCH_HOME"].startswith(str(workdir))
