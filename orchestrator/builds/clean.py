"""``orch build clean``: this home's build directories (Docker volumes) removed from one engine,
with the compiler caches and the source volumes on request."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from orchestrator.adapters.engine import Engine
from orchestrator.builds.endpoints import check_docker_host
from orchestrator.builds.queue import LOCAL
from orchestrator.builds.workspace import volumes_to_clean
from orchestrator.errors import UsageError
from orchestrator.targets import resolve_target


@dataclass(frozen=True, kw_only=True)
class CleanRequest:
    """``orch build clean``: which build volumes to remove, on which engine."""

    target: str | None
    docker_hosts: tuple[str, ...]
    ccache: bool  # also the compiler cache volumes
    sources: bool  # also the ORT source volumes
    dry_run: bool


@dataclass(frozen=True, kw_only=True)
class Cleaned:
    """The volumes removed (or, in the dry run, that would be) on one engine."""

    engine: str  # its label
    dry_run: bool
    volumes: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"engine": self.engine, "dry_run": self.dry_run, "volumes": list(self.volumes)}


def clean_builds(request: CleanRequest) -> Cleaned:
    target = resolve_target(request.target).name if request.target else None
    hosts = request.docker_hosts
    if len(hosts) > 1:
        raise UsageError("orch build clean cleans one engine at a time: give one --docker-host")
    engine = Engine(check_docker_host(hosts[0]) if hosts and hosts[0] != LOCAL else None)
    names = volumes_to_clean(engine, target=target, ccache=request.ccache, sources=request.sources)
    if not request.dry_run:
        for name in names:
            engine.remove_volume(name)
    return Cleaned(engine=engine.label, dry_run=request.dry_run, volumes=tuple(names))
