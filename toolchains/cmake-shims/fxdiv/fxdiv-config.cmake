# fxdiv is one header (Debian's libfxdiv-dev); pthreadpool's build would need it, ORT only names it.
if(NOT TARGET fxdiv)
  add_library(fxdiv INTERFACE IMPORTED)
endif()
set(fxdiv_FOUND TRUE)
