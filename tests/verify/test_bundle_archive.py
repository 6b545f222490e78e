"""The case bundle's archive is made once even when every board asks for it at the same time."""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from orchestrator.verify.execute import Bundle


def test_boards_asking_at_once_all_get_the_same_archive(tmp_path: Path) -> None:
    cases = tmp_path / "cases"
    cases.mkdir()
    # Enough bytes that the archives are still being written when the other boards start theirs.
    np.save(cases / "input.npy", np.random.default_rng(0).standard_normal(1 << 20))
    bundle = Bundle(directory=cases, digest="ab" * 32, names=("input",))
    start = threading.Barrier(4)
    results: list[Path] = []
    errors: list[BaseException] = []

    def board() -> None:
        start.wait()
        try:
            results.append(bundle.archive())
        except BaseException as error:  # noqa: BLE001 - collected for the assertion below
            errors.append(error)

    threads = [threading.Thread(target=board) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors, errors
    assert len(set(results)) == 1 and results[0].stat().st_size > 0
    assert not list(tmp_path.glob("*.partial")), "no partial file left behind"
