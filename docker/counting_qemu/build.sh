#!/bin/sh
# Build the counting qemu from Debian's qemu source package and lay it out as a bundle that runs
# anywhere the workstation's architecture runs, an emulated board's root included:
#   BUNDLE/bin/qemu-aarch64        (dynamically linked, plugins enabled)
#   BUNDLE/lib/                    its loader and every shared library it needs (ldd)
#   BUNDLE/plugins/libinsn.so      counts guest instructions ("total insns: N" at exit)
#   BUNDLE/run                     starts qemu-aarch64 through the bundled loader
#   BUNDLE/VERSION                 qemu's version and the Debian source package's
# Arguments: SOURCE_DIR (where fetch_debian_source.sh left qemu_*.orig.tar.*) BUNDLE.
set -eu
src_dir=$1
bundle=$2
cd "$src_dir"
tar xf qemu_*.orig.tar.*
cd qemu-*/
mkdir build && cd build
# --disable-install-blobs: Debian's +ds tarball leaves out the firmware blobs, which a user-mode
# target does not need; --disable-download: everything comes from the image's packages.
../configure --target-list=aarch64-linux-user --enable-plugins --disable-system --disable-tools \
  --disable-docs --disable-werror --disable-download --without-default-features \
  --disable-install-blobs
ninja -j"$(nproc)" qemu-aarch64 tests/tcg/plugins/libinsn.so
mkdir -p "$bundle/bin" "$bundle/lib" "$bundle/plugins"
cp qemu-aarch64 "$bundle/bin/"
cp tests/tcg/plugins/libinsn.so "$bundle/plugins/"
# The loader and libraries of both (the plugin is dlopen()ed by qemu and needs glib too).
for binary in qemu-aarch64 tests/tcg/plugins/libinsn.so; do
  ldd "$binary" | awk '/=> \// {print $3} /^\t\/.*ld-linux/ {print $1}'
done | sort -u | while read -r library; do
  cp -L "$library" "$bundle/lib/"
done
# glibc dlopen()s libgcc_s when a thread exits (pthread_exit unwinds): qemu aborts at exit without
# it, before the plugin prints its count. ldd cannot see it.
cp -L "$(gcc -print-file-name=libgcc_s.so.1)" "$bundle/lib/"
for loader in "$bundle"/lib/ld-linux-*.so.*; do
  loader=$(basename "$loader")
  break
done
cat > "$bundle/run" <<RUN
#!/bin/sh
# qemu-aarch64 with plugins, through the bundle's own loader and libraries (none of the root's).
here=\$(dirname "\$0")
exec "\$here/lib/$loader" --library-path "\$here/lib" "\$here/bin/qemu-aarch64" "\$@"
RUN
chmod 755 "$bundle/run"
version=$(./qemu-aarch64 --version | head -n 1)
for dsc in "$src_dir"/qemu_*.dsc; do
  package=$(basename "$dsc" .dsc)
  package=${package#qemu_}
done
printf '%s\nDebian source package qemu %s\n' "$version" "$package" > "$bundle/VERSION"
cat "$bundle/VERSION"
du -sh "$bundle"
