# shellcheck shell=sh
# The facts that decide whether a wheel fits a board.
# Sent to `sh -s -- ARGS` on stdin by orchestrator.fleet.board_facts.read_facts, and by
# orchestrator.deploy.survey with list_releases.sh after it; orchestrator.fleet.board_facts parses it.
#
# $1 = the board's python, $2 = orch's working directory on the board.
# Prints key=value lines: home, arch, kernel, glibc_raw, python_raw, os_id, os_version, os_name
# (when /etc/os-release exists), cpu_features (the Features line of /proc/cpuinfo), disk_dir (the workdir or its closest existing parent) and free_kib;
# and what hardware counters would need: uid, emulated_cpu (QEMU_CPU, which the lab's sshd sets),
# perf_event_paranoid, cpu_pmus (the CPU PMUs the kernel exposes) and perf (the tool's path).
# `python -V` answers before the interpreter initialises: much faster than `-c` under emulation.
# orchestrator.deploy.survey sends list_releases.sh after this script and reads $workdir.
py="$1"; workdir="$2"
echo "home=$(pwd)"
echo "arch=$(uname -m)"
echo "kernel=$(uname -r)"
g=$(getconf GNU_LIBC_VERSION 2>/dev/null) || g=""
if [ -z "$g" ]; then g=$(ldd --version 2>&1 | head -n 1); fi
echo "glibc_raw=$g"
v=$("$py" -V 2>&1) || v="missing: $v"
echo "python_raw=$v"
if [ -f /etc/os-release ]; then
  # shellcheck disable=SC1091 # the board's file, not one of the project's
  . /etc/os-release
  echo "os_id=${ID:-}"
  echo "os_version=${VERSION_ID:-}"
  echo "os_name=${PRETTY_NAME:-}"
fi
f=$(grep -m 1 '^Features' /proc/cpuinfo 2>/dev/null | cut -d: -f2-) || f=""
echo "cpu_features=$f"
dir="$workdir"
while [ ! -d "$dir" ]; do
  parent=$(dirname -- "$dir")
  if [ "$parent" = "$dir" ]; then break; fi
  dir="$parent"
done
echo "disk_dir=$dir"
df -Pk -- "$dir" 2>/dev/null | awk 'NR==2 {print "free_kib=" $4}'
echo "uid=$(id -u)"
echo "emulated_cpu=${QEMU_CPU:-}"
echo "perf_event_paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null)"
pmus=""
for d in /sys/bus/event_source/devices/*; do
  [ -e "$d" ] || continue
  name=$(basename -- "$d")
  # The CPU PMUs of ARM kernels: armv8_cortex_a76, armv8_pmuv3_0, arm_cortex_a72 ...
  case "$name" in armv7*|armv8*|arm_*) pmus="$pmus $name" ;; esac
done
echo "cpu_pmus=$pmus"
p=$(command -v perf 2>/dev/null) || p=""
echo "perf=$p"
