"""orch: cross-compile ONNX Runtime for ARM boards, deploy it over SSH, benchmark it on the boards."""

__version__ = "0.1.0"
