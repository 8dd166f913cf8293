"""A part's compute cost is its ops' terms added in op order (``sim._model._cost``): terms
found again (kept by op, samples, cores, step cores and re-read placement, as a tune's new
op sets mostly reuse ops met before) give the same floats, bit for bit, as terms made
afresh, whatever op sets were costed before and in whatever order."""

from __future__ import annotations

import random

import pytest

from compiler.opshape import op_shapes
from compiler.target import Target
from sim._model import _cost
from tests.sim.test_properties import graph_of
from tests.sim.test_step_plans import TARGETS


@pytest.mark.parametrize("model", ["tiny_cnn", "resnet18", "bert", "deepfm"])
@pytest.mark.parametrize("tname", ["default", "small_l1", "no_broadcast"])
def test_kept_op_terms_give_the_fresh_cost(model: str, tname: str) -> None:
    graph, target = graph_of(model), TARGETS[tname]
    shapes = op_shapes(graph)
    n = len(graph.ops)
    rng = random.Random(f"{model}-{tname}")
    kept: dict = {}  # type: ignore[type-arg]
    for _ in range(150):
        lo = rng.randrange(n)
        ops = tuple(range(lo, min(n, lo + rng.randint(1, 12))))
        s = rng.choice((1, 2, 4, 8))
        k = rng.choice((1, 2, 3, 4, 8))
        step_cores = k * rng.choice((1, 2))
        remote = frozenset(i for i in ops if rng.random() < 0.3)
        fresh = _cost(shapes, ops, s, k, target, step_cores, remote)
        got = _cost(shapes, ops, s, k, target, step_cores, remote, kept)
        again = _cost(shapes, ops, s, k, target, step_cores, remote, kept)
        assert repr(got) == repr(fresh) == repr(again)  # bit for bit (repr: floats exact)
    assert kept  # terms were kept and found


def test_terms_differ_by_each_part_of_their_key() -> None:
    """Samples, cores, step cores and the re-read placement each change some op's terms:
    a key without any of them would give a wrong cost."""
    # a small weight buffer (re-reads) and no LLB broadcast (step cores share the weights)
    graph, target = graph_of("bert"), Target.default().replace(
        l1={"data_bytes": 128 * 1024, "weight_bytes": 32 * 1024}, llb={"broadcast": False})
    shapes = op_shapes(graph)
    ops = tuple(range(len(graph.ops)))
    base = _cost(shapes, ops, 2, 2, target, 2, frozenset())
    assert _cost(shapes, ops, 4, 2, target, 2, frozenset()) != base
    assert _cost(shapes, ops, 2, 4, target, 4, frozenset()) != base
    assert _cost(shapes, ops, 2, 2, target, 8, frozenset()) != base
    assert _cost(shapes, ops, 2, 2, target, 2, frozenset(ops)) != base
