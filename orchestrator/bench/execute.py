"""Run a BenchPlan: every board in parallel, each board's agent runs in order, results stored as they finish.

Per board: connect, find the releases (``orchestrator.deploy.releases``), choose releases and models,
quantise if asked, pin clocks if asked, run the interleaved steps, restore clocks (always, also
when a step failed), then store the board's document, whatever happened. A board that fails
keeps its error and any measurement it finished; the others carry on (``orchestrator.fleet.parallel``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rich.markup import escape

from orchestrator.adapters import ssh as remote
from orchestrator.bench import plan as bench_plan
from orchestrator.bench.plan import BenchPlan, ReleaseRef, Step
from orchestrator.bench.results import BOARD_SCHEMA, ResultStore, utc_now
from orchestrator.board import Board
from orchestrator.console import console
from orchestrator.deploy import releases
from orchestrator.errors import BenchError, OrchError
from orchestrator.fleet import parallel as fleet
from orchestrator.paths import orch_home

Progress = Callable[[str, str], None]

# --------------------------------------------------------------------------- clock pinning
#
# $1 = sysfs root, $2 = governor to set. Prints "saved<TAB>path<TAB>old" per core, then
# "set<TAB>path<TAB>ok|denied". The sysfs root is a parameter because tests need a writable fake
# tree: the emulated lab boards have no cpufreq at all.
PIN_SCRIPT = r"""
root="$1"; want="$2"; found=0
for f in "$root"/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor; do
  [ -f "$f" ] || continue
  found=1
  printf 'saved\t%s\t%s\n' "$f" "$(cat "$f")"
done
[ "$found" = 1 ] || { printf 'none\n'; exit 0; }
for f in "$root"/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor; do
  [ -f "$f" ] || continue
  if (printf '%s\n' "$want" > "$f") 2>/dev/null && [ "$(cat "$f")" = "$want" ]; then
    printf 'set\t%s\tok\n' "$f"
  else
    printf 'set\t%s\tdenied\n' "$f"
  fi
done
if [ "$root" = /sys ] && command -v jetson_clocks >/dev/null 2>&1; then
  state="${HOME:-/tmp}/.orch-jetson-clocks.state"
  if jetson_clocks --store "$state" >/dev/null 2>&1 && jetson_clocks >/dev/null 2>&1; then
    printf 'jetson\t%s\tok\n' "$state"
  else
    printf 'jetson\t%s\tdenied\n' "$state"
  fi
fi
"""

# Pairs of args: path governor path governor ... ; then optionally "--jetson STATEFILE".
RESTORE_SCRIPT = r"""
status=0
while [ "$#" -ge 2 ]; do
  if [ "$1" = --jetson ]; then
    jetson_clocks --restore "$2" >/dev/null 2>&1 || { printf 'failed\tjetson_clocks\n'; status=1; }
  elif (printf '%s\n' "$2" > "$1") 2>/dev/null && [ "$(cat "$1")" = "$2" ]; then
    printf 'restored\t%s\t%s\n' "$1" "$2"
  else
    printf 'failed\t%s\n' "$1"; status=1
  fi
  shift 2
done
exit "$status"
"""


@dataclass(kw_only=True)
class ClockState:
    """What --pin-clocks did on one board (recorded in the results)."""

    requested: bool = True
    pinned: bool = False
    previous: dict[str, str] = field(default_factory=dict)
    jetson_state: str | None = None
    restored: bool | None = None
    messages: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "requested": self.requested,
            "pinned": self.pinned,
            "previous": self.previous,
            "jetson_clocks": self.jetson_state,
            "restored": self.restored,
            "messages": self.messages,
        }


def pin_clocks(session: Any, sysfs_root: str) -> ClockState:
    state = ClockState()
    result = session.run_script(PIN_SCRIPT, (sysfs_root, "performance"), timeout=120, check=False)
    denied = []
    for line in result.stdout.splitlines():
        parts = line.split("\t")
        if parts[0] == "none":
            state.messages.append(f"no cpufreq governor under {sysfs_root}: clocks not pinned")
        elif parts[0] == "saved" and len(parts) == 3:
            state.previous[parts[1]] = parts[2]
        elif parts[0] == "set" and len(parts) == 3 and parts[2] != "ok":
            denied.append(parts[1])
        elif parts[0] == "jetson" and len(parts) == 3:
            if parts[2] == "ok":
                state.jetson_state = parts[1]
            else:
                state.messages.append("jetson_clocks was not permitted")
    if denied:
        state.messages.append(
            f"setting the governor was not permitted ({len(denied)} cores); run as root to pin"
        )
    state.pinned = bool(state.previous) and not denied
    return state


def restore_clocks(session: Any, state: ClockState) -> None:
    args: list[str] = []
    for path, governor in state.previous.items():
        args += [path, governor]
    if state.jetson_state:
        args += ["--jetson", state.jetson_state]
    if not args:
        state.restored = None
        return
    result = session.run_script(RESTORE_SCRIPT, args, timeout=120, check=False)
    state.restored = result.exit_code == 0
    if not state.restored:
        state.messages.append("restoring the clocks failed: " + " ".join(result.stdout.split()))


# --------------------------------------------------------------------------- quantisation

_quantize_lock = threading.Lock()


def quantized_copy(session: Any, release: ReleaseRef, model_file: str) -> str:
    """Make ``<model>.int8.onnx`` next to the fp32 model in the release (quantised on the workstation,
    cached by the fp32 model's hash); returns the int8 file name."""
    int8 = bench_plan.int8_name(model_file)
    remote_int8 = release.model_path(int8)
    if session.stat(remote_int8):
        return int8
    cache = orch_home() / "cache" / "quantized"
    cache.mkdir(parents=True, exist_ok=True)
    download = cache / f"download-{threading.get_ident()}-{model_file}"
    session.get(release.model_path(model_file), download)
    digest = hashlib.sha256(download.read_bytes()).hexdigest()
    fp32 = cache / f"{digest}.onnx"
    quantized = cache / f"{digest}.dynamic-int8.onnx"
    download.replace(fp32)
    with _quantize_lock:  # one model quantised once, however many boards ask at the same time
        if not quantized.exists():
            from onnxruntime.quantization import QuantType, quantize_dynamic

            partial = quantized.with_suffix(".partial.onnx")
            root_logger = logging.getLogger()
            level = root_logger.level
            # The quantiser logs advice through the root logger; orch's output stays its own.
            root_logger.setLevel(logging.ERROR)
            try:
                quantize_dynamic(str(fp32), str(partial), weight_type=QuantType.QUInt8)
            except Exception as error:
                raise BenchError(f"cannot quantise {model_file}: {error}") from error
            finally:
                root_logger.setLevel(level)
            partial.replace(quantized)
    temporary = remote_int8 + ".partial"
    session.put(quantized, temporary)
    session.rename(temporary, remote_int8)
    return int8


# --------------------------------------------------------------------------- one board


def parse_agent(board: str, step: Step, result: Any) -> dict[str, Any]:
    """The agent's JSON document, or a BenchError naming the board, the step and the cause."""
    where = f"{board}: {step.release.id} {step.model_file} ({step.setting.opt_level}, threads {step.setting.intra_threads})"
    try:
        document = json.loads(result.stdout.strip().splitlines()[-1]) if result.stdout.strip() else None
    except json.JSONDecodeError:
        document = None
    if not isinstance(document, dict):
        tail = " | ".join(result.stderr.strip().splitlines()[-3:])
        raise BenchError(
            f"{where}: the agent exited {result.exit_code} without a result" + (f": {tail}" if tail else "")
        )
    if not document.get("ok"):
        raise BenchError(f"{where}: {document.get('stage', 'agent')} failed: {document.get('error')}")
    return document


def _board_document(run_id: str, board: Board, plan: BenchPlan) -> dict[str, Any]:
    return {
        "schema": BOARD_SCHEMA,
        "run_id": run_id,
        "board": board.name,
        "status": "running",
        "error": None,
        "started": utc_now(),
        "finished": None,
        "board_info": {
            "hostname": board.hostname,
            "port": board.port,
            "target": board.target,
            "tags": list(board.tags),
            "groups": list(board.groups),
        },
        "plan": plan.as_dict(),
        "releases": [],
        "clocks": None,
        "measurements": [],
    }


def bench_board(
    board: Board, plan: BenchPlan, *, run_id: str, store: ResultStore, progress: Progress
) -> dict[str, Any]:
    """Everything bench does on one board; the board document is stored even when this raises."""
    document = _board_document(run_id, board, plan)
    try:
        _run_board(board, plan, document, progress)
        document["status"] = "ok"
        return document
    except BaseException as error:
        document["status"] = "failed"
        if isinstance(error, OrchError):
            document["error"] = error.message + (f" (fix: {error.hint})" if error.hint else "")
        else:
            document["error"] = f"{type(error).__name__}: {error}"
        raise
    finally:
        document["finished"] = utc_now()
        store.write_board(run_id, document)


def _run_board(board: Board, plan: BenchPlan, document: dict[str, Any], progress: Progress) -> None:
    progress(board.name, "connecting")
    with remote.connect(board) as session:
        found = [ReleaseRef.from_info(info) for info in releases.list_releases(session, board)]
        chosen = bench_plan.pick_releases(plan, found, board.name)
        models = bench_plan.pick_models(plan, chosen, board.name)
        document["releases"] = [vars(release) for release in chosen]
        if plan.quantize:
            for release in chosen:
                for model in models:
                    progress(board.name, f"quantising {model} for {release.id}")
                    quantized_copy(session, release, model)
        steps = bench_plan.board_steps(plan, chosen, models)
        clocks: ClockState | None = None
        if plan.pin_clocks:
            clocks = pin_clocks(session, plan.agent.sysfs_root or "/sys")
            document["clocks"] = clocks.as_dict()
            for message in clocks.messages:
                progress(board.name, f"[yellow]warning:[/] {escape(message)}")
        try:
            for step in steps:
                if step.cooldown_s:
                    time.sleep(step.cooldown_s)
                progress(
                    board.name,
                    f"{step.index + 1}/{len(steps)} round {step.round}/{plan.rounds} "
                    f"{escape(_describe(step))}",
                )
                result = session.run(step.argv, timeout=plan.step_timeout_s, check=False)
                agent = parse_agent(board.name, step, result)
                # The command's duration seen from the workstation: agent_wall_s plus interpreter start and SSH.
                document["measurements"].append(
                    {
                        "key": step.key(),
                        "round": step.round,
                        "step": step.index,
                        "remote_duration_s": result.duration,
                        "agent": agent,
                    }
                )
                stats = agent["stats"]
                progress(
                    board.name,
                    f"  p50 {stats['p50_ms']:.3g} ms, p99 {stats['p99_ms']:.3g} ms (n={stats['n']})",
                )
        finally:
            if clocks is not None and clocks.previous:
                try:
                    restore_clocks(session, clocks)
                except OrchError as error:
                    clocks.restored = False
                    clocks.messages.append(f"restoring the clocks failed: {error.message}")
                document["clocks"] = clocks.as_dict()
                if clocks.restored is False:
                    progress(board.name, "[red]clocks NOT restored[/]: " + escape("; ".join(clocks.messages)))
                else:
                    progress(board.name, "clocks restored")


def _describe(step: Step) -> str:
    threads = step.setting.intra_threads or "default"
    return (
        f"{step.release.variant} {step.model_file} opt={step.setting.opt_level} threads={threads}"
        f" ep={step.setting.ep}"
    )


# --------------------------------------------------------------------------- the fleet


@dataclass(frozen=True, kw_only=True)
class BenchRun:
    run_id: str
    path: Path
    outcome: fleet.FleetResult[dict[str, Any]]
    wall_s: float


def run_bench(plan: BenchPlan, *, run_id: str, command: str, store: ResultStore | None = None) -> BenchRun:
    store = store or ResultStore()
    path = store.begin_run(run_id, command=command)
    lock = threading.Lock()

    def progress(board: str, message: str) -> None:
        with lock:
            console.print(f"[bold]{escape(board)}[/] {message}", soft_wrap=True)

    started = time.monotonic()
    outcome = fleet.run_on_boards(
        plan.boards,
        lambda board: bench_board(board, plan, run_id=run_id, store=store, progress=progress),
        parallel=plan.parallel,
        label=f"orch bench {run_id}",
    )
    wall = time.monotonic() - started
    boards_meta = {}
    for name, board_outcome in outcome.outcomes.items():
        boards_meta[name] = {
            "status": "ok" if board_outcome.ok else "failed",
            "error": board_outcome.message or None,
            "duration_s": board_outcome.duration,
            "timed_out": board_outcome.timed_out,
        }
        if not board_outcome.ok and board_outcome.timed_out:
            # The board's thread was abandoned: store what is known so the run is complete on disk.
            with contextlib.suppress(OrchError):
                store.write_board(
                    run_id,
                    {
                        **_board_document(run_id, board_outcome.board, plan),
                        "status": "failed",
                        "error": board_outcome.message,
                    },
                )
    store.finish_run(
        run_id,
        {
            "run_id": run_id,
            "created": utc_now(),
            "command": command,
            "plan": plan.as_dict(),
            "boards": boards_meta,
            "wall_s": wall,
            "status": "ok" if outcome.exit_code == 0 else "failed",
        },
    )
    return BenchRun(run_id=run_id, path=path, outcome=outcome, wall_s=wall)
