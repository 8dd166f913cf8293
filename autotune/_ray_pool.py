"""``RayPool``: measurement on Ray actors, one per worker, graphs shipped once.

By default a private Ray instance starts on loopback only (``127.0.0.1``, no
dashboard) with one CPU per worker; ``address`` joins an existing cluster
instead. Each actor receives every task's graph, the target and the measurer
in its constructor (one ``ray.put`` for the graphs), so a batch carries only
schedule JSON. Actors restart when they die; the batch they held comes back as
``worker_lost`` measurements and the job goes on.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autotune._measurer import Measurer, measure_json, measurement_from_json
from autotune._pool import Finished, MeasurePool, lost
from compiler.errors import GraphtuneError

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.target import Target

__all__ = ["LOOPBACK", "RayPool", "start_ray"]

log = logging.getLogger("autotune.ray")

LOOPBACK = "127.0.0.1"
# A batch whose worker neither answers nor dies within this many seconds (beyond its
# per-schedule timeouts) is declared lost and the worker restarted.
_BATCH_GRACE_S = 120.0


class _Worker:
    """The actor body: measures batches of one of the graphs it was built with."""

    def __init__(self, graphs: Mapping[str, Graph], target: Target, measurer: Measurer) -> None:
        self._graphs = graphs
        self._target = target
        self._measurer = measurer

    def pid(self) -> int:
        return os.getpid()

    def measure(self, task_key: str, schedules: Sequence[dict[str, Any]],
                timeout_s: float | None) -> tuple[str, list[dict[str, Any]]]:
        return measure_json(self._measurer, self._graphs[task_key], schedules, self._target,
                            timeout_s)


def start_ray(address: str | None, workers: int) -> bool:
    """Connect to Ray: a local loopback-only instance, or the cluster at ``address``.

    Returns True when this call started Ray (the caller shuts it down).

    Raises:
        GraphtuneError: the cluster at ``address`` cannot be reached.
    """
    import ray

    if ray.is_initialized():
        return False
    if address is None:
        # Keep every Ray service on loopback: nothing listens on or talks to another address.
        os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
        ray.init(num_cpus=max(workers, 1), include_dashboard=False, _node_ip_address=LOOPBACK,
                 log_to_driver=False, configure_logging=False, namespace="graphtune")
        return True
    try:
        ray.init(address=address, log_to_driver=False, configure_logging=False,
                 namespace="graphtune")
    except Exception as exc:  # noqa: BLE001 - Ray raises many kinds for a bad address
        text = str(exc).strip().splitlines()
        raise GraphtuneError(
            f"cannot join the Ray cluster at {address}: {text[-1] if text else type(exc).__name__}"
        ) from None
    return True


@dataclass
class _InFlight:
    batch_id: int
    size: int
    actor: int
    deadline: float


class RayPool(MeasurePool):
    """Measures on ``workers`` Ray actors (see the module doc).

    Args:
        graphs: Task key -> graph; shipped to each actor once.
        target: The chip.
        measurer: Pickled to each actor.
        workers: Number of actors (>= 1).
        address: A Ray cluster to join; None starts a local loopback instance.
        timeout_s: Per-schedule time limit inside the workers.
    """

    def __init__(self, graphs: Mapping[str, Graph], target: Target, measurer: Measurer,
                 workers: int, address: str | None = None,
                 timeout_s: float | None = None) -> None:
        import ray

        if workers < 1:
            raise GraphtuneError(f"a Ray pool needs at least one worker, got {workers}")
        self.workers = workers
        self.slots = 2 * workers
        self._timeout_s = timeout_s
        self._owns_ray = start_ray(address, workers)
        actor_cls = ray.remote(_Worker).options(num_cpus=1, max_restarts=-1, max_task_retries=0)
        graphs_ref = ray.put(dict(graphs))
        self._actors = [actor_cls.remote(graphs_ref, target, measurer) for _ in range(workers)]
        self._load = [0] * workers
        self._refs: dict[Any, _InFlight] = {}
        self._closed = False

    def worker_pids(self) -> list[int]:
        """Process ids of the actors (for tests that kill one)."""
        import ray

        return list(ray.get([a.pid.remote() for a in self._actors]))

    def submit(self, batch_id: int, task_key: str, schedules: Sequence[dict[str, Any]]) -> None:
        k = min(range(len(self._actors)), key=lambda i: self._load[i])
        ref = self._actors[k].measure.remote(task_key, list(schedules), self._timeout_s)
        per = self._timeout_s or 60.0
        self._refs[ref] = _InFlight(batch_id, len(schedules), k,
                                    time.monotonic() + _BATCH_GRACE_S + per * len(schedules))
        self._load[k] += 1

    def wait(self, timeout_s: float | None = None) -> list[Finished]:
        import ray

        if not self._refs:
            return []
        refs = list(self._refs)
        ready, rest = ray.wait(refs, num_returns=1, timeout=timeout_s)
        if ready and rest:
            more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
            ready += more
        done = [self._collect(ref) for ref in ready]
        self._expire()
        return done

    def _collect(self, ref: Any) -> Finished:
        import ray

        job = self._refs.pop(ref)
        self._load[job.actor] -= 1
        try:
            host, out = ray.get(ref)
        except (ray.exceptions.RayActorError, ray.exceptions.WorkerCrashedError,
                ray.exceptions.ObjectLostError, ray.exceptions.ActorUnavailableError) as exc:
            why = f"worker died while measuring: {type(exc).__name__}"
            log.warning("batch %d: %s; its %d candidate(s) are recorded as worker_lost",
                        job.batch_id, why, job.size)
            return Finished(job.batch_id, "", lost(job.size, why))
        return Finished(job.batch_id, host, tuple(measurement_from_json(m) for m in out))

    def _expire(self) -> None:
        """Kill (and so restart) a worker stuck on a batch past its deadline."""
        import ray

        now = time.monotonic()
        for job in self._refs.values():
            if job.deadline < now:
                log.warning("batch %d exceeded its time limit: restarting its worker", job.batch_id)
                ray.kill(self._actors[job.actor], no_restart=False)
                job.deadline = float("inf")

    @property
    def in_flight(self) -> int:
        return len(self._refs)

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
        if self._owns_ray:
            ray.shutdown()
