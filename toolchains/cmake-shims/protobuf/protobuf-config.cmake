# Debian builds protobuf with autotools and ships no CMake package config, while ORT asks for
# one (find_package(Protobuf NAMES Protobuf protobuf)). Reuse CMake's own FindProtobuf module,
# which defines protobuf::libprotobuf, protobuf::libprotobuf-lite and protobuf::protoc.
# Shared libraries: the system libonnx links the shared full protobuf.
set(Protobuf_USE_STATIC_LIBS OFF)
find_package(Protobuf MODULE REQUIRED)
set(protobuf_FOUND TRUE)
set(Protobuf_FOUND TRUE)
