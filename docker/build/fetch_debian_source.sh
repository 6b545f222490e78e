#!/bin/sh
# Download Debian source packages, in a container of a Debian suite.
# Copied into the container and run by orchestrator.builds.sources.ort (ORT itself) and
# orchestrator.builds.sources.dependencies (ORT's dependencies), which copy /out back out afterwards.
#
# Arguments: PACKAGE=VERSION ... (none: onnxruntime=$ORT_DEBIAN_VERSION, e.g. 1.21.0+dfsg-1);
# deb:PACKAGE=VERSION downloads that binary package instead (header-only -dev packages).
# $ORCH_DEB_SRC_SUITE (optional): the suite to take the sources from when it is not the image's
# own (its deb-src line is derived from the image's first Debian source: same mirror).
# Adds deb-src twins of the image's binary sources, then downloads (not unpacks: no dpkg-dev
# needed) each source package into /out. Prints apt's output; fails when an orig tarball is missing.
set -eu
for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
  [ -f "$f" ] || continue
  sed -n 's/^deb \(.*\)$/deb-src \1/p' "$f"
done > /etc/apt/sources.list.d/orch-deb-src.list
for f in /etc/apt/sources.list.d/*.sources; do
  [ -f "$f" ] || continue
  sed 's/^Types:.*$/Types: deb-src/' "$f" > "/etc/apt/sources.list.d/orch-deb-src-$(basename "$f")"
done
update_options=""
if [ -n "${ORCH_DEB_SRC_SUITE:-}" ] \
  && ! awk -v suite="$ORCH_DEB_SRC_SUITE" '$3 == suite {found = 1} END {exit !found}' \
    /etc/apt/sources.list.d/orch-deb-src.list; then
  # "deb-src URI SUITE COMPONENTS": the same mirror, the other suite.
  first=$(head -n 1 /etc/apt/sources.list.d/orch-deb-src.list)
  if [ -z "$first" ]; then
    echo "no one-line Debian source in the image to derive $ORCH_DEB_SRC_SUITE from" >&2
    exit 2
  fi
  # Sources, and binary packages for deb: downloads (nothing is installed from that suite).
  echo "$first" | awk -v suite="$ORCH_DEB_SRC_SUITE" '{$3 = suite; print; $1 = "deb"; print}' \
    >> /etc/apt/sources.list.d/orch-deb-src.list
  # A mirror's copy of sid/experimental can be older than its Release file's Valid-Until;
  # the indexes still carry each file's sha256, which apt checks and orch records.
  update_options="-o Acquire::Check-Valid-Until=false"
fi
# shellcheck disable=SC2086 # empty or one option
apt-get $update_options update -q
mkdir -p /out && cd /out
if [ "$#" -eq 0 ]; then
  set -- "onnxruntime=$ORT_DEBIAN_VERSION"
fi
for spec in "$@"; do
  case "$spec" in
    deb:*)
      spec=${spec#deb:}
      apt-get download "$spec"
      ls "${spec%%=*}"_*.deb >/dev/null
      ;;
    *)
      # Only the upstream (orig) tarball is needed; a mirror that lacks the .dsc/.debian parts is fine.
      apt-get source --download-only "$spec" || true
      ls "${spec%%=*}"_*.orig.tar.* >/dev/null
      ;;
  esac
done
