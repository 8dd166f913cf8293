"""``GcClock``: the CPU a process spends in the cyclic garbage collector, counted.

A bench splits a tune's CPU per measurement by part (``bench/tune_workers.py``); the
collector runs inside whatever part allocated when a threshold was crossed, so it is
counted apart: a callback (:data:`gc.callbacks`) reads the thread's CPU clock when a
collection starts and adds what it used when it stops (a collection runs on the thread
that triggered it). The callback costs two clock reads a collection; under
:class:`compiler.memo.search_gc` there are a few collections a second at most.
"""

from __future__ import annotations

import gc
import time

__all__ = ["GcClock"]


class GcClock:
    """Collections and their CPU seconds in this process since :meth:`start`.

    Example:
        >>> clock = GcClock().start()
        >>> ...
        >>> clock.collections, clock.seconds
    """

    def __init__(self) -> None:
        self.collections = 0
        self.seconds = 0.0
        self._began = 0.0

    def start(self) -> GcClock:
        """Count from now on (once; a second call does nothing)."""
        if self._tick not in gc.callbacks:
            gc.callbacks.append(self._tick)
        return self

    def stop(self) -> None:
        """Stop counting (the figures so far are kept)."""
        if self._tick in gc.callbacks:
            gc.callbacks.remove(self._tick)

    def _tick(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._began = time.thread_time()
        else:
            self.collections += 1
            self.seconds += time.thread_time() - self._began
