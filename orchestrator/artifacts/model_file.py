"""Is this file an ONNX model? Asked on the workstation, before anything is planned or sent.

A ``--model`` value (and each of deploy's default models, ``./models/*.onnx``) that is a directory,
a device (``/dev/zero``), a pipe, random bytes or an empty file is refused by name, in ``--dry-run``
too, instead of being uploaded to a board, read until memory runs out, or reported as "not found".

Two checks: the file's outer structure is walked as the protobuf message an ONNX ``ModelProto`` is
(every field well formed, lengths inside the file, the model's version and graph present), reading
only field headers, whatever the file's size; then a file of reasonable size is parsed whole by the
onnx package, as the board will parse it.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import BinaryIO

# Parsed whole up to this size (memory: about twice the file); larger models get the structure walk.
PARSE_LIMIT = 256 << 20
# ModelProto's fields (onnx.proto) and their protobuf wire types: 0 varint, 2 length-delimited.
_MODEL_FIELDS = {1: 0, 2: 2, 3: 2, 4: 2, 5: 0, 6: 2, 7: 2, 8: 2, 14: 2, 20: 2, 25: 2}
_IR_VERSION, _GRAPH = 1, 7
_NOT_ONNX = "not an ONNX model"


def onnx_file_problem(path: Path) -> str | None:
    """Why ``path`` is not an ONNX model file (None when it is one)."""
    problem = _kind_problem(path)
    if problem:
        return problem
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            problem = _structure_problem(handle, size) if size else "an empty file"
            if problem is None and size <= PARSE_LIMIT:
                handle.seek(0)
                problem = _parse_problem(handle.read(size + 1))
    except OSError as error:
        return f"cannot read it: {error.strerror or error}"
    return f"{_NOT_ONNX} ({problem})" if problem else None


def _kind_problem(path: Path) -> str | None:
    """Only a regular file can be a model: a directory, pipe or device is refused before it is opened."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        return "no such file"
    except OSError as error:
        return f"cannot read it: {error.strerror or error}"
    if stat.S_ISDIR(mode):
        return "is a directory, not an ONNX model file"
    if not stat.S_ISREG(mode):
        kind = "a named pipe (FIFO)" if stat.S_ISFIFO(mode) else "a device or socket"
        return f"is {kind}, not an ONNX model file"
    return None


def _varint(handle: BinaryIO) -> int | None:
    value = shift = 0
    while shift < 64:
        byte = handle.read(1)
        if not byte:
            return None
        value |= (byte[0] & 0x7F) << shift
        if byte[0] < 0x80:
            return value
        shift += 7
    return None


def _structure_problem(handle: BinaryIO, size: int) -> str | None:
    """The file walked as a ModelProto's fields: headers read, bodies skipped."""
    seen: set[int] = set()
    while handle.tell() < size:
        at = handle.tell()
        tag = _varint(handle)
        number, wire = (tag >> 3, tag & 7) if tag is not None else (0, 0)
        expected = _MODEL_FIELDS.get(number)
        if number == 0 or (expected is not None and wire != expected):
            return f"no ONNX model field at byte {at}"
        if not _skip_value(handle, wire, size):
            return f"the field at byte {at} runs past the end of the file"
        seen.add(number)
    if _IR_VERSION not in seen or _GRAPH not in seen:
        return "no IR version or no graph"
    return None


def _skip_value(handle: BinaryIO, wire: int, size: int) -> bool:
    """Past one field's value; False when it does not end inside the file (or is no protobuf value)."""
    if wire == 0:
        return _varint(handle) is not None
    if wire == 2:
        length = _varint(handle)
        if length is None or handle.tell() + length > size:
            return False
        handle.seek(length, os.SEEK_CUR)
        return True
    if wire in (1, 5):
        handle.seek(8 if wire == 1 else 4, os.SEEK_CUR)
        return handle.tell() <= size
    return False


def _parse_problem(data: bytes) -> str | None:
    import onnx  # heavy: imported only when a --model file is given

    try:
        model = onnx.load_model_from_string(data)
    except Exception as error:  # noqa: BLE001 -- protobuf's DecodeError (its module has no type stubs here)
        return f"it does not parse: {type(error).__name__}"
    if model.ir_version <= 0 or len(model.graph.node) == 0:
        return "it parses, but holds no graph to run"
    return None
