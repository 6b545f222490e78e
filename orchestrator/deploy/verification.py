"""The deploy verification's report, parsed once from the board's output into dataclasses.

``board_side/verify_release.py`` runs on the board with the release's interpreter and prints one
JSON document (see its docstring). ``parse_verification`` turns that line into a ``Verification``;
``Verification.problems`` says what does not match the release that was meant to be current.
A release of a C library build (no Python) is verified by its native runner instead
(``native_verification``): the same ``Verification``, marked ``native`` (``"runner": "native"``).
Keys the board prints that are not fields here are ignored: the script is sent by this orch with
every run, so both sides agree on the format. ``as_dict`` gives the same document back for
``--json``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TypedDict, TypeVar

from orchestrator.errors import DeployError

T = TypeVar("T")


class _ModelCheckKeys(TypedDict):
    ok: bool


class ModelCheckDocument(_ModelCheckKeys, total=False):
    """One model's check as the board prints it and ``--json`` and ``verified.json`` keep it."""

    load_ms: float
    run_ms: float
    outputs: list[list[int]]  # the shape of each output (present once it ran)
    error: str


class _VerificationKeys(TypedDict):
    ok: bool


class VerificationDocument(_VerificationKeys, total=False):
    """The verification's report: printed by ``board_side/verify_release.py``, kept in a release's
    ``verified.json`` and printed by ``--json``."""

    error: str
    version: str
    file: str
    build_info: str
    providers: list[str]  # present once onnxruntime imported
    models: dict[str, ModelCheckDocument]
    runner: str  # "native": the native runner's report (a C library build's release)


@dataclass(frozen=True, kw_only=True)
class ModelCheck:
    """One model's inference on the board: loaded and ran with finite outputs, or why not."""

    ok: bool
    error: str | None = None
    load_ms: float | None = None
    run_ms: float | None = None
    outputs: tuple[tuple[int, ...], ...] = ()  # the shape of each output

    def as_dict(self) -> ModelCheckDocument:
        document = ModelCheckDocument(ok=self.ok)
        if self.load_ms is not None:
            document["load_ms"] = self.load_ms
        if self.run_ms is not None:
            document["run_ms"] = self.run_ms
        if self.load_ms is not None:  # it ran: the shapes of what it returned
            document["outputs"] = [list(shape) for shape in self.outputs]
        if self.error is not None:
            document["error"] = self.error
        return document


@dataclass(frozen=True, kw_only=True)
class Verification:
    """What the board's onnxruntime reported: where it was imported from, and every model's run."""

    ok: bool
    error: str | None = None  # the import failed (nothing else is known then)
    version: str | None = None
    file: str | None = None  # where onnxruntime was imported from (real path)
    build_info: str | None = None
    providers: tuple[str, ...] = ()
    models: Mapping[str, ModelCheck] = field(default_factory=dict)
    # Reported by the native runner: ``version`` is the C library's it loaded, ``file`` that library.
    native: bool = False

    def problems(
        self, *, expected_version: str, release_dir: str | None, expected_build_info: str | None
    ) -> list[str]:
        """What does not match the release meant to be current (empty: verified)."""
        if self.native:
            return self._native_problems(expected_version=expected_version, release_dir=release_dir)
        found = []
        if not self.ok:
            failed = [f"{name}: {m.error}" for name, m in self.models.items() if not m.ok]
            found.append(self.error or "; ".join(failed))
        if self.version and self.version != expected_version:
            found.append(f"onnxruntime reports version {self.version}, expected {expected_version}")
        if release_dir and self.file and not self.file.startswith(release_dir + "/"):
            found.append(f"onnxruntime was imported from {self.file}, not from the release {release_dir}")
        if expected_build_info and self.build_info != expected_build_info:
            found.append("onnxruntime's build info differs from the build manifest's")
        return found

    def _native_problems(self, *, expected_version: str, release_dir: str | None) -> list[str]:
        """A C library release: every model ran, the library loaded is the artifact's release and
        the release's own (not one the board's loader found elsewhere)."""
        found = []
        failed = [f"{name}: {m.error}" for name, m in self.models.items() if not m.ok]
        if not self.ok or failed:
            found.append(
                "; ".join(part for part in (self.error, *failed) if part) or "the native runner failed"
            )
        if self.version is None:
            found.append("the native runner reported no ONNX Runtime version (its library did not load)")
        elif self.version != expected_version:
            found.append(f"the native runner loaded ONNX Runtime {self.version}, expected {expected_version}")
        if release_dir and self.version is not None and not (self.file or "").startswith(release_dir + "/"):
            found.append(
                f"the native runner loaded {self.file or 'a library it could not name'},"
                f" not the release's own (under {release_dir})"
            )
        return found

    def as_dict(self) -> VerificationDocument:
        document = VerificationDocument(ok=self.ok)
        if self.error is not None:
            document["error"] = self.error
        if self.version is not None:
            document["version"] = self.version
        if self.file is not None:
            document["file"] = self.file
        if self.build_info is not None:
            document["build_info"] = self.build_info
        if self.version is not None:  # onnxruntime imported: it listed its providers
            document["providers"] = list(self.providers)
        if self.models or self.error is None:
            document["models"] = {name: m.as_dict() for name, m in self.models.items()}
        if self.native:
            document["runner"] = "native"
        return document


def parse_verification(line: str, *, where: str) -> Verification:
    """The report line printed by verify_release.py; ``where`` ("<board>: verification of <id>")
    starts the DeployError of a line that is not such a report."""
    try:
        document = json.loads(line)
    except json.JSONDecodeError as error:
        raise DeployError(f"{where}: the board's report is not JSON ({error}): {line[:200]}") from error
    report = _object(document, "the report", where)
    models = _object(report.get("models", {}), "models", where)
    return Verification(
        ok=_required(report, "ok", bool, where),
        error=_optional(report, "error", str, where),
        version=_optional(report, "version", str, where),
        file=_optional(report, "file", str, where),
        build_info=_optional(report, "build_info", str, where),
        providers=tuple(_strings(report.get("providers", []), "providers", where)),
        models={name: _model(value, f"models.{name}", where) for name, value in models.items()},
        native=report.get("runner") == "native",
    )


def _model(value: object, key: str, where: str) -> ModelCheck:
    model = _object(value, key, where)
    outputs = model.get("outputs", [])
    if not isinstance(outputs, list) or not all(
        isinstance(shape, list) and all(isinstance(d, int) for d in shape) for shape in outputs
    ):
        raise _malformed(where, f"{key}.outputs", "a list of shapes")
    return ModelCheck(
        ok=_required(model, "ok", bool, where, key),
        error=_optional(model, "error", str, where, key),
        load_ms=_number(model, "load_ms", where, key),
        run_ms=_number(model, "run_ms", where, key),
        outputs=tuple(tuple(shape) for shape in outputs),
    )


def _malformed(where: str, key: str, wanted: str) -> DeployError:
    return DeployError(f"{where}: the board's report is malformed: '{key}' must be {wanted}")


def _object(value: object, key: str, where: str) -> dict[str, object]:
    if not isinstance(value, dict):
        raise _malformed(where, key, "a JSON object")
    return value


def _strings(value: object, key: str, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise _malformed(where, key, "a list of strings")
    return value


_KINDS = {bool: "true or false", str: "a string"}


def _optional(
    document: Mapping[str, object], key: str, kind: type[T], where: str, parent: str = ""
) -> T | None:
    value = document.get(key)
    if value is not None and not isinstance(value, kind):
        raise _malformed(where, f"{parent}.{key}" if parent else key, _KINDS.get(kind, kind.__name__))
    return value


def _required(document: Mapping[str, object], key: str, kind: type[T], where: str, parent: str = "") -> T:
    value = document.get(key)
    name = f"{parent}.{key}" if parent else key
    if value is None:
        raise DeployError(f"{where}: the board's report is malformed: '{name}' is missing")
    if not isinstance(value, kind):
        raise _malformed(where, name, _KINDS.get(kind, kind.__name__))
    return value


def _number(document: Mapping[str, object], key: str, where: str, parent: str) -> float | None:
    value = document.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _malformed(where, f"{parent}.{key}", "a number")
    return float(value)
