"""A schedule a search space decoded and pre-checked is taken as valid by the simulator (the
space's decoding is valid by construction: ``compiler._validate.mark_valid``), with the result
it gets when validated; any other schedule is validated on its first run, per graph object and
target value."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.schedule import GraphSchedule
from compiler.target import Target
from search_space import build_space
from sim import simulate
from tests.sim.test_properties import graph_of


def _calls(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    real = GraphSchedule.validate

    def counted(self: GraphSchedule, graph: object, target: object = None) -> None:
        calls.append(1)
        real(self, graph, target)  # type: ignore[arg-type]

    monkeypatch.setattr(GraphSchedule, "validate", counted)
    return calls


@pytest.mark.parametrize("model", ["tiny_cnn", "bert"])
def test_a_prechecked_decoded_schedule_is_not_validated_again(
        model: str, monkeypatch: pytest.MonkeyPatch) -> None:
    graph, target = graph_of(model), Target.default()
    space = build_space(graph, target, graph.batch)
    rng = np.random.default_rng(0)
    decoded = [space.sample(rng) for _ in range(6)]
    parsed = [GraphSchedule.from_json(s.to_json()) for s in decoded]
    calls = _calls(monkeypatch)
    for s in decoded:
        assert space.precheck(s).ok
    assert not calls  # the space's pre-check trusts its decoding (as before)
    held = [simulate(graph, s, target) for s in decoded]
    assert not calls  # ... and so does the simulator now
    assert held == [simulate(graph, s, target) for s in parsed]  # the same results
    assert len(calls) == len(parsed)  # parsed copies: validated, once each
    [simulate(graph, s, target) for s in parsed]
    assert len(calls) == len(parsed)
    other = Target.default().replace(llb={"broadcast": False})
    simulate(graph, decoded[0], other)  # another target: validated
    assert len(calls) == len(parsed) + 1


def test_an_invalid_schedule_is_still_found_invalid() -> None:
    graph, target = graph_of("tiny_cnn"), Target.default()
    space = build_space(graph, target, graph.batch)
    s = space.sample(np.random.default_rng(1))
    bad = s.to_json()
    bad["groups"][0]["chunks"][0]["core_bind"] = [[999]]  # no such core
    r = simulate(graph, GraphSchedule.from_json(bad), target)
    assert r.status == "invalid"
    # a space's mark stands for its own graph only: another graph object is validated
    from compiler import _validate

    assert space.precheck(s).ok
    assert _validate.known_valid(s, graph, target)
    copy = graph_of("tiny_cnn").__class__.__new__(graph.__class__)
    copy.__dict__.update(graph.__dict__)
    assert not _validate.known_valid(s, copy, target)
