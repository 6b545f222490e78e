"""Where a build's files live on the engine: named volumes, filled and read by copying.

Nothing of the workstation is bind-mounted into a build container, so the same build runs on
the local engine and on a bigger machine's engine (``--docker-host ssh://...``):

* the prepared ORT tree is copied once into a source volume named by its content (tarball or
  commit hash + patches) and reused by every later build of it; a user's local checkout is
  copied afresh each time, so edits are always built;
* the build directory is a volume per ORCH_HOME, target, variant, version and scope, so a
  rebuild is incremental on whichever engine ran it;
* the ccache volume is per target (see the plan);
* toolchains/ and docker/build/ are copied into each container before it starts;
* what orch reads afterwards (the wheel or the test executable, compile_commands.json, the
  compiler's identity, ccache statistics) is copied out into the local build directory.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.builds.container_paths import SRC, SYSROOT
from orchestrator.builds.plan import BuildPlan
from orchestrator.builds.sources.dependencies import PreparedDependencies
from orchestrator.builds.sources.dependency_table import DEPS
from orchestrator.builds.sources.ort import SourceTree
from orchestrator.builds.sysroots.target import SysrootRef
from orchestrator.errors import BuildError
from orchestrator.paths import orch_home

if TYPE_CHECKING:
    from orchestrator.adapters.engine import Engine

LABEL_ROLE = "orch.role"
LABEL_HOME = "orch.home"
_COMPLETE = f"{SRC}/.orch-source-complete"


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", text)


def home_key() -> str:
    """Short id of this ORCH_HOME: two homes (a user's, a test's) never share a build directory."""
    return hashlib.sha256(str(orch_home().resolve()).encode()).hexdigest()[:8]


def source_volume_name(tree: SourceTree) -> str:
    identity = json.dumps([tree.spec.kind, tree.version, tree.source_sha256, tree.patches], sort_keys=True)
    if tree.spec.kind == "dir":
        # A live checkout: one volume per home and checkout, refreshed by every build.
        identity += f"|{tree.path}|{home_key()}"
    return f"orch-src-{_safe(tree.version)}-{hashlib.sha256(identity.encode()).hexdigest()[:12]}"


def build_volume_name(plan: BuildPlan) -> str:
    parts = [plan.target.name, plan.artifact_variant, plan.ort_version, plan.scope]
    if plan.sysroot is not None:  # another OS, another compiler: never the same build directory
        parts.append(plan.sysroot.digest[:8])
    return "orch-build-" + home_key() + "-" + "-".join(_safe(p) for p in parts)


def ensure_source_volume(engine: Engine, image: str, tree: SourceTree, log: Callable[[str], None]) -> str:
    """The volume holding ``tree`` at /src on ``engine``, copied there when it is not complete yet."""
    name = source_volume_name(tree)
    live = tree.spec.kind == "dir"
    labels = {LABEL_ROLE: "source", "orch.ort-version": tree.version}
    # A live checkout's volume is this home's alone (its name has the home's key): labelled so, it
    # goes with the home's build directories.
    engine.ensure_volume(name, labels={**labels, LABEL_HOME: str(orch_home().resolve())} if live else labels)
    mount = {name: {"bind": SRC, "mode": "rw"}}
    if not live and engine.run(image, ["test", "-f", _COMPLETE], volumes=mount, network="none") == 0:
        return name
    size = sum(p.stat().st_size for p in tree.path.rglob("*") if p.is_file() and not p.is_symlink())
    log(f"copying the ORT source tree ({size / 1e6:.0f} MB) into volume {name} on {engine.label}")
    # A content-named volume is only ever filled with the same files, so a second build filling it
    # at the same time is harmless; a live checkout's volume is emptied first (files may be gone).
    if (
        live
        and engine.run(image, ["find", SRC, "-mindepth", "1", "-delete"], volumes=mount, network="none") != 0
    ):
        raise BuildError(f"cannot empty source volume {name} on {engine.label}")
    code = engine.run(image, ["touch", _COMPLETE], volumes=mount, network="none", copy_in=[(tree.path, SRC)])
    if code != 0:
        raise BuildError(f"copying the ORT source into volume {name} on {engine.label} failed (exit {code})")
    return name


def ensure_dependencies_volume(
    engine: Engine, image: str, deps: PreparedDependencies, version: str, log: Callable[[str], None]
) -> str:
    """The volume holding the unpacked dependency sources at /deps, named by their content."""
    name = f"orch-deps-{_safe(version)}-{deps.digest}"
    engine.ensure_volume(name, labels={LABEL_ROLE: "dependency-sources", "orch.ort-version": version})
    mount = {name: {"bind": DEPS, "mode": "rw"}}
    marker = f"{DEPS}/.orch-deps-complete"
    if engine.run(image, ["test", "-f", marker], volumes=mount, network="none") == 0:
        return name
    log(f"copying {len(deps.records)} dependency source trees into volume {name} on {engine.label}")
    code = engine.run(image, ["touch", marker], volumes=mount, network="none", copy_in=[(deps.path, DEPS)])
    if code != 0:
        raise BuildError(
            f"copying the dependency sources into volume {name} on {engine.label} failed (exit {code})"
        )
    return name


# A sysroot's absolute links (``libfoo.so -> /lib/aarch64-linux-gnu/libfoo.so.1``) name the board's
# root: in the volume they are made to point inside the mount, or they would resolve in the build
# container's own (x86-64) root.
# A merged-/usr sysroot (lib -> usr/lib) gets include -> usr/include: clang names libstdc++'s headers
# lib/gcc/<triple>/<N>/../../../../include/c++/<N> and folds that to /sysroot/include/c++/<N>, a path
# that does not exist without the link; ninja then finds a header of every C++ object missing and
# compiles everything again on each build of a kept build directory.
_INCLUDE_LINK = '{ [ ! -L "$1/lib" ] || [ -e "$1/include" ] || ln -s usr/include "$1/include"; }'
_RELINK_ABSOLUTE = (
    'find "$1" -type l -lname "/*" | while IFS= read -r link; do'
    f' ln -sfn "$1$(readlink "$link")" "$link"; done && {_INCLUDE_LINK} && touch "$1/.orch-sysroot-complete"'
)
# A volume filled before the link was made gets it too.
_SYSROOT_READY = f'test -f "$1/.orch-sysroot-complete" && {_INCLUDE_LINK}'


def ensure_sysroot_volume(engine: Engine, image: str, ref: SysrootRef, log: Callable[[str], None]) -> str:
    """The volume holding a stored sysroot at /sysroot, named by its content digest, filled once."""
    name = f"orch-sysroot-{ref.digest[:16]}"
    engine.ensure_volume(name, labels={LABEL_ROLE: "sysroot", "orch.sysroot": ref.name})
    mount = {name: {"bind": SYSROOT, "mode": "rw"}}
    if engine.run(image, ["sh", "-c", _SYSROOT_READY, "ready", SYSROOT], volumes=mount, network="none") == 0:
        return name
    log(f"copying sysroot {ref.name!r} ({ref.digest[:12]}) into volume {name} on {engine.label}")
    code = engine.run(
        image,
        ["sh", "-c", _RELINK_ABSOLUTE, "relink", SYSROOT],
        volumes=mount,
        network="none",
        copy_in=[(ref.root, SYSROOT)],
    )
    if code != 0:
        raise BuildError(
            f"copying sysroot {ref.name!r} into volume {name} on {engine.label} failed (exit {code})"
        )
    return name


def ensure_build_volume(engine: Engine, plan: BuildPlan) -> str:
    name = build_volume_name(plan)
    return engine.ensure_volume(
        name,
        labels={
            LABEL_ROLE: "build-dir",
            LABEL_HOME: str(orch_home().resolve()),
            "orch.target": plan.target.name,
            "orch.variant": plan.artifact_variant,
        },
    )


def build_volumes_under(
    engine: Engine, root: Path, target: str | None = None, *, role: str = "build-dir"
) -> list[str]:
    """Build-directory volumes (or with ``role="source"``, live checkouts' source volumes) made on
    ``engine`` by ORCH_HOMEs at or under ``root`` (for clean-up), only ``target``'s when given."""
    found = engine.volumes({LABEL_ROLE: role, LABEL_HOME: None})
    return sorted(
        name
        for name, labels in found.items()
        if Path(labels[LABEL_HOME]).is_relative_to(root.resolve())
        and (target is None or labels.get("orch.target") == target)
    )


def volumes_to_clean(engine: Engine, *, target: str | None, ccache: bool, sources: bool) -> list[str]:
    """What ``orch build clean`` removes: this home's build directories (and its live checkouts'
    source volumes), and on request the compiler caches (shared by every home) and the source
    volumes (shared, refilled from the workstation)."""
    names = build_volumes_under(engine, orch_home(), target)
    if target is None and not sources:
        names += build_volumes_under(engine, orch_home(), role="source")
    if ccache:
        caches = engine.volumes(prefix="orch-ccache-")
        names += sorted(name for name in caches if target is None or name == f"orch-ccache-{target}")
    if sources:
        names += sorted(engine.volumes({LABEL_ROLE: "source"}))
    return names


def local_build_dir(plan: BuildPlan) -> Path:
    """Where the build's log and the files copied out of its volume land on the workstation."""
    return build_record_dir(plan.target.name, plan.artifact_variant, f"{plan.ort_version}-{plan.scope}")


def build_record_dir(target: str, variant: str, name: str) -> Path:
    """``$ORCH_HOME/builds/<target>/<variant>/<name>``, made when missing: a build's log, manifest
    and what it brought back, whichever route built it."""
    path = orch_home() / "builds" / target / variant / name
    path.mkdir(parents=True, exist_ok=True)
    return path
