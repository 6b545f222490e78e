# Debian's libpthreadpool-dev has only the library and pthreadpool.h (ORT's XNNPACK route asks
# for vcpkg's package name, unofficial-pthreadpool). ORT links the plain target name pthreadpool.
if(NOT TARGET pthreadpool)
  find_library(ORCH_PTHREADPOOL_LIBRARY NAMES pthreadpool REQUIRED)
  find_path(ORCH_PTHREADPOOL_INCLUDE_DIR pthreadpool.h REQUIRED)
  add_library(pthreadpool SHARED IMPORTED)
  set_target_properties(pthreadpool PROPERTIES
    IMPORTED_LOCATION "${ORCH_PTHREADPOOL_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${ORCH_PTHREADPOOL_INCLUDE_DIR}")
endif()
