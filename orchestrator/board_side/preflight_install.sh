# shellcheck shell=sh
# Pre-flight, in an emulated arm64 container of the board's OS: install the wheel under test, run the check.
# Run as `sh -c` by orchestrator.builds.preflight.run_preflight, with /pf copied in beforehand:
# /pf/wheels/ (the wheel and its dependency wheels, pip's own included), /pf/check.py
# (preflight_check.py), /pf/model.onnx and /pf/input.npy.
#
# No arguments; $ORCH_WHEEL = the file name of the wheel under test. pip runs straight from its
# wheel, offline. Prints pip's complaints if any, then what /pf/check.py prints.
set -e
# No core files: qemu-user writing the core of a multi-threaded guest that died of SIGILL stalls.
# (dash, bash and busybox sh all have `ulimit -c`; the container's own limit is 0 as well.)
# shellcheck disable=SC3045
ulimit -c 0 2>/dev/null || true
python3 -m venv --without-pip /venv
set -- /pf/wheels/pip-*.whl
PIP=$1
/venv/bin/python "$PIP/pip" install --quiet --no-index --no-cache-dir --disable-pip-version-check \
  --find-links /pf/wheels "/pf/wheels/$ORCH_WHEEL"
# Not `exec`: the check must not be the container's PID 1 (see Engine.run).
/venv/bin/python /pf/check.py
