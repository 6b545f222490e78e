"""`orch verify` on the command line, without boards: the plan it prints and what it refuses
(the same with and without --dry-run)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

INVENTORY = "all:\n  hosts:\n    pi01: {hostname: 127.0.0.1, port: 1}\n"


@pytest.fixture
def env(orch_env: dict[str, str]) -> dict[str, str]:
    Path(orch_env["ORCH_INVENTORY"]).write_text(INVENTORY)
    return orch_env


def test_the_dry_run_prints_the_plan(env: dict[str, str], orch_cli) -> None:
    done = orch_cli(
        env, "verify", "--host", "pi01", "--variant", "stock,tuned", "--subset", "50", "--dry-run", "--json"
    )
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert plan["boards"] == ["pi01"] and plan["variants"] == ["stock", "tuned"]
    assert plan["node_cases"] == "subset of 50" and plan["models"] is True


@pytest.mark.parametrize("dry_run", [True, False])
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--ort-version", "newest"), "--ort-version 'newest': expected a release number such as 1.21.0"),
        (("--variant", "tuned,tuned"), "--variant lists a variant twice"),
        (("--subset", "0"), "argument --subset: must be a whole number >= 1, not '0'"),
    ],
)
def test_bad_options_are_refused_before_any_board_is_contacted(
    env: dict[str, str], orch_cli, args: tuple[str, ...], message: str, dry_run: bool
) -> None:
    done = orch_cli(env, "verify", "--host", "pi01", *args, *(["--dry-run"] if dry_run else []), timeout=60)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in " ".join(done.stderr.split()), done.stderr
    assert "Traceback" not in done.stderr
