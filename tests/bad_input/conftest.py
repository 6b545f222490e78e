"""Fixtures of the bad-input tests: the real Docker engine for the few cases that need one."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from orchestrator.adapters.engine import Engine


@pytest.fixture(scope="session")
def engine() -> Iterator[object]:
    """The local Docker engine (its name marks a test `integration`, see tests/conftest.py)."""
    engine = Engine()
    engine.ping()
    yield engine
    engine.close()
