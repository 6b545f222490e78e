# shellcheck shell=sh
# Runs a profile-instrumented program on this board, RUNS times, with its counters written into a
# scratch directory instead of the build paths compiled into it, then packs the counters.
# Sent to `sh -s -- ARGS` on stdin by orchestrator.builds.pgo.training, which fetches the pack.
#
# $1 = the scratch directory (relative paths are relative to the login home), $2 = RUNS,
# $3 = the compiler whose counters these are: gcc (.gcda files) or clang (.profraw files),
# $4... = the program's environment as NAME=VALUE words, then the program and its arguments
#         (handed to env(1) as they are: values never pass through a shell).
# Counters are written when the program exits normally: a run that fails stops the training.
# gcc: GCC adds GCOV_PREFIX to the absolute path each counter file was named with; the runs add up
# in the same files (libgcov merges at exit), also across calls with the same scratch directory (one
# call per model), and each call packs all of them.
# clang: each process writes one raw profile per instrumented binary (%m: the program's apart from
# each library's) and run (%p), all in the counters directory; llvm-profdata adds them up later.
# Prints key=value lines: pack (absolute path), files (counter files), seconds, log (the last run's).
set -eu
scratch="$1"; runs="$2"; compiler="$3"; shift 3
mkdir -p -- "$scratch"
scratch=$(cd -- "$scratch" && pwd)
counters="$scratch/counters"
mkdir -p -- "$counters"
case "$compiler" in
    gcc) suffix=gcda ;;
    clang) suffix=profraw ;;
    *) echo "unknown compiler '$compiler' (gcc or clang)" >&2; exit 2 ;;
esac
# One run of the program, its counters redirected (the variables reach env(1) alone).
run_once() {
    if [ "$compiler" = gcc ]; then
        GCOV_PREFIX="$counters" GCOV_PREFIX_STRIP=0 env "$@"
    else
        LLVM_PROFILE_FILE="$counters/%m-%p.profraw" env "$@"
    fi
}
started=$(date +%s)
run=0
while [ "$run" -lt "$runs" ]; do
    run=$((run + 1))
    if ! run_once "$@" >"$scratch/run-$run.log" 2>&1; then
        echo "run $run of $runs failed; its last lines:" >&2
        tail -n 20 -- "$scratch/run-$run.log" >&2
        exit 3
    fi
done
files=$(find "$counters" -name "*.$suffix" | wc -l)
tar -C "$counters" -czf "$scratch/counters.tgz" .
echo "pack=$scratch/counters.tgz"
echo "files=$files"
echo "seconds=$(($(date +%s) - started))"
echo "log=$scratch/run-$run.log"
