# The GPU stand-in stack (docker/gpu_stack/stage.sh): CUDA for arm64 from Debian's contrib/non-free
# packages and cuDNN from its aarch64 wheel (CUDNN_WHEEL, in the build context, fetched through the
# workstation's own pip sources), laid out as JetPack lays them under /opt/orch-gpu-stack, which orch
# copies into a stand-in sysroot. BASE_IMAGE is the offline Debian 13 image for the build machine.
ARG BASE_IMAGE=debian:trixie
FROM ${BASE_IMAGE}
ARG CUDNN_WHEEL
ENV DEBIAN_FRONTEND=noninteractive LC_ALL=C.UTF-8
COPY gpu_stack/stage.sh /opt/orch/gpu_stack/stage.sh
COPY ${CUDNN_WHEEL} /tmp/${CUDNN_WHEEL}
RUN sh /opt/orch/gpu_stack/stage.sh /opt/orch-gpu-stack "/tmp/${CUDNN_WHEEL}" && rm -f "/tmp/${CUDNN_WHEEL}"
LABEL orch.role=gpu-stack
