"""A shared compiler cache: ccache's remote storage on a Redis server, reached from an offline build.

``orch build --cache redis://HOST:PORT`` makes every compile of every build look up (and store)
its object files on that server too, so a second workstation, a CI machine or another
ORCH_HOME gets cache hits for what the first one compiled. The build container itself keeps
``--network none``: ccache talks to ``redis+unix:`` on a socket in a small volume, and a relay
container on the engine host's network (``docker/build/cache_relay.py``) forwards that socket to
HOST:PORT and nowhere else. HOST is therefore resolved where the engine runs: ``127.0.0.1`` is
the engine machine's own loopback.

``parse_cache_url`` is pure (the plan and ``--dry-run`` use it); ``CacheRelay`` runs the relay.
"""

from __future__ import annotations

import time
import urllib.parse
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING

from orchestrator.errors import UsageError
from orchestrator.paths import DOCKER_DIR

if TYPE_CHECKING:
    from collections.abc import Callable

    from orchestrator.adapters.engine import Engine

# Where the relay's socket appears inside the build container.
RELAY_DIR = "/orch-cache"
RELAY_SOCKET = f"{RELAY_DIR}/redis.sock"
RELAY_SCRIPT = DOCKER_DIR / "build" / "cache_relay.py"
READY_TIMEOUT_S = 30.0
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


class CacheRelay:
    """The relay container for one build on ``engine``: ``start()`` says whether the server answered;
    ``volumes`` is what the build container mounts; ``stop()`` removes container and volume."""

    def __init__(self, engine: Engine, image: str, cache: RemoteCache, labels: dict[str, str]) -> None:
        self.engine = engine
        self.image = image
        self.cache = cache
        self.labels = {**labels, "orch.role": "cache-relay"}
        suffix = uuid.uuid4().hex[:12]
        self.name = f"orch-cache-relay-{suffix}"
        self.volume = f"orch-cache-relay-{suffix}"
        self.container: str | None = None

    @property
    def volumes(self) -> dict[str, dict[str, str]]:
        return {self.volume: {"bind": RELAY_DIR, "mode": "rw"}}

    def start(self, log: Callable[[str], None]) -> bool:
        """Start the relay; False (with a warning logged) when the server cannot be reached from
        the engine's machine: the build then uses its local cache only, and says so."""
        self.engine.ensure_volume(self.volume, labels=self.labels)
        self.container = self.engine.create(
            self.image,
            ["python3", f"/tmp/{RELAY_SCRIPT.name}", RELAY_SOCKET, self.cache.host, str(self.cache.port)],
            name=self.name,
            labels=self.labels,
            volumes=self.volumes,
            # The one container of a build with a network: it connects to the cache server only.
            network="host",
        )
        self.engine.copy_into(self.container, RELAY_SCRIPT, "/tmp")
        self.engine.start_existing(self.container)
        deadline = time.monotonic() + READY_TIMEOUT_S
        while time.monotonic() < deadline:
            output = self.engine.logs(self.container, tail=20)
            if "ORCH-RELAY ready" in output:
                log(
                    f"compiler cache: {self.cache.display} (remote storage, through a relay on {self.engine.label})"
                )
                return True
            failed = next((x for x in output.splitlines() if x.startswith("ORCH-RELAY unreachable")), None)
            if failed or self.engine.status(self.container) not in ("created", "running"):
                reason = (failed or output.strip() or "the relay stopped").removeprefix("ORCH-RELAY ")
                log(
                    f"warning: the compiler cache {self.cache.display} cannot be reached from"
                    f" {self.engine.label} ({reason}): building with the local cache only"
                )
                return False
            time.sleep(0.2)
        log(f"warning: the compiler cache relay did not start in {READY_TIMEOUT_S:.0f} s: local cache only")
        return False

    def stop(self) -> None:
        if self.container is not None:
            self.engine.remove(self.container, force=True)
            self.container = None
        self.engine.remove_volume(self.volume)
