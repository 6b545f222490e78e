"""Package the cross-built ORT Python wheel for the board (runs inside the build container).

1. ``setup.py bdist_wheel --plat-name linux_aarch64`` in the build directory: build.py's own
   wheel step tags the wheel with the build machine's architecture when cross-compiling.
2. Bundle the board-side shared libraries the extension needs beyond glibc/libstdc++/libgcc
   (system protobuf, onnx, abseil, re2, ... when ORT was built against distribution packages)
   into ``onnxruntime/capi`` with ``RPATH=$ORIGIN``, so the wheel installs on a bare board like
   a manylinux wheel does. The list is resolved from DT_NEEDED with the cross readelf.
3. Print one ``ORCH-PACKAGE {json}`` line for orch: wheel name and bundled libraries.

Standard library only: it runs with the container's python3.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# Provided by every board of the same distribution (the manylinux idea): never bundled.
SYSTEM_LIBS = re.compile(
    r"^(libc|libm|libdl|libpthread|librt|libutil|libresolv|libstdc\+\+|libgcc_s|ld-linux-[\w-]+)\.so(\.\d+)*$"
)


# Where the board's libraries are in the build container (multiarch); the sysroot route names its own.
DEFAULT_LIBDIRS = [Path("/usr/lib/aarch64-linux-gnu"), Path("/lib/aarch64-linux-gnu")]


def needed(readelf: str, path: Path) -> list[str]:
    out = subprocess.run([readelf, "-d", str(path)], check=True, capture_output=True, text=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def resolve(name: str, libdirs: list[Path]) -> Path | None:
    for directory in libdirs:
        candidate = directory / name
        if candidate.exists():
            return candidate
    return None


# A Jetson's GPU stack (JetPack's CUDA, cuDNN, TensorRT): the board's own, so a CUDA wheel links
# against exactly what the board has. Checked to be in the sysroot, never bundled.
BOARD_STACK = re.compile(
    r"^lib(cudart|cublas|cublasLt|cudnn\w*|cufft|curand|cusparse|cusolver|nvrtc|nvJitLink|nvinfer\w*"
    r"|nvonnxparser)\.so(\.\d+)*$"
)
# The NVIDIA driver: L4T's, never in a sysroot's CUDA (only its link stub is).
DRIVER = re.compile(r"^libcuda\.so(\.\d+)*$")


def copy_dependencies(
    roots: list[Path], dest: Path, readelf: str, libdirs: list[Path], board: dict[str, str] | None = None
) -> list[str]:
    """Copy into ``dest`` every non-system library ``roots`` need, transitively; returns their names.
    ``board`` collects the GPU stack's libraries (name -> the sysroot's file it resolves to)."""
    queue = list(roots)
    seen = {root.name for root in roots}
    copied: list[str] = []
    while queue:
        current = queue.pop()
        for name in needed(readelf, current):
            if name in seen or SYSTEM_LIBS.match(name):
                continue
            seen.add(name)
            if board is not None and DRIVER.match(name):
                board[name] = "the board's NVIDIA driver"
                continue
            found = resolve(name, libdirs)
            if found is None:
                sys.exit(
                    f"package_wheel: {current.name} needs {name}, not found in {', '.join(map(str, libdirs))}"
                )
            if board is not None and BOARD_STACK.match(name):
                board[name] = str(found.resolve())
                continue
            target = dest / name
            shutil.copy2(found.resolve(), target)
            target.chmod(0o755)
            copied.append(name)
            queue.append(target)
    return sorted(copied)


def bundle(capi: Path, readelf: str, libdirs: list[Path], board: dict[str, str] | None = None) -> list[str]:
    """Copy every non-system library the wheel's objects need (transitively) into ``capi``."""
    own = sorted(capi.glob("*.so*"))
    bundled = copy_dependencies(own, capi, readelf, libdirs, board)
    # Only ORT's own objects get an RPATH: rewriting the distribution's libraries with patchelf
    # corrupted their embedded protobuf descriptors (abort at import). DT_RPATH (not RUNPATH)
    # also serves the bundled libraries' own dependencies (abseil of re2, ...), which the
    # loader then finds next to the extension as well.
    for path in needing_origin(own, capi, readelf):
        subprocess.run(["patchelf", "--force-rpath", "--set-rpath", "$ORIGIN", str(path)], check=True)
    return bundled


def needing_origin(own: list[Path], capi: Path, readelf: str) -> list[Path]:
    """ORT's objects that need a library lying beside them: only they get ``RPATH=$ORIGIN``. The
    others are left as the linker wrote them: patchelf growing an object moves its program headers
    and notes into a new segment, whose file offset then differs from its address, and clang 19's
    profile runtime reads the notes by file offset at exit (LLVM issue 114605): an instrumented
    wheel's libonnxruntime_providers_shared.so, which needs nothing beside it, died of SIGSEGV at
    every interpreter exit."""
    beside = {path.name for path in capi.iterdir()}
    return [path for path in own if beside.intersection(needed(readelf, path))]


def bundle_executable(exe: Path, out: Path, readelf: str, libdirs: list[Path]) -> list[str]:
    """Copy an executable (e.g. onnxruntime_mlas_test) and the libraries it needs into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    shutil.copy2(exe, out / exe.name)
    return copy_dependencies([out / exe.name], out, readelf, libdirs)


def soname(readelf: str, path: Path) -> str | None:
    out = subprocess.run([readelf, "-d", str(path)], check=True, capture_output=True, text=True).stdout
    found = re.search(r"\(SONAME\)\s+Library soname: \[([^\]]+)\]", out)
    return found.group(1) if found else None


def bundle_library(library: Path, out: Path, readelf: str, libdirs: list[Path]) -> list[str]:
    """ORT's C library alone (``--scope library``): ``out/lib`` holds it, the link of its SONAME (what
    programs linked against it load) and the non-system libraries it needs."""
    lib = out / "lib"
    lib.mkdir(parents=True, exist_ok=True)
    shutil.copy2(library.resolve(), lib / library.name)
    name = soname(readelf, lib / library.name)
    if name and name != library.name:
        (lib / name).unlink(missing_ok=True)
        (lib / name).symlink_to(library.name)
    return copy_dependencies([lib / library.name], lib, readelf, libdirs)


def gpu_code(provider: Path, architectures: list[str]) -> dict[str, object]:
    """The GPU code in the CUDA provider, read with the toolkit's cuobjdump: its SASS (cubins) must
    be for the board's architectures exactly, or the build fails here."""
    codes: dict[str, list[str]] = {}
    for kind, name in (("elf", "sass"), ("ptx", "ptx")):
        listed = subprocess.run(
            ["cuobjdump", f"--list-{kind}", str(provider)], check=True, capture_output=True, text=True
        ).stdout
        # "ELF file    1: libonnxruntime_providers_cuda.1.sm_87.cubin"
        codes[name] = re.findall(
            rf"^{kind.upper()} file\s+\d+: \S+\.(sm_\d+)\.\w+$", listed, flags=re.MULTILINE
        )
    wanted = sorted(f"sm_{a}" for a in architectures)
    sass = sorted(set(codes["sass"]))
    if sass != wanted:
        sys.exit(
            f"package_wheel: {provider.name} has SASS for {', '.join(sass) or 'no GPU'},"
            f" not exactly {', '.join(wanted)} (the board's GPU)"
        )
    return {
        "sass": sass,
        "sass_files": len(codes["sass"]),
        "ptx": sorted(set(codes["ptx"])),
        "ptx_files": len(codes["ptx"]),
    }


def pin_numpy_abi(root: Path) -> None:
    """An extension compiled against NumPy 1.x headers does not import under NumPy 2 ("A module that
    was compiled using NumPy 1.x cannot be run in NumPy 2"), so such a wheel asks for numpy<2. The
    headers are this container's numpy (FindPython's, on every route), read through its python3."""
    try:
        import numpy  # noqa: PLC0415 -- only the container that compiled the extension has it
    except ImportError:
        return
    if int(numpy.__version__.split(".")[0]) >= 2:
        return
    for metadata in root.glob("*.dist-info/METADATA"):
        lines = metadata.read_text().splitlines(keepends=True)
        metadata.write_text("".join(_below_2(line) for line in lines))


# "Requires-Dist: numpy>=1.21.6", or with setuptools' older form "numpy (>=1.21.6)", maybe a marker.
_NUMPY = re.compile(
    r"^Requires-Dist: numpy(?=[ \t(<>=!~;]|\n|$)[ \t]*(?:\((?P<old>[^)]*)\)|(?P<new>[^;\n]*?))"
    r"[ \t]*(?P<marker>;[^\n]*)?(?P<end>\n?)$"
)


def _below_2(line: str) -> str:
    match = _NUMPY.match(line)
    if match is None:
        return line
    spec = (match.group("old") or match.group("new") or "").strip()
    marker = f" {match.group('marker')}" if match.group("marker") else ""
    return f"Requires-Dist: numpy<2{',' + spec if spec else ''}{marker}{match.group('end')}"


def main() -> int:
    bundlers = {"--library": bundle_library, "--exe": bundle_executable}
    if len(sys.argv) > 1 and sys.argv[1] in bundlers:
        # package_wheel.py --exe|--library PATH OUT [LIBDIR ...]: an executable (for an emulated
        # board), or ORT's C library alone, with the libraries it needs (LIBDIRs: where they are; a
        # sysroot's on the sysroot route).
        libs = bundlers[sys.argv[1]](
            Path(sys.argv[2]),
            Path(sys.argv[3]),
            "aarch64-linux-gnu-readelf",
            [Path(d) for d in sys.argv[4:]] or DEFAULT_LIBDIRS,
        )
        print("ORCH-BUNDLE " + json.dumps(libs), flush=True)
        return 0
    parser = argparse.ArgumentParser()
    parser.add_argument("--build-dir", type=Path, required=True)
    parser.add_argument("--source", type=Path, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--plat-name", default="linux_aarch64")
    parser.add_argument("--readelf", default="aarch64-linux-gnu-readelf")
    parser.add_argument("--libdir", action="append", type=Path, default=[])
    parser.add_argument("--no-bundle", action="store_true")
    # A CUDA build: the board's GPU architectures (87), checked in the provider's code with cuobjdump.
    parser.add_argument("--gpu-arch", action="append", default=[])
    # ... and the board's CUDA release: setup.py then names the wheel onnxruntime-gpu and records the
    # release, as build.py's own wheel step (--wheel_name_suffix=gpu --cuda_version=X) does.
    parser.add_argument("--cuda-version")
    # The sysroot route runs the build machine's Python: the wheel is tagged for the board's (cp311).
    parser.add_argument("--python-tag")
    args = parser.parse_args()

    dist = Path(tempfile.mkdtemp(prefix="orch-dist-"))
    subprocess.run(
        [
            sys.executable,
            str(args.source / "setup.py"),
            "bdist_wheel",
            "--plat-name",
            args.plat_name,
            "-d",
            str(dist),
            *(
                ["--wheel_name_suffix=gpu", f"--cuda_version={args.cuda_version}"]
                if args.cuda_version
                else []
            ),
        ],
        cwd=args.build_dir,
        check=True,
    )
    wheels = sorted(dist.glob("*.whl"))
    if len(wheels) != 1:
        sys.exit(f"package_wheel: expected one wheel in {dist}, found {[w.name for w in wheels]}")
    wheel = wheels[0]
    bundled: list[str] = []
    board: dict[str, str] | None = {} if args.gpu_arch else None
    gpu: dict[str, object] | None = None
    if not args.no_bundle:
        unpacked = Path(tempfile.mkdtemp(prefix="orch-unpack-"))
        subprocess.run([sys.executable, "-m", "wheel", "unpack", str(wheel), "-d", str(unpacked)], check=True)
        root = next(unpacked.iterdir())
        libdirs = args.libdir or DEFAULT_LIBDIRS
        bundled = bundle(root / "onnxruntime" / "capi", args.readelf, libdirs, board)
        if args.gpu_arch:
            gpu = gpu_code(root / "onnxruntime" / "capi" / "libonnxruntime_providers_cuda.so", args.gpu_arch)
        pin_numpy_abi(root)
        wheel.unlink()
        # `wheel pack` rewrites RECORD with the new files' hashes.
        subprocess.run([sys.executable, "-m", "wheel", "pack", str(root), "-d", str(dist)], check=True)
        wheel = min(dist.glob("*.whl"))
    if args.python_tag:
        retag = [sys.executable, "-m", "wheel", "tags", "--remove"]
        retag += [f"--python-tag={args.python_tag}", f"--abi-tag={args.python_tag}", str(wheel)]
        wheel = dist / subprocess.run(retag, check=True, capture_output=True, text=True).stdout.strip()
    args.out.mkdir(parents=True, exist_ok=True)
    final = args.out / wheel.name
    shutil.copy2(wheel, final)
    report: dict[str, object] = {"wheel": final.name, "bundled": bundled}
    if board is not None:
        report |= {"board_libraries": board, "gpu_code": gpu}
    print("ORCH-PACKAGE " + json.dumps(report), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
