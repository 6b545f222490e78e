# The sysroot route: ORT declares Boost's mp11 (header-only) with FIND_PACKAGE_ARGS NAMES Boost (found
# through mp11_DIR).
# A board's sysroot seldom has Boost, and Boost's headers are architecture-independent: Boost::mp11
# (and Boost::headers) on a directory of the build tree holding only a link to the build image's
# /usr/include/boost (never its whole /usr/include, which holds the build machine's glibc headers).
set(_orch_boost_include "${CMAKE_BINARY_DIR}/orch-boost-include")
if(NOT EXISTS "${_orch_boost_include}/boost")
  file(MAKE_DIRECTORY "${_orch_boost_include}")
  file(CREATE_LINK "/usr/include/boost" "${_orch_boost_include}/boost" SYMBOLIC)
endif()
set(Boost_FOUND TRUE)
foreach(_orch_name headers mp11)
  if(NOT TARGET Boost::${_orch_name})
    add_library(Boost::${_orch_name} INTERFACE IMPORTED)
    set_target_properties(Boost::${_orch_name} PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${_orch_boost_include}")
  endif()
endforeach()
