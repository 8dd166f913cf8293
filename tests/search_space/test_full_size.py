"""Full-size acceptance (issue 9) on ResNet-50 b16 and BERT-base s128 b8: `make test-slow`.

bench/space.py reports every figure on all seven models; this keeps the core
claims from regressing: the guide's plan and O0-O3 project exactly, samples round
trip, most samples fit and the pre-check agrees with the simulator on each.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from compiler import guide_plans
from compiler.auto import graph_schedule_level
from compiler.schedule import GraphSchedule
from compiler.target import Target
from search_space import build_space
from sim import SimError, simulate
from tests.sim.conftest import zoo_graph

MODELS = {"resnet50": (16, {}, "resnet50"), "bert_base": (8, {"seq": 128}, "bert_base")}


def _copy(s: GraphSchedule) -> GraphSchedule:
    return GraphSchedule.from_json(json.loads(s.dumps()))


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(MODELS))
def test_full_size_acceptance(name: str) -> None:
    batch, kw, plan = MODELS[name]
    g = zoo_graph(name, batch, **kw)
    target = Target.default()
    space = build_space(g, target)
    seeds = [graph_schedule_level(g, target, k) for k in range(4)] + [guide_plans.guide_plan(plan, g)]
    for s in seeds:
        p = space.project(_copy(s))
        assert p.schedule is not None, p.reason
        assert space.decode(space.encode(_copy(s))).structural_key() == s.structural_key()
    rng = np.random.default_rng(0)
    valid = 0
    for k in range(60):
        s = space.sample(rng, uniform=k % 3 == 0)
        assert space.decode(space.encode(_copy(s))).structural_key() == s.structural_key()
        check = space.precheck(s)
        r = simulate(g, s, target, timeline=False)
        assert check.ok == (not isinstance(r, SimError))
        if isinstance(r, SimError):
            assert (check.kind, check.reason) == (r.status, r.message)
        valid += check.ok
    assert valid >= 48  # 80%
