"""Paths inside the build container: every build sees the same ones (/src, /build), so compiler
cache entries are shared across variants and rebuilds without path rewriting."""

from __future__ import annotations

SRC = "/src"
BUILD = "/build"
OUT = "/out"
CCACHE = "/ccache"
TOOLCHAINS = "/orch/toolchains"
SCRIPTS = "/opt/orch"
SHIMS = f"{TOOLCHAINS}/cmake-shims"
REDUCED = "/orch/reduced"  # the operator config of a reduced build
PROTOC = "/usr/bin/protoc"
SYSROOT = "/sysroot"  # the board's sysroot on the sysroot route (a volume, read-only)
