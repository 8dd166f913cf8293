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


def test_a_lazy_schedule_keeps_its_memo_inside_and_its_copies_start_clean() -> None:
    """A decoded schedule (``LazySchedule``, ``keep_memo_inside``) holds its memo itself: no entry in
    the process's table, no finalizer (issue 20: fewer objects per kept candidate); the memo
    goes with the schedule; a copy, a pickle and a ``replace`` start without one."""
    import copy
    import dataclasses
    import pickle
    import weakref

    from compiler.codes import LazySchedule
    from compiler.memo import BoundedDict, memo_of, memo_size, peek_memo
    from compiler.schedule import GraphSchedule

    class _Src:
        def objects(self) -> tuple[tuple[()], tuple[()], tuple[()]]:
            return (), (), ()

    s = LazySchedule.deferred(1, None, "test", _Src())  # type: ignore[arg-type]
    assert peek_memo(s) is None
    n = memo_size()
    m = memo_of(s, limit=2)
    assert isinstance(m, BoundedDict) and memo_of(s) is m and peek_memo(s) is m
    assert memo_size() == n  # not in the table
    assert not hasattr(m, "__dict__")  # BoundedDict has slots
    m["a"] = 1
    m["b"], m["c"] = 2, 3
    assert list(m) == ["b", "c"]  # still bounded
    for c in (copy.copy(s), pickle.loads(pickle.dumps(s)), dataclasses.replace(s)):
        assert peek_memo(c) is None and c == s
    plain = GraphSchedule(1, (), (), (), None, "test")
    memo_of(plain)[0] = 0
    assert memo_size() == n + 1 and peek_memo(plain) == {0: 0}  # others: in the table
    class _Value:
        pass

    v = _Value()
    m["v"] = v
    gone = weakref.ref(v)
    del s, m, v
    assert gone() is None  # the memo dropped with the schedule, by reference counting
