"""``orch build --docker-host ssh://...``: the compile runs on another machine's Docker engine.

The other machine is made here, for real: a second Docker engine started in its own mount and
network namespaces, where /tmp, $HOME and this repository are empty tmpfs mounts, so, like a separate
build box, it cannot see one file of the workstation (a bind mount would find nothing). It is
reached only through a real sshd on 127.0.0.1 whose sessions point ``docker`` at that engine
(``SetEnv DOCKER_HOST``), the way ``docker system dial-stdio`` reaches a remote engine.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from board_checks import aarch64_elf, compile_commands, mlas_commands

from orchestrator.adapters.engine import Engine
from orchestrator.builds.preflight import board_image
from orchestrator.builds.workspace import build_volumes_under
from orchestrator.errors import OrchError
from orchestrator.paths import PROJECT_ROOT
from orchestrator.targets import resolve_target

BUILD_TIMEOUT = 3600
START_TIMEOUT = 90


@dataclass
class BuildBox:
    engine: Engine  # the second engine, reached directly (for the test's own checks only)
    ssh_config: Path
    host_public_key: str
    port: int


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _wait(what: str, ready, process: subprocess.Popen, log: Path) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"{what} exited ({process.returncode}):\n{log.read_text()[-3000:]}", pytrace=False)
        if ready():
            return
        time.sleep(0.5)
    pytest.fail(f"{what} did not come up in {START_TIMEOUT} s:\n{log.read_text()[-3000:]}", pytrace=False)


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@pytest.fixture(scope="module")
def build_box(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BuildBox]:
    """A second Docker engine that sees none of the workstation's files, behind sshd on 127.0.0.1."""
    for tool in ("unshare", "dockerd", "docker", "ssh-keygen"):
        if shutil.which(tool) is None:
            pytest.fail(f"the remote-engine test needs `{tool}` (scripts/setup installs it)", pytrace=False)
    sshd = Path("/usr/sbin/sshd")
    if not sshd.is_file():
        pytest.fail(
            "the remote-engine test needs /usr/sbin/sshd (apt-get install openssh-server)", pytrace=False
        )
    work = tmp_path_factory.mktemp("buildbox")
    # The engine's own files must stay visible inside its namespace: not under /tmp.
    state = Path(f"/var/tmp/orch-buildbox-{os.getpid()}")
    run_dir = Path(f"/run/orch-buildbox-{os.getpid()}")
    for path in (state / "data", run_dir / "exec"):
        path.mkdir(parents=True, exist_ok=True)
    socket_path = run_dir / "docker.sock"
    candidates = {p.resolve() for p in (Path("/tmp"), Path.home(), PROJECT_ROOT, work) if p.is_dir()}
    # Only the outermost: once /tmp is covered, a directory under it no longer exists to be covered.
    hidden = sorted(str(p) for p in candidates if not any(p != q and p.is_relative_to(q) for q in candidates))
    dockerd_argv = [
        "dockerd",
        "--data-root",
        str(state / "data"),
        "--exec-root",
        str(run_dir / "exec"),
        "--pidfile",
        str(run_dir / "docker.pid"),
        "-H",
        f"unix://{socket_path}",
        "--iptables=false",
    ]
    script = (
        'set -e; for d in "$@"; do mount -t tmpfs -o size=1m,mode=0755 orch-hidden "$d"; done; exec '
        + shlex.join(dockerd_argv)
    )
    engine_log = work / "dockerd.log"
    # Its own network namespace too: its bridge and containers never touch the workstation's network.
    daemon = subprocess.Popen(
        ["unshare", "--mount", "--net", "--propagation", "private", "sh", "-c", script, "sh", *hidden],
        stdout=engine_log.open("w"),
        stderr=subprocess.STDOUT,
    )
    sshd_process: subprocess.Popen | None = None
    try:

        def engine_ready() -> bool:
            try:
                return Engine(f"unix://{socket_path}").ping()
            except OrchError:  # not up yet
                return False

        _wait("the second Docker engine", engine_ready, daemon, engine_log)
        engine = Engine(f"unix://{socket_path}")

        for name in ("host_key", "client_key"):
            subprocess.run(
                ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(work / name)], check=True
            )
        (work / "authorized_keys").write_text((work / "client_key.pub").read_text())
        port = _free_port()
        (work / "sshd_config").write_text(
            f"Port {port}\nListenAddress 127.0.0.1\nHostKey {work / 'host_key'}\nPidFile {work / 'sshd.pid'}\n"
            f"AuthorizedKeysFile {work / 'authorized_keys'}\nPermitRootLogin prohibit-password\n"
            "PasswordAuthentication no\nKbdInteractiveAuthentication no\nUsePAM no\nStrictModes no\n"
            f"SetEnv DOCKER_HOST=unix://{socket_path}\n"
        )
        Path("/run/sshd").mkdir(exist_ok=True)  # sshd's privilege separation directory
        sshd_log = work / "sshd.log"
        sshd_process = subprocess.Popen(
            [str(sshd), "-D", "-e", "-f", str(work / "sshd_config")],
            stdout=sshd_log.open("w"),
            stderr=subprocess.STDOUT,
        )

        def sshd_ready() -> bool:
            with socket.socket() as probe:
                return probe.connect_ex(("127.0.0.1", port)) == 0

        _wait("sshd", sshd_ready, sshd_process, sshd_log)
        ssh_config = work / "ssh_config"
        ssh_config.write_text(
            f"Host buildbox\n  HostName 127.0.0.1\n  Port {port}\n  User root\n"
            f"  IdentityFile {work / 'client_key'}\n"
        )
        yield BuildBox(
            engine=engine,
            ssh_config=ssh_config,
            port=port,
            host_public_key=(work / "host_key.pub").read_text().split()[1],
        )
    finally:
        if sshd_process is not None:
            _stop(sshd_process)
        _stop(daemon)
        shutil.rmtree(state, ignore_errors=True)
        shutil.rmtree(run_dir, ignore_errors=True)


def test_a_changed_build_box_host_key_is_refused_before_anything_is_sent(
    build_box: BuildBox, build_env: dict[str, str], orch_cli
) -> None:
    env = {**build_env, "ORCH_SSH_CONFIG": str(build_box.ssh_config)}
    home = Path(env["ORCH_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    # Another machine's key filed under the build box's address: what a spoofed host would look like.
    other = home / "other_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(other)], check=True)
    (home / "known_hosts").write_text(f"[127.0.0.1]:{build_box.port} {other.with_suffix('.pub').read_text()}")
    result = orch_cli(
        env,
        "build",
        "--target",
        "lab",
        "--variant",
        "tuned",
        "--scope",
        "mlas-test",
        "--docker-host",
        "ssh://buildbox",
        timeout=300,
    )
    assert result.returncode == 4, result.stderr[-2000:]
    assert "HOST KEY CHANGED" in result.stderr and "buildbox" in result.stderr
    assert build_box.engine.volumes({"orch.role": None}) == {}, (
        "nothing may reach a host that failed its key check"
    )


# Each build test compiles MLAS on an engine that starts empty, whatever the workstation holds (4-5
# min each, also on a machine that ran the suite before): `pytest -m full`. The host-key refusal
# above needs no build and stays in CI.
@pytest.mark.full
@pytest.mark.timeout(BUILD_TIMEOUT + 600)
def test_build_on_another_engine_over_ssh_ships_everything_and_brings_the_result_back(
    build_box: BuildBox, build_env: dict[str, str], orch_cli, tmp_path: Path
) -> None:
    env = {**build_env, "ORCH_SSH_CONFIG": str(build_box.ssh_config)}
    result = orch_cli(
        env,
        "build",
        "--target",
        "lab",
        "--variant",
        "tuned",
        "--scope",
        "mlas-test",
        "--docker-host",
        "ssh://buildbox",
        "--json",
        timeout=BUILD_TIMEOUT,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    document = json.loads(result.stdout)
    assert document["engine"] == "ssh://buildbox"
    # First contact with the build box: its host key recorded in orch's known_hosts and said so.
    known = (Path(env["ORCH_HOME"]) / "known_hosts").read_text()
    assert f"[127.0.0.1]:{build_box.port}" in known and build_box.host_public_key in known
    assert "buildbox" in result.stderr and "SHA256:" in result.stderr

    # The work happened over there: the build image was sent, the source, build and cache volumes are there,
    # and the workstation's engine holds no build directory of this home.
    plan = json.loads(
        orch_cli(
            env,
            "build",
            "--target",
            "lab",
            "--variant",
            "tuned",
            "--scope",
            "mlas-test",
            "--dry-run",
            "--json",
            check=True,
        ).stdout
    )
    assert build_box.engine.image_id(plan["image"]["tag"]), "the build image was not sent to the build box"
    assert "sending image" in result.stderr and "MB sent" in result.stderr  # with its progress
    home = Path(env["ORCH_HOME"])
    assert build_volumes_under(build_box.engine, home), "no build volume on the build box"
    assert build_box.engine.volumes({"orch.role": "source"}) and plan[
        "ccache_volume"
    ] in build_box.engine.volumes({"orch.role": "ccache"})
    local = Engine()
    assert build_volumes_under(local, home) == []

    # The build box really could not see the workstation: this repository is empty there.
    seen: list[str] = []
    code = build_box.engine.run(
        plan["image"]["tag"],
        ["sh", "-c", "ls -A /repo | wc -l"],
        volumes={str(PROJECT_ROOT): {"bind": "/repo", "mode": "ro"}},
        network="none",
        on_log=seen.append,
    )
    assert code == 0 and seen == ["0"], seen

    # What came back: the tuned test executable and its libraries, runnable on an emulated Cortex-A72.
    build_dir = Path(document["build_dir"])
    bundle = build_dir / "out"
    exe = bundle / "onnxruntime_mlas_test"
    aarch64_elf(exe)
    assert all(
        "-mcpu=cortex-a72" in c for c in mlas_commands(compile_commands(build_dir), suffixes=(".cpp",))
    )
    listed: list[str] = []
    code = local.run(
        board_image(local, resolve_target("lab")),
        ["sh", "-c", "cd /t && ./onnxruntime_mlas_test --gtest_list_tests"],
        environment={"QEMU_CPU": "cortex-a72", "LD_LIBRARY_PATH": "/t"},
        volumes={str(bundle): {"bind": "/t", "mode": "ro"}},
        network="none",
        on_log=listed.append,
        timeout=600,  # an emulated test executable that hangs is killed, not waited for
    )
    assert code == 0, "\n".join(listed[-20:])
    assert sum(1 for line in listed if line.startswith("  ")) > 1000, "the MLAS test list looks truncated"
    print(f"remote MLAS build: {document['duration_s']} s, ccache {document['ccache']}")


# Several engines at once (after the test above, so the build box already holds the build image):
# two variants built in parallel, one on the workstation's engine and one on the build box, while a
# third engine that does not answer is named and its share of the queue goes to the others. MLAS +
# its test: the outputs are the test executables in the home's build directories.


@pytest.mark.full
@pytest.mark.timeout(BUILD_TIMEOUT + 600)
def test_two_engines_build_in_parallel_and_a_dead_engine_is_named(
    build_box: BuildBox,
    build_env: dict[str, str],
    engine: object,
    orch_cli,
) -> None:
    dead = f"tcp://127.0.0.1:{_free_port()}"  # nothing listens there
    env = {**build_env, "ORCH_SSH_CONFIG": str(build_box.ssh_config)}
    argv = ["build", "--target", "lab", "--variant", "tuned,default", "--scope", "mlas-test"]
    engines = ["--docker-host", "local", "--docker-host", "ssh://buildbox", "--docker-host", dead]
    result = orch_cli(env, *argv, *engines, "--json", timeout=BUILD_TIMEOUT)
    # Every build done, but not everything succeeded: an engine failed (exit 8, it is named).
    assert result.returncode == 8, result.stderr[-3000:]
    document = json.loads(result.stdout)
    builds = {b["variant"]: b for b in document["builds"]}
    assert set(builds) == {"tuned", "default"}
    assert all(b["ok"] for b in builds.values()), builds
    assert {b["engine"] for b in builds.values()} == {"local", "ssh://buildbox"}, "one build per engine"
    reports = {e["engine"]: e for e in document["engines"]}
    assert reports[dead]["ok"] is False and reports[dead]["builds"] == []
    assert dead in result.stderr and "unreachable" in result.stderr
    # They ran at the same time: each started before the other ended.
    first, second = sorted(builds.values(), key=lambda b: b["started_s"])
    assert second["started_s"] < first["started_s"] + first["duration_s"], builds

    for build in builds.values():
        exe = Path(build["build_dir"]) / "out" / "onnxruntime_mlas_test"
        aarch64_elf(exe)
    remote = builds["tuned"] if builds["tuned"]["engine"] == "ssh://buildbox" else builds["default"]
    assert build_box.engine.volumes({"orch.role": "ccache"}), "the remote build ran on the build box"
    print(
        "two engines: "
        + ", ".join(f"{b['variant']} on {b['engine']} {b['duration_s']} s" for b in builds.values())
        + f"; batch {document['duration_s']} s (remote: {remote['variant']})"
    )
