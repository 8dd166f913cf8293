"""Frozen values carry no caches: replace() and pickling start clean (issue 8, finding 2)."""

from __future__ import annotations

import dataclasses
import pickle

from compiler.graph import Graph
from compiler.memo import memo_of
from compiler.schedule import GraphSchedule, GroupSpec
from compiler.target import Target
from sim import SimError, SimResult, simulate

from .conftest import resnet_guide_plan


def _bad_split(s: GraphSchedule) -> GraphSchedule:
    """The plan with group_1 claiming split 3 (16 images cannot be cut in 3)."""
    groups = tuple(
        GroupSpec(g.name, g.ops, 3, g.chunks[:3]) if g.name == "group_1" else g for g in s.groups
    )
    return dataclasses.replace(s, groups=groups)


def test_replace_of_a_validated_schedule_is_validated_again(resnet50: Graph, target: Target) -> None:
    plan = resnet_guide_plan(resnet50)
    assert isinstance(simulate(resnet50, plan, target, timeline=False), SimResult)
    bad = _bad_split(plan)
    r = simulate(resnet50, bad, target, timeline=False)
    assert isinstance(r, SimError) and r.status == "invalid", r
    # another structural break made by replace: an order that lost its last step
    short = dataclasses.replace(plan, order=plan.order[:-1])
    r = simulate(resnet50, short, target, timeline=False)
    assert isinstance(r, SimError) and r.status == "invalid", r


def test_values_have_no_cache_fields() -> None:
    for cls in (Graph, GraphSchedule, Target):
        names = {f.name for f in dataclasses.fields(cls)}
        assert not any("cache" in n for n in names), (cls.__name__, names)


def test_pickles_stay_small_and_do_not_grow_with_use(resnet50: Graph, target: Target) -> None:
    plan = resnet_guide_plan(resnet50)
    before_s = len(pickle.dumps(plan))
    before_g = len(pickle.dumps(resnet50))
    simulate(resnet50, plan, target)
    assert len(memo_of(resnet50)) > 0  # the simulation did remember things...
    assert len(pickle.dumps(plan)) == before_s  # ...but not inside the values
    assert len(pickle.dumps(resnet50)) == before_g
    assert before_s < 8 * 1024, before_s
    back = pickle.loads(pickle.dumps(plan))
    assert back == plan
    g2 = pickle.loads(pickle.dumps(resnet50))
    assert g2.workload_key == resnet50.workload_key
    r1 = simulate(resnet50, plan, target, timeline=False)
    r2 = simulate(g2, back, pickle.loads(pickle.dumps(target)), timeline=False)
    assert isinstance(r1, SimResult) and isinstance(r2, SimResult)
    assert r1.latency_cycles == r2.latency_cycles
