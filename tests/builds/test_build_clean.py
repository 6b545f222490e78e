"""``orch build clean``: build directories are Docker volumes; a user frees them without `docker volume` archaeology."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest

from orchestrator.adapters.engine import Engine


def _build_volume(engine: Engine, home: Path, target: str) -> str:
    name = f"orch-build-test-{uuid.uuid4().hex[:8]}-{target}"
    return engine.ensure_volume(
        name, labels={"orch.role": "build-dir", "orch.home": str(home.resolve()), "orch.target": target}
    )


@pytest.mark.integration  # a real Docker engine
def test_clean_removes_only_this_homes_build_directories(
    orch_env: dict[str, str], orch_cli, tmp_path: Path
) -> None:
    engine = Engine()
    home = Path(orch_env["ORCH_HOME"])
    mine = _build_volume(engine, home, "lab")
    someone_elses = _build_volume(engine, tmp_path / "another-home", "lab")
    # A live checkout's source volume (--ort-source DIR) is this home's alone.
    checkout = engine.ensure_volume(
        f"orch-src-test-{uuid.uuid4().hex[:8]}",
        labels={"orch.role": "source", "orch.home": str(home.resolve())},
    )
    try:
        dry = json.loads(orch_cli(orch_env, "build", "clean", "--dry-run", "--json", check=True).stdout)
        assert dry["volumes"] == [mine, checkout] and dry["dry_run"]
        assert engine.volumes(prefix=mine), "--dry-run must not remove anything"

        other_target = orch_cli(orch_env, "build", "clean", "--target", "rpi4", check=True)
        assert "nothing to remove" in other_target.stderr and engine.volumes(prefix=mine)

        caches = json.loads(
            orch_cli(orch_env, "build", "clean", "--ccache", "--dry-run", "--json", check=True).stdout
        )
        assert mine in caches["volumes"] and all(
            v in (mine, checkout) or v.startswith("orch-ccache-") for v in caches["volumes"]
        )

        done = orch_cli(orch_env, "build", "clean", check=True)
        assert f"removed volume {mine}" in done.stderr and f"removed volume {checkout}" in done.stderr
        assert not engine.volumes(prefix=mine) and not engine.volumes(prefix=checkout)
        assert engine.volumes(prefix=someone_elses), "another ORCH_HOME's build directory was removed"
    finally:
        for name in (mine, someone_elses, checkout):
            engine.remove_volume(name)
