# shellcheck shell=sh
# Deploy/rollback: prepare the atomic switch of `current` to a complete release.
# Sent to `sh -s -- ARGS` on stdin by orchestrator.deploy.releases.switch_current; prints nothing.
#
# $1 = workdir, $2 = release id, $3 = temporary link name. The link is made under the temporary
# name and renamed over `current` afterwards (by orch, over SFTP): rename(2) replaces it atomically,
# so a reader sees the old release or the new one, never neither.
# Exits 3 (with a message on stderr) when the release is not complete.
w="$1"; id="$2"; tmp="$w/$3"
[ -f "$w/releases/$id/release.json" ] || { echo "release $id is not complete on this board" >&2; exit 3; }
rm -f -- "$tmp"
ln -s -- "releases/$id" "$tmp"
