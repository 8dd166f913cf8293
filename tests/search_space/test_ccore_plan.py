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
