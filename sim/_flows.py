"""Bytes of one reservation, accumulated per resource, and what a group's op set moves
regardless of placement (used by :mod:`sim._engine`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from compiler.derive import group_io
from compiler.footprint import GATHER_OPS, sample_bytes, weight_bytes
from compiler.memo import memo_of

if TYPE_CHECKING:
    from compiler.graph import Graph
    from sim._moves import MovePlan

__all__ = ["Flows", "GroupStatic", "group_static"]


class Flows:
    """Accumulates resource -> bytes and per-core arrivals of one reservation."""

    __slots__ = ("ddr", "flows", "hops", "incoming", "noc", "staying")

    def __init__(self) -> None:
        self.flows: dict[int, float] = {}
        self.incoming: dict[int, float] = {}
        self.staying: dict[int, float] = {}
        self.noc = 0.0
        self.ddr = 0.0
        self.hops = 0

    def add(self, plan: MovePlan, nbytes: float, cpack: Any = None) -> None:
        """Adds ``plan`` times ``nbytes``; ``cpack`` (``sim._ctime.load_pack``'s module):
        added by ``sim/_cpack.c``'s ``add_plan``, the same sums in the same order (this
        method's loops are the reference)."""
        if nbytes <= 0:
            return
        if cpack is not None:
            cpack.add_plan(self, plan, nbytes)
            return
        f = self.flows
        get = f.get
        for r, c in plan.flows:
            f[r] = get(r, 0.0) + c * nbytes
        if plan.incoming:
            f = self.incoming
            get = f.get
            for r, c in plan.incoming:
                f[r] = get(r, 0.0) + c * nbytes
        if plan.staying:
            f = self.staying
            get = f.get
            for r, c in plan.staying:
                f[r] = get(r, 0.0) + c * nbytes
        self.noc += plan.noc * nbytes
        self.ddr += plan.ddr * nbytes
        if plan.hops > self.hops:
            self.hops = plan.hops


@dataclass(frozen=True)
class GroupStatic:
    """What a group's op set costs regardless of placement (cached per graph).

    Only the op set's weights are read from the capacity model's analysis
    (:func:`compiler.footprint.weight_bytes`, equal to its footprint's ``weight_bytes``):
    the rest of the footprint, which the compiled search core never makes in Python, cost
    ~10 % of a BERT-base b8 measurement when a tune met a new op set (issue 20).
    """

    inputs: tuple[tuple[str, int, int], ...]  # (tensor, bytes per sample, fixed bytes)
    output: str
    out_sample: int
    out_fixed: int
    weights: int
    first_tile: int
    first_op: int  # the op whose weights make the first tile (len(graph.ops) when none)


def group_static(graph: Graph, ops: tuple[int, ...], half_wb: float) -> GroupStatic:
    """A group's :class:`GroupStatic` (its first weight tile at most ``half_wb``)."""
    memo = memo_of(graph)
    key = ("sim.group", ops, half_wb)
    hit: GroupStatic | None = memo.get(key)
    if hit is None:
        io = group_io(graph, ops)
        weights = weight_bytes(graph, ops)
        first_op = next((i for i in ops
                         if graph.ops[i].weights and graph.ops[i].op_type not in GATHER_OPS),
                        len(graph.ops))
        first = graph.weight_bytes_of(graph.ops[first_op]) if first_op < len(graph.ops) else 0
        out = io.outputs[0]
        osb, ofb = sample_bytes(graph, out)
        hit = GroupStatic(
            tuple((t, *sample_bytes(graph, t)) for t in io.inputs), out, osb, ofb,
            weights, int(min(first, half_wb, weights)), first_op,
        )
        memo[key] = hit
    return hit
