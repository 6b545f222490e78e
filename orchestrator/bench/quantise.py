"""Dynamic int8 copies of a release's models, made on the workstation and pushed next to the fp32 model."""

from __future__ import annotations

import hashlib
import logging
import threading

from orchestrator.adapters.session import BoardSession
from orchestrator.bench import plan as bench_plan
from orchestrator.bench.plan import ReleaseRef
from orchestrator.errors import BenchError
from orchestrator.paths import orch_home

_quantize_lock = threading.Lock()


def quantized_copy(session: BoardSession, release: ReleaseRef, model_file: str) -> str:
    """Make ``<model>.int8.onnx`` next to the fp32 model in the release (quantised on the workstation,
    cached by the fp32 model's hash); returns the int8 file name."""
    int8 = bench_plan.int8_name(model_file)
    remote_int8 = release.model_path(int8)
    if session.stat(remote_int8):
        return int8
    cache = orch_home() / "cache" / "quantized"
    cache.mkdir(parents=True, exist_ok=True)
    download = cache / f"download-{threading.get_ident()}-{model_file}"
    session.get(release.model_path(model_file), download)
    digest = hashlib.sha256(download.read_bytes()).hexdigest()
    fp32 = cache / f"{digest}.onnx"
    quantized = cache / f"{digest}.dynamic-int8.onnx"
    download.replace(fp32)
    with _quantize_lock:  # one model quantised once, however many boards ask at the same time
        if not quantized.exists():
            from onnxruntime.quantization import QuantType, quantize_dynamic

            partial = quantized.with_suffix(".partial.onnx")
            root_logger = logging.getLogger()
            level = root_logger.level
            # The quantiser logs advice through the root logger; orch's output stays its own.
            root_logger.setLevel(logging.ERROR)
            try:
                quantize_dynamic(str(fp32), str(partial), weight_type=QuantType.QUInt8)
            except Exception as error:
                raise BenchError(f"cannot quantise {model_file}: {error}") from error
            finally:
                root_logger.setLevel(level)
            partial.replace(quantized)
    temporary = remote_int8 + ".partial"
    session.put(quantized, temporary)
    session.rename(temporary, remote_int8)
    return int8
