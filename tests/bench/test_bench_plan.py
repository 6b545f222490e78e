"""BenchPlan without boards: interleaving, release/model choice, agent argv, option errors."""

from __future__ import annotations

import json
import re

import pytest

from orchestrator.bench.plan import AgentOptions, ReleaseRef, Setting
from orchestrator.bench.plan_options import (
    make_plan,
    make_settings,
    parse_opt_levels,
    parse_ort_versions,
    parse_pin_cores,
    parse_threads,
)
from orchestrator.bench.steps import agent_argv, board_steps, check_runners, pick_models, pick_releases
from orchestrator.board import Board
from orchestrator.errors import BenchError, UsageError

BOARD = Board(name="nano01", hostname="127.0.0.1", port=2222)


def release(
    variant: str, rid: str, created: str, *, current: bool = False, models=("tiny.onnx",)
) -> ReleaseRef:
    path = f"/home/u/orch/releases/{rid}"
    return ReleaseRef(
        id=rid,
        variant=variant,
        path=path,
        python=f"{path}/venv/bin/python",
        models=models,
        created=created,
        current=current,
        ort_version=rid.split("-")[1],
        route="official" if variant == "stock" else "system",
    )


STOCK_OLD = release("stock", "stock-1.32.0-aaaa0000", "2026-11-01T00:00:00Z")
STOCK_NEW = release("stock", "stock-1.32.0-bbbb0000", "2026-11-20T00:00:00Z", current=True)
TUNED = release("tuned", "tuned-1.32.0-cccc0000", "2026-11-10T00:00:00Z", models=("tiny.onnx", "big.onnx"))
TUNED_121 = release("tuned", "tuned-1.21.0-dddd0000", "2026-11-12T00:00:00Z")
STOCK_121 = release("stock", "stock-1.21.0-eeee0000", "2026-11-25T00:00:00Z")


def test_ab_rounds_are_interleaved_and_cooled_down():
    plan = make_plan([BOARD], variants=["stock", "tuned"], rounds=3, cooldown_s=2.5)
    releases = pick_releases(plan, [STOCK_OLD, TUNED, STOCK_NEW], BOARD.name)
    assert [r.id for r in releases] == ["stock-1.32.0-bbbb0000", "tuned-1.32.0-cccc0000"]  # newest stock
    steps = board_steps(plan, releases, pick_models(plan, releases, BOARD.name))
    assert [(s.round, s.release.variant) for s in steps] == [
        (1, "stock"),
        (1, "tuned"),
        (2, "stock"),
        (2, "tuned"),
        (3, "stock"),
        (3, "tuned"),
    ]
    assert [s.cooldown_s for s in steps] == [0.0] + [2.5] * 5
    assert steps[0].argv[:4] == (
        "/home/u/orch/releases/stock-1.32.0-bbbb0000/venv/bin/python",
        "/home/u/orch/releases/stock-1.32.0-bbbb0000/agent/bench_agent.py",
        "--model",
        "/home/u/orch/releases/stock-1.32.0-bbbb0000/models/tiny.onnx",
    )


def test_settings_sweep_is_a_cross_product_in_the_given_order():
    settings = make_settings(threads=[1, 2, 4], opt_levels=["basic", "all"])
    assert [(s.opt_level, s.intra_threads) for s in settings] == [
        ("basic", 1),
        ("basic", 2),
        ("basic", 4),
        ("all", 1),
        ("all", 2),
        ("all", 4),
    ]
    plan = make_plan([BOARD], settings=settings, rounds=2, cooldown_s=0)
    steps = board_steps(plan, [STOCK_NEW], ["tiny.onnx"])
    assert len(steps) == 12
    argv = steps[1].argv
    assert (
        argv[argv.index("--opt-level") + 1] == "basic" and argv[argv.index("--intra-op-threads") + 1] == "2"
    )


def test_default_is_the_current_release_and_every_common_model():
    plan = make_plan([BOARD])
    assert pick_releases(plan, [STOCK_OLD, STOCK_NEW], "nano01") == (STOCK_NEW,)
    both = make_plan([BOARD], variants=["tuned", "stock"])
    chosen = pick_releases(both, [STOCK_NEW, TUNED], "nano01")
    assert pick_models(both, chosen, "nano01") == ("tiny.onnx",)  # big.onnx is only in tuned


def test_quantize_adds_int8_steps_next_to_fp32():
    plan = make_plan([BOARD], quantize="dynamic", rounds=1)
    steps = board_steps(plan, [STOCK_NEW], ["tiny.onnx"])
    assert [(s.quant, s.model, s.model_file) for s in steps] == [
        ("fp32", "tiny.onnx", "tiny.onnx"),
        ("int8", "tiny.onnx", "tiny.int8.onnx"),
    ]
    assert steps[1].argv[3].endswith("/models/tiny.int8.onnx")
    assert steps[1].key()["quant"] == "int8" and steps[1].key()["model"] == "tiny.onnx"


def test_agent_options_reach_the_argv():
    options = AgentOptions(
        warmup=1, min_runs=5, min_duration=0.0, shapes=("input=1x3x8x8",), sysfs_root="/tmp/s y"
    )
    argv = agent_argv(STOCK_NEW, "/m.onnx", Setting(opt_level="disable", intra_threads=2), options)
    pairs = dict(zip(argv[2::2], argv[3::2], strict=True))
    assert pairs["--warmup"] == "1" and pairs["--min-runs"] == "5" and pairs["--min-duration"] == "0"
    assert pairs["--shape"] == "input=1x3x8x8" and pairs["--sysfs-root"] == "/tmp/s y"


@pytest.mark.parametrize(
    ("kwargs", "words"),
    [
        ({"variants": ["stock", "stock"]}, "twice"),
        ({"quantize": "qat"}, "supported: dynamic, static"),
        ({"rounds": 0}, "--rounds"),
        ({"threshold": -1}, "--threshold"),
        ({"agent": AgentOptions(min_runs=0)}, "--min-runs"),
    ],
)
def test_bad_options_are_usage_errors(kwargs, words):
    with pytest.raises(UsageError, match=words):
        make_plan([BOARD], **kwargs)


def test_bad_option_values():
    with pytest.raises(UsageError, match="whole numbers"):
        parse_threads(["two"])
    with pytest.raises(UsageError, match="choose from"):
        parse_opt_levels(["max"])
    with pytest.raises(UsageError, match="twice"):
        make_settings(threads=[1, 1])


def test_missing_variant_or_model_names_the_board_and_the_fix():
    plan = make_plan([BOARD], variants=["stock", "tuned"])
    with pytest.raises(BenchError, match="nano01: no release of variant 'tuned'") as caught:
        pick_releases(plan, [STOCK_NEW], "nano01")
    assert "orch deploy --host nano01 --variant tuned" in caught.value.hint
    with pytest.raises(BenchError, match="model 'resnet' is not deployed"):
        pick_models(make_plan([BOARD], models=["resnet"]), [STOCK_NEW], "nano01")
    with pytest.raises(BenchError, match="no release is deployed"):
        pick_releases(plan, [], "nano01")


def test_an_ab_across_ort_releases_is_refused_unless_allowed():
    plan = make_plan([BOARD], variants=["stock", "tuned"])
    with pytest.raises(BenchError) as refused:
        pick_releases(plan, [STOCK_NEW, TUNED_121], BOARD.name)
    message = refused.value.message
    assert message.startswith("nano01: refusing an A/B across ORT releases:")
    assert (
        "stock-1.32.0-bbbb0000 (ORT 1.32.0, official), tuned-1.21.0-dddd0000 (ORT 1.21.0, system)" in message
    )
    assert "--allow-version-mismatch" in refused.value.hint and "--ort-version X" in refused.value.hint
    allowed = make_plan([BOARD], variants=["stock", "tuned"], allow_version_mismatch=True)
    chosen = pick_releases(allowed, [STOCK_NEW, TUNED_121], BOARD.name)
    assert [r.id for r in chosen] == ["stock-1.32.0-bbbb0000", "tuned-1.21.0-dddd0000"]
    assert allowed.as_dict()["allow_version_mismatch"] is True


def test_ort_version_chooses_among_releases_of_a_variant_and_several_are_never_guessed():
    deployed = [STOCK_NEW, STOCK_121, TUNED, TUNED_121]
    plan = make_plan([BOARD], variants=["stock", "tuned"])
    with pytest.raises(BenchError) as refused:
        pick_releases(plan, deployed, BOARD.name)
    assert refused.value.message == (
        "nano01: releases of variant 'stock' with different ORT versions are deployed:"
        " stock-1.32.0-bbbb0000 (ORT 1.32.0, official), stock-1.21.0-eeee0000 (ORT 1.21.0, official);"
        " which one to measure is not guessed"
    )
    assert refused.value.hint == "choose one with --ort-version (1.21.0 or 1.32.0)"
    for version in ("1.21.0", "1.32.0"):
        chosen_plan = make_plan(
            [BOARD],
            variants=["stock", "tuned"],
            ort_versions=parse_ort_versions([version], ["stock"]),
        )
        chosen = pick_releases(chosen_plan, deployed, BOARD.name)
        assert [(r.variant, r.ort_version) for r in chosen] == [("stock", version), ("tuned", version)]
    # A deliberate cross-release A/B, one version per variant.
    per_variant = parse_ort_versions(["stock=1.32.0", "tuned=1.21.0"], ["stock", "tuned"])
    crossed = make_plan(
        [BOARD], variants=["stock", "tuned"], ort_versions=per_variant, allow_version_mismatch=True
    )
    assert [r.id for r in pick_releases(crossed, deployed, BOARD.name)] == [
        "stock-1.32.0-bbbb0000",
        "tuned-1.21.0-dddd0000",
    ]
    missing = make_plan([BOARD], variants=["stock"], ort_versions=(("", "1.23.2"),))
    with pytest.raises(BenchError, match=r"no release of variant 'stock' with ORT 1\.23\.2 is deployed"):
        pick_releases(missing, deployed, BOARD.name)
    # The current release, when no variant is named, must be the version asked for.
    current = make_plan([BOARD], ort_versions=(("", "1.21.0"),))
    with pytest.raises(
        BenchError, match=re.escape("the current release stock-1.32.0-bbbb0000 is ORT 1.32.0, not 1.21.0")
    ):
        pick_releases(current, deployed, BOARD.name)


@pytest.mark.parametrize(
    ("values", "variants", "words"),
    [
        (["=1.21.0"], ["stock"], "expected X.Y.Z or VARIANT=X.Y.Z"),
        (["latest"], ["stock"], "is not an ONNX Runtime version"),
        (
            ["default=1.21.0"],
            ["stock", "tuned"],
            "'default' is not one of the --variant values (stock, tuned)",
        ),
        (["1.21.0", "1.32.0"], [], "two releases: 1.21.0, 1.32.0"),
    ],
)
def test_bad_ort_versions(values, variants, words):
    with pytest.raises(UsageError, match=re.escape(words)):
        parse_ort_versions(values, variants)


def test_pin_cores_with_xnnpack_is_refused_before_any_board():
    settings = make_settings(threads=[3], eps=["cpu", "xnnpack"])
    with pytest.raises(UsageError, match="1 thread with xnnpack"):
        make_plan([BOARD], settings=settings, agent=AgentOptions(pin_cores=(1, 2, 3)))


def test_pin_cores_reaches_both_runners_and_a_mismatch_is_refused_before_any_board():
    cores = parse_pin_cores("1-3")
    assert cores == (1, 2, 3) and parse_pin_cores("0,2,5") == (0, 2, 5)
    settings = make_settings(threads=[3])
    plan = make_plan(
        [BOARD], settings=settings, agent=AgentOptions(pin_cores=cores), runner="both", cold_starts=0
    )
    native = release("tuned", "tuned-1.32.0-cccc0000", "2026-11-10T00:00:00Z")
    native = ReleaseRef(**{**vars(native), "native": {"runner": "native/orch-runner"}})
    steps = board_steps(plan, [native], ["tiny.onnx"])
    assert {step.runner for step in steps} == {"python", "native"}
    for step in steps:
        # The calling thread on CPU 1; the pool's two threads on CPUs 2 and 3 (ORT counts from 1).
        assert step.argv[step.argv.index("--main-cpu") + 1] == "1", step.runner
        assert step.argv[step.argv.index("--affinity") + 1] == "3;4", step.runner
    with pytest.raises(
        UsageError, match=re.escape("pins 3 intra-op thread(s), one per core: give --threads 3")
    ):
        make_plan([BOARD], settings=make_settings(threads=[4]), agent=AgentOptions(pin_cores=cores))
    for text, words in (("1-", "expected CPU numbers"), ("3-1", "expected CPU numbers"),
                        ("1,1", "a CPU is listed twice"), ("; rm -rf /", "expected CPU numbers")):  # fmt: skip
        with pytest.raises(UsageError, match=re.escape(words)):
            parse_pin_cores(text)


def test_bench_pin_cores_defaults_threads_to_the_core_count_in_the_dry_run(orch_env, orch_cli, tmp_path):
    inventory = tmp_path / "inventory.yaml"
    inventory.write_text("all:\n  hosts:\n    pi01: {hostname: 127.0.0.1, port: 1}\n")
    bench = ("bench", "-i", str(inventory), "--host", "pi01", "--pin-cores", "0-1", "--dry-run")
    done = orch_cli(orch_env, *bench, "--json")
    assert done.returncode == 0, done.stderr
    plan = json.loads(done.stdout)
    assert [s["intra_threads"] for s in plan["settings"]] == [2] and plan["agent"]["pin_cores"] == [0, 1]
    refused = orch_cli(orch_env, *bench, "--threads", "4")
    assert (
        refused.returncode == 2 and "give --threads 2" in refused.stderr and "Traceback" not in refused.stderr
    )


def test_the_python_agent_measures_the_wheels_release_even_beside_a_newer_c_library_build():
    library = ReleaseRef(
        **{**vars(release("tuned", "tuned-1.32.0-ffff0000", "2026-11-30T00:00:00Z")), "kind": "library"}
    )
    python = make_plan([BOARD], variants=["tuned"])
    assert pick_releases(python, [TUNED, library], BOARD.name) == (TUNED,)
    # The native runner runs on either: the newest, as for any variant.
    native = make_plan([BOARD], variants=["tuned"], runner="native")
    assert pick_releases(native, [TUNED, library], BOARD.name) == (library,)
    # A library build alone is still refused for the agent, naming the way to measure it.
    with pytest.raises(BenchError, match="--runner native"):
        check_runners(python, pick_releases(python, [library], BOARD.name), BOARD.name)
