"""Case generation: ONNX's node cases from the installed onnx, written as .onnx + .npy that the
board-side runner reads back with nothing but numpy (no pickles, no ml_dtypes)."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from orchestrator.errors import VerifyError
from orchestrator.verify import cases
from orchestrator.verify.reference import ensure_reference


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> cases.Generated:
    return cases.node_cases(tmp_path_factory.mktemp("verify-cache"))


@pytest.fixture(scope="module")
def onnx_cases() -> dict[str, object]:
    return {case.name: case for case in cases.collect_node_cases()}


def test_hundreds_of_node_cases_are_written_with_onnx_tolerances(generated: cases.Generated) -> None:
    assert len(generated.cases) >= 1000
    assert generated.onnx_version == onnx.__version__
    names = [case.name for case in generated.cases]
    assert names == sorted(names) and len(set(names)) == len(names)
    # ONNX's backend runner uses rtol 1e-3 and atol 1e-7 for node cases.
    assert {(case.rtol, case.atol) for case in generated.cases} == {(1e-3, 1e-7)}
    document = json.loads((generated.directory / cases.CASES_FILE).read_text())
    assert document["schema"] == cases.SCHEMA and len(document["cases"]) == len(generated.cases)
    # What .npy cannot carry is counted, never silently dropped.
    assert sum(generated.skipped.values()) > 0
    assert all(reason and count > 0 for reason, count in generated.skipped.items())


def test_a_case_reads_back_identical_without_pickles(
    generated: cases.Generated, onnx_cases: dict[str, object]
) -> None:
    written = {case.name: case for case in generated.cases}
    for name in (
        "test_abs",
        "test_add_bcast",
        "test_argmax_default_axis_example",
        "test_conv_with_strides_padding",
    ):
        case = written[name]
        original = onnx_cases[name]
        inputs, outputs = original.data_sets[0]  # type: ignore[attr-defined]
        for (_, file), want in zip(case.inputs, inputs, strict=True):
            np.testing.assert_array_equal(np.load(generated.directory / file, allow_pickle=False), want)
        for (_, file), want in zip(case.outputs, outputs, strict=True):
            got = np.load(generated.directory / file, allow_pickle=False)
            assert got.dtype == want.dtype
            np.testing.assert_array_equal(got, want)
        model = onnx.load(str(generated.directory / case.model))
        assert [n.op_type for n in model.graph.node] == [n.op_type for n in original.model.graph.node]  # type: ignore[attr-defined]
        assert case.op == model.graph.node[0].op_type


def test_cases_numpy_cannot_hold_are_left_out_with_their_reason(
    generated: cases.Generated, onnx_cases: dict[str, object]
) -> None:
    written = {case.name for case in generated.cases}
    # bfloat16 inputs need ml_dtypes; a sequence input is no tensor: neither can reach a board as .npy.
    assert "test_cast_FLOAT_to_BFLOAT16" in onnx_cases and "test_cast_FLOAT_to_BFLOAT16" not in written
    assert "test_sequence_insert_at_back" in onnx_cases and "test_sequence_insert_at_back" not in written
    assert generated.skipped["element type numpy lacks (bfloat16, float8, int4, float4)"] >= 50
    assert generated.skipped["sequence, optional or map values"] >= 5


def test_string_tensors_become_unicode_arrays_and_odd_types_are_refused() -> None:
    text = cases.plain_array(np.array([b"caf\xc3\xa9", "x"], dtype=object))
    assert text is not None and text.dtype.kind == "U" and text.tolist() == ["café", "x"]
    assert cases.plain_array(np.array([b"\xff"], dtype=object)) is None  # not UTF-8
    assert cases.plain_array([np.zeros(2)]) is None  # a sequence
    bf16 = helper.make_tensor("x", TensorProto.BFLOAT16, [2], [1.0, 2.0])
    assert cases.plain_array(bf16) is None
    floats = cases.plain_array(helper.make_tensor("y", TensorProto.FLOAT, [2], [1.0, 2.0]))
    assert floats is not None and floats.tolist() == [1.0, 2.0]


def test_generation_is_cached_and_the_digest_follows_the_content(
    generated: cases.Generated, tmp_path: Path
) -> None:
    again = cases.node_cases(generated.directory.parent)
    assert again.cases == generated.cases and again.skipped == generated.skipped
    tree = tmp_path / "tree"
    (tree / "a").mkdir(parents=True)
    (tree / "a" / "x.npy").write_bytes(b"1")
    first = cases.tree_digest(tree)
    assert cases.tree_digest(tree) == first
    (tree / "a" / "x.npy").write_bytes(b"2")
    assert cases.tree_digest(tree) != first


def test_a_subset_is_deterministic_and_spread_over_the_operators(generated: cases.Generated) -> None:
    picked = cases.subset(generated.cases, 100)
    assert len(picked) == 100 and picked == cases.subset(list(reversed(generated.cases)), 100)
    assert picked[0].name == generated.cases[0].name
    # Spread: many operators, not the first 100 names (which would be a handful of operators).
    assert len({case.op for case in picked}) >= 60
    assert len({case.op for case in generated.cases[:100]}) < 30
    assert cases.subset(generated.cases, None) == generated.cases
    assert cases.subset(generated.cases, 10**6) == generated.cases


def _written_case() -> cases.Case:
    return cases.Case(
        name="test_add",
        kind="node",
        op="Add",
        model="test_add/model.onnx",
        inputs=(("x", "test_add/input_0.npy"), ("y", "test_add/input_1.npy")),
        outputs=(("sum", "test_add/output_0.npy"),),
        rtol=1e-3,
        atol=1e-7,
    )


def test_cases_json_round_trips(tmp_path: Path) -> None:
    cases.write_cases_file(tmp_path, [_written_case()], onnx="1.17.0")
    assert cases.read_cases_file(tmp_path) == (_written_case(),)


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (lambda case: case.pop("rtol"), "cases[0].rtol"),
        (lambda case: case.pop("model"), "cases[0].model"),
        (lambda case: case["outputs"][0].pop("file"), "cases[0].outputs[0].file"),
    ],
)
def test_a_damaged_cases_json_names_the_file_and_the_key(
    tmp_path: Path, change: Callable[[dict[str, Any]], object], key: str
) -> None:
    cases.write_cases_file(tmp_path, [_written_case()])
    path = tmp_path / cases.CASES_FILE
    document = json.loads(path.read_text())
    change(document["cases"][0])
    path.write_text(json.dumps(document))
    with pytest.raises(VerifyError, match=re.escape(f"{path}: missing key '{key}'")) as raised:
        cases.read_cases_file(tmp_path)
    assert raised.value.hint == f"remove {tmp_path}: orch makes it again"


def test_the_reference_record_round_trips_and_a_missing_key_is_named(tmp_path: Path) -> None:
    record = tmp_path / "0.0.1" / "reference.json"
    record.parent.mkdir()
    record.write_text(json.dumps({"wheel": "onnxruntime-0.0.1-x.whl", "wheel_sha256": "ab" * 32}))
    found = ensure_reference("0.0.1", cache=tmp_path)
    assert (found.source, found.wheel, found.wheel_sha256) == (
        "downloaded",
        "onnxruntime-0.0.1-x.whl",
        "ab" * 32,
    )
    record.write_text(json.dumps({"wheel": "onnxruntime-0.0.1-x.whl"}))
    with pytest.raises(VerifyError, match=re.escape(f"{record}: missing key 'wheel_sha256'")):
        ensure_reference("0.0.1", cache=tmp_path)
