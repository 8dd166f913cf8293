"""Whether a sweep's variant can run a model at all (moved here from :mod:`._sweep`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from autotune.job._tasks import Task
    from compiler.graph import Graph
    from compiler.target import Target

__all__ = ["infeasible", "infeasible_reason"]


def infeasible_reason(graph: Graph, target: Target, samples: int = 256) -> str | None:
    """Why no schedule of ``graph`` fits ``target``, or None once one is found that fits.

    Tries, without simulating (:func:`compiler.capacity.check_capacity` only), O0-O3
    and the guide's plans that fit the model, then ``samples`` schedules drawn from
    the search space (half uniformly over the choices, half from its default
    distribution, seeded: the same answer every time). If none fits, the
    variant is taken as infeasible and the reason is the first overflow of the
    smallest level that was built (O0's, or the sample's whose overflow needed
    the fewest bytes). This is a search, not a proof: a variant it calls infeasible
    may have a fitting schedule that neither the levels nor the samples found.
    """
    import numpy as np

    from autotune.sampling._studies import seed_schedules
    from compiler.capacity import check_capacity, in_compute_dtype
    from compiler.errors import GraphtuneError
    from search_space import build_space

    g = in_compute_dtype(graph, target)
    issues = []
    for _label, s in seed_schedules(graph, target):
        issue = check_capacity(g, s, target)
        if issue is None:
            return None
        issues.append(issue)
    try:
        space = build_space(graph, target, graph.batch)
    except GraphtuneError as exc:
        return f"no search space: {exc}"
    rng = np.random.default_rng(0)
    for i in range(samples):
        s = space.sample(rng, uniform=i % 2 == 0)
        issue = check_capacity(g, s, target)
        if issue is None:
            return None
        issues.append(issue)
    least = min(issues, key=lambda c: c.needed_bytes - c.capacity_bytes)
    return (f"capacity: none of O0-O3 and {samples} sampled schedules fits; the closest: "
            f"{least.message}")


def infeasible(tasks: Sequence[Task], target: Target) -> str | None:
    """Why no schedule of some task fits ``target`` (:func:`infeasible_reason`), else None."""
    for t in tasks:
        why = infeasible_reason(t.graph, target)
        if why is not None:
            return f"{t.name}: {why}" if len(tasks) > 1 else why
    return None
