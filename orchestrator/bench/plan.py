"""BenchPlan: what `orch bench` will run, decided before anything runs (no SSH; the only file read is
a model given to --model as a path, checked to be an ONNX model).

boards x releases (variants) x models x quantisation x settings, repeated in rounds. Within a
round every combination runs once, in a fixed order (A B A B ...), so slow drift (heat, a
background job) hits every variant and setting alike instead of biasing whichever ran last. A
cooldown separates consecutive agent runs so one run's heat does not become the next one's
throttling.

Releases are only known once connected to a board, so the plan is made in two steps: the
``BenchPlan`` from the command line, then ``board_steps(plan, releases)`` per board with the
releases the board reported.
"""

from __future__ import annotations

import difflib
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from orchestrator.artifacts.identity import route_of
from orchestrator.bench.calibration import CalibrationSpec
from orchestrator.board import Board
from orchestrator.errors import BenchError, UsageError
from orchestrator.ort_versions import check_ort_version

OPT_LEVELS = ("disable", "basic", "extended", "all")
EXECUTION_PROVIDERS = ("cpu", "xnnpack", "cuda", "tensorrt")  # what bench_agent.py maps to providers
QUANTIZE_MODES = ("dynamic", "static")
AGENT_SCRIPT = "agent/bench_agent.py"
# What runs the model on the board: the Python agent, or the native runner on ORT's C API
# (``<release>/native/orch-runner``, made by ``orch build``); ``both`` measures them side by side.
RUNNERS = ("python", "native")
RUNNER_CHOICES = ("python", "native", "both")
# A launch for cold start: one process from exec to its first result, nothing more.
COLD_LAUNCH = ("--warmup", "0", "--min-runs", "1", "--min-duration", "0")
INT8_SUFFIX = ".int8.onnx"


@dataclass(frozen=True, kw_only=True)
class Setting:
    """One session configuration of the agent."""

    ep: str = "cpu"
    opt_level: str = "all"
    intra_threads: int = 0  # 0 = onnxruntime's default
    inter_threads: int = 0


@dataclass(frozen=True, kw_only=True)
class AgentOptions:
    """How long the agent measures. The defaults suit a real board; the lab wants tiny values."""

    warmup: int = 5
    min_runs: int = 30
    min_duration: float = 3.0
    max_runs: int = 100000
    shapes: tuple[str, ...] = ()
    sysfs_root: str | None = None  # None = the board's /sys
    # --pin-cores: each intra-op thread on one of these CPUs (Linux numbers), the calling thread on
    # the first; for both runners. Empty: the OS schedules them.
    pin_cores: tuple[int, ...] = ()


QUICK = AgentOptions(warmup=1, min_runs=5, min_duration=0.0)


@dataclass(frozen=True, kw_only=True)
class Combination:
    """One measured combination on a board: a variant's release, fp32 or int8, a session setting."""

    variant: str
    quant: str = "fp32"
    setting: Setting = Setting()

    def as_dict(self) -> dict[str, Any]:
        return {"variant": self.variant, "quant": self.quant, **vars(self.setting)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Combination:
        fields = {
            name: data[name] for name in ("ep", "opt_level", "intra_threads", "inter_threads") if name in data
        }
        return cls(
            variant=str(data["variant"]), quant=str(data.get("quant", "fp32")), setting=Setting(**fields)
        )

    def label(self) -> str:
        """``tuned fp32 cpu opt=all threads=2`` (threads 0: onnxruntime's default)."""
        setting = self.setting
        threads = setting.intra_threads or "default"
        inter = f" inter={setting.inter_threads}" if setting.inter_threads else ""
        return f"{self.variant} {self.quant} {setting.ep} opt={setting.opt_level} threads={threads}{inter}"


@dataclass(frozen=True, kw_only=True)
class ReleaseRef:
    """The part of a board's release that bench needs (see orchestrator.deploy.releases.ReleaseInfo)."""

    id: str
    variant: str
    path: str
    python: str
    models: tuple[str, ...]  # file names under <path>/models
    ort_version: str = ""
    created: str = ""
    current: bool = False
    route: str = ""  # how its wheel was made (orchestrator.artifacts.identity)
    # The execution providers its onnxruntime listed when deploy verified it on the board (empty: unknown).
    providers: tuple[str, ...] = ()
    # release.json's "native" (runner path and size, C library and size), when the release has a runner.
    native: dict[str, Any] | None = field(default=None, compare=False)
    wheel_size: int | None = None

    @classmethod
    def from_info(cls, info: Any) -> ReleaseRef:
        document = getattr(info, "document", None) or {}
        native = document.get("native")
        manifest = document.get("manifest")
        wheel_size = manifest.get("wheel_size") if isinstance(manifest, dict) else None
        verified = getattr(info, "verified", None)
        verification = verified.get("verification") if isinstance(verified, dict) else None
        providers = verification.get("providers") if isinstance(verification, dict) else None
        return cls(
            id=info.id,
            variant=info.variant,
            path=info.path,
            python=info.python or posixpath.join(info.path, "venv", "bin", "python"),
            models=tuple(sorted(info.models)),
            ort_version=info.ort_version,
            created=getattr(info, "created", "") or "",
            current=bool(getattr(info, "current", False)),
            route=route_of((getattr(info, "document", None) or {}).get("manifest")),
            native=native if isinstance(native, dict) and isinstance(native.get("runner"), str) else None,
            wheel_size=wheel_size if isinstance(wheel_size, int) else None,
            providers=tuple(str(p) for p in providers) if isinstance(providers, list) else (),
        )

    def model_path(self, model_file: str) -> str:
        return posixpath.join(self.path, "models", model_file)

    @property
    def agent(self) -> str:
        return posixpath.join(self.path, AGENT_SCRIPT)

    @property
    def runner(self) -> str | None:
        return posixpath.join(self.path, self.native["runner"]) if self.native else None


@dataclass(frozen=True, kw_only=True)
class BenchPlan:
    boards: tuple[Board, ...]
    variants: tuple[str, ...] = ()  # empty: each board's current release
    models: tuple[str, ...] = ()  # empty: every model of the release
    settings: tuple[Setting, ...] = (Setting(),)
    quantize: str | None = None
    calibration: CalibrationSpec = field(default_factory=CalibrationSpec)  # --quantize static
    rounds: int = 10
    cooldown_s: float = 2.0
    agent: AgentOptions = field(default_factory=AgentOptions)
    # --ort-version: (variant, version) pairs; variant "" = every variant. Empty: no choice made.
    ort_versions: tuple[tuple[str, str], ...] = ()
    allow_version_mismatch: bool = False
    pin_clocks: bool = False
    parallel: int = 8
    step_timeout_s: float = 1800.0
    threshold: float = 0.05
    runners: tuple[str, ...] = ("python",)
    cold_starts: int = 0  # process launches per combination and round, each one cold-start sample
    # Only these combinations of the cross product run (empty: all of it); `orch tune`'s rungs.
    only: tuple[Combination, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {
            "boards": [board.name for board in self.boards],
            "variants": list(self.variants) or ["<current release>"],
            "models": list(self.models) or ["<every deployed model>"],
            "settings": [vars(setting) for setting in self.settings],
            "quantize": self.quantize,
            **({"calibration": self.calibration.as_dict()} if self.quantize == "static" else {}),
            "rounds": self.rounds,
            "cooldown_s": self.cooldown_s,
            "agent": {**vars(self.agent), "shapes": list(self.agent.shapes)},
            "pin_clocks": self.pin_clocks,
            "parallel": self.parallel,
            "step_timeout_s": self.step_timeout_s,
            "threshold": self.threshold,
            "ort_versions": {variant or "*": version for variant, version in self.ort_versions},
            "allow_version_mismatch": self.allow_version_mismatch,
            "runners": list(self.runners),
            "cold_starts": self.cold_starts,
            **({"only": [combination.as_dict() for combination in self.only]} if self.only else {}),
        }

    def ort_version_for(self, variant: str) -> str | None:
        """The ORT release --ort-version asks of a variant (None: any)."""
        chosen = dict(self.ort_versions)
        return chosen.get(variant) or chosen.get("") or None


@dataclass(frozen=True, kw_only=True)
class Step:
    """One agent run on one board."""

    index: int
    round: int
    release: ReleaseRef
    model: str  # the fp32 model's file name (the series is named after it)
    model_file: str  # the file actually measured (the .int8.onnx one when quant == int8)
    quant: str
    setting: Setting
    cooldown_s: float
    argv: tuple[str, ...]
    runner: str = "python"
    launches: int = 0  # > 0: a cold-start step, ``launches`` processes (one JSON document each)

    def key(self) -> dict[str, Any]:
        return {
            "runner": self.runner,
            "variant": self.release.variant,
            "release": self.release.id,
            "model": self.model,
            "quant": self.quant,
            "ep": self.setting.ep,
            "opt_level": self.setting.opt_level,
            "intra_threads": self.setting.intra_threads,
            "inter_threads": self.setting.inter_threads,
        }


# --------------------------------------------------------------------------- parsing options


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


def parse_opt_levels(values: Sequence[str]) -> list[str]:
    for value in values:
        if value not in OPT_LEVELS:
            raise UsageError(f"--opt-level {value!r}: choose from {', '.join(OPT_LEVELS)}")
    return list(values)


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
    opt_levels: Sequence[str] = (),
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
    settings = []
    for ep in eps or ["cpu"]:
        for opt_level in opt_levels or ["all"]:
            for intra in threads or [0]:
                settings.append(
                    Setting(ep=ep, opt_level=opt_level, intra_threads=intra, inter_threads=inter_threads)
                )
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


def ort_affinities(cores: Sequence[int]) -> str:
    """ORT's session.intra_op_thread_affinities for ``cores``: the pool threads, not the calling
    one (that one is the process's, pinned with --main-cpu), with processors counted from 1."""
    return ";".join(str(core + 1) for core in cores[1:])


def make_plan(
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
    threshold: float = 0.05,
    runner: str = "python",
    cold_starts: int = 0,
) -> BenchPlan:
    if runner not in RUNNER_CHOICES:
        raise UsageError(f"--runner {runner!r}: choose from {', '.join(RUNNER_CHOICES)}")
    if cold_starts < 0:
        raise UsageError(f"--cold-starts {cold_starts}: must be >= 0")
    if len(set(variants)) != len(variants):
        raise UsageError(f"--variant lists a variant twice: {','.join(variants)}")
    if quantize is not None and quantize not in QUANTIZE_MODES:
        raise UsageError(f"--quantize {quantize!r}: supported: {', '.join(QUANTIZE_MODES)}")
    calibration = calibration or CalibrationSpec()
    if calibration.files and quantize != "static":
        raise UsageError("--calibration is for --quantize static (dynamic quantisation needs no data)")
    if rounds < 1:
        raise UsageError("--rounds must be at least 1")
    if cooldown_s < 0 or step_timeout_s <= 0 or parallel < 1:
        raise UsageError("--cooldown must be >= 0, --step-timeout > 0 and --parallel >= 1")
    if threshold < 0:
        raise UsageError("--threshold must be >= 0 (e.g. 0.05 for 5 %)")
    agent = agent or AgentOptions()
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
    models = tuple(model_name(model) for model in models)
    return BenchPlan(
        boards=tuple(boards),
        variants=tuple(variants),
        models=tuple(models),
        settings=tuple(settings),
        quantize=quantize,
        calibration=calibration,
        rounds=rounds,
        cooldown_s=cooldown_s,
        agent=agent,
        pin_clocks=pin_clocks,
        parallel=parallel,
        step_timeout_s=step_timeout_s,
        threshold=threshold,
        ort_versions=tuple(ort_versions),
        allow_version_mismatch=allow_version_mismatch,
        runners=RUNNERS if runner == "both" else (runner,),
        cold_starts=cold_starts,
    )


# --------------------------------------------------------------------------- per board


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
        current = [release for release in releases if release.current]
        if not current:
            raise BenchError(f"{board}: no release is current", hint=f"orch deploy --host {board}")
        wanted = plan.ort_version_for(current[0].variant)
        if wanted and current[0].ort_version != wanted:
            raise BenchError(
                f"{board}: the current release {current[0].id} is ORT {current[0].ort_version}, not {wanted}",
                hint=f"name the variant to measure: orch bench --host {board} --variant V --ort-version {wanted}",
            )
        return (current[0],)
    chosen = []
    for variant in plan.variants:
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
        # Newest by creation time; among equals the list order (least recently used first) decides.
        chosen.append(max(enumerate(mine), key=lambda item: (item[1].created, item[0]))[1])
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
                hint=f"orch deploy --host {board} --model models/{wanted}.onnx",
            )
        chosen.append(found[0])
    return tuple(dict.fromkeys(chosen))


def int8_name(model_file: str, mode: str = "dynamic", calibration_id: str = "") -> str:
    """``m.int8.onnx`` (dynamic) or ``m.static-<calibration id>.int8.onnx`` (static)."""
    stem = model_file.removesuffix(".onnx")
    return stem + (f".static-{calibration_id}" if mode == "static" else "") + INT8_SUFFIX


def quant_label(mode: str | None) -> str:
    """The ``quant`` of the int8 series: ``int8`` (dynamic) or ``int8-static``."""
    return "int8-static" if mode == "static" else "int8"


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
    from orchestrator.board_side import read_text

    launched = list(argv)
    for index in range(len(launched) - 1):
        if launched[index] in ("--warmup", "--min-runs", "--min-duration"):
            launched[index + 1] = COLD_LAUNCH[COLD_LAUNCH.index(launched[index]) + 1]
    return ("sh", "-c", read_text("cold_launch.sh"), "cold_launch.sh", str(launches), *launched)


def check_runners(plan: BenchPlan, releases: Sequence[ReleaseRef], board: str) -> None:
    """Every chosen release must have a native runner when the native one is asked for."""
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
    quants = ("fp32", quant_label(plan.quantize)) if plan.quantize else ("fp32",)
    steps: list[Step] = []
    for round_index in range(1, plan.rounds + 1):
        for model in models:
            for setting in plan.settings:
                for quant in quants:
                    for release in releases:
                        wanted = Combination(variant=release.variant, quant=quant, setting=setting)
                        if plan.only and wanted not in plan.only:
                            continue
                        model_file = (
                            model
                            if quant == "fp32"
                            else int8_name(model, plan.quantize or "", plan.calibration.id)
                        )
                        for runner in plan.runners:
                            make = runner_argv if runner == "native" else agent_argv
                            argv = make(release, release.model_path(model_file), setting, plan.agent)
                            kinds = [(argv, 0)]
                            if plan.cold_starts:
                                kinds.append((cold_argv(argv, plan.cold_starts), plan.cold_starts))
                            for step_argv, launches in kinds:
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
                                        argv=step_argv,
                                        runner=runner,
                                        launches=launches,
                                    )
                                )
    return steps


def with_agent(plan: BenchPlan, **changes: Any) -> BenchPlan:
    return replace(plan, agent=replace(plan.agent, **changes))
