#!/bin/sh
# The CUDA route's toolchain, proven on ORT's own sources in minutes, without ORT's configure: in the
# CUDA build image, with the board's sysroot at /sysroot, ORT's tree at /src and the dependency
# sources at /deps, compile one of ORT's CUDA kernels with nvcc for the board's GPU and the CUDA
# provider's bridge and factory with clang, both aimed at aarch64 and the sysroot, link them into a
# shared library against the sysroot's CUDA runtime (lld, --sysroot), and list what came out.
# onnxruntime_config.h is made from ORT's template by CMake's configure_file with every compiler
# check off (what the full configure would test); Boost's header-only mp11 is the image's, seen
# through a directory that holds only it (as toolchains/cmake-shims/boost-headers does).
#
# Usage: cuda_probe.sh OUT ARCH -ccbin HOST_COMPILER   (ARCH: 87; the rest: cuda_route.nvcc_host_flags,
# whose host compiler is the cross toolkit's bin/aarch64-linux-gnu-clang++ beside its nvcc)
set -eu
out="$1"
arch="$2"
host="$4"  # after -ccbin: clang aimed at aarch64 and the sysroot
toolkit=$(dirname "$(dirname "$host")")
nvcc="$toolkit/bin/nvcc"
work=$(mktemp -d)  # what only the compiles need (a link into this image among them), never in OUT
mkdir -p "$out" "$work/gen" "$work/boost-include"
ln -sfn /usr/include/boost "$work/boost-include/boost"
# shellcheck disable=SC2016 # CMake's variables, for CMake
printf 'configure_file(${IN} ${OUT})\n' >"$work/configure.cmake"
version=$(cat /src/VERSION_NUMBER)
cmake -D IN=/src/cmake/onnxruntime_config.h.in -D OUT="$work/gen/onnxruntime_config.h" \
  -D ORT_VERSION="$version" -P "$work/configure.cmake"
set -- \
  -I"$work/gen" -isystem "$work/boost-include" -I/src/include/onnxruntime -I/src/onnxruntime \
  -I/src/include/onnxruntime/core/session -I/deps/GSL/include -I/deps/abseil_cpp \
  -I/deps/safeint/usr/include/safeint -I/deps/date/include -I/deps/onnx -I/deps/eigen \
  -I/deps/nlohmann_json/include \
  -DUSE_CUDA=1 -DSHARED_PROVIDER=1 -DORT_API_MANUAL_INIT -DONNX_NAMESPACE=onnx -DONNX_ML=1 -DEIGEN_MPL2_ONLY
kernel=onnxruntime/core/providers/cuda/tensor/transpose_impl.cu
echo "orch: nvcc $kernel for sm_$arch"
"$nvcc" -ccbin "$host" "$@" -std=c++17 --expt-relaxed-constexpr -Xcompiler=-fPIC \
  "-gencode=arch=compute_$arch,code=[sm_$arch,compute_$arch]" -w -c "/src/$kernel" -o "$out/kernel.o"
for source in onnxruntime/core/providers/shared_library/provider_bridge_provider.cc \
  onnxruntime/core/providers/cuda/cuda_provider_factory.cc; do
  echo "orch: clang++ $source"
  name=$(basename "$source" .cc)
  "$host" -isystem "$toolkit/include" -std=c++17 -fPIC -w "$@" -c "/src/$source" -o "$out/$name.o" 2>&1 \
    | grep -v -e '^clang.*argument unused' || true
  test -s "$out/$name.o"
done
"$host" -shared "$out/kernel.o" "$out/provider_bridge_provider.o" \
  "$out/cuda_provider_factory.o" -L"$toolkit/lib64" -lcudart -o "$out/libprobe.so"
echo "orch: cuobjdump --list-elf kernel.o"
cuobjdump --list-elf "$out/kernel.o" | tee "$out/elf.txt"
cuobjdump --list-ptx "$out/kernel.o" | tee "$out/ptx.txt"
llvm-readelf --file-header --dynamic "$out/libprobe.so" >"$out/readelf.txt"
file "$out/kernel.o" "$out/libprobe.so" | tee "$out/file.txt"
