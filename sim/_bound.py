"""Roofline lower bound of one inference on one cluster."""

from __future__ import annotations

from typing import TYPE_CHECKING

from compiler.footprint import GATHER_OPS, batched_tensors
from compiler.memo import memo_of
from compiler.optable import op_spec
from sim._dtype import in_compute_dtype

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.target import Target

__all__ = ["lower_bound", "lower_bound_cycles"]


def lower_bound_cycles(graph: Graph, batch: int, target: Target) -> float:
    """Bound in cycles: see :func:`lower_bound`."""
    graph = in_compute_dtype(graph, target)
    key = ("sim.bound", target.hash, batch)
    memo = memo_of(graph)
    hit = memo.get(key)
    if hit is not None:
        return float(hit)
    scale = batch / graph.batch
    batched = batched_tensors(graph)
    cores = target.chip.cores_per_cluster
    macs = vec = gathered = 0.0
    for op in graph.ops:
        unit = op_spec(op.op_type).unit
        per = scale if op.output in batched else 1.0
        if unit == "matrix":
            macs += op.macs * per
        elif unit == "vector":
            vec += op.flops * per
        elif unit == "special":
            vec += op.flops * per * target.vector.transcendental_cycles_per_element
        if op.op_type in GATHER_OPS:
            gathered += graph.nbytes(op.output) * per
    loaded = {w for op in graph.ops if op.op_type not in GATHER_OPS for w in op.weights}
    weight = sum(graph.nbytes(w) for w in loaded)
    io = sum(graph.nbytes(t) * (scale if t in batched else 1.0)
             for t in (*graph.inputs, *graph.outputs))
    compute = macs / (target.matrix.macs_per_cycle * cores)
    vector = vec / (target.vector.lanes * cores)
    ddr = (weight + gathered + io) / target.ddr.bytes_per_cycle
    launch = target.host.launch_overhead_us * target.clock_hz / 1e6
    bound = max(compute, vector, ddr) + launch
    memo[key] = bound
    return bound


def lower_bound(graph: Graph, batch: int, target: Target) -> float:
    """Roofline bound of one inference of ``batch`` samples on one cluster, in µs.

    ``max(matrix work at peak, vector work at peak, compulsory DDR traffic at the DDR
    bandwidth)`` plus the host launch: MACs (no padding) over every core's matrix
    unit, vector FLOPs over every core's lanes (special ops at the transcendental
    rate), and each weight read once plus inputs, outputs and gathered table rows.

    Args:
        graph: The model (any batch; work scales per sample).
        batch: Samples per inference.
        target: The chip.
    """
    return target.cycles_to_us(lower_bound_cycles(graph, batch, target))
