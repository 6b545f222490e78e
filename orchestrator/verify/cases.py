"""ONNX's own node conformance cases, written as ``.onnx`` + ``.npy`` so a board needs only numpy and
onnxruntime to run them.

The cases come from the installed ``onnx`` package: ``onnx.backend.test.case.node`` holds the
generators ONNX's ``backend-test-tools generate-data`` turns into ``onnx/backend/test/data/node``
(the wheel of onnx ships the generators, not always that data). Each case is a one-node model
(or its function expansion, ``*_expanded``) stamped with the opset its operator was last changed
in, one set of inputs and the expected outputs from ONNX's reference code, and the tolerances
ONNX's backend runner uses for it (rtol 1e-3, atol 1e-7 unless the case says otherwise).

What ``.npy`` without pickles cannot carry is left out, with the reason counted: sequences,
optionals and maps, and element types numpy lacks (bfloat16, float8, int4, float4: ONNX uses
``ml_dtypes`` for them, which a board does not have).
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import json
import os
import warnings
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypedDict

import numpy as np

from orchestrator.common.json_fields import JsonFields, JsonSource, load_fields
from orchestrator.errors import VerifyError

CASES_FILE = "cases.json"
SCHEMA = "orch-verify-cases/1"
# Bump when the written layout changes: the cache key of generated bundles.
GENERATOR = 1
# numpy element kinds a board can load from .npy without pickles and without ml_dtypes.
_PLAIN_KINDS = frozenset("biufcU")


# An ONNX node case, or a deployed model made into one (orchestrator.verify.models).
CaseKind = Literal["node", "model"]
CASE_KINDS: tuple[CaseKind, ...] = ("node", "model")


class TensorFile(TypedDict):
    name: str  # the model's input or output
    file: str  # its .npy, relative to the bundle


class CaseDocument(TypedDict):
    """One case in ``cases.json``, as the board's runner (``board_side/verify_cases.py``) reads it."""

    name: str
    kind: CaseKind
    op: str
    model: str
    inputs: list[TensorFile]
    outputs: list[TensorFile]
    rtol: float
    atol: float


@dataclass(frozen=True, kw_only=True)
class Case:
    """One conformance case as written in ``cases.json`` (paths relative to the bundle)."""

    name: str
    kind: CaseKind
    model: str
    inputs: tuple[tuple[str, str], ...]  # (input name, .npy file)
    outputs: tuple[tuple[str, str], ...]  # (output name, .npy file)
    rtol: float
    atol: float
    op: str = ""  # the operator a node case tests ("" for models)

    def as_dict(self) -> CaseDocument:
        return CaseDocument(
            name=self.name,
            kind=self.kind,
            op=self.op,
            model=self.model,
            inputs=[TensorFile(name=n, file=f) for n, f in self.inputs],
            outputs=[TensorFile(name=n, file=f) for n, f in self.outputs],
            rtol=self.rtol,
            atol=self.atol,
        )

    @classmethod
    def read(cls, f: JsonFields) -> Case:
        """One case of ``cases.json``; a missing key or a value of the wrong kind names the file
        and the key (``cases[3].rtol``)."""
        kind = f.choice("kind", CASE_KINDS)
        if kind is None:
            raise f.problem(f"missing key '{f.prefix}kind'")
        return cls(
            name=f.required_text("name"),
            kind=kind,
            op=f.text("op") or "",
            model=f.required_text("model"),
            inputs=_tensor_files(f, "inputs"),
            outputs=_tensor_files(f, "outputs"),
            rtol=f.required_number("rtol"),
            atol=f.required_number("atol"),
        )


def _tensor_files(f: JsonFields, key: str) -> tuple[tuple[str, str], ...]:
    return tuple((item.required_text("name"), item.required_text("file")) for item in f.children(key))


@dataclass(frozen=True, kw_only=True)
class Generated:
    """What generation wrote, and what it had to leave out (reason -> count)."""

    directory: Path
    cases: tuple[Case, ...]
    skipped: dict[str, int] = field(default_factory=dict)
    onnx_version: str = ""


def plain_array(value: Any) -> np.ndarray | None:
    """``value`` as an array ``np.load(allow_pickle=False)`` reads back without ml_dtypes, or None."""
    from onnx import TensorProto, numpy_helper

    if isinstance(value, TensorProto):
        try:
            value = numpy_helper.to_array(value)
        except Exception:  # noqa: BLE001 -- element types numpy_helper cannot express
            return None
    if not isinstance(value, np.ndarray):
        return None
    if value.dtype.kind == "O":
        return _string_array(value)
    plain = value.dtype.kind in _PLAIN_KINDS and value.dtype.names is None
    # ml_dtypes types claim kind "V" or "f" with a custom name; only numpy's own names are kept.
    return value if plain and value.dtype.type.__module__ == "numpy" else None


def _string_array(value: np.ndarray) -> np.ndarray | None:
    """An object array of text (str, or UTF-8 bytes) as a numpy string array, or None."""
    items = value.ravel().tolist()
    try:
        texts = [item.decode("utf-8") if isinstance(item, bytes) else item for item in items]
    except UnicodeDecodeError:
        return None
    if not all(isinstance(item, str) for item in texts):
        return None
    strings: np.ndarray = np.array(texts, dtype=str).reshape(value.shape)
    return strings


def _tensor_only(values: Sequence[Any]) -> list[np.ndarray] | None:
    arrays = [plain_array(value) for value in values]
    return None if any(array is None for array in arrays) else [a for a in arrays if a is not None]


def _graph_is_tensors(model: Any) -> bool:
    return all(v.type.HasField("tensor_type") for v in [*model.graph.input, *model.graph.output])


def collect_node_cases() -> list[Any]:
    """ONNX's node test cases (``onnx.backend.test.case.TestCase``), quietly: the generators warn
    about overflows they produce on purpose."""
    from onnx.backend.test.case import node

    with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
        warnings.simplefilter("ignore")
        with np.errstate(all="ignore"):
            return list(node.collect_testcases(None))


def _write_array(path: Path, array: np.ndarray) -> None:
    with path.open("wb") as handle:
        np.save(handle, array, allow_pickle=False)


def write_case(directory: Path, test_case: Any) -> Case | str:
    """Write one ONNX TestCase under ``directory/<name>/``; a reason string when it cannot be."""
    model = test_case.model
    if model is None or not test_case.data_sets:
        return "no model or data"
    if not _graph_is_tensors(model):
        return "sequence, optional or map values"
    inputs, outputs = test_case.data_sets[0]
    arrays_in, arrays_out = _tensor_only(inputs), _tensor_only(outputs)
    if arrays_in is None or arrays_out is None:
        return "element type numpy lacks (bfloat16, float8, int4, float4)"
    # Omitted optional inputs are "" in the node and absent from the graph's inputs.
    in_names = [value.name for value in model.graph.input]
    out_names = [value.name for value in model.graph.output]
    if len(in_names) != len(arrays_in) or len(out_names) != len(arrays_out):
        return "inputs or outputs do not match the graph"
    case_dir = directory / test_case.name
    case_dir.mkdir(parents=True, exist_ok=True)
    (case_dir / "model.onnx").write_bytes(model.SerializeToString())
    for index, array in enumerate(arrays_in):
        _write_array(case_dir / f"input_{index}.npy", array)
    for index, array in enumerate(arrays_out):
        _write_array(case_dir / f"output_{index}.npy", array)
    ops = [node.op_type for node in model.graph.node]
    return Case(
        name=test_case.name,
        kind="node",
        op=ops[0] if len(ops) == 1 else (ops[0] + "+" if ops else ""),
        model=f"{test_case.name}/model.onnx",
        inputs=tuple((n, f"{test_case.name}/input_{i}.npy") for i, n in enumerate(in_names)),
        outputs=tuple((n, f"{test_case.name}/output_{i}.npy") for i, n in enumerate(out_names)),
        rtol=float(test_case.rtol),
        atol=float(test_case.atol),
    )


def write_cases_file(directory: Path, cases: Iterable[Case], **extra: str) -> None:
    document = {"schema": SCHEMA, **extra, "cases": [case.as_dict() for case in cases]}
    partial = directory / (CASES_FILE + ".partial")
    partial.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n", encoding="utf-8")
    partial.replace(directory / CASES_FILE)


def cache_file(path: Path) -> JsonFields:
    """A file of verify's cache (cases.json, generated.json, refused.json, reference.json) to read;
    a damaged one is a VerifyError naming the file and the key, and saying to remove its directory."""
    remedy = f"remove {path.parent}: orch makes it again"
    return load_fields(
        path, JsonSource(where=str(path), error=VerifyError, hint=remedy, not_object_hint=remedy)
    )


def read_cases_file(directory: Path) -> tuple[Case, ...]:
    """The cases of a generated bundle (orch's cache)."""
    return tuple(Case.read(item) for item in cache_file(directory / CASES_FILE).children("cases"))


def node_cases(cache: Path) -> Generated:
    """The node cases of the installed onnx, generated once into ``cache/node-onnx-<version>-g<N>/``."""
    import onnx

    directory = cache / f"node-onnx-{onnx.__version__}-g{GENERATOR}"
    marker = directory / "generated.json"
    if marker.exists() and (directory / CASES_FILE).exists():
        left_out = cache_file(marker).required_child("skipped")  # reason -> cases
        return Generated(
            directory=directory,
            cases=read_cases_file(directory),
            skipped={reason: left_out.required_integer(reason) for reason in left_out.document},
            onnx_version=onnx.__version__,
        )
    directory.mkdir(parents=True, exist_ok=True)
    written: list[Case] = []
    skipped: Counter[str] = Counter()
    for test_case in collect_node_cases():
        result = write_case(directory, test_case)
        if isinstance(result, str):
            skipped[result] += 1
        else:
            written.append(result)
    written.sort(key=lambda case: case.name)
    write_cases_file(directory, written, onnx=onnx.__version__)
    marker.write_text(json.dumps({"skipped": dict(skipped)}, sort_keys=True) + "\n", encoding="utf-8")
    return Generated(
        directory=directory, cases=tuple(written), skipped=dict(skipped), onnx_version=onnx.__version__
    )


def subset(cases: Sequence[Case], count: int | None) -> tuple[Case, ...]:
    """``count`` cases spread evenly over the sorted list (so over the operators), or all of them.

    Deterministic: the same onnx and the same count always give the same cases."""
    ordered = sorted(cases, key=lambda case: case.name)
    if count is None or count >= len(ordered):
        return tuple(ordered)
    if count <= 0:
        return ()
    step = len(ordered) / count
    return tuple(ordered[int(index * step)] for index in range(count))


def tree_digest(directory: Path, extra: bytes = b"") -> str:
    """sha256 over every file's relative path and content (sorted), plus ``extra``."""
    digest = hashlib.sha256(extra)
    for root, dirs, files in os.walk(directory):
        dirs.sort()
        for name in sorted(files):
            path = Path(root) / name
            digest.update(str(path.relative_to(directory)).encode() + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()
