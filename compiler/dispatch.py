"""Compile-time dispatch: how a compile finds a tuned schedule.

The compiler never imports the tuner. Instead, ``Model.compile(schedule=None)``
asks the active dispatch contexts (innermost first) for a schedule of the
model's workload on the compile target; :class:`autotune.ApplyHistoryBest` is
such a context, filled from tuning logs. This mirrors TVM's
``DispatchContext`` / ``ApplyHistoryBest`` pair.

Example:
    >>> class Fixed(DispatchContext):
    ...     def query(self, workload_key, target_key):
    ...         return my_schedule_json
    >>> with Fixed():
    ...     model.compile("out.stcobj")     # uses my_schedule_json
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import Any

_local = threading.local()


def _stack() -> list[DispatchContext]:
    stack: list[DispatchContext] | None = getattr(_local, "stack", None)
    if stack is None:
        stack = []
        _local.stack = stack
    return stack


class DispatchContext:
    """Base class of compile-time schedule lookups; use as a context manager.

    Contexts stack: the innermost one is asked first, a miss falls through to
    the next, and only when every context misses does the compile fall back to
    the automatic level, after telling each context through :meth:`on_fallback`.
    """

    def query(self, workload_key: str, target_key: str) -> dict[str, Any] | None:
        """Return the schedule JSON (``GraphSchedule.to_json()``) for a workload, or None."""
        raise NotImplementedError

    def on_fallback(self, workload_key: str, target_key: str, fallback: str) -> None:
        """Called when no context had the workload; ``fallback`` says what is used instead.

        The default does nothing; implementations warn or raise (strict mode).
        """

    def __enter__(self) -> DispatchContext:
        _stack().append(self)
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stack = _stack()
        if stack and stack[-1] is self:
            stack.pop()
        elif self in stack:  # exited out of order: still remove it
            stack.remove(self)


def active_contexts() -> list[DispatchContext]:
    """The active contexts, innermost first."""
    return list(reversed(_stack()))


def resolve(workload_key: str, target_key: str, fallback: str) -> dict[str, Any] | None:
    """Ask the active contexts for a schedule; on a total miss notify them and return None."""
    contexts = active_contexts()
    for ctx in contexts:
        found = ctx.query(workload_key, target_key)
        if found is not None:
            return found
    for ctx in contexts:
        ctx.on_fallback(workload_key, target_key, fallback)
    return None
