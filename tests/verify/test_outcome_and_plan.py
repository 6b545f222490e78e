"""Result comparison (regressions, gaps, pass sets) and the verify plan, without boards."""

from __future__ import annotations

import re

import pytest

from orchestrator.board import Board
from orchestrator.deploy.releases import ReleaseInfo
from orchestrator.errors import UsageError, VerifyError
from orchestrator.verify import outcome
from orchestrator.verify.outcome import BuildVerdict, CaseResult
from orchestrator.verify.plan import make_plan, pick_releases


def results(**statuses: str) -> dict[str, CaseResult]:
    return {name: CaseResult(case=name, status=status) for name, status in statuses.items()}


def verdict(release: str, build: dict[str, CaseResult], reference: dict[str, CaseResult]) -> BuildVerdict:
    return BuildVerdict(
        board="lab1",
        release=release,
        variant=release.split("-")[0],
        ort_version="1.21.0",
        results=build,
        reference=reference,
    )


def test_a_case_stock_passes_and_the_build_fails_is_a_regression() -> None:
    stock = results(a="pass", b="pass", c="pass", d="fail", e="unsupported", f="pass")
    build = results(a="pass", b="fail", c="unsupported", d="fail", e="pass", f="pass")
    found = verdict("tuned-1.21.0-x", build, stock)
    assert [d.case for d in found.regressions] == ["b"]
    assert [d.case for d in found.gaps] == ["c"]  # not supported by this build: listed, not a failure
    assert outcome.improvements(build, stock) == ("e",)
    assert found.counts == {"pass": 3, "fail": 2, "unsupported": 1}
    document = found.as_dict()
    assert document["regressions"][0]["reference"]["status"] == "pass"
    assert document["reference_counts"] == {"pass": 4, "fail": 1, "unsupported": 1}


def test_the_time_inside_the_cases_is_summed() -> None:
    timed = {
        "a": CaseResult(case="a", status="pass", load_ms=1500.0, run_ms=250.0),
        "b": CaseResult(case="b", status="unsupported"),
    }
    assert verdict("stock-1.21.0-x", timed, {}).as_dict()["case_s"] == 1.75


def test_the_same_results_as_stock_mean_no_difference() -> None:
    stock = results(a="pass", b="fail", c="unsupported")
    found = verdict("tuned-1.21.0-x", dict(stock), stock)
    assert found.differences == () and found.regressions == ()


def test_pass_set_differences_name_each_case_and_build() -> None:
    stock = verdict("stock-1.21.0-a", results(a="pass", b="pass", c="fail"), {})
    tuned = verdict("tuned-1.21.0-b", results(a="pass", b="unsupported", c="fail"), {})
    assert outcome.pass_set_differences([stock, tuned]) == {
        "b": {"stock-1.21.0-a": "pass", "tuned-1.21.0-b": "unsupported"}
    }
    assert outcome.pass_set_differences([stock, stock]) == {}


def info(release_id: str, *, current: bool = False, created: str = "2026-12-01T10:00:00Z") -> ReleaseInfo:
    variant, version, _ = release_id.split("-")
    return ReleaseInfo(
        id=release_id,
        variant=variant,
        target="lab",
        ort_version=version,
        path=f"/o/releases/{release_id}",
        python=f"/o/releases/{release_id}/venv/bin/python",
        current=current,
        created=created,
    )


BOARD = Board(name="lab1", hostname="127.0.0.1")
DEPLOYED = [
    info("stock-1.32.0-aaaa", created="2026-12-01T09:00:00Z"),
    info("tuned-1.21.0-bbbb", current=True),
    info("stock-1.21.0-cccc"),
    info("tuned-1.21.0-dddd", created="2026-12-01T11:00:00Z"),
]


def test_builds_are_chosen_by_variant_and_release() -> None:
    plan = make_plan([BOARD], variants=["stock", "tuned"], ort_version="1.21.0")
    assert [r.id for r in pick_releases(plan, DEPLOYED, "lab1")] == ["stock-1.21.0-cccc", "tuned-1.21.0-dddd"]
    current = make_plan([BOARD])
    assert [r.id for r in pick_releases(current, DEPLOYED, "lab1")] == ["tuned-1.21.0-bbbb"]
    newest_stock = make_plan([BOARD], variants=["stock"])
    assert [r.id for r in pick_releases(newest_stock, DEPLOYED, "lab1")] == ["stock-1.21.0-cccc"]


def test_a_missing_build_is_refused_naming_what_is_deployed() -> None:
    with pytest.raises(
        VerifyError,
        match=r"no release of variant 'lto' of onnxruntime 1.21.0 is deployed \(deployed: .*stock 1.32.0",
    ):
        pick_releases(make_plan([BOARD], variants=["lto"], ort_version="1.21.0"), DEPLOYED, "lab1")
    with pytest.raises(VerifyError, match=re.escape("no release of onnxruntime 1.99.0 is deployed")):
        pick_releases(make_plan([BOARD], ort_version="1.99.0"), DEPLOYED, "lab1")
    with pytest.raises(VerifyError, match="no release is deployed"):
        pick_releases(make_plan([BOARD]), [], "lab1")


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"ort_version": "latest"}, "--ort-version 'latest': expected a release number"),
        ({"subset": 0}, "--subset 0: must be at least 1"),
        ({"variants": ["tuned", "tuned"]}, "--variant lists a variant twice"),
        ({"execution_provider": "gpu"}, "--ep gpu: one of cpu, cuda, tensorrt, xnnpack"),
    ],
)
def test_bad_plans_are_refused(kwargs: dict, message: str) -> None:
    with pytest.raises(UsageError, match=message):
        make_plan([BOARD], **kwargs)


def test_the_plan_says_which_tolerances_and_reference_apply() -> None:
    document = make_plan([BOARD], subset=50).as_dict()
    assert document["node_cases"] == "subset of 50"
    assert "rtol 1e-3, atol 1e-7" in document["tolerances"]["node_cases"]
    assert "x86-64 stock onnxruntime" in document["reference"]
    assert document["execution_provider"] == "cpu"
    assert make_plan([BOARD], execution_provider="cuda").as_dict()["execution_provider"] == "cuda"
