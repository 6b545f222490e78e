# shellcheck shell=sh
# Bench: cold start. Runs a command N times, one fresh process after the other, each told the time it
# was launched (ORCH_LAUNCH_T0_NS, CLOCK_REALTIME nanoseconds) so it can report process start ->
# main -> session -> first result. Each run prints its one JSON line; the first failure ends the loop.
# Run as `sh -c "$(cat cold_launch.sh)" cold_launch.sh N ARGV...` by orchestrator.bench.execute.
n="$1"; shift
i=0
while [ "$i" -lt "$n" ]; do
  ORCH_LAUNCH_T0_NS=$(date +%s%N) "$@" || exit
  i=$((i + 1))
done
