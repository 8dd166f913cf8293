"""``RayPool``: measurement on Ray actors, one per worker, graphs shipped once.

By default a private Ray instance starts on loopback only (``127.0.0.1``, no
dashboard) with one CPU per worker; ``address`` joins an existing cluster
instead. Each actor receives every task's graph, the target and the measurer
in its constructor (one ``ray.put`` for the graphs), so a batch carries only
schedule JSON (with the picks' ids and vectors as bytes), in one argument
(``_Worker.measure_packed``: cheaper than Ray's serialisation of each argument); a
pick goes to the worker that bred it as its id alone (:func:`slim`).
Actors also breed the guided sampler's rounds (:meth:`RayPool.submit_breed`; the cost
model goes to the object store once per snapshot, unpickled once per actor). Actors restart when they
die; the batch they held comes back as ``worker_lost`` measurements (breeding they
held is asked for again) and the job goes on; no error Ray raises for a call ends the
job (see :func:`autotune.running._pool.ray_failure`).

Each actor reserves the measurer's ``num_cpus`` (fractions allowed: one that
waits on a board needs little) and its custom ``resources`` (``{"stcp920": 1}``),
so Ray places workers only on nodes that have them. Before anything is
measured the pool checks that the cluster can hold every worker and waits for
them to start; a cluster without room is one error line, never a hang.

**Several workers per process.** A measurer whose ``slots_per_process`` is ``S > 1``
(one that only waits while it measures: :mod:`autotune.measure._slots`) runs its ``W``
workers as ``ceil(W / S)`` threaded actors of up to ``S`` measurement slots each (each
reserving its slots' CPUs and resources), so 64 workers cost 8 processes' idle CPU
rather than 64 (Ray's task loop wakes every actor process every 10 ms). The driver still
sees ``W`` workers: batches go to a worker (a slot), two at a time, and a process that
dies loses only its slots' batches (``worker_lost``), as ``S`` one-slot workers would. Such
a pool breeds on :data:`BREEDERS` separate one-slot actors (reserving no CPU), never on
the measuring processes: a round is ~0.1 s of CPU, and a measurement slot whose wait ends
would queue behind it for the process's CPU lock.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from autotune.measure._measurer import Measurer, measurement_from_json
from autotune.running._driver import MAX_OUT
from autotune.running._pool import Finished, MeasurePool, lost, raised, ray_failure
from autotune.running._ray_start import LOOPBACK, _check_room, _describe, _describe_have, start_ray
from autotune.running._ray_start import _loopback_only as _loopback_only  # tests import it here
from autotune.running._ray_start import _room as _room  # tests import it here
from autotune.running._ray_worker import WARM_TIMEOUT_S as WARM_TIMEOUT_S
from autotune.running._ray_worker import _Worker as _Worker  # its old home
from autotune.running._ray_worker import pack_vectors
from autotune.sampling._breed import HELD_PICKS, BreedRequest, Scorer
from compiler.errors import GraphtuneError

if TYPE_CHECKING:
    import numpy as np

    from compiler.graph import Graph
    from compiler.target import Target

__all__ = ["LOOPBACK", "RayPool", "start_ray"]

log = logging.getLogger("autotune.ray")

# A batch whose worker neither answers nor dies within this many seconds (beyond its
# per-schedule timeouts) is declared lost and the worker restarted; a breeding round too.
_BATCH_GRACE_S = 120.0
_BREED_GRACE_S = 600.0
# A worker that died and is not back (restarted and answering) within this many seconds
# is replaced by a new actor.
_RESTART_GRACE_S = 120.0
_AGAIN_LIMIT = 3  # a batch whose call was cancelled is sent again at most this often
_PING_EVERY_S = 0.5  # a restarting worker that said "unavailable" is asked again this late
# Workers that have not started this long after the pool asked for them cannot be placed
# (the cluster is busy or lacks a resource): the job stops with a clear error.
START_TIMEOUT_S = 180.0
BREEDERS = MAX_OUT
"""Breeding actors of a pool whose processes hold several workers (the driver's breeding
requests out at once per task): each request starts at once, behind no batch."""


@dataclass
class _InFlight:
    batch_id: int
    size: int
    actor: int  # the process
    deadline: float
    kind: str = "measure"
    unit: int = 0  # the worker (a measuring slot) or breeder it was given to
    packed: tuple[Any, ...] | None = None  # a batch's call argument (sent again if cancelled)
    tries: int = 0  # times it was sent again


class RayPool(MeasurePool):
    """Measures on ``workers`` Ray actors (see the module doc).

    A worker that dies takes its running and queued batches with it (they come back
    as ``worker_lost``); Ray restarts it, and it gets no new batch until it answers
    a ping, so no candidate is sent to a worker known to be down. The job never waits
    for a restart while another worker is up: :attr:`in_flight` counts the pings only
    when every worker is down. A worker that dies for good, or whose restart takes
    longer than ``restart_grace_s``, is replaced by a new actor; a job whose workers
    keep dying stops with one line. A batch past its deadline is recorded as lost at
    once (its worker is restarted), whether or not Ray ever answers for it. With several
    workers to a process (the measurer's ``slots_per_process``) a worker is a slot: its
    process dying, or restarted for an overdue batch, takes its other slots' batches too.

    Args:
        graphs: Task key -> graph; shipped to each actor once.
        target: The chip.
        measurer: Pickled to each actor; its ``slots_per_process`` says how many workers
            one actor process may hold (see the module doc).
        workers: Number of workers (>= 1): measurements at once.
        address: A Ray cluster to join; None starts a local loopback instance.
        timeout_s: Per-schedule time limit inside the workers.
        restart_grace_s: How long a restarting worker may take before it is replaced.
        num_cpus: CPUs each worker reserves (default: the measurer's ``num_cpus``).
        resources: Custom Ray resources each worker needs (default: the measurer's).
        deadline: ``time.monotonic()`` of the job's time budget: the wait for the workers
            to start ends there (``started_late``; the job then sends nothing).

    Raises:
        GraphtuneError: the cluster cannot hold the workers, or they did not start
            within :data:`START_TIMEOUT_S`.
    """

    def __init__(self, graphs: Mapping[str, Graph], target: Target, measurer: Measurer,
                 workers: int, address: str | None = None,
                 timeout_s: float | None = None, num_cpus: float | None = None,
                 resources: Mapping[str, float] | None = None,
                 restart_grace_s: float = _RESTART_GRACE_S, deadline: float | None = None) -> None:
        import ray

        if workers < 1:
            raise GraphtuneError(f"a Ray pool needs at least one worker, got {workers}")
        self.workers = workers
        self._timeout_s = timeout_s
        self._restart_grace_s = restart_grace_s
        self._closed = False
        self.started_late = False
        self._deadline = deadline
        self._actors: list[Any] = []
        cpus = measurer.num_cpus if num_cpus is None else num_cpus
        need = dict(measurer.resources if resources is None else resources)
        # Workers per measuring process (the last one may hold fewer): worker k is a slot of
        # process k // per; the processes after them breed (several slots only).
        slots = getattr(measurer, "slots_per_process", 1)
        if not isinstance(slots, int) or isinstance(slots, bool) or slots < 1:
            raise GraphtuneError(f"measurer {measurer.name or type(measurer).__name__}: "
                                 f"slots_per_process must be an integer >= 1, got {slots!r}")
        per = self._per = min(slots, workers)
        sizes = [min(per, workers - i) for i in range(0, workers, per)]
        self._measuring = len(sizes)
        breeders = BREEDERS if per > 1 else 0
        self._stop_ray = start_ray(address, workers)
        try:
            _check_room(workers, cpus, need, per)
            # Small constructor arguments (Ray restarts a dead actor with them); the graphs
            # are held here and sent by load() to each started or restarted actor.
            self._make = [_actor_maker(target, measurer, n, cpus, need) for n in sizes]
            self._make += [_actor_maker(target, measurer, 1, 0.0, {})] * breeders
            self._graphs_ref = ray.put(dict(graphs))
            self._actors = [make() for make in self._make]
            self._wait_started(cpus, need)
        except BaseException:
            self.close()
            raise
        self.remote = True
        self._scorers: dict[int, tuple[Any, Any]] = {}  # id -> scorer sent, its object ref
        self._bases: dict[int, tuple[Any, Any]] = {}  # id -> seen set sent ahead, its ref
        self._replaced = 0
        # By unit: the workers 0..W-1, then the breeders (a unit is its process with one slot).
        self._breeders = list(range(workers, workers + breeders))
        self._load = [0] * (workers + breeders)
        self._breeds = [0] * (workers + breeders)  # breeding jobs held by each unit
        self._bred_on: set[int] = set()  # units that bred (since their process last started)
        self._bred_by: dict[str, int] = {}  # candidate id of a pick -> the worker that bred it
        self._cancelled = 0  # breeding calls cancelled in a row (asked again: bounded)
        self.resent = 0  # batches sent again whole: a pick sent without its JSON was not held
        self._refs: dict[Any, _InFlight] = {}
        # By process (an actor): with one slot each and no breeders, process k is worker k.
        self._pings: dict[Any, int] = {}  # ping of a restarting process -> its index
        self._down: dict[int, float] = {}  # process down -> when it went down (monotonic)
        self._reping: dict[int, float] = {}  # process still restarting -> when to ping again

    def _actor_of(self, unit: int) -> int:
        """The process of a worker (a slot of process ``unit // per``) or of a breeder."""
        if unit < self.workers:
            return unit // self._per
        return self._measuring + unit - self.workers

    def _up(self, units: Sequence[int]) -> list[int]:
        """Those of ``units`` whose process is up (all of them when none is)."""
        return [u for u in units if self._actor_of(u) not in self._down] or list(units)

    def _wait_started(self, cpus: float, need: Mapping[str, float]) -> None:
        """Block until every actor answers; one error line if one cannot be placed or start."""
        import ray

        refs = [a.load.remote(self._graphs_ref) for a in self._actors]
        wait = START_TIMEOUT_S
        if self._deadline is not None and self._deadline - time.monotonic() < wait:
            wait = max(self._deadline - time.monotonic(), 0.0)
            self.started_late = True  # unless every worker answers in time (below)
        ready, rest = ray.wait(refs, num_returns=len(refs), timeout=wait)
        for ref in ready:
            try:
                ray.get(ref)
            except Exception as exc:  # noqa: BLE001 - an actor's constructor can raise anything
                lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
                why = next((ln for ln in reversed(lines) if "Error" in ln), lines[-1] if lines
                           else type(exc).__name__)
                raise GraphtuneError(f"the measurer workers cannot start: {why}") from None
        self.started_late = bool(rest) and self.started_late
        if self.started_late:
            return  # the time budget ran out first: the job sends nothing, close() stops Ray
        if rest:
            raise GraphtuneError(
                f"{len(rest)} of {len(refs)} measurer workers did not start within "
                f"{START_TIMEOUT_S:g} s: each needs {_describe(cpus, need)} and the Ray cluster "
                f"has {_describe_have(need)} in all (busy, or not enough nodes with them)")

    @property
    def slots(self) -> int:  # type: ignore[override]
        """Two batches per worker that is up (one running, one queued behind it)."""
        down = sum(min(self._per, self.workers - a * self._per) for a in self._down
                   if a < self._measuring)
        return 2 * (self.workers - down)

    def worker_pids(self) -> list[int]:
        """Process ids of the actors (measuring processes, then breeders)."""
        import ray

        return list(ray.get([a.pid.remote() for a in self._actors]))

    def worker_cpu(self) -> list[dict[str, float]]:
        """Each actor's CPU seconds so far, by kind of call (see ``_Worker.cpu``); for benches."""
        import ray

        return list(ray.get([a.cpu.remote() for a in self._actors]))

    def _least_loaded(self) -> int:
        """The worker for a batch: one that is up, not breeding if any (a breeding job
        takes as long as dozens of batches), then the fewest jobs."""
        return min(self._up(range(self.workers)), key=lambda i: (self._breeds[i], self._load[i]))

    def submit(self, batch_id: int, task_key: str, schedules: Sequence[dict[str, Any]],
               cids: Sequence[str] | None = None,
               vectors: Sequence[tuple[int, np.ndarray] | None] | None = None) -> None:
        k = self._least_loaded()
        packed = (task_key, list(schedules), self._timeout_s, list(cids) if cids else None,
                  pack_vectors(vectors))
        owned: list[int] = []
        if cids:
            k, owned = self._holder(k, cids)
        self._send(batch_id, packed, k, sent=slim(packed, owned))

    def _send(self, batch_id: int, packed: tuple[Any, ...], k: int, tries: int = 0,
              sent: tuple[Any, ...] | None = None) -> None:
        """Send a batch to worker ``k``: ``sent`` if given (its picks bred there without their
        JSON: :func:`slim`), else ``packed``, which is kept for a call sent again."""
        a = self._actor_of(k)
        ref = self._actors[a].measure_packed.remote(packed if sent is None else sent)
        size = len(packed[1])
        deadline = time.monotonic() + _BATCH_GRACE_S + (self._timeout_s or 60.0) * size
        self._refs[ref] = _InFlight(batch_id, size, a, deadline, unit=k, packed=packed,
                                    tries=tries)
        self._load[k] += 1

    def _holder(self, k: int, cids: Sequence[str]) -> tuple[int, list[int]]:
        """Worker ``k`` (the least loaded), or one as little loaded that bred most of the
        batch (it measures its own picks as the objects it built: see ``Breeder.take``);
        and the positions of the picks the chosen worker bred (sent without their JSON).

        Only among equals (the same breeding jobs and batches): a worker is never kept
        waiting, or left with a shorter queue, so that another measures its picks.
        """
        votes: dict[int, int] = {}
        bred = [self._bred_by.pop(cid, None) for cid in cids]
        for w in bred:
            if w is not None:
                votes[w] = votes.get(w, 0) + 1
        if votes and k not in votes:
            h = max(votes, key=lambda w: votes[w])
            if (self._actor_of(h) not in self._down and self._breeds[h] == self._breeds[k]
                    and self._load[h] == self._load[k]):
                k = h
        return k, [i for i, w in enumerate(bred) if w == k]

    def submit_breed(self, batch_id: int, task_key: str, request: BreedRequest,
                     scorer: Scorer) -> None:
        import ray

        # The model travels once per retraining (one object in the store, its reference in a
        # tuple: a worker unpickles it once, not per call: _Worker._scorer), not per round;
        # the bulk of the seen set once per rebase (GuidedSampler._seen_parts).
        held = self._scorers.get(id(scorer))
        if held is None or held[0] is not scorer:
            if len(self._scorers) >= 16:  # older models: their tasks have newer ones
                del self._scorers[next(iter(self._scorers))]
            held = self._scorers[id(scorer)] = (scorer, ray.put(scorer))
        base = request.seen_base
        if base:
            sent = self._bases.get(id(base))
            if sent is None or sent[0] is not base:
                if len(self._bases) >= 16:
                    del self._bases[next(iter(self._bases))]
                sent = self._bases[id(base)] = (base, ray.put(base))
            request = replace(request, seen_base=sent[1])
        # Breeding goes to the worker with the fewest breeding jobs (then the fewest
        # jobs): by count of jobs alone, two could land on one worker behind short batches.
        # Among equals, one that bred before: its decoded parents and its memos of the
        # space are warm (at 64 workers a share went to 32 workers in 1,536 measurements,
        # a cold process's first share costing 1.5x a warm one's, issue 20). Several
        # workers per process: on a breeder (see the module doc).
        up = self._up(self._breeders or range(self.workers))
        k = min(up, key=lambda i: (self._breeds[i], self._load[i], i not in self._bred_on))
        self._bred_on.add(k)
        a = self._actor_of(k)
        ref = self._actors[a].breed.remote(task_key, request, (held[1],))
        self._refs[ref] = _InFlight(batch_id, 0, a, time.monotonic() + _BREED_GRACE_S, "breed",
                                    unit=k)
        self._load[k] += 1
        self._breeds[k] += 1

    def wait(self, timeout_s: float | None = None) -> list[Finished]:
        import ray

        self._ping_again()
        refs = [*self._refs, *self._pings]
        if not refs and not self._reping:
            return []
        if self._down:
            # Wake up in time to ping again, or to replace a worker whose restart is overdue.
            timeout_s = _PING_EVERY_S if timeout_s is None else min(timeout_s, _PING_EVERY_S)
        ready: list[Any] = []
        if refs:
            ready, rest = ray.wait(refs, num_returns=1, timeout=timeout_s)
            if ready and rest:
                more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
                ready += more
        else:
            time.sleep(timeout_s or 0.0)
        done = []
        for ref in ready:
            if ref in self._pings:
                self._pinged(ref)
            else:
                fin = self._collect(ref)
                if fin is not None:
                    done.append(fin)
        done += self._expire()
        self._replace_overdue()
        return done

    def _collect(self, ref: Any) -> Finished | None:
        import ray

        job = self._refs.pop(ref)
        self._load[job.unit] -= 1
        if job.kind == "breed":
            self._breeds[job.unit] -= 1
            try:
                bred = ray.get(ref)
                if job.unit < self.workers:  # who holds each pick (see _holder); bounded
                    for p in bred.picks:
                        self._bred_by[p.cid] = job.unit
                while len(self._bred_by) > HELD_PICKS * len(self._actors):
                    del self._bred_by[next(iter(self._bred_by))]
                self._cancelled = 0
                return Finished(job.batch_id, "", (), "breed", bred)
            except ray.exceptions.RayError as exc:
                kind, why = ray_failure(exc)
                if kind in ("lost", "reload"):
                    self._mark_down(job.actor)
                elif kind == "raised":  # the worker lives: the round failed
                    why = f"breeding raised {raised(exc)}"
                elif kind == "again":  # asked again, up to a few in a row: then it failed
                    self._cancelled += 1
                    if self._cancelled > _AGAIN_LIMIT:
                        why = f"{why} ({self._cancelled} breeding calls in a row)"
                        kind = "failed"
                if kind in ("again", "reload") or isinstance(exc, _LOST_ERRORS()):
                    log.warning("breeding round %d: %s; the round is bred again", job.batch_id, why)
                    return Finished(job.batch_id, "", (), "breed", None)
                # The worker raised, ran out of memory, or Ray failed the call: a dry round
                # (after a few in a row the driver breeds itself).
                log.warning("breeding round %d: %s", job.batch_id, why)
                return Finished(job.batch_id, "", (), "breed", None, error=why)
        try:
            host, out, seconds = ray.get(ref)
        except ray.exceptions.RayError as exc:
            return self._failed(job, exc)
        if out is None:  # it no longer held a pick sent without its JSON: sent again, whole
            self.resent += 1
            assert job.packed is not None  # (a measuring call's argument is kept)
            self._send(job.batch_id, job.packed, job.unit, job.tries)
            return None
        return Finished(job.batch_id, host, tuple(map(measurement_from_json, out)), seconds=seconds)

    def _failed(self, job: _InFlight, exc: BaseException) -> Finished | None:
        """A batch whose call raised (see ``ray_failure``): sent again (None), errors, or lost."""
        import ray
        kind, why = ray_failure(exc)
        if kind == "again" and job.packed is not None and job.tries < _AGAIN_LIMIT:
            log.warning("batch %d: %s; its %d candidate(s) are sent again", job.batch_id, why,
                        job.size)
            self._send(job.batch_id, job.packed, self._least_loaded(), job.tries + 1)
            return None
        if kind == "raised":
            # An exception in the worker's own code (not the measurer's: that one is a
            # measurement already): the worker lives; the driver measures the candidates
            # again (a second raise is their error: autotune.running._failures).
            log.warning("batch %d: %s", job.batch_id, why)
            return Finished(job.batch_id, "", lost(job.size, why), error=why)
        if kind in ("lost", "reload"):  # reload: its ping is a load()
            self._mark_down(job.actor)
        log.warning("batch %d: %s; its %d candidate(s) are recorded as worker_lost",
                    job.batch_id, why, job.size)
        # Out of memory: maybe a candidate's fault; as a raise, a second time is its error.
        oom = isinstance(exc, ray.exceptions.OutOfMemoryError)
        return Finished(job.batch_id, "", lost(job.size, why), error=why if oom else "")

    def _units_of(self, a: int) -> list[int]:
        """The workers (slots) or the breeder of process ``a``."""
        if a < self._measuring:
            return list(range(a * self._per, min((a + 1) * self._per, self.workers)))
        return [self.workers + a - self._measuring]

    def _mark_down(self, k: int) -> None:
        """Process ``k`` died (with all its slots): ping it until it is back."""
        if k not in self._down:
            self._down[k] = time.monotonic()
            self._bred_on.difference_update(self._units_of(k))  # a restarted process is cold
            self._pings[self._actors[k].load.remote(self._graphs_ref)] = k

    def _pinged(self, ref: Any) -> None:
        """A restarting worker answered (it is back) or failed (ping again, shortly)."""
        import ray

        k = self._pings.pop(ref)
        try:
            ray.get(ref)
        except ray.exceptions.ActorUnavailableError:
            self._reping[k] = time.monotonic() + _PING_EVERY_S  # still restarting
        except _LOST_ERRORS() as exc:
            # Dead for good (its restart failed): start a fresh worker in its place.
            self._replace(k, f"it could not restart ({type(exc).__name__})")
        except ray.exceptions.RayTaskError as exc:  # its load() raised: not a usable worker
            self._replace(k, f"it could not load the graphs ({raised(exc)})")
        except ray.exceptions.RayError:  # cancelled, out of memory...: ask again shortly
            self._reping[k] = time.monotonic() + _PING_EVERY_S
        else:
            self._down.pop(k, None)
            log.info("worker %d is back", k)

    def _ping_again(self) -> None:
        now = time.monotonic()
        for k, due in list(self._reping.items()):
            if due <= now:
                del self._reping[k]
                self._pings[self._actors[k].load.remote(self._graphs_ref)] = k

    def _replace(self, k: int, why: str) -> None:
        """Start a new actor in worker ``k``'s place (the old one is killed for good)."""
        import ray

        self._replaced += 1
        if self._replaced > 3 * len(self._actors):
            raise GraphtuneError(
                f"measurer workers keep dying (the last: {why}); the log keeps every "
                "measurement so far: fix the cause and re-run the same command to resume")
        log.warning("worker %d: %s; starting a new one", k, why)
        for ref in [r for r, i in self._pings.items() if i == k]:
            del self._pings[ref]
        self._reping.pop(k, None)
        try:
            ray.kill(self._actors[k], no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
        self._actors[k] = self._make[k]()
        self._bred_on.difference_update(self._units_of(k))
        self._down[k] = time.monotonic()
        self._pings[self._actors[k].load.remote(self._graphs_ref)] = k

    def _replace_overdue(self) -> None:
        now = time.monotonic()
        for k, since in list(self._down.items()):
            if now - since > self._restart_grace_s:
                self._replace(k, f"not back {now - since:.0f} s after it died")

    def _expire(self) -> list[Finished]:
        """Batches past their deadline: recorded as lost now; their workers restarted."""
        import ray

        now = time.monotonic()
        out = []
        for ref, job in list(self._refs.items()):
            if job.deadline >= now:
                continue
            del self._refs[ref]
            self._load[job.unit] -= 1
            why = "batch exceeded its time limit: its worker was restarted"
            if job.kind == "breed":
                self._breeds[job.unit] -= 1
                log.warning("breeding round %d exceeded its time limit: its worker was "
                            "restarted", job.batch_id)
                out.append(Finished(job.batch_id, "", (), "breed", None))
            else:
                log.warning("batch %d: %s; its %d candidate(s) are recorded as worker_lost",
                            job.batch_id, why, job.size)
                out.append(Finished(job.batch_id, "", lost(job.size, why)))
            if job.actor not in self._down:
                try:
                    ray.kill(self._actors[job.actor], no_restart=False)
                except Exception:  # noqa: BLE001 - already gone
                    pass
                self._mark_down(job.actor)
        return out

    @property
    def in_flight(self) -> int:
        """Batches being measured; plus the restarting processes when no worker is up.

        While one worker is up the job does not wait for the others to come back.
        """
        none_up = all(a in self._down for a in range(self._measuring))
        pings = len(self._pings) + len(self._reping) if none_up else 0
        return len(self._refs) + pings

    def close(self) -> None:
        import ray

        if self._closed:
            return
        self._closed = True
        for a in self._actors:
            try:
                ray.kill(a, no_restart=True)
            except Exception:  # noqa: BLE001 - already gone
                pass
        if self._stop_ray is not None:
            self._stop_ray()


def slim(packed: tuple[Any, ...], owned: Sequence[int]) -> tuple[Any, ...] | None:
    """A batch's call argument with the picks at ``owned`` (bred by the worker it goes to)
    as None, their vectors too: the worker measures the schedule it holds (``Breeder.take``)
    and never reads their JSON, so it is not sent (a BERT-base s128 schedule's is ~17 KB
    pickled, ~0.3 ms of the worker's CPU to unpickle and ~0.15 of the driver's to pickle).
    A worker that no longer holds one (restarted, or it dropped the pick) answers None, and
    the pool sends ``packed`` again (:meth:`RayPool._collect`). None: nothing to leave out."""
    if not owned:
        return None
    task_key, schedules, timeout_s, cids, vectors = packed
    schedules = list(schedules)
    vectors = None if vectors is None else list(vectors)
    for i in owned:
        schedules[i] = None
        if vectors is not None:
            vectors[i] = None
    return task_key, schedules, timeout_s, cids, vectors


def _actor_maker(target: Target, measurer: Measurer, slots: int, cpus: float,
                 need: Mapping[str, float]) -> Callable[[], Any]:
    """How to start (and, in its place, restart) a process of ``slots`` workers: it
    reserves ``slots`` times a worker's CPUs and resources; more than one slot makes it a
    threaded actor (room for its slots' running and queued calls, and a bench's calls)."""
    import ray

    opts: dict[str, Any] = {"num_cpus": cpus * slots, "max_restarts": -1,
                            "max_task_retries": 0,
                            "resources": {k: v * slots for k, v in need.items()} or None}
    if slots > 1:
        opts["max_concurrency"] = 2 * slots + 4
    cls = ray.remote(_Worker).options(**opts)
    return lambda: cls.remote(target, measurer, slots)


def _LOST_ERRORS() -> tuple[type[BaseException], ...]:  # noqa: N802 - a constant, built lazily
    import ray

    return (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError,
            ray.exceptions.ObjectLostError, ray.exceptions.ActorUnavailableError)
