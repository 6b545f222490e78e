# shellcheck shell=sh
# Deploy: make a release's native runner runnable: <release>/native/lib holds ORT's C library (and the
# libraries it needs) as links into the release's installed onnxruntime/capi, plus the SONAME link
# the runner is linked against; the runner finds them through its RPATH ($ORIGIN/lib).
# Sent to `sh -s -- ARGS` on stdin by orchestrator.deploy.execute; prints the runner's --version.
#
# $1 = release dir, $2 = the library's file name (libonnxruntime.so.<version>), $3 = its SONAME.
# Exits 5 (with a message on stderr) when the release's onnxruntime has no such library, 6 when the
# runner does not start (a missing library, a CPU it cannot run on).
r="$1"; lib="$2"; soname="$3"
capi=""
for dir in "$r"/venv/lib/python*/site-packages/onnxruntime/capi; do
  [ -f "$dir/$lib" ] && capi="$dir"
done
[ -n "$capi" ] || { echo "the release's onnxruntime has no capi/$lib" >&2; exit 5; }
rm -rf -- "$r/native/lib"
mkdir -p -- "$r/native/lib"
# Relative links: the release directory can be moved or copied (cp -rL gives real files).
rel=${capi#"$r"/}
for file in "$capi"/lib*.so*; do
  [ -f "$file" ] || continue
  ln -s -- "../../$rel/${file##*/}" "$r/native/lib/${file##*/}"
done
ln -sf -- "$lib" "$r/native/lib/$soname"
chmod 755 -- "$r/native/orch-runner"
"$r/native/orch-runner" --version || exit 6
