"""Physical invariants every simulation result must satisfy (a violation is a simulator bug).

A search keeps whatever the simulator scores fastest, so a result that beats
physics would become the "best schedule". Every result of the run path is
checked here; a violation turns it into ``SimError(status="invariant")`` naming
the invariant, never a result:

* ``latency>=bound``: latency is at least the roofline lower bound
  (:func:`sim.lower_bound`);
* ``flops<=peak``: the achieved FLOP/s do not exceed the peak of the cores the
  schedule uses (matrix and vector units: ``2 * (macs_per_cycle + lanes)`` FLOPs
  per cycle per core, a MAC being two FLOPs; each at its INT8 rate when the graph
  has INT8 ops);
* ``ddr>=compulsory``: the DDR channel carried at least the bytes that must cross
  it (:func:`compiler.bound.compulsory_ddr_bytes`);
* ``busy<=100%``: no engine, port, channel or link is busy longer than the latency.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from compiler.bound import compulsory_ddr_bytes, lower_bound_cycles
from compiler.memo import memo_of
from compiler.opshape import op_shapes
from sim._result import SimError, SimResult

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.target import Target

__all__ = ["INVARIANTS", "check_invariants"]

INVARIANTS = ("latency>=bound", "flops<=peak", "ddr>=compulsory", "busy<=100%")
_REL = 1e-9  # floating-point slack (relative)


def check_invariants(
    r: SimResult, graph: Graph, target: Target, cores_used: int
) -> SimError | None:
    """The first violated invariant of ``r`` as a :class:`SimError`, or None.

    Args:
        r: A result of ``graph`` (in the target's compute type) on ``target``.
        graph: The simulated graph.
        target: The chip.
        cores_used: Distinct cores that ran a group step.
    """
    lat = r.latency_cycles
    bound = lower_bound_cycles(graph, r.batch, target)
    if lat < bound * (1 - _REL):
        return _violation(
            "latency>=bound", f"latency {lat:.0f} cycles is below the lower bound {bound:.0f}", r)
    flops, int8 = _facts(graph)
    per_core = 2.0 * (target.matrix.macs_per_cycle + target.vector.lanes)
    if int8:  # INT8 ops: the units' INT8 rates
        per_core = 2.0 * (target.matrix.macs_per_cycle * max(1.0, target.matrix.int8_rate)
                          + target.vector.lanes * max(1.0, target.vector.int8_rate))
    peak = per_core * max(cores_used, 1)
    achieved = flops / lat if lat > 0 else float("inf")
    if achieved > peak * (1 + _REL):
        return _violation(
            "flops<=peak", f"{achieved:.0f} FLOP/cycle exceeds the peak {peak:.0f} of the "
            f"{cores_used} cores used", r)
    need = compulsory_ddr_bytes(graph, r.batch, target)
    if r.ddr_bytes < need * (1 - _REL) - 1e-6:
        return _violation(
            "ddr>=compulsory", f"{r.ddr_bytes:.0f} DDR bytes is less than the {need:.0f} "
            "that must cross DDR", r)
    for name, busy in r.busy_cycles.items():
        if busy > lat * (1 + _REL) + 1e-6:
            return _violation(
                "busy<=100%", f"{name} is busy {busy:.0f} cycles in a latency of {lat:.0f}", r)
    return None


def _facts(graph: Graph) -> tuple[int, bool]:
    """The graph's FLOPs and whether it has INT8 ops (sums over every op: remembered per
    graph, not made again for every result)."""
    memo = memo_of(graph)
    hit: tuple[int, bool] | None = memo.get("sim.invariant_facts")
    if hit is None:
        hit = memo["sim.invariant_facts"] = (graph.flops, any(d.int8 for d in op_shapes(graph)))
    return hit


def _violation(name: str, detail: str, r: SimResult) -> SimError:
    return SimError("invariant", f"simulator invariant {name} violated: {detail}",
                    lower_bound_us=r.lower_bound_us, invariant=name)
