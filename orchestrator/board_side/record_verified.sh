# shellcheck shell=sh
# Deploy: record that a release passed its verification on this board.
# Sent to `sh -s -- ARGS` on stdin by orchestrator.deploy.execute; prints nothing.
#
# $1 = release dir, $2 = verified.json content (one line). Written by rename, like release.json:
# a record is whole or absent. list_releases.sh prints it; an unchanged re-deploy then skips
# verifying again (`orch deploy --verify` does it anyway).
printf '%s\n' "$2" > "$1/verified.json.tmp" && mv -f -- "$1/verified.json.tmp" "$1/verified.json"
