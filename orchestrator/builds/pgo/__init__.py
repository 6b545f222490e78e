"""Profile-guided builds: the loop (``loop``: instrumented build, training, optimised build), the
training on the boards over SSH (``boards``, ``training``), the counters added up in a container
(``merge``), profiles stored under ``$ORCH_HOME/profiles`` (``stored``), and the pure parts: GCC's
flags, the key a profile is valid for and what counter files say (``profile``), clang's flavour of
the loop (``clang``) and which of the two a build runs (``flavour``).
"""
