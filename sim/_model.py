"""Per-step compute cost of a group chunk on one core (ZigZag/Timeloop style).

Each core of a step runs its share of the chunk: ``samples`` samples shared by
``cores`` cores (a part), the output rows divided between them. The work of
each op is its :class:`compiler.opshape.OpShape`; this module prices it.

* Matrix ops (``nn.conv2d``, ``matmul``): the 64x32 MAC array does one
  ``granule_m x granule_n`` block per cycle per element of the reduction, so
  ``cycles = ceil(M/64)*64 * ceil(N/32)*32 * K / macs_per_cycle`` with ``M`` the
  core's output rows (spatial x samples for a conv, rows for a matmul; each GEMM
  of a batched matmul is padded on its own), ``N`` the output channels / columns
  (per group for grouped convs), ``K`` the reduction; plus
  ``instr_overhead_cycles`` per matrix instruction, one per 64x32 output granule
  (accumulated over the whole reduction in the IM buffer).
* Grouped convolutions (depthwise: one channel per group) are mapped the way the
  NPU compiler's separate depthwise kernel would, the cheapest of: per group on
  the array (``N`` padded to 32 columns), channel-packed on the array (32 / N
  groups side by side with block-diagonal weights: ``N`` fills the granule, the
  reduction grows by the same factor), or on the vector unit (one MAC per lane
  per cycle, no matrix instructions). See ``sim/README.md``.
* Vector ops: FLOPs / lanes; special ops (exp, erf, divide, softmax, GELU) at the
  transcendental rate.
* INT8 ops (a quantized model, :attr:`compiler.opshape.OpShape.int8`) run at the
  target's INT8 rates: ``matrix.int8_rate`` times the MACs per cycle (the same
  granule and instruction overhead) and ``vector.int8_rate`` times the lanes; a
  matrix op's requantize to INT8 (``OpShape.requant_flops``) is vector work.
* Move ops (transposes, concats, gathers): bytes read and written at the L1 bandwidth;
  views (reshape, squeeze, ...) are free.
* Ops whose weights exceed half the weight buffer stream them in tiles and re-read
  their input once per extra tile: L1 traffic on the move engine when the input is
  in L1; an input streamed from LLB/DDR is read again from there (the engine
  charges those passes on the LLB port / DDR channel, see :func:`group_work`).

The engines (matrix, vector, move/MTE) overlap: a step's compute time is the max
of their sums plus a fill/drain of one tile per op (the first output tile of an op
cannot start before its input tile exists). Weights stream through a weight
buffer that holds at most two tiles, so the matrix engine cannot run ahead of
them: op by op, it takes at least as long as the op's weights need to arrive at
the weight path's bandwidth (``weight_bound_cycles``; contention with other
traffic is added by the engine's reservations). Embedding tables gathered in L1
(``tables``, :mod:`sim._gathers`) pass through the same buffer in turn, so their
arrival adds to that term too (a gather cannot read a table that has not arrived,
and the ops after it wait on the path behind it); tables that came via the LLB add
their arrival after compute start (``tables_wait``, from the timeline).
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from compiler.memo import memo_of
from compiler.opshape import (
    OpKind,
    OpShape,
    batched_exchange_bytes,
    batched_split,
    matrix_tiles,
    op_shapes,
    unit_rates,
    weight_path_bytes_per_cycle,
)
from compiler.views import produced_data, view_sources

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.target import MatrixUnit, Target

__all__ = ["ComputeCost", "GroupWork", "cuts_inside_samples", "group_cost", "group_work",
           "halo_reach"]

# OpKind members as module names for _cost (its loop runs per op of every new op set)
_VIEW, _MATRIX, _BATCHED = OpKind.VIEW, OpKind.MATRIX, OpKind.BATCHED_MATMUL
_VECTOR, _SPECIAL, _MOVE, _GATHER = OpKind.VECTOR, OpKind.SPECIAL, OpKind.MOVE, OpKind.GATHER
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
            time its weights take to arrive (uncontended weight-path bandwidth), plus
            the arrival of the tables gathered in L1.
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
class GroupWork:
    """What an op set moves besides its inputs, outputs and weights (placement-free).

    Attributes:
        cut_bytes: Bytes the cores of a part exchange over the NoC at each cut of one
            sample's output rows between two cores: conv/pooling halos
            (:attr:`OpShape.halo_bytes`), summed over the set's batched ops.
        rereads: ``(op index, input tensor, extra passes)`` of the ops whose weights
            exceed half the weight buffer and whose first input comes from outside
            the set (views followed to their source, :mod:`compiler.views`; the
            tensor named is that source, the group input): each extra weight tile
            reads that input again.
        gathers: The set's gather ops.
        gather_ops: Their op indices, in the same order.
        operands: The set's batched matmuls that read a second activation (attention's
            K and V), exchanged as :meth:`operand_exchange` says.
        halos: ``(halo bytes per cut, halo rows per side, input rows per sample)`` of
            each windowed op in :attr:`cut_bytes`: when a core's rows are fewer than
            the halo rows on one side (a dilated kernel), part of the halo comes from
            cores further away and crosses more NoC links.
    """

    cut_bytes: float
    rereads: tuple[tuple[int, str, int], ...]
    gathers: tuple[OpShape, ...]
    halos: tuple[tuple[float, float, int], ...] = ()
    operands: tuple[OpShape, ...] = ()
    gather_ops: tuple[int, ...] = ()

    def operand_exchange(self, samples: int, cores: int) -> float:
        """Bytes of batched matmuls' second operands crossing between a part's cores.

        Follows the same split as their compute and L1
        (:func:`compiler.opshape.batched_exchange_bytes`).
        """
        return sum(batched_exchange_bytes(d, samples, cores) for d in self.operands)

    def passes(self, streamed: frozenset[str]) -> dict[str, int]:
        """Extra passes over each streamed input (the engine charges them at the source)."""
        out: dict[str, int] = {}
        for _, t, extra in self.rereads:
            if t in streamed:
                out[t] = out.get(t, 0) + extra
        return out

    def remote_ops(self, streamed: frozenset[str]) -> frozenset[int]:
        """Ops whose re-reads are charged at the source (their input streams in)."""
        return frozenset(i for i, t, _ in self.rereads if t in streamed)


def group_work(graph: Graph, ops: tuple[int, ...], target: Target, cpack: Any = None
               ) -> GroupWork:
    """The :class:`GroupWork` of an op set on a target (cached per graph); ``cpack`` (the
    compiled plan maker, ``sim._ctime.load_pack``): the ops scanned in C
    (``sim/_cpack.c``'s ``work_scan``: the halo sum and the few ops the loop below does
    more with), the same value."""
    memo = memo_of(graph)
    half_wb = target.l1.weight_bytes / 2
    key = ("sim.work", ops, half_wb)
    hit: GroupWork | None = memo.get(key)
    if hit is None:
        shapes = op_shapes(graph)
        srows = None if cpack is None else _shape_rows(graph)
        scan = None if srows is None else cpack.work_scan(srows, ops, half_wb)
        cut = 0.0 if scan is None else scan[0]
        rereads = []
        gathers = []
        gather_ops = []
        halos = []
        operands: list[OpShape] = []
        sources: dict[str, str] | None = None
        made: frozenset[str] = frozenset()
        for i in (ops if scan is None else scan[1]):
            d = shapes[i]
            if d.batched:
                if scan is None:
                    cut += d.halo_bytes
                if d.kind == _BATCHED and d.operand_bytes:
                    operands.append(d)
                if d.halo_bytes and d.in_rows and d.in_bytes:
                    rows = d.halo_bytes / (d.in_bytes / d.in_rows)
                    halos.append((d.halo_bytes, rows / 2, d.in_rows))
            if d.kind == _GATHER:
                gathers.append(d)
                gather_ops.append(i)
            # a view of a group input is that input (issue 25 item 1): it streams from
            # wherever the input lives, once per extra weight tile
            # (compiler.views.reads_from_outside, the op set's views and outputs read once:
            # asking per op hashed a large op set's tuple twice per matmul)
            if d.weight_bytes > half_wb and d.kind.is_matrix and graph.ops[i].inputs:
                if sources is None:
                    sources, made = view_sources(graph, ops), produced_data(graph, ops)
                first = graph.ops[i].inputs[0]
                src = sources.get(first, first)
                if src not in made:
                    rereads.append((i, src, math.ceil(d.weight_bytes / half_wb) - 1))
        hit = memo[key] = GroupWork(cut, tuple(rereads), tuple(gathers), tuple(halos),
                                    tuple(operands), tuple(gather_ops))
    return hit


def halo_reach(rows_per_core: float, side_rows: float, cores: int) -> tuple[float, ...]:
    """Fraction of one side's halo that comes from the core ``d`` places away, d = 1, 2, ...

    A core holding ``rows_per_core`` rows of a sample needs ``side_rows`` rows beyond
    each of its edges: the first ``rows_per_core`` of them are its neighbour's, the
    next ones the next core's, and so on (at most ``cores - 1`` places away).
    ``(1.0,)`` when the neighbour holds them all.
    """
    if rows_per_core <= 0 or side_rows <= rows_per_core or cores < 3:
        return (1.0,)
    parts: list[float] = []
    left = side_rows
    while left > 1e-9 and len(parts) < cores - 1:
        take = min(rows_per_core, left)
        parts.append(take)
        left -= take
    total = sum(parts)
    return tuple(p / total for p in parts)


def cuts_inside_samples(samples: int, cores: int) -> int:
    """Cuts that fall inside a sample when ``samples`` samples' rows go to ``cores`` cores.

    The rows (sample-major) are cut into ``cores`` equal pieces; of the
    ``cores - 1`` cuts, ``gcd(samples, cores) - 1`` fall between samples.
    """
    return cores - math.gcd(samples, cores)


def group_cost(
    graph: Graph, ops: tuple[int, ...], samples: int, cores: int, target: Target,
    step_cores: int = 1, remote: frozenset[int] = frozenset(), tables: float = 0.0,
    tables_wait: float = 0.0, cpack: Any = None,
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
        remote: Ops whose weight-tile re-reads of their input are charged at the
            input's source (it streams from LLB/DDR), not on the L1 move engine.
        tables: Bytes of the embedding tables the step gathers in L1
            (:attr:`sim._gathers.GatherPlan.l1_table_bytes`): they pass through the
            weight buffer in turn, and their arrival at the weight path's bandwidth
            adds to ``weight_bound_cycles``.
        tables_wait: Cycles after compute starts at which the step's tables that came
            via the LLB (:func:`sim._gathers.plan_via_llb`) have all arrived: added to
            ``weight_bound_cycles`` as the direct tables' arrival is (not cached: it
            comes from the timeline).
        cpack: The compiled plan maker (``sim._ctime.load_pack``): the sums made by
            ``sim/_cpack.c``'s ``op_cost`` (the same; :func:`_cost` is the reference).

    Cached per graph, op set, sample count, core counts, re-read placement, tables and
    target.
    """
    memo = memo_of(graph)
    key = ("sim.cost", target.hash, ops, samples, cores, step_cores, remote, tables)
    hit: ComputeCost | None = memo.get(key)
    if hit is None:
        got = None if cpack is None else _cost_c(cpack, graph, ops, samples, cores, target,
                                                  step_cores, remote)
        hit = (_cost(op_shapes(graph), ops, samples, cores, target, step_cores, remote)
               if got is None else ComputeCost(*got))
        if tables:
            wbw = weight_path_bytes_per_cycle(target, step_cores)
            hit = replace(hit, weight_bound_cycles=hit.weight_bound_cycles + tables / wbw)
        memo[key] = hit
    if tables_wait > 0:
        hit = replace(hit, weight_bound_cycles=hit.weight_bound_cycles + tables_wait)
    return hit


def grouped_conv_cycles(d: OpShape, rows: float, mat: MatrixUnit, lanes: int
                        ) -> tuple[str, float, float]:
    """The cheapest mapping of a grouped conv's ``rows`` output rows on one core.

    Returns ``(engine, cycles, useful matrix cycles)``: engine ``"matrix"`` (per
    group, or channel-packed) or ``"vector"``.
    """
    gm, gn, macs, ovh = mat.granule_m, mat.granule_n, mat.macs_per_cycle, mat.instr_overhead_cycles
    mt = matrix_tiles(d, rows, mat)
    best = ("matrix", mt.padded_cycles + mt.tiles * ovh, mt.useful_cycles)
    pack = gn // d.n if d.n < gn else 1
    if pack > 1:
        packs = math.ceil(d.groups / pack)
        tiles = packs * math.ceil(rows / gm) * math.ceil(pack * d.n / gn)
        cyc = tiles * (gm * gn * pack * d.k / macs + ovh)
        if cyc < best[1]:
            best = ("matrix", cyc, mt.useful_cycles)
    vec = rows * d.groups * d.n * d.k / lanes
    if vec < best[1]:
        best = ("vector", vec, 0.0)
    return best


_TWO53 = float(2**53)


def _shape_rows(graph: Graph) -> bytes | None:
    """Each op's :class:`OpShape` fields that :func:`_cost` and :func:`group_work` read, as
    ``sim/_cpack.c``'s
    rows of doubles (remembered per graph); None when a value is not exact as a double."""
    memo = memo_of(graph)
    hit: tuple[bytes | None] | None = memo.get("sim.shape_rows")
    if hit is None:
        vals: list[float] = []
        for d in op_shapes(graph):
            vals += (int(d.kind), 1.0 if d.batched else 0.0, d.amount, d.groups, d.gemm_rows,
                     d.n, d.k, d.weight_bytes, d.in_bytes, d.requant_flops,
                     1.0 if d.int8 else 0.0, d.halo_bytes, d.operand_bytes, d.in_rows)
        exact = all(abs(v) < _TWO53 and float(v) == v for v in vals)
        hit = memo["sim.shape_rows"] = (struct.pack(f"{len(vals)}d", *vals) if exact else None,)
    return hit[0]


def _cost_c(cpack: Any, graph: Graph, ops: tuple[int, ...], s: int, k: int, target: Target,
            step_cores: int, remote: frozenset[int]) -> tuple[float, ...] | None:
    """:func:`_cost`'s sums made by ``sim/_cpack.c`` (``op_cost``), or None (a value or
    product past what a double holds exactly: priced in Python)."""
    rows = _shape_rows(graph)
    if rows is None:
        return None
    mat, vec = target.matrix, target.vector
    params = (mat.granule_m, mat.granule_n, mat.macs_per_cycle,
              round(mat.macs_per_cycle * mat.int8_rate), mat.instr_overhead_cycles,
              float(vec.lanes), vec.lanes * vec.int8_rate, vec.transcendental_cycles_per_element,
              target.l1.bytes_per_cycle, target.l1.weight_bytes / 2,
              weight_path_bytes_per_cycle(target, step_cores), _VECTOR_TILE)
    if not all(abs(v) < _TWO53 for v in params):
        return None
    got: tuple[float, ...] | None = cpack.op_cost(rows, ops, s, k, struct.pack("12d", *params),
                                                  remote)
    return got


def _cost(
    shapes: tuple[OpShape, ...], ops: tuple[int, ...], s: int, k: int, target: Target,
    step_cores: int, remote: frozenset[int],
) -> ComputeCost:
    mat, vec = target.matrix, target.vector
    gm, gn, macs, ovh = mat.granule_m, mat.granule_n, mat.macs_per_cycle, mat.instr_overhead_cycles
    lanes: float = vec.lanes
    tcpe = vec.transcendental_cycles_per_element
    l1bw = target.l1.bytes_per_cycle
    half_wb = target.l1.weight_bytes / 2
    wbw = weight_path_bytes_per_cycle(target, step_cores)
    mme = vme = move = fill = useful = wbound = 0.0
    fp_mat, fp_lanes = mat, float(lanes)
    for i in ops:
        d = shapes[i]
        kind = d.kind
        if kind == _VIEW:
            continue
        is_matrix = kind in (_MATRIX, _BATCHED)
        # INT8 ops at the units' INT8 rates (compiler.opshape.unit_rates)
        mat, lanes = unit_rates(d, target) if d.int8 else (fp_mat, fp_lanes)
        macs = mat.macs_per_cycle
        share = math.ceil(s * d.amount / k) if d.batched else math.ceil(d.amount)
        if kind == _MATRIX and d.groups > 1:
            engine, c, u = grouped_conv_cycles(d, share, mat, round(lanes))
            if engine == "vector":
                vme += c
                fill += min(c, _VECTOR_TILE / lanes)
                wbound += d.weight_bytes / wbw
            else:
                mme += c
                useful += u
                fill += d.k * gm * gn / macs + ovh
                wbound += max(c, d.weight_bytes / wbw)
        elif is_matrix:
            if kind == _BATCHED and d.batched:
                # whole heads per core, or a head's rows over cores (compiler.opshape)
                sp = batched_split(d, s, k)
                mt = matrix_tiles(d, sp.gemms, mat, sp.rows)
            else:
                mt = matrix_tiles(d, share, mat)
            t_op = mt.padded_cycles + mt.tiles * ovh
            mme += t_op
            useful += mt.useful_cycles
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
        if d.requant_flops:  # the vector unit requantizes the array's INT8 results
            c = share * (d.requant_flops / max(d.amount, 1e-9)) / lanes
            vme += c
            fill += min(c, _VECTOR_TILE / lanes)
        if d.weight_bytes > half_wb and is_matrix and i not in remote:
            extra = math.ceil(d.weight_bytes / half_wb) - 1
            streamed = s * d.in_bytes / k if d.batched else d.in_bytes
            move += extra * streamed / l1bw
        if d.weight_bytes and not is_matrix:
            wbound += d.weight_bytes / wbw
    return ComputeCost(mme, vme, move, fill, useful, wbound)
