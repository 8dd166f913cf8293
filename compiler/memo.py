"""Per-process memos beside frozen values, never inside them.

Frozen values (``Graph``, ``GraphSchedule``, ``Target``) carry no caches: a
``dataclasses.replace`` copy or an unpickled copy starts clean, and a pickle
holds only the value. What is worth remembering about a value (a footprint
analysis, derived transfers, "already validated") lives here, keyed by the
value's identity and dropped when the value is garbage collected.

Each memo is bounded: :func:`memo_of` returns a :class:`BoundedDict` that
forgets its oldest entries past ``limit`` items, so a long tuning job that
evaluates millions of op sets on one graph keeps a constant footprint.

Example:
    >>> m = memo_of(graph)
    >>> hit = m.get(("footprint", ops))
    >>> if hit is None:
    ...     hit = m[("footprint", ops)] = compute(graph, ops)
"""

from __future__ import annotations

import gc
import weakref
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["BoundedDict", "keep_memo_inside", "memo_of", "memo_size", "peek_memo", "search_gc"]

DEFAULT_LIMIT = 100_000


class BoundedDict(dict[Any, Any]):
    """A dict that forgets its oldest entries past ``limit`` items (FIFO: reads stay cheap)."""

    __slots__ = ("limit",)  # no instance dict: one object per memo (issue 20)

    def __init__(self, limit: int = DEFAULT_LIMIT) -> None:
        super().__init__()
        self.limit = limit

    def __setitem__(self, key: Any, value: Any) -> None:
        super().__setitem__(key, value)
        if len(self) > self.limit:
            del self[next(iter(self))]

    def setdefault(self, key: Any, default: Any = None) -> Any:
        if key in self:
            return self[key]
        self[key] = default
        return default


_memos: dict[int, BoundedDict] = {}
_INSIDE: set[type] = set()  # classes whose instances keep their memo (keep_memo_inside)


def keep_memo_inside(cls: type[T]) -> type[T]:
    """Class decorator: its instances keep their memo in their own ``__dict__`` (``_memo``,
    which the class sets to None at creation; see :func:`memo_of`). Exactly this class, not
    its subclasses (a set look-up per :func:`memo_of`: a getattr that misses costs ~0.2 us,
    and the Python decoder asks ~370 memos per ResNet-50 candidate)."""
    _INSIDE.add(cls)
    return cls


def memo_of(value: object, limit: int = DEFAULT_LIMIT) -> BoundedDict:
    """The memo of ``value`` (created on first use, dropped with the value).

    A value whose class is marked :func:`keep_memo_inside` (``compiler.codes.LazySchedule``: every decoded
    candidate has a memo) keeps its memo in its own ``__dict__`` (``_memo``), dropped with it
    by reference counting: no table entry, ``weakref.finalize`` nor its weak reference,
    record and arguments per value for the garbage collector to walk (issue 20). Its
    copies (``copy``, pickle, ``dataclasses.replace``) start without one, as others'."""
    if type(value) in _INSIDE:
        # (read as an attribute: reading ``__dict__`` would make the instance's dict)
        found: BoundedDict | None = getattr(value, "_memo", None)
        if found is None:
            found = BoundedDict(limit)
            object.__setattr__(value, "_memo", found)
        return found
    key = id(value)
    m = _memos.get(key)
    if m is None:
        m = _memos[key] = BoundedDict(limit)
        weakref.finalize(value, _memos.pop, key, None)
    return m


def peek_memo(value: object) -> BoundedDict | None:
    """The memo of ``value`` if it has one (never creates one)."""
    if type(value) in _INSIDE:
        return getattr(value, "_memo", None)  # type: ignore[no-any-return]
    return _memos.get(id(value))


SEARCH_GC_THRESHOLD = 50_000  # young-generation allocations between collections


class search_gc:  # noqa: N801 - used like a function: ``with search_gc(): ...``
    """Collect garbage less often while a search runs (a tuner's driver or worker).

    A search holds large long-lived memos (footprints, costs, capacity facts) and
    allocates many short-lived tuples per candidate. With CPython's default
    thresholds ``(700, 10, 10)`` the collector walks the memos again and again:
    15 ms of a 73 ms BERT-large s128 decode, 20% (measured, ``bench/space.py``).
    On entry this freezes what is alive (the graph, the memos so far:
    ``gc.freeze``, not scanned again) and collects the young generation every
    50,000 allocations; after each collection it freezes what survived, so the memos
    grown since are not scanned again either (without that, BERT-large s128 b8 spent
    a 190 ms generation-1 collection every ~140 candidates scanning ~600,000 memo
    objects, and 1.4 ms per candidate: every collection of such a search collected
    nothing). On exit it restores the thresholds and unfreezes (what was frozen is
    collectable again). Cyclic garbage lives a little longer (a cycle still alive at
    a collection is frozen with the rest until ``search_gc`` exits, which in a measuring
    worker is never: measured 0 cyclic objects per 100 decodes and per 40 simulations
    on a two-layer BERT); nothing else changes.

    Process-wide while entered: for the code that runs a search
    (``autotune.tune``, a measuring worker for its lifetime, the benches).

    Example:
        >>> with search_gc():
        ...     driver.run()
    """

    def __enter__(self) -> search_gc:
        self._saved = gc.get_threshold()
        gc.collect()
        gc.freeze()
        _, g1, g2 = self._saved
        gc.set_threshold(SEARCH_GC_THRESHOLD, max(g1, 20), max(g2, 100))
        gc.callbacks.append(_freeze_survivors)
        return self

    def __exit__(self, *exc: object) -> None:
        if _freeze_survivors in gc.callbacks:
            gc.callbacks.remove(_freeze_survivors)
        gc.unfreeze()
        gc.set_threshold(*self._saved)


def _freeze_survivors(phase: str, info: dict[str, int]) -> None:
    """After a collection while a search runs: freeze what survived (see :class:`search_gc`)."""
    if phase == "stop":
        gc.freeze()


def memo_size() -> int:
    """How many values have a memo in this process's table (for tests and benchmarks; a
    value that keeps its memo inside, :func:`keep_memo_inside`, is not counted)."""
    return len(_memos)
