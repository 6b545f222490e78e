"""What orch needs from the workstation, checked one by one, each failure with the command that fixes it.

Checks: the Docker engine, aarch64 emulation (binfmt_misc, qemu-user registered with flag F, a
qemu recent enough to import onnxruntime's aarch64 wheel), an SSH key, free disk space, debootstrap.
Each check is a small function returning a ``Check``; nothing here changes the machine.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path

from orchestrator.adapters import process
from orchestrator.adapters.engine import Engine
from orchestrator.errors import OrchError
from orchestrator.paths import orch_home

SETUP = "sudo scripts/setup"
BINFMT_DIR = Path("/proc/sys/fs/binfmt_misc")
MIN_QEMU = (8, 0)
MIN_FREE_GB = 20.0


@dataclass(frozen=True, kw_only=True)
class Check:
    name: str
    ok: bool
    detail: str
    fix: str | None = None

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


@dataclass(frozen=True, kw_only=True)
class BinfmtEntry:
    enabled: bool
    interpreter: str
    flags: str


def parse_binfmt_entry(text: str) -> BinfmtEntry:
    """Parse ``/proc/sys/fs/binfmt_misc/<name>`` (lines ``enabled``, ``interpreter X``, ``flags: F``)."""
    enabled, interpreter, flags = False, "", ""
    for raw in text.splitlines():
        line = raw.strip()
        if line == "enabled":
            enabled = True
        elif line.startswith("interpreter "):
            interpreter = line.split(" ", 1)[1].strip()
        elif line.startswith("flags:"):
            flags = line.split(":", 1)[1].strip()
    return BinfmtEntry(enabled=enabled, interpreter=interpreter, flags=flags)


def parse_qemu_version(text: str) -> tuple[int, ...] | None:
    """``qemu-aarch64 version 10.0.2 (Debian ...)`` -> (10, 0, 2)."""
    match = re.search(r"version (\d+)\.(\d+)(?:\.(\d+))?", text)
    if not match:
        return None
    return tuple(int(part) for part in match.groups() if part is not None)


@dataclass(frozen=True, kw_only=True)
class EngineInfo:
    """What the Docker engine says of itself (None: it did not say)."""

    version: object = None
    api_version: object = None
    os: object = None
    arch: object = None
    root_dir: object = None  # where it keeps its data (the disk check looks there)


def _engine_info() -> tuple[EngineInfo | None, str | None]:
    try:
        engine = Engine()
        version = engine.version()
        info = EngineInfo(
            version=version.get("Version"),
            api_version=version.get("ApiVersion"),
            os=version.get("Os"),
            arch=version.get("Arch"),
            root_dir=engine.info().get("DockerRootDir"),
        )
    except OrchError as error:
        return None, error.message
    return info, None


def check_docker(info: EngineInfo | None, problem: str | None) -> Check:
    if info is None:
        return Check(
            name="docker engine",
            ok=False,
            detail=problem or "not reachable",
            fix=f"{SETUP}   (installs docker.io and starts dockerd)",
        )
    return Check(
        name="docker engine",
        ok=True,
        detail=f"Docker {info.version} (API {info.api_version}, {info.os}/{info.arch})",
    )


def check_binfmt() -> Check:
    if not (BINFMT_DIR / "status").exists():
        return Check(
            name="binfmt_misc",
            ok=False,
            detail=f"{BINFMT_DIR} is not mounted",
            fix=f"{SETUP}   (or: mount -t binfmt_misc binfmt_misc {BINFMT_DIR})",
        )
    status = (BINFMT_DIR / "status").read_text().strip()
    if status != "enabled":
        return Check(
            name="binfmt_misc",
            ok=False,
            detail=f"binfmt_misc is {status}",
            fix=f"echo 1 | sudo tee {BINFMT_DIR}/status",
        )
    return Check(name="binfmt_misc", ok=True, detail=f"mounted at {BINFMT_DIR}")


def aarch64_entry() -> BinfmtEntry | None:
    path = BINFMT_DIR / "qemu-aarch64"
    try:
        return parse_binfmt_entry(path.read_text())
    except OSError:
        return None


def registered_before_upgrade(entry: BinfmtEntry, entry_path: Path = BINFMT_DIR / "qemu-aarch64") -> bool:
    """True when the interpreter file changed after the binfmt entry was made (the entry's ctime)."""
    try:
        return os.stat(entry.interpreter).st_ctime > entry_path.stat().st_ctime
    except OSError:
        return False


def check_aarch64_registration(entry: BinfmtEntry | None) -> Check:
    name = "aarch64 emulation"
    if entry is None:
        return Check(
            name=name,
            ok=False,
            detail="qemu-aarch64 is not registered in binfmt_misc",
            fix=f"{SETUP}   (installs qemu-user-static and registers aarch64)",
        )
    problems = []
    if not entry.enabled:
        problems.append("registered but disabled")
    if "F" not in entry.flags:
        # Without F the kernel looks the interpreter up inside each container, where it does not exist.
        problems.append(f"flags '{entry.flags}' lack F (containers cannot find the interpreter)")
    if not entry.interpreter or not Path(entry.interpreter).exists():
        problems.append(f"interpreter {entry.interpreter or '?'} does not exist")
    elif registered_before_upgrade(entry):
        # Flag F: the kernel keeps the interpreter it opened at registration, so an upgraded qemu is not used.
        problems.append("qemu was upgraded after the entry was registered (the old qemu still runs)")
    if problems:
        return Check(
            name=name,
            ok=False,
            detail="qemu-aarch64: " + "; ".join(problems),
            fix=f"{SETUP}   (re-registers qemu-aarch64 with flag F)",
        )
    return Check(name=name, ok=True, detail=f"qemu-aarch64 -> {entry.interpreter} (flags {entry.flags})")


def qemu_version_of(interpreter: str) -> tuple[tuple[int, ...] | None, str]:
    binary = os.path.realpath(interpreter)
    result = process.run([binary, "--version"], timeout=10)
    if result.exit_code == process.NOT_STARTED:
        return None, result.stderr
    output = result.stdout
    first = output.strip().splitlines()[0] if output.strip() else f"{binary}: no version output"
    return parse_qemu_version(output), first


def check_qemu_version(entry: BinfmtEntry | None) -> Check:
    name = "qemu version"
    fix = (
        f"{SETUP}   (installs qemu-user-static >= 8 from bookworm-backports on Debian 12 and re-registers it)"
    )
    candidates = [entry.interpreter] if entry and entry.interpreter else []
    candidates += [
        path for path in (shutil.which("qemu-aarch64-static"), shutil.which("qemu-aarch64")) if path
    ]
    if not candidates:
        return Check(name=name, ok=False, detail="no qemu-aarch64 found", fix=fix)
    version, line = qemu_version_of(candidates[0])
    if version is None:
        return Check(name=name, ok=False, detail=f"cannot tell the version: {line}", fix=fix)
    shown = ".".join(map(str, version))
    if version[:2] < MIN_QEMU:
        return Check(
            name=name,
            ok=False,
            fix=fix,
            detail=f"qemu {shown} is too old: qemu 7.2 crashes importing onnxruntime's aarch64 wheel; need >= 8",
        )
    return Check(name=name, ok=True, detail=line)


def _agent_has_keys() -> bool:
    socket_path = os.environ.get("SSH_AUTH_SOCK")
    ssh_add = shutil.which("ssh-add")
    if not socket_path or not Path(socket_path).exists() or not ssh_add:
        return False
    return process.run([ssh_add, "-l"], timeout=10).ok


def check_ssh_key() -> Check:
    lab_key = orch_home() / "lab" / "id_ed25519"
    found = []
    if lab_key.exists():
        found.append(f"lab key {lab_key}")
    if _agent_has_keys():
        found.append("ssh-agent")
    user_keys = sorted(p for p in (Path.home() / ".ssh").glob("id_*") if p.suffix != ".pub")
    found += [str(path) for path in user_keys]
    if not found:
        return Check(
            name="ssh key",
            ok=False,
            detail="no SSH key: no lab key, no ssh-agent key, no ~/.ssh/id_*",
            fix="orch lab up   (makes the lab's key)   or: ssh-keygen -t ed25519",
        )
    return Check(name="ssh key", ok=True, detail=", ".join(found))


def check_free_disk(label: str, path: Path, minimum_gb: float = MIN_FREE_GB) -> Check:
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    free_gb = shutil.disk_usage(probe).free / 1e9
    ok = free_gb >= minimum_gb
    return Check(
        name=f"free disk ({label})",
        ok=ok,
        detail=f"{free_gb:.1f} GB free at {path} (need {minimum_gb:.0f} GB)",
        fix=None if ok else f"free space under {probe} (docker system prune removes unused images)",
    )


def check_debootstrap() -> Check:
    path = shutil.which("debootstrap")
    if path is None:
        return Check(
            name="debootstrap",
            ok=False,
            detail="not installed (makes base images without a registry)",
            fix=f"{SETUP}   (or: apt-get install debootstrap)",
        )
    return Check(name="debootstrap", ok=True, detail=path)


def run_checks() -> list[Check]:
    info, problem = _engine_info()
    entry = aarch64_entry()
    docker_root = Path(str(info.root_dir or "/var/lib/docker")) if info else Path("/var/lib/docker")
    checks: list[Callable[[], Check]] = [
        lambda: check_docker(info, problem),
        check_binfmt,
        lambda: check_aarch64_registration(entry),
        lambda: check_qemu_version(entry),
        check_ssh_key,
        lambda: check_free_disk("docker data", docker_root),
        lambda: check_free_disk("working dir", Path.cwd()),
        check_debootstrap,
    ]
    return [check() for check in checks]
