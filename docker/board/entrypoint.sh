#!/bin/sh
# Start sshd in the foreground, passing the board's emulated CPU model to every SSH session.
set -eu
if [ ! -s /etc/ssh/ssh_host_ed25519_key ]; then
    echo "orch lab board: no host key at /etc/ssh/ssh_host_ed25519_key (orch copies it in before start)" >&2
    exit 1
fi
chmod 600 /etc/ssh/ssh_host_ed25519_key
if [ -f /root/.ssh/authorized_keys ]; then chmod 600 /root/.ssh/authorized_keys; fi
mkdir -p /run/sshd
if [ -n "${QEMU_CPU:-}" ]; then
    exec /usr/sbin/sshd -D -e -o "SetEnv=QEMU_CPU=${QEMU_CPU}" "$@"
fi
exec /usr/sbin/sshd -D -e "$@"
