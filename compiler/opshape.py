"""``OpShape``: the shape of each op's work, as the NPU's engines see it.

One definition shared by the simulator (which prices it in cycles) and the cost
model (which turns it into features); neither re-derives it from the graph.
Everything here is timing-free: how many output rows, columns and reduction
elements a matrix op has, how much vector work or data movement the others do,
how many weight bytes each op reads and how big its streamed input is. The
prices (padding to the matrix granule, instruction counts) are small helpers
that take the :class:`~compiler.target.MatrixUnit`.

Amounts are **per sample** for an op whose output carries the batch
(``batched``) and whole otherwise, so a caller scales them by the samples a
core runs.

Kinds (:class:`OpKind`):

* ``MATRIX``: a convolution or a matmul whose second operand is shared by every
  row (weights): ``amount`` output rows (spatial positions, or matmul rows),
  ``groups`` independent GEMMs of ``n`` output columns each (a grouped conv),
  ``k`` the reduction length;
* ``BATCHED_MATMUL``: a matmul of two activations (attention): ``amount``
  independent GEMMs of ``gemm_rows`` x ``n`` outputs, reduction ``k``; each is
  padded on its own;
* ``VECTOR`` / ``SPECIAL``: ``amount`` FLOPs on the vector unit (special: exp,
  erf, divide, ... at the transcendental rate);
* ``MOVE``: ``amount`` output bytes copied (transposes, concats, slices);
* ``GATHER``: ``amount`` bytes of table rows gathered (embedding lookups),
  ``row_bytes`` each, from a table of ``table_bytes``;
* ``VIEW``: free (reshape, squeeze, ...).

Two facts say what the cores of a part exchange when they split one sample's
output rows (the simulator charges them on the NoC): ``halo_bytes``, the input
rows a windowed op (convolution, pooling) needs from the neighbouring core at
one such cut, and ``operand_bytes``, the second operand of a batched matmul
(attention's K or V), which every core computing rows of a sample needs whole.

Example:
    >>> shapes = op_shapes(graph)
    >>> s = shapes[12]
    >>> s.kind, s.amount, s.n, s.k
    >>> padded_matrix_cycles(s, rows=s.amount * 2, matrix=target.matrix)
"""

from __future__ import annotations

import dataclasses
import enum
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from compiler._qdq import REQUANTIZE_ATTR, REQUANTIZE_FLOPS_PER_ELEMENT, is_int8_op
from compiler.footprint import GATHER_OPS, batched_tensors
from compiler.memo import memo_of
from compiler.optable import op_spec, prod
from compiler.views import VIEW_OPS

if TYPE_CHECKING:
    from compiler.graph import Graph, Op
    from compiler.target import MatrixUnit, Target

__all__ = [
    "BatchedSplit",
    "MatrixTiles",
    "OpKind",
    "OpShape",
    "array_cycles",
    "batched_exchange_bytes",
    "batched_split",
    "host_flops",
    "matrix_tiles",
    "op_shape",
    "op_shapes",
    "unit_rates",
    "useful_matrix_cycles",
    "weight_path_bytes_per_cycle",
]


class OpKind(enum.IntEnum):
    """Which engine does an op's work and how it is counted (see the module doc)."""

    MATRIX = 0
    BATCHED_MATMUL = 1
    VECTOR = 2
    SPECIAL = 3
    MOVE = 4
    VIEW = 5
    GATHER = 6

    @property
    def is_matrix(self) -> bool:
        """Runs on the matrix array."""
        return self in (OpKind.MATRIX, OpKind.BATCHED_MATMUL)


@dataclass(frozen=True)
class OpShape:
    """The work of one op (frozen, timing-free; see the module doc for the kinds).

    Attributes:
        kind: The :class:`OpKind`.
        batched: The op's output carries the batch: ``amount`` and ``in_bytes`` are
            per sample.
        amount: Output rows (``MATRIX``), GEMMs (``BATCHED_MATMUL``), FLOPs
            (``VECTOR``/``SPECIAL``) or bytes (``MOVE``/``GATHER``); 0 for views.
        groups: Independent GEMMs sharing the rows (grouped convolutions).
        gemm_rows: Rows of one GEMM (``BATCHED_MATMUL``; 1 otherwise).
        n: Output columns (channels) per GEMM.
        k: Reduction length (multiply-accumulates per output element).
        weight_bytes: Constant bytes the op reads through the weight buffer (gather
            tables excluded: their rows are ``amount``).
        in_bytes: Bytes of the op's first (streamed) input, per sample if batched.
        halo_bytes: Input bytes a windowed op (kernel taller than its stride) needs
            from the neighbouring core where one sample's output rows are cut
            between two cores: ``(dilated kernel height - stride)`` input rows of
            every input channel.
        operand_bytes: ``BATCHED_MATMUL``: bytes per sample of the second operand,
            needed whole by every core that computes rows of that sample.
        table_bytes: ``GATHER``: bytes of the table rows are gathered from (0 when
            the table is an activation, already on chip).
        row_bytes: ``GATHER``: bytes of one gathered row (one DDR access).
        window_rows: Windowed ops (convolution, pooling): input rows one output row
            reads, ``dilation x (kernel - 1) + 1`` (0 otherwise). A streamed input
            must hold that many rows in L1 at once.
        in_rows: Windowed ops: input rows per sample (the height the rows are cut
            along; ``in_bytes / in_rows`` is one input row, every channel and column).
        requant_flops: A matrix op whose results are requantized to INT8 (a folded
            QuantizeLinear, ``compiler._qdq``): that vector work, per sample if batched.
        int8: The op computes on INT8 operands (:func:`compiler._qdq.is_int8_op`): the
            matrix and vector units run it at their INT8 rate (:func:`unit_rates`).
    """

    kind: OpKind
    batched: bool
    amount: float
    groups: int = 1
    gemm_rows: int = 1
    n: int = 1
    k: int = 1
    weight_bytes: int = 0
    in_bytes: float = 0.0
    halo_bytes: float = 0.0
    operand_bytes: float = 0.0
    table_bytes: int = 0
    row_bytes: int = 0
    window_rows: int = 0
    in_rows: int = 0
    requant_flops: float = 0.0
    int8: bool = False

    @property
    def macs(self) -> float:
        """Multiply-accumulates of a matrix op (per sample when batched; 0 otherwise)."""
        if self.kind == OpKind.MATRIX:
            return self.amount * self.groups * self.n * self.k
        if self.kind == OpKind.BATCHED_MATMUL:
            return self.amount * self.gemm_rows * self.n * self.k
        return 0.0


@dataclass(frozen=True)
class MatrixTiles:
    """A matrix op's work on one core, counted in ``granule_m x granule_n`` output tiles.

    Attributes:
        tiles: Output tiles (one matrix instruction each, accumulated over ``k``).
        padded_cycles: ``tiles * granule_m * granule_n * k / macs_per_cycle``: the
            array's time with every tile padded to the granule (no overhead).
        useful_cycles: The same without padding (MACs / macs_per_cycle).
    """

    tiles: int
    padded_cycles: float
    useful_cycles: float


@dataclass(frozen=True)
class BatchedSplit:
    """How the cores of a part share a batched matmul (attention): one split for all costs.

    The part's ``samples x amount`` GEMMs (heads) go to its cores whole while there
    are at least as many GEMMs as cores (a head split: the busiest core has
    ``ceil(GEMMs / cores)``); with fewer GEMMs than cores each GEMM's rows are cut
    over ``cores // GEMMs`` cores (a row split: the busiest core has one GEMM's
    ``ceil(rows / that)`` rows). Compute, the NoC exchange of the second operand and
    L1 all follow it, and all take the busiest core's share.

    Attributes:
        gemms: GEMMs on the busiest core.
        rows: Rows of each of them on that core.
        cores_per_gemm: Cores sharing one GEMM's rows (1 for a head split).
    """

    gemms: int
    rows: int
    cores_per_gemm: int


def batched_split(shape: OpShape, samples: int, cores: int) -> BatchedSplit:
    """The :class:`BatchedSplit` of a ``BATCHED_MATMUL`` for ``samples`` samples on ``cores`` cores."""
    total = max(1, math.ceil(shape.amount * samples - 1e-9))
    if total >= cores:
        return BatchedSplit(math.ceil(total / cores), shape.gemm_rows, 1)
    per = cores // total
    return BatchedSplit(1, math.ceil(shape.gemm_rows / per), per)


def batched_exchange_bytes(shape: OpShape, samples: int, cores: int) -> float:
    """Bytes of the second operand (K, V) that cross between the cores of a part.

    The operand comes from ops that cut the part's rows sample-major over its
    cores, so a sample cut into ``p`` pieces has ``(p - 1) / p`` of each GEMM's
    operand away from any one core. With a head split each GEMM's operand is
    gathered once by the core computing it; with a row split by each of the
    ``cores_per_gemm`` cores computing it.
    """
    if cores < 2 or not shape.operand_bytes:
        return 0.0
    split = batched_split(shape, samples, cores)
    if samples < cores:
        remote = 1.0 - samples / cores  # pieces per sample: cores / samples
        return samples * shape.operand_bytes * remote * split.cores_per_gemm
    # more samples than cores: the samples cut in two (at most one per cut) hold half
    # their operand on each side
    cuts = cores - math.gcd(samples, cores)
    return cuts * shape.operand_bytes / 2


def matrix_tiles(shape: OpShape, share: float, matrix: MatrixUnit,
                 gemm_rows: float | None = None) -> MatrixTiles:
    """Tiles of a matrix op when one core computes ``share`` of its ``amount``.

    Args:
        shape: A ``MATRIX`` or ``BATCHED_MATMUL`` op.
        share: The core's output rows (``MATRIX``) or GEMMs (``BATCHED_MATMUL``),
            already rounded up to whole rows / GEMMs.
        matrix: The matrix unit (granule and MACs per cycle).
        gemm_rows: ``BATCHED_MATMUL``: rows of each GEMM on the core (default: all
            of them; fewer under a row split, :func:`batched_split`).
    """
    reps: float
    rows: float
    if shape.kind == OpKind.MATRIX:
        reps, rows = shape.groups, share
    else:
        reps, rows = share, shape.gemm_rows if gemm_rows is None else gemm_rows
    gm, gn, macs = matrix.granule_m, matrix.granule_n, matrix.macs_per_cycle
    tiles = int(reps * math.ceil(rows / gm) * math.ceil(shape.n / gn))
    return MatrixTiles(tiles, tiles * gm * gn * shape.k / macs,
                       reps * rows * shape.n * shape.k / macs)


def unit_rates(shape: OpShape, target: Target) -> tuple[MatrixUnit, float]:
    """The matrix unit and the vector lanes that price ``shape``, at its data type.

    An INT8 op (:attr:`OpShape.int8`) runs at ``matrix.int8_rate`` times the FP16 MACs
    per cycle (same 64x32 granule, same instruction overhead) and on
    ``vector.int8_rate`` times the FP16 lanes; anything else at the FP16 rates.
    """
    if not shape.int8:
        return target.matrix, float(target.vector.lanes)
    mat = target.matrix
    fast = dataclasses.replace(mat, macs_per_cycle=round(mat.macs_per_cycle * mat.int8_rate))
    return fast, target.vector.lanes * target.vector.int8_rate


def array_cycles(d: OpShape, batch: int, matrix: MatrixUnit) -> float:
    """The fewest matrix-engine cycles, summed over cores, any schedule spends on one op.

    However the op's output rows (GEMMs of a batched matmul) are cut among chunks,
    parts and cores, the pieces together cover them all, and each piece is padded to
    whole 64x32 granules, one instruction each (``sim/_model.py``): so the op costs at
    least its rows in one piece, ``matrix_tiles`` of all of them. ``d`` is a matrix op
    of ``batch`` samples (``MATRIX`` with one group, or ``BATCHED_MATMUL``).
    """
    share = math.ceil(d.amount * (batch if d.batched else 1) - 1e-9)
    mt = matrix_tiles(d, share, matrix)
    return mt.padded_cycles + mt.tiles * matrix.instr_overhead_cycles


def useful_matrix_cycles(shape: OpShape, share: float, matrix: MatrixUnit) -> float:
    """MACs of ``share`` rows / GEMMs of a matrix op over the array's MACs per cycle."""
    return matrix_tiles(shape, share, matrix).useful_cycles


def op_shapes(graph: Graph) -> tuple[OpShape, ...]:
    """The :class:`OpShape` of every op of ``graph``, in op order (remembered beside the graph)."""
    memo = memo_of(graph)
    hit: tuple[OpShape, ...] | None = memo.get("opshapes")
    if hit is None:
        batched = batched_tensors(graph)
        hit = memo["opshapes"] = tuple(op_shape(graph, op, batched) for op in graph.ops)
    return hit


def op_shape(graph: Graph, op: Op, batched: frozenset[str] | None = None) -> OpShape:
    """The :class:`OpShape` of one op.

    Args:
        graph: The model (tensor sizes in its ``float_bytes``).
        op: One of its ops.
        batched: ``compiler.footprint.batched_tensors(graph)`` (computed when omitted).
    """
    shape = _op_shape(graph, op, batched)
    if shape.kind.is_matrix and op.attr(REQUANTIZE_ATTR):
        out = graph.tensors[op.output]
        per = graph.batch if shape.batched else 1
        shape = dataclasses.replace(shape, requant_flops=REQUANTIZE_FLOPS_PER_ELEMENT * out.elements / per)
    if shape.kind != OpKind.VIEW and is_int8_op(op, graph.tensors):
        return dataclasses.replace(shape, int8=True)
    return shape


def _op_shape(graph: Graph, op: Op, batched: frozenset[str] | None) -> OpShape:
    if batched is None:
        batched = batched_tensors(graph)
    out = graph.tensors[op.output]
    is_b = op.output in batched
    per = graph.batch if is_b else 1
    wbytes = 0 if op.op_type in GATHER_OPS else graph.weight_bytes_of(op)
    in_bytes = graph.nbytes(op.inputs[0]) / per if op.inputs else 0.0
    if op.op_type in VIEW_OPS:
        return OpShape(OpKind.VIEW, is_b, 0.0)
    unit = op_spec(op.op_type).unit
    halo, wrows, hrows = _window(graph, op) if is_b else (0.0, 0, 0)
    if unit == "matrix" and op.macs:
        elems = max(out.elements, 1)
        k = max(1, round(op.macs / elems))
        if op.op_type.startswith("nn.conv"):
            groups = int(op.attr("groups", 1) or 1)
            layout = str(op.attr("data_layout", "NCHW"))
            co = out.shape[-1] if layout.endswith("C") else out.shape[1]
            rows = elems / co
            return OpShape(OpKind.MATRIX, is_b, rows / per, groups, 1, max(1, co // groups), k,
                           wbytes, in_bytes, halo_bytes=halo, window_rows=wrows, in_rows=hrows)
        n = out.shape[-1] if out.shape else 1
        two_acts = len(op.inputs) >= 2 and op.inputs[1] in batched
        if two_acts and len(out.shape) >= 2:
            mg = out.shape[-2]
            gemms = prod(out.shape[:-2])
            operand = graph.nbytes(op.inputs[1]) / per if is_b else 0.0
            return OpShape(OpKind.BATCHED_MATMUL, is_b, gemms / per, 1, mg, n, k, wbytes,
                           in_bytes, operand_bytes=operand)
        return OpShape(OpKind.MATRIX, is_b, elems / n / per, 1, 1, n, k, wbytes, in_bytes)
    if op.op_type in GATHER_OPS:
        table, row = _table(graph, op)
        return OpShape(OpKind.GATHER, is_b, graph.nbytes(op.output) / per, table_bytes=table,
                       row_bytes=row)
    if unit == "move":
        return OpShape(OpKind.MOVE, is_b, graph.nbytes(op.output) / per)
    # a user op (compiler.ops): its TE body's lane operations, padded to the vector unit's
    # 64 lanes by its schedule's innermost vectorised extent
    pad = float(op.attr("graphtune.lane_pad", 1.0) or 1.0)
    work = (op.flops or out.elements) * pad / per
    kind = OpKind.SPECIAL if unit == "special" else OpKind.VECTOR
    return OpShape(kind, is_b, work, weight_bytes=wbytes, in_bytes=in_bytes, halo_bytes=halo,
                   window_rows=wrows, in_rows=hrows)


_WINDOWED = frozenset({"nn.conv2d", "nn.conv3d", "nn.max_pool2d", "nn.avg_pool2d"})


def _pair(v: object, default: int) -> tuple[int, ...]:
    if isinstance(v, list | tuple) and v:
        return tuple(int(x) for x in v)
    if isinstance(v, int):
        return (v,)
    return (default,)


def _window(graph: Graph, op: Op) -> tuple[float, int, int]:
    """``(halo bytes, window rows, input rows)`` of a windowed op (zeros for others).

    Output rows are cut along the outermost spatial axis (rows are laid out
    sample, then height, then width), so at a cut the two cores need
    ``dilated kernel - stride`` input rows of each other's parts, every column and
    channel of them (:attr:`OpShape.halo_bytes`); one output row reads
    ``dilated kernel`` input rows (:attr:`OpShape.window_rows`).
    """
    if op.op_type not in _WINDOWED or not op.inputs:
        return 0.0, 0, 0
    x = graph.tensors[op.inputs[0]]
    if len(x.shape) < 4:
        return 0.0, 0, 0
    layout = str(op.attr("data_layout", op.attr("layout", "NCHW")) or "NCHW")
    if op.op_type.startswith("nn.conv"):
        if not op.weights:
            return 0.0, 0, 0
        wshape = graph.tensors[op.weights[0]].shape
        kernel = int(wshape[2]) if len(wshape) >= 4 else 1
    else:
        kernel = _pair(op.attr("pool_size"), 1)[0]
    stride = _pair(op.attr("strides"), 1)[0]
    dilation = _pair(op.attr("dilation"), 1)[0]
    window = dilation * (kernel - 1) + 1
    rows = window - stride
    if layout.endswith("C"):  # NHWC: row = W x C
        row_elems = prod(x.shape[2:])
        height = int(x.shape[1])
    else:  # NCHW: row = C x W (one line of every channel)
        row_elems = x.shape[1] * prod(x.shape[3:])
        height = int(x.shape[2])
    if window <= 1:
        return 0.0, 0, height
    per_elem = graph.nbytes(op.inputs[0]) / max(x.elements, 1)
    return float(max(rows, 0) * row_elems * per_elem), window, height


def _table(graph: Graph, op: Op) -> tuple[int, int]:
    """``(table bytes, row bytes)`` of a gather; the table is its constant operand."""
    if not op.weights:
        out = graph.tensors[op.output]
        last = out.shape[-1] if out.shape else 1
        return 0, max(1, graph.nbytes(op.output) // max(out.elements, 1) * last)
    t = graph.tensors[op.weights[0]]
    axis = int(op.attr("axis", 0) or 0) if op.op_type == "take" else 0
    if axis < 0:
        axis += len(t.shape)
    per_elem = graph.nbytes(t.name) / max(t.elements, 1)
    row = prod(t.shape[axis + 1:]) * per_elem
    return graph.nbytes(t.name), max(1, round(row))


def host_flops(graph: Graph, op: Op) -> float:
    """FLOPs of one op on the host (a host segment, :mod:`sim._host`), for the whole batch of ``graph``.

    A transposed convolution is twice ``input elements x output channels per group x
    kernel area`` (the NPU import counts MACs of NPU matrix ops only); another host op
    its import FLOPs, at least one per output element.
    """
    if op.op_type == "nn.conv2d_transpose" and len(op.weights) >= 1 and op.inputs:
        x = graph.tensors[op.inputs[0]].shape
        w = graph.tensors[op.weights[0]].shape  # IOHW: (Ci, Co / groups, kh, kw)
        return 2.0 * prod(x) * prod(w[1:])
    return float(max(op.flops, 2 * op.macs, graph.tensors[op.output].elements))


def weight_path_bytes_per_cycle(target: Target, step_cores: int) -> float:
    """Uncontended bandwidth of weights from DDR into one core's weight buffer."""
    port = target.dma.core_bytes_per_cycle
    if target.llb.broadcast:
        return min(target.ddr.bytes_per_cycle, target.llb.bytes_per_cycle / 2, port)
    return min(target.ddr.bytes_per_cycle / max(step_cores, 1), port)
