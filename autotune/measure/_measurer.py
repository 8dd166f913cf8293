"""The ``Measurer`` interface: what judges a batch of schedules (the simulator by default).

A board runner replaces the simulator by implementing :class:`Measurer`; the
tuner only ever calls :meth:`Measurer.measure` with a batch of schedules of one
graph and writes one record per :class:`sim.Measurement` it returns. Measurers
travel to Ray workers by pickle, so they hold configuration, not state.

A measurer also says what a Ray worker running it needs: ``num_cpus`` (a board
runner that mostly waits can ask for a fraction of a CPU) and ``resources``
(custom Ray resources such as ``{"stcp920": 1}``, so workers are placed only
on nodes started with that resource: the hosts that have the board), and how
many of its measurements may share one worker process (``slots_per_process``:
a measurer that only waits on its device can run several workers' measurements
as threads of one process, see :mod:`autotune.measure._slots`).
:mod:`autotune.measure._plugins` finds measurers by ``module:Class`` or by name.
"""

from __future__ import annotations

import abc
import socket
from collections.abc import Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.schedule import GraphSchedule
    from compiler.target import Target
    from sim import Measurement

__all__ = ["Measurer", "SimMeasurer", "measure_json"]


class Measurer(abc.ABC):
    """Measures batches of schedules of one graph; failures come back as data.

    Attributes:
        name: Written to each record's ``prov.measurer``.
        version: Written to ``prov.measurer_version``; records of another version
            are not reused (their results may differ).
        num_cpus: CPUs a Ray worker running this measurer reserves (fractions allowed;
            0 for one that only waits on a device).
        resources: Custom Ray resources each worker needs (``{"stcp920": 1}``): workers
            go only to nodes that have them.
        slots_per_process: How many workers' measurements may run as threads of one
            Ray actor process (1: a process per worker, as the simulator needs: it is
            CPU-bound). More is for a measurer that mostly waits (a board runner
            waiting on its device): ``--workers 64`` with 8 slots runs 8 processes of
            8 measurement threads, still 64 measurements at once, and the driver still
            sees 64 workers. The threads take turns for the CPU (one process lock);
            ``measure`` releases it only inside :func:`autotune.measure.waiting`,
            around its wait, and must not touch the decoder, the simulator or shared
            state there. Each process reserves ``num_cpus`` and ``resources`` per slot
            it runs.
    """

    name: str = ""
    version: str = ""
    num_cpus: float = 1.0
    resources: Mapping[str, float] = MappingProxyType({})
    slots_per_process: int = 1

    @abc.abstractmethod
    def measure(self, graph: Graph, schedules: Sequence[GraphSchedule], target: Target,
                timeout_s: float | None) -> list[Measurement]:
        """One :class:`sim.Measurement` per schedule, in order; never raises for a candidate."""


class SimMeasurer(Measurer):
    """The STCP920 simulator (:func:`sim.measure`)."""

    def __init__(self) -> None:
        from sim import MEASURER, MEASURER_VERSION

        self.name = MEASURER
        self.version = MEASURER_VERSION

    def measure(self, graph: Graph, schedules: Sequence[GraphSchedule], target: Target,
                timeout_s: float | None) -> list[Measurement]:
        from sim import measure

        return measure(graph, schedules, target, timeout_s=timeout_s)


def measure_json(measurer: Measurer, graph: Graph, schedules: Sequence[dict[str, Any]],
                 target: Target, timeout_s: float | None,
                 held: Sequence[GraphSchedule | None] | None = None
                 ) -> tuple[str, list[dict[str, Any]]]:
    """What a worker runs: schedules as JSON in, ``(host, measurements as JSON)`` out.

    A schedule that does not parse is an ``invalid_schedule`` measurement; the
    rest are measured as one batch. Results drop the full simulator result so
    they travel small. ``held[k]``, when given and not None, is a schedule this
    process already holds that writes exactly ``schedules[k]`` (a pick it bred,
    :meth:`autotune.sampling._breed.Breeder.take`): it is measured instead of a
    copy parsed from the JSON, with what was remembered beside it (its memory plan).
    """
    from compiler.errors import ScheduleError
    from compiler.schedule import GraphSchedule
    from sim import Measurement

    parsed: list[GraphSchedule | None] = []
    errors: dict[int, str] = {}
    for k, obj in enumerate(schedules):
        known = held[k] if held is not None and k < len(held) else None
        if known is not None:
            parsed.append(known)
            continue
        try:
            parsed.append(GraphSchedule.from_json(obj))
        except ScheduleError as exc:
            parsed.append(None)
            errors[k] = str(exc)
    good = [s for s in parsed if s is not None]
    measured = iter(_measure_guarded(measurer, graph, good, target, timeout_s) if good else [])
    out: list[dict[str, Any]] = []
    for k, s in enumerate(parsed):
        m = (Measurement("invalid_schedule", None, None, 0.0, errors[k], 0.0) if s is None
             else replace(next(measured), result=None))
        out.append(m.to_json())
    return socket.gethostname(), out


def _measure_guarded(measurer: Measurer, graph: Graph, schedules: Sequence[GraphSchedule],
                     target: Target, timeout_s: float | None) -> list[Measurement]:
    """``measurer.measure``, with a measurer that raises or answers wrongly turned into data.

    A plugin's bug (an exception, ``sys.exit``, a wrong number of results, something
    that is not a :class:`sim.Measurement`) becomes a ``sim_error`` measurement of
    every schedule of the batch naming the measurer: a failure is data, never the
    end of a tuning job.
    """
    from logs import Status
    from sim import Measurement

    try:
        got = list(measurer.measure(graph, schedules, target, timeout_s))
    except (Exception, SystemExit) as exc:  # noqa: BLE001 - a plugin can raise anything
        text = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        why = f"raised {type(exc).__name__}" + (f": {text[-1]}" if text else "")
    else:
        statuses = {s.value for s in Status}
        bad = next((m for m in got if not isinstance(m, Measurement) or m.status not in statuses),
                   None)
        if len(got) == len(schedules) and bad is None:
            return got
        why = (f"returned {len(got)} results for {len(schedules)} schedules"
               if len(got) != len(schedules) else f"returned {type(bad).__name__} "
               f"{str(bad)[:80]!r}, not a sim.Measurement with a logs.Status status")
    error = f"measurer {measurer.name or type(measurer).__name__} {why}"[:500]
    return [Measurement("sim_error", None, None, 0.0, error, 0.0) for _ in schedules]


def measurement_from_json(obj: dict[str, Any]) -> Measurement:
    """Inverse of ``Measurement.to_json`` (without the full result)."""
    from sim import Measurement

    return Measurement(obj["status"], obj["latency_us"], obj["throughput_per_s"],
                       obj["lower_bound_us"], obj["error"], obj["seconds"])
