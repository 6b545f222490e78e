"""Typed reads from a JSON object that orch stored: every error names the file and the key.

A stored record (an artifact's ``manifest.json``, a sysroot's ``sysroot.json`` and the sysroot
index, verify's ``cases.json``) is read back in one place, its ``from_json``, through
``JsonFields``: each read says what the key must hold (``required_text``, ``integer``,
``texts``...) and a value of another kind, or a missing required key, raises the record's own
error (``ManifestError``, ``UsageError``...) naming the file and the key, with what to do.
Keys no read asked for are kept (``rest``): a newer orch's keys survive being read and written
back by an older one.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from orchestrator.errors import OrchError

Choice = TypeVar("Choice", bound=str)


@dataclass(frozen=True, kw_only=True)
class JsonSource:
    """Where a document came from and how its problems are reported."""

    where: str  # the file (or "<board>: <file>"), first in every message
    error: type[OrchError]
    hint: str  # said with a missing key or a value of the wrong kind
    not_object_hint: str  # said when the document (or a part of it) is not a JSON object
    whole: str = "the file"  # how the messages name the document itself ("the manifest")


def kind_of(value: object) -> str:
    """A JSON value's kind, as a message names it."""
    names = {dict: "an object", list: "a list", str: "a string", bool: "true/false", type(None): "null"}
    return names.get(type(value), "a number" if isinstance(value, (int, float)) else type(value).__name__)


def load_fields(path: Path, source: JsonSource) -> JsonFields:
    """A stored file's JSON object to read from; a file that is not JSON is the source's error."""
    try:
        document = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise source.error(f"{source.where}: not valid JSON: {error}", hint=source.not_object_hint) from error
    return JsonFields(document, source)


class JsonFields:
    """Typed reads from one JSON object of a stored document (``prefix``: where it sits in it)."""

    def __init__(self, document: object, source: JsonSource, prefix: str = "") -> None:
        if not isinstance(document, dict):
            what = f"key '{prefix.rstrip('.')}'" if prefix else source.whole
            raise source.error(
                f"{source.where}: {what} must be a JSON object, not {kind_of(document)}",
                hint=source.not_object_hint,
            )
        self.document: dict[str, object] = document
        self.source = source
        self.prefix = prefix
        self.used: set[str] = set()

    @property
    def where(self) -> str:
        return self.source.where

    def problem(self, message: str, *, hint: str | None = None) -> OrchError:
        """The document's own error, naming the file first."""
        return self.source.error(f"{self.where}: {message}", hint=hint or self.source.hint)

    def bad(self, key: str, wanted: str, value: object) -> OrchError:
        return self.problem(f"key '{self.prefix}{key}' must be {wanted}, not {kind_of(value)}")

    def _get(self, key: str) -> object:
        self.used.add(key)
        return self.document.get(key)

    def _require(self, key: str) -> object:
        if key not in self.document:
            raise self.problem(f"missing key '{self.prefix}{key}'")
        return self._get(key)

    def required_text(self, key: str) -> str:
        value = self._require(key)
        if not isinstance(value, str) or not value:
            raise self.bad(key, "a non-empty string", value)
        return value

    def required_flag(self, key: str) -> bool:
        value = self._require(key)
        if not isinstance(value, bool):
            raise self.bad(key, "true or false", value)
        return value

    def required_integer(self, key: str) -> int:
        self._require(key)
        value = self.integer(key)
        if value is None:
            raise self.bad(key, "an integer", None)
        return value

    def required_number(self, key: str) -> float:
        self._require(key)
        value = self.number(key)
        if value is None:
            raise self.bad(key, "a number", None)
        return value

    def text(self, key: str) -> str | None:
        value = self._get(key)
        if value is not None and not isinstance(value, str):
            raise self.bad(key, "a string", value)
        return value

    def integer(self, key: str) -> int | None:
        value = self._get(key)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise self.bad(key, "an integer", value)
        return value

    def number(self, key: str) -> float | None:
        value = self._get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self.bad(key, "a number", value)
        return float(value)

    def flag(self, key: str) -> bool | None:
        value = self._get(key)
        if value is not None and not isinstance(value, bool):
            raise self.bad(key, "true or false", value)
        return value

    def texts(self, key: str) -> tuple[str, ...] | None:
        value = self._get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise self.bad(key, "a list of strings", value)
        return tuple(value)

    def text_maps(self, key: str) -> tuple[dict[str, str], ...] | None:
        value = self._get(key)
        if value is None:
            return None
        if not isinstance(value, list) or not all(
            isinstance(item, dict) and all(isinstance(v, str) for v in item.values()) for item in value
        ):
            raise self.bad(key, "a list of objects of strings", value)
        return tuple(value)

    def text_map(self, key: str) -> dict[str, str] | None:
        """A JSON object of strings (``{"lib/libx.so": "<sha256>"}``)."""
        value = self._get(key)
        if value is None:
            return None
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            raise self.bad(key, "an object of strings", value)
        return dict(value)

    def choice(self, key: str, choices: Sequence[Choice]) -> Choice | None:
        """One of ``choices`` (a Literal's values), or None when the key is absent."""
        value = self._get(key)
        if value is None:
            return None
        found = next((choice for choice in choices if choice == value), None)
        if found is None:
            raise self.bad(key, " or ".join(choices), value)
        return found

    def document_value(self, key: str) -> dict[str, object] | None:
        """A JSON object kept as a document (a tool's report orch only stores and prints)."""
        value = self._get(key)
        if value is not None and not isinstance(value, dict):
            raise self.bad(key, "a JSON object", value)
        return value

    def child(self, key: str) -> JsonFields | None:
        """The object under ``key`` (None when absent), whose errors name ``key.<its key>``."""
        value = self._get(key)
        return None if value is None else JsonFields(value, self.source, f"{self.prefix}{key}.")

    def required_child(self, key: str) -> JsonFields:
        return JsonFields(self._require(key), self.source, f"{self.prefix}{key}.")

    def children(self, key: str) -> tuple[JsonFields, ...]:
        """A required list of objects, each read on its own (``key[3].name`` in an error)."""
        value = self._require(key)
        if not isinstance(value, list):
            raise self.bad(key, "a list", value)
        return tuple(
            JsonFields(item, self.source, f"{self.prefix}{key}[{index}].") for index, item in enumerate(value)
        )

    def rest(self) -> dict[str, object]:
        """The keys no read asked for: kept as they are."""
        return {k: v for k, v in self.document.items() if k not in self.used}
