# shellcheck shell=sh
# Deploy: make the native runner of a C library build's release runnable: <release>/native/lib holds
# ORT's C library and the libraries it needs (staged from the store), and gets the SONAME link the
# runner loads (through its RPATH, $ORIGIN/lib), as link_native.sh gives a wheel's release.
# Sent to `sh -s -- ARGS` on stdin by orchestrator.deploy.native_steps; prints the runner's --version.
#
# $1 = release dir, $2 = the library's file name (libonnxruntime.so.<version>), $3 = its SONAME.
# Exits 5 (with a message on stderr) when native/lib has no such library, 6 when the runner does
# not start (a library it needs missing, a CPU it cannot run on).
r="$1"; lib="$2"; soname="$3"
[ -f "$r/native/lib/$lib" ] || { echo "the release has no native/lib/$lib" >&2; exit 5; }
# A relative link: the directory can be copied off the board as it is (cp -rL gives real files).
ln -sf -- "$lib" "$r/native/lib/$soname"
chmod 755 -- "$r/native/orch-runner"
"$r/native/orch-runner" --version || exit 6
