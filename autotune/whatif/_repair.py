"""A schedule of one variant made to fit another: the projection with repair.

A sweep seeds a variant with the best schedules of its nearest finished variants
(:mod:`autotune.whatif._nearest`), projected into its space. A schedule made for a
larger L1 often cannot be projected exactly: on ResNet-50 b16 (``bench/results/sweep.md``,
h70) the bests of the L1 512K variants keep a result in L1 or the LLB where the 384K
variant's capacity walk cannot, and the exact projection refuses them (so the 384K /
DDR 27 variant's probe started from nothing that fits). :func:`fit_schedule` keeps
what does not depend on the capacity and repairs the rest, in the two ways decoding
itself repairs a shape or a scope that does not fit:

1. **scopes**: the schedule's groups, shapes, core orders and order, with each
   result's scope where the target's capacity walk allows it, else the nearest
   slower one (:meth:`search_space.Space.project_nearest`: 512K / DDR 27's best on
   the 384K / DDR 27 variant runs at 9,684.5 µs there, ahead of h70's sweep's best of
   that variant, 9,697.2);
2. **shapes**: while the capacity check (:func:`compiler.capacity.check_capacity`,
   the simulator's own model) still reports an overflow, the group whose step
   overflows gets fewer samples per core part (its chunk's working set and output
   shrink with the samples), and when it has one sample per part already, more cores
   per part (the guide: "more cores per image"); every change is decoded again, so
   the decoder's own repairs apply. On ResNet-50 b16 the 768K variants' bests
   overflow a 512K L1 at one group's working set (526,144 bytes of 524,288).

A schedule that fits the target and projects exactly is returned as projected
(unchanged); a repaired one always fits (it is returned only once the check passes);
None when the space cannot express its groups or no repair within ``rounds`` fits.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from compiler.graph import Graph
    from compiler.schedule import GraphSchedule
    from compiler.target import Target
    from search_space import Space

__all__ = ["ROUNDS", "fit_schedule"]

ROUNDS = 8
"""Shape repairs tried per schedule (each one group one step smaller)."""


def fit_schedule(space: Space, graph: Graph, schedule: GraphSchedule, target: Target,
                 rounds: int = ROUNDS) -> GraphSchedule | None:
    """``schedule`` as a schedule of ``space`` that fits ``target``, or None (module doc).

    Args:
        space: The target's space (its capacity walk decides the scopes).
        graph: The task's graph (in the target's compute type or not: converted here).
        schedule: A schedule of this workload, made for any target.
        target: The target to fit (the space's).
        rounds: Shape repairs at most.
    """
    from compiler.capacity import check_capacity, in_compute_dtype

    g = in_compute_dtype(graph, target)

    def issue_of(s: GraphSchedule) -> object:
        try:
            return check_capacity(g, s, target)
        except Exception as exc:  # noqa: BLE001 - a schedule invalid here is no seed
            return exc

    p = space.project_nearest(schedule)
    if p.schedule is None or p.vector is None:
        return None
    s, vec = p.schedule, p.vector.copy()
    for _ in range(rounds + 1):
        issue = issue_of(s)
        if issue is None:
            return s
        step = getattr(issue, "step", None)
        if not isinstance(step, str):
            return None
        nxt = _smaller(space, vec, s, step)
        if nxt is None:
            return None
        vec = nxt
        s = space.decode(vec)
    return None


def _smaller(space: Space, vec: np.ndarray, s: GraphSchedule, step: str) -> np.ndarray | None:
    """``vec`` with the overflowing step's group one step smaller: fewer samples per core part,
    else more cores per part; None when the step is no group's or nothing is left to shrink."""
    name = step.partition("[")[0]
    group = next((gr for gr in s.groups if gr.name == name), None)
    if group is None or not group.ops:
        return None
    active = space.params_of(vec)
    first = min(group.ops)
    index = {d.name: f for f, d in enumerate(space.free)}
    for kind, smaller in (("samples", True), ("cpp", False)):
        at = [int(n.partition("@")[2]) for n in active if n.startswith(kind + "@")]
        mine = [a for a in at if a <= first]
        if not mine:
            continue
        f = index[f"{kind}@{max(mine)}"]
        choices = space.free[f].choices
        now = choices[int(vec[f])]
        order = sorted((c for c in choices if (c < now if smaller else c > now)),
                       reverse=smaller)
        if order:
            out = vec.copy()
            out[f] = choices.index(order[0])
            return out
    return None
