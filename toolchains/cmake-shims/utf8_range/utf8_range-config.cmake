# protobuf 21.x (Debian's) carries its UTF-8 validation inside libprotobuf; ORT only adds the
# (here empty) utf8_range_SOURCE_DIR to the include path. An empty package satisfies it.
set(utf8_range_FOUND TRUE)
