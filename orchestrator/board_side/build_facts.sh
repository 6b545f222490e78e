# shellcheck shell=sh
# What a board offers for building ONNX Runtime on it (orch build --on-board): one `key=value` line
# per fact, empty when the board lacks it. Run with `sh -s -- WORKDIR`; WORKDIR is made if missing
# (its free space is what the build can use). orchestrator/builds/on_board/requirements.py reads it.
work=$1
mkdir -p -- "$work" 2>/dev/null

first_line() {
    "$@" 2>/dev/null | sed -n '1p'
}

printf 'machine=%s\n' "$(uname -m)"
printf 'cores=%s\n' "$(getconf _NPROCESSORS_ONLN 2>/dev/null || nproc 2>/dev/null)"
printf 'memory_kb=%s\n' "$(awk '/^MemTotal:/ {print $2}' /proc/meminfo 2>/dev/null)"
printf 'free_kb=%s\n' "$(df -Pk -- "$work" 2>/dev/null | awk 'NR == 2 {print $4}')"
printf 'cmake=%s\n' "$(first_line cmake --version | sed 's/^cmake version //')"
printf 'ninja=%s\n' "$(first_line ninja --version)"
printf 'ccache=%s\n' "$(first_line ccache --version | sed 's/^ccache version //')"
# GCC's own version (-dumpfullversion: 14.2.0, where -dumpversion may say only 14).
printf 'gcc=%s\n' "$(first_line c++ -dumpfullversion -dumpversion)"
printf 'cxx=%s\n' "$(first_line c++ --version)"
printf 'python=%s\n' "$(first_line python3 -c 'import sys; print("%d.%d.%d" % sys.version_info[:3])')"
printf 'python_headers=%s\n' "$(first_line python3 -c 'import os, sysconfig; print(os.path.isfile(os.path.join(sysconfig.get_paths()["include"], "Python.h")))')"
printf 'numpy=%s\n' "$(first_line python3 -c 'import numpy; print(numpy.__version__)')"
printf 'setuptools=%s\n' "$(first_line python3 -c 'import setuptools, wheel; print(setuptools.__version__)')"
# ORT takes Boost's mp11 from the system first (find_package), as the container route does.
printf 'boost_mp11=%s\n' "$([ -f /usr/include/boost/mp11.hpp ] && echo True)"
printf 'packaging=%s\n' "$(first_line python3 -c 'import packaging; print(packaging.__version__)')"
# CUDA as JetPack installs it: the toolkit under /usr/local/cuda, cuDNN's headers from its -dev package.
nvcc_release=$(/usr/local/cuda/bin/nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p' | sed -n '1p')
printf 'nvcc=%s\n' "$nvcc_release"
cudnn=
for header in /usr/include/cudnn_version.h /usr/include/aarch64-linux-gnu/cudnn_version*.h; do
    if [ -f "$header" ]; then
        cudnn=$(awk '/#define CUDNN_MAJOR/ {a=$3} /#define CUDNN_MINOR/ {b=$3} END {if (a != "") print a "." b}' "$header")
        break
    fi
done
printf 'cudnn=%s\n' "$cudnn"
