"""The work bound (``compiler/work_bound.py``) is a true lower bound and as tight as it claims.

Hypothesis draws a model (small zoo sizes, grouped and depthwise convolutions
included), a target whose vector lanes and matrix instruction overhead move the
grouped convolutions between the engines, and a schedule (random or mutated from
a level's); no schedule that runs is faster than the bound.
"""

from __future__ import annotations

import functools
import itertools
import random
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compiler.auto import graph_schedule_level
from compiler.bound import lower_bound_cycles, roofline_cycles
from compiler.errors import ScheduleError
from compiler.graph import Graph
from compiler.target import Target
from compiler.work_bound import _balance, work_bound
from sim import SimResult, lower_bound, simulate
from tests.sim.conftest import zoo_graph
from tests.sim.random_schedules import mutate, random_schedule

MODELS: dict[str, tuple[str, int, dict[str, Any]]] = {
    "mobilenet_v2": ("mobilenet_v2", 4, {"image_size": 64}),
    "resnet18": ("resnet18", 4, {"image_size": 64}),
    "tiny_cnn": ("tiny_cnn", 8, {}),
    "bert": ("bert_base", 2, {"seq": 32, "num_layers": 1, "hidden": 128, "heads": 2,
                              "intermediate": 512, "vocab": 1000, "max_positions": 64}),
}


@functools.cache
def graph_of(model: str) -> Graph:
    name, batch, kw = MODELS[model]
    return zoo_graph(name, batch, **kw)


def target_of(lanes: int, overhead: int) -> Target:
    return Target.default().replace(vector={"lanes": lanes},
                                    matrix={"instr_overhead_cycles": overhead})


@settings(max_examples=16, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(model=st.sampled_from(sorted(MODELS)), lanes=st.sampled_from([4, 16, 64, 512]),
       overhead=st.sampled_from([0, 32, 96, 300]), rng=st.randoms(use_true_random=False))
def test_no_schedule_beats_the_work_bound(model: str, lanes: int, overhead: int,
                                          rng: random.Random) -> None:
    g, t = graph_of(model), target_of(lanes, overhead)
    cores = t.chip.cores_per_cluster
    s = graph_schedule_level(g, t, rng.randrange(4))
    for _ in range(6):
        try:
            s = random_schedule(g, rng, cores) if rng.random() < 0.3 else \
                mutate(g, s, rng, cores)
        except ScheduleError:
            continue
        r = simulate(g, s, t, timeline=False)
        assert r.status != "invariant", r
        if isinstance(r, SimResult):
            launch = t.host.launch_overhead_us * t.clock_hz / 1e6
            assert r.latency_cycles >= (work_bound(g, g.batch, t).cycles + launch) * (1 - 1e-9)


def test_the_bound_is_the_larger_of_roofline_and_work() -> None:
    g = graph_of("mobilenet_v2")
    for lanes, overhead in itertools.product([4, 64, 512], [0, 96]):
        t = target_of(lanes, overhead)
        launch = t.host.launch_overhead_us * t.clock_hz / 1e6
        wb = work_bound(g, g.batch, t)
        assert lower_bound_cycles(g, g.batch, t) == pytest.approx(
            max(roofline_cycles(g, g.batch, t), wb.cycles) + launch)
        assert lower_bound(g, g.batch, t) >= t.cycles_to_us(roofline_cycles(g, g.batch, t) + launch)


def test_depthwise_convolutions_count_on_the_engine_the_simulator_must_use() -> None:
    """Depthwise 3x3 is dearer on the array for every piece at 64 lanes: whole on the
    vector unit (MobileNetV2's bound roughly doubles); with 4 lanes the array may take it."""
    from compiler.opshape import OpKind, op_shapes

    g = graph_of("mobilenet_v2")
    wide = work_bound(g, g.batch, target_of(64, 96))
    macs = sum(d.amount * g.batch * d.groups * d.n * d.k for d in op_shapes(g)
               if d.kind == OpKind.MATRIX and d.groups > 1)
    assert wide.grouped_forced == pytest.approx(macs / 64) and wide.grouped_vector == 0
    assert wide.vector_side >= wide.grouped_forced
    narrow = work_bound(g, g.batch, target_of(4, 0))
    assert narrow.grouped_matrix > 0  # either engine: the balanced split decides


@settings(max_examples=60, deadline=None, database=None)
@given(base_m=st.floats(0, 100), base_v=st.floats(0, 100),
       items=st.lists(st.tuples(st.floats(0.1, 50), st.floats(0.1, 50)), max_size=3))
def test_balance_is_the_best_fractional_split(base_m: float, base_v: float,
                                              items: list[tuple[float, float]]) -> None:
    """No split on a grid beats it, and it is reached by some split (to the grid's step)."""
    value, on_m = _balance(base_m, base_v, items)
    grid = [i / 20 for i in range(21)]
    best = min(max(base_m + sum(x * a for x, (a, _) in zip(xs, items, strict=True)),
                   base_v + sum((1 - x) * b for x, (_, b) in zip(xs, items, strict=True)))
               for xs in itertools.product(grid, repeat=len(items)))
    assert value <= best + 1e-9
    step = max([a + b for a, b in items], default=0.0) / 20
    assert value >= best - step * len(items) - 1e-9
    assert 0 <= on_m <= sum(a for a, _ in items) + 1e-9
