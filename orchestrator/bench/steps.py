"""A BenchPlan on one board, once the board has said what it has deployed: the releases and models
measured (``pick_releases``, ``pick_models``), and every agent run in its interleaved order with its
exact command (``board_steps``). Pure: no SSH."""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.bench.plan import (
    INT8_SUFFIX,
    AgentOptions,
    BenchPlan,
    Combination,
    Quant,
    ReleaseRef,
    Runner,
    Setting,
    Step,
    int8_name,
    quant_label,
)
from orchestrator.board_side import read_text
from orchestrator.errors import BenchError

# A launch for cold start: one process from exec to its first result, nothing more.
COLD_LAUNCH = ("--warmup", "0", "--min-runs", "1", "--min-duration", "0")


def _listed(releases: Sequence[ReleaseRef]) -> str:
    return ", ".join(f"{r.id} (ORT {r.ort_version or '?'}, {r.route or '?'})" for r in releases)


def pick_releases(plan: BenchPlan, releases: Sequence[ReleaseRef], board: str) -> tuple[ReleaseRef, ...]:
    """The release measured for each variant: of that variant and the --ort-version asked for, the
    newest one (or the current release when no variant is given). Releases of one variant with
    different ORT versions are refused unless --ort-version picks one: which release was measured
    must never depend on which was deployed last. An A/B of releases of different ORT versions is
    refused unless --allow-version-mismatch is given."""
    if not releases:
        raise BenchError(
            f"{board}: no release is deployed", hint=f"deploy one first: orch deploy --host {board}"
        )
    if not plan.variants:
        return (_current_release(plan, releases, board),)
    chosen = [_release_of_variant(plan, releases, variant, board) for variant in plan.variants]
    versions = list(dict.fromkeys(release.ort_version for release in chosen))
    if len(versions) > 1 and not plan.allow_version_mismatch:
        raise BenchError(
            f"{board}: refusing an A/B across ORT releases: {_listed(chosen)}. The difference would mix"
            " the upstream changes between the releases with the effect of the build",
            hint="deploy one release of each variant (orch build --variant V --ort-version X; orch deploy"
            " --variant V --ort-version X) and bench with --ort-version X, or pass --allow-version-mismatch"
            " to compare them anyway (every table then says so)",
        )
    return tuple(chosen)


def _current_release(plan: BenchPlan, releases: Sequence[ReleaseRef], board: str) -> ReleaseRef:
    """The board's current release, when it is of the ORT version asked for."""
    current = [release for release in releases if release.current]
    if not current:
        raise BenchError(f"{board}: no release is current", hint=f"orch deploy --host {board}")
    wanted = plan.ort_version_for(current[0].variant)
    if wanted and current[0].ort_version != wanted:
        raise BenchError(
            f"{board}: the current release {current[0].id} is ORT {current[0].ort_version}, not {wanted}",
            hint=f"name the variant to measure: orch bench --host {board} --variant V --ort-version {wanted}",
        )
    return current[0]


def _release_of_variant(
    plan: BenchPlan, releases: Sequence[ReleaseRef], variant: str, board: str
) -> ReleaseRef:
    """The newest release of ``variant`` with the ORT version asked for; several versions: refused."""
    mine = [release for release in releases if release.variant == variant]
    if not mine:
        present = ", ".join(sorted({r.variant for r in releases}))
        raise BenchError(
            f"{board}: no release of variant {variant!r} is deployed (deployed: {present})",
            hint=f"orch deploy --host {board} --variant {variant}",
        )
    wanted = plan.ort_version_for(variant)
    if wanted:
        matching = [release for release in mine if release.ort_version == wanted]
        if not matching:
            raise BenchError(
                f"{board}: no release of variant {variant!r} with ORT {wanted} is deployed"
                f" (deployed: {_listed(mine)})",
                hint=f"orch deploy --host {board} --variant {variant} --ort-version {wanted}",
            )
        mine = matching
    versions = sorted({release.ort_version for release in mine})
    if len(versions) > 1:
        raise BenchError(
            f"{board}: releases of variant {variant!r} with different ORT versions are deployed:"
            f" {_listed(mine)}; which one to measure is not guessed",
            hint=f"choose one with --ort-version ({' or '.join(versions)})",
        )
    # The Python agent needs a wheel's release: beside one, a newer C library build of the same
    # variant is not the one measured (with none, check_runners refuses the library build by name).
    if "python" in plan.runners and any(release.has_python for release in mine):
        mine = [release for release in mine if release.has_python]
    # Newest by creation time; among equals the list order (least recently used first) decides.
    return max(enumerate(mine), key=lambda item: (item[1].created, item[0]))[1]


def _model_matches(wanted: str, file_name: str) -> bool:
    return wanted in (file_name, file_name.removesuffix(".onnx"))


def pick_models(plan: BenchPlan, releases: Sequence[ReleaseRef], board: str) -> tuple[str, ...]:
    """Model file names to measure: those asked for (by name or file name) present in EVERY chosen
    release, or every model the releases have in common. A/B needs the same model on both sides."""
    common = [
        m
        for m in releases[0].models
        if all(m in r.models for r in releases[1:]) and not m.endswith(INT8_SUFFIX)
    ]
    if not plan.models:
        if not common:
            raise BenchError(
                f"{board}: the release(s) {', '.join(r.id for r in releases)} have no model in common",
                hint=f"orch deploy --host {board} --model PATH",
            )
        return tuple(common)
    chosen = []
    for wanted in plan.models:
        found = [m for m in common if _model_matches(wanted, m)]
        if not found:
            raise BenchError(
                f"{board}: model {wanted!r} is not deployed in {', '.join(r.id for r in releases)}"
                f" (models: {', '.join(common) or 'none'})",
                hint=f"orch deploy --host {board} --model models/{wanted.removesuffix('.onnx')}.onnx",
            )
        chosen.append(found[0])
    return tuple(dict.fromkeys(chosen))


def ort_affinities(cores: Sequence[int]) -> str:
    """ORT's session.intra_op_thread_affinities for ``cores``: the pool threads, not the calling
    one (that one is the process's, pinned with --main-cpu), with processors counted from 1."""
    return ";".join(str(core + 1) for core in cores[1:])


def agent_argv(
    release: ReleaseRef, model_path: str, setting: Setting, options: AgentOptions
) -> tuple[str, ...]:
    argv = [
        release.python,
        release.agent,
        "--model",
        model_path,
        "--ep",
        setting.ep,
        "--opt-level",
        setting.opt_level,
        "--intra-op-threads",
        str(setting.intra_threads),
        "--inter-op-threads",
        str(setting.inter_threads),
        "--warmup",
        str(options.warmup),
        "--min-runs",
        str(options.min_runs),
        "--min-duration",
        f"{options.min_duration:g}",
        "--max-runs",
        str(options.max_runs),
    ]
    for shape in options.shapes:
        argv += ["--shape", shape]
    if options.pin_cores:
        argv += ["--main-cpu", str(options.pin_cores[0])]
        if len(options.pin_cores) > 1:
            argv += ["--affinity", ort_affinities(options.pin_cores)]
    if options.sysfs_root:
        argv += ["--sysfs-root", options.sysfs_root]
    return tuple(argv)


def runner_argv(
    release: ReleaseRef, model_path: str, setting: Setting, options: AgentOptions
) -> tuple[str, ...]:
    """The native runner's command: the agent's options, minus the interpreter and the sysfs root."""
    if release.runner is None:
        raise BenchError(f"release {release.id} has no native runner")
    agent = agent_argv(release, model_path, setting, options)
    # agent_argv: python, script, --model ... --max-runs N [--shape ...] [--main-cpu N --affinity S] [--sysfs-root PATH]
    options_part = list(agent[2:])
    if "--sysfs-root" in options_part:
        del options_part[options_part.index("--sysfs-root") : options_part.index("--sysfs-root") + 2]
    return (release.runner, *options_part)


def cold_argv(argv: Sequence[str], launches: int) -> tuple[str, ...]:
    """``launches`` runs of ``argv`` one after the other, each told its launch time (cold_launch.sh)."""
    launched = list(argv)
    for index in range(len(launched) - 1):
        if launched[index] in ("--warmup", "--min-runs", "--min-duration"):
            launched[index + 1] = COLD_LAUNCH[COLD_LAUNCH.index(launched[index]) + 1]
    return ("sh", "-c", read_text("cold_launch.sh"), "cold_launch.sh", str(launches), *launched)


def check_runners(plan: BenchPlan, releases: Sequence[ReleaseRef], board: str) -> None:
    """Every chosen release must have a native runner when the native one is asked for, and a
    Python (a wheel's release, not a C library build's) when the agent or quantisation needs it."""
    for release in releases:
        if release.has_python:
            continue
        if "python" in plan.runners:
            raise BenchError(
                f"{board}: release {release.id} is a C library build (no Python, no onnxruntime wheel):"
                " the Python agent cannot run there; measure it with --runner native",
                hint=f"orch bench --host {board} --runner native",
            )
        if plan.quantize:
            raise BenchError(
                f"{board}: release {release.id} is a C library build: --quantize makes the int8 copy with"
                " onnxruntime's Python tools in the release's venv, which it has none of",
                hint="quantise the model on the workstation and deploy the int8 model with --model",
            )
    if "native" not in plan.runners:
        return
    for release in releases:
        if release.runner is None:
            raise BenchError(
                f"{board}: release {release.id} has no native runner (its artifact was built without one)",
                hint="rebuild it with this orch (orch build ... ) and deploy it again, or use --runner python",
            )


def board_steps(plan: BenchPlan, releases: Sequence[ReleaseRef], models: Sequence[str]) -> list[Step]:
    """Every agent run of one board, interleaved: round 1 (A B ...), round 2 (A B ...), ...

    With several runners each combination runs under each runner in turn; with ``cold_starts`` a
    cold-start step (that many fresh processes) follows each warm measurement. With ``only``, just
    those combinations of the cross product run, in the same order."""
    steps: list[Step] = []
    for round_index in range(1, plan.rounds + 1):
        for model, setting, quant, release in _combinations(plan, releases, models):
            model_file = (
                model
                if quant == "fp32"
                else int8_name(model, plan.quantize or "dynamic", plan.calibration.id)
            )
            for runner in plan.runners:
                for argv, launches in _launches(
                    plan, runner, release, release.model_path(model_file), setting
                ):
                    steps.append(
                        Step(
                            index=len(steps),
                            round=round_index,
                            release=release,
                            model=model,
                            model_file=model_file,
                            quant=quant,
                            setting=setting,
                            cooldown_s=plan.cooldown_s if steps else 0.0,
                            argv=argv,
                            runner=runner,
                            launches=launches,
                        )
                    )
    return steps


def _combinations(
    plan: BenchPlan, releases: Sequence[ReleaseRef], models: Sequence[str]
) -> list[tuple[str, Setting, Quant, ReleaseRef]]:
    """One round's (model, setting, quantisation, release), in the order they run; with ``only``,
    just those of its combinations."""
    quants: tuple[Quant, ...] = ("fp32", quant_label(plan.quantize)) if plan.quantize else ("fp32",)
    return [
        (model, setting, quant, release)
        for model in models
        for setting in plan.settings
        for quant in quants
        for release in releases
        if not plan.only or Combination(variant=release.variant, quant=quant, setting=setting) in plan.only
    ]


def _launches(
    plan: BenchPlan, runner: Runner, release: ReleaseRef, model_path: str, setting: Setting
) -> list[tuple[tuple[str, ...], int]]:
    """(argv, launches) of one combination under one runner: the warm run, then its cold starts."""
    make = runner_argv if runner == "native" else agent_argv
    argv = make(release, model_path, setting, plan.agent)
    kinds = [(argv, 0)]
    if plan.cold_starts:
        kinds.append((cold_argv(argv, plan.cold_starts), plan.cold_starts))
    return kinds
