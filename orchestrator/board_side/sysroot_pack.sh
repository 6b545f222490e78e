# shellcheck shell=sh
# Packs what a cross compiler needs from this board (a sysroot) into one tarball.
# Sent to `sh -s -- ARGS` on stdin by orchestrator.builds.sysroots.pull, which fetches the tarball.
#
# $1 = the directory to write the tarball in (orch's working directory on the board; relative
#      paths are relative to the login home), $2 = "gzip" or "none" (compression),
# $3 = the root to pack (default /; another one packs a chroot or a mounted image).
# Packs, with paths relative to / and symlinks kept as symlinks:
#   usr/include (all of it); from lib/<triplet>, usr/lib/<triplet> and usr/lib/gcc/<triplet>/*
#   only *.so, *.so.*, *.a, *.o and pkgconfig/*.pc (a Jetson's /usr/lib/aarch64-linux-gnu holds
#   GBs of other things); the dynamic loader's links; the /lib -> usr/lib links of a merged /usr;
#   the board's Python: each interpreter usr/bin/python3.X (not python3.X-config or other programs)
#   and its standard library usr/lib/python3.X, leaving out what lies under __pycache__, test,
#   tests, site-packages, dist-packages, idlelib, turtledemo, tkinter, ensurepip and lib2to3
#   directories. Cross builds of the Python module run the board's own interpreter under emulation
#   (CMake's FindPython asks it for its version, ABI and paths), so the sysroot carries it and its
#   standard library -- never the board's installed packages;
#   the OS release files;
#   CUDA's toolkit, for builds against the board's own CUDA: each usr/local/cuda* entry named cuda,
#   cuda-12 or cuda-12.6 that is a link (usr/local/cuda -> cuda-12.6), and from each real one only
#   version.json, the include and lib64 links at its top, all of targets/*/include, and of
#   targets/*/lib only the shared libraries (*.so, *.so.*), lib/stubs/*.so (the driver's stub
#   libcuda.so) and the two archives nvcc links into every program (libcudadevrt.a,
#   libcudart_static.a) -- never the other static *.a libraries (GBs), bin, nvvm, samples or docs; and the
#   etc/alternatives links named like those entries or with "cudnn" in their name (JetPack's
#   usr/local/cuda and usr/include/cudnn*.h lead through them).
# orchestrator.builds.sysroots.staging.wanted keeps exactly these paths (the store's rules).
# Prints key=value lines: tarball (absolute path), entries, bytes.
set -eu
workdir="$1"; compress="$2"; root="${3:-/}"
mkdir -p -- "$workdir"
workdir=$(cd -- "$workdir" && pwd)
list=$(mktemp "$workdir/sysroot-list.XXXXXX")
tarball=$(mktemp "$workdir/sysroot-pack.XXXXXX")
trap 'rm -f -- "$list"' EXIT
trap 'rm -f -- "$list" "$tarball"; exit 1' HUP INT TERM
cd -- "$root"

libraries() {
  # $1 = a directory: its libraries, link-time objects and pkg-config files, files and symlinks.
  find "$1" \( -type f -o -type l \) \
    \( -name '*.so' -o -name '*.so.*' -o -name '*.a' -o -name '*.o' -o -path '*/pkgconfig/*.pc' \) \
    -print >> "$list" || echo "warning: could not read all of /$1 (find failed)" >&2
}

cuda_name() {
  # $1 = a name: is it CUDA's (cuda, cuda-12, cuda-12.6)?
  case "$1" in
    cuda) return 0 ;;
    cuda-[0-9]*) case "${1#cuda-}" in *[!0-9.]*) return 1 ;; esac; return 0 ;;
  esac
  return 1
}

cuda_libraries() {
  # $1 = targets/<t>/lib of a CUDA directory: its shared libraries, lib/stubs/*.so and the two archives
  # nvcc links into every program; no other directory.
  find "$1" \( -type d ! -path "$1" ! -path "$1/stubs" -prune \) -o \( \( -type f -o -type l \) \
    \( -path "$1/stubs/*" -name '*.so' -o ! -path "$1/stubs/*" \( -name '*.so' -o -name '*.so.*' \
       -o -name libcudadevrt.a -o -name libcudart_static.a \) \) \
    -print \) >> "$list" || echo "warning: could not read all of /$1 (find failed)" >&2
}

if [ -d usr/include ]; then
  find usr/include \( -type f -o -type l \) -print >> "$list" ||
    echo "warning: could not read all of /usr/include (find failed)" >&2
fi
for top in lib lib64 lib32 libx32 usr/lib64; do
  # A merged /usr links these to usr/...: the link is packed, its contents come through usr/lib.
  if [ -L "$top" ]; then echo "$top" >> "$list"; fi
done
for top in lib usr/lib lib64 usr/lib64; do
  if [ -L "$top" ] || [ ! -d "$top" ]; then continue; fi
  for dir in "$top"/*-linux-gnu*; do
    if [ -L "$dir" ]; then echo "$dir" >> "$list"; elif [ -d "$dir" ]; then libraries "$dir"; fi
  done
  for loader in "$top"/ld-linux*; do
    if [ -e "$loader" ] || [ -L "$loader" ]; then echo "$loader" >> "$list"; fi
  done
done
for dir in usr/lib/gcc/*-linux-gnu*/*; do
  if [ -d "$dir" ] && [ ! -L "$dir" ]; then libraries "$dir"; fi
done
for file in usr/bin/python3.*; do
  case "${file#usr/bin/python3.}" in '' | *[!0-9]*) continue ;; esac
  if [ -f "$file" ] || [ -L "$file" ]; then echo "$file" >> "$list"; fi
done
for dir in usr/lib/python3.*; do
  case "${dir#usr/lib/python3.}" in '' | *[!0-9]*) continue ;; esac
  if [ -d "$dir" ] && [ ! -L "$dir" ]; then
    echo "$dir" >> "$list"
    find "$dir" \( -type d \( -name __pycache__ -o -name test -o -name tests -o -name site-packages \
      -o -name dist-packages -o -name idlelib -o -name turtledemo -o -name tkinter -o -name ensurepip \
      -o -name lib2to3 \) -prune \) -o \( \( -type f -o -type l \) -print \) >> "$list" ||
      echo "warning: could not read all of /$dir (find failed)" >&2
  fi
done
for file in etc/os-release usr/lib/os-release etc/debian_version etc/lsb-release etc/nv_tegra_release; do
  if [ -e "$file" ] || [ -L "$file" ]; then echo "$file" >> "$list"; fi
done
for entry in usr/local/cuda*; do
  cuda_name "${entry#usr/local/}" || continue
  if [ -L "$entry" ]; then echo "$entry" >> "$list"; continue; fi
  if [ ! -d "$entry" ]; then continue; fi
  if [ -f "$entry/version.json" ] || [ -L "$entry/version.json" ]; then echo "$entry/version.json" >> "$list"; fi
  for link in "$entry/include" "$entry/lib64"; do
    if [ -L "$link" ]; then echo "$link" >> "$list"; fi
  done
  for target in "$entry"/targets/*; do
    if [ -L "$target" ] || [ ! -d "$target" ]; then continue; fi
    if [ -d "$target/include" ] && [ ! -L "$target/include" ]; then
      find "$target/include" \( -type f -o -type l \) -print >> "$list" ||
        echo "warning: could not read all of /$target/include (find failed)" >&2
    fi
    if [ -d "$target/lib" ] && [ ! -L "$target/lib" ]; then cuda_libraries "$target/lib"; fi
  done
done
for link in etc/alternatives/*; do
  if [ ! -L "$link" ]; then continue; fi
  name="${link#etc/alternatives/}"
  case "$name" in *cudnn*) ;; *) cuda_name "$name" || continue ;; esac
  echo "$link" >> "$list"
done

entries=$(wc -l < "$list")
if [ "$compress" = gzip ]; then
  # POSIX sh has no pipefail: tar's failure is noted in a file, or gzip's success would hide it.
  { tar -c --no-recursion -f - -T "$list" || echo failed > "$list.tar-failed"; } | gzip -1 > "$tarball"
  if [ -e "$list.tar-failed" ]; then
    rm -f -- "$list.tar-failed" "$tarball"
    exit 3
  fi
else
  tar -c --no-recursion -f "$tarball" -T "$list"
fi
echo "tarball=$tarball"
echo "entries=$entries"
echo "bytes=$(wc -c < "$tarball")"
