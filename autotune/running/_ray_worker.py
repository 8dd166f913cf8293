"""``_Worker``: the body of a Ray measurer actor (moved out of :mod:`._ray_pool`, which
re-exports it): measures batches, and breeds rounds, of the graphs it was loaded with.

An actor runs one worker's measurements (``slots == 1``: its calls one after another, on
Ray's one task thread, as before) or several (``slots > 1``, a measurer whose
:attr:`autotune.Measurer.slots_per_process` allows it: a threaded Ray actor). With several
slots, at most ``slots`` measure calls run at once (the rest, queued by the pool behind
them, wait their turn in arrival order), and each holds the process's CPU lock except
where its measurer waits (:mod:`autotune.measure._slots`): the decoder, the simulator and
their memos are only ever used by one thread at a time.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from autotune.measure._measurer import Measurer, SimMeasurer, measure_json
from autotune.measure._slots import enable, working
from autotune.running._gc_clock import GcClock
from autotune.running._pool import WorkerNotLoaded
from autotune.running._texts import as_dicts, picks_as_text
from autotune.sampling._breed import Bred, Breeder, BreedRequest, Scorer
from compiler.memo import search_gc

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.target import Target

__all__ = ["WARM_TIMEOUT_S"]

log = logging.getLogger("autotune.ray")

WARM_TIMEOUT_S = 10.0
"""Seconds the warm-up's one simulation may take (a slow sample must not hold the pool's
start up to its own timeout; review)."""


LOAD_WAIT_S = 600.0
"""Seconds a threaded actor's measure call waits for the process's load() (its warm-up
included) before it runs anyway (and fails as an unloaded worker's call would)."""


class _Worker:
    """The actor body: measures batches, and breeds rounds, of the graphs it was built with.

    ``slots``: measurements it runs at once (threads; see the module doc).
    """

    def __init__(self, target: Target, measurer: Measurer, slots: int = 1) -> None:
        # The graphs come by load(), not as constructor arguments: Ray keeps large
        # constructor arguments in the object store for restarts and prints an error
        # line for every such actor (core_worker.cc "has constructor arguments in the
        # object store"); the pool calls load() on every start and restart instead.
        from compiler.ops import load_from_environment

        load_from_environment()  # the driver's --plugin ops (GRAPHTUNE_PLUGINS), before any pricing
        self._graphs: Mapping[str, Graph] = {}
        # Set once load() has run: a threaded actor (slots > 1) may start a measure call
        # sent after load() before load() takes the lock (Ray orders a threaded actor's
        # calls by nothing); it waits here (review).
        self._loaded = threading.Event()
        self._target = target
        self._measurer = measurer
        self._breeder: Breeder | None = None
        # Several slots: at most `slots` measure calls at once, each holding the process's
        # CPU lock but while its measurer waits.
        self._turns = threading.Semaphore(slots) if slots > 1 else None
        if self._turns is not None:
            enable()
        # What breeding imports, now, while the pool starts (not in the first round; XGBoost
        # with the first trained model: 16-60 ms of the worker's CPU in the run otherwise).
        import xgboost  # noqa: F401

        import cost_model  # noqa: F401
        import search_space  # noqa: F401

        search_gc().__enter__()  # the process measures and breeds until it ends (see its doc)
        self._gc = GcClock().start()  # the collector's share of the process's CPU (cpu())
        # CPU seconds of the threads Ray runs the actor's calls on, in each kind of call:
        # what a bench splits a measurement's CPU by (:meth:`cpu`); "text": the picks' log
        # text made after breeding and a batch's texts and vectors read back before
        # measuring (outside the other two).
        self._spent = {"measure": 0.0, "breed": 0.0, "text": 0.0}
        self._bases: dict[str, frozenset[str]] = {}  # the last seen sets sent ahead, by ref
        self._scorers: dict[str, Scorer] = {}  # the last cost models sent, by ref

    def load(self, graphs: Mapping[str, Graph]) -> int:
        """Take the job's graphs (once per process) and warm up on them; returns the pid,
        as :meth:`pid`.

        Warming up decodes, pre-checks and (with the simulator as the measurer) measures a
        few samples of each graph's space, while the pool starts: a cold process's first
        batch cost ~20 ms of CPU a measurement against ~2 warm (64 workers of 24
        measurements each: a third of the measuring CPU, issue 20). A measurer that is
        not the simulator is not called.
        """
        try:
            with working():
                if self._breeder is None:
                    self._warm(graphs)
        finally:
            self._loaded.set()
        return os.getpid()

    def _warm(self, graphs: Mapping[str, Graph]) -> None:
        self._graphs = graphs
        self._breeder = Breeder(graphs, self._target)
        sim = self._measurer if isinstance(self._measurer, SimMeasurer) else None
        for key, graph in graphs.items():
            measure = None
            if sim is not None:
                def measure(s: Any, graph: Graph = graph) -> object:
                    return SimMeasurer.measure(sim, graph, [s], self._target, WARM_TIMEOUT_S)
            try:
                self._breeder.warm(key, graph.batch, measure)
            except Exception:  # noqa: BLE001 - only a warm-up: the calls report errors
                log.debug("warming up on %s failed", key, exc_info=True)

    def pid(self) -> int:
        return os.getpid()

    def cpu(self) -> dict[str, float]:
        """CPU seconds so far: in ``measure`` and ``breed`` calls (their threads'), in the
        picks' texts (``text``: made after breeding, read back before measuring), the
        whole process's (Ray's own threads and the calls' unpickling included), and the
        garbage collector's (``gc``, inside the others; ``gc_runs``: its collections)."""
        b = self._breeder
        return {**self._spent, "process": time.process_time(),
                "gc": self._gc.seconds, "gc_runs": float(self._gc.collections),
                "held": float(b.taken) if b is not None else 0.0,
                "rebuilt": float(b.rebuilt) if b is not None else 0.0}

    def measure(self, task_key: str, schedules: Sequence[dict[str, Any] | None],
                timeout_s: float | None, cids: Sequence[str] | None = None,
                vectors: Sequence[tuple[int, np.ndarray] | None] | None = None
                ) -> tuple[str, list[dict[str, Any]] | None, float]:
        """Measure a batch: ``(host, measurements as JSON, wall seconds)``.

        A schedule given as None is a pick this process bred, sent as its id alone
        (:func:`autotune.running._ray_pool.slim`): measured as the schedule held
        (``Breeder.take``); if one is not held (the process restarted, or dropped it),
        nothing is measured and the answer is ``(host, None, 0.0)``: the pool sends the
        batch again with every JSON (the batch's other held picks were taken: they are
        then decoded from their vectors or parsed, the same measurement).
        """
        turn: AbstractContextManager[Any] = self._turns or nullcontext()
        if self._turns is not None:
            self._loaded.wait(LOAD_WAIT_S)
        with turn, working():
            t0, c0 = time.perf_counter(), time.thread_time()  # the wall seconds come back too
            held = (self._breeder.take(task_key, cids, schedules, vectors)  # type: ignore[arg-type]
                    if self._breeder
                    else None)
            graph = self._graphs.get(task_key)
            if graph is None:  # restarted, and not loaded again (the pool loads it)
                raise WorkerNotLoaded(f"the worker holds no graph {task_key!r}")
            if None in schedules and (held is None or any(
                    obj is None and s is None for obj, s in zip(schedules, held))):
                return socket.gethostname(), None, 0.0  # a pick sent by id is not here
            host, out = measure_json(self._measurer, graph, schedules,  # type: ignore[arg-type]
                                     self._target, timeout_s, held)
            self._spent["measure"] += time.thread_time() - c0
            return host, out, time.perf_counter() - t0  # (what breeding is weighed by)

    def measure_packed(self, packed: tuple[Any, ...]
                       ) -> tuple[str, list[dict[str, Any]] | None, float]:
        """:meth:`measure` with its arguments in one tuple, the vectors as bytes
        (:func:`pack_vectors`: what :class:`autotune.running._ray_pool.RayPool` sends):
        Ray serialises each argument of a call apart, and numpy arrays out of band, which
        cost the actor ~0.5 ms and the driver ~0.2 ms of CPU more a batch of 4 (issue 20).
        Plain values only: nothing here unpickles (Ray's own serialisation does). A
        schedule sent as its text (a pick bred by another worker:
        :func:`autotune.running._texts.picks_as_text`) is measured as its object."""
        task_key, schedules, timeout_s, cids, vectors = packed
        c0 = time.thread_time()
        dicts, unpacked = as_dicts(schedules), unpack_vectors(vectors)
        self._spent["text"] += time.thread_time() - c0
        return self.measure(task_key, dicts, timeout_s, cids, unpacked)

    def breed(self, task_key: str, request: BreedRequest, scorer: Scorer | tuple[Any]) -> Bred:
        """Breed a round; ``scorer`` as itself, or ``(ref,)``: a reference to it in the
        object store, unpickled once per process (:meth:`_scorer`). Its picks' JSON goes
        back as their log text (:func:`autotune.running._texts.picks_as_text`)."""
        if self._breeder is None or task_key not in self._graphs:
            raise WorkerNotLoaded(f"the worker holds no graph {task_key!r}")
        with working():
            c0 = time.thread_time()
            try:
                if isinstance(scorer, tuple):
                    scorer = self._scorer(scorer[0])
                base = request.seen_base
                if not isinstance(base, frozenset):  # a reference: the pool sent the set ahead
                    import ray

                    got = self._bases.get(base.hex())
                    if got is None:
                        got = ray.get(base)
                        self._bases = {**dict(list(self._bases.items())[-1:]), base.hex(): got}
                    request = replace(request, seen_base=got)
                bred = self._breeder(task_key, request, scorer)
            finally:
                self._spent["breed"] += time.thread_time() - c0
            # not in the breeding's CPU (as the pickling of their JSON it replaces)
            c0 = time.thread_time()
            try:
                return picks_as_text(bred)
            finally:
                self._spent["text"] += time.thread_time() - c0


    def _scorer(self, ref: Any) -> Scorer:
        """The cost model behind ``ref``, kept for the next rounds: Ray unpickles an
        argument on every call, and a trained model cost 6-12 ms of the worker's CPU to
        unpickle (gpt1, 55-130 KB), ~0.4 ms a measurement at 16 rounds in 300 (issue 20).
        Scorers are values (a model's trees, no state), so one copy serves every round."""
        key = ref.hex()
        got = self._scorers.get(key)
        if got is None:
            import ray

            got = ray.get(ref)
            self._scorers = {**dict(list(self._scorers.items())[-1:]), key: got}
        return got


Packed = tuple[int, bytes, str, tuple[int, ...]]
"""A space vector as plain values: ``(batch, its bytes, its dtype, its shape)``."""


def pack_vectors(vectors: Any) -> list[Packed | None] | None:
    """Picks' ``(batch, vector)`` as plain values (Ray sends them in band; see
    :meth:`_Worker.measure_packed`)."""
    if not vectors:
        return None
    return [None if v is None else (int(v[0]), v[1].tobytes(), v[1].dtype.str, tuple(v[1].shape))
            for v in vectors]


def unpack_vectors(packed: list[Packed | None] | None) -> list[tuple[int, np.ndarray] | None] | None:
    """:func:`pack_vectors`' values back as ``(batch, vector)`` (writable copies)."""
    if packed is None:
        return None
    return [None if v is None else (v[0], np.frombuffer(v[1], dtype=v[2]).reshape(v[3]).copy())
            for v in packed]
