# The build container of `orch build`: an x86-64 image of the board's distribution (same
# release => same glibc and Python as the board) with the aarch64 cross compiler, CMake,
# Ninja, ccache and the board's -dev packages through multiarch (no sysroot needed).
#
# BASE_IMAGE is the board OS for the build host's architecture: a registry image
# (debian:trixie) or the offline bootstrap (orch/debian-trixie-amd64:<hash>).
ARG BASE_IMAGE=debian:trixie
FROM ${BASE_IMAGE}

ARG TARGET_ARCH=arm64
ARG CROSS_TRIPLET=aarch64-linux-gnu
# Space-separated package lists chosen by the build plan (docker/build/packages/<codename>.txt).
ARG HOST_PACKAGES=""
ARG TARGET_PACKAGES=""
# Further suites of the same mirror (e.g. bookworm-backports for a newer CMake), derived from
# the image's first one-line source.
ARG EXTRA_SUITES=""

ENV DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8
# Multiarch: the board's libraries and headers install next to the host's, under
# /usr/lib/<triplet>; the host's python3 (same version as the board's) builds the wheel.
RUN dpkg --add-architecture "${TARGET_ARCH}" \
 && for suite in ${EXTRA_SUITES}; do \
      grep -h -m 1 '^deb ' /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null | head -n 1 \
        | awk -v suite="$suite" '{$3 = suite; print}' >> /etc/apt/sources.list.d/orch-extra-suites.list; \
    done \
 && apt-get update \
 && apt-get install -y --no-install-recommends \
      "g++-${CROSS_TRIPLET}" "gcc-${CROSS_TRIPLET}" ${HOST_PACKAGES} \
 && if [ -n "${TARGET_PACKAGES}" ]; then \
      apt-get install -y --no-install-recommends \
        $(for p in ${TARGET_PACKAGES}; do case "$p" in *:*) echo "$p";; *) echo "$p:${TARGET_ARCH}";; esac; done); \
    fi \
 && rm -rf /var/lib/apt/lists/*

COPY build/ /opt/orch/
# ORT's unit-test configure imports onnx/onnx-ml.proto; Debian ships the same schema as
# onnx.proto. The link lives in the image (it points into the image), passed as onnx_SOURCE_DIR.
RUN if [ -f /usr/include/onnx/onnx.proto ]; then \
      mkdir -p /opt/orch/onnx-proto/onnx \
      && ln -s /usr/include/onnx/onnx.proto /opt/orch/onnx-proto/onnx/onnx-ml.proto; \
    fi
ENV CCACHE_DIR=/ccache CCACHE_COMPILERCHECK=content
WORKDIR /work
