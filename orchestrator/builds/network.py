"""When a build needs the network, and for what: the plan lists every URL it knows of before the
build (``--dry-run`` shows them, ``--json`` too), so an offline plan is seen to be offline.

Two things download: a git source is cloned on the workstation, and the ``fetch`` dependency
route lets ORT's FetchContent download the archives of the source's ``cmake/deps.txt`` inside the
build container (the URLs are listed when the file could be read before fetching, e.g. from a
tarball; else the plan says they are read after the source is fetched, and the build lists them
once it is). The build container of a fetch route whose every download is a loopback address (a
mirror on the engine's machine) runs on the host's network, the only way it reaches them; any
other fetch route takes the engine's default network, and every other route none at all. Pure.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

from orchestrator.builds.routes import DependencyRoute
from orchestrator.builds.sources.ort_spec import SourceSpec

_FETCHCONTENT = "ORT FetchContent (cmake/deps.txt)"  # what each of deps.txt's downloads is listed as
# How the build container is connected: none, the host's network, or (None) the engine's default.
ContainerNetwork = Literal["none", "host"] | None


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

    @property
    def loopback_only(self) -> bool:
        """Every download is known and goes to a loopback address (nothing leaves the machine)."""
        return self.needed and self.pending is None and all(loopback(d.url) for d in self.downloads)

    def as_dict(self) -> dict[str, Any]:
        return {
            "needed": self.needed,
            "downloads": [{"what": d.what, "url": d.url} for d in self.downloads],
            "pending": self.pending,
        }


def _remote(location: str) -> bool:
    """A git location reached over the network (not file:// nor a path on this machine)."""
    return not location.startswith("file://") and not Path(location).exists()


def loopback(url: str) -> bool:
    """A URL whose host is a loopback address (127.0.0.0/8, ::1) or ``localhost``."""
    host = urlsplit(url).hostname
    if host is None:
        return False
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def container_network(route: DependencyRoute, needs: NetworkNeeds) -> ContainerNetwork:
    """The build container's network: none when ORT downloads nothing, the host's when every
    download is on loopback (a container on the default bridge cannot reach the host's 127.0.0.1),
    else the engine's default."""
    if route != "fetch":
        return "none"  # fully offline: proves nothing is downloaded
    return "host" if needs.loopback_only else None


def network_note(route: DependencyRoute, needs: NetworkNeeds) -> str | None:
    """What the plan says about the fetch route's network, when it is not the default's."""
    if route != "fetch":
        return None
    if needs.loopback_only:
        return (
            "every download is a loopback address: the build container runs on the host's network"
            " (the engine's machine's loopback; a container on the default bridge cannot reach it)"
        )
    if needs.pending is not None:
        return (
            "the build container's network is chosen once cmake/deps.txt is read after the fetch: the"
            " host's when every download is a loopback address, else the engine's default"
        )
    return None


def network_needs(
    source: SourceSpec, route: DependencyRoute, deps_urls: tuple[str, ...] | None = None
) -> NetworkNeeds:
    """What the build downloads; ``deps_urls``: cmake/deps.txt's URLs read from the fetched tree
    (else the source's own, when it could be read before fetching)."""
    deps_urls = source.deps_urls if deps_urls is None else deps_urls
    downloads: list[Download] = []
    if source.kind == "git" and _remote(source.location):
        downloads.append(Download(what=f"ORT source: git clone @ {source.ref}", url=source.location))
    pending = None
    if route == "fetch":
        if deps_urls is not None:
            downloads += [Download(what=_FETCHCONTENT, url=u) for u in deps_urls]
        else:
            pending = (
                "ORT's FetchContent downloads the archives listed in the source's cmake/deps.txt"
                " (read once the source is fetched)"
            )
    return NetworkNeeds(downloads=tuple(downloads), pending=pending)


@dataclass(frozen=True, kw_only=True)
class FetchedNeeds:
    """What the build container downloads and the network it runs on, as the compile gets them once
    the source is fetched: the plan's own when it could list the downloads before (a tarball, a
    checkout, every route but fetch), else read from the fetched tree's cmake/deps.txt. A value of
    its own beside the plan: the plan stays what ``--dry-run`` showed."""

    needs: NetworkNeeds
    network: ContainerNetwork
    listed_after_fetch: bool  # the downloads were read from the fetched tree

    def lines(self) -> list[str]:
        """What the build says once it has read them (nothing when the plan had listed them already)."""
        if not self.listed_after_fetch:
            return []
        fetched = [d for d in self.needs.downloads if d.what == _FETCHCONTENT]
        said = [f"needs the network: yes (cmake/deps.txt of the fetched source, {len(fetched)} archives)"]
        said += [f"    {download.what}: {download.url}" for download in self.needs.downloads]
        if self.network == "host":
            said.append(
                "every download is a loopback address: the build container runs on the host's network"
            )
        return said


def planned_needs(needs: NetworkNeeds, network: ContainerNetwork) -> FetchedNeeds:
    """The plan's downloads and network, unchanged by the fetch."""
    return FetchedNeeds(needs=needs, network=network, listed_after_fetch=False)


def needs_after_fetch(source: SourceSpec, route: DependencyRoute, deps_urls: tuple[str, ...]) -> FetchedNeeds:
    """The downloads of a source whose cmake/deps.txt could be read only once it was fetched (a git
    clone), from that file's URLs, and the build container's network chosen from them."""
    needs = network_needs(source, route, deps_urls)
    return FetchedNeeds(needs=needs, network=container_network(route, needs), listed_after_fetch=True)


_SUBBUILD = re.compile(r"_deps/([\w.+-]+?)-subbuild/")
_BUILD_STEP = re.compile(r"Build step for ([\w.+-]+) failed")
_HASH_OF = re.compile(r"(?:^|\s)(MD5|SHA1|SHA224|SHA256|SHA384|SHA512) hash of\s*$")
_VALUE = re.compile(r"^\s*(expected|actual): '([0-9a-fA-F]+)'")
_SOURCE = re.compile(r"Using src='([^']+)'")
_DOWNLOAD_ERROR = re.compile(r"error: downloading '([^']+)' failed")


def fetch_failure(lines: list[str]) -> str | None:
    """What stopped ORT's FetchContent, from the build log of a fetch route: the dependency whose
    archive's hash is not the one cmake/deps.txt gives (CMake's download step says both), or whose
    download failed (its URL); None when the log shows neither."""
    for index, line in enumerate(lines):
        found = _HASH_OF.search(line)
        if found is None:
            continue
        window = lines[index + 1 : index + 6]
        path = window[0].strip() if window else ""
        values = {m.group(1): m.group(2) for text in window if (m := _VALUE.match(text))}
        name = _dependency(lines, path)
        sources = [m.group(1) for text in lines[:index] if (m := _SOURCE.search(text))]
        return (
            f"ORT's FetchContent download of {name} is not the archive cmake/deps.txt names: its"
            f" {found.group(1)} is {values.get('actual', '?')}, deps.txt says {values.get('expected', '?')}"
            f" ({sources[-1] if sources else path.rsplit('/', 1)[-1]})"
        )
    for line in lines:
        failed = _DOWNLOAD_ERROR.search(line)
        if failed is not None:
            name = _dependency(lines, "")
            return f"ORT's FetchContent could not download {name}: {failed.group(1)}"
    return None


def _dependency(lines: list[str], path: str) -> str:
    """The FetchContent name of the failed download: from the archive's path, else the build step."""
    if (match := _SUBBUILD.search(path)) is not None:
        return match.group(1)
    for line in lines:
        if (step := _BUILD_STEP.search(line)) is not None:
            return step.group(1)
    return "a dependency"
