"""The parsing helpers of board_checks, on outputs written here (the tests that use them need boards)."""

from __future__ import annotations

import json
from subprocess import CompletedProcess

import pytest
from board_checks import exec_count

LS = ["orch", "exec", "--host", "lab1", "--json", "--", "sh", "-c", "ls orch/pgo | wc -l"]


def _exec(stdout: str, *, exit_code: int = 0, returncode: int = 0) -> CompletedProcess[str]:
    document = {
        "lab1": {"exit_code": exit_code, "stdout": stdout, "stderr": "", "duration": 0.2, "error": None}
    }
    return CompletedProcess(LS, returncode, stdout=json.dumps(document), stderr="")


def test_exec_count_reads_the_commands_own_number() -> None:
    assert exec_count(_exec("0\n"), "lab1") == 0
    assert exec_count(_exec("      3\n"), "lab1") == 3  # busybox's wc pads its count


@pytest.mark.parametrize(
    "result",
    [
        _exec("", exit_code=0),  # no count at all
        _exec("ls: orch/pgo: No such file\n0\n"),  # more than the count
        _exec("0\n", exit_code=1, returncode=1),  # the command failed on the board
        # orch exec's human output: "exit 0" holds a 0 whatever the board printed.
        CompletedProcess(LS, 0, stdout="", stderr="✓ lab1  exit 0  0.2s\n3\n1 board: 1 ok\n"),
    ],
)
def test_exec_count_refuses_anything_but_one_number(result: CompletedProcess[str]) -> None:
    with pytest.raises((AssertionError, json.JSONDecodeError)):
        exec_count(result, "lab1")
