"""When a build needs the network, and for what: the plan lists every URL it knows of before the
build (``--dry-run`` shows them, ``--json`` too), so an offline plan is seen to be offline.

Two things download: a git source is cloned on the workstation, and the ``fetch`` dependency
route lets ORT's FetchContent download the archives of the source's ``cmake/deps.txt`` inside the
build container (the URLs are listed when the file could be read before fetching, e.g. from a
tarball; else the plan says they are read after the source is fetched). Pure.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.builds.routes import DependencyRoute
from orchestrator.builds.sources.ort import SourceSpec


@dataclass(frozen=True, kw_only=True)
class Download:
    what: str
    url: str


@dataclass(frozen=True, kw_only=True)
class NetworkNeeds:
    downloads: tuple[Download, ...]
    # Downloads known only once the source is fetched (its cmake/deps.txt), said in words.
    pending: str | None

    @property
    def needed(self) -> bool:
        return bool(self.downloads) or self.pending is not None

    def as_dict(self) -> dict[str, Any]:
        return {
            "needed": self.needed,
            "downloads": [{"what": d.what, "url": d.url} for d in self.downloads],
            "pending": self.pending,
        }


def _remote(location: str) -> bool:
    """A git location reached over the network (not file:// nor a path on this machine)."""
    return not location.startswith("file://") and not Path(location).exists()


def network_needs(source: SourceSpec, route: DependencyRoute) -> NetworkNeeds:
    downloads: list[Download] = []
    if source.kind == "git" and _remote(source.location):
        downloads.append(Download(what=f"ORT source: git clone @ {source.ref}", url=source.location))
    pending = None
    if route == "fetch":
        if source.deps_urls is not None:
            downloads += [Download(what="ORT FetchContent (cmake/deps.txt)", url=u) for u in source.deps_urls]
        else:
            pending = (
                "ORT's FetchContent downloads the archives listed in the source's cmake/deps.txt"
                " (read once the source is fetched)"
            )
    return NetworkNeeds(downloads=tuple(downloads), pending=pending)
