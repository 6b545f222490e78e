"""board_side/: every script the code loads is a real package file, and none hides in a string.

The scripts that run on boards (and in pre-flight containers) live in orchestrator/board_side/,
read with ``orchestrator.board_side.read_text``; the one that runs in a build-side container lives
in docker/build/. These tests find every ``read_text("...")`` call in the package's source and
check that its file exists and is package data, and that no string constant left in the package
still holds a multi-line shell script or Python program.
"""

from __future__ import annotations

import ast
import fnmatch
import re
import subprocess
from importlib import resources
from pathlib import Path

import pytest

from orchestrator.board_side import read_text
from orchestrator.builds.sources import ort
from orchestrator.deploy.release_files import AGENT_DIR, AGENT_FILES

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "orchestrator"
BOARD_SIDE = PACKAGE / "board_side"

# Lines that only a shell script (or a Python program) has; a string with two of them is code.
_CODE_LINE = re.compile(
    r"""^\s*(
        (for|while|until)\s.*;\s*do\b | if\s.*;\s*then\b | (done|fi|esac)\b.* | case\s.*\sin\s*$
        | set\s-[eux]+\s*$ | exec\s | \w+="?\$ | \[\s.*\s\]\s*(\|\||&&)
        | (printf|echo|rm|mkdir|ln|cp|mv|cd|find|sed|apt-get|shift|exit)\s.*("|\$|\s--?\w)
        | import\s\w | from\s[\w.]+\simport\s | print\(
    )""",
    re.VERBOSE,
)


def looks_like_code(text: str) -> bool:
    return sum(1 for line in text.splitlines() if _CODE_LINE.match(line)) >= 2


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the docstring nodes of a module, its classes and functions."""
    found: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                found.add(id(body[0].value))
    return found


def package_modules() -> list[Path]:
    return sorted(p for p in PACKAGE.rglob("*.py") if BOARD_SIDE not in p.parents and p.parent != BOARD_SIDE)


def loaded_names() -> set[str]:
    """Every constant name passed to ``read_text(...)`` anywhere in the package."""
    names: set[str] = set()
    for path in package_modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "read_text"
                and node.args
                and isinstance(node.args[0], ast.Constant)
                and isinstance(node.args[0].value, str)
            ):
                names.add(node.args[0].value)
    return names


def test_every_loaded_script_is_a_package_resource() -> None:
    names = loaded_names()
    # The scan finds the calls at all (a renamed loader would make the check below empty).
    assert {"board_facts.sh", "pin_clocks.sh", "verify_release.py", "list_releases.sh"} <= names
    files = resources.files("orchestrator.board_side")
    for name in sorted(names):
        assert files.joinpath(name).is_file(), f"read_text({name!r}) names no file in board_side/"
        assert read_text(name).strip()


def package_data_patterns() -> list[str]:
    """pyproject.toml's ``[tool.setuptools.package-data] orchestrator = [...]`` (no tomllib on 3.10)."""
    text = (ROOT / "pyproject.toml").read_text()
    section = text.split("[tool.setuptools.package-data]", 1)[1].split("\n[", 1)[0]
    match = re.search(r"^orchestrator\s*=\s*(\[.*?\])", section, re.MULTILINE | re.DOTALL)
    assert match, "pyproject.toml: no package-data for orchestrator"
    patterns = ast.literal_eval(match.group(1))
    assert isinstance(patterns, list)
    return [str(p) for p in patterns]


def test_every_board_side_file_is_package_data() -> None:
    patterns = package_data_patterns()
    for path in sorted(BOARD_SIDE.iterdir()):
        if path.is_file():
            relative = path.relative_to(PACKAGE).as_posix()
            assert any(fnmatch.fnmatch(relative, p) for p in patterns), f"{relative} is not package data"


def test_every_board_side_file_is_used_or_shipped() -> None:
    names = {p.name for p in BOARD_SIDE.iterdir() if p.is_file()} - {"__init__.py"}
    unused = names - loaded_names() - set(AGENT_FILES)
    assert not unused, f"board_side files nothing loads or ships: {sorted(unused)}"
    assert all((AGENT_DIR / name).is_file() for name in AGENT_FILES)


def test_the_build_side_script_ships_in_docker_build() -> None:
    assert ort._FETCH_SCRIPT.is_file()
    assert ort._FETCH_SCRIPT.parent.name == "build"


def shell_files() -> list[Path]:
    return sorted([*BOARD_SIDE.glob("*.sh"), ort._FETCH_SCRIPT])


@pytest.mark.parametrize("path", shell_files(), ids=lambda p: p.name)
def test_shell_scripts_parse_and_say_what_they_take(path: Path) -> None:
    lines = path.read_text().splitlines()
    assert lines[0] in ("# shellcheck shell=sh", "#!/bin/sh"), "POSIX sh, declared for shellcheck"
    assert len([x for x in lines[:12] if x.startswith("# ")]) >= 3, "a comment header: args, output"
    done = subprocess.run(["sh", "-n", str(path)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr


def test_the_detector_knows_the_scripts() -> None:
    # Every multi-line script here would be caught if it were pasted back into a string constant.
    scripts = [*shell_files(), BOARD_SIDE / "verify_release.py", BOARD_SIDE / "preflight_check.py"]
    for path in scripts:
        body = [x for x in path.read_text().splitlines() if x.strip() and not x.lstrip().startswith("#")]
        if len(body) >= 2:
            assert looks_like_code("\n".join(body)), path.name
    assert not looks_like_code("Usage: orch deploy\n\nset -e is not code here\nfor a while\n")


def test_no_script_hides_in_a_string_constant() -> None:
    offenders = []
    for path in package_modules():
        tree = ast.parse(path.read_text(), str(path))
        skip = _docstrings(tree)
        for node in ast.walk(tree):
            if (
                isinstance(node, ast.Constant)
                and isinstance(node.value, str)
                and id(node) not in skip
                and "\n" in node.value.strip()
                and looks_like_code(node.value)
            ):
                offenders.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert not offenders, f"scripts in string constants (move them to board_side/): {offenders}"
