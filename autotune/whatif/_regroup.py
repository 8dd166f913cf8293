"""Regroupings: the variant's best with a run of its groups merged, or a group cut in two.

What the grafts could not give (``bench/results/sweep.md``, nineteenth pass): two of the
three variants the sweep missed differ from the cold best by a *regrouping of a run of
groups*, several uphill single moves away from the sweep's best. On ResNet-50 b16 seed 2,
L1 1M / DDR 27, the sweep's best cuts ops 89-150 at 129 (splits 2 and 2), the cold best at
140 with ops 89-139 one group of split 1 in L1; on MobileNetV2 b16 seed 0, L1 384K / DDR
27, the cold best cuts the tail 181-188 off as its own group of split 1. No record of the
seed-2 sweep has that group, and a boundary moved alone, or a split or a scope changed
alone, is slower, so neither the polish nor evolution gets there.

:func:`regroup_vectors` makes, from the best's vector, the candidates of three moves, each
with the new group's split and scope (or its cores) set to every choice:

* **merge**: 2 to :data:`SPAN` consecutive groups made one (the first one's parameters);
* **cut**: a group cut in two at one of its cut points (the head keeps the group's
  parameters and the tail's are varied, or the other way round);
* **re-cut**: the boundary between two consecutive groups moved to another cut point of
  the two (the head varied, the tail with the second group's parameters).

:func:`autotune.whatif._graft.graft_seeds` ranks them beside the grafts by the same cost
model and measures :data:`REGROUPS` of them per later chunk (``regroup``), so the picks
are read from the log as the grafts' are.

:func:`pair_vectors` makes *pairs* of them: a boundary moved by at most :data:`REACH` ops (a
plain re-cut), then one of the two groups it changed cut (each split x scope or cores x parts
of the new group). The sweep's miss (ResNet-50 b16 seed 0, L1 384K / DDR 27) is such a pair
and two scope moves from its bar, where the re-cut alone is slower than its best
(``bench/results/sweep.md``, twenty-fifth pass); ``graft_seeds`` measures the :data:`PAIRS`
the model ranks first after the regroupings (0, the default: none).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from typing import TYPE_CHECKING

import numpy as np

from autotune.whatif._budget import stalled

if TYPE_CHECKING:
    from search_space import Space

__all__ = ["KICK", "PAIRS", "REACH", "REGROUPS", "SPAN", "by_class", "pair_vectors", "regroup_vectors",
           "stalled", "with_boundaries"]

REGROUPS = 4
"""Regroupings a variant's later chunk measures first (per task), beside the grafts."""

KICK = 4
"""A sweep's later chunk of a variant whose previous chunk left its best as it was polishes
with kicks of this size (``GuidedOptions.polish_kick``): the nineteenth pass's replay of
MobileNetV2 seed 0, L1 384K / DDR 27, moved only with kicks."""

SPAN = 4
"""Most consecutive groups one merge makes one."""

PAIRS = 0
"""Pairs of regroupings (:func:`pair_vectors`) a variant's later chunk measures after its
regroupings, per task (0: none)."""

REACH = 2
"""Ops a boundary moves by at most in the first move of a pair (:func:`pair_vectors`)."""

_SLOT = ("mode", "samples", "cpp", "parts", "perm", "spread", "xscope")
"""Kinds of a segment's parameters (at a block's first segment); ``scope`` is per op."""


def _view(space: Space, vec: np.ndarray) -> tuple[int, list[int]]:
    """(the first cut rank that is no boundary at the vector's granularity, its group starts)."""
    from search_space._dims import CUT_BELOW, GRANULARITIES

    gran = int(space.rep[space.d_gran]) if space.d_gran >= 0 else -1
    below = CUT_BELOW[GRANULARITIES[int(vec[gran])]] if gran >= 0 else 0
    starts = [0, *sorted(space.free[f].at + 1 for f in range(len(space.free))
                         if space.free[f].kind == "cut" and vec[f] < below)]
    return below, starts


def regroup_vectors(space: Space, base: np.ndarray, n_ops: int, span: int = SPAN
                    ) -> list[tuple[tuple[str, int, int], np.ndarray]]:
    """``((move, a, b), vector)``: ``base`` (a vector of ``space``) with the groups of
    ``[a, b)`` merged (``"merge"``), cut in two at ``b`` (``"cut"``: the group starting at
    ``a``) or re-cut at ``b`` (``"recut"``: the two groups from ``a``), each with the new
    group's parameters varied (module docstring). Distinct vectors, none equal to ``base``.
    A ``base`` of granularity ``0`` (one block) is taken at granularity ``1/32`` with no
    boundary (the same schedule), so its block can be cut.
    """
    base = with_boundaries(space, base)
    below, starts = _view(space, base)
    cut_dim: dict[int, int] = {}  # op that a boundary there starts -> its cut dim
    dims: dict[int, dict[str, int]] = {}  # op -> kind -> dim
    for f, d in enumerate(space.free):
        if d.kind == "cut":
            cut_dim[d.at + 1] = f
        elif d.at >= 0:
            dims.setdefault(d.at, {})[d.kind] = f
    bounds = [*starts, n_ops]
    out: list[tuple[tuple[str, int, int], np.ndarray]] = []
    seen = {base.tobytes()}

    def add(move: tuple[str, int, int], vecs: Iterator[np.ndarray]) -> None:
        for w in vecs:
            if w.tobytes() not in seen:
                seen.add(w.tobytes())
                out.append((move, w))

    def params(w: np.ndarray, to: int, src: int) -> None:
        """The group starting at ``to`` takes the parameters of the one at ``src`` in ``base``."""
        for kind, f in dims.get(to, {}).items():
            g = dims.get(src, {}).get(kind)
            if g is not None and kind in (*_SLOT, "scope"):
                w[f] = base[g]

    def varied(w: np.ndarray, at: int) -> Iterator[np.ndarray]:
        """``w`` with the group at ``at``: each split x scope, then each cores x parts."""
        mine = dims.get(at, {})
        for pair in (("samples", "scope"), ("cpp", "parts")):
            fs = [mine.get(k) for k in pair]
            if fs[0] is None or fs[1] is None:
                continue
            for i in range(int(space.n_choices[fs[0]])):
                for j in range(int(space.n_choices[fs[1]])):
                    v = w.copy()
                    v[fs[0]], v[fs[1]] = i, j
                    yield v

    def boundary(w: np.ndarray, op: int, on: bool) -> None:
        f = cut_dim[op]
        w[f] = 0 if on else below

    for i in range(len(bounds) - 1):
        a = bounds[i]
        # merge: groups i .. j-1 as one
        for j in range(i + 2, min(i + span, len(bounds) - 1) + 1):
            w = base.copy()
            for k in range(i + 1, j):
                boundary(w, bounds[k], False)
            add(("merge", a, bounds[j]), varied(w, a))
        # cut: the group [a, bounds[i+1]) in two at c
        for c in range(a + 1, bounds[i + 1]):
            if c not in cut_dim or c not in dims:
                continue
            w = base.copy()
            boundary(w, c, True)
            params(w, c, a)
            add(("cut", a, c), varied(w, c))  # the tail varied
            add(("cut", a, c), varied(w, a))  # the head varied
        # re-cut: the boundary between groups i and i+1 moved to c
        if i + 2 < len(bounds):
            b, e = bounds[i + 1], bounds[i + 2]
            for c in range(a + 1, e):
                if c == b or c not in cut_dim or c not in dims:
                    continue
                w = base.copy()
                boundary(w, b, False)
                boundary(w, c, True)
                params(w, c, b)
                add(("recut", a, c), iter([w]))
                add(("recut", a, c), varied(w, a))
    return out


def pair_vectors(space: Space, base: np.ndarray, n_ops: int, reach: int = REACH
                 ) -> list[tuple[tuple[str, int, int], np.ndarray]]:
    """``(("pair", c, d), vector)``: ``base`` with a group boundary moved to the cut point ``c``
    at most ``reach`` ops away (a plain ``recut`` of :func:`regroup_vectors`: the group from
    ``c`` keeps the parameters of the one it was part of), then one of the two groups that move
    changed cut in two at ``d`` with the new group's parameters varied (a ``cut``). Distinct
    vectors, none equal to ``base`` nor to one of its single regroupings' plain recuts.

    Why (``bench/results/sweep.md``, twenty-fifth pass): the sweep's miss (ResNet-50 b16 seed 0,
    L1 384K / DDR 27, 9,518.2 us) is two regroupings from 9,456.0 (its boundary 151 moved to
    152, 9,535.1, uphill; then a cut at 158), and two scope moves from there 9,416.2 passes its
    bar (9,435.8); the first alone is slower than the best, so no single move climbs there.
    """
    _, starts = _view(space, with_boundaries(space, base))
    out: list[tuple[tuple[str, int, int], np.ndarray]] = []
    seen = {base.tobytes()}
    firsts: dict[tuple[str, int, int], np.ndarray] = {}
    after = dict(itertools.pairwise(starts))  # a group's start -> the next one's
    for mv, w in regroup_vectors(space, base, n_ops):
        if mv[0] == "recut" and 0 < abs(mv[2] - after[mv[1]]) <= reach and mv not in firsts:
            firsts[mv] = w  # the first of each move is the plain one (its head as it was)
    for (_, a, c), w in firsts.items():
        seen.add(w.tobytes())
        for mv2, w2 in regroup_vectors(space, w, n_ops):
            if mv2[0] == "cut" and mv2[1] in (a, c) and w2.tobytes() not in seen:
                seen.add(w2.tobytes())
                out.append((("pair", c, mv2[2]), w2))
    return out


def with_boundaries(space: Space, base: np.ndarray) -> np.ndarray:
    """``base``, or where its granularity is ``0`` (one block, no boundary) the same schedule
    at granularity ``1/32`` with every cut point's rank ``1`` (no boundary), whose cut
    points a move can make boundaries (a space of one segment: ``base``)."""
    from search_space._dims import CUT_BELOW, GRANULARITIES

    if space.d_gran < 0 or _view(space, base)[0] > 0:
        return base
    out = base.copy()
    out[space.rep[space.d_gran]] = GRANULARITIES.index("1/32")
    for f, d in enumerate(space.free):
        if d.kind == "cut":
            out[f] = CUT_BELOW["1/32"]
    return out


def by_class(moves: list[tuple[str, int, int]], scores: np.ndarray, count: int) -> list[int]:
    """Indices of the ``count`` picks among candidates of ``moves`` scored ``scores`` (higher is
    better): the best-scored candidate of each move (kind and ops) in turn, the moves by their
    best score, so one move's many splits and scopes do not fill the picks (ties: the order
    given)."""
    best: dict[tuple[str, int, int], int] = {}
    for k, mv in enumerate(moves):
        if mv not in best or scores[k] > scores[best[mv]]:
            best[mv] = k
    order = sorted(best.values(), key=lambda k: (-float(scores[k]), k))
    return order[:count]
