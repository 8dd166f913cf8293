"""Tensor sizes in the target's compute data type."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING

from compiler.memo import memo_of

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.target import Target

__all__ = ["in_compute_dtype"]


def in_compute_dtype(graph: Graph, target: Target) -> Graph:
    """The graph with floating-point tensors sized in the target's compute type.

    The Graph view sizes floats in FP16 (the STCP920's type); a target computing in
    another type gets a copy (cached on the graph) with its own caches.
    """
    width = target.dtype_bytes
    if graph.float_bytes == width:
        return graph
    memo = memo_of(graph)
    key = ("float_bytes", width)
    other = memo.get(key)
    if other is None:
        other = memo[key] = dataclasses.replace(graph, float_bytes=width)
    return other  # type: ignore[no-any-return]
