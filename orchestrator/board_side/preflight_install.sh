# shellcheck shell=sh
# Pre-flight, in an emulated arm64 container of the board's OS: install the wheel under test, run the check.
# Run as `sh -c` by orchestrator.build.preflight.run_preflight, with /pf copied in beforehand:
# /pf/wheels/ (the wheel and its dependency wheels, pip's own included), /pf/check.py
# (preflight_check.py), /pf/model.onnx and /pf/input.npy.
#
# No arguments; $ORCH_WHEEL = the file name of the wheel under test. pip runs straight from its
# wheel, offline. Prints pip's complaints if any, then what /pf/check.py prints.
set -e
python3 -m venv --without-pip /venv
set -- /pf/wheels/pip-*.whl
PIP=$1
/venv/bin/python "$PIP/pip" install --quiet --no-index --no-cache-dir --disable-pip-version-check \
  --find-links /pf/wheels "/pf/wheels/$ORCH_WHEEL"
exec /venv/bin/python /pf/check.py
