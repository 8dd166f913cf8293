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

import enum
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from compiler.footprint import GATHER_OPS, VIEW_OPS, batched_tensors
from compiler.memo import memo_of
from compiler.optable import op_spec, prod

if TYPE_CHECKING:
    from compiler.graph import Graph, Op
    from compiler.target import MatrixUnit

__all__ = [
    "MatrixTiles",
    "OpKind",
    "OpShape",
    "array_cycles",
    "matrix_tiles",
    "op_shape",
    "op_shapes",
    "useful_matrix_cycles",
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


def matrix_tiles(shape: OpShape, share: float, matrix: MatrixUnit) -> MatrixTiles:
    """Tiles of a matrix op when one core computes ``share`` of its ``amount``.

    Args:
        shape: A ``MATRIX`` or ``BATCHED_MATMUL`` op.
        share: The core's output rows (``MATRIX``) or GEMMs (``BATCHED_MATMUL``),
            already rounded up to whole rows / GEMMs.
        matrix: The matrix unit (granule and MACs per cycle).
    """
    reps: float
    rows: float
    if shape.kind == OpKind.MATRIX:
        reps, rows = shape.groups, share
    else:
        reps, rows = share, shape.gemm_rows
    gm, gn, macs = matrix.granule_m, matrix.granule_n, matrix.macs_per_cycle
    tiles = int(reps * math.ceil(rows / gm) * math.ceil(shape.n / gn))
    return MatrixTiles(tiles, tiles * gm * gn * shape.k / macs,
                       reps * rows * shape.n * shape.k / macs)


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
    halo = _halo_bytes(graph, op) if is_b else 0.0
    if unit == "matrix" and op.macs:
        elems = max(out.elements, 1)
        k = max(1, round(op.macs / elems))
        if op.op_type.startswith("nn.conv"):
            groups = int(op.attr("groups", 1) or 1)
            layout = str(op.attr("data_layout", "NCHW"))
            co = out.shape[-1] if layout.endswith("C") else out.shape[1]
            rows = elems / co
            return OpShape(OpKind.MATRIX, is_b, rows / per, groups, 1, max(1, co // groups), k,
                           wbytes, in_bytes, halo_bytes=halo)
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
    return OpShape(kind, is_b, work, weight_bytes=wbytes, in_bytes=in_bytes, halo_bytes=halo)


_WINDOWED = frozenset({"nn.conv2d", "nn.conv3d", "nn.max_pool2d", "nn.avg_pool2d"})


def _pair(v: object, default: int) -> tuple[int, ...]:
    if isinstance(v, list | tuple) and v:
        return tuple(int(x) for x in v)
    if isinstance(v, int):
        return (v,)
    return (default,)


def _halo_bytes(graph: Graph, op: Op) -> float:
    """Input bytes across one cut of a sample's output rows (see :attr:`OpShape.halo_bytes`).

    Output rows are cut along the outermost spatial axis (rows are laid out
    sample, then height, then width), so a core needs ``kernel - stride`` input
    rows of its neighbour's part, every column and channel of them.
    """
    if op.op_type not in _WINDOWED or not op.inputs:
        return 0.0
    x = graph.tensors[op.inputs[0]]
    if len(x.shape) < 4:
        return 0.0
    layout = str(op.attr("data_layout", op.attr("layout", "NCHW")) or "NCHW")
    if op.op_type.startswith("nn.conv"):
        if not op.weights:
            return 0.0
        wshape = graph.tensors[op.weights[0]].shape
        kernel = int(wshape[2]) if len(wshape) >= 4 else 1
    else:
        kernel = _pair(op.attr("pool_size"), 1)[0]
    stride = _pair(op.attr("strides"), 1)[0]
    dilation = _pair(op.attr("dilation"), 1)[0]
    rows = dilation * (kernel - 1) + 1 - stride
    if rows <= 0:
        return 0.0
    if layout.endswith("C"):  # NHWC: row = W x C
        row_elems = prod(x.shape[2:])
    else:  # NCHW: row = C x W (one line of every channel)
        row_elems = x.shape[1] * prod(x.shape[3:])
    per_elem = graph.nbytes(op.inputs[0]) / max(x.elements, 1)
    return float(rows * row_elems * per_elem)


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
