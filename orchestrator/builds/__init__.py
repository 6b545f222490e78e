"""orch build: a pure plan (plan; its build image, dependency routes and build.py arguments in
image, routes and build_args), then its execution in a build container (execute, with its log,
report and record), the source and its patches, flag validation, variants, stock wheels and the
pre-flight on an emulated board.
"""
