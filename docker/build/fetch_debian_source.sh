#!/bin/sh
# Download the Debian source package of onnxruntime, in a container of the board's Debian suite.
# Copied into the container and run by orchestrator.build.sources.fetch_debian_tarball, which
# copies /out back out afterwards.
#
# No arguments; $ORT_DEBIAN_VERSION = the package version (e.g. 1.21.0+dfsg-1). Adds deb-src twins
# of the image's own binary sources, then downloads (not unpacks: no dpkg-dev needed) the source
# package into /out. Prints apt's output; fails when no orig tarball arrived.
set -eu
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [ -f "$f" ] || continue
  sed -n 's/^deb \(.*\)$/deb-src \1/p' "$f"
done > /etc/apt/sources.list.d/orch-deb-src.list
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  sed 's/^Types:.*$/Types: deb-src/' "$f" > "/etc/apt/sources.list.d/orch-deb-src-$(basename "$f")"
done
apt-get update -q
mkdir -p /out && cd /out
# Only the upstream (orig) tarball is needed; a mirror that lacks the .dsc/.debian parts is fine.
apt-get source --download-only "onnxruntime=$ORT_DEBIAN_VERSION" || true
ls onnxruntime_*.orig.tar.* >/dev/null
