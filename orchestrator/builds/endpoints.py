"""Addresses of the services orch reaches for a build: a container engine (``--docker-host``) and a
shared compiler cache (``--cache``), checked as far as they can be without connecting.

Pure, and on the ground floor: the command line, the settings file (``$ORCH_HOME/config.yaml``)
and the build plan refuse the same addresses with the same words.
"""

from __future__ import annotations

import stat
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

from orchestrator.errors import UsageError

# Where the relay's socket appears inside the build container.
RELAY_DIR = "/orch-cache"


RELAY_SOCKET = f"{RELAY_DIR}/redis.sock"


_USAGE = "a Redis address: redis://[[user:]password@]host[:port][/db]"


@dataclass(frozen=True, kw_only=True)
class RemoteCache:
    """Where ccache's remote storage is (``host``/``port`` as seen from the engine's machine)."""

    host: str
    port: int
    db: int | None = None
    username: str | None = None
    password: str | None = None
    remote_only: bool = False  # no local cache volume: every lookup goes to the server

    @property
    def display(self) -> str:
        """The address without its password, for plans, logs and manifests."""
        user = f"{self.username or ''}:***@" if self.password else ""
        db = f"/{self.db}" if self.db is not None else ""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"redis://{user}{host}:{self.port}{db}"

    def ccache_url(self) -> str:
        """ccache's ``remote_storage`` inside the build container: the relay's socket."""
        credentials = ""
        if self.password:
            quoted = urllib.parse.quote(self.password, safe="")
            user = f"{urllib.parse.quote(self.username, safe='')}:" if self.username else ""
            credentials = f"{user}{quoted}@localhost"
        query = f"?db={self.db}" if self.db is not None else ""
        if credentials:
            return f"redis+unix://{credentials}{RELAY_SOCKET}{query}"
        return f"redis+unix:{RELAY_SOCKET}{query}"

    def environment(self) -> dict[str, str]:
        env = {"CCACHE_REMOTE_STORAGE": self.ccache_url()}
        if self.remote_only:
            env["CCACHE_REMOTE_ONLY"] = "true"
        return env


def parse_cache_url(url: str, *, remote_only: bool = False, option: str = "--cache") -> RemoteCache:
    """``redis://[[user:]password@]host[:port][/db]`` -> RemoteCache; UsageError naming ``option``."""
    text = url.strip()
    parsed = urllib.parse.urlsplit(text)
    if parsed.scheme in ("http", "https"):
        raise UsageError(
            f"{option} {url!r}: only Redis servers are supported as the shared compiler cache",
            hint=f"use {_USAGE} (Debian: apt-get install redis-server)",
        )
    if parsed.scheme != "redis" or not text.startswith("redis://"):
        raise UsageError(f"{option} {url!r} is not a Redis address", hint=f"use {_USAGE}")
    try:
        port = parsed.port
    except ValueError:
        raise UsageError(f"{option} {url!r}: the port is not 1..65535", hint=f"use {_USAGE}") from None
    if not parsed.hostname:
        raise UsageError(f"{option} {url!r} names no host", hint=f"use {_USAGE}")
    if port == 0:
        raise UsageError(f"{option} {url!r}: port 0 is not a port", hint="a port is 1..65535")
    db: int | None = None
    path = parsed.path.strip("/")
    if path:
        if not path.isdigit():
            raise UsageError(f"{option} {url!r}: the path must be a database number, not {path!r}")
        db = int(path)
    if parsed.query or parsed.fragment:
        raise UsageError(f"{option} {url!r}: a Redis address has no query or fragment", hint=f"use {_USAGE}")
    return RemoteCache(
        host=parsed.hostname,
        port=port or 6379,
        db=db,
        username=urllib.parse.unquote(parsed.username) if parsed.username else None,
        password=urllib.parse.unquote(parsed.password) if parsed.password else None,
        remote_only=remote_only,
    )


_ENGINE_SCHEMES = ("ssh", "unix", "tcp", "http", "https")


def check_docker_host(url: str | None) -> str | None:
    """``--docker-host``, checked as far as it can be without connecting: the real run and
    ``--dry-run`` refuse the same addresses."""
    if url is None:
        return None
    usage = "use ssh://[user@]host[:port], unix:///path/to/docker.sock or tcp://host:port"
    if not url.strip():
        raise UsageError("--docker-host '' is empty", hint=f"leave it out for the local engine, or {usage}")
    parsed = urllib.parse.urlsplit(url)
    if parsed.scheme not in _ENGINE_SCHEMES or not url.startswith(f"{parsed.scheme}://"):
        raise UsageError(f"--docker-host {url!r} is not an engine address", hint=usage)
    if parsed.scheme == "unix":
        path = Path(parsed.path or "")
        if not parsed.path or parsed.netloc:
            raise UsageError(
                f"--docker-host {url!r}: a unix socket address is unix:///absolute/path", hint=usage
            )
        if not path.exists():
            raise UsageError(
                f"--docker-host {url!r}: there is no socket at {path}",
                hint="is the engine running there? (`docker context ls` shows the sockets in use)",
            )
        if not stat.S_ISSOCK(path.stat().st_mode):
            raise UsageError(f"--docker-host {url!r}: {path} is not a socket")
        return url
    try:
        port = parsed.port
    except ValueError as error:
        raise UsageError(f"--docker-host {url!r}: {error}", hint="a port is 1..65535") from None
    if not parsed.hostname:
        raise UsageError(f"--docker-host {url!r} names no host", hint=usage)
    if port == 0:
        raise UsageError(f"--docker-host {url!r}: port 0 is not a port", hint="a port is 1..65535")
    if parsed.path not in ("", "/") or parsed.query or parsed.fragment:
        raise UsageError(f"--docker-host {url!r}: an engine address has no path", hint=usage)
    return url
