"""A compiled walk's memory plan gives the simulator each step's L1 use and streamed inputs
without making its ``StepMemory`` values (``search_space._cplan._LazyPlan.step_facts``): the
values its steps have, and the results of decoded picks are those of their parsed copies
(planned by the Python walk)."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.capacity import in_compute_dtype, plan_memory
from compiler.schedule import GraphSchedule
from compiler.target import Target
from search_space import build_space
from search_space._cplan import _LazyPlan
from sim import simulate
from sim._plans import step_facts
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
