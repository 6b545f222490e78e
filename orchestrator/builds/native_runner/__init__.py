"""The native runner (board_side/native_runner.c): its build plan (plan) and its compilation for an artifact (execute)."""
