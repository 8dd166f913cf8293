"""The search's garbage-collector setting is scoped: entered, it freezes and collects less
often; left, the process is as before."""

from __future__ import annotations

import gc

from compiler.memo import SEARCH_GC_THRESHOLD, search_gc


def test_search_gc_freezes_and_raises_the_threshold_then_restores_both() -> None:
    before = gc.get_threshold()
    frozen = gc.get_freeze_count()
    kept = [object() for _ in range(10)]  # something alive to freeze
    with search_gc():
        assert gc.get_threshold()[0] == SEARCH_GC_THRESHOLD
        assert gc.get_freeze_count() > frozen
        assert gc.isenabled()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() == 0  # unfreeze releases everything frozen
    assert kept


def test_search_gc_freezes_what_survives_a_collection_and_stops_on_exit() -> None:
    with search_gc():
        frozen = gc.get_freeze_count()
        grown = [[k] for k in range(1000)]  # memos grown during the search
        gc.collect(0)
        assert gc.get_freeze_count() >= frozen + len(grown)
    callbacks = list(gc.callbacks)
    gc.collect(0)
    assert gc.get_freeze_count() == 0  # no longer freezing after collections
    assert gc.callbacks == callbacks
