"""On-device benchmark agent: times one ONNX model under one session setting and prints one JSON document.

Runs on the board inside a release's venv (``<release>/venv/bin/python <release>/agent/bench_agent.py``)
with only the standard library, numpy and onnxruntime. Everything it measures goes to stdout as a
single JSON document (``"ok": false`` plus ``"error"`` when something failed, exit code 1), so the
orchestrator never has to scrape text. Board facts that do not exist on a board (no cpufreq, no
thermal zones, no nvpmodel) are reported as ``null``; they never make the agent fail.

Timing follows the usual on-device protocol: session creation, one cold (first) inference, a few
warm-up runs, then timed runs until BOTH ``--min-runs`` and ``--min-duration`` are reached (like
MLPerf's minimum query count and duration), with every raw latency kept.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import shutil
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

SCHEMA = "orch-bench-agent/1"

# ONNX tensor type strings (as onnxruntime reports them) -> numpy dtype names.
_DTYPES = {
    f"tensor({name})": name
    for name in ("float16", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64", "bool")
}
_DTYPES.update({"tensor(float)": "float32", "tensor(double)": "float64"})

_OPT_LEVELS = ("disable", "basic", "extended", "all")

# ARM "CPU part" ids seen on the supported boards, for a readable CPU model when /proc/cpuinfo has no name.
_ARM_PARTS = {
    "0xd03": "Cortex-A53", "0xd04": "Cortex-A35", "0xd05": "Cortex-A55", "0xd07": "Cortex-A57",
    "0xd08": "Cortex-A72", "0xd09": "Cortex-A73", "0xd0a": "Cortex-A75", "0xd0b": "Cortex-A76",
    "0xd0c": "Neoverse-N1", "0xd41": "Cortex-A78", "0xd42": "Cortex-A78AE", "0x004": "Carmel",
}  # fmt: skip


class AgentError(Exception):
    """A failure with the stage it happened in, reported in the JSON document."""

    def __init__(self, stage: str, message: str) -> None:
        super().__init__(message)
        self.stage = stage


# --------------------------------------------------------------------------- board state


def _read(path: Path) -> str | None:
    """A sysfs/procfs value, or None when the file does not exist or cannot be read on this board."""
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _read_int(path: Path) -> int | None:
    value = _read(path)
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _parse_cpu_list(text: str | None) -> list[int] | None:
    """'0-3,5' -> [0, 1, 2, 3, 5] (the sysfs cpu list format)."""
    if not text:
        return None
    cpus: list[int] = []
    try:
        for part in text.split(","):
            if "-" in part:
                low, high = part.split("-")
                cpus.extend(range(int(low), int(high) + 1))
            else:
                cpus.append(int(part))
    except ValueError:
        return None
    return cpus


def cpu_model(proc_root: Path, sysfs_root: Path) -> str | None:
    cpuinfo = _read(proc_root / "cpuinfo") or ""
    fields: dict[str, str] = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip().lower(), value.strip())
    name = fields.get("model name") or fields.get("hardware") or fields.get("cpu model")
    if not name and "cpu part" in fields:
        part = fields["cpu part"].lower()
        name = _ARM_PARTS.get(part, f"ARM part {part}")
    # The device tree names the board itself on Raspberry Pis and Jetsons ("Raspberry Pi 4 Model B Rev 1.4").
    board_model = _read(proc_root / "device-tree" / "model") or _read(
        sysfs_root / "firmware/devicetree/base/model"
    )
    if board_model:
        board_model = board_model.rstrip("\x00")
        return f"{name} ({board_model})" if name else board_model
    return name or platform.processor() or None


def cpufreq_state(sysfs_root: Path, cpus: list[int]) -> dict[str, dict[str, Any]]:
    state: dict[str, dict[str, Any]] = {}
    for cpu in cpus:
        base = sysfs_root / "devices/system/cpu" / f"cpu{cpu}" / "cpufreq"
        state[f"cpu{cpu}"] = {
            "governor": _read(base / "scaling_governor"),
            "cur_khz": _read_int(base / "scaling_cur_freq"),
            "min_khz": _read_int(base / "scaling_min_freq"),
            "max_khz": _read_int(base / "scaling_max_freq"),
            "hw_max_khz": _read_int(base / "cpuinfo_max_freq"),
        }
    return state


def thermal_state(sysfs_root: Path) -> list[dict[str, Any]]:
    zones = []
    thermal = sysfs_root / "class/thermal"
    try:
        entries = sorted(thermal.iterdir(), key=lambda p: p.name)
    except OSError:
        return []
    for zone in entries:
        if not zone.name.startswith("thermal_zone"):
            continue
        millicelsius = _read_int(zone / "temp")
        zones.append(
            {
                "zone": zone.name,
                "type": _read(zone / "type"),
                "temp_c": millicelsius / 1000.0 if millicelsius is not None else None,
            }
        )
    return zones


def load_average() -> list[float] | None:
    try:
        return [round(value, 2) for value in os.getloadavg()]
    except OSError:
        return None


def nvpmodel_mode() -> str | None:
    """Jetson power mode (``nvpmodel -q``), or None on boards without it."""
    tool = shutil.which("nvpmodel")
    if tool is None:
        return None
    try:
        done = subprocess.run([tool, "-q"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    text = done.stdout.strip()
    return text or None


def board_state(sysfs_root: Path, proc_root: Path) -> dict[str, Any]:
    uname = os.uname()
    online = _parse_cpu_list(_read(sysfs_root / "devices/system/cpu/online"))
    cpus = online if online is not None else sorted(os.sched_getaffinity(0))
    return {
        "hostname": uname.nodename,
        "kernel": uname.release,
        "kernel_version": uname.version,
        "machine": uname.machine,
        "cpu_model": cpu_model(proc_root, sysfs_root),
        "online_cpus": online,
        "online_cores": len(cpus),
        "usable_cores": len(os.sched_getaffinity(0)),
        "cpufreq": cpufreq_state(sysfs_root, cpus),
        "thermal": thermal_state(sysfs_root),
        "loadavg": load_average(),
        "nvpmodel": nvpmodel_mode(),
        "mem_total_kb": _meminfo_total(proc_root),
    }


def _meminfo_total(proc_root: Path) -> int | None:
    for line in (_read(proc_root / "meminfo") or "").splitlines():
        if line.startswith("MemTotal:"):
            try:
                return int(line.split()[1])
            except (IndexError, ValueError):
                return None
    return None


def volatile_state(sysfs_root: Path, cpus: list[int]) -> dict[str, Any]:
    """What changes during a run: temperatures, clocks, load (taken again after the timed runs)."""
    return {
        "thermal": thermal_state(sysfs_root),
        "cpufreq": cpufreq_state(sysfs_root, cpus),
        "loadavg": load_average(),
    }


# --------------------------------------------------------------------------- model inputs


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def parse_shapes(items: list[str]) -> dict[str, list[int]]:
    shapes = {}
    for item in items:
        name, sep, dims = item.partition("=")
        try:
            if not sep or not name:
                raise ValueError
            shapes[name] = [int(dim) for dim in dims.lower().split("x")]
        except ValueError:
            raise AgentError(
                "arguments", f"--shape {item!r}: expected NAME=DxDxD, e.g. input=1x3x224x224"
            ) from None
    return shapes


def parse_npy_inputs(items: list[str]) -> dict[str, str]:
    inputs = {}
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise AgentError("arguments", f"--input {item!r}: expected NAME=PATH.npy")
        inputs[name] = path
    return inputs


def make_inputs(
    np: Any, session: Any, shapes: dict[str, list[int]], files: dict[str, str]
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """Input tensors from the model's metadata (free dims from --shape, else 1) or from .npy files."""
    rng = np.random.default_rng(0)
    known = {meta.name for meta in session.get_inputs()}
    unknown = [name for name in [*shapes, *files] if name not in known]
    if unknown:
        raise AgentError(
            "inputs", f"the model has no input {unknown[0]!r} (inputs: {', '.join(sorted(known))})"
        )
    feeds: dict[str, Any] = {}
    described: list[dict[str, Any]] = []
    for meta in session.get_inputs():
        if meta.name in files:
            array, source = np.load(files[meta.name]), "npy"
        else:
            array, source = _generated_input(rng, meta, shapes.get(meta.name))
        feeds[meta.name] = array
        described.append(
            {
                "name": meta.name,
                "model_type": meta.type,
                "model_shape": [dim if isinstance(dim, int) else str(dim) for dim in meta.shape],
                "dtype": str(array.dtype),
                "shape": list(array.shape),
                "source": source,
            }
        )
    return feeds, described


def _generated_input(rng: Any, meta: Any, shape: list[int] | None) -> tuple[Any, str]:
    """Random values of an input's type, of the --shape given, else of the model's shape; and which."""
    dtype = _DTYPES.get(meta.type)
    if dtype is None:
        raise AgentError(
            "inputs", f"input {meta.name!r} has type {meta.type}; give it as --input NAME=file.npy"
        )
    source = "model-metadata" if shape is None else "shape-option"
    if shape is None:
        # Free (symbolic) dimensions default to 1: batch 1 is the on-device case.
        shape = [dim if isinstance(dim, int) and dim > 0 else 1 for dim in meta.shape]
    elif len(shape) != len(meta.shape):
        raise AgentError(
            "inputs", f"--shape {meta.name}: {len(shape)} dims given, the model has {len(meta.shape)}"
        )
    if dtype.startswith("float"):
        return rng.standard_normal(shape).astype(dtype), source
    if dtype == "bool":
        return rng.integers(0, 2, size=shape).astype(bool), source
    return rng.integers(0, 8, size=shape).astype(dtype), source


# --------------------------------------------------------------------------- the measurement


def percentile_stats(np: Any, latencies_ms: list[float], duration_s: float) -> dict[str, float | int]:
    samples = np.asarray(latencies_ms, dtype=float)
    p50, p90, p99 = np.percentile(samples, [50, 90, 99])
    return {
        "n": int(samples.size),
        "p50_ms": float(p50),
        "p90_ms": float(p90),
        "p99_ms": float(p99),
        "mean_ms": float(samples.mean()),
        "std_ms": float(samples.std(ddof=1)) if samples.size > 1 else 0.0,
        "min_ms": float(samples.min()),
        "max_ms": float(samples.max()),
        "throughput_ips": float(samples.size / duration_s) if duration_s > 0 else 0.0,
    }


def pin_main_thread(cpu: int) -> None:
    """--main-cpu: this process (the thread that calls Run) on one CPU, before onnxruntime starts;
    its pool threads are placed by --affinity."""
    usable = sorted(os.sched_getaffinity(0))
    if cpu not in usable:
        raise AgentError(
            "arguments", f"--pin-cores: CPU {cpu} is not one this process may use here ({usable})"
        )
    os.sched_setaffinity(0, {cpu})


_EP_ALIASES = {
    "cpu": "CPUExecutionProvider", "xnnpack": "XnnpackExecutionProvider",
    "cuda": "CUDAExecutionProvider", "tensorrt": "TensorrtExecutionProvider",
}  # fmt: skip


@dataclass(frozen=True)
class SessionPlan:
    """What a session is made with, decided before onnxruntime is asked for one."""

    intra_op_threads: int  # ORT's own intra-op pool
    xnnpack_threads: int | None  # XNNPACK's own pool; None: another EP
    config: dict[str, str]  # session config entries
    providers: list[str | tuple[str, dict[str, str]]]  # InferenceSession's providers=


def session_plan(
    ep: str, intra_op_threads: int, affinity: str | None, available: list[str], usable_cpus: int
) -> SessionPlan:
    """--ep cpu|xnnpack|cuda|tensorrt|<FullProviderName> with the thread options -> the session's plan,
    checked against this build's providers (``available``)."""
    name = _EP_ALIASES.get(ep.lower(), ep)
    xnnpack = name == "XnnpackExecutionProvider"
    if xnnpack and affinity:
        raise AgentError(
            "arguments",
            "--affinity places onnxruntime's intra-op pool threads, but with xnnpack that pool has 1 thread"
            " and XNNPACK runs its own pool, which onnxruntime does not place: leave --affinity out",
        )
    if name not in available:
        raise AgentError(
            "session", f"execution provider {name} is not in this build (available: {', '.join(available)})"
        )
    config: dict[str, str] = {}
    if affinity:
        # One entry per intra-op thread but the calling one ("1;2;3" with 4 threads), as the native runner.
        config["session.intra_op_thread_affinities"] = affinity
    if xnnpack:
        # The XNNPACK EP's documentation: its own pool contends with ORT's, so ORT's pool gets 1 thread and
        # no spinning, XNNPACK's the threads asked for. 0 (ORT's default, one per core) would leave XNNPACK
        # on ORT's 1 thread: it gets the CPUs this process may use instead, and the document says so.
        threads = intra_op_threads or usable_cpus
        config["session.intra_op.allow_spinning"] = "0"
        return SessionPlan(
            1, threads, config, [(name, {"intra_op_num_threads": str(threads)}), "CPUExecutionProvider"]
        )
    others = [] if name == "CPUExecutionProvider" else ["CPUExecutionProvider"]
    return SessionPlan(intra_op_threads, None, config, [name, *others])


def session_options(ort: Any, args: argparse.Namespace, plan: SessionPlan) -> Any:
    options = ort.SessionOptions()
    options.graph_optimization_level = {
        "disable": ort.GraphOptimizationLevel.ORT_DISABLE_ALL,
        "basic": ort.GraphOptimizationLevel.ORT_ENABLE_BASIC,
        "extended": ort.GraphOptimizationLevel.ORT_ENABLE_EXTENDED,
        "all": ort.GraphOptimizationLevel.ORT_ENABLE_ALL,
    }[args.opt_level]
    options.intra_op_num_threads = plan.intra_op_threads
    options.inter_op_num_threads = args.inter_op_threads
    for key, value in plan.config.items():
        options.add_session_config_entry(key, value)
    return options


def since_launch_ms() -> float | None:
    """Milliseconds since the launcher started this process (ORCH_LAUNCH_T0_NS, CLOCK_REALTIME ns, set
    by cold_launch.sh), the clock the native runner reports too; None when not launched that way."""
    try:
        t0 = int(os.environ.get("ORCH_LAUNCH_T0_NS", ""))
    except ValueError:
        return None
    return (time.time_ns() - t0) / 1e6 if t0 > 0 else None


def measure(
    args: argparse.Namespace, document: dict[str, Any], launch_to_main_ms: float | None = None
) -> None:
    """Import, load the model, make the session, time the runs: each step fills its part of ``document``."""
    np, ort = _import_runtime(document, launch_to_main_ms)
    model = Path(args.model)
    if not model.is_file():
        raise AgentError("model", f"model file not found: {model}")
    document["model"] = {
        "path": str(model),
        "name": model.name,
        "size": model.stat().st_size,
        "sha256": sha256_of(model),
    }
    session = _session(ort, args, model, document)
    feeds, described = make_inputs(np, session, parse_shapes(args.shape), parse_npy_inputs(args.input))
    document["model"]["inputs"] = described
    document["model"]["outputs"] = [
        {
            "name": meta.name,
            "type": meta.type,
            "shape": [d if isinstance(d, int) else str(d) for d in meta.shape],
        }
        for meta in session.get_outputs()
    ]
    latencies, duration = _timed_runs(session, feeds, args, document["timing"])
    document["timing"].update({"runs": len(latencies), "duration_s": duration, "latencies_ms": latencies})
    document["stats"] = percentile_stats(np, latencies, duration)


def _import_runtime(document: dict[str, Any], launch_to_main_ms: float | None) -> tuple[Any, Any]:
    """numpy and onnxruntime, imported here and timed: in the measured process, after the agent host
    forked it (see agent_host.py)."""
    started = time.perf_counter()
    try:
        import numpy as np  # noqa: PLC0415 -- the import is part of what is timed, after the fork
        import onnxruntime as ort
    except ImportError as error:
        raise AgentError(
            "import", f"cannot import numpy/onnxruntime with {sys.executable}: {error}"
        ) from None
    document["timing"] = {"import_s": time.perf_counter() - started, "launch_to_main_ms": launch_to_main_ms}
    build_info = None
    if hasattr(ort, "get_build_info"):
        try:
            build_info = ort.get_build_info()
        except Exception:  # noqa: BLE001 - build info is informative only
            build_info = None
    document["ort"] = {
        "version": ort.__version__,
        "file": ort.__file__,  # which onnxruntime: a release's, or one on PYTHONPATH (a profile training's)
        "build_info": build_info,
        "device": ort.get_device(),
        "available_providers": ort.get_available_providers(),
        "numpy": np.__version__,
    }
    return np, ort


def _session(ort: Any, args: argparse.Namespace, model: Path, document: dict[str, Any]) -> Any:
    """The inference session of ``args``, timed, and what it really was made with."""
    plan = session_plan(
        args.ep,
        args.intra_op_threads,
        args.affinity,
        ort.get_available_providers(),
        len(os.sched_getaffinity(0)),
    )
    options = session_options(ort, args, plan)
    begin = time.perf_counter()
    try:
        session = ort.InferenceSession(str(model), sess_options=options, providers=plan.providers)
    except Exception as error:  # noqa: BLE001 - ORT raises several unrelated types for a bad model
        raise AgentError("session", f"cannot create a session for {model.name}: {error}") from None
    document["timing"]["session_create_s"] = time.perf_counter() - begin
    document["timing"]["launch_to_session_ms"] = since_launch_ms()
    asked = plan.providers[0] if isinstance(plan.providers[0], str) else plan.providers[0][0]
    if asked not in session.get_providers():
        # onnxruntime quietly makes the session without a provider it cannot create (a CUDA wheel on a
        # board without an NVIDIA driver): timing that would report the CPU as the GPU.
        raise AgentError(
            "session",
            f"{asked} is in this build but onnxruntime could not create it on this board (the session got"
            f" {', '.join(session.get_providers())}): nothing measured for --ep {args.ep}"
            + (
                " (no NVIDIA driver or GPU here?)"
                if asked in {"CUDAExecutionProvider", "TensorrtExecutionProvider"}
                else ""
            ),
        )
    used = session.get_session_options()
    document["session"] = {
        "providers": session.get_providers(),
        "requested_ep": args.ep,
        "graph_optimization_level": str(used.graph_optimization_level).rsplit(".", 1)[-1],
        "opt_level": args.opt_level,
        "intra_op_num_threads": used.intra_op_num_threads,
        "inter_op_num_threads": used.inter_op_num_threads,
        "xnnpack_threads": plan.xnnpack_threads,
        "intra_op_thread_affinities": args.affinity,
        "main_cpu": args.main_cpu,
        "execution_mode": str(used.execution_mode).rsplit(".", 1)[-1],
    }
    return session


def _timed_runs(
    session: Any, feeds: dict[str, Any], args: argparse.Namespace, timing: dict[str, Any]
) -> tuple[list[float], float]:
    """The first inference, the warm-up, then timed runs until BOTH --min-runs and --min-duration are
    reached (--max-runs is a safety stop for very fast models): the latencies (ms) and their duration."""

    def once() -> float:
        begin = time.perf_counter()
        session.run(None, feeds)
        return (time.perf_counter() - begin) * 1000.0

    try:
        timing["first_inference_ms"] = once()
        timing["launch_to_first_result_ms"] = since_launch_ms()
        warm_begin = time.perf_counter()
        for _ in range(args.warmup):
            once()
        timing["warmup_runs"] = args.warmup
        timing["warmup_s"] = time.perf_counter() - warm_begin
        latencies: list[float] = []
        timed_begin = time.perf_counter()
        while (
            len(latencies) < args.min_runs or time.perf_counter() - timed_begin < args.min_duration
        ) and len(latencies) < args.max_runs:
            latencies.append(once())
        return latencies, time.perf_counter() - timed_begin
    except Exception as error:  # noqa: BLE001 - any inference failure ends the measurement
        raise AgentError("inference", f"inference failed: {error}") from None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, help="path of the .onnx model")
    parser.add_argument("--shape", action="append", default=[], metavar="NAME=DxD", help="shape for an input")
    parser.add_argument(
        "--input", action="append", default=[], metavar="NAME=PATH.npy", help="input data file"
    )
    parser.add_argument("--ep", default="cpu", help="execution provider: cpu, xnnpack, cuda, tensorrt")
    parser.add_argument("--opt-level", choices=_OPT_LEVELS, default="all", help="graph optimisation level")
    parser.add_argument("--intra-op-threads", type=int, default=0, help="0 = onnxruntime's default")
    parser.add_argument("--inter-op-threads", type=int, default=0, help="0 = onnxruntime's default")
    parser.add_argument(
        "--affinity", default=None, metavar="SPEC", help="onnxruntime's session.intra_op_thread_affinities"
    )
    parser.add_argument(
        "--main-cpu", type=int, default=None, metavar="N", help="pin the calling thread to CPU N"
    )
    # Defaults fit a real board (seconds per setting); the emulated lab passes tiny values.
    parser.add_argument("--warmup", type=int, default=5, help="warm-up runs after the first inference")
    parser.add_argument("--min-runs", type=int, default=50, help="minimum timed runs")
    parser.add_argument("--min-duration", type=float, default=10.0, help="minimum timed seconds")
    parser.add_argument("--max-runs", type=int, default=100000, help="stop after this many timed runs")
    # Where sysfs and procfs are read; a test points these at a fake tree (the lab has no cpufreq).
    parser.add_argument("--sysfs-root", default="/sys", help=argparse.SUPPRESS)
    parser.add_argument("--proc-root", default="/proc", help=argparse.SUPPRESS)
    return parser


def main(argv: list[str] | None = None) -> int:
    wall_begin = time.perf_counter()
    launch_to_main_ms = since_launch_ms()
    document: dict[str, Any] = {
        "schema": SCHEMA,
        "ok": False,
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "argv": list(sys.argv[1:] if argv is None else argv),
    }
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exit_:
        document.update(error="bad agent arguments (see stderr)", stage="arguments")
        print(json.dumps(document))
        return int(exit_.code or 2)
    sysfs_root, proc_root = Path(args.sysfs_root), Path(args.proc_root)
    for name in ("min_runs", "warmup", "max_runs"):
        if getattr(args, name) < (1 if name != "warmup" else 0):
            document.update(error=f"--{name.replace('_', '-')} is too small", stage="arguments")
            print(json.dumps(document))
            return 2
    try:
        if args.main_cpu is not None:
            pin_main_thread(args.main_cpu)
        before = board_state(sysfs_root, proc_root)
        document["board"] = {"before": before}
        cpus = before["online_cpus"] or sorted(os.sched_getaffinity(0))
        measure(args, document, launch_to_main_ms)
        document["board"]["after"] = volatile_state(sysfs_root, cpus)
        document["ok"] = True
    except AgentError as error:
        document.update(error=str(error), stage=error.stage)
    except Exception as error:  # noqa: BLE001 - the orchestrator must always get a JSON document
        document.update(
            error=f"{type(error).__name__}: {error}", stage="agent", traceback=traceback.format_exc()
        )
    document["memory"] = {"peak_rss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}
    document["agent_wall_s"] = time.perf_counter() - wall_begin
    print(json.dumps(document))
    return 0 if document["ok"] else 1


if __name__ == "__main__":
    sys.exit(main())
