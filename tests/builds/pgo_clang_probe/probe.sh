#!/bin/sh
# How the files beside this one were made: clang's profile-guided loop with orch's own pieces, in the
# sysroot route's build image (orch/build-clang-sysroot, clang 19.1.7, llvm-profdata-19), against a
# Debian 11 arm64 sysroot (debootstrap bullseye with libc6-dev and libstdc++-10-dev, stored with
# `orch sysroot add`), the program run under qemu-user as a Cortex-A57:
#
#   docker run --rm --network none -v <stored sysroot>/root:/sr:ro -v tests/builds/pgo_clang_probe:/work/src:ro \
#     -v orchestrator/board_side/pgo_train.sh:/work/scripts/pgo_train.sh:ro \
#     -v docker/build/merge_profiles.sh:/work/scripts/merge_profiles.sh:ro -v OUT:/work/out \
#     -v tests/builds/pgo_clang_probe/probe.sh:/probe.sh:ro orch/build-clang-sysroot:<tag> sh /probe.sh
#
# The flags are builds.pgo.clang's (instrument_flags("cortex-a57"), optimise_flags(...)).
set -u
cp -a /sr/. /sysroot/
# As orch's sysroot volume does: the board's absolute links made to point inside the mount.
find /sysroot -type l -lname "/*" | while IFS= read -r link; do ln -sfn "/sysroot$(readlink "$link")" "$link"; done
cc="clang --target=aarch64-linux-gnu --sysroot=/sysroot -O2 -mcpu=cortex-a57"
gen="-fprofile-generate=/orch-profile -fprofile-update=single"
cd /work; mkdir -p gen use out
set -x
$cc $gen -c src/hot.c -o gen/hot.o && $cc $gen -c src/cold.c -o gen/cold.o
$cc -fuse-ld=lld $gen -pthread gen/hot.o gen/cold.o -o gen/hot
llvm-readelf -V gen/hot | grep -o 'GLIBC_[0-9.]*' | sort -uV | tail -1
# Two "boards", two runs each, through the board-side script; their raw profiles merged as orch does.
for board in 0 1; do
  sh scripts/pgo_train.sh /work/board$board 2 clang QEMU_CPU=cortex-a57 QEMU_LD_PREFIX=/sysroot ./gen/hot 1000
  mkdir -p /merge/in/$board && tar -C /merge/in/$board -xzf /work/board$board/counters.tgz
done
(cd /merge/in && find . -name '*.profraw' | sed 's|^\./||' | sort) > out/raw_profiles.txt
sh scripts/merge_profiles.sh llvm-profdata-19 /merge/in/0 /merge/in/1
cp /merge/out/show.txt /merge/out/covered.txt /merge/out/version.txt out/
# The optimised compiles, under -Werror: other.c never ran anywhere (no data for its function).
use="-fprofile-use=/merge/out/merged.profdata -Wno-error=backend-plugin -Xclang -mllvm -Xclang -pgo-warn-missing-function"
for f in hot cold other; do $cc -Wall -Werror $use -c src/$f.c -o use/$f.o || exit 1; done 2> out/optimised.log
$cc -fuse-ld=lld -Werror $use -pthread use/hot.o use/cold.o -o use/hot && QEMU_CPU=cortex-a57 QEMU_LD_PREFIX=/sysroot ./use/hot 1000
# A profile of another program: hot.c's main no longer fits it, work() is not in it.
printf 'int f(int x){return x+1;}\nint main(int c,char**v){return f(c);}\n' > use/x.c
$cc -fprofile-generate=/orch-profile -fuse-ld=lld use/x.c -o use/x
LLVM_PROFILE_FILE=/work/use/x.profraw QEMU_LD_PREFIX=/sysroot ./use/x
llvm-profdata-19 merge -o use/x.profdata use/x.profraw
other="-fprofile-use=/work/use/x.profdata -Xclang -mllvm -Xclang -pgo-warn-missing-function"
$cc -Wall -Werror $other -c src/hot.c -o use/h1.o 2> /dev/null; echo "-Werror alone: exit $?"
$cc -Wall -Werror $other -Wno-error=backend-plugin -c src/hot.c -o use/h2.o 2> out/optimised-other-program.log
echo "with -Wno-error=backend-plugin: exit $?"
