"""The automatic levels respect capacities: every level of every zoo model fits the simulator."""

from __future__ import annotations

import pytest

from compiler.auto import graph_schedule_level
from compiler.target import Target
from sim import SimError, simulate
from tests.sim.conftest import zoo_graph

MODELS = {
    "tiny_cnn": {},
    "resnet18": {},
    "resnet50": {},
    "mobilenet_v2": {},
    "bert_base": {"num_layers": 2},
    "deepfm": {},
    "wide_and_deep": {},
}
SLOW = {"resnet34": {}, "resnet101": {}, "bert_large": {"num_layers": 4}, "bert_base": {}}


def _check(name: str, batch: int, options: dict[str, object]) -> None:
    target = Target.default()
    graph = zoo_graph(name, batch, **options)
    throughput = []
    for level in range(4):
        r = simulate(graph, graph_schedule_level(graph, target, level), target, timeline=False)
        assert not isinstance(r, SimError), f"O{level}: {r.message}"
        throughput.append(r.chip_throughput_per_s)
    assert throughput == sorted(throughput), throughput  # O0 <= O1 <= O2 <= O3


@pytest.mark.parametrize("batch", [1, 16])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_levels_fit_and_get_faster(name: str, batch: int) -> None:
    _check(name, batch, MODELS[name])


@pytest.mark.slow
@pytest.mark.parametrize("batch", [1, 16])
@pytest.mark.parametrize("name", sorted(SLOW))
def test_levels_fit_and_get_faster_large(name: str, batch: int) -> None:
    _check(name, batch, SLOW[name])
