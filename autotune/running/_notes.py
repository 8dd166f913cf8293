"""What one measurement changes in a task's state (this run's, or a logged one on resume):
its counters, best, baselines, curve, and the candidates whose worker raised once
(:data:`RAISED`: measured again, a second raise is an error)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from autotune.job._state import Best

if TYPE_CHECKING:
    from autotune.job._state import TaskState
    from compiler.schedule import GraphSchedule
    from sim import Measurement

__all__ = ["AGAIN", "OUT_OF_MEMORY", "RAISED", "note_measurement", "objective_of"]

RAISED = "the worker raised"
"""How the error of a candidate whose worker raised begins (its record is ``worker_lost``
the first time: see :class:`autotune.running._failures.Failures`)."""
OUT_OF_MEMORY = "the worker ran out of memory"
"""... and of one whose worker ran out of memory (treated the same way)."""
AGAIN = (RAISED, OUT_OF_MEMORY)


def objective_of(m: Measurement, objective: str) -> float | None:
    """The study value of a measurement (None: failed)."""
    if not m.ok:
        return None
    return m.latency_us if objective == "latency" else m.throughput_per_s


def note_measurement(ts: TaskState, objective: str, tuner: str,
                     schedule: GraphSchedule | Mapping[str, Any], trial: int | None,
                     m: Measurement, cid: str) -> None:
    """Update a task's state with one measurement (this run's or a logged one)."""
    ts.records += 1
    latency = m.latency_us if m.ok else None
    ts.history.append(latency)
    if m.status != "worker_lost":  # a lost candidate was not measured
        ts.measured[cid] = objective_of(m, objective)
        ts.latency[cid] = latency
    elif (m.error or "").startswith(AGAIN):  # measured again; a second raise is its error
        ts.raised.add(cid)
    if not m.ok:
        ts.errors[m.status] = ts.errors.get(m.status, 0) + 1
    if latency is not None and _better(m, ts.best, objective):
        # (a dict of its own: a record's schedule may be its log text, logs.ScheduleText)
        sched = dict(schedule) if isinstance(schedule, Mapping) else schedule.to_json()
        ts.best = Best(latency, m.throughput_per_s, sched, tuner, trial)
    if ts.best is not None:
        ts.curve.append((ts.records, ts.best.latency_us))


def _better(m: Measurement, best: Best | None, objective: str) -> bool:
    if best is None:
        return True
    if objective == "throughput":
        return (m.throughput_per_s or 0.0) > (best.throughput_per_s or 0.0)
    return m.latency_us is not None and m.latency_us < best.latency_us
