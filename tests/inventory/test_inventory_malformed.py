"""A corpus of broken inventories: each is refused by the real CLI with exit code 2, one
message naming the file, the line and the key, and no traceback (``--debug`` shows one).

Each file in ``malformed/`` starts with its expectation: ``# expect: line=N key=K``
(``key`` is left out where no key is to blame, e.g. a YAML syntax error).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from orchestrator.errors import InventoryError
from orchestrator.fleet.inventory import load_inventory

CORPUS = Path(__file__).parent / "malformed"
CASES = sorted(CORPUS.glob("*.yaml"))


def _expectation(path: Path) -> dict[str, str]:
    first = path.read_bytes().decode("utf-8", "replace").splitlines()[0]  # some cases are not UTF-8
    match = re.fullmatch(r"# expect: line=(\d+)(?: key=(.+))?", first)
    assert match, f"{path.name}: first line must be '# expect: line=N key=K'"
    return {"line": match.group(1), "key": match.group(2) or ""}


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    # A private ORCH_HOME (no lab boards of the user's) and no ssh_config of the user's.
    env["ORCH_HOME"] = str(tmp_path / "home")
    env["ORCH_SSH_CONFIG"] = str(tmp_path / "no-ssh-config")
    env.pop("ORCH_INVENTORY", None)
    return env


def test_corpus_is_big_enough() -> None:
    assert len(CASES) >= 20


@pytest.mark.parametrize("path", CASES, ids=[path.stem for path in CASES])
def test_malformed_inventory_is_refused_clearly(path: Path, tmp_path: Path, orch_cli) -> None:
    expected = _expectation(path)
    result = orch_cli(_env(tmp_path), "inventory", "list", "-i", str(path), timeout=60)
    output = result.stdout + result.stderr
    assert result.returncode == 2, output
    assert "Traceback" not in output
    assert result.stdout == ""
    assert f"{path}:{expected['line']}:" in output, output
    if expected["key"]:
        assert f"'{expected['key']}'" in output, output
    assert len(re.findall(r"^error:", output, re.MULTILINE)) == 1, output


def test_debug_shows_the_traceback(tmp_path: Path, orch_cli) -> None:
    path = CORPUS / "unknown_host_key.yaml"
    result = orch_cli(_env(tmp_path), "--debug", "inventory", "list", "-i", str(path), timeout=60)
    assert result.returncode == 2
    assert "Traceback" in result.stderr
    assert "InventoryError" in result.stderr
    assert f"{path}:6:" in result.stderr


def test_missing_inventory_names_the_file_and_how_to_fix_it(tmp_path: Path, orch_cli) -> None:
    path = tmp_path / "nowhere" / "inventory.yaml"
    result = orch_cli(_env(tmp_path), "inventory", "list", "-i", str(path), timeout=60)
    assert result.returncode == 2
    assert f"{path}: inventory file not found" in result.stderr
    assert "hint:" in result.stderr and "-i PATH" in result.stderr
    assert "Traceback" not in result.stderr


def test_suggestions_point_at_the_right_spelling(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # In-process: the same messages the CLI prints, without four more interpreter start-ups.
    monkeypatch.setenv("ORCH_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("ORCH_SSH_CONFIG", str(tmp_path / "no-ssh-config"))
    messages = {}
    for name in ("unknown_host_key", "ansible_host", "unknown_target", "secret_password"):
        with pytest.raises(InventoryError) as caught:
            load_inventory(CORPUS / f"{name}.yaml")
        messages[name] = caught.value.message
    assert "did you mean 'port'?" in messages["unknown_host_key"]
    assert "orch calls it 'hostname'" in messages["ansible_host"]
    assert "Did you mean 'jetson-nano'?" in messages["unknown_target"]
    assert "ssh-agent or key files" in messages["secret_password"]
    assert "hunter2" not in messages["secret_password"]  # the secret itself is never echoed
