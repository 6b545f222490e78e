"""Small ONNX Runtime "releases" for the variant upstream: a packaging script and a build.py shaped as
ORT 1.21.0's (the parts orch reads: BUILD_ARGS and its if branches, the compliance branch of the
`for config in configs:` loop), written as a source tree or a tarball."""

from __future__ import annotations

import tarfile
from pathlib import Path

from orchestrator.builds.sources.packaging import BUILD_PY, SCRIPT, PackagingOptions, packaging_options

SCRIPT_1_21 = """#!/bin/bash
set -e -x
EXTRA_ARG=""
ENABLE_CACHE=false
PYTHON_EXES=(
  "/opt/python/cp311-cp311/bin/python3.11"
  "/opt/python/cp312-cp312/bin/python3.12"
  )
while getopts "d:p:x:c:e" parameter_Option
do case "${parameter_Option}"
in
d) BUILD_DEVICE=${OPTARG};;
p)
  if [[ -z "${OPTARG}" || "${OPTARG}" == -* ]]; then
    exit 1
  else
    PYTHON_EXES=("${OPTARG}")
  fi
  ;;
x) EXTRA_ARG=${OPTARG};;
c) BUILD_CONFIG=${OPTARG};;
e) ENABLE_CACHE=true;;
*) echo "Usage: $0 -d <GPU|CPU|NPU> [-c <build_config>]"
   exit 1;;
esac
done

BUILD_ARGS=("--build_dir" "/build" "--config" "$BUILD_CONFIG" "--update" "--build" "--skip_submodule_sync" \\
  "--parallel" "--use_binskim_compliant_compile_flags" "--build_wheel" "--use_vcpkg")

if [ "$BUILD_CONFIG" != "Debug" ]; then
    BUILD_ARGS+=("--enable_lto")
fi
if [ "$ENABLE_CACHE" = true ] ; then
    BUILD_ARGS+=("--use_cache")
fi

ARCH=$(uname -m)

if [ "$EXTRA_ARG" != "" ]; then
    BUILD_ARGS+=("$EXTRA_ARG")
fi

if [ "$ARCH" == "x86_64" ]; then
    BUILD_ARGS+=("--enable_onnx_tests")
fi

if [ "$BUILD_DEVICE" == "GPU" ]; then
    SHORT_CUDA_VERSION=$(echo $CUDA_VERSION | cut -d. -f1,2)
    BUILD_ARGS+=("--use_cuda" "--cuda_version=$SHORT_CUDA_VERSION")
elif [ "$BUILD_DEVICE" == "NPU" ]; then
    BUILD_ARGS+=("--use_qnn" "--qnn_home=/qnn_sdk")
fi

for PYTHON_EXE in "${PYTHON_EXES[@]}"
do
  ${PYTHON_EXE} /onnxruntime_src/tools/ci_build/build.py "${BUILD_ARGS[@]}"
done
"""

BUILD_PY_1_21 = """import platform


def is_linux():
    return True


def build(args, configs):
    for config in configs:
        cflags = []
        cxxflags = None
        ldflags = None
        cudaflags = []
        if is_windows() and not args.build_wasm:
            njobs = jobs(args)
            if njobs > 1:
                cflags += ["/MP"]
        if (args.use_binskim_compliant_compile_flags or args.enable_address_sanitizer) and not args.android:
            if is_windows():
                cflags += ["/guard:cf"]
            elif is_linux() or is_macOS():
                if is_linux():
                    ldflags = ["-Wl,-Bsymbolic-functions", "-Wl,-z,relro", "-Wl,-z,now", "-Wl,-z,noexecstack"]
                else:
                    ldflags = []
                if config == "Release":
                    cflags = [
                        "-DNDEBUG",
                        "-Wp,-D_FORTIFY_SOURCE=2",
                        "-Wp,-D_GLIBCXX_ASSERTIONS",
                        "-fstack-protector-strong",
                        "-O3",
                        "-pipe",
                    ]
                    if is_linux():
                        ldflags += ["-Wl,--strip-all"]
                elif config == "Debug":
                    cflags = ["-g", "-O0"]
                if is_linux() and platform.machine() == "x86_64":
                    cflags += ["-fstack-clash-protection"]
                    if not args.rv64:
                        cflags += ["-fcf-protection"]
                cxxflags = cflags.copy()
                if args.use_cuda:
                    cudaflags = cflags.copy()
        run(cflags, cxxflags, ldflags)
"""

CFLAGS_1_21 = (
    "-DNDEBUG",
    "-Wp,-D_FORTIFY_SOURCE=2",
    "-Wp,-D_GLIBCXX_ASSERTIONS",
    "-fstack-protector-strong",
    "-O3",
    "-pipe",
)
LDFLAGS_1_21 = (
    "-Wl,-Bsymbolic-functions",
    "-Wl,-z,relro",
    "-Wl,-z,now",
    "-Wl,-z,noexecstack",
    "-Wl,--strip-all",
)


def options_1_21() -> PackagingOptions:
    return packaging_options(SCRIPT_1_21, BUILD_PY_1_21, release="1.21.0")


def write_tree(root: Path, *, script: str | None = SCRIPT_1_21, build_py: str | None = BUILD_PY_1_21) -> Path:
    """An ORT source tree with VERSION_NUMBER and the two files (None: left out)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "VERSION_NUMBER").write_text("1.21.0\n")
    for name, text in ((SCRIPT, script), (BUILD_PY, build_py)):
        if text is not None:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(text)
    return root


def write_tarball(path: Path, tree: Path) -> Path:
    """``tree`` as a .tar.gz with one top directory, as release archives are."""
    with tarfile.open(path, "w:gz") as archive:
        archive.add(tree, arcname="onnxruntime-1.21.0")
    return path
