#!/bin/sh
# Add up several boards' GCC counter trees (.gcda files) into /merge/out, with the cross GCC's own
# gcov-tool, in the build image of the instrumented build. Run by orchestrator.builds.pgo.merge, which
# copies the trees in (/merge/in/0, /merge/in/1, ...) and /merge/out back out.
#
# $1 = the gcov-tool, then the input directories (at least two). gcov-tool merges two directories at
# a time: the first two into /merge/out, each further one into it again (through a copy, since the
# output may not be one of the inputs). Prints the merged file count.
set -eu
tool=$1; shift
first=$1; second=$2; shift 2
"$tool" merge -o /merge/out "$first" "$second"
for next do
  rm -rf /merge/acc && mv /merge/out /merge/acc
  "$tool" merge -o /merge/out /merge/acc "$next"
done
find /merge/out -name '*.gcda' | wc -l
