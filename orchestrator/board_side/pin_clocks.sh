# shellcheck shell=sh
# --pin-clocks, before a run: set the cpufreq governor of every core (and jetson_clocks on a Jetson).
# Sent to `sh -s -- ARGS` on stdin by orchestrator.bench.clocks.pin_clocks.
#
# $1 = sysfs root, $2 = governor to set. Prints "saved<TAB>path<TAB>old" per core, then
# "set<TAB>path<TAB>ok|denied" per core, and "jetson<TAB>statefile<TAB>ok|denied" when jetson_clocks
# exists; "none" alone when there is no cpufreq governor. The sysfs root is a parameter because tests
# need a writable fake tree: the emulated lab boards have no cpufreq at all.
root="$1"; want="$2"; found=0
for f in "$root"/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor; do
  [ -f "$f" ] || continue
  found=1
  printf 'saved\t%s\t%s\n' "$f" "$(cat "$f")"
done
[ "$found" = 1 ] || { printf 'none\n'; exit 0; }
for f in "$root"/devices/system/cpu/cpu[0-9]*/cpufreq/scaling_governor; do
  [ -f "$f" ] || continue
  if (printf '%s\n' "$want" > "$f") 2>/dev/null && [ "$(cat "$f")" = "$want" ]; then
    printf 'set\t%s\tok\n' "$f"
  else
    printf 'set\t%s\tdenied\n' "$f"
  fi
done
if [ "$root" = /sys ] && command -v jetson_clocks >/dev/null 2>&1; then
  state="${HOME:-/tmp}/.orch-jetson-clocks.state"
  if jetson_clocks --store "$state" >/dev/null 2>&1 && jetson_clocks >/dev/null 2>&1; then
    printf 'jetson\t%s\tok\n' "$state"
  else
    printf 'jetson\t%s\tdenied\n' "$state"
  fi
fi
