"""The polish's second ring: a new group boundary together with a shape of its own.

The one-move neighbourhood (:func:`search_space._neighbours.neighbour_vectors`) cuts a
group in two with the new group *inheriting* the parameters of the group it is cut from
(``split_group``, :meth:`Space._inherit`): the two halves then run as the whole did, so
the split alone is usually neutral, and a new shape (samples per part, cores per part,
core parts) for the new group alone changes nothing while the group is whole. The move
that pays is both at once, which no one-move hill climb sees: measured on MobileNetV2
b16 (2026-11-27, h82), from the best of a 2-worker tune that stalled at 1,513.0 µs
(groups ``[0, 41, 51]``, a local optimum of the one-move neighbourhood) 642 of the 2,400
schedules "a new boundary at a cut point of the first group, the new group with each
(samples, cpp, parts)" are faster, the best 1,504.0 µs (``[0, 15, 41, 51]``); from there
the same ring again leads to ``[0, 10, 15, 41]`` at 1,502.7 µs, below the committed
1,503.4 (``bench/results/tuning.md``).

The ring has a second part, listed first (:func:`carried_moves`, ~125 vectors on
MobileNetV2): a group boundary moved to any cut point between its neighbouring
boundaries *with its group's parameters* (a ``boundary`` move of :meth:`Space.mutate`
leaves the group's parameters at the old start, so the moved group gets the inactive
defaults of the new one, the most chunks: on MobileNetV2 b16 O3's boundary moved from op
41 to 37 is 7,166.9 µs that way and 1,522.8 µs with its parameters carried). From a
2-worker tune's stalled best ``[0, 31, 41]`` (1,511.0 µs) 13 of its 125 carried moves
are faster, ``[0, 15, 41]`` at 1,507.2 the best.

:func:`split_reshape` lists the first part lazily (a vector is built when read: BERT-base has
~190 cut points and ~80 shapes each), in a fixed order (cut point, then shape); the polish
(:mod:`autotune.sampling._polish`, ``GuidedOptions.polish_deep``) decodes a window of it
per round in a fixed shuffled order, ranks by the cost model and proposes the best.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, overload

import numpy as np

from search_space._dims import CUT_BELOW, GRANULARITIES
from search_space._neighbours import vector_view

if TYPE_CHECKING:
    from compiler.schedule import GraphSchedule
    from search_space import Space

__all__ = ["RESHAPED", "SplitReshape", "carried_moves", "split_reshape"]

RESHAPED = ("samples", "cpp", "parts")
"""The unit parameters a new group gets every combination of (the shape of its chunks and
its cores; the core order, spread and scopes stay inherited)."""

_FIRST_GRAIN = GRANULARITIES.index("1/32")


class SplitReshape(Sequence[np.ndarray]):
    """The ring as a sequence of vectors, each built when read (see the module doc).

    ``bases[k]`` is the parent's vector with one more boundary (its new group's
    parameters inherited), ``dims[k]`` the free indices of that group's
    :data:`RESHAPED` parameters; item ``i`` is base ``i // per`` with shape
    ``i % per`` (mixed radix over the three parameters' choices).
    """

    def __init__(self, bases: list[np.ndarray], dims: list[tuple[int, ...]],
                 radix: tuple[int, ...]) -> None:
        self.bases, self.dims, self.radix = bases, dims, radix
        self.per = int(np.prod(radix)) if radix else 1

    def __len__(self) -> int:
        return len(self.bases) * self.per

    @overload
    def __getitem__(self, i: int) -> np.ndarray: ...

    @overload
    def __getitem__(self, i: slice) -> Sequence[np.ndarray]: ...

    def __getitem__(self, i: int | slice) -> np.ndarray | Sequence[np.ndarray]:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if not -len(self) <= i < len(self):
            raise IndexError(i)
        i %= len(self)
        base, shape = divmod(i, self.per)
        child = self.bases[base].copy()
        for f, n in zip(self.dims[base], self.radix):
            child[f] = shape % n
            shape //= n
        return child


def split_reshape(space: Space, schedule: GraphSchedule) -> SplitReshape:
    """A new boundary at every cut point that is not one, the new group with every
    combination of :data:`RESHAPED` choices (the ``split_group`` move of
    :meth:`Space.mutate`, then the new group's shape). ``schedule`` must be of ``space``.

    Where a parameter of the new group is shared with another (a space with ties) or the
    space has no such parameter, the ring has that cut point with the inherited shape only.
    """
    vec, active, by_kind, cut_free, gran, below = vector_view(space, schedule)
    if below == 0 and gran < 0:
        return SplitReshape([], [], ())
    off = sorted(cut_free) if below == 0 else [f for f in by_kind.get("cut", [])
                                               if vec[f] >= below]
    radix: tuple[int, ...] = ()
    bases: list[np.ndarray] = []
    dims: list[tuple[int, ...]] = []
    used = set(active)
    for f in off:
        child = vec.copy()
        b = below
        if b == 0:  # no boundary yet (one group): the first at the coarsest granularity
            child[gran] = _FIRST_GRAIN
            b = CUT_BELOW[GRANULARITIES[_FIRST_GRAIN]]
            for g in cut_free:
                child[g] = b
        child[f] = 0
        space._inherit(child, cut_free[f], by_kind)
        start = space.structure.segments[cut_free[f] + 1][0]
        own = {space.free[int(space.rep[d])].kind: int(space.rep[d])
               for d in space._seg_dims[start]}
        shape = tuple(own.get(k, -1) for k in RESHAPED)
        if -1 in shape or used & set(shape):
            continue  # tied to a parameter in use, or none: the plain split is in the ring 1
        r = tuple(int(space.n_choices[d]) for d in shape)
        if radix and r != radix:
            continue  # (every unit has the same choices; a guard, not a case)
        radix = r
        bases.append(child)
        dims.append(shape)
    return SplitReshape(bases, dims, radix)


def carried_moves(space: Space, schedule: GraphSchedule) -> list[np.ndarray]:
    """Each group boundary moved to every other cut point between its neighbouring
    boundaries, the moved group's parameters (its segment's mode and unit parameters and
    its first op's scope policy) copied to the new start: in order of boundary, then cut
    point. ``schedule`` must be of ``space``; without boundaries, none."""
    vec = space.encode(schedule)
    gran = int(space.rep[space.d_gran]) if space.d_gran >= 0 else -1
    if gran < 0:
        return []
    below = CUT_BELOW[GRANULARITIES[int(vec[gran])]]
    cut = [int(space.rep[d]) for d in space.d_cut]
    segs = space.structure.segments
    on = [k for k, f in enumerate(cut) if vec[f] < below]

    def params(k: int) -> list[int]:  # the parameters of the group starting after cut k
        start = segs[k + 1][0]
        return [int(space.rep[d]) for d in space._seg_dims[start]] + [
            int(space.rep[space.d_scope[start]])]

    out: list[np.ndarray] = []
    seen = {vec.tobytes()}
    for j, k in enumerate(on):
        lo = on[j - 1] + 1 if j else 0
        hi = on[j + 1] - 1 if j + 1 < len(on) else len(cut) - 1
        src = params(k)
        for t in range(lo, hi + 1):
            if t == k:
                continue
            child = vec.copy()
            f, g = cut[k], cut[t]
            child[g] = vec[f]  # the boundary's rank moves
            child[f] = max(below, min(int(vec[g]), int(space.n_choices[f]) - 1))
            dst = params(t)
            if len(dst) != len(src) or set(dst) & set(src):
                continue  # (tied parameters: not moved apart)
            for a, b in zip(src, dst):
                child[b] = min(int(vec[a]), int(space.n_choices[b]) - 1)
            if child.tobytes() not in seen:
                seen.add(child.tobytes())
                out.append(child)
    return out
