# shellcheck shell=sh
# Deploy: build a release directory from the content store.
# Sent to `sh -s -- ARGS` on stdin by orchestrator.deploy.execute; prints nothing.
#
# $1 = workdir, $2 = release id, then pairs: name-in-release sha256. Hard links cost no space and
# keep a release whole even if the store is cleaned; cp is the fallback where links fail.
# Exits 4 when a file cannot be linked or copied.
w="$1"; id="$2"; shift 2
r="$w/releases/$id"
rm -rf -- "$r"
mkdir -p -- "$r"
while [ $# -ge 2 ]; do
  dest="$r/$1"; blob="$w/store/sha256/$2"; shift 2
  mkdir -p -- "$(dirname -- "$dest")"
  ln -- "$blob" "$dest" 2>/dev/null || cp -- "$blob" "$dest" || exit 4
done
