"""The command line's values for a BenchPlan, parsed and checked before anything runs (no SSH; the
only file read is a model given to --model as a path, checked to be an ONNX model): ``make_plan``
refuses what no board could run, with the option's name and value."""

from __future__ import annotations

import difflib
import math
from collections.abc import Sequence
from pathlib import Path

from orchestrator.bench.calibration import CalibrationSpec
from orchestrator.bench.plan import (
    EXECUTION_PROVIDERS,
    OPT_LEVELS,
    QUANTIZE_MODES,
    RUNNER_CHOICES,
    RUNNERS,
    AgentOptions,
    BenchPlan,
    OptLevel,
    QuantizeMode,
    Runner,
    Setting,
    one_of,
)
from orchestrator.board import Board
from orchestrator.common.ort_versions import check_ort_version
from orchestrator.deploy.lock_settings import DEFAULT_LOCK_TIMEOUT
from orchestrator.errors import UsageError


def split_list(text: str | None) -> list[str]:
    """'a,b, c' -> ['a', 'b', 'c']; repeated options are joined by the caller."""
    if not text:
        return []
    return [part.strip() for part in text.split(",") if part.strip()]


def parse_threads(values: Sequence[str]) -> list[int]:
    threads = []
    for value in values:
        try:
            number = int(value)
        except ValueError:
            raise UsageError(f"--threads {value!r}: expected whole numbers like 1,2,4") from None
        if number < 0:
            raise UsageError(f"--threads {value}: must be >= 0 (0 = onnxruntime's default)")
        threads.append(number)
    return threads


def parse_opt_levels(values: Sequence[str]) -> list[OptLevel]:
    levels = []
    for value in values:
        level = one_of(value, OPT_LEVELS)
        if level is None:
            raise UsageError(f"--opt-level {value!r}: choose from {', '.join(OPT_LEVELS)}")
        levels.append(level)
    return levels


def parse_shape(text: str) -> tuple[str, tuple[int, ...]]:
    """``input=1x3x224x224`` -> ("input", (1, 3, 224, 224)); what the agent's --shape takes."""
    name, sep, dims = text.partition("=")
    parts = dims.lower().split("x") if dims else []
    if (
        not sep
        or not name.strip()
        or not parts
        or not all(part.isdigit() and int(part) > 0 for part in parts)
    ):
        raise UsageError(
            f"--shape {text!r}: expected NAME=DxD... with positive whole dimensions",
            hint="e.g. --shape input=1x3x224x224 (the input's name as the model declares it)",
        )
    return name, tuple(int(part) for part in parts)


def model_name(text: str) -> str:
    """A --model value: a deployed model's name (``mobilenet``, ``mobilenet.onnx``), or the path of
    the model file that was deployed (``models/mobilenet.onnx``), which must then be an ONNX model."""
    if "/" not in text and not text.endswith(".onnx"):
        return text
    path = Path(text).expanduser()
    if "/" not in text and not path.exists():
        return text  # 'mobilenet.onnx': a deployed file name
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UsageError(
            f"--model {text!r}: no such file",
            hint="--model takes a deployed model's name (`orch exec ... -- ls orch/current/models`) or its file",
        ) from None
    except OSError as error:
        raise UsageError(f"--model {text!r}: cannot read it: {error.strerror or error}") from None
    if not _is_onnx(data):
        raise UsageError(
            f"--model {text!r}: not an ONNX model (it does not parse as an ONNX ModelProto with a graph)",
            hint="pass the .onnx file you deployed, or the model's name",
        )
    return path.name


def _is_onnx(data: bytes) -> bool:
    import onnx

    try:
        model = onnx.load_model_from_string(data)
    except Exception:  # noqa: BLE001 -- protobuf's DecodeError (its module has no type stubs here)
        return False
    return model.ir_version > 0 and len(model.graph.node) > 0


def parse_ort_versions(values: Sequence[str], variants: Sequence[str]) -> tuple[tuple[str, str], ...]:
    """--ort-version values: ``1.21.0`` (every variant) or ``VARIANT=1.21.0`` (one variant, for a
    deliberate cross-release A/B with --allow-version-mismatch)."""
    chosen: dict[str, str] = {}
    for value in values:
        variant, sep, version = value.rpartition("=")
        if sep and not variant:
            raise UsageError(f"--ort-version {value!r}: expected X.Y.Z or VARIANT=X.Y.Z")
        check_ort_version(version)
        if variant and variants and variant not in variants:
            raise UsageError(
                f"--ort-version {value!r}: {variant!r} is not one of the --variant values ({', '.join(variants)})"
            )
        if variant in chosen and chosen[variant] != version:
            raise UsageError(
                f"--ort-version gives {variant or 'every variant'} two releases: {chosen[variant]}, {version}"
            )
        chosen[variant] = version
    return tuple(chosen.items())


def make_settings(
    *,
    threads: Sequence[int] = (),
    opt_levels: Sequence[OptLevel] = (),
    eps: Sequence[str] = (),
    inter_threads: int = 0,
) -> tuple[Setting, ...]:
    """The cross product of the swept values, in the order given (the first is the baseline)."""
    for ep in eps:
        if ep not in EXECUTION_PROVIDERS and not ep.endswith("ExecutionProvider"):
            close = difflib.get_close_matches(ep, EXECUTION_PROVIDERS, n=1)
            raise UsageError(
                f"--ep {ep!r}: not an execution provider"
                + (f" (did you mean {close[0]!r}?)" if close else ""),
                hint=f"choose from {', '.join(EXECUTION_PROVIDERS)} or give onnxruntime's full provider name",
            )
    default_level: tuple[OptLevel, ...] = ("all",)
    settings = [
        Setting(ep=ep, opt_level=opt_level, intra_threads=intra, inter_threads=inter_threads)
        for ep in eps or ["cpu"]
        for opt_level in opt_levels or default_level
        for intra in threads or [0]
    ]
    if len(set(settings)) != len(settings):
        raise UsageError("the same setting is listed twice (check --threads / --opt-level / --ep)")
    return tuple(settings)


def parse_pin_cores(text: str) -> tuple[int, ...]:
    """``--pin-cores 0-3`` / ``1,2,3``: the board's CPU numbers as Linux counts them, in order."""
    cores: list[int] = []
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        if not (low.isdigit() and (not dash or high.isdigit())) or (dash and int(high) < int(low)):
            raise UsageError(
                f"--pin-cores {text!r}: expected CPU numbers as Linux counts them, e.g. 0-3 or 1,2,3",
            )
        cores += range(int(low), int(high) + 1) if dash else [int(low)]
    if len(set(cores)) != len(cores):
        raise UsageError(f"--pin-cores {text!r}: a CPU is listed twice")
    return tuple(cores)


def check_pin_cores(cores: Sequence[int], settings: Sequence[Setting]) -> None:
    """One intra-op thread per pinned core; ORT itself checks this only when a session is made, on
    every board, after the deploy."""
    if len(cores) > 1 and any(s.ep == "xnnpack" for s in settings):
        # The pins are ORT's pool's, and with XNNPACK that pool has one thread (the EP's advice).
        raise UsageError(
            "--pin-cores pins ORT's own thread pool, which has 1 thread with xnnpack (XNNPACK runs its own)",
            hint="bench xnnpack without --pin-cores, or pin one core (--pin-cores 2) for a single-thread run",
        )
    wrong = sorted({s.intra_threads for s in settings if s.intra_threads != len(cores)})
    if wrong:
        raise UsageError(
            f"--pin-cores pins {len(cores)} intra-op thread(s), one per core: give --threads {len(cores)}"
            f" (or no --threads), not {', '.join(map(str, wrong))}",
        )


def make_plan(  # noqa: PLR0913 -- one keyword per option of `orch bench`, each checked here
    boards: Sequence[Board],
    *,
    variants: Sequence[str] = (),
    models: Sequence[str] = (),
    settings: Sequence[Setting] = (Setting(),),
    quantize: str | None = None,
    calibration: CalibrationSpec | None = None,
    rounds: int = 10,
    cooldown_s: float = 2.0,
    agent: AgentOptions | None = None,
    ort_versions: Sequence[tuple[str, str]] = (),
    allow_version_mismatch: bool = False,
    pin_clocks: bool = False,
    parallel: int = 8,
    step_timeout_s: float = 1800.0,
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT,
    threshold: float = 0.05,
    runner: str = "python",
    cold_starts: int = 0,
) -> BenchPlan:
    runners = _runners(runner)
    if cold_starts < 0:
        raise UsageError(f"--cold-starts {cold_starts}: must be >= 0")
    if len(set(variants)) != len(variants):
        raise UsageError(f"--variant lists a variant twice: {','.join(variants)}")
    mode = _quantize_mode(quantize)
    calibration = calibration or CalibrationSpec()
    if calibration.files and mode != "static":
        raise UsageError("--calibration is for --quantize static (dynamic quantisation needs no data)")
    _check_run_lengths(rounds=rounds, cooldown_s=cooldown_s, step_timeout_s=step_timeout_s, parallel=parallel)
    if threshold < 0:
        raise UsageError("--threshold must be >= 0 (e.g. 0.05 for 5 %)")
    if not 0 <= lock_timeout_s < math.inf:  # NaN and infinity too
        raise UsageError(f"--lock-timeout must be 0 or more seconds (got {lock_timeout_s:g})")
    agent = agent or AgentOptions()
    _check_agent(agent, settings)
    return BenchPlan(
        boards=tuple(boards),
        variants=tuple(variants),
        models=tuple(model_name(model) for model in models),
        settings=tuple(settings),
        quantize=mode,
        calibration=calibration,
        rounds=rounds,
        cooldown_s=cooldown_s,
        agent=agent,
        pin_clocks=pin_clocks,
        parallel=parallel,
        step_timeout_s=step_timeout_s,
        lock_timeout_s=lock_timeout_s,
        threshold=threshold,
        ort_versions=tuple(ort_versions),
        allow_version_mismatch=allow_version_mismatch,
        runners=runners,
        cold_starts=cold_starts,
    )


def _runners(runner: str) -> tuple[Runner, ...]:
    """--runner python|native|both -> the runners each combination runs under."""
    if one_of(runner, RUNNER_CHOICES) is None:
        raise UsageError(f"--runner {runner!r}: choose from {', '.join(RUNNER_CHOICES)}")
    chosen = one_of(runner, RUNNERS)
    return (chosen,) if chosen is not None else RUNNERS


def _quantize_mode(quantize: str | None) -> QuantizeMode | None:
    mode = one_of(quantize, QUANTIZE_MODES)
    if quantize is not None and mode is None:
        raise UsageError(f"--quantize {quantize!r}: supported: {', '.join(QUANTIZE_MODES)}")
    return mode


def _check_run_lengths(*, rounds: int, cooldown_s: float, step_timeout_s: float, parallel: int) -> None:
    if rounds < 1:
        raise UsageError("--rounds must be at least 1")
    if cooldown_s < 0 or step_timeout_s <= 0 or parallel < 1:
        raise UsageError("--cooldown must be >= 0, --step-timeout > 0 and --parallel >= 1")


def _check_agent(agent: AgentOptions, settings: Sequence[Setting]) -> None:
    """The agent's run lengths, shapes, pinned cores and sysfs root, as each board would refuse them."""
    if agent.min_runs < 1 or agent.warmup < 0 or agent.min_duration < 0:
        raise UsageError("--min-runs must be >= 1, --warmup and --min-duration >= 0")
    if agent.max_runs < 1:
        raise UsageError(f"--max-runs {agent.max_runs}: must be at least 1")
    if agent.max_runs < agent.min_runs:
        raise UsageError(
            f"--max-runs {agent.max_runs} is below --min-runs {agent.min_runs}: the agent could never reach it",
            hint="raise --max-runs or lower --min-runs",
        )
    for shape in agent.shapes:
        parse_shape(shape)
    if agent.pin_cores:
        check_pin_cores(agent.pin_cores, settings)
    if agent.sysfs_root is not None and (not agent.sysfs_root.startswith("/") or "\x00" in agent.sysfs_root):
        raise UsageError(
            f"--sysfs-root {agent.sysfs_root!r}: must be an absolute path on the board, e.g. /sys"
        )
