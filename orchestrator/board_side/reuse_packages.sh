# shellcheck shell=sh
# Deploy: give a new release the installed packages of an older release with the same wheels.
# Sent to `sh -s -- ARGS` on stdin by orchestrator.deploy.execute; prints nothing.
#
# $1 = the release whose packages are reused, $2 = the new release (its venv just created).
# Hard links: the same files, no space, no pip run; cp -a where links are impossible.
# Exits 4 when a copy fails, 5 (with a message on stderr) when $1 has no site-packages.
src="$1/venv/lib"; dst="$2/venv/lib"
found=0
for sp in "$src"/python*/site-packages; do
  [ -d "$sp" ] || continue
  rel=${sp#"$src"/}
  # shellcheck disable=SC2115 # $dst ends in /venv/lib: the path is never "/"
  rm -rf -- "$dst/$rel"
  mkdir -p -- "$(dirname -- "$dst/$rel")"
  cp -al -- "$sp" "$dst/$rel" 2>/dev/null || cp -a -- "$sp" "$dst/$rel" || exit 4
  found=1
done
[ "$found" = 1 ] || { echo "no site-packages in $1" >&2; exit 5; }
