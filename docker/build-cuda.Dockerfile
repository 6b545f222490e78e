# The sysroot route's build container with NVIDIA's CUDA compiler (`orch build --ep cuda`): the
# clang image of that route (BASE_IMAGE, Debian 13) plus Debian's non-free nvidia-cuda-toolkit
# (nvcc 12.4, for the build machine: it compiles device code for the board's GPU and hands host code
# to -ccbin) and clang 17, the newest clang nvcc 12.4 accepts as its host compiler (clang 19, the
# route's C++ compiler, is refused by CUDA 12.4's host_config.h). CUDA's headers and libraries for
# the board come from the board's sysroot, never from this image.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}

# contrib and non-free of the image's own suite and mirror (libcuda1, which the toolkit pulls in,
# needs contrib's nvidia-support): the first one-line source with its components
# replaced (the same way build.Dockerfile derives further suites).
ARG COMPONENT="contrib non-free"
ARG PACKAGES="nvidia-cuda-toolkit clang-17"
RUN grep -h -m 1 '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | head -n 1 \
      | awk -v component="${COMPONENT}" '{print $1, $2, $3, component}' \
      > /etc/apt/sources.list.d/orch-cuda.list \
 && test -s /etc/apt/sources.list.d/orch-cuda.list \
 && apt-get update \
 && apt-get install -y --no-install-recommends ${PACKAGES} \
 && rm -rf /var/lib/apt/lists/* \
 && nvcc --version

# A cross toolkit as CMake and ORT's build.py expect one (NVIDIA's cuda-cross-aarch64 layout):
# /opt/orch-cuda/bin/nvcc is the build machine's nvcc with a profile of its own that takes CUDA's
# headers and libraries from the board's sysroot (/sysroot, mounted at build time), and
# include/, lib64/, targets/aarch64-linux and version.json are the sysroot's. `--cuda_home` names it.
RUN set -eu; cuda=/opt/orch-cuda; board=/sysroot/usr/local/cuda; toolkit=/usr/lib/nvidia-cuda-toolkit; \
    mkdir -p "$cuda/bin" "$cuda/targets" "$cuda/nvvm"; \
    cp "$toolkit/bin/nvcc" "$cuda/bin/nvcc"; \
    for tool in cicc crt; do ln -s "$toolkit/bin/$tool" "$cuda/bin/$tool"; done; \
    for tool in ptxas fatbinary nvlink cudafe++ bin2c nvprune cuobjdump; do ln -s "/usr/bin/$tool" "$cuda/bin/$tool"; done; \
    ln -s "$toolkit/libdevice" "$cuda/nvvm/libdevice"; \
    for part in include lib64 version.json; do ln -s "$board/$part" "$cuda/$part"; done; \
    ln -s "$board/targets/aarch64-linux" "$cuda/targets/aarch64-linux"; \
    { echo "NVVMIR_LIBRARY_DIR = $toolkit/libdevice"; \
      echo "PATH += $toolkit/bin:"; \
      echo "INCLUDES += \"-I$board/include\" \$(_SPACE_)"; \
      echo "LIBRARIES =+ \$(_SPACE_) \"-L$board/lib64/stubs\" \"-L$board/lib64\""; \
    } > "$cuda/bin/nvcc.profile"; \
    { echo '#!/bin/sh'; \
      echo '# nvcc'"'"'s host compiler for the board: clang 17 aimed at aarch64 and its sysroot, also when CMake'; \
      echo '# links CUDA objects with it (CMake hands a host linker none of nvcc'"'"'s -Xcompiler options).'; \
      echo 'exec clang++-17 --target=aarch64-linux-gnu --sysroot=/sysroot -fuse-ld=lld -Wno-unused-command-line-argument "$@"'; \
    } > "$cuda/bin/aarch64-linux-gnu-clang++"; \
    chmod 755 "$cuda/bin/aarch64-linux-gnu-clang++"; \
    "$cuda/bin/nvcc" --version
