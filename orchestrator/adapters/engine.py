"""The Docker adapter: the only module of orch that imports ``docker``.

Everything else (lab, build, base images) talks to the engine through ``Engine``'s
small methods. Every engine failure becomes a ``ContainerError`` whose hint says how
to start or install the engine, so no caller ever sees a docker SDK exception.
"""

from __future__ import annotations

import io
import os
import shutil
import tarfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import docker
import docker.errors
import docker.types
from docker.models.containers import Container
from docker.transport import UnixHTTPAdapter

from orchestrator.adapters import process
from orchestrator.errors import ContainerError, ContainerTimeout

LogSink = Callable[[str], None]

# Long RUN steps under emulation can be silent for minutes; the SDK's 60 s read timeout would abort them.
_CLIENT_TIMEOUT = 3600
# Idle API connections kept to an engine over SSH, each holding an SSH session (see docker_ssh).
_SSH_POOLS = 3
_SSH_POOL_SIZE = 2
# How often sending an image to another engine reports its progress.
_SHIP_REPORT_BYTES = 200_000_000
_ENGINE_HINT = (
    "start the Docker engine (`sudo scripts/setup` installs and starts it; or `sudo systemctl start docker`), "
    "or point DOCKER_HOST at a running engine"
)


@contextmanager
def _translated(action: str) -> Iterator[None]:
    """Turn docker SDK errors into ContainerError naming the action that failed."""
    try:
        yield
    except ContainerError:
        raise
    except docker.errors.NotFound as error:
        raise ContainerError(f"{action}: not found ({_explain(error)})") from error
    except docker.errors.BuildError as error:
        raise ContainerError(f"{action}: {error.msg}") from error
    except docker.errors.APIError as error:
        raise ContainerError(f"{action}: {_explain(error)}") from error
    except docker.errors.DockerException as error:
        raise ContainerError(
            f"{action}: the Docker engine is not reachable ({error})", hint=_ENGINE_HINT
        ) from error
    except OSError as error:
        raise ContainerError(f"{action}: {error}", hint=_ENGINE_HINT) from error


def _explain(error: docker.errors.APIError) -> str:
    return str(getattr(error, "explanation", None) or error)


def _port_key(port: int | str) -> str:
    text = str(port)
    return text if "/" in text else f"{text}/tcp"


class Engine:
    """A connection to one Docker engine (``DOCKER_HOST`` or the local socket)."""

    def __init__(self, docker_host: str | None = None) -> None:
        self.docker_host = docker_host or os.environ.get("DOCKER_HOST")
        self._tunnel = None
        if self.docker_host and self.docker_host.startswith("unix://"):
            socket_path = Path(self.docker_host.removeprefix("unix://"))
            if not socket_path.exists():
                raise ContainerError(
                    f"connecting to the Docker engine: the Docker engine is not reachable (there is no"
                    f" socket at {socket_path}, from {self.docker_host})",
                    hint=_ENGINE_HINT,
                )
        with _translated("connecting to the Docker engine"):
            if self.docker_host and self.docker_host.startswith("ssh://"):
                # Through orch's own SSH layer (host keys verified against orch's known_hosts,
                # ~/.ssh/config and ProxyJump honoured), not the SDK's separate paramiko client.
                from orchestrator.adapters.engine_ssh import DockerOverSSH

                self._tunnel = DockerOverSSH(self.docker_host)
                self._client = docker.DockerClient(base_url=self._tunnel.base_url, timeout=_CLIENT_TIMEOUT)
                # The SDK keeps one connection pool per URL (25 of them; its num_pools is ignored for
                # unix sockets), each idle connection holding an SSH session: keep only a few.
                self._client.api.mount(
                    "http+docker://",
                    UnixHTTPAdapter(
                        self._tunnel.base_url.replace("unix://", "http+unix://", 1),
                        timeout=_CLIENT_TIMEOUT,
                        pool_connections=_SSH_POOLS,
                        max_pool_size=_SSH_POOL_SIZE,
                    ),
                )
            elif self.docker_host:
                self._client = docker.DockerClient(base_url=self.docker_host, timeout=_CLIENT_TIMEOUT)
            else:
                self._client = docker.from_env(timeout=_CLIENT_TIMEOUT)

    @property
    def label(self) -> str:
        return self.docker_host or "the local Docker engine"

    # -- engine ---------------------------------------------------------------------------------

    def ping(self) -> bool:
        with _translated("pinging the Docker engine"):
            return bool(self._client.ping())

    def version(self) -> dict[str, Any]:
        """The engine's version document (``Version``, ``ApiVersion``, ``Os``, ``Arch`` ...)."""
        with _translated("asking the Docker engine for its version"):
            return dict(self._client.version())

    def info(self) -> dict[str, Any]:
        """The engine's info document (``DockerRootDir``, ``Driver`` ...)."""
        with _translated("asking the Docker engine for its info"):
            return dict(self._client.info())

    def close(self) -> None:
        self._client.close()
        if self._tunnel is not None:
            self._tunnel.close()

    # -- images ---------------------------------------------------------------------------------

    def image_id(self, tag: str) -> str | None:
        """The id of an image by tag, or None when the engine does not have it."""
        try:
            with _translated(f"looking up image {tag}"):
                return str(self._client.images.get(tag).id)
        except ContainerError as error:
            if isinstance(error.__cause__, docker.errors.ImageNotFound | docker.errors.NotFound):
                return None
            raise

    def image_labels(self, tag: str) -> dict[str, str]:
        with _translated(f"inspecting image {tag}"):
            return dict(self._client.images.get(tag).labels or {})

    def build_image(
        self,
        context: Path,
        dockerfile: Path,
        tag: str,
        buildargs: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
        on_log: LogSink | None = None,
        *,
        platform: str | None = None,
    ) -> str:
        """Build ``dockerfile`` with ``context``; streams build output lines to ``on_log``; returns the image id.

        ``platform`` (``linux/arm64``) selects the architecture of a base image pulled from a registry.
        """
        context = Path(context).resolve()
        dockerfile = Path(dockerfile)
        if not dockerfile.is_absolute():
            dockerfile = context / dockerfile
        try:
            dockerfile_arg = str(dockerfile.resolve().relative_to(context))
        except ValueError:
            # Outside the context: the SDK sends it along with the context itself.
            dockerfile_arg = str(dockerfile.resolve())
        image_id: str | None = None
        tail: list[str] = []
        with _translated(f"building image {tag}"):
            stream = self._client.api.build(
                path=str(context),
                dockerfile=dockerfile_arg,
                tag=tag,
                buildargs=dict(buildargs or {}),
                labels=dict(labels or {}),
                rm=True,
                forcerm=True,
                decode=True,
                platform=platform,
            )
            for chunk in stream:
                if "error" in chunk:
                    detail = "\n".join(tail[-20:])
                    raise ContainerError(
                        f"building image {tag} failed: {chunk['error'].strip()}"
                        + (f"\nlast build output:\n{detail}" if detail else "")
                    )
                if "aux" in chunk and isinstance(chunk["aux"], dict) and "ID" in chunk["aux"]:
                    image_id = chunk["aux"]["ID"]
                text = chunk.get("stream") or chunk.get("status")
                if text:
                    for line in str(text).splitlines():
                        if line.strip():
                            tail.append(line)
                            del tail[:-50]
                            if on_log:
                                on_log(line)
        found = self.image_id(tag)
        if found is None:
            raise ContainerError(f"building image {tag}: the engine reported no image")
        return image_id or found

    def import_rootfs(self, tar_path: Path, tag: str) -> str:
        """``docker import`` a root filesystem tarball as ``tag``; returns the image id."""
        repository, _, version = tag.rpartition(":") if ":" in tag.split("/")[-1] else (tag, "", "latest")
        with _translated(f"importing {tar_path} as {tag}"):
            self._client.api.import_image_from_file(str(tar_path), repository=repository, tag=version)
        found = self.image_id(tag)
        if found is None:
            raise ContainerError(f"importing {tar_path} as {tag}: the engine reported no image")
        return found

    def import_rootfs_dir(self, rootfs: Path, tag: str) -> str:
        """Import a root filesystem directory as ``tag`` by streaming ``tar`` into the engine (no temp file)."""
        repository, _, version = tag.rpartition(":") if ":" in tag.split("/")[-1] else (tag, "", "latest")
        tar = shutil.which("tar")
        if tar is None:
            raise ContainerError("importing a root filesystem needs `tar`", hint="apt-get install tar")
        # --numeric-owner keeps uids as in the rootfs even if this host maps names differently.
        archive = process.Producer([tar, "--numeric-owner", "-C", str(rootfs), "-c", "."])
        with archive, _translated(f"importing {rootfs} as {tag}"):
            self._client.api.import_image_from_stream(archive.stdout, repository=repository, tag=version)
        if archive.result is None or not archive.result.ok:
            reason = archive.result.stderr.strip() if archive.result else "no exit status"
            raise ContainerError(f"archiving {rootfs} failed: {reason}")
        found = self.image_id(tag)
        if found is None:
            raise ContainerError(f"importing {rootfs} as {tag}: the engine reported no image")
        return found

    def remove_image(self, tag: str, force: bool = False) -> None:
        try:
            with _translated(f"removing image {tag}"):
                self._client.images.remove(tag, force=force)
        except ContainerError as error:
            if not isinstance(error.__cause__, docker.errors.NotFound):
                raise

    def ship_image(self, tag: str, to: Engine, on_log: LogSink | None = None) -> str:
        """Copy image ``tag`` from this engine into another one (``docker save | docker load``, streamed)."""
        with _translated(f"reading image {tag}"):
            image = self._client.images.get(tag)
        size = int(image.attrs.get("Size") or 0)
        if on_log:
            on_log(f"sending image {tag} ({size / 1e6:.0f} MB) to {to.label}")
        started = time.monotonic()

        def counted(chunks: Iterator[bytes]) -> Iterator[bytes]:
            sent, reported = 0, 0
            for chunk in chunks:
                sent += len(chunk)
                if on_log and sent - reported >= _SHIP_REPORT_BYTES:
                    reported = sent
                    rate = sent / max(time.monotonic() - started, 1e-3) / 1e6
                    on_log(f"  {sent / 1e6:.0f} of ~{size / 1e6:.0f} MB sent ({rate:.1f} MB/s)")
                yield chunk

        with _translated(f"saving image {tag}"):
            to.load_image(counted(image.save(chunk_size=1 << 20, named=True)), tag)
        found = to.image_id(tag)
        if found is None:
            raise ContainerError(
                f"sending image {tag} to {to.label}: the engine reported no image after loading"
            )
        return found

    def load_image(self, chunks: Iterator[bytes], tag: str) -> None:
        with _translated(f"loading image {tag} into {self.label}"):
            # docker's type stubs leave APIClient.load_image unannotated.
            for _ in self._client.api.load_image(chunks, quiet=True):  # type: ignore[no-untyped-call]
                pass

    # -- containers -----------------------------------------------------------------------------

    def _get(self, container: str) -> Container:
        with _translated(f"finding container {container}"):
            return self._client.containers.get(container)

    def run(
        self,
        image: str,
        argv: Sequence[str],
        *,
        name: str | None = None,
        environment: Mapping[str, str] | None = None,
        volumes: Mapping[str, Mapping[str, str]] | None = None,
        ports: Mapping[str, Any] | None = None,
        network: str | None = None,
        labels: Mapping[str, str] | None = None,
        working_dir: str | None = None,
        on_log: LogSink | None = None,
        copy_in: Sequence[tuple[Path, str]] = (),
        copy_out: Sequence[tuple[str, Path]] = (),
        timeout: float | None = None,
    ) -> int:
        """Run a container in the foreground: stream its output lines, remove it, return its exit code.

        ``copy_in`` (local path, container path) is copied in before the start and ``copy_out``
        (container path, local directory) after the exit — paths that do not exist then are left
        out, the caller checks. Copies instead of bind mounts work the same on a remote engine.
        Ctrl-C (or any error while streaming) kills and removes the container so nothing keeps running.
        ``timeout`` (seconds from the start) kills a container still running then and raises
        ``ContainerTimeout``; like every container orch makes, it runs without core dumps, and
        under the engine's init (``docker run --init``).
        """
        kwargs = self._create_kwargs(environment, volumes, ports, network, labels)
        if working_dir:
            kwargs["working_dir"] = working_dir
        # The engine's init as PID 1: a program that dies of a signal under qemu-user as PID 1 hangs
        # (qemu re-raises the signal at itself, which the kernel ignores for a namespace's init).
        kwargs["init"] = True
        with _translated(f"starting a container from {image}"):
            container = self._client.containers.create(image, list(argv), name=name, **kwargs)
        try:
            for local, path in copy_in:
                self._put(container, Path(local), "/", arcname=path.strip("/"))
            expired = threading.Event()

            def expire() -> None:
                expired.set()
                try:
                    container.kill()
                except (docker.errors.DockerException, OSError):  # it ended meanwhile
                    pass

            timer = threading.Timer(timeout, expire) if timeout is not None else None
            with _translated(f"running container {container.name}"):
                container.start()
                if timer is not None:
                    timer.daemon = True
                    timer.start()
                try:
                    pending = b""
                    for chunk in container.logs(stream=True, follow=True, stdout=True, stderr=True):
                        pending += chunk
                        *lines, pending = pending.split(b"\n")
                        if on_log:
                            for line in lines:
                                on_log(line.decode(errors="replace").rstrip("\r"))
                    if pending and on_log:
                        on_log(pending.decode(errors="replace").rstrip("\r"))
                    result = container.wait()
                finally:
                    if timer is not None:
                        timer.cancel()
            if expired.is_set():
                raise ContainerTimeout(
                    f"a container from {image} ran longer than {timeout:g} s and was killed"
                )
            for path, local_dir in copy_out:
                try:
                    self._copy_out(container, path, local_dir)
                except ContainerError as error:
                    if not isinstance(error.__cause__, docker.errors.NotFound):
                        raise
            return int(result.get("StatusCode", 1))
        finally:
            try:
                container.remove(force=True)
            except (docker.errors.DockerException, OSError):  # OSError: the engine's connection broke
                pass

    def start(
        self,
        image: str,
        argv: Sequence[str] | None,
        *,
        name: str,
        environment: Mapping[str, str] | None = None,
        ports: Mapping[str, Any] | None = None,
        labels: Mapping[str, str] | None = None,
        volumes: Mapping[str, Mapping[str, str]] | None = None,
        network: str | None = None,
    ) -> str:
        """Start a detached container; returns its id. ``argv=None`` runs the image's own command."""
        container_id = self.create(
            image,
            argv,
            name=name,
            environment=environment,
            ports=ports,
            labels=labels,
            volumes=volumes,
            network=network,
        )
        self.start_existing(container_id)
        return container_id

    def create(
        self,
        image: str,
        argv: Sequence[str] | None,
        *,
        name: str,
        environment: Mapping[str, str] | None = None,
        ports: Mapping[str, Any] | None = None,
        labels: Mapping[str, str] | None = None,
        volumes: Mapping[str, Mapping[str, str]] | None = None,
        network: str | None = None,
    ) -> str:
        """Create a container without starting it (to copy files in first); returns its id."""
        kwargs = self._create_kwargs(environment, volumes, ports, network, labels)
        with _translated(f"creating container {name} from {image}"):
            container = self._client.containers.create(
                image, list(argv) if argv is not None else None, name=name, **kwargs
            )
        return str(container.id)

    def start_existing(self, container: str) -> None:
        """Start a created (or stopped) container."""
        target = self._get(container)
        with _translated(f"starting container {container}"):
            target.start()

    @staticmethod
    def _create_kwargs(
        environment: Mapping[str, str] | None,
        volumes: Mapping[str, Mapping[str, str]] | None,
        ports: Mapping[str, Any] | None,
        network: str | None,
        labels: Mapping[str, str] | None,
    ) -> dict[str, Any]:
        # No core files: nothing reads them, and qemu-user writing the core of a multi-threaded
        # guest (a wheel dying of SIGILL under emulation) stalls instead of exiting.
        kwargs: dict[str, Any] = {"ulimits": [docker.types.Ulimit(name="core", soft=0, hard=0)]}
        if environment:
            kwargs["environment"] = dict(environment)
        if volumes:
            kwargs["volumes"] = {key: dict(value) for key, value in volumes.items()}
        if ports:
            kwargs["ports"] = {_port_key(key): value for key, value in ports.items()}
        if network:
            kwargs["network"] = network
        if labels:
            kwargs["labels"] = dict(labels)
        return kwargs

    def exec(
        self, container: str, argv: Sequence[str], environment: Mapping[str, str] | None = None
    ) -> tuple[int, str]:
        """Run argv in a running container; returns (exit code, combined stdout+stderr text)."""
        target = self._get(container)
        with _translated(f"running {argv[0] if argv else '?'} in container {container}"):
            result = target.exec_run(list(argv), environment=dict(environment or {}) or None)
        output = (
            result.output.decode(errors="replace") if isinstance(result.output, bytes) else str(result.output)
        )
        return int(result.exit_code if result.exit_code is not None else 1), output

    def copy_into(self, container: str, src: Path, dest_dir: str, *, mode: int | None = None) -> None:
        """Copy a file or directory tree into ``dest_dir`` of the container (which must exist there)."""
        self._put(self._get(container), Path(src), dest_dir, arcname=Path(src).name, mode=mode)

    def _put(
        self, target: Container, src: Path, dest_dir: str, *, arcname: str, mode: int | None = None
    ) -> None:
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
        with _translated(f"copying {src} into {target.name}:{dest_dir}"):
            if not target.put_archive(dest_dir, buffer.getvalue()):
                raise ContainerError(f"copying {src} into {target.name}:{dest_dir} was refused")

    def copy_out(self, container: str, path: str, dest_dir: Path) -> Path:
        """Copy a file or directory out of the container into ``dest_dir``; returns the local path."""
        return self._copy_out(self._get(container), path, dest_dir)

    def _copy_out(self, target: Container, path: str, dest_dir: Path) -> Path:
        dest_dir = Path(dest_dir)
        dest_dir.mkdir(parents=True, exist_ok=True)
        with _translated(f"copying {target.name}:{path} out"):
            stream, _stat = target.get_archive(path)
            buffer = io.BytesIO(b"".join(stream))
        with tarfile.open(fileobj=buffer, mode="r") as archive:
            archive.extractall(dest_dir, filter="data")
            names = archive.getnames()
        return dest_dir / (names[0].split("/")[0] if names else Path(path).name)

    def remove(self, container: str, force: bool = True) -> None:
        """Remove a container; a container that is already gone is not an error."""
        try:
            with _translated(f"removing container {container}"):
                self._client.containers.get(container).remove(force=force, v=False)
        except ContainerError as error:
            if not isinstance(error.__cause__, docker.errors.NotFound):
                raise

    def kill(self, container: str) -> None:
        target = self._get(container)
        with _translated(f"killing container {container}"):
            target.kill()

    def stop(self, container: str, timeout: int = 10) -> None:
        target = self._get(container)
        with _translated(f"stopping container {container}"):
            target.stop(timeout=timeout)

    def status(self, container: str) -> str | None:
        """The container's state (``running``, ``exited``, ``created`` ...), None when it does not exist."""
        try:
            with _translated(f"inspecting container {container}"):
                target = self._client.containers.get(container)
        except ContainerError as error:
            if isinstance(error.__cause__, docker.errors.NotFound):
                return None
            raise
        return str(target.status)

    def containers(self, label_filters: Mapping[str, str | None]) -> list[dict[str, Any]]:
        """Containers (running or not) whose labels match; each as name, id, status, ports, labels, image.

        A filter value of None matches any container carrying that label.
        """
        labels = [key if value is None else f"{key}={value}" for key, value in label_filters.items()]
        with _translated("listing containers"):
            found = self._client.containers.list(all=True, filters={"label": labels} if labels else None)
        return [
            {
                "name": item.name,
                "id": item.id,
                "status": item.status,
                "ports": self._ports_of(item),
                "labels": dict(item.labels or {}),
                "image": (item.attrs.get("Config") or {}).get("Image"),
            }
            for item in found
        ]

    @staticmethod
    def _ports_of(container: Container) -> dict[str, list[dict[str, str]]]:
        ports = (container.attrs.get("NetworkSettings") or {}).get("Ports") or {}
        return {key: list(value or []) for key, value in ports.items()}

    def port_bindings(self, container: str) -> dict[str, list[dict[str, str]]]:
        """The published ports as the engine reports them: ``{"22/tcp": [{"HostIp": ..., "HostPort": ...}]}``."""
        target = self._get(container)
        with _translated(f"inspecting container {container}"):
            target.reload()
        return self._ports_of(target)

    def published_port(self, container: str, port: int | str) -> int:
        """The host port a container port is published on (the engine chose it)."""
        bindings = self.port_bindings(container).get(_port_key(port)) or []
        for binding in bindings:
            if binding.get("HostPort"):
                return int(binding["HostPort"])
        raise ContainerError(f"container {container} publishes no host port for {port}")

    def logs(self, container: str, tail: int = 50) -> str:
        target = self._get(container)
        with _translated(f"reading logs of {container}"):
            return target.logs(tail=tail).decode(errors="replace")

    # -- volumes --------------------------------------------------------------------------------

    def ensure_volume(self, name: str, labels: Mapping[str, str] | None = None) -> str:
        """A named volume, created when missing (with ``labels``); returns its name."""
        try:
            with _translated(f"looking up volume {name}"):
                return str(self._client.volumes.get(name).name)
        except ContainerError as error:
            if not isinstance(error.__cause__, docker.errors.NotFound):
                raise
        with _translated(f"creating volume {name}"):
            return str(self._client.volumes.create(name=name, labels=dict(labels or {})).name)

    def volumes(
        self, label_filters: Mapping[str, str | None] | None = None, *, prefix: str | None = None
    ) -> dict[str, dict[str, str]]:
        """Volumes whose labels match (a None value: any volume carrying that label) and whose name
        starts with ``prefix``: name -> labels."""
        filters: dict[str, Any] = {}
        if label_filters:
            filters["label"] = [
                key if value is None else f"{key}={value}" for key, value in label_filters.items()
            ]
        if prefix:
            filters["name"] = prefix  # the engine matches a substring; the prefix is checked below
        with _translated("listing volumes"):
            found = self._client.volumes.list(filters=filters or None)
        return {
            str(v.name): dict(v.attrs.get("Labels") or {})
            for v in found
            if not prefix or str(v.name).startswith(prefix)
        }

    def remove_volume(self, name: str) -> None:
        """Remove a named volume; one that is already gone is not an error."""
        try:
            with _translated(f"removing volume {name}"):
                self._client.volumes.get(name).remove(force=True)
        except ContainerError as error:
            if not isinstance(error.__cause__, docker.errors.NotFound):
                raise
