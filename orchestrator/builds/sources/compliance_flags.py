"""What ``--use_binskim_compliant_compile_flags`` means in one release's ``tools/ci_build/build.py``:
the C/C++ and linker flags its "compliance" branch sets, read with ``ast`` (pure: text in, flags out).

build.py chooses them per configuration inside ``for config in configs:``, from what it was asked
(``args``), the operating system and the machine it runs on. orch reads that loop's statements up to
and including the compliance branch and follows them as build.py would on the packaging's aarch64
Linux machine: ``args.X`` is whether the packaging script passed ``--X``, ``is_linux()`` is true,
``platform.machine()`` is ``aarch64``. Only assignments, ``+=``, ``.append``/``.extend``/``.copy()``
of the flag lists and ``if`` tests over those facts are followed; anything else that touches the
flags refuses the release, naming the line.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from orchestrator.errors import UsageError

_LISTS = {"cflags", "cxxflags", "ldflags", "cudaflags"}
_PLATFORM = {"is_linux": True, "is_windows": False, "is_macOS": False, "platform.machine": "aarch64"}


class ComplianceError(UsageError):
    """build.py's compliance branch says something orch does not follow."""


@dataclass(frozen=True, kw_only=True)
class ComplianceFlags:
    cflags: tuple[str, ...]
    ldflags: tuple[str, ...]


class _Unknown(Exception):
    """A statement or expression orch does not follow, at a line of build.py."""

    def __init__(self, node: ast.AST, what: str) -> None:
        super().__init__(f"line {getattr(node, 'lineno', '?')}: {what}")


def compliance_flags(build_py: str, *, config: str, passed: set[str], where: str) -> ComplianceFlags:
    """The flags build.py sets for a Linux ``config`` build on aarch64 when given the arguments
    ``passed`` (``--name`` of each flag, as the packaging script passes them)."""
    try:
        tree = ast.parse(build_py)
    except (SyntaxError, ValueError) as error:
        raise ComplianceError(f"{where}: not Python orch can read ({error})") from None
    loop = _config_loop(tree)
    if loop is None:
        raise ComplianceError(
            f"{where}: no `for config in configs:` loop with a --use_binskim_compliant_compile_flags"
            " branch, where orch reads that option's flags"
        )
    state = _State(config=config, args={flag.removeprefix("--") for flag in passed})
    try:
        for statement in loop.body:
            state.run(statement)
            if _mentions_compliance(statement):
                break
    except _Unknown as unknown:
        raise ComplianceError(f"{where}: {unknown}: orch does not follow it") from None
    cflags = state.lists.get("cflags") or []
    cxxflags = state.lists.get("cxxflags")
    if cxxflags is not None and cxxflags != cflags:
        raise ComplianceError(
            f"{where}: its C++ flags ({' '.join(cxxflags)}) differ from its C flags ({' '.join(cflags)}),"
            " and orch writes one set for both"
        )
    return ComplianceFlags(cflags=tuple(cflags), ldflags=tuple(state.lists.get("ldflags") or []))


def _mentions_compliance(node: ast.AST) -> bool:
    return any(
        isinstance(sub, ast.Attribute) and sub.attr == "use_binskim_compliant_compile_flags"
        for sub in ast.walk(node)
    )


def _config_loop(tree: ast.AST) -> ast.For | None:
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.For)
            and isinstance(node.target, ast.Name)
            and node.target.id == "config"
            and any(isinstance(s, ast.If) and _mentions_compliance(s.test) for s in node.body)
        ):
            return node
    return None


@dataclass
class _State:
    config: str
    args: set[str]

    def __post_init__(self) -> None:
        self.lists: dict[str, list[str] | None] = {}

    def run(self, node: ast.stmt) -> None:
        if isinstance(node, ast.If):
            if not _touches(node):
                return  # a branch that sets no flag: its test need not be decided
            verdict = self.value(node.test)
            if not isinstance(verdict, bool):
                raise _Unknown(node, f"an if orch cannot decide ({ast.unparse(node.test)})")
            for statement in node.body if verdict else node.orelse:
                self.run(statement)
        elif isinstance(node, ast.Assign) and _touches(node):
            if len(node.targets) != 1 or not isinstance(node.targets[0], ast.Name):
                raise _Unknown(node, f"an assignment orch does not follow ({ast.unparse(node)})")
            self.lists[node.targets[0].id] = self.flag_list(node.value)
        elif isinstance(node, ast.AugAssign) and _touches(node):
            self.extend(node, node.target, node.value)
        elif isinstance(node, ast.Expr) and _touches(node):
            call = node.value
            if not (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and call.func.attr in ("append", "extend")
                and len(call.args) == 1
            ):
                raise _Unknown(node, f"a use of the flag lists orch does not follow ({ast.unparse(node)})")
            item = call.args[0] if call.func.attr == "extend" else ast.List(elts=[call.args[0]])
            self.extend(node, call.func.value, item)
        elif _touches(node):
            raise _Unknown(node, f"a statement on the flag lists orch does not follow ({ast.unparse(node)})")

    def extend(self, node: ast.AST, target: ast.expr, value: ast.expr) -> None:
        if not isinstance(target, ast.Name) or target.id not in _LISTS:
            raise _Unknown(node, f"a list orch does not know ({ast.unparse(target)})")
        current = self.lists.get(target.id)
        if current is None:
            raise _Unknown(node, f"{target.id} extended before it is a list")
        self.lists[target.id] = [*current, *(self.flag_list(value) or [])]

    def flag_list(self, node: ast.expr) -> list[str] | None:
        """A list of string constants, None, or a copy of another flag list."""
        if isinstance(node, ast.Constant) and node.value is None:
            return None
        if isinstance(node, ast.List) and all(
            isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts
        ):
            return [str(e.value) for e in node.elts if isinstance(e, ast.Constant)]
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "copy"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in _LISTS
        ):
            source = self.lists.get(node.func.value.id)
            return None if source is None else list(source)
        raise _Unknown(node, f"flags orch cannot read ({ast.unparse(node)})")

    def value(self, node: ast.expr) -> object:
        """A test's value: True/False or a string; _Unknown for anything else."""
        if isinstance(node, ast.BoolOp):
            values = [self.value(v) for v in node.values]
            return all(values) if isinstance(node.op, ast.And) else any(values)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            return not self.value(node.operand)
        if (
            isinstance(node, ast.Compare)
            and len(node.ops) == 1
            and isinstance(node.ops[0], (ast.Eq, ast.NotEq))
        ):
            equal = self.value(node.left) == self.value(node.comparators[0])
            return equal if isinstance(node.ops[0], ast.Eq) else not equal
        return self.fact(node)

    def fact(self, node: ast.expr) -> object:
        """A constant, the configuration, an argument given or not, the platform's answer."""
        if isinstance(node, ast.Constant) and isinstance(node.value, (str, bool)):
            return node.value
        if isinstance(node, ast.Name) and node.id == "config":
            return self.config
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "args":
            return node.attr in self.args
        if isinstance(node, ast.Call) and not node.args and ast.unparse(node.func) in _PLATFORM:
            return _PLATFORM[ast.unparse(node.func)]
        raise _Unknown(node, f"a test orch cannot decide ({ast.unparse(node)})")


def _touches(node: ast.AST) -> bool:
    """Whether a statement names one of the flag lists (outside an if's branches, run separately)."""
    return any(isinstance(sub, ast.Name) and sub.id in _LISTS for sub in ast.walk(node))
