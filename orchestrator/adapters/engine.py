"""The Docker adapter: with ``engine_errors`` and ``engine_containers``, the only modules of orch
that import ``docker`` (inside their functions: loading the SDK costs start-up time).

Everything else (lab, build, base images) talks to the engine through ``Engine``'s
small methods. Every engine failure becomes a ``ContainerError`` whose hint says how
to start or install the engine, so no caller ever sees a docker SDK exception.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from orchestrator.adapters import process
from orchestrator.adapters.engine_containers import (
    ContainerState,
    ContainerSummary,
    LogSink,
    PortBindings,
    copy_out_of,
    create_options,
    port_key,
    ports_of,
    put_files,
    run_streamed,
    state_of,
    summary,
)
from orchestrator.adapters.engine_errors import ENGINE_HINT, ending_errors, not_found, translated
from orchestrator.adapters.engine_ssh import DockerOverSSH
from orchestrator.errors import ContainerError

if TYPE_CHECKING:
    from docker import DockerClient
    from docker.models.containers import Container

# Long RUN steps under emulation can be silent for minutes; the SDK's 60 s read timeout would abort them.
_CLIENT_TIMEOUT = 3600
# Idle API connections kept to an engine over SSH, each holding an SSH session (see engine_ssh).
_SSH_POOLS = 3
_SSH_POOL_SIZE = 2
# How often sending an image to another engine reports its progress.
_SHIP_REPORT_BYTES = 200_000_000


class Engine:
    """A connection to one Docker engine (``DOCKER_HOST`` or the local socket)."""

    def __init__(self, docker_host: str | None = None) -> None:
        self.docker_host = docker_host or os.environ.get("DOCKER_HOST")
        self._tunnel: DockerOverSSH | None = None
        if self.docker_host and self.docker_host.startswith("unix://"):
            socket_path = Path(self.docker_host.removeprefix("unix://"))
            if not socket_path.exists():
                raise ContainerError(
                    f"connecting to the Docker engine: the Docker engine is not reachable (there is no"
                    f" socket at {socket_path}, from {self.docker_host})",
                    hint=ENGINE_HINT,
                )
        with translated("connecting to the Docker engine"):
            self._client = self._connect()

    def _connect(self) -> DockerClient:
        import docker

        if self.docker_host and self.docker_host.startswith("ssh://"):
            # Through orch's own SSH layer (host keys verified against orch's known_hosts,
            # ~/.ssh/config and ProxyJump honoured), not the SDK's separate paramiko client.
            self._tunnel = DockerOverSSH(self.docker_host)
            return self._over_ssh(self._tunnel)
        if self.docker_host:
            return docker.DockerClient(base_url=self.docker_host, timeout=_CLIENT_TIMEOUT)
        return docker.from_env(timeout=_CLIENT_TIMEOUT)

    @staticmethod
    def _over_ssh(tunnel: DockerOverSSH) -> DockerClient:
        import docker
        from docker.transport import UnixHTTPAdapter

        client = docker.DockerClient(base_url=tunnel.base_url, timeout=_CLIENT_TIMEOUT)
        # The SDK keeps one connection pool per URL (25 of them; its num_pools is ignored for
        # unix sockets), each idle connection holding an SSH session: keep only a few.
        client.api.mount(
            "http+docker://",
            UnixHTTPAdapter(
                tunnel.base_url.replace("unix://", "http+unix://", 1),
                timeout=_CLIENT_TIMEOUT,
                pool_connections=_SSH_POOLS,
                max_pool_size=_SSH_POOL_SIZE,
            ),
        )
        return client

    @property
    def label(self) -> str:
        return self.docker_host or "the local Docker engine"

    # -- engine ---------------------------------------------------------------------------------

    def ping(self) -> bool:
        with translated("pinging the Docker engine"):
            return bool(self._client.ping())

    def version(self) -> dict[str, Any]:
        """The engine's version document (``Version``, ``ApiVersion``, ``Os``, ``Arch`` ...)."""
        with translated("asking the Docker engine for its version"):
            return dict(self._client.version())

    def info(self) -> dict[str, Any]:
        """The engine's info document (``DockerRootDir``, ``Driver`` ...)."""
        with translated("asking the Docker engine for its info"):
            return dict(self._client.info())

    def close(self) -> None:
        self._client.close()
        if self._tunnel is not None:
            self._tunnel.close()

    # -- images ---------------------------------------------------------------------------------

    def image_id(self, tag: str) -> str | None:
        """The id of an image by tag, or None when the engine does not have it."""
        try:
            with translated(f"looking up image {tag}"):
                return str(self._client.images.get(tag).id)
        except ContainerError as error:
            if not_found(error):
                return None
            raise

    def image_labels(self, tag: str) -> dict[str, str]:
        with translated(f"inspecting image {tag}"):
            return dict(self._client.images.get(tag).labels or {})

    def build_image(  # noqa: PLR0913 -- docker build's settings, each keyword-only with a default
        self,
        context: Path,
        dockerfile: Path,
        tag: str,
        *,
        buildargs: Mapping[str, str] | None = None,
        labels: Mapping[str, str] | None = None,
        on_log: LogSink | None = None,
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
        with translated(f"building image {tag}"):
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
        with translated(f"importing {tar_path} as {tag}"):
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
        with archive, translated(f"importing {rootfs} as {tag}"):
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
            with translated(f"removing image {tag}"):
                self._client.images.remove(tag, force=force)
        except ContainerError as error:
            if not not_found(error):
                raise

    def ship_image(self, tag: str, to: Engine, on_log: LogSink | None = None) -> str:
        """Copy image ``tag`` from this engine into another one (``docker save | docker load``, streamed)."""
        with translated(f"reading image {tag}"):
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

        with translated(f"saving image {tag}"):
            to.load_image(counted(image.save(chunk_size=1 << 20, named=True)), tag)
        found = to.image_id(tag)
        if found is None:
            raise ContainerError(
                f"sending image {tag} to {to.label}: the engine reported no image after loading"
            )
        return found

    def load_image(self, chunks: Iterator[bytes], tag: str) -> None:
        with translated(f"loading image {tag} into {self.label}"):
            # docker's type stubs leave APIClient.load_image unannotated.
            for _ in self._client.api.load_image(chunks, quiet=True):  # type: ignore[no-untyped-call]
                continue  # the stream's items are progress messages; draining it is the load

    # -- containers -----------------------------------------------------------------------------

    def _get(self, container: str) -> Container:
        with translated(f"finding container {container}"):
            return self._client.containers.get(container)

    def run(  # noqa: PLR0913 -- docker run's settings, each keyword-only with a default
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
        options = create_options(environment, volumes, ports, network, labels)
        if working_dir:
            options["working_dir"] = working_dir
        # The engine's init as PID 1: a program that dies of a signal under qemu-user as PID 1 hangs
        # (qemu re-raises the signal at itself, which the kernel ignores for a namespace's init).
        options["init"] = True
        with translated(f"starting a container from {image}"):
            container = self._client.containers.create(image, list(argv), name=name, **options)
        try:
            for local, path in copy_in:
                put_files(container, Path(local), "/", arcname=path.strip("/"))
            exit_code = run_streamed(container, image, on_log=on_log, timeout=timeout)
            for path, local_dir in copy_out:
                self._copy_out_if_there(container, path, local_dir)
            return exit_code
        finally:
            # OSError too: the engine's connection broke.
            with contextlib.suppress(*ending_errors()):
                container.remove(force=True)

    @staticmethod
    def _copy_out_if_there(container: Container, path: str, local_dir: Path) -> None:
        try:
            copy_out_of(container, path, local_dir)
        except ContainerError as error:
            if not not_found(error):
                raise

    def start(  # noqa: PLR0913 -- docker run -d's settings, each keyword-only with a default
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

    def create(  # noqa: PLR0913 -- docker create's settings, each keyword-only with a default
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
        options = create_options(environment, volumes, ports, network, labels)
        with translated(f"creating container {name} from {image}"):
            container = self._client.containers.create(
                image, list(argv) if argv is not None else None, name=name, **options
            )
        return str(container.id)

    def export_filesystem(self, image: str, dest: Path) -> int:
        """The file system of ``image`` as one tarball at ``dest`` (``docker export`` of a container
        made from it and never started), streamed to disk; returns its size in bytes."""
        container = self.create(image, ["true"], name=f"orch-export-{uuid.uuid4().hex[:12]}")
        written = 0
        try:
            with translated(f"exporting the file system of {image}"), dest.open("wb") as out:
                for chunk in self._get(container).export():
                    data = cast("bytes", chunk)  # the SDK's stubs say str; the stream is bytes
                    out.write(data)
                    written += len(data)
        finally:
            self.remove(container)
        return written

    def start_existing(self, container: str) -> None:
        """Start a created (or stopped) container."""
        target = self._get(container)
        with translated(f"starting container {container}"):
            target.start()

    def exec(
        self, container: str, argv: Sequence[str], environment: Mapping[str, str] | None = None
    ) -> tuple[int, str]:
        """Run argv in a running container; returns (exit code, combined stdout+stderr text)."""
        target = self._get(container)
        with translated(f"running {argv[0] if argv else '?'} in container {container}"):
            result = target.exec_run(list(argv), environment=dict(environment or {}) or None)
        output = (
            result.output.decode(errors="replace") if isinstance(result.output, bytes) else str(result.output)
        )
        return int(result.exit_code if result.exit_code is not None else 1), output

    def copy_into(self, container: str, src: Path, dest_dir: str, *, mode: int | None = None) -> None:
        """Copy a file or directory tree into ``dest_dir`` of the container (which must exist there)."""
        put_files(self._get(container), Path(src), dest_dir, arcname=Path(src).name, mode=mode)

    def copy_out(self, container: str, path: str, dest_dir: Path) -> Path:
        """Copy a file or directory out of the container into ``dest_dir``; returns the local path."""
        return copy_out_of(self._get(container), path, dest_dir)

    def remove(self, container: str, force: bool = True) -> None:
        """Remove a container; a container that is already gone is not an error."""
        try:
            with translated(f"removing container {container}"):
                self._client.containers.get(container).remove(force=force, v=False)
        except ContainerError as error:
            if not not_found(error):
                raise

    def kill(self, container: str) -> None:
        target = self._get(container)
        with translated(f"killing container {container}"):
            target.kill()

    def stop(self, container: str, timeout: int = 10) -> None:
        target = self._get(container)
        with translated(f"stopping container {container}"):
            target.stop(timeout=timeout)

    def status(self, container: str) -> ContainerState | None:
        """The container's state (``running``, ``exited``, ``created`` ...), None when it does not exist."""
        try:
            with translated(f"inspecting container {container}"):
                target = self._client.containers.get(container)
        except ContainerError as error:
            if not_found(error):
                return None
            raise
        return state_of(target)

    def containers(self, label_filters: Mapping[str, str | None]) -> list[ContainerSummary]:
        """Containers (running or not) whose labels match; each as name, id, status, ports, labels, image.

        A filter value of None matches any container carrying that label.
        """
        labels = [key if value is None else f"{key}={value}" for key, value in label_filters.items()]
        with translated("listing containers"):
            found = self._client.containers.list(all=True, filters={"label": labels} if labels else None)
        return [summary(item) for item in found]

    def port_bindings(self, container: str) -> PortBindings:
        """The published ports as the engine reports them: ``{"22/tcp": [{"HostIp": ..., "HostPort": ...}]}``."""
        target = self._get(container)
        with translated(f"inspecting container {container}"):
            target.reload()
        return ports_of(target)

    def published_port(self, container: str, port: int | str) -> int:
        """The host port a container port is published on (the engine chose it)."""
        bindings = self.port_bindings(container).get(port_key(port)) or []
        for binding in bindings:
            if binding.get("HostPort"):
                return int(binding["HostPort"])
        raise ContainerError(f"container {container} publishes no host port for {port}")

    def logs(self, container: str, tail: int = 50) -> str:
        target = self._get(container)
        with translated(f"reading logs of {container}"):
            return target.logs(tail=tail).decode(errors="replace")

    # -- volumes --------------------------------------------------------------------------------

    def ensure_volume(self, name: str, labels: Mapping[str, str] | None = None) -> str:
        """A named volume, created when missing (with ``labels``); returns its name."""
        try:
            with translated(f"looking up volume {name}"):
                return str(self._client.volumes.get(name).name)
        except ContainerError as error:
            if not not_found(error):
                raise
        with translated(f"creating volume {name}"):
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
        with translated("listing volumes"):
            found = self._client.volumes.list(filters=filters or None)
        return {
            str(v.name): dict(v.attrs.get("Labels") or {})
            for v in found
            if not prefix or str(v.name).startswith(prefix)
        }

    def remove_volume(self, name: str) -> None:
        """Remove a named volume; one that is already gone is not an error."""
        try:
            with translated(f"removing volume {name}"):
                self._client.volumes.get(name).remove(force=True)
        except ContainerError as error:
            if not not_found(error):
                raise
