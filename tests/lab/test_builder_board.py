"""A builder board: `orch lab up --board lab:1 --build-tools` makes an emulated Debian 13 board that
carries a native C++ toolchain (what building ONNX Runtime over SSH on the board itself needs),
and says so in `orch lab status --json`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest

from tests.conftest import Lab, profile_lab

# In the full suite: the builder board's image (a Debian 13 rootfs with GCC, CMake and Python's
# headers, debootstrapped under emulation) takes about 11 minutes to make on a new machine, which CI's
# cold budget does not hold; tests/builds/test_on_board_route.py (full) builds on such a board too.
pytestmark = [pytest.mark.integration, pytest.mark.full]

# ONNX Runtime 1.21's CMakeLists.txt: cmake_minimum_required(VERSION 3.28).
ORT_MIN_CMAKE = (3, 28)


@pytest.fixture(scope="module")
def builder_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Lab]:
    with profile_lab(
        tmp_path_factory.mktemp("builder-lab"), "lab:1", extra_args=("--build-tools",)
    ) as the_lab:
        yield the_lab


def test_a_build_tools_board_has_cmake_ninja_a_cxx_compiler_and_ccache(builder_lab: Lab) -> None:
    assert [board.name for board in builder_lab.boards] == ["lab-1"]
    line = "cmake --version && ninja --version && c++ --version && ccache --version"
    result = builder_lab.orch("exec", "--host", "lab-1", "--json", "--", line)
    assert result.returncode == 0, result.stdout + result.stderr
    tools = json.loads(result.stdout)["lab-1"]["stdout"]
    found = re.search(r"cmake version (\d+)\.(\d+)", tools)
    assert found, tools
    assert (int(found[1]), int(found[2])) >= ORT_MIN_CMAKE, found[0]
    # ninja prints its bare version; the compiler names itself after the command (c++), GCC's banner follows.
    assert re.search(r"^\d+\.\d+", tools, re.MULTILINE), tools
    assert "Free Software Foundation" in tools and "ccache version" in tools, tools
    status = json.loads(builder_lab.orch("lab", "status", "--json", check=True).stdout)
    assert [(board["name"], board["build_tools"]) for board in status["boards"]] == [("lab-1", True)]
    state = json.loads((builder_lab.home / "lab" / "state.json").read_text())
    assert [board["build_tools"] for board in state["boards"]] == [True]
