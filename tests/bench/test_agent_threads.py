"""The agent's session plan: which pool gets the threads, per execution provider.

The workstation's onnxruntime has no XNNPACK EP, so the plan is checked as data (with a build that
lists XNNPACK) and applied to the workstation's real SessionOptions; the XNNPACK session itself runs
only on boards."""

from __future__ import annotations

import argparse

import onnxruntime
import pytest

from orchestrator.board_side.bench_agent import AgentError, session_options, session_plan

XNNPACK_BUILD = ["XnnpackExecutionProvider", "CPUExecutionProvider"]


def applied(plan) -> onnxruntime.SessionOptions:
    return session_options(onnxruntime, argparse.Namespace(opt_level="all", inter_op_threads=0), plan)


def test_xnnpack_gets_the_threads_and_onnxruntimes_pool_one_thread_without_spinning() -> None:
    plan = session_plan("xnnpack", 4, None, XNNPACK_BUILD, usable_cpus=8)
    assert plan.providers == [
        ("XnnpackExecutionProvider", {"intra_op_num_threads": "4"}),
        "CPUExecutionProvider",
    ]
    assert (plan.intra_op_threads, plan.xnnpack_threads) == (1, 4)
    options = applied(plan)
    assert options.intra_op_num_threads == 1
    assert options.get_session_config_entry("session.intra_op.allow_spinning") == "0"


def test_xnnpack_with_the_default_threads_gets_the_usable_cpus_not_onnxruntimes_one() -> None:
    # XNNPACK's 0 means "the session's pool size", which is 1 here: it is given the CPUs instead.
    plan = session_plan("XnnpackExecutionProvider", 0, None, XNNPACK_BUILD, usable_cpus=3)
    assert (plan.intra_op_threads, plan.xnnpack_threads) == (1, 3)
    assert plan.providers[0] == ("XnnpackExecutionProvider", {"intra_op_num_threads": "3"})


@pytest.mark.parametrize(
    "ep,providers",
    [
        ("cpu", ["CPUExecutionProvider"]),
        ("cuda", ["CUDAExecutionProvider", "CPUExecutionProvider"]),
    ],
)
def test_other_providers_leave_the_threads_and_the_affinity_to_onnxruntimes_pool(ep, providers) -> None:
    available = ["CUDAExecutionProvider", "CPUExecutionProvider"]
    plan = session_plan(ep, 4, "2;3;4", available, usable_cpus=8)
    assert plan.providers == providers
    assert (plan.intra_op_threads, plan.xnnpack_threads) == (4, None)
    assert plan.config == {"session.intra_op_thread_affinities": "2;3;4"}
    options = applied(plan)
    assert options.intra_op_num_threads == 4
    assert options.get_session_config_entry("session.intra_op_thread_affinities") == "2;3;4"


@pytest.mark.parametrize("available", [XNNPACK_BUILD, ["CPUExecutionProvider"]])
def test_xnnpack_with_an_affinity_is_a_bad_argument_whatever_the_build(available) -> None:
    with pytest.raises(AgentError, match="with xnnpack that pool has 1 thread") as raised:
        session_plan("xnnpack", 4, "2;3;4", available, usable_cpus=8)
    assert raised.value.stage == "arguments"


def test_a_provider_missing_from_the_build_is_a_session_failure() -> None:
    with pytest.raises(AgentError, match="XnnpackExecutionProvider is not in this build") as raised:
        session_plan("xnnpack", 4, None, ["CPUExecutionProvider"], usable_cpus=8)
    assert raised.value.stage == "session"
