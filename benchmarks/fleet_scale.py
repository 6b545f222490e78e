"""orch at fleet scale on the lab: time against board count for exec, an unchanged deploy and a quick bench.

    python benchmarks/fleet_scale.py                       # 1, 4, 16, 32 boards
    python benchmarks/fleet_scale.py --counts 1,4 --skip-bench --repeat 3

Uses the lab of the current ORCH_HOME (set ORCH_HOME to keep it apart from yours) and grows it
with `orch lab up --boards N` for each count. Per count N, on boards lab1..labN:

- `orch exec -- true` (connect, run, collect: the fleet runner's own cost), --repeat times;
- `orch deploy` of one artifact and a tiny model (first on the boards that are new, not timed
  as the figure), then the same deploy unchanged, --repeat times;
- `orch bench --quick` once (emulated timings: relative only).

Printed: median and range of each figure with its sample count, the per-board cost and the ratio to
one board; and what an idle board costs in memory (its container plus the engine's shim and port
proxy on the host), measured with every board up. Everything runs with orch's default --parallel
(8 boards at a time), so the curve should stay nearly flat up to 8 boards and grow linearly after.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from functools import partial
from pathlib import Path

from orch_cli import orch as run_orch
from orch_cli import require

from orchestrator.lab.sample_models import write_tiny_convnet

# Growing the lab to 32 boards and deploying to all of them takes hours under emulation.
orch = partial(run_orch, timeout=7200)


def timed(argv: list[str], what: str, timeout: float = 7200) -> float:
    started = time.monotonic()
    require(orch(*argv, timeout=timeout), what)
    return time.monotonic() - started


def hosts(count: int) -> list[str]:
    return [arg for index in range(1, count + 1) for arg in ("--host", f"lab{index}")]


def shown(samples: list[float]) -> str:
    if not samples:
        return "-"
    median = statistics.median(samples)
    spread = f" [{min(samples):.1f}-{max(samples):.1f}]" if len(samples) > 1 else ""
    return f"{median:.1f} s{spread} (n={len(samples)})"


def idle_memory() -> dict[str, float]:
    """MiB per idle lab board: the container's own memory (cgroup), and the host-side processes per
    board (the containerd shim, the docker-proxy of its published port), averaged over the boards."""
    status = json.loads(orch("lab", "status", "--json").stdout)
    containers = {board["container"] for board in status["boards"]}
    ports = {str(board["port"]) for board in status["boards"] if board["port"]}
    stats = subprocess.run(
        ["docker", "stats", "--no-stream", "--format", "{{json .}}", *sorted(containers)],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()
    container_mib = [_mib(json.loads(line)["MemUsage"].split("/")[0]) for line in stats]
    ids = {
        subprocess.run(
            ["docker", "inspect", "-f", "{{.Id}}", name], capture_output=True, text=True, check=True
        ).stdout.strip()
        for name in containers
    }
    shim = proxy = 0.0
    for line in subprocess.run(
        ["ps", "-eo", "rss=,args="], capture_output=True, text=True, check=True
    ).stdout.splitlines():
        rss, _, command = line.strip().partition(" ")
        if "containerd-shim" in command and any(cid in command for cid in ids):
            shim += int(rss) / 1024
        elif "docker-proxy" in command and any(f"-host-port {port} " in command + " " for port in ports):
            proxy += int(rss) / 1024
    boards = max(len(containers), 1)
    return {
        "boards": len(containers),
        "container_mib": sum(container_mib) / boards,
        "shim_mib": shim / boards,
        "proxy_mib": proxy / boards,
    }


def _mib(text: str) -> float:
    text = text.strip()
    for unit, factor in (("GiB", 1024.0), ("MiB", 1.0), ("KiB", 1 / 1024), ("B", 1 / 1024 / 1024)):
        if text.endswith(unit):
            return float(text.removesuffix(unit)) * factor
    return float("nan")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="1,4,16,32", help="board counts, ascending (default 1,4,16,32)")
    parser.add_argument("--repeat", type=int, default=2, help="samples of exec and of the unchanged deploy")
    parser.add_argument(
        "--artifact", help="artifact to deploy (default: the stock 1.21.1 wheel, fetched once)"
    )
    parser.add_argument("--skip-bench", action="store_true")
    parser.add_argument("--skip-deploy", action="store_true")
    args = parser.parse_args()
    counts = [int(c) for c in args.counts.split(",")]

    work = Path(tempfile.mkdtemp(prefix="orch-fleet-scale-"))
    model = work / "fleet_conv.onnx"
    write_tiny_convnet(model)
    artifact = args.artifact
    if artifact is None and not args.skip_deploy:
        # 1.21.1, not the 1.21.0 orch builds for lab: 1.21.0's official wheel dies of SIGILL on the
        # lab's Cortex-A72 (ARMv8.0: its MLAS fp16 kernels, fixed in 1.21.1), and its pre-flight says so.
        done = orch(
            "build",
            "--target",
            "lab",
            "--variant",
            "stock",
            "--ort-version",
            "1.21.1",
            "--json",
            timeout=3600,
        )
        require(done, "orch build --variant stock")
        artifact = json.loads(done.stdout)["artifact"]
    deploy = ["deploy", "--artifact", str(artifact), "--model", str(model)]

    rows = []
    for count in counts:
        up = timed(["lab", "up", "--boards", str(count)], f"orch lab up --boards {count}", timeout=3600)
        print(f"[{count} boards] lab up (adding boards): {up:.1f} s", flush=True)
        row: dict[str, object] = {"boards": count, "lab_up_s": up}
        row["exec"] = [timed(["exec", *hosts(count), "--", "true"], "orch exec") for _ in range(args.repeat)]
        print(f"[{count} boards] exec: {shown(row['exec'])}", flush=True)  # type: ignore[arg-type]
        if not args.skip_deploy:
            row["first_deploy_s"] = timed([*deploy, *hosts(count)], "orch deploy (new boards)")
            row["deploy"] = [
                timed([*deploy, *hosts(count)], "orch deploy (unchanged)") for _ in range(args.repeat)
            ]
            print(f"[{count} boards] unchanged deploy: {shown(row['deploy'])}", flush=True)  # type: ignore[arg-type]
        if not args.skip_bench and not args.skip_deploy:
            row["bench"] = [timed(["bench", *hosts(count), "--quick"], "orch bench --quick")]
            print(f"[{count} boards] bench --quick: {shown(row['bench'])}", flush=True)  # type: ignore[arg-type]
        rows.append(row)
    memory = idle_memory()

    print("\norch at fleet scale on the lab (emulated boards: relative figures only; default --parallel 8)")
    print(f"{'boards':>7}  {'exec':<26}{'unchanged deploy':<26}{'bench --quick':<26}")
    for row in rows:
        print(
            f"{row['boards']:>7}  {shown(row['exec']):<26}{shown(row.get('deploy', [])):<26}"  # type: ignore[arg-type]
            f"{shown(row.get('bench', [])):<26}"  # type: ignore[arg-type]
        )
    base = rows[0]
    for key in ("exec", "deploy", "bench"):
        if not base.get(key):
            continue
        first = statistics.median(base[key])  # type: ignore[arg-type]
        ratios = ", ".join(
            f"{row['boards']}: {statistics.median(row[key]) / first:.2f}x"  # type: ignore[arg-type]
            for row in rows
            if row.get(key)
        )
        print(f"{key}: time relative to {base['boards']} board(s) (medians): {ratios}")
    total = memory["container_mib"] + memory["shim_mib"] + memory["proxy_mib"]
    print(
        f"idle board memory ({memory['boards']:.0f} boards up, mean per board): container"
        f" {memory['container_mib']:.1f} MiB + containerd shim {memory['shim_mib']:.1f} MiB + port proxy"
        f" {memory['proxy_mib']:.1f} MiB = {total:.1f} MiB"
    )
    print(json.dumps({"rows": rows, "idle_memory": memory}, default=str))
    print("the lab keeps running: `orch lab down` removes it")
    return 0


if __name__ == "__main__":
    sys.exit(main())
