"""Small graphs, candidates from the search space and their measurements for the cost-model tests."""

from __future__ import annotations

import numpy as np
import pytest

from compiler.graph import Graph
from compiler.schedule import GraphSchedule
from compiler.target import Target
from search_space import Space, build_space
from tests.sim.conftest import zoo_graph


@pytest.fixture(scope="session")
def target() -> Target:
    return Target.default()


@pytest.fixture(scope="session")
def tiny() -> Graph:
    return zoo_graph("tiny_cnn", 8)


@pytest.fixture(scope="session")
def tiny_space(tiny: Graph, target: Target) -> Space:
    return build_space(tiny, target)


@pytest.fixture(scope="session")
def tiny_candidates(tiny_space: Space) -> list[GraphSchedule]:
    """Distinct candidates that pass the space's pre-check (they fit the target)."""
    rng = np.random.default_rng(7)
    out: dict[str, GraphSchedule] = {}
    while len(out) < 160:
        s = tiny_space.sample(rng)
        if tiny_space.precheck(s).ok:
            out.setdefault(s.dumps(), s)
    return list(out.values())


@pytest.fixture(scope="session")
def tiny_measured(tiny: Graph, target: Target, tiny_candidates: list[GraphSchedule]
                  ) -> tuple[list[GraphSchedule], np.ndarray]:
    """Candidates that ran and their throughputs (tests may use the simulator; cost_model may not)."""
    from sim import measure

    ms = measure(tiny, tiny_candidates, target)
    keep = [i for i, m in enumerate(ms) if m.ok]
    return [tiny_candidates[i] for i in keep], np.array([ms[i].throughput_per_s for i in keep])
