"""Per-step compute cost of a group chunk on one core (ZigZag/Timeloop style).

Each core of a step runs its share of the chunk: ``samples`` samples shared by
``cores`` cores (a part), the output rows divided between them.

* Matrix ops (``nn.conv2d``, ``matmul``): the 64x32 MAC array does one
  ``granule_m x granule_n`` block per cycle per element of the reduction, so
  ``cycles = ceil(M/64)*64 * ceil(N/32)*32 * K / macs_per_cycle`` with ``M`` the
  core's output rows (spatial x samples for a conv, rows for a matmul; each GEMM
  of a batched matmul is padded on its own), ``N`` the output channels / columns
  (per group for grouped convs), ``K`` the reduction; plus
  ``instr_overhead_cycles`` per matrix instruction, one per 64x32 output granule
  (accumulated over the whole reduction in the IM buffer).
* Vector ops: FLOPs / lanes; special ops (exp, erf, divide, softmax, GELU) at the
  transcendental rate.
* Move ops (transposes, concats, gathers): bytes read and written at the L1 bandwidth;
  views (reshape, squeeze, ...) are free.
* Ops whose weights exceed half the weight buffer stream them in tiles and re-read
  their input once per extra tile (L1 traffic on the move engine).

The engines (matrix, vector, move/MTE) overlap: a step's compute time is the max
of their sums plus a fill/drain of one tile per op (the first output tile of an op
cannot start before its input tile exists). Weights stream through a weight
buffer that holds at most two tiles, so the matrix engine cannot run ahead of
them: op by op, it takes at least as long as the op's weights need to arrive at
the weight path's bandwidth (``weight_bound_cycles``; contention with other
traffic is added by the engine's reservations).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from compiler.footprint import GATHER_OPS, VIEW_OPS, batched_tensors
from compiler.memo import memo_of
from compiler.optable import op_spec, prod

if TYPE_CHECKING:
    from compiler.graph import Graph, Op
    from compiler.target import Target

__all__ = ["ComputeCost", "group_cost"]

_MAT_SHARED, _MAT_BATCHED, _VECTOR, _SPECIAL, _MOVE, _VIEW, _GATHER = range(7)
_VECTOR_TILE = 4096  # elements per vector instruction tile (fill/drain granularity)


@dataclass(frozen=True)
class ComputeCost:
    """Cycles one core of a step spends on each engine.

    Attributes:
        mme_cycles: Matrix engine, padded to the granule, with instruction overhead.
        vme_cycles: Vector engine.
        move_cycles: L1-local data movement (transposes, concats, re-reads).
        fill_cycles: Pipeline fill/drain, not overlapped.
        mme_useful_cycles: Matrix cycles without padding or overhead.
        weight_bound_cycles: Sum over ops of the longer of its matrix time and the
            time its weights take to arrive (uncontended weight-path bandwidth).
    """

    mme_cycles: float
    vme_cycles: float
    move_cycles: float
    fill_cycles: float
    mme_useful_cycles: float
    weight_bound_cycles: float = 0.0

    @property
    def cycles(self) -> float:
        """Compute time of the step on this core."""
        return max(self.mme_cycles, self.vme_cycles, self.move_cycles,
                   self.weight_bound_cycles) + self.fill_cycles


@dataclass(frozen=True)
class _OpDesc:
    kind: int
    batched: bool
    amount: float  # rows (shared-B matmul/conv), GEMMs (batched matmul), FLOPs, or bytes
    groups: int = 1
    mg: int = 1  # rows of one GEMM (batched matmul)
    n: int = 1
    k: int = 1
    weight_bytes: int = 0
    in_bytes: float = 0.0  # streamed input, per sample or whole


def _descs(graph: Graph) -> tuple[_OpDesc, ...]:
    memo = memo_of(graph)
    cached = memo.get("sim.opdesc")
    if cached is None:
        batched = batched_tensors(graph)
        cached = tuple(_describe(graph, op, batched) for op in graph.ops)
        memo["sim.opdesc"] = cached
    return cached  # type: ignore[no-any-return]


def _describe(graph: Graph, op: Op, batched: frozenset[str]) -> _OpDesc:
    out = graph.tensors[op.output]
    is_b = op.output in batched
    per = graph.batch if is_b else 1
    wbytes = 0 if op.op_type in GATHER_OPS else graph.weight_bytes_of(op)
    in_bytes = graph.nbytes(op.inputs[0]) / per if op.inputs else 0.0
    if op.op_type in VIEW_OPS:
        return _OpDesc(_VIEW, is_b, 0.0)
    unit = op_spec(op.op_type).unit
    if unit == "matrix" and op.macs:
        elems = max(out.elements, 1)
        k = max(1, round(op.macs / elems))
        if op.op_type.startswith("nn.conv"):
            groups = int(op.attr("groups", 1) or 1)
            layout = str(op.attr("data_layout", "NCHW"))
            co = out.shape[-1] if layout.endswith("C") else out.shape[1]
            rows = elems / co
            return _OpDesc(_MAT_SHARED, is_b, rows / per, groups, 1, max(1, co // groups), k,
                           wbytes, in_bytes)
        n = out.shape[-1] if out.shape else 1
        two_acts = len(op.inputs) >= 2 and op.inputs[1] in batched
        if two_acts and len(out.shape) >= 2:
            mg = out.shape[-2]
            gemms = prod(out.shape[:-2])
            return _OpDesc(_MAT_BATCHED, is_b, gemms / per, 1, mg, n, k, wbytes, in_bytes)
        return _OpDesc(_MAT_SHARED, is_b, elems / n / per, 1, 1, n, k, wbytes, in_bytes)
    if op.op_type in GATHER_OPS:
        return _OpDesc(_GATHER, is_b, graph.nbytes(op.output) / per)
    if unit == "move":
        return _OpDesc(_MOVE, is_b, graph.nbytes(op.output) / per)
    work = (op.flops or out.elements) / per
    return _OpDesc(_SPECIAL if unit == "special" else _VECTOR, is_b, work, weight_bytes=wbytes)


def group_cost(
    graph: Graph, ops: tuple[int, ...], samples: int, cores: int, target: Target,
    step_cores: int = 1,
) -> ComputeCost:
    """Per-core compute cost of ``ops`` for ``samples`` samples shared by ``cores`` cores.

    Args:
        graph: The model.
        ops: The op set (sorted indices).
        samples: Samples per part.
        cores: Cores per part (they split the output rows).
        target: The chip.
        step_cores: Cores running the step (they share DDR for weights when the LLB
            cannot broadcast).

    Cached per graph, op set, sample count, core counts and target.
    """
    memo = memo_of(graph)
    key = ("sim.cost", target.hash, ops, samples, cores, step_cores)
    hit: ComputeCost | None = memo.get(key)
    if hit is None:
        hit = memo[key] = _cost(_descs(graph), ops, samples, cores, target, step_cores)
    return hit


def weight_path_bytes_per_cycle(target: Target, step_cores: int) -> float:
    """Uncontended bandwidth of weights from DDR into one core's weight buffer."""
    port = target.dma.core_bytes_per_cycle
    if target.llb.broadcast:
        return min(target.ddr.bytes_per_cycle, target.llb.bytes_per_cycle / 2, port)
    return min(target.ddr.bytes_per_cycle / max(step_cores, 1), port)


def _cost(
    descs: tuple[_OpDesc, ...], ops: tuple[int, ...], s: int, k: int, target: Target,
    step_cores: int,
) -> ComputeCost:
    mat, vec = target.matrix, target.vector
    gm, gn, macs, ovh = mat.granule_m, mat.granule_n, mat.macs_per_cycle, mat.instr_overhead_cycles
    lanes, tcpe = vec.lanes, vec.transcendental_cycles_per_element
    l1bw = target.l1.bytes_per_cycle
    half_wb = target.l1.weight_bytes / 2
    wbw = weight_path_bytes_per_cycle(target, step_cores)
    mme = vme = move = fill = useful = wbound = 0.0
    for i in ops:
        d = descs[i]
        kind = d.kind
        if kind == _VIEW:
            continue
        share = math.ceil(s * d.amount / k) if d.batched else math.ceil(d.amount)
        if kind in (_MAT_SHARED, _MAT_BATCHED):
            if kind == _MAT_SHARED:
                reps, rows = d.groups, share
            else:
                reps, rows = share, d.mg
            tiles = reps * math.ceil(rows / gm) * math.ceil(d.n / gn)
            t_op = tiles * (gm * gn * d.k / macs + ovh)
            mme += t_op
            useful += reps * rows * d.n * d.k / macs
            fill += d.k * gm * gn / macs + ovh
            wbound += max(t_op, d.weight_bytes / wbw)
        elif kind in (_VECTOR, _SPECIAL):
            c = share / lanes * (tcpe if kind == _SPECIAL else 1.0)
            vme += c
            fill += min(c, _VECTOR_TILE / lanes)
        elif kind == _MOVE:
            move += 2.0 * share / l1bw
        else:  # gather: rows arrive by DMA (see the engine), written once into L1
            move += share / l1bw
        if d.weight_bytes > half_wb and kind in (_MAT_SHARED, _MAT_BATCHED):
            extra = math.ceil(d.weight_bytes / half_wb) - 1
            streamed = s * d.in_bytes / k if d.batched else d.in_bytes
            move += extra * streamed / l1bw
        if d.weight_bytes and kind not in (_MAT_SHARED, _MAT_BATCHED):
            wbound += d.weight_bytes / wbw
    return ComputeCost(mme, vme, move, fill, useful, wbound)
