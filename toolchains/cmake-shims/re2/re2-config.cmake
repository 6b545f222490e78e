# Debian builds re2 without its CMake package config (only re2.pc). ORT links re2::re2; the
# shared libre2 brings its abseil dependencies itself (DT_NEEDED), so library + headers is all.
if(NOT TARGET re2::re2)
  find_library(ORCH_RE2_LIBRARY NAMES re2 REQUIRED)
  find_path(ORCH_RE2_INCLUDE_DIR re2/re2.h REQUIRED)
  add_library(re2::re2 SHARED IMPORTED)
  set_target_properties(re2::re2 PROPERTIES
    IMPORTED_LOCATION "${ORCH_RE2_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${ORCH_RE2_INCLUDE_DIR}")
endif()
set(re2_FOUND TRUE)
