"""Property tests: random inventories and --limit patterns never raise anything but orch's own errors;
hostnames, ports and ProxyJump values are accepted exactly when they can name a host.

Whatever a user (or a damaged disk) puts in the inventory file, ``load_inventory`` either returns
an inventory or raises an ``OrchError`` (a message naming the file, exit code 2) -- never a
KeyError, RecursionError or any other traceback. The same for ``--limit`` over any board and
group names.
"""

from __future__ import annotations

import ipaddress
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from orchestrator.adapters.ssh_addresses import hostname_problem, parse_proxy_jump, port_problem
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


# --- hostnames and ports: what an address can be ------------------------------------------------------
# A hostname reaches a resolver and an SSH client: nothing a shell, an option parser or a URL would
# read specially may pass, and every real name or address must.
_SHELL_SPECIAL = "$`;&|<>(){}[]'\"\\ \t\n*?!#~=,/@"
_LABEL = st.from_regex(r"[A-Za-z0-9_]([A-Za-z0-9_-]{0,20}[A-Za-z0-9_])?", fullmatch=True)
_NAME = (
    st.lists(_LABEL, min_size=1, max_size=5)
    .map(".".join)
    .filter(lambda name: not name.split(".")[-1].isdigit())
)


@settings(max_examples=500, deadline=None, derandomize=True, database=None)
@given(text=st.text(max_size=40) | st.text(alphabet=_SHELL_SPECIAL + "ab.:-_09", max_size=20))
def test_an_accepted_hostname_holds_nothing_but_name_and_address_characters(text: str) -> None:
    if hostname_problem(text) is not None:
        return
    assert text and not text.startswith("-")
    assert all(c.isascii() and (c.isalnum() or c in "._-:%") for c in text), text
    assert not any(c in _SHELL_SPECIAL for c in text)


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(address=st.ip_addresses())
def test_every_ip_address_is_a_hostname(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> None:
    assert hostname_problem(str(address)) is None
    assert hostname_problem(address.exploded) is None


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(name=_NAME, fqdn=st.booleans())
def test_every_dns_name_is_a_hostname(name: str, fqdn: bool) -> None:
    assert hostname_problem(name + ("." if fqdn else "")) is None


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(name=_NAME, at=st.integers(min_value=0, max_value=100), special=st.sampled_from(list(_SHELL_SPECIAL)))
def test_a_name_with_a_shell_character_is_refused(name: str, at: int, special: str) -> None:
    at %= len(name) + 1
    problem = hostname_problem(name[:at] + special + name[at:])
    assert problem is not None


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(value=st.integers(min_value=-(2**40), max_value=2**40) | st.booleans() | st.text(max_size=8))
def test_a_port_is_a_whole_number_from_1_to_65535(value: object) -> None:
    is_port = (
        not isinstance(value, bool)
        and (isinstance(value, int) or (isinstance(value, str) and value.isascii() and value.isdigit()))
        and 1 <= int(value) <= 65535  # type: ignore[call-overload]
    )
    assert (port_problem(value) is None) == is_port


@settings(max_examples=300, deadline=None, derandomize=True, database=None)
@given(
    hops=st.lists(
        st.tuples(
            st.none() | st.from_regex(r"[a-z_][a-z0-9_-]{0,8}", fullmatch=True),
            _NAME | st.ip_addresses().map(str),
            st.none() | st.integers(min_value=-5, max_value=70_000),
        ),
        min_size=1,
        max_size=3,
    )
)
def test_proxy_jump_reads_back_what_was_written_or_names_the_bad_port(
    hops: list[tuple[str | None, str, int | None]],
) -> None:
    def entry(user: str | None, host: str, port: int | None) -> str:
        shown = f"[{host}]" if ":" in host and port is not None else host
        return (f"{user}@" if user else "") + shown + (f":{port}" if port is not None else "")

    text = ",".join(entry(*hop) for hop in hops)
    bad = [port for _, _, port in hops if port is not None and not 1 <= port <= 65535]
    if bad:
        with pytest.raises(ValueError, match=rf"port '{bad[0]}' is"):
            parse_proxy_jump(text)
        return
    parsed = parse_proxy_jump(text)
    assert [(hop.user, hop.hostname, hop.port) for hop in parsed] == [
        (user, host, 22 if port is None else port) for user, host, port in hops
    ]


@settings(max_examples=200, deadline=None, derandomize=True, database=None)
@given(hostname=st.text(alphabet=_SHELL_SPECIAL + "ab.:-_09", min_size=1, max_size=12) | _NAME)
def test_the_inventory_loads_a_hostname_only_when_it_is_one(workdir: Path, hostname: str) -> None:
    path = workdir / "hostname.yaml"
    path.write_text(yaml.safe_dump({"all": {"hosts": {"pi01": {"hostname": hostname}}}}))
    try:
        board = load_inventory(path).boards["pi01"]
    except OrchError as error:
        assert error.exit_code == 2
        assert f"{path}:" in error.message and "'hostname'" in error.message, error.message
        return
    assert board.hostname == hostname
    assert hostname_problem(hostname) is None
