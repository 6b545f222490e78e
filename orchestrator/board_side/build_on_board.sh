# shellcheck shell=sh
# ORT's build.py run on the board itself (orch build --on-board): the route for what cannot be
# cross-compiled (CUDA and TensorRT on a Jetson, as NVIDIA's own containers build it).
#
# Placed in WORK/scripts/ beside run_build.sh (the build container's own wrapper: configure stamp,
# compiler cache statistics, compile_commands.json, in REPORT) and run as
#     sh build_on_board.sh WORK BUILD_DIR CONFIG_DIR STAMP -- python3 .../build.py ARG...
# WORK/ccache is the board's compiler cache, kept between builds. Everything goes to stdout (orch
# streams it into the build log) and the last line is `orch-on-board: status N`, the build's exit
# status: the stream carries no exit status of its own.
exec 2>&1
work=$1
build=$2
config=$3
stamp=$4
shift 4
[ "$1" = -- ] && shift
mkdir -p -- "$work/ccache" "$build" || {
    echo "orch-on-board: status 125"
    exit 0
}
CCACHE_DIR="$work/ccache" CCACHE_COMPILERCHECK=content CCACHE_MAXSIZE=8G \
    ORCH_CONFIG_DIR="$config" ORCH_REPORT_DIR="$build/orch-report" ORCH_CONFIGURE_STAMP="$stamp" \
    sh "$work/scripts/run_build.sh" "$@"
status=$?
echo "orch-on-board: status $status"
