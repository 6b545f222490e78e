"""The CUDA route's toolchain against the offline Jetson stand-in, on ORT's own sources (CI scope).

What a user notices: `orch sysroot stand-in` makes, without a board, a sysroot that orch reads as a
Jetson's (CUDA 12.4 and cuDNN 9 where JetPack puts them, no static libraries, no driver); and the
image the CUDA plan names compiles one of ORT 1.21's CUDA kernels for the Orin's sm_87 (SASS and PTX,
nothing for another GPU) and the CUDA provider's bridge and factory for aarch64 against that
sysroot, linked by lld against the sysroot's CUDA runtime; and the pre-flight of a CUDA wheel gets
the board's CUDA runtime from the sysroot and reports, in the runtime's words, that no GPU is there.
The whole provider and its wheel are `full` work (test_cuda_wheel.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from orchestrator.adapters.engine import Engine
from orchestrator.builds.cuda_route import nvcc_host_flags
from orchestrator.builds.image import ensure_base_image_on, ensure_build_image
from orchestrator.builds.plan import BuildOptions, BuildPlan, make_plan
from orchestrator.builds.preflight import GpuLibraries, run_preflight
from orchestrator.builds.sources.dependencies import prepare_dependencies
from orchestrator.builds.sources.dependency_table import load_table
from orchestrator.builds.sources.ort import prepare_source
from orchestrator.builds.sources.ort_spec import parse_source
from orchestrator.builds.sysroots.store import find_sysroot
from orchestrator.builds.sysroots.target import profile_for_sysroot
from orchestrator.builds.variants import resolve_variant
from orchestrator.builds.workspace import (
    ensure_dependencies_volume,
    ensure_source_volume,
    ensure_sysroot_volume,
)
from orchestrator.paths import DOCKER_DIR
from orchestrator.targets import resolve_target
from tests.conftest import make_env, orch_cli

pytestmark = pytest.mark.integration

NAME = "orin-cuda"
PROBE = DOCKER_DIR / "build" / "cuda_probe.sh"


@dataclass(frozen=True)
class StandIn:
    env: dict[str, str]
    document: dict[str, object]

    @property
    def tree(self) -> Path:
        return Path(str(self.document["path"])) / "root"


@pytest.fixture(scope="module")
def stand_in(tmp_path_factory: pytest.TempPathFactory) -> StandIn:
    env = make_env(tmp_path_factory.mktemp("cuda") / "orch")
    made = orch_cli(
        env, "sysroot", "stand-in", "--target", "jetson-orin", "--name", NAME, "--json", timeout=3600
    )
    assert made.returncode == 0, made.stderr[-3000:]
    return StandIn(env=env, document=json.loads(made.stdout))


@pytest.fixture(scope="module")
def cuda_plan(stand_in: StandIn) -> Iterator[BuildPlan]:
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ORCH_HOME", stand_in.env["ORCH_HOME"])
        profile, ref = profile_for_sysroot(resolve_target("jetson-orin"), find_sysroot(NAME))
        yield make_plan(
            profile,
            resolve_variant("tuned"),
            BuildOptions(
                source=parse_source(None, version=None, suite="trixie"),
                sysroot=ref,
                execution_provider="cuda",
            ),
        )


def test_the_stand_in_is_read_as_a_jetsons_sysroot_with_cuda_where_jetpack_puts_it(stand_in: StandIn) -> None:
    record = stand_in.document["record"]
    assert isinstance(record, dict)
    assert (record["cuda"], record["cudnn"], record["tensorrt"]) == ("12.4.1", "9.28.0", None)
    assert record["kind"] == "stand-in" and "nvidia_cudnn_cu12-9.28.0.42" in str(record["source"])
    tree = stand_in.tree
    assert (tree / "usr/local/cuda").readlink() == Path("cuda-12.4")
    lib = tree / "usr/local/cuda-12.4/targets/aarch64-linux/lib"
    for name in (
        "libcudart.so.12",
        "libcublas.so.12",
        "libcublasLt.so.12",
        "libcufft.so.11",
        "stubs/libcuda.so",
    ):
        assert (lib / name).exists(), name
    assert not (lib / "libcuda.so.1").exists()  # the driver is the board's, never the stand-in's
    assert (tree / "usr/lib/aarch64-linux-gnu/libcudnn.so.9").exists()
    assert (tree / "usr/include/aarch64-linux-gnu/cudnn_version.h").is_file()
    # Of CUDA's archives only the two nvcc links into every program; no L4T release file.
    assert {a.name for a in (tree / "usr/local").rglob("*.a")} == {"libcudart_static.a", "libcudadevrt.a"}
    assert not (tree / "etc/nv_tegra_release").exists()
    listed = orch_cli(stand_in.env, "sysroot", "list", check=True)
    assert "CUDA 12.4.1, cuDNN 9.28.0" in listed.stderr  # the GPU column


def test_a_stand_in_for_a_board_without_a_gpu_is_refused(stand_in: StandIn) -> None:
    done = orch_cli(stand_in.env, "sysroot", "stand-in", "--target", "rpi5", "--name", "pi")
    assert done.returncode == 2 and "target 'rpi5' has no NVIDIA GPU" in done.stderr


def test_the_plans_image_compiles_orts_cuda_kernel_for_sm_87_against_the_stand_in(
    stand_in: StandIn, cuda_plan: BuildPlan, tmp_path: Path
) -> None:
    assert cuda_plan.cuda is not None and cuda_plan.cuda.architectures == ("87",)
    out = _probe(stand_in, cuda_plan, tmp_path)
    said = (out / "elf.txt").read_text()
    assert "sm_87.cubin" in said and "sm_" not in said.replace("sm_87", "")  # the Orin's GPU only
    assert "sm_87.ptx" in (out / "ptx.txt").read_text()  # PTX for GPUs to come
    readelf = (out / "readelf.txt").read_text()
    assert "AArch64" in readelf and "[libcudart.so.12]" in readelf
    assert "ARM aarch64" in (out / "file.txt").read_text()
    # The packaging's check of a provider's GPU code (package_wheel.py), on the probe's library:
    # right for the Orin, and a build for a Xavier (sm_72) would fail with this code in it.
    assert _gpu_code(cuda_plan, out / "libprobe.so", "87") == (
        '{"sass": ["sm_87"], "sass_files": 1, "ptx": ["sm_87"], "ptx_files": 1}'
    )
    assert "has SASS for sm_87, not exactly sm_72 (the board's GPU)" in _gpu_code(
        cuda_plan, out / "libprobe.so", "72"
    )


def _gpu_code(plan: BuildPlan, library: Path, architecture: str) -> str:
    """package_wheel.gpu_code on ``library`` in the plan's image (its cuobjdump): its JSON, or its refusal."""
    script = (
        "import json, sys; sys.path.insert(0, '/tmp'); from pathlib import Path; import package_wheel as p;"
        f" print(json.dumps(p.gpu_code(Path('/tmp/{library.name}'), ['{architecture}'])))"
    )
    said: list[str] = []
    Engine().run(
        plan.image.tag,
        ["python3", "-c", script],
        network="none",
        copy_in=[
            (DOCKER_DIR / "build" / "package_wheel.py", "/tmp/package_wheel.py"),
            (library, f"/tmp/{library.name}"),
        ],
        on_log=said.append,
    )
    return "\n".join(said).strip()


def test_a_cuda_preflight_loads_the_sysroots_cuda_runtime_and_fails_a_wheel_without_the_provider(
    stand_in: StandIn, stock_wheel: Path, engine: Engine
) -> None:
    """The GPU half of the pre-flight, on the official CPU wheel with the stand-in's CUDA runtime: the
    CPU result is compared as always; the board's libcudart (the sysroot's, mounted read-only) loads
    and says there is no driver; a wheel without the CUDA provider fails, naming the missing file."""
    cuda_lib = "usr/local/cuda-12.4/targets/aarch64-linux/lib"
    runtime = (stand_in.tree / cuda_lib / "libcudart.so.12").resolve().name
    libraries = GpuLibraries(
        sysroot=stand_in.tree, files={"libcudart.so.12": f"/sysroot/{cuda_lib}/{runtime}"}
    )
    said: list[str] = []
    verdict = run_preflight(engine, resolve_target("lab"), stock_wheel, log=said.append, gpu=libraries)
    assert verdict.details["comparison"]["match"] is True  # the CPU path, as for every wheel
    gpu = verdict.details["gpu"]
    assert gpu["provider_listed"] is False and gpu["provider_loads"] is False
    assert "libonnxruntime_providers_cuda.so" in gpu["load_error"]
    # libcudart 12.4 itself ran on the emulated board and found no driver (no libcuda.so.1 there).
    assert gpu["devices"] == 0 and "driver" in gpu["runtime_says"].lower(), gpu
    assert not verdict.ok and str(verdict.error).startswith("CUDA provider: the CUDA provider does not load")
    assert any(line.startswith("pre-flight, CUDA provider: the CUDA provider does not load") for line in said)


def _probe(stand_in: StandIn, plan: BuildPlan, tmp_path: Path) -> Path:
    """docker/build/cuda_probe.sh in the plan's image with the plan's sysroot, ORT's tree and the
    dependency sources mounted as a build mounts them."""
    logged: list[str] = []
    log: Callable[[str], None] = logged.append
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ORCH_HOME", stand_in.env["ORCH_HOME"])
        engine = Engine()
        fetch_image = ensure_base_image_on(engine, plan, log)
        tree = prepare_source(plan.source, engine=engine, base_image=fetch_image, log=log)
        table = load_table(plan.ort_version)
        assert table is not None
        deps = prepare_dependencies(table, engine=engine, base_image=fetch_image, ort_tree=tree.path, log=log)
        image = ensure_build_image(engine, plan, log)
        assert plan.sysroot is not None and plan.cuda is not None
        volumes = {
            ensure_source_volume(engine, image, tree, log): {"bind": "/src", "mode": "ro"},
            ensure_dependencies_volume(engine, image, deps, plan.ort_version, log): {
                "bind": "/deps",
                "mode": "ro",
            },
            ensure_sysroot_volume(engine, image, plan.sysroot, log): {"bind": "/sysroot", "mode": "ro"},
        }
        code = engine.run(
            image,
            ["sh", f"/tmp/{PROBE.name}", "/out", plan.cuda.architectures[0], *nvcc_host_flags()],
            volumes=volumes,
            network="none",
            copy_in=[(PROBE, f"/tmp/{PROBE.name}")],
            copy_out=[("/out", tmp_path)],
            on_log=log,
            timeout=1800,
        )
    assert code == 0, "\n".join(logged[-60:])
    return tmp_path / "out"
