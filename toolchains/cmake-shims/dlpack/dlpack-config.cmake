# Like date: Debian installs dlpack's CMake config under the build machine's multiarch
# directory only. dlpack is one header; an INTERFACE target on it is the whole package.
if(NOT TARGET dlpack::dlpack)
  add_library(dlpack::dlpack INTERFACE IMPORTED)
  find_path(ORCH_DLPACK_INCLUDE_DIR dlpack/dlpack.h REQUIRED)
  set_target_properties(dlpack::dlpack PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${ORCH_DLPACK_INCLUDE_DIR}")
endif()
set(dlpack_FOUND TRUE)
