"""The fault tests' world (tests/faults): the lab's boards as ``f1`` (where the faults land) and
``f2`` in the tests' own inventory, the pre-flighted stock artifact (the session's ``stock_build``)
and tiny models, and the checks made afterwards on the board itself (over SSH and, independently of
the connection under test, in its container)."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from orchestrator import lab_state
from orchestrator.adapters import ssh
from orchestrator.adapters.engine import Engine
from orchestrator.board import Board
from orchestrator.board_side import read_text
from orchestrator.deploy.releases import Layout, read_listing
from orchestrator.fleet.inventory import load_inventory
from orchestrator.lab.boards import LAB_USER
from orchestrator.lab.sample_models import write_tiny_convnet

# A workdir with a space: the values reach the board as data.
WORKDIR = "fault tests/orch"
# Marks of the board-side processes a deploy starts (their text is in their argv: `python -c`).
VERIFY_MARK = "Deploy verification, run on the board"
LOCK_MARK = "The board lock: one writer per board"
# The install step's two board processes: the release's venv being made (a release whose packages
# are reused from one with the same wheels), and pip installing the wheel (a release with new wheels).
VENV_MARK = "-m venv --without-pip"
PIP_MARK = "install --no-index --find-links wheels"

RUNS_ITS_MODEL = (
    "import sys, numpy as np, onnxruntime as ort\n"
    "s = ort.InferenceSession(sys.argv[1])\n"
    "print(ort.__version__, s.run(None, {'input': np.ones((1, 3, 32, 32), np.float32)})[0].shape)"
)


@dataclass(frozen=True, kw_only=True)
class Faults:
    """The tests' world: environment, inventory, the board's container, models."""

    root: Path
    env: dict[str, str]
    inventory: Path
    container: str
    tiny: Path
    tiny2: Path
    garbage: Path  # random bytes named .onnx
    unloadable: Path  # a well-formed ONNX model with an operator no onnxruntime has
    endless: Path  # a well-formed ONNX model whose one inference never ends

    def board(self, name: str = "f1") -> Board:
        return load_inventory(self.inventory).board(name)

    @contextlib.contextmanager
    def holding_lock(self, holder: dict[str, object], board: str = "f1") -> Iterator[None]:
        """The board lock, held from here with the board-side script and a holder description of
        our choosing (after earlier holders have let go), until the block ends."""
        target = self.board(board)
        with ssh.connect(target) as session:
            stream = session.open_stream(
                [target.python, "-c", read_text("board_lock.py"), WORKDIR, json.dumps(holder), "5"]
            )
            try:
                stream.settimeout(300)
                answer = b""
                while b'"acquired"' not in answer:  # after "held" lines while an earlier holder ends
                    chunk = stream.recv(4096)
                    assert chunk, f"the lock process ended: {answer!r}"
                    answer += chunk
                yield
            finally:
                stream.close()

    def orch(
        self, *args: str, timeout: float = 1800, cwd: Path | None = None
    ) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
        result = subprocess.run(
            [sys.executable, "-m", "orchestrator", *args],
            env=self.env,
            cwd=cwd or self.root,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        try:
            document = json.loads(result.stdout) if result.stdout.strip() else {}
        except json.JSONDecodeError:
            document = {}
        return result, document

    def start(self, *args: str) -> subprocess.Popen[str]:
        """orch in its own process group (so a Ctrl-C can be sent to the group, as a terminal does)."""
        return subprocess.Popen(
            [sys.executable, "-m", "orchestrator", *args],
            env=self.env,
            cwd=self.root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )

    def board_processes(self, mark: str) -> list[str]:
        """Processes in the board's container whose command line holds ``mark`` (read from /proc)."""
        # The mark goes in two halves: this scan's own command line (which holds its arguments)
        # never matches the joined mark. A process that ends during the scan has no cmdline left to
        # open: the shell's message about it goes to /dev/null (redirected before the `<` is tried),
        # and only pids are taken from the output (it holds stderr too).
        script = (
            'for p in /proc/[0-9]*; do a=$(tr "\\0" " " 2>/dev/null < "$p/cmdline") || continue;'
            ' case "$a" in *"$1$2"*) echo "${p#/proc/}";; esac; done; true'
        )
        half = len(mark) // 2
        _, out = Engine().exec(self.container, ["sh", "-c", script, "sh", mark[:half], mark[half:]])
        return [word for word in out.split() if word.isdigit()]

    def container_argvs(self) -> dict[int, list[str]]:
        """Every process of the board's container (its pid namespace), read from the workstation's
        /proc (the same kernel): quick, exact argvs (qemu's binfmt interpreter and path left out),
        and it works while the container is paused. Other labs on this machine (another test run)
        are not seen."""
        namespace = os.readlink(f"/proc/{self.container_pid()}/ns/pid")
        found = {}
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                if os.readlink(entry / "ns" / "pid") != namespace:
                    continue
                argv = (entry / "cmdline").read_bytes().decode(errors="replace").split("\0")[:-1]
            except OSError:
                continue  # gone meanwhile
            if argv and "qemu" in argv[0] and "binfmt" in argv[0]:
                argv = argv[2:]  # the interpreter and the program's path, before the program's own argv
            found[int(entry.name)] = argv
        return found

    def running(self, *argv: str) -> list[int]:
        """The board's processes running exactly ``argv`` (the command itself, not a shell or guard
        whose arguments hold it)."""
        return [pid for pid, found in self.container_argvs().items() if found == list(argv)]

    def frozen_processes(self, mark: str) -> list[int]:
        """The board's processes with ``mark`` in their command line (``container_argvs``: quick, and
        it works while the board's container is paused)."""
        return [pid for pid, argv in self.container_argvs().items() if mark in " ".join(argv)]

    def wait_for_process(self, mark: str, process: subprocess.Popen[str], timeout: float = 900) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.frozen_processes(mark):
                return
            if process.poll() is not None:
                out, err = process.communicate()
                pytest.fail(
                    f"orch ended ({process.returncode}) before {mark!r} ran:\n{out}\n{err}", pytrace=False
                )
            time.sleep(0.05)
        pytest.fail(f"{mark!r} never ran on the board", pytrace=False)

    def gone_within(self, mark: str, seconds: float) -> float | None:
        """Seconds until no process with ``mark`` is left on the board (None: still there)."""
        start = time.monotonic()
        while time.monotonic() - start < seconds:
            if not self.board_processes(mark):
                return time.monotonic() - start
            time.sleep(0.5)
        return None

    def container_pid(self) -> str:
        """The workstation's pid of the board container's first process (its /proc entry)."""
        state = subprocess.run(
            ["docker", "inspect", "-f", "{{.State.Pid}}", self.container],
            capture_output=True,
            text=True,
            check=True,
        )
        return state.stdout.strip()

    def store_on_disk(self) -> Path:
        """The board's store on its container's disk, through the workstation's /proc: quick to
        read, and it can be read while the container is paused."""
        home = "/root" if LAB_USER == "root" else f"/home/{LAB_USER}"
        return Path(f"/proc/{self.container_pid()}/root{home}") / Layout(workdir=WORKDIR).store

    @staticmethod
    def partial_uploads(store: Path) -> list[int]:
        """Sizes of the files being sent, or left half sent, in a store (``store_on_disk``)."""
        return [path.stat().st_size for path in store.glob(".upload-*")]

    def board_files(self) -> list[str]:
        """Every file under the board's workdir (the store's and the releases'), as the board lists them."""
        board = self.board()
        with ssh.connect(board, connect_timeout=60) as session:
            found = session.run(
                ["find", WORKDIR, "-path", f"{WORKDIR}/releases/*/venv", "-prune", "-o", "-print"]
            )
        return sorted(found.stdout.splitlines())

    def board_state(self) -> tuple[str | None, list[str], str]:
        """(current release, leftover `.current.*` entries, what the current release's model gives)."""
        board = self.board()
        with ssh.connect(board, connect_timeout=60) as session:
            listing = read_listing(session, Layout(workdir=WORKDIR))
            entries = session.run(["ls", "-a", "--", WORKDIR]).stdout.split()
            runs = session.run(
                [
                    f"{WORKDIR}/current/venv/bin/python",
                    "-c",
                    RUNS_ITS_MODEL,
                    f"{WORKDIR}/current/models/tiny.onnx",
                ],
                timeout=900,
            ).stdout
        return listing.current, [e for e in entries if e.startswith(".current.")], runs


# tgkill(2)'s number: a signal sent to one thread of another process (Python has no call for it).
_TGKILL = {"x86_64": 234, "aarch64": 131}


def signal_a_thread(pid: int, sig: int) -> None:
    """Send ``sig`` to one of process ``pid``'s threads other than its main one: a signal sent to a
    process may be taken by any of its threads, this is the case where it is not the main one."""
    others = sorted(int(task.name) for task in Path(f"/proc/{pid}/task").iterdir() if int(task.name) != pid)
    assert others, f"process {pid} has no thread but its main one"
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(_TGKILL[platform.machine()], pid, others[0], sig) != 0:
        raise OSError(ctypes.get_errno(), f"tgkill of thread {others[0]} of {pid}")


def make_faults(lab: Any, stock_build: Any, root: Path) -> Faults:
    """The world on the session's lab (its board lab1 as ``f1``) and stock artifact."""
    models = root / "models"
    tiny = write_tiny_convnet(models / "tiny.onnx")
    tiny2 = write_tiny_convnet(models / "tiny2.onnx", seed=1)
    garbage = models / "garbage.onnx"
    garbage.write_bytes(os.urandom(4096))
    unloadable = _unloadable_model(models / "unloadable.onnx")
    endless = _endless_model(models / "endless.onnx")
    lab.refresh()
    inventory = root / "inventory.yaml"
    hosts = {
        name: {
            "hostname": "127.0.0.1",
            "port": lab.board(lab_name).port,
            "user": lab.board(lab_name).user,
            "identity_file": str(lab.board(lab_name).identity_file),
            "target": "lab",
            "workdir": WORKDIR,
        }
        for name, lab_name in (("f1", "lab1"), ("f2", "lab2"))
    }
    inventory.write_text(json.dumps({"all": {"hosts": hosts}}, indent=2))
    state = lab_state.read_state()
    assert state is not None
    container = next(b.container for b in state.boards if b.name == "lab1")
    env = {
        **lab.env,
        "ORCH_ARTIFACTS": stock_build.env["ORCH_ARTIFACTS"],
        "ORCH_INVENTORY": str(inventory),
    }
    return Faults(
        root=root,
        env=env,
        inventory=inventory,
        container=container,
        tiny=tiny,
        tiny2=tiny2,
        garbage=garbage,
        unloadable=unloadable,
        endless=endless,
    )


def _unloadable_model(path: Path) -> Path:
    """Valid ONNX to any workstation check, refused by onnxruntime on the board when it loads:
    its one node is an operator of a domain no runtime knows."""
    import onnx  # noqa: PLC0415 -- heavy, and only this model needs it
    from onnx import TensorProto, helper  # noqa: PLC0415 -- as above

    node = helper.make_node("OrchNoSuchOp", ["input"], ["output"], domain="orch.test")
    graph = helper.make_graph(
        [node],
        "unloadable",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("output", TensorProto.FLOAT, [1, 4])],
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 13), helper.make_opsetid("orch.test", 1)]
    )
    model.ir_version = 8
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(model, str(path))
    return path


def _endless_model(path: Path) -> Path:
    """Valid ONNX that onnxruntime loads, whose one inference never ends: a Loop of 2**62 trips
    (an Identity each) over the input."""
    import onnx  # noqa: PLC0415 -- heavy, and only this model needs it
    from onnx import TensorProto, helper  # noqa: PLC0415 -- as above

    def value(name: str, kind: int, shape: list[int]) -> onnx.ValueInfoProto:
        return helper.make_tensor_value_info(name, kind, shape)

    body = helper.make_graph(
        [helper.make_node("Identity", ["go"], ["go_on"]), helper.make_node("Identity", ["v"], ["v_next"])],
        "trip",
        [
            value("trip", TensorProto.INT64, []),
            value("go", TensorProto.BOOL, []),
            value("v", TensorProto.FLOAT, [1, 4]),
        ],
        [value("go_on", TensorProto.BOOL, []), value("v_next", TensorProto.FLOAT, [1, 4])],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["trips", "go", "input"], ["output"], body=body)],
        "endless",
        [value("input", TensorProto.FLOAT, [1, 4])],
        [value("output", TensorProto.FLOAT, [1, 4])],
        initializer=[
            helper.make_tensor("trips", TensorProto.INT64, [], [2**62]),
            helper.make_tensor("go", TensorProto.BOOL, [], [True]),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    onnx.save(model, str(path))
    return path
