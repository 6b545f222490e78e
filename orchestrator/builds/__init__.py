"""orch build: a pure plan (image, toolchain, defines, build.py argv), then its execution in a
build container, the source and its patches, flag validation, variants, stock wheels and the
pre-flight on an emulated board.
"""
