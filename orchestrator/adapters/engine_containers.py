"""What ``Engine`` does with one docker SDK container: the options every container of orch is
created with, files copied in and out as tar archives, a foreground run streamed line by line
under a deadline, and a container's summary as orch reads it (``ContainerSummary``)."""

from __future__ import annotations

import io
import tarfile
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from orchestrator.adapters.engine_errors import ending_errors, translated
from orchestrator.errors import ContainerError, ContainerTimeout

if TYPE_CHECKING:
    from docker.models.containers import Container

LogSink = Callable[[str], None]
# Docker's container states (its API's closed list).
ContainerState = Literal["created", "restarting", "running", "removing", "paused", "exited", "dead"]
PortBindings = dict[str, list[dict[str, str]]]  # "22/tcp" -> [{"HostIp": ..., "HostPort": ...}]


@dataclass(frozen=True, kw_only=True)
class ContainerSummary:
    """A container as ``Engine.containers`` lists it."""

    name: str
    id: str
    status: ContainerState
    ports: PortBindings
    labels: dict[str, str]
    image: str | None


def summary(container: Container) -> ContainerSummary:
    return ContainerSummary(
        name=str(container.name),
        id=str(container.id),
        status=state_of(container),
        ports=ports_of(container),
        labels=dict(container.labels or {}),
        image=(container.attrs.get("Config") or {}).get("Image"),
    )


def state_of(container: Container) -> ContainerState:
    # The engine reports one of its documented states.
    return cast(ContainerState, str(container.status))


def port_key(port: int | str) -> str:
    text = str(port)
    return text if "/" in text else f"{text}/tcp"


def ports_of(container: Container) -> PortBindings:
    ports = (container.attrs.get("NetworkSettings") or {}).get("Ports") or {}
    return {key: list(value or []) for key, value in ports.items()}


def create_options(
    environment: Mapping[str, str] | None,
    volumes: Mapping[str, Mapping[str, str]] | None,
    ports: Mapping[str, Any] | None,
    network: str | None,
    labels: Mapping[str, str] | None,
) -> dict[str, Any]:
    """The SDK's keyword arguments for creating a container with these settings."""
    import docker.types

    # No core files: nothing reads them, and qemu-user writing the core of a multi-threaded
    # guest (a wheel dying of SIGILL under emulation) stalls instead of exiting.
    options: dict[str, Any] = {"ulimits": [docker.types.Ulimit(name="core", soft=0, hard=0)]}
    if environment:
        options["environment"] = dict(environment)
    if volumes:
        options["volumes"] = {key: dict(value) for key, value in volumes.items()}
    if ports:
        options["ports"] = {port_key(key): value for key, value in ports.items()}
    if network:
        options["network"] = network
    if labels:
        options["labels"] = dict(labels)
    return options


def put_files(target: Container, src: Path, dest_dir: str, *, arcname: str, mode: int | None = None) -> None:
    """Copy a file or directory tree into ``dest_dir`` of the container, owned by root."""
    if not src.exists():
        raise ContainerError(f"copying into {target.name}: {src} does not exist")
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:

        def _owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
            # Files land owned by root in the container, whatever owns them here (sshd is strict about it).
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            if mode is not None and info.isfile():
                info.mode = mode
            return info

        archive.add(str(src), arcname=arcname, filter=_owned_by_root)
    with translated(f"copying {src} into {target.name}:{dest_dir}"):
        if not target.put_archive(dest_dir, buffer.getvalue()):
            raise ContainerError(f"copying {src} into {target.name}:{dest_dir} was refused")


def copy_out_of(target: Container, path: str, dest_dir: Path) -> Path:
    """Copy a file or directory out of the container into ``dest_dir``; returns the local path."""
    dest_dir = Path(dest_dir)
    dest_dir.mkdir(parents=True, exist_ok=True)
    with translated(f"copying {target.name}:{path} out"):
        stream, _stat = target.get_archive(path)
        buffer = io.BytesIO(b"".join(stream))
    with tarfile.open(fileobj=buffer, mode="r") as archive:
        archive.extractall(dest_dir, filter="data")
        names = archive.getnames()
    return dest_dir / (names[0].split("/")[0] if names else Path(path).name)


def run_streamed(container: Container, image: str, *, on_log: LogSink | None, timeout: float | None) -> int:
    """Start the created container, pass its output lines to ``on_log`` until it exits, and return
    its exit code; past ``timeout`` it is killed and ``ContainerTimeout`` raised."""
    expired = threading.Event()

    def expire() -> None:
        expired.set()
        try:
            container.kill()
        except ending_errors():  # it ended meanwhile
            pass

    timer = threading.Timer(timeout, expire) if timeout is not None else None
    with translated(f"running container {container.name}"):
        container.start()
        if timer is not None:
            timer.daemon = True
            timer.start()
        try:
            _stream_lines(container, on_log)
            result = container.wait()
        finally:
            if timer is not None:
                timer.cancel()
    if expired.is_set():
        raise ContainerTimeout(f"a container from {image} ran longer than {timeout:g} s and was killed")
    return int(result.get("StatusCode", 1))


def _stream_lines(container: Container, on_log: LogSink | None) -> None:
    pending = b""
    for chunk in container.logs(stream=True, follow=True, stdout=True, stderr=True):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        if on_log:
            for line in lines:
                on_log(line.decode(errors="replace").rstrip("\r"))
    if pending and on_log:
        on_log(pending.decode(errors="replace").rstrip("\r"))
