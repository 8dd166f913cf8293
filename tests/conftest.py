"""Settings every test shares."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _quiet_progress(monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process CLI runs print no progress lines however slow a loaded machine is.

    Off a terminal the CLI prints ``graphtune: <stage> (N s)`` lines once a
    command has run a few seconds; tests that count stderr lines must not depend
    on the machine's speed. ``tests/autotune/test_hostile.py`` tests those lines.
    """
    from autotune.commands import _common

    monkeypatch.setattr(_common, "PROGRESS_AFTER_S", float("inf"), raising=False)
