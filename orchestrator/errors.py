"""The project's error types.

Every fatal condition is an ``OrchError`` subclass carrying its own exit code and,
where possible, a hint that says what to do. They are raised anywhere and caught
only in ``cli.main``, which prints them without a traceback (``--debug`` shows one).
"""

from __future__ import annotations


class OrchError(Exception):
    """Base class: a message for the user, an optional hint, an exit code."""

    exit_code = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(OrchError):
    """The command line asks for something that does not exist or does not fit."""

    exit_code = 2


class InventoryError(OrchError):
    """The inventory file is missing or malformed; the message names file, line and key."""

    exit_code = 2


class TargetError(OrchError):
    """Unknown or malformed target profile / variant."""

    exit_code = 2


class ContainerError(OrchError):
    """The Docker engine is unreachable or a container/image operation failed."""

    exit_code = 3


class ContainerTimeout(ContainerError):
    """A container ran past its time limit and was killed."""


class RemoteError(OrchError):
    """An SSH connection or a remote command failed on a board."""

    exit_code = 4


class HostKeyError(RemoteError):
    """A board presented a host key that does not match orch's known_hosts."""


class BuildError(OrchError):
    """A build, its wheel check or its pre-flight failed."""

    exit_code = 5


class DeployError(OrchError):
    """A deploy was refused (incompatible artifact) or failed on a board."""

    exit_code = 6


class BenchError(OrchError):
    """A benchmark run failed."""

    exit_code = 7


class PartialFailure(OrchError):
    """Some boards succeeded and some failed; results of the successful ones were kept."""

    exit_code = 8


class VerifyError(OrchError):
    """orch verify could not run: no reference wheel, no cases, nothing deployed to verify."""

    exit_code = 9
