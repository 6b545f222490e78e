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
