"""wheelinfo on real wheels: the official aarch64 ORT wheel and wheels made wrong on purpose."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from orchestrator.artifacts.wheel import compatibility_problems, inspect_wheel
from orchestrator.errors import DeployError

LAB = {"arch": "aarch64", "glibc": "2.41", "python_tag": "cp313"}


def test_stock_wheel_is_read_from_its_tags_and_elf_files(stock_wheel: Path) -> None:
    info = inspect_wheel(stock_wheel)
    assert info.name == "onnxruntime"
    assert info.python_tags == ("cp313",) and info.abi_tags == ("cp313",)
    assert info.platform_tags == ("manylinux_2_28_aarch64",)
    assert info.machines == ("aarch64",)
    assert any(
        so.path.endswith(".so") and "onnxruntime_pybind11_state" in so.path for so in info.shared_objects
    )
    # manylinux_2_28 promises at most glibc 2.28, and the ELF symbol versions agree.
    assert info.glibc_required == "2.28"
    assert compatibility_problems(info, **LAB, board="lab1") == []


def test_old_glibc_board_is_refused_with_both_versions(stock_wheel: Path) -> None:
    problems = compatibility_problems(
        inspect_wheel(stock_wheel), arch="aarch64", glibc="2.27", python_tag="cp313", board="nano01"
    )
    assert problems == ["wheel needs GLIBC_2.28, nano01 has 2.27"]


def test_patched_glibc_need_is_found_in_the_elf_symbols(bad_wheels: dict[str, Path]) -> None:
    info = inspect_wheel(bad_wheels["glibc"])
    assert info.glibc_required == "2.99"
    assert compatibility_problems(info, **LAB, board="lab1") == ["wheel needs GLIBC_2.99, lab1 has 2.41"]


def test_other_python_is_refused(bad_wheels: dict[str, Path]) -> None:
    problems = compatibility_problems(inspect_wheel(bad_wheels["python"]), **LAB, board="lab1")
    assert problems == ["wheel is for Python cp310 (ABI cp310), lab1 runs cp313"]


def test_x86_wheel_is_refused_by_tag_and_by_machine_code(bad_wheels: dict[str, Path]) -> None:
    problems = compatibility_problems(inspect_wheel(bad_wheels["arch"]), **LAB, board="lab1")
    assert problems[0].startswith(
        "wheel is built for x86_64 (platform tag manylinux_2_28_x86_64), lab1 is aarch64"
    )
    assert "wheel contains x86_64 machine code" in problems[1]


def test_wheel_lying_about_its_platform_is_caught_by_the_elf_check(bad_wheels: dict[str, Path]) -> None:
    info = inspect_wheel(bad_wheels["elf"])
    assert info.platform_arches == ("aarch64",) and info.machines == ("x86_64",)
    problems = compatibility_problems(info, **LAB, board="lab1")
    assert len(problems) == 1 and problems[0].startswith(
        "wheel contains x86_64 machine code (onnxruntime/capi/"
    )


def _empty_wheel(tmp_path: Path, name: str) -> Path:
    path = tmp_path / name
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("pkg/__init__.py", "")
    return path


@pytest.mark.parametrize(
    ("name", "python_tag", "ok"),
    [
        ("pkg-1.0-py3-none-any.whl", "cp313", True),
        ("pkg-1.0-py2.py3-none-any.whl", "cp36", True),
        (
            "pkg-1.0-cp310-abi3-manylinux2014_aarch64.whl",
            "cp313",
            True,
        ),  # stable ABI: newer Pythons import it
        ("pkg-1.0-cp310-abi3-manylinux2014_aarch64.whl", "cp38", False),
        ("pkg-1.0-cp311-cp311-linux_aarch64.whl", "cp313", False),
    ],
)
def test_python_tags(tmp_path: Path, name: str, python_tag: str, ok: bool) -> None:
    problems = compatibility_problems(
        inspect_wheel(_empty_wheel(tmp_path, name)), arch="aarch64", glibc="2.41", python_tag=python_tag
    )
    assert (problems == []) is ok, problems


def test_manylinux_tag_newer_than_the_board_is_refused(tmp_path: Path) -> None:
    wheel = _empty_wheel(tmp_path, "pkg-1.0-cp36-cp36m-manylinux_2_31_aarch64.whl")
    assert compatibility_problems(
        inspect_wheel(wheel), arch="aarch64", glibc="2.27", python_tag="cp36", board="nano01"
    ) == ["wheel is tagged manylinux_2_31 (needs glibc 2.31), nano01 has 2.27"]


def test_not_a_wheel_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(DeployError, match="not a wheel file name"):
        inspect_wheel(_empty_wheel(tmp_path, "onnxruntime.whl"))
    with pytest.raises(DeployError, match="not a wheel file name"):
        inspect_wheel(_empty_wheel(tmp_path, "pkg-1.0-py3-none-any;$(id).whl"))
    broken = tmp_path / "pkg-1.0-py3-none-any.whl"
    broken.write_text("not a zip")
    with pytest.raises(DeployError, match="not a valid wheel"):
        inspect_wheel(broken)
    with pytest.raises(DeployError, match="wheel not found"):
        inspect_wheel(tmp_path / "missing-1.0-py3-none-any.whl")
