"""The compiled walk's memory plan: packed by the C walk, its per-step memory built on first read."""

from __future__ import annotations

import pickle
import warnings

import numpy as np
import pytest

from compiler import zoo
from compiler.capacity import MemoryPlan, plan_memory
from compiler.model import Model
from compiler.schedule import GraphSchedule
from compiler.target import Target
from search_space import _ccore, _cplan, build_space

compiled = pytest.mark.skipif(not _ccore.available(), reason="the compiled search core is not built")


@compiled
def test_lazy_plan_is_the_plain_plan() -> None:
    """A decoded schedule's remembered plan equals a fresh Python walk of a copy (steps,
    peaks, issue), hashes and pickles as that plain plan, and is built only when read."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g = Model(zoo.build("resnet50", batch=4, weights="inputs"), name="r").graph
    t = Target.default()
    space = build_space(g, t)
    rng = np.random.default_rng(3)
    lazy = 0
    for _ in range(12):
        s = space.sample(rng)
        graph = space.graph_for(s.batch)
        plan = plan_memory(graph, s, t)
        if isinstance(plan, _cplan._LazyPlan):
            lazy += 1
            assert plan.__dict__["_steps"] is None  # nothing built yet
        fresh = plan_memory(graph, GraphSchedule.from_json(s.to_json()), t)
        assert type(fresh) is MemoryPlan
        assert plan == fresh and fresh == plan and hash(plan) == hash(fresh)
        back = pickle.loads(pickle.dumps(plan))
        assert type(back) is MemoryPlan and back == fresh
        assert plan.steps == fresh.steps and len(plan.steps) == len(fresh.steps)
    assert lazy == 12


def test_step_names_read_the_packed_references() -> None:
    """``step_names``: per step its group's streamable inputs (the group of its (group, chunk)
    reference), None for a transfer (-1 - transfer), the first ``n`` steps only."""
    from search_space._crows import step_names

    names = [("a",), ("b", "c"), ()]
    refs = np.array([1, 0, -1, 0, 0, 3, 2, 1, -3, 0], dtype=np.int32).tobytes()
    assert step_names(refs, names, 5) == [("b", "c"), None, ("a",), (), None]
    assert step_names(refs, names, 3) == [("b", "c"), None, ("a",)]
    assert step_names(refs, names, 0) == []
    for n in (6, -1):  # more steps than packed (the list was shortened), or fewer than none
        with pytest.raises(ValueError):
            step_names(refs, names, n)
    with pytest.raises(ValueError):
        step_names(refs[:-4], names, 5)  # half a pair short
