"""What ONNX Runtime's own packaging asks of build.py for the official aarch64 CPU wheel, read from
the release's source: the variant ``upstream`` is that build, made with orch's toolchain. Pure: text
in, options out (``release_packaging`` reads the files).

Two files of the release say it:

* ``tools/ci_build/github/linux/build_linux_python_package.sh``, the script the packaging pipeline
  runs for each Linux wheel. For the aarch64 CPU wheel it runs with ``-d CPU -c Release`` on an
  aarch64 machine, without ``-x`` (no extra argument) or ``-e`` (no compiler cache): the script's
  ``BUILD_ARGS`` are read with those values, following its ``if`` branches.
* ``tools/ci_build/build.py``, for what ``--use_binskim_compliant_compile_flags`` means: the
  hardening flags of its "compliance" branch for that configuration on an aarch64 Linux machine
  (read with ``ast``: ``compliance_flags``). orch writes them out rather than passing the flag: on
  orch's x86-64 build host build.py would add the x86-only ``-fstack-clash-protection`` and
  ``-fcf-protection`` to an aarch64 compile.

Anything the script asks that orch does not understand (a condition it cannot decide, a build.py
argument it does not know, compiler flags set by the script itself) refuses the release, naming
the line: guessing would build something else and call it upstream.
"""

from __future__ import annotations

import fnmatch
import re
import shlex
from dataclasses import dataclass

from orchestrator.builds.sources.compliance_flags import ComplianceError, compliance_flags
from orchestrator.errors import UsageError

SCRIPT = "tools/ci_build/github/linux/build_linux_python_package.sh"
BUILD_PY = "tools/ci_build/build.py"
COMPLIANCE_FLAG = "--use_binskim_compliant_compile_flags"

# The script's variables as the pipeline sets them for the aarch64 CPU wheel (-d CPU -c Release, no
# -x, no -e, no CUDA) and as `uname -m` answers on its aarch64 machine.
PIPELINE = {
    "BUILD_DEVICE": "CPU",
    "BUILD_CONFIG": "Release",
    "EXTRA_ARG": "",
    "ENABLE_CACHE": "false",
    "CUDA_VERSION": "",
    "ARCH": "aarch64",
}

# Arguments orch's own build passes anyway (or, --build_dir, in its own place): nothing to carry over.
_ORCH_OWN = {"--update", "--build", "--skip_submodule_sync", "--parallel", "--build_wheel"}
_WITH_VALUE = {"--build_dir", "--config"}
# Arguments of upstream's build that orch leaves out, and why (said in the plan).
LEFT_OUT = {
    "--use_azure": "the remote Azure execution provider: no CPU kernel",
    "--use_vcpkg": "how upstream fetches the same dependency releases (orch has its dependency routes)",
    "--use_vcpkg_ms_internal_asset_cache": "a cache of upstream's vcpkg downloads",
    "--use_cache": "upstream's compiler cache (orch has its own)",
    "--enable_onnx_tests": "tests: orch's build runs none",
}
_CONFIGS = ("Release", "RelWithDebInfo", "MinSizeRel", "Debug")
_VARIABLE = re.compile(r"\$\{?(\w+)\}?")
_ARRAY = re.compile(r"^BUILD_ARGS(\+?)=\((.*)\)$", re.DOTALL)
_OWN_FLAGS = re.compile(r"^(export\s+)?(CFLAGS|CXXFLAGS|LDFLAGS|CPPFLAGS)\b")


@dataclass(frozen=True, kw_only=True)
class PackagingOptions:
    """The official aarch64 CPU wheel's build options, as one release's packaging says them."""

    release: str
    config: str
    lto: bool
    cflags: tuple[str, ...]
    ldflags: tuple[str, ...]
    left_out: tuple[tuple[str, str], ...]  # (build.py argument, why orch leaves it out)

    @property
    def read_from(self) -> str:
        return f"ORT {self.release}'s {SCRIPT.rsplit('/', 1)[-1]} and build.py"


class PackagingError(UsageError):
    """A release whose packaging orch cannot read or does not understand: upstream is refused."""


def packaging_options(script: str, build_py: str, *, release: str) -> PackagingOptions:
    """The options of ``release``'s official aarch64 CPU wheel, from its packaging script and build.py."""
    args = script_arguments(script, release=release)
    config, lto, hardened, left_out = _classify(args, release)
    cflags: tuple[str, ...] = ()
    ldflags: tuple[str, ...] = ()
    if hardened:
        passed = {word.partition("=")[0] for word in args if word.startswith("--")}
        try:
            flags = compliance_flags(
                build_py, config=config, passed=passed, where=f"ORT {release}'s {BUILD_PY}"
            )
        except ComplianceError as error:
            raise PackagingError(error.message, hint=error.hint) from None
        cflags, ldflags = flags.cflags, flags.ldflags
    return PackagingOptions(
        release=release, config=config, lto=lto, cflags=cflags, ldflags=ldflags, left_out=left_out
    )


def script_arguments(script: str, *, release: str) -> list[str]:
    """The build.py arguments the packaging script passes for the aarch64 CPU wheel."""
    args: list[str] | None = None
    blocks: list[_Block] = []
    for number, line in _logical_lines(script):
        where = f"ORT {release}'s {SCRIPT}:{number}"
        if _OWN_FLAGS.match(line):
            raise PackagingError(
                f"{where}: the script sets compiler flags itself ({line.split('=')[0]}): orch reads"
                " only build.py's arguments (--use_binskim_compliant_compile_flags)",
            )
        if _follow_blocks(blocks, line, where):
            continue
        array = _ARRAY.match(line)
        if array is None:
            if re.match(r"^BUILD_ARGS\b\S*=", line):
                raise PackagingError(f"{where}: BUILD_ARGS set in a way orch does not read: {line}")
            continue
        taken = _taken(blocks, where, line)
        if array.group(1) == "" and (blocks or args is not None):
            raise PackagingError(f"{where}: BUILD_ARGS set a second time or under a condition: {line}")
        if not taken:
            continue
        words = _expand(array.group(2), where)
        args = words if array.group(1) == "" else [*(args or []), *words]
    if args is None:
        raise PackagingError(f"ORT {release}'s {SCRIPT}: no BUILD_ARGS=(...) line, the arguments of build.py")
    return args


@dataclass
class _Block:
    """One `if` (or a loop or case) of the script: whether its current branch runs (None: unknown)."""

    kind: str  # "if", "loop", "case"
    text: str
    current: bool | None = True
    any_before: bool | None = False


def _follow_blocks(blocks: list[_Block], line: str, where: str) -> bool:
    """Track the script's if/elif/else/fi, loops and case; True when ``line`` was only that."""
    head = re.match(r"^(if|elif)\s+(.*?)(;\s*then)?$", line)
    if head is not None:
        condition = _condition(head.group(2))
        if head.group(1) == "if":
            blocks.append(_Block(kind="if", text=line, current=condition))
        else:
            block = _innermost_if(blocks, where)
            block.any_before = _or(block.any_before, block.current)
            block.current = _and(_not(block.any_before), condition)
            block.text = line
        return True
    if re.match(r"^else\b", line):
        block = _innermost_if(blocks, where)
        block.any_before = _or(block.any_before, block.current)
        block.current, block.text = _not(block.any_before), line
        return True
    if re.match(r"^fi\b", line):
        _innermost_if(blocks, where)
        blocks.pop()
        return True
    if line == "then":
        return True
    if re.match(r"^(for|while|until)\b", line):
        blocks.append(_Block(kind="loop", text=line))
    if re.match(r"^(do\s+)?case\b", line):
        blocks.append(_Block(kind="case", text=line))
    if re.match(r"^(done|esac)\b", line) and blocks:
        blocks.pop()
    return False


def _innermost_if(blocks: list[_Block], where: str) -> _Block:
    if not blocks or blocks[-1].kind != "if":
        raise PackagingError(f"{where}: an elif, else or fi orch cannot pair with its if")
    return blocks[-1]


def _taken(blocks: list[_Block], where: str, line: str) -> bool:
    """Whether the packaging of the aarch64 CPU wheel runs ``line``; refused when orch cannot tell."""
    for block in blocks:
        if block.kind != "if":
            raise PackagingError(
                f"{where}: BUILD_ARGS changed inside a loop or case, which orch does not follow"
            )
    verdict: bool | None = True
    for block in blocks:
        verdict = _and(verdict, block.current)
    if verdict is None:
        undecided = next(block.text for block in blocks if block.current is None)
        raise PackagingError(
            f"{where}: {line} runs under `{undecided}`, which orch cannot decide for the aarch64 CPU wheel",
            hint=f"orch knows these of the script's variables: {_known()}",
        )
    return verdict


def _condition(text: str) -> bool | None:
    """A `[ ... ]`/`[[ ... ]]` test (joined by && or ||) under the pipeline's values; None: unknown."""
    text = text.strip()
    for joiner, combine in (("||", _or), ("&&", _and)):
        if joiner in text:
            parts = [_condition(part) for part in text.split(joiner)]
            result = parts[0]
            for part in parts[1:]:
                result = combine(result, part)
            return result
    test = re.fullmatch(r"\[\[?\s+(.*?)\s+\]\]?", text)
    if test is None:
        return None
    try:
        words = [_substitute(word) for word in shlex.split(test.group(1))]
    except (ValueError, KeyError):
        return None
    if len(words) == 3 and words[1] in ("=", "==", "!="):
        matched = fnmatch.fnmatchcase(words[0], words[2])
        return matched if words[1] != "!=" else not matched
    if len(words) == 2 and words[0] in ("-z", "-n"):
        return (words[1] == "") == (words[0] == "-z")
    return None


def _substitute(word: str) -> str:
    """A word with the pipeline's variables filled in; KeyError for a variable orch does not know."""
    return _VARIABLE.sub(lambda match: PIPELINE[match.group(1)], word)


def _expand(array: str, where: str) -> list[str]:
    try:
        words = shlex.split(array, comments=True)
        expanded = [_substitute(word) for word in words]
    except ValueError as error:
        raise PackagingError(f"{where}: BUILD_ARGS=({array}) cannot be read: {error}") from None
    except KeyError as error:
        raise PackagingError(
            f"{where}: BUILD_ARGS names ${error.args[0]}, a variable orch does not know the value of",
            hint=f"orch knows: {_known()}",
        ) from None
    return [word for word in expanded if word]


def _known() -> str:
    return ", ".join(f"{name}={value!r}" for name, value in PIPELINE.items())


def _logical_lines(script: str) -> list[tuple[int, str]]:
    """(first line number, text) of each command line: comments dropped, continued lines and
    multi-line BUILD_ARGS=( ... ) arrays joined."""
    lines: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for number, raw in enumerate(script.splitlines(), start=1):
        text = raw.strip()
        if pending is None and (not text or text.startswith("#")):
            continue
        pending = (pending[0], f"{pending[1]} {text}") if pending is not None else (number, text)
        joined = pending[1]
        if joined.endswith("\\"):
            pending = (pending[0], joined[:-1].rstrip())
            continue
        if re.match(r"^BUILD_ARGS\+?=\(", joined) and not _closed(joined):
            continue
        lines.append(pending)
        pending = None
    if pending is not None:
        lines.append(pending)
    return lines


def _closed(array: str) -> bool:
    """Whether a ``BUILD_ARGS=(`` line has its closing parenthesis (outside quotes)."""
    try:
        shlex.split(array.split("(", 1)[1])
    except ValueError:
        return False
    return array.rstrip().endswith(")")


def _classify(args: list[str], release: str) -> tuple[str, bool, bool, tuple[tuple[str, str], ...]]:
    """(config, --enable_lto, --use_binskim_compliant_compile_flags, left out) of build.py's arguments."""
    config: str | None = None
    lto = hardened = False
    left_out: list[tuple[str, str]] = []
    words = iter(args)
    for word in words:
        flag, _, inline = word.partition("=")
        if flag in _WITH_VALUE:
            value = inline or next(words, "")
            if flag == "--config":
                config = value
        elif flag in _ORCH_OWN:
            continue
        elif flag == "--enable_lto":
            lto = True
        elif flag == COMPLIANCE_FLAG:
            hardened = True
        elif flag in LEFT_OUT:
            left_out.append((flag, LEFT_OUT[flag]))
        else:
            raise PackagingError(
                f"ORT {release}'s {SCRIPT} passes {word} to build.py for the aarch64 CPU wheel:"
                " orch does not know what upstream's build means by it",
                hint="build that release with another variant (default, lto, tuned), or the variant"
                " `upstream` of a release orch can read",
            )
    if config not in _CONFIGS:
        raise PackagingError(
            f"ORT {release}'s {SCRIPT}: build.py's --config is {config!r} for the aarch64 CPU wheel,"
            f" not one of {', '.join(_CONFIGS)}"
        )
    return config, lto, hardened, tuple(left_out)


def _and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def _not(a: bool | None) -> bool | None:
    return None if a is None else not a
