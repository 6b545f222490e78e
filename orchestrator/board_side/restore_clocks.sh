# shellcheck shell=sh
# --pin-clocks, after a run: put back what pin_clocks.sh saved.
# Sent to `sh -s -- ARGS` on stdin by orchestrator.bench.clocks.restore_clocks.
#
# Pairs of args: path governor path governor ... ; then optionally "--jetson STATEFILE".
# Prints "restored<TAB>path<TAB>governor" or "failed<TAB>path" per pair ("failed<TAB>jetson_clocks"
# for the Jetson state); exits 1 when anything could not be restored.
status=0
while [ "$#" -ge 2 ]; do
  if [ "$1" = --jetson ]; then
    jetson_clocks --restore "$2" >/dev/null 2>&1 || { printf 'failed\tjetson_clocks\n'; status=1; }
  elif (printf '%s\n' "$2" > "$1") 2>/dev/null && [ "$(cat "$1")" = "$2" ]; then
    printf 'restored\t%s\t%s\n' "$1" "$2"
  else
    printf 'failed\t%s\n' "$1"; status=1
  fi
  shift 2
done
exit "$status"
