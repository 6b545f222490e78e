# shellcheck shell=sh
# Deploy/rollback: prepare the atomic switch of `current` to a complete, verified release.
# Sent to `sh -s -- ARGS` on stdin by orchestrator.deploy.releases.switch_current, under the board
# lock; prints nothing.
#
# $1 = workdir, $2 = release id, $3 = temporary link name. The link is made under the temporary
# name and renamed over `current` afterwards (by orch, over SFTP): rename(2) replaces it atomically,
# so a reader sees the old release or the new one, never neither. Temporary links an interrupted
# switch left behind (`.current.*`) go first: nothing else reads them, and under the lock no other
# switch is under way.
# Exits 3 (with a message on stderr) when the release is not complete, or not verified on this board
# (its verified.json is written after its own interpreter passed the verification).
w="$1"; id="$2"; tmp="$w/$3"
r="$w/releases/$id"
[ -f "$r/release.json" ] || { echo "release $id is not complete on this board" >&2; exit 3; }
[ -f "$r/verified.json" ] || { echo "release $id is not verified on this board" >&2; exit 3; }
for old in "$w"/.current.*; do
  if [ -L "$old" ]; then rm -f -- "$old"; fi
done
ln -s -- "releases/$id" "$tmp"
