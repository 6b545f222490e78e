# shellcheck shell=sh
# Deploy: mark a release complete.
# Sent to `sh -s -- ARGS` on stdin by orchestrator.deploy.execute; prints nothing.
#
# $1 = release dir, $2 = release.json content. Written last, by rename: the release is complete.
printf '%s\n' "$2" > "$1/release.json.tmp" && mv -f -- "$1/release.json.tmp" "$1/release.json"
