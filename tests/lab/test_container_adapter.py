"""The Docker adapter against the real engine: run/start/exec/copy/kill/remove, volumes, and its errors."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from orchestrator.adapters.engine import Engine
from orchestrator.builds.build_log import LogSink, lto_dropped
from orchestrator.errors import BuildError, ContainerError
from orchestrator.lab.base_images import ensure_base_image
from orchestrator.lab.boards import LAB_PACKAGES


@pytest.fixture
def image(lab) -> str:
    # The lab's arm64 base image: present once the lab is up, and it has a shell and coreutils.
    return ensure_base_image(Engine(), "trixie", "arm64", LAB_PACKAGES)


def test_run_streams_lines_returns_the_exit_code_and_leaves_nothing(image: str, tmp_path: Path) -> None:
    engine = Engine()
    name = f"orch-test-{uuid.uuid4().hex[:8]}"
    (tmp_path / "in.txt").write_text("from the host\n")
    lines: list[str] = []
    code = engine.run(
        image,
        ["sh", "-c", "uname -m; cat /data/in.txt; echo $GREETING; echo out > /data/out.txt; exit 3"],
        name=name,
        environment={"GREETING": "hello"},
        labels={"orch.test": "adapter"},
        volumes={str(tmp_path): {"bind": "/data", "mode": "rw"}},
        on_log=lines.append,
    )
    assert code == 3
    assert lines == ["aarch64", "from the host", "hello"]
    assert (tmp_path / "out.txt").read_text() == "out\n"
    assert engine.status(name) is None, "a foreground container is removed after it ends"


def test_a_build_stopped_by_its_log_leaves_no_container_running(image: str, tmp_path: Path) -> None:
    """A line that makes the rest of a build pointless (here ORT's configure dropping LTO) ends the
    run there: the error reaches orch at once, and the container is killed and removed."""
    engine = Engine()
    name = f"orch-test-{uuid.uuid4().hex[:8]}"
    log = tmp_path / "build.log"
    with log.open("w") as handle, pytest.raises(BuildError, match="without the LTO it asks for"):
        engine.run(
            image,
            [
                "sh",
                "-c",
                "echo '-- Configuring'; echo '  IPO is not supported by this compiler'; exec sleep 600",
            ],
            name=name,
            labels={"orch.test": "adapter"},
            on_log=LogSink(handle, None, None, lto_dropped),
            timeout=300,
        )
    assert engine.status(name) is None, "the stopped build's container is removed"
    assert log.read_text().splitlines() == ["-- Configuring", "  IPO is not supported by this compiler"]


def test_start_exec_copy_kill_remove(image: str, tmp_path: Path) -> None:
    engine = Engine()
    name = f"orch-test-{uuid.uuid4().hex[:8]}"
    engine.start(
        image,
        ["sleep", "300"],
        name=name,
        environment={"X": "1"},
        ports={22: ("127.0.0.1", None)},
        labels={"orch.test": "adapter"},
    )
    try:
        assert engine.status(name) == "running"
        assert [item.name for item in engine.containers({"orch.test": "adapter"})] == [name]
        # The engine picked a free host port, bound to loopback only.
        assert engine.port_bindings(name)["22/tcp"][0]["HostIp"] == "127.0.0.1"
        assert engine.published_port(name, 22) > 0
        source = tmp_path / "payload.txt"
        source.write_text("payload\n")
        engine.copy_into(name, source, "/tmp", mode=0o600)
        code, output = engine.exec(
            name, ["sh", "-c", "stat -c '%a %U' /tmp/payload.txt; cat /tmp/payload.txt; echo $X"]
        )
        assert (code, output) == (0, "600 root\npayload\n1\n")
        code, output = engine.exec(name, ["sh", "-c", "echo oops >&2; exit 5"])
        assert code == 5 and "oops" in output
        copied = engine.copy_out(name, "/etc/debian_version", tmp_path / "out")
        assert copied == tmp_path / "out" / "debian_version" and copied.read_text().startswith("13")
        engine.kill(name)
        assert engine.status(name) == "exited"
    finally:
        engine.remove(name)
    assert engine.status(name) is None
    engine.remove(name)  # removing what is gone is not an error


@pytest.mark.integration  # a real Docker engine
def test_engine_errors_say_what_to_do(tmp_path: Path) -> None:
    with pytest.raises(ContainerError) as error:
        Engine(f"unix://{tmp_path}/nothing.sock").ping()
    assert "not reachable" in error.value.message and "scripts/setup" in (error.value.hint or "")
    engine = Engine()
    assert engine.image_id("orch/no-such-image:0") is None
    with pytest.raises(ContainerError, match="no-such-container"):
        engine.exec("orch-no-such-container", ["true"])
    volume = engine.ensure_volume(f"orch-test-{uuid.uuid4().hex[:8]}")
    try:
        assert engine.ensure_volume(volume) == volume
    finally:
        engine.remove_volume(volume)
    engine.remove_volume(volume)
