"""The work bound: what every schedule's cores must spend, op by op, at the cheapest legal shapes.

The roofline of :mod:`compiler.bound` spreads whole-model aggregates over the
cluster's peak. This module sums, op by op, the cheapest time the simulator
itself can charge for that op (``sim/_model.py``) whatever the schedule does,
and divides the cores' total by their count. Every term is a time some core
must be busy; cores run one step at a time (a step starts after the previous
step on its cores ends), so ``latency - launch >= total core-busy time / cores``.

The argument, step by step (``N`` = cores of the cluster):

1. A core of a step is busy from the step's start to its end, at least its own
   part's ``max(mme, vme, move, wbound) + fill`` (``ComputeCost.cycles``; the
   step ends with its slowest part). Summed over the steps of a core and over
   the cores, ``N x (latency - launch) >= sum of max(...) + sum of fill
   >= max(sum mme-side, sum vme, sum move) + sum fill``.
2. **Matrix side** (``wbound`` >= ``mme`` step by step): a matrix op (one group,
   or a batched matmul) adds, on every core that runs a piece of it,
   ``max(padded piece + one instruction per granule, weights / weight-path
   bandwidth)``. However its rows are cut among chunks, parts and cores, the
   pieces need at least the granules of the whole in one piece
   (:func:`compiler.opshape.array_cycles`, tested against the engine's pricing),
   and some core loads all its weights, so the op adds at least
   ``max(array_cycles, weight_bytes / weight-path bandwidth)`` (the widest
   weight path: one core, broadcast when the LLB broadcasts). An op with
   weights that does not run on the array adds ``weight_bytes / bandwidth``.
3. **Vector side**: vector and special ops add their FLOPs (special ones at the
   transcendental rate) over the lanes; a core's share is rounded up, never down.
4. **Grouped convolutions** (depthwise) run on whichever engine is cheapest for
   the piece (``sim._model.grouped_conv_cycles``): per group or channel-packed on
   the array, both ``c x ceil(rows / granule_m)`` for a per-64-rows price ``c``
   (so at least ``c x rows / granule_m`` for any piece), or on the vector unit,
   linear in the rows. Pieces may take different engines, so each op is a
   fraction ``x`` on the array and ``1 - x`` on the vector unit. When the vector
   price of the whole op is below the array's unpadded price, every piece is
   cheaper on the vector unit (vector time is linear in the rows, the array's at
   least linear), and the simulator takes the cheapest mapping of each piece, so
   the op is on the vector unit whole (MobileNetV2's depthwise 3x3: 9 MACs per
   output against an array granule of 9 + 96 cycles). Otherwise the bound takes
   the fractions that minimise ``max(matrix side, vector side)`` (a linear
   programme, solved exactly by moving ops onto the array in order of their
   price ratio), which is at most what any real assignment costs.
5. **Moves** (transposes, concats, gathers written into L1) add their bytes at
   the L1 bandwidth on the move engine.
6. **Fill**: every op runs in at least one part of one step, and each part pays
   one output tile's latency per op: ``k x granule_m x granule_n / MACs +
   instruction`` for a matrix op; for a vector op the smaller of its work on
   the smallest legal piece (one sample over every core) and one 4,096-element
   tile; a grouped convolution the smaller of both.

7. **Gathered rows' descriptors** (issue 25 item 5, ``sim/_gathers.py``): a table
   larger than half a weight buffer cannot be gathered in L1, so each of its rows
   reaches a core from the LLB or DDR by its own DMA descriptor, occupying that
   core's DMA port for ``dma.setup_cycles`` plus the row at the port rate (at
   least; from DDR the row is rounded up to bursts). Ports are busy no longer
   than the latency, so ``latency - launch >= (sum over such rows) / cores``: a
   second bound beside the cores' busy time, the larger of the two is kept
   (Wide & Deep b2048: 669 µs of descriptors against 170 µs of core work).

Nothing here changes a cost term; it only reads the same prices. The result is
``max(roofline, this)`` in :func:`compiler.bound.lower_bound_cycles`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from compiler.capacity import in_compute_dtype
from compiler.memo import memo_of
from compiler.opshape import (
    OpKind,
    array_cycles,
    matrix_tiles,
    op_shapes,
    unit_rates,
    weight_path_bytes_per_cycle,
)

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.opshape import OpShape
    from compiler.target import MatrixUnit, Target

__all__ = ["WorkBound", "grouped_array_cycles_per_row", "work_bound"]

_VECTOR_TILE = 4096  # elements per vector instruction tile, as sim/_model.py


@dataclass(frozen=True)
class WorkBound:
    """The cheapest legal busy time of every op, summed over the cluster's cores (cycles).

    Attributes:
        matrix_side: Matrix ops at their cheapest legal shapes, each at least its
            weights' arrival time, plus weight arrival of other ops with weights.
        vector_side: Vector and special work over the lanes.
        move: Move-engine work (L1 copies).
        grouped_matrix: Grouped convolutions that may take either engine, priced on the
            array (per 64 rows, unpadded).
        grouped_vector: The same on the vector unit.
        grouped_forced: Grouped convolutions cheaper on the vector unit for every piece
            (already in ``vector_side``).
        grouped_on_matrix: The share of the grouped work the best split puts on the array.
        balanced: ``min over split of max(matrix side, vector side)`` with the grouped work.
        fill: One output tile's latency per op, at the smallest legal piece.
        cores: Cores of the cluster.
        cycles: ``max(max(balanced, move) + fill, gather_dma) / cores``: the bound (no launch).
        gather_dma: DMA-port time of the rows of tables over half a weight buffer,
            one descriptor each (item 7 of the module doc).
    """

    matrix_side: float
    vector_side: float
    move: float
    grouped_matrix: float
    grouped_vector: float
    grouped_forced: float
    grouped_on_matrix: float
    balanced: float
    fill: float
    cores: int
    cycles: float
    gather_dma: float = 0.0


def grouped_array_cycles_per_row(d: OpShape, mat: MatrixUnit) -> float:
    """A grouped convolution's cheapest array price per output row, unpadded.

    Both array mappings of ``sim._model.grouped_conv_cycles`` (per group; channel-packed)
    cost ``c x ceil(rows / granule_m)``; this is the smaller ``c / granule_m``, so any
    piece of ``r`` rows costs at least ``r`` times it on the array.
    """
    gm, gn, macs, ovh = mat.granule_m, mat.granule_n, mat.macs_per_cycle, mat.instr_overhead_cycles
    per_gm = matrix_tiles(d, gm, mat)
    c = per_gm.padded_cycles + per_gm.tiles * ovh
    pack = gn // d.n if d.n < gn else 1
    if pack > 1:
        tiles = math.ceil(d.groups / pack) * math.ceil(pack * d.n / gn)
        c = min(c, tiles * (gm * gn * pack * d.k / macs + ovh))
    return c / gm


def _balance(base_m: float, base_v: float, items: list[tuple[float, float]]) -> tuple[float, float]:
    """``min over x in [0,1]^n of max(base_m + sum x a, base_v + sum (1 - x) b)`` and the
    matrix share ``sum x a`` at the optimum. ``items`` are ``(a, b)`` pairs."""
    m = base_m
    v = base_v + sum(b for _, b in items)
    if v <= m:
        return m, 0.0
    on_m = 0.0
    for a, b in sorted(items, key=lambda ab: ab[0] / ab[1] if ab[1] > 0 else math.inf):
        if m + a <= v - b:
            m, v, on_m = m + a, v - b, on_m + a
            continue
        x = (v - m) / (a + b) if a + b > 0 else 0.0
        return m + a * x, on_m + a * x
    return max(m, v), on_m


def work_bound(graph: Graph, batch: int, target: Target) -> WorkBound:
    """The :class:`WorkBound` of ``batch`` samples of ``graph`` on one cluster (see the module doc).

    Args:
        graph: The model (any batch; work scales per sample).
        batch: Samples per inference.
        target: The chip.
    """

    graph = in_compute_dtype(graph, target)
    key = ("bound.work", target.hash, batch)
    memo = memo_of(graph)
    hit: WorkBound | None = memo.get(key)
    if hit is not None:
        return hit
    cores = target.chip.cores_per_cluster
    gm, gn, ovh = target.matrix.granule_m, target.matrix.granule_n, target.matrix.instr_overhead_cycles
    tcpe = target.vector.transcendental_cycles_per_element
    wbw = weight_path_bytes_per_cycle(target, 1)
    l1bw = target.l1.bytes_per_cycle
    mside = vside = move = fill = forced = dma = 0.0
    half_wb = target.l1.weight_bytes / 2
    setup, port = target.dma.setup_cycles, target.dma.core_bytes_per_cycle
    grouped: list[tuple[float, float]] = []
    for op, d in zip(graph.ops, op_shapes(graph), strict=True):
        kind = d.kind
        if kind == OpKind.VIEW or not op.on_npu:  # a host op is the roofline's host term
            continue
        # an INT8 op on its units' INT8 rates (compiler.opshape.unit_rates), as the simulator
        mat, lanes = unit_rates(d, target)
        macs = mat.macs_per_cycle
        per = batch if d.batched else 1
        total = d.amount * per
        # the smallest piece a part's core can run: one sample over every core
        piece = float(math.ceil(d.amount / cores - 1e-9) if d.batched else math.ceil(d.amount - 1e-9))
        mfill = d.k * gm * gn / macs + ovh
        if kind == OpKind.MATRIX and d.groups > 1:
            a = grouped_array_cycles_per_row(d, mat) * total
            b = total * d.groups * d.n * d.k / lanes
            if b < a:  # the vector unit is cheaper for every piece: the simulator puts it there
                vside += b
                forced += b
            else:
                grouped.append((a, b))
            # either engine: a matrix tile's latency or a vector tile of the smallest piece
            fill += min(mfill, piece * d.groups * d.n * d.k / lanes, _VECTOR_TILE / lanes)
        elif kind.is_matrix:
            mside += max(array_cycles(d, batch, mat), d.weight_bytes / wbw)
            fill += mfill
        elif kind in (OpKind.VECTOR, OpKind.SPECIAL):
            rate = tcpe if kind == OpKind.SPECIAL else 1.0
            vside += total / lanes * rate
            fill += min(piece / lanes * rate, _VECTOR_TILE / lanes)
        elif kind == OpKind.MOVE:
            move += 2.0 * total / l1bw
        else:  # gather: rows written once into L1
            move += total / l1bw
            if d.table_bytes > half_wb:  # rows by descriptor from the LLB or DDR
                row = max(d.row_bytes, 1)
                dma += total / row * (setup + row / port)
        if d.weight_bytes and not kind.is_matrix:
            mside += d.weight_bytes / wbw
    balanced, on_m = _balance(mside, vside, grouped)
    # grouped weights: every piece loads them on either engine (wbound += weights / bandwidth)
    gweights = sum(d.weight_bytes / wbw for d in op_shapes(graph)
                   if d.kind == OpKind.MATRIX and d.groups > 1)
    top = max(balanced, move, mside + gweights)
    hit = WorkBound(
        matrix_side=mside, vector_side=vside, move=move,
        grouped_matrix=sum(a for a, _ in grouped), grouped_vector=sum(b for _, b in grouped),
        grouped_forced=forced,         grouped_on_matrix=on_m, balanced=balanced, fill=fill, cores=cores,
        cycles=max(top + fill, dma) / cores, gather_dma=dma,
    )
    memo[key] = hit
    return hit
