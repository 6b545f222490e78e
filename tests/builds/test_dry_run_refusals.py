"""`orch build --dry-run` refuses exactly what the real run refuses, for every target profile.

Every target is run both ways where the real run refuses before anything is fetched or compiled:
the Jetsons at ORT 1.21.0 (their distribution's CMake/Python, refused while planning), and every
target whose base image is a registry image that the engine does not have
(``ORCH_BASE_IMAGE_<CODENAME>`` pointed at a tag no engine has: that also proves each variable the
messages name is read). A Debian target with no override would really build here (orch makes its
base image offline), so for it only the dry run's verdict is compared with the plan's own check
(``made_offline``), without a real run.
"""

from __future__ import annotations

import re
import subprocess

import pytest

from orchestrator.adapters.engine import Engine
from orchestrator.builds.image import made_offline
from orchestrator.builds.plan import BuildOptions, make_plan
from orchestrator.builds.preflight import board_image
from orchestrator.builds.sources.ort_spec import parse_source
from orchestrator.builds.variants import resolve_variant
from orchestrator.errors import BuildError
from orchestrator.lab.base_images import base_image_variable, ensure_base_image
from orchestrator.lab.boards import LAB_PACKAGES
from orchestrator.targets import known_target_names, resolve_target

pytestmark = pytest.mark.integration  # asks the real Docker engine for its images

ABSENT = "orch-test/absent-base-image:never"
# A real run that did not refuse would start fetching or building: it is stopped long before a compile.
REAL_RUN_TIMEOUT = 180


def refusal(result: subprocess.CompletedProcess[str]) -> list[str]:
    """The error line and its hint (what a user reads), wherever the plan's own lines are."""
    lines = result.stderr.splitlines()
    start = next((i for i, line in enumerate(lines) if re.match(r"(?i)error:", line)), None)
    assert start is not None, f"no refusal in:\n{result.stderr}"
    return lines[start : start + 2]


def both_runs(orch_cli, env: dict[str, str], *args: str) -> tuple[subprocess.CompletedProcess[str], ...]:
    dry = orch_cli(env, "build", *args, "--dry-run", timeout=120)
    real = orch_cli(env, "build", *args, timeout=REAL_RUN_TIMEOUT)
    assert "Traceback" not in dry.stderr + real.stderr
    return dry, real


def absent_base(env: dict[str, str], target: str) -> dict[str, str]:
    return {**env, base_image_variable(resolve_target(target).os.codename): ABSENT}


@pytest.mark.parametrize("target", known_target_names())
def test_dry_run_and_real_run_refuse_alike_for_every_target(
    target: str, orch_env: dict[str, str], orch_cli
) -> None:
    profile = resolve_target(target)
    if not profile.bootstrap_suite:
        # Refused while planning (ORT 1.21.0's CMake/Python minimums): the same in both, exit 2.
        dry, real = both_runs(orch_cli, orch_env, "--target", target)
        assert dry.returncode == real.returncode == 2
        assert refusal(dry) == refusal(real)
        assert "cannot be built for" in refusal(dry)[0]
        # An older release passes the plan; its registry base image, absent here, is refused alike.
        env = absent_base(orch_env, target)
        dry, real = both_runs(orch_cli, env, "--target", target, "--ort-version", "1.20.0")
    else:
        # Without an override orch makes the image offline: the dry run plans it (exit 0), as the
        # plan's own check says, and the real run would build (not run here).
        plan = make_plan(
            profile,
            resolve_variant("tuned"),
            BuildOptions(source=parse_source(None, version=None, suite=profile.bootstrap_suite)),
        )
        assert made_offline(plan)
        assert orch_cli(orch_env, "build", "--target", target, "--dry-run", timeout=120).returncode == 0
        env = absent_base(orch_env, target)
        dry, real = both_runs(orch_cli, env, "--target", target)
    assert dry.returncode == real.returncode == 5
    assert refusal(dry) == refusal(real)
    assert f"needs the base image '{ABSENT}'" in refusal(dry)[0]


def test_the_jetson_message_offers_only_ways_that_work(orch_env: dict[str, str], orch_cli) -> None:
    """Without the Ubuntu image: the image itself, or the board's sysroot (the clang route, whose
    build container orch makes offline)."""
    env = {k: v for k, v in orch_env.items() if not k.startswith("ORCH_BASE_IMAGE_")}
    if Engine().image_id("ubuntu:22.04"):
        env["ORCH_BASE_IMAGE_JAMMY"] = ABSENT  # this engine has it: name one it does not
    dry, real = both_runs(
        orch_cli, env, "--target", "jetson", "--ort-version", "1.20.0", "--variant", "default"
    )
    assert dry.returncode == real.returncode == 5 and refusal(dry) == refusal(real)
    hint = refusal(real)[1]
    assert "ORCH_BASE_IMAGE_JAMMY" in hint and "docker load" in hint
    assert "orch sysroot pull --host BOARD" in hint and "orch build --sysroot-from BOARD|NAME" in hint
    assert "L4T sample root file system" in hint


def test_cuda_without_a_sysroot_is_refused_alike_naming_the_ways(orch_env: dict[str, str], orch_cli) -> None:
    args = ("--target", "jetson", "--ep", "cuda", "--ort-version", "1.20.0")
    dry, real = both_runs(orch_cli, orch_env, *args)
    assert dry.returncode == real.returncode == 2 and refusal(dry) == refusal(real)
    assert "give --sysroot-from NAME" in refusal(dry)[0]
    assert "orch sysroot stand-in" in refusal(dry)[1] and "--on-board BOARD" in refusal(dry)[1]


def test_the_preflight_image_of_an_ubuntu_target_reads_its_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    engine = Engine()
    profile = resolve_target("jetson-orin")
    monkeypatch.delenv("ORCH_BASE_IMAGE_JAMMY", raising=False)
    monkeypatch.delenv("ORCH_BASE_IMAGE_JAMMY_ARM64", raising=False)
    with pytest.raises(BuildError) as unset:
        board_image(engine, profile)
    assert "ORCH_BASE_IMAGE_JAMMY" in str(unset.value.hint)
    # An arm64 image the engine has (the lab's Debian one stands in for an Ubuntu 22.04 image).
    arm64 = ensure_base_image(engine, "trixie", "arm64", LAB_PACKAGES)
    monkeypatch.setenv("ORCH_BASE_IMAGE_JAMMY", arm64)
    assert board_image(engine, profile) == arm64
    monkeypatch.setenv("ORCH_BASE_IMAGE_JAMMY", ABSENT)
    with pytest.raises(BuildError, match=re.escape(f"ORCH_BASE_IMAGE_JAMMY={ABSENT}")):
        board_image(engine, profile)
    monkeypatch.setenv("ORCH_BASE_IMAGE_JAMMY_ARM64", arm64)
    assert board_image(engine, profile) == arm64


def test_a_batch_refuses_a_missing_base_image_before_fetching_anything(
    orch_env: dict[str, str], orch_cli
) -> None:
    """Several targets at once: refused as one build is, before a source is fetched (here a git clone)."""
    env = absent_base(orch_env, "jetson-orin")
    dry, real = both_runs(orch_cli, env, "--target", "lab,jetson", "--ort-version", "1.20.0")
    assert dry.returncode == real.returncode == 5 and refusal(dry) == refusal(real)
    assert f"needs the base image '{ABSENT}'" in refusal(real)[0]
    assert "cloning" not in real.stderr
