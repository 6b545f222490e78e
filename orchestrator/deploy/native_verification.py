"""How a release of a C library build (no Python) is verified before the switch: its native runner
runs one inference of each of the release's models, by the release's own paths, and what it
printed becomes the same ``Verification`` a wheel's release gets (``native``). This module reads
what the runner returned (the session's ``CommandResult``, hence apart from the pure plan): the
command is ``native_verify_command``'s, and ``native_steps`` runs it on the board.

The runner prints one JSON document per process (schema ``orch-native-runner/1``, see
``board_side/native_runner.c``): ``ort.version`` (the release of the library it loaded),
``ort.library`` (where the loader found it), ``ok``, and when it failed ``stage`` and ``error``.
The release is verified only when every model ran, the version is the artifact's and the library
is the release's own (``Verification.problems``): a libonnxruntime.so.1 elsewhere on the board
(``/usr/lib``, an ``LD_LIBRARY_PATH``) must not pass for it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

from orchestrator.adapters.session import CommandResult
from orchestrator.builds.native_runner.plan import RUNNER_SCHEMA
from orchestrator.deploy.verification import ModelCheck, Verification


def _document(result: CommandResult) -> dict[str, object] | None:
    """The last JSON line the runner printed, when it is a runner document."""
    lines = [line for line in result.stdout.splitlines() if line.startswith("{")]
    try:
        document = json.loads(lines[-1]) if lines else None
    except json.JSONDecodeError:
        return None
    if not isinstance(document, dict) or document.get("schema") != RUNNER_SCHEMA:
        return None
    return document


def _text(document: Mapping[str, object], section: str, key: str) -> str | None:
    part = document.get(section)
    value = part.get(key) if isinstance(part, dict) else None
    return value if isinstance(value, str) else None


def _number(document: Mapping[str, object], key: str) -> float | None:
    timing = document.get("timing")
    value = timing.get(key) if isinstance(timing, dict) else None
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _model_check(result: CommandResult, document: dict[str, object] | None) -> ModelCheck:
    if document is None:
        tail = " | ".join((result.stderr or result.stdout).strip().splitlines()[-3:])
        return ModelCheck(
            ok=False,
            error=f"the native runner exited {result.exit_code} without a result"
            + (f": {tail}" if tail else ""),
        )
    if document.get("ok") is not True:
        stage, error = document.get("stage") or "runner", document.get("error") or "no reason given"
        return ModelCheck(ok=False, error=f"{stage}: {error}")
    session_s = _number(document, "session_create_s")
    return ModelCheck(
        ok=True,
        load_ms=round(session_s * 1000, 2) if session_s is not None else None,
        run_ms=_number(document, "first_inference_ms"),
        # The runner reports the model's declared output shapes (some symbolic), not what it computed.
        outputs=(),
    )


def native_verification(results: Mapping[str, CommandResult]) -> Verification:
    """The verification of a C library release from the runner's run of each model (model file
    name -> what its command returned): every model's check, and the library that was loaded."""
    if not results:
        return Verification(
            ok=False, error="no model to run: the runner proves nothing without one", native=True
        )
    models: dict[str, ModelCheck] = {}
    loaded: dict[tuple[str | None, str | None], list[str]] = {}
    providers: tuple[str, ...] = ()
    for name, result in results.items():
        document = _document(result)
        models[name] = _model_check(result, document)
        version = _text(document, "ort", "version") if document else None
        if version is not None:
            loaded.setdefault((version, _text(document or {}, "ort", "library")), []).append(name)
        session = (document or {}).get("session")
        found = session.get("providers") if isinstance(session, dict) else None
        if not providers and isinstance(found, list):
            providers = tuple(str(p) for p in found)
    error = None
    if len(loaded) > 1:  # one release, one library: anything else is a board that mixes them
        error = "the native runner loaded different libraries for different models: " + "; ".join(
            f"{version} from {library} ({', '.join(names)})" for (version, library), names in loaded.items()
        )
    version, library = next(iter(loaded), (None, None))
    return Verification(
        ok=error is None and all(check.ok for check in models.values()),
        error=error,
        version=version,
        file=library,
        providers=providers,
        models=models,
        native=True,
    )
