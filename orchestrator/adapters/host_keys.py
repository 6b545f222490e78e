"""Host keys: orch's known_hosts and the user's, read strictly, and trust on first use, recorded.

- Host keys are always verified against orch's known_hosts and the user's ``~/.ssh/known_hosts``
  (read-only). A changed key is refused with both fingerprints and the exact command to accept
  the change deliberately (``changed_key_error``).
- A host never seen before is trusted on first use, but its key is *recorded* in orch's
  known_hosts and a line with its fingerprint is printed: never silent (``RecordOnFirstContact``).
- A damaged line is never skipped (``known_hosts_problem``): it may be the very board's key.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import shlex
import threading
from pathlib import Path

import paramiko
from rich.markup import escape

from orchestrator.common.textfiles import TEXT_FILE_LIMIT, read_capped
from orchestrator.console import console
from orchestrator.errors import HostKeyError, RemoteError
from orchestrator.paths import known_hosts_path

USER_KNOWN_HOSTS = Path("~/.ssh/known_hosts").expanduser()


def known_hosts_files() -> tuple[Path, Path]:
    """Where host keys are read from: orch's known_hosts first, then the user's (read-only)."""
    return known_hosts_path(), USER_KNOWN_HOSTS


# Appends to orch's known_hosts come from many fleet threads at once.
_known_hosts_lock = threading.Lock()


def fingerprint(key: paramiko.PKey) -> str:
    """OpenSSH-style fingerprint: ``SHA256:`` + unpadded base64 of the key blob's digest."""
    digest = hashlib.sha256(key.asbytes()).digest()
    return "SHA256:" + base64.b64encode(digest).decode().rstrip("=")


def known_hosts_name(hostname: str, port: int) -> str:
    """The name a host key is filed under in known_hosts (OpenSSH's convention)."""
    return hostname if port == 22 else f"[{hostname}]:{port}"


def read_host_keys(path: Path, into: paramiko.HostKeys | None = None) -> paramiko.HostKeys:
    """A known_hosts file's keys. Unlike ``paramiko.HostKeys(path)``, a marker line (``@revoked``,
    ``@cert-authority``: orch uses neither) is passed over instead of failing the whole file."""
    keys = into if into is not None else paramiko.HostKeys()
    for number, raw in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith(("#", "@")):
            continue
        try:
            entry = paramiko.hostkeys.HostKeyEntry.from_line(line, number)
        except Exception:  # noqa: BLE001, S112 -- a damaged line; known_hosts_problem() names it
            continue
        if entry is not None and entry.key is not None:
            for name in entry.hostnames:
                known = keys.lookup(name)
                if known is None or entry.key.get_name() not in known:  # the first entry wins, as in load()
                    keys.add(name, entry.key.get_name(), entry.key)
    return keys


def has_host(path: Path, name: str) -> bool:
    try:
        return path.is_file() and read_host_keys(path).lookup(name) is not None
    except (OSError, paramiko.SSHException, UnicodeDecodeError):
        return False


class RecordOnFirstContact(paramiko.MissingHostKeyPolicy):
    """Trust on first use, recorded and visible: append the key to orch's known_hosts and say so.

    Called by paramiko only when *no* key at all is known for the host; a known host
    presenting another key never gets here (paramiko raises BadHostKeyException).
    """

    def __init__(self, label: str) -> None:
        self.label = label

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> None:
        path = known_hosts_path()
        line = f"{hostname} {key.get_name()} {key.get_base64()}\n"
        with _known_hosts_lock:
            # Another thread (or the lab) may have recorded this host meanwhile.
            current = read_host_keys(path) if path.is_file() else paramiko.HostKeys()
            recorded = current.lookup(hostname)
            if recorded is not None:
                if recorded.get(key.get_name()) == key:
                    return
                expected = next(iter(recorded.values()))
                raise changed_key_error(self.label, hostname, expected, key, path)
            prefix = ""
            if path.is_file() and path.stat().st_size and not path.read_bytes().endswith(b"\n"):
                prefix = "\n"
            with path.open("a") as handle:
                handle.write(prefix + line)
        client.get_host_keys().add(hostname, key.get_name(), key)
        console.print(
            f"[yellow]{escape(self.label)}: first contact, recorded its {key.get_name()} host key "
            f"{fingerprint(key)} in {escape(str(path))}[/]",
            soft_wrap=True,
        )


def changed_key_error(
    label: str, hostname: str, expected: paramiko.PKey, presented: paramiko.PKey, path: Path
) -> HostKeyError:
    return HostKeyError(
        f"{label}: HOST KEY CHANGED, refusing to connect. known_hosts ({path}) has "
        f"{expected.get_name()} {fingerprint(expected)}, the board presented "
        f"{presented.get_name()} {fingerprint(presented)}. Either the board was reinstalled "
        "or someone is intercepting the connection.",
        hint=(
            "if the change is expected, forget the old key deliberately and connect again "
            f"(the new key is then recorded): ssh-keygen -R {shlex.quote(hostname)} -f {shlex.quote(str(path))}"
        ),
    )


class _Unusable(Exception):
    """Why a local file cannot be used as it is (the message's tail)."""


def known_hosts_problem(path: Path) -> str | None:
    """Why a known_hosts file cannot be trusted as it is (``FILE:LINE: ...``), or None.

    paramiko skips lines it cannot parse; a damaged line may be the very board's key, and
    skipping it would turn a known host into a "first contact" whose new key is recorded."""
    try:
        data = _known_hosts_data(path)
    except _Unusable as unusable:
        return f"{path}{unusable}"
    if data is None:
        return None
    for number, raw in enumerate(data.split(b"\n"), start=1):
        problem = _line_problem(raw, number)
        if problem:
            return f"{path}:{number}: damaged line in known_hosts ({problem})"
    return None


def _known_hosts_data(path: Path) -> bytes | None:
    """The file's bytes, None when there is no file; _Unusable when it cannot be read whole."""
    try:
        data, more = read_capped(path)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise _Unusable(f": cannot read known_hosts: {error.strerror or error}") from error
    if more:
        raise _Unusable(f": larger than {TEXT_FILE_LIMIT >> 20} MiB (or endless): not a known_hosts file")
    return data


def _line_problem(raw: bytes, number: int) -> str | None:
    """What is wrong with one known_hosts line, or None."""
    try:
        line = raw.decode("utf-8").strip()
    except UnicodeDecodeError:
        return "bytes that are not text"
    if not line or line.startswith("#"):
        return None
    if line.startswith("@"):  # @revoked / @cert-authority: a marker, then a regular entry
        line = line.split(None, 1)[1] if len(line.split(None, 1)) > 1 else ""
    try:
        entry = paramiko.hostkeys.HostKeyEntry.from_line(line, number)
    except Exception as error:  # noqa: BLE001 -- paramiko's InvalidHostKey is a bare Exception
        reason = error.args[1] if isinstance(error, paramiko.hostkeys.InvalidHostKey) else error
        return str(reason)
    if entry is None and not _well_formed(line):
        return "not `host key-type base64-key`"
    return None


def _well_formed(line: str) -> bool:
    """``hosts key-type base64`` with a key type paramiko does not know (sk-ssh-ed25519@...): fine."""
    fields = line.split()
    if len(fields) < 3:
        return False
    try:
        base64.b64decode(fields[2], validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def identity_file_problem(path: Path) -> str | None:
    """Why ``path`` cannot be an SSH private key file, or None (whether it opens is the agent's and
    paramiko's business; this catches the wrong file)."""
    shown = str(path)
    try:
        text = _key_text(Path(path).expanduser())
    except _Unusable as problem:
        return f"identity file {shown} {problem}"
    if text.lstrip().startswith(("ssh-", "ecdsa-", "sk-")):
        return f"identity file {shown} is a public key; identity_file names the private key (without .pub)"
    if "PRIVATE KEY-----" not in text:
        return f"identity file {shown} is not a private key (no '-----BEGIN ... PRIVATE KEY-----' line)"
    return None


def _key_text(path: Path) -> str:
    """A key file's text; _Unusable says why there is none."""
    try:
        data, more = read_capped(path, 1 << 20)
    except FileNotFoundError:
        raise _Unusable("does not exist") from None
    except IsADirectoryError:
        raise _Unusable("is a directory, not a key file") from None
    except OSError as error:
        raise _Unusable(f"cannot be read: {error.strerror or error}") from error
    if more:
        raise _Unusable("is not a private key (larger than 1 MiB, or endless like a device)")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise _Unusable("is not a private key (binary data, not a PEM/OpenSSH key)") from None


def load_known_hosts(store: paramiko.HostKeys) -> None:
    """Add orch's known_hosts, then the user's, to a connection's key store; a damaged file is refused."""
    # orch's file first: for a host in both, paramiko compares against the first entry found.
    for path in known_hosts_files():
        if path.is_file():
            problem = known_hosts_problem(path)
            if problem:
                raise HostKeyError(
                    problem, hint="fix or delete that line; orch never skips a damaged host key"
                )
            try:
                read_host_keys(path, into=store)
            except (OSError, paramiko.SSHException, UnicodeDecodeError) as error:
                raise RemoteError(f"cannot read known_hosts {path}: {error}") from error
