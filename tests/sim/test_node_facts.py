"""What a simulation's set-up reads, made once and found again: a compiled walk's memory
plan gives each step's L1 use and streamed inputs without making its ``StepMemory`` values
(``search_space._cplan._LazyPlan.step_facts``), and each group chunk's layout, cores, token
and op-set facts are kept by the group's identity (``sim._plans.NodeFacts``). Both give the
values they stand for, and the results of decoded picks are those of their parsed copies
(planned by the Python walk, set up afresh)."""

from __future__ import annotations

import copy
import gc
import weakref

import numpy as np
import pytest

from compiler.capacity import in_compute_dtype, plan_memory
from compiler.layout import group_layout
from compiler.schedule import GraphSchedule
from compiler.target import Target
from search_space import build_space
from search_space._cplan import _LazyPlan
from sim import simulate
from sim._flows import group_static
from sim._plans import (
    NodeFacts,
    group_token,
    node_facts,
    placement_cores,
    step_facts,
)
from tests.sim.test_properties import graph_of


def _decoded(model: str, n: int, seed: int = 0) -> tuple[object, Target, list[GraphSchedule]]:
    graph, target = graph_of(model), Target.default()
    space = build_space(graph, target, graph.batch)
    rng = np.random.default_rng(seed)
    picks = [space.sample(rng) for _ in range(n)]
    for s in picks:
        space.precheck(s)
    return graph, target, picks


@pytest.mark.parametrize("model", ["tiny_cnn", "bert", "deepfm"])
def test_a_compiled_plans_step_facts_are_its_steps_fields(model: str) -> None:
    graph, target, picks = _decoded(model, 8)
    sized = in_compute_dtype(graph, target)  # type: ignore[arg-type]
    lazy = 0
    for s in picks:
        plan = plan_memory(sized, s, target)
        if plan.issue is not None:
            continue
        facts = step_facts(plan)  # before the steps are made ...
        if isinstance(plan, _LazyPlan):
            lazy += 1
            assert plan.__dict__["_steps"] is None  # ... which it did not make
        steps = plan.steps
        want = ([m.l1_bytes for m in steps], [m.streamed for m in steps])
        assert facts == want
        assert step_facts(plan) == want  # and after
        # the Python walk's plan of a parsed copy: the same facts
        copy = GraphSchedule.from_json(s.to_json())
        assert step_facts(plan_memory(sized, copy, target)) == want
    assert lazy  # the compiled walk's plans were met


@pytest.mark.parametrize("model", ["tiny_cnn", "bert", "deepfm"])
def test_decoded_picks_get_their_parsed_copies_results(model: str) -> None:
    graph, target, picks = _decoded(model, 8, seed=3)
    held = [simulate(graph, s, target) for s in picks]  # type: ignore[arg-type]
    held_again = [simulate(graph, s, target) for s in picks]  # type: ignore[arg-type]
    parsed = [simulate(graph, GraphSchedule.from_json(s.to_json()), target)  # type: ignore[arg-type]
              for s in picks]
    assert held == held_again == parsed


def test_node_facts_are_the_values_they_stand_for() -> None:
    graph, target, picks = _decoded("bert", 4)
    sized = in_compute_dtype(graph, target)  # type: ignore[arg-type]
    half_wb = target.l1.weight_bytes / 2
    facts = node_facts(sized, half_wb)
    assert node_facts(sized, half_wb) is facts
    for s in picks:
        copy = GraphSchedule.from_json(s.to_json())  # other objects, equal values
        for sched in (s, copy):
            for gr in sched.groups:
                for chunk, place in enumerate(gr.chunks):
                    lay = group_layout(gr, chunk, sized.batch)
                    cores = placement_cores(place)
                    want = (group_static(sized, gr.ops, half_wb), lay, cores,
                            group_token(place, lay, cores))
                    assert facts.group(sized, gr, chunk) == want


def test_node_facts_are_found_by_identity_not_by_a_reused_id() -> None:
    graph, target, picks = _decoded("tiny_cnn", 2)
    sized = in_compute_dtype(graph, target)  # type: ignore[arg-type]
    facts = NodeFacts(sized.batch, target.l1.weight_bytes / 2)
    gr = picks[0].groups[0]
    right = facts.group(sized, gr, 0)
    # another object's entry under this group's id (an id reused after the first died)
    facts.kept[(id(gr), 0)] = (picks[1].groups[-1], ("stale",))
    assert facts.group(sized, gr, 0) == right


def test_node_facts_keep_no_graph_alive() -> None:
    """Kept in the graph's memo, the facts must not refer to the graph (the memo lives as
    long as the graph: a reference back would keep both forever)."""
    graph, target, picks = _decoded("tiny_cnn", 2)

    def simulated_on_a_copy() -> weakref.ref[object]:
        alive = copy.deepcopy(graph)
        s = GraphSchedule.from_json(picks[0].to_json())
        assert simulate(alive, s, target).status == "ok"  # type: ignore[arg-type]
        sized = in_compute_dtype(alive, target)  # type: ignore[arg-type]
        assert node_facts(sized, target.l1.weight_bytes / 2).kept  # it kept facts
        return weakref.ref(alive)

    ref = simulated_on_a_copy()
    gc.collect()
    assert ref() is None
