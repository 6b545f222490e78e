"""The lab: emulated arm64 boards (Debian containers under qemu-user) that orch reaches over real SSH.

``lab_up`` makes the board image when missing (offline: debootstrapped base + docker/board.Dockerfile),
gives each board its own host key (recorded in orch's known_hosts before the board starts) and the
lab's client key, starts the containers with sshd published on 127.0.0.1 only, waits for each SSH
banner, and writes ``$ORCH_HOME/lab/state.json`` so the inventory shows the boards in group ``lab``.
Containers are named and labelled with a lab id derived from ORCH_HOME: a test lab never touches a
user's lab. Planning (names, image inputs) is pure; ``Engine`` does the Docker work.
"""

from __future__ import annotations

import fcntl
import hashlib
import socket
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from orchestrator import lab_state
from orchestrator.adapters.engine_containers import ContainerState, ContainerSummary
from orchestrator.errors import ContainerError, UsageError
from orchestrator.lab import base_images
from orchestrator.lab.keys import KeyPair, ensure_keypair, known_hosts_line, replace_known_hosts_lines
from orchestrator.paths import DOCKER_DIR, known_hosts_path, orch_home
from orchestrator.targets import TargetProfile, resolve_target

if TYPE_CHECKING:
    # Only for annotations: loading the CLI must not load the engine's adapter (nor its SDK).
    from orchestrator.adapters.engine import Engine

# A lab board's container: one of Docker's states, or "missing" (in the state file, not in the engine).
BoardState = ContainerState | Literal["missing"]

LAB_TARGET = "lab"
LAB_USER = "root"
DEFAULT_BOARDS = 2
# An idle board is an emulated sshd (~12 MiB in its container, plus the engine's shim and port
# proxy on the host, ~17 MiB): 64 of them fit a workstation; benchmarks/fleet_scale.py measures it.
MAX_BOARDS = 64
BOARD_PREFIX = "lab"
# What a board needs: sshd, the Python its profile claims (venvs for releases), TLS roots.
LAB_PACKAGES = ("openssh-server", "python3", "python3-venv", "ca-certificates")
# A stand-in for a board of another distribution (a Jetson) carries the development files such a
# board has (JetPack installs its compiler, libc and Python headers): `orch sysroot pull` from it
# gives a sysroot a cross build can use. Per suite, because libstdc++'s -dev package is versioned.
STAND_IN_DEV_PACKAGES = {
    "bookworm": ("libc6-dev", "libstdc++-12-dev", "python3-dev"),
    "bullseye": ("libc6-dev", "libstdc++-10-dev", "python3-dev"),
}
# A builder board (`orch lab up --build-tools`) also carries what a native ONNX Runtime build needs,
# so a build over SSH on the board itself can be tried in the lab: CMake and Ninja drive it, g++
# compiles it, ccache keeps a rebuild under emulation bearable, the Python headers and numpy make
# the wheel's extension, and patch, make and file are the build container's other host tools
# (docker/build/packages/default.txt). Per suite like the list above; bookworm and bullseye get the
# same names (not listed): their CMake (3.25, 3.18) is older than ORT 1.21's minimum 3.28, as on
# such a real board, and the build's requirement check on the board says so.
BUILD_TOOL_PACKAGES = {
    "trixie": (
        "cmake",
        "ninja-build",
        "g++",
        "ccache",
        "python3-dev",
        "python3-numpy",
        "patch",
        "make",
        "file",
        # As the self-contained route's build image: Boost's headers (mp11) come from the system,
        # build.py packages the wheel with setuptools and wheel and reads versions with packaging.
        "libboost-dev",
        "python3-setuptools",
        "python3-wheel",
        "python3-packaging",
        "xz-utils",
    ),
}
BOARD_DOCKERFILE = DOCKER_DIR / "board.Dockerfile"
BOARD_CONTEXT = DOCKER_DIR / "board"
BOARD_IMAGE_REPO = "orch/lab-board"
LABEL_LAB = "orch.lab"
LABEL_BOARD = "orch.board"
LABEL_TARGET = "orch.target"
# "true" on a board made with --build-tools: `lab status` reads it from the container itself.
LABEL_BUILD_TOOLS = "orch.build-tools"
HOST_KEY_NAME = "ssh_host_ed25519_key"

Log = Callable[[str], None]


# -- pure planning ------------------------------------------------------------------------------------


def lab_id(home: Path | None = None) -> str:
    """8 hex digits naming the lab of one ORCH_HOME."""
    return hashlib.sha256(str(home or orch_home()).encode()).hexdigest()[:8]


def container_name(board: str, lab: str | None = None) -> str:
    return f"orch-lab-{lab or lab_id()}-{board}"


def known_hosts_marker(lab: str | None = None) -> str:
    """The comment ending each of this lab's known_hosts lines (how `lab down` finds them)."""
    return f"orch-lab-{lab or lab_id()}"


def board_names(count: int) -> list[str]:
    return [f"{BOARD_PREFIX}{index}" for index in range(1, count + 1)]


@dataclass(frozen=True, kw_only=True)
class ProfileBoards:
    """``--board rpi5:2``: two boards emulating the rpi5 profile (its CPU model and OS), rpi5-1 and rpi5-2."""

    profile: TargetProfile
    count: int

    @property
    def names(self) -> list[str]:
        return [f"{self.profile.name}-{index}" for index in range(1, self.count + 1)]


def parse_board_option(text: str) -> ProfileBoards:
    """``PROFILE[:N]`` (N defaults to 1); the profile by name or alias, an unknown one lists the known."""
    name, _, count_text = text.partition(":")
    count = 1
    if count_text:
        if not count_text.isdigit():
            raise UsageError(f"--board {text!r}: the count after ':' must be a number, e.g. --board rpi5:2")
        count = int(count_text)
    if not 1 <= count <= MAX_BOARDS:
        raise UsageError(f"--board {text!r}: the count must be between 1 and {MAX_BOARDS}")
    return ProfileBoards(profile=resolve_target(name), count=count)


# The Debian release standing in for another distribution's board: the newest whose glibc is not
# newer than the board's, so what runs on the stand-in needs no more than the board has (Ubuntu
# 22.04: glibc 2.35 against bookworm's 2.36, the closest the mirror has; 20.04 and 18.04: bullseye's
# 2.31, the oldest Debian the lab makes).
STAND_IN_SUITES = {"22.04": "bookworm", "20.04": "bullseye", "18.04": "bullseye"}


def lab_suite(profile: TargetProfile) -> str:
    """The Debian suite of a profile's lab board: its own for Debian-based profiles; a stand-in of a
    close glibc for others (Jetsons run Ubuntu, which the lab cannot bootstrap from a Debian mirror)."""
    if profile.os.distro == "debian":
        return profile.bootstrap_suite or profile.os.codename
    return STAND_IN_SUITES.get(profile.os.release, "bookworm")


def os_stand_in_note(profile: TargetProfile) -> str | None:
    """What a user must know when a lab board's OS is not its profile's."""
    if profile.os.distro == "debian":
        return None
    return (
        f"{profile.name}: its OS is {profile.os.distro} {profile.os.release} (glibc {profile.os.glibc}, Python"
        f" {profile.os.python}); its lab boards run Debian {lab_suite(profile)} with the {profile.qemu_cpu} CPU"
        " model and their development files: a stand-in for the CPU, not for the OS"
    )


def wanted_board_count(requested: int | None, existing: int) -> int:
    """``--boards N`` adds boards up to N and never removes running ones; no N keeps what runs (or 2)."""
    if requested is not None and not 1 <= requested <= MAX_BOARDS:
        raise UsageError(f"--boards must be between 1 and {MAX_BOARDS}, not {requested}")
    if requested is None:
        return existing or DEFAULT_BOARDS
    return max(requested, existing)


def banner_timeout(boards: int) -> float:
    """How long `lab up` waits for every sshd by default: each board's first start is seconds of
    emulated CPU, so a big lab on a small machine needs longer than a small one."""
    return 180.0 + 5.0 * max(0, boards - 4)


def build_tool_packages(suite: str) -> tuple[str, ...]:
    """What a builder board of a Debian suite carries beyond the lab's packages."""
    return BUILD_TOOL_PACKAGES.get(suite, BUILD_TOOL_PACKAGES["trixie"])


def board_packages(profile: TargetProfile, *, build_tools: bool = False) -> tuple[str, ...]:
    """What a profile's lab board is made with: the lab's packages, plus a stand-in's development
    files, plus a native build toolchain for a builder board (the order keeps no duplicates)."""
    packages: tuple[str, ...] = LAB_PACKAGES
    if profile.os.distro != "debian":
        packages += STAND_IN_DEV_PACKAGES.get(lab_suite(profile), ())
    if build_tools:
        packages += build_tool_packages(lab_suite(profile))
    return tuple(dict.fromkeys(packages))


def board_image_inputs(
    base_image: str, base_image_id: str, qemu_cpu: str, packages: tuple[str, ...] = LAB_PACKAGES
) -> dict[str, str]:
    """Everything the board image depends on, as build arguments (hashed into its tag)."""
    return {
        "BASE_IMAGE": base_image,
        "BASE_IMAGE_ID": base_image_id,
        "PACKAGES": " ".join(packages),
        "QEMU_CPU": qemu_cpu,
    }


def board_image_tag(inputs: dict[str, str]) -> str:
    digest = hashlib.sha256()
    for path in [BOARD_DOCKERFILE, *sorted(p for p in BOARD_CONTEXT.rglob("*") if p.is_file())]:
        digest.update(str(path.relative_to(DOCKER_DIR)).encode() + b"\0" + path.read_bytes() + b"\0")
    for key in sorted(inputs):
        digest.update(f"{key}={inputs[key]}\0".encode())
    return f"{BOARD_IMAGE_REPO}:{digest.hexdigest()[:12]}"


# -- small real-world probes ----------------------------------------------------------------------------


def ssh_banner(host: str, port: int, timeout: float = 3.0) -> str | None:
    """The SSH identification line a server sends first (``SSH-2.0-OpenSSH_...``), or None."""
    data = b""
    try:
        with socket.create_connection((host, port), timeout=timeout) as sock:
            sock.settimeout(timeout)
            while b"\n" not in data and len(data) < 512:
                chunk = sock.recv(512)
                if not chunk:
                    break
                data += chunk
    except OSError:
        return None
    line = data.split(b"\n", 1)[0].decode(errors="replace").strip()
    return line if line.startswith("SSH-") else None


# -- image ----------------------------------------------------------------------------------------------


def ensure_board_image(
    engine: Engine, profile: TargetProfile, on_log: Log | None = None, *, build_tools: bool = False
) -> str:
    """The board image's tag; built (and its base made) when missing. A builder board's packages
    differ, so it gets its own base and board image (both tags hash the package list)."""
    suite = lab_suite(profile)
    packages = board_packages(profile, build_tools=build_tools)
    base = base_images.ensure_base_image(engine, suite, profile.arch, packages, on_log=on_log)
    base_id = engine.image_id(base) or "registry"
    inputs = board_image_inputs(base, base_id, profile.qemu_cpu, packages)
    tag = board_image_tag(inputs)
    if engine.image_id(tag) is None:
        if on_log:
            on_log(f"building board image {tag} from {base}")
        engine.build_image(
            BOARD_CONTEXT,
            BOARD_DOCKERFILE,
            tag,
            buildargs={key: value for key, value in inputs.items() if key != "BASE_IMAGE_ID"},
            labels={"orch.role": "lab-board", "orch.base": base},
            on_log=on_log,
            # A registry base must be pulled for the board's architecture, not the workstation's.
            platform=f"linux/{base_images.debian_arch(profile.arch)}"
            if base_images.registry_override(suite)
            else None,
        )
    return tag


# -- up / status / down ----------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True)
class BoardStatus:
    name: str
    container: str
    state: BoardState
    port: int | None
    bound_ip: str | None
    banner: str | None
    build_tools: bool = False

    @property
    def healthy(self) -> bool:
        return self.state == "running" and self.banner is not None

    def as_dict(self) -> dict[str, object]:
        return {
            "name": self.name,
            "container": self.container,
            "state": self.state,
            "port": self.port,
            "host": self.bound_ip,
            "ssh_banner": self.banner,
            "healthy": self.healthy,
            "build_tools": self.build_tools,
        }


def _lab_containers(engine: Engine, lab: str) -> dict[str, ContainerSummary]:
    found = engine.containers({LABEL_LAB: lab})
    return {item.labels.get(LABEL_BOARD, item.name): item for item in found}


def _host_key(board: str) -> KeyPair:
    return ensure_keypair(lab_state.lab_dir() / "hostkeys" / board / HOST_KEY_NAME, comment=f"{board}-host")


def client_key() -> KeyPair:
    """The lab's client key pair ($ORCH_HOME/lab/id_ed25519), made once and kept."""
    return ensure_keypair(lab_state.lab_dir() / "id_ed25519", comment=f"orch-lab-{lab_id()}")


def _create_board(  # noqa: PLR0913 -- the lab's parts, then what the board is; build_tools keyword-only
    engine: Engine, image: str, board: str, profile: TargetProfile, lab: str, *, build_tools: bool
) -> None:
    name = container_name(board, lab)
    host_key = _host_key(board)
    authorized = lab_state.lab_dir() / "authorized_keys"
    authorized.write_text(client_key().public_line + "\n")
    engine.create(
        image,
        None,
        name=name,
        environment={"QEMU_CPU": profile.qemu_cpu},
        # 127.0.0.1 only, port chosen by the engine: a lab board is never reachable from the network.
        ports={"22/tcp": ("127.0.0.1", None)},
        labels={
            LABEL_LAB: lab,
            LABEL_BOARD: board,
            LABEL_TARGET: profile.name,
            LABEL_BUILD_TOOLS: "true" if build_tools else "false",
            "orch.home": str(orch_home()),
        },
    )
    # Keys go in before the first start: sshd never runs with a key orch does not know.
    engine.copy_into(name, host_key.private_path, "/etc/ssh", mode=0o600)
    engine.copy_into(name, authorized, "/root/.ssh", mode=0o600)
    engine.start_existing(name)


def _wait_for_banners(
    engine: Engine,
    ports: dict[str, int],
    lab: str,
    timeout: float,
    on_progress: Callable[[str, str], None] | None,
) -> dict[str, str]:
    """Poll every board until its sshd sends a banner; a board whose container dies fails at once."""
    pending = dict(ports)
    banners: dict[str, str] = {}
    deadline = time.monotonic() + timeout
    while pending:
        for board, port in list(pending.items()):
            banner = ssh_banner(lab_state.LAB_HOSTNAME, port, timeout=2.0)
            if banner:
                banners[board] = banner
                del pending[board]
                if on_progress:
                    on_progress(board, banner)
                continue
            state = engine.status(container_name(board, lab))
            if state not in ("running", "created"):
                logs = engine.logs(container_name(board, lab), tail=20) if state else ""
                raise ContainerError(
                    f"lab board {board}: its container is {state or 'gone'} before sshd answered\n{logs}".rstrip(),
                    hint="`orch doctor` checks aarch64 emulation; `orch lab down` then `orch lab up` starts afresh",
                )
        if not pending:
            break
        if time.monotonic() > deadline:
            raise ContainerError(
                f"no SSH banner within {timeout:.0f} s from: "
                + ", ".join(f"{board} (127.0.0.1:{port})" for board, port in sorted(pending.items())),
                hint="the machine may be busy (emulation is slow); retry with a larger --timeout",
            )
        time.sleep(0.5)
    return banners


@contextmanager
def _lab_lock() -> Iterator[None]:
    """One `lab up`/`lab down` at a time per ORCH_HOME: two at once would race for container names and ports."""
    with open(lab_state.lab_dir() / ".lock", "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


@dataclass(frozen=True, kw_only=True)
class LabUpRequest:
    """What `orch lab up` is asked for: ``--boards N`` (None: the running ones, or 2 on an empty
    lab), each ``--board PROFILE[:N]``, how long to wait for every board's sshd, and whether the
    boards this call makes carry a native build toolchain (``--build-tools``)."""

    boards: int | None = None
    profile_boards: tuple[ProfileBoards, ...] = ()
    timeout: float = 180.0
    build_tools: bool = False


def lab_up(
    engine: Engine,
    request: LabUpRequest,
    *,
    on_log: Log | None = None,
    on_progress: Callable[[str, str], None] | None = None,
) -> lab_state.LabState:
    """Make sure the lab runs at least ``request.boards`` lab boards and the ``profile_boards``;
    running boards are kept as they are."""
    with _lab_lock():
        return _lab_up(engine, request, on_log=on_log, on_progress=on_progress)


def wanted_boards(
    requested: int | None, profile_boards: Sequence[ProfileBoards], known: dict[str, str]
) -> dict[str, str]:
    """Board name -> profile name: the boards already known (with their profile), ``labN`` up to
    ``requested`` (2 on an empty lab when no ``--board`` is asked for either) and each ``--board``'s."""
    lab_count = len([name for name in known if _board_order(name)[0] < 10**6])
    if requested is None and lab_count == 0 and (profile_boards or known):
        wanted = {}
    else:
        wanted = dict.fromkeys(board_names(wanted_board_count(requested, lab_count)), LAB_TARGET)
    for item in profile_boards:
        wanted.update(dict.fromkeys(item.names, item.profile.name))
    wanted.update(known)  # a running board keeps the profile it was started with
    if len(wanted) > MAX_BOARDS:
        raise UsageError(f"the lab runs at most {MAX_BOARDS} boards; this would make {len(wanted)}")
    return dict(sorted(wanted.items(), key=lambda item: _board_order(item[0])))


def _lab_up(
    engine: Engine,
    request: LabUpRequest,
    *,
    on_log: Log | None,
    on_progress: Callable[[str, str], None] | None,
) -> lab_state.LabState:
    lab = lab_id()
    previous = lab_state.read_state()
    existing = _lab_containers(engine, lab)
    known = {record.name: record.target for record in (previous.boards if previous else ())}
    for name, container in existing.items():
        known.setdefault(name, container.labels.get(LABEL_TARGET, LAB_TARGET))
    profiles = wanted_boards(request.boards, request.profile_boards, known)
    names = list(profiles)
    client_key()
    made = _start_boards(engine, lab, profiles, existing, on_log, build_tools=request.build_tools)
    # A kept board has what it was made with (its label); a board made now has what was asked.
    tools = {name: item.labels.get(LABEL_BUILD_TOOLS) == "true" for name, item in existing.items()}
    tools.update(dict.fromkeys(made, request.build_tools))
    ports = {board: engine.published_port(container_name(board, lab), 22) for board in names}
    state = lab_state.LabState(
        user=LAB_USER,
        identity_file=client_key().private_path,
        boards=tuple(
            lab_state.LabBoardRecord(
                name=board,
                port=ports[board],
                container=container_name(board, lab),
                target=profiles[board],
                build_tools=tools.get(board, False),
            )
            for board in names
        ),
    )
    # Recorded before waiting: the host keys are known whatever happens next, and `lab down` finds everything.
    _record_known_hosts(state, lab)
    lab_state.write_state(state)
    _wait_for_banners(engine, ports, lab, request.timeout, on_progress)
    return state


def _start_boards(  # noqa: PLR0913 -- the lab's parts, then what this call asks for; build_tools keyword-only
    engine: Engine,
    lab: str,
    profiles: dict[str, str],
    existing: dict[str, ContainerSummary],
    on_log: Log | None,
    *,
    build_tools: bool,
) -> list[str]:
    """Each wanted board running: kept when it runs, started again when stopped, made (with its
    profile's image, a builder's when ``build_tools``) when missing or in another state. Returns
    the boards made."""
    images: dict[str, str] = {}
    made: list[str] = []
    for board, profile_name in profiles.items():
        item = existing.get(board)
        if item is not None and item.status == "running":
            continue
        if item is not None and item.status in ("exited", "created"):
            if on_log:
                on_log(f"{board}: starting its stopped container again")
            engine.start_existing(container_name(board, lab))
            continue
        if item is not None:
            # Paused, dead or restarting: replace it rather than guess.
            engine.remove(container_name(board, lab))
        profile = resolve_target(profile_name)
        if profile.name not in images:
            note = os_stand_in_note(profile)
            if note and on_log:
                on_log(f"lab: {note}")
            images[profile.name] = ensure_board_image(engine, profile, on_log, build_tools=build_tools)
        if on_log:
            tools = ", build tools" if build_tools else ""
            on_log(
                f"{board}: starting container {container_name(board, lab)}"
                f" ({profile.name}, {profile.qemu_cpu}{tools})"
            )
        _create_board(engine, images[profile.name], board, profile, lab, build_tools=build_tools)
        made.append(board)
    return made


def _board_order(name: str) -> tuple[int, str]:
    digits = name[len(BOARD_PREFIX) :]
    return (int(digits), name) if name.startswith(BOARD_PREFIX) and digits.isdigit() else (10**6, name)


def _record_known_hosts(state: lab_state.LabState, lab: str) -> None:
    lines = [
        known_hosts_line(lab_state.LAB_HOSTNAME, record.port, _host_key(record.name), known_hosts_marker(lab))
        for record in state.boards
    ]
    replace_known_hosts_lines(known_hosts_path(), known_hosts_marker(lab), lines)


def lab_status(engine: Engine) -> list[BoardStatus]:
    """Each board of the state file and each container of this lab, with its SSH health."""
    lab = lab_id()
    state = lab_state.read_state()
    containers = _lab_containers(engine, lab)
    names = sorted(
        {record.name for record in (state.boards if state else ())} | set(containers), key=_board_order
    )
    statuses = []
    for board in names:
        item = containers.get(board)
        port: int | None = None
        bound_ip: str | None = None
        if item is not None:
            for binding in item.ports.get("22/tcp") or []:
                if binding.get("HostPort"):
                    port, bound_ip = int(binding["HostPort"]), binding.get("HostIp")
                    break
        running = item is not None and item.status == "running"
        banner = ssh_banner(lab_state.LAB_HOSTNAME, port) if running and port else None
        statuses.append(
            BoardStatus(
                name=board,
                container=container_name(board, lab),
                state=item.status if item is not None else "missing",
                port=port,
                bound_ip=bound_ip,
                banner=banner,
                build_tools=item is not None and item.labels.get(LABEL_BUILD_TOOLS) == "true",
            )
        )
    return statuses


def lab_down(engine: Engine) -> list[str]:
    """Remove this lab's containers, its state and its known_hosts lines; keys and images stay as a cache."""
    with _lab_lock():
        return _lab_down(engine)


def _lab_down(engine: Engine) -> list[str]:
    lab = lab_id()
    removed = []
    state = lab_state.read_state()
    names = {item.name for item in engine.containers({LABEL_LAB: lab})}
    names |= {record.container for record in (state.boards if state else ())}
    for name in sorted(str(n) for n in names):
        engine.remove(name, force=True)
        removed.append(name)
    lab_state.clear_state()
    replace_known_hosts_lines(known_hosts_path(), known_hosts_marker(lab), [])
    return removed


def remaining_containers(engine: Engine) -> Sequence[ContainerSummary]:
    return engine.containers({LABEL_LAB: lab_id()})
