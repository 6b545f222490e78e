# shellcheck shell=sh
# What is on a board: workdir, current release, switch history, store contents, releases.
# Sent to `sh -s -- ARGS` on stdin by orchestrator.deploy.releases.read_listing (parse_listing reads it).
#
# $1 = workdir. One line per fact, tab-separated, so a release.json (one line) passes untouched:
# "workdir<TAB>abs path" (empty when missing), "current<TAB>link target", "history<TAB>line",
# "blob<TAB>sha256", "release<TAB>id<TAB>release.json" or "incomplete<TAB>id", and
# "verified<TAB>id<TAB>verified.json" for a release whose verification passed on this board.
# A deploy sends it after board_facts.sh in the same script (orchestrator.deploy.survey: one round trip).
w="$1"
if [ -d "$w" ]; then printf 'workdir\t%s\n' "$(cd -- "$w" && pwd)"; else printf 'workdir\t\n'; fi
if [ -L "$w/current" ]; then printf 'current\t%s\n' "$(readlink -- "$w/current")"; fi
if [ -f "$w/history" ]; then tail -n 200 -- "$w/history" | while IFS= read -r line; do printf 'history\t%s\n' "$line"; done; fi
if [ -d "$w/store/sha256" ]; then
  # ${f##*/}, not $(basename ...): a process per file is slow on a small board (and under emulation).
  for f in "$w"/store/sha256/*; do [ -f "$f" ] && printf 'blob\t%s\n' "${f##*/}"; done
fi
for d in "$w"/releases/*/; do
  [ -d "$d" ] || continue
  id=${d%/}
  id=${id##*/}
  if [ -f "$d/release.json" ]; then
    printf 'release\t%s\t' "$id"; tr -d '\n' < "$d/release.json"; printf '\n'
    if [ -f "$d/verified.json" ]; then
      printf 'verified\t%s\t' "$id"; tr -d '\n' < "$d/verified.json"; printf '\n'
    fi
  else
    printf 'incomplete\t%s\n' "$id"
  fi
done
