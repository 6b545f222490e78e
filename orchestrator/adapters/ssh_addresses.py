"""What a board's address may be: a hostname or an IP address, a port, a ProxyJump list.

Checked where the values are read (the inventory, ssh_config), so that a value no SSH client could
use is refused as bad input naming its key, rather than reaching a resolver or a socket and coming
back as "cannot resolve" or "connection refused". Pure: no lookup, no connection.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass

# One DNS label: letters, digits, '-' inside (RFC 1123), and '_', which real networks use (container
# and mDNS names) and OpenSSH accepts. Nothing a shell or an option parser would read specially.
_LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")
_DIGITS_AND_DOTS = re.compile(r"[0-9.]+")
# An IPv6 zone (fe80::1%eth0): an interface name.
_ZONE = re.compile(r"[A-Za-z0-9_.-]{1,15}")
MAX_HOSTNAME = 253


def hostname_problem(text: str) -> str | None:
    """Why ``text`` is neither a hostname nor an IPv4/IPv6 address, or None when it is one."""
    if not text:
        return "an empty hostname"
    if text.startswith("-"):
        return "it starts with '-' (it would read as an option)"
    if ":" in text or text.startswith("["):
        return _ipv6_problem(text)
    if _DIGITS_AND_DOTS.fullmatch(text):
        return _ipv4_problem(text)
    return _name_problem(text)


def _ipv4_problem(text: str) -> str | None:
    try:
        ipaddress.IPv4Address(text)
    except ValueError:
        return "it looks like an IPv4 address but is not one (four numbers 0..255 joined by '.')"
    return None


def _name_problem(text: str) -> str | None:
    bad = next((c for c in text if not (c.isascii() and (c.isalnum() or c in "._-"))), None)
    if bad is not None:
        return f"the character {bad!r} cannot be in a hostname (letters, digits, '-', '_' and '.' only)"
    name = text.removesuffix(".")  # a fully qualified name may end with the root's dot
    if len(name) > MAX_HOSTNAME:
        return f"longer than {MAX_HOSTNAME} characters"
    label = next((label for label in name.split(".") if not _LABEL.fullmatch(label)), None)
    if label is not None:
        return _label_problem(label)
    if name.rsplit(".", 1)[-1].isdigit():
        return "its last part is a number (not a name, and not an IPv4 address)"
    return None


def _label_problem(label: str) -> str:
    if not label:
        return "an empty part between dots"
    if len(label) > 63:
        return f"the part {label[:20]!r}... is longer than 63 characters"
    return f"the part {label!r} starts or ends with '-'"


def _ipv6_problem(text: str) -> str | None:
    if text.startswith("["):
        return "write an IPv6 address without brackets (brackets are for [ADDRESS]:PORT in proxy_jump)"
    address, _, zone = text.partition("%")
    if zone and not _ZONE.fullmatch(zone):
        return f"the IPv6 zone {zone!r} is not an interface name"
    try:
        ipaddress.IPv6Address(address)
    except ValueError:
        return "it holds ':' but is not an IPv6 address"
    return None


def port_problem(value: object) -> str | None:
    """Why ``value`` (an int, or the text of one) is not a TCP port, or None when it is one."""
    if isinstance(value, bool):
        return "not a port number"
    if isinstance(value, str):
        if not (value.isascii() and value.isdigit()):
            return "not a port number"
        value = int(value)
    if not isinstance(value, int):
        return "not a port number"
    if not 1 <= value <= 65535:
        return "out of range (1..65535)"
    return None


@dataclass(frozen=True, kw_only=True)
class JumpHost:
    """One ``[user@]host[:port]`` entry of a ProxyJump list."""

    user: str | None
    hostname: str
    port: int


def parse_proxy_jump(text: str) -> list[JumpHost]:
    """A ProxyJump value as OpenSSH reads it (``none`` is none); ValueError says what is wrong."""
    if text.strip().lower() == "none":
        return []
    return [_jump_host(entry) for entry in text.split(",")]


def _jump_host(given: str) -> JumpHost:
    entry = given.strip().removeprefix("ssh://")
    user, at, hostport = entry.rpartition("@")
    if at and (not user or any(c.isspace() or c in "@:/'\"`$;&|<>()\\" for c in user)):
        raise ValueError(f"{given.strip()!r}: {user!r} is not a user name")
    host, port_text = hostport, ""
    if hostport.startswith("["):  # [ipv6]:port
        host, closed, rest = hostport[1:].partition("]")
        if not closed or (rest and not rest.startswith(":")):
            raise ValueError(f"{given.strip()!r}: write an IPv6 jump host as [ADDRESS]:PORT")
        port_text = rest.removeprefix(":")
        if not port_text and rest:
            raise ValueError(f"{given.strip()!r}: the port after ':' is missing")
    elif hostport.count(":") == 1:
        host, _, port_text = hostport.partition(":")
        if not port_text:
            raise ValueError(f"{given.strip()!r}: the port after ':' is missing")
    problem = hostname_problem(host)
    if problem:
        raise ValueError(f"{given.strip()!r}: {host!r} is not a hostname or address: {problem}")
    port = 22
    if port_text:
        problem = port_problem(port_text)
        if problem:
            raise ValueError(f"{given.strip()!r}: port {port_text!r} is {problem}")
        port = int(port_text)
    return JumpHost(user=user or None, hostname=host, port=port)
