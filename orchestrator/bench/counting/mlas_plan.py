"""``orch bench --metric instructions --workload mlas-test``: the instructions of MLAS's kernels in
``--scope mlas-test`` builds, decided before anything runs. Pure: the builds chosen from what a
listing found, the refusals, the command run under the counting qemu, and k.

The workload is ORT's own test executable, ``onnxruntime_mlas_test``, under a fixed gtest filter of
single-threaded kernel tests (FILTER). The difference method is gtest's own: one process runs the
filtered tests once, another 1 + k times (``--gtest_repeat``); the difference divided by k is one
repetition's instructions, the process's start-up, MLAS's platform set-up and the tests' one-time
allocations cancelled.
"""

from __future__ import annotations

import math
import posixpath
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from orchestrator.artifacts.mlas_tests import MLAS_TEST_EXE, MlasTestBuild
from orchestrator.bench.counting.plan import DEFAULT_ROUNDS, TARGET_INSTRUCTIONS, counter_argv
from orchestrator.errors import UsageError

WORKLOADS = ("models", "mlas-test")
# The tests counted: MLAS kernels written with NEON intrinsics (activations, min/max search,
# transposes, max pooling), on one thread, with inputs that repeat. Chosen by measuring on the lab's
# emulated Cortex-A72 (ORT 1.21.0, docs/benchmarking.md):
# - No thread pool: the *_Threaded suites hand work to ORT's pool, whose threads spin while they
#   wait, so their count depends on timing (Pool2dMax_Threaded: 713.9-753.1 M instructions in four
#   identical processes; Pool2dMax_SingleThread: 519,677,005 in each of three).
# - Inputs that repeat: these suites fill their buffers from fixed tables or from a generator seeded
#   with the shape; the fp16 GEMM tests (NeonHGemm*, NeonFp16*) seed theirs from std::random_device.
#   Four identical processes of this filter (tuned) retired 552,282,738-552,282,821 instructions.
# - Tests that pass on the emulated CPU: Softmax_SingleThread died of SIGSEGV there, and Exp, Tanh and
#   Softcap fail their fp16 cases.
# - Small enough for CI: one repetition retires ~0.24 G instructions in a tuned build (~1 G at -O0);
#   SGemm's single-threaded tests retire ~40 G per repetition (their reference GEMM is naive),
#   QuantizeLinear's ~65 M tuned but ~7.4 G at -O0.
SUITES = (
    "Activation.*",
    "MinMaxElement.*",
    "Transpose_Size*.*",
    "Pool2dMax_SingleThread.*",
)
FILTER = ":".join(SUITES)
# gtest's own output is kept out of the count: every test's name and milliseconds are formatting and
# writing, not MLAS (about 0.55 M instructions per process of this filter, measured), and a test whose
# time grows a digit under load would change the total. --gtest_brief prints failures and the summary.
GTEST_QUIET = ("--gtest_print_time=0", "--gtest_brief=1", "--gtest_color=no")
BASE_REPEATS = 1  # the first repetition, which both processes run
# The first pair of a build measures one repetition, to choose k: 1 and 1 + 2 repetitions.
CALIBRATION_EXTRA = 2
MIN_EXTRA, MAX_EXTRA = 2, 200
BUNDLES_DIR = "mlas-tests"  # under the board's workdir: <digest>/ holds one build's out/


@dataclass(frozen=True, kw_only=True)
class TargetBuilds:
    """The builds counted on the boards of one target profile, in --variant order (first = baseline)."""

    target: str
    boards: tuple[str, ...]
    builds: tuple[MlasTestBuild, ...]


@dataclass(frozen=True, kw_only=True)
class MlasCountPlan:
    """What ``--workload mlas-test`` counts: per target the builds, the filter, rounds, the guard."""

    targets: tuple[TargetBuilds, ...]
    gtest_filter: str = FILTER
    rounds: int = DEFAULT_ROUNDS
    fail_above: float | None = None  # a fraction, as CountPlan's

    def builds_for(self, target: str) -> tuple[MlasTestBuild, ...]:
        return next(one.builds for one in self.targets if one.target == target)


Listing = Callable[[str, str], Sequence[MlasTestBuild]]  # (target, variant) -> builds, oldest first


def build_command(target: str, variant: str, version: str | None = None) -> str:
    return f"orch build --target {target} --scope mlas-test --variant {variant}" + (
        f" --ort-version {version}" if version else ""
    )


def choose_builds(
    boards: Sequence[tuple[str, str]],
    variants: Sequence[str],
    listing: Listing,
    *,
    ort_versions: Sequence[tuple[str, str]] = (),
    where: str = "$ORCH_HOME/builds",
) -> tuple[TargetBuilds, ...]:
    """Per target of ``boards`` ((name, target) pairs), the newest build of each variant (of the
    release --ort-version names, when it names one); a UsageError saying what to build when one is
    missing, or when the chosen builds are not all of one ORT release."""
    if not variants:
        raise UsageError(
            "--workload mlas-test counts builds named by --variant: give one or more, baseline first",
            hint="e.g. --variant tuned,o0 (each built with orch build --scope mlas-test)",
        )
    wanted = dict(ort_versions)
    targets: dict[str, list[str]] = {}
    for name, target in boards:
        targets.setdefault(target, []).append(name)
    chosen: list[TargetBuilds] = []
    for target, names in targets.items():
        builds: list[MlasTestBuild] = []
        missing: list[str] = []
        for variant in variants:
            version = wanted.get(variant) or wanted.get("")
            found = [b for b in listing(target, variant) if version is None or b.ort_version == version]
            if found:
                builds.append(found[-1])
            else:
                missing.append(build_command(target, variant, version))
        on = f"target '{target}' (board{'s' if len(names) > 1 else ''} {', '.join(names)})"
        if missing:
            raise UsageError(
                f"--workload mlas-test: no mlas-test build of {_variants_of(missing)} for {on} in {where};"
                f" build it first: {'; '.join(missing)}",
                hint="orch build --scope mlas-test leaves onnxruntime_mlas_test and its libraries there",
            )
        releases = {build.ort_version for build in builds}
        if len(releases) > 1:
            sides = ", ".join(f"{b.variant} is ORT {b.ort_version} ({b.id})" for b in builds)
            baseline = builds[0]
            others = [b.variant for b in builds if b.ort_version != baseline.ort_version]
            raise UsageError(
                f"--workload mlas-test compares builds of one ORT release, and for {on} {sides};"
                f" build them from one release: "
                + "; ".join(build_command(target, v, baseline.ort_version) for v in others),
                hint="or choose the release of every build with --ort-version X.Y.Z",
            )
        chosen.append(TargetBuilds(target=target, boards=tuple(names), builds=tuple(builds)))
    return tuple(chosen)


def _variants_of(commands: Sequence[str]) -> str:
    names = [f"'{command.split('--variant ')[1].split()[0]}'" for command in commands]
    return ("variant " if len(names) == 1 else "variants ") + ", ".join(names)


def bundle_path(workdir: str, digest: str) -> str:
    """Where a build's ``out/`` lives on a board, once per content."""
    return posixpath.join(workdir, BUNDLES_DIR, digest)


def extra_repeats(per_repeat: float) -> int:
    """k: enough repetitions to retire TARGET_INSTRUCTIONS, within [MIN_EXTRA, MAX_EXTRA]."""
    if per_repeat <= 0:
        return MAX_EXTRA
    return max(MIN_EXTRA, min(MAX_EXTRA, math.ceil(TARGET_INSTRUCTIONS / per_repeat)))


def mlas_count_argv(  # noqa: PLR0913 -- the count's parts, each keyword-only
    *,
    kit: str,
    cpu: str,
    log_file: str,
    bundle: str,
    repeats: int,
    gtest_filter: str = FILTER,
) -> list[str]:
    """The argv that runs the filtered MLAS tests ``repeats`` times from the bundle in ``bundle``
    under the counting qemu emulating ``cpu``, its count written to ``log_file``. The executable
    has no RPATH: the guest's loader finds its libraries through LD_LIBRARY_PATH, given to the guest
    alone (qemu's -E), never to qemu, whose own loader must not look there."""
    return [
        *counter_argv(kit=kit, cpu=cpu, log_file=log_file),
        "-E",
        f"LD_LIBRARY_PATH={bundle}",
        posixpath.join(bundle, MLAS_TEST_EXE),
        f"--gtest_filter={gtest_filter}",
        f"--gtest_repeat={repeats}",
        *GTEST_QUIET,
    ]
