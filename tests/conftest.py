"""Shared fixtures: a real lab of emulated boards, and a runner for the real ``orch`` CLI.

``lab`` (session-scoped) starts ``orch lab up --boards 2`` in a temporary ORCH_HOME with an
empty inventory, so every test that needs boards talks to real arm64 containers over real
SSH, and a developer's own lab (another ORCH_HOME, another lab id) is never touched. While it
is active the test process itself also sees that ORCH_HOME (and ORCH_INVENTORY, ORCH_ARTIFACTS,
ORCH_RESULTS), so in-process calls (``remote.connect(board)``) use the lab's known_hosts.
``orch_cli(env, *args)`` runs the CLI for tests that need no lab; ``orch_env`` gives such a
test its own temporary environment.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from stock_baseline import StockBuild, build_stock, download_stock

from orchestrator import lab_state
from orchestrator.adapters.engine import Engine
from orchestrator.artifacts.pip_download import pip_download_argv
from orchestrator.board import Board
from orchestrator.builds.sources.ort import fetch_debian_tarball
from orchestrator.builds.workspace import build_volumes_under
from orchestrator.errors import OrchError
from orchestrator.lab.base_images import ensure_base_image

# Tests come in two kinds. `integration` tests use real outside parts: a Docker engine, lab
# boards, an sshd, the package index (pip download), or a headless browser (chromium). `unit`
# tests use none of them: no engine, no boards, no network (`pytest -m unit`). A test is
# integration when it uses one of these fixtures (directly or through another fixture) or says
# so with @pytest.mark.integration.
INTEGRATION_FIXTURES = frozenset(
    {
        "lab",  # emulated boards: Docker + qemu + sshd
        "engine",  # a Docker engine
        "build_image",
        "ort_tarball",
        "stock_wheel",  # pip download from the package index
        "make_server",  # a real sshd on 127.0.0.1
        "ssh_server",
    }
)

LAB_BOARDS = 2
# Generous: on a machine that has never made the board image, `lab up` debootstraps one (minutes).
LAB_UP_TIMEOUT = 1500
_ENV_KEYS = ("ORCH_HOME", "ORCH_INVENTORY", "ORCH_ARTIFACTS", "ORCH_RESULTS")


def orch_cli(
    env: dict[str, str],
    *args: str,
    check: bool = False,
    timeout: float = 600,
    cwd: Path | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """Run ``python -m orchestrator ARGS`` with ``env``; text mode, stdout and stderr captured.

    ``check=True`` fails the test with both streams shown when the exit code is not 0.
    """
    result = subprocess.run(
        [sys.executable, "-m", "orchestrator", *args],
        check=False,
        env=env,
        cwd=cwd or env.get("ORCH_TEST_CWD") or None,
        capture_output=True,
        text=True,
        timeout=timeout,
        input=input,
    )
    if check and result.returncode != 0:
        pytest.fail(
            f"orch {' '.join(args)} exited {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}",
            pytrace=False,
        )
    return result


def make_env(root: Path) -> dict[str, str]:
    """os.environ plus orch's locations under ``root`` (an empty inventory: ``all: {}``)."""
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    inventory = root / "inventory.yaml"
    if not inventory.exists():
        inventory.write_text("all: {}\n")
    for name in ("artifacts", "results"):
        (root / name).mkdir(exist_ok=True)
    return {
        **os.environ,
        "ORCH_HOME": str(home),
        "ORCH_INVENTORY": str(inventory),
        "ORCH_ARTIFACTS": str(root / "artifacts"),
        "ORCH_RESULTS": str(root / "results"),
        # Relative paths a command writes (none should) land in the temp dir, not the repository.
        "ORCH_TEST_CWD": str(root),
        # Rich wraps at 80 columns when not on a terminal; tests read whole lines.
        "COLUMNS": "200",
    }


@dataclass
class Lab:
    """A running test lab: its environment, its boards, and the CLI bound to that environment."""

    root: Path
    env: dict[str, str]
    home: Path
    boards: list[Board] = field(default_factory=list)

    def orch(self, *args: str, check: bool = False, timeout: float = 600) -> subprocess.CompletedProcess[str]:
        return orch_cli(self.env, *args, check=check, timeout=timeout)

    def board(self, name: str) -> Board:
        return next(board for board in self.boards if board.name == name)

    def refresh(self) -> list[Board]:
        """Re-read the boards from the lab's state (after a test restarted or added boards)."""
        self.boards = lab_boards_of(self.home)
        return self.boards


def lab_boards_of(home: Path) -> list[Board]:
    """The boards ``orch lab up`` recorded in ``home`` (read the way the inventory reads them)."""
    previous = os.environ.get("ORCH_HOME")
    os.environ["ORCH_HOME"] = str(home)
    try:
        return lab_state.lab_boards()
    finally:
        if previous is None:
            os.environ.pop("ORCH_HOME", None)
        else:
            os.environ["ORCH_HOME"] = previous


@contextmanager
def profile_lab(root: Path, *boards: str, extra_args: tuple[str, ...] = ()) -> Iterator[Lab]:
    """``orch lab up --board B ... EXTRA_ARGS`` (``rpi5:1``, ...; ``--build-tools``) in its own
    ORCH_HOME under ``root``; torn down after."""
    env = make_env(root)
    the_lab = Lab(root=root, env=env, home=Path(env["ORCH_HOME"]))
    try:
        the_lab.orch(
            "lab",
            "up",
            *(arg for board in boards for arg in ("--board", board)),
            *extra_args,
            check=True,
            timeout=1500,
        )
        the_lab.refresh()
        yield the_lab
    finally:
        the_lab.orch("lab", "down", timeout=300)


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    """``orch lab up --boards 2`` in a temporary ORCH_HOME; torn down (``orch lab down``) at the end."""
    root = tmp_path_factory.mktemp("orch-lab")
    env = make_env(root)
    the_lab = Lab(root=root, env=env, home=Path(env["ORCH_HOME"]))
    saved = {key: os.environ.get(key) for key in _ENV_KEYS}
    try:
        up = the_lab.orch("lab", "up", "--boards", str(LAB_BOARDS), timeout=LAB_UP_TIMEOUT)
        if up.returncode != 0:
            pytest.fail(
                f"`orch lab up --boards {LAB_BOARDS}` failed ({up.returncode}); `orch doctor` says what is missing"
                f"\n--- stdout\n{up.stdout}\n--- stderr\n{up.stderr}",
                pytrace=False,
            )
        the_lab.refresh()
        if len(the_lab.boards) != LAB_BOARDS:
            pytest.fail(
                f"the lab state lists {len(the_lab.boards)} boards, expected {LAB_BOARDS}", pytrace=False
            )
        os.environ.update({key: env[key] for key in _ENV_KEYS})
        yield the_lab
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        down = the_lab.orch("lab", "down", timeout=300)
        if down.returncode != 0:
            sys.stderr.write(f"warning: `orch lab down` failed:\n{down.stdout}\n{down.stderr}\n")


@pytest.fixture
def orch_env(tmp_path: Path) -> dict[str, str]:
    """A private environment (ORCH_HOME, empty inventory, artifacts, results) for one test, no lab."""
    return make_env(tmp_path / "orch")


@pytest.fixture(name="orch_cli")
def orch_cli_fixture() -> Callable[..., subprocess.CompletedProcess[str]]:
    """``orch_cli(env, *args, check=False, timeout=600)`` for tests that need no lab."""
    return orch_cli


@pytest.fixture(scope="session", autouse=True)
def _remove_test_build_volumes(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """Build directories live in Docker volumes (several GB for a wheel): the test homes' go at the end,
    with their live checkouts' source volumes (one per home)."""
    yield
    if not any(item.get_closest_marker("integration") for item in request.session.items):
        return  # a unit run never touches an engine
    try:
        engine = Engine()
        base = tmp_path_factory.getbasetemp()
        for name in [*build_volumes_under(engine, base), *build_volumes_under(engine, base, role="source")]:
            engine.remove_volume(name)
    except OrchError as error:
        sys.stderr.write(f"warning: could not remove the tests' build volumes: {error}\n")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test `unit` or `integration` (see INTEGRATION_FIXTURES)."""
    for item in items:
        uses = INTEGRATION_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        if uses or item.get_closest_marker("integration"):
            if not item.get_closest_marker("integration"):
                item.add_marker(pytest.mark.integration)
        else:
            item.add_marker(pytest.mark.unit)


# The stock baseline, shared by the deploy and bench tests (helpers in stock_baseline.py).


@pytest.fixture(scope="session")
def gpu_onnxruntime(request: pytest.FixtureRequest) -> Path:
    """A directory for PYTHONPATH holding the official x86 onnxruntime-gpu 1.21.0 (the release orch
    cross-builds the CUDA provider of): its CUDA provider is in the build, and cannot be created here
    (no NVIDIA driver, no CUDA libraries), as on an emulated board with a CUDA wheel. Downloaded once
    with pip, unpacked once."""
    root = Path(request.config.cache.mkdir("orch-gpu-onnxruntime"))
    unpacked = root / f"onnxruntime-gpu-{GPU_RELEASE}"
    if (unpacked / "onnxruntime" / "__init__.py").is_file():
        return unpacked
    argv = pip_download_argv([f"onnxruntime-gpu=={GPU_RELEASE}"], dest=root, with_dependencies=False)
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    wheels = sorted(root.glob(f"onnxruntime_gpu-{GPU_RELEASE}-*.whl"))
    if done.returncode != 0 or not wheels:
        pytest.fail(f"could not download onnxruntime-gpu with pip:\n{done.stderr[-2000:]}", pytrace=False)
    partial = root / "unpacking"
    subprocess.run([sys.executable, "-m", "zipfile", "-e", str(wheels[-1]), str(partial)], check=True)
    partial.rename(unpacked)
    return unpacked


GPU_RELEASE = "1.21.0"


@pytest.fixture(scope="session")
def stock_wheel(request: pytest.FixtureRequest) -> Path:
    """The official onnxruntime wheel for cp313 manylinux aarch64 (the lab's boards)."""
    return download_stock(Path(request.config.cache.mkdir("orch-deploy-stock-wheel")))


@pytest.fixture(scope="session")
def stock_build(stock_wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> StockBuild:
    """The real stock baseline, built once per session in its own ORCH_HOME and artifacts directory.

    Same release as ``stock_wheel`` (so the two downloads can be compared byte for byte)."""
    return build_stock(stock_wheel, tmp_path_factory.mktemp("stock-build"))


# Shared by the build, native-runner and bad-input tests.
TEST_CACHE = Path(os.environ.get("ORCH_TEST_CACHE") or "/var/tmp/orch-test-cache")


@pytest.fixture(scope="session")
def engine() -> Iterator[Engine]:
    """The local Docker engine (its name marks a test `integration`, see INTEGRATION_FIXTURES)."""
    engine = Engine()
    engine.ping()
    yield engine
    engine.close()


@pytest.fixture(scope="session")
def ort_tarball(engine: Engine) -> Path:
    """Debian's onnxruntime 1.21.0 orig tarball, downloaded with apt inside a trixie container (cached)."""
    base = ensure_base_image(engine, "trixie", "amd64")
    return fetch_debian_tarball(engine, base, "1.21.0", lambda line: None, dest=TEST_CACHE / "debian")
