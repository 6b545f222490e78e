# CMake toolchain file of the sysroot route: the build container's clang, lld and LLVM binutils for
# 64-bit ARM Linux, against a board's sysroot mounted at /sysroot. Headers, crt files, glibc,
# libstdc++ and the Python headers all come from the sysroot, so what is built needs only what
# that board has (the wheel check proves every GLIBC_/GLIBCXX_ need against the same tree).
#
# ORCH_SYSROOT may name another mount point (default /sysroot).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

if(NOT DEFINED ORCH_SYSROOT)
  set(ORCH_SYSROOT "/sysroot")
endif()
set(CMAKE_SYSROOT "${ORCH_SYSROOT}")

# The compilers are clang under the target's name. ORT tells the target CPU of its common library
# from `${CMAKE_C_COMPILER} -dumpmachine` alone (cmake/onnxruntime_common.cmake), and a bare clang
# prints the build machine's triple there: ORT then compiles its code with -DCPUINFO_SUPPORTED but
# leaves cpuinfo out of libonnxruntime's link (undefined cpuinfo_* symbols). clang invoked as
# <triple>-clang targets that triple and prints it, as the Android NDK's compiler names do.
set(ORCH_CLANG_BIN "/tmp/orch-clang-bin")
file(MAKE_DIRECTORY "${ORCH_CLANG_BIN}")
foreach(driver clang clang++)
  file(CREATE_LINK "/usr/bin/${driver}" "${ORCH_CLANG_BIN}/aarch64-linux-gnu-${driver}" SYMBOLIC)
endforeach()
set(CMAKE_C_COMPILER "${ORCH_CLANG_BIN}/aarch64-linux-gnu-clang")
set(CMAKE_CXX_COMPILER "${ORCH_CLANG_BIN}/aarch64-linux-gnu-clang++")
set(CMAKE_ASM_COMPILER "${ORCH_CLANG_BIN}/aarch64-linux-gnu-clang")
foreach(lang C CXX ASM)
  set(CMAKE_${lang}_COMPILER_TARGET aarch64-linux-gnu)
endforeach()
# LTO objects hold LLVM bitcode: only LLVM's archiver and ranlib index them.
set(CMAKE_AR "/usr/bin/llvm-ar" CACHE FILEPATH "" FORCE)
set(CMAKE_RANLIB "/usr/bin/llvm-ranlib" CACHE FILEPATH "" FORCE)
set(CMAKE_NM "/usr/bin/llvm-nm" CACHE FILEPATH "" FORCE)
# The archiver of an IPO (LTO) target is CMAKE_<LANG>_COMPILER_AR, which CMake looks for beside the
# compiler: beside the symlinks below it finds none, CMake's check_ipo_supported fails, and ORT then
# builds an `--enable_lto` variant without LTO (a warning in its configure output, nothing more).
foreach(lang C CXX)
  set(CMAKE_${lang}_COMPILER_AR "/usr/bin/llvm-ar" CACHE FILEPATH "" FORCE)
  set(CMAKE_${lang}_COMPILER_RANLIB "/usr/bin/llvm-ranlib" CACHE FILEPATH "" FORCE)
endforeach()
# lld: links for any target and honours the sysroot (also inside glibc's linker scripts).
set(CMAKE_LINKER_TYPE LLD)

# Libraries, headers and packages only from the sysroot; programs (protoc, python3) from the build machine.
set(CMAKE_FIND_ROOT_PATH "${ORCH_SYSROOT}")
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)
set(CMAKE_FIND_ROOT_PATH_MODE_LIBRARY ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_INCLUDE ONLY)
set(CMAKE_FIND_ROOT_PATH_MODE_PACKAGE ONLY)
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)

# pkg-config reports the board's .pc files, with paths inside the sysroot.
set(ENV{PKG_CONFIG_SYSROOT_DIR} "${ORCH_SYSROOT}")
set(ENV{PKG_CONFIG_LIBDIR} "${ORCH_SYSROOT}/usr/lib/aarch64-linux-gnu/pkgconfig:${ORCH_SYSROOT}/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
