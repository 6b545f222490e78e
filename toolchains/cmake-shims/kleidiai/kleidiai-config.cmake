# ORT 1.21.0 declares KleidiAI (without FIND_PACKAGE_ARGS) only to link it into its static
# XNNPACK; its own code does not use it. Debian has no KleidiAI package, but Debian's shared
# libXNNPACK already carries KleidiAI's kernels (kai_* symbols), so nothing more is linked.
if(NOT TARGET kleidiai)
  add_library(kleidiai INTERFACE IMPORTED)
endif()
set(kleidiai_FOUND TRUE)
