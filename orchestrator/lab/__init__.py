"""The lab: emulated arm64 boards (Docker containers under qemu-user with a real sshd on
127.0.0.1), their keys, and the small sample models the demo and tests use.
"""
