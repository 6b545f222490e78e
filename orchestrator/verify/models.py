"""The user's deployed models as conformance cases: inputs made from each model's metadata (fixed
seed; free dimensions = 1), expected outputs from the x86-64 stock onnxruntime of the release
the board runs, tolerances ``MODEL_RTOL``/``MODEL_ATOL`` (see ``orchestrator.verify.plan``).

A bundle is made per (release version, set of models) and cached by both: the same models on
many boards are fetched, run on the reference and pushed once.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from orchestrator.board_side import read_text
from orchestrator.errors import VerifyError
from orchestrator.verify.cases import GENERATOR, Case, cache_file, read_cases_file, write_cases_file
from orchestrator.verify.outcome import parse_run
from orchestrator.verify.plan import MODEL_ATOL, MODEL_RTOL
from orchestrator.verify.reference import Reference, run_reference

MODEL_PREFIX = "model:"
_DTYPES = {
    1: np.float32,
    2: np.uint8,
    3: np.int8,
    4: np.uint16,
    5: np.int16,
    6: np.int32,
    7: np.int64,
    9: np.bool_,
    10: np.float16,
    11: np.float64,
    12: np.uint32,
    13: np.uint64,
}


def model_inputs(path: Path, seed: int = 0) -> list[tuple[str, np.ndarray]]:
    """Deterministic inputs for every graph input that is not an initializer: floats uniform in
    [0, 1), integers in [0, 10), booleans random; free dimensions = 1."""
    import onnx

    model = onnx.load(str(path), load_external_data=False)
    initializers = {init.name for init in model.graph.initializer}
    rng = np.random.default_rng(seed)
    out = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        dtype = _DTYPES.get(tensor.elem_type)
        if not value.type.HasField("tensor_type") or dtype is None:
            raise VerifyError(
                f"{path.name}: input {value.name!r} is not a tensor of a type orch can generate",
                hint="orch verify makes inputs for float, integer and bool tensor inputs",
            )
        shape = [d.dim_value if d.dim_value > 0 else 1 for d in tensor.shape.dim]
        array: np.ndarray
        if np.dtype(dtype).kind == "f":
            array = rng.random(shape).astype(dtype)
        elif np.dtype(dtype).kind == "b":
            array = rng.random(shape) < 0.5
        else:
            array = rng.integers(0, 10, size=shape).astype(dtype)
        out.append((value.name, array))
    return out


@dataclass(frozen=True, kw_only=True)
class ModelBundle:
    directory: Path
    cases: tuple[Case, ...]
    refused: dict[str, str] = field(default_factory=dict)  # model -> why the reference could not run it


def model_bundle(cache: Path, reference: Reference, models: Mapping[str, Path]) -> ModelBundle:
    """Cases for ``models`` (deployed name -> local copy) with the reference's outputs as expected."""
    digest = hashlib.sha256(
        json.dumps(
            [
                reference.version,
                reference.wheel_sha256,
                GENERATOR,
                *sorted(
                    (name, hashlib.sha256(path.read_bytes()).hexdigest()) for name, path in models.items()
                ),
            ]
        ).encode()
        + read_text("verify_cases.py").encode()
    ).hexdigest()[:16]
    directory = cache / f"models-{reference.version}-{digest}"
    marker = directory / "refused.json"
    if marker.exists():
        recorded = cache_file(marker)  # model -> why the reference cannot run it
        return ModelBundle(
            directory=directory,
            cases=read_cases_file(directory),
            refused={name: recorded.text(name) or "" for name in recorded.document},
        )
    partial = directory.with_name(directory.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    (partial / "verify_cases.py").write_text(read_text("verify_cases.py"), encoding="utf-8")
    pending = [_model_case(partial, name, path) for name, path in sorted(models.items())]
    write_cases_file(partial, pending)
    result = run_reference(reference, partial, [case.name for case in pending], write_expected=True)
    run = parse_run(result.stdout)
    if run.hello is None:
        raise VerifyError(
            f"the reference {reference.describe()} could not run: {run.error or result.tail(3)}"
        )
    lines = {line.case: line for line in run.results}
    written, refused = [], {}
    for case in pending:
        line = lines.get(case.name)
        if line is None or line.status != "pass":
            refused[case.name] = line.detail if line else "the reference runner stopped"
            continue
        written.append(Case(**{**case.__dict__, "outputs": line.outputs}))
    write_cases_file(partial, written)
    (partial / "refused.json").write_text(json.dumps(refused, sort_keys=True) + "\n", encoding="utf-8")
    shutil.rmtree(directory, ignore_errors=True)
    partial.rename(directory)
    return ModelBundle(directory=directory, cases=tuple(written), refused=refused)


def _model_case(bundle: Path, name: str, path: Path) -> Case:
    """A deployed model copied into the bundle with its generated inputs, as a case without outputs
    yet (the reference's are added once it has run)."""
    folder = name.removesuffix(".onnx")
    (bundle / folder).mkdir()
    shutil.copyfile(path, bundle / folder / "model.onnx")
    inputs = []
    for index, (input_name, array) in enumerate(model_inputs(path)):
        np.save(bundle / folder / f"input_{index}.npy", array, allow_pickle=False)
        inputs.append((input_name, f"{folder}/input_{index}.npy"))
    return Case(
        name=MODEL_PREFIX + name,
        kind="model",
        model=f"{folder}/model.onnx",
        inputs=tuple(inputs),
        outputs=(),
        rtol=MODEL_RTOL,
        atol=MODEL_ATOL,
    )
