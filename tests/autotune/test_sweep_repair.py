"""A seed of another variant made to fit (``autotune.whatif._repair``, ``Space.project_nearest``)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from autotune.whatif._repair import fit_schedule
from compiler.capacity import check_capacity, in_compute_dtype
from compiler.graph import Graph
from compiler.target import Target
from search_space import Space, build_space

BASE = Target.default()
PAIRS = [(1024, 32), (1024, 16), (128, 32), (256, 64)]
"""(source L1, target L1) in KiB: on tiny_cnn b4 most of the source's schedules do not project
exactly into the smaller L1 (at 1M -> 32K, 44 of 60 sampled are refused, 35 overflow after the
scope part alone; all 60 fit once repaired)."""

_spaces: dict[int, tuple[Target, Space]] = {}


def _space(graph: Graph, kib: int) -> tuple[Target, Space]:
    if kib not in _spaces:
        t = BASE.replace(l1={"data_bytes": kib * 1024})
        _spaces[kib] = (t, build_space(graph, t, graph.batch))
    return _spaces[kib]


def _fits(graph: Graph, s: object, t: Target) -> bool:
    return check_capacity(in_compute_dtype(graph, t), s, t) is None  # type: ignore[arg-type]


@settings(max_examples=20, deadline=None)
@given(pair=st.sampled_from(PAIRS), seed=st.integers(0, 2**16), uniform=st.booleans())
def test_a_repaired_projection_always_fits_and_is_the_targets(tiny_graph: Graph, pair: tuple[int, int],
                                                               seed: int, uniform: bool) -> None:
    """Invariant: what ``fit_schedule`` returns fits the target (the simulator's capacity check)
    and is a schedule of the target's space (it projects exactly); a schedule that fits the
    target and projects exactly comes back unchanged."""
    (_a, sa), (b, sb) = _space(tiny_graph, pair[0]), _space(tiny_graph, pair[1])
    s = sa.sample(np.random.default_rng(seed), uniform=uniform)
    got = fit_schedule(sb, tiny_graph, s, b)
    if got is not None:
        assert _fits(tiny_graph, got, b)
        p = sb.project(got)
        assert p.schedule is not None and p.schedule.structural_key() == got.structural_key()
    exact = sb.project(s)
    if exact.schedule is not None and _fits(tiny_graph, exact.schedule, b):
        assert got is not None and got.structural_key() == s.structural_key()


def test_the_repair_fits_what_the_exact_projection_refuses(tiny_graph: Graph) -> None:
    """1M -> 32K: of 24 schedules sampled at 1M, the exact projection gives few that fit 32K;
    the nearest projection keeps the groups and fits more; with the shape repair every one
    fits. Each stage must add some (the repair is not a no-op)."""
    (_a, sa), (b, sb) = _space(tiny_graph, 1024), _space(tiny_graph, 32)
    rng = np.random.default_rng(0)
    pool = [sa.sample(rng, uniform=i % 2 == 0) for i in range(24)]
    exact = nearest = fitted = 0
    for s in pool:
        p = sb.project(s)
        exact += p.schedule is not None and _fits(tiny_graph, p.schedule, b)
        n = sb.project_nearest(s)
        assert n.schedule is not None  # only scopes differ: the groups are the space's
        assert [sorted(g.ops) for g in n.schedule.groups] == [sorted(g.ops) for g in s.groups]
        assert (n.reason is None) == (p.schedule is not None)
        nearest += _fits(tiny_graph, n.schedule, b)
        f = fit_schedule(sb, tiny_graph, s, b)
        fitted += f is not None and _fits(tiny_graph, f, b)
    assert exact < nearest < fitted == len(pool)


def test_the_repair_shrinks_the_overflowing_group(tiny_graph: Graph) -> None:
    """A schedule that overflows after the scope part gets fewer samples per core part (more
    chunks) or more cores per part in the group whose step overflowed (its unit's shape)."""
    (_a, sa), (b, sb) = _space(tiny_graph, 1024), _space(tiny_graph, 32)
    rng = np.random.default_rng(1)
    for i in range(60):
        s = sa.sample(rng, uniform=i % 2 == 0)
        n = sb.project_nearest(s)
        if n.schedule is None or _fits(tiny_graph, n.schedule, b):
            continue
        issue = check_capacity(in_compute_dtype(tiny_graph, b), n.schedule, b)
        assert issue is not None
        f = fit_schedule(sb, tiny_graph, s, b, rounds=1)
        if f is None:
            continue
        name = issue.step.partition("[")[0]
        before = {min(g.ops): g for g in n.schedule.groups}
        after = {min(g.ops): g for g in f.groups}
        grown = [k for k in before if (after[k].split, len(after[k].chunks[0].cores))
                 != (before[k].split, len(before[k].chunks[0].cores))]
        mine = next(g for g in n.schedule.groups if g.name == name)
        assert grown and min(mine.ops) in grown
        return
    pytest.fail("no schedule of the pool needed one shape repair")


def test_a_schedule_the_space_cannot_express_is_no_seed(tiny_graph: Graph) -> None:
    """A schedule of another batch (not in the space) gives None, never an exception."""
    from compiler.schedule import GraphSchedule

    (b, sb) = _space(tiny_graph, 32)
    s = sb.sample(np.random.default_rng(0))
    other = GraphSchedule.from_json({**s.to_json(), "batch": s.batch * 2})
    assert fit_schedule(sb, tiny_graph, other, b) is None
