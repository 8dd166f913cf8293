"""Several measurement slots in one worker process: the process's CPU lock and ``waiting()``.

A worker count is a promise of that many measurements at once (64 workers: 64 boards).
A measurer that only waits while it measures (a board runner waiting on its device, the
:class:`autotune.DelayedMeasurer`'s sleep) does not need a process per measurement: it
may say, with :attr:`autotune.Measurer.slots_per_process`, that up to that many of its
measurements may run as threads of one Ray actor (issue 20: 64 idle actor processes cost
Ray's task loop ~3.5 ms of CPU per second each, a 2-core host's whole margin).

The threads of such a process take turns for everything that uses the CPU (parsing or
decoding a schedule, the simulation, the bookkeeping): each measure call runs holding
the process's lock (:func:`working`), so no two threads are ever inside the decoder, the
simulator or their memos at once, and a measurer releases it only while it waits
(:func:`waiting`). Everything stays correct with a measurer that never calls
:func:`waiting`: its slots then simply measure one after another.

Outside a multi-slot worker (``--workers 0``, a one-slot actor, a test) no lock is held
and :func:`waiting` does nothing.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["FairLock", "waiting", "working"]


class FairLock:
    """A lock handed over in the order it was asked for (first come, first served).

    ``threading.Lock`` lets the thread that releases it take it again before a waiter
    wakes: a slot leaving :func:`waiting` could then wait behind many turns of another.
    Not re-entrant.
    """

    def __init__(self) -> None:
        self._cv = threading.Condition(threading.Lock())
        self._queue: collections.deque[int] = collections.deque()
        self._owner: int | None = None

    def acquire(self) -> None:
        me = threading.get_ident()
        with self._cv:
            self._queue.append(me)
            while self._owner is not None or self._queue[0] != me:
                self._cv.wait()
            self._queue.popleft()
            self._owner = me

    def release(self) -> None:
        with self._cv:
            if self._owner != threading.get_ident():
                raise RuntimeError("FairLock released by a thread that does not hold it")
            self._owner = None
            self._cv.notify_all()

    def held(self) -> bool:
        """Whether the calling thread holds it."""
        return self._owner == threading.get_ident()

    @property
    def queued(self) -> int:
        """Threads waiting for it."""
        return len(self._queue)


_LOCK: FairLock | None = None  # set in a multi-slot worker process (enable())


def enable() -> FairLock:
    """Make this process a multi-slot worker: :func:`working` takes the process's lock."""
    global _LOCK
    if _LOCK is None:
        _LOCK = FairLock()
    return _LOCK


@contextmanager
def working() -> Iterator[None]:
    """Hold the process's CPU lock for the block (nothing outside a multi-slot worker)."""
    lock = _LOCK
    if lock is None:
        yield
        return
    lock.acquire()
    try:
        yield
    finally:
        lock.release()


@contextmanager
def waiting() -> Iterator[None]:
    """Let the process's other measurement slots work while this one waits.

    Wrap a measurer's wait (on its device, a sleep) in it: the block must not use the
    decoder, the simulator or any state the process shares (the other slots run them
    meanwhile). Outside a multi-slot worker, or in a thread not holding the lock, it
    does nothing.
    """
    lock = _LOCK
    if lock is None or not lock.held():
        yield
        return
    lock.release()
    try:
        yield
    finally:
        lock.acquire()
