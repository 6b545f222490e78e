#!/bin/sh
# Add up clang's raw profiles (.profraw files, one tree per training board) into one indexed profile,
# /merge/out/merged.profdata, with the llvm-profdata of the compiler's own LLVM release, in the build
# image of the instrumented build; then say what it holds. Run by orchestrator.builds.pgo.merge, which
# copies the trees in (/merge/in/0, /merge/in/1, ...) and /merge/out back out.
#
# $1 = the llvm-profdata (versioned: llvm-profdata-19), then the input directories (one or more).
# Writes beside the profile: show.txt (`show`: instrumentation level, functions with counters),
# covered.txt (`show --covered`: each function that ran), version.txt (`--version`).
set -eu
tool=$1; shift
# An indexed profile is read by the LLVM release that wrote it: the tool must be clang's own.
major=$(clang -dumpversion | cut -d. -f1)
case "$tool" in
  *-"$major") ;;
  *) echo "clang $major would read a profile written by $tool: not the same LLVM release" >&2; exit 4 ;;
esac
mkdir -p /merge/out
find "$@" -type f -name '*.profraw' | sort > /merge/inputs.txt
if [ ! -s /merge/inputs.txt ]; then
  echo "no raw profiles (.profraw) in $*" >&2
  exit 3
fi
"$tool" merge --output=/merge/out/merged.profdata --input-files=/merge/inputs.txt
"$tool" show /merge/out/merged.profdata > /merge/out/show.txt
"$tool" show --covered /merge/out/merged.profdata > /merge/out/covered.txt
"$tool" --version > /merge/out/version.txt
wc -l < /merge/inputs.txt
