"""Small graphs, random fitting candidates and their measurements for the cost-model tests."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pytest

from compiler.auto import fit_to_target
from compiler.derive import group_io, make_schedule
from compiler.errors import ScheduleError
from compiler.graph import Graph
from compiler.schedule import GraphSchedule, GroupSpec, Placement
from compiler.target import Target
from tests.sim.conftest import zoo_graph


def cut_points(graph: Graph) -> list[int]:
    """Op indices after which one tensor is live (where groups may end)."""
    last: dict[str, int] = {}
    for op in graph.ops:
        for t in op.inputs:
            last[t] = op.index
    live = 0
    born = {op.output: op.index for op in graph.ops}
    events: dict[int, int] = {}
    for t, b in [*born.items(), *((t, -1) for t in graph.inputs)]:
        lu = len(graph.ops) if t in graph.outputs else last.get(t, b)
        if lu > b:
            events[b] = events.get(b, 0) + 1
            events[lu] = events.get(lu, 0) - 1
    live = events.get(-1, 0)
    out = []
    for op in graph.ops[:-1]:
        live += events.get(op.index, 0)
        if live == 1:
            out.append(op.index)
    return out


def random_schedule(graph: Graph, target: Target, rng: np.random.Generator,
                    scopes: Sequence[str] = ("DDR", "LLB", "L1")) -> GraphSchedule:
    """Random groups at cut points, splits, scopes and even core bindings, demoted until it fits."""
    cuts = cut_points(graph)
    n = target.chip.cores_per_cluster
    while True:
        ends = [c for c in cuts if rng.random() < 0.5] + [len(graph.ops) - 1]
        groups = []
        first = 0
        for i, last in enumerate(ends):
            ops = tuple(range(first, last + 1))
            first = last + 1
            out = group_io(graph, ops).outputs[0]
            ok = all(graph.ops[j].batch_separable for j in ops) and graph.tensors[out].batched
            divs = [d for d in range(1, graph.batch + 1) if graph.batch % d == 0] if ok else [1]
            split = int(rng.choice(divs))
            cores = int(rng.choice([c for c in (1, 2, 4, 8) if c <= n]))
            parts_opts = [p for p in range(1, cores + 1)
                          if cores % p == 0 and (graph.batch // split) % p == 0]
            parts = int(rng.choice(parts_opts))
            rot = int(rng.integers(n))
            ids = [(rot + c) % n for c in range(cores)]
            per = cores // parts
            bind = tuple(tuple(ids[p * per:(p + 1) * per]) for p in range(parts))
            allowed = [s for s in scopes if s in graph.ops[last].allowed_scopes] or ["DDR"]
            chunks = tuple(Placement(str(rng.choice(allowed)), bind) for _ in range(split))
            groups.append(GroupSpec(f"group_{i}", ops, split, chunks))
        try:
            s = make_schedule(graph, groups, order=str(rng.choice(["depth", "breadth"])))
            return fit_to_target(graph, s, target)
        except ScheduleError:
            continue


@pytest.fixture(scope="session")
def target() -> Target:
    return Target.default()


@pytest.fixture(scope="session")
def tiny() -> Graph:
    return zoo_graph("tiny_cnn", 8)


@pytest.fixture(scope="session")
def tiny_candidates(tiny: Graph, target: Target) -> list[GraphSchedule]:
    rng = np.random.default_rng(7)
    return [random_schedule(tiny, target, rng) for _ in range(160)]


@pytest.fixture(scope="session")
def tiny_measured(tiny: Graph, target: Target, tiny_candidates: list[GraphSchedule]
                  ) -> tuple[list[GraphSchedule], np.ndarray]:
    """Candidates that ran and their throughputs (tests may use the simulator; cost_model may not)."""
    from sim import measure

    ms = measure(tiny, tiny_candidates, target)
    keep = [i for i, m in enumerate(ms) if m.ok]
    return [tiny_candidates[i] for i in keep], np.array([ms[i].throughput_per_s for i in keep])
