"""Measurer pools: where batches of candidates are measured while the driver proposes.

The driver submits batches (the schedules of one task, as JSON) and collects
finished ones as they arrive; it never waits for a particular batch. Two pools:

* :class:`InProcessPool` (``--workers 0``): measures each batch when it is
  submitted, in the driver's process; deterministic.
* :class:`autotune.running._ray_pool.RayPool`: one Ray actor per worker, each holding
  every task's graph (shipped once, in its constructor), results streamed
  back with ``ray.wait``.

A batch that cannot be measured (its worker died) comes back as
``worker_lost`` measurements, never as an exception; one whose worker raised (an
exception in the worker's own code, Ray's ``RayTaskError``) as ``worker_lost``
measurements with the message in ``Finished.error`` (the driver measures them again, and
records a second raise as ``sim_error``: :mod:`autotune.running._failures`). Every other
error Ray raises for a call is sorted by :func:`ray_failure`: a worker that ran out of
memory (Ray's memory monitor killed it) is a lost worker, a worker without the job's
graphs (:class:`WorkerNotLoaded`: restarted, not loaded again) is loaded again, a
cancelled call is sent again, any other Ray error loses the batch (``worker_lost``, with
its message) and has the worker pinged before it gets another; none ends the job (the
driver stops one whose calls keep failing).

Pools also breed: :meth:`MeasurePool.submit_breed` runs a breeding request of the
guided sampler (a round, or a worker's share of one: :func:`autotune.sampling._breed.breed`)
where the measurements run, and its
result comes back through the same :meth:`MeasurePool.wait` (``Finished.kind ==
"breed"``), so the driver keeps every worker busy with either.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autotune.measure._measurer import Measurer, measure_json, measurement_from_json
from autotune.sampling._breed import Breeder

if TYPE_CHECKING:
    import numpy as np

    from autotune.sampling._breed import Bred, BreedRequest, Scorer
    from compiler.graph import Graph
    from compiler.target import Target
    from sim import Measurement

__all__ = ["Finished", "InProcessPool", "MeasurePool", "WorkerNotLoaded", "failed", "lost",
           "raised", "ray_failure"]


class WorkerNotLoaded(RuntimeError):
    """A worker was asked for a task whose graph it does not hold (it restarted and was
    not loaded again): the pool loads it again; nothing is wrong with the candidates."""


@dataclass(frozen=True)
class Finished:
    """A finished job: a measured batch (its id, the host that measured it and one
    measurement per schedule) or a breeding round (``kind == "breed"``: ``bred`` is
    its result, None when its worker was lost).

    ``seconds``: the wall time the worker spent on the batch (0.0 when unknown), what
    the guided sampler weighs its breeding against (see ``GuidedOptions.breed_budget``).
    ``error``: the job raised in its worker (the worker lives): a batch's measurements are
    then ``worker_lost`` with this message (the driver decides which are errors), a
    breeding round's ``bred`` is None.
    """

    batch_id: int
    host: str
    measurements: tuple[Measurement, ...]
    kind: str = "measure"
    bred: Bred | None = None
    seconds: float = 0.0
    error: str = ""


def lost(count: int, why: str) -> tuple[Measurement, ...]:
    """``count`` ``worker_lost`` measurements saying ``why``."""
    from sim import Measurement

    return tuple(Measurement("worker_lost", None, None, 0.0, why, 0.0) for _ in range(count))


def failed(count: int, why: str) -> tuple[Measurement, ...]:
    """``count`` ``sim_error`` measurements saying ``why``: a batch whose worker raised
    (measured, and failed: unlike a lost one, not proposed again)."""
    from sim import Measurement

    return tuple(Measurement("sim_error", None, None, 0.0, why[:500], 0.0) for _ in range(count))


def raised(exc: BaseException) -> str:
    """``Type: last line`` of an exception a worker raised (a Ray task error's text is the
    remote traceback; its last line names the exception)."""
    cause = getattr(exc, "cause", None)
    name = type(cause).__name__ if isinstance(cause, BaseException) else type(exc).__name__
    source = cause if isinstance(cause, BaseException) else exc
    lines = [ln.strip() for ln in str(source).splitlines() if ln.strip()]
    return name + (f": {lines[-1]}" if lines else "")


def ray_failure(exc: BaseException) -> tuple[str, str]:
    """What a Ray error raised for a worker call means, and why, in one line:

    * ``"again"``: the call was cancelled (``TaskCancelledError``: by Ray or an operator,
      not by the job); nothing was measured and nothing is wrong: send it again.
    * ``"raised"``: the worker's own code raised (``RayTaskError``); the worker lives.
    * ``"reload"``: the worker lacks the job's graphs (:class:`WorkerNotLoaded`): load it.
    * ``"lost"``: the worker died (``RayActorError``, ``WorkerCrashedError``, ...), ran out of
      memory (``OutOfMemoryError``: Ray's memory monitor killed it; it restarts), or Ray
      failed the call another way (object store full, out of disk, a system error...):
      nothing was measured, the worker is pinged before it gets another job.
    """
    import ray.exceptions as rex

    name = type(exc).__name__
    if isinstance(exc, rex.TaskCancelledError):
        return "again", "the call was cancelled"
    if isinstance(exc, rex.OutOfMemoryError):  # (the text begins with _notes.OUT_OF_MEMORY)
        return "lost", "the worker ran out of memory (Ray's memory monitor killed it)"
    if isinstance(exc, (rex.RayActorError, rex.WorkerCrashedError, rex.ObjectLostError)):
        return "lost", f"worker died: {name}"
    if isinstance(exc, WorkerNotLoaded) or isinstance(getattr(exc, "cause", None),
                                                      WorkerNotLoaded):
        return "reload", f"the worker was not loaded ({raised(exc)}): it is loaded again"
    if isinstance(exc, rex.RayTaskError):
        return "raised", f"the worker raised {raised(exc)}"
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return "lost", f"Ray failed the call: {name}" + (f": {lines[0][:200]}" if lines else "")


class MeasurePool(abc.ABC):
    """Measures batches asynchronously.

    Attributes:
        workers: Parallel measurers (1 for the in-process pool).
        slots: Batches the driver keeps in flight so no worker idles.
        remote: Jobs run in other processes (what a breeding round is given must pickle).
    """

    workers: int = 1
    slots: int = 1
    remote: bool = False

    @abc.abstractmethod
    def submit(self, batch_id: int, task_key: str, schedules: Sequence[dict[str, Any]],
               cids: Sequence[str] | None = None,
               vectors: Sequence[tuple[int, np.ndarray] | None] | None = None) -> None:
        """Queue a batch of one task's schedules (JSON) for measurement.

        ``cids``: the schedules' candidate ids, when known: a pick bred where the batch
        is measured is then measured as the object its breeding built
        (:meth:`autotune.sampling._breed.Breeder.take`; the same measurement, less work).
        ``vectors``: per schedule, the batch of its space and its space vector (or None):
        a pick bred elsewhere is decoded again from it rather than parsed from its JSON
        (the same schedule, checked: less work than parsing, validating and planning).
        """

    @abc.abstractmethod
    def submit_breed(self, batch_id: int, task_key: str, request: BreedRequest,
                     scorer: Scorer) -> None:
        """Queue a breeding round of one task (it counts as a batch in flight)."""

    @abc.abstractmethod
    def wait(self, timeout_s: float | None = None) -> list[Finished]:
        """Finished batches: blocks until at least one is done (or ``timeout_s`` passes).

        Returns an empty list only when nothing is in flight or on timeout.
        """

    @property
    @abc.abstractmethod
    def in_flight(self) -> int:
        """Batches submitted and not yet returned by :meth:`wait`."""

    def close(self) -> None:  # noqa: B027 - an optional hook: most pools hold nothing
        """Release workers (the pool cannot be used afterwards)."""

    def __enter__(self) -> MeasurePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class InProcessPool(MeasurePool):
    """Measures in the driver's process, at submit time (``--workers 0``)."""

    def __init__(self, graphs: Mapping[str, Graph], target: Target, measurer: Measurer,
                 timeout_s: float | None = None) -> None:
        self._graphs = dict(graphs)
        self._target = target
        self._measurer = measurer
        self._timeout_s = timeout_s
        self._done: list[Finished] = []
        self._breeder = Breeder(self._graphs, target)
        self.workers = 1
        self.slots = 1

    def submit(self, batch_id: int, task_key: str, schedules: Sequence[dict[str, Any]],
               cids: Sequence[str] | None = None,
               vectors: Sequence[tuple[int, np.ndarray] | None] | None = None) -> None:
        t0 = time.perf_counter()
        held = self._breeder.take(task_key, cids, schedules, vectors)
        host, out = measure_json(self._measurer, self._graphs[task_key], schedules, self._target,
                                 self._timeout_s, held)
        self._done.append(Finished(batch_id, host, tuple(measurement_from_json(m) for m in out),
                                   seconds=time.perf_counter() - t0))

    def submit_breed(self, batch_id: int, task_key: str, request: BreedRequest,
                     scorer: Scorer) -> None:
        bred = self._breeder(task_key, request, scorer)
        self._done.append(Finished(batch_id, "", (), "breed", bred))

    def wait(self, timeout_s: float | None = None) -> list[Finished]:
        done, self._done = self._done, []
        return done

    @property
    def in_flight(self) -> int:
        return len(self._done)
