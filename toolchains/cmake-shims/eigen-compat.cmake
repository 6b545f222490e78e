# Injected with CMAKE_PROJECT_INCLUDE: force-include eigen-compat.h into every C++ file so ORT
# builds against Debian's Eigen 3.4.0 without touching ORT sources (-iquote lets Eigen's
# plugin #include find eigen-arraybase-plugin.h next to it).
if(NOT ORCH_EIGEN_COMPAT_ADDED)
  set(ORCH_EIGEN_COMPAT_ADDED TRUE)
  add_compile_options(
    "$<$<COMPILE_LANGUAGE:CXX>:SHELL:-iquote ${CMAKE_CURRENT_LIST_DIR}>"
    "$<$<COMPILE_LANGUAGE:CXX>:SHELL:-include ${CMAKE_CURRENT_LIST_DIR}/eigen-compat.h>")
endif()
