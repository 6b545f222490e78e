"""A shared compiler cache: ccache's remote storage on a Redis server, reached from an offline build.

``orch build --cache redis://HOST:PORT`` makes every compile of every build look up (and store)
its object files on that server too, so a second workstation, a CI machine or another
ORCH_HOME gets cache hits for what the first one compiled. The build container itself keeps
``--network none``: ccache talks to ``redis+unix:`` on a socket in a small volume, and a relay
container on the engine host's network (``docker/build/cache_relay.py``) forwards that socket to
HOST:PORT and nowhere else. HOST is therefore resolved where the engine runs: ``127.0.0.1`` is
the engine machine's own loopback.

The address is parsed by ``endpoints.parse_cache_url`` (pure: the plan and ``--dry-run`` use it);
``CacheRelay`` runs the relay.
"""

from __future__ import annotations

import time
import uuid
from typing import TYPE_CHECKING

from orchestrator.builds.endpoints import RELAY_DIR, RELAY_SOCKET, RemoteCache
from orchestrator.paths import DOCKER_DIR

if TYPE_CHECKING:
    from collections.abc import Callable

    from orchestrator.adapters.engine import Engine

RELAY_SCRIPT = DOCKER_DIR / "build" / "cache_relay.py"
READY_TIMEOUT_S = 30.0


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
