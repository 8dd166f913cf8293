"""Roofline lower bound of one inference on one cluster, and the bytes that must cross DDR.

The one definition of the bound's terms: the simulator reports it
(``sim.lower_bound``, ``SimResult.lower_bound_us``) and checks its invariants
against it, the cost model normalises time features by it
(:func:`cost_model.reference_cycles`: :func:`lower_bound_cycles` without the host
launch), and ``graphtune report`` names the term that binds.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from compiler.capacity import in_compute_dtype
from compiler.footprint import GATHER_OPS, batched_tensors
from compiler.memo import memo_of
from compiler.opshape import OpKind, array_cycles, op_shapes
from compiler.optable import op_spec

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.target import Target

__all__ = ["compulsory_ddr_bytes", "launch_cycles", "lower_bound", "lower_bound_cycles", "roofline_cycles"]


def compulsory_ddr_bytes(graph: Graph, batch: int, target: Target) -> float:
    """Bytes any schedule of ``batch`` samples moves through the cluster's DDR channel.

    Each weight once (the simulator never keeps weights on chip between steps; weights
    sharing one storage, :attr:`compiler.graph.Tensor.storage`, once together), the
    model's inputs (those an op reads) and outputs, and for each gather the cheaper of reading its table
    once and reading its rows, each rounded up to whole DDR bursts.
    """
    graph = in_compute_dtype(graph, target)
    key = ("bound.compulsory", target.hash, batch)
    memo = memo_of(graph)
    hit = memo.get(key)
    if hit is not None:
        return float(hit)
    scale = batch / graph.batch
    batched = batched_tensors(graph)
    burst = max(1, target.ddr.burst_bytes)
    shapes = op_shapes(graph)
    gathered = 0.0
    for d in shapes:
        if d.kind != OpKind.GATHER or not d.table_bytes:
            continue
        row = max(d.row_bytes, 1)
        rows = d.amount * (batch if d.batched else 1) / row
        gathered += min(float(d.table_bytes), rows * math.ceil(row / burst) * burst)
    # a weight that shares another's bytes (Tensor.storage: a tied embedding's head) once
    loaded = {graph.tensors[w].storage or w
              for op in graph.ops if op.op_type not in GATHER_OPS for w in op.weights}
    weight = sum(graph.nbytes(w) for w in loaded)
    read = [t for t in graph.inputs if t in graph.consumers]
    io = sum(graph.nbytes(t) * (scale if t in batched else 1.0)
             for t in dict.fromkeys((*read, *graph.outputs)))
    total = weight + gathered + io
    memo[key] = total
    return total


def launch_cycles(target: Target) -> float:
    """The host's launch of one inference, in cycles (the bound's fixed term)."""
    return target.host.launch_overhead_us * target.clock_hz / 1e6


def lower_bound_cycles(graph: Graph, batch: int, target: Target) -> float:
    """Bound in cycles: see :func:`lower_bound`."""
    return roofline_cycles(graph, batch, target) + launch_cycles(target)


def roofline_cycles(graph: Graph, batch: int, target: Target) -> float:
    """The bound without the host launch: ``max(compute at peak, compulsory DDR bytes / rate)``.

    See :func:`lower_bound` for the terms.
    """
    graph = in_compute_dtype(graph, target)
    key = ("bound.roofline", target.hash, batch)
    memo = memo_of(graph)
    hit = memo.get(key)
    if hit is not None:
        return float(hit)
    scale = batch / graph.batch
    batched = batched_tensors(graph)
    cores = target.chip.cores_per_cluster
    mat = target.matrix
    shapes = op_shapes(graph)
    fixed = flexible = vec = tiled = 0.0
    for op, d in zip(graph.ops, shapes, strict=True):
        unit = op_spec(op.op_type).unit
        per = scale if op.output in batched else 1.0
        if unit == "matrix":
            if d.kind == OpKind.MATRIX and d.groups > 1:
                flexible += op.macs * per  # either engine may run a grouped conv
            else:
                fixed += op.macs * per
                if d.kind.is_matrix:
                    tiled += array_cycles(d, batch, mat)
        elif unit == "vector":
            vec += op.flops * per
        elif unit == "special":
            vec += op.flops * per * target.vector.transcendental_cycles_per_element
    mac_rate, lanes = mat.macs_per_cycle, target.vector.lanes
    # matrix-only work on the array (whole granules, one instruction each), vector-only
    # work, and everything over both engines together
    compute = max(fixed / (mac_rate * cores), tiled / cores, vec / (lanes * cores),
                  (fixed + flexible + vec) / ((mac_rate + lanes) * cores))
    ddr = compulsory_ddr_bytes(graph, batch, target) / target.ddr.bytes_per_cycle
    bound = max(compute, ddr)
    memo[key] = bound
    return bound


def lower_bound(graph: Graph, batch: int, target: Target) -> float:
    """Roofline bound of one inference of ``batch`` samples on one cluster, in µs.

    ``max(compute at peak, compulsory DDR traffic at the DDR bandwidth)`` plus the
    host launch. Compute: the matrix ops on every core's array, each at least its
    output rows in whole granules with one instruction per granule
    (:func:`compiler.opshape.array_cycles`: what no split can avoid), vector work (FLOPs; special ops
    at the transcendental rate) over every core's lanes, and, since grouped
    convolutions may run on either engine, all MACs and vector work over both
    engines at once. DDR: :func:`compulsory_ddr_bytes`.

    Args:
        graph: The model (any batch; work scales per sample).
        batch: Samples per inference.
        target: The chip.
    """
    return target.cycles_to_us(lower_bound_cycles(graph, batch, target))
