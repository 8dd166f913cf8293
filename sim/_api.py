"""Public entry points: one schedule or a batch of them."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from sim._engine import run
from sim._result import SimError, SimResult

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.schedule import GraphSchedule
    from compiler.target import Target

__all__ = ["simulate", "simulate_many"]


def simulate(
    graph: Graph, schedule: GraphSchedule, target: Target, *, timeline: bool = True
) -> SimResult | SimError:
    """Simulate one inference of ``schedule`` on one cluster of ``target``.

    Pure: the same inputs give the same result (caches on the graph only save time).
    A bad schedule is a value, never an exception.

    Args:
        graph: The model at the schedule's batch size.
        schedule: The graph schedule (core ids 0..cores_per_cluster-1).
        target: The chip.
        timeline: Keep per-resource DMA events for the trace (steps are always kept).

    Returns:
        A :class:`SimResult`, or a :class:`SimError` with status ``"invalid"`` (the
        structural problem, as ``GraphSchedule.validate`` words it) or
        ``"capacity"`` (which L1 or LLB overflowed, where, by how much, and what was live).
    """
    return run(graph, schedule, target, record=timeline)


def simulate_many(
    graph: Graph, schedules: Iterable[GraphSchedule], target: Target, *, timeline: bool = False
) -> list[SimResult | SimError]:
    """Simulate many schedules of one graph; one result or error per schedule, in order."""
    return [run(graph, s, target, record=timeline) for s in schedules]
