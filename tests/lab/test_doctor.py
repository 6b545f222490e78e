"""`orch doctor` on this machine, and its failures provoked for real (no engine, no key)."""

from __future__ import annotations

import json
from pathlib import Path

from orchestrator.lab.doctor import parse_binfmt_entry, parse_qemu_version

EXPECTED = [
    "docker engine",
    "binfmt_misc",
    "aarch64 emulation",
    "qemu version",
    "ssh key",
    "free disk (docker data)",
    "free disk (working dir)",
    "debootstrap",
]


def test_doctor_passes_on_this_machine_and_json_is_one_document(lab) -> None:
    result = lab.orch("doctor", "--json")
    document = json.loads(result.stdout)
    failed = {
        check["name"]: (check["detail"], check["fix"]) for check in document["checks"] if not check["ok"]
    }
    assert result.returncode == 0 and document["ok"] is True, f"doctor failed: {failed}\n{result.stderr}"
    assert [check["name"] for check in document["checks"]] == EXPECTED
    by_name = {check["name"]: check for check in document["checks"]}
    assert "lab key" in by_name["ssh key"]["detail"]
    assert "flags" in by_name["aarch64 emulation"]["detail"] and "F" in by_name["aarch64 emulation"]["detail"]
    # The human table goes to stderr, never mixed into the JSON on stdout.
    assert "orch doctor" in result.stderr


def test_doctor_names_the_fix_when_the_engine_is_unreachable_and_no_key_exists(
    orch_env: dict[str, str], orch_cli, tmp_path: Path
) -> None:
    env = {**orch_env, "DOCKER_HOST": f"unix://{tmp_path}/no-engine.sock", "HOME": str(tmp_path)}
    env.pop("SSH_AUTH_SOCK", None)
    result = orch_cli(env, "doctor", "--json")
    assert result.returncode == 1
    by_name = {check["name"]: check for check in json.loads(result.stdout)["checks"]}
    assert by_name["docker engine"]["ok"] is False
    assert "not reachable" in by_name["docker engine"]["detail"]
    assert "scripts/setup" in by_name["docker engine"]["fix"]
    assert by_name["ssh key"]["ok"] is False and "orch lab up" in by_name["ssh key"]["fix"]
    # The rest is still checked and reported.
    assert by_name["qemu version"]["ok"] is True
    human = orch_cli(env, "doctor")
    assert human.returncode == 1 and "FAIL" in human.stderr and "Traceback" not in human.stderr


def test_binfmt_entry_and_qemu_version_parsing() -> None:
    entry = parse_binfmt_entry(
        "enabled\ninterpreter /usr/libexec/qemu-binfmt/aarch64-binfmt-P\nflags: POF\noffset 0\nmagic 7f45\n"
    )
    assert entry.enabled and entry.interpreter.endswith("aarch64-binfmt-P") and "F" in entry.flags
    assert parse_binfmt_entry("disabled\ninterpreter /x\nflags: \n").enabled is False
    assert parse_qemu_version("qemu-aarch64 version 10.0.2 (Debian 1:10.0.2+ds-2)") == (10, 0, 2)
    assert parse_qemu_version("qemu-aarch64 version 7.2.15 (Debian 1:7.2+dfsg-7+deb12u12)")[:2] < (8, 0)
    assert parse_qemu_version("garbage") is None
