"""Where orch keeps its state on the workstation.

``ORCH_HOME`` (default ``~/.orch``) holds what belongs to the user rather than to a
project: the lab's keys and state, orch's own known_hosts, the ccache volumes' names.
Project-relative things (``artifacts/``, ``results/``, ``inventory.yaml``) live in the
current directory so a project carries its own builds and measurements.
"""

from __future__ import annotations

import errno
import os
from importlib import resources
from pathlib import Path

# In a checkout: the repository root, where toolchains/, docker/ and inventory.yaml live.
PROJECT_ROOT = Path(__file__).resolve().parent.parent


def data_root() -> Path:
    """Where toolchains/, docker/ and the example inventory.yaml are.

    An installed wheel carries them as the package's ``data/`` folder (see setup.py); a checkout
    (an editable install included) has them at the repository root. Docker needs real folders as
    build contexts, so a zipped install is not supported.
    """
    packaged = resources.files("orchestrator").joinpath("data")
    if packaged.is_dir():
        return Path(str(packaged))
    return PROJECT_ROOT


DATA_ROOT = data_root()
TOOLCHAINS_DIR = DATA_ROOT / "toolchains"
DOCKER_DIR = DATA_ROOT / "docker"


def orch_home() -> Path:
    given = os.environ.get("ORCH_HOME")
    home = Path(given or Path.home() / ".orch")
    try:
        home.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        # mkdir says only "File exists" when the path is a file. Raised as an OSError naming the
        # path (this module is below orch's errors): the CLI prints it as bad input, exit code 2.
        raise NotADirectoryError(
            errno.ENOTDIR, f"{_named(given)} is a file, not a directory ({_WHY})", str(home)
        ) from None
    except NotADirectoryError:
        raise NotADirectoryError(
            errno.ENOTDIR,
            f"{_named(given)}: a part of this path is a file, not a directory ({_WHY})",
            str(home),
        ) from None
    except OSError as error:
        raise type(error)(
            error.errno, f"{_named(given)}: cannot create it: {error.strerror or error} ({_WHY})", str(home)
        ) from None
    return home


_WHY = "ORCH_HOME names the directory where orch keeps its keys, known_hosts and lab state"


def _named(given: str | None) -> str:
    return "ORCH_HOME" if given else "orch's home (~/.orch, ORCH_HOME is not set)"


def known_hosts_path() -> Path:
    """orch's own known_hosts: host keys recorded by the lab or accepted by the user."""
    return orch_home() / "known_hosts"


def default_inventory_path() -> Path:
    return Path(os.environ.get("ORCH_INVENTORY") or "inventory.yaml")


def artifacts_dir() -> Path:
    return Path(os.environ.get("ORCH_ARTIFACTS") or "artifacts")


def results_dir() -> Path:
    return Path(os.environ.get("ORCH_RESULTS") or "results")
