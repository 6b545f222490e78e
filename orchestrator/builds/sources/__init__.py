"""Where a build's source trees come from: ONNX Runtime's own (ort) and its dependencies'."""
