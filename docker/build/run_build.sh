#!/bin/sh
# Run ORT's build.py ("$@") with the compiler cache statistics of this build alone:
# zeroed before, written to /build/orch-ccache-stats.tsv after (whatever the outcome).
ccache --zero-stats >/dev/null 2>&1 || true
"$@"
status=$?
ccache --print-stats > /build/orch-ccache-stats.tsv 2>/dev/null || true
exit "$status"
