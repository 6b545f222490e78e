# Debian installs date's CMake config for the build machine's architecture only
# (lib/x86_64-linux-gnu/cmake), invisible to an aarch64 configure. ORT uses the header-only
# part (date.h), so an INTERFACE target on the system headers is all it needs.
if(NOT TARGET date::date)
  add_library(date::date INTERFACE IMPORTED)
  find_path(ORCH_DATE_INCLUDE_DIR date/date.h REQUIRED)
  set_target_properties(date::date PROPERTIES INTERFACE_INCLUDE_DIRECTORIES "${ORCH_DATE_INCLUDE_DIR}")
endif()
set(date_FOUND TRUE)
