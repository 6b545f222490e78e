"""The deploy verification's report: parsed once from the board's line, checked, given back for --json."""

from __future__ import annotations

import json

import pytest

from orchestrator.deploy.verification import ModelCheck, Verification, parse_verification
from orchestrator.errors import DeployError

RELEASE = "/root/orch/releases/tuned-1.21.0-abc"
WHERE = "nano01: verification of tuned-1.21.0-abc"
GOOD = {
    "ok": True,
    "version": "1.21.0",
    "file": f"{RELEASE}/venv/lib/python3.13/site-packages/onnxruntime/__init__.py",
    "build_info": "ORT Build Info: git-branch=, git-commit-id=, build type=Release",
    "providers": ["CPUExecutionProvider"],
    "models": {"tiny.onnx": {"ok": True, "load_ms": 3.5, "run_ms": 0.25, "outputs": [[1, 10]]}},
}


def check(
    report: Verification,
    *,
    expected_version: str = "1.21.0",
    release_dir: str | None = RELEASE,
    expected_build_info: str | None = None,
) -> list[str]:
    return report.problems(
        expected_version=expected_version, release_dir=release_dir, expected_build_info=expected_build_info
    )


def test_a_good_report_is_typed_verified_and_given_back_unchanged() -> None:
    report = parse_verification(json.dumps(GOOD), where=WHERE)
    assert report.version == "1.21.0" and report.providers == ("CPUExecutionProvider",)
    assert report.models == {"tiny.onnx": ModelCheck(ok=True, load_ms=3.5, run_ms=0.25, outputs=((1, 10),))}
    assert check(report) == [] and check(report, expected_build_info=str(GOOD["build_info"])) == []
    assert report.as_dict() == GOOD


def test_mismatches_are_named() -> None:
    report = parse_verification(
        json.dumps({**GOOD, "file": "/usr/lib/python3/onnxruntime/__init__.py"}), where=WHERE
    )
    assert check(report, expected_version="1.22.0", expected_build_info="other") == [
        "onnxruntime reports version 1.21.0, expected 1.22.0",
        f"onnxruntime was imported from /usr/lib/python3/onnxruntime/__init__.py, not from the release {RELEASE}",
        "onnxruntime's build info differs from the build manifest's",
    ]
    # The workdir's real path unknown: where onnxruntime came from is not checked.
    assert check(report, release_dir=None) == []


def test_failed_models_and_a_failed_import() -> None:
    failed = {
        **GOOD,
        "ok": False,
        "models": {
            "bad.onnx": {"ok": False, "error": "InvalidProtobuf: bad model"},
            "nan.onnx": {
                "ok": False,
                "load_ms": 1.0,
                "run_ms": 1.0,
                "outputs": [[1]],
                "error": "output is not finite",
            },
        },
    }
    report = parse_verification(json.dumps(failed), where=WHERE)
    assert check(report) == ["bad.onnx: InvalidProtobuf: bad model; nan.onnx: output is not finite"]
    assert report.as_dict() == failed
    imported = {"ok": False, "error": "import failed: ImportError: libgomp.so.1"}
    report = parse_verification(json.dumps(imported), where=WHERE)
    assert check(report) == ["import failed: ImportError: libgomp.so.1"]
    assert report.as_dict() == imported


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", "the board's report is not JSON"),
        ("[]", "malformed: 'the report' must be a JSON object"),
        (json.dumps({"version": "1"}), "malformed: 'ok' is missing"),
        (json.dumps({**GOOD, "ok": "yes"}), "malformed: 'ok' must be true or false"),
        (
            json.dumps({**GOOD, "models": {"m": {"ok": True, "outputs": "?"}}}),
            "'models.m.outputs' must be a list",
        ),
        (
            json.dumps({**GOOD, "models": {"m": {"ok": True, "run_ms": "1"}}}),
            "'models.m.run_ms' must be a number",
        ),
        (json.dumps({**GOOD, "providers": "CPU"}), "'providers' must be a list of strings"),
    ],
)
def test_a_malformed_report_is_a_deploy_error_naming_the_board(line: str, message: str) -> None:
    with pytest.raises(DeployError, match=message) as caught:
        parse_verification(line, where=WHERE)
    assert caught.value.message.startswith(WHERE + ": ")
