"""One module per ``orch`` sub-command.

Each module defines ``NAME``, ``HELP``, ``add_arguments(parser)`` and ``run(args) -> int``.
``cli`` discovers them from ``COMMANDS`` below; shared options live in ``options``.
"""

COMMANDS = (
    "build",
    "sysroot",
    "deploy",
    "bench",
    "tune",
    "verify",
    "results",
    "report",
    "lab",
    "inventory",
    "exec",
    "doctor",
    "demo",
)
