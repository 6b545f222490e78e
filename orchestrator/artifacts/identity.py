"""What names a build everywhere it is used: its variant, its ONNX Runtime release and its route.

Deploy, bench and every comparison table name builds by these three, because two builds of one
variant differ in what they measure when their release or their route differs. The route is how
the wheel came to be: ``official`` for the index's wheel (the ``stock`` variant), else the build
route the manifest records (``system`` or ``fetch`` dependencies today; a manifest's own ``route``
key, when a newer orch writes one, wins).
"""

from __future__ import annotations

from collections.abc import Mapping

OFFICIAL = "official"
UNKNOWN = "?"


def route_of(manifest: Mapping[str, object] | None) -> str:
    """The route of a manifest as JSON (``manifest.json``, or the copy a release on a board keeps)."""
    if not manifest:
        return UNKNOWN
    recorded = manifest.get("route")
    if isinstance(recorded, str) and recorded:
        return recorded
    source = manifest.get("source")
    if isinstance(source, Mapping) and source.get("kind") == "index":
        return OFFICIAL
    dependencies = manifest.get("dependencies")
    if isinstance(dependencies, str) and dependencies:
        return dependencies
    return OFFICIAL if manifest.get("variant") == "stock" else UNKNOWN


def describe(variant: str, ort_version: str, route: str) -> str:
    """``stock 1.21.0 official``: the words every table uses for one build."""
    return " ".join(part for part in (variant, ort_version or UNKNOWN, route or UNKNOWN) if part)
