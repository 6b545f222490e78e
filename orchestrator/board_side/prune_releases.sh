# shellcheck shell=sh
# Deploy: delete releases that --keep no longer keeps, and store contents no release uses.
# Sent to `sh -s -- ARGS` on stdin by orchestrator.deploy.releases.prune; prints nothing.
#
# $1 = workdir, then release ids to delete. Store blobs that no release links any more
# (link count 1: only the store's own name) go too, so the disk does not fill over time, and the
# temporary links of an interrupted switch (`.current.*`: run under the board lock, no switch is
# under way).
w="$1"; shift
for old in "$w"/.current.*; do
  if [ -L "$old" ]; then rm -f -- "$old"; fi
done
for id in "$@"; do
  case "$id" in ""|.|..|*/*) continue ;; esac
  rm -rf -- "$w/releases/$id"
done
if [ -d "$w/store/sha256" ]; then
  find "$w/store/sha256" -type f -links 1 -exec rm -f -- {} + 2>/dev/null || true
fi
