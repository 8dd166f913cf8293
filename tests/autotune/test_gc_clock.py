"""``GcClock``: the collector's collections and CPU in a process, as the benches split them."""

from __future__ import annotations

import gc
import time

from autotune.running._gc_clock import GcClock


def _burn_in_collection() -> None:
    """One collection that takes measurable CPU: many container objects to traverse (the
    automatic collections held off while they are made)."""
    was = gc.isenabled()
    gc.disable()
    try:
        keep = [[i] for i in range(200_000)]
        gc.collect()
        del keep
    finally:
        if was:
            gc.enable()


def test_counts_collections_and_their_cpu_and_stops() -> None:
    clock = GcClock()
    gc.collect()
    assert clock.collections == 0  # not started: nothing counted
    clock.start()
    clock.start()  # a second start does not count twice
    try:
        c0 = time.thread_time()
        _burn_in_collection()
        spent = time.thread_time() - c0
        assert clock.collections == 1
        assert 0.0 < clock.seconds <= spent
    finally:
        clock.stop()
    seen = (clock.collections, clock.seconds)
    gc.collect()
    assert (clock.collections, clock.seconds) == seen
    assert clock._tick not in gc.callbacks


def test_a_worker_reports_its_collectors_cpu(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    import contextlib

    from autotune import SimMeasurer
    from autotune.running import _ray_worker
    from compiler.target import Target

    monkeypatch.setattr(_ray_worker, "search_gc", contextlib.nullcontext)
    worker = _ray_worker._Worker(Target.default(), SimMeasurer())
    try:
        before = worker.cpu()
        _burn_in_collection()
        after = worker.cpu()
        assert after["gc_runs"] == before["gc_runs"] + 1
        assert after["gc"] > before["gc"]
    finally:
        worker._gc.stop()
