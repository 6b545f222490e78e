"""The on-board route: ORT built by the board itself over SSH (``orch build --on-board``)."""
