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


def _has_linker() -> bool:
    from tvm.support.cc import get_cc

    return get_cc() is not None


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):  # noqa: ANN201
    """On a machine without a C compiler, a test that failed only because an artifact
    could not be linked is reported as skipped, with that reason.

    The search space's compiled core is optional (the suite runs on the Python decoder
    without it), but TVM links every ``.stcobj``'s ``lib.so`` with the system compiler,
    so building an artifact needs one (``compiler._build.check_linker``; its one-line
    error names it). Only that error is turned into a skip, and only when no compiler
    is there: with one, as in ``make test`` and CI, nothing changes.
    """
    outcome = yield
    report = outcome.get_result()
    if report.failed and call.excinfo is not None:
        from compiler._build import NO_LINKER

        if NO_LINKER in str(report.longrepr) and not _has_linker():
            report.outcome = "skipped"
            report.longrepr = (str(item.path), item.location[1] or 0,
                               f"Skipped: {NO_LINKER} on this machine")
