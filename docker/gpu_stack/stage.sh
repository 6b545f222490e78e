#!/bin/sh
# A JetPack-like GPU stack for arm64, made offline on the build machine: CUDA from Debian's
# contrib/non-free arm64 packages and cuDNN from NVIDIA's aarch64 wheel, laid out as JetPack 6
# lays them, so that a sysroot (or a lab board) made with it looks to orch like a Jetson's:
#   usr/local/cuda -> cuda-X.Y; cuda-X.Y/{include,lib64} -> targets/aarch64-linux/{include,lib};
#   targets/aarch64-linux/lib: the shared libraries ORT's CUDA provider links (cudart, cuBLAS,
#   cuBLASLt, cuFFT, cuRAND), their development links, the device runtime and static runtime nvcc
#   links into every program (libcudadevrt.a, libcudart_static.a), and stubs/ (libcuda.so: the driver is the
#   board's, never taken from here); version.json; etc/ld.so.conf.d/988_cuda-12.conf;
#   cuDNN in usr/lib/aarch64-linux-gnu, its headers in usr/include/aarch64-linux-gnu (JetPack reaches
#   them from usr/include through etc/alternatives; plain links here).
# No other static libraries, tools or documentation (the gigabytes a build does not need), and no
# etc/nv_tegra_release: this is not L4T, and nothing should take it for one.
#
# Usage: stage.sh OUT CUDNN_WHEEL   (as root, in a Debian 13 container for the build machine)
set -eu
out="$1"
wheel="$2"
triplet=aarch64-linux-gnu
runtime="libcudart12 libcublas12 libcublaslt12 libcufft11 libcurand10"

# contrib and non-free of the image's own suite and mirror (nvidia-cuda-dev's headers and stubs).
grep -h -m 1 '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | head -n 1 \
  | awk '{print $1, $2, $3, "contrib non-free"}' > /etc/apt/sources.list.d/orch-gpu-stack.list
test -s /etc/apt/sources.list.d/orch-gpu-stack.list
dpkg --add-architecture arm64
apt-get update
apt-get install -y --no-install-recommends unzip

work=$(mktemp -d)
cd "$work"
packages="nvidia-cuda-dev:arm64 libthrust-dev libcub-dev libcu++-dev"
for package in $runtime; do packages="$packages $package:arm64"; done
# shellcheck disable=SC2086 # one word per package
apt-get download $packages
mkdir tree
for deb in ./*.deb; do dpkg-deb -x "$deb" tree; done

# The toolkit's release, from the runtime package's version (12.4.127~12.4.1-2 -> 12.4.1).
release=$(dpkg-deb -f ./libcudart12_*.deb Version | sed 's/^.*~\([0-9][0-9.]*\)-.*$/\1/')
major_minor=$(echo "$release" | cut -d. -f1,2)
major=$(echo "$release" | cut -d. -f1)
cuda="$out/usr/local/cuda-$major_minor"
target="$cuda/targets/aarch64-linux"
mkdir -p "$target/lib/stubs" "$out/usr/lib/$triplet" "$out/usr/include/$triplet" "$out/etc/ld.so.conf.d"
cp -a tree/usr/include "$target/include"
for library in cudart cublas cublasLt cufft curand; do
  cp -a "tree/usr/lib/$triplet/lib$library.so" "tree/usr/lib/$triplet/lib$library.so."* "$target/lib/"
done
cp -a "tree/usr/lib/$triplet/stubs/libcuda.so" "$target/lib/stubs/"
# The two archives nvcc links into every program it links (CMake's check of the compiler does).
cp -a "tree/usr/lib/$triplet/libcudadevrt.a" "tree/usr/lib/$triplet/libcudart_static.a" "$target/lib/"
ln -s targets/aarch64-linux/include "$cuda/include"
ln -s targets/aarch64-linux/lib "$cuda/lib64"
ln -s "cuda-$major_minor" "$out/usr/local/cuda"
printf '{\n  "cuda": {"name": "CUDA SDK", "version": "%s"}\n}\n' "$release" > "$cuda/version.json"
echo "/usr/local/cuda-$major_minor/targets/aarch64-linux/lib" > "$out/etc/ld.so.conf.d/988_cuda-$major.conf"

unzip -q "$wheel" 'nvidia/cudnn/*' -d cudnn
cp -a cudnn/nvidia/cudnn/lib/. "$out/usr/lib/$triplet/"
for library in "$out/usr/lib/$triplet"/libcudnn*.so.*; do
  ln -s "$(basename "$library")" "${library%.so.*}.so"
done
cp -a cudnn/nvidia/cudnn/include/. "$out/usr/include/$triplet/"
for header in "$out/usr/include/$triplet"/cudnn*.h; do
  ln -s "$triplet/$(basename "$header")" "$out/usr/include/$(basename "$header")"
done

cudnn=$(unzip -p "$wheel" '*.dist-info/METADATA' | sed -n 's/^Version: //p')
{
  echo "orch GPU stand-in stack (not L4T): CUDA $release for arm64 from Debian packages, cuDNN $cudnn from its aarch64 wheel"
  for deb in ./*.deb; do dpkg-deb -f "$deb" Package Version | paste -sd ' ' -; done
  echo "$(basename "$wheel") $(sha256sum "$wheel" | cut -d' ' -f1)"
} > "$out/etc/orch-gpu-stand-in"
rm -rf "$work" /var/lib/apt/lists/*
cat "$out/etc/orch-gpu-stand-in"
