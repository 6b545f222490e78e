"""int8 copies of a release's models, made on the workstation and pushed next to the fp32 model.

``dynamic``: ``quantize_dynamic`` (uint8 weights, activations quantised at run time).
``static``: ``quantize_static`` in the QDQ format with int8 activations and int8 weights (S8S8),
per-channel weights, MinMax calibration on the user's ``.npy`` inputs (or generated ones, with a
warning): what onnxruntime's quantisation guide recommends for ARM CPUs (S8S8 with QDQ uses the
SDOT/UDOT kernels on cores with dot product; S8U8 is to be avoided there). Then both models run
the calibration samples on the board (``board_side/quant_agreement.py``): max and mean absolute
difference per output and, for a classifier's output, top-1 agreement.

Quantised models are cached by the fp32 model's hash (and the calibration data's digest); the
file on the board is named after both, so other calibration data makes another int8 model.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from orchestrator.adapters.session import BoardSession
from orchestrator.bench import calibration, reading
from orchestrator.bench.plan import QuantizeMode, ReleaseRef, int8_name
from orchestrator.bench.records import Agreement, CalibrationRecord, QuantisedRecord
from orchestrator.board_side import read_text
from orchestrator.errors import BenchError
from orchestrator.paths import orch_home

_quantize_lock = threading.Lock()
INT8_TYPES = {3: "int8", 2: "uint8"}  # TensorProto element types


@dataclass(frozen=True, kw_only=True)
class Quantised:
    """What was measured against the fp32 model, and how it was made."""

    int8_file: str
    mode: QuantizeMode
    calibration: CalibrationRecord = field(default_factory=CalibrationRecord)
    ops: dict[str, int] = field(default_factory=dict)  # quantisation operators in the int8 graph
    agreement: Agreement | None = None
    warnings: tuple[str, ...] = ()

    def as_dict(self) -> QuantisedRecord:
        return {
            "int8_file": self.int8_file,
            "mode": self.mode,
            "calibration": self.calibration,
            "ops": self.ops,
            "agreement": self.agreement,
            "warnings": list(self.warnings),
        }


def _quiet_root_logger() -> int:
    """The quantiser logs advice through the root logger; orch's output stays its own."""
    root_logger = logging.getLogger()
    level = root_logger.level
    root_logger.setLevel(logging.ERROR)
    return level


def quantisation_ops(path: Path) -> dict[str, int]:
    """Operators that only a quantised graph has, and the 8-bit initializers (weights) it holds."""
    import onnx

    model = onnx.load(str(path))
    counted = Counter(
        node.op_type
        for node in model.graph.node
        if node.op_type in {"QuantizeLinear", "DequantizeLinear", "DynamicQuantizeLinear"}
        or node.op_type.startswith("QLinear")
        or node.op_type.endswith("Integer")
    )
    for init in model.graph.initializer:
        if init.data_type in INT8_TYPES and len(init.dims) >= 1:
            counted[f"{INT8_TYPES[init.data_type]} initializers"] += 1
    return dict(sorted(counted.items()))


def quantise_static(fp32: Path, out: Path, feeds: Sequence[dict[str, np.ndarray]]) -> None:
    """QDQ, int8 activations and weights, per-channel weights, MinMax calibration."""
    from onnxruntime.quantization import CalibrationDataReader, QuantFormat, QuantType, quantize_static

    class Reader(CalibrationDataReader):  # type: ignore[misc]  # onnxruntime ships no type hints
        def __init__(self) -> None:
            self._iter: Iterator[dict[str, np.ndarray]] = iter(feeds)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self._iter, None)

    quantize_static(
        str(fp32),
        str(out),
        Reader(),
        quant_format=QuantFormat.QDQ,
        activation_type=QuantType.QInt8,
        weight_type=QuantType.QInt8,
        per_channel=True,
    )


def quantized_copy(
    session: BoardSession,
    release: ReleaseRef,
    model_file: str,
    mode: QuantizeMode = "dynamic",
    spec: calibration.CalibrationSpec | None = None,
) -> Quantised:
    """Make the int8 copy next to the fp32 model in the release (quantised on the workstation,
    cached by the fp32 model's hash); for ``static`` also measure fp32/int8 agreement on the board."""
    spec = spec or calibration.CalibrationSpec()
    int8 = int8_name(model_file, mode, spec.id)
    remote_int8 = release.model_path(int8)
    cache = orch_home() / "cache" / "quantized"
    cache.mkdir(parents=True, exist_ok=True)
    if mode == "dynamic" and session.stat(remote_int8):
        return Quantised(int8_file=int8, mode=mode)
    fp32 = _fetch_fp32(session, release.model_path(model_file), cache, model_file)
    digest = fp32.stem
    stem = f"{digest}.dynamic" if mode == "dynamic" else f"{digest}.static-{spec.id}"
    quantized = cache / f"{stem}-int8.onnx"
    warnings: list[str] = []
    feeds: list[dict[str, np.ndarray]] = []
    if mode == "static":
        feeds = calibration.samples(spec, calibration.model_inputs(fp32), model_file)
        if spec.generated:
            warnings.append(calibration.GENERATED_WARNING)
    _quantise_once(fp32, quantized, mode, feeds, model_file)
    if not session.stat(remote_int8):
        temporary = remote_int8 + ".partial"
        session.put(quantized, temporary)
        session.rename(temporary, remote_int8)
    ops = quantisation_ops(quantized)
    if mode != "static":
        return Quantised(int8_file=int8, mode=mode, ops=ops)
    samples = _samples_file(cache / f"{stem}-samples.npz", feeds)
    agreement = _agreement(session, release, model_file, int8, samples)
    return Quantised(
        int8_file=int8,
        mode=mode,
        calibration={**spec.as_dict(), "samples": len(feeds)},
        ops=ops,
        agreement=agreement,
        warnings=tuple(warnings),
    )


def _fetch_fp32(session: BoardSession, remote: str, cache: Path, model_file: str) -> Path:
    """The board's fp32 model, in the cache as ``<sha256>.onnx``."""
    download = cache / f"download-{threading.get_ident()}-{model_file}"
    session.get(remote, download)
    digest = hashlib.sha256(download.read_bytes()).hexdigest()
    fp32 = cache / f"{digest}.onnx"
    download.replace(fp32)
    return fp32


def _quantise_once(
    fp32: Path, quantized: Path, mode: QuantizeMode, feeds: Sequence[dict[str, np.ndarray]], model_file: str
) -> None:
    """Quantise ``fp32`` into ``quantized`` unless it is there: one model quantised once, however many
    boards ask at the same time."""
    with _quantize_lock:
        if quantized.exists():
            return
        partial = quantized.with_suffix(".partial.onnx")
        level = _quiet_root_logger()
        try:
            if mode == "static":
                quantise_static(fp32, partial, feeds)
            else:
                from onnxruntime.quantization import QuantType, quantize_dynamic

                quantize_dynamic(str(fp32), str(partial), weight_type=QuantType.QUInt8)
        except BenchError:
            raise
        except Exception as error:
            raise BenchError(f"cannot quantise {model_file} ({mode}): {error}") from error
        finally:
            logging.getLogger().setLevel(level)
        partial.replace(quantized)


def _samples_file(local: Path, feeds: Sequence[dict[str, np.ndarray]]) -> Path:
    """The calibration samples as one .npz on the workstation (written once), for the board."""
    if not local.exists():
        partial = local.with_suffix(".partial.npz")
        with partial.open("wb") as handle:
            np.savez(handle, allow_pickle=False, **calibration.stacked(feeds))
        partial.replace(local)
    return local


def _agreement(
    session: BoardSession, release: ReleaseRef, model_file: str, int8: str, local: Path
) -> Agreement:
    """fp32 vs int8 on the board's CPU, on the calibration samples (``local``: their .npz)."""
    remote_samples = release.model_path(int8.removesuffix(".onnx") + ".samples.npz")
    if not session.stat(remote_samples):
        session.put(local, remote_samples + ".partial")
        session.rename(remote_samples + ".partial", remote_samples)
    result = session.run(
        [
            release.python,
            "-c",
            read_text("quant_agreement.py"),
            release.model_path(model_file),
            release.model_path(int8),
            remote_samples,
        ],
        timeout=1800,
        check=False,
    )
    try:
        document = json.loads(result.stdout.strip().splitlines()[-1])
    except (json.JSONDecodeError, IndexError):
        document = None
    if not isinstance(document, dict) or not document.get("ok"):
        why = document.get("error") if isinstance(document, dict) else result.tail(3)
        raise BenchError(f"{session.board.name}: fp32/int8 agreement of {model_file} failed: {why}")
    try:
        return reading.agreement(document, f"the fp32/int8 agreement of {model_file}")
    except reading.Malformed as error:
        raise BenchError(f"{session.board.name}: {error}") from None
