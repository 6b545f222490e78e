"""What an instruction count runs on a board, decided before it runs: the command under the counting
qemu, how many inferences make the difference, and how its output is read. Pure.

The count of a process includes Python's start-up, the imports and the model's loading, which vary
from process to process: by about a million instructions for onnxruntime 1.32, whose threads (started
at import, waiting with timeouts) wake up more often the longer a loaded machine takes. Each round
is therefore one process that starts, loads the model, runs the first inference and then forks three
children in turn, running 0, k and 0 inferences. Each child's total includes the parent's work up to
its fork, the same start-up for all three, and none of the parent's other threads (a child has only
the thread that forked). The parent's own count grows by one fork's cost between children, so the
k-child's total less the mean of the two 0-children's is the k inferences alone. k is chosen so that
they retire at least TARGET_INSTRUCTIONS, which keeps what still varies far under 0.1%.
"""

from __future__ import annotations

import math
import posixpath
import re
from dataclasses import dataclass

from orchestrator.bench.plan import ReleaseRef

BASE_INFERENCES = 1  # perf's two processes (orch bench --metric cycles): 1 and 1 + k after the first
# The first count of a model measures its size, to choose k: 100 inferences, so that start-up's
# jitter (a few million instructions, on perf's two processes) cannot pass for a small model's.
CALIBRATION_EXTRA = 100
TARGET_INSTRUCTIONS = 300_000_000
MIN_EXTRA, MAX_EXTRA = 20, 5000
DEFAULT_ROUNDS = 3
# One thread everywhere: numpy's BLAS pool would retire instructions of its own while it waits;
# Python's hash seed changes dictionary layouts (and so instructions) from process to process; and
# a process that writes the bytecode of what it imported changes what the next one does (the first
# count of a release paid some 20 million instructions of compiling that the others did not).
COUNT_ENVIRONMENT = (
    "OPENBLAS_NUM_THREADS=1",
    "OMP_NUM_THREADS=1",
    "PYTHONHASHSEED=0",
    "PYTHONDONTWRITEBYTECODE=1",
)
# qemu places the guest's memory itself inside one reserved range (-R), the same way in every
# process, instead of wherever the host's address randomisation puts it: buffer addresses (and the
# alignment-dependent paths they pick) then repeat, and a process's count with them (seen: totals of
# 548 M instructions varying by ~260 k between identical processes without it, by ~4 k with it).
RESERVED_GUEST_SPACE = "0x4000000000"  # 256 GiB of address space, not memory
KIT_DIR = "counting-qemu"  # under the board's workdir: <digest>/ holds the bundle
_TOTAL = re.compile(r"^total insns: (\d+)$", re.MULTILINE)


@dataclass(frozen=True, kw_only=True)
class CountPlan:
    """``orch bench --metric instructions``' own settings (the boards, releases and models are the
    BenchPlan's)."""

    rounds: int = DEFAULT_ROUNDS
    opt_level: str = "all"
    ep: str = "cpu"
    # --fail-above: a candidate counting more than this fraction above the baseline fails the run.
    fail_above: float | None = None


def extra_inferences(per_inference: float) -> int:
    """k: enough inferences to retire TARGET_INSTRUCTIONS, within [MIN_EXTRA, MAX_EXTRA]."""
    if per_inference <= 0:
        return MAX_EXTRA
    return max(MIN_EXTRA, min(MAX_EXTRA, math.ceil(TARGET_INSTRUCTIONS / per_inference)))


def kit_path(workdir: str, digest: str) -> str:
    return posixpath.join(workdir, KIT_DIR, digest)


def counter_argv(*, kit: str, cpu: str, log_file: str) -> list[str]:
    """What every count runs its guest program under: the counting qemu from the bundle in ``kit``,
    emulating ``cpu`` over the board's own root, guest addresses repeating, the total written to
    ``log_file``."""
    return [
        "env",
        *COUNT_ENVIRONMENT,
        posixpath.join(kit, "run"),
        "-R",
        RESERVED_GUEST_SPACE,
        "-L",
        "/",
        "-cpu",
        cpu,
        "-plugin",
        posixpath.join(kit, "plugins", "libinsn.so") + ",inline=on",
        "-d",
        "plugin",
        "-D",
        log_file,
    ]


def forked_inferences(extra: int) -> tuple[int, int, int]:
    """What the children of one counted process run, in turn: 0, ``extra`` and 0 inferences."""
    return (0, extra, 0)


def count_argv(  # noqa: PLR0913 -- the count's parts, each keyword-only
    *,
    kit: str,
    cpu: str,
    log_file: str,
    release: ReleaseRef,
    model: str,
    extra: int,
    agent_text: str,
    plan: CountPlan,
) -> list[str]:
    """The argv of one round's process: ``model`` in ``release``'s Python under the counting qemu
    emulating ``cpu``, its children running ``forked_inferences(extra)``, every total written to
    ``log_file``."""
    agent = agent_argv(
        release=release, model=model, inferences=forked_inferences(extra), agent_text=agent_text, plan=plan
    )
    return [*counter_argv(kit=kit, cpu=cpu, log_file=log_file), *agent, "--fork"]


def agent_argv(
    *, release: ReleaseRef, model: str, inferences: tuple[int, ...], agent_text: str, plan: CountPlan
) -> list[str]:
    """The counting agent in ``release``'s Python: ``inferences`` inferences of ``model`` after the first
    (without ``--fork``, one number)."""
    return [
        release.python,
        "-c",
        agent_text,
        posixpath.dirname(release.agent),
        release.model_path(model),
        *(str(number) for number in inferences),
        "--opt-level",
        plan.opt_level,
        "--ep",
        plan.ep,
    ]


def parse_total(text: str) -> int | None:
    """The plugin's "total insns: N" line of a process that forks none (None: qemu ended before it
    printed one)."""
    match = _TOTAL.search(text)
    return int(match.group(1)) if match else None


def parse_totals(text: str) -> list[int]:
    """The plugin's "total insns: N" lines, one per process in the order they ended (children first)."""
    return [int(total) for total in _TOTAL.findall(text)]


def extra_from_children(totals: list[int]) -> float | None:
    """The instructions of the k-child's inferences alone, from the totals of one counted process
    (its three children's, then its own): the k-child's less the mean of the two 0-children's, which
    cancels the fork the parent made between them. None: not the four totals expected."""
    if len(totals) != len(forked_inferences(0)) + 1:
        return None
    before, counted, after, _parent = totals
    return counted - (before + after) / 2
