# CMake toolchain file: cross-compile for 64-bit ARM Linux with the distribution's
# aarch64-linux-gnu GCC, against the board's libraries installed through multiarch
# (dpkg --add-architecture arm64) in the build container: no sysroot needed.
#
# ORCH_CROSS_PREFIX may name another cross compiler prefix (default aarch64-linux-gnu-).
set(CMAKE_SYSTEM_NAME Linux)
set(CMAKE_SYSTEM_PROCESSOR aarch64)

if(NOT DEFINED ORCH_CROSS_PREFIX)
  set(ORCH_CROSS_PREFIX "aarch64-linux-gnu-")
endif()
set(CMAKE_C_COMPILER "${ORCH_CROSS_PREFIX}gcc")
set(CMAKE_CXX_COMPILER "${ORCH_CROSS_PREFIX}g++")
# LTO objects hold GIMPLE, not machine code: only the gcc-ar/gcc-ranlib wrappers (which load
# the LTO plugin) can index them. Harmless without LTO.
set(CMAKE_AR "/usr/bin/${ORCH_CROSS_PREFIX}gcc-ar" CACHE FILEPATH "" FORCE)
set(CMAKE_RANLIB "/usr/bin/${ORCH_CROSS_PREFIX}gcc-ranlib" CACHE FILEPATH "" FORCE)

# Multiarch: find_library/find_path look under /usr/lib/aarch64-linux-gnu and /usr/include.
set(CMAKE_LIBRARY_ARCHITECTURE aarch64-linux-gnu)
# Programs (protoc, python3, flatc) must run on the build machine: search the host's.
set(CMAKE_FIND_ROOT_PATH_MODE_PROGRAM NEVER)

# pkg-config must report the board's .pc files, not the host's.
set(ENV{PKG_CONFIG_LIBDIR} "/usr/lib/aarch64-linux-gnu/pkgconfig:/usr/share/pkgconfig")
set(ENV{PKG_CONFIG_PATH} "")
