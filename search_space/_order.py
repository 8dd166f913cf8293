"""Execution orders of a schedule's chunk DAG: depth-first with look-ahead, breadth-first.

* ``depth`` with look-ahead 0 is :func:`compiler.derive.make_schedule`'s ``"depth"``
  (DFS post-order from the outputs: each consumer chunk runs as soon as its
  inputs exist — the guide's ResNet-50 interleaving).
* ``depth`` with look-ahead ``k``: the same walk, but when a group chunk is placed
  the next ``k`` chunks of the same group are placed right after it (with
  whatever they need first), so producers run up to ``k`` chunks ahead of their
  consumers: more overlap, more live data.
* ``breadth`` is ``make_schedule``'s ``"breadth"``: groups in topological order
  (ties: smallest first op), all chunks of one group before the next.
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence

from compiler.graph import dfs_postorder

Node = tuple[str, str, int]


def depth_order(
    deps: Mapping[Node, Sequence[Node]], outs: Sequence[Node], splits: Mapping[str, int],
    lookahead: int = 0,
) -> list[Node]:
    """DFS post-order from ``outs``; each placed chunk pulls the next ``lookahead`` of its group."""
    if lookahead <= 0:
        return dfs_postorder(deps, outs)
    seen: set[Node] = set()
    out: list[Node] = []
    for root in [*outs, *deps]:
        if root in seen:
            continue
        seen.add(root)
        stack: list[tuple[Node, int]] = [(root, 0)]
        while stack:
            n, i = stack.pop()
            ds = deps.get(n, ())
            if i < len(ds):
                stack.append((n, i + 1))
                if ds[i] not in seen:
                    seen.add(ds[i])
                    stack.append((ds[i], 0))
                continue
            out.append(n)
            if n[0] == "g":
                # the next chunks of this group run ahead: placed before anything else
                ahead = [("g", n[1], c) for c in range(n[2] + 1, min(n[2] + 1 + lookahead,
                                                                     splits[n[1]]))]
                for m in reversed(ahead):
                    if m not in seen:
                        seen.add(m)
                        stack.append((m, 0))
    return out


def group_topo_order(names: Sequence[str], first_op: Mapping[str, int],
                     group_deps: Mapping[str, Sequence[str]]) -> list[str]:
    """Groups in topological order, ties by smallest first op (``compiler.derive.group_order``)."""
    indeg = {n: len(set(group_deps.get(n, ()))) for n in names}
    users: dict[str, list[str]] = {n: [] for n in names}
    for n in names:
        for d in set(group_deps.get(n, ())):
            users[d].append(n)
    heap = [(first_op[n], n) for n in names if indeg[n] == 0]
    heapq.heapify(heap)
    done: list[str] = []
    while heap:
        _, n = heapq.heappop(heap)
        done.append(n)
        for u in users[n]:
            indeg[u] -= 1
            if indeg[u] == 0:
                heapq.heappush(heap, (first_op[u], u))
    return done


def breadth_order(deps: Mapping[Node, Sequence[Node]], group_seq: Sequence[str],
                  splits: Mapping[str, int]) -> list[Node]:
    """All chunks of each group in ``group_seq`` order, each after what it needs."""
    out: list[Node] = []
    placed: set[Node] = set()

    def place(n: Node) -> None:
        if n in placed:
            return
        stack: list[tuple[Node, int]] = [(n, 0)]
        while stack:
            m, i = stack.pop()
            ds = deps.get(m, ())
            if i < len(ds):
                stack.append((m, i + 1))
                if ds[i] not in placed:
                    stack.append((ds[i], 0))
                continue
            if m not in placed:
                placed.add(m)
                out.append(m)

    for name in group_seq:
        for c in range(splits[name]):
            place(("g", name, c))
    for n in deps:
        place(n)
    return out
