#!/bin/sh
# Run ORT's build.py ("$@"), then leave in /build/orch-report what orch reads back afterwards
# (whatever the outcome): this build's compiler cache statistics (zeroed before),
# compile_commands.json, the compiler CMake identified (from $ORCH_CONFIG_DIR), and configure.txt
# ("reused" or "ran": whether CMake configured the build tree again).
#
# $ORCH_CONFIGURE_STAMP is a digest of everything the configure step depends on that ninja does
# not watch itself (build.py's arguments and -D values, the build image, the source volume, the
# toolchain files). When the build directory (a kept volume) was configured with the same digest,
# build.py's --update is dropped: CMake does not run again and ninja rebuilds only what changed
# (ninja re-runs CMake on its own when a CMakeLists.txt or .cmake file changed). The stamp is
# removed before the build and written after a success, so a failed or cut build configures again,
# each time from an empty CMake cache (so that a -D taken out is really gone).
ccache --zero-stats >/dev/null 2>&1 || true
stamp="${ORCH_CONFIG_DIR:-/build}/orch-configure.stamp"
configure=ran
if [ -n "${ORCH_CONFIGURE_STAMP:-}" ] && [ -f "${ORCH_CONFIG_DIR:-/build}/build.ninja" ] \
  && [ "$(cat -- "$stamp" 2>/dev/null)" = "$ORCH_CONFIGURE_STAMP" ]; then
  configure=reused
  echo "orch: the build directory is configured with these exact inputs: CMake does not run again"
  for arg do
    shift
    [ "$arg" = --update ] || set -- "$@" "$arg"
  done
fi
# The sysroot route's compilers are links its toolchain file makes in the container's /tmp
# (toolchains/clang-sysroot.cmake): a build directory CMake does not configure again needs them too.
if [ -n "${ORCH_CLANG_BIN:-}" ]; then
  mkdir -p "$ORCH_CLANG_BIN"
  for driver in clang clang++; do ln -sf "/usr/bin/$driver" "$ORCH_CLANG_BIN/aarch64-linux-gnu-$driver"; done
fi
if [ "$configure" = ran ]; then
  # CMake keeps every -D of an earlier configure in its cache: a define the new arguments no longer
  # give (a flag taken back out) would stay in force. The objects and ninja's log stay, so only
  # sources whose command changed are compiled again (through ccache).
  rm -f -- "${ORCH_CONFIG_DIR:-/build}/CMakeCache.txt"
fi
rm -f -- "$stamp"
"$@"
status=$?
if [ "$status" -eq 0 ] && [ -n "${ORCH_CONFIGURE_STAMP:-}" ] && [ -d "${ORCH_CONFIG_DIR:-/build}" ]; then
  printf '%s\n' "$ORCH_CONFIGURE_STAMP" > "$stamp"
fi
report="${ORCH_REPORT_DIR:-/build/orch-report}"  # a test runs this script outside a container
rm -rf "$report" && mkdir -p "$report"
printf '%s\n' "$configure" > "$report/configure.txt"
ccache --print-stats > "$report/ccache-stats.tsv" 2>/dev/null || true
if [ -n "${ORCH_CONFIG_DIR:-}" ]; then
  cp "$ORCH_CONFIG_DIR/compile_commands.json" "$report/" 2>/dev/null || true
  for f in "$ORCH_CONFIG_DIR"/CMakeFiles/*/CMakeCXXCompiler.cmake; do
    [ -f "$f" ] && cp "$f" "$report/"
  done
fi
exit "$status"
