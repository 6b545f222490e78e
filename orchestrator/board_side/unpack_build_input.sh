# shellcheck shell=sh
# One input of a build on the board (ORT's source tree, its dependency sources, orch's CMake shims),
# sent as a gzipped tar: unpacked beside DEST, then moved into place, so that DEST exists only
# complete (a cut transfer or unpack is started again next time, never built from).
# Run with `sh -s -- ARCHIVE DEST`; the archive is removed afterwards.
set -eu
archive=$1
dest=$2
rm -rf -- "$dest.partial"
mkdir -p -- "$dest.partial"
tar -xzf "$archive" -C "$dest.partial"
rm -f -- "$archive"
rm -rf -- "$dest"
mv -- "$dest.partial" "$dest"
