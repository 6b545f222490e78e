"""Calibration data for static int8 quantisation: the user's ``.npy`` inputs, or inputs generated
from the model's metadata (a warning says real data gives better scales).

``--calibration FILE.npy`` (a single-input model) or ``--calibration NAME=FILE.npy`` (one per
input). An array with the input's rank is split along its first axis into pieces of the input's
batch size (``[16, 3, 224, 224]`` for a ``[1, 3, 224, 224]`` input: 16 samples); one with one
more axis holds one sample per entry (``[16, 1, 3, 224, 224]``). Pure apart from reading the
files and the model; every mistake names the file or the input.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from orchestrator.bench.records import CalibrationRecord
from orchestrator.errors import UsageError

GENERATED_SAMPLES = 16
GENERATED_WARNING = (
    "calibration data generated from the input metadata (random values): int8 scales from real "
    "inputs are better; pass --calibration FILE.npy"
)
_ELEMENT_TYPES = {1: np.float32, 10: np.float16, 11: np.float64, 6: np.int32, 7: np.int64, 9: np.bool_}


@dataclass(frozen=True, kw_only=True)
class CalibrationSpec:
    """What --calibration named: input name ("" = the model's only input) -> file."""

    files: tuple[tuple[str, Path], ...] = ()
    digest: str = ""  # of the files' names and bytes, taken when they were read

    @property
    def generated(self) -> bool:
        return not self.files

    @property
    def id(self) -> str:
        """Short digest of the data (``gen`` when generated): part of the int8 model's file name,
        so other data makes another model instead of reusing a stale one."""
        return self.digest[:8] if self.files else "gen"

    def as_dict(self) -> CalibrationRecord:
        return {
            "source": "generated" if self.generated else "user",
            "files": {name or "<only input>": str(path) for name, path in self.files},
            "id": self.id,
        }


def parse_specs(values: Sequence[str]) -> CalibrationSpec:
    """--calibration values -> a spec whose files exist and hold plain .npy arrays."""
    files: list[tuple[str, Path]] = []
    for value in values:
        name, sep, file = value.partition("=")
        if not sep:
            name, file = "", value
        path = Path(file).expanduser()
        _load(path, option=value)
        if any(existing == name for existing, _ in files):
            raise UsageError(f"--calibration {value!r}: input {name or '<only input>'} is given twice")
        files.append((name, path))
    digest = hashlib.sha256()
    for name, path in files:
        digest.update(name.encode() + b"\0" + path.read_bytes() + b"\0")
    return CalibrationSpec(files=tuple(files), digest=digest.hexdigest() if files else "")


def _load(path: Path, *, option: str) -> np.ndarray:
    try:
        array = np.load(path, allow_pickle=False)
    except FileNotFoundError:
        raise UsageError(f"--calibration {option!r}: no such file: {path}") from None
    except (OSError, ValueError) as error:
        raise UsageError(
            f"--calibration {option!r}: {path} is not a .npy array numpy loads without pickles ({error})",
            hint="save each input's samples with numpy.save(path, array)",
        ) from None
    if not isinstance(array, np.ndarray) or array.dtype.kind not in "biuf":
        raise UsageError(f"--calibration {option!r}: {path} must hold a numeric array")
    return array


@dataclass(frozen=True, kw_only=True)
class InputMeta:
    name: str
    shape: tuple[int | None, ...]  # None = a free dimension
    dtype: type


def model_inputs(model_path: Path) -> list[InputMeta]:
    import onnx

    model = onnx.load(str(model_path), load_external_data=False)
    initializers = {init.name for init in model.graph.initializer}
    out = []
    for value in model.graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        dims = tuple(d.dim_value if d.dim_value > 0 else None for d in tensor.shape.dim)
        out.append(
            InputMeta(name=value.name, shape=dims, dtype=_ELEMENT_TYPES.get(tensor.elem_type, np.float32))
        )
    return out


def samples(spec: CalibrationSpec, inputs: Sequence[InputMeta], model: str) -> list[dict[str, np.ndarray]]:
    """The calibration samples as feeds (input name -> array of the input's shape)."""
    if spec.generated:
        return _generated(inputs)
    by_name: dict[str, Path] = {}
    for given, path in spec.files:
        if not given and len(inputs) != 1:
            raise UsageError(
                f"--calibration {path}: {model} has {len(inputs)} inputs "
                f"({', '.join(i.name for i in inputs)}): give NAME=FILE.npy for each"
            )
        by_name[given or inputs[0].name] = path  # no name: the model's only input
    missing = [meta.name for meta in inputs if meta.name not in by_name]
    unknown = [name for name in by_name if name not in {meta.name for meta in inputs}]
    if unknown or missing:
        raise UsageError(
            f"--calibration for {model}: "
            + (f"no input named {', '.join(unknown)}; " if unknown else "")
            + (f"no data for {', '.join(missing)}" if missing else "").rstrip("; "),
            hint=f"{model}'s inputs: {', '.join(i.name for i in inputs)}",
        )
    split = {meta.name: _split(meta, by_name[meta.name]) for meta in inputs}
    counts = {name: len(pieces) for name, pieces in split.items()}
    if len(set(counts.values())) != 1:
        raise UsageError(f"--calibration for {model}: the inputs hold different numbers of samples: {counts}")
    total = next(iter(counts.values()))
    return [{name: pieces[index] for name, pieces in split.items()} for index in range(total)]


def _split(meta: InputMeta, path: Path) -> list[np.ndarray]:
    array = _load(path, option=f"{meta.name}={path}")
    rank = len(meta.shape)
    batch = meta.shape[0] if rank and meta.shape[0] else 1
    if array.ndim == rank + 1:
        pieces = [array[i] for i in range(array.shape[0])]
    elif array.ndim == rank and rank and array.shape[0] % batch == 0:
        pieces = [array[i : i + batch] for i in range(0, array.shape[0], batch)]
    else:
        raise UsageError(
            f"--calibration {path}: shape {list(array.shape)} does not fit input {meta.name!r} "
            f"{_shown(meta.shape)}",
            hint="stack samples along a first axis: [samples, *input shape], or along the batch axis",
        )
    for piece in pieces:
        fixed = [(want, got) for want, got in zip(meta.shape, piece.shape, strict=False) if want is not None]
        if piece.ndim != rank or any(want != got for want, got in fixed):
            raise UsageError(
                f"--calibration {path}: a sample of shape {list(piece.shape)} does not fit input "
                f"{meta.name!r} {_shown(meta.shape)}"
            )
    return [piece.astype(meta.dtype) for piece in pieces]


def _shown(shape: tuple[int | None, ...]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def _generated(inputs: Sequence[InputMeta], count: int = GENERATED_SAMPLES) -> list[dict[str, np.ndarray]]:
    """Standard-normal floats (as the bench agent's timing inputs), small integers; free dims = 1."""
    rng = np.random.default_rng(0)
    out = []
    for _ in range(count):
        feeds: dict[str, np.ndarray] = {}
        for meta in inputs:
            shape = [d or 1 for d in meta.shape]
            if np.dtype(meta.dtype).kind == "f":
                feeds[meta.name] = rng.standard_normal(shape).astype(meta.dtype)
            elif np.dtype(meta.dtype).kind == "b":
                feeds[meta.name] = rng.integers(0, 2, size=shape).astype(bool)
            else:
                feeds[meta.name] = rng.integers(0, 8, size=shape).astype(meta.dtype)
        out.append(feeds)
    return out


def stacked(feeds: Sequence[Mapping[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Samples as one array per input (``[samples, *shape]``), for the board's agreement check."""
    return {name: np.stack([sample[name] for sample in feeds]) for name in feeds[0]} if feeds else {}
