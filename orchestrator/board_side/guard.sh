# shellcheck shell=sh
# orch's guard: every command orch runs on a board runs under it, so that the command ends with orch.
#
# Run as `sh -c <this file's text> orch-guard MODE INPUT COMMAND [ARG...]` by the SSH adapter
# (orchestrator/adapters/ssh.py). The command runs in a process group of its own (setsid); the guard
# watches the SSH channel's stdin, which orch keeps open while the command runs and closes when it
# stops the command (a timeout, Ctrl-C) or when orch exits, is killed or loses its connection (sshd
# then closes it). At that end of input the command's whole process group is ended: SIGTERM, and
# SIGKILL five seconds later for what is still there.
#
# MODE run:    COMMAND ARG... is the exact argv; its stdin is INPUT: "-" (nothing: /dev/null) or a
#              byte count N: the first N bytes on stdin (a script for `sh -s`, a JSON document).
# MODE line:   COMMAND is one command line the user typed, run by the login shell ($SHELL -c),
#              as `ssh host 'cmd'` runs it; INPUT as for run.
# MODE stream: the command speaks a protocol on stdin/stdout (INPUT is "-"): stdin is passed on to
#              it, and its end too; the group is ended if it is still there 3 seconds later.
#
# Output and exit status are the command's: a command killed by a signal ends the guard by the same
# signal, so sshd reports it as before. 125: the guard itself could not start the command.
# POSIX sh (dash, busybox ash); setsid (util-linux, busybox) gives the group, else the group is the
# command's process and its descendants found in /proc.

mode=$1
input=$2
shift 2

fail() {
    printf 'orch guard: %s\n' "$1" >&2
    exit 125
}

exec 3<&0 # the channel's stdin: watched for its end
scratch=
case $mode in
    run | line)
        if [ "$input" = - ]; then
            exec 4</dev/null
        else
            scratch=$(mktemp -d 2>/dev/null || mktemp -d "$HOME/.orch-guard.XXXXXX") ||
                fail "cannot make a temporary directory for the command's input"
            if command -v head >/dev/null 2>&1; then
                head -c "$input" <&3 >"$scratch/input" || fail "cannot read the command's input"
            else
                dd bs=1 count="$input" <&3 >"$scratch/input" 2>/dev/null || fail "cannot read the command's input"
            fi
            # A connection cut while the input came must not run a script cut short.
            [ "$(wc -c <"$scratch/input")" -eq "$input" ] || fail "the command's input was cut short"
            exec 4<"$scratch/input"
            rm -rf "$scratch"
            scratch=
        fi
        ;;
    stream)
        scratch=$(mktemp -d 2>/dev/null || mktemp -d "$HOME/.orch-guard.XXXXXX") ||
            fail "cannot make a temporary directory for the command's input"
        mkfifo "$scratch/input" || fail "cannot make a pipe for the command's input"
        ;;
    *) fail "unknown mode $mode" ;;
esac
if [ "$mode" = line ]; then
    set -- "${SHELL:-/bin/sh}" -c "$1"
fi

# Background jobs get /dev/null as stdin unless redirected: both are, explicitly.
if command -v setsid >/dev/null 2>&1; then
    if [ "$mode" = stream ]; then
        setsid "$@" <"$scratch/input" 3<&- &
    else
        setsid "$@" <&4 3<&- 4<&- &
    fi
    grouped=yes
else
    if [ "$mode" = stream ]; then
        "$@" <"$scratch/input" 3<&- &
    else
        "$@" <&4 3<&- 4<&- &
    fi
    grouped=no
fi
pid=$!
exec 4<&-

alive() {
    # The command's process itself too: its group exists only once setsid has run in it.
    if [ "$grouped" = yes ] && kill -s 0 -- "-$pid" 2>/dev/null; then
        return 0
    fi
    kill -s 0 "$pid" 2>/dev/null
}

tree() {
    # The command's process and its descendants (without setsid), parents before children.
    printf '%s\n' "$1"
    for status in /proc/[0-9]*/status; do
        child=${status#/proc/}
        child=${child%/status}
        parent=$(sed -n 's/^PPid:[[:space:]]*//p' "$status" 2>/dev/null)
        if [ "$parent" = "$1" ]; then
            tree "$child"
        fi
    done
}

signal_all() {
    if [ "$grouped" = yes ]; then
        kill -s "$1" -- "-$pid" 2>/dev/null
        kill -s "$1" "$pid" 2>/dev/null
    else
        for each in $(tree "$pid"); do
            kill -s "$1" "$each" 2>/dev/null
        done
    fi
}

end_group() {
    # $1: seconds the command gets to end by itself first (a stream's command ends at its input's end).
    waited=0
    while [ "$waited" -lt "$1" ] && alive; do
        sleep 1
        waited=$((waited + 1))
    done
    alive || return 0
    signal_all TERM
    waited=0
    while [ "$waited" -lt 5 ] && alive; do
        sleep 1
        waited=$((waited + 1))
    done
    alive && signal_all KILL
    return 0
}

# The watcher: until the input ends, USR1 (the command has ended) stops it; from then on it ends the
# group, and USR1 no longer stops it, so the guard exits only once the whole group is gone: the
# members that outlive the command's own process too (a TERM they ignore is followed by the KILL).
# A USR1 that comes before the watcher has set its trap must not kill it (its shell would print
# "User defined signal 1" into the command's stderr): it starts with USR1 ignored (a subshell keeps
# an ignored signal) and, once its trap is set, looks whether the command's process is already gone
# (the guard sends USR1 only after it has reaped it).
trap '' USR1
if [ "$mode" = stream ]; then
    {
        trap 'exit 0' USR1
        kill -s 0 "$pid" 2>/dev/null || exit 0
        cat <&3 >"$scratch/input" &
        wait "$!"
        trap '' USR1
        end_group 3
    } </dev/null >/dev/null 2>&1 &
else
    {
        trap 'exit 0' USR1
        kill -s 0 "$pid" 2>/dev/null || exit 0
        while read -r _ <&3; do :; done
        trap '' USR1
        end_group 0
    } </dev/null >/dev/null 2>&1 &
fi
watcher=$!
exec 3<&-

wait "$pid"
status=$?
kill -s USR1 "$watcher" 2>/dev/null
wait "$watcher"
trap - USR1 # a command killed by USR1 ends the guard by USR1 too (below)
if [ -n "$scratch" ]; then
    rm -rf "$scratch"
fi
if [ "$status" -gt 128 ] && [ "$status" -le 143 ]; then
    # Killed by a signal (HUP..TERM): end the same way, without a core file of the guard (where the
    # shell has no `ulimit -c`, the status is returned as it is).
    # shellcheck disable=SC3045
    ulimit -c 0 2>/dev/null && kill -s "$(kill -l "$status")" $$
fi
exit "$status"
