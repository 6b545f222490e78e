"""`orch verify`: ONNX's node conformance cases and the user's deployed models run on each board's
own CPU, judged against the x86-64 stock onnxruntime of the same release.

cases (node cases from the installed onnx, as .onnx + .npy), models (deployed models as cases),
reference (the x86 stock wheel of a release), plan (pure), outcome (pure: counts, regressions),
execute (push once, run one process per build, resume after a crash).
"""
