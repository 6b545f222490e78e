# Debian builds XNNPACK with its own CMake but installs no package config, only libXNNPACK.so
# (its micro-kernels inside, KleidiAI's too) and xnnpack.h. ORT's XNNPACK EP links XNNPACK and
# microkernels-prod (separate static libraries in ORT's own build): the shared library is both.
if(NOT TARGET XNNPACK)
  find_library(ORCH_XNNPACK_LIBRARY NAMES XNNPACK REQUIRED)
  find_path(ORCH_XNNPACK_INCLUDE_DIR xnnpack.h REQUIRED)
  add_library(XNNPACK SHARED IMPORTED)
  set_target_properties(XNNPACK PROPERTIES
    IMPORTED_LOCATION "${ORCH_XNNPACK_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${ORCH_XNNPACK_INCLUDE_DIR}")
  add_library(microkernels-prod INTERFACE IMPORTED)
endif()
