"""Docker SDK failures as orch's ``ContainerError``, naming the action that failed and, when the
engine cannot be reached, how to start it. The SDK is imported only when a failure is looked at:
``orch inventory list`` and ``orch exec`` never load it."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from orchestrator.errors import ContainerError

ENGINE_HINT = (
    "start the Docker engine (`sudo scripts/setup` installs and starts it; or `sudo systemctl start docker`), "
    "or point DOCKER_HOST at a running engine"
)


@contextmanager
def translated(action: str) -> Iterator[None]:
    """Turn docker SDK errors into ContainerError naming the action that failed."""
    import docker.errors

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
            f"{action}: the Docker engine is not reachable ({error})", hint=ENGINE_HINT
        ) from error
    except OSError as error:
        raise ContainerError(f"{action}: {error}", hint=ENGINE_HINT) from error


def _explain(error: Exception) -> str:
    return str(getattr(error, "explanation", None) or error)


def not_found(error: ContainerError) -> bool:
    """The engine said the image, container or volume does not exist (``translated`` kept its cause)."""
    import docker.errors

    return isinstance(error.__cause__, docker.errors.NotFound)


def ending_errors() -> tuple[type[BaseException], ...]:
    """What killing or removing a container that ends meanwhile (or whose engine connection
    broke) may raise: nothing to report then."""
    import docker.errors

    return (docker.errors.DockerException, OSError)
