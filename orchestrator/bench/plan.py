"""BenchPlan: what `orch bench` will run, decided before anything runs, and the values it is made of.

boards x releases (variants) x models x quantisation x settings, repeated in rounds. Within a
round every combination runs once, in a fixed order (A B A B ...), so slow drift (heat, a
background job) hits every variant and setting alike instead of biasing whichever ran last. A
cooldown separates consecutive agent runs so one run's heat does not become the next one's
throttling.

Releases are only known once connected to a board, so the plan is made in two steps: the
``BenchPlan`` from the command line (``plan_options.make_plan``), then per board the releases the
board reported and the ``Step``s that measure them (``steps.board_steps``).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, cast

from orchestrator.artifacts.identity import route_of
from orchestrator.bench.calibration import CalibrationSpec
from orchestrator.bench.records import (
    CombinationRecord,
    MeasurementKey,
    NativeFiles,
    PlanRecord,
    ReleaseRecord,
    SettingRecord,
)
from orchestrator.board import Board
from orchestrator.deploy.lock_settings import DEFAULT_LOCK_TIMEOUT

OptLevel = Literal["disable", "basic", "extended", "all"]
OPT_LEVELS: tuple[OptLevel, ...] = ("disable", "basic", "extended", "all")
EXECUTION_PROVIDERS = ("cpu", "xnnpack", "cuda", "tensorrt")  # what bench_agent.py maps to providers
QuantizeMode = Literal["dynamic", "static"]
QUANTIZE_MODES: tuple[QuantizeMode, ...] = ("dynamic", "static")
# A series' quantisation: the fp32 model, or its int8 copy (dynamic, or static with calibration data).
Quant = Literal["fp32", "int8", "int8-static"]
QUANTS: tuple[Quant, ...] = ("fp32", "int8", "int8-static")
AGENT_SCRIPT = "agent/bench_agent.py"
# What runs the model on the board: the Python agent, or the native runner on ORT's C API
# (``<release>/native/orch-runner``, made by ``orch build``); ``both`` measures them side by side.
Runner = Literal["python", "native"]
RUNNERS: tuple[Runner, ...] = ("python", "native")
RunnerChoice = Literal["python", "native", "both"]
RUNNER_CHOICES: tuple[RunnerChoice, ...] = ("python", "native", "both")
INT8_SUFFIX = ".int8.onnx"

_Choice = TypeVar("_Choice", bound=str)


def one_of(value: object, choices: tuple[_Choice, ...]) -> _Choice | None:
    """``value`` as the one of ``choices`` it equals (typed as they are), or None."""
    return next((choice for choice in choices if choice == value), None)


def checked(value: object, choices: tuple[_Choice, ...], what: str) -> _Choice:
    """``value`` as one of ``choices``; ValueError naming ``what`` when it is none of them."""
    found = one_of(value, choices)
    if found is None:
        raise ValueError(f"{what} {value!r}: not one of {', '.join(choices)}")
    return found


@dataclass(frozen=True, kw_only=True)
class Setting:
    """One session configuration of the agent."""

    ep: str = "cpu"  # a name of EXECUTION_PROVIDERS or onnxruntime's full provider name
    opt_level: OptLevel = "all"
    intra_threads: int = 0  # 0 = onnxruntime's default
    inter_threads: int = 0

    def as_dict(self) -> SettingRecord:
        return {
            "ep": self.ep,
            "opt_level": self.opt_level,
            "intra_threads": self.intra_threads,
            "inter_threads": self.inter_threads,
        }


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
    quant: Quant = "fp32"
    setting: Setting = Setting()

    def as_dict(self) -> CombinationRecord:
        return {"variant": self.variant, "quant": self.quant, **self.setting.as_dict()}

    @classmethod
    def from_dict(cls, data: CombinationRecord) -> Combination:
        setting = Setting(
            ep=data["ep"],
            opt_level=checked(data["opt_level"], OPT_LEVELS, "opt_level"),
            intra_threads=data["intra_threads"],
            inter_threads=data["inter_threads"],
        )
        return cls(variant=data["variant"], quant=checked(data["quant"], QUANTS, "quant"), setting=setting)

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
    native: NativeFiles | None = field(default=None, compare=False)
    wheel_size: int | None = None
    # "library": a C library build's release (orch deploy --scope library): its native runner and
    # ORT's C library, no venv, so no Python agent; "wheel" for every other (release.json says so).
    kind: str = "wheel"

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
            native=cast(NativeFiles, native)
            if isinstance(native, dict) and isinstance(native.get("runner"), str)
            else None,
            wheel_size=wheel_size if isinstance(wheel_size, int) else None,
            providers=tuple(str(p) for p in providers) if isinstance(providers, list) else (),
            kind="library" if document.get("kind") == "library" else "wheel",
        )

    def as_json(self) -> ReleaseRecord:
        """As a board record keeps it."""
        return {
            "id": self.id,
            "variant": self.variant,
            "path": self.path,
            "python": self.python,
            "models": list(self.models),
            "ort_version": self.ort_version,
            "created": self.created,
            "current": self.current,
            "route": self.route,
            "providers": list(self.providers),
            "native": self.native,
            "wheel_size": self.wheel_size,
            "kind": self.kind,
        }

    def model_path(self, model_file: str) -> str:
        return posixpath.join(self.path, "models", model_file)

    @property
    def agent(self) -> str:
        return posixpath.join(self.path, AGENT_SCRIPT)

    @property
    def runner(self) -> str | None:
        return posixpath.join(self.path, self.native["runner"]) if self.native else None

    @property
    def has_python(self) -> bool:
        """Whether the release has an interpreter with onnxruntime (the agent's, quantisation's)."""
        return self.kind != "library"


@dataclass(frozen=True, kw_only=True)
class BenchPlan:
    boards: tuple[Board, ...]
    variants: tuple[str, ...] = ()  # empty: each board's current release
    models: tuple[str, ...] = ()  # empty: every model of the release
    settings: tuple[Setting, ...] = (Setting(),)
    quantize: QuantizeMode | None = None
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
    # How long a board whose lock another orch holds (a deploy) is waited for before it is refused.
    lock_timeout_s: float = DEFAULT_LOCK_TIMEOUT
    threshold: float = 0.05
    runners: tuple[Runner, ...] = ("python",)
    cold_starts: int = 0  # process launches per combination and round, each one cold-start sample
    # Only these combinations of the cross product run (empty: all of it); `orch tune`'s rungs.
    only: tuple[Combination, ...] = ()

    def as_dict(self) -> PlanRecord:
        agent = self.agent
        head: PlanRecord = {
            "boards": [board.name for board in self.boards],
            "variants": list(self.variants) or ["<current release>"],
            "models": list(self.models) or ["<every deployed model>"],
            "settings": [setting.as_dict() for setting in self.settings],
            "quantize": self.quantize,
        }
        if self.quantize == "static":
            head["calibration"] = self.calibration.as_dict()
        plan: PlanRecord = {
            **head,
            "rounds": self.rounds,
            "cooldown_s": self.cooldown_s,
            "agent": {
                "warmup": agent.warmup,
                "min_runs": agent.min_runs,
                "min_duration": agent.min_duration,
                "max_runs": agent.max_runs,
                "shapes": list(agent.shapes),
                "sysfs_root": agent.sysfs_root,
                "pin_cores": list(agent.pin_cores),
            },
            "pin_clocks": self.pin_clocks,
            "parallel": self.parallel,
            "step_timeout_s": self.step_timeout_s,
            "lock_timeout_s": self.lock_timeout_s,
            "threshold": self.threshold,
            "ort_versions": {variant or "*": version for variant, version in self.ort_versions},
            "allow_version_mismatch": self.allow_version_mismatch,
            "runners": list(self.runners),
            "cold_starts": self.cold_starts,
        }
        if self.only:
            plan["only"] = [combination.as_dict() for combination in self.only]
        return plan

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
    model_file: str  # the file actually measured (the .int8.onnx one when quant is an int8 one)
    quant: Quant
    setting: Setting
    cooldown_s: float
    argv: tuple[str, ...]
    runner: Runner = "python"
    launches: int = 0  # > 0: a cold-start step, ``launches`` processes (one JSON document each)

    def key(self) -> MeasurementKey:
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


def int8_name(model_file: str, mode: QuantizeMode = "dynamic", calibration_id: str = "") -> str:
    """``m.int8.onnx`` (dynamic) or ``m.static-<calibration id>.int8.onnx`` (static)."""
    stem = model_file.removesuffix(".onnx")
    return stem + (f".static-{calibration_id}" if mode == "static" else "") + INT8_SUFFIX


def quant_label(mode: QuantizeMode | None) -> Quant:
    """The ``quant`` of the int8 series: ``int8`` (dynamic) or ``int8-static``."""
    return "int8-static" if mode == "static" else "int8"
