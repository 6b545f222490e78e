"""Conformance cases on the board: run by ``orch verify`` as ``<release>/venv/bin/python
DIR/verify_cases.py --bundle DIR [--bundle DIR2]`` (the bundles of cases carry this file; and on the workstation, with the x86 stock onnxruntime of the same release first
on ``PYTHONPATH``, to know what stock passes).

Standard library, numpy and onnxruntime only. Each ``DIR/cases.json`` (written by
``orchestrator.verify.cases``) lists cases: a model, its inputs and expected outputs as
``.npy`` files (no pickles) and the tolerances. The names of the cases to run, in order, come as
one JSON list on stdin (or in the file ``--names FILE``), so one process runs hundreds of cases (``import onnxruntime`` is paid
once). Output: one JSON line per case, flushed at once, so a case that kills the process
(SIGSEGV, SIGILL) is the first one without a line and the workstation starts a new process after
it::

    {"hello": {"version": "1.21.0", "file": "...", "build_info": "..."}}
    {"case": "test_abs", "status": "pass", "load_ms": 3.1, "run_ms": 0.2}
    {"case": "test_x", "status": "fail", "stage": "compare", "detail": "output 0: max abs diff 0.5 ..."}
    {"case": "test_y", "status": "unsupported", "stage": "load", "detail": "NOT_IMPLEMENTED : ..."}
    {"done": true}

``--write-expected`` (the workstation only, under the reference onnxruntime): run each case and
save its outputs as the expected ones; how a deployed model's case gets its expected outputs.

Comparison as ONNX's backend test runner does it (``assert_similar_outputs``): same number of
outputs, same shapes, same dtype, strings equal, numbers within ``rtol``/``atol`` of the case
(``np.testing.assert_allclose``, NaN equal to NaN). Sessions use the CPU execution provider (``--ep
cuda``: the CUDA provider first, the CPU for what it cannot run; a board where onnxruntime cannot
create it gets no case run, only the reason), the default graph optimisation level and one thread
(a thread pool per session would cost more than most cases under emulation, and the kernels are
the same).
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from typing import Any

import numpy as np

# What "this build cannot run that case" looks like, as opposed to "it ran it wrong": a kernel or
# a type the build does not have, an opset or IR version newer than the release knows.
_UNSUPPORTED = re.compile(
    r"NOT_IMPLEMENTED|Could not find an implementation|is under development"
    r"|Unsupported model IR version|No Op registered for|No opset import for domain"
    r"|is not a registered function/op|Type Error: Type \(|not supported",
    re.IGNORECASE,
)


def classify_error(message: str) -> str:
    """``unsupported`` for a missing kernel, type, opset or IR version; ``fail`` otherwise."""
    return "unsupported" if _UNSUPPORTED.search(message) else "fail"


def _short(message: str, limit: int = 400) -> str:
    message = " ".join(message.split())
    return message if len(message) <= limit else message[: limit - 3] + "..."


def compare_outputs(expected: list[Any], got: list[Any], rtol: float, atol: float) -> str | None:
    """None when ``got`` matches ``expected`` as ONNX's backend runner requires, else why not."""
    if len(got) != len(expected):
        return f"{len(got)} outputs, expected {len(expected)}"
    for index, want in enumerate(expected):
        problem = _output_problem(want, np.asarray(got[index]), rtol, atol)
        if problem is not None:
            return f"output {index}: {problem}"
    return None


def _output_problem(want: Any, have: Any, rtol: float, atol: float) -> str | None:
    """Why one output differs from the expected one (None: it matches): strings and booleans exactly,
    numbers within the tolerances."""
    if have.shape != want.shape:
        return f"shape {list(have.shape)}, expected {list(want.shape)}"
    if want.dtype.kind in "UO":
        return None if np.array_equal(have.astype(str), want.astype(str)) else "strings differ"
    if have.dtype != want.dtype:
        return f"dtype {have.dtype}, expected {want.dtype}"
    if want.dtype.kind == "b" or want.size == 0:
        return None if np.array_equal(have, want) else "values differ"
    try:
        np.testing.assert_allclose(have, want, rtol=rtol, atol=atol)
    except AssertionError:
        wide_have = have.astype(np.float64)
        wide_want = want.astype(np.float64)
        with np.errstate(invalid="ignore"):
            diff = np.abs(wide_have - wide_want)
        finite = diff[np.isfinite(diff)]
        worst = float(finite.max()) if finite.size else float("nan")
        bad = int(np.count_nonzero(~np.isclose(wide_have, wide_want, rtol=rtol, atol=atol, equal_nan=True)))
        return f"{bad} of {want.size} values outside rtol {rtol:g} atol {atol:g} (max abs diff {worst:.3g})"
    return None


_PROVIDERS = {
    "cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider",
    "tensorrt": "TensorrtExecutionProvider", "xnnpack": "XnnpackExecutionProvider",
}  # fmt: skip


def providers_for(ep: str) -> list[str]:
    """``--ep cuda`` -> the session's providers: the provider first, the CPU for what it cannot run."""
    name = _PROVIDERS.get(ep, ep)
    return [name] if name == "CPUExecutionProvider" else [name, "CPUExecutionProvider"]


def provider_problem(ort: Any, providers: list[str], model: str, options: Any) -> str | None:
    """Why the cases cannot run with ``providers[0]`` on this board, or None. onnxruntime quietly
    makes a session without a provider it cannot create (a CUDA wheel on a board without an NVIDIA
    driver): cases run that way would verify the CPU under the provider's name."""
    wanted = providers[0]
    available = ort.get_available_providers()
    if wanted not in available:
        return f"{wanted} is not in this build (it has {', '.join(available)})"
    if wanted == "CPUExecutionProvider":
        return None
    try:
        got = ort.InferenceSession(model, options, providers=providers).get_providers()
    except Exception as error:  # noqa: BLE001 - whatever onnxruntime raised is the reason
        return f"{wanted} could not be created on this board: {type(error).__name__}: {error}"
    if wanted not in got:
        gpu = (
            " (no NVIDIA driver or GPU here?)"
            if wanted in ("CUDAExecutionProvider", "TensorrtExecutionProvider")
            else ""
        )
        return f"{wanted} is in this build but onnxruntime could not create it on this board{gpu}: nothing verified"
    return None


def run_case(
    ort: Any, bundle: str, case: dict[str, Any], options: Any, providers: list[str] | None = None
) -> dict[str, Any]:
    """One case: load, run, compare. Never raises for the case's own failure."""
    out: dict[str, Any] = {"case": case["name"]}
    started = time.perf_counter()
    try:
        session = ort.InferenceSession(
            os.path.join(bundle, case["model"]), options, providers=providers or ["CPUExecutionProvider"]
        )
    except Exception as error:  # noqa: BLE001 - onnxruntime raises several unrelated types
        text = f"{type(error).__name__}: {error}"
        return {**out, "status": classify_error(text), "stage": "load", "detail": _short(text)}
    loaded = time.perf_counter()
    out["load_ms"] = round((loaded - started) * 1000, 2)
    try:
        feeds = {
            item["name"]: np.load(os.path.join(bundle, item["file"]), allow_pickle=False)
            for item in case["inputs"]
        }
        names = [item["name"] for item in case["outputs"]]
        got = session.run(names, feeds)
    except Exception as error:  # noqa: BLE001 - whatever onnxruntime raised is the case's result
        text = f"{type(error).__name__}: {error}"
        return {**out, "status": classify_error(text), "stage": "run", "detail": _short(text)}
    out["run_ms"] = round((time.perf_counter() - loaded) * 1000, 2)
    expected = [np.load(os.path.join(bundle, item["file"]), allow_pickle=False) for item in case["outputs"]]
    problem = compare_outputs(expected, got, float(case["rtol"]), float(case["atol"]))
    if problem is not None:
        return {**out, "status": "fail", "stage": "compare", "detail": problem}
    return {**out, "status": "pass"}


def _emit(document: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(document) + "\n")
    sys.stdout.flush()


def write_expected(
    ort: Any, bundle: str, case: dict[str, Any], options: Any, providers: list[str] | None = None
) -> dict[str, Any]:
    """A deployed model's case on the workstation's reference onnxruntime: run it and keep its
    outputs as the expected ones (``<case dir>/output_<i>.npy``). Always on the CPU: ``providers``
    (``run_case``'s) is taken so that both are one step of ``main``, and not used."""
    out: dict[str, Any] = {"case": case["name"]}
    try:
        session = ort.InferenceSession(
            os.path.join(bundle, case["model"]), options, providers=["CPUExecutionProvider"]
        )
        feeds = {
            item["name"]: np.load(os.path.join(bundle, item["file"]), allow_pickle=False)
            for item in case["inputs"]
        }
        names = [item.name for item in session.get_outputs()]
        got = session.run(names, feeds)
    except Exception as error:  # noqa: BLE001 - whatever it raised is the case's result
        text = f"{type(error).__name__}: {error}"
        return {**out, "status": classify_error(text), "stage": "reference", "detail": _short(text)}
    folder = os.path.dirname(case["model"])
    written = []
    for index, name in enumerate(names):
        value = got[index]
        relative = f"{folder}/output_{index}.npy" if folder else f"output_{index}.npy"
        np.save(os.path.join(bundle, relative), np.asarray(value), allow_pickle=False)
        written.append({"name": name, "file": relative})
    return {**out, "status": "pass", "outputs": written}


def _option(argv: list[str], name: str) -> list[str]:
    return [argv[i + 1] for i, item in enumerate(argv[:-1]) if item == name]


def main(argv: list[str]) -> int:
    bundles = _option(argv, "--bundle") or ["."]
    try:
        import onnxruntime as ort
    except Exception as error:  # noqa: BLE001 - the workstation must always get a JSON line
        _emit({"hello": None, "error": f"import onnxruntime failed: {type(error).__name__}: {error}"})
        return 1
    cases: dict[str, tuple[str, dict[str, Any]]] = {}
    for bundle in bundles:
        with open(os.path.join(bundle, "cases.json"), encoding="utf-8") as handle:
            for case in json.load(handle)["cases"]:
                cases[case["name"]] = (bundle, case)
    names_file = _option(argv, "--names")
    if names_file:  # the workstation's reference run passes a file
        with open(names_file[0], encoding="utf-8") as handle:
            wanted = json.load(handle)
    else:
        wanted = json.loads(sys.stdin.read() or "[]")
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    options.log_severity_level = 3  # the cases' own warnings (opset under development, ...) are noise here
    providers = providers_for((_option(argv, "--ep") or ["cpu"])[0])
    first = next((cases[name] for name in wanted if name in cases), None)
    problem = (
        provider_problem(ort, providers, os.path.join(first[0], first[1]["model"]), options)
        if first
        else None
    )
    if problem is not None:
        _emit({"hello": None, "error": problem})
        return 1
    _emit(
        {
            "hello": {
                "version": ort.__version__,
                "file": os.path.realpath(ort.__file__),
                "build_info": ort.get_build_info() if hasattr(ort, "get_build_info") else "",
                "numpy": np.__version__,
                "providers": providers,
            }
        }
    )
    if hasattr(ort, "set_default_logger_severity"):
        ort.set_default_logger_severity(4)  # kernels log their own refusals as errors: the JSON line says it
    step = write_expected if "--write-expected" in argv else run_case
    for name in wanted:
        if name not in cases:
            _emit({"case": name, "status": "fail", "stage": "bundle", "detail": "not in cases.json"})
            continue
        bundle, case = cases[name]
        with np.errstate(all="ignore"):
            _emit(step(ort, bundle, case, options, providers))
    _emit({"done": True})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
