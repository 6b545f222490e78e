"""The operator set of a reduced build (``--variant reduced --model m.onnx``).

ORT's ``build.py --include_ops_by_config FILE`` keeps only the kernels a config file names; the
file's format is ORT's (``docs/Reduced_Operator_Kernel_build.md``): ``domain;opset;Op1,Op2``,
one line per domain and opset. The lines come from:

* every node of the user's models, subgraphs (If/Loop/Scan bodies) included;
* the same models as the workstation's onnxruntime optimises them at levels ``extended`` and
  ``all``: fusions insert operators the model does not name (``FusedConv``, ``FusedGemm``, the
  NHWC int8 kernels, ...), and a build without their kernels would fail the session the board
  creates with optimisations on. Both levels, because at ``all`` an x86 workstation turns
  ``Conv+Relu`` into its NCHWc kernels where an ARM board (no NCHWc in these releases) runs the
  ``extended`` level's ``FusedConv``;
* orch's pre-flight model, so the pre-flight still proves the wheel computes correctly.

Reads the model files, writes nothing but a temporary optimised copy; no Docker.
"""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from orchestrator.errors import UsageError
from orchestrator.lab.sample_models import preflight_model, write_model

if TYPE_CHECKING:
    import onnx

ONNX_DOMAIN = "ai.onnx"
# The graph optimisation levels whose fusions insert operators of their own.
OPTIMISED_LEVELS = ("extended", "all")


@dataclass(frozen=True, kw_only=True)
class ModelRef:
    path: str
    sha256: str


@dataclass(frozen=True, kw_only=True)
class OperatorConfig:
    """What a reduced build keeps: ORT's config text, and the models it was made from."""

    text: str
    models: tuple[ModelRef, ...]
    operators: int  # distinct (domain, operator) pairs

    @property
    def sha256(self) -> str:
        return hashlib.sha256(self.text.encode()).hexdigest()

    def as_dict(self) -> dict[str, object]:
        return {
            "models": [{"path": m.path, "sha256": m.sha256} for m in self.models],
            "operators": self.operators,
            "sha256": self.sha256,
            "text": self.text,
        }


def _load(path: Path) -> onnx.ModelProto:
    import onnx

    if not path.is_file():
        raise UsageError(f"--model {path}: no such file")
    try:
        return onnx.load(str(path), load_external_data=False)
    except Exception as error:  # noqa: BLE001 -- onnx raises protobuf, value and type errors alike
        raise UsageError(f"--model {path}: not an ONNX model ({type(error).__name__}: {error})") from None


def _graph_operators(graph: onnx.GraphProto) -> Iterable[tuple[str, str]]:
    import onnx

    for node in graph.node:
        yield node.domain or ONNX_DOMAIN, node.op_type
        for attribute in node.attribute:
            if attribute.type == onnx.AttributeProto.GRAPH:
                yield from _graph_operators(attribute.g)
            for subgraph in attribute.graphs:
                yield from _graph_operators(subgraph)


def _model_operators(model: onnx.ModelProto, found: dict[tuple[str, int], set[str]]) -> None:
    """Adds each operator under its domain's opset as the model imports it (ORT's own rule)."""
    import onnx

    opsets = {(entry.domain or ONNX_DOMAIN): entry.version for entry in model.opset_import}
    # Model-local functions are inlined by ORT: their nodes need kernels too.
    function_nodes = onnx.GraphProto(node=[node for function in model.functions for node in function.node])
    for graph in (model.graph, function_nodes):
        for domain, op_type in _graph_operators(graph):
            found.setdefault((domain, opsets.get(domain, 1)), set()).add(op_type)


def _optimised(model_path: Path, level: str, out: Path) -> onnx.ModelProto:
    """The model as the workstation's onnxruntime optimises it (CPU provider) at ``level``."""
    import onnx
    import onnxruntime

    options = onnxruntime.SessionOptions()
    options.graph_optimization_level = getattr(
        onnxruntime.GraphOptimizationLevel, f"ORT_ENABLE_{level.upper()}"
    )
    options.log_severity_level = 3  # not the warning that an x86-optimised model is x86-specific: known
    options.optimized_model_filepath = str(out)
    try:
        onnxruntime.InferenceSession(str(model_path), options, providers=["CPUExecutionProvider"])
    except Exception as error:  # noqa: BLE001 -- onnxruntime raises several unrelated types
        raise UsageError(
            f"--model {model_path}: the workstation's onnxruntime cannot load it: {error}",
            hint="a reduced build keeps only the operators of models onnxruntime can open",
        ) from None
    return onnx.load(str(out), load_external_data=False)


def operator_config(models: Sequence[Path]) -> OperatorConfig:
    """The config of a build that runs ``models`` (and orch's pre-flight model), at any
    optimisation level."""
    if not models:
        raise UsageError(
            "a reduced build needs the models it is for",
            hint="e.g. orch build --target rpi5 --variant reduced --model model.onnx (--model repeats)",
        )
    found: dict[tuple[str, int], set[str]] = {}
    with tempfile.TemporaryDirectory(prefix="orch-reduced-") as work:
        preflight = write_model(preflight_model(), Path(work, "preflight.onnx"))
        for index, path in enumerate([*models, preflight]):
            _model_operators(_load(path), found)
            for level in OPTIMISED_LEVELS:
                _model_operators(_optimised(path, level, Path(work, f"{index}-{level}.onnx")), found)
    refs = [ModelRef(path=str(path), sha256=hashlib.sha256(path.read_bytes()).hexdigest()) for path in models]
    lines = [
        "# Operators kept by orch's reduced build, ORT's --include_ops_by_config format.",
        "# From: " + ", ".join(Path(ref.path).name for ref in refs) + " (as given and optimised at"
        f" levels {' and '.join(OPTIMISED_LEVELS)}), and orch's pre-flight model.",
    ]
    lines += [f"{domain};{opset};{','.join(sorted(ops))}" for (domain, opset), ops in sorted(found.items())]
    pairs = {(domain, op) for (domain, _), ops in found.items() for op in ops}
    return OperatorConfig(text="\n".join(lines) + "\n", models=tuple(refs), operators=len(pairs))
