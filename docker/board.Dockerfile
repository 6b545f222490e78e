# The lab board: an arm64 Debian container running a real sshd, emulated by qemu-user.
# Built by `orch lab up` (orchestrator/lab/boards.py) with docker/board/ as the build context.
# BASE_IMAGE is orch's own debootstrapped image (no registry needed) or a registry image
# such as debian:trixie; any packages it lacks are installed with apt.
ARG BASE_IMAGE
FROM ${BASE_IMAGE}

ARG PACKAGES="openssh-server python3 python3-venv ca-certificates"
ARG QEMU_CPU=cortex-a72
# Every process of the container (sshd included) runs on this emulated CPU model;
# the entrypoint passes it on to SSH sessions, which start with a clean environment.
ENV QEMU_CPU=${QEMU_CPU} LANG=C.UTF-8

# One RUN step: each one runs under emulation and costs seconds.
# The base image's host keys are removed: orch gives every board its own before sshd starts.
RUN set -eu; \
    missing=""; \
    for package in $PACKAGES; do \
        dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed" || missing="$missing $package"; \
    done; \
    if [ -n "$missing" ]; then \
        apt-get update; \
        DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing; \
        rm -rf /var/lib/apt/lists/*; \
    fi; \
    rm -f /etc/ssh/ssh_host_*; \
    mkdir -p /run/sshd /root/.ssh; \
    chmod 700 /root/.ssh

COPY sshd_config /etc/ssh/sshd_config.d/orch-lab.conf
COPY entrypoint.sh /usr/local/sbin/orch-lab-entrypoint
RUN chmod 755 /usr/local/sbin/orch-lab-entrypoint

EXPOSE 22
ENTRYPOINT ["/usr/local/sbin/orch-lab-entrypoint"]
