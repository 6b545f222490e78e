"""How long orch waits for a board that another orch holds (``--lock-timeout``'s default), apart
from the board lock itself (``orchestrator.deploy.board_lock``, which holds it through a session):
the bench's plan names this default and stays apart from the adapters."""

from __future__ import annotations

# Seconds: long enough for another orch's switch or prune to finish, short enough that a board held
# by a long bench is reported (with its holder) rather than waited for in silence.
DEFAULT_LOCK_TIMEOUT = 60.0
