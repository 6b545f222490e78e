#!/bin/sh
# The board's own Python interpreter, from its sysroot, run under qemu-user (the build machine's
# binfmt_misc registration) with the sysroot as the root of every absolute path it opens. The
# sysroot route gives it to CMake as Python_EXECUTABLE: FindPython asks the interpreter for its
# version, ABI and paths, which must be the board's (CMake's own model for cross builds: the
# target's interpreter through an emulator). $ORCH_BOARD_PYTHON names it (set by orch's plan).
set -eu
sysroot="${ORCH_SYSROOT:-/sysroot}"
exec env QEMU_LD_PREFIX="$sysroot" "$sysroot/${ORCH_BOARD_PYTHON:?the plan sets the board interpreter}" "$@"
