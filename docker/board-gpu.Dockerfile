# A lab board with the GPU stand-in stack (`orch sysroot stand-in`): the target's board image
# (BOARD_IMAGE, its stand-in OS with the development files a sysroot needs) plus CUDA and cuDNN for
# arm64 laid out as JetPack lays them (GPU_STACK_IMAGE's /opt/orch-gpu-stack, docker/gpu_stack/stage.sh).
# No NVIDIA driver and no GPU: a board made from it finds CUDA's libraries, and CUDA itself answers
# that no driver is there.
ARG BOARD_IMAGE
ARG GPU_STACK_IMAGE
FROM ${GPU_STACK_IMAGE} AS gpu
FROM ${BOARD_IMAGE}
COPY --from=gpu /opt/orch-gpu-stack/ /
# The loader's cache learns etc/ld.so.conf.d/988_cuda-12.conf, as on a Jetson.
RUN ldconfig
