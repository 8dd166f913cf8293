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

import weakref
from typing import Any

__all__ = ["BoundedDict", "memo_of", "memo_size"]

DEFAULT_LIMIT = 100_000


class BoundedDict(dict[Any, Any]):
    """A dict that forgets its oldest entries past ``limit`` items (FIFO: reads stay cheap)."""

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


def memo_of(value: object, limit: int = DEFAULT_LIMIT) -> BoundedDict:
    """The memo of ``value`` (created on first use, dropped with the value)."""
    key = id(value)
    m = _memos.get(key)
    if m is None:
        m = _memos[key] = BoundedDict(limit)
        weakref.finalize(value, _memos.pop, key, None)
    return m


def memo_size() -> int:
    """How many values have a memo in this process (for tests and benchmarks)."""
    return len(_memos)
