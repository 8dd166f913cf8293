"""Which tensor a view really reads: the one answer to "is this input inside the group?".

A view (``reshape``, ``squeeze``, ``expand_dims``, ``flatten``, ``tuple_get_item``)
moves no bytes: its output is its input under another shape. So whether an op of
a group reads data produced inside the group, or data that comes from outside
(another core's L1, the LLB, DDR), must be asked of the view's *source*, not of
the view. Asking it of the view makes a schedule's cost depend on which group a
view op sits in, which is not physical: a matmul whose group opens with a reshape
of a DDR input still streams that input from DDR, once per weight tile
(issue 25, item 1: BERT-base's attention output projection was charged 97,547
cycles instead of at least 524,288 when the reshape opened its group).

The footprint (views alias their input), the capacity model (which inputs
stream), the simulator's work model (which re-reads cross DDR or the LLB) and
the cost model's features all resolve views here.

Example:
    >>> src = view_sources(graph, ops)
    >>> src.get("reshape_3", "reshape_3")   # "permute_dims_3" when the reshape is in ``ops``
    >>> reads_from_outside(graph, ops, "reshape_3")
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from compiler.memo import memo_of

if TYPE_CHECKING:
    from compiler.graph import Graph

__all__ = ["VIEW_OPS", "produced_data", "reads_from_outside", "view_source", "view_sources"]

VIEW_OPS = frozenset({"reshape", "squeeze", "expand_dims", "flatten", "tuple_get_item"})


def view_sources(graph: Graph, ops: tuple[int, ...]) -> dict[str, str]:
    """``view output -> source`` for the views of an op set, chains followed to their end.

    Only views inside ``ops`` are followed: a view in another group produced a
    tensor that group owns (and may have placed elsewhere). Remembered per
    (graph, op set).
    """
    memo = memo_of(graph)
    key = ("views.sources", ops)
    hit: dict[str, str] | None = memo.get(key)
    if hit is None:
        hit = {}
        for i in sorted(ops):
            op = graph.ops[i]
            if op.op_type in VIEW_OPS and len(op.inputs) == 1:
                src = op.inputs[0]
                hit[op.output] = hit.get(src, src)
        memo[key] = hit
    return hit


def view_source(graph: Graph, ops: tuple[int, ...], tensor: str) -> str:
    """The tensor ``tensor`` aliases through the views of ``ops`` (itself if none)."""
    return view_sources(graph, ops).get(tensor, tensor)


def reads_from_outside(graph: Graph, ops: tuple[int, ...], tensor: str) -> bool:
    """Whether reading ``tensor`` inside ``ops`` reads data from outside the op set.

    True when the tensor's source (views followed) is not produced by an op of the
    set that is not a view: a group input, a model input, or a weight.
    """
    return view_source(graph, ops, tensor) not in produced_data(graph, ops)


def produced_data(graph: Graph, ops: tuple[int, ...]) -> frozenset[str]:
    """The outputs of the ops of ``ops`` that are not views (what
    :func:`reads_from_outside` compares a source with; remembered per (graph, op set): a
    caller asking for many tensors of one large op set reads it once)."""
    memo = memo_of(graph)
    key = ("views.produced", ops)
    made: frozenset[str] | None = memo.get(key)
    if made is None:
        sources = view_sources(graph, ops)
        made = memo[key] = frozenset(graph.ops[i].output for i in ops
                                     if graph.ops[i].output not in sources)
    return made
