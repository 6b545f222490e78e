#!/bin/sh
# Run ORT's build.py ("$@"), then leave in /build/orch-report what orch reads back afterwards
# (whatever the outcome): this build's compiler cache statistics (zeroed before),
# compile_commands.json and the compiler CMake identified, from $ORCH_CONFIG_DIR.
ccache --zero-stats >/dev/null 2>&1 || true
"$@"
status=$?
report=/build/orch-report
rm -rf "$report" && mkdir -p "$report"
ccache --print-stats > "$report/ccache-stats.tsv" 2>/dev/null || true
if [ -n "${ORCH_CONFIG_DIR:-}" ]; then
  cp "$ORCH_CONFIG_DIR/compile_commands.json" "$report/" 2>/dev/null || true
  for f in "$ORCH_CONFIG_DIR"/CMakeFiles/*/CMakeCXXCompiler.cmake; do
    [ -f "$f" ] && cp "$f" "$report/"
  done
fi
exit "$status"
