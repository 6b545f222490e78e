# The counting qemu of `orch bench --metric instructions`: qemu-aarch64 (user mode) built from the
# base image's own Debian `qemu` source package with TCG plugins enabled, and its `insn` plugin,
# which counts every guest instruction a process retires. Debian's qemu-user is static, and static
# builds cannot load plugins; this one is dynamic, so it travels as a bundle with its own loader
# and libraries (/opt/orch-counting-qemu) and runs on an emulated board beside its binfmt handler.
#
# BASE_IMAGE is the offline Debian image for the workstation's architecture
# (orch/debian-trixie-amd64:<hash>, made by debootstrap); the source comes from its apt sources.
ARG BASE_IMAGE=debian:trixie
FROM ${BASE_IMAGE} AS build
ENV DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8
# Only what configure needs for a user-mode target: no system emulation, tools or documentation.
RUN apt-get update \
 && apt-get install -y --no-install-recommends \
      build-essential ninja-build meson python3 python3-venv python3-pycotap pkg-config \
      libglib2.0-dev flex bison xz-utils ca-certificates \
 && rm -rf /var/lib/apt/lists/*
COPY build/fetch_debian_source.sh /opt/orch/fetch_debian_source.sh
COPY counting_qemu/ /opt/orch/counting_qemu/
RUN sh /opt/orch/fetch_debian_source.sh qemu && sh /opt/orch/counting_qemu/build.sh /out /opt/orch-counting-qemu

FROM ${BASE_IMAGE}
COPY --from=build /opt/orch-counting-qemu /opt/orch-counting-qemu
LABEL orch.role=counting-qemu
