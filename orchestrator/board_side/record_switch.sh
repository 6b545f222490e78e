# shellcheck shell=sh
# Deploy/rollback: append a switch to the history (the rollback order).
# Sent to `sh -s -- ARGS` on stdin by orchestrator.deploy.releases.switch_current; prints nothing.
#
# $1 = workdir, $2 = release id, $3 = UTC time. Appends "<time> <release id>" to $1/history.
printf '%s %s\n' "$3" "$2" >> "$1/history"
