"""The one-move neighbourhood of a schedule: every child one :meth:`Space.mutate` move can make.

:meth:`Space.mutate` draws one move at random (a boundary moves to a neighbouring cut
point, a boundary goes away, a new one appears or a block's mode changes, one split
factor, one core-binding parameter, one scope policy, the order or the look-ahead).
:func:`neighbour_vectors` lists all of them instead, in a fixed order, as vectors of the
space: what a hill climb around the best measured schedule enumerates
(:mod:`autotune.sampling._polish`). Where ``mutate`` draws a value that only matters by
which side of the granularity's threshold it is on (the rank of a cut point that goes
away or appears), one representative stands for them all: they decode alike.

The vectors are not decoded here (a caller decodes them lazily, and several may decode
to the same schedule, or to the parent itself: ``mutate`` retries those).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING

import numpy as np

from search_space._dims import CUT_BELOW, GRANULARITIES

if TYPE_CHECKING:
    from compiler.schedule import GraphSchedule
    from search_space._space import Space

__all__ = ["REROLLED", "kick_vectors", "neighbour_vectors"]

REROLLED = {
    "split": ("samples", "parts"),
    "rebind": ("cpp", "parts", "perm", "spread"),
    "scope": ("scope", "xscope"),
    "reorder": ("order", "lookahead"),
}
"""The moves that set one parameter to another of its choices, and the kinds they set
(as :meth:`Space._move` does)."""

_FIRST_GRAIN = GRANULARITIES.index("1/32")


def vector_view(space: Space, schedule: GraphSchedule
                ) -> tuple[np.ndarray, tuple[int, ...], dict[str, list[int]], dict[int, int], int, int]:
    """What the neighbourhoods read of a schedule of ``space``: its vector, its active free
    parameters, those by kind, each cut parameter's cut index, the granularity parameter
    (-1: none) and the first cut choice that is not a boundary at that granularity."""
    vec, active, (by_kind, _) = space._by_kind(schedule)
    cut_free = space.cut_free  # the space's (shared: read only), as by_kind's lists
    gran = int(space.rep[space.d_gran]) if space.d_gran >= 0 else -1
    below = CUT_BELOW[GRANULARITIES[int(vec[gran])]] if gran >= 0 else 0
    return vec, tuple(active), by_kind, cut_free, gran, below


def neighbour_vectors(space: Space, schedule: GraphSchedule) -> list[tuple[str, np.ndarray]]:
    """``(move, vector)`` for every child one move of ``space.mutate`` can make.

    In a fixed order (by move, then parameter, then choice), without repeated vectors.
    ``schedule`` must be of ``space`` (encodable).
    """
    vec, _, by_kind, cut_free, gran, below = vector_view(space, schedule)
    n_choices = space.n_choices
    cuts = by_kind.get("cut", [])
    on = [f for f in cuts if vec[f] < below]
    off = [f for f in cuts if vec[f] >= below]
    out: list[tuple[str, np.ndarray]] = []
    seen: set[bytes] = {vec.tobytes()}

    def emit(move: str, child: np.ndarray) -> None:
        key = child.tobytes()
        if key not in seen:
            seen.add(key)
            out.append((move, child))

    def rerolls(move: str, candidates: list[int]) -> None:
        for f in candidates:
            for c in range(int(n_choices[f])):
                if c != int(vec[f]):
                    child = vec.copy()
                    child[f] = c
                    emit(move, child)

    for child in _moved_boundaries(space, vec, on, below, (1,)):
        emit("boundary", child)  # to a neighbouring cut point that is not one
    for f in on:  # merge: a boundary goes away (any rank from ``below`` up decodes alike)
        child = vec.copy()
        child[f] = below
        emit("merge", child)
    # split_group: a new boundary (any rank under ``below`` decodes alike), or a mode
    modes = list(by_kind.get("mode", []))
    if below == 0 and gran >= 0:
        off = sorted(cut_free)
        modes.append(gran)
    for f in off:
        child = vec.copy()
        b = below
        if b == 0:
            child[gran] = _FIRST_GRAIN
            b = CUT_BELOW[GRANULARITIES[_FIRST_GRAIN]]
            for g in cut_free:  # every other cut point stays off
                child[g] = b
        child[f] = 0
        space._inherit(child, cut_free[f], by_kind)
        emit("split_group", child)
    rerolls("split_group", modes)
    for move, kinds in REROLLED.items():
        rerolls(move, [f for k in kinds for f in by_kind.get(k, [])])
    return out


def kick_vectors(space: Space, schedule: GraphSchedule, span: int = 4) -> list[tuple[str, np.ndarray]]:
    """``("kick", vector)``: one group boundary moved by 2 to ``span`` cut points at once.

    A kick of an iterated local search (:mod:`autotune.sampling._polish`): one move of
    :func:`neighbour_vectors` moves a boundary to a neighbouring cut point only, and on
    MobileNetV2 b16 the boundary of a tuned best's last group sits where every one-step
    move of it is slower by 2-5 % (the one-move neighbourhood is a basin), while a
    schedule with it three cut points earlier, then climbed, is 0.07 % faster
    (``bench/results/tuning.md``, 2026-11-27, h71). The kicked boundary swaps its rank
    with the cut point's, as a ``boundary`` move does; targets that are boundaries
    already are skipped. In a fixed order (boundary, then distance), without repeats.
    """
    vec = space.encode(schedule)
    known = space._known(schedule)
    active = known[1] if known is not None else tuple(space._decode_free(vec)[2])
    gran = int(space.rep[space.d_gran]) if space.d_gran >= 0 else -1
    below = CUT_BELOW[GRANULARITIES[int(vec[gran])]] if gran >= 0 else 0
    on = [f for f in active if space.free[f].kind == "cut" and vec[f] < below]
    out: list[tuple[str, np.ndarray]] = []
    seen: set[bytes] = {vec.tobytes()}
    for child in _moved_boundaries(space, vec, on, below, range(2, span + 1)):
        if child.tobytes() not in seen:
            seen.add(child.tobytes())
            out.append(("kick", child))
    return out


def _moved_boundaries(space: Space, vec: np.ndarray, on: list[int], below: int,
                      dists: Iterable[int]) -> Iterator[np.ndarray]:
    """``vec`` with one boundary of ``on`` moved by each of ``dists`` cut points, both
    ways, to a cut point that is not a boundary (their ranks swapped, as
    :meth:`Space.mutate`'s ``boundary`` move does)."""
    cut_free = space.cut_free
    for f in on:
        k = cut_free.get(f)
        if k is None:
            continue
        for dist in dists:
            for nk in (k - dist, k + dist):
                if not 0 <= nk < len(space.d_cut):
                    continue
                g = int(space.rep[space.d_cut[nk]])
                if vec[g] < below:
                    continue
                child = vec.copy()
                child[f], child[g] = min(int(vec[g]), int(space.n_choices[f]) - 1), vec[f]
                yield child
